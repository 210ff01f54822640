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
