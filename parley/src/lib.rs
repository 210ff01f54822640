//! The library half of the `coordinator` binary (package `parley`): its command line
//! ([`cli::Args`]) and the credentials-file helpers ([`secrets`]), kept in a library so that
//! the binary's command reference and man page are generated from the same definition
//! (`tests/cli_reference.rs`).

pub mod cli;
pub mod secrets;
