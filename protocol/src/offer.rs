//! [`Offer`]: one agent's free resources, offered to one framework.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{AgentId, FrameworkId, OfferId, Resources, Timestamp};

/// An offer as sent to a framework and listed to operators.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Offer {
    /// Usable by one accept or decline.
    pub offer_id: OfferId,
    /// The framework it is for.
    pub framework_id: FrameworkId,
    /// The agent whose resources these are.
    pub agent_id: AgentId,
    /// The agent's hostname.
    pub hostname: String,
    /// What is offered.
    pub resources: Resources,
    /// The agent's whole capacity (packing policies normalise by it).
    pub agent_total: Resources,
    /// The agent's attributes, e.g. `{"rack": "r1"}`.
    #[serde(default)]
    pub attributes: BTreeMap<String, String>,
    /// When it was made.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub created_at: Timestamp,
    /// When it is rescinded if still unanswered.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub expires_at: Timestamp,
    /// Set when the resources come from a pool reserved for a role; absent for
    /// unreserved resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<crate::reservation::OfferReservation>,
}
