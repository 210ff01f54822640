//! The generated command-line reference of `parley-jobs`: the book's page
//! (`docs/src/reference/cli/parley-jobs.md`) and the man page (`docs/man/parley-jobs.1`) are what
//! its clap definition says now (`PARLEY_BLESS=1` regenerates them).

use clap::CommandFactory;

#[test]
fn the_generated_cli_reference_is_fresh() {
    testkit::docs::check_cli_reference(
        parley_jobs::cli::Args::command(),
        &[
            "# `parley-jobs`",
            "`--queue-order <fifo\\|fair>`",
            "`--config <FILE>`",
            "`PARLEY_JOBS_API_TOKEN`",
        ],
        "cargo test -p parley-jobs --test jobs cli_reference::",
    );
}
