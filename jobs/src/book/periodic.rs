//! Periodic jobs: which runs are due, under their concurrency policy.

use super::base::Book;
use super::records::JobState;
use crate::clock::Millis;
use crate::schedule::Concurrency;
use crate::spec::JobSpec;

impl Book {
    /// The periodic jobs' runs that are due: for each, the run's spec (to store and submit)
    /// and the runs it replaces (to stop). Runs a policy forbids are skipped; every due job's
    /// next run moves past `now`.
    pub(super) fn due_runs(&mut self, now: Millis) -> Vec<(JobSpec, Vec<String>)> {
        let due: Vec<String> = self
            .jobs
            .values()
            .filter(|j| j.state == JobState::Active && j.next_run_ms.is_some_and(|t| t <= now))
            .map(|j| j.spec.name.clone())
            .collect();
        let mut out = Vec::new();
        for name in due {
            let prefix = format!("{name}-");
            let running: Vec<String> = self
                .jobs
                .values()
                .filter(|j| !j.state.is_done())
                .filter(|j| {
                    j.spec.name.strip_prefix(&prefix).is_some_and(|rest| {
                        !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit())
                    })
                })
                .map(|j| j.spec.name.clone())
                .collect();
            let Some(job) = self.jobs.get_mut(&name) else {
                continue;
            };
            let Some(periodic) = job.spec.periodic.clone() else {
                continue;
            };
            job.next_run_ms = periodic.schedule.next_after(now);
            let run_name = format!("{prefix}{}", now / 1000);
            let replaced = match periodic.concurrency {
                Concurrency::Forbid if !running.is_empty() => continue,
                Concurrency::Replace => running,
                _ => Vec::new(),
            };
            let run = job.spec.run(&run_name);
            if self.jobs.contains_key(&run_name) {
                continue;
            }
            out.push((run, replaced));
        }
        out
    }
}
