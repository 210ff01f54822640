//! Identifier newtypes. Coordinator-chosen ids are UUIDs; task ids are chosen by frameworks.

use std::fmt;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A random (version 4) UUID from the thread's CSPRNG (`rand`'s `ThreadRng`, seeded from the
/// OS): the same ids as `Uuid::new_v4`, without its `getrandom` system call per id (a few
/// thousand a second on a busy coordinator: offer and update ids).
pub fn random_uuid() -> Uuid {
    uuid::Builder::from_random_bytes(rand::random::<[u8; 16]>()).into_uuid()
}

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        #[serde(transparent)]
        pub struct $name(pub Uuid);

        impl $name {
            /// A fresh random id.
            pub fn new() -> Self {
                Self(random_uuid())
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0)
            }
        }

        impl std::str::FromStr for $name {
            type Err = uuid::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s).map(Self)
            }
        }
    };
}

uuid_id!(
    /// Identifies a registered framework; chosen by the coordinator.
    FrameworkId
);
uuid_id!(
    /// Identifies a registered agent; chosen by the coordinator.
    AgentId
);
uuid_id!(
    /// Identifies one offer; usable by one accept or decline only.
    OfferId
);
uuid_id!(
    /// Identifies one task status update; frameworks acknowledge updates by it.
    UpdateId
);

/// The longest task id accepted.
pub const MAX_TASK_ID_LEN: usize = 200;

/// A task id, chosen by the framework and unique within it.
///
/// It names the task's sandbox directory on the agent, so it is restricted to
/// `[A-Za-z0-9][A-Za-z0-9._-]{0,199}`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(try_from = "String", into = "String")]
pub struct TaskId(String);

impl TaskId {
    /// Validates and wraps a task id.
    pub fn new(id: impl Into<String>) -> Result<Self, InvalidTaskId> {
        let id = id.into();
        let mut chars = id.chars();
        let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
        let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if id.len() > MAX_TASK_ID_LEN || !first_ok || !rest_ok {
            return Err(InvalidTaskId(id));
        }
        Ok(Self(id))
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A task id that does not match `[A-Za-z0-9][A-Za-z0-9._-]{0,199}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid task_id {0:?}: use 1 to 200 characters from [A-Za-z0-9._-], starting with a letter or digit")]
pub struct InvalidTaskId(pub String);

impl TryFrom<String> for TaskId {
    type Error = InvalidTaskId;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::new(s)
    }
}

impl From<TaskId> for String {
    fn from(id: TaskId) -> String {
        id.0
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TaskId({})", self.0)
    }
}

impl std::str::FromStr for TaskId {
    type Err = InvalidTaskId;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn random_uuids_are_version_4_and_distinct() {
        let a = random_uuid();
        let b = random_uuid();
        assert_eq!(a.get_version(), Some(uuid::Version::Random));
        assert_eq!(a.get_variant(), uuid::Variant::RFC4122);
        assert_ne!(a, b);
        assert_ne!(super::OfferId::new(), super::OfferId::new());
    }

    use super::*;

    #[test]
    fn task_ids_are_validated() {
        assert!(TaskId::new("web-1.a_b").is_ok());
        for bad in ["", "-x", "../etc", "a/b", "a b", &"x".repeat(201)] {
            assert!(TaskId::new(bad).is_err(), "{bad:?} accepted");
        }
        let err = serde_json::from_str::<TaskId>("\"../x\"").unwrap_err();
        assert!(err.to_string().contains("invalid task_id"), "{err}");
    }

    #[test]
    fn uuid_ids_round_trip() {
        let id = AgentId::new();
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(serde_json::from_str::<AgentId>(&json).unwrap(), id);
        assert!(serde_json::from_str::<AgentId>("\"nope\"").is_err());
    }
}
