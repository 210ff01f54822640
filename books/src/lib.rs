//! The coordinator's books, as a pure crate: the one owner of agents, frameworks, tasks,
//! outstanding offers, and the H-DRF [`Allocator`]. No I/O, no clock, no async runtime: its
//! dependencies are `protocol`, `allocator` and plain data crates (`cargo tree -e normal -p
//! parley-books` shows no tokio, axum, hyper, reqwest, redb or etcd client), and the
//! coordinator's runtime only carries out the [`Effect`]s it returns.
//!
//! # Design
//!
//! [`State`] is plain synchronous data. It is mutated only through its methods, which take the
//! current time as [`Now`] and, instead of doing I/O, push the side effects to perform into an
//! [`Effects`] list (send this event to that framework, publish an offer event, POST a launch to
//! an agent, run an allocation soon). The coordinator's async shell (its `runtime`) holds the state behind
//! one mutex, never across an `.await`, and performs the effects after each call. So:
//!
//! - every rule of the books is testable without a network or a clock, and every id it makes
//!   comes from an [`IdSource`] given to it (random in production, counters in tests), so the
//!   tests assert the exact effects of a call (`assert_eq!(fx, [Effect::…])`);
//! - every method validates fully before it mutates: an `Err` means nothing changed;
//! - its inputs are domain types ([`FrameworkRegistration`], [`AgentRegistration`], [`Accept`],
//!   [`Decline`]): the API layer converts and validates the wire requests; the books check
//!   only what they can tell. Its errors ([`StateError`]) say what went wrong in the books'
//!   terms; the API layer maps them to HTTP statuses;
//! - the durable registry persists the changes it pushes ([`Effect::Persist`]) without touching
//!   the rules.
//!
//! # Accounting
//!
//! One owner: the `Ledger` (`ledger.rs`). It alone changes the allocator (agents,
//! frameworks, eligibility: active, demand, suppress, revive, decline filters; holdings: offer,
//! accept, hold, release), and it derives what each agent and framework has `offered`
//! (outstanding offers) and `used` (non-terminal tasks) for the operator views, kept
//! incrementally (a few map lookups and one vector addition or subtraction per change). An
//! agent's `offered + used` never exceeds its total: offers are made only from the allocator's
//! free resources, and accepts only move resources from offered to used. A change that does not
//! match the books (the allocator refuses it, a subtraction would go below zero, a framework or
//! agent leaves still holding something) is a bug: a [`LedgerError`], logged with
//! `tracing::error!` and counted ([`State::ledger_mismatches`]), never floored or ignored
//! silently. A lost agent leaves the ledger with its tasks' holdings (the tasks become `lost`);
//! a task that comes back, or that the agent reports on re-registration, holds what fits.
//!
//! # Completed tasks
//!
//! A task stays in the books while it runs and, once terminal, until the framework has
//! acknowledged every update of it still pending (at-least-once delivery: an update is never
//! dropped unacknowledged). Then it is *completed*: it moves to its framework's FIFO of
//! completed tasks, still listed and reconcilable. When the FIFO holds more than
//! `max_completed_tasks_per_framework`, the oldest completed task is forgotten: removed from the
//! books, so reconciling its id answers as for an unknown task (404) and the operator views no
//! longer list it. Terminal tasks hold no resources, so forgetting one touches no accounting.
//! Task ids must be unique among the tasks a framework has in the books; a forgotten id may be
//! launched again. A task declared lost or gone never comes back to life: an agent that
//! returns still running it is told to kill it (`partition.rs`).
//!
//! # Restarts
//!
//! The durable registry (the coordinator's `store`, whose records are [`records`]) keeps frameworks, removed framework ids and run-time
//! role weights: calls that change them push [`Effect::Persist`], and [`State::restore`] puts
//! them back after a restart (frameworks disconnected, their failover timeouts started again).
//! Everything else is rebuilt from the agents. Re-registration is robust to a coordinator that
//! lost its books (no store, or a framework it never stored): an agent re-registering with an unknown `agent_id` is adopted with that id
//! and its reported tasks; a task of an unknown framework is kept under a placeholder framework
//! (role `_orphans`, disconnected) which the framework takes over when it re-registers with its
//! id within the default failover timeout. Agents report each task's `resources` in its
//! `TaskStatus`, and an adopted running task is accounted with them exactly as a launched task
//! (allocator, and the agent's and framework's `used`), so its agent does not look idle and its
//! resources are not offered twice. Outstanding offers on the agent that hold what the task uses
//! are rescinded first; if the task still does not fit (the agent reports more than its total),
//! it holds what fits and a warning is logged: the books never over-commit an agent. A status
//! without `resources` (an older agent) leaves the task accounted with nothing.
//!
//! # Layout
//!
//! - `agents.rs`: registration, re-registration, heartbeats, loss.
//! - `frameworks.rs`: registration, streams (subscribe / disconnect), failover, removal,
//!   suppress / revive.
//! - `offers.rs`: turning allocation decisions into offers; accept, decline, expiry, rescind.
//! - `gangs.rs`: gangs launched together on several agents, all or none, and ended together
//!   when a member fails.
//! - `sated.rs`: offers sized to demand: a framework that said how many tasks it wants is
//!   held back while its outstanding offers hold that many.
//! - `offer_book.rs`: the outstanding offers and how recent ones ended, as a sub-book with
//!   private fields.
//! - `owners.rs`: which principal owns a framework or agent id (for the coordinator's
//!   `api::auth`), functions over `FrameworkBook` and `AgentBook`.
//! - `partition.rs`: tasks of lost agents: `unreachable` and `gone` for partition-aware
//!   frameworks, and fencing (killing) a task its framework was told is not running.
//! - `tasks.rs`: status updates, kill, acknowledgements and re-sends, reconciliation, adoption.
//! - `agent_book.rs`: the agents, as a sub-book with private fields: records, the agents
//!   awaited from the registry, dynamic reservations by agent (forgotten with their agent).
//! - `framework_book.rs`: the frameworks, as a sub-book with private fields: records (with
//!   their pending updates), removed framework ids.
//! - `task_book.rs`: the tasks, as a sub-book with private fields: records, launch order,
//!   terminal counts (a task's end is counted once, when its status first becomes terminal),
//!   `unreachable` tasks with when they become `gone`.
//! - `views.rs`: the operator views and metric gauges.
//! - `entry.rs`: the `State` methods that split the books for the rules kept as functions
//!   over the sub-books they name (drain, preemption, quota, owners).
//! - `drain.rs`: draining agents for maintenance: tell, kill at the deadline, reactivate;
//!   functions over `AgentBook`, `TaskBook` and the ledger.
//! - `quota.rs`: a role's weight, guarantee and limit: checks and changes, functions over
//!   the ledger.
//! - `reservations.rs`: static and dynamic reservations: checks at registration,
//!   reserve / unreserve on offers, what is persisted and re-applied.
//! - `preempt.rs`: preemption toward fair share: starvation timers, plans, the
//!   `preemption` event, kills at the deadline; functions over the preemption books, the
//!   ledger, `TaskBook` and `AgentBook`.
//! - `ledger.rs`: holdings and eligibility, the one caller of the allocator's changes.
//! - `admission.rs`: the launch window, how many agents an allocation may offer while tasks
//!   wait to be reported by their agents.
//! - `ids.rs`: [`IdSource`], where offer, update, framework and agent ids come from.
//! - `input.rs`: the domain inputs of registration, accept and decline.
//! - `pending.rs`: each framework's unacknowledged updates.
//! - `explain.rs`: why a framework is or is not getting offers, agent by agent.
//! - `stall.rs`: frameworks that want tasks and have had no offer for `stall_after` while
//!   some agent has room: found by a periodic check, named by `explain`.
//! - [`records`]: the durable registry's record types ([`records::Change`],
//!   [`records::Snapshot`]); the backends that store them live in the coordinator.
//! - [`settings`]: [`Settings`], what the books read of the configuration.
//!
//! Tests: `tests*.rs` build books with sequential ids and assert each call's whole effect list
//! (`tests::check`); `proptests.rs` checks the books' totals against the allocator's.

