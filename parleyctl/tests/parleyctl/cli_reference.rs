//! The generated command-line reference of `parleyctl`: the book's page
//! (`docs/src/reference/cli/parleyctl.md`) and the man page (`docs/man/parleyctl.1`) are what its
//! clap definition says now (`PARLEY_BLESS=1` regenerates them).

use clap::CommandFactory;

#[test]
fn the_generated_cli_reference_is_fresh() {
    testkit::docs::check_cli_reference(
        parleyctl::Cli::command(),
        &[
            "## `parleyctl offers`",
            "## `parleyctl completions`",
            "### `parleyctl job status`",
            "`PARLEY_COORDINATOR`",
        ],
        "cargo test -p parleyctl --test parleyctl cli_reference::",
    );
}
