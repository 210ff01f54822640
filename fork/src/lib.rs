//! `fork(2)` behind a safe API, for a process that has one thread.
//!
//! The isolated launcher (`parley-launch`) starts a task's init by forking itself after it has
//! unshared the task's namespaces, so that a launch costs one exec of the launcher instead of
//! two. `fork` is unsafe in Rust because a child of a multi-threaded process inherits locks
//! held by threads that do not exist in it; [`fork`] checks first that the calling process has
//! one thread, and refuses otherwise. This is the workspace's only `unsafe` call; every other
//! crate forbids `unsafe`.
//!
//! Module map: this file alone: [`fork`], [`Forked`], [`ForkError`].

use nix::unistd::Pid;

/// Which side of the fork the caller is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forked {
    /// The new process.
    Child,
    /// The calling process, with the child's pid.
    Parent(Pid),
}

/// Why [`fork`] did not fork.
#[derive(Debug, thiserror::Error)]
pub enum ForkError {
    /// The process has more than one thread, so a child could inherit a lock that no thread
    /// of it would ever release.
    #[error("cannot fork a process with {0} threads")]
    Threads(usize),
    /// The thread count could not be read from `/proc/self/status`, so [`fork`] cannot tell
    /// whether forking is safe.
    #[error("cannot fork without knowing the number of threads: {0}")]
    UnknownThreads(String),
    /// The system call failed.
    #[error("fork: {0}")]
    Sys(#[from] nix::Error),
}

/// The number of threads of this process, from `/proc/self/status`.
fn threads() -> Result<usize, ForkError> {
    let unknown = |why: String| ForkError::UnknownThreads(format!("/proc/self/status: {why}"));
    let status =
        std::fs::read_to_string("/proc/self/status").map_err(|e| unknown(e.to_string()))?;
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .map(str::trim)
        .ok_or_else(|| unknown("no Threads line".into()))?;
    line.parse()
        .map_err(|_| unknown(format!("unreadable Threads line {line:?}")))
}

/// Forks the calling process, which must have exactly one thread.
pub fn fork() -> Result<Forked, ForkError> {
    let n = threads()?;
    if n != 1 {
        return Err(ForkError::Threads(n));
    }
    // SAFETY: the process has one thread, checked just above; only that thread could start
    // another, and it is here. So the child is a complete copy of a single-threaded process:
    // no lock (the allocator's, stdio's) can be held by a thread missing from it.
    #[allow(unsafe_code)]
    let forked = unsafe { nix::unistd::fork() }?;
    Ok(match forked {
        nix::unistd::ForkResult::Child => Forked::Child,
        nix::unistd::ForkResult::Parent { child } => Forked::Parent(child),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multi_threaded_process_is_refused() {
        // A thread of its own, whatever thread the harness runs the test on.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || rx.recv());
        assert!(threads().expect("readable") >= 2);
        let err = fork().expect_err("the test process has several threads");
        assert!(matches!(err, ForkError::Threads(_)), "{err}");
        assert!(
            err.to_string().starts_with("cannot fork a process with "),
            "{err}"
        );
        drop(tx);
        let _ = other.join();
    }
}
