//! Task isolation: what the agent can enforce, detected at start ([`detect`]), and what it
//! advertises ([`advertise`]).
//!
//! - [`cgroup`]: per-task cgroups on v1 and v2: limits, kill of the whole cgroup, removal,
//!   usage (OOM kills, peak memory, CPU and throttled time).
//! - [`launch`]: the launcher the agent starts in place of the `sh` wrapper (`parley-launch`, or
//!   `agent __parley-launch`): new
//!   pid, mount, ipc and uts namespaces, the cgroup joined by the task's init, `/proc`, `/tmp`,
//!   hostname, `no_new_privs`, the task's user.
//! - [`task`]: an isolated task's limits from its spec, and how its end reads (OOM kills).
//!
//! Detection ([`detect`], `--isolation auto`): as root (or with a writable delegated v2
//! directory, `--cgroup-root`), cgroup v2 where the unified tree has `memory`, `cpu` and
//! `pids`, else cgroup v1 where `memory`, `cpu`, `cpuacct`, `pids`, `freezer` and `devices` are
//! mounted, else nothing; and a launcher binary to re-execute. Without them, or with
//! `--isolation none`, tasks run as before (RLIMIT_AS), said in one log line and in the
//! attributes (`isolation=none`).

pub mod cgroup;
pub mod launch;
pub mod task;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use protocol::isolation::{ATTR_ISOLATION, ATTR_NAMESPACES};

pub use cgroup::{Cgroups, Limits, TaskCgroup, Usage};

/// The namespaces every isolated task gets (the `namespaces` attribute).
pub const NAMESPACES: &str = "pid,mount,ipc,uts";

/// Where the agent looks for iproute2's `ip`, which brings `lo` up in a task's own network
/// namespace (`isolation.network: loopback`); without it the agent gives no `net` namespace.
pub const IP_PATHS: [&str; 3] = ["/usr/sbin/ip", "/sbin/ip", "/bin/ip"];

/// The agent's default `pids.max` of a task (`--default-pids`).
pub const DEFAULT_PIDS: u64 = 4096;

/// `--isolation`: whether to isolate tasks where the machine allows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IsolationChoice {
    /// Cgroups and namespaces where they can be enforced (root, or a delegated cgroup).
    #[default]
    Auto,
    /// Never: today's behaviour (RLIMIT_AS, a process group).
    None,
}

/// An `--isolation` value that is neither `auto` nor `none`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid --isolation {value:?}: expected auto or none")]
pub struct IsolationChoiceError {
    /// The value given.
    pub value: String,
}

impl std::str::FromStr for IsolationChoice {
    type Err = IsolationChoiceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(IsolationChoice::Auto),
            "none" => Ok(IsolationChoice::None),
            other => Err(IsolationChoiceError {
                value: other.to_string(),
            }),
        }
    }
}

/// What an isolating agent has: its cgroups, the launcher to re-execute, its defaults.
#[derive(Debug, Clone)]
pub struct Isolator {
    /// The hierarchies.
    pub cgroups: Cgroups,
    /// The `agent` binary that serves as the launcher.
    pub launcher: PathBuf,
    /// `pids.max` of tasks that do not set `isolation.pids`.
    pub default_pids: u64,
    /// This agent's own part of the hierarchies: `parley/AGENT` where `AGENT` is a hash of the
    /// work directory, so agents sharing a machine never touch each other's cgroups.
    pub prefix: PathBuf,
    /// iproute2's `ip`, when found: tasks may then ask for a loopback-only network.
    pub ip: Option<PathBuf>,
    /// The images tasks may name (`--image-root`); `None`: no images.
    pub images: Option<crate::image::ImageStore>,
}

impl Isolator {
    /// The `namespaces` attribute: [`NAMESPACES`], and `net` when `ip` was found.
    pub fn namespaces(&self) -> String {
        match self.ip {
            Some(_) => format!("{NAMESPACES},net"),
            None => NAMESPACES.to_string(),
        }
    }
}

/// The agent attributes saying what is enforced: `isolation` and `namespaces`, merged over the
/// operator's own attributes (only these keys are replaced).
pub fn advertise(isolator: Option<&Isolator>, attributes: &mut BTreeMap<String, String>) {
    let (mode, namespaces) = match isolator {
        Some(i) => (i.cgroups.name(), i.namespaces()),
        None => ("none", String::new()),
    };
    attributes.insert(ATTR_ISOLATION.into(), mode.into());
    attributes.insert(ATTR_NAMESPACES.into(), namespaces);
}

