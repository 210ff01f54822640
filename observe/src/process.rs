//! This process' figures, read from `/proc/self` at each scrape (`prometheus-client` has no
//! process collector), under the names every Prometheus client library uses
//! (`process_cpu_seconds_total`, ...), and the build's `parley_build_info`.
//!
//! Off Linux, or where `/proc` cannot be read, only `parley_build_info` is served.

use std::fmt;
use std::path::Path;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use crate::scrape::Scrape;
use crate::table::{Kind, Metric};

/// Clock ticks per second of `/proc/<pid>/stat`'s times: `USER_HZ`, which the kernel fixes at
/// 100 for user space on every architecture Parley builds for.
const TICKS_PER_SECOND: f64 = 100.0;

/// The metrics [`ProcessCollector`] writes, for a binary's table and reference.
pub const METRICS: [Metric; 6] = [
    Metric {
        name: "parley_build_info",
        kind: Kind::Gauge,
        label: Some("version, commit"),
        help: "Always 1: the version of this binary, and the commit it was built from when known.",
        mesos: "closest: `/version`",
    },
    Metric {
        name: "process_cpu_seconds_total",
        kind: Kind::Counter,
        label: None,
        help: "CPU time (user and system) this process used.",
        mesos: "`system/cpus_total` is the machine's; Mesos has no per-process figure",
    },
    Metric {
        name: "process_resident_memory_bytes",
        kind: Kind::Gauge,
        label: None,
        help: "Resident memory of this process.",
        mesos: "none",
    },
    Metric {
        name: "process_open_fds",
        kind: Kind::Gauge,
        label: None,
        help: "File descriptors this process has open.",
        mesos: "none",
    },
    Metric {
        name: "process_max_fds",
        kind: Kind::Gauge,
        label: None,
        help: "The most file descriptors this process may open (its soft limit).",
        mesos: "none",
    },
    Metric {
        name: "process_start_time_seconds",
        kind: Kind::Gauge,
        label: None,
        help: "When this process started, in seconds since the Unix epoch.",
        mesos: "`master/uptime_secs` (Mesos: seconds since start)",
    },
];

/// The build: `parley_build_info{version, commit}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildInfo {
    /// The package version (`CARGO_PKG_VERSION` of the binary).
    pub version: &'static str,
    /// The commit, when the build was given one (`PARLEY_COMMIT` at compile time).
    pub commit: Option<&'static str>,
}

impl BuildInfo {
    /// Version `version`, and the commit of `PARLEY_COMMIT` at compile time if it was set.
    pub fn new(version: &'static str) -> Self {
        Self {
            version,
            commit: option_env!("PARLEY_COMMIT").filter(|c| !c.is_empty()),
        }
    }
}

/// Figures of one process at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessFigures {
    /// User and system CPU time, seconds.
    pub cpu_seconds: f64,
    /// Resident memory, bytes.
    pub resident_bytes: u64,
    /// Open file descriptors.
    pub open_fds: u64,
    /// The soft limit on open file descriptors; `None` when unlimited.
    pub max_fds: Option<u64>,
    /// Start time, seconds since the Unix epoch.
    pub start_time_seconds: f64,
}

impl ProcessFigures {
    /// This process' figures; `None` off Linux or when `/proc` cannot be read.
    pub fn read() -> Option<Self> {
        Self::read_from(Path::new("/proc"), "self")
    }

    /// The figures of process `pid` (or `self`) under the `/proc` mounted at `proc`.
    pub fn read_from(proc: &Path, pid: &str) -> Option<Self> {
        let dir = proc.join(pid);
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
        let (cpu_ticks, start_ticks) = parse_stat(&read("stat")?)?;
        let boot = parse_boot_time(&std::fs::read_to_string(proc.join("stat")).ok()?)?;
        let open_fds = std::fs::read_dir(dir.join("fd")).ok()?.count() as u64;
        Some(Self {
            cpu_seconds: cpu_ticks as f64 / TICKS_PER_SECOND,
            resident_bytes: parse_resident(&read("status")?)?,
            open_fds,
            max_fds: parse_max_fds(&read("limits")?)?,
            start_time_seconds: boot as f64 + start_ticks as f64 / TICKS_PER_SECOND,
        })
    }
}

