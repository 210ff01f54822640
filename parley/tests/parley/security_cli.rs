//! The binary's security switches: `new-token` and `hash-secret` agree with each other and with
//! `sha256sum`, a bad credentials file stops the start with a one-line error, and `--dev`
//! without credentials refuses to listen beyond loopback.

#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::process::{Command, Stdio};

fn coordinator() -> Command {
    Command::new(env!("CARGO_BIN_EXE_coordinator"))
}

#[test]
fn new_token_and_hash_secret_agree() {
    let out = coordinator().arg("new-token").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_owned())
            .unwrap()
    };
    let (token, hash) = (field("token:"), field("secret_sha256:"));
    assert_eq!(token.len(), 64);
    let mut child = coordinator()
        .arg("hash-secret")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(child.stdin.take().unwrap(), "{token}").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), hash);
    // printf %s abc | sha256sum
    let mut child = coordinator()
        .arg("hash-secret")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"abc").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}

#[test]
fn dev_without_credentials_stays_on_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let out = coordinator()
        .args([
            "--dev",
            "--in-memory",
            "--listen",
            "0.0.0.0:0",
            "--data-dir",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("loopback") && err.contains("--credentials"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn a_bad_credentials_file_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("creds.toml");
    std::fs::write(
        &file,
        "[[principals]]\nname = \"a\"\nkind = \"framework\"\nsecret_sha256 = \"00\"\nroles = [\"*\"]\n",
    )
    .unwrap();
    let out = coordinator()
        .args(["--in-memory", "--listen", "127.0.0.1:0", "--credentials"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("creds.toml") && err.contains("secret_sha256"),
        "{err}"
    );
}
