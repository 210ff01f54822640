//! The isolated launcher: a hidden mode of the `agent` binary ([`LAUNCH_ARG`]), re-executed by
//! the task's wrapper, in two stages and without `unsafe`.
//!
//! ```text
//! sh wrapper (exit file)  ->  agent __parley-launch outer ...   (outside the task's cgroup)
//!                               unshare(pid, mount, ipc, uts); spawn:
//!                             agent __parley-launch init ...    (pid 1 of the new namespace)
//!                               join the cgroup (0 > cgroup.procs), mounts private, image,
//!                               /proc, tmpfs /tmp, hostname, no_new_privs, uid/gid; exec task
//! ```
//!
//! The outer stage blocks SIGTERM (so a kill's SIGTERM reaches the task and the outer stage
//! outlives it, as the wrapper does), waits for the init and exits with its code (128 + the
//! signal when it was killed). The init stage unblocks SIGTERM before exec'ing the task, which
//! then is pid 1 of its namespace: when it ends, the kernel kills every process left in the
//! namespace (a `setsid()` child too).

use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
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

/// Where util-linux's `setpriv` is looked for (tasks running as root drop their capabilities
/// through it).
pub const SETPRIV: [&str; 2] = ["/usr/bin/setpriv", "/bin/setpriv"];

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
        out.push("--".into());
        out.extend(self.argv.iter().cloned());
        out
    }

    /// Parses [`LaunchSpec::to_args`]'s form.
    pub fn parse(args: &[OsString]) -> Result<LaunchSpec, String> {
        let mut spec = LaunchSpec::default();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut value = || {
                it.next()
                    .cloned()
                    .ok_or_else(|| format!("{} needs a value", a.to_string_lossy()))
            };
            match a.to_str() {
                Some("--hostname") => spec.hostname = value()?.to_string_lossy().into_owned(),
                Some("--procs") => spec.procs.push(value()?.into()),
                Some("--user") => {
                    let v = value()?.to_string_lossy().into_owned();
                    let parsed = v
                        .split_once(':')
                        .and_then(|(u, g)| Some((u.parse().ok()?, g.parse().ok()?)));
                    spec.user = Some(parsed.ok_or_else(|| format!("bad --user {v:?}"))?);
                }
                Some("--image") => spec.image = Some(value()?.to_string_lossy().into_owned()),
                Some("--net-loopback") => spec.net_loopback = true,
                Some("--ip") => spec.ip = Some(value()?.into()),
                Some("--") => {
                    spec.argv = it.cloned().collect();
                    break;
                }
                _ => return Err(format!("unknown launcher argument {a:?}")),
            }
        }
        if spec.argv.is_empty() {
            return Err("no command after --".into());
        }
        Ok(spec)
    }
}

/// Runs the launcher for `args` (everything after [`LAUNCH_ARG`]) and returns the process's
/// exit code; the init stage returns only when the exec failed.
pub fn main(args: &[OsString]) -> i32 {
    // `parley-launch __parley-launch init ...` (as the outer stage runs itself) or
    // `parley-launch outer ...`.
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
        Err(e) => return fail(&e),
    };
    match stage.as_str() {
        "outer" => outer(&spec),
        "init" => match init(&spec) {
            Ok(never) => match never {},
            Err(e) => fail(&e),
        },
        other => fail(&format!("unknown stage {other:?}")),
    }
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

/// New namespaces, the init spawned into them, its exit passed on.
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
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return fail(&format!("cannot find the launcher itself: {e}")),
    };
    let status = Command::new(exe)
        .arg(LAUNCH_ARG)
        .arg("init")
        .args(spec.to_args())
        .status();
    match status {
        Ok(s) => s
            .code()
            .or_else(|| s.signal().map(|sig| 128 + sig))
            .unwrap_or(SETUP_FAILED),
        Err(e) => fail(&format!("cannot start the task's init: {e}")),
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
    let (program, args) = spec.argv.split_first().ok_or("no command")?;
    // A task user loses every capability when the exec changes its uid from 0; a root task
    // loses them through util-linux's setpriv (an empty bounding set: nothing at exec).
    let mut cmd = if root_task {
        let setpriv =
            SETPRIV.iter().map(Path::new).find(|p| p.is_file()).ok_or(
                "a task running as root needs util-linux's setpriv to drop its capabilities",
            )?;
        let mut c = Command::new(setpriv);
        c.args(["--bounding-set=-all", "--inh-caps=-all", "--"]);
        c.arg(program);
        c
    } else {
        Command::new(program)
    };
    cmd.args(args);
    if let Some((uid, gid)) = spec.user {
        cmd.uid(uid).gid(gid);
    }
    let e = cmd.exec();
    Err(format!("cannot run {program:?}: {e}"))
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
            argv: vec!["sh".into(), "-c".into(), "echo --procs".into()],
        };
        assert_eq!(LaunchSpec::parse(&spec.to_args()).unwrap(), spec);
        let bad = |v: &[&str]| {
            LaunchSpec::parse(&v.iter().map(OsString::from).collect::<Vec<_>>()).unwrap_err()
        };
        assert!(bad(&["--user", "x", "--", "true"]).contains("--user"));
        assert!(bad(&["--hostname"]).contains("--hostname"));
        assert!(bad(&["--hostname", "h"]).contains("no command"));
        assert!(bad(&["--what", "--", "true"]).contains("--what"));
        assert_eq!(main(&[OsString::from("sideways")]), SETUP_FAILED);
    }
}