mod admission;
mod agent_book;
mod agent_token;
mod agents;
mod dashboard;
mod drain;
mod entry;
mod error;
mod explain;
mod framework_book;
mod frameworks;
mod gangs;
mod ids;
mod input;
mod ledger;
mod offer_book;
mod offers;
mod owners;
mod partition;
mod pending;
mod preempt;
#[cfg(test)]
mod proptests;
mod quota;
pub mod records;
mod remembered;
mod reservations;
mod sated;
pub mod settings;
mod stall;
mod task_book;
mod tasks;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_drain;
#[cfg(test)]
mod tests_gangs;
#[cfg(test)]
mod tests_limits;
#[cfg(test)]
mod tests_partition;
#[cfg(test)]
mod tests_preempt;
#[cfg(test)]
mod tests_reservations;
#[cfg(test)]
mod tests_sated;
#[cfg(test)]
mod tests_stall;
#[cfg(test)]
mod tests_written;
mod views;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use protocol::events::OfferEvent;
use protocol::messages::LaunchTasks;
use protocol::{
    AgentId, FrameworkEvent, FrameworkId, Resources, RolePath, TaskId, TaskStatus, Timestamp,
};

use agent_book::AgentBook;
use allocator::{Allocator, Policy};
use framework_book::FrameworkBook;
use ledger::Ledger;
use offer_book::OfferBook;
pub use settings::{Settings, STANDARD_RESOURCES};
use task_book::{TaskBook, TaskRecord};

