//! Real tasks as OS processes: sandboxes, environment, memory limits, process-group kill, exit
//! status, and re-adoption of processes that outlived an agent restart.
//!
//! Every unisolated task runs under a tiny `sh` wrapper, which is the leader of the task's own
//! process group (`process_group(0)`, no `unsafe` needed); an isolated task's launcher
//! (`parley-launch outer`, see [`crate::isolation::launch`]) takes its place and does the same
//! (SIGTERM blocked, the exit file written):
//!
//! ```text
//! sh -c 'trap : TERM; [memory limit;] "$@"; c=$?; echo $c > "$PARLEY_SANDBOX/.parley_exit"; exit $c' parley-task PROGRAM ARGS...
//! ```
//!
//! - The wrapper applies the memory limit before the task starts: it joins the task's cgroup v2
//!   (when the agent was given a delegated cgroup v2 directory) or sets `ulimit -v` (RLIMIT_AS).
//!   The workspace forbids `unsafe`, so `pre_exec` is not available; a wrapper has no race.
//! - It writes the exit code to the sandbox, so an agent that restarted while the task ran can
//!   still report how it ended.
//! - Killing sends SIGTERM to the whole group, then SIGKILL after the grace period; when the
//!   leader exits, whatever is left in the group gets SIGKILL, so a task leaves no process behind.
//! - A group is signalled only when its process is provably the task's ([`may_signal`]): started
//!   in this boot (`/proc/sys/kernel/random/boot_id`, recorded at spawn and journaled) with the
//!   recorded start time, or, in this boot, no process holds the pid any more (then only the
//!   task's leftovers can carry that process group id: Linux does not hand out a pid that is
//!   still a process group's id). A pid from the journal of an earlier boot, or one re-used by
//!   an unrelated process, is never signalled.
//! - The task's environment is built from nothing ([`BASE_PATH`], `HOME`, the task's `env`, the
//!   `PARLEY_*` variables): nothing of the agent's leaks into it. With a [`TaskUser`] it runs
//!   under that uid and gid, with no supplementary groups, in a sandbox it owns.

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use protocol::TaskSpec;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::OnceLock;

pub use crate::task_user::TaskUser;

pub use crate::engine::code_outcome;
use crate::engine::{Exit, Process, LIMIT_FAILED};
use crate::gpu::TaskGpus;
use crate::image::RootfsPlan;
use crate::isolation::launch::{self, LaunchSpec};
use crate::isolation::task::{finish_cgroup, limits_of, measured};
use crate::isolation::{Isolator, TaskCgroup};
use crate::reaper;

/// The file (inside the sandbox) where the wrapper writes the task's exit code.
pub const EXIT_FILE: &str = ".parley_exit";

/// How memory limits are enforced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryLimits {
    /// `ulimit -v` (RLIMIT_AS) of the task's `mem`, set by the wrapper before the task starts.
    Rlimit,
    /// A cgroup per task under this cgroup v2 directory, with `memory.max` set to the task's
    /// `mem`.
    CgroupV2(PathBuf),
}

impl MemoryLimits {
    /// Cgroup v2 when `root` is given and is a cgroup v2 directory the agent may write;
    /// otherwise RLIMIT_AS.
    pub fn choose(root: Option<&Path>) -> MemoryLimits {
        match root {
            Some(root) if root.join("cgroup.controllers").exists() => {
                let probe = root.join("parley-probe");
                let ok = std::fs::create_dir_all(&probe).is_ok()
                    && probe.join("memory.max").exists()
                    && std::fs::remove_dir(&probe).is_ok();
                if ok {
                    MemoryLimits::CgroupV2(root.to_path_buf())
                } else {
                    tracing::warn!(root = %root.display(), "cgroup v2 directory not usable for memory limits (is the memory controller enabled in its subtree_control?); using RLIMIT_AS");
                    MemoryLimits::Rlimit
                }
            }
            Some(root) => {
                tracing::warn!(root = %root.display(), "not a cgroup v2 directory; using RLIMIT_AS");
                MemoryLimits::Rlimit
            }
            None => MemoryLimits::Rlimit,
        }
    }
}

