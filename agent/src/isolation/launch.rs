//! The isolated launcher: `parley-launch` (or a hidden mode of the `agent` binary,
//! [`LAUNCH_ARG`]), which the agent starts in place of an unisolated task's `sh` wrapper.
//!
//! ```text
//! parley-launch outer ...   (outside the task's cgroup; leader of the task's process group)
//!   unshare(pid, mount, ipc, uts); fork:
//!     the init (pid 1 of the new namespace)
//!       join the cgroup (0 > cgroup.procs), mounts private, image, /proc, tmpfs /tmp,
//!       hostname, no_new_privs, empty capability bounding and inheritable sets, uid/gid;
//!       exec the task
//!   wait; write the exit file (opened before the unshare); exit with the task's code
//! ```
//!
//! Every step is a system call of these two processes: no other program runs between the
//! agent and the task, and the launcher is loaded once per launch (the init is a fork of it,
//! through the `fork` crate, which forks only a single-threaded process). There used to be an
//! `sh` wrapper before the outer stage, an exec of the launcher for the init and, for a root
//! task, util-linux's `setpriv` after it: three execs more per launch.
//!
//! The outer stage blocks SIGTERM (so a kill's SIGTERM reaches the task and the outer stage
//! outlives it, as an unisolated task's wrapper does), waits for the init and exits with its
//! code (128 + the signal when it was killed). The init unblocks SIGTERM before exec'ing the
//! task, which then is pid 1 of its namespace: when it ends, the kernel kills every process
//! left in the namespace (a `setsid()` child too).

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use nix::mount::{mount, MsFlags};
use nix::sched::{unshare, CloneFlags};
use nix::sys::signal::{sigprocmask, SigSet, SigmaskHow, Signal};

use crate::image::RootfsPlan;

/// The first argument that makes the `agent` binary the launcher.
pub const LAUNCH_ARG: &str = "__parley-launch";

/// The exit code of a launcher that could not set the task up (its message is on stderr, the
/// task's `stderr` file).
pub const SETUP_FAILED: i32 = 125;

/// Why the launcher's arguments do not parse (they are the agent's own, never a user's).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaunchArgsError {
    /// A flag without its value.
    #[error("{flag} needs a value")]
    NoValue {
        /// The flag.
        flag: String,
    },
    /// `--user` not `UID:GID`.
    #[error("bad --user {value:?}")]
    User {
        /// The value given.
        value: String,
    },
    /// An argument the launcher does not know.
    #[error("unknown launcher argument {arg:?}")]
    Unknown {
        /// The argument.
        arg: OsString,
    },
    /// Nothing after `--`.
    #[error("no command after --")]
    NoCommand,
}

/// What the launcher is told, as arguments after [`LAUNCH_ARG`] and the stage.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LaunchSpec {
    /// The task's hostname (its id, at most 64 bytes).
    pub hostname: String,
    /// The `cgroup.procs` files the init joins.
    pub procs: Vec<PathBuf>,
    /// uid and gid to run the task as.
    pub user: Option<(u32, u32)>,
    /// The root filesystem plan, as JSON, when the task has an image.
    pub image: Option<String>,
    /// A network namespace of its own with only the loopback interface (brought up with
    /// [`LaunchSpec::ip`]).
    pub net_loopback: bool,
    /// The `ip` binary (iproute2) that brings `lo` up in a new network namespace.
    pub ip: Option<PathBuf>,
    /// Where the outer stage writes the task's exit code (the sandbox's exit file, which the
    /// `sh` wrapper of an unisolated task writes), so a restarted agent can read how it ended.
    pub exit_file: Option<PathBuf>,
    /// The task's program and arguments.
    pub argv: Vec<OsString>,
}

impl LaunchSpec {
    /// The arguments after the stage.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut out: Vec<OsString> = vec!["--hostname".into(), self.hostname.clone().into()];
        for p in &self.procs {
            out.push("--procs".into());
            out.push(p.into());
        }
        if let Some((uid, gid)) = self.user {
            out.push("--user".into());
            out.push(format!("{uid}:{gid}").into());
        }
        if let Some(image) = &self.image {
            out.push("--image".into());
            out.push(image.into());
        }
        if self.net_loopback {
            out.push("--net-loopback".into());
        }
        if let Some(ip) = &self.ip {
            out.push("--ip".into());
            out.push(ip.into());
        }
        if let Some(file) = &self.exit_file {
            out.push("--exit-file".into());
            out.push(file.into());
        }
        out.push("--".into());
        out.extend(self.argv.iter().cloned());
        out
    }

    /// Parses [`LaunchSpec::to_args`]'s form.
    pub fn parse(args: &[OsString]) -> Result<LaunchSpec, LaunchArgsError> {
        let mut spec = LaunchSpec::default();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut value = || {
                it.next().cloned().ok_or_else(|| LaunchArgsError::NoValue {
                    flag: a.to_string_lossy().into_owned(),
                })
            };
            match a.to_str() {
                Some("--hostname") => spec.hostname = value()?.to_string_lossy().into_owned(),
                Some("--procs") => spec.procs.push(value()?.into()),
                Some("--user") => {
                    let v = value()?.to_string_lossy().into_owned();
                    let parsed = v
                        .split_once(':')
                        .and_then(|(u, g)| Some((u.parse().ok()?, g.parse().ok()?)));
                    spec.user = Some(parsed.ok_or(LaunchArgsError::User { value: v })?);
                }
                Some("--image") => spec.image = Some(value()?.to_string_lossy().into_owned()),
                Some("--net-loopback") => spec.net_loopback = true,
                Some("--ip") => spec.ip = Some(value()?.into()),
                Some("--exit-file") => spec.exit_file = Some(value()?.into()),
                Some("--") => {
                    spec.argv = it.cloned().collect();
                    break;
                }
                _ => return Err(LaunchArgsError::Unknown { arg: a.clone() }),
            }
        }
        if spec.argv.is_empty() {
            return Err(LaunchArgsError::NoCommand);
        }
        Ok(spec)
    }
}

