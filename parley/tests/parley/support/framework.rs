//! The framework under chaos: [`Sleeper`] runs short shell tasks released over time and
//! records in [`Seen`] every update it receives.

#![allow(clippy::unwrap_used, dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use framework_sdk::prelude::*;
use serde_json::{json, Value};

/// What the framework saw, shared with the test.
#[derive(Default)]
pub struct Seen {
    /// The last status of each task.
    pub last: BTreeMap<String, TaskStatus>,
    /// Every update, in order.
    pub updates: Vec<TaskStatus>,
    /// When each batch of offers arrived.
    pub offers_at: Vec<Instant>,
    /// How many tasks were launched (accepts sent), relaunches included.
    pub launched: usize,
    /// How many tasks came back from a failed launch.
    pub requeued: usize,
}

impl Seen {
    /// How many tasks are terminal in the framework's view.
    pub fn terminal(&self) -> usize {
        self.last.values().filter(|s| s.state.is_terminal()).count()
    }

    /// How many tasks ended `lost` in the framework's view.
    pub fn lost(&self) -> usize {
        self.last
            .values()
            .filter(|s| s.state == TaskState::Lost)
            .count()
    }

    /// The first offer at or after `t`.
    pub fn first_offer_after(&self, t: Instant) -> Option<Instant> {
        self.offers_at.iter().copied().find(|at| *at >= t)
    }
}

/// A framework that runs `total` copies of `sleep 0.2`, released one every `every` so that
/// the run spreads over time, relaunching (same id) any task whose launch failed.
pub struct Sleeper {
    task: Task,
    queue: Vec<TaskId>,
    total: usize,
    started: Instant,
    every: Duration,
    released: usize,
    seen: Arc<Mutex<Seen>>,
}

impl Sleeper {
    /// The framework and its shared view.
    pub fn new(total: usize, every: Duration) -> (Sleeper, Arc<Mutex<Seen>>) {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let queue = (0..total)
            .rev()
            .map(|i| TaskId::new(format!("t{i:03}")).unwrap())
            .collect();
        let s = Sleeper {
            task: Task::shell("sleep 0.2")
                .resources("cpus=0.1,mem=16")
                .build()
                .unwrap(),
            queue,
            total,
            started: Instant::now(),
            every,
            released: 0,
            seen: Arc::clone(&seen),
        };
        (s, seen)
    }
}

#[async_trait]
impl Scheduler for Sleeper {
    async fn offers(&mut self, _ctx: &mut Context, offers: Vec<Offer>) -> Decisions {
        let mut seen = self.seen.lock().unwrap();
        seen.offers_at.push(Instant::now());
        let due = (self.started.elapsed().as_micros() / self.every.as_micros().max(1)) as usize;
        let due = due.min(self.total);
        let mut budget = due.saturating_sub(self.released);
        let mut launched = 0;
        let queue = &mut self.queue;
        let d = Decisions::pack(&offers, &self.task, || {
            if budget == 0 {
                return None;
            }
            let id = queue.pop()?;
            budget -= 1;
            launched += 1;
            Some(id)
        });
        self.released += launched;
        seen.launched += launched;
        d
    }

    async fn status_update(&mut self, _ctx: &mut Context, status: &TaskStatus) {
        let mut seen = self.seen.lock().unwrap();
        seen.updates.push(status.clone());
        seen.last
            .insert(status.task_id.as_str().to_owned(), status.clone());
    }

    fn requeue(&mut self, task: TaskSpec) {
        self.seen.lock().unwrap().requeued += 1;
        self.released = self.released.saturating_sub(1);
        self.queue.push(task.task_id);
    }

    fn pending_tasks(&self) -> usize {
        self.queue.len()
    }
}

/// The driver's config for the chaos tests: short filters and quick reconnects.
pub fn driver_config(coordinators: &str) -> DriverConfig {
    let mut c = DriverConfig::new(coordinators, "chaos", "eng".parse().unwrap());
    c.decline_refuse = Duration::from_millis(100);
    c.accept_refuse = Duration::from_millis(100);
    c.revive_interval = Duration::from_millis(200);
    c.offer_hold_timeout = Duration::from_millis(500);
    c.reconnect_backoff_max = Duration::from_millis(500);
    c.missed_heartbeats = 3;
    c.request_timeout = Duration::from_secs(3);
    c.unregister_on_stop = false;
    c
}