/// Finds what the agent can enforce. `cgroup_root` is a delegated v2 directory
/// (`--cgroup-root`), preferred when usable; `launcher` the binary to re-execute (the agent's
/// own executable when `None` and it is named `agent`). Logs one line either way.
pub fn detect(
    choice: IsolationChoice,
    cgroup_root: Option<&Path>,
    launcher: Option<&Path>,
    default_pids: u64,
    work_dir: &Path,
) -> Option<Isolator> {
    if choice == IsolationChoice::None {
        tracing::info!(
            "isolation off (--isolation none): memory by RLIMIT_AS, no cgroups or namespaces"
        );
        return None;
    }
    let root = crate::task_user::running_as_root();
    let cgroups = cgroup_root
        .and_then(Cgroups::v2)
        .or_else(|| {
            root.then(|| Cgroups::v2(Path::new("/sys/fs/cgroup")))
                .flatten()
        })
        .or_else(|| {
            root.then(|| Cgroups::v1(Path::new("/sys/fs/cgroup")))
                .flatten()
        });
    // Absolute: the launcher starts in the task's sandbox.
    let launcher = launcher
        .map(|l| std::fs::canonicalize(l).unwrap_or_else(|_| l.to_path_buf()))
        .or_else(own_launcher)
        .filter(|l| l.is_absolute() && l.is_file());
    match (root, cgroups, launcher) {
        (true, Some(cgroups), Some(launcher)) => {
            let isolator = Isolator {
                cgroups,
                launcher,
                default_pids,
                prefix: Path::new("parley").join(agent_tag(work_dir)),
                ip: IP_PATHS.iter().map(PathBuf::from).find(|p| p.is_file()),
                images: None,
            };
            tracing::info!(mode = isolator.cgroups.name(), namespaces = isolator.namespaces(), launcher = %isolator.launcher.display(), "tasks are isolated: a cgroup and namespaces each");
            Some(isolator)
        }
        (false, _, _) => {
            tracing::warn!("not root: tasks are not isolated (no namespaces); memory by RLIMIT_AS, no CPU or pids limits (isolation=none)");
            None
        }
        (true, None, _) => {
            tracing::warn!("no usable cgroups (v2 with memory, cpu, pids; or v1 memory, cpu, cpuacct, pids, freezer, devices): tasks are not isolated; memory by RLIMIT_AS (isolation=none)");
            None
        }
        (true, Some(_), None) => {
            tracing::warn!("no launcher binary (an embedded agent: set AgentConfig::launcher to the agent binary): tasks are not isolated; memory by RLIMIT_AS (isolation=none)");
            None
        }
    }
}

/// The names of the `agent` binary: as cargo builds it, and as the Debian package installs it
/// (`/usr/bin/parley-agent`).
const AGENT_BINARY_NAMES: [&str; 2] = ["agent", "parley-agent"];

/// For the `agent` binary: the small `parley-launch` beside it (two execs per launch are
/// cheaper with it), else the agent itself (`agent __parley-launch`). An embedding program,
/// e.g. a test, is not a launcher.
fn own_launcher() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let name = exe.file_name()?;
    if !AGENT_BINARY_NAMES.iter().any(|n| name == *n) {
        return None;
    }
    let small = exe.with_file_name("parley-launch");
    Some(if small.is_file() { small } else { exe })
}

