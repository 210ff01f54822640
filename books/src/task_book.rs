//! The tasks in the books, as a sub-book with private fields: each task's record, the order
//! tasks were taken in (for preemption), how many ended in each terminal state, and the
//! tasks made `unreachable` with when they become `gone` (`partition.rs`), the tasks on each
//! agent, and how many tasks are in each state (and unhealthy). It owns four rules: a task
//! taken in gets the next launch order; a task's end is counted once, when its latest status
//! first becomes terminal (only [`TaskMut::set_latest`] changes it); a task is awaiting `gone`
//! only while it is `unreachable` and in the books; and a task is listed under its agent
//! (fixed when it is taken in) exactly while it is in the books.
//!
//! The per-agent lists make what one agent does (registering again, being lost, draining)
//! cost its own tasks, not every task in the books; the per-state counts let the dashboard's
//! once-a-second sample count tasks without visiting them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, OnceLock};

use protocol::{
    AgentId, FrameworkId, Resources, RolePath, TaskId, TaskState, TaskStatus, UpdateId,
};

/// A task's key in the books: its framework and its id.
pub(crate) type TaskKey = (FrameworkId, TaskId);

/// Tasks that ended, by state in [`TaskState::ALL`] order (only the terminal ones count).
pub(crate) type TerminalCounts = [u64; TaskState::ALL.len()];

/// Tasks now in the books, by state in [`TaskState::ALL`] order.
pub(crate) type StateCounts = [usize; TaskState::ALL.len()];

/// Whether a task whose latest status is `status` counts as unhealthy: a failing health check
/// on a task that has not ended.
fn unhealthy(status: &TaskStatus) -> bool {
    status.healthy == Some(false) && !status.state.is_terminal()
}

/// Counts a task whose latest status is `status` in (`add`) or out of the per-state count and
/// the unhealthy count.
fn tally(by_state: &mut StateCounts, sick: &mut usize, status: &TaskStatus, add: bool) {
    let n = &mut by_state[state_index(status.state)];
    let ill = usize::from(unhealthy(status));
    if add {
        *n += 1;
        *sick += ill;
    } else {
        *n = n.saturating_sub(1);
        *sick = sick.saturating_sub(ill);
    }
}

/// `state`'s place in [`TaskState::ALL`].
fn state_index(state: TaskState) -> usize {
    TaskState::ALL
        .iter()
        .position(|s| *s == state)
        .unwrap_or_default()
}

/// One task's books.
#[derive(Debug, Clone)]
pub(crate) struct TaskRecord {
    pub(crate) name: String,
    /// Where it runs: fixed when the books take it in (it keys the per-agent lists).
    agent_id: AgentId,
    pub(crate) resources: Resources,
    /// The latest status (for staging tasks, one made by the coordinator at accept), without
    /// its `resources` when they are the record's own (`latest_shares_resources`): a
    /// `Resources` is a map of its own, and nearly every status carries the task's.
    latest: TaskStatus,
    /// The latest status carried `resources` equal to the record's, left out of `latest`;
    /// [`TaskRecord::latest_status`] puts them back.
    latest_shares_resources: bool,
    /// Every update id this task has had, so acknowledgements of old updates are recognised.
    update_ids: Vec<UpdateId>,
    /// Set when the coordinator itself declared the task `lost` or `gone` (its agent was
    /// lost, or a launch could not reach it): an agent that still runs it is told to kill it,
    /// and an end it reports replaces the guess (see `partition.rs`).
    pub(crate) lost_by_coordinator: bool,
    /// In its framework's FIFO of completed tasks.
    pub(crate) completed: bool,
    /// Killed because its agent's drain deadline passed: its `killed` update gets reason
    /// `agent_drained`.
    pub(crate) drain_killed: bool,
    /// The reserved pool its resources are booked in (the role; `None`: unreserved).
    pub(crate) pool: Option<RolePath>,
    /// Killed because preemption took it back (`preempt.rs`): its `killed` update gets reason
    /// `preempted`.
    pub(crate) preempt_killed: bool,
    /// Its priority for preemption (0 unless the TaskSpec set one).
    pub(crate) priority: i32,
    /// When the books took it in, as a count of tasks taken in before it: preemption takes
    /// the most recently launched first.
    launch_order: u64,
    /// Its framework asked to kill it while it was `unreachable`: the kill is sent again when
    /// its agent returns (`partition.rs`).
    pub(crate) kill_on_return: bool,
    /// The task as operators see it ([`protocol::messages::TaskInfo`]) in JSON, made on the
    /// first read after a change and shared by every read until the next, so a large
    /// `GET /api/v1/state` copies bytes instead of serializing every task again.
    pub(crate) view: OnceLock<Arc<str>>,
}

