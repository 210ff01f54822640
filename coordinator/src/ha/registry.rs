//! [`EtcdRegistry`]: the durable registry under an etcd key prefix, one key per record, every
//! write fenced by the leadership.
//!
//! Layout under `<prefix>/registry/`: `frameworks/<id>` (the framework's JSON, as in the redb
//! file), `removed/<id>` (`1`), `weights/<role path>` (the weight as text), `quotas/<role path>` (the
//! role's quota JSON, removed when cleared), `reservations/<agent id>/<role path>` (an agent's
//! dynamic reservation for a role as resources JSON, removed when cleared), `agents/<id>` (the
//! agent's JSON). One key per record, not one blob: etcd bounds a request to about 1.5 MiB.
//!
//! Fencing: every write is one txn per at most [`MAX_OPS`] operations, each conditioned on
//! `create_revision(leader key) == rev` of this coordinator's leadership. A failed compare
//! means another coordinator leads (or the lease is gone): the write fails with
//! [`StoreError::Fenced`], nothing is written, and the `lost` token is cancelled so the
//! coordinator steps down. Changes of one group commit are folded per key first (etcd refuses
//! a txn that names a key twice); a group larger than [`MAX_OPS`] keys is written as several
//! txns, in order, each fenced.

use std::collections::BTreeMap;
use std::sync::Arc;

use protocol::{AgentId, FrameworkId, RolePath, Weight};
use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

use super::etcd::{EtcdClient, LeaderKey, Op};
use crate::store::backup::{Backend, Source};
use crate::store::{
    parse_reservation_key, reservation_key, Change, Registry, Snapshot, StoreError, StoredAgent,
    StoredFramework, StoredQuota,
};

/// Operations per txn (etcd's default `--max-txn-ops` is 128).
pub const MAX_OPS: usize = 100;

/// The registry on etcd, for the leader holding `leader`.
#[derive(Debug)]
pub struct EtcdRegistry {
    client: Arc<EtcdClient>,
    root: String,
    leader: LeaderKey,
    lost: CancellationToken,
    runtime: Handle,
}

impl EtcdRegistry {
    /// The registry under `prefix` (e.g. `/parley`) written as the holder of `leader`;
    /// `lost` is cancelled when a write finds the leadership gone. Its blocking calls run on
    /// `runtime` (it is used from the writer thread).
    pub fn new(
        client: Arc<EtcdClient>,
        prefix: &str,
        leader: LeaderKey,
        lost: CancellationToken,
        runtime: Handle,
    ) -> Self {
        Self {
            client,
            root: format!("{prefix}/registry/"),
            leader,
            lost,
            runtime,
        }
    }

    /// Reads everything (async; [`Registry::load`] blocks on it).
    pub async fn load_async(&self) -> Result<Snapshot, StoreError> {
        let kvs = self
            .client
            .range_prefix(self.root.as_bytes())
            .await
            .map_err(|e| StoreError::Etcd(e.to_string()))?;
        decode_all(&self.root, kvs)
    }

    /// The keys and values `changes` leave, in key order (`None`: deleted).
    pub fn fold(
        &self,
        changes: &[Change],
    ) -> Result<BTreeMap<String, Option<Vec<u8>>>, StoreError> {
        fold(&self.root, changes)
    }

    async fn apply_async(&self, changes: &[Change]) -> Result<(), StoreError> {
        let folded = self.fold(changes)?;
        let ops: Vec<Op> = folded
            .into_iter()
            .map(|(k, v)| match v {
                Some(v) => Op::Put(k.into_bytes(), v),
                None => Op::Delete(k.into_bytes()),
            })
            .collect();
        for chunk in ops.chunks(MAX_OPS) {
            let held = self
                .client
                .txn_if_created(&self.leader.key, self.leader.rev, chunk)
                .await
                .map_err(|e| StoreError::Etcd(e.to_string()))?;
            if !held {
                tracing::error!(
                    leader_rev = self.leader.rev,
                    "registry write failed its fencing compare: leadership lost, stepping down"
                );
                self.lost.cancel();
                return Err(StoreError::Fenced);
            }
        }
        Ok(())
    }
}

