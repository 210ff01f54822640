//! What the parleyctl tests share: running a command line through the library, or the real
//! binary as a child process, and a jobs service on a test cluster.
#![allow(clippy::unwrap_used)]

use std::process::Output;

use parleyctl::{Cli, CtlError};

/// Runs `parleyctl --coordinator URL ARGS...` through the library: the result and the output.
pub async fn ctl(url: &str, args: &[&str]) -> (Result<(), CtlError>, String) {
    use clap::Parser;
    let mut argv = vec!["parleyctl", "--coordinator", url];
    argv.extend_from_slice(args);
    let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    let mut out = Vec::new();
    let result = parleyctl::run(&cli, &mut out).await;
    (result, String::from_utf8(out).unwrap())
}

/// Like [`ctl`], expecting success: the output.
pub async fn ok(url: &str, args: &[&str]) -> String {
    let (result, out) = ctl(url, args).await;
    if let Err(e) = result {
        panic!("parleyctl {args:?} failed: {e}\n{out}");
    }
    out
}

/// A jobs service for `cluster` on a free loopback port, its store in a temporary directory
/// (removed when the returned one is dropped): the service, its base URL and the directory.
pub async fn jobs_service(
    cluster: &tests::Cluster,
) -> (parley_jobs::service::Running, String, tempfile::TempDir) {
    let data = tempfile::tempdir().unwrap();
    let mut config =
        parley_jobs::ServiceConfig::new(&cluster.url, "default".parse().unwrap(), data.path());
    config.failover_timeout = std::time::Duration::from_secs(60);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let jobs = parley_jobs::start(config, listener).await.unwrap();
    let url = format!("http://{}", jobs.addr);
    (jobs, url, data)
}

/// Runs the real binary with `args` and the environment `env` (PARLEY_* cleared first).
pub async fn binary(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_parleyctl"));
    cmd.args(args)
        .env_remove("PARLEY_COORDINATOR")
        .env_remove("PARLEY_TOKEN")
        .env_remove("PARLEY_JOBS_URL")
        .env_remove("PARLEY_JOBS_TOKEN")
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().await.unwrap()
}

/// A process's stdout and stderr as text.
pub fn texts(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
