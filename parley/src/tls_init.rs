//! `coordinator tls init`: everything a secured cluster needs, in one command. It writes, in
//! one directory: a cluster CA (`ca.pem`, and `ca.key` 0600), a server certificate and key for
//! each coordinator and agent host (`NAME.crt`, `NAME.key` 0600), a `credentials.toml` for the
//! coordinators holding only SHA-256 hashes, and the plain tokens in `tokens/PRINCIPAL` (0600,
//! one file per principal). See the book's Security page (`docs/src/operating/security.md`).
//!
//! Nothing is written until every name is checked and every certificate made, and an existing
//! file is never overwritten without `--force`: a second `init` in the same directory would
//! otherwise replace the CA every agent and client trusts.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use coordinator::auth::SecretHash;
use parley_tls::pki::{Ca, PkiError};

use crate::files::{write_file, WriteError};

/// `coordinator tls ...`.
#[derive(Debug, clap::Subcommand)]
pub enum TlsCommand {
    /// Writes a cluster CA, server certificates for the coordinators and agents, a credentials
    /// file and its tokens into one directory.
    Init(InitArgs),
}

/// The flags of `coordinator tls init`.
#[derive(Debug, Clone, clap::Args)]
pub struct InitArgs {
    /// The directory to write into (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// A coordinator host: its file name and the DNS names and IP addresses clients reach it
    /// by, e.g. coord1=198.18.0.2,coord1.example (repeatable; at least one). Writes
    /// NAME.crt and NAME.key.
    #[arg(
        long = "coordinator",
        value_name = "NAME=SAN[,SAN...]",
        required = true
    )]
    pub coordinators: Vec<String>,
    /// An agent host serving its API over HTTPS (`agent --tls-cert NAME.crt --tls-key
    /// NAME.key`), as for --coordinator (repeatable).
    #[arg(long = "agent", value_name = "NAME=SAN[,SAN...]")]
    pub agents: Vec<String>,
    /// The name of the admin operator principal.
    #[arg(long, value_name = "NAME", default_value = "admin")]
    pub admin: String,
    /// The name of the read-only operator principal.
    #[arg(long, value_name = "NAME", default_value = "reader")]
    pub reader: String,
    /// The name of the agent principal (every agent registers with its token).
    #[arg(long, value_name = "NAME", default_value = "agents")]
    pub agent_principal: String,
    /// The name of the framework principal (it may register in every role, `*`).
    #[arg(long, value_name = "NAME", default_value = "framework")]
    pub framework: String,
    /// Overwrite files already in the directory (a new CA: every certificate it signed stops
    /// being trusted by clients given the new ca.pem).
    #[arg(long)]
    pub force: bool,
}

/// One host's certificate: its file name and subject alternative names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// `NAME` of `NAME.crt` / `NAME.key`.
    pub name: String,
    /// Its DNS names and IP addresses.
    pub sans: Vec<String>,
}

/// What `tls init` writes: every file, with its text and whether it is secret (0600).
#[derive(Debug)]
pub struct Plan {
    /// (path, contents, secret).
    pub files: Vec<(PathBuf, String, bool)>,
}

