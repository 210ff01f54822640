//! Settings files: every server binary reads its `--config FILE` the same way, with errors of
//! one line that name the file, the line and what is wrong (an unknown key, a value of the
//! wrong type), and layers its settings the same way ([`layer_settings!`](crate::layer_settings)).

use std::path::Path;

use serde::de::DeserializeOwned;

/// The 1-based line of `text` where a TOML error is, when the parser knows.
pub fn error_line(text: &str, e: &toml::de::Error) -> Option<usize> {
    e.span()
        .map(|span| text.get(..span.start).unwrap_or(text).matches('\n').count() + 1)
}

/// A TOML error of `text` on one line: `line N: message`, or the message alone when the
/// line is not known.
pub fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let message = e.message().trim().replace('\n', " ");
    match error_line(text, e) {
        Some(line) => format!("line {line}: {message}"),
        None => message,
    }
}

/// Parses a settings file's text; the error is [`toml_error`]'s.
pub fn from_toml<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    toml::from_str(text).map_err(|e| toml_error(text, &e))
}

/// Reads and parses the settings file `path`; the error names the file.
pub fn from_file<T: DeserializeOwned>(path: &Path) -> Result<T, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
    from_toml(&text).map_err(|e| format!("config file {}: {e}", path.display()))
}

/// Builds `$ty` (a settings struct of `Option`s) taking each listed field from `$over` where
/// set, else from `$base`. The field list must name every field: the struct literal it expands
/// to does not compile otherwise, so a new setting cannot be left out of the layering.
#[macro_export]
macro_rules! layer_settings {
    ($ty:ident, $over:ident, $base:ident, $($field:ident),* $(,)?) => {
        $ty { $($field: $over.$field.or($base.$field)),* }
    };
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[derive(Debug, Default, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Sample {
        a: Option<u32>,
        b: Option<String>,
    }

    #[test]
    fn errors_are_one_line_with_the_line_number() {
        let e = from_toml::<Sample>("a = 1\nc = 2\n").unwrap_err();
        assert!(e.starts_with("line 2: unknown field `c`"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        let e = from_toml::<Sample>("a = \"x\"\n").unwrap_err();
        assert!(e.starts_with("line 1: "), "{e}");
        assert_eq!(
            from_toml::<Sample>("b = \"y\"\n").unwrap(),
            Sample {
                a: None,
                b: Some("y".into())
            }
        );
    }

    #[test]
    fn a_file_that_cannot_be_read_or_parsed_is_named() {
        let dir = std::env::temp_dir().join(format!("observe-settings-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("missing.toml");
        let e = from_file::<Sample>(&missing).unwrap_err();
        assert!(
            e.contains("cannot read config file") && e.contains("missing.toml"),
            "{e}"
        );
        let bad = dir.join("bad.toml");
        std::fs::write(&bad, "a = 1\nzz = 3\n").unwrap();
        let e = from_file::<Sample>(&bad).unwrap_err();
        assert!(e.contains("bad.toml: line 2:"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_upper_layer_wins_where_set() {
        let over = Sample {
            a: Some(1),
            b: None,
        };
        let base = Sample {
            a: Some(2),
            b: Some("base".into()),
        };
        let layered = layer_settings!(Sample, over, base, a, b);
        assert_eq!(
            layered,
            Sample {
                a: Some(1),
                b: Some("base".into())
            }
        );
    }
}
