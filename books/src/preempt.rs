//! Preemption toward fair share: the books' side. Off unless the coordinator runs
//! with `--preemption-grace-s N`.
//!
//! [`State::check_preemption`] runs on the maintenance tick (never on the allocation path) and
//! does its work at most every [`check_every_ms`] (a quarter of the grace, between 100 ms and
//! 1 s):
//!
//! 1. it computes every role's fair share and standing from the allocator's books
//!    ([`allocator::preempt::FairShares`], O(roles + frameworks); tasks already marked for
//!    preemption count as gone) and notes since when each starved role has been starved;
//! 2. for the first role starved for the whole grace that has no plan in flight (neither it
//!    nor a role above or below it), it walks the running tasks once and asks
//!    [`allocator::preempt::plan`] which to take back; one plan per check;
//! 3. it tells each victim's framework `preemption` (its task ids, the deadline: now + grace,
//!    the starved role) on its stream and on the offer stream, before any kill;
//! 4. at the deadline it kills what still runs through the agent (again every update re-send
//!    interval while it runs); the `killed` update carries reason `preempted`
//!    ([`protocol::task::REASON_PREEMPTED`]);
//! 5. when no victim is left running, the plan ends and the role's grace starts again, so the
//!    freed resources reach it (H-DRF offers them to the lowest share, the starved role's)
//!    before anything else is planned for it; and no new plan is made for it until its share
//!    has grown past what it was at the last plan (a role that does not take what was freed,
//!    because its frameworks decline or cannot use it, does not get tasks killed again and
//!    again).
//!
//! The rules are functions over the sub-books they name (the preemption books, the ledger,
//! `TaskBook`, `AgentBook`); `State`'s entry points (`entry.rs`) split the books for them.
//!
//! Like a drain, preemption state lives in the books only: a restarted coordinator starts the
//! grace again.

use std::collections::BTreeMap;

use allocator::preempt::{self, FairShares, TaskInput};
use protocol::preempt::Preemption as PreemptionEvent;
use protocol::{FrameworkEvent, FrameworkId, OfferEvent, TaskId, Timestamp};

use crate::agent_book::AgentBook;
use crate::ledger::Ledger;
use crate::task_book::TaskBook;
use crate::{Effect, Effects, Now};

/// A plan being carried out.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct InFlight {
    /// When the victims still running are killed, on the monotonic clock.
    pub(crate) deadline_ms: u64,
    /// The same on the wall clock.
    pub(crate) deadline: Timestamp,
    /// The victims.
    pub(crate) tasks: Vec<(FrameworkId, TaskId)>,
    /// When kills were last sent.
    pub(crate) killed_at_ms: Option<u64>,
}

/// The preemption books.
#[derive(Debug, Clone, Default)]
pub(crate) struct Preemption {
    /// The grace (and the victims' deadline), ms; `None`: preemption is off.
    pub(crate) grace_ms: Option<u64>,
    /// When the last check ran.
    last_check_ms: Option<u64>,
    /// Starved roles: since when (monotonic, wall).
    pub(crate) starved_since: BTreeMap<String, (u64, Timestamp)>,
    /// Plans in flight, by the starved role they serve.
    pub(crate) plans: BTreeMap<String, InFlight>,
    /// Tasks marked for preemption, with the role they are taken for.
    pub(crate) marked: BTreeMap<(FrameworkId, TaskId), String>,
    /// Each starved role's share when its last plan was made: no new plan for it until its
    /// share grows past that (what a plan freed must reach it first; a role that cannot use
    /// what is freed does not get tasks killed again and again). Forgotten when it stops
    /// being starved.
    pub(crate) planned_at_share: BTreeMap<String, f64>,
    /// Plans made since the start.
    pub(crate) preemptions: u64,
    /// Tasks killed by preemption since the start.
    pub(crate) tasks_preempted: u64,
}

impl Preemption {
    /// Off (`None`) or on with this grace.
    pub(crate) fn new(grace: Option<std::time::Duration>) -> Self {
        Self {
            grace_ms: grace.map(|g| u64::try_from(g.as_millis()).unwrap_or(u64::MAX).max(1)),
            ..Self::default()
        }
    }
}

/// How often the starvation check runs under a grace of `grace_ms`: a quarter of it, within
/// [100 ms, 1 s].
pub(crate) fn check_every_ms(grace_ms: u64) -> u64 {
    (grace_ms / 4).clamp(100, 1000)
}

/// Whether `role` got nothing from its last plan: its share is no higher than when it was made.
fn stalled(p: &Preemption, shares: &FairShares, role: &str) -> bool {
    match (p.planned_at_share.get(role), shares.role(role)) {
        (Some(before), Some(now)) => now.share <= before + preempt::SHARE_TOLERANCE,
        _ => false,
    }
}

