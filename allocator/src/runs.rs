//! Allocation runs: a run visits every agent ([`Sweep::All`]) or only the agents whose free
//! resources or filters changed since a run last visited them ([`Sweep::Changed`]), in parts of
//! at most a given number of agents so that the caller can let other work in between.
//!
//! An agent a changed run leaves out is one a full run would skip in O(1): nothing of it is
//! free, or every framework was found blocked for its free resources under the same
//! eligibility (the all-blocked memo of `decide`). Both runs go in slot order, so a changed run
//! makes exactly the decisions a full run would, with one exception: a decline filter that
//! expires on an agent nothing else changed on is noticed by the next full run (Mesos' periodic
//! allocation applies expired filters the same way). When something changed that can unblock
//! frameworks on any agent (a framework subscribed, revived or changed its demand hint, a role's
//! weight or quota, what roles hold under quota), or it changed while the last run went on, a
//! changed run visits every agent.

use super::{Agent, Allocator, Decision};

/// Which agents an allocation run visits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sweep {
    /// Every agent: the periodic run, which also applies expired decline filters.
    All,
    /// The agents whose free resources or filters changed since a run last visited them (every
    /// agent when something changed that can unblock frameworks anywhere; see the module docs).
    Changed,
}

/// An allocation run in progress: made by [`Allocator::start_run`], advanced by
/// [`Allocator::run_part`] until [`Run::done`].
#[derive(Clone, Debug)]
pub struct Run {
    /// The slots a changed run visits, sorted; `None` for a run over every slot.
    slots: Option<Vec<u32>>,
    /// The next slot (every slot) or the next index into `slots`.
    next: usize,
    /// The all-blocked memo's key when the run started.
    key: (u64, u64),
    visited: usize,
    done: bool,
}

impl Run {
    /// Whether the run has visited every agent it was to visit.
    pub fn done(&self) -> bool {
        self.done
    }

    /// Whether the run visits every agent (a [`Sweep::All`] run, or a changed run that had to).
    pub fn full(&self) -> bool {
        self.slots.is_none()
    }

    /// How many agents the run has visited so far.
    pub fn visited(&self) -> usize {
        self.visited
    }
}

/// The agents changed since a run last visited them (each agent's own `changed` flag says
/// whether it is queued).
#[derive(Clone, Debug, Default)]
pub(crate) struct Changed {
    /// Slots marked since a run last took them. A slot is pushed when its flag is set, so it
    /// is here once per change seen; entries whose flag is clear again are stale and skipped.
    queue: Vec<u32>,
    /// The memo key under which the last run ended without it changing while the run went on:
    /// every agent not queued is then settled under that key. `None` before the first run and
    /// after a run during which it changed.
    settled: Option<(u64, u64)>,
}

impl Agent {
    /// Its free resources, pools or filters changed: the all-blocked memo no longer applies
    /// (the version moves) and the next changed run visits it.
    pub(crate) fn touch(&mut self, slot: u32, changed: &mut Changed) {
        self.version += 1;
        self.mark(slot, changed);
    }

    /// Queues the agent for the next changed run (once until a run visits it).
    pub(crate) fn mark(&mut self, slot: u32, changed: &mut Changed) {
        if !self.changed {
            self.changed = true;
            changed.queue.push(slot);
        }
    }
}

impl Allocator {
    /// The all-blocked memo's key: what, besides an agent's own version, decides whether a
    /// framework is blocked there. Under quota what roles hold (`quota_version`) counts too,
    /// and so does a held-back framework let go (`unblock_version`); the counters only grow,
    /// so their sum changes whenever one does.
    pub(crate) fn memo_key(&self) -> (u64, u64) {
        (
            self.tree.shape_version,
            self.eligibility_version
                .wrapping_add(self.quota_version)
                .wrapping_add(self.unblock_version),
        )
    }

