//! The schemas of answers the native API's handlers write without a Rust type of their own (the
//! dashboard's views, the history samples, `/health`), for the OpenAPI document
//! ([`super::openapi`]).

use std::collections::BTreeMap;

use protocol::messages::{AgentInfo, FrameworkInfo, TaskInfo};
use protocol::Offer;
use serde::Serialize;
use utoipa::ToSchema;

/// `GET /health`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Health {
    /// `leader`, `follower` or `standalone`.
    pub role: String,
    /// The leader's URL, when one is known.
    pub leader: Option<String>,
}

/// `GET /api/v1/dashboard/agents`.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentPage {
    /// Agents in all.
    pub total: usize,
    /// The offset asked for.
    pub offset: usize,
    /// The page.
    pub agents: Vec<AgentInfo>,
}

/// `GET /api/v1/dashboard/agents/{id}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentView {
    /// The agent.
    pub agent: AgentInfo,
    /// Its tasks in all.
    pub task_count: usize,
    /// Its tasks, the first 500.
    pub tasks: Vec<TaskInfo>,
    /// Its outstanding offers.
    pub offers: Vec<Offer>,
}

/// `GET /api/v1/dashboard/frameworks/{id}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct FrameworkView {
    /// The framework.
    pub framework: FrameworkInfo,
    /// Its tasks in all.
    pub task_count: usize,
    /// Its tasks, the first 500.
    pub tasks: Vec<TaskInfo>,
    /// Its outstanding offers.
    pub offers: Vec<Offer>,
}

/// One sample of `GET /api/v1/history` (`crate::history::Sample`).
#[derive(Debug, Serialize, ToSchema)]
pub struct HistorySample {
    /// Increases by one per sample, from 1.
    pub seq: u64,
    /// When it was taken, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// Offers created and ended since the coordinator started.
    pub offers: HistoryOffers,
    /// Outstanding offers.
    pub outstanding_offers: usize,
    /// Tasks by state name.
    pub tasks: BTreeMap<String, usize>,
    /// Agents by state.
    pub agents: BTreeMap<String, usize>,
    /// Each resource across the active agents: its total, used and offered amounts.
    #[schema(value_type = BTreeMap<String, Object>)]
    pub resources: BTreeMap<String, serde_json::Value>,
    /// Dominant share per role path (the root is `""`), the largest.
    pub roles: BTreeMap<String, f64>,
    /// Dominant share per framework id, the largest.
    pub frameworks: BTreeMap<String, f64>,
}

/// The offer counters of a [`HistorySample`] (`crate::history::OfferCounts`).
#[derive(Debug, Serialize, ToSchema)]
pub struct HistoryOffers {
    /// Offers made.
    pub created: u64,
    /// Offers accepted.
    pub accepted: u64,
    /// Offers declined.
    pub declined: u64,
    /// Offers rescinded.
    pub rescinded: u64,
    /// Offers expired unanswered.
    pub expired: u64,
}