/// Why `tls init` refuses its flags or could not write its files; each names the flag, host,
/// principal or file.
#[derive(Debug, thiserror::Error)]
pub enum TlsInitError {
    /// A host flag without `=`.
    #[error("--{flag} {text:?}: expected NAME=SAN[,SAN...]")]
    HostForm {
        /// `coordinator` or `agent`.
        flag: String,
        /// The flag's value.
        text: String,
    },
    /// A host named like the CA's or the credentials' files.
    #[error("--{flag} {text:?}: the name {name:?} is taken by the CA or credentials files")]
    ReservedName {
        /// `coordinator` or `agent`.
        flag: String,
        /// The flag's value.
        text: String,
        /// The name.
        name: String,
    },
    /// A host flag with no DNS name or IP address after `=`.
    #[error("--{flag} {text:?}: give at least one DNS name or IP address after '='")]
    NoSans {
        /// `coordinator` or `agent`.
        flag: String,
        /// The flag's value.
        text: String,
    },
    /// A file or principal name outside `A-Z a-z 0-9 . _ -`, empty, too long or starting with
    /// '.'.
    #[error(
        "{what}: name {name:?} must be 1 to 64 letters, digits, '.', '_' or '-' (not starting with '.')"
    )]
    BadName {
        /// The flag (and value) it came from.
        what: String,
        /// The name.
        name: String,
    },
    /// Two hosts with one name.
    #[error("host name {name:?} is given twice (--coordinator and --agent names share NAME.crt)")]
    DuplicateHost {
        /// The name.
        name: String,
    },
    /// Two principals with one name.
    #[error("--{flag}: principal name {name:?} is used twice; give each principal its own")]
    DuplicatePrincipal {
        /// The flag of the second.
        flag: &'static str,
        /// The name.
        name: String,
    },
    /// The CA could not be made.
    #[error(transparent)]
    Ca(PkiError),
    /// A host's certificate could not be made.
    #[error("host {host:?}: {source}")]
    Issue {
        /// The host's name.
        host: String,
        /// Why.
        #[source]
        source: PkiError,
    },
    /// A file of the plan exists and `--force` is off.
    #[error(
        "{} already exists: tls init never replaces a CA, certificate or token without --force (which makes a new CA)",
        path.display()
    )]
    Exists {
        /// The first such file.
        path: PathBuf,
    },
    /// A directory could not be created.
    #[error("cannot create directory {}: {source}", dir.display())]
    CreateDir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file could not be written.
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// Parses `NAME=SAN[,SAN...]` (`flag` is named in errors).
pub fn parse_host(flag: &str, text: &str) -> Result<Host, TlsInitError> {
    let (name, sans) = text.split_once('=').ok_or_else(|| TlsInitError::HostForm {
        flag: flag.to_string(),
        text: text.to_string(),
    })?;
    check_name(&format!("--{flag} {text:?}"), name)?;
    if name == "ca" || name == "credentials" {
        return Err(TlsInitError::ReservedName {
            flag: flag.to_string(),
            text: text.to_string(),
            name: name.to_string(),
        });
    }
    let sans: Vec<String> = sans
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    if sans.is_empty() {
        return Err(TlsInitError::NoSans {
            flag: flag.to_string(),
            text: text.to_string(),
        });
    }
    Ok(Host {
        name: name.to_string(),
        sans,
    })
}

/// A file or principal name: 1 to 64 of `A-Z a-z 0-9 . _ -`, not starting with '.'.
fn check_name(what: &str, name: &str) -> Result<(), TlsInitError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(TlsInitError::BadName {
            what: what.to_string(),
            name: name.to_string(),
        })
    }
}

/// Checks the flags and makes every file's contents (nothing is written).
pub fn plan(args: &InitArgs) -> Result<Plan, TlsInitError> {
    let mut hosts = Vec::new();
    for text in &args.coordinators {
        hosts.push(parse_host("coordinator", text)?);
    }
    for text in &args.agents {
        hosts.push(parse_host("agent", text)?);
    }
    let mut seen = BTreeSet::new();
    for h in &hosts {
        if !seen.insert(h.name.as_str()) {
            return Err(TlsInitError::DuplicateHost {
                name: h.name.clone(),
            });
        }
    }
    let principals = [
        ("admin", &args.admin),
        ("reader", &args.reader),
        ("agent-principal", &args.agent_principal),
        ("framework", &args.framework),
    ];
    let mut names = BTreeSet::new();
    for (flag, name) in principals {
        check_name(&format!("--{flag}"), name)?;
        if !names.insert(name.as_str()) {
            return Err(TlsInitError::DuplicatePrincipal {
                flag,
                name: name.clone(),
            });
        }
    }

    let dir = &args.out;
    let ca = Ca::generate("Parley cluster CA").map_err(TlsInitError::Ca)?;
    let mut files = vec![
        (dir.join("ca.pem"), ca.cert_pem(), false),
        (dir.join("ca.key"), ca.key_pem(), true),
    ];
    for h in &hosts {
        let issued = ca
            .issue_server(&h.sans)
            .map_err(|source| TlsInitError::Issue {
                host: h.name.clone(),
                source,
            })?;
        files.push((dir.join(format!("{}.crt", h.name)), issued.cert_pem, false));
        files.push((dir.join(format!("{}.key", h.name)), issued.key_pem, true));
    }
    let mut credentials = String::from(
        "# Written by `coordinator tls init`. Only hashes: the tokens are in tokens/.\n",
    );
    let entries = [
        (&args.admin, "kind = \"operator\"\naccess = \"admin\"\n"),
        (&args.reader, "kind = \"operator\"\naccess = \"read\"\n"),
        (&args.agent_principal, "kind = \"agent\"\n"),
        (&args.framework, "kind = \"framework\"\nroles = [\"*\"]\n"),
    ];
    for (name, kind) in entries {
        let token = crate::secrets::new_token();
        credentials.push_str(&format!(
            "\n[[principals]]\nname = \"{name}\"\n{kind}secret_sha256 = \"{}\"\n",
            SecretHash::of(&token).to_hex()
        ));
        files.push((dir.join("tokens").join(name), format!("{token}\n"), true));
    }
    files.push((dir.join("credentials.toml"), credentials, false));
    Ok(Plan { files })
}

