//! The generated command-line reference of `parleyctl`: the book's page
//! (`docs/src/reference/cli/parleyctl.md`) and the man page (`docs/man/parleyctl.1`) are what
//! its clap definition says now (`PARLEY_BLESS=1` regenerates them).

use std::path::PathBuf;

use clap::CommandFactory;
use testkit::docs::{cli_markdown, fresh_or_bless, man_page};

const REGENERATE: &str = "cargo test -p parleyctl --test cli_reference";

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn the_generated_cli_reference_is_fresh() {
    let command = parleyctl::Cli::command();
    let markdown = cli_markdown(&command);
    // Not vacuous: every subcommand and a global flag with its environment variable.
    for expected in [
        "## `parleyctl offers`",
        "## `parleyctl completions`",
        "### `parleyctl job status`",
        "`PARLEY_COORDINATOR`",
    ] {
        assert!(markdown.contains(expected), "no {expected} in\n{markdown}");
    }
    fresh_or_bless(
        &repository().join("docs/src/reference/cli/parleyctl.md"),
        markdown.as_bytes(),
        REGENERATE,
    );
    let man = man_page(command);
    assert!(String::from_utf8_lossy(&man).contains(".TH parleyctl"));
    fresh_or_bless(&repository().join("docs/man/parleyctl.1"), &man, REGENERATE);
}