pub use agent_token::AgentToken;
pub use agents::AgentContact;
pub use allocator::Sweep;
pub use dashboard::{BookSample, SAMPLE_MAX_SHARES};
pub use error::StateError;
pub use frameworks::RegistrationPlan;
pub use ids::IdSource;
pub use input::{Accept, AgentRegistration, Decline, FrameworkRegistration};
pub use ledger::{Holder, LedgerError};
pub use offers::AllocationRun;
pub use reservations::{ReservationOp, ReservationPlan};
pub use stall::StallChange;
pub use views::{task_list_json, ClusterSnapshot, Gauges, ResourceUse, MAX_AGENT_GPU_SERIES};

/// The role under which tasks of frameworks the coordinator does not know are kept.
pub const ORPHAN_ROLE: &str = "_orphans";

/// The current time: a monotonic millisecond clock for deadlines (the allocator's `now`) and the
/// wall clock for timestamps shown on the wire.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Now {
    /// Milliseconds on a monotonic clock chosen by the caller.
    pub ms: u64,
    /// Wall-clock time.
    pub wall: Timestamp,
}

/// A side effect the shell performs after a state method returns.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Send an event on the framework's stream (dropped if it has none).
    ToFramework(FrameworkId, FrameworkEvent),
    /// End the framework's stream (after any events queued before).
    CloseStream(FrameworkId),
    /// Publish an event on the operator offer stream.
    Offer(OfferEvent),
    /// POST `{endpoint}/api/v1/tasks`; on failure report [`State::launch_failed`].
    Launch {
        /// The agent.
        agent_id: AgentId,
        /// Its base URL.
        endpoint: String,
        /// The body.
        body: LaunchTasks,
    },
    /// POST `{endpoint}/api/v1/tasks/{task_id}/kill`.
    Kill {
        /// The agent.
        agent_id: AgentId,
        /// The task's framework (sent in the kill body).
        framework_id: FrameworkId,
        /// Its base URL.
        endpoint: String,
        /// The task.
        task_id: TaskId,
    },
    /// POST `{endpoint}/api/v1/tasks/{task_id}/kill` with reason `agent_partitioned`: a task
    /// its framework was told is `lost` or `gone` still runs on an agent that came back; the
    /// agent kills it and journals that it must not run again (see [`protocol::partition`]).
    Fence {
        /// The agent.
        agent_id: AgentId,
        /// The task's framework.
        framework_id: FrameworkId,
        /// Its base URL.
        endpoint: String,
        /// The task.
        task_id: TaskId,
    },
    /// Resources were freed (or a framework became eligible): run an allocation soon.
    Allocate,
    /// Write this change to the durable registry (the coordinator's `store`) before answering.
    Persist(crate::records::Change),
}

/// The effects of one or more state calls, in order.
pub type Effects = Vec<Effect>;

/// Settings the books need, in milliseconds.
#[derive(Debug, Clone)]
pub(crate) struct Timing {
    pub(crate) allocation_interval_ms: u64,
    pub(crate) offer_timeout_ms: u64,
    pub(crate) agent_heartbeat_interval_ms: u64,
    pub(crate) max_missed_heartbeats: u64,
    pub(crate) framework_heartbeat_interval_ms: u64,
    pub(crate) default_failover_timeout_ms: u64,
    pub(crate) default_refuse_ms: u64,
    pub(crate) update_resend_interval_ms: u64,
    pub(crate) max_completed_tasks_per_framework: usize,
    pub(crate) max_frameworks: usize,
    pub(crate) max_roles: usize,
    pub(crate) max_failover_timeout_ms: u64,
    pub(crate) max_placeholder_frameworks: usize,
    pub(crate) max_stream_queue: usize,
    pub(crate) lost_agent_retention_ms: u64,
    pub(crate) max_pending_updates_per_framework: usize,
    pub(crate) stall_after_ms: u64,
}