/// Writes the plan's files: refuses, naming the first, when any exists and `force` is off;
/// secret files are created 0600 (and `tokens/` 0700) before anything is written into them.
pub fn write(plan: &Plan, force: bool) -> Result<(), TlsInitError> {
    if !force {
        if let Some((path, _, _)) = plan.files.iter().find(|(p, _, _)| p.exists()) {
            return Err(TlsInitError::Exists { path: path.clone() });
        }
    }
    for (path, text, secret) in &plan.files {
        if let Some(parent) = path.parent() {
            create_dir(parent)?;
        }
        write_file(path, text, *secret)?;
    }
    Ok(())
}

fn create_dir(dir: &Path) -> Result<(), TlsInitError> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.is_dir() {
        return Ok(());
    }
    // The tokens' directory is the owner's only; the others are readable like any config.
    let mode = if dir.file_name().is_some_and(|n| n == "tokens") {
        0o700
    } else {
        0o755
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(dir)
        .map_err(|source| TlsInitError::CreateDir {
            dir: dir.to_path_buf(),
            source,
        })
}

/// Runs `coordinator tls ...`.
pub fn run(command: &TlsCommand) -> ExitCode {
    let TlsCommand::Init(args) = command;
    let result = plan(args).and_then(|p| write(&p, args.force).map(|()| p));
    match result {
        Ok(plan) => {
            println!("wrote into {}:", args.out.display());
            for (path, _, secret) in &plan.files {
                let rel = path.strip_prefix(&args.out).unwrap_or(path);
                let note = if *secret { "  (secret, 0600)" } else { "" };
                println!("  {}{note}", rel.display());
            }
            println!(
                "start each coordinator with --tls-cert NAME.crt --tls-key NAME.key --credentials credentials.toml;\n\
                 agents with --ca-file ca.pem --token \"$(cat tokens/{})\"; keep ca.key offline.",
                args.agent_principal
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        args: InitArgs,
    }

    fn args(extra: &[&str]) -> InitArgs {
        let mut argv = vec!["x", "--out", "/nonexistent-out"];
        argv.extend_from_slice(extra);
        Wrap::try_parse_from(argv).unwrap().args
    }

    #[test]
    fn bad_hosts_and_names_are_named_before_anything_is_made() {
        let cases: [(&[&str], &str); 7] = [
            (&["--coordinator", "c1"], "expected NAME=SAN"),
            (&["--coordinator", "c1="], "at least one DNS name"),
            (&["--coordinator", "../x=a"], "name \"../x\""),
            (&["--coordinator", "ca=a"], "taken by the CA"),
            (
                &["--coordinator", "c1=a b"],
                "invalid certificate name \"a b\"",
            ),
            (
                &["--coordinator", "c1=a", "--agent", "c1=b"],
                "\"c1\" is given twice",
            ),
            (
                &["--coordinator", "c1=a", "--reader", "admin"],
                "--reader: principal name \"admin\" is used twice",
            ),
        ];
        for (argv, expected) in cases {
            let err = plan(&args(argv)).unwrap_err().to_string();
            assert!(err.contains(expected), "{argv:?}: {err}");
        }
    }
}
