//! The registry's backup document: one self-describing JSON file holding every record of a
//! registry (redb or etcd), written by `coordinator backup` and read back by `coordinator
//! restore`.
//!
//! ```json
//! {
//!   "format": "parley-registry-backup",
//!   "format_version": 1,
//!   "schema_version": 1,
//!   "written_at": "2026-01-01T00:00:00Z",
//!   "source": { "backend": "etcd", "location": "http://10.0.0.5:2379", "etcd_prefix": "/parley",
//!               "etcd_revision": 42 },
//!   "records": { "frameworks": [], "removed_frameworks": [], "role_weights": [],
//!                "role_quotas": [], "agents": [], "reservations": [] }
//! }
//! ```
//!
//! `format_version` is this document's layout; `schema_version` the registry layout the records
//! follow ([`super::SCHEMA_VERSION`]). [`Backup::parse`] checks the whole document before
//! anything is written: the format and both versions first (a document of another version is
//! refused, not misread), then every record, then that no record is there twice; every error
//! names the field (`records.frameworks[2].role: ...`).

use std::collections::HashSet;

use protocol::{AgentId, FrameworkId, Resources, RolePath, Timestamp, Weight};
use serde::{Deserialize, Serialize};

use super::{Snapshot, StoredAgent, StoredFramework, StoredQuota, SCHEMA_VERSION};

/// The value of a backup document's `format` key.
pub const FORMAT: &str = "parley-registry-backup";

/// The layout of the backup document this coordinator writes and reads.
pub const FORMAT_VERSION: u64 = 1;

/// Which registry backend a backup was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// The redb file under `--data-dir`.
    Redb,
    /// etcd, under `--etcd-prefix`.
    Etcd,
}

/// Where a backup was read from (informative: a backup restores into either backend).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// The backend.
    pub backend: Backend,
    /// The redb file's path, or the etcd endpoints.
    pub location: String,
    /// With etcd: the key prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd_prefix: Option<String>,
    /// With etcd: the revision the records were read at (one range read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd_revision: Option<i64>,
}

/// A role's run-time weight.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleWeight {
    /// The role.
    pub role: RolePath,
    /// Its weight.
    pub weight: Weight,
}

/// A role's run-time quota.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleQuota {
    /// The role.
    pub role: RolePath,
    /// What the role is guaranteed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guarantee: Option<Resources>,
    /// What its subtree may hold at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Resources>,
}

/// An agent's dynamic reservation for a role.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reservation {
    /// The agent.
    pub agent_id: AgentId,
    /// The role.
    pub role: RolePath,
    /// What is reserved.
    pub resources: Resources,
}

/// Every record of the registry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Records {
    /// The registered frameworks.
    pub frameworks: Vec<StoredFramework>,
    /// Ids of removed frameworks (refused if they try to come back).
    pub removed_frameworks: Vec<FrameworkId>,
    /// Role weights set at run time.
    pub role_weights: Vec<RoleWeight>,
    /// Role quotas set at run time.
    pub role_quotas: Vec<RoleQuota>,
    /// The agents last known.
    pub agents: Vec<StoredAgent>,
    /// Dynamic reservations.
    pub reservations: Vec<Reservation>,
}

/// A backup document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Backup {
    /// Always [`FORMAT`].
    pub format: String,
    /// [`FORMAT_VERSION`].
    pub format_version: u64,
    /// The registry's schema version ([`SCHEMA_VERSION`]).
    pub schema_version: u64,
    /// When the backup was read.
    pub written_at: Timestamp,
    /// Where it was read from.
    pub source: Source,
    /// The records.
    pub records: Records,
}

/// A backup document that cannot be restored; the message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BackupError(pub String);

impl Backup {
    /// The document of `snapshot`, read from `source` now.
    pub fn new(snapshot: &Snapshot, source: Source) -> Self {
        Self {
            format: FORMAT.to_owned(),
            format_version: FORMAT_VERSION,
            schema_version: SCHEMA_VERSION,
            written_at: protocol::now(),
            source,
            records: Records {
                frameworks: snapshot.frameworks.clone(),
                removed_frameworks: snapshot.removed_frameworks.clone(),
                role_weights: snapshot
                    .weights
                    .iter()
                    .map(|(role, weight)| RoleWeight {
                        role: role.clone(),
                        weight: *weight,
                    })
                    .collect(),
                role_quotas: snapshot
                    .quotas
                    .iter()
                    .map(|(role, quota)| RoleQuota {
                        role: role.clone(),
                        guarantee: quota.guarantee.clone(),
                        limit: quota.limit.clone(),
                    })
                    .collect(),
                agents: snapshot.agents.clone(),
                reservations: snapshot
                    .reservations
                    .iter()
                    .map(|(agent, role, res)| Reservation {
                        agent_id: *agent,
                        role: role.clone(),
                        resources: res.clone(),
                    })
                    .collect(),
            },
        }
    }

