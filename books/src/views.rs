//! Operator views of the books (`/api/v1/state`, `/agents`, `/frameworks`, `/tasks`, `/roles`,
//! `/offers`) and the gauges `/metrics` shows.

use std::collections::BTreeMap;
use std::sync::Arc;

use protocol::messages::{AgentInfo, ClusterState, FrameworkInfo, RoleNode, TaskInfo};
use protocol::{AgentId, FrameworkId, Offer, TaskId, TaskStatus};

use super::{AgentRecord, AgentState, Connection, State, TaskRecord};

/// Used, offered and total amounts of one resource across the active agents, in units
/// (cpus, MB, ...).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct ResourceUse {
    /// On the active agents.
    pub total: f64,
    /// Held by non-terminal tasks.
    pub used: f64,
    /// Held by outstanding offers.
    pub offered: f64,
}

/// A task as operators see it.
pub(crate) fn task_info(fw: FrameworkId, id: &TaskId, t: &TaskRecord) -> TaskInfo {
    TaskInfo {
        task_id: id.clone(),
        name: t.name.clone(),
        framework_id: fw,
        agent_id: t.agent_id(),
        state: t.state(),
        resources: t.resources.clone(),
        message: t.latest().message.clone(),
        exit_code: t.latest().exit_code,
        reason: t.latest().reason.clone(),
        updated_at: t.latest().timestamp,
        gpu_devices: t.latest().gpu_devices.clone(),
        healthy: t.latest().healthy,
    }
}

/// [`ClusterState`] with each task already in JSON (see [`State::tasks_json`]).
#[derive(Debug, Clone)]
pub struct ClusterSnapshot {
    /// The agents.
    pub agents: Vec<AgentInfo>,
    /// The frameworks.
    pub frameworks: Vec<FrameworkInfo>,
    /// The tasks, each the JSON of a [`TaskInfo`].
    pub tasks: Vec<Arc<str>>,
    /// The role tree.
    pub roles: RoleNode,
    /// The outstanding offers.
    pub offers: Vec<Offer>,
}

impl ClusterSnapshot {
    /// The JSON of the [`ClusterState`] this snapshot is.
    pub fn to_json(&self) -> Result<Vec<u8>, serde_json::Error> {
        let mut out =
            Vec::with_capacity(json_array_len(&self.tasks) + 1024 * (self.agents.len() + 16));
        out.extend_from_slice(b"{\"agents\":");
        serde_json::to_writer(&mut out, &self.agents)?;
        out.extend_from_slice(b",\"frameworks\":");
        serde_json::to_writer(&mut out, &self.frameworks)?;
        out.extend_from_slice(b",\"tasks\":");
        write_json_array(&mut out, &self.tasks);
        out.extend_from_slice(b",\"roles\":");
        serde_json::to_writer(&mut out, &self.roles)?;
        out.extend_from_slice(b",\"offers\":");
        serde_json::to_writer(&mut out, &self.offers)?;
        out.push(b'}');
        Ok(out)
    }
}

/// The JSON of a [`protocol::messages::TaskList`] whose tasks are already JSON
/// ([`State::tasks_json`]).
pub fn task_list_json(tasks: &[Arc<str>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(json_array_len(tasks) + 16);
    out.extend_from_slice(b"{\"tasks\":");
    write_json_array(&mut out, tasks);
    out.push(b'}');
    out
}

/// Appends `[a,b,...]` of JSON documents.
fn write_json_array(out: &mut Vec<u8>, items: &[Arc<str>]) {
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(item.as_bytes());
    }
    out.push(b']');
}

/// The length of [`write_json_array`]'s output.
fn json_array_len(items: &[Arc<str>]) -> usize {
    items.iter().map(|t| t.len() + 1).sum::<usize>() + 1
}

/// Point-in-time counts for the metrics page.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gauges {
    /// Outstanding offers.
    pub outstanding_offers: usize,
    /// Tasks by state name.
    pub tasks_by_state: BTreeMap<&'static str, usize>,
    /// Tasks not ended whose latest status says `healthy: false`.
    pub tasks_unhealthy: usize,
    /// Agents by state (`active`, `lost`, `draining`, `drained`).
    pub agents_by_state: BTreeMap<&'static str, usize>,
    /// Frameworks by state (`connected`, `disconnected`).
    pub frameworks_by_state: BTreeMap<&'static str, usize>,
    /// Dominant share per role path (the root is "").
    pub role_shares: Vec<(String, f64)>,
    /// Each resource across the active agents: total, used, offered.
    pub resources: BTreeMap<String, ResourceUse>,
    /// Disagreements the ledger found in the books since start (always a bug; see
    /// [`State::ledger_mismatches`]).
    pub ledger_mismatches: u64,
    /// Tasks killed by drain deadlines since the start.
    pub drain_kills: u64,
    /// Fences ordered since the start: kills of tasks reported `lost` or `gone` that a
    /// returning agent still ran.
    pub fences: u64,
    /// Preemption plans made since the start.
    pub preemptions: u64,
    /// Tasks killed by preemption since the start.
    pub tasks_preempted: u64,
    /// Roles starved now (below their fair share or guarantee with demand), while preemption
    /// is on.
    pub starved_roles: usize,
    /// Frameworks stalled at the last stall check: they want tasks and have had no offer for
    /// `stall_after` while some agent has room (see [`State::check_stalls`]).
    pub frameworks_stalled: usize,
    /// Per active agent with GPUs, by agent id: `(agent, gpus total, gpus used by tasks)`;
    /// at most [`MAX_AGENT_GPU_SERIES`] agents (the cluster's sums are in
    /// [`Gauges::resources`] under `gpus` however many there are).
    pub agent_gpus: Vec<(AgentId, f64, f64)>,
    /// Tasks that reached each terminal state since the start (every terminal state, in
    /// `TaskState::ALL` order, zeros too); not kept across restarts.
    pub tasks_terminal: Vec<(&'static str, u64)>,
}

