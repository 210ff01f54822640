//! Server-sent event payloads: the framework stream and the operator offer stream.
//!
//! Both enums are adjacently tagged (`{"event": ..., "data": ...}`), so one value maps onto one
//! SSE frame: [`FrameworkEvent::name`] is the `event:` line and [`FrameworkEvent::data_json`] the
//! `data:` line; [`FrameworkEvent::from_sse`] parses them back.

use serde::{Deserialize, Serialize};

use crate::messages::FrameworkRegistered;
use crate::{AgentId, FrameworkId, Offer, OfferId, TaskStatus};

/// An event on a framework's stream (`GET /api/v1/frameworks/{id}/events`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", content = "data", rename_all = "snake_case")]
// A status (with its usage and GPUs) makes `Update` the large variant; events are built one at
// a time and serialized at once, so boxing it would only cost an allocation per update.
#[allow(clippy::large_enum_variant)]
pub enum FrameworkEvent {
    /// First event of every stream.
    Subscribed(FrameworkRegistered),
    /// New offers.
    Offers {
        /// The offers.
        offers: Vec<Offer>,
    },
    /// An offer is withdrawn (expired, agent lost, framework removed).
    Rescind {
        /// The offer.
        offer_id: OfferId,
    },
    /// A task changed state; sent again until acknowledged.
    Update {
        /// The new status.
        status: TaskStatus,
    },
    /// Sent every heartbeat interval.
    Heartbeat {},
    /// The framework was removed; the stream ends.
    Error {
        /// Why.
        message: String,
    },
    /// An agent where the framework has tasks is being drained (issue #17): it makes no more
    /// offers, and the tasks still running at the deadline are killed.
    AgentDraining(crate::maintenance::AgentDraining),
    /// Some of the framework's tasks are taken back for a starved role (issue #17): those still
    /// running at the deadline are killed.
    Preemption(crate::preempt::Preemption),
}

/// An event on the operator offer stream (`GET /api/v1/offers/events`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", content = "data", rename_all = "snake_case")]
pub enum OfferEvent {
    /// An offer was made.
    OfferCreated(Offer),
    /// An offer was used by an accept.
    OfferAccepted(OfferOutcome),
    /// An offer was declined.
    OfferDeclined(OfferOutcome),
    /// An offer was rescinded by the coordinator.
    OfferRescinded(OfferOutcome),
    /// An offer expired unanswered.
    OfferExpired(OfferOutcome),
    /// An agent is being drained: one event per framework with tasks there (issue #17).
    AgentDraining(crate::maintenance::AgentDraining),
    /// Tasks of a framework are taken back for a starved role (issue #17).
    Preemption(crate::preempt::Preemption),
}

/// How an offer ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OfferOutcome {
    /// The offer.
    pub offer_id: OfferId,
    /// Its framework.
    pub framework_id: FrameworkId,
    /// Its agent.
    pub agent_id: AgentId,
    /// For accepts: the tasks launched from it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<crate::TaskId>,
    /// For rescinds: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

macro_rules! sse_helpers {
    ($ty:ty) => {
        impl $ty {
            /// The SSE `event:` name.
            pub fn name(&self) -> String {
                match serde_json::to_value(self) {
                    Ok(serde_json::Value::Object(map)) => map
                        .get("event")
                        .and_then(|e| e.as_str())
                        .unwrap_or_default()
                        .to_owned(),
                    _ => String::new(),
                }
            }

            /// The SSE `data:` payload, as one line of JSON.
            pub fn data_json(&self) -> String {
                match serde_json::to_value(self) {
                    Ok(serde_json::Value::Object(mut map)) => map
                        .remove("data")
                        .unwrap_or(serde_json::Value::Object(Default::default()))
                        .to_string(),
                    _ => "{}".to_owned(),
                }
            }

            /// Parses an SSE frame back into an event.
            pub fn from_sse(event: &str, data: &str) -> Result<Self, serde_json::Error> {
                let data: serde_json::Value = serde_json::from_str(data)?;
                serde_json::from_value(serde_json::json!({ "event": event, "data": data }))
            }
        }
    };
}

sse_helpers!(FrameworkEvent);
sse_helpers!(OfferEvent);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framework_events_round_trip_through_sse_parts() {
        let events = [
            FrameworkEvent::Subscribed(FrameworkRegistered {
                framework_id: FrameworkId::new(),
                heartbeat_interval_s: 15.0,
            }),
            FrameworkEvent::Rescind {
                offer_id: OfferId::new(),
            },
            FrameworkEvent::Heartbeat {},
            FrameworkEvent::Error {
                message: "removed".into(),
            },
        ];
        for ev in events {
            let back = FrameworkEvent::from_sse(&ev.name(), &ev.data_json()).unwrap();
            assert_eq!(back, ev);
        }
        assert_eq!(FrameworkEvent::Heartbeat {}.name(), "heartbeat");
        assert_eq!(FrameworkEvent::Heartbeat {}.data_json(), "{}");
        assert!(FrameworkEvent::from_sse("nonsense", "{}").is_err());
        assert!(FrameworkEvent::from_sse("heartbeat", "{not json").is_err());
    }

    #[test]
    fn offer_event_names() {
        let outcome = OfferOutcome {
            offer_id: OfferId::new(),
            framework_id: FrameworkId::new(),
            agent_id: AgentId::new(),
            tasks: vec![],
            reason: Some("expired".into()),
        };
        let ev = OfferEvent::OfferExpired(outcome);
        assert_eq!(ev.name(), "offer_expired");
        assert!(ev.data_json().contains("\"reason\":\"expired\""));
        assert_eq!(
            OfferEvent::from_sse(&ev.name(), &ev.data_json()).unwrap(),
            ev
        );
    }
}