fn ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Whether an agent is part of the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentState {
    /// Registered and heartbeating; its resources are in the capacity.
    Active,
    /// Missed too many heartbeats; out of the capacity until it re-registers.
    Lost,
}

impl AgentState {
    /// The name operators see: `active` or `lost`.
    pub fn name(self) -> &'static str {
        match self {
            AgentState::Active => "active",
            AgentState::Lost => "lost",
        }
    }
}

/// One agent's books.
#[derive(Debug, Clone)]
pub(crate) struct AgentRecord {
    pub(crate) hostname: String,
    pub(crate) endpoint: String,
    /// The token presented on calls to the agent (never shown in views or logs).
    pub(crate) api_token: Option<AgentToken>,
    pub(crate) total: Resources,
    pub(crate) attributes: BTreeMap<String, String>,
    /// Its GPUs, as it registered them (shown in the views).
    pub(crate) gpu_devices: Vec<protocol::gpu::GpuDevice>,
    pub(crate) state: AgentState,
    pub(crate) registered_at: Timestamp,
    pub(crate) last_heartbeat_at: Timestamp,
    pub(crate) last_heartbeat_ms: u64,
    /// The agent principal that registered it, with credentials configured (the coordinator's `auth`).
    pub(crate) owner: Option<Arc<str>>,
    /// Its drain, while draining or drained (`drain.rs`).
    pub(crate) drain: Option<drain::Drain>,
    /// Its static reservations, as it registered them (`reservations.rs`).
    pub(crate) static_reservations: Vec<protocol::reservation::Reservation>,
}

/// Whether a framework's event stream is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Connection {
    /// Stream number `generation` is open.
    Connected { generation: u64 },
    /// No stream since `since_ms`; `ever` is false until the first subscribe.
    Disconnected { since_ms: u64, ever: bool },
}

/// One framework's books.
#[derive(Debug, Clone)]
pub(crate) struct FrameworkRecord {
    pub(crate) name: String,
    pub(crate) role: RolePath,
    pub(crate) failover_timeout_s: f64,
    pub(crate) demand: Option<Resources>,
    pub(crate) suppressed: bool,
    /// How many more tasks it last said it wants (`None`: no bound; see `sated.rs`).
    pub(crate) pending_tasks: Option<u32>,
    /// The tasks its outstanding offers hold, each counted when the offer was made. While
    /// they reach `pending_tasks` the allocator holds it back (`FrameworkRecord::is_sated`).
    pub(crate) offered_tasks: u32,
    pub(crate) connection: Connection,
    /// The last stream number handed out.
    pub(crate) generation: u64,
    pub(crate) registered_at: Timestamp,
    pub(crate) active_tasks: usize,
    /// Updates sent and not yet acknowledged.
    pub(crate) pending: pending::PendingUpdates,
    /// Completed tasks (terminal, nothing pending), oldest first; bounded by
    /// `max_completed_tasks_per_framework` (see the module docs).
    pub(crate) completed: VecDeque<TaskId>,
    /// A placeholder made for adopted tasks; becomes real when the framework re-registers.
    pub(crate) placeholder: bool,
    /// The principal that registered it, with credentials configured (the coordinator's `auth`).
    pub(crate) owner: Option<Arc<str>>,
    /// It declared the `gpu_resources` capability.
    pub(crate) gpu_resources: bool,
    /// Its partition timeout in seconds when it declared `partition_aware`: its tasks on an
    /// agent that is lost become `unreachable`, then `gone` after this long (see
    /// [`protocol::partition`]). `None`: they become `lost`.
    pub(crate) partition_timeout_s: Option<f64>,
    /// Its own web UI, as its latest registration stated it (not persisted: a framework
    /// states it again whenever it registers).
    pub(crate) webui_url: Option<String>,
    /// When it was last sent an offer (`None`: never); the stall check counts from it
    /// (`stall.rs`).
    pub(crate) last_offer_ms: Option<u64>,
    /// When it last registered, subscribed or revived; the stall check counts from the later
    /// of this and `last_offer_ms`.
    pub(crate) wants_since_ms: u64,
}

