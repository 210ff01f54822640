//! "Why is my framework not getting offers?": [`State::explain`] answers from the allocator's
//! own data (the same blocking rules its decisions use), agent by agent, and sums it up.

use std::collections::HashSet;

use protocol::messages::{ExplainAgents, FrameworkExplanation};
use protocol::{AgentId, FrameworkId};

use super::views::connection_name;
use super::{AgentState, Connection, Now, State, StateError};
use allocator::BlockReason;

impl State {
    /// Why the framework is, or is not, getting offers now. Unknown (or placeholder) ids are
    /// [`StateError::UnknownFramework`].
    pub fn explain(&self, id: FrameworkId, now: &Now) -> Result<FrameworkExplanation, StateError> {
        let fw = self
            .frameworks
            .get(id)
            .filter(|f| !f.placeholder)
            .ok_or(StateError::UnknownFramework(id))?;
        let its_offers: Vec<_> = self
            .offers
            .iter()
            .filter(|r| r.offer().framework_id == id)
            .map(|r| r.offer().agent_id)
            .collect();
        let holding: HashSet<_> = its_offers.iter().copied().collect();
        let Counted {
            agents,
            next_filter_end,
            held_back_by,
        } = self.count_agents(id, &holding, now);
        let next_filter_ends_in_s =
            next_filter_end.map(|until| until.saturating_sub(now.ms) as f64 / 1000.0);
        let no_agent_offers = self.kinds_no_agent_has(fw.demand.as_ref());
        let connected = matches!(fw.connection, Connection::Connected { .. });
        let stalled_for_ms = fw
            .waiting_ms(now.ms)
            .filter(|waited| *waited >= self.timing.stall_after_ms)
            .filter(|_| its_offers.is_empty() && super::stall::with_room(&agents) > 0);
        let summary = if let Some(waited) = stalled_for_ms {
            super::stall::stall_summary(
                waited,
                &agents,
                next_filter_ends_in_s,
                &held_back_by,
                &no_agent_offers,
            )
        } else if connected && !fw.suppressed && !no_agent_offers.is_empty() {
            format!(
                "no agent offers {}: its demand hint asks for {} and no active agent has any, \
                 so waiting will not help; add agents that have it (for gpus: agents started \
                 with --gpus on GPU machines)",
                no_agent_offers.join(", "),
                no_agent_offers.join(", ")
            )
        } else if connected && !fw.suppressed && fw.is_sated() {
            format!(
                "sated: it said it wants {} more task(s) and its {} outstanding offer(s) hold \
                 them; it is offered more once it answers them or says it wants more \
                 (pending_tasks on an accept, a decline or a revive)",
                fw.pending_tasks.unwrap_or(0),
                its_offers.len()
            )
        } else {
            summarize(id, connected, fw.suppressed, &agents, next_filter_ends_in_s)
        };
        Ok(FrameworkExplanation {
            framework_id: id,
            role: fw.role.clone(),
            state: connection_name(fw.connection).into(),
            suppressed: fw.suppressed,
            sated: fw.is_sated(),
            demand: fw.demand.clone(),
            dominant_share: self.ledger.allocator().dominant_share(id).unwrap_or(0.0),
            outstanding_offers: its_offers.len(),
            agents,
            next_filter_ends_in_s,
            no_agent_offers,
            held_back_by,
            stalled_for_s: stalled_for_ms.map(|waited| waited as f64 / 1000.0),
            preemption: crate::preempt::explain(
                &self.preempt,
                &self.ledger,
                &self.tasks,
                id,
                fw.role.as_str(),
            ),
            summary,
        })
    }

    /// The active agents counted by what they are for framework `id` now (`holding`: the
    /// agents where it holds an outstanding offer), with the soonest end of a decline filter
    /// that blocks one and the quota or reservation rules that hold it back.
    pub(crate) fn count_agents(
        &self,
        id: FrameworkId,
        holding: &HashSet<AgentId>,
        now: &Now,
    ) -> Counted {
        let mut agents = ExplainAgents::default();
        let mut next_filter_end: Option<u64> = None;
        let mut held_back_by: Vec<String> = Vec::new();
        let mut hold = |what: String| {
            if !held_back_by.contains(&what) {
                held_back_by.push(what);
            }
        };
        for (agent_id, agent) in self.agents.iter() {
            if agent.state != AgentState::Active {
                continue;
            }
            if agent.drain.is_some() {
                agents.draining += 1;
                continue;
            }
            agents.active += 1;
            if holding.contains(agent_id) {
                agents.offered_to_it += 1;
                continue;
            }
            // The arms other than `nothing_free` are the answers `stall::has_room` counts as
            // room: keep the two in step.
            match self.ledger.allocator().explain_agent(id, *agent_id, now.ms) {
                Some(BlockReason::NothingFree) => agents.nothing_free += 1,
                Some(BlockReason::Filtered { until }) => {
                    agents.filtered += 1;
                    next_filter_end = Some(next_filter_end.map_or(until, |t| t.min(until)));
                }
                Some(BlockReason::DemandDoesNotFit) => agents.demand_does_not_fit += 1,
                Some(BlockReason::GpuGated) => agents.gpu_gated += 1,
                Some(BlockReason::LimitReached { role }) => {
                    agents.limit_reached += 1;
                    hold(format!("limit of role {role}"));
                }
                Some(BlockReason::GuaranteeFirst { role }) => {
                    agents.guarantee_first += 1;
                    hold(format!("guarantee of role {role}"));
                }
                Some(BlockReason::ReservedFor { role }) => {
                    agents.reserved_for_others += 1;
                    hold(format!("reserved for role {role}"));
                }
                // Unknown framework or agent: the books and the allocator disagree, which is a
                // bug; count the agent as nothing to offer rather than invent a reason.
                Some(_) => agents.nothing_free += 1,
                None => agents.eligible += 1,
            }
        }
        Counted {
            agents,
            next_filter_end,
            held_back_by,
        }
    }

