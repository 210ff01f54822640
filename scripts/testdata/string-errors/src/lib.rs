//! Fixture of `scripts/check-string-errors.py --self-test` (not compiled): two findings,
//! `plain` and `nested`; the rest are left out.
pub mod inner;

/// Found.
pub fn plain(text: &str) -> Result<u32, String> {
    text.parse().map_err(|_| String::new())
}

/// Not found: crate-visible only.
pub(crate) fn private(text: &str) -> Result<u32, String> {
    plain(text)
}

/// Not found: the String error is a parameter's, not the return type's.
pub fn takes(parse: impl Fn(&str) -> Result<u32, String>) -> u32 {
    parse("1").unwrap_or(0)
}

#[cfg(test)]
pub fn only_in_tests() -> Result<(), String> {
    Ok(())
}
