//! Settings files: every server binary reads its `--config FILE` the same way, with errors of
//! one line that name the file, the line and what is wrong (an unknown key, a value of the
//! wrong type), and layers its settings the same way ([`layer_settings!`](crate::layer_settings)).

use std::path::{Path, PathBuf};

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

/// Why a settings file was refused; each message is one line naming the file (when read from
/// one) and the line.
#[derive(Debug, thiserror::Error)]
pub enum SettingsFileError {
    /// The file could not be read.
    #[error("cannot read config file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The text is not TOML, or not these settings (an unknown key, a value of the wrong
    /// type): [`toml_error`]'s message.
    #[error("{message}")]
    Parse {
        /// The 1-based line, when the parser knows it.
        line: Option<usize>,
        /// `line N: what is wrong`, or what is wrong alone.
        message: String,
    },
    /// The file's text was refused.
    #[error("config file {}: {source}", path.display())]
    InFile {
        /// The file.
        path: PathBuf,
        /// What is wrong in it.
        #[source]
        source: Box<SettingsFileError>,
    },
}

/// Parses a settings file's text; the error's message is [`toml_error`]'s.
pub fn from_toml<T: DeserializeOwned>(text: &str) -> Result<T, SettingsFileError> {
    toml::from_str(text).map_err(|e| SettingsFileError::Parse {
        line: error_line(text, &e),
        message: toml_error(text, &e),
    })
}

/// Reads and parses the settings file `path`; the error names the file.
pub fn from_file<T: DeserializeOwned>(path: &Path) -> Result<T, SettingsFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| SettingsFileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    from_toml(&text).map_err(|e| SettingsFileError::InFile {
        path: path.to_path_buf(),
        source: Box::new(e),
    })
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
        let e = from_toml::<Sample>("a = 1\nc = 2\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("line 2: unknown field `c`"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        let e = from_toml::<Sample>("a = \"x\"\n").unwrap_err().to_string();
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
        let e = from_file::<Sample>(&missing).unwrap_err().to_string();
        assert!(
            e.contains("cannot read config file") && e.contains("missing.toml"),
            "{e}"
        );
        let bad = dir.join("bad.toml");
        std::fs::write(&bad, "a = 1\nzz = 3\n").unwrap();
        let e = from_file::<Sample>(&bad).unwrap_err().to_string();
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