/// A short stable tag of the work directory (FNV-1a, 64 bits, hex).
fn agent_tag(work_dir: &Path) -> String {
    let path = std::fs::canonicalize(work_dir).unwrap_or_else(|_| work_dir.to_path_buf());
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in path.as_os_str().as_encoded_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

impl Isolator {
    /// The cgroup of the task whose sandbox is `sandbox` (`.../sandboxes/FRAMEWORK/TASK`):
    /// `parley/AGENT/FRAMEWORK/TASK`, derived from the journaled sandbox, so a restarted agent
    /// finds it again.
    pub fn task_cgroup(&self, sandbox: &Path) -> Option<TaskCgroup> {
        let leaf = sandbox.file_name()?;
        let fw = sandbox.parent()?.file_name()?;
        Some(self.cgroups.task(&self.prefix.join(fw).join(leaf)))
    }

    /// Removes the cgroups of this agent's tasks whose sandboxes are not in `live` (tasks that
    /// ended while the agent was down), killing what is left in them first, and the parents
    /// left empty (a running agent keeps them for its next tasks).
    pub fn sweep(&self, live: &std::collections::HashSet<PathBuf>) {
        let live: Vec<TaskCgroup> = live.iter().filter_map(|s| self.task_cgroup(s)).collect();
        for rel in self.cgroups.tasks_under(&self.prefix) {
            let cg = self.cgroups.task(&rel);
            if live.contains(&cg) {
                continue;
            }
            tracing::info!(cgroup = %rel.display(), "removing the cgroup of a task that is gone");
            cg.kill_all();
            if let Err(e) = cg.remove(std::time::Duration::from_secs(2)) {
                tracing::warn!("cannot remove a stale task cgroup: {e}");
            }
        }
        self.remove_empty_parents();
    }

    /// Removes this agent's cgroup parents (`AGENT`, `FRAMEWORK`s) that hold no task cgroup:
    /// at start (in [`Isolator::sweep`]) and at shutdown; a running agent keeps them for its
    /// next tasks.
    pub fn remove_empty_parents(&self) {
        self.cgroups.remove_empty(&self.prefix);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn choice_parses_and_names_bad_values() {
        assert_eq!("auto".parse(), Ok(IsolationChoice::Auto));
        assert_eq!("none".parse(), Ok(IsolationChoice::None));
        let e = "yes".parse::<IsolationChoice>().unwrap_err().to_string();
        assert!(e.contains("--isolation") && e.contains("yes"), "{e}");
    }

    #[test]
    fn attributes_replace_only_their_keys() {
        let mut a = BTreeMap::from([
            ("rack".to_string(), "r1".to_string()),
            ("isolation".to_string(), "cgroups-v2".to_string()),
        ]);
        advertise(None, &mut a);
        assert_eq!(a["rack"], "r1");
        assert_eq!(a["isolation"], "none");
        assert_eq!(a["namespaces"], "");
        let i = Isolator {
            cgroups: Cgroups::V1 { base: "/x".into() },
            launcher: "/bin/agent".into(),
            default_pids: 8,
            prefix: "parley/abc".into(),
            ip: None,
            images: None,
        };
        advertise(Some(&i), &mut a);
        assert_eq!(a["isolation"], "cgroups-v1");
        assert_eq!(a["namespaces"], NAMESPACES);
        let with_ip = Isolator {
            ip: Some("/usr/sbin/ip".into()),
            ..i.clone()
        };
        advertise(Some(&with_ip), &mut a);
        assert_eq!(a["namespaces"], "pid,mount,ipc,uts,net");
        let cg = i.task_cgroup(Path::new("/w/sandboxes/fw1/t1.2")).unwrap();
        assert_eq!(cg.dirs()[0], Path::new("/x/memory/parley/abc/fw1/t1.2"));
    }

    #[test]
    fn a_restart_sweeps_the_cgroups_of_tasks_that_are_gone_and_keeps_the_live_ones() {
        let t = tempfile::tempdir().unwrap();
        let i = Isolator {
            cgroups: Cgroups::V2 {
                root: t.path().into(),
            },
            launcher: "/bin/agent".into(),
            default_pids: 8,
            prefix: "parley/me".into(),
            ip: None,
            images: None,
        };
        for task in ["live", "gone"] {
            std::fs::create_dir_all(t.path().join("parley/me/fw").join(task)).unwrap();
        }
        std::fs::create_dir_all(t.path().join("parley/me/fw2/gone")).unwrap();
        std::fs::create_dir_all(t.path().join("parley/other/fw/gone")).unwrap();
        let live = std::collections::HashSet::from([PathBuf::from("/w/sandboxes/fw/live")]);
        i.sweep(&live);
        assert!(t.path().join("parley/me/fw/live").exists());
        assert!(!t.path().join("parley/me/fw/gone").exists());
        assert!(
            !t.path().join("parley/me/fw2").exists(),
            "a framework left with no task goes too"
        );
        assert!(
            t.path().join("parley/other/fw/gone").exists(),
            "another agent's cgroups are not this agent's to sweep"
        );
    }

    #[test]
    fn none_is_none_and_tags_are_stable() {
        let t = tempfile::tempdir().unwrap();
        assert!(detect(IsolationChoice::None, None, None, 8, t.path()).is_none());
        assert_eq!(agent_tag(t.path()), agent_tag(t.path()));
        assert_ne!(agent_tag(t.path()), agent_tag(Path::new("/elsewhere")));
        // The test binary is not named `agent`: an embedded agent needs a launcher given.
        assert_eq!(own_launcher(), None);
    }
}
