//! The `coordinator` binary's subcommands (nothing is served): `coordinator new-token` and
//! `coordinator hash-secret` make the tokens and the hashes of a credentials file (and
//! `coordinator tls init`, in [`crate::tls_init`], a whole cluster's); `backup` and `restore`
//! (in [`crate::backup`]) copy the registry to a file and back (see the book's Security page, `docs/src/operating/security.md`). The
//! coordinator stores only SHA-256 hashes of random tokens (`coordinator::auth::secret` says why
//! that is enough).

use std::io::Read;
use std::process::ExitCode;

use coordinator::auth::SecretHash;
use rand::RngCore;

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
    Tls(crate::tls_init::TlsCommand),
    /// Writes every record of the registry (--data-dir's file, or etcd with --etcd) to one
    /// JSON file. The redb file cannot be read while a coordinator runs on it (use
    /// `GET /api/v1/registry/backup`); etcd can.
    Backup(crate::backup::BackupArgs),
    /// Replaces every record of the registry (--data-dir's file, or etcd with --etcd) with a
    /// backup file's. Refused while a coordinator runs on the registry.
    Restore(crate::backup::RestoreArgs),
}

/// A random 256-bit token, as 64 hex digits.
pub fn new_token() -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs a helper subcommand.
pub fn run(command: &Command) -> ExitCode {
    match command {
        Command::Backup(args) => crate::backup::run_backup(args),
        Command::Restore(args) => crate::backup::run_restore(args),
        Command::NewToken => {
            let token = new_token();
            println!("token:         {token}");
            println!("secret_sha256: {}", SecretHash::of(&token).to_hex());
            ExitCode::SUCCESS
        }
        Command::HashSecret => {
            let mut text = String::new();
            if let Err(e) = std::io::stdin().read_to_string(&mut text) {
                eprintln!("error: cannot read the token on stdin: {e}");
                return ExitCode::from(2);
            }
            let token = text.strip_suffix('\n').unwrap_or(&text);
            let token = token.strip_suffix('\r').unwrap_or(token);
            if token.is_empty() {
                eprintln!("error: no token on stdin");
                return ExitCode::from(2);
            }
            println!("{}", SecretHash::of(token).to_hex());
            ExitCode::SUCCESS
        }
        Command::Tls(command) => crate::tls_init::run(command),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_fresh_and_long() {
        let (a, b) = (new_token(), new_token());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }
}