    /// The kinds `demand` asks for (a positive amount) that no active agent's total has.
    pub(crate) fn kinds_no_agent_has(&self, demand: Option<&protocol::Resources>) -> Vec<String> {
        let Some(demand) = demand else {
            return Vec::new();
        };
        demand
            .iter()
            .filter(|(_, v)| *v > 0)
            .map(|(name, _)| name.as_str())
            .filter(|name| {
                !self
                    .agents
                    .records()
                    .any(|a| a.state == AgentState::Active && a.total.millis(name) > 0)
            })
            .map(str::to_owned)
            .collect()
    }
}

/// The active agents counted for one framework ([`State::count_agents`]).
pub(crate) struct Counted {
    /// The agents by what they are for the framework.
    pub(crate) agents: ExplainAgents,
    /// The soonest end (monotonic ms) of a decline filter that blocks an agent.
    pub(crate) next_filter_end: Option<u64>,
    /// Quota and reservation rules that hold it back, one entry per role.
    pub(crate) held_back_by: Vec<String>,
}

/// The main reason, in one sentence, with what to do about it.
fn summarize(
    id: FrameworkId,
    connected: bool,
    suppressed: bool,
    a: &ExplainAgents,
    next_filter_ends_in_s: Option<f64>,
) -> String {
    if !connected {
        return format!(
            "not subscribed: offers go only to frameworks with an open event stream \
             (GET /api/v1/frameworks/{id}/events)"
        );
    }
    if suppressed {
        return "suppressed: it asked for no offers; POST .../revive to get them again".into();
    }
    if a.active == 0 && a.draining > 0 {
        return format!(
            "no active agents: {} agent(s) are draining or drained and make no offers until \
             reactivated (POST /api/v1/agents/{{id}}/reactivate)",
            a.draining
        );
    }
    if a.active == 0 {
        return "no active agents in the cluster".into();
    }
    if a.offered_to_it > 0 {
        return format!(
            "it holds offers on {} agent(s); answer them (accept or decline) to get more",
            a.offered_to_it
        );
    }
    if a.eligible > 0 {
        return format!(
            "it can use {} agent(s); each goes to the framework with the lowest H-DRF share \
             among those that can use it, so it is offered one when its share is lowest \
             (see GET /api/v1/roles)",
            a.eligible
        );
    }
    let mut parts = Vec::new();
    if a.nothing_free > 0 {
        parts.push(format!(
            "{} agent(s) have nothing free (used by tasks or offered to others)",
            a.nothing_free
        ));
    }
    if a.filtered > 0 {
        let when = next_filter_ends_in_s
            .map(|s| format!("; the first filter ends in {s:.1} s, or revive to clear them"))
            .unwrap_or_default();
        parts.push(format!(
            "{} agent(s) were declined and stay filtered{when}",
            a.filtered
        ));
    }
    if a.demand_does_not_fit > 0 {
        parts.push(format!(
            "{} agent(s) have too little free for its demand hint",
            a.demand_does_not_fit
        ));
    }
    if a.draining > 0 {
        parts.push(format!(
            "{} agent(s) are draining or drained and make no offers",
            a.draining
        ));
    }
    if a.gpu_gated > 0 {
        parts.push(format!(
            "{} agent(s) have GPUs and are held back by GPU gating: register with \
             \"capabilities\": [\"gpu_resources\"] to be offered them",
            a.gpu_gated
        ));
    }
    if a.limit_reached > 0 {
        parts.push(format!(
            "{} agent(s) are held back by a quota limit: its role (or an ancestor) holds its limit \
             in allocations plus outstanding offers (see held_back_by and GET /api/v1/roles)",
            a.limit_reached
        ));
    }
    if a.guarantee_first > 0 {
        parts.push(format!(
            "{} agent(s) go first to another role below its guarantee (see held_back_by)",
            a.guarantee_first
        ));
    }
    if a.reserved_for_others > 0 {
        parts.push(format!(
            "{} agent(s) have free resources only in reservations for other roles (see \
             held_back_by and the agents' reservations in GET /api/v1/agents)",
            a.reserved_for_others
        ));
    }
    format!("no agent can be offered to it now: {}", parts.join("; "))
}
