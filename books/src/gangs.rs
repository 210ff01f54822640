//! Gangs launched together: [`State::accept_together`] launches tasks on several agents all or
//! none (each agent's part is checked as [`State::accept`] checks one, and no offer or task is
//! in two parts, before anything changes), and the members end together: when one fails, is
//! lost or killed, or its agent cannot start it, while others run, the others are killed and
//! the framework hears one `gang_failed` event ([`protocol::gang::GangFailed`]).
//!
//! A gang is forgotten once every member has ended, so its id may be used again.

use std::collections::{BTreeMap, HashMap, HashSet};

use protocol::gang::GangFailed;
use protocol::{FrameworkEvent, FrameworkId, TaskId, TaskState, TaskStatus};

use crate::{Accept, Effect, Effects, Now, State, StateError};

/// The gangs running, by framework and gang id, and which gang each member is in.
#[derive(Debug, Default)]
pub(crate) struct GangBook {
    gangs: BTreeMap<(FrameworkId, String), GangRun>,
    member_of: HashMap<(FrameworkId, TaskId), String>,
}

/// One gang launched together.
#[derive(Debug)]
struct GangRun {
    members: Vec<TaskId>,
    /// Members not yet ended: a member's status turns terminal once, so each end counts
    /// down by one and the members are scanned only when the gang fails.
    live: usize,
    /// A member ended badly and the others were killed.
    failed: bool,
}

impl GangBook {
    /// How many gangs run.
    pub(crate) fn len(&self) -> usize {
        self.gangs.len()
    }

    /// Whether task `task` of `fw` is a member of a running gang.
    pub(crate) fn has_member(&self, fw: FrameworkId, task: &TaskId) -> bool {
        !self.member_of.is_empty() && self.member_of.contains_key(&(fw, task.clone()))
    }
}

impl State {
    /// Launches gang `gang_id` of framework `fw`: each part accepts offers of one agent, as
    /// [`State::accept`] does, and every part is checked before any changes, so either every
    /// member is launched or none is (an `Err` changed nothing). The members then end
    /// together (see the module docs). Returns the launched task ids.
    pub fn accept_together(
        &mut self,
        fw: FrameworkId,
        gang_id: String,
        parts: Vec<Accept>,
        now: &Now,
        fx: &mut Effects,
    ) -> Result<Vec<TaskId>, StateError> {
        self.live_framework_mut(fw)?;
        if self.gangs.gangs.contains_key(&(fw, gang_id.clone())) {
            return Err(StateError::GangExists(gang_id));
        }
        if parts.is_empty() {
            return Err(StateError::NoOffers);
        }
        let mut offers = HashSet::new();
        let mut tasks = HashSet::new();
        for part in &parts {
            for id in &part.offer_ids {
                if !offers.insert(*id) {
                    return Err(StateError::DuplicateOffer(*id));
                }
            }
            for task in &part.tasks {
                if !tasks.insert(task.task_id.clone()) {
                    return Err(StateError::DuplicateTaskInRequest(task.task_id.clone()));
                }
            }
        }
        let checked = parts
            .iter()
            .map(|part| self.check_accept(fw, part))
            .collect::<Result<Vec<_>, _>>()?;
        // Everything checked: change the books.
        let mut members = Vec::new();
        for (part, checked) in parts.into_iter().zip(checked) {
            members.extend(self.apply_accept(fw, part, checked, now, fx));
        }
        for task in &members {
            self.gangs
                .member_of
                .insert((fw, task.clone()), gang_id.clone());
        }
        self.gangs.gangs.insert(
            (fw, gang_id),
            GangRun {
                live: members.len(),
                members: members.clone(),
                failed: false,
            },
        );
        Ok(members)
    }

    /// A task's status became terminal: if it is a gang's member that ended badly while
    /// others run, the others are killed and its framework is told; a gang whose members have
    /// all ended is forgotten.
    pub(crate) fn gang_member_ended(&mut self, status: &TaskStatus, fx: &mut Effects) {
        let fw = status.framework_id;
        let Some(gang_id) = self
            .gangs
            .member_of
            .get(&(fw, status.task_id.clone()))
            .cloned()
        else {
            return;
        };
        let key = (fw, gang_id);
        let Some(run) = self.gangs.gangs.get_mut(&key) else {
            return;
        };
        run.live = run.live.saturating_sub(1);
        let bad = status.state != TaskState::Finished;
        if bad && !run.failed && run.live > 0 {
            run.failed = true;
            let members = run.members.clone();
            let running: Vec<TaskId> = members
                .into_iter()
                .filter(|t| {
                    self.tasks
                        .get(&(fw, t.clone()))
                        .is_some_and(|r| !r.state().is_terminal())
                })
                .collect();
            for task in &running {
                // A member the books no longer know has ended: nothing to kill.
                let _ = self.kill(fw, task.clone(), fx);
            }
            fx.push(Effect::ToFramework(
                fw,
                FrameworkEvent::GangFailed(GangFailed {
                    gang_id: key.1.clone(),
                    task_id: status.task_id.clone(),
                    agent_id: status.agent_id,
                    state: status.state,
                    message: status.message.clone(),
                    killed: running,
                }),
            ));
        }
        let ended = self.gangs.gangs.get(&key).is_some_and(|r| r.live == 0);
        if ended {
            if let Some(run) = self.gangs.gangs.remove(&key) {
                for task in run.members {
                    self.gangs.member_of.remove(&(fw, task));
                }
            }
        }
    }

    /// How many gangs launched together run now.
    pub fn gangs_running(&self) -> usize {
        self.gangs.len()
    }
}
