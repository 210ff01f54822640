//! Gangs: tasks that must all start together or not at all (a distributed training run, an
//! MPI job, a cluster of workers that is useless until its last one starts).
//!
//! A framework declares a gang ([`GangSpec`]): an id of its own, its members' resources
//! ([`GangMembers`]: `count` of one shape, or a list), and rules over the whole gang
//! ([`GangRules`]: every member on agents sharing one value of an attribute, at most so many
//! members on one agent). [`GangSpec::check`] refuses a malformed gang naming the field; what
//! only the cluster can tell (an attribute no agent has, a gang larger than the cluster) is
//! checked where the cluster is known.

use serde::{Deserialize, Serialize};

use crate::Resources;

/// The most members a gang may have.
pub const MAX_MEMBERS: u32 = 10_000;

/// The longest gang id, in bytes.
pub const MAX_GANG_ID_LEN: usize = 64;

/// A gang a framework wants placed: all of its members at once, or none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct GangSpec {
    /// The framework's own name for the gang, unique among its gangs: ASCII letters, digits,
    /// `-`, `_` and `.`, at most [`MAX_GANG_ID_LEN`] bytes.
    pub gang_id: String,
    /// Its members.
    pub members: GangMembers,
    /// Rules over the whole gang.
    #[serde(default)]
    pub rules: GangRules,
}

/// A gang's members: `count` of one shape, or each its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum GangMembers {
    /// `count` members asking `resources` each: `{"uniform": {"count": 8, "resources":
    /// {"cpus": 4, "gpus": 1}}}`.
    Uniform {
        /// How many.
        count: u32,
        /// What each asks.
        resources: Resources,
    },
    /// One entry a member, in rank order: `{"each": [{"cpus": 8}, {"cpus": 1}, {"cpus": 1}]}`.
    Each(Vec<Resources>),
}

impl GangMembers {
    /// How many members.
    pub fn len(&self) -> usize {
        match self {
            Self::Uniform { count, .. } => *count as usize,
            Self::Each(list) => list.len(),
        }
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Member `rank`'s resources.
    pub fn get(&self, rank: usize) -> Option<&Resources> {
        match self {
            Self::Uniform { count, resources } => (rank < *count as usize).then_some(resources),
            Self::Each(list) => list.get(rank),
        }
    }

    /// Every member's resources, in rank order.
    pub fn to_vec(&self) -> Vec<Resources> {
        match self {
            Self::Uniform { count, resources } => vec![resources.clone(); *count as usize],
            Self::Each(list) => list.clone(),
        }
    }

    /// What the whole gang asks, summed.
    pub fn total(&self) -> Resources {
        match self {
            Self::Uniform { count, resources } => {
                let mut sum = Resources::new();
                for (name, millis) in resources.iter() {
                    sum.set_millis(name.clone(), millis.saturating_mul(u64::from(*count)));
                }
                sum
            }
            Self::Each(list) => list.iter().fold(Resources::new(), |acc, r| acc.add(r)),
        }
    }
}

/// Rules over a whole gang.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct GangRules {
    /// Every member on agents that share one value of this agent attribute (`rack`, `zone`:
    /// one switch for the gang's collective traffic). Agents without the attribute take no
    /// member.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_attribute: Option<String>,
    /// At most this many members on one agent (at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_per_agent: Option<u32>,
}

/// The `gang_failed` event: a member of a gang launched together ended (failed, was lost or
/// killed, or its agent could not start it) while others ran, so the coordinator killed the
/// others. The gang ran as a whole or not at all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GangFailed {
    /// The gang.
    pub gang_id: String,
    /// The member that ended first.
    pub task_id: crate::TaskId,
    /// Its agent.
    pub agent_id: crate::AgentId,
    /// How it ended.
    pub state: crate::TaskState,
    /// What it or its agent said, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The other members, killed.
    pub killed: Vec<crate::TaskId>,
}

/// `POST /api/v1/frameworks/{id}/gang-accepts`: a gang launched from offers of several agents,
/// all or none. Each accept names offers of one agent and the members launched there; the
/// coordinator checks every one before any launches, and ends the gang together
/// ([`GangFailed`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct GangAccept {
    /// The gang's id ([`GangSpec::gang_id`]'s form), unique among the framework's running
    /// gangs.
    pub gang_id: String,
    /// One accept per agent, at most [`crate::messages::AcceptBatch::MAX`], with at most
    /// [`MAX_MEMBERS`] tasks in all.
    pub accepts: Vec<crate::messages::AcceptRequest>,
}

/// Why a gang is malformed: the field at fault and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct GangError {
    /// The field, e.g. `members.uniform.count` or `members.each[3].gpus`.
    pub field: String,
    /// What is wrong, and what would be right.
    pub message: String,
}

fn refuse(field: impl Into<String>, message: impl Into<String>) -> GangError {
    GangError {
        field: field.into(),
        message: message.into(),
    }
}