impl TaskRecord {
    /// The agent it runs on.
    pub(crate) fn agent_id(&self) -> AgentId {
        self.agent_id
    }

    pub(crate) fn state(&self) -> TaskState {
        self.latest().state
    }

    /// The latest status (for staging tasks, one made by the coordinator at accept), to read
    /// its fields other than `resources`, which may have been left out (they are the
    /// record's); [`TaskRecord::latest_status`] is the whole status.
    pub(crate) fn latest(&self) -> &TaskStatus {
        &self.latest
    }

    /// The latest status as it was recorded, `resources` included.
    pub(crate) fn latest_status(&self) -> TaskStatus {
        let mut status = self.latest.clone();
        if self.latest_shares_resources {
            status.resources = Some(self.resources.clone());
        }
        status
    }

    /// Stores `status` as the latest, leaving out its `resources` when they are the record's.
    fn store_latest(&mut self, mut status: TaskStatus) {
        self.latest_shares_resources = status.resources.as_ref() == Some(&self.resources);
        if self.latest_shares_resources {
            status.resources = None;
        }
        self.latest = status;
    }

    /// Changes what the task holds (e.g. what still fits when it comes back from `lost`),
    /// keeping its latest status as it was recorded.
    pub(crate) fn set_resources(&mut self, resources: Resources) {
        if self.latest_shares_resources {
            self.latest.resources = Some(std::mem::take(&mut self.resources));
            self.latest_shares_resources = false;
        }
        self.resources = resources;
        self.view = OnceLock::new();
    }

    /// Whether `update` is one of this task's updates, the latest or an older one.
    pub(crate) fn had_update(&self, update: &UpdateId) -> bool {
        self.update_ids.contains(update)
    }

    /// When the books took it in, as a count of tasks taken in before it.
    pub(crate) fn launch_order(&self) -> u64 {
        self.launch_order
    }

    /// Whether its resources are held in the ledger: it has not ended, and its agent is not
    /// lost (an `unreachable` task holds nothing until its agent returns).
    pub(crate) fn holds(&self) -> bool {
        !self.latest().state.is_terminal() && self.latest().state != TaskState::Unreachable
    }

    /// The task's resources for a status the coordinator makes, `None` when unknown (an
    /// adopted task whose agent did not report them).
    pub(crate) fn known_resources(&self) -> Option<Resources> {
        (!self.resources.is_empty()).then(|| self.resources.clone())
    }
}

/// The tasks in the books. See the module docs.
#[derive(Debug, Default)]
pub(crate) struct TaskBook {
    /// Boxed: a record is a few hundred bytes, and a B-tree node holds room for eleven
    /// entries whether used or not, so unboxed records left about a third of the nodes'
    /// memory empty (at 100,000 tasks, tens of MiB).
    tasks: BTreeMap<TaskKey, Box<TaskRecord>>,
    /// Tasks taken into the books so far (launched, or adopted from an agent's report): the
    /// last one's `launch_order`. Not kept across restarts: adopted tasks count as launched
    /// in the order they are reported.
    taken_in: u64,
    /// Tasks that ended since the start.
    terminal: TerminalCounts,
    /// Tasks made `unreachable` on lost agents, with when they become `gone`.
    unreachable: BTreeMap<TaskKey, u64>,
    /// Tasks now in the books, by state.
    by_state: StateCounts,
    /// Tasks now in the books that are [`unhealthy`].
    unhealthy: usize,
    /// The tasks on each agent (no empty lists).
    by_agent: HashMap<AgentId, BTreeSet<TaskKey>>,
}

/// A task of the books, borrowed to change it: its record, and [`TaskMut::set_latest`], which
/// counts the task's end.
pub(crate) struct TaskMut<'a> {
    key: &'a TaskKey,
    record: &'a mut TaskRecord,
    terminal: &'a mut TerminalCounts,
    unreachable: &'a mut BTreeMap<TaskKey, u64>,
    by_state: &'a mut StateCounts,
    unhealthy: &'a mut usize,
}

