//! `coordinator backup` and `coordinator restore`: every record of the durable registry (the
//! redb file under `--data-dir`, or etcd with `--etcd`) to one JSON file and back (the
//! document is `coordinator::store::backup`). See the book's Deployment page, section Backup.
//!
//! Backup only reads: the redb file in one read transaction (it cannot be opened while a
//! coordinator holds it: redb locks the file), etcd in one range read (one revision, safe while
//! the cluster runs). Restore checks the whole document first and writes nothing if any field
//! is wrong; it then replaces what the registry held, in one redb transaction, or on etcd in one
//! txn (several past `coordinator::ha::registry::MAX_OPS` keys) that holds only while no
//! coordinator leads the cluster. A coordinator running on the registry is never written under.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use coordinator::ha::etcd::EtcdClient;
use coordinator::ha::registry::{current_leader, read_registry, replace_registry, Replaced};
use coordinator::store::backup::{Backend, Backup, Source};
use coordinator::store::{Snapshot, Store, StoreError};

use crate::files::write_file;

/// Where the durable registry is: flags of the server, and of `coordinator backup` and
/// `coordinator restore`, which work on the registry a coordinator started with the same flags
/// would use.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct RegistryFlags {
    /// Where the coordinator keeps its durable registry (`DIR/registry.redb`) and, with --dev,
    /// the local agents their ids, journals and task sandboxes (`DIR/agent-N`).
    #[arg(long, value_name = "DIR", default_value = "data")]
    pub data_dir: std::path::PathBuf,
    /// Keep the books in memory only: a restart forgets frameworks and run-time role weights
    /// (agents and their tasks still come back by re-registering).
    #[arg(long)]
    pub in_memory: bool,
    /// High availability: etcd client URLs (comma-separated). Several coordinators started
    /// with the same etcd and prefix elect one leader; the others redirect to it.
    #[arg(long, value_name = "URL[,URL...]")]
    pub etcd: Option<String>,
    /// With --etcd: the key prefix of this cluster's registry and election.
    #[arg(long, value_name = "P", default_value = "/parley")]
    pub etcd_prefix: String,
}

/// The flags of `coordinator backup`.
#[derive(Debug, Clone, clap::Args)]
pub struct BackupArgs {
    /// The registry to read: the server's flags.
    #[command(flatten)]
    pub registry: RegistryFlags,
    /// The file to write (replaced atomically, mode 0600: it holds the principals that own
    /// frameworks).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

/// The flags of `coordinator restore`.
#[derive(Debug, Clone, clap::Args)]
pub struct RestoreArgs {
    /// The registry to replace: the server's flags.
    #[command(flatten)]
    pub registry: RegistryFlags,
    /// The backup file to restore (written by `coordinator backup`).
    #[arg(long, value_name = "FILE")]
    pub from: PathBuf,
    /// With --etcd: restore even though a coordinator leads the cluster (its election key
    /// exists). Only for a leader known dead whose lease has not yet expired: a live leader
    /// keeps its own books and overwrites the registry with them.
    #[arg(long)]
    pub force: bool,
}

/// Why the server flags name no registry to back up or restore.
#[derive(Debug, thiserror::Error)]
pub enum LocationError {
    /// `--in-memory`.
    #[error(
        "--in-memory: a coordinator with its books in memory has no registry to back up or restore"
    )]
    InMemory,
    /// `--etcd` or `--etcd-prefix` is wrong (the message names it).
    #[error(transparent)]
    Etcd(#[from] coordinator::ha::HaOptionsError),
}

/// Which registry the command works on: the server's own settings.
#[derive(Debug, Clone, PartialEq)]
pub enum Location {
    /// The redb file.
    Redb(PathBuf),
    /// etcd: the endpoints and the key prefix.
    Etcd {
        /// Client URLs.
        endpoints: Vec<String>,
        /// Key prefix.
        prefix: String,
    },
}

impl Location {
    /// The registry of the server flags: `--etcd` and `--etcd-prefix`, else
    /// `--data-dir`/registry.redb; `--in-memory` has none. The error names the flag.
    pub fn of(args: &RegistryFlags) -> Result<Self, LocationError> {
        if args.in_memory {
            return Err(LocationError::InMemory);
        }
        match &args.etcd {
            Some(raw) => {
                let endpoints = coordinator::ha::HaOptions::parse_endpoints(raw);
                coordinator::ha::check_etcd(&endpoints, &args.etcd_prefix)?;
                Ok(Self::Etcd {
                    endpoints,
                    prefix: args.etcd_prefix.clone(),
                })
            }
            None => Ok(Self::Redb(args.data_dir.join("registry.redb"))),
        }
    }
}

/// A failure: its message, and whether it was the operator's input (exit code 2) or not (1).
struct Failure {
    message: String,
    input: bool,
}

fn failed(message: impl Into<String>) -> Failure {
    Failure {
        message: message.into(),
        input: false,
    }
}

fn exit(result: Result<String, Failure>) -> ExitCode {
    match result {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(f) => {
            eprintln!("error: {}", f.message);
            ExitCode::from(if f.input { 2 } else { 1 })
        }
    }
}

/// Runs `coordinator backup`.
pub fn run_backup(args: &BackupArgs) -> ExitCode {
    exit(location(&args.registry).and_then(|l| backup(&l, args)))
}

