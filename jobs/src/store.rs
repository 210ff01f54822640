//! [`Store`]: the service's durable state in one redb file — the framework id, every job's
//! spec, and every attempt with its last known state — and [`Store::load`], which rebuilds
//! a [`Book`] from it after a restart.
//!
//! Every change is a list of [`Write`]s stored in one transaction ([`Store::write`]); the
//! service's writer (`writer`) is its one caller. Attempts are written before their launch is
//! sent, so a restarted service knows every task it may have launched; the coordinator is
//! then asked about each one that had not ended.

use std::path::Path;

use protocol::FrameworkId;
use redb::{Database, ReadableTable, TableDefinition};

use crate::book::{AttemptRecord, Book, Effect, JobRecord, Millis};
use crate::spec::ANONYMOUS;

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
    /// The store was closed (the service is stopping) before the write.
    #[error("the jobs store is closed")]
    Closed,
    /// A write refused on purpose, by a test.
    #[cfg(test)]
    #[error("a write refused by a test")]
    Refused,
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

/// One change to the store ([`Store::write`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// Remember the framework id, or forget it (`None`: the coordinator removed the framework).
    FrameworkId(Option<FrameworkId>),
    /// Write (or rewrite) a job's record.
    Job {
        /// The job.
        name: String,
        /// Its record.
        record: Box<JobRecord>,
    },
    /// Forget a job and its attempts.
    ForgetJob(String),
    /// Write an attempt's latest record.
    Attempt(AttemptRecord),
}

impl Write {
    /// The write `effect` asks for, if any. An attempt's end ([`Effect::StoreEnd`]) is an
    /// [`Write::Attempt`] like any other; the writer decides when to store it.
    pub fn of(effect: Effect) -> Option<Self> {
        match effect {
            Effect::StoreJob { name, record } => Some(Self::Job { name, record }),
            Effect::ForgetJob(name) => Some(Self::ForgetJob(name)),
            Effect::StoreAttempt(r) | Effect::StoreEnd(r) => Some(Self::Attempt(r)),
            Effect::Kill { .. } | Effect::Changed(_) => None,
        }
    }
}

/// The redb file.
#[derive(Debug)]
pub struct Store {
    db: Database,
    /// Refuses every write, for the tests of what follows.
    #[cfg(test)]
    pub(crate) refuse_writes: bool,
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
        Ok(Self {
            db: database,
            #[cfg(test)]
            refuse_writes: false,
        })
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

    /// Carries out `writes` in order, in one transaction: all of them are stored, or none.
    pub fn write(&self, writes: &[Write]) -> Result<(), StoreError> {
        if writes.is_empty() {
            return Ok(());
        }
        #[cfg(test)]
        if self.refuse_writes {
            return Err(StoreError::Refused);
        }
        let txn = self.db.begin_write().map_err(db)?;
        {
            let mut meta = txn.open_table(META).map_err(db)?;
            let mut jobs = txn.open_table(JOBS).map_err(db)?;
            let mut attempts = txn.open_table(ATTEMPTS).map_err(db)?;
            for w in writes {
                match w {
                    Write::FrameworkId(Some(id)) => {
                        meta.insert(FRAMEWORK_ID, id.to_string().as_str())
                            .map_err(db)?;
                    }
                    Write::FrameworkId(None) => {
                        meta.remove(FRAMEWORK_ID).map_err(db)?;
                    }
                    Write::Job { name, record } => {
                        let bytes = serde_json::to_vec(record)?;
                        jobs.insert(name.as_str(), bytes.as_slice()).map_err(db)?;
                    }
                    Write::ForgetJob(name) => {
                        jobs.remove(name.as_str()).map_err(db)?;
                        let name = name.as_str();
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
                    Write::Attempt(r) => {
                        let bytes = serde_json::to_vec(r)?;
                        attempts
                            .insert((r.job.as_str(), r.index, r.attempt), bytes.as_slice())
                            .map_err(db)?;
                    }
                }
            }
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
            spec.owner = record.owner.clone().unwrap_or_else(|| ANONYMOUS.to_owned());
            book.restore(spec, &record, &self.attempts(&name)?, now);
        }
        Ok(book)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use protocol::{AgentId, TaskState};

    use super::*;
    use crate::book::{task_id, Input};

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
            let mut book = Book::default();
            let mut writes = vec![Write::FrameworkId(Some(id))];
            let mut handle = |book: &mut Book, input: Input, now: Millis| {
                let effects = book.handle(input, now).unwrap();
                writes.extend(effects.into_iter().filter_map(Write::of));
            };
            handle(&mut book, Input::Submit(spec), 5);
            let agent = AgentId::new();
            let placed = book.candidates(5, 10).into_iter().map(|c| (c, agent));
            handle(&mut book, Input::Launch(placed.collect()), 5);
            let status = Input::Status {
                task: task_id("a", 0, 0),
                state: TaskState::Finished,
                exit_code: Some(0),
                message: None,
                healthy: None,
            };
            handle(&mut book, status, 6);
            assert_eq!(writes.len(), 5, "{writes:?}");
            store.write(&writes).unwrap();
        }
        let store = Store::open(&path).unwrap();
        assert_eq!(store.framework_id().unwrap(), Some(id));
        let book = store.load(1000, 10).unwrap();
        assert_eq!(book.in_flight(), [task_id("a", 1, 0)]);
        assert_eq!(book.summaries()[0].tasks.succeeded, 1);
        store.write(&[Write::ForgetJob("a".into())]).unwrap();
        assert!(store.attempts("a").unwrap().is_empty());
        assert!(store.load(1000, 10).unwrap().summaries().is_empty());
    }
}
