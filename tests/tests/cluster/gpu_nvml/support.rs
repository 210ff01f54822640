//! What the NVML tests need beyond the `tests` crate: the stub `libnvidia-ml.so.1` compiled
//! once per test binary, the `coordinator`, `agent` and `gpu-jobs` binaries built once per test
//! binary, and a real `agent` process over the stub.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use tests::deadline_in;

/// The directory holding the stub built as `libnvidia-ml.so.1`, or why it cannot be built.
/// Without `cc` this skips (prints why; the caller returns), unless `PARLEY_CI=1`: then it fails.
pub fn stub_dir() -> Option<&'static Path> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match DIR.get_or_init(build_stub) {
        Ok(dir) => Some(dir),
        Err(why) if tests::in_ci() => {
            panic!("PARLEY_CI=1 and the NVML stub cannot be built: {why}")
        }
        Err(why) => {
            eprintln!("skipped: the NVML stub cannot be built: {why}");
            None
        }
    }
}

fn build_stub() -> Result<PathBuf, String> {
    if Command::new("cc").arg("--version").output().is_err() {
        return Err("no C compiler (`cc`) on PATH".into());
    }
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("nvml-stub/nvml_stub.c");
    let dir = tempfile::Builder::new()
        .prefix("nvml-stub.")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .map_err(|e| format!("a temp dir: {e}"))?
        .keep();
    let out = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o"])
        .arg(dir.join("libnvidia-ml.so.1"))
        .arg(&source)
        .output()
        .map_err(|e| format!("running cc: {e}"))?;
    if !out.status.success() {
        // A compile error in the stub is a bug here, not a missing tool.
        panic!(
            "cc failed on {}:\n{}",
            source.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(dir)
}

/// Variables cargo sets for a running test (besides `CARGO_PKG_*`), none of them the user's.
const TEST_ONLY_VARS: [&str; 8] = [
    "CARGO_MANIFEST_DIR",
    "CARGO_MANIFEST_PATH",
    "CARGO_MANIFEST_LINKS",
    "CARGO_CRATE_NAME",
    "CARGO_BIN_NAME",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_TARGET_TMPDIR",
    "CARGO_RUSTC_CURRENT_DIR",
];

/// The binaries the tests run as processes.
pub struct Binaries {
    /// `coordinator` (package `parley`).
    pub coordinator: PathBuf,
    /// `agent`.
    pub agent: PathBuf,
    /// `gpu-jobs` (package `examples`).
    pub gpu_jobs: PathBuf,
}

/// `coordinator`, `agent` and `gpu-jobs`, built (once per test binary) by the cargo running
/// this test, into its target directory. Only a package's own tests get `CARGO_BIN_EXE_*`, so
/// this asks cargo: with the whole workspace and this test target selected, the features are
/// those of `cargo test --workspace` (CI), where this only links `gpu-jobs`; it also keeps the
/// binaries from being stale after an edit.
pub fn binaries() -> &'static Binaries {
    static BINS: OnceLock<Binaries> = OnceLock::new();
    BINS.get_or_init(|| {
        // target/<profile>/deps/gpu_nvml-<hash>: the binaries are in target/<profile>.
        let exe = std::env::current_exe().unwrap();
        let profile_dir = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Command::new(cargo);
        // What cargo set for this test process only: build scripts that watch these (ring
        // watches CARGO_PKG_NAME, CARGO_MANIFEST_DIR...) would otherwise rerun, and the next
        // build would rerun them back.
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy();
            if key.starts_with("CARGO_PKG_") || TEST_ONLY_VARS.contains(&key.as_ref()) {
                cmd.env_remove(key.as_ref());
            }
        }
        cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["build", "--workspace", "--quiet"])
            .args([
                "--bin",
                "coordinator",
                "--bin",
                "agent",
                "--bin",
                "gpu-jobs",
            ])
            .args(["--test", env!("CARGO_CRATE_NAME")]);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "building the binaries failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let bin = |name: &str| {
            let path = profile_dir.join(name);
            assert!(path.exists(), "{} was not built", path.display());
            path
        };
        Binaries {
            coordinator: bin("coordinator"),
            agent: bin("agent"),
            gpu_jobs: bin("gpu-jobs"),
        }
    })
}

/// A real `agent` process over the stub; killed (SIGTERM, then SIGKILL) when dropped.
pub struct AgentProcess {
    child: Child,
    /// Its stderr (the log).
    pub log: PathBuf,
}

impl AgentProcess {
    /// Starts `agent --gpus <gpus>` against `coordinator` with work dir `dir`, the stub on
    /// `LD_LIBRARY_PATH` and `env` (the stub's settings) added.
    pub fn start(
        coordinator: &str,
        dir: &Path,
        gpus: &str,
        stub: &Path,
        env: &[(&str, &str)],
    ) -> AgentProcess {
        let log = dir.join("agent.log");
        let mut cmd = Command::new(&binaries().agent);
        cmd.args(["--coordinator", coordinator])
            .args(["--listen", "127.0.0.1:0", "--hostname", "nvml-agent"])
            .args(["--resources", "cpus=4,mem=1024", "--isolation", "none"])
            .args(["--gpus", gpus])
            .arg("--work-dir")
            .arg(dir.join("work"))
            .env("LD_LIBRARY_PATH", stub)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .env_remove("PARLEY_COORDINATOR")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        for (k, v) in env {
            cmd.env(k, v);
        }
        if agent::task_user::running_as_root() {
            cmd.arg("--allow-root-tasks");
        }
        AgentProcess {
            child: cmd.spawn().unwrap(),
            log,
        }
    }

    /// Its exit code once it has exited, within `limit`; `None` if it still runs then.
    pub async fn exit_code_within(&mut self, limit: Duration) -> Option<i32> {
        let deadline = deadline_in(limit);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status.code().unwrap_or(-1));
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Its log so far, without ANSI colour codes.
    pub fn log_text(&self) -> String {
        strip_ansi(&std::fs::read_to_string(&self.log).unwrap_or_default())
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let end = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < end {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `text` without ANSI escape sequences (`ESC [ ... letter`).
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A loopback port `p` with `p + 1` free too (the script uses both).
pub use testkit::free_port_pair;
