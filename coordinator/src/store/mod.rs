//! The durable registry: the part of the books that must outlive a coordinator restart, in an
//! embedded [redb] file (one file, no server to run).
//!
//! # What is kept, and why only that
//!
//! Like Mesos' registry, the store keeps what no one else can tell a restarted coordinator:
//!
//! - **frameworks**: id, name, role, failover timeout, registration time. After a restart each
//!   comes back *disconnected* in its own role, and its failover timeout starts again: it can
//!   re-register with its id and keep its tasks, and if it does not come back in time it is
//!   removed and its tasks are killed, exactly as if the coordinator had never stopped;
//! - **removed framework ids**: a removed framework stays refused after a restart;
//! - **role weights** set at run time (`PUT /api/v1/roles/{path}`): they override the config's;
//! - **role quotas** (guarantee and limit), set at run time by the same endpoint;
//! - **agents**: id, hostname, endpoint, and when they registered with those (a registration
//!   that changes neither is not written). After a restart or a
//!   failover each is *awaited*: if it does not re-register within the agent timeout
//!   (heartbeat interval × missed heartbeats, counted from the load) it is reported lost, and
//!   forgotten after `lost_agent_retention`, instead of being silently forgotten at once.
//!
//! Tasks are not stored: agents keep their ids and task journals on their own disks
//! and re-register with their running tasks (each with its resources) when the coordinator comes
//! back; the tasks are then accounted under their framework's real role. Offers and decline
//! filters are soft state and are not kept (an offer outstanding at a crash was never accepted).
//!
//! # How it is written
//!
//! [`crate::state::State`] never does I/O: a call that changes a stored fact pushes an
//! [`Effect::Persist`](crate::state::Effect::Persist) with a [`Change`]. The runtime queues the
//! changes of one call to the [`Writer`] thread while it still holds the books' lock, so the
//! stored order is the books' order; the writer commits everything queued in one transaction
//! (one fsync for many calls under load), off the lock and off the tokio worker threads. A
//! request that changes a stored fact writes it before the books change
//! ([`crate::runtime::Coordinator::run_write_first`]) and is answered once it is durable, so a
//! client that was told "registered" is registered durably; if the write fails it is answered
//! 503 and nothing changed. Values are JSON, keyed by
//! id or role path; a `meta` table holds the schema version, and a file with a version this
//! coordinator does not know is refused at start rather than misread. The `agents` table was
//! added without a version bump: a version-1 file without it is read as having no agents, and
//! an older coordinator ignores it.
//!
//! # Backends
//!
//! [`Registry`] is what the [`Writer`] needs: [`Registry::load`] and [`Registry::apply`].
//! [`Store`] (this file, the redb file) is the default; `crate::ha::EtcdRegistry` keeps the same
//! records under an etcd key prefix, one key each, every write fenced by the leadership.
//!
//! # Backup
//!
//! [`backup`]: the backup document (every record of either backend in one versioned JSON
//! file), read with [`Store::open_existing`] and [`Store::load`] (one read transaction, nothing
//! written) and restored with [`Store::replace`] (one write transaction).

pub mod backup;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use protocol::{FrameworkId, RolePath, Weight};
use redb::{Database, ReadableTable, TableDefinition};

pub use books::records::{
    parse_reservation_key, reservation_key, Change, Snapshot, StoredAgent, StoredFramework,
    StoredQuota,
};

pub use writer::Writer;

/// The version of the stored layout this coordinator writes and reads.
pub const SCHEMA_VERSION: u64 = 1;

const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const FRAMEWORKS: TableDefinition<&str, &[u8]> = TableDefinition::new("frameworks");
const REMOVED: TableDefinition<&str, u64> = TableDefinition::new("removed_frameworks");
const WEIGHTS: TableDefinition<&str, f64> = TableDefinition::new("role_weights");
const AGENTS: TableDefinition<&str, &[u8]> = TableDefinition::new("agents");
/// Role path to its [`StoredQuota`] as JSON; added without a version bump, like `agents`.
const QUOTAS: TableDefinition<&str, &[u8]> = TableDefinition::new("role_quotas");
/// `{agent id}/{role path}` to the agent's dynamic reservation for the role, as
/// [`protocol::Resources`] JSON; added without a version bump, like `role_quotas`.
const RESERVATIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("reservations");

