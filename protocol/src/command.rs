//! How a task (or a command health check) runs: [`CommandSpec`], a shell line or an argument
//! vector. Its own file because both [`crate::task`] and [`crate::health`] use it.

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

impl CommandSpec {
    /// Checks the command is runnable in form: a non-empty shell line or argv, no NUL bytes.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            CommandSpec::Shell(s) if s.trim().is_empty() => Err("command.shell is empty".into()),
            CommandSpec::Argv(v) if v.is_empty() || v[0].is_empty() => {
                Err("command.argv is empty; give at least the program".into())
            }
            CommandSpec::Shell(s) if s.contains('\0') => {
                Err("command.shell contains a NUL byte".into())
            }
            CommandSpec::Argv(v) if v.iter().any(|a| a.contains('\0')) => {
                Err("command.argv contains a NUL byte".into())
            }
            _ => Ok(()),
        }
    }
}