impl TaskMut<'_> {
    /// Records a new latest status (its update id too), dropping the cached view; counts the
    /// task as ended in that state if it was not terminal before. A task that was
    /// `unreachable` no longer awaits `gone`.
    pub(crate) fn set_latest(&mut self, status: TaskStatus) {
        let t = &mut *self.record;
        if t.latest.state == TaskState::Unreachable && !self.unreachable.is_empty() {
            self.unreachable.remove(self.key);
        }
        tally(self.by_state, self.unhealthy, t.latest(), false);
        tally(self.by_state, self.unhealthy, &status, true);
        if !t.latest().state.is_terminal() && status.state.is_terminal() {
            self.terminal[state_index(status.state)] += 1;
        }
        t.update_ids.push(status.update_id);
        t.store_latest(status);
        t.view = OnceLock::new();
    }
}

impl TaskMut<'_> {
    /// Records `status` (state `unreachable`) as [`TaskMut::set_latest`] does; the task
    /// becomes `gone` at `gone_at_ms` unless it changes before (see [`TaskBook::gone_due`]).
    pub(crate) fn set_unreachable(&mut self, status: TaskStatus, gone_at_ms: u64) {
        self.set_latest(status);
        self.unreachable.insert(self.key.clone(), gone_at_ms);
    }
}

impl Deref for TaskMut<'_> {
    type Target = TaskRecord;
    fn deref(&self) -> &TaskRecord {
        self.record
    }
}

impl DerefMut for TaskMut<'_> {
    fn deref_mut(&mut self) -> &mut TaskRecord {
        self.record
    }
}

impl TaskBook {
    /// How many tasks the books hold.
    pub(crate) fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether the books hold no task.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Whether the books hold this task.
    pub(crate) fn contains(&self, key: &TaskKey) -> bool {
        self.tasks.contains_key(key)
    }

    /// The task's record.
    pub(crate) fn get(&self, key: &TaskKey) -> Option<&TaskRecord> {
        self.tasks.get(key).map(|t| &**t)
    }