/// Reads the registry under `prefix` without leading (for a backup): one range read, so the
/// records are those of one revision, which is returned with them.
pub async fn read_registry(
    client: &EtcdClient,
    prefix: &str,
) -> Result<(Snapshot, i64), StoreError> {
    let root = format!("{prefix}/registry/");
    let (kvs, revision) = client
        .range_prefix_at(root.as_bytes())
        .await
        .map_err(|e| StoreError::Etcd(e.to_string()))?;
    Ok((decode_all(&root, kvs)?, revision))
}

/// The advertised URL of the coordinator leading the cluster under `prefix`, if one does.
pub async fn current_leader(
    client: &EtcdClient,
    prefix: &str,
) -> Result<Option<String>, StoreError> {
    let name = format!("{prefix}/leader");
    let leader = client
        .leader(name.as_bytes())
        .await
        .map_err(|e| StoreError::Etcd(e.to_string()))?;
    Ok(leader.map(|url| String::from_utf8_lossy(&url).into_owned()))
}

/// How a restore on etcd went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replaced {
    /// Written in this many transactions (one unless the records exceed [`MAX_OPS`]).
    Written(usize),
    /// A coordinator leads the cluster (its election key exists): nothing was written.
    Led,
}

/// Replaces the registry under `prefix` with `snapshot`: the keys it does not have deleted and
/// its records written, in one txn when that fits in [`MAX_OPS`] operations (else several, in
/// order). Unless `force`, each txn holds only while no coordinator leads the
/// cluster (no key under `<prefix>/leader/`), so a leader elected meanwhile gets nothing
/// written under it.
pub async fn replace_registry(
    client: &EtcdClient,
    prefix: &str,
    snapshot: &Snapshot,
    force: bool,
) -> Result<Replaced, StoreError> {
    let root = format!("{prefix}/registry/");
    let wanted = fold(&root, &snapshot.changes())?;
    // etcd refuses a txn whose delete range overlaps one of its puts: delete the keys there
    // now that the snapshot does not have, one by one.
    let (there, _) = client
        .range_prefix_at(root.as_bytes())
        .await
        .map_err(|e| StoreError::Etcd(e.to_string()))?;
    let mut ops: Vec<Op> = there
        .into_iter()
        .filter(|kv| {
            std::str::from_utf8(&kv.key).map_or(true, |k| !matches!(wanted.get(k), Some(Some(_))))
        })
        .map(|kv| Op::Delete(kv.key))
        .collect();
    for (key, value) in wanted {
        if let Some(value) = value {
            ops.push(Op::Put(key.into_bytes(), value));
        }
    }
    let election = format!("{prefix}/leader/");
    let guard = (!force).then_some(election.as_bytes());
    let chunks: Vec<&[Op]> = ops.chunks(MAX_OPS).collect();
    for chunk in &chunks {
        let held = client
            .txn_unless_any(guard, chunk)
            .await
            .map_err(|e| StoreError::Etcd(e.to_string()))?;
        if !held {
            return Ok(Replaced::Led);
        }
    }
    Ok(Replaced::Written(chunks.len()))
}

/// The records of `kvs`, the keys under `root`.
fn decode_all(root: &str, kvs: Vec<super::etcd::KeyValue>) -> Result<Snapshot, StoreError> {
    let mut snap = Snapshot::default();
    for kv in kvs {
        let key = String::from_utf8_lossy(&kv.key).into_owned();
        let Some(rest) = key.strip_prefix(root) else {
            continue;
        };
        decode(rest, &kv.value, &mut snap)
            .map_err(|reason| StoreError::Etcd(format!("bad record {key}: {reason}")))?;
    }
    Ok(snap)
}