/// `PATH` of every task unless its `env` sets one.
pub const BASE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The id of the running boot, read once; `None` where the kernel does not provide one.
pub fn boot_id() -> Option<uuid::Uuid> {
    static BOOT: OnceLock<Option<uuid::Uuid>> = OnceLock::new();
    *BOOT.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .ok()?
            .trim()
            .parse()
            .ok()
    })
}

/// The environment variable name of a resource: `PARLEY_` and the name uppercased.
pub fn resource_env_name(resource: &str) -> String {
    format!("PARLEY_{}", resource.to_ascii_uppercase())
}

/// Builds the wrapper command for `spec`, run in `sandbox` with stdout/stderr files there.
fn build_command(
    spec: &TaskSpec,
    sandbox: &Path,
    limits: &MemoryLimits,
    cgroup: Option<&Path>,
    user: Option<&TaskUser>,
    isolated: Option<&Isolated>,
    gpu_env: &[(&'static str, String)],
) -> std::io::Result<tokio::process::Command> {
    // The wrapper catches SIGTERM (a caught signal is reset to the default in the task it
    // execs), so a kill's SIGTERM reaches the task and the wrapper outlives it: the grace
    // period is the task's, not cut short by the wrapper dying first.
    let mut script = String::from("trap : TERM; ");
    let mem_millis = spec.resources.millis("mem");
    // An isolated task's memory is its cgroup's; the launcher joins it.
    if mem_millis > 0 && isolated.is_none() {
        match (limits, cgroup) {
            (MemoryLimits::CgroupV2(_), Some(_)) => {
                script.push_str("echo $$ > \"$PARLEY_CGROUP_PROCS\" || exit 125; ");
            }
            _ => {
                // mem is in MiB (thousandths on the wire); ulimit -v takes KiB.
                let kib = (mem_millis * 1024).div_ceil(1000);
                script.push_str(&format!("ulimit -v {kib} || exit {LIMIT_FAILED}; "));
            }
        }
    }
    script.push_str(&format!(
        "\"$@\"; c=$?; echo $c > \"$PARLEY_SANDBOX/{EXIT_FILE}\" 2>/dev/null; exit $c"
    ));

    let argv: Vec<std::ffi::OsString> = match &spec.command {
        protocol::CommandSpec::Shell(line) => {
            vec!["sh".into(), "-c".into(), line.into()]
        }
        protocol::CommandSpec::Argv(argv) => argv.iter().map(Into::into).collect(),
    };
    let mut cmd = match isolated {
        // The launcher is the wrapper: it blocks SIGTERM and writes the exit file itself.
        Some(iso) => {
            let launch = LaunchSpec {
                hostname: spec.task_id.to_string(),
                procs: iso.cgroup.procs_files(),
                user: user.map(|u| (u.uid, u.gid)),
                image: iso.image.clone(),
                net_loopback: iso.net_loopback,
                ip: iso.ip.clone(),
                exit_file: Some(sandbox.join(EXIT_FILE)),
                argv,
            };
            let mut cmd = tokio::process::Command::new(&iso.launcher);
            cmd.arg(launch::LAUNCH_ARG)
                .arg("outer")
                .args(launch.to_args());
            cmd
        }
        None => {
            // An absolute path: the task's own PATH must not choose the wrapper.
            let mut cmd = tokio::process::Command::new("/bin/sh");
            cmd.arg("-c").arg(script).arg("parley-task").args(argv);
            cmd
        }
    };
    cmd.current_dir(sandbox)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(sandbox.join("stdout"))?)
        .stderr(std::fs::File::create(sandbox.join("stderr"))?)
        .process_group(0);
    // Nothing of the agent's environment: the base, then the task's own variables, then the
    // agent's PARLEY_*, which always win.
    cmd.env_clear();
    cmd.env("PATH", BASE_PATH);
    cmd.env("HOME", sandbox);
    if let Some(user) = user {
        // An isolated task's launcher switches user itself, after its set-up as root.
        if isolated.is_none() {
            cmd.uid(user.uid).gid(user.gid);
        }
        if let Some(name) = &user.name {
            cmd.env("USER", name).env("LOGNAME", name);
        }
    }
    cmd.envs(&spec.env);
    // Its GPUs (or none, on an agent with GPUs), after its own env: a task cannot widen them.
    cmd.envs(gpu_env.iter().map(|(k, v)| (*k, v)));
    for (name, millis) in spec.resources.iter() {
        cmd.env(resource_env_name(name.as_str()), format_units(millis));
    }
    cmd.env("PARLEY_TASK_ID", spec.task_id.as_str());
    cmd.env("PARLEY_SANDBOX", sandbox);
    if let Some(cg) = cgroup {
        cmd.env("PARLEY_CGROUP_PROCS", cg.join("cgroup.procs"));
    }
    Ok(cmd)
}

/// `1500` → `1.5`, `4096000` → `4096` (f64 prints whole numbers without a fraction, and is
/// exact for every valid amount).
fn format_units(millis: u64) -> String {
    format!("{}", millis as f64 / 1000.0)
}

/// Creates the task's cgroup with its memory limit; `None` when limits are not cgroups. With a
/// task user, that user may move the task into it (`cgroup.procs`), nothing more.
fn make_cgroup(
    limits: &MemoryLimits,
    spec: &TaskSpec,
    sandbox: &Path,
    user: Option<&TaskUser>,
) -> Option<PathBuf> {
    let MemoryLimits::CgroupV2(root) = limits else {
        return None;
    };
    let mem_millis = spec.resources.millis("mem");
    if mem_millis == 0 {
        return None;
    }
    let leaf = sandbox.file_name()?.to_string_lossy().into_owned();
    let dir = root.join(format!("parley-{leaf}"));
    let bytes = (mem_millis * 1024 * 1024).div_ceil(1000);
    let procs = dir.join("cgroup.procs");
    match std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(dir.join("memory.max"), bytes.to_string()))
        .and_then(|()| match user {
            Some(u) => std::os::unix::fs::chown(&procs, Some(u.uid), Some(u.gid)),
            None => Ok(()),
        }) {
        Ok(()) => Some(dir),
        Err(e) => {
            tracing::warn!(cgroup = %dir.display(), "cannot create task cgroup, using RLIMIT_AS: {e}");
            None
        }
    }
}

