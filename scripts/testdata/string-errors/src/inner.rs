/// Found: a String error at any depth of the return type.
pub async fn nested() -> Option<Vec<Result<(u8, u8), String>>> {
    None
}

// pub fn in_a_comment() -> Result<(), String>