impl FrameworkRecord {
    /// A new record, disconnected since `now`, with no stream, task or pending update yet.
    pub(crate) fn new(
        name: String,
        role: RolePath,
        failover_timeout_s: f64,
        demand: Option<Resources>,
        placeholder: bool,
        now: &Now,
    ) -> Self {
        Self {
            name,
            role,
            failover_timeout_s,
            demand,
            suppressed: false,
            pending_tasks: None,
            offered_tasks: 0,
            connection: Connection::Disconnected {
                since_ms: now.ms,
                ever: false,
            },
            generation: 0,
            registered_at: now.wall,
            active_tasks: 0,
            pending: Default::default(),
            completed: VecDeque::new(),
            placeholder,
            owner: None,
            gpu_resources: false,
            partition_timeout_s: None,
            webui_url: None,
            last_offer_ms: None,
            wants_since_ms: now.ms,
        }
    }

    fn failover_ms(&self) -> u64 {
        // Validated finite and within range on registration.
        (self.failover_timeout_s * 1000.0) as u64
    }
}

/// The books. See the module docs.
///
/// Its fields are the sub-books, the ledger and a few counters; each sub-book keeps its
/// data private to its own file.
pub struct State {
    timing: Timing,
    /// Holdings and eligibility: the only caller of the allocator's changes.
    ledger: Ledger,
    /// Where new offer, update, framework and agent ids come from.
    ids: IdSource,
    /// The agents, those awaited from the registry, dynamic reservations (`agent_book.rs`).
    agents: AgentBook,
    /// The frameworks and the ids of removed ones (`framework_book.rs`).
    frameworks: FrameworkBook,
    /// The tasks, their launch order, terminal counts and gone deadlines (`task_book.rs`).
    tasks: TaskBook,
    /// Outstanding offers and how recent ones ended (`offer_book.rs`).
    offers: OfferBook,
    /// Agents whose resources returned to the pool since the last allocation run, with when
    /// that first happened (for the offer-wait metric, see [`State::take_offer_waits`]).
    freed_at: HashMap<AgentId, u64>,
    /// Milliseconds from freeing to offer, of the last allocation run's offers.
    offer_waits: Vec<u64>,
    /// Tasks launched per accepted offer, lately (`admission.rs`).
    tasks_per_offer: admission::TasksPerOffer,
    /// Tasks killed by drain deadlines since the start (`drain.rs`).
    drain_kills: u64,
    /// Preemption toward fair share (`preempt.rs`).
    preempt: preempt::Preemption,
    /// Fences ordered since the start (`partition.rs`).
    fences: u64,
    /// The frameworks found stalled at the last [`State::check_stalls`] (`stall.rs`).
    stalled: BTreeMap<FrameworkId, stall::Stalled>,
    /// Resource names a quota may name though no agent offers them yet: the standard ones and
    /// the declared `known_resources` (`quota.rs`).
    known_resources: std::collections::BTreeSet<String>,
    /// Gangs launched together, until every member has ended (`gangs.rs`).
    gangs: gangs::GangBook,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("agents", &self.agents.len())
            .field("frameworks", &self.frameworks.len())
            .field("tasks", &self.tasks.len())
            .field("offers", &self.offers.len())
            .finish()
    }
}

impl State {
    /// Empty books with the config's timing and initial role tree; random ids.
    pub fn new(config: &Settings) -> Self {
        Self::with_ids(config, IdSource::random())
    }

