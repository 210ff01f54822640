//! A scheduler for driver tests that writes what happens to the log it shares with the fake
//! coordinator, so tests can check the order of callbacks and calls.
#![allow(clippy::unwrap_used, dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use framework_sdk::{Context, Decisions, Scheduler, SdkError};
use protocol::{
    AgentId, CommandSpec, FrameworkId, Offer, OfferId, TaskId, TaskSpec, TaskState, TaskStatus,
    UpdateId,
};

use super::Fake;

/// How the probe answers offers.
#[derive(Clone, Copy, PartialEq)]
pub enum Mode {
    /// One task per offer while tasks are pending, decline the rest.
    Launch,
    /// Answer nothing.
    Hold,
    /// Decline every offer for a minute.
    DeclineForAMinute,
    /// Up to this many tasks per offer while tasks are pending, decline the rest.
    Pack(usize),
    /// Every pending task as one gang, one member per offer, when the offers are enough;
    /// otherwise decline them all.
    Gang,
}

/// A scheduler that writes what happens to a log shared with the fake coordinator.
pub struct Probe {
    pub log: Arc<Mutex<Vec<String>>>,
    pub mode: Mode,
    pub pending: usize,
    pub launched: usize,
}

impl Probe {
    pub fn new(fake: &Fake, mode: Mode, pending: usize) -> Self {
        Self {
            log: fake.log.clone(),
            mode,
            pending,
            launched: 0,
        }
    }

    fn note(&self, line: String) {
        self.log.lock().unwrap().push(line);
    }
}

#[async_trait::async_trait]
impl Scheduler for Probe {
    async fn registered(&mut self, _ctx: &mut Context, _id: FrameworkId, reregistered: bool) {
        self.note(format!("registered reregistered={reregistered}"));
    }

    async fn offers(&mut self, _ctx: &mut Context, offers: Vec<Offer>) -> Decisions {
        self.note(format!("offers {}", offers.len()));
        match self.mode {
            Mode::Hold => return Decisions::new(),
            Mode::DeclineForAMinute => {
                let mut d = Decisions::new();
                for o in &offers {
                    d.decline(o.offer_id, Some(Duration::from_secs(60)));
                }
                return d;
            }
            Mode::Gang => {
                let mut d = Decisions::new();
                if self.pending == 0 || offers.len() < self.pending {
                    for o in &offers {
                        d.decline(o.offer_id, None);
                    }
                    return d;
                }
                let parts = offers[..self.pending]
                    .iter()
                    .map(|o| {
                        self.launched += 1;
                        let member = spec(&format!("m{}", self.launched), o.agent_id);
                        (vec![o.offer_id], vec![member])
                    })
                    .collect();
                self.pending = 0;
                d.launch_gang("g", parts);
                for o in &offers[self.launched..] {
                    d.decline(o.offer_id, None);
                }
                return d;
            }
            Mode::Launch => {}
            Mode::Pack(_) => {}
        }
        let per_offer = match self.mode {
            Mode::Pack(n) => n,
            _ => 1,
        };
        Decisions::launch_or_decline(&offers, |o| {
            let n = per_offer.min(self.pending);
            self.pending -= n;
            (0..n)
                .map(|_| {
                    self.launched += 1;
                    spec(&format!("t{}", self.launched), o.agent_id)
                })
                .collect()
        })
    }

    async fn rescinded(&mut self, _ctx: &mut Context, offer_id: OfferId) {
        self.note(format!("rescinded {offer_id}"));
    }

    async fn gang_failed(&mut self, _ctx: &mut Context, g: &protocol::gang::GangFailed) {
        self.note(format!("gang_failed {} {}", g.gang_id, g.task_id));
    }

    async fn preempted(&mut self, _ctx: &mut Context, p: &protocol::preempt::Preemption) {
        let tasks: Vec<String> = p.task_ids.iter().map(ToString::to_string).collect();
        self.note(format!("preempted {} for {}", tasks.join(","), p.for_role));
    }

    async fn status_update(&mut self, ctx: &mut Context, status: &TaskStatus) {
        self.note(format!("status {} {}", status.task_id, status.state));
        if status.state == TaskState::Failed {
            self.pending += 1;
        }
        if status.task_id.as_str() == "stop" {
            ctx.stop();
        }
    }

    async fn launch_failed(&mut self, _ctx: &mut Context, tasks: Vec<TaskSpec>, e: &SdkError) {
        self.note(format!(
            "launch_failed {} {}",
            tasks.len(),
            e.code().unwrap_or("-")
        ));
        self.pending += tasks.len();
    }

    fn requeue(&mut self, _task: TaskSpec) {
        self.pending += 1;
    }

    async fn disconnected(&mut self, _ctx: &mut Context) {
        self.note("disconnected".into());
    }

    async fn error(&mut self, _ctx: &mut Context, error: &SdkError) {
        self.note(format!("error {}", error.code().unwrap_or("-")));
    }

    fn pending_tasks(&self) -> usize {
        self.pending
    }
}

pub fn spec(id: &str, agent_id: AgentId) -> TaskSpec {
    TaskSpec {
        task_id: TaskId::new(id).unwrap(),
        name: id.into(),
        agent_id,
        resources: "cpus=1,mem=128".parse().unwrap(),
        command: CommandSpec::Shell("true".into()),
        env: Default::default(),
        duration_s: None,
        isolation: None,
        health_check: None,
        priority: None,
    }
}

pub fn status(framework_id: FrameworkId, task: &str, state: TaskState) -> TaskStatus {
    TaskStatus {
        task_id: TaskId::new(task).unwrap(),
        framework_id,
        agent_id: AgentId::new(),
        state,
        message: None,
        exit_code: None,
        update_id: UpdateId::new(),
        timestamp: protocol::now(),
        resources: None,
        reason: None,
        usage: None,
        gpu_devices: None,
        healthy: None,
    }
}
