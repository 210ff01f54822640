//! `--gpus` on the `agent` binary: a bad value, or a device the machine does not have, is a
//! one-line error naming it; so is a fractional `gpus` for simulated agents.

#![allow(clippy::unwrap_used)]

use std::process::Command;

fn run(args: &[&str]) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_agent"))
        .args(args)
        .args(["--work-dir", dir.path().to_str().unwrap()])
        .args(["--listen", "127.0.0.1:0", "--allow-root-tasks"])
        .env_remove("PARLEY_COORDINATOR")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn bad_gpus_values_are_one_line_errors_naming_them() {
    for (args, needle) in [
        (&["--gpus", "all"][..], "invalid --gpus \"all\""),
        (&["--gpus", "0,x"], "invalid --gpus \"0,x\""),
        (&["--gpus", "-1"], "invalid --gpus \"-1\""),
        (&["--gpus", ""], "invalid --gpus \"\""),
        // No machine here has 64 GPUs: a clear start-up error, not a silent agent.
        (
            &["--gpus", "63"],
            "--gpus names device 63, but this machine has",
        ),
        (
            &["--simulate", "2", "--resources", "cpus=1,gpus=0.5"],
            "--resources: resources.gpus must be a whole number of devices, got 0.5",
        ),
    ] {
        let (code, stderr) = run(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        let last = stderr.trim_end().lines().last().unwrap_or_default();
        assert!(last.contains(needle), "{args:?}: {stderr}");
    }
}
