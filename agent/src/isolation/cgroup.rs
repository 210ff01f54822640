//! Per-task cgroups on cgroup v1 (one hierarchy per controller) and v2 (one unified tree),
//! behind one type over root paths, so the same code runs against `/sys/fs/cgroup` and against
//! a fake tree in a temporary directory (the unit tests).
//!
//! A task's cgroup is `parley/AGENT/FRAMEWORK/TASK` under each hierarchy ([`Cgroups::task`]).
//! [`TaskCgroup::create`] makes it with the task's limits; the task's init process joins it by
//! writing `0` into each [`TaskCgroup::procs_files`]; [`TaskCgroup::kill_all`] kills every
//! process in it (v2 `cgroup.kill`; v1 freezer freeze → SIGKILL each pid → thaw);
//! [`TaskCgroup::remove`] removes it (retrying until empty, with a deadline; its parents stay
//! until [`Cgroups::remove_empty`] at the agent's start or stop);
//! [`TaskCgroup::usage`] reads OOM kills, peak memory, CPU and throttled time.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// The v1 controllers a task's cgroup uses, in the order they are created.
pub const V1_CONTROLLERS: [&str; 6] = ["memory", "cpu", "cpuacct", "pids", "freezer", "devices"];

/// The v2 controllers a task's cgroup needs enabled in its parent's `cgroup.subtree_control`.
pub const V2_CONTROLLERS: [&str; 3] = ["memory", "cpu", "pids"];

/// The CFS period of every task (100 ms).
pub const CFS_PERIOD_US: u64 = 100_000;

/// The devices every task may use (v1 `devices.allow` lines): `/dev/null`, `zero`, `full`,
/// `random`, `urandom`, `tty`, `ptmx` and the pseudo-terminals.
pub const DEFAULT_DEVICES: [&str; 8] = [
    "c 1:3 rwm",
    "c 1:5 rwm",
    "c 1:7 rwm",
    "c 1:8 rwm",
    "c 1:9 rwm",
    "c 5:0 rwm",
    "c 5:2 rwm",
    "c 136:* rwm",
];

/// Where the hierarchies are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cgroups {
    /// cgroup v1: `base/<controller>` for each of [`V1_CONTROLLERS`] (e.g. `/sys/fs/cgroup`).
    V1 {
        /// The directory holding one mount per controller.
        base: PathBuf,
    },
    /// cgroup v2: task cgroups go under this directory, whose `cgroup.controllers` lists
    /// [`V2_CONTROLLERS`].
    V2 {
        /// The unified tree's directory (the mount, or a delegated subtree).
        root: PathBuf,
    },
}

/// A task's limits.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Limits {
    /// Memory in bytes (no swap beyond it); unlimited when `None`.
    pub memory_bytes: Option<u64>,
    /// CPU in thousandths of a core (`cpus` × 1000); unlimited when 0.
    pub cpu_millis: u64,
    /// The most processes and threads.
    pub pids: u64,
    /// Extra device rules (v1 `devices.allow` lines) beyond [`DEFAULT_DEVICES`]; see
    /// [`device_rules`].
    pub devices: Vec<String>,
}

/// The device allow-list of a task: [`DEFAULT_DEVICES`] and `extra` (the hook the GPU
/// isolation fills with e.g. `c 195:* rwm`).
pub fn device_rules(extra: &[String]) -> Vec<String> {
    DEFAULT_DEVICES
        .iter()
        .map(|s| s.to_string())
        .chain(extra.iter().cloned())
        .collect()
}

/// What a task used, read from its cgroup before it is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// How many times the kernel's OOM killer killed a process of the task.
    pub oom_kills: u64,
    /// Peak memory in bytes, when the kernel reports it.
    pub peak_bytes: Option<u64>,
    /// CPU time in nanoseconds.
    pub cpu_ns: Option<u64>,
    /// Time throttled by the CPU quota, in nanoseconds.
    pub throttled_ns: Option<u64>,
}

