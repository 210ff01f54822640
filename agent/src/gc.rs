//! Sandbox garbage collection: a finished task's sandbox (its working directory, `stdout` and
//! `stderr`) is kept for [`AgentConfig::sandbox_retention`](crate::AgentConfig) after it was
//! last written, then deleted, so a long-lived agent does not fill its disk. Sandboxes of tasks
//! that are not terminal are never touched, whatever their age.
//!
//! The collector scans `WORK_DIR/sandboxes/FRAMEWORK/TASK` rather than the agent's books, so it
//! also removes what an earlier run of the agent left behind (tasks it has since forgotten).
//! A sandbox's age is that of its newest entry (the wrapper writes the exit code file when the
//! task ends, so that is about the task's end). Empty framework directories are removed too.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::real::RealAgent;

/// Runs until the agent shuts down: collects at start, then every `retention / 4` (between one
/// second and ten minutes).
pub(crate) async fn gc_loop(agent: Arc<RealAgent>) {
    let retention = agent.config.sandbox_retention;
    let every = (retention / 4).clamp(Duration::from_secs(1), Duration::from_secs(600));
    let root = agent.config.work_dir.join("sandboxes");
    loop {
        let live = agent.live_sandboxes();
        let root = root.clone();
        // Deleting trees is blocking file system work.
        let removed = tokio::task::spawn_blocking(move || {
            collect(&root, &live, retention, SystemTime::now())
        })
        .await;
        match removed {
            Ok(removed) if !removed.is_empty() => {
                tracing::info!(count = removed.len(), "removed old sandboxes");
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "sandbox collection failed"),
        }
        tokio::select! {
            () = agent.cancel.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
    }
}

/// Removes every sandbox under `root` (`root/FRAMEWORK/TASK`) that is not in `live` and was
/// last written more than `retention` before `now`; then framework directories left empty.
/// Returns the sandboxes removed. Errors on single entries are logged and skipped.
pub(crate) fn collect(
    root: &Path,
    live: &HashSet<PathBuf>,
    retention: Duration,
    now: SystemTime,
) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    for framework in dirs(root) {
        for sandbox in dirs(&framework) {
            if live.contains(&sandbox) {
                continue;
            }
            let old = newest_write(&sandbox)
                .and_then(|at| now.duration_since(at).ok())
                .is_some_and(|age| age > retention);
            if !old {
                continue;
            }
            match std::fs::remove_dir_all(&sandbox) {
                Ok(()) => removed.push(sandbox),
                Err(e) => {
                    tracing::warn!(sandbox = %sandbox.display(), error = %e, "cannot remove sandbox")
                }
            }
        }
        // Only succeeds when empty, which is what we want.
        let _ = std::fs::remove_dir(&framework);
    }
    removed
}

/// The subdirectories of `dir` (none if it cannot be read).
fn dirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect()
}

/// The latest modification time of `dir` and its direct entries.
fn newest_write(dir: &Path) -> Option<SystemTime> {
    let mut newest = std::fs::metadata(dir).and_then(|m| m.modified()).ok()?;
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.filter_map(Result::ok) {
            if let Ok(at) = entry.metadata().and_then(|m| m.modified()) {
                newest = newest.max(at);
            }
        }
    }
    Some(newest)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn removes_old_finished_sandboxes_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("sandboxes");
        let (old_done, live, young) = (
            root.join("fw1/done"),
            root.join("fw1/running"),
            root.join("fw2/young"),
        );
        for d in [&old_done, &live, &young] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(d.join("stdout"), b"out").unwrap();
        }
        let live_set: HashSet<PathBuf> = [live.clone()].into();
        let retention = Duration::from_secs(3600);

        // Right now nothing is old enough.
        assert!(collect(&root, &live_set, retention, SystemTime::now()).is_empty());

        // Two hours later every sandbox is old; only the live one stays.
        let later = SystemTime::now() + Duration::from_secs(7200);
        let mut removed = collect(&root, &live_set, retention, later);
        removed.sort();
        let mut want = vec![old_done, young];
        want.sort();
        assert_eq!(removed, want);
        assert!(live.join("stdout").exists());
        assert!(root.join("fw1").exists(), "fw1 still holds a live sandbox");
        assert!(
            !root.join("fw2").exists(),
            "an emptied framework dir goes too"
        );
    }

    #[test]
    fn a_missing_root_is_nothing_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let none = collect(
            &dir.path().join("nope"),
            &HashSet::new(),
            Duration::ZERO,
            SystemTime::now(),
        );
        assert!(none.is_empty());
    }
}