/// Runs the launcher for `args` (everything after [`LAUNCH_ARG`]) and returns the process's
/// exit code.
pub fn main(args: &[OsString]) -> i32 {
    // `agent __parley-launch outer ...` or `parley-launch outer ...`.
    let args = match args.split_first() {
        Some((first, rest)) if first == LAUNCH_ARG => rest,
        _ => args,
    };
    let (stage, rest) = match args.split_first() {
        Some((s, rest)) => (s.to_string_lossy().into_owned(), rest),
        None => return fail("no stage"),
    };
    let spec = match LaunchSpec::parse(rest) {
        Ok(spec) => spec,
        Err(e) => return fail(&e.to_string()),
    };
    match stage.as_str() {
        "outer" => {
            // Opened before the outer stage unshares the mount namespace, which it shares with
            // the init: the init mounts a private `/tmp` (and an image's root) over the paths
            // the exit file may lie under, so writing it by name afterwards would miss the
            // sandbox (it did, for agents whose work directory is under `/tmp`).
            let exit_file = spec.exit_file.as_deref().map(open_exit_file);
            let code = outer(&spec);
            match exit_file {
                // Best effort, as the wrapper's `echo`: the agent reads the child's status
                // anyway, the file only serves an agent that restarted meanwhile.
                Some(Ok(mut file)) => {
                    let _ = writeln!(file, "{code}");
                }
                Some(Err(e)) => eprintln!("parley launcher: cannot write the exit file: {e}"),
                None => {}
            }
            code
        }
        other => fail(&format!("unknown stage {other:?}")),
    }
}

/// Creates (empty) the file the outer stage writes the task's exit code into, never through a
/// symbolic link (the sandbox is the task's to write; the launcher runs as root).
fn open_exit_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(path)
}

fn fail(message: &str) -> i32 {
    eprintln!("parley launcher: {message}");
    SETUP_FAILED
}

fn sigterm() -> SigSet {
    let mut set = SigSet::empty();
    set.add(Signal::SIGTERM);
    set
}

