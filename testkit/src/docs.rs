//! Generated documentation, kept in the repository and checked by tests: [`fresh_or_bless`]
//! fails a test when a committed file differs from what the code generates now (and rewrites it
//! with `PARLEY_BLESS=1`); [`cli_markdown`] and [`man_page`] write a binary's command-line
//! reference from its `clap::Command`.
//!
//! The Markdown is written here rather than with `clap-markdown`, so that the pages fit the
//! book: one table of options per command (flag, environment variable, default, help), the
//! long help as prose, and subcommands as sections.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The environment variable that rewrites stale files instead of failing.
pub const BLESS: &str = "PARLEY_BLESS";

/// Checks that `path` holds `fresh`; with `PARLEY_BLESS=1`, writes it instead. `regenerate` is
/// the command that does that (named in the failure message).
///
/// # Panics
///
/// When the file is stale or missing (and not blessing), or cannot be written.
pub fn fresh_or_bless(path: &Path, fresh: &[u8], regenerate: &str) {
    if std::env::var_os(BLESS).is_some_and(|v| v == "1") {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        }
        std::fs::write(path, fresh)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        return;
    }
    let committed = std::fs::read(path).unwrap_or_default();
    assert!(
        committed == fresh,
        "{} is stale (or missing): the code it is generated from changed. Regenerate it with \
         `{BLESS}=1 {regenerate}` and commit it.",
        path.display()
    );
}

/// The repository's root directory (this crate is one of its members).
pub fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Checks a binary's generated command reference: `docs/src/reference/cli/NAME.md` (from
/// [`cli_markdown`]) and `docs/man/NAME.1` (from [`man_page`]), NAME being the command's name,
/// with [`fresh_or_bless`]; `expected` are strings the Markdown must contain, so that the check
/// is not vacuous.
///
/// # Panics
///
/// When the definition is inconsistent (clap's `debug_assert`), a string is missing or a file
/// is stale.
pub fn check_cli_reference(command: clap::Command, expected: &[&str], regenerate: &str) {
    command.clone().debug_assert();
    let name = command.get_name().to_owned();
    let markdown = cli_markdown(&command);
    for text in expected {
        assert!(markdown.contains(text), "no {text} in\n{markdown}");
    }
    fresh_or_bless(
        &repository().join(format!("docs/src/reference/cli/{name}.md")),
        markdown.as_bytes(),
        regenerate,
    );
    let man = man_page(command);
    assert!(String::from_utf8_lossy(&man).contains(&format!(".TH {name}")));
    fresh_or_bless(
        &repository().join(format!("docs/man/{name}.1")),
        &man,
        regenerate,
    );
}

/// The man page (roff) of `command`, subcommands listed.
pub fn man_page(command: clap::Command) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = clap_mangen::Man::new(command).render(&mut out);
    out
}

/// The Markdown reference of `command`: its usage, prose, options and, as sections, each
/// subcommand's (help excluded; global options only in the root's table).
pub fn cli_markdown(command: &clap::Command) -> String {
    let mut command = command.clone();
    command.build();
    let mut out = String::new();
    write_command(&mut out, &command, command.get_name(), 1);
    out
}

fn write_command(out: &mut String, command: &clap::Command, path: &str, level: usize) {
    let heading = "#".repeat(level.min(6));
    let _ = writeln!(out, "{heading} `{path}`\n");
    let about = command
        .get_long_about()
        .or(command.get_about())
        .map(|s| s.to_string());
    if let Some(about) = about {
        let _ = writeln!(out, "{}\n", about.trim());
    }
    let usage = command.clone().render_usage().to_string();
    let usage = usage.trim().trim_start_matches("Usage:").trim();
    let _ = writeln!(out, "```text\n{usage}\n```\n");
    // A subcommand lists its own arguments: the global ones are in the root's table, and
    // every command has `--help`.
    let args: Vec<&clap::Arg> = command
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter(|a| level == 1 || !(a.is_global_set() || a.get_id() == "help"))
        .collect();
    if !args.is_empty() {
        out.push_str("| argument | environment | default | what |\n|---|---|---|---|\n");
        for arg in args {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                cell(&name_of(arg)),
                arg.get_env()
                    .map(|e| format!("`{}`", e.to_string_lossy()))
                    .unwrap_or_default(),
                default_of(arg),
                cell(&help_of(arg)),
            );
        }
        out.push('\n');
    }
    if let Some(after) = command.get_after_long_help().or(command.get_after_help()) {
        let _ = writeln!(out, "{}\n", after.to_string().trim());
    }
    for sub in command.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        write_command(out, sub, &format!("{path} {}", sub.get_name()), level + 1);
    }
}

/// `--flag <VALUE>`, `-f, --flag`, or `<NAME>` for a positional argument.
fn name_of(arg: &clap::Arg) -> String {
    let values = arg
        .get_value_names()
        .map(|names| {
            names
                .iter()
                .map(|n| format!("<{n}>"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| format!("<{}>", arg.get_id().as_str().to_uppercase()));
    let takes_value = arg.get_num_args().is_some_and(|n| n.takes_values());
    let mut name = match (arg.get_short(), arg.get_long()) {
        (Some(s), Some(l)) => format!("-{s}, --{l}"),
        (None, Some(l)) => format!("--{l}"),
        (Some(s), None) => format!("-{s}"),
        (None, None) => return format!("`{values}`"),
    };
    if takes_value {
        name.push(' ');
        name.push_str(&values);
    }
    format!("`{name}`")
}

fn default_of(arg: &clap::Arg) -> String {
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    if defaults.is_empty() || !arg.get_num_args().is_some_and(|n| n.takes_values()) {
        String::new()
    } else {
        format!("`{}`", defaults.join(","))
    }
}

fn help_of(arg: &clap::Arg) -> String {
    let mut help = arg
        .get_long_help()
        .or(arg.get_help())
        .map(|s| s.to_string())
        .unwrap_or_default();
    let values: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| format!("`{}`", v.get_name()))
        .collect();
    if !values.is_empty() && arg.get_num_args().is_some_and(|n| n.takes_values()) {
        if !help.is_empty() && !help.ends_with('.') {
            help.push('.');
        }
        let _ = write!(help, " One of: {}.", values.join(", "));
    }
    help
}

/// A table cell: one line, pipes escaped.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}
