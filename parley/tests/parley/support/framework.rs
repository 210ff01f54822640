//! The frameworks under chaos: [`Sleeper`] runs short shell tasks released over time;
//! [`Retrier`] runs tasks that each hold a lock while they run, and runs a lost one again as a
//! new attempt. Both record in [`Seen`] every update they receive.

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

    /// The attempts that ended `failed` (a [`Retrier`]'s: started while another attempt of the
    /// same task ran), with their messages.
    pub fn failed(&self) -> Vec<(String, Option<String>)> {
        self.last
            .iter()
            .filter(|(_, s)| s.state == TaskState::Failed)
            .map(|(id, s)| (id.clone(), s.message.clone()))
            .collect()
    }

    /// The states attempt `id` went through in the framework's view from its first `running`,
    /// repeats dropped.
    pub fn history(&self, id: &str) -> Vec<TaskState> {
        let mut out: Vec<TaskState> = Vec::new();
        let updates = self.updates.iter().filter(|s| s.task_id.as_str() == id);
        for s in updates.skip_while(|s| s.state != TaskState::Running) {
            if out.last() != Some(&s.state) {
                out.push(s.state);
            }
        }
        out
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

/// Where a [`Retrier`] may start attempt `attempt` of task `index` (given an offer).
pub type Placement = fn(&Offer, usize, usize) -> bool;

/// A framework that runs `tasks` tasks as attempts `tNN-A` (task `NN`, attempt `A`), launching
/// attempt `A+1` of a task whose attempt is `lost` or `gone`, at most `per_offer` per offer and
/// where its [`Placement`] allows. Every attempt holds a lock on its task's file (`flock -n`)
/// while it runs, so an attempt started while an earlier one of the same task still runs
/// cannot take it and fails at once (exit 75): a task never runs twice at once unseen.
pub struct Retrier {
    task: Task,
    /// The next attempts, the next first.
    queue: std::collections::VecDeque<(usize, usize)>,
    per_offer: usize,
    place: Placement,
    seen: Arc<Mutex<Seen>>,
}

impl Retrier {
    /// `tasks` tasks, each running `run` (e.g. `sleep 12`) with `resources`, holding its lock
    /// in directory `locks`; at most 4 per offer, anywhere.
    pub fn new(
        locks: &Path,
        run: &str,
        tasks: usize,
        resources: &str,
    ) -> (Retrier, Arc<Mutex<Seen>>) {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let line = format!(
            "exec flock -n -E 75 {}/\"${{PARLEY_TASK_ID%-*}}\".lock {run}",
            locks.display()
        );
        let task = Task::shell(line).resources(resources).build().unwrap();
        let r = Retrier {
            task,
            queue: (0..tasks).map(|i| (i, 0)).collect(),
            per_offer: 4,
            place: |_, _, _| true,
            seen: Arc::clone(&seen),
        };
        (r, seen)
    }

    /// At most `n` attempts per offer.
    pub fn per_offer(mut self, n: usize) -> Retrier {
        self.per_offer = n;
        self
    }

    /// Attempts start only where `place` says.
    pub fn placed(mut self, place: Placement) -> Retrier {
        self.place = place;
        self
    }
}

/// The id of attempt `attempt` of task `i`.
pub fn attempt_id(i: usize, attempt: usize) -> TaskId {
    TaskId::new(format!("t{i:02}-{attempt}")).unwrap()
}

/// The task index and attempt of an attempt's id.
pub fn parse_attempt(id: &str) -> (usize, usize) {
    let (i, a) = id.trim_start_matches('t').split_once('-').unwrap();
    (i.parse().unwrap(), a.parse().unwrap())
}

#[async_trait]
impl Scheduler for Retrier {
    async fn offers(&mut self, _ctx: &mut Context, offers: Vec<Offer>) -> Decisions {
        let mut seen = self.seen.lock().unwrap();
        let (task, queue, place, most) = (&self.task, &mut self.queue, self.place, self.per_offer);
        let d = Decisions::launch_or_decline(&offers, |offer| {
            let mut room = offer.resources.clone();
            let mut tasks = Vec::new();
            queue.retain(|&(i, a)| {
                if tasks.len() == most || !place(offer, i, a) {
                    return true;
                }
                let Some(left) = room.checked_sub(task.resources()) else {
                    return true;
                };
                room = left;
                tasks.push(task.on(offer, attempt_id(i, a)));
                false
            });
            tasks
        });
        seen.launched += d
            .answers()
            .iter()
            .map(|a| match a {
                Answer::Launch { tasks, .. } => tasks.len(),
                _ => 0,
            })
            .sum::<usize>();
        d
    }

    async fn status_update(&mut self, _ctx: &mut Context, status: &TaskStatus) {
        let mut seen = self.seen.lock().unwrap();
        seen.updates.push(status.clone());
        let id = status.task_id.as_str().to_owned();
        let first_verdict = !seen
            .last
            .get(&id)
            .is_some_and(|s| matches!(s.state, TaskState::Lost | TaskState::Gone));
        if matches!(status.state, TaskState::Lost | TaskState::Gone) && first_verdict {
            let (i, a) = parse_attempt(&id);
            self.queue.push_back((i, a + 1));
        }
        seen.last.insert(id, status.clone());
    }

    fn requeue(&mut self, task: TaskSpec) {
        self.seen.lock().unwrap().requeued += 1;
        self.queue.push_front(parse_attempt(task.task_id.as_str()));
    }

    fn pending_tasks(&self) -> usize {
        self.queue.len()
    }
}
