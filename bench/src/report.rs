//! [`Report`]: everything one run measured, printed as one markdown table or written as JSON,
//! and [`Accounting`], the check that every launched task is accounted for.

use std::fmt::Write;

use serde::Serialize;

/// A `p50`/`p99` pair in milliseconds; `None` where nothing was measured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// Median, ms.
    pub p50_ms: Option<f64>,
    /// 99th percentile, ms.
    pub p99_ms: Option<f64>,
    /// How many samples they come from.
    pub samples: u64,
}

/// How every task of the throughput phase ended, as the frameworks and the coordinator see it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Accounting {
    /// Tasks the frameworks were to run.
    pub tasks: usize,
    /// Tasks launched (accepted and not refused).
    pub launched: usize,
    /// Tasks whose `running` update arrived.
    pub running: usize,
    /// Tasks whose `finished` update arrived.
    pub finished: usize,
    /// Tasks that ended in another terminal state (`task: state`, at most 10 shown).
    pub ended_otherwise: Vec<String>,
    /// How many tasks ended otherwise in all.
    pub ended_otherwise_count: usize,
    /// Accepts the coordinator refused (their tasks were launched again from later offers).
    pub failed_launches: u64,
    /// The frameworks' tasks the coordinator lists.
    pub coordinator_tasks: usize,
    /// Those not in a terminal state (should be none).
    pub coordinator_tasks_not_terminal: usize,
    /// The count the coordinator must list when it keeps every completed task (each framework's
    /// share within its `max_completed_tasks_per_framework`); `None` when it may forget some.
    pub coordinator_tasks_expected: Option<usize>,
    /// True once every agent's and every framework's `used` was empty again.
    pub books_released: bool,
}

impl Accounting {
    /// Every task launched, ran and finished; the coordinator agrees and holds no resources for
    /// them. The error lists every mismatch.
    pub fn check(&self) -> Result<(), Mismatches> {
        let mut wrong = Vec::new();
        if self.launched != self.tasks {
            wrong.push(format!(
                "{} of {} tasks launched",
                self.launched, self.tasks
            ));
        }
        if self.running != self.tasks {
            wrong.push(format!(
                "{} of {} tasks reached running",
                self.running, self.tasks
            ));
        }
        if self.finished != self.tasks {
            wrong.push(format!(
                "{} of {} tasks finished; others: {:?}",
                self.finished, self.tasks, self.ended_otherwise
            ));
        }
        if self.coordinator_tasks_not_terminal != 0 {
            wrong.push(format!(
                "the coordinator lists {} of the tasks as not terminal",
                self.coordinator_tasks_not_terminal
            ));
        }
        if let Some(expected) = self.coordinator_tasks_expected {
            if self.coordinator_tasks != expected {
                wrong.push(format!(
                    "the coordinator lists {} tasks, expected {expected}",
                    self.coordinator_tasks
                ));
            }
        }
        if !self.books_released {
            wrong.push("the coordinator still counts resources as used".into());
        }
        if wrong.is_empty() {
            Ok(())
        } else {
            Err(Mismatches(wrong))
        }
    }
}

/// What a run's check found wrong: one sentence per mismatch (joined with `; ` when shown).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.join("; "))]
pub struct Mismatches(pub Vec<String>);

/// The `GET /api/v1/state` figure.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StateFigure {
    /// Long-running tasks running while it was measured.
    pub running_tasks: usize,
    /// Tasks in the snapshot (running ones plus the completed ones the coordinator keeps).
    pub snapshot_tasks: usize,
    /// Size of the answer.
    pub bytes: usize,
    /// Median of the calls, ms.
    pub median_ms: f64,
    /// Every call, ms.
    pub calls_ms: Vec<f64>,
    /// Time from the first accept to the last `running` of those tasks, s.
    pub launch_s: f64,
    /// True once every agent's `used` was empty after the frameworks were removed.
    pub released: bool,
    /// The coordinator's RSS (`VmRSS`) once every state task ran, before the calls, MiB.
    pub rss_running_mib: Option<f64>,
    /// Its RSS right after the calls, MiB.
    pub rss_after_calls_mib: Option<f64>,
}

