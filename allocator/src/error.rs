//! The allocator's error type and the reasons a framework can be passed over.

use protocol::{AgentId, FrameworkId, Resources};

/// Why an allocator call was refused. A refused call changes nothing.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AllocatorError {
    /// No framework with this id is registered.
    #[error("unknown framework {0}")]
    UnknownFramework(FrameworkId),
    /// A framework with this id is already registered.
    #[error("framework {0} is already registered")]
    DuplicateFramework(FrameworkId),
    /// No agent with this id is registered.
    #[error("unknown agent {0}")]
    UnknownAgent(AgentId),
    /// An agent with this id is already registered.
    #[error("agent {0} is already registered")]
    DuplicateAgent(AgentId),
    /// The resources asked for do not fit in the agent's free resources.
    #[error("cannot allocate {requested} on agent {agent}: only {free} is free")]
    Overcommit {
        /// The agent.
        agent: AgentId,
        /// What was asked for.
        requested: Resources,
        /// What the agent has free.
        free: Resources,
    },
    /// More was released than the framework holds on the agent.
    #[error("framework {framework} cannot release {requested} on agent {agent}: it holds only {allocated}")]
    ReleaseMoreThanAllocated {
        /// The framework.
        framework: FrameworkId,
        /// The agent.
        agent: AgentId,
        /// What was to be released.
        requested: Resources,
        /// What the framework holds there.
        allocated: Resources,
    },
    /// The resources name kinds no one has used yet, and the allocator already knows as many
    /// kinds as its cap allows (nothing was changed).
    #[error("too many distinct resource names: the cluster knows {known} of at most {max}; use resource names already in use")]
    TooManyKinds {
        /// Kinds known now.
        known: usize,
        /// The cap.
        max: usize,
    },
    /// A role's limit is below its guarantee in this resource (nothing was changed).
    #[error("limit.{0} is below guarantee.{0}: a role's limit must be at least its guarantee")]
    LimitBelowGuarantee(String),
    /// A reservation would shrink below what its pool's frameworks hold (nothing was changed).
    #[error("agent {agent}'s reservation for role {role} cannot go below what is offered or used of it ({held})")]
    ReservationHeld {
        /// The agent.
        agent: AgentId,
        /// The reserved role.
        role: String,
        /// What the pool's frameworks hold.
        held: Resources,
    },
    /// A reservation does not fit in the agent's unreserved free resources (nothing was changed).
    #[error("agent {agent} cannot reserve that for role {role}: only {unreserved} is free and unreserved")]
    ReservationDoesNotFit {
        /// The agent.
        agent: AgentId,
        /// The reserved role.
        role: String,
        /// What is free and unreserved there.
        unreserved: Resources,
    },
    /// The agent has no reservation for the role.
    #[error("agent {agent} has no reservation for role {role}")]
    NoReservation {
        /// The agent.
        agent: AgentId,
        /// The role named.
        role: String,
    },
    /// The framework is not in the subtree of the role the resources are reserved for.
    #[error("framework {framework} is outside role {role}, which the resources are reserved for")]
    OutsideReservation {
        /// The framework.
        framework: FrameworkId,
        /// The reserved role.
        role: String,
    },
}

/// Why a framework would not be chosen for an agent (the answer to "why was I not offered?").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockReason {
    /// The framework is not registered.
    UnknownFramework,
    /// The agent is not registered.
    UnknownAgent,
    /// The framework is not subscribed (its event stream is not connected).
    Inactive,
    /// The framework suppressed offers; it is blocked until it revives.
    Suppressed,
    /// The framework's outstanding offers already hold every task it said it still wants
    /// (`pending_tasks`); it is offered more once it answers them or wants more.
    Sated,
    /// The agent has nothing free to offer.
    NothingFree,
    /// The framework declined this agent's resources and its filter still covers what is free.
    Filtered {
        /// The filter lasts while `now < until`.
        until: u64,
    },
    /// The framework's demand hint does not fit in the agent's free resources.
    DemandDoesNotFit,
    /// GPU gating: the agent has GPUs and the framework did not declare `gpu_resources`.
    GpuGated,
    /// A limit on `role` (the framework's role or an ancestor) has no headroom left in a kind
    /// the agent offers.
    LimitReached {
        /// The role path whose limit holds the framework back.
        role: String,
    },
    /// Another role below its guarantee takes these resources first.
    GuaranteeFirst {
        /// The role path whose unmet guarantee comes first.
        role: String,
    },
    /// Everything free on the agent is reserved for roles the framework is not in.
    ReservedFor {
        /// The first such role.
        role: String,
    },
}

impl std::fmt::Display for BlockReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UnknownFramework => f.write_str("the framework is not registered"),
            Self::UnknownAgent => f.write_str("the agent is not registered"),
            Self::Inactive => f.write_str("the framework is not subscribed"),
            Self::Suppressed => f.write_str("the framework suppressed offers (revive to resume)"),
            Self::Sated => f.write_str(
                "the framework's outstanding offers already hold the tasks it said it wants",
            ),
            Self::NothingFree => f.write_str("the agent has no free resources"),
            Self::Filtered { until } => {
                write!(
                    f,
                    "the framework declined this agent's resources (filter until {until})"
                )
            }
            Self::DemandDoesNotFit => f.write_str(
                "the framework's demand hint does not fit in the agent's free resources",
            ),
            Self::GpuGated => f.write_str(
                "the agent has GPUs and the framework did not declare the gpu_resources capability",
            ),
            Self::LimitReached { role } => write!(
                f,
                "role {role} is at its limit (allocation plus outstanding offers) in a resource this agent offers"
            ),
            Self::ReservedFor { role } => write!(
                f,
                "the agent's free resources are reserved for role {role}"
            ),
            Self::GuaranteeFirst { role } => write!(
                f,
                "role {role} is below its guarantee and is served first"
            ),
        }
    }
}