/// The keys under `r` (the registry root) and the values `changes` leave, in key order
/// (`None`: deleted).
fn fold(r: &str, changes: &[Change]) -> Result<BTreeMap<String, Option<Vec<u8>>>, StoreError> {
    let mut out = BTreeMap::new();
    let json = |what: String, v: Result<Vec<u8>, serde_json::Error>| {
        v.map_err(|e| StoreError::Etcd(format!("cannot encode {what}: {e}")))
    };
    for change in changes {
        match change {
            Change::PutFramework(fw) => {
                let v = json(format!("framework {}", fw.id), serde_json::to_vec(fw))?;
                out.insert(format!("{r}frameworks/{}", fw.id), Some(v));
            }
            Change::RemoveFramework(id) => {
                out.insert(format!("{r}frameworks/{id}"), None);
                out.insert(format!("{r}removed/{id}"), Some(b"1".to_vec()));
            }
            Change::ForgetFramework(id) => {
                out.insert(format!("{r}frameworks/{id}"), None);
            }
            Change::SetWeight(role, w) => {
                out.insert(
                    format!("{r}weights/{}", role.as_str()),
                    Some(w.get().to_string().into_bytes()),
                );
            }
            Change::SetQuota(role, q) => {
                let key = format!("{r}quotas/{}", role.as_str());
                if q.is_empty() {
                    out.insert(key, None);
                } else {
                    let v = json(format!("quota of role {role}"), serde_json::to_vec(q))?;
                    out.insert(key, Some(v));
                }
            }
            Change::PutAgent(a) => {
                let v = json(format!("agent {}", a.id), serde_json::to_vec(a))?;
                out.insert(format!("{r}agents/{}", a.id), Some(v));
            }
            Change::RemoveAgent(id) => {
                out.insert(format!("{r}agents/{id}"), None);
            }
            Change::SetReservation(agent, role, res) => {
                let key = format!("{r}reservations/{}", reservation_key(*agent, role));
                if res.is_empty() {
                    out.insert(key, None);
                } else {
                    let v = json(format!("reservation {key}"), serde_json::to_vec(res))?;
                    out.insert(key, Some(v));
                }
            }
        }
    }
    Ok(out)
}

impl Registry for EtcdRegistry {
    fn load(&self) -> Result<Snapshot, StoreError> {
        self.runtime.block_on(self.load_async())
    }

    fn apply(&self, changes: &[Change]) -> Result<(), StoreError> {
        if changes.is_empty() {
            return Ok(());
        }
        self.runtime.block_on(self.apply_async(changes))
    }

    fn source(&self) -> Source {
        Source {
            backend: Backend::Etcd,
            location: self.client.endpoints().join(","),
            etcd_prefix: self.root.strip_suffix("/registry/").map(str::to_owned),
            etcd_revision: None,
        }
    }
}