impl Cgroups {
    /// The v1 hierarchies under `base` when every controller of [`V1_CONTROLLERS`] is mounted
    /// there as v1 (it has `cgroup.procs` and no `cgroup.controllers`) and writable.
    pub fn v1(base: &Path) -> Option<Cgroups> {
        let ok = V1_CONTROLLERS.iter().all(|c| {
            let dir = base.join(c);
            dir.join("cgroup.procs").exists()
                && !dir.join("cgroup.controllers").exists()
                && writable(&dir)
        });
        ok.then(|| Cgroups::V1 {
            base: base.to_path_buf(),
        })
    }

    /// A v2 tree at `root` when it lists every controller of [`V2_CONTROLLERS`] and is
    /// writable.
    pub fn v2(root: &Path) -> Option<Cgroups> {
        let listed = std::fs::read_to_string(root.join("cgroup.controllers")).ok()?;
        let have: Vec<&str> = listed.split_whitespace().collect();
        let ok = V2_CONTROLLERS.iter().all(|c| have.contains(c)) && writable(root);
        ok.then(|| Cgroups::V2 {
            root: root.to_path_buf(),
        })
    }

    /// The attribute value: `cgroups-v1` or `cgroups-v2`.
    pub fn name(&self) -> &'static str {
        match self {
            Cgroups::V1 { .. } => "cgroups-v1",
            Cgroups::V2 { .. } => "cgroups-v2",
        }
    }

    /// The cgroup of a task at `rel` (e.g. `parley/AGENT/FRAMEWORK/TASK`); nothing is created.
    pub fn task(&self, rel: &Path) -> TaskCgroup {
        match self {
            Cgroups::V1 { base } => TaskCgroup::V1 {
                dirs: V1_CONTROLLERS
                    .iter()
                    .map(|c| base.join(c).join(rel))
                    .collect(),
            },
            Cgroups::V2 { root } => TaskCgroup::V2 {
                root: root.clone(),
                dir: root.join(rel),
            },
        }
    }

    /// Removes the directories under `rel_parent` (e.g. `parley/AGENT`) that hold no task
    /// cgroup (`FRAMEWORK`s) and `rel_parent` itself when it is left empty, in every hierarchy;
    /// a directory in use stays.
    pub fn remove_empty(&self, rel_parent: &Path) {
        let bases: Vec<PathBuf> = match self {
            Cgroups::V1 { base } => V1_CONTROLLERS.iter().map(|c| base.join(c)).collect(),
            Cgroups::V2 { root } => vec![root.clone()],
        };
        for base in bases {
            let parent = base.join(rel_parent);
            for fw in subdirs(&parent) {
                let _ = std::fs::remove_dir(fw);
            }
            let _ = std::fs::remove_dir(parent);
        }
    }

    /// The task cgroups under `rel_parent` (e.g. `parley/AGENT`), as paths relative to the
    /// hierarchy (`parley/AGENT/FRAMEWORK/TASK`): what a restarted agent may find left over.
    pub fn tasks_under(&self, rel_parent: &Path) -> Vec<PathBuf> {
        let first = match self {
            Cgroups::V1 { base } => base.join(V1_CONTROLLERS[0]),
            Cgroups::V2 { root } => root.clone(),
        };
        let mut out = Vec::new();
        for fw in subdirs(&first.join(rel_parent)) {
            for task in subdirs(&fw) {
                if let Ok(rel) = task.strip_prefix(&first) {
                    out.push(rel.to_path_buf());
                }
            }
        }
        out
    }
}

/// The sub-directories of `dir` (none when it cannot be read).
fn subdirs(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the process may write `dir`'s `cgroup.procs` (root, or a delegated tree).
fn writable(dir: &Path) -> bool {
    // Opening for writing writes nothing.
    std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("cgroup.procs"))
        .is_ok()
}

/// One task's cgroup (in each v1 hierarchy, or in the v2 tree).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskCgroup {
    /// One directory per controller, in the order of [`V1_CONTROLLERS`].
    V1 {
        /// The directories.
        dirs: Vec<PathBuf>,
    },
    /// One directory in the unified tree.
    V2 {
        /// The tree's root (where the agent's subtree starts).
        root: PathBuf,
        /// The task's directory.
        dir: PathBuf,
    },
}

/// Writes `value` to `dir/file`, naming the file in the error.
fn put(dir: &Path, file: &str, value: &str) -> std::io::Result<()> {
    std::fs::write(dir.join(file), value)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", dir.join(file).display())))
}

