//! The binary's `--preemption-grace-s`: a bad value stops the start with a one-line
//! error naming the flag.

#![allow(clippy::unwrap_used)]

use std::process::Command;

#[test]
fn a_bad_preemption_grace_is_a_clear_cli_error() {
    for bad in ["-1", "0", "nan", "100000", "soon"] {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_coordinator"))
            .args(["--in-memory", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path())
            .arg(format!("--preemption-grace-s={bad}"))
            .output()
            .unwrap();
        assert!(!out.status.success(), "{bad}: started");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("preemption-grace-s"), "{bad}: {err}");
    }
}