/// Runs `coordinator restore`.
pub fn run_restore(args: &RestoreArgs) -> ExitCode {
    exit(location(&args.registry).and_then(|l| restore(&l, args)))
}

/// The registry of the flags; a bad flag is the operator's input.
fn location(flags: &RegistryFlags) -> Result<Location, Failure> {
    Location::of(flags).map_err(|e| Failure {
        message: e.to_string(),
        input: true,
    })
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| failed(format!("cannot start the async runtime: {e}")))
}

fn etcd_client(endpoints: &[String]) -> Result<EtcdClient, Failure> {
    EtcdClient::new(endpoints.to_vec()).map_err(|e| failed(format!("etcd client: {e}")))
}

/// One line counting the records.
fn summary(snap: &Snapshot) -> String {
    format!(
        "{} frameworks, {} removed framework ids, {} role weights, {} role quotas, {} agents, {} reservations",
        snap.frameworks.len(),
        snap.removed_frameworks.len(),
        snap.weights.len(),
        snap.quotas.len(),
        snap.agents.len(),
        snap.reservations.len()
    )
}

fn backup(location: &Location, args: &BackupArgs) -> Result<String, Failure> {
    let (snapshot, source) = match location {
        Location::Redb(path) => {
            let store = Store::open_existing(path).map_err(|e| match e {
                StoreError::InUse { .. } => failed(format!(
                    "{e}: a running coordinator locks its registry file, so it cannot be read \
                     beside it. Stop the coordinator and run the backup again, or back up the \
                     running coordinator over its API: \
                     curl -H \"Authorization: Bearer $ADMIN_TOKEN\" \
                     http://COORDINATOR/api/v1/registry/backup > FILE"
                )),
                StoreError::NotFound { .. } => Failure {
                    message: e.to_string(),
                    input: true,
                },
                e => failed(e.to_string()),
            })?;
            let snapshot = store.load().map_err(|e| failed(e.to_string()))?;
            let source = Source {
                backend: Backend::Redb,
                location: path.display().to_string(),
                etcd_prefix: None,
                etcd_revision: None,
            };
            (snapshot, source)
        }
        Location::Etcd { endpoints, prefix } => {
            let client = etcd_client(endpoints)?;
            let (snapshot, revision) = runtime()?
                .block_on(read_registry(&client, prefix))
                .map_err(|e| failed(e.to_string()))?;
            let source = Source {
                backend: Backend::Etcd,
                location: endpoints.join(","),
                etcd_prefix: Some(prefix.clone()),
                etcd_revision: Some(revision),
            };
            (snapshot, source)
        }
    };
    let document = Backup::new(&snapshot, source);
    write_file(&args.out, &document.to_json(), true).map_err(|e| failed(e.to_string()))?;
    Ok(format!(
        "wrote {} (0600): {}",
        args.out.display(),
        summary(&snapshot)
    ))
}

/// Reads and checks the whole backup file; nothing is written before this succeeds.
fn read_document(path: &Path) -> Result<Snapshot, Failure> {
    let input = |message: String| Failure {
        message,
        input: true,
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| input(format!("cannot read {}: {e}", path.display())))?;
    let backup = Backup::parse(&text)
        .map_err(|e| input(format!("{}: {e}; nothing was restored", path.display())))?;
    Ok(backup.snapshot())
}

fn restore(location: &Location, args: &RestoreArgs) -> Result<String, Failure> {
    let snapshot = read_document(&args.from)?;
    match location {
        Location::Redb(path) => {
            let store = Store::open(path).map_err(|e| match e {
                StoreError::InUse { .. } => failed(format!(
                    "{e}: a coordinator is running on this data dir; stop it first \
                     (nothing was restored)"
                )),
                e => failed(format!("{e}; nothing was restored")),
            })?;
            store
                .replace(&snapshot)
                .map_err(|e| failed(format!("{e}; nothing was restored")))?;
            Ok(format!(
                "restored {} into {}: {}",
                args.from.display(),
                path.display(),
                summary(&snapshot)
            ))
        }
        Location::Etcd { endpoints, prefix } => {
            let client = etcd_client(endpoints)?;
            let rt = runtime()?;
            let leader = rt
                .block_on(current_leader(&client, prefix))
                .map_err(|e| failed(format!("{e}; nothing was restored")))?;
            let refuse = |who: &str| {
                failed(format!(
                    "coordinator {who} leads the cluster under {prefix} (its election key \
                     exists): stop every coordinator of the cluster first, or give --force if \
                     that leader is known dead and its lease has not expired yet (nothing was \
                     restored)"
                ))
            };
            if let (Some(url), false) = (&leader, args.force) {
                return Err(refuse(url));
            }
            let replaced = rt
                .block_on(replace_registry(&client, prefix, &snapshot, args.force))
                .map_err(|e| failed(e.to_string()))?;
            match replaced {
                Replaced::Led => Err(refuse("(elected meanwhile)")),
                Replaced::Written(txns) => Ok(format!(
                    "restored {} into etcd under {prefix} ({txns} txn{}): {}",
                    args.from.display(),
                    if txns == 1 { "" } else { "s" },
                    summary(&snapshot)
                )),
            }
        }
    }
}