    /// The task, to change it.
    pub(crate) fn get_mut(&mut self, key: &TaskKey) -> Option<TaskMut<'_>> {
        // A one-key range: the map's own key, which outlives the caller's.
        let (key, record) = self.tasks.range_mut(key..=key).next()?;
        Some(TaskMut {
            key,
            record,
            terminal: &mut self.terminal,
            unreachable: &mut self.unreachable,
            by_state: &mut self.by_state,
            unhealthy: &mut self.unhealthy,
        })
    }

    /// Takes a task into the books (launched, or adopted from an agent's report) with its
    /// first status, as the most recently launched; returns its record for the caller to set
    /// its pool and priority. A task already under `key` is replaced.
    pub(crate) fn take_in(
        &mut self,
        key: TaskKey,
        name: String,
        agent_id: AgentId,
        resources: Resources,
        mut latest: TaskStatus,
    ) -> &mut TaskRecord {
        self.taken_in += 1;
        tally(&mut self.by_state, &mut self.unhealthy, &latest, true);
        self.by_agent
            .entry(agent_id)
            .or_default()
            .insert(key.clone());
        let latest_shares_resources = latest.resources.as_ref() == Some(&resources);
        if latest_shares_resources {
            latest.resources = None;
        }
        let record = Box::new(TaskRecord {
            name,
            agent_id,
            resources,
            update_ids: vec![latest.update_id],
            latest,
            latest_shares_resources,
            lost_by_coordinator: false,
            completed: false,
            drain_killed: false,
            pool: None,
            preempt_killed: false,
            priority: 0,
            launch_order: self.taken_in,
            kill_on_return: false,
            view: OnceLock::new(),
        });
        match self.tasks.entry(key) {
            std::collections::btree_map::Entry::Occupied(mut e) => {
                let old = e.insert(record);
                tally(&mut self.by_state, &mut self.unhealthy, old.latest(), false);
                if old.agent_id != agent_id {
                    unlist(&mut self.by_agent, old.agent_id, e.key());
                }
                e.into_mut()
            }
            std::collections::btree_map::Entry::Vacant(e) => e.insert(record),
        }
    }

    /// Forgets the task; returns its record.
    pub(crate) fn remove(&mut self, key: &TaskKey) -> Option<TaskRecord> {
        if !self.unreachable.is_empty() {
            self.unreachable.remove(key);
        }
        let removed = self.tasks.remove(key)?;
        tally(
            &mut self.by_state,
            &mut self.unhealthy,
            removed.latest(),
            false,
        );
        unlist(&mut self.by_agent, removed.agent_id, key);
        Some(*removed)
    }

    /// The `unreachable` tasks whose time to become `gone` came at `now_ms`.
    pub(crate) fn gone_due(&self, now_ms: u64) -> Vec<TaskKey> {
        self.unreachable
            .iter()
            .filter(|(_, gone_at)| now_ms >= **gone_at)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// The `unreachable` tasks on agent `agent`.
    pub(crate) fn unreachable_on(&self, agent: AgentId) -> Vec<TaskKey> {
        if self.unreachable.is_empty() {
            return Vec::new();
        }
        self.keys_on(agent)
            .filter(|k| self.unreachable.contains_key(*k))
            .cloned()
            .collect()
    }

    /// How many tasks await `gone`.
    #[cfg(test)]
    pub(crate) fn unreachable_len(&self) -> usize {
        self.unreachable.len()
    }

    /// Every task, in key order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&TaskKey, &TaskRecord)> + '_ {
        self.tasks.iter().map(|(k, t)| (k, &**t))
    }

    /// Every task's record, in key order.
    #[cfg(test)]
    pub(crate) fn records(&self) -> impl Iterator<Item = &TaskRecord> + '_ {
        self.tasks.values().map(|t| &**t)
    }

    /// The tasks of framework `fw`.
    pub(crate) fn of_framework(
        &self,
        fw: FrameworkId,
    ) -> impl Iterator<Item = (&TaskKey, &TaskRecord)> + '_ {
        self.iter().filter(move |((f, _), _)| *f == fw)
    }

    /// The keys of the tasks on agent `agent`, in key order.
    fn keys_on(&self, agent: AgentId) -> impl Iterator<Item = &TaskKey> + '_ {
        self.by_agent.get(&agent).into_iter().flatten()
    }

    /// The tasks on agent `agent`, in key order: O(its tasks), not O(all tasks).
    pub(crate) fn on_agent(
        &self,
        agent: AgentId,
    ) -> impl Iterator<Item = (&TaskKey, &TaskRecord)> + '_ {
        self.keys_on(agent)
            .filter_map(|k| self.tasks.get(k).map(|t| (k, &**t)))
    }

    /// Calls `f` with each task on agent `agent`, in key order, to change its flags (not its
    /// status: see [`TaskBook::get_mut`]).
    pub(crate) fn for_each_on_agent_mut(
        &mut self,
        agent: AgentId,
        mut f: impl FnMut(&TaskKey, &mut TaskRecord),
    ) {
        let Some(keys) = self.by_agent.get(&agent) else {
            return;
        };
        for key in keys {
            if let Some(t) = self.tasks.get_mut(key) {
                f(key, t);
            }
        }
    }

    /// How many tasks are `staging`: launched, not yet reported by their agent.
    pub(crate) fn staging(&self) -> usize {
        self.by_state[state_index(TaskState::Staging)]
    }

    /// Tasks now in the books, by state in [`TaskState::ALL`] order.
    pub(crate) fn state_counts(&self) -> &StateCounts {
        &self.by_state
    }

    /// Tasks now in the books that have not ended and whose health check fails.
    pub(crate) fn unhealthy(&self) -> usize {
        self.unhealthy
    }

    /// Tasks that ended since the start, by state in [`TaskState::ALL`] order.
    pub(crate) fn terminal_counts(&self) -> &TerminalCounts {
        &self.terminal
    }
}

#[cfg(test)]
impl TaskBook {
    /// Panics unless the per-state counts and the per-agent lists are what the tasks say.
    pub(crate) fn assert_indexes_agree(&self) {
        let mut by_state: StateCounts = [0; TaskState::ALL.len()];
        let mut by_agent: HashMap<AgentId, BTreeSet<TaskKey>> = HashMap::new();
        let mut sick = 0;
        for (key, t) in &self.tasks {
            tally(&mut by_state, &mut sick, t.latest(), true);
            by_agent.entry(t.agent_id).or_default().insert(key.clone());
        }
        assert_eq!(self.by_state, by_state, "tasks by state");
        assert_eq!(self.by_agent, by_agent, "tasks by agent");
        assert_eq!(self.unhealthy, sick, "unhealthy tasks");
    }
}

/// Takes `key` off `agent`'s list, dropping the list when it empties.
fn unlist(by_agent: &mut HashMap<AgentId, BTreeSet<TaskKey>>, agent: AgentId, key: &TaskKey) {
    if let Some(keys) = by_agent.get_mut(&agent) {
        keys.remove(key);
        if keys.is_empty() {
            by_agent.remove(&agent);
        }
    }
}

#[cfg(test)]
impl std::ops::Index<&TaskKey> for TaskBook {
    type Output = TaskRecord;
    fn index(&self, key: &TaskKey) -> &TaskRecord {
        &self.tasks[key]
    }
}
