//! The batch workload: jobs of many tasks with diverse demands and durations, read from a JSON
//! file or generated from a seed.
//!
//! File format: a JSON array of jobs,
//! `[{"name": "etl", "tasks": [{"resources": {"cpus": 2, "mem": 1024}, "duration_s": 3, "count": 4}]}]`
//! (`count` defaults to 1).

use framework_sdk::Resources;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// One job: groups of identical tasks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// A name for progress lines.
    pub name: String,
    /// The job's tasks, grouped.
    pub tasks: Vec<TaskGroup>,
}

/// `count` identical tasks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskGroup {
    /// What each task needs.
    pub resources: Resources,
    /// How long each runs, in seconds.
    pub duration_s: f64,
    /// How many.
    #[serde(default = "one")]
    pub count: usize,
}

fn one() -> usize {
    1
}

/// The most tasks a workload may hold; keeps a typo from queueing billions.
pub const MAX_TASKS: usize = 100_000;

/// Checks a workload; the message names the job and what is wrong.
pub fn validate(jobs: &[JobSpec]) -> anyhow::Result<()> {
    if jobs.is_empty() {
        anyhow::bail!("the workload has no jobs");
    }
    let mut total = 0usize;
    for (i, job) in jobs.iter().enumerate() {
        let which = format!("job {i} ({:?})", job.name);
        if job.tasks.is_empty() {
            anyhow::bail!("{which} has no tasks");
        }
        for group in &job.tasks {
            if group.resources.is_empty() {
                anyhow::bail!(
                    "{which}: a task group has empty resources; give e.g. {{\"cpus\": 1}}"
                );
            }
            if !(group.duration_s.is_finite() && group.duration_s > 0.0 && group.duration_s <= 1e6)
            {
                anyhow::bail!(
                    "{which}: duration_s {} must be in (0, 1e6]",
                    group.duration_s
                );
            }
            if group.count == 0 {
                anyhow::bail!("{which}: count must be at least 1");
            }
            total = total.saturating_add(group.count);
        }
    }
    if total > MAX_TASKS {
        anyhow::bail!("the workload has {total} tasks; at most {MAX_TASKS} are allowed");
    }
    Ok(())
}

/// Reads and validates a workload file.
pub fn load(path: &std::path::Path) -> anyhow::Result<Vec<JobSpec>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let jobs: Vec<JobSpec> = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{} is not a valid workload: {e}", path.display()))?;
    validate(&jobs)?;
    Ok(jobs)
}

/// Generates `jobs` jobs of 1 to `max_tasks` tasks each. Each job has its own shape (CPU-heavy,
/// memory-heavy, or balanced, independently drawn), so demands are diverse and weakly
/// correlated, the workloads where packing pays. Durations are 1 to 10 s times `time_scale`.
pub fn generate(seed: u64, jobs: usize, max_tasks: usize, time_scale: f64) -> Vec<JobSpec> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..jobs)
        .map(|j| {
            let (cpus, mem) = match rng.gen_range(0..3) {
                0 => (
                    rng.gen_range(2..=4) as f64,
                    rng.gen_range(1..=4) as f64 * 256.0,
                ),
                1 => (
                    rng.gen_range(1..=2) as f64 * 0.5,
                    rng.gen_range(8..=16) as f64 * 256.0,
                ),
                _ => (
                    rng.gen_range(1..=3) as f64,
                    rng.gen_range(4..=8) as f64 * 256.0,
                ),
            };
            let resources =
                Resources::from_units([("cpus", cpus), ("mem", mem)]).unwrap_or_default();
            let duration_s = (rng.gen_range(1..=10) as f64 * time_scale).max(0.001);
            let count = rng.gen_range(1..=max_tasks.max(1));
            JobSpec {
                name: format!("job{j}"),
                tasks: vec![TaskGroup {
                    resources,
                    duration_s,
                    count,
                }],
            }
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn generation_is_reproducible_and_valid() {
        let a = generate(7, 10, 5, 1.0);
        assert_eq!(a, generate(7, 10, 5, 1.0));
        assert_ne!(a, generate(8, 10, 5, 1.0));
        validate(&a).unwrap();
        assert!(a
            .iter()
            .all(|j| j.tasks[0].count <= 5 && j.tasks[0].duration_s >= 1.0));
    }

    #[test]
    fn bad_workloads_are_refused_with_the_reason() {
        let bad: Vec<JobSpec> = serde_json::from_str(
            r#"[{"name": "x", "tasks": [{"resources": {"cpus": 1}, "duration_s": -1}]}]"#,
        )
        .unwrap();
        assert!(validate(&bad)
            .unwrap_err()
            .to_string()
            .contains("duration_s"));
        assert!(validate(&[]).is_err());
        assert!(serde_json::from_str::<Vec<JobSpec>>(r#"[{"name": "x", "taks": []}]"#).is_err());
        let zero: Vec<JobSpec> = serde_json::from_str(
            r#"[{"name": "x", "tasks": [{"resources": {"cpus": 1}, "duration_s": 1, "count": 0}]}]"#,
        )
        .unwrap();
        assert!(validate(&zero).unwrap_err().to_string().contains("count"));
    }
}
