//! Preemption toward fair share: a task's [`Priority`] and the `preemption` event.
//!
//! When the coordinator runs with `--preemption-grace-s` and a role with demand stays below its
//! fair share (or guarantee) for the grace period, it takes tasks back from roles above theirs:
//! each victim's framework gets [`Preemption`] on its stream (and the offer stream carries it
//! too) before any kill; tasks still running at the deadline are killed with reason
//! [`crate::task::REASON_PREEMPTED`].

use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use crate::{FrameworkId, TaskId, Timestamp};

/// The lowest task priority accepted.
pub const MIN_PRIORITY: i32 = -1000;
/// The highest task priority accepted.
pub const MAX_PRIORITY: i32 = 1000;

/// A priority out of range; the message names the field (`priority`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("priority: {value} is out of range ({MIN_PRIORITY} to {MAX_PRIORITY})")]
pub struct PriorityError {
    /// The value given.
    pub value: i64,
}

/// A task's priority: higher is more important; preemption takes the lowest first. An integer
/// from [`MIN_PRIORITY`] to [`MAX_PRIORITY`]; a task without one has priority 0. Anything else
/// is refused on deserialization with a message naming `priority`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(transparent)]
pub struct Priority(i32);

impl Priority {
    /// A priority, checked against the range.
    pub fn new(value: i64) -> Result<Self, PriorityError> {
        i32::try_from(value)
            .ok()
            .filter(|v| (MIN_PRIORITY..=MAX_PRIORITY).contains(v))
            .map(Priority)
            .ok_or(PriorityError { value })
    }

    /// Its value.
    pub fn get(self) -> i32 {
        self.0
    }
}

struct PriorityVisitor;

impl Visitor<'_> for PriorityVisitor {
    type Value = Priority;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "priority: an integer from {MIN_PRIORITY} to {MAX_PRIORITY}"
        )
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Priority, E> {
        Priority::new(v).map_err(E::custom)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Priority, E> {
        Priority::new(i64::try_from(v).unwrap_or(i64::MAX)).map_err(E::custom)
    }
}

impl<'de> Deserialize<'de> for Priority {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_i64(PriorityVisitor)
    }
}

/// The `preemption` event: on the stream of a framework whose tasks are taken back, and on the
/// offer stream, before any of them is killed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Preemption {
    /// The framework whose tasks these are.
    pub framework_id: FrameworkId,
    /// Its tasks to be taken back.
    pub task_ids: Vec<TaskId>,
    /// When those still running are killed (reason `preempted`).
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub deadline: Timestamp,
    /// The starved role they are taken back for.
    pub for_role: String,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn priorities_are_integers_in_range_and_errors_name_the_field() {
        for (text, want) in [("0", 0), ("-1000", -1000), ("1000", 1000), ("7", 7)] {
            assert_eq!(serde_json::from_str::<Priority>(text).unwrap().get(), want);
        }
        for bad in ["1001", "-1001", "1.5", "\"high\"", "true", "99999999999"] {
            let e = serde_json::from_str::<Priority>(bad)
                .unwrap_err()
                .to_string();
            assert!(e.contains("priority"), "{bad}: {e}");
        }
        assert_eq!(
            serde_json::to_string(&Priority::new(3).unwrap()).unwrap(),
            "3"
        );
    }
}
