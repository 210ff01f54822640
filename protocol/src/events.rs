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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
    /// An agent where the framework has tasks is being drained: it makes no more
    /// offers, and the tasks still running at the deadline are killed.
    AgentDraining(crate::maintenance::AgentDraining),
    /// Some of the framework's tasks are taken back for a starved role: those still
    /// running at the deadline are killed.
    Preemption(crate::preempt::Preemption),
    /// A member of a gang launched together ended while others ran: the others are killed.
    GangFailed(crate::gang::GangFailed),
}

/// An event on the operator offer stream (`GET /api/v1/offers/events`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
    /// An agent is being drained: one event per framework with tasks there.
    AgentDraining(crate::maintenance::AgentDraining),
    /// Tasks of a framework are taken back for a starved role.
    Preemption(crate::preempt::Preemption),
}

/// How an offer ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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

/// Splits serde_json's compact form of an adjacently tagged value, `{"event":"NAME","data":DATA}`
/// (or `{"event":"NAME"}` for a variant without content), into `NAME` and `DATA`. serde writes the
/// tag first and the content second, and event names are snake_case identifiers (no escapes).
fn split_adjacent(json: &str) -> Option<(&str, &str)> {
    let rest = json.strip_prefix("{\"event\":\"")?;
    let end = rest.find('"')?;
    let (name, after) = (&rest[..end], &rest[end + 1..]);
    let data = match after.strip_prefix(",\"data\":") {
        Some(data) => data.strip_suffix('}')?,
        None if after == "}" => "{}",
        None => return None,
    };
    Some((name, data))
}

/// An SSE frame read as the adjacently tagged value `{"event": EVENT, "data": DATA}` without
/// building that text: the tag is handed over as a string and `data` is parsed once, straight
/// into the variant (every event of every stream goes through here).
struct Envelope<'a> {
    event: Option<&'a str>,
    data: Option<&'a str>,
}

impl<'de> serde::de::MapAccess<'de> for Envelope<'de> {
    type Error = serde_json::Error;

    fn next_key_seed<K: serde::de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Self::Error> {
        use serde::de::value::BorrowedStrDeserializer;
        let key = match (self.event, self.data) {
            (Some(_), _) => "event",
            (None, Some(_)) => "data",
            (None, None) => return Ok(None),
        };
        seed.deserialize(BorrowedStrDeserializer::new(key))
            .map(Some)
    }

    fn next_value_seed<V: serde::de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, Self::Error> {
        use serde::de::value::BorrowedStrDeserializer;
        use serde::de::Error as _;
        if let Some(event) = self.event.take() {
            return seed.deserialize(BorrowedStrDeserializer::new(event));
        }
        let data = self
            .data
            .take()
            .ok_or_else(|| serde_json::Error::custom("a value without a key"))?;
        let mut de = serde_json::Deserializer::from_str(data);
        let value = seed.deserialize(&mut de)?;
        // Exactly one JSON value: nothing may follow it.
        de.end()?;
        Ok(value)
    }
}

impl<'de> serde::Deserializer<'de> for Envelope<'de> {
    type Error = serde_json::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(
        self,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_map(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier
        ignored_any
    }
}

macro_rules! sse_helpers {
    ($ty:ty) => {
        impl $ty {
            /// The SSE `event:` name and `data:` payload (one line of JSON) of this value, from
            /// one serialization (the hot path of every event stream).
            pub fn sse_parts(&self) -> (String, String) {
                let json = serde_json::to_string(self).unwrap_or_default();
                match split_adjacent(&json) {
                    Some((name, data)) => (name.to_owned(), data.to_owned()),
                    None => (String::new(), "{}".to_owned()),
                }
            }

            /// The SSE `event:` name.
            pub fn name(&self) -> String {
                self.sse_parts().0
            }

            /// The SSE `data:` payload, as one line of JSON.
            pub fn data_json(&self) -> String {
                self.sse_parts().1
            }

            /// Parses an SSE frame back into an event. `data` must be exactly one JSON value.
            pub fn from_sse(event: &str, data: &str) -> Result<Self, serde_json::Error> {
                serde::Deserialize::deserialize(Envelope {
                    event: Some(event),
                    data: Some(data),
                })
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
                limits: None,
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

    /// The name and data as the serde_json `Value` of the whole event has them (how they were
    /// computed before the one-serialization split).
    fn reference_parts<T: Serialize>(ev: &T) -> (String, String) {
        let serde_json::Value::Object(mut map) = serde_json::to_value(ev).unwrap() else {
            panic!("an adjacently tagged enum serializes to an object")
        };
        let name = map["event"].as_str().unwrap().to_owned();
        let data = map
            .remove("data")
            .unwrap_or(serde_json::Value::Object(Default::default()))
            .to_string();
        (name, data)
    }

    #[test]
    fn sse_parts_equal_the_value_based_split_for_every_shape() {
        let status: TaskStatus = serde_json::from_value(serde_json::json!({
            "task_id": "t-1", "framework_id": FrameworkId::new(),
            "agent_id": AgentId::new(), "state": "running", "update_id": crate::UpdateId::new(),
            "timestamp": "2026-11-23T21:30:00Z", "message": "a } and a \"data\":",
            "gpu_devices": ["GPU-0"], "healthy": true
        }))
        .unwrap();
        let events = [
            FrameworkEvent::Update { status },
            FrameworkEvent::Offers { offers: vec![] },
            FrameworkEvent::Heartbeat {},
            FrameworkEvent::Error {
                message: "{\"event\":\"x\"}".into(),
            },
        ];
        for ev in &events {
            let (name, data) = ev.sse_parts();
            let (ref_name, ref_data) = reference_parts(ev);
            assert_eq!(name, ref_name);
            // The same JSON value (the `Value` form sorts keys; the direct form keeps the
            // struct's field order).
            let as_value = |s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap();
            assert_eq!(as_value(&data), as_value(&ref_data), "{ev:?}");
            assert!(!data.contains('\n'), "one SSE data line");
            assert_eq!(&FrameworkEvent::from_sse(&name, &data).unwrap(), ev);
        }
    }

    #[test]
    fn from_sse_takes_exactly_one_json_value_as_data() {
        // Data that would add a second tag to the envelope, or trail after the value.
        assert!(FrameworkEvent::from_sse("heartbeat", "{}, \"event\":\"error\"").is_err());
        assert!(FrameworkEvent::from_sse("heartbeat", "{} {}").is_err());
        assert!(FrameworkEvent::from_sse("heartbeat", "").is_err());
        // An event name with a quote is escaped, not spliced.
        assert!(FrameworkEvent::from_sse("heartbeat\",\"x\":\"", "{}").is_err());
        assert_eq!(
            FrameworkEvent::from_sse("heartbeat", " {} ").unwrap(),
            FrameworkEvent::Heartbeat {}
        );
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
