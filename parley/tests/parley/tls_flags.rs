//! `--tls-cert` / `--tls-key` / `--agent-ca-file` with the real `coordinator` binary: HTTPS
//! with a valid pair, and a clear one-line error at start for every unusable one.

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use parley_tls::testing::TestPki;

fn coordinator(args: &[&str], data_dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_coordinator"));
    cmd.args(["--listen", "127.0.0.1:0", "--in-memory", "--data-dir"])
        .arg(data_dir)
        .args(args)
        .env("NO_COLOR", "1");
    cmd
}

/// Runs a coordinator that must refuse to start; its output.
fn refused(args: &[&str], data_dir: &Path) -> (Output, String) {
    let out = coordinator(args, data_dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success(), "started with {args:?}");
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    (out, stderr)
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn unusable_tls_settings_are_one_line_errors_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::generate(dir.path()).unwrap();
    let other = tempfile::tempdir().unwrap();
    let other = TestPki::generate(other.path()).unwrap();
    let cert = path(&pki.cert_file);
    let key = path(&pki.key_file);

    let (out, err) = refused(&["--tls-cert", cert], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(err.contains("--tls-key") && !err.contains('\n'), "{err}");

    let (_, err) = refused(
        &["--tls-cert", "/nonexistent/c.pem", "--tls-key", key],
        dir.path(),
    );
    assert!(
        err.contains("cannot read TLS certificate /nonexistent/c.pem"),
        "{err}"
    );

    let (_, err) = refused(
        &["--tls-cert", cert, "--tls-key", path(&other.key_file)],
        dir.path(),
    );
    assert!(err.contains("cannot be used together"), "{err}");

    let (_, err) = refused(&["--agent-ca-file", "/nonexistent/ca.pem"], dir.path());
    assert!(
        err.contains("cannot read CA file /nonexistent/ca.pem"),
        "{err}"
    );

    let (_, err) = refused(&["--dev", "--tls-cert", cert, "--tls-key", key], dir.path());
    assert!(err.contains("not supported with --dev"), "{err}");
}

/// Kills the process when dropped, so a failed assertion leaves none behind.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn a_valid_pair_serves_https() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::generate(dir.path()).unwrap();
    let mut child = coordinator(
        &[
            "--tls-cert",
            path(&pki.cert_file),
            "--tls-key",
            path(&pki.key_file),
        ],
        dir.path(),
    )
    .env("RUST_LOG", "info")
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let stdout = child.stdout.take().unwrap();
    let _running = Running(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line.contains("coordinator listening") {
                if let Some(tx) = tx.take() {
                    let _ = tx.send(line);
                }
            }
        }
    });
    let line = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert!(line.contains("tls=true"), "{line}");
    let at = line.find("127.0.0.1:").unwrap() + "127.0.0.1:".len();
    let port: String = line[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();

    let client = parley_tls::client_builder(Some(&pki.ca_file))
        .unwrap()
        .build()
        .unwrap();
    let health = client
        .get(format!("https://localhost:{port}/health"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let plain = client
        .get(format!("http://127.0.0.1:{port}/health"))
        .send()
        .await;
    assert!(plain.is_err(), "plain HTTP to the TLS port: {plain:?}");
}