/// How a process's exit status reads to the engine.
pub fn exit_of(status: ExitStatus) -> Exit {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => Exit::Code(code),
        (None, Some(sig)) => Exit::Signal(sig),
        (None, None) => Exit::Unknown("exited with an unknown status"),
    }
}

/// Sends `signal` to a process group; a group that is already gone is not an error.
pub fn signal_group(pgid: u32, signal: Signal) {
    let Ok(raw) = i32::try_from(pgid) else { return };
    if raw <= 1 {
        return; // Never signal "every process" or init, whatever the journal says.
    }
    match killpg(Pid::from_raw(raw), signal) {
        Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
        Err(e) => tracing::warn!(pgid, ?signal, "cannot signal process group: {e}"),
    }
}

/// The state letter and start time (clock ticks since boot) of a process, from
/// `/proc/PID/stat`; `None` when it does not exist or cannot be read.
pub fn proc_stat(pid: u32) -> Option<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses; fields after the last ')'
    // start with field 3 (state); field 22 (starttime) is the 20th of them.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let start = fields.nth(18)?.parse().ok()?;
    Some((state, start))
}

/// True when `process` started in this boot (`boot` is this boot's id).
fn this_boot(process: &Process, boot: Option<uuid::Uuid>) -> bool {
    matches!((process.boot_id, boot), (Some(then), Some(now)) if then == now)
}

