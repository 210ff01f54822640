//! Running one health check, bounded by its timeout.
//!
//! - A **command** check runs like the task's own command but outside its isolation: as the
//!   task's user (its `isolation.user`, else the agent's `--task-user`), with the sandbox as its
//!   working directory and `HOME`, the task's environment (`PATH` as the task's, its `env`,
//!   `PARLEY_TASK_ID`, `PARLEY_SANDBOX`; nothing of the agent's), in a process group of its own that is killed
//!   when the timeout passes. It runs on the agent's host (not in the task's namespaces, cgroup
//!   or image; a check for an image task is refused at accept). Exit 0 passes.
//! - An **HTTP** check connects to `127.0.0.1:port` and sends `GET path HTTP/1.0`; a `2xx` or
//!   `3xx` status line passes. A task with its own network namespace (`isolation.network:
//!   loopback`) cannot be reached from the agent, so that combination is refused at accept.

use std::path::Path;
use std::time::Duration;

use nix::sys::signal::Signal;
use protocol::health::{HttpProbe, Probe};
use protocol::{CommandSpec, HealthCheck};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::executor;
use crate::task_user::TaskUser;

/// Where and as whom a command check runs.
#[derive(Debug, Clone)]
pub struct CheckContext<'a> {
    /// The task's sandbox (the working directory).
    pub sandbox: &'a Path,
    /// The task's user; `None`: the agent's own.
    pub user: Option<&'a TaskUser>,
    /// The task's extra environment.
    pub env: &'a std::collections::BTreeMap<String, String>,
    /// The task's id (`PARLEY_TASK_ID`).
    pub task_id: &'a str,
}

/// Runs the check once; `true` when it passed within its timeout.
pub async fn run(check: &HealthCheck, ctx: &CheckContext<'_>) -> bool {
    let timeout = Duration::try_from_secs_f64(check.timeout()).unwrap_or(Duration::from_secs(5));
    match check.probe() {
        Some(Probe::Command(c)) => command(c, ctx, timeout).await,
        Some(Probe::Http(h)) => {
            matches!(tokio::time::timeout(timeout, http(h)).await, Ok(Ok(true)))
        }
        None => false,
    }
}

/// A command check: exit 0 within `timeout`.
async fn command(spec: &CommandSpec, ctx: &CheckContext<'_>, timeout: Duration) -> bool {
    let mut cmd = match spec {
        CommandSpec::Shell(line) => {
            let mut c = tokio::process::Command::new("/bin/sh");
            c.arg("-c").arg(line);
            c
        }
        CommandSpec::Argv(argv) => {
            let Some((program, args)) = argv.split_first() else {
                return false;
            };
            let mut c = tokio::process::Command::new(program);
            c.args(args);
            c
        }
    };
    // The task's environment as its own command gets it: nothing of the agent's.
    cmd.current_dir(ctx.sandbox)
        .env_clear()
        .env("PATH", executor::BASE_PATH)
        .env("HOME", ctx.sandbox)
        .envs(ctx.env)
        .env("PARLEY_TASK_ID", ctx.task_id)
        .env("PARLEY_SANDBOX", ctx.sandbox)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(u) = ctx.user {
        cmd.uid(u.uid).gid(u.gid);
        if let Some(name) = &u.name {
            cmd.env("USER", name).env("LOGNAME", name);
        }
    }
    // Registered before the reaper can see it exit, so the reaper leaves it to tokio.
    let spawned = {
        let mut tracked = crate::reaper::tracked();
        let spawned = cmd.spawn();
        if let Some(pid) = spawned.as_ref().ok().and_then(|c| c.id()) {
            tracked.insert(pid);
        }
        spawned
    };
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            tracing::debug!("health check command did not start: {e}");
            return false;
        }
    };
    let pid = child.id();
    let passed = match tokio::time::timeout(timeout, child.wait()).await {
        Ok(Ok(status)) => status.success(),
        Ok(Err(_)) => false,
        Err(_) => {
            if let Some(pid) = pid {
                executor::signal_group(pid, Signal::SIGKILL);
            }
            let _ = child.wait().await;
            false
        }
    };
    if let Some(pid) = pid {
        crate::reaper::tracked().remove(&pid);
    }
    passed
}