/// The most agents with their own GPU series on `/metrics` (`parley_agent_gpus{agent}`): two
/// series per agent, so a fleet of 10k GPU agents does not add 20k series; past it, the first
/// agents by id are shown and the cluster's `parley_resources_*{resource="gpus"}` count them all.
pub const MAX_AGENT_GPU_SERIES: usize = 500;

impl State {
    /// Outstanding offers, optionally only one framework's and/or one agent's.
    pub fn offers(&self, framework: Option<FrameworkId>, agent: Option<AgentId>) -> Vec<Offer> {
        self.offers
            .iter()
            .filter(|r| framework.is_none_or(|f| r.offer().framework_id == f))
            .filter(|r| agent.is_none_or(|a| r.offer().agent_id == a))
            .map(|r| r.offer().clone())
            .collect()
    }

    /// Every agent, active or lost.
    pub fn agents(&self) -> Vec<AgentInfo> {
        self.agents
            .iter()
            .map(|(id, a)| self.agent_info(*id, a))
            .collect()
    }

    /// One agent as operators see it.
    pub(super) fn agent_info(&self, id: AgentId, a: &AgentRecord) -> AgentInfo {
        let held = self.ledger.agent(id);
        AgentInfo {
            agent_id: id,
            hostname: a.hostname.clone(),
            endpoint: a.endpoint.clone(),
            resources: a.total.clone(),
            used: held.used,
            offered: held.offered,
            attributes: a.attributes.clone(),
            state: super::drain::agent_view_state(a).into(),
            registered_at: a.registered_at,
            last_heartbeat_at: a.last_heartbeat_at,
            gpu_devices: a.gpu_devices.clone(),
            drain_deadline: a.drain.as_ref().map(|d| d.deadline),
            reservations: self.agent_reservations(id),
        }
    }

    /// Every framework (placeholders of adopted tasks included, named `""` with role
    /// `_orphans`).
    pub fn frameworks(&self) -> Vec<FrameworkInfo> {
        self.frameworks
            .iter()
            .map(|(id, f)| (id, f, self.ledger.framework(*id)))
            .map(|(id, f, held)| FrameworkInfo {
                framework_id: *id,
                name: f.name.clone(),
                role: f.role.clone(),
                state: connection_name(f.connection).into(),
                suppressed: f.suppressed,
                pending_tasks: f.pending_tasks,
                failover_timeout_s: f.failover_timeout_s,
                demand: f.demand.clone(),
                used: held.used,
                offered: held.offered,
                dominant_share: self.ledger.allocator().dominant_share(*id).unwrap_or(0.0),
                active_tasks: f.active_tasks,
                registered_at: f.registered_at,
                capabilities: [
                    (f.gpu_resources, protocol::capability::GPU_RESOURCES),
                    (
                        f.partition_timeout_s.is_some(),
                        protocol::partition::PARTITION_AWARE,
                    ),
                ]
                .into_iter()
                .filter(|(declared, _)| *declared)
                .map(|(_, name)| name.to_owned())
                .collect(),
                partition_timeout_s: f.partition_timeout_s,
                webui_url: f.webui_url.clone(),
            })
            .collect()
    }

    /// The statuses in `statuses` that would end a task the books hold as not yet ended, and
    /// that carry what metrics count (a reason or usage): each task's end is counted once,
    /// however often its agent resends it.
    pub fn first_ends(&self, statuses: &[TaskStatus]) -> Vec<TaskStatus> {
        statuses
            .iter()
            .filter(|st| st.state.is_terminal() && (st.reason.is_some() || st.usage.is_some()))
            .filter(|st| {
                self.tasks
                    .get(&(st.framework_id, st.task_id.clone()))
                    .is_some_and(|t| !t.latest().state.is_terminal())
            })
            .cloned()
            .collect()
    }