/// `(utime + stime, starttime)` in ticks from `/proc/<pid>/stat`. The command name (field 2)
/// may hold spaces and parentheses, so fields are counted from its last `)`.
fn parse_stat(stat: &str) -> Option<(u64, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After the name: state is field 3; utime 14, stime 15, starttime 22.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some((field(14)? + field(15)?, field(22)?))
}

/// The boot time (`btime`, seconds since the epoch) from `/proc/stat`.
fn parse_boot_time(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

/// `VmRSS` of `/proc/<pid>/status`, in bytes.
fn parse_resident(status: &str) -> Option<u64> {
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(kb * 1024)
}

/// The soft limit of `Max open files` in `/proc/<pid>/limits`: `Some(None)` when unlimited.
fn parse_max_fds(limits: &str) -> Option<Option<u64>> {
    let soft = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))?
        .split_whitespace()
        .next()?;
    if soft == "unlimited" {
        return Some(None);
    }
    soft.parse().ok().map(Some)
}

/// Writes [`METRICS`] at each scrape.
#[derive(Debug, Clone, Copy)]
pub struct ProcessCollector {
    build: BuildInfo,
}

impl ProcessCollector {
    /// A collector for this process, built as `build`.
    pub fn new(build: BuildInfo) -> Self {
        Self { build }
    }
}

impl Collector for ProcessCollector {
    fn encode(&self, encoder: DescriptorEncoder) -> fmt::Result {
        let mut s = Scrape::new(encoder, &METRICS);
        let mut labels = vec![("version", self.build.version)];
        if let Some(commit) = self.build.commit {
            labels.push(("commit", commit));
        }
        s.info("parley_build_info", &labels)?;
        let Some(p) = ProcessFigures::read() else {
            return Ok(());
        };
        s.counter_f64("process_cpu_seconds_total", p.cpu_seconds)?;
        s.gauge("process_resident_memory_bytes", p.resident_bytes as f64)?;
        s.gauge("process_open_fds", p.open_fds as f64)?;
        if let Some(max) = p.max_fds {
            s.gauge("process_max_fds", max as f64)?;
        }
        s.gauge("process_start_time_seconds", p.start_time_seconds)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use prometheus_client::registry::Registry;

    use super::*;

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        // A command name with a space and a parenthesis; utime 150, stime 50, starttime 1234.
        let stat = "42 (my (odd) cmd) S 1 42 42 0 -1 4194560 100 0 0 0 150 50 0 0 20 0 4 0 \
                    1234 1000000 500 18446744073709551615";
        assert_eq!(parse_stat(stat), Some((200, 1234)));
        assert_eq!(parse_stat("42 (cut"), None);
    }

    #[test]
    fn status_limits_and_boot_time_are_read() {
        assert_eq!(
            parse_resident("Name:\tx\nVmRSS:\t    2048 kB\nThreads: 1\n"),
            Some(2048 * 1024)
        );
        assert_eq!(parse_resident("Name:\tx\n"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 524288               files\n";
        assert_eq!(parse_max_fds(limits), Some(Some(1024)));
        let unlimited =
            "Max open files            unlimited            unlimited            files\n";
        assert_eq!(parse_max_fds(unlimited), Some(None));
        assert_eq!(
            parse_boot_time("cpu 1 2 3\nbtime 1700000000\n"),
            Some(1_700_000_000)
        );
    }

    #[test]
    fn this_process_is_read_from_proc() {
        let p = ProcessFigures::read().unwrap();
        assert!(p.resident_bytes > 0);
        assert!(p.open_fds >= 3, "stdin, stdout, stderr at least: {p:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        // Started before now, and not in another decade (a wrong boot time or tick rate).
        assert!(p.start_time_seconds <= now + 1.0, "{p:?}");
        assert!(p.start_time_seconds > now - 86_400.0 * 365.0, "{p:?}");
    }

    #[test]
    fn the_collector_writes_every_metric_of_its_table() {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(ProcessCollector::new(BuildInfo {
            version: "9.9.9",
            commit: Some("abc"),
        })));
        let text = crate::encode(&registry);
        assert!(
            text.contains("parley_build_info{version=\"9.9.9\",commit=\"abc\"} 1\n"),
            "{text}"
        );
        for m in &METRICS {
            // The soft limit may be unlimited (no series then): its lines say so.
            if m.name == "process_max_fds" && !text.contains("process_max_fds ") {
                continue;
            }
            assert!(
                text.contains(&format!("# TYPE {} {}\n", m.name, m.kind.as_str())),
                "{}: {text}",
                m.name
            );
        }
    }
}