    /// Empty books whose new ids come from `ids` (tests pass
    /// [`IdSource::sequential`] to know them in advance).
    pub fn with_ids(config: &Settings, ids: IdSource) -> Self {
        let mut allocator = Allocator::new(Policy::Hdrf);
        allocator.set_max_kinds(config.max_resource_kinds);
        allocator.set_gpu_gating(config.gpu_gating);
        for (role, weight) in &config.roles {
            allocator.set_role_weight(role, *weight);
        }
        Self {
            timing: Timing {
                allocation_interval_ms: ms(config.allocation_interval),
                offer_timeout_ms: ms(config.offer_timeout),
                agent_heartbeat_interval_ms: ms(config.agent_heartbeat_interval),
                max_missed_heartbeats: u64::from(config.max_missed_heartbeats),
                framework_heartbeat_interval_ms: ms(config.framework_heartbeat_interval),
                default_failover_timeout_ms: ms(config.default_failover_timeout),
                default_refuse_ms: ms(config.default_refuse_seconds),
                update_resend_interval_ms: ms(config.update_resend_interval),
                // Validated >= 1; the floor keeps a bad value from forgetting everything.
                max_completed_tasks_per_framework: config.max_completed_tasks_per_framework.max(1),
                max_frameworks: config.max_frameworks,
                max_roles: config.max_roles,
                max_failover_timeout_ms: ms(config.max_failover_timeout),
                max_placeholder_frameworks: config.max_placeholder_frameworks,
                max_stream_queue: config.max_stream_queue,
                lost_agent_retention_ms: ms(config.lost_agent_retention),
                max_pending_updates_per_framework: config.max_pending_updates_per_framework.max(1),
                stall_after_ms: ms(config.stall_after),
            },
            ledger: Ledger::new(allocator),
            ids,
            agents: AgentBook::default(),
            frameworks: FrameworkBook::new(config.max_removed_frameworks),
            tasks: TaskBook::default(),
            offers: OfferBook::default(),
            freed_at: HashMap::new(),
            offer_waits: Vec::new(),
            tasks_per_offer: admission::TasksPerOffer::default(),
            drain_kills: 0,
            preempt: preempt::Preemption::new(config.preemption_grace),
            fences: 0,
            stalled: BTreeMap::new(),
            known_resources: settings::STANDARD_RESOURCES
                .iter()
                .map(|n| (*n).to_owned())
                .chain(config.known_resources.iter().map(|n| n.as_str().to_owned()))
                .collect(),
            gangs: gangs::GangBook::default(),
        }
    }

    /// Sets a role's weight (creating it); runs an allocation soon.
    pub fn set_role_weight(
        &mut self,
        role: &RolePath,
        weight: protocol::Weight,
        fx: &mut Effects,
    ) -> Result<(), StateError> {
        let change = self.plan_role_weight(role, weight)?;
        self.apply_role_weight(role, weight, fx);
        fx.push(Effect::Persist(change));
        Ok(())
    }

    /// The registry change that setting a role's weight writes, if it may be set; changes
    /// nothing.
    pub fn plan_role_weight(
        &self,
        role: &RolePath,
        weight: protocol::Weight,
    ) -> Result<crate::records::Change, StateError> {
        if role.as_str().starts_with('_') {
            return Err(StateError::ReservedRole);
        }
        self.ledger.check_roles(role, self.timing.max_roles)?;
        Ok(crate::records::Change::SetWeight(role.clone(), weight))
    }

    /// Sets a role's weight checked by [`State::plan_role_weight`] (creating the role) without
    /// queuing a registry change: the caller wrote it already. Not checked again: roles are
    /// created by registrations and weights, which the runtime runs one at a time, and by the
    /// one placeholder role, so `max_roles` can be passed by that one at most.
    pub fn apply_role_weight(
        &mut self,
        role: &RolePath,
        weight: protocol::Weight,
        fx: &mut Effects,
    ) {
        self.ledger.set_role_weight(role, weight);
        fx.push(Effect::Allocate);
    }

    /// Puts back what the durable registry kept (call once, on empty books, before serving):
    /// run-time role weights, removed framework ids, and every stored framework, disconnected in
    /// its role with its failover timeout starting `now`. Agents and their tasks come back by
    /// re-registering; their tasks are then accounted under these frameworks. Stored agents
    /// are awaited from `now`: one that does not re-register within the agent timeout is
    /// reported lost ([`State::check_agents`]).
    pub fn restore(&mut self, snapshot: crate::records::Snapshot, now: &Now) {
        for agent in snapshot.agents {
            self.agents.await_stored(agent, now.ms);
        }
        for (role, weight) in &snapshot.weights {
            self.ledger.set_role_weight(role, *weight);
        }
        for (role, quota) in &snapshot.quotas {
            self.ledger.set_role_quota(role, quota);
        }
        for (agent, role, res) in snapshot.reservations {
            self.agents.set_dynamic(agent, &role, &res);
        }
        for id in snapshot.removed_frameworks.iter().copied() {
            self.frameworks.remember_removed(id);
        }
        for fw in snapshot.frameworks {
            if fw.role.as_str().starts_with('_') || self.frameworks.was_removed(fw.id) {
                tracing::warn!(framework = %fw.id, role = %fw.role, "not restoring framework");
                continue;
            }
            let failover_timeout_s = fw
                .failover_timeout_s
                .min(self.timing.max_failover_timeout_ms as f64 / 1000.0);
            let record =
                FrameworkRecord::new(fw.name, fw.role, failover_timeout_s, None, false, now);
            self.add_framework_record(fw.id, record);
            if let Some(record) = self.frameworks.get_mut(fw.id) {
                record.registered_at = fw.registered_at;
                record.owner = fw.owner.map(Arc::from);
                record.gpu_resources = fw.gpu_resources;
                record.partition_timeout_s = fw.partition_timeout_s;
                // It was registered before: the full failover timeout applies, no grace.
                record.connection = Connection::Disconnected {
                    since_ms: now.ms,
                    ever: true,
                };
            }
            if fw.gpu_resources {
                self.ledger.set_gpu_capable(fw.id, true);
            }
        }
    }