/// Whether one role path is the other or lies above or below it.
fn related(a: &str, b: &str) -> bool {
    a == b || a.starts_with(&format!("{b}/")) || b.starts_with(&format!("{a}/"))
}

/// The maintenance tick's part for preemption (see the module docs); nothing when off.
/// Kills go out again every `resend_ms` while a victim runs.
pub(crate) fn check(
    p: &mut Preemption,
    ledger: &Ledger,
    tasks: &mut TaskBook,
    agents: &AgentBook,
    resend_ms: u64,
    now: &Now,
    fx: &mut Effects,
) {
    let Some(grace_ms) = p.grace_ms else {
        return;
    };
    progress_preemptions(p, tasks, agents, resend_ms, now, fx);
    let due = p
        .last_check_ms
        .is_none_or(|at| now.ms.saturating_sub(at) >= check_every_ms(grace_ms));
    if !due {
        return;
    }
    p.last_check_ms = Some(now.ms);
    let shares = fair_shares(p, ledger, tasks);
    let starved = shares.starved();
    p.starved_since.retain(|role, _| starved.contains(role));
    p.planned_at_share.retain(|role, _| starved.contains(role));
    for role in &starved {
        p.starved_since
            .entry(role.clone())
            .or_insert((now.ms, now.wall));
    }
    let ready: Vec<String> = p
        .starved_since
        .iter()
        .filter(|(role, (since, _))| {
            now.ms.saturating_sub(*since) >= grace_ms
                && !p.plans.keys().any(|planned| related(planned, role))
                && !stalled(p, &shares, role)
        })
        .map(|(role, _)| role.clone())
        .collect();
    if ready.is_empty() {
        return;
    }
    let candidates = preemptible_tasks(p, tasks, agents);
    for role in ready {
        if let Some(plan) = preempt::plan(&shares, &role, &candidates) {
            start_preemption(p, plan, grace_ms, now, fx);
            return;
        }
    }
}

/// Fair shares from the allocator's books, tasks marked for preemption counted as gone.
pub(crate) fn fair_shares(p: &Preemption, ledger: &Ledger, tasks: &TaskBook) -> FairShares {
    let mut input = ledger.allocator().preemption_input();
    for key in p.marked.keys() {
        let Some(t) = tasks.get(key).filter(|t| !t.state().is_terminal()) else {
            continue;
        };
        if let Some(f) = input.frameworks.iter_mut().find(|f| f.id == key.0) {
            f.held = f.held.saturating_sub(&t.resources);
        }
    }
    FairShares::compute(&input)
}

/// The running (non-terminal) tasks not already marked, with their priorities. Tasks on
/// agents that make no offers (draining, drained or lost) are left out: what killing them
/// frees would reach no one.
fn preemptible_tasks(p: &Preemption, tasks: &TaskBook, agents: &AgentBook) -> Vec<TaskInput> {
    tasks
        .iter()
        .filter(|((fw, task), t)| {
            !t.state().is_terminal()
                && !t.resources.is_empty()
                && !p.marked.contains_key(&(*fw, task.clone()))
                && agents
                    .get(t.agent_id())
                    .is_some_and(|a| a.drain.is_none() && a.state == crate::AgentState::Active)
        })
        .map(|((fw, task), t)| TaskInput {
            framework: *fw,
            task_id: task.clone(),
            resources: t.resources.clone(),
            priority: t.priority,
            launch_order: t.launch_order(),
            reserved_for: t.pool.as_ref().map(ToString::to_string),
        })
        .collect()
}

/// Marks a plan's victims and tells their frameworks (stream and offer stream).
fn start_preemption(
    p: &mut Preemption,
    plan: preempt::Plan,
    grace_ms: u64,
    now: &Now,
    fx: &mut Effects,
) {
    let deadline =
        now.wall + chrono::Duration::milliseconds(i64::try_from(grace_ms).unwrap_or(i64::MAX / 2));
    let mut by_framework: BTreeMap<FrameworkId, Vec<TaskId>> = BTreeMap::new();
    for v in &plan.victims {
        by_framework
            .entry(v.framework)
            .or_default()
            .push(v.task_id.clone());
        p.marked
            .insert((v.framework, v.task_id.clone()), plan.for_role.clone());
        tracing::info!(framework = %v.framework, task = %v.task_id, for_role = %plan.for_role, why = %v.why, "task marked for preemption");
    }
    for (fw, task_ids) in by_framework {
        let event = PreemptionEvent {
            framework_id: fw,
            task_ids,
            deadline,
            for_role: plan.for_role.clone(),
        };
        fx.push(Effect::ToFramework(
            fw,
            FrameworkEvent::Preemption(event.clone()),
        ));
        fx.push(Effect::Offer(OfferEvent::Preemption(event)));
    }
    tracing::warn!(for_role = %plan.for_role, share = plan.share, fair = plan.fair, tasks = plan.victims.len(), "preemption toward fair share planned");
    p.preemptions += 1;
    p.planned_at_share.insert(plan.for_role.clone(), plan.share);
    p.plans.insert(
        plan.for_role,
        InFlight {
            deadline_ms: now.ms.saturating_add(grace_ms),
            deadline,
            tasks: plan
                .victims
                .into_iter()
                .map(|v| (v.framework, v.task_id))
                .collect(),
            killed_at_ms: None,
        },
    );
}