/// True when `process` is live (not a zombie), started in this boot and at its recorded start
/// time: the task's own process, not one that re-uses its pid.
pub fn same_process_alive(process: &Process) -> bool {
    same_process_alive_in(process, boot_id())
}

fn same_process_alive_in(process: &Process, boot: Option<uuid::Uuid>) -> bool {
    if !this_boot(process, boot) {
        // A journal of an earlier boot (or without a boot id): the pid means nothing now.
        return false;
    }
    match (proc_stat(process.pid), process.start_time) {
        (Some((state, _)), _) if state == 'Z' || state == 'X' => false,
        (Some((_, now)), Some(then)) => now == then,
        // Without a recorded start time a re-used pid cannot be told apart: assume gone.
        _ => false,
    }
}

/// Whether the process group `process.pid` provably holds only the task's processes, so it
/// may be signalled: the process started in this boot, and the pid is either still the task's
/// process (same start time; a zombie too, its group may live on) or held by no process at all
/// (then only the task's leftovers can carry that group id).
pub fn may_signal(process: &Process) -> bool {
    may_signal_in(process, boot_id())
}

fn may_signal_in(process: &Process, boot: Option<uuid::Uuid>) -> bool {
    if !this_boot(process, boot) {
        return false;
    }
    match (proc_stat(process.pid), process.start_time) {
        (None, _) => true,
        (Some((_, now)), Some(then)) => now == then,
        (Some(_), None) => false,
    }
}

/// Signals the task's process group if [`may_signal`] says it is the task's; otherwise logs
/// and sends nothing.
pub fn signal_task(process: &Process, signal: Signal) {
    if may_signal(process) {
        signal_group(process.pid, signal);
    } else {
        tracing::warn!(
            pid = process.pid,
            ?signal,
            "not signalling: the process group is not provably the task's (another boot, or its pid re-used)"
        );
    }
}

