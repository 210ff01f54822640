//! Stalls: a framework with work to do must not wait forever silently. A framework is
//! *stalled* when it is connected, not suppressed, wants tasks (its last `pending_tasks` is
//! unknown or above zero), holds no outstanding offer, has been sent no offer for
//! `stall_after` (counted from the later of its last offer, or the last check that found it
//! holding one, its registration or subscription, and its last revive), and at least one active agent that is not draining has room it could
//! be offered (the allocator's answer for the agent is something other than nothing free).
//!
//! [`State::check_stalls`] runs on the coordinator's maintenance tick and returns the stalls
//! that began or ended since the last check, which the runtime logs; the books keep only which
//! frameworks were stalled at the last check (the `parley_frameworks_stalled` gauge).
//! [`State::explain`] names a stall, and its most likely reason, at the start of its summary.

use std::collections::{BTreeMap, HashSet};

use allocator::BlockReason;
use protocol::messages::ExplainAgents;
use protocol::{AgentId, FrameworkId};

use super::{AgentState, Connection, FrameworkRecord, Now, State};

/// A framework found stalled at a check: its name (for the log line when it ends, even after
/// it was removed) and when its wait started.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Stalled {
    name: String,
    wait_started_ms: u64,
}

/// A stall that began or ended since the last [`State::check_stalls`].
#[derive(Debug, Clone, PartialEq)]
pub enum StallChange {
    /// The framework became stalled.
    Began {
        /// The framework.
        framework_id: FrameworkId,
        /// Its name.
        name: String,
        /// How long it has had no offer, in seconds.
        stalled_for_s: f64,
        /// How many active agents have room it could be offered.
        agents_with_room: usize,
        /// Its most likely reason, in words (as `explain` names it).
        reason: String,
    },
    /// The framework is no longer stalled: it was sent an offer, revived, suppressed, said it
    /// wants no more tasks, disconnected or was removed, or no agent has room for it now.
    Ended {
        /// The framework.
        framework_id: FrameworkId,
        /// Its name.
        name: String,
        /// How long it had had no offer when the stall ended, in seconds.
        stalled_for_s: f64,
    },
}

impl FrameworkRecord {
    /// When its wait for an offer started: the later of its last offer, its registration or
    /// subscription, and its last revive.
    fn wait_started_ms(&self) -> u64 {
        self.last_offer_ms
            .map_or(self.wants_since_ms, |t| t.max(self.wants_since_ms))
    }

    /// How long, in ms, it has waited for an offer while wanting one; `None` when it does not
    /// wait for one (disconnected, suppressed, a placeholder, or it said it wants no task).
    pub(crate) fn waiting_ms(&self, now_ms: u64) -> Option<u64> {
        let connected = matches!(self.connection, Connection::Connected { .. });
        if !connected || self.suppressed || self.placeholder || self.pending_tasks == Some(0) {
            return None;
        }
        Some(now_ms.saturating_sub(self.wait_started_ms()))
    }
}

/// Whether an agent whose allocator answer for a framework is `reason` has room the framework
/// could be offered: every answer but nothing free (and the answers `explain` counts as
/// nothing free: an unknown framework or agent).
fn has_room(reason: &Option<BlockReason>) -> bool {
    matches!(
        reason,
        None | Some(
            BlockReason::Filtered { .. }
                | BlockReason::DemandDoesNotFit
                | BlockReason::GpuGated
                | BlockReason::LimitReached { .. }
                | BlockReason::GuaranteeFirst { .. }
                | BlockReason::ReservedFor { .. }
        )
    )
}

/// How many of the counted agents have room the framework could be offered (the active ones
/// neither offered to it nor with nothing free).
pub(crate) fn with_room(a: &ExplainAgents) -> usize {
    a.active
        .saturating_sub(a.offered_to_it)
        .saturating_sub(a.nothing_free)
}

