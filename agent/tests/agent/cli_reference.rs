//! The generated command-line reference of `agent`: the book's page
//! (`docs/src/reference/cli/agent.md`) and the man page (`docs/man/agent.1`) are what its
//! clap definition says now (`PARLEY_BLESS=1` regenerates them).

use clap::CommandFactory;

#[test]
fn the_generated_cli_reference_is_fresh() {
    testkit::docs::check_cli_reference(
        agent::cli::Cli::command(),
        &[
            "# `agent`",
            "`--simulate <N>`",
            "`--config <FILE>`",
            "`PARLEY_COORDINATOR`",
        ],
        "cargo test -p parley-agent --test agent cli_reference::",
    );
}