/// Reads the exit code the wrapper left in a sandbox.
pub fn read_exit_file(sandbox: &Path) -> Option<i32> {
    std::fs::read_to_string(sandbox.join(EXIT_FILE))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// A started task process: its child handle, its [`Process`] and its cgroup.
#[derive(Debug)]
pub struct Running {
    child: tokio::process::Child,
    /// Its pid and start time.
    pub process: Process,
    cgroup: Option<PathBuf>,
    isolated: Option<(TaskCgroup, Option<u64>)>,
    rootfs: Option<RootfsPlan>,
}

/// An isolated task's launch: its cgroup (created), the launcher, its image plan (JSON).
#[derive(Debug)]
struct Isolated {
    cgroup: TaskCgroup,
    launcher: PathBuf,
    image: Option<String>,
    rootfs: Option<RootfsPlan>,
    net_loopback: bool,
    ip: Option<PathBuf>,
}

/// Why a task's process did not start (the message of the task's `failed` status).
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The wrapper could not be started (or its output files created).
    #[error("cannot start: {0}")]
    Start(#[from] std::io::Error),
    /// It started and was gone before its pid could be read.
    #[error("process vanished at start")]
    Vanished,
    /// Its isolation could not be set up.
    #[error("cannot isolate: {0}")]
    Isolation(String),
}

/// Starts the task's process in its sandbox, under the wrapper (memory limit, exit file), as
/// `user` when given.
pub fn spawn(
    spec: &TaskSpec,
    sandbox: &Path,
    limits: &MemoryLimits,
    user: Option<&TaskUser>,
    isolator: Option<&Isolator>,
    gpus: &TaskGpus,
) -> Result<Running, SpawnError> {
    let mut isolated = match isolator {
        Some(iso) => Some(isolate(iso, spec, sandbox, &gpus.device_rules)?),
        None => None,
    };
    let cgroup = match isolated {
        Some(_) => None,
        None => make_cgroup(limits, spec, sandbox, user),
    };
    let built = build_command(
        spec,
        sandbox,
        limits,
        cgroup.as_deref(),
        user,
        isolated.as_ref(),
        &gpus.env,
    );
    let spawned = built.and_then(|mut cmd| {
        // Registered before the reaper can see it exit, so the reaper leaves it to tokio.
        let mut tracked = reaper::tracked();
        let child = cmd.spawn()?;
        if let Some(pid) = child.id() {
            tracked.insert(pid);
        }
        Ok(child)
    });
    let child = match spawned {
        Ok(child) => child,
        Err(e) => {
            if let Some(iso) = &isolated {
                finish_cgroup(&iso.cgroup);
                if let Some(plan) = &iso.rootfs {
                    let _ = plan.cleanup();
                }
            }
            return Err(e.into());
        }
    };
    let pid = child.id().ok_or(SpawnError::Vanished)?;
    let start_time = proc_stat(pid).map(|(_, t)| t);
    Ok(Running {
        child,
        process: Process {
            pid,
            start_time,
            boot_id: boot_id(),
        },
        cgroup,
        rootfs: isolated.as_mut().and_then(|i| i.rootfs.take()),
        isolated: isolated.map(|i| (i.cgroup, limits_of(spec, 0).memory_bytes)),
    })
}

/// Prepares an isolated task's root filesystem when it names an image (unpacked once into the
/// cache; its overlay directories beside the sandbox).
fn rootfs(
    iso: &Isolator,
    spec: &TaskSpec,
    sandbox: &Path,
) -> Result<Option<RootfsPlan>, SpawnError> {
    let Some(name) = spec.isolation.as_ref().and_then(|i| i.image.as_deref()) else {
        return Ok(None);
    };
    let fail = |e: crate::image::ImageError| SpawnError::Isolation(format!("isolation.image: {e}"));
    let store = iso
        .images
        .as_ref()
        .ok_or_else(|| fail(crate::image::ImageError::Unsupported))?;
    let task_dir = sandbox.parent().unwrap_or(sandbox);
    store
        .prepare(name, sandbox, task_dir)
        .map(Some)
        .map_err(fail)
}

/// Creates an isolated task's cgroup with its limits, and its root filesystem when it names an
/// image.
fn isolate(
    iso: &Isolator,
    spec: &TaskSpec,
    sandbox: &Path,
    device_rules: &[String],
) -> Result<Isolated, SpawnError> {
    let rootfs = rootfs(iso, spec, sandbox)?;
    let image = match &rootfs {
        Some(plan) => Some(serde_json::to_string(plan).map_err(|e| {
            SpawnError::Isolation(format!("isolation.image: cannot write the plan: {e}"))
        })?),
        None => None,
    };
    let undo = |plan: &Option<RootfsPlan>| {
        if let Some(p) = plan {
            let _ = p.cleanup();
        }
    };
    let Some(cgroup) = iso.task_cgroup(sandbox) else {
        undo(&rootfs);
        return Err(SpawnError::Isolation("no cgroup for this sandbox".into()));
    };
    let mut limits = limits_of(spec, iso.default_pids);
    limits.devices = device_rules.to_vec();
    if let Err(e) = cgroup.create(&limits) {
        undo(&rootfs);
        return Err(SpawnError::Isolation(format!(
            "cannot create the task's cgroup: {e}"
        )));
    }
    let net_loopback = spec.isolation.as_ref().and_then(|i| i.network)
        == Some(protocol::isolation::NetworkMode::Loopback);
    if net_loopback && iso.ip.is_none() {
        finish_cgroup(&cgroup);
        undo(&rootfs);
        return Err(SpawnError::Isolation(
            "isolation.network=loopback: this agent has no ip binary".into(),
        ));
    }
    Ok(Isolated {
        cgroup,
        launcher: iso.launcher.clone(),
        image,
        rootfs,
        net_loopback,
        ip: iso.ip.clone(),
    })
}

impl Running {
    /// Waits for the process to end; then kills whatever the task left in its group and
    /// removes its cgroup. Dropping the future instead (agent shutdown) leaves the process
    /// running: dropping the child neither kills nor leaks it (tokio reaps orphaned children).
    pub async fn wait(mut self) -> Exit {
        let exit = match self.child.wait().await {
            Ok(status) => exit_of(status),
            Err(e) => Exit::Error(format!("cannot wait for the process: {e}")),
        };
        reaper::tracked().remove(&self.process.pid);
        // Whatever the task left in its group goes with it.
        signal_task(&self.process, Signal::SIGKILL);
        if let Some(cg) = self.cgroup {
            let _ = std::fs::remove_dir(cg);
        }
        let rootfs = self.rootfs.take();
        let exit = match self.isolated {
            // The whole cgroup, and what it says about the task's end.
            Some((cgroup, memory)) => {
                match tokio::task::spawn_blocking(move || finish_cgroup(&cgroup)).await {
                    Ok(usage) => measured(exit, &usage, memory),
                    Err(_) => exit,
                }
            }
            None => exit,
        };
        if let Some(plan) = rootfs {
            // The task's writable layer; the cached image stays.
            if let Err(e) = tokio::task::spawn_blocking(move || plan.cleanup()).await {
                tracing::warn!(error = %e, "cannot remove a task's root filesystem layer");
            }
        }
        exit
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn exit_statuses_read_as_exits() {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(exit_of(ExitStatus::from_raw(3 << 8)), Exit::Code(3));
        assert_eq!(exit_of(ExitStatus::from_raw(9)), Exit::Signal(9));
    }

    #[test]
    fn units_format_without_noise() {
        assert_eq!(format_units(4_096_000), "4096");
        assert_eq!(format_units(1_500), "1.5");
        assert_eq!(resource_env_name("gpus"), "PARLEY_GPUS");
    }

    #[test]
    fn proc_stat_reads_this_process() {
        let (state, start) = proc_stat(std::process::id()).unwrap();
        assert!(state == 'R' || state == 'S', "{state}");
        let me = |start_time, boot_id| Process {
            pid: std::process::id(),
            start_time,
            boot_id,
        };
        let boot = boot_id();
        assert!(boot.is_some(), "Linux provides a boot id");
        assert!(same_process_alive(&me(Some(start), boot)));
        assert!(!same_process_alive(&me(Some(start + 1), boot)));
        assert!(!same_process_alive(&me(None, boot)));
        // The same pid and start time in another boot (or a journal without one) is not ours.
        let other = Some(uuid::Uuid::from_u128(1));
        assert!(!same_process_alive(&me(Some(start), other)));
        assert!(!same_process_alive(&me(Some(start), None)));
    }

    #[test]
    fn only_provably_own_groups_may_be_signalled() {
        let (_, start) = proc_stat(std::process::id()).unwrap();
        let boot = Some(uuid::Uuid::from_u128(7));
        let p = |pid, start_time, boot_id| Process {
            pid,
            start_time,
            boot_id,
        };
        let me = std::process::id();
        assert!(may_signal_in(&p(me, Some(start), boot), boot));
        // Another process holds the pid now.
        assert!(!may_signal_in(&p(me, Some(start + 1), boot), boot));
        assert!(!may_signal_in(&p(me, None, boot), boot));
        // Recorded in another boot, or with no boot: never.
        assert!(!may_signal_in(
            &p(me, Some(start), boot),
            Some(uuid::Uuid::nil())
        ));
        assert!(!may_signal_in(&p(me, Some(start), None), boot));
        // No process holds the pid (pid_max is at most 2^22): the leftovers are the task's.
        assert!(may_signal_in(&p(u32::MAX - 1, Some(1), boot), boot));
    }
}