/// A durable registry backend: read everything once at start, then apply changes in order.
/// The [`Writer`] thread is its one user.
pub trait Registry: Send + 'static {
    /// Reads everything.
    fn load(&self) -> Result<Snapshot, StoreError>;
    /// Applies `changes` in order; `Ok` once they are durable.
    fn apply(&self, changes: &[Change]) -> Result<(), StoreError>;
    /// Where it is, for a backup document.
    fn source(&self) -> backup::Source;
}

impl Registry for Box<dyn Registry> {
    fn load(&self) -> Result<Snapshot, StoreError> {
        (**self).load()
    }
    fn apply(&self, changes: &[Change]) -> Result<(), StoreError> {
        (**self).apply(changes)
    }
    fn source(&self) -> backup::Source {
        (**self).source()
    }
}

impl Registry for Store {
    fn load(&self) -> Result<Snapshot, StoreError> {
        Store::load(self)
    }
    fn apply(&self, changes: &[Change]) -> Result<(), StoreError> {
        Store::apply(self, changes)
    }
    fn source(&self) -> backup::Source {
        backup::Source {
            backend: backup::Backend::Redb,
            location: self.path.display().to_string(),
            etcd_prefix: None,
            etcd_revision: None,
        }
    }
}

/// The store could not be opened, read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Another process (another coordinator) has the file open.
    #[error(
        "registry {path} is in use by another process (another coordinator with this data dir?)"
    )]
    InUse {
        /// The file.
        path: PathBuf,
    },
    /// redb failed (I/O, a corrupt file...).
    #[error("registry {path}: {error}")]
    Db {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        error: Box<redb::Error>,
    },
    /// The etcd backend failed (unreachable, an error answer, a bad value).
    #[error("registry on etcd: {0}")]
    Etcd(String),
    /// An etcd write failed its fencing compare: this coordinator is no longer the leader and
    /// wrote nothing.
    #[error(
        "registry on etcd: this coordinator is no longer the leader (fenced); nothing written"
    )]
    Fenced,
    /// The file was written by a coordinator with another layout.
    #[error(
        "registry {path}: schema version {found}, this coordinator reads version {SCHEMA_VERSION}"
    )]
    Schema {
        /// The file.
        path: PathBuf,
        /// The version in the file.
        found: u64,
    },
    /// Writes were made to fail by the test hook ([`Store::write_failures`]).
    #[error("registry {path}: write refused by the test hook")]
    Injected {
        /// The file.
        path: PathBuf,
    },
    /// There is no registry file (only [`Store::open_existing`], which creates none).
    #[error("registry {path} does not exist (is --data-dir right?)")]
    NotFound {
        /// The file.
        path: PathBuf,
    },
    /// A stored value does not parse.
    #[error("registry {path}: bad {what}: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Which record.
        what: String,
        /// Why.
        reason: String,
    },
}

/// The open registry file.
pub struct Store {
    db: Database,
    path: PathBuf,
    /// Test hook: while set, [`Store::apply`] fails and writes nothing.
    fail_writes: Arc<AtomicBool>,
}

/// Test hook: a switch that makes every later write of one [`Store`] fail (and write nothing)
/// while it is on, as a full disk would. Cloning shares the switch.
#[derive(Debug, Clone)]
pub struct WriteFailures(Arc<AtomicBool>);

impl WriteFailures {
    /// Turns failing writes on or off.
    pub fn set(&self, fail: bool) {
        self.0.store(fail, Ordering::SeqCst);
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

impl Store {
    /// Opens the registry at `path`, creating it (and its directory) if it does not exist.
    /// Fails if another process holds it, or it has another schema version.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| Self::db_error(path, e))?;
        }
        let db = Database::create(path).map_err(|e| Self::db_error(path, e))?;
        let store = Self {
            db,
            path: path.to_path_buf(),
            fail_writes: Arc::new(AtomicBool::new(false)),
        };
        store.init()?;
        Ok(store)
    }

