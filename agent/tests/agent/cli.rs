//! The `agent` binary's command line: every bad value is a one-line error that names it.

#![allow(clippy::unwrap_used)]

use std::process::Command;

fn run(args: &[&str]) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_agent"))
        .args(args)
        .args(["--work-dir", dir.path().to_str().unwrap()])
        .env_remove("PARLEY_COORDINATOR")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn bad_values_are_one_line_errors_naming_them() {
    for (args, needles) in [
        (
            &["--resources", "cpus=x"][..],
            &["--resources", "cpus", "not a number"][..],
        ),
        (&["--resources", "cpus=-1"], &["--resources", "negative"]),
        (
            &["--resources", "CPU=1"],
            &["--resources", "invalid resource name"],
        ),
        (&["--attributes", "rack"], &["--attributes", "rack"]),
        (
            &["--coordinator", "localhost:5050"],
            &["--coordinator", "localhost:5050"],
        ),
        (&["--listen", "nowhere"], &["--listen", "nowhere"]),
        (&["--kill-grace-s", "-2"], &["--kill-grace-s", "-2"]),
        (&["--simulate", "0"], &["--simulate", "at least 1"]),
        (
            &["--isolation", "full"],
            &["--isolation", "full", "auto or none"],
        ),
        (&["--default-pids", "0"], &["--default-pids", "0"]),
        (&["--default-pids", "-5"], &["--default-pids", "-5"]),
        (&["--api-token", "short"], &["--api-token", "16 to 512"]),
        (
            &["--task-user", "no-such-user-here"],
            &["--task-user", "no such user"],
        ),
        (&["--task-user", "0:0"], &["--task-user", "is root"]),
        (&["--no-such-flag"], &["--no-such-flag"]),
        (&["--tls-cert", "a.crt"], &["--tls-cert needs --tls-key"]),
        (&["--tls-key", "a.key"], &["--tls-key needs --tls-cert"]),
        (
            &["--log-format", "yaml"],
            &["--log-format", "yaml", "text, json"],
        ),
    ] {
        let (code, stderr) = run(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        for n in needles {
            assert!(stderr.contains(n), "{args:?}: {stderr:?} lacks {n:?}");
        }
    }
}

#[test]
fn unusable_tls_files_are_errors_naming_them_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let pki = parley_tls::testing::TestPki::generate(dir.path()).unwrap();
    let listen = ["--listen", "127.0.0.1:0", "--allow-root-tasks"];
    let cert = pki.cert_file.to_str().unwrap();
    let key = pki.key_file.to_str().unwrap();
    for (args, needle) in [
        (
            &["--tls-cert", "/nonexistent/a.crt", "--tls-key", key][..],
            "cannot read TLS certificate /nonexistent/a.crt",
        ),
        (
            &["--tls-cert", cert, "--tls-key", "/nonexistent/a.key"],
            "cannot read TLS key /nonexistent/a.key",
        ),
        (&["--tls-cert", key, "--tls-key", key], "no PEM certificate"),
        (
            &["--ca-file", "/nonexistent/ca.pem"],
            "cannot read CA file /nonexistent/ca.pem",
        ),
        (
            &["--simulate", "2", "--ca-file", "/nonexistent/ca.pem"],
            "cannot read CA file",
        ),
        (
            &["--image-root", "/nonexistent/images"],
            "--image-root /nonexistent/images: No such file or directory",
        ),
    ] {
        let args: Vec<&str> = listen.iter().chain(args).copied().collect();
        let (code, stderr) = run(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        let last = stderr.trim_end().lines().last().unwrap_or_default();
        assert!(
            last.starts_with("agent: ") && last.contains(needle),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn help_works() {
    let out = Command::new(env!("CARGO_BIN_EXE_agent"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .contains("--simulate"));
}

#[test]
fn an_agent_running_as_root_needs_a_task_user_or_allow_root_tasks() {
    if !agent::task_user::running_as_root() {
        // The rule is about root; as another user there is nothing to refuse.
        return;
    }
    let (code, stderr) = run(&["--listen", "127.0.0.1:0", "--resources", "cpus=1"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--task-user"), "{stderr}");
    assert!(stderr.contains("--allow-root-tasks"), "{stderr}");
}

/// An `agent` process, killed when dropped.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The lines the agent started with `args` writes to standard error (a pipe) up to the first
/// that contains `listening`, read until it comes or a deadline passes.
fn log_until_listening(args: &[&str]) -> Vec<String> {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let mut child = Running(
        Command::new(env!("CARGO_BIN_EXE_agent"))
            .args(["--listen", "127.0.0.1:0", "--allow-root-tasks"])
            .args(["--coordinator", "http://127.0.0.1:1", "--isolation", "none"])
            .args(["--work-dir", dir.path().to_str().unwrap()])
            .args(args)
            .env("RUST_LOG", "info")
            .env_remove("PARLEY_LOG_FORMAT")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stderr = child.0.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut lines = Vec::new();
    while !lines
        .last()
        .is_some_and(|l: &String| l.contains("listening"))
    {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => lines.push(line),
            Err(e) => panic!("no listening line ({e}): {lines:?}"),
        }
    }
    lines
}

#[test]
fn json_logs_are_one_object_a_line_and_text_logs_have_no_colours_in_a_pipe() {
    let lines = log_until_listening(&["--log-format", "json"]);
    for line in &lines {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
        assert!(v["level"].is_string(), "{line}");
        assert!(v["timestamp"].is_string(), "{line}");
        assert!(v["fields"]["message"].is_string(), "{line}");
    }
    let last: serde_json::Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    assert_eq!(last["level"], "INFO");
    assert_eq!(last["fields"]["message"], "listening");
    let text = log_until_listening(&[]);
    for line in &text {
        assert!(!line.contains('\u{1b}'), "colour codes in a pipe: {line:?}");
        assert!(serde_json::from_str::<serde_json::Value>(line).is_err());
    }
    assert!(text.last().unwrap().contains(" INFO "), "{text:?}");
}