/// Reads `dir/file` (empty when it cannot be read).
fn get(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap_or_default()
}

/// The number after `key` in a flat-keyed file (`oom_kill 1`, `usage_usec 10`).
fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok())?
    })
}

impl TaskCgroup {
    fn dir(&self, controller: &str) -> Option<&Path> {
        match self {
            TaskCgroup::V1 { dirs } => V1_CONTROLLERS
                .iter()
                .position(|c| *c == controller)
                .and_then(|i| dirs.get(i))
                .map(PathBuf::as_path),
            TaskCgroup::V2 { dir, .. } => Some(dir),
        }
    }

    /// Every directory of the cgroup.
    pub fn dirs(&self) -> Vec<&Path> {
        match self {
            TaskCgroup::V1 { dirs } => dirs.iter().map(PathBuf::as_path).collect(),
            TaskCgroup::V2 { dir, .. } => vec![dir],
        }
    }

    /// Whether any of its directories exists.
    pub fn exists(&self) -> bool {
        self.dirs().iter().any(|d| d.exists())
    }

    /// The files the task's init writes `0` into to join the cgroup.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs().iter().map(|d| d.join("cgroup.procs")).collect()
    }

    /// Creates the cgroup with `limits`. On v2, every directory between the root and the task
    /// gets the controllers enabled in its `cgroup.subtree_control`. A failure removes what
    /// was made.
    pub fn create(&self, limits: &Limits) -> std::io::Result<()> {
        // A parent (`FRAMEWORK`, `AGENT`) may be removed by another task's end between the
        // creation of one level and the next: try again.
        let mut dirs = self.create_dirs();
        for _ in 0..3 {
            match &dirs {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => dirs = self.create_dirs(),
                _ => break,
            }
        }
        let made = dirs.and_then(|()| self.apply(limits));
        if made.is_err() {
            let _ = self.remove(Duration::ZERO);
        }
        made
    }

    fn create_dirs(&self) -> std::io::Result<()> {
        match self {
            TaskCgroup::V1 { dirs } => dirs.iter().try_for_each(std::fs::create_dir_all),
            TaskCgroup::V2 { root, dir } => {
                let enable: String = V2_CONTROLLERS.iter().map(|c| format!("+{c} ")).collect();
                let rel = dir.strip_prefix(root).map_err(std::io::Error::other)?;
                let mut at = root.clone();
                for part in rel.components() {
                    // Best effort at the root (it may already be enabled, or be the agent's own
                    // delegated directory); required below it.
                    let enabled = put(&at, "cgroup.subtree_control", enable.trim_end());
                    if at != *root {
                        enabled?;
                    }
                    at.push(part);
                    if !at.exists() {
                        std::fs::create_dir(&at)?;
                    }
                }
                Ok(())
            }
        }
    }

    fn apply(&self, limits: &Limits) -> std::io::Result<()> {
        let quota = (limits.cpu_millis > 0).then(|| limits.cpu_millis * CFS_PERIOD_US / 1000);
        match self {
            TaskCgroup::V1 { .. } => {
                let dir = |c| self.dir(c).ok_or_else(|| std::io::Error::other(c));
                let mem = dir("memory")?;
                if let Some(bytes) = limits.memory_bytes {
                    put(mem, "memory.limit_in_bytes", &bytes.to_string())?;
                    // No swap beyond the limit, where swap accounting is on.
                    if mem.join("memory.memsw.limit_in_bytes").exists() {
                        put(mem, "memory.memsw.limit_in_bytes", &bytes.to_string())?;
                    }
                }
                let cpu = dir("cpu")?;
                if let Some(quota) = quota {
                    put(cpu, "cpu.cfs_period_us", &CFS_PERIOD_US.to_string())?;
                    put(cpu, "cpu.cfs_quota_us", &quota.max(1000).to_string())?;
                    let shares = (limits.cpu_millis * 1024 / 1000).max(2);
                    put(cpu, "cpu.shares", &shares.to_string())?;
                }
                put(dir("pids")?, "pids.max", &limits.pids.to_string())?;
                let devices = dir("devices")?;
                put(devices, "devices.deny", "a")?;
                for rule in device_rules(&limits.devices) {
                    put(devices, "devices.allow", &rule)?;
                }
                Ok(())
            }
            TaskCgroup::V2 { dir, .. } => {
                if let Some(bytes) = limits.memory_bytes {
                    put(dir, "memory.max", &bytes.to_string())?;
                    if dir.join("memory.swap.max").exists() {
                        put(dir, "memory.swap.max", "0")?;
                    }
                }
                if let Some(quota) = quota {
                    put(
                        dir,
                        "cpu.max",
                        &format!("{} {CFS_PERIOD_US}", quota.max(1000)),
                    )?;
                    // cgroup v2's weight: 100 for one core, from 1 to 10000.
                    let weight = (limits.cpu_millis / 10).clamp(1, 10_000);
                    put(dir, "cpu.weight", &weight.to_string())?;
                }
                put(dir, "pids.max", &limits.pids.to_string())?;
                // Devices on v2 need an eBPF program (BPF_CGROUP_DEVICE); the allow-list is
                // enforced on v1 only (see `docs/src/operating/isolation.md`).
                Ok(())
            }
        }
    }

    /// The pids in the cgroup (the freezer's or the unified directory's `cgroup.procs`).
    pub fn pids(&self) -> Vec<i32> {
        let dir = match self {
            TaskCgroup::V1 { .. } => self.dir("freezer"),
            TaskCgroup::V2 { dir, .. } => Some(dir.as_path()),
        };
        dir.map(|d| {
            get(d, "cgroup.procs")
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect()
        })
        .unwrap_or_default()
    }

    /// Kills every process in the cgroup: `cgroup.kill` on v2 (SIGKILL to each pid where the
    /// kernel lacks it); on v1 the freezer stops them all first, so none can fork away while
    /// each gets SIGKILL, then thaws them so they die.
    pub fn kill_all(&self) {
        match self {
            TaskCgroup::V2 { dir, .. } => {
                if !(dir.join("cgroup.kill").exists() && put(dir, "cgroup.kill", "1").is_ok()) {
                    kill_each(&self.pids());
                }
            }
            // Nothing to kill (the usual end: the task's pid namespace went with its init):
            // no freeze and thaw, two writes and a wait saved per task.
            TaskCgroup::V1 { .. } if self.pids().is_empty() => {}
            TaskCgroup::V1 { .. } => {
                let freezer = self.dir("freezer").map(Path::to_path_buf);
                let frozen = freezer
                    .as_deref()
                    .is_some_and(|f| put(f, "freezer.state", "FROZEN").is_ok());
                if frozen {
                    let deadline = Instant::now() + Duration::from_secs(1);
                    while let Some(f) = freezer.as_deref() {
                        if get(f, "freezer.state").trim() != "FREEZING" || Instant::now() > deadline
                        {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(2));
                    }
                }
                kill_each(&self.pids());
                if let Some(f) = freezer.as_deref().filter(|_| frozen) {
                    let _ = put(f, "freezer.state", "THAWED");
                }
            }
        }
    }

    /// Kills what is left and removes every directory of the cgroup, retrying until the
    /// kernel has let go of the dead processes or `deadline` has passed. Its parents
    /// (`FRAMEWORK`, `AGENT`) stay for the next task (made again for every task they cost 12
    /// `mkdir`s and `rmdir`s on v1); [`Cgroups::remove_empty`] removes them when the agent
    /// starts and stops.
    pub fn remove(&self, deadline: Duration) -> std::io::Result<()> {
        let until = Instant::now() + deadline;
        let mut last = Ok(());
        for dir in self.dirs() {
            loop {
                match std::fs::remove_dir(dir) {
                    Ok(()) => break,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                    Err(e) if Instant::now() >= until => {
                        last = Err(std::io::Error::new(
                            e.kind(),
                            format!("{}: {e}", dir.display()),
                        ));
                        break;
                    }
                    Err(_) => {
                        kill_each(&pids_of(dir));
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
            }
        }
        last
    }

    /// What the task used (read before [`TaskCgroup::remove`]).
    pub fn usage(&self) -> Usage {
        match self {
            TaskCgroup::V1 { .. } => {
                let mem = self
                    .dir("memory")
                    .map(Path::to_path_buf)
                    .unwrap_or_default();
                let cpu = self.dir("cpu").map(Path::to_path_buf).unwrap_or_default();
                let acct = self
                    .dir("cpuacct")
                    .map(Path::to_path_buf)
                    .unwrap_or_default();
                Usage {
                    oom_kills: keyed(&get(&mem, "memory.oom_control"), "oom_kill").unwrap_or(0),
                    peak_bytes: get(&mem, "memory.max_usage_in_bytes").trim().parse().ok(),
                    cpu_ns: get(&acct, "cpuacct.usage").trim().parse().ok(),
                    throttled_ns: keyed(&get(&cpu, "cpu.stat"), "throttled_time"),
                }
            }
            TaskCgroup::V2 { dir, .. } => {
                let stat = get(dir, "cpu.stat");
                Usage {
                    oom_kills: keyed(&get(dir, "memory.events"), "oom_kill").unwrap_or(0),
                    peak_bytes: get(dir, "memory.peak").trim().parse().ok(),
                    cpu_ns: keyed(&stat, "usage_usec").map(|us| us * 1000),
                    throttled_ns: keyed(&stat, "throttled_usec").map(|us| us * 1000),
                }
            }
        }
    }
}

fn pids_of(dir: &Path) -> Vec<i32> {
    get(dir, "cgroup.procs")
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// SIGKILL to each pid (never 0, 1 or negative: those mean groups or init).
fn kill_each(pids: &[i32]) {
    for &pid in pids.iter().filter(|p| **p > 1) {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A fake v2 root: `cgroup.controllers`, `cgroup.procs` and `cgroup.subtree_control`.
    fn fake_v2() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(
            t.path().join("cgroup.controllers"),
            "cpuset cpu io memory pids",
        )
        .unwrap();
        std::fs::write(t.path().join("cgroup.procs"), "").unwrap();
        t
    }

    #[test]
    fn v2_is_detected_only_with_its_controllers() {
        let t = fake_v2();
        assert_eq!(
            Cgroups::v2(t.path()),
            Some(Cgroups::V2 {
                root: t.path().into()
            })
        );
        std::fs::write(t.path().join("cgroup.controllers"), "hugetlb").unwrap();
        assert_eq!(
            Cgroups::v2(t.path()),
            None,
            "hybrid mode's v2 tree has only hugetlb"
        );
        assert_eq!(Cgroups::v1(t.path()), None);
    }

    #[test]
    fn v2_task_cgroup_gets_its_limits_and_parents_their_controllers() {
        let t = fake_v2();
        let cg = Cgroups::v2(t.path()).unwrap();
        let task = cg.task(Path::new("parley/a1/fw/t1"));
        let dir = t.path().join("parley/a1/fw/t1");
        // A fake tree: the kernel would create these files with the directory.
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("memory.swap.max"), "max").unwrap();
        let limits = Limits {
            memory_bytes: Some(64 << 20),
            cpu_millis: 500,
            pids: 16,
            devices: vec![],
        };
        task.create(&limits).unwrap();
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
        assert_eq!(read("memory.max"), (64u64 << 20).to_string());
        assert_eq!(read("memory.swap.max"), "0");
        assert_eq!(read("cpu.max"), "50000 100000");
        assert_eq!(read("cpu.weight"), "50");
        assert_eq!(read("pids.max"), "16");
        for parent in ["", "parley", "parley/a1", "parley/a1/fw"] {
            let s = std::fs::read_to_string(t.path().join(parent).join("cgroup.subtree_control"))
                .unwrap();
            assert_eq!(s, "+memory +cpu +pids", "{parent}");
        }
        assert_eq!(task.procs_files(), vec![dir.join("cgroup.procs")]);
        assert_eq!(
            cg.tasks_under(Path::new("parley/a1")),
            vec![PathBuf::from("parley/a1/fw/t1")]
        );
    }

    #[test]
    fn v2_usage_and_oom_are_read() {
        let t = fake_v2();
        let dir = t.path().join("t");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(
            dir.join("memory.events"),
            "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n",
        )
        .unwrap();
        std::fs::write(dir.join("memory.peak"), "67108864\n").unwrap();
        std::fs::write(
            dir.join("cpu.stat"),
            "usage_usec 1500\nuser_usec 1000\nnr_throttled 3\nthrottled_usec 700\n",
        )
        .unwrap();
        let task = Cgroups::v2(t.path()).unwrap().task(Path::new("t"));
        assert_eq!(
            task.usage(),
            Usage {
                oom_kills: 1,
                peak_bytes: Some(64 << 20),
                cpu_ns: Some(1_500_000),
                throttled_ns: Some(700_000),
            }
        );
    }

    #[test]
    fn v2_kill_writes_cgroup_kill_and_remove_takes_the_dirs() {
        let t = fake_v2();
        let task = Cgroups::v2(t.path())
            .unwrap()
            .task(Path::new("parley/a/fw/t"));
        task.create(&Limits::default()).unwrap();
        let dir = t.path().join("parley/a/fw/t");
        std::fs::write(dir.join("cgroup.kill"), "").unwrap();
        task.kill_all();
        assert_eq!(
            std::fs::read_to_string(dir.join("cgroup.kill")).unwrap(),
            "1"
        );
        // A fake directory holds files the kernel would not show; clear them as rmdir would.
        for f in std::fs::read_dir(&dir).unwrap() {
            std::fs::remove_file(f.unwrap().path()).unwrap();
        }
        std::fs::remove_file(t.path().join("parley/a/fw/cgroup.subtree_control")).unwrap();
        std::fs::remove_file(t.path().join("parley/a/cgroup.subtree_control")).unwrap();
        task.remove(Duration::from_millis(100)).unwrap();
        assert!(!dir.exists());
        assert!(
            t.path().join("parley/a/fw").exists(),
            "the parents stay for the next task"
        );
        let cgroups = Cgroups::v2(t.path()).unwrap();
        let other = cgroups.task(Path::new("parley/a/busy/t"));
        other.create(&Limits::default()).unwrap();
        cgroups.remove_empty(Path::new("parley/a"));
        assert!(
            !t.path().join("parley/a/fw").exists(),
            "empty parent removed"
        );
        assert!(
            t.path().join("parley/a/busy/t").exists(),
            "one in use stays"
        );
        assert!(t.path().join("parley").exists(), "and nothing further up");
    }

    #[test]
    fn v1_limits_and_usage_on_a_fake_tree() {
        let t = tempfile::tempdir().unwrap();
        for c in V1_CONTROLLERS {
            std::fs::create_dir(t.path().join(c)).unwrap();
            std::fs::write(t.path().join(c).join("cgroup.procs"), "").unwrap();
        }
        let cg = Cgroups::v1(t.path()).unwrap();
        assert_eq!(cg.name(), "cgroups-v1");
        let task = cg.task(Path::new("parley/a/fw/t"));
        let limits = Limits {
            memory_bytes: Some(1 << 20),
            cpu_millis: 1500,
            pids: 9,
            devices: vec!["c 195:* rwm".into()],
        };
        task.create(&limits).unwrap();
        let read = |c: &str, f: &str| {
            std::fs::read_to_string(t.path().join(c).join("parley/a/fw/t").join(f)).unwrap()
        };
        assert_eq!(read("memory", "memory.limit_in_bytes"), "1048576");
        assert_eq!(read("cpu", "cpu.cfs_quota_us"), "150000");
        assert_eq!(read("cpu", "cpu.shares"), "1536");
        assert_eq!(read("pids", "pids.max"), "9");
        // The fake file keeps the last write: the GPU hook's rule comes after the defaults.
        assert_eq!(read("devices", "devices.allow"), "c 195:* rwm");
        let mem = t.path().join("memory/parley/a/fw/t");
        std::fs::write(
            mem.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
        )
        .unwrap();
        std::fs::write(mem.join("memory.max_usage_in_bytes"), "4096\n").unwrap();
        let u = task.usage();
        assert_eq!((u.oom_kills, u.peak_bytes), (2, Some(4096)));
        assert_eq!(task.procs_files().len(), V1_CONTROLLERS.len());
    }

    #[test]
    fn device_rules_start_with_the_defaults() {
        let rules = device_rules(&["c 195:0 rw".into()]);
        assert_eq!(rules[0], "c 1:3 rwm");
        assert_eq!(rules.last().unwrap(), "c 195:0 rw");
        assert_eq!(rules.len(), DEFAULT_DEVICES.len() + 1);
    }
}
