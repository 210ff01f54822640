//! The `coordinator` binary's command line ([`Args`], clap derive; the settings themselves are
//! [`coordinator::Overrides`]) and its helper subcommands ([`Command`], run by [`run`]), here in
//! the library so that its reference
//! (`docs/src/reference/cli/coordinator.md`, `docs/man/coordinator.1`) is generated from it.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;
use coordinator::Overrides;

pub use crate::backup::RegistryFlags;
use crate::backup::{self, BackupArgs, RestoreArgs};
use crate::secrets;
use crate::tls_init::{self, TlsCommand};

/// Parley coordinator: offers cluster resources to frameworks with hierarchical DRF.
#[derive(Debug, Parser)]
#[command(
    name = "coordinator",
    version,
    after_help = "Exit codes: 0 after a clean stop (SIGINT or SIGTERM); 2 a bad flag, setting or config file (one line naming it); 1 any other error (a port in use, a registry already open by another coordinator); 3 a leader of a highly available cluster lost its leadership (run it under a supervisor that restarts it)."
)]
pub struct Args {
    /// Address to listen on (default 127.0.0.1:5050).
    #[arg(long, env = "PARLEY_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// TOML file with the settings below and the initial role tree (`[roles]` path = weight).
    #[arg(long, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    /// The settings, each overriding the file's.
    #[command(flatten)]
    pub settings: Overrides,
    /// Also run local agents in this process (a single-node cluster for trying Parley out).
    #[arg(long)]
    pub dev: bool,
    /// With --dev: how many local agents share this machine's resources (default 2).
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub dev_agents: u16,
    /// With --dev: the port of the jobs service (`parley-jobs`, started in this process on
    /// the coordinator's address; `parleyctl run FILE` talks to it). 0 starts none.
    #[arg(long, value_name = "PORT", default_value_t = parley_jobs::DEV_PORT)]
    pub dev_jobs_port: u16,
    /// Where the durable registry is (shared with `backup` and `restore`).
    #[command(flatten)]
    pub registry: RegistryFlags,
    /// With --etcd (required): the base URL at which the others reach this coordinator.
    #[arg(long, value_name = "URL")]
    pub advertise_url: Option<String>,
    /// With --etcd: the leader lease in seconds (failover takes about this long when the
    /// leader's machine is gone; a crashed leader is noticed sooner, see --leader-probe-ms).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub leader_lease_s: u64,
    /// With --etcd: a leader whose last lease renewal is older than this steps down
    /// (Kubernetes' renew deadline); default two thirds of the lease. Renewals are sent every
    /// third of the lease, and at least twice within this deadline.
    #[arg(long, value_name = "MS")]
    pub leader_renew_deadline_ms: Option<u64>,
    /// With --etcd and a quota set: how long a new leader waits for the agents it knew to
    /// re-register before offering (without quotas it offers each agent once it is back).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub reregister_grace_s: u64,
    /// With --etcd: how often a follower probes the leader's address. When a leader it has
    /// seen accept connections refuses three in a row (its process is gone, its machine is
    /// up), the follower revokes its lease and the election goes on at once instead of after
    /// the lease. 0 turns the probe off.
    #[arg(long, value_name = "MS", default_value_t = 100)]
    pub leader_probe_ms: u64,
    /// Helpers for credentials files, and backup and restore of the registry (nothing is
    /// served).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The helper subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Prints a new random token (256 bits, hex) and its `secret_sha256` for the file.
    NewToken,
    /// Reads a token on stdin (one line; the trailing newline is dropped) and prints its
    /// `secret_sha256`, the same as `printf %s "$TOKEN" | sha256sum`.
    HashSecret,
    /// A cluster's TLS files and credentials (`tls init`).
    #[command(subcommand)]
    Tls(TlsCommand),
    /// Writes every record of the registry (--data-dir's file, or etcd with --etcd) to one
    /// JSON file. The redb file cannot be read while a coordinator runs on it (use
    /// `GET /api/v1/registry/backup`); etcd can.
    Backup(BackupArgs),
    /// Replaces every record of the registry (--data-dir's file, or etcd with --etcd) with a
    /// backup file's. Refused while a coordinator runs on the registry.
    Restore(RestoreArgs),
}

/// Runs a helper subcommand.
pub fn run(command: &Command) -> ExitCode {
    match command {
        Command::Backup(args) => backup::run_backup(args),
        Command::Restore(args) => backup::run_restore(args),
        Command::NewToken => secrets::run_new_token(),
        Command::HashSecret => secrets::run_hash_secret(),
        Command::Tls(command) => tls_init::run(command),
    }
}