    /// Notes that resources of `agent` returned to the pool at `now_ms` (a task ended, an offer
    /// was declined or expired, an accept left some unused).
    pub(crate) fn freed(&mut self, agent: AgentId, now_ms: u64) {
        self.freed_at.entry(agent).or_insert(now_ms);
    }

    /// How long, in milliseconds, the resources of each offer the last allocation run made had
    /// waited since they returned to the pool (offers of resources that were not just freed
    /// are not counted). Freed resources that run did not offer (no framework could take
    /// them) are dropped from the count: their wait is the frameworks', not the coordinator's.
    pub fn take_offer_waits(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.offer_waits)
    }

    /// How many times the books were found to disagree (each a bug, logged when found; see
    /// [`LedgerError`]). Zero in a healthy coordinator.
    pub fn ledger_mismatches(&self) -> u64 {
        self.ledger.mismatches()
    }

    /// Heartbeat interval told to frameworks, in seconds.
    pub fn framework_heartbeat_s(&self) -> f64 {
        self.timing.framework_heartbeat_interval_ms as f64 / 1000.0
    }

    /// Heartbeat interval told to agents, in seconds.
    pub fn agent_heartbeat_s(&self) -> f64 {
        self.timing.agent_heartbeat_interval_ms as f64 / 1000.0
    }

    /// How long an agent may miss heartbeats before it is lost, in ms.
    pub(crate) fn agent_timeout_ms(&self) -> u64 {
        self.timing
            .agent_heartbeat_interval_ms
            .saturating_mul(self.timing.max_missed_heartbeats)
    }

    /// How long an agent may miss heartbeats before it is lost, in seconds (told to agents
    /// when they register, so they fence their tasks in time: see [`protocol::partition`]).
    pub fn agent_timeout_s(&self) -> f64 {
        self.agent_timeout_ms() as f64 / 1000.0
    }

    /// A decline filter's length in ms: the default when none is given; else at least one
    /// allocation interval (as in Mesos, so a filter outlives the next cycle), or 0 for none.
    pub(crate) fn refuse_ms(&self, refuse: Option<std::time::Duration>) -> u64 {
        let ms = refuse.map_or(self.timing.default_refuse_ms, ms);
        if ms == 0 {
            0
        } else {
            ms.max(self.timing.allocation_interval_ms)
        }
    }

    /// Records an update for the framework: pending until acknowledged, sent now.
    pub(crate) fn send_update(&mut self, status: TaskStatus, now: &Now, fx: &mut Effects) {
        let fw_id = status.framework_id;
        let Some(fw) = self.frameworks.get_mut(fw_id) else {
            return;
        };
        fw.pending.record(
            status.clone(),
            now.ms,
            self.timing.update_resend_interval_ms,
        );
        // A framework that never acknowledges cannot make its pending updates grow without
        // bound: past the cap the oldest is dropped (the framework can still reconcile), and a
        // terminal task left with nothing pending is completed as if acknowledged.
        let mut dropped = Vec::new();
        while fw.pending.len() > self.timing.max_pending_updates_per_framework {
            let Some(oldest) = fw.pending.oldest() else {
                break;
            };
            if let Some(task) = fw.pending.remove(&oldest) {
                dropped.push(task);
            }
        }
        if !dropped.is_empty() {
            tracing::warn!(framework = %fw_id, dropped = dropped.len(), "unacknowledged updates past max_pending_updates_per_framework: oldest dropped");
        }
        for task in &dropped {
            self.complete_if_done(fw_id, task);
        }
        fx.push(Effect::ToFramework(
            fw_id,
            FrameworkEvent::Update { status },
        ));
    }
}
