//! The registry's record types: the facts that outlive a coordinator restart ([`Snapshot`],
//! read once at start) and the changes to them ([`Change`], pushed by the books as
//! [`Effect::Persist`](crate::Effect::Persist)). The books only describe them; the
//! coordinator's durable registry backends (a redb file, or etcd) store them.

use protocol::{AgentId, FrameworkId, RolePath, Timestamp, Weight};
use serde::{Deserialize, Serialize};

/// A stored agent: enough to report it lost if it never comes back after a restart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredAgent {
    /// Its id.
    pub id: AgentId,
    /// Its hostname.
    pub hostname: String,
    /// Its base URL.
    pub endpoint: String,
    /// When it registered with this hostname, endpoint and drain (heartbeats, and
    /// registrations that change none of them, are not written: a write each would cost more
    /// than the figure is worth, and a fleet re-registering after a failover would queue one
    /// per agent ahead of the writes clients wait for).
    pub last_seen: Timestamp,
    /// The deadline of its drain, while an operator has it draining or drained;
    /// absent for an agent in service and in records written before drains were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_deadline: Option<Timestamp>,
}

/// A stored framework.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredFramework {
    /// Its id.
    pub id: FrameworkId,
    /// Its name.
    pub name: String,
    /// Its role.
    pub role: RolePath,
    /// Its failover timeout in seconds.
    pub failover_timeout_s: f64,
    /// When it first registered.
    pub registered_at: Timestamp,
    /// The principal that owns it (registered with credentials configured); absent in files
    /// written before authentication existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// It declared the `gpu_resources` capability; absent (false) in files written before GPU
    /// gating existed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gpu_resources: bool,
    /// Its partition timeout in seconds when it is partition-aware; absent otherwise (and in
    /// files written before partition awareness existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_timeout_s: Option<f64>,
}

/// One change to the stored facts.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A framework registered, or re-registered with a new name, role or failover timeout.
    PutFramework(StoredFramework),
    /// A framework was removed: forget its record, remember its id as removed.
    RemoveFramework(FrameworkId),
    /// A role's weight was set at run time.
    SetWeight(RolePath, Weight),
    /// A role's quota was set at run time (both parts `None`: the record is removed).
    SetQuota(RolePath, StoredQuota),
    /// Forget a framework's record without remembering its id as removed: takes back a
    /// registration that was written but could not be applied to the books (see
    /// the coordinator's write-first path).
    ForgetFramework(FrameworkId),
    /// An agent registered or re-registered.
    PutAgent(StoredAgent),
    /// An agent was forgotten (lost for longer than the retention).
    RemoveAgent(AgentId),
    /// An agent's dynamic reservation for a role was set (empty resources: removed).
    SetReservation(AgentId, RolePath, protocol::Resources),
}

/// The key of an agent's dynamic reservation for a role: `{agent id}/{role path}`.
pub fn reservation_key(agent: AgentId, role: &RolePath) -> String {
    format!("{agent}/{}", role.as_str())
}

/// `(agent, role)` of a [`reservation_key`].
pub fn parse_reservation_key(key: &str) -> Result<(AgentId, RolePath), ReservationKeyError> {
    let (agent, role) = key.split_once('/').ok_or(ReservationKeyError::Shape)?;
    let agent: AgentId = agent.parse().map_err(ReservationKeyError::Agent)?;
    let role = RolePath::new(role).map_err(ReservationKeyError::Role)?;
    Ok((agent, role))
}

/// Why a stored reservation key is not a [`reservation_key`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReservationKeyError {
    /// No `/` between the agent id and the role.
    #[error("expected AGENT_ID/ROLE")]
    Shape,
    /// The agent id is not a UUID.
    #[error("agent id: {0}")]
    Agent(uuid::Error),
    /// The role is not a role path.
    #[error("role: {0}")]
    Role(protocol::role::RoleError),
}

/// A role's quota as stored: what `PUT /api/v1/roles/{path}` last set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StoredQuota {
    /// What the role is guaranteed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guarantee: Option<protocol::Resources>,
    /// What its subtree may hold at most (allocations plus outstanding offers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<protocol::Resources>,
}

impl StoredQuota {
    /// Neither a guarantee nor a limit.
    pub fn is_empty(&self) -> bool {
        self.guarantee.is_none() && self.limit.is_none()
    }
}

/// Everything the store holds, as read at start.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// The registered frameworks, by id.
    pub frameworks: Vec<StoredFramework>,
    /// Ids of removed frameworks.
    pub removed_frameworks: Vec<FrameworkId>,
    /// Role weights set at run time.
    pub weights: Vec<(RolePath, Weight)>,
    /// The agents last known.
    pub agents: Vec<StoredAgent>,
    /// Role quotas set at run time.
    pub quotas: Vec<(RolePath, StoredQuota)>,
    /// Dynamic reservations: agent, role, what is reserved.
    pub reservations: Vec<(AgentId, RolePath, protocol::Resources)>,
}

impl Snapshot {
    /// The changes that write this snapshot into an empty registry, in the order the tables
    /// are read: frameworks, removed ids, weights, agents, quotas, reservations.
    pub fn changes(&self) -> Vec<Change> {
        let mut out = Vec::new();
        out.extend(self.frameworks.iter().cloned().map(Change::PutFramework));
        out.extend(
            self.removed_frameworks
                .iter()
                .copied()
                .map(Change::RemoveFramework),
        );
        out.extend(
            self.weights
                .iter()
                .map(|(role, w)| Change::SetWeight(role.clone(), *w)),
        );
        out.extend(self.agents.iter().cloned().map(Change::PutAgent));
        out.extend(
            self.quotas
                .iter()
                .map(|(role, q)| Change::SetQuota(role.clone(), q.clone())),
        );
        out.extend(
            self.reservations.iter().map(|(agent, role, res)| {
                Change::SetReservation(*agent, role.clone(), res.clone())
            }),
        );
        out
    }
}
