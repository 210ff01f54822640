//! [`SpecError`]: a spec that cannot be used, naming the field. Below the spec's parser and
//! the schedules it reads, which both refuse with it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A spec that cannot be used: which field, why, and (for TOML) on which line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub struct SpecError {
    /// The field, as a dotted path (`resources.gpus`), or `spec` for the document as a whole.
    pub field: String,
    /// What is wrong with it, in lowercase words.
    pub message: String,
    /// The 1-based line in the source, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{} (line {line}): {}", self.field, self.message),
            None => write!(f, "{}: {}", self.field, self.message),
        }
    }
}

impl SpecError {
    pub(crate) fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
            line: None,
        }
    }
}
