//! [`StateError`]: why the books refused an operation, in their own terms. The API layer
//! maps each variant to an HTTP status and a stable error code (the coordinator's `api::error`);
//! messages say how to fix the request. Malformed requests are refused before they get here.

use protocol::{AgentId, FrameworkId, OfferId, Resources, TaskId, UpdateId};

/// Why the books refused an operation. A refused operation changed nothing.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StateError {
    /// No framework with this id is registered.
    #[error("unknown framework {0}: register with POST /api/v1/frameworks")]
    UnknownFramework(FrameworkId),
    /// The framework was removed (deleted, or its failover timeout passed).
    #[error("framework {0} was removed; register again without a framework_id")]
    FrameworkRemoved(FrameworkId),
    /// No active agent with this id.
    #[error("unknown agent {0}: register (again) with POST /api/v1/agents")]
    UnknownAgent(AgentId),
    /// The offer id was never issued (or is too old to remember).
    #[error("unknown offer {0}")]
    UnknownOffer(OfferId),
    /// The offer was already accepted, declined, rescinded or expired.
    #[error("offer {offer} is no longer outstanding: it was {how}; wait for a new offer")]
    OfferGone {
        /// The offer.
        offer: OfferId,
        /// How it ended (`accepted`, `declined`, `rescinded`, `expired`).
        how: &'static str,
    },
    /// The offer belongs to another framework.
    #[error("offer {0} was made to another framework")]
    OfferNotYours(OfferId),
    /// The request names no offers.
    #[error("offer_ids is empty: name at least one outstanding offer")]
    NoOffers,
    /// The same offer is named twice.
    #[error("offer {0} is named twice in offer_ids")]
    DuplicateOffer(OfferId),
    /// An accept names offers of several agents.
    #[error("offers {0} and {1} are for different agents; accept offers of one agent at a time")]
    OffersOnSeveralAgents(OfferId, OfferId),
    /// A task names another agent than the offers'.
    #[error("task {task}: agent_id {given} does not match the offers' agent {expected}")]
    TaskAgentMismatch {
        /// The task.
        task: TaskId,
        /// Its agent_id.
        given: AgentId,
        /// The offers' agent.
        expected: AgentId,
    },
    /// A task asks for isolation its agent cannot give (see `protocol::isolation`).
    #[error("task {task}: {reason}")]
    IsolationUnavailable {
        /// The task.
        task: TaskId,
        /// What it asked for and what the agent lacks, naming the field.
        reason: String,
    },
    /// A task id appears twice in one accept.
    #[error("task {0} appears twice in tasks; task ids must be unique")]
    DuplicateTaskInRequest(TaskId),
    /// A gang of this id is running in the framework.
    #[error("gang {0:?} is already running in this framework; choose a new gang_id")]
    GangExists(String),
    /// A task with this id already exists in the framework.
    #[error("task {0} already exists in this framework; choose a new task_id")]
    TaskExists(TaskId),
    /// The tasks need more than the offers hold.
    #[error(
        "the tasks need {needed} but the offers hold {offered}; launch fewer or smaller tasks"
    )]
    InsufficientResources {
        /// The sum of the tasks' resources.
        needed: Resources,
        /// The sum of the offers.
        offered: Resources,
    },
    /// A task fits in no single pool of the accepted offers (reserved and unreserved
    /// resources are booked separately: each task draws from one pool).
    #[error("task {0} fits in none of the accepted offers' pools on its own (reserved and unreserved offers are separate pools; each task draws from one)")]
    TaskSpansPools(TaskId),
    /// A reservation (static or dynamic) is refused; nothing was changed.
    #[error("invalid {field}: {reason}")]
    InvalidReservation {
        /// The request field at fault (`reservations[0].role`, `resources.cpus`, ...).
        field: String,
        /// Why.
        reason: String,
    },
    /// No task with this id in the framework.
    #[error("unknown task {0} in this framework")]
    UnknownTask(TaskId),
    /// An operator asked to kill a task that has already ended: there is nothing to kill.
    #[error("task {task} has already ended ({state}): there is nothing to kill")]
    TaskTerminal {
        /// The task.
        task: TaskId,
        /// The terminal state it is in.
        state: protocol::TaskState,
    },
    /// No task with this id is known yet, but agents known before the coordinator's restart or
    /// failover have still to re-register, and the task may run on one of them: its state is
    /// not known either way. Asking again once they are back (or reported lost) answers.
    #[error(
        "task {task} is not known yet: {awaited} agent(s) known before the coordinator's \
         restart or failover have not re-registered, and it may run on one of them; ask again \
         later"
    )]
    TaskNotYetKnown {
        /// The task asked about.
        task: TaskId,
        /// How many agents are still awaited.
        awaited: usize,
    },
    /// No update with this id for the task.
    #[error("task {task} has no update {update}")]
    UnknownUpdate {
        /// The task.
        task: TaskId,
        /// The update id given.
        update: UpdateId,
    },
    /// A status names another agent than the one posting it, or a task runs elsewhere.
    #[error("status of task {task} names agent {given}, but {reason}")]
    AgentMismatch {
        /// The task.
        task: TaskId,
        /// The agent_id in the status.
        given: AgentId,
        /// What was expected.
        reason: String,
    },
    /// A known agent id registered again without the API token it first registered with.
    #[error(
        "agent {0} is registered with another api_token; only that agent may register it again"
    )]
    AgentTokenMismatch(AgentId),
    /// A role's quota is refused; nothing was changed.
    #[error("invalid {field}: {reason}")]
    InvalidQuota {
        /// The request field at fault (`guarantee.cpus`, `limit.mem`, ...).
        field: String,
        /// Why.
        reason: String,
    },
    /// Roles starting with `_` belong to the coordinator (e.g. the orphans' role).
    #[error("invalid role: roles starting with '_' are reserved")]
    ReservedRole,
    /// The resources name kinds the cluster does not use yet, and it already uses as many as
    /// `max_resource_kinds` allows.
    #[error("too many distinct resource names: the cluster uses {known} of at most {max}; use resource names already in use")]
    TooManyResourceKinds {
        /// Kinds in use.
        known: usize,
        /// The cap (`max_resource_kinds`).
        max: usize,
    },
    /// The books hold `max_frameworks` frameworks already.
    #[error("too many frameworks: at most {0} may be registered; remove unused ones (DELETE /api/v1/frameworks/{{id}})")]
    TooManyFrameworks(usize),
    /// The role tree holds `max_roles` roles already and the request would add more.
    #[error("too many roles: at most {0} roles (every prefix of a role path counts); use an existing role")]
    TooManyRoles(usize),
    /// A `reconcile` names more task ids than one stream may queue.
    #[error("reconcile names {given} task ids; at most {max} at a time")]
    TooManyTaskIds {
        /// Distinct ids given.
        given: usize,
        /// The cap (`max_stream_queue`).
        max: usize,
    },
}
