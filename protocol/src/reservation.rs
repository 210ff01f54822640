//! Reservations: part of an agent's resources set aside for one role's subtree.
//!
//! - *Static*: the agent's `--reserve ROLE:cpus=4,mem=8192` flag, sent in its registration
//!   ([`crate::messages::RegisterAgent::reservations`]).
//! - *Dynamic*: a framework reserves part of an offer it holds for its own role
//!   (`POST /api/v1/frameworks/{id}/reserve`, [`ReserveRequest`]) and unreserves resources of
//!   an offer drawn from its role's reserved pool (`.../unreserve`).
//!
//! Offers drawn from a reserved pool carry [`OfferReservation`] in
//! [`crate::Offer::reservation`]; unreserved offers carry nothing (as before).

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{OfferId, Resources, RolePath};

/// Resources reserved for a role (a static reservation as the agent sends it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Reservation {
    /// The role whose subtree the resources are offered to.
    pub role: RolePath,
    /// What is reserved.
    pub resources: Resources,
}

/// Why a `ROLE:resources` flag value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReservationParseError {
    /// No `:` between the role and the resources.
    #[error("expected ROLE:RESOURCES (e.g. eng:cpus=4,mem=8192), got {0:?}")]
    Shape(String),
    /// The role is not a valid role path.
    #[error("role: {0}")]
    Role(String),
    /// The resources do not parse.
    #[error("resources: {0}")]
    Resources(String),
    /// Nothing is reserved.
    #[error("resources: a reservation must reserve something")]
    Empty,
}

impl FromStr for Reservation {
    type Err = ReservationParseError;

    /// Parses `ROLE:cpus=4,mem=8192`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (role, res) = s
            .split_once(':')
            .ok_or_else(|| ReservationParseError::Shape(s.to_owned()))?;
        let role =
            RolePath::new(role.trim()).map_err(|e| ReservationParseError::Role(e.to_string()))?;
        let resources: Resources = res
            .trim()
            .parse()
            .map_err(|e: crate::ResourceError| ReservationParseError::Resources(e.to_string()))?;
        if resources.is_empty() {
            return Err(ReservationParseError::Empty);
        }
        Ok(Self { role, resources })
    }
}

/// The mark on an offer drawn from a reserved pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OfferReservation {
    /// The role the offered resources are reserved for.
    pub role: RolePath,
}

/// Body of `POST /api/v1/frameworks/{id}/reserve` and `.../unreserve`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ReserveRequest {
    /// An outstanding offer of the framework (consumed by the operation).
    pub offer_id: OfferId,
    /// What to reserve (of the offer's unreserved resources) or unreserve (of its reserved
    /// ones); at most what the offer holds.
    pub resources: Resources,
}

/// Answer to a reserve or unreserve.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReserveResponse {
    /// The role.
    pub role: RolePath,
    /// The agent's dynamic reservation for the role afterwards.
    pub reserved: Resources,
}

/// Whether a reservation came from the agent's flag or from frameworks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ReservationKind {
    /// The agent's `--reserve` flag.
    Static,
    /// Reserved by frameworks (persisted in the registry).
    Dynamic,
}

/// One reservation in `GET /api/v1/agents`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentReservation {
    /// The role.
    pub role: RolePath,
    /// What is reserved.
    pub resources: Resources,
    /// Static or dynamic.
    pub kind: ReservationKind,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_flag_value_parses_and_bad_ones_name_the_part() {
        let r: Reservation = "eng/batch:cpus=4,mem=8192".parse().unwrap();
        assert_eq!(r.role.as_str(), "eng/batch");
        assert_eq!(r.resources.millis("cpus"), 4000);
        assert!(matches!(
            "cpus=4".parse::<Reservation>(),
            Err(ReservationParseError::Shape(_))
        ));
        assert!(matches!(
            "/x:cpus=4".parse::<Reservation>(),
            Err(ReservationParseError::Role(_))
        ));
        assert!(matches!(
            "a:cpus=-1".parse::<Reservation>(),
            Err(ReservationParseError::Resources(_))
        ));
        assert!(matches!(
            "a:".parse::<Reservation>(),
            Err(ReservationParseError::Empty)
        ));
    }

    #[test]
    fn an_unreserved_offer_has_no_reservation_field() {
        let o = OfferReservation {
            role: RolePath::new("a").unwrap(),
        };
        assert_eq!(
            serde_json::to_value(&o).unwrap(),
            serde_json::json!({"role": "a"})
        );
    }
}