    /// Every task the books hold, optionally of one framework.
    pub fn tasks(&self, framework: Option<FrameworkId>) -> Vec<TaskInfo> {
        self.framework_tasks(framework)
            .map(|((fw, id), t)| task_info(*fw, id, t))
            .collect()
    }

    /// Every task the books hold, optionally of one framework, each as the JSON of its
    /// [`TaskInfo`]. Cheap for tasks unchanged since the last read: their JSON is cached.
    pub fn tasks_json(&self, framework: Option<FrameworkId>) -> Vec<Arc<str>> {
        self.tasks_json_in(framework, None)
    }

    /// [`State::tasks_json`] of the tasks in `state` only (all with `None`).
    pub fn tasks_json_in(
        &self,
        framework: Option<FrameworkId>,
        state: Option<protocol::TaskState>,
    ) -> Vec<Arc<str>> {
        self.framework_tasks(framework)
            .filter(|(_, t)| state.is_none_or(|s| t.state() == s))
            .map(|((fw, id), t)| task_json(*fw, id, t))
            .collect()
    }

    fn framework_tasks(
        &self,
        framework: Option<FrameworkId>,
    ) -> impl Iterator<Item = (&(FrameworkId, TaskId), &TaskRecord)> + '_ {
        self.tasks
            .iter()
            .filter(move |((f, _), _)| framework.is_none_or(|fw| *f == fw))
    }

    /// The role tree with weights, allocations and H-DRF dominant shares.
    pub fn roles(&self) -> RoleNode {
        self.ledger.allocator().role_tree()
    }

    /// Everything at once, the tasks as cached JSON ([`State::tasks_json`]): what
    /// `GET /api/v1/state` serves.
    pub fn cluster_snapshot(&self) -> ClusterSnapshot {
        ClusterSnapshot {
            agents: self.agents(),
            frameworks: self.frameworks(),
            tasks: self.tasks_json(None),
            roles: self.roles(),
            offers: self.offers(None, None),
        }
    }

    /// Everything at once.
    pub fn cluster_state(&self) -> ClusterState {
        ClusterState {
            agents: self.agents(),
            frameworks: self.frameworks(),
            tasks: self.tasks(None),
            roles: self.roles(),
            offers: self.offers(None, None),
        }
    }

    /// Counts for the metrics page.
    pub fn gauges(&self) -> Gauges {
        let mut g = Gauges {
            outstanding_offers: self.offers.len(),
            ledger_mismatches: self.ledger_mismatches(),
            drain_kills: self.drain_kills,
            fences: self.fences,
            preemptions: self.preemptions(),
            tasks_preempted: self.tasks_preempted(),
            starved_roles: self.starved_roles(),
            frameworks_stalled: self.frameworks_stalled(),
            tasks_terminal: protocol::TaskState::ALL
                .iter()
                .zip(self.tasks.terminal_counts())
                .filter(|(s, _)| s.is_terminal())
                .map(|(s, n)| (s.as_str(), *n))
                .collect(),
            ..Gauges::default()
        };
        for (state, n) in protocol::TaskState::ALL
            .iter()
            .zip(self.tasks.state_counts())
        {
            if *n > 0 {
                g.tasks_by_state.insert(state.as_str(), *n);
            }
        }
        g.tasks_unhealthy = self.tasks.unhealthy();
        for a in self.agents.records() {
            *g.agents_by_state
                .entry(super::drain::agent_view_state(a))
                .or_default() += 1;
        }
        for f in self.frameworks.records() {
            *g.frameworks_by_state
                .entry(connection_name(f.connection))
                .or_default() += 1;
        }
        fn walk(node: &RoleNode, out: &mut Vec<(String, f64)>) {
            out.push((node.path.clone(), node.dominant_share));
            for c in &node.children {
                walk(c, out);
            }
        }
        walk(&self.roles(), &mut g.role_shares);
        g.resources = self.resource_use();
        for (id, a) in self.agents.iter() {
            let total = a.total.units(protocol::capability::GPUS);
            if a.state == AgentState::Active && total > 0.0 {
                let used = self
                    .ledger
                    .agent(*id)
                    .used
                    .units(protocol::capability::GPUS);
                g.agent_gpus.push((*id, total, used));
            }
        }
        g.agent_gpus.sort_by_key(|(id, _, _)| *id);
        g.agent_gpus.truncate(MAX_AGENT_GPU_SERIES);
        g
    }
}

/// A task's [`TaskInfo`] in JSON, cached in the record until it changes.
pub(super) fn task_json(fw: FrameworkId, id: &TaskId, t: &TaskRecord) -> Arc<str> {
    t.view
        .get_or_init(|| {
            // A TaskInfo always serializes (plain strings, numbers and maps).
            serde_json::to_string(&task_info(fw, id, t))
                .unwrap_or_default()
                .into()
        })
        .clone()
}

pub(super) fn connection_name(c: Connection) -> &'static str {
    match c {
        Connection::Connected { .. } => "connected",
        Connection::Disconnected { .. } => "disconnected",
    }
}