    /// The document as pretty JSON, with a final newline.
    pub fn to_json(&self) -> String {
        // Every field is a plain value or a map with string keys: serializing cannot fail.
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// Reads and checks a whole document: its format and versions, every record, and that no
    /// record is there twice.
    pub fn parse(text: &str) -> Result<Self, BackupError> {
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| BackupError(format!("not a JSON document: {e}")))?;
        let Some(object) = value.as_object() else {
            return Err(BackupError(
                "not a backup document: expected a JSON object".into(),
            ));
        };
        match object.get("format").and_then(|v| v.as_str()) {
            Some(FORMAT) => {}
            _ => {
                return Err(BackupError(format!(
                    "format: expected \"{FORMAT}\" (is this a Parley registry backup?)"
                )))
            }
        }
        let version = |key: &str, known: u64, what: &str| {
            match object.get(key) {
            Some(v) if v.as_u64() == Some(known) => Ok(()),
            Some(v) => Err(BackupError(format!(
                "{key}: {v} is not {known}, the {what} this coordinator reads (restore it with the coordinator version that wrote it)"
            ))),
            None => Err(BackupError(format!("{key}: missing"))),
        }
        };
        version("format_version", FORMAT_VERSION, "backup format version")?;
        version("schema_version", SCHEMA_VERSION, "registry schema version")?;
        let backup: Backup = serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            BackupError(format!("{path}: {}", e.inner()))
        })?;
        backup.check_unique()?;
        Ok(backup)
    }

    /// Refuses a record listed twice, and a framework both registered and removed.
    fn check_unique(&self) -> Result<(), BackupError> {
        let r = &self.records;
        let dup = |field: &str, i: usize, what: String| {
            Err(BackupError(format!(
                "records.{field}[{i}]: {what} is listed twice"
            )))
        };
        let mut frameworks = HashSet::new();
        for (i, fw) in r.frameworks.iter().enumerate() {
            if !frameworks.insert(fw.id) {
                return dup("frameworks", i, format!("framework {}", fw.id));
            }
        }
        let mut removed = HashSet::new();
        for (i, id) in r.removed_frameworks.iter().enumerate() {
            if !removed.insert(*id) {
                return dup("removed_frameworks", i, format!("framework {id}"));
            }
            if frameworks.contains(id) {
                return Err(BackupError(format!(
                    "records.removed_frameworks[{i}]: framework {id} is also in records.frameworks"
                )));
            }
        }
        let mut roles = HashSet::new();
        for (i, w) in r.role_weights.iter().enumerate() {
            if !roles.insert(&w.role) {
                return dup("role_weights", i, format!("role {}", w.role));
            }
        }
        let mut roles = HashSet::new();
        for (i, q) in r.role_quotas.iter().enumerate() {
            if !roles.insert(&q.role) {
                return dup("role_quotas", i, format!("role {}", q.role));
            }
        }
        let mut agents = HashSet::new();
        for (i, a) in r.agents.iter().enumerate() {
            if !agents.insert(a.id) {
                return dup("agents", i, format!("agent {}", a.id));
            }
        }
        let mut reservations = HashSet::new();
        for (i, res) in r.reservations.iter().enumerate() {
            if !reservations.insert((res.agent_id, &res.role)) {
                let what = format!(
                    "the reservation of agent {} for role {}",
                    res.agent_id, res.role
                );
                return dup("reservations", i, what);
            }
        }
        Ok(())
    }

    /// The records as the registry holds them.
    pub fn snapshot(&self) -> Snapshot {
        let r = &self.records;
        Snapshot {
            frameworks: r.frameworks.clone(),
            removed_frameworks: r.removed_frameworks.clone(),
            weights: r
                .role_weights
                .iter()
                .map(|w| (w.role.clone(), w.weight))
                .collect(),
            agents: r.agents.clone(),
            // An empty quota or reservation is no record: the registry deletes it.
            quotas: r
                .role_quotas
                .iter()
                .filter(|q| q.guarantee.is_some() || q.limit.is_some())
                .map(|q| {
                    let quota = StoredQuota {
                        guarantee: q.guarantee.clone(),
                        limit: q.limit.clone(),
                    };
                    (q.role.clone(), quota)
                })
                .collect(),
            reservations: r
                .reservations
                .iter()
                .filter(|res| !res.resources.is_empty())
                .map(|res| (res.agent_id, res.role.clone(), res.resources.clone()))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot() -> Snapshot {
        let agent = AgentId::new();
        Snapshot {
            frameworks: vec![StoredFramework {
                id: FrameworkId::new(),
                name: "f".into(),
                role: RolePath::new("eng/batch").unwrap(),
                failover_timeout_s: 60.0,
                registered_at: protocol::now(),
                owner: Some("team-a".into()),
                gpu_resources: false,
                partition_timeout_s: Some(30.0),
            }],
            removed_frameworks: vec![FrameworkId::new()],
            weights: vec![(RolePath::new("eng").unwrap(), Weight::new(3.0).unwrap())],
            agents: vec![StoredAgent {
                id: agent,
                hostname: "h".into(),
                endpoint: "http://h:5051".into(),
                last_seen: protocol::now(),
                drain_deadline: None,
            }],
            quotas: vec![(
                RolePath::new("ops").unwrap(),
                StoredQuota {
                    guarantee: Some("cpus=1".parse().unwrap()),
                    limit: None,
                },
            )],
            reservations: vec![(
                agent,
                RolePath::new("eng").unwrap(),
                "cpus=2,mem=64".parse().unwrap(),
            )],
        }
    }

    fn source() -> Source {
        Source {
            backend: Backend::Redb,
            location: "/var/lib/parley/registry.redb".into(),
            etcd_prefix: None,
            etcd_revision: None,
        }
    }

    #[test]
    fn a_document_round_trips_every_record() {
        let snap = snapshot();
        let backup = Backup::new(&snap, source());
        let text = backup.to_json();
        let read = Backup::parse(&text).unwrap();
        assert_eq!(read, backup);
        assert_eq!(read.snapshot(), snap);
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["format"], FORMAT);
        assert_eq!(value["source"]["backend"], "redb");
        assert_eq!(value["records"]["role_weights"][0]["role"], "eng");
        assert_eq!(value["records"]["role_quotas"][0]["guarantee"]["cpus"], 1.0);
    }

    /// `text` with `edit` applied to its JSON.
    fn edited(edit: impl FnOnce(&mut serde_json::Value)) -> String {
        let mut value = serde_json::to_value(Backup::new(&snapshot(), source())).unwrap();
        edit(&mut value);
        value.to_string()
    }

    #[test]
    fn each_bad_document_is_refused_naming_the_field() {
        let cases: Vec<(String, &str)> = vec![
            ("[1, 2]".into(), "expected a JSON object"),
            ("{\"format\": ".into(), "not a JSON document"),
            (edited(|v| v["format"] = "other".into()), "format: expected"),
            (
                edited(|v| v["format_version"] = 2.into()),
                "format_version: 2 is not 1",
            ),
            (
                edited(|v| {
                    v.as_object_mut().unwrap().remove("schema_version");
                }),
                "schema_version: missing",
            ),
            (
                edited(|v| v["schema_version"] = 9.into()),
                "schema_version: 9 is not 1",
            ),
            (
                edited(|v| v["records"]["frameworks"][0]["role"] = "Bad Role".into()),
                "records.frameworks[0].role",
            ),
            (
                edited(|v| v["records"]["role_weights"][0]["weight"] = (-1.0).into()),
                "records.role_weights[0].weight",
            ),
            (
                edited(|v| v["records"]["reservations"][0]["resources"] = "x".into()),
                "records.reservations[0].resources",
            ),
            (
                edited(|v| {
                    v["records"].as_object_mut().unwrap().remove("agents");
                }),
                "records: missing field `agents`",
            ),
            (edited(|v| v["extra"] = 1.into()), "unknown field `extra`"),
            (
                edited(|v| {
                    let fw = v["records"]["frameworks"][0].clone();
                    v["records"]["frameworks"].as_array_mut().unwrap().push(fw);
                }),
                "records.frameworks[1]: framework",
            ),
            (
                edited(|v| {
                    let id = v["records"]["frameworks"][0]["id"].clone();
                    v["records"]["removed_frameworks"][0] = id;
                }),
                "records.removed_frameworks[0]: framework",
            ),
            (
                edited(|v| {
                    let w = v["records"]["role_weights"][0].clone();
                    v["records"]["role_weights"].as_array_mut().unwrap().push(w);
                }),
                "records.role_weights[1]: role eng is listed twice",
            ),
        ];
        for (text, expected) in cases {
            let err = Backup::parse(&text).unwrap_err();
            assert!(
                err.to_string().starts_with(expected) || err.to_string().contains(expected),
                "{err} should name {expected}"
            );
        }
    }
}