impl GangSpec {
    /// Checks the gang's form: its id, its members' number and resources (whole GPUs only),
    /// and its rules.
    pub fn check(&self) -> Result<(), GangError> {
        check_id(&self.gang_id)?;
        let (field, n) = match &self.members {
            GangMembers::Uniform { count, .. } => ("members.uniform.count", *count as usize),
            GangMembers::Each(list) => ("members.each", list.len()),
        };
        if n == 0 {
            return Err(refuse(field, "a gang needs at least one member"));
        }
        if n > MAX_MEMBERS as usize {
            return Err(refuse(
                field,
                format!("a gang has at most {MAX_MEMBERS} members, got {n}"),
            ));
        }
        match &self.members {
            GangMembers::Uniform { resources, .. } => {
                check_member("members.uniform.resources", resources)?;
            }
            GangMembers::Each(list) => {
                for (i, r) in list.iter().enumerate() {
                    check_member(&format!("members.each[{i}]"), r)?;
                }
            }
        }
        if let Some(attribute) = &self.rules.same_attribute {
            if attribute.is_empty() {
                return Err(refuse(
                    "rules.same_attribute",
                    "name an agent attribute, e.g. \"rack\"",
                ));
            }
        }
        if self.rules.max_per_agent == Some(0) {
            return Err(refuse(
                "rules.max_per_agent",
                "must be at least 1 (leave it out for no limit)",
            ));
        }
        Ok(())
    }
}

/// Checks a gang id's form: 1 to [`MAX_GANG_ID_LEN`] ASCII letters, digits, `-`, `_` or `.`.
pub fn check_id(id: &str) -> Result<(), GangError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_GANG_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(refuse(
            "gang_id",
            format!(
                "{id:?} is not a gang id: 1 to {MAX_GANG_ID_LEN} ASCII letters, digits, '-', '_' or '.'"
            ),
        ))
    }
}

fn check_member(field: &str, resources: &Resources) -> Result<(), GangError> {
    if resources.is_empty() {
        return Err(refuse(field, "a member must ask for some resource"));
    }
    crate::gpu::requested(resources).map_err(|_| {
        refuse(
            format!("{field}.{}", crate::gpu::GPUS),
            "a member holds whole GPUs only; fractions are refused",
        )
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> Resources {
        s.parse().expect("resources")
    }

    fn uniform(count: u32, resources: &str) -> GangSpec {
        GangSpec {
            gang_id: "train-1".into(),
            members: GangMembers::Uniform {
                count,
                resources: r(resources),
            },
            rules: GangRules::default(),
        }
    }

    #[test]
    fn a_gang_reads_as_documented_and_round_trips() {
        let json = r#"{"gang_id":"train-1","members":{"uniform":{"count":8,"resources":{"cpus":4,"gpus":1}}},"rules":{"same_attribute":"rack","max_per_agent":4}}"#;
        let gang: GangSpec = serde_json::from_str(json).expect("parse");
        assert_eq!(gang.members.len(), 8);
        assert_eq!(gang.members.total(), r("cpus=32,gpus=8"));
        assert_eq!(gang.rules.same_attribute.as_deref(), Some("rack"));
        assert_eq!(gang.check(), Ok(()));
        assert_eq!(serde_json::to_string(&gang).expect("json"), json);
        let each = r#"{"gang_id":"mpi","members":{"each":[{"cpus":8},{"cpus":1}]}}"#;
        let gang: GangSpec = serde_json::from_str(each).expect("parse");
        assert_eq!(gang.members.to_vec(), [r("cpus=8"), r("cpus=1")]);
        assert_eq!(gang.members.get(1), Some(&r("cpus=1")));
        assert_eq!(gang.members.get(2), None);
        let unknown = r#"{"gang_id":"a","members":{"each":[]},"rulez":{}}"#;
        assert!(serde_json::from_str::<GangSpec>(unknown).is_err());
    }

    #[test]
    fn a_malformed_gang_is_refused_naming_the_field() {
        let field = |g: GangSpec| g.check().expect_err("refused").field;
        assert_eq!(field(uniform(0, "cpus=1")), "members.uniform.count");
        assert_eq!(
            field(uniform(MAX_MEMBERS + 1, "cpus=1")),
            "members.uniform.count"
        );
        assert_eq!(uniform(MAX_MEMBERS, "cpus=1").check(), Ok(()));
        assert_eq!(
            field(uniform(2, "gpus=0.5")),
            "members.uniform.resources.gpus"
        );
        let mixed = GangSpec {
            members: GangMembers::Each(vec![r("gpus=1"), r("cpus=1,gpus=1.5")]),
            ..uniform(1, "cpus=1")
        };
        assert_eq!(field(mixed), "members.each[1].gpus");
        let empty = GangSpec {
            members: GangMembers::Each(vec![r("cpus=1"), Resources::new()]),
            ..uniform(1, "cpus=1")
        };
        assert_eq!(field(empty), "members.each[1]");
        let none = GangSpec {
            members: GangMembers::Each(Vec::new()),
            ..uniform(1, "cpus=1")
        };
        assert_eq!(field(none), "members.each");
        for bad in ["", "a b", "ü", &"x".repeat(MAX_GANG_ID_LEN + 1)] {
            let g = GangSpec {
                gang_id: bad.into(),
                ..uniform(1, "cpus=1")
            };
            assert_eq!(field(g), "gang_id", "{bad:?}");
        }
        let mut g = uniform(2, "cpus=1");
        g.rules.max_per_agent = Some(0);
        assert_eq!(field(g.clone()), "rules.max_per_agent");
        g.rules = GangRules {
            same_attribute: Some(String::new()),
            max_per_agent: None,
        };
        assert_eq!(field(g), "rules.same_attribute");
    }
}
