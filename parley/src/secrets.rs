//! Tokens and their hashes for credentials files: `coordinator new-token` and `coordinator
//! hash-secret` (the subcommands are listed in [`crate::cli::Command`]; `coordinator tls init`,
//! in [`crate::tls_init`], makes a whole cluster's; see the book's Security page,
//! `docs/src/operating/security.md`). The
//! coordinator stores only SHA-256 hashes of random tokens (`coordinator::auth::secret` says why
//! that is enough).

use std::io::Read;
use std::process::ExitCode;

use coordinator::auth::SecretHash;
use rand::RngCore;

/// A random 256-bit token, as 64 hex digits.
pub fn new_token() -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs `coordinator new-token`: a new token and its hash, on stdout.
pub fn run_new_token() -> ExitCode {
    let token = new_token();
    println!("token:         {token}");
    println!("secret_sha256: {}", SecretHash::of(&token).to_hex());
    ExitCode::SUCCESS
}

/// Runs `coordinator hash-secret`: the hash of the token on stdin.
pub fn run_hash_secret() -> ExitCode {
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