/// An HTTP check: `GET` answered with `2xx` or `3xx`.
async fn http(probe: &HttpProbe) -> std::io::Result<bool> {
    let port = u16::try_from(probe.port).map_err(std::io::Error::other)?;
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let request = format!(
        "GET {} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: parley-agent-health\r\n\r\n",
        probe.path
    );
    stream.write_all(request.as_bytes()).await?;
    let mut head = Vec::with_capacity(64);
    let mut buf = [0u8; 64];
    while !head.contains(&b'\n') && head.len() < 1024 {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    Ok(status_passes(&head))
}

/// Whether an HTTP status line (`HTTP/1.x NNN ...`) says 2xx or 3xx.
fn status_passes(head: &[u8]) -> bool {
    let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let mut words = line.split(|b| *b == b' ');
    let proto_ok = words.next().is_some_and(|p| p.starts_with(b"HTTP/"));
    let code = words.next().unwrap_or_default();
    proto_ok
        && code.len() == 3
        && matches!(code[0], b'2' | b'3')
        && code.iter().all(u8::is_ascii_digit)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn status_lines() {
        assert!(status_passes(b"HTTP/1.1 200 OK\r\n"));
        assert!(status_passes(b"HTTP/1.0 302 Found\r\n"));
        assert!(!status_passes(b"HTTP/1.1 500 Oops\r\n"));
        assert!(!status_passes(b"HTTP/1.1 404 Not Found\r\n"));
        assert!(!status_passes(b"garbage"));
        assert!(!status_passes(b""));
    }

    #[tokio::test]
    async fn command_checks_run_in_the_sandbox_and_time_out() {
        let dir = tempfile::tempdir().unwrap();
        let env = BTreeMap::new();
        let ctx = CheckContext {
            sandbox: dir.path(),
            user: None,
            env: &env,
            task_id: "t1",
        };
        let mut check = HealthCheck::command(CommandSpec::Shell("test -f healthy".into()));
        assert!(!run(&check, &ctx).await);
        std::fs::write(dir.path().join("healthy"), "").unwrap();
        assert!(run(&check, &ctx).await, "the cwd is the sandbox");
        let env_line = r#"test "$PARLEY_TASK_ID" = t1 && test "$HOME" = "$PWD" && test -z "$CARGO_MANIFEST_DIR""#;
        let env_check = HealthCheck::command(CommandSpec::Shell(env_line.into()));
        assert!(
            run(&env_check, &ctx).await,
            "the task's environment, not the agent's"
        );
        check.command = Some(CommandSpec::Shell("sleep 30".into()));
        check.timeout_s = Some(0.2);
        let started = std::time::Instant::now();
        assert!(!run(&check, &ctx).await);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the timeout holds"
        );
    }

    #[tokio::test]
    async fn http_checks_read_the_status() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = u32::from(listener.local_addr().unwrap().port());
        let server = tokio::spawn(async move {
            for answer in ["HTTP/1.0 200 OK\r\n\r\n", "HTTP/1.0 503 No\r\n\r\n"] {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut buf = [0u8; 512];
                let n = s.read(&mut buf).await.unwrap();
                assert!(buf[..n].starts_with(b"GET /ready HTTP/1.0"));
                s.write_all(answer.as_bytes()).await.unwrap();
            }
        });
        let env = BTreeMap::new();
        let ctx = CheckContext {
            sandbox: Path::new("/"),
            user: None,
            env: &env,
            task_id: "t1",
        };
        let check = HealthCheck::http(port, "/ready");
        assert!(run(&check, &ctx).await);
        assert!(!run(&check, &ctx).await);
        server.await.unwrap();
        assert!(!run(&check, &ctx).await, "nothing listens any more");
    }
}
