//! Orphan reaping. A task's processes can outlive its main process (a shell's background job,
//! a daemonizing child). The agent makes itself a *child subreaper* (Linux `prctl`), so such
//! orphans are re-parented to the agent instead of to PID 1 — which, in many containers, never
//! reaps them, leaving zombies that keep the task's process group alive. The agent then reaps
//! them itself.
//!
//! The agent's own task processes are waited on by tokio; reaping one of those here would steal
//! its exit status. So every pid tokio waits for is registered in [`tracked`] while it is
//! spawned (the lock is held across the spawn, so the reaper never sees an unregistered child),
//! and the reaper only reaps zombie children that are not registered.

use std::collections::HashSet;
use std::sync::{LazyLock, Mutex, MutexGuard};
use std::time::Duration;

use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::Pid;
use tokio_util::sync::CancellationToken;

/// Pids of children that tokio waits for. Process-wide: several agents may share a process.
static TRACKED: LazyLock<Mutex<HashSet<u32>>> = LazyLock::new(|| Mutex::new(HashSet::new()));

/// The registry of children tokio waits for.
pub(crate) fn tracked() -> MutexGuard<'static, HashSet<u32>> {
    TRACKED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Makes this process the subreaper of its descendants; false where that is not possible.
pub(crate) fn become_subreaper() -> bool {
    #[cfg(target_os = "linux")]
    {
        match nix::sys::prctl::set_child_subreaper(true) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!("cannot become a child subreaper: {e}");
                false
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    false
}

/// Reaps zombie children that tokio does not wait for; returns how many.
pub(crate) fn reap_orphans() -> usize {
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let tracked = tracked();
    let mut reaped = 0;
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if tracked.contains(&pid) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let mut fields = stat[close + 1..].split_whitespace();
        let (Some(state), Some(ppid)) = (fields.next(), fields.next()) else {
            continue;
        };
        if state != "Z" || ppid.parse::<u32>().ok() != Some(me) {
            continue;
        }
        let Ok(raw) = i32::try_from(pid) else {
            continue;
        };
        if waitpid(Pid::from_raw(raw), Some(WaitPidFlag::WNOHANG)).is_ok() {
            reaped += 1;
        }
    }
    reaped
}

/// Reaps orphans every `interval` until cancelled.
pub(crate) async fn reaper_loop(interval: Duration, cancel: CancellationToken) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            () = cancel.cancelled() => return,
        }
        let n = tokio::task::spawn_blocking(reap_orphans).await.unwrap_or(0);
        if n > 0 {
            tracing::debug!(reaped = n, "reaped orphaned task processes");
        }
    }
}
