//! Fixture of `scripts/check-string-errors.py --self-test` (not compiled): three findings,
//! `plain`, `nested` and `Flag`'s `FromStr` error; the rest are left out.
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

/// Found: `"x".parse::<Flag>()` returns a String error.
pub struct Flag;

impl std::str::FromStr for Flag {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Err(s.to_string())
    }
}
