//! The library half of the `coordinator` binary (package `parley`): its command line and
//! subcommands ([`cli::Args`], [`cli::Command`]), the credentials-file helpers ([`secrets`]),
//! `tls init`, a cluster's CA, certificates and credentials in one command ([`tls_init`]),
//! `backup` and `restore` of the registry ([`backup`]), and the atomic file writes of the last
//! two ([`files`]), kept in a library so that the binary's command reference and man page are
//! generated from the same definition (`tests/cli_reference.rs`).

pub mod backup;
pub mod cli;
pub mod files;
pub mod secrets;
pub mod tls_init;