    /// Starts an allocation run over the agents `sweep` names; [`Allocator::run_part`] does it.
    /// Decisions are made part by part, on the books as they are then.
    pub fn start_run(&mut self, sweep: Sweep) -> Run {
        let key = self.memo_key();
        let slots = (sweep == Sweep::Changed && self.changed.settled == Some(key)).then(|| {
            let mut slots = std::mem::take(&mut self.changed.queue);
            slots.sort_unstable();
            slots.dedup();
            slots
        });
        Run {
            slots,
            next: 0,
            key,
            visited: 0,
            done: false,
        }
    }

    /// The next part of `run`: at most `max` agents (at least one) in slot order, each
    /// decided as [`Allocator::cycle`] does. Returns the part's decisions; [`Run::done`] says
    /// whether the run is over. A part of a run that is over decides nothing.
    pub fn run_part(&mut self, run: &mut Run, max: usize, now: u64) -> Vec<Decision> {
        self.run_part_with(run, max, now, |_| false)
    }

    /// [`Allocator::run_part`], asking `sate` about each decision as it is made: when it
    /// answers true, the decision's framework is held back ([`Allocator::set_sated`]) before
    /// the next agent is decided, so a framework whose offers now hold what it wants is not
    /// offered the rest of the part.
    pub fn run_part_with(
        &mut self,
        run: &mut Run,
        max: usize,
        now: u64,
        mut sate: impl FnMut(&Decision) -> bool,
    ) -> Vec<Decision> {
        let mut out = Vec::new();
        if run.done {
            return out;
        }
        let mut asked = 0;
        let mut visit = |me: &mut Self, slot: u32, out: &mut Vec<Decision>| {
            me.visit(slot, now, out);
            for d in &out[asked..] {
                if sate(d) {
                    // The framework is known: it was just decided for.
                    let _ = me.set_sated(d.framework, true);
                }
            }
            asked = out.len();
        };
        let max = max.max(1);
        let (end, visited, done) = match &run.slots {
            None => {
                let end = run.next.saturating_add(max).min(self.agents.len());
                for slot in run.next..end {
                    // Slots are `u32` (the agent table never grows past it).
                    visit(self, slot as u32, &mut out);
                }
                (end, end.saturating_sub(run.next), end >= self.agents.len())
            }
            Some(slots) => {
                let end = run.next.saturating_add(max).min(slots.len());
                let mut visited = 0;
                for &slot in &slots[run.next..end] {
                    let queued = self
                        .agents
                        .get(slot as usize)
                        .and_then(Option::as_ref)
                        .is_some_and(|a| a.changed);
                    if queued {
                        visit(self, slot, &mut out);
                        visited += 1;
                    }
                }
                (end, visited, end >= slots.len())
            }
        };
        run.next = end;
        run.visited += visited;
        run.done = done;
        if run.done {
            self.end_run(run);
        }
        out
    }

    /// A run is over: after a full run only agents changed behind it stay queued; the agents
    /// not queued are settled under the run's key if it did not change meanwhile.
    fn end_run(&mut self, run: &Run) {
        if run.full() {
            let agents = &self.agents;
            self.changed.queue.retain(|&s| {
                agents
                    .get(s as usize)
                    .and_then(Option::as_ref)
                    .is_some_and(|a| a.changed)
            });
        }
        self.changed.settled = (self.memo_key() == run.key).then_some(run.key);
    }

    /// Decides agent `slot` (see `cycle_slot`); it is no longer queued as changed, whatever
    /// its own decisions changed.
    pub(crate) fn visit(&mut self, slot: u32, now: u64, out: &mut Vec<Decision>) {
        self.cycle_slot(slot, now, out);
        if let Some(Some(agent)) = self.agents.get_mut(slot as usize) {
            agent.changed = false;
        }
    }

    /// How many agents are queued for the next changed run (stale entries included).
    pub fn changed_len(&self) -> usize {
        self.changed.queue.len()
    }
}