/// New namespaces, the init forked into them, its exit passed on.
fn outer(spec: &LaunchSpec) -> i32 {
    if let Err(e) = sigprocmask(SigmaskHow::SIG_BLOCK, Some(&sigterm()), None) {
        return fail(&format!("cannot block SIGTERM: {e}"));
    }
    let mut flags = CloneFlags::CLONE_NEWPID
        | CloneFlags::CLONE_NEWNS
        | CloneFlags::CLONE_NEWIPC
        | CloneFlags::CLONE_NEWUTS;
    if spec.net_loopback {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    if let Err(e) = unshare(flags) {
        return fail(&format!("unshare({flags:?}): {e}"));
    }
    // A fork, not an exec of this program again: the launcher has one thread, and the init
    // only sets up and execs the task, so the copy costs less than loading the launcher anew.
    match fork::fork() {
        Ok(fork::Forked::Child) => match init(spec) {
            Ok(never) => match never {},
            Err(e) => std::process::exit(fail(&e)),
        },
        Ok(fork::Forked::Parent(child)) => wait_for(child),
        Err(e) => fail(&format!("cannot start the task's init: {e}")),
    }
}

/// Waits for the init and returns its exit code (128 + the signal that killed it).
fn wait_for(child: nix::unistd::Pid) -> i32 {
    use nix::sys::wait::{waitpid, WaitStatus};
    loop {
        match waitpid(child, None) {
            Ok(WaitStatus::Exited(_, code)) => return code,
            Ok(WaitStatus::Signaled(_, sig, _)) => return 128 + sig as i32,
            Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return fail(&format!("cannot wait for the task's init: {e}")),
        }
    }
}

/// Inside the new namespaces: set up, then exec the task (returns only on error).
fn init(spec: &LaunchSpec) -> Result<std::convert::Infallible, String> {
    for procs in &spec.procs {
        std::fs::write(procs, "0")
            .map_err(|e| format!("cannot join the cgroup {}: {e}", procs.display()))?;
    }
    if spec.net_loopback {
        let ip = spec.ip.as_ref().ok_or("no ip binary to bring lo up")?;
        let up = Command::new(ip)
            .args(["link", "set", "lo", "up"])
            .env_clear()
            .status()
            .map_err(|e| format!("cannot run {}: {e}", ip.display()))?;
        if !up.success() {
            return Err(format!("{} link set lo up: {up}", ip.display()));
        }
    }
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| format!("cannot make mounts private: {e}"))?;
    if let Some(json) = &spec.image {
        let plan: RootfsPlan =
            serde_json::from_str(json).map_err(|e| format!("bad image plan: {e}"))?;
        crate::image::enter(&plan).map_err(|e| e.to_string())?;
    }
    let nodev = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    mount(
        Some("proc"),
        "/proc",
        Some("proc"),
        nodev | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(|e| format!("cannot mount /proc: {e}"))?;
    mount(
        Some("tmpfs"),
        "/tmp",
        Some("tmpfs"),
        nodev,
        Some("mode=1777"),
    )
    .map_err(|e| format!("cannot mount a private /tmp: {e}"))?;
    // A task that stays root must not reach the cgroup files (it could move itself out of its
    // cgroup): an empty read-only tmpfs hides them, and it loses every capability below, so it
    // cannot unmount it.
    let root_task = spec.user.is_none_or(|(uid, _)| uid == 0);
    if root_task && Path::new("/sys/fs/cgroup").is_dir() {
        mount(
            Some("tmpfs"),
            "/sys/fs/cgroup",
            Some("tmpfs"),
            nodev | MsFlags::MS_NOEXEC | MsFlags::MS_RDONLY,
            Some("size=0"),
        )
        .map_err(|e| format!("cannot hide /sys/fs/cgroup: {e}"))?;
    }
    let host: String = spec.hostname.chars().take(64).collect();
    nix::unistd::sethostname(&host).map_err(|e| format!("cannot set the hostname: {e}"))?;
    nix::sys::prctl::set_no_new_privs().map_err(|e| format!("no_new_privs: {e}"))?;
    sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&sigterm()), None)
        .map_err(|e| format!("cannot unblock SIGTERM: {e}"))?;
    drop_capabilities()?;
    let (program, args) = spec.argv.split_first().ok_or("no command")?;
    let mut cmd = Command::new(program);
    cmd.args(args);
    // A task user's exec (after the uid change) keeps no capability either way.
    if let Some((uid, gid)) = spec.user {
        cmd.uid(uid).gid(gid);
    }
    let e = cmd.exec();
    Err(format!("cannot run {program:?}: {e}"))
}

/// Empties the capability bounding set and the inheritable set (the ambient set goes with
/// it): the exec then leaves the task no capability, root or not (a root process's new
/// permitted set is its inheritable set and the file's, bounded by the bounding set). This
/// process keeps its effective set until the exec, for the uid and gid change.
fn drop_capabilities() -> Result<(), String> {
    use caps::CapSet;
    // Every capability this kernel knows (`cap_last_cap`), including ones newer than the
    // crate's list, which it cannot name: those are checked below.
    for cap in caps::runtime::thread_all_supported() {
        caps::drop(None, CapSet::Bounding, cap)
            .map_err(|e| format!("cannot drop {cap} from the bounding set: {e}"))?;
    }
    caps::clear(None, CapSet::Inheritable)
        .map_err(|e| format!("cannot clear the inheritable capabilities: {e}"))?;
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("cannot read /proc/self/status: {e}"))?;
    let left = status
        .lines()
        .find_map(|l| l.strip_prefix("CapBnd:"))
        .map(str::trim);
    if left.is_some_and(|hex| hex.chars().all(|c| c == '0')) {
        Ok(())
    } else {
        Err(format!(
            "capabilities left in the bounding set: {}",
            left.unwrap_or("(no CapBnd line)")
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn arguments_round_trip_and_bad_ones_are_named() {
        let spec = LaunchSpec {
            hostname: "t1".into(),
            procs: vec!["/a/cgroup.procs".into(), "/b/cgroup.procs".into()],
            user: Some((65534, 65534)),
            image: Some("{}".into()),
            net_loopback: true,
            ip: Some("/usr/sbin/ip".into()),
            exit_file: Some("/w/sandbox/.parley_exit".into()),
            argv: vec!["sh".into(), "-c".into(), "echo --procs".into()],
        };
        assert_eq!(LaunchSpec::parse(&spec.to_args()).unwrap(), spec);
        let bad = |v: &[&str]| {
            LaunchSpec::parse(&v.iter().map(OsString::from).collect::<Vec<_>>())
                .unwrap_err()
                .to_string()
        };
        assert!(bad(&["--user", "x", "--", "true"]).contains("--user"));
        assert!(bad(&["--hostname"]).contains("--hostname"));
        assert!(bad(&["--hostname", "h"]).contains("no command"));
        assert!(bad(&["--what", "--", "true"]).contains("--what"));
        assert_eq!(main(&[OsString::from("sideways")]), SETUP_FAILED);
    }
}
