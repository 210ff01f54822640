//! An isolated task's cgroup from its spec, and its end: [`limits_of`] (what the cgroup
//! enforces), [`finish_cgroup`] (kill, read, remove), [`measured`] (how the end reads: an OOM
//! kill is `memory_limit`, the usage goes into the message).

use protocol::TaskSpec;

use super::{Limits, TaskCgroup, Usage};
use crate::process::Exit;

/// The limits of an isolated task's cgroup: `mem` (MiB) in bytes, `cpus`, `isolation.pids` or
/// the agent's default.
pub fn limits_of(spec: &TaskSpec, default_pids: u64) -> Limits {
    let mem = spec.resources.millis("mem");
    Limits {
        memory_bytes: (mem > 0).then(|| (mem * 1024 * 1024).div_ceil(1000)),
        cpu_millis: spec.resources.millis("cpus"),
        pids: spec
            .isolation
            .as_ref()
            .and_then(|i| i.pids)
            .and_then(|p| u64::try_from(p).ok())
            .unwrap_or(default_pids),
        devices: Vec::new(),
    }
}

/// Ends an isolated task's cgroup: kills every process left in it, reads what the task used,
/// removes it (retrying for up to two seconds). Blocking: call off the async threads.
pub fn finish_cgroup(cgroup: &TaskCgroup) -> Usage {
    cgroup.kill_all();
    let usage = cgroup.usage();
    if let Err(e) = cgroup.remove(std::time::Duration::from_secs(2)) {
        tracing::warn!("cannot remove the task's cgroup: {e}");
    }
    usage
}

/// How an isolated task's end reads, with what its cgroup says: an OOM kill is `memory_limit`
/// naming the limit, and the usage goes into the message.
pub fn measured(exit: Exit, usage: &Usage, memory_bytes: Option<u64>) -> Exit {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let secs = |ns: u64| ns as f64 / 1e9;
    let mut parts = Vec::new();
    if let Some(p) = usage.peak_bytes {
        parts.push(format!("peak memory {:.1} MiB", mib(p)));
    }
    if let Some(c) = usage.cpu_ns {
        parts.push(format!("CPU {:.2} s", secs(c)));
    }
    if let Some(t) = usage.throttled_ns {
        parts.push(format!("throttled {:.2} s", secs(t)));
    }
    let memory_limit = (usage.oom_kills > 0).then(|| match memory_bytes {
        Some(b) => format!(
            "memory_limit: the task reached its memory limit of {:.0} MiB (mem) and the kernel killed it ({} OOM kill(s))",
            mib(b),
            usage.oom_kills
        ),
        None => "memory_limit: the kernel's OOM killer killed the task".to_string(),
    });
    Exit::Measured {
        exit: Box::new(exit),
        memory_limit,
        usage: parts.join(", "),
        report: protocol::TaskUsage {
            peak_memory_bytes: usage.peak_bytes,
            cpu_seconds: usage.cpu_ns.map(secs),
            throttled_seconds: usage.throttled_ns.map(secs),
            ..Default::default()
        },
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn spec(resources: &str, pids: Option<i64>) -> TaskSpec {
        TaskSpec {
            task_id: protocol::TaskId::new("t").unwrap(),
            name: "t".into(),
            agent_id: protocol::AgentId::new(),
            resources: resources.parse().unwrap(),
            command: protocol::CommandSpec::Shell("true".into()),
            env: Default::default(),
            duration_s: None,
            isolation: pids.map(|p| protocol::Isolation {
                pids: Some(p),
                ..Default::default()
            }),
            health_check: None,
            priority: None,
        }
    }

    #[test]
    fn limits_come_from_the_spec_and_the_agent_default() {
        let l = limits_of(&spec("cpus=0.5,mem=64", None), 4096);
        assert_eq!(l.memory_bytes, Some(64 << 20));
        assert_eq!((l.cpu_millis, l.pids), (500, 4096));
        let l = limits_of(&spec("cpus=1", Some(10)), 4096);
        assert_eq!((l.memory_bytes, l.pids), (None, 10));
    }

    #[test]
    fn an_oom_kill_is_told_with_the_limit_and_usage_is_reported() {
        let usage = Usage {
            oom_kills: 1,
            peak_bytes: Some(64 << 20),
            cpu_ns: Some(1_500_000_000),
            throttled_ns: Some(250_000_000),
        };
        let Exit::Measured {
            exit,
            memory_limit,
            usage,
            report,
        } = measured(Exit::Code(137), &usage, Some(64 << 20))
        else {
            panic!("not measured");
        };
        assert_eq!(*exit, Exit::Code(137));
        let m = memory_limit.unwrap();
        assert!(m.starts_with("memory_limit") && m.contains("64 MiB"), "{m}");
        assert_eq!(usage, "peak memory 64.0 MiB, CPU 1.50 s, throttled 0.25 s");
        assert_eq!(report.peak_memory_bytes, Some(64 << 20));
        assert_eq!(report.cpu_seconds, Some(1.5));
        assert_eq!(report.throttled_seconds, Some(0.25));
        let quiet = measured(Exit::Code(0), &Usage::default(), None);
        assert!(matches!(
            quiet,
            Exit::Measured {
                memory_limit: None,
                ..
            }
        ));
    }
}
