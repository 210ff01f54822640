//! The `tracing` subscriber every Parley binary installs: its filter from `RUST_LOG` (default
//! `info`), written as text (the default) or one JSON object a line, to standard error (the
//! agent, the jobs service) or standard output (the coordinator, as it always has), with ANSI
//! colours only when that stream is a terminal.

use std::fmt;
use std::io::IsTerminal;
use std::str::FromStr;

use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines (`tracing-subscriber`'s default format).
    #[default]
    Text,
    /// One JSON object a line: `timestamp`, `level`, `target`, `fields` (with `message`)
    /// and the current spans, for log collectors.
    Json,
}

impl LogFormat {
    /// Every format, in the order help texts list them.
    pub const ALL: [LogFormat; 2] = [LogFormat::Text, LogFormat::Json];

    /// Its name on the command line and in settings files.
    pub fn as_str(self) -> &'static str {
        match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        }
    }
}

impl fmt::Display for LogFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `--log-format` value that is not a log format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not a log format; one of text, json")]
pub struct LogFormatError {
    /// The value given.
    pub value: String,
}

impl FromStr for LogFormat {
    type Err = LogFormatError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|f| f.as_str() == s)
            .ok_or_else(|| LogFormatError {
                value: s.to_string(),
            })
    }
}

/// `--log-format`, for a binary whose flags are clap's (`#[command(flatten)]`); the
/// coordinator has it among its settings instead (file key, flag and variable alike).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::Args)]
pub struct LogArgs {
    /// Log lines on standard error as text or json (one object a line).
    #[arg(
        long,
        value_name = "text|json",
        default_value = "text",
        env = "PARLEY_LOG_FORMAT"
    )]
    pub log_format: LogFormat,
}

/// Where log lines go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// Installs the process' subscriber: `RUST_LOG`'s filter (default `info`), to `stream`, in
/// `format`; colours only in text to a terminal. Does nothing if one is installed already
/// (tests, `--dev`).
pub fn init(format: LogFormat, stream: Stream) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let terminal = match stream {
        Stream::Stdout => std::io::stdout().is_terminal(),
        Stream::Stderr => std::io::stderr().is_terminal(),
    };
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let _ = match (stream, format) {
        (Stream::Stdout, LogFormat::Text) => builder
            .with_writer(std::io::stdout)
            .with_ansi(terminal)
            .try_init(),
        (Stream::Stderr, LogFormat::Text) => builder
            .with_writer(std::io::stderr)
            .with_ansi(terminal)
            .try_init(),
        (Stream::Stdout, LogFormat::Json) => builder
            .json()
            .with_writer(std::io::stdout)
            .with_ansi(false)
            .try_init(),
        (Stream::Stderr, LogFormat::Json) => builder
            .json()
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .try_init(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_others_are_refused_by_name() {
        for f in LogFormat::ALL {
            assert_eq!(f.as_str().parse::<LogFormat>(), Ok(f));
        }
        let err = "yaml".parse::<LogFormat>().unwrap_err().to_string();
        assert!(
            err.contains("\"yaml\"") && err.contains("text, json"),
            "{err}"
        );
    }
}
