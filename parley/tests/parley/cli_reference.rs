//! The generated command-line reference of `coordinator`: the book's page
//! (`docs/src/reference/cli/coordinator.md`) and the man page (`docs/man/coordinator.1`) are what its
//! clap definition says now (`PARLEY_BLESS=1` regenerates them).

use clap::CommandFactory;

#[test]
fn the_generated_cli_reference_is_fresh() {
    testkit::docs::check_cli_reference(
        parley::cli::Args::command(),
        &[
            "# `coordinator`",
            "## `coordinator new-token`",
            "## `coordinator tls init`",
            "`--etcd <URL[,URL...]>`",
        ],
        "cargo test -p parley --test parley cli_reference::",
    );
}