/// Adds the record at `rest` (the key below the registry root) to `snap`.
fn decode(rest: &str, value: &[u8], snap: &mut Snapshot) -> Result<(), String> {
    if let Some(id) = rest.strip_prefix("frameworks/") {
        let fw: StoredFramework = serde_json::from_slice(value).map_err(|e| e.to_string())?;
        if fw.id.to_string() != id {
            return Err(format!("holds framework {}", fw.id));
        }
        snap.frameworks.push(fw);
    } else if let Some(id) = rest.strip_prefix("removed/") {
        let id: FrameworkId = id.parse().map_err(|e| format!("{e}"))?;
        snap.removed_frameworks.push(id);
    } else if let Some(role) = rest.strip_prefix("weights/") {
        let role = RolePath::new(role).map_err(|e| e.to_string())?;
        let text = std::str::from_utf8(value).map_err(|e| e.to_string())?;
        let w: f64 = text.parse().map_err(|e| format!("weight {text:?}: {e}"))?;
        snap.weights
            .push((role, Weight::new(w).map_err(|e| e.to_string())?));
    } else if let Some(role) = rest.strip_prefix("quotas/") {
        let role = RolePath::new(role).map_err(|e| e.to_string())?;
        let quota: StoredQuota = serde_json::from_slice(value).map_err(|e| e.to_string())?;
        snap.quotas.push((role, quota));
    } else if let Some(key) = rest.strip_prefix("reservations/") {
        let (agent, role) = parse_reservation_key(key).map_err(|e| e.to_string())?;
        let res: protocol::Resources = serde_json::from_slice(value).map_err(|e| e.to_string())?;
        snap.reservations.push((agent, role, res));
    } else if let Some(id) = rest.strip_prefix("agents/") {
        let agent: StoredAgent = serde_json::from_slice(value).map_err(|e| e.to_string())?;
        let _: AgentId = id.parse().map_err(|e| format!("{e}"))?;
        snap.agents.push(agent);
    }
    // Other keys (a later layout's) are left alone.
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> EtcdRegistry {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        EtcdRegistry::new(
            Arc::new(EtcdClient::new(vec!["http://127.0.0.1:1".into()]).unwrap()),
            "/parley",
            LeaderKey {
                name: b"/parley/leader".to_vec(),
                key: b"/parley/leader/1".to_vec(),
                rev: 5,
                lease: 1,
            },
            CancellationToken::new(),
            rt.handle().clone(),
        )
    }

    #[test]
    fn changes_fold_to_one_operation_per_key_and_decode_back() {
        let r = registry();
        let fw = StoredFramework {
            id: FrameworkId::new(),
            name: "f".into(),
            role: RolePath::new("eng/batch").unwrap(),
            failover_timeout_s: 30.0,
            registered_at: protocol::now(),
            owner: None,
            gpu_resources: true,
            partition_timeout_s: None,
        };
        let gone = FrameworkId::new();
        let agent = StoredAgent {
            id: AgentId::new(),
            hostname: "h".into(),
            endpoint: "http://h:5051".into(),
            last_seen: protocol::now(),
            drain_deadline: None,
        };
        let folded = r
            .fold(&[
                Change::PutFramework(fw.clone()),
                Change::PutFramework(StoredFramework {
                    id: gone,
                    ..fw.clone()
                }),
                Change::RemoveFramework(gone),
                Change::SetWeight(
                    RolePath::new("eng/batch").unwrap(),
                    Weight::new(2.5).unwrap(),
                ),
                Change::PutAgent(agent.clone()),
                Change::SetQuota(
                    RolePath::new("eng").unwrap(),
                    StoredQuota {
                        guarantee: None,
                        limit: Some("cpus=10".parse().unwrap()),
                    },
                ),
                Change::SetQuota(RolePath::new("ops").unwrap(), StoredQuota::default()),
                Change::SetReservation(
                    agent.id,
                    RolePath::new("eng/batch").unwrap(),
                    "cpus=2".parse().unwrap(),
                ),
                Change::SetReservation(
                    agent.id,
                    RolePath::new("ops").unwrap(),
                    protocol::Resources::new(),
                ),
            ])
            .unwrap();
        // The removed framework's key is deleted once, not put then deleted.
        assert_eq!(folded[&format!("/parley/registry/frameworks/{gone}")], None);
        // A cleared quota deletes its key.
        assert_eq!(folded["/parley/registry/quotas/ops"], None);
        // A cleared reservation deletes its key.
        assert_eq!(
            folded[&format!("/parley/registry/reservations/{}/ops", agent.id)],
            None
        );
        assert_eq!(folded.len(), 9);
        let mut snap = Snapshot::default();
        for (k, v) in &folded {
            if let Some(v) = v {
                decode(k.strip_prefix("/parley/registry/").unwrap(), v, &mut snap).unwrap();
            }
        }
        assert_eq!(snap.frameworks, vec![fw]);
        assert_eq!(snap.removed_frameworks, vec![gone]);
        assert_eq!(snap.weights[0].0.as_str(), "eng/batch");
        assert_eq!(snap.weights[0].1.get(), 2.5);
        assert_eq!(snap.agents, vec![agent.clone()]);
        assert_eq!(
            snap.reservations,
            vec![(
                agent.id,
                RolePath::new("eng/batch").unwrap(),
                "cpus=2".parse().unwrap()
            )]
        );
        assert_eq!(snap.quotas.len(), 1);
        assert_eq!(snap.quotas[0].0.as_str(), "eng");
        assert_eq!(
            snap.quotas[0].1.limit.as_ref().map(|l| l.millis("cpus")),
            Some(10_000)
        );
    }

    #[test]
    fn bad_records_are_named() {
        let mut snap = Snapshot::default();
        let e = decode("frameworks/x", b"{not json", &mut snap).unwrap_err();
        assert!(e.contains("key") || !e.is_empty());
        assert!(decode("weights/eng", b"heavy", &mut snap)
            .unwrap_err()
            .contains("heavy"));
        assert!(decode("removed/not-a-uuid", b"1", &mut snap).is_err());
        // Unknown keys are skipped.
        decode("later/thing", b"?", &mut snap).unwrap();
        assert_eq!(snap, Snapshot::default());
    }
}