/// Kills victims past their deadline (again every re-send interval while they run) and
/// ends plans with no victim left running.
fn progress_preemptions(
    p: &mut Preemption,
    tasks: &mut TaskBook,
    agents: &AgentBook,
    resend_ms: u64,
    now: &Now,
    fx: &mut Effects,
) {
    if p.plans.is_empty() {
        return;
    }
    let resend_ms = resend_ms.max(1);
    let roles: Vec<String> = p.plans.keys().cloned().collect();
    for role in roles {
        let Some(plan) = p.plans.get(&role) else {
            continue;
        };
        let left: Vec<(FrameworkId, TaskId)> = plan
            .tasks
            .iter()
            .filter(|k| tasks.get(k).is_some_and(|t| !t.state().is_terminal()))
            .cloned()
            .collect();
        if left.is_empty() {
            if let Some(done) = p.plans.remove(&role) {
                for k in &done.tasks {
                    p.marked.remove(k);
                }
            }
            // The freed resources go to the lowest share first; give them a grace to.
            if let Some(since) = p.starved_since.get_mut(&role) {
                *since = (now.ms, now.wall);
            }
            tracing::info!(for_role = %role, "preemption done: no victim left running");
            continue;
        }
        let due = now.ms >= plan.deadline_ms
            && plan
                .killed_at_ms
                .is_none_or(|at| now.ms.saturating_sub(at) >= resend_ms);
        if !due {
            continue;
        }
        if let Some(plan) = p.plans.get_mut(&role) {
            plan.killed_at_ms = Some(now.ms);
        }
        for (fw, task) in left {
            let Some(mut t) = tasks.get_mut(&(fw, task.clone())) else {
                continue;
            };
            if !t.preempt_killed {
                t.preempt_killed = true;
                p.tasks_preempted += 1;
            }
            let agent_id = t.agent_id();
            let Some(agent) = agents.get(agent_id) else {
                continue;
            };
            fx.push(Effect::Kill {
                agent_id,
                framework_id: fw,
                endpoint: agent.endpoint.clone(),
                task_id: task,
            });
        }
    }
}

/// What `explain` says about preemption for a framework in `role`: its role (or one above)
/// starved and when preemption may start, and its own tasks marked for preemption.
pub(crate) fn explain(
    p: &Preemption,
    ledger: &Ledger,
    tasks: &TaskBook,
    fw: FrameworkId,
    role: &str,
) -> Vec<String> {
    let Some(grace_ms) = p.grace_ms else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (starved, (_, since)) in &p.starved_since {
        if !(role == starved || role.starts_with(&format!("{starved}/"))) {
            continue;
        }
        let (what, standing) = match fair_shares(p, ledger, tasks).role(starved) {
            Some(s) => (
                if s.share + preempt::SHARE_TOLERANCE < s.fair {
                    "fair share"
                } else {
                    "guarantee"
                },
                format!(
                    " (share {:.1} %, fair share {:.1} %)",
                    s.share * 100.0,
                    s.fair * 100.0
                ),
            ),
            None => ("fair share", String::new()),
        };
        let at = *since
            + chrono::Duration::milliseconds(i64::try_from(grace_ms).unwrap_or(i64::MAX / 2));
        let shares = fair_shares(p, ledger, tasks);
        let when = match p.plans.get(starved) {
            None if stalled(p, &shares, starved) => "no new preemption: it \
                did not take what the last one freed (a framework of the role must accept \
                the offers it gets)"
                .to_string(),
            Some(plan) => format!(
                "preemption in flight: {} task(s) of other roles killed at {} unless they end first",
                plan.tasks.len(),
                plan.deadline.to_rfc3339()
            ),
            None => format!("preemption at {} if still starved", at.to_rfc3339()),
        };
        out.push(format!(
            "role {starved} is below its {what}{standing} since {}; {when}",
            since.to_rfc3339()
        ));
    }
    let mut mine: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for ((f, task), for_role) in &p.marked {
        if *f == fw {
            mine.entry(for_role.as_str())
                .or_default()
                .push(task.to_string());
        }
    }
    for (for_role, tasks) in mine {
        let deadline = p
            .plans
            .get(for_role)
            .map(|p| p.deadline.to_rfc3339())
            .unwrap_or_default();
        out.push(format!(
            "{} task(s) marked for preemption for role {for_role}, killed at {deadline} if still running: {}",
            tasks.len(),
            tasks.join(", ")
        ));
    }
    out
}