/// Everything one run measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Report {
    /// Simulated agents.
    pub agents: usize,
    /// Frameworks of the throughput phase.
    pub frameworks: usize,
    /// Tasks of the throughput phase.
    pub tasks: usize,
    /// Each task's `duration_s`.
    pub task_duration_s: f64,
    /// Resources of each agent.
    pub agent_resources: String,
    /// Resources of each task.
    pub task_resources: String,
    /// From the first agent started to every agent active, s.
    pub agents_registered_s: f64,
    /// From the throughput phase's start to its last framework registered, s.
    pub frameworks_registered_s: Option<f64>,
    /// Wall time of the throughput phase (first registration → last framework done), s.
    pub phase_s: f64,
    /// Tasks reaching `running` per second over the middle 80 % of them.
    pub launches_per_s_sustained: Option<f64>,
    /// Tasks reaching `running` per second from the first to the last.
    pub launches_per_s_overall: Option<f64>,
    /// Accept decided → `running` received.
    pub launch_latency: Percentiles,
    /// Terminal update received → next offer of that agent received (by any framework).
    pub offer_latency: Percentiles,
    /// Ends not followed by an offer of their agent before the phase ended.
    pub offer_latency_unmatched: usize,
    /// Freed resources → the offer made of them, inside the coordinator
    /// (`parley_offer_wait_seconds`; empty for a coordinator without it).
    pub offer_wait: Percentiles,
    /// Allocation runs during the phase, from the coordinator's histogram.
    pub allocation_run: Percentiles,
    /// Which histogram the allocation figures come from.
    pub allocation_histogram: String,
    /// Coordinator CPU (user + system) during the phase, s; `None` in process.
    pub coordinator_cpu_s: Option<f64>,
    /// The same per 1,000 tasks.
    pub coordinator_cpu_s_per_1000_tasks: Option<f64>,
    /// CPU of all agent processes during the phase, s.
    pub agents_cpu_s: Option<f64>,
    /// CPU of this process (the frameworks; in process: everything) during the phase, s.
    pub harness_cpu_s: Option<f64>,
    /// Coordinator peak RSS (`VmHWM`) at the end of the run, MiB.
    pub coordinator_peak_rss_mib: Option<f64>,
    /// The `GET /api/v1/state` figure, when state tasks were asked for.
    pub state: Option<StateFigure>,
    /// The accounting check.
    pub accounting: Accounting,
}

fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".into(), |v| format!("{v:.2} ms"))
}

fn pair(p: &Percentiles) -> String {
    format!(
        "{} / {} ({} samples)",
        ms(p.p50_ms),
        ms(p.p99_ms),
        p.samples
    )
}

fn opt(v: Option<f64>, unit: &str, digits: usize) -> String {
    v.map_or_else(|| "n/a".into(), |v| format!("{v:.digits$}{unit}"))
}

impl Report {
    /// `cpu_s` spread over the throughput phase: how many cores it kept busy on average.
    fn cores(&self, cpu_s: Option<f64>) -> Option<f64> {
        cpu_s
            .filter(|_| self.phase_s > 0.0)
            .map(|s| s / self.phase_s)
    }

    /// Each part's share of the CPU the three used in the phase, in percent.
    fn cpu_shares(&self) -> String {
        let parts = [
            self.coordinator_cpu_s,
            self.agents_cpu_s,
            self.harness_cpu_s,
        ];
        let total: f64 = parts.iter().flatten().sum();
        if total <= 0.0 {
            return "n/a".into();
        }
        parts
            .iter()
            .map(|p| opt(p.map(|s| 100.0 * s / total), " %", 0))
            .collect::<Vec<_>>()
            .join(" / ")
    }