impl State {
    /// Finds the frameworks stalled now (see the module docs) and returns the stalls that
    /// began or ended since the last check, in framework id order (ended ones first). Call it
    /// periodically: a framework that waits is found within one period of `stall_after`.
    ///
    /// Cheap when nothing waits: only frameworks that have waited `stall_after` are looked
    /// at, and for those only the agents with anything free, once per check.
    pub fn check_stalls(&mut self, now: &Now) -> Vec<StallChange> {
        let after = self.timing.stall_after_ms;
        // A framework holding offers waits for none: its wait starts again when it last held
        // one (to within a check), not when its held offer was sent.
        let holding: HashSet<FrameworkId> =
            self.offers.iter().map(|r| r.offer().framework_id).collect();
        for id in &holding {
            if let Some(fw) = self.frameworks.get_mut(*id) {
                fw.last_offer_ms = Some(now.ms);
            }
        }
        let waiting: Vec<(FrameworkId, u64)> = self
            .frameworks
            .iter()
            .filter_map(|(id, fw)| {
                fw.waiting_ms(now.ms)
                    .filter(|waited| *waited >= after)
                    .map(|_| (*id, fw.wait_started_ms()))
            })
            .collect();
        let mut stalled: BTreeMap<FrameworkId, u64> = BTreeMap::new();
        if !waiting.is_empty() {
            let allocator = self.ledger.allocator();
            // Agents with nothing free have no room for anyone: looked at once, not per
            // framework (a full cluster with many waiting frameworks stays cheap).
            let free: Vec<AgentId> = self
                .agents
                .iter()
                .filter(|(_, a)| a.state == AgentState::Active && a.drain.is_none())
                .map(|(id, _)| *id)
                .filter(|id| allocator.agent_has_free(*id))
                .collect();
            for (id, started) in waiting {
                if holding.contains(&id) {
                    continue;
                }
                if free
                    .iter()
                    .any(|agent| has_room(&allocator.explain_agent(id, *agent, now.ms)))
                {
                    stalled.insert(id, started);
                }
            }
        }
        let mut changes = Vec::new();
        // A stall whose wait started again (an offer, a revive) between two checks ended.
        let ended: Vec<FrameworkId> = self
            .stalled
            .iter()
            .filter(|(id, s)| stalled.get(id) != Some(&s.wait_started_ms))
            .map(|(id, _)| *id)
            .collect();
        for id in ended {
            if let Some(s) = self.stalled.remove(&id) {
                changes.push(StallChange::Ended {
                    framework_id: id,
                    name: s.name,
                    stalled_for_s: seconds(now.ms.saturating_sub(s.wait_started_ms)),
                });
            }
        }
        for (id, started) in stalled {
            if self.stalled.contains_key(&id) {
                continue;
            }
            let Some(fw) = self.frameworks.get(id) else {
                continue;
            };
            let name = fw.name.clone();
            let demand = fw.demand.clone();
            let counted = self.count_agents(id, &HashSet::new(), now);
            let no_agent_offers = self.kinds_no_agent_has(demand.as_ref());
            let next_filter_ends_in_s = counted
                .next_filter_end
                .map(|until| seconds(until.saturating_sub(now.ms)));
            changes.push(StallChange::Began {
                framework_id: id,
                name: name.clone(),
                stalled_for_s: seconds(now.ms.saturating_sub(started)),
                agents_with_room: with_room(&counted.agents),
                reason: stall_reason(
                    &counted.agents,
                    next_filter_ends_in_s,
                    &counted.held_back_by,
                    &no_agent_offers,
                ),
            });
            self.stalled.insert(
                id,
                Stalled {
                    name,
                    wait_started_ms: started,
                },
            );
        }
        changes
    }

    /// How many frameworks were stalled at the last [`State::check_stalls`].
    pub fn frameworks_stalled(&self) -> usize {
        self.stalled.len()
    }
}

fn seconds(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

/// `explain`'s summary of a stalled framework: the stall, then its most likely reason.
pub(crate) fn stall_summary(
    waited_ms: u64,
    a: &ExplainAgents,
    next_filter_ends_in_s: Option<f64>,
    held_back_by: &[String],
    no_agent_offers: &[String],
) -> String {
    format!(
        "stalled: no offer for {:.0} s while {} agent(s) have room; {}",
        seconds(waited_ms),
        with_room(a),
        stall_reason(a, next_filter_ends_in_s, held_back_by, no_agent_offers)
    )
}

/// The most likely reason a framework is stalled, in words, from its agent counts: the kind
/// of room most agents have that it is not offered, with what to do about it.
pub(crate) fn stall_reason(
    a: &ExplainAgents,
    next_filter_ends_in_s: Option<f64>,
    held_back_by: &[String],
    no_agent_offers: &[String],
) -> String {
    if !no_agent_offers.is_empty() {
        return format!(
            "its demand hint asks for {}, which no active agent has; add agents that have it",
            no_agent_offers.join(", ")
        );
    }
    let held = if held_back_by.is_empty() {
        String::new()
    } else {
        format!(" ({})", held_back_by.join(", "))
    };
    // The blocking reasons first, so a tie goes to one the coordinator can name.
    let counts = [
        a.filtered,
        a.demand_does_not_fit,
        a.gpu_gated,
        a.limit_reached,
        a.guarantee_first,
        a.reserved_for_others,
        a.eligible,
    ];
    let mut most = 0;
    for (i, n) in counts.iter().enumerate() {
        if *n > counts[most] {
            most = i;
        }
    }
    let n = counts[most];
    match most {
        0 => {
            let when = next_filter_ends_in_s
                .map(|s| format!(" (the soonest filter ends in {s:.0} s)"))
                .unwrap_or_default();
            format!("{n} agent(s) are filtered by its declines{when}; revive to clear the filters")
        }
        1 => format!(
            "{n} agent(s) have too little free for its demand hint; revive with a smaller one \
             to be offered them"
        ),
        2 => format!(
            "{n} agent(s) have GPUs and are held back by GPU gating; register with \
             \"capabilities\": [\"gpu_resources\"] to be offered them"
        ),
        3 => format!("{n} agent(s) are held back by a quota limit{held}; see GET /api/v1/roles"),
        4 => format!("{n} agent(s) go first to another role below its guarantee{held}"),
        5 => format!("{n} agent(s) have free resources only in reservations for other roles{held}"),
        _ => format!(
            "the coordinator sees no reason on its side ({n} agent(s) could be offered to it); \
             if it wants tasks, it should revive with its true pending_tasks"
        ),
    }
}
