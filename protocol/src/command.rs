//! How a task (or a command health check) runs: [`CommandSpec`], a shell line or an argument
//! vector, and why one cannot run ([`CommandError`]). Its own file because both [`crate::task`] and [`crate::health`] use it.

use serde::{Deserialize, Serialize};

/// How to run a task: a shell line (`sh -c`) or an argument vector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum CommandSpec {
    /// Run through `sh -c`.
    Shell(String),
    /// Run directly; the first element is the program.
    Argv(Vec<String>),
}

/// Why a [`CommandSpec`] cannot be run; the message names the field (`command.shell` or
/// `command.argv`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// `command.shell` is empty or blank.
    #[error("command.shell is empty")]
    EmptyShell,
    /// `command.argv` is empty, or its program is.
    #[error("command.argv is empty; give at least the program")]
    EmptyArgv,
    /// `command.shell` holds a NUL byte.
    #[error("command.shell contains a NUL byte")]
    NulInShell,
    /// An element of `command.argv` holds a NUL byte.
    #[error("command.argv contains a NUL byte")]
    NulInArgv,
}

impl CommandError {
    /// The field it names: `command.shell` or `command.argv`.
    pub fn field(&self) -> &'static str {
        match self {
            CommandError::EmptyShell | CommandError::NulInShell => "command.shell",
            CommandError::EmptyArgv | CommandError::NulInArgv => "command.argv",
        }
    }
}

impl CommandSpec {
    /// Checks the command is runnable in form: a non-empty shell line or argv, no NUL bytes.
    pub fn validate(&self) -> Result<(), CommandError> {
        match self {
            CommandSpec::Shell(s) if s.trim().is_empty() => Err(CommandError::EmptyShell),
            CommandSpec::Argv(v) if v.is_empty() || v[0].is_empty() => Err(CommandError::EmptyArgv),
            CommandSpec::Shell(s) if s.contains('\0') => Err(CommandError::NulInShell),
            CommandSpec::Argv(v) if v.iter().any(|a| a.contains('\0')) => {
                Err(CommandError::NulInArgv)
            }
            _ => Ok(()),
        }
    }
}