    /// The report as one markdown table.
    pub fn markdown(&self) -> String {
        let mut rows: Vec<(String, String)> = vec![
            (
                "size".into(),
                format!(
                    "{} agents ({}) × {} frameworks, {} tasks ({}, {} s)",
                    self.agents,
                    self.agent_resources,
                    self.frameworks,
                    self.tasks,
                    self.task_resources,
                    self.task_duration_s
                ),
            ),
            (
                "every agent registered (first agent started → all active)".into(),
                format!("{:.1} s", self.agents_registered_s),
            ),
            (
                "every framework registered (phase start → last registered)".into(),
                opt(self.frameworks_registered_s, " s", 1),
            ),
            ("throughput phase".into(), format!("{:.1} s", self.phase_s)),
            (
                "task launches/s sustained (middle 80 %; first → last)".into(),
                format!(
                    "**{}** ({})",
                    opt(self.launches_per_s_sustained, "/s", 0),
                    opt(self.launches_per_s_overall, "/s", 0)
                ),
            ),
            (
                "launch latency p50 / p99 (accept → running)".into(),
                pair(&self.launch_latency),
            ),
            (
                "offer latency p50 / p99 (task end seen → next offer of its agent)".into(),
                format!(
                    "{}; {} ends not re-offered",
                    pair(&self.offer_latency),
                    self.offer_latency_unmatched
                ),
            ),
            (
                "offer wait p50 / p99 in the coordinator (resources freed → offer made)".into(),
                pair(&self.offer_wait),
            ),
            (
                format!("allocation run p50 / p99 (`{}`)", self.allocation_histogram),
                pair(&self.allocation_run),
            ),
            (
                "coordinator CPU per 1,000 tasks (phase total)".into(),
                format!(
                    "{} ({})",
                    opt(self.coordinator_cpu_s_per_1000_tasks, " s", 3),
                    opt(self.coordinator_cpu_s, " s", 2)
                ),
            ),
            (
                "agents' / harness' CPU in the phase (cores used on average)".into(),
                format!(
                    "{} ({}) / {} ({})",
                    opt(self.agents_cpu_s, " s", 2),
                    opt(self.cores(self.agents_cpu_s), "", 2),
                    opt(self.harness_cpu_s, " s", 2),
                    opt(self.cores(self.harness_cpu_s), "", 2)
                ),
            ),
            (
                "CPU share of the phase: coordinator / agents / harness".into(),
                self.cpu_shares(),
            ),
            (
                "coordinator peak RSS (VmHWM)".into(),
                opt(self.coordinator_peak_rss_mib, " MiB", 1),
            ),
        ];
        if let Some(s) = &self.state {
            rows.push((
                format!(
                    "coordinator RSS with {} tasks running / after the `/state` calls",
                    s.running_tasks
                ),
                format!(
                    "**{}** / {}",
                    opt(s.rss_running_mib, " MiB", 1),
                    opt(s.rss_after_calls_mib, " MiB", 1)
                ),
            ));
        }
        match &self.state {
            Some(s) => rows.push((
                format!("`GET /api/v1/state` median ({} running tasks)", s.running_tasks),
                format!(
                    "**{:.1} ms** ({} tasks in the snapshot, {:.1} MiB; calls {:?} ms; launched in {:.1} s)",
                    s.median_ms,
                    s.snapshot_tasks,
                    s.bytes as f64 / (1024.0 * 1024.0),
                    s.calls_ms
                        .iter()
                        .map(|v| (v * 10.0).round() / 10.0)
                        .collect::<Vec<_>>(),
                    s.launch_s
                ),
            )),
            None => rows.push(("`GET /api/v1/state`".into(), "not measured".into())),
        }
        let a = &self.accounting;
        rows.push((
            "accounting".into(),
            format!(
                "{} launched, {} running, {} finished, {} ended otherwise, {} refused accepts; \
                 coordinator lists {} ({} not terminal); books released: {}",
                a.launched,
                a.running,
                a.finished,
                a.ended_otherwise_count,
                a.failed_launches,
                a.coordinator_tasks,
                a.coordinator_tasks_not_terminal,
                a.books_released
            ),
        ));
        let mut out = String::from("| metric | value |\n|---|---|\n");
        for (metric, value) in rows {
            let _ = writeln!(out, "| {metric} | {value} |");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> Accounting {
        Accounting {
            tasks: 3,
            launched: 3,
            running: 3,
            finished: 3,
            coordinator_tasks: 3,
            coordinator_tasks_expected: Some(3),
            books_released: true,
            ..Accounting::default()
        }
    }

    #[test]
    fn accounting_names_every_mismatch() {
        assert_eq!(good().check(), Ok(()));
        let bad = Accounting {
            finished: 2,
            ended_otherwise: vec!["t1: lost".into()],
            ended_otherwise_count: 1,
            coordinator_tasks_not_terminal: 1,
            books_released: false,
            ..good()
        };
        let err = bad.check().unwrap_err().to_string();
        assert!(err.contains("2 of 3 tasks finished"), "{err}");
        assert!(err.contains("1 of the tasks as not terminal"), "{err}");
        assert!(err.contains("still counts resources"), "{err}");
        let forgot = Accounting {
            coordinator_tasks: 2,
            ..good()
        };
        assert!(forgot.check().is_err());
        let may_forget = Accounting {
            coordinator_tasks: 2,
            coordinator_tasks_expected: None,
            ..good()
        };
        assert_eq!(may_forget.check(), Ok(()));
    }

    #[test]
    fn the_table_has_a_row_per_figure() {
        let report = Report {
            agents: 10,
            frameworks: 2,
            tasks: 3,
            launches_per_s_sustained: Some(1234.4),
            launch_latency: Percentiles {
                p50_ms: Some(1.234),
                p99_ms: None,
                samples: 3,
            },
            accounting: good(),
            phase_s: 10.0,
            agents_registered_s: 2.5,
            frameworks_registered_s: Some(3.5),
            coordinator_cpu_s: Some(6.0),
            agents_cpu_s: Some(3.0),
            harness_cpu_s: Some(1.0),
            ..Report::default()
        };
        let table = report.markdown();
        assert!(table.contains("| 2.5 s |"), "{table}");
        assert!(table.contains("3.00 s (0.30) / 1.00 s (0.10)"), "{table}");
        assert!(table.contains("| 60 % / 30 % / 10 % |"), "{table}");
        assert!(
            table.starts_with("| metric | value |\n|---|---|\n"),
            "{table}"
        );
        assert!(table.contains("**1234/s**"), "{table}");
        assert!(table.contains("1.23 ms / n/a (3 samples)"), "{table}");
        assert!(
            table.contains("| `GET /api/v1/state` | not measured |"),
            "{table}"
        );
        assert!(
            table
                .contains("| every framework registered (phase start → last registered) | 3.5 s |"),
            "{table}"
        );
        assert_eq!(table.lines().count(), 17, "{table}");
        let with_state = Report {
            state: Some(StateFigure {
                running_tasks: 100,
                rss_running_mib: Some(512.25),
                ..StateFigure::default()
            }),
            ..report
        }
        .markdown();
        assert!(
            with_state.contains("| coordinator RSS with 100 tasks running / after the `/state` calls | **512.2 MiB** / n/a |"),
            "{with_state}"
        );
        assert_eq!(with_state.lines().count(), 18, "{with_state}");
    }
}