    /// Opens the registry at `path` only if it exists, writing nothing (for a backup): fails
    /// with [`StoreError::NotFound`] if there is no file, [`StoreError::InUse`] if another
    /// process holds it, [`StoreError::Schema`] if it has another schema version.
    pub fn open_existing(path: &Path) -> Result<Self, StoreError> {
        if !path.is_file() {
            return Err(StoreError::NotFound {
                path: path.to_path_buf(),
            });
        }
        let db = Database::open(path).map_err(|e| Self::db_error(path, e))?;
        let store = Self {
            db,
            path: path.to_path_buf(),
            fail_writes: Arc::new(AtomicBool::new(false)),
        };
        let txn = store.db.begin_read().map_err(|e| store.err(e))?;
        let found = match txn.open_table(META) {
            Ok(meta) => meta
                .get("schema")
                .map_err(|e| store.err(e))?
                .map(|v| v.value()),
            Err(redb::TableError::TableDoesNotExist(_)) => None,
            Err(e) => return Err(store.err(e)),
        };
        match found {
            Some(SCHEMA_VERSION) => Ok(store),
            Some(found) => Err(StoreError::Schema {
                path: path.to_path_buf(),
                found,
            }),
            None => Err(store.corrupt("schema version".into(), "none in the meta table")),
        }
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Test hook: the switch that makes this store's writes fail on demand.
    pub fn write_failures(&self) -> WriteFailures {
        WriteFailures(Arc::clone(&self.fail_writes))
    }

    fn db_error(path: &Path, e: impl Into<redb::Error>) -> StoreError {
        match e.into() {
            redb::Error::DatabaseAlreadyOpen => StoreError::InUse {
                path: path.to_path_buf(),
            },
            error => StoreError::Db {
                path: path.to_path_buf(),
                error: Box::new(error),
            },
        }
    }

    fn err(&self, e: impl Into<redb::Error>) -> StoreError {
        Self::db_error(&self.path, e)
    }

    /// Creates the tables and the schema version, or checks the version.
    fn init(&self) -> Result<(), StoreError> {
        let txn = self.db.begin_write().map_err(|e| self.err(e))?;
        {
            let mut meta = txn.open_table(META).map_err(|e| self.err(e))?;
            let found = meta
                .get("schema")
                .map_err(|e| self.err(e))?
                .map(|v| v.value());
            match found {
                Some(v) if v != SCHEMA_VERSION => {
                    return Err(StoreError::Schema {
                        path: self.path.clone(),
                        found: v,
                    })
                }
                Some(_) => {}
                None => {
                    meta.insert("schema", SCHEMA_VERSION)
                        .map_err(|e| self.err(e))?;
                }
            }
            txn.open_table(FRAMEWORKS).map_err(|e| self.err(e))?;
            txn.open_table(REMOVED).map_err(|e| self.err(e))?;
            txn.open_table(WEIGHTS).map_err(|e| self.err(e))?;
            txn.open_table(AGENTS).map_err(|e| self.err(e))?;
            txn.open_table(QUOTAS).map_err(|e| self.err(e))?;
            txn.open_table(RESERVATIONS).map_err(|e| self.err(e))?;
        }
        txn.commit().map_err(|e| self.err(e))
    }

    /// Reads everything.
    pub fn load(&self) -> Result<Snapshot, StoreError> {
        let txn = self.db.begin_read().map_err(|e| self.err(e))?;
        let mut snap = Snapshot::default();

        if let Some(table) = self.read_table(&txn, FRAMEWORKS)? {
            for entry in table.iter().map_err(|e| self.err(e))? {
                let (key, value) = entry.map_err(|e| self.err(e))?;
                let fw: StoredFramework = serde_json::from_slice(value.value())
                    .map_err(|e| self.corrupt(format!("framework {}", key.value()), e))?;
                snap.frameworks.push(fw);
            }
        }

        if let Some(table) = self.read_table(&txn, REMOVED)? {
            for entry in table.iter().map_err(|e| self.err(e))? {
                let (key, _) = entry.map_err(|e| self.err(e))?;
                let id: FrameworkId = key
                    .value()
                    .parse()
                    .map_err(|e| self.corrupt(format!("removed framework {}", key.value()), e))?;
                snap.removed_frameworks.push(id);
            }
        }

        if let Some(table) = self.read_table(&txn, WEIGHTS)? {
            for entry in table.iter().map_err(|e| self.err(e))? {
                let (key, value) = entry.map_err(|e| self.err(e))?;
                let what = || format!("weight of role {}", key.value());
                let role = RolePath::new(key.value()).map_err(|e| self.corrupt(what(), e))?;
                let weight = Weight::new(value.value()).map_err(|e| self.corrupt(what(), e))?;
                snap.weights.push((role, weight));
            }
        }

        if let Some(table) = self.read_table(&txn, AGENTS)? {
            for entry in table.iter().map_err(|e| self.err(e))? {
                let (key, value) = entry.map_err(|e| self.err(e))?;
                let agent: StoredAgent = serde_json::from_slice(value.value())
                    .map_err(|e| self.corrupt(format!("agent {}", key.value()), e))?;
                snap.agents.push(agent);
            }
        }

        if let Some(table) = self.read_table(&txn, QUOTAS)? {
            for entry in table.iter().map_err(|e| self.err(e))? {
                let (key, value) = entry.map_err(|e| self.err(e))?;
                let what = || format!("quota of role {}", key.value());
                let role = RolePath::new(key.value()).map_err(|e| self.corrupt(what(), e))?;
                let quota: StoredQuota =
                    serde_json::from_slice(value.value()).map_err(|e| self.corrupt(what(), e))?;
                snap.quotas.push((role, quota));
            }
        }

        if let Some(table) = self.read_table(&txn, RESERVATIONS)? {
            for entry in table.iter().map_err(|e| self.err(e))? {
                let (key, value) = entry.map_err(|e| self.err(e))?;
                let what = || format!("reservation {}", key.value());
                let (agent, role) =
                    parse_reservation_key(key.value()).map_err(|e| self.corrupt(what(), e))?;
                let res: protocol::Resources =
                    serde_json::from_slice(value.value()).map_err(|e| self.corrupt(what(), e))?;
                snap.reservations.push((agent, role, res));
            }
        }
        Ok(snap)
    }

    /// `def` in the read transaction `txn`, `None` if the file has no such table (a file of
    /// an older layout opened without [`Store::open`] creating it).
    fn read_table<V: redb::Value + 'static>(
        &self,
        txn: &redb::ReadTransaction,
        def: TableDefinition<'static, &'static str, V>,
    ) -> Result<Option<redb::ReadOnlyTable<&'static str, V>>, StoreError> {
        match txn.open_table(def) {
            Ok(table) => Ok(Some(table)),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
            Err(e) => Err(self.err(e)),
        }
    }

    fn corrupt(&self, what: String, reason: impl std::fmt::Display) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            what,
            reason: reason.to_string(),
        }
    }

    /// Applies `changes` in order, in one durable (fsync'd) transaction: all or none.
    pub fn apply(&self, changes: &[Change]) -> Result<(), StoreError> {
        if changes.is_empty() {
            return Ok(());
        }
        if self.fail_writes.load(Ordering::SeqCst) {
            return Err(StoreError::Injected {
                path: self.path.clone(),
            });
        }
        let txn = self.db.begin_write().map_err(|e| self.err(e))?;
        self.write_changes(&txn, changes)?;
        txn.commit().map_err(|e| self.err(e))
    }

    /// Replaces everything the registry holds with `snapshot`, in one durable transaction:
    /// every table emptied, then the snapshot's records written (all or none). The schema
    /// version stays this coordinator's.
    pub fn replace(&self, snapshot: &Snapshot) -> Result<(), StoreError> {
        let txn = self.db.begin_write().map_err(|e| self.err(e))?;
        {
            let mut frameworks = txn.open_table(FRAMEWORKS).map_err(|e| self.err(e))?;
            frameworks.retain(|_, _| false).map_err(|e| self.err(e))?;
            let mut agents = txn.open_table(AGENTS).map_err(|e| self.err(e))?;
            agents.retain(|_, _| false).map_err(|e| self.err(e))?;
            let mut quotas = txn.open_table(QUOTAS).map_err(|e| self.err(e))?;
            quotas.retain(|_, _| false).map_err(|e| self.err(e))?;
            let mut reservations = txn.open_table(RESERVATIONS).map_err(|e| self.err(e))?;
            reservations.retain(|_, _| false).map_err(|e| self.err(e))?;
            let mut removed = txn.open_table(REMOVED).map_err(|e| self.err(e))?;
            removed.retain(|_, _| false).map_err(|e| self.err(e))?;
            let mut weights = txn.open_table(WEIGHTS).map_err(|e| self.err(e))?;
            weights.retain(|_, _| false).map_err(|e| self.err(e))?;
        }
        self.write_changes(&txn, &snapshot.changes())?;
        txn.commit().map_err(|e| self.err(e))
    }

    /// Writes `changes` in order into the open transaction `txn`.
    fn write_changes(
        &self,
        txn: &redb::WriteTransaction,
        changes: &[Change],
    ) -> Result<(), StoreError> {
        {
            let mut frameworks = txn.open_table(FRAMEWORKS).map_err(|e| self.err(e))?;
            let mut removed = txn.open_table(REMOVED).map_err(|e| self.err(e))?;
            let mut weights = txn.open_table(WEIGHTS).map_err(|e| self.err(e))?;
            let mut agents = txn.open_table(AGENTS).map_err(|e| self.err(e))?;
            let mut quotas = txn.open_table(QUOTAS).map_err(|e| self.err(e))?;
            let mut reservations = txn.open_table(RESERVATIONS).map_err(|e| self.err(e))?;
            for change in changes {
                match change {
                    Change::PutFramework(fw) => {
                        let value = serde_json::to_vec(fw)
                            .map_err(|e| self.corrupt(format!("framework {}", fw.id), e))?;
                        frameworks
                            .insert(fw.id.to_string().as_str(), value.as_slice())
                            .map_err(|e| self.err(e))?;
                    }
                    Change::RemoveFramework(id) => {
                        let key = id.to_string();
                        frameworks.remove(key.as_str()).map_err(|e| self.err(e))?;
                        removed.insert(key.as_str(), 1).map_err(|e| self.err(e))?;
                    }
                    Change::ForgetFramework(id) => {
                        frameworks
                            .remove(id.to_string().as_str())
                            .map_err(|e| self.err(e))?;
                    }
                    Change::SetWeight(role, weight) => {
                        weights
                            .insert(role.as_str(), weight.get())
                            .map_err(|e| self.err(e))?;
                    }
                    Change::SetQuota(role, quota) if quota.is_empty() => {
                        quotas.remove(role.as_str()).map_err(|e| self.err(e))?;
                    }
                    Change::SetQuota(role, quota) => {
                        let value = serde_json::to_vec(quota)
                            .map_err(|e| self.corrupt(format!("quota of role {role}"), e))?;
                        quotas
                            .insert(role.as_str(), value.as_slice())
                            .map_err(|e| self.err(e))?;
                    }
                    Change::PutAgent(agent) => {
                        let value = serde_json::to_vec(agent)
                            .map_err(|e| self.corrupt(format!("agent {}", agent.id), e))?;
                        agents
                            .insert(agent.id.to_string().as_str(), value.as_slice())
                            .map_err(|e| self.err(e))?;
                    }
                    Change::RemoveAgent(id) => {
                        agents
                            .remove(id.to_string().as_str())
                            .map_err(|e| self.err(e))?;
                    }
                    Change::SetReservation(agent, role, res) if res.is_empty() => {
                        reservations
                            .remove(reservation_key(*agent, role).as_str())
                            .map_err(|e| self.err(e))?;
                    }
                    Change::SetReservation(agent, role, res) => {
                        let key = reservation_key(*agent, role);
                        let value = serde_json::to_vec(res)
                            .map_err(|e| self.corrupt(format!("reservation {key}"), e))?;
                        reservations
                            .insert(key.as_str(), value.as_slice())
                            .map_err(|e| self.err(e))?;
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::AgentId;

    fn framework(name: &str, role: &str) -> StoredFramework {
        StoredFramework {
            id: FrameworkId::new(),
            name: name.into(),
            role: RolePath::new(role).unwrap(),
            failover_timeout_s: 30.0,
            registered_at: protocol::now(),
            owner: None,
            gpu_resources: false,
            partition_timeout_s: None,
        }
    }

    #[test]
    fn reservations_are_stored_replaced_and_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.redb");
        let (a, b) = (AgentId::new(), AgentId::new());
        let eng = RolePath::new("eng/batch").unwrap();
        let ops = RolePath::new("ops").unwrap();
        let r = |s: &str| s.parse::<protocol::Resources>().unwrap();
        {
            let store = Store::open(&path).unwrap();
            store
                .apply(&[
                    Change::SetReservation(a, eng.clone(), r("cpus=1")),
                    Change::SetReservation(a, eng.clone(), r("cpus=2")),
                    Change::SetReservation(b, ops.clone(), r("mem=10")),
                    Change::SetReservation(b, ops.clone(), protocol::Resources::new()),
                ])
                .unwrap();
        }
        let store = Store::open(&path).unwrap();
        assert_eq!(
            store.load().unwrap().reservations,
            vec![(a, eng, r("cpus=2"))]
        );
    }

    #[test]
    fn quotas_are_stored_replaced_and_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.redb");
        let role = RolePath::new("eng/batch").unwrap();
        let q = StoredQuota {
            guarantee: Some("cpus=2".parse().unwrap()),
            limit: Some("cpus=4,mem=512".parse().unwrap()),
        };
        let ops = RolePath::new("ops").unwrap();
        {
            let store = Store::open(&path).unwrap();
            store
                .apply(&[
                    Change::SetQuota(role.clone(), StoredQuota::default()),
                    Change::SetQuota(ops.clone(), q.clone()),
                    Change::SetQuota(role.clone(), q.clone()),
                    Change::SetQuota(ops.clone(), StoredQuota::default()),
                ])
                .unwrap();
        }
        let store = Store::open(&path).unwrap();
        assert_eq!(store.load().unwrap().quotas, vec![(role, q)]);
    }

    #[test]
    fn changes_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/registry.redb");
        let (a, b) = (framework("a", "eng/batch"), framework("b", "ops"));
        let weight = Weight::new(2.5).unwrap();
        {
            let store = Store::open(&path).unwrap();
            assert_eq!(store.load().unwrap(), Snapshot::default());
            store
                .apply(&[
                    Change::PutFramework(a.clone()),
                    Change::PutFramework(b.clone()),
                    Change::SetWeight(RolePath::new("eng").unwrap(), weight),
                ])
                .unwrap();
            let renamed = StoredFramework {
                name: "a2".into(),
                ..a.clone()
            };
            store
                .apply(&[Change::PutFramework(renamed), Change::RemoveFramework(b.id)])
                .unwrap();
        }
        let store = Store::open(&path).unwrap();
        let snap = store.load().unwrap();
        assert_eq!(snap.frameworks.len(), 1);
        assert_eq!(snap.frameworks[0].id, a.id);
        assert_eq!(snap.frameworks[0].name, "a2");
        assert_eq!(snap.frameworks[0].role, a.role);
        assert_eq!(snap.removed_frameworks, vec![b.id]);
        assert_eq!(snap.weights, vec![(RolePath::new("eng").unwrap(), weight)]);
    }

    #[test]
    fn agents_are_kept_and_removed_and_a_file_without_their_table_has_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.redb");
        let agent = |host: &str| StoredAgent {
            id: AgentId::new(),
            hostname: host.into(),
            endpoint: format!("http://{host}:5051"),
            last_seen: protocol::now(),
            drain_deadline: None,
        };
        let (a, b) = (agent("a"), agent("b"));
        {
            let store = Store::open(&path).unwrap();
            // A version-1 file written before agents were kept has no `agents` table.
            let txn = store.db.begin_write().unwrap();
            txn.delete_table(AGENTS).unwrap();
            txn.commit().unwrap();
        }
        let store = Store::open(&path).unwrap();
        assert_eq!(store.load().unwrap().agents, vec![]);
        store
            .apply(&[Change::PutAgent(a.clone()), Change::PutAgent(b.clone())])
            .unwrap();
        store.apply(&[Change::RemoveAgent(a.id)]).unwrap();
        drop(store);
        let snap = Store::open(&path).unwrap().load().unwrap();
        assert_eq!(snap.agents, vec![b]);
    }

    #[test]
    fn a_failing_write_writes_nothing_and_forgetting_is_not_removing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.redb");
        let store = Store::open(&path).unwrap();
        let (a, b) = (framework("a", "eng"), framework("b", "eng"));
        store.apply(&[Change::PutFramework(a.clone())]).unwrap();
        let failures = store.write_failures();
        failures.set(true);
        let err = store
            .apply(&[
                Change::PutFramework(b.clone()),
                Change::RemoveFramework(a.id),
            ])
            .unwrap_err();
        assert!(matches!(err, StoreError::Injected { .. }), "{err}");
        assert_eq!(store.load().unwrap().frameworks, vec![a.clone()]);
        failures.set(false);
        store.apply(&[Change::ForgetFramework(a.id)]).unwrap();
        assert_eq!(store.load().unwrap(), Snapshot::default());
    }

    #[test]
    fn the_owner_is_kept_and_older_records_have_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.redb");
        let owned = StoredFramework {
            owner: Some("team-a".into()),
            ..framework("a", "eng")
        };
        {
            let store = Store::open(&path).unwrap();
            store.apply(&[Change::PutFramework(owned.clone())]).unwrap();
        }
        let snap = Store::open(&path).unwrap().load().unwrap();
        assert_eq!(snap.frameworks, vec![owned.clone()]);
        // A record written before owners existed has no "owner" key.
        let mut old = serde_json::to_value(&owned).unwrap();
        old.as_object_mut().unwrap().remove("owner");
        let read: StoredFramework = serde_json::from_value(old).unwrap();
        assert_eq!(read.owner, None);
    }

    #[test]
    fn a_second_opener_and_a_foreign_schema_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.redb");
        {
            let store = Store::open(&path).unwrap();
            let err = Store::open(&path).unwrap_err();
            assert!(matches!(err, StoreError::InUse { .. }), "{err}");
            // Pretend a later coordinator wrote the file.
            let txn = store.db.begin_write().unwrap();
            txn.open_table(META)
                .unwrap()
                .insert("schema", SCHEMA_VERSION + 1)
                .unwrap();
            txn.commit().unwrap();
        }
        let err = Store::open(&path).unwrap_err();
        assert!(
            matches!(err, StoreError::Schema { found, .. } if found == SCHEMA_VERSION + 1),
            "{err}"
        );
        assert!(err.to_string().contains("schema version 2"), "{err}");
    }

    #[test]
    fn replace_leaves_exactly_the_snapshot_and_open_existing_creates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.redb");
        let err = Store::open_existing(&path).unwrap_err();
        assert!(matches!(err, StoreError::NotFound { .. }), "{err}");
        assert!(!path.exists());
        let (old, kept) = (framework("old", "eng"), framework("kept", "ops"));
        let agent = AgentId::new();
        let snapshot = Snapshot {
            frameworks: vec![kept.clone()],
            removed_frameworks: vec![FrameworkId::new()],
            weights: vec![(RolePath::new("ops").unwrap(), Weight::new(2.0).unwrap())],
            agents: vec![],
            quotas: vec![(
                RolePath::new("ops").unwrap(),
                StoredQuota {
                    guarantee: None,
                    limit: Some("cpus=3".parse().unwrap()),
                },
            )],
            reservations: vec![(
                agent,
                RolePath::new("ops").unwrap(),
                "mem=5".parse().unwrap(),
            )],
        };
        {
            let store = Store::open(&path).unwrap();
            store
                .apply(&[
                    Change::PutFramework(old.clone()),
                    Change::RemoveFramework(FrameworkId::new()),
                    Change::SetWeight(RolePath::new("eng").unwrap(), Weight::new(5.0).unwrap()),
                    Change::SetReservation(
                        agent,
                        RolePath::new("eng").unwrap(),
                        "cpus=1".parse().unwrap(),
                    ),
                ])
                .unwrap();
            store.replace(&snapshot).unwrap();
        }
        let store = Store::open_existing(&path).unwrap();
        assert_eq!(store.load().unwrap(), snapshot);
        // Held by this store: a second reader is refused, as beside a running coordinator.
        let err = Store::open_existing(&path).unwrap_err();
        assert!(matches!(err, StoreError::InUse { .. }), "{err}");
    }

    #[test]
    fn garbage_is_not_a_registry() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.redb");
        std::fs::write(&path, b"not a database at all, just some bytes").unwrap();
        let err = Store::open(&path).unwrap_err();
        assert!(err.to_string().contains("registry.redb"), "{err}");
    }

    #[test]
    fn a_bad_stored_value_names_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.redb");
        let store = Store::open(&path).unwrap();
        let txn = store.db.begin_write().unwrap();
        txn.open_table(FRAMEWORKS)
            .unwrap()
            .insert("x", b"{not json".as_slice())
            .unwrap();
        txn.commit().unwrap();
        let err = store.load().unwrap_err();
        assert!(err.to_string().contains("bad framework x"), "{err}");
    }
}
