//! [`Store`]: the service's durable state in one redb file — the framework id, every job's
//! spec, and every attempt with its last known state — and [`Store::load`], which rebuilds
//! a [`Book`] from it after a restart.
//!
//! Attempts are written before their launch is sent, so a restarted service knows every task
//! it may have launched; the coordinator is then asked about each one that had not ended.

use std::path::Path;

use protocol::FrameworkId;
use redb::{Database, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

use crate::book::{AttemptRecord, Book, Job, Millis};
use crate::spec::{JobSpec, RawSpec, ANONYMOUS};

const META: TableDefinition<&str, &str> = TableDefinition::new("meta");
const JOBS: TableDefinition<&str, &[u8]> = TableDefinition::new("jobs");
const ATTEMPTS: TableDefinition<(&str, u32, u32), &[u8]> = TableDefinition::new("attempts");

const FRAMEWORK_ID: &str = "framework_id";

/// A store that failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be opened, read or written.
    #[error("job store: {0}")]
    Db(Box<redb::Error>),
    /// A record could not be encoded or decoded.
    #[error("job store record: {0}")]
    Record(#[from] serde_json::Error),
    /// A stored spec no longer passes the checks.
    #[error("stored job {name:?}: {message}")]
    Spec {
        /// The job.
        name: String,
        /// What is wrong.
        message: String,
    },
}

fn db<E: Into<redb::Error>>(e: E) -> StoreError {
    StoreError::Db(Box::new(e.into()))
}

/// What is stored of a job besides its attempts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// Its submission order.
    pub seq: u64,
    /// When it was submitted.
    pub submitted_ms: Millis,
    /// Whether it was stopped.
    #[serde(default)]
    pub stopped: bool,
    /// The spec as submitted, or as last updated.
    pub spec: RawSpec,
    /// The spec's generation (one more with each update that changed what replicas run).
    #[serde(default)]
    pub generation: u32,
    /// Who submitted it (absent in stores written before users existed: [`ANONYMOUS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

impl JobRecord {
    /// What to store of a job submitted now as the `seq`th.
    pub fn new(spec: &JobSpec, seq: u64, submitted_ms: Millis) -> Self {
        Self {
            seq,
            submitted_ms,
            stopped: false,
            spec: spec.raw.clone(),
            generation: 0,
            owner: Some(spec.owner.clone()),
        }
    }

    /// What to store of `job`, `stopped` or not.
    pub fn of(job: &Job, stopped: bool) -> Self {
        Self {
            stopped,
            generation: job.generation(),
            ..Self::new(job.spec(), job.seq(), job.submitted_ms())
        }
    }
}

/// The redb file.
#[derive(Debug)]
pub struct Store {
    db: Database,
}

impl Store {
    /// Opens (or creates) the store at `path`.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let database = Database::create(path).map_err(db)?;
        let txn = database.begin_write().map_err(db)?;
        txn.open_table(META).map_err(db)?;
        txn.open_table(JOBS).map_err(db)?;
        txn.open_table(ATTEMPTS).map_err(db)?;
        txn.commit().map_err(db)?;
        Ok(Self { db: database })
    }

    /// The framework id registered before, if any.
    pub fn framework_id(&self) -> Result<Option<FrameworkId>, StoreError> {
        let txn = self.db.begin_read().map_err(db)?;
        let t = txn.open_table(META).map_err(db)?;
        let Some(v) = t.get(FRAMEWORK_ID).map_err(db)? else {
            return Ok(None);
        };
        Ok(v.value().parse().ok())
    }

    /// Remembers the framework id.
    pub fn set_framework_id(&self, id: FrameworkId) -> Result<(), StoreError> {
        let txn = self.db.begin_write().map_err(db)?;
        {
            let mut t = txn.open_table(META).map_err(db)?;
            t.insert(FRAMEWORK_ID, id.to_string().as_str())
                .map_err(db)?;
        }
        txn.commit().map_err(db)
    }

    /// Forgets the framework id (the coordinator removed the framework).
    pub fn clear_framework_id(&self) -> Result<(), StoreError> {
        let txn = self.db.begin_write().map_err(db)?;
        {
            let mut t = txn.open_table(META).map_err(db)?;
            t.remove(FRAMEWORK_ID).map_err(db)?;
        }
        txn.commit().map_err(db)
    }

    /// Writes (or rewrites) a job's record.
    pub fn put_job(&self, name: &str, record: &JobRecord) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec(record)?;
        let txn = self.db.begin_write().map_err(db)?;
        {
            let mut t = txn.open_table(JOBS).map_err(db)?;
            t.insert(name, bytes.as_slice()).map_err(db)?;
        }
        txn.commit().map_err(db)
    }

    /// A job's record.
    pub fn job(&self, name: &str) -> Result<Option<JobRecord>, StoreError> {
        let txn = self.db.begin_read().map_err(db)?;
        let t = txn.open_table(JOBS).map_err(db)?;
        let Some(v) = t.get(name).map_err(db)? else {
            return Ok(None);
        };
        Ok(Some(serde_json::from_slice(v.value())?))
    }

    /// Forgets a job and its attempts.
    pub fn delete_job(&self, name: &str) -> Result<(), StoreError> {
        let txn = self.db.begin_write().map_err(db)?;
        {
            let mut jobs = txn.open_table(JOBS).map_err(db)?;
            jobs.remove(name).map_err(db)?;
            let mut attempts = txn.open_table(ATTEMPTS).map_err(db)?;
            let keys: Vec<(u32, u32)> = attempts
                .range((name, 0, 0)..=(name, u32::MAX, u32::MAX))
                .map_err(db)?
                .map(|item| item.map(|(k, _)| (k.value().1, k.value().2)))
                .collect::<Result<_, _>>()
                .map_err(db)?;
            for (index, attempt) in keys {
                attempts.remove((name, index, attempt)).map_err(db)?;
            }
        }
        txn.commit().map_err(db)
    }

    /// Writes attempts' latest records, all in one transaction.
    pub fn put_attempts(&self, records: &[AttemptRecord]) -> Result<(), StoreError> {
        if records.is_empty() {
            return Ok(());
        }
        let txn = self.db.begin_write().map_err(db)?;
        {
            let mut t = txn.open_table(ATTEMPTS).map_err(db)?;
            for r in records {
                let bytes = serde_json::to_vec(r)?;
                t.insert((r.job.as_str(), r.index, r.attempt), bytes.as_slice())
                    .map_err(db)?;
            }
        }
        txn.commit().map_err(db)
    }

    /// Every attempt of a job, by index and attempt.
    pub fn attempts(&self, name: &str) -> Result<Vec<AttemptRecord>, StoreError> {
        let txn = self.db.begin_read().map_err(db)?;
        let t = txn.open_table(ATTEMPTS).map_err(db)?;
        let mut out = Vec::new();
        for item in t
            .range((name, 0, 0)..=(name, u32::MAX, u32::MAX))
            .map_err(db)?
        {
            let (_, v) = item.map_err(db)?;
            out.push(serde_json::from_slice(v.value())?);
        }
        Ok(out)
    }

    /// Rebuilds the book: jobs in submission order, each followed by its attempts.
    pub fn load(&self, aging_ms: Millis, now: Millis) -> Result<Book, StoreError> {
        let mut jobs: Vec<(String, JobRecord)> = {
            let txn = self.db.begin_read().map_err(db)?;
            let t = txn.open_table(JOBS).map_err(db)?;
            let mut out = Vec::new();
            for item in t.iter().map_err(db)? {
                let (k, v) = item.map_err(db)?;
                out.push((k.value().to_owned(), serde_json::from_slice(v.value())?));
            }
            out
        };
        jobs.sort_by_key(|(_, r)| r.seq);
        let mut book = Book::new(aging_ms);
        for (name, record) in jobs {
            let mut spec = record.spec.check().map_err(|e| StoreError::Spec {
                name: name.clone(),
                message: e.to_string(),
            })?;
            spec.owner = record.owner.unwrap_or_else(|| ANONYMOUS.to_owned());
            book.restore_job(spec, record.seq, record.submitted_ms, record.stopped, now);
            book.restore_generation(&name, record.generation);
            for attempt in self.attempts(&name)? {
                book.restore_attempt(&attempt, now);
            }
        }
        Ok(book)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use protocol::{AgentId, TaskState};

    use super::*;
    use crate::book::task_id;

    #[test]
    fn a_book_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.redb");
        let spec = crate::spec::parse_any(
            "name = \"a\"\ncommand = \"true\"\ncount = 2\n[resources]\ncpus = 1\n",
        )
        .unwrap();
        let id = FrameworkId::new();
        {
            let store = Store::open(&path).unwrap();
            assert_eq!(store.framework_id().unwrap(), None);
            store.set_framework_id(id).unwrap();
            let mut book = Book::default();
            book.submit(spec.clone(), 5).unwrap();
            store.put_job("a", &JobRecord::new(&spec, 0, 5)).unwrap();
            let agent = AgentId::new();
            let launched: Vec<_> = book
                .candidates(5, 10)
                .iter()
                .map(|c| book.launched(c, agent, 5).unwrap())
                .collect();
            store.put_attempts(&launched).unwrap();
            let done = book
                .update(&task_id("a", 0, 0), TaskState::Finished, Some(0), None, 6)
                .unwrap();
            store.put_attempts(&[done]).unwrap();
        }
        let store = Store::open(&path).unwrap();
        assert_eq!(store.framework_id().unwrap(), Some(id));
        let book = store.load(1000, 10).unwrap();
        assert_eq!(book.in_flight(), [task_id("a", 1, 0)]);
        assert_eq!(book.summaries()[0].tasks.succeeded, 1);
        store.delete_job("a").unwrap();
        assert!(store.attempts("a").unwrap().is_empty());
        assert!(store.load(1000, 10).unwrap().summaries().is_empty());
    }
}
