//! The agent's journal: append-only JSON lines in the work dir, fsync'd, so that no task state
//! change is lost across agent restarts.
//!
//! Every state change is appended, and durable, *before* it is sent to the coordinator; an
//! acknowledgement (the coordinator's `200`) is appended afterwards. Appends are written in
//! order under the books' lock; their `fdatasync` is a group commit ([`commit`]): one sync, on a
//! thread of its own, makes every record appended before it durable, and what must follow
//! durability waits for it ([`Durable::wait`]) without the lock. On start the agent replays
//! the file ([`Journal::open`]) to learn its tasks, their processes, and the updates still to
//! send. [`Journal::rewrite`] compacts it: the caller writes only what is still needed (tasks not
//! yet terminal, and updates not yet acknowledged) to a temporary file that atomically replaces
//! the old one.
//!
//! A torn last line (a crash mid-append) is ignored on replay; any other unreadable line is
//! skipped with a warning, so one bad line never loses the rest.

pub mod commit;

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use commit::GroupCommit;
pub use commit::{Durable, Mark};

use protocol::{FrameworkId, TaskId, TaskSpec, TaskStatus, UpdateId};
use serde::{Deserialize, Serialize};

/// The journal's file name inside the work dir.
pub const FILE_NAME: &str = "journal.jsonl";

/// A journal I/O failure.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// Reading, writing or syncing the file failed.
    #[error("journal {path}: {source}")]
    Io {
        /// The journal file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A record could not be encoded (not expected with these types).
    #[error("journal record cannot be encoded: {0}")]
    Encode(#[from] serde_json::Error),
    /// The sync that was to make a record durable failed (see [`Durable::wait`]).
    #[error("{0}")]
    Sync(String),
}

/// How durable a journal write must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Synced before what follows it runs (state changes: they are sent right after); the
    /// shell waits for its [`Mark`] with [`Durable::wait`].
    Synced,
    /// Written, synced later (an acknowledgement lost in a crash only causes a resend).
    Buffered,
}

/// One line of the journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    /// A task was accepted for launch.
    Launch {
        /// Its framework.
        framework_id: FrameworkId,
        /// What to run.
        spec: TaskSpec,
        /// Its sandbox directory.
        sandbox: PathBuf,
    },
    /// The task's process started: its pid (also its process group) and its start time in clock
    /// ticks since boot (field 22 of `/proc/PID/stat`), which tells a re-used pid from ours.
    Started {
        /// The task's framework (absent in journals of older agents, whose task ids were unique
        /// on the agent).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        framework_id: Option<FrameworkId>,
        /// The task.
        task_id: TaskId,
        /// The process (group) id.
        pid: u32,
        /// The process start time, when it could be read.
        start_time: Option<u64>,
        /// The boot the process started in (absent in journals of older agents).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        boot_id: Option<uuid::Uuid>,
    },
    /// A task state change.
    Status {
        /// The change.
        status: TaskStatus,
    },
    /// The coordinator recorded an update.
    Acked {
        /// The update.
        update_id: UpdateId,
    },
    /// A framework's partition timeout, as its latest launch said (`None`: not
    /// partition-aware); see [`crate::engine::fence`].
    Partition {
        /// The framework.
        framework_id: FrameworkId,
        /// Its partition timeout in seconds.
        partition_timeout_s: Option<f64>,
    },
    /// The task was fenced: its framework is told it is not running, so it must not run
    /// again, even after a restart of the agent.
    Fenced {
        /// Its framework.
        framework_id: FrameworkId,
        /// The task.
        task_id: TaskId,
    },
}

/// A task as the journal remembers it.
#[derive(Debug, Clone)]
pub struct ReplayedTask {
    /// Its framework.
    pub framework_id: FrameworkId,
    /// What it runs.
    pub spec: TaskSpec,
    /// Its sandbox.
    pub sandbox: PathBuf,
    /// Its process, once started.
    pub process: Option<crate::process::Process>,
    /// Its latest status, if any was recorded.
    pub latest: Option<TaskStatus>,
    /// It was fenced (must not run).
    pub fenced: bool,
}

/// What a replay found.
#[derive(Debug, Default)]
pub struct Replay {
    /// The tasks, in launch order.
    pub tasks: Vec<ReplayedTask>,
    /// Updates not yet acknowledged, in the order they were written.
    pub unacked: VecDeque<TaskStatus>,
    /// Partition timeouts of partition-aware frameworks, in seconds.
    pub partition: HashMap<FrameworkId, f64>,
}

/// The open journal file.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: Arc<File>,
    lines: usize,
    commit: GroupCommit,
}

impl Journal {
    /// Opens (creating if needed) the journal in `dir` and replays it.
    pub fn open(dir: &Path) -> Result<(Journal, Replay), JournalError> {
        let path = dir.join(FILE_NAME);
        let io = |source| JournalError::Io {
            path: path.clone(),
            source,
        };
        let (replay, lines) = match File::open(&path) {
            Ok(f) => replay(BufReader::new(f), &path).map_err(io)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Replay::default(), 0),
            Err(e) => return Err(io(e)),
        };
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)
            .map_err(io)?;
        // Older agents created it world-readable; it holds the tasks' environments.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(io)?;
        sync_dir(dir).map_err(io)?;
        let file = Arc::new(file);
        let commit = GroupCommit::start(Arc::clone(&file), path.clone()).map_err(io)?;
        Ok((
            Journal {
                path,
                file,
                lines,
                commit,
            },
            replay,
        ))
    }

    /// Appends records (written to the file, in order) and returns their mark; for
    /// [`Durability::Synced`] ones a sync is asked for, which [`Durable::wait`] waits for.
    pub fn append(
        &mut self,
        records: &[Record],
        durability: Durability,
    ) -> Result<Mark, JournalError> {
        let buf = encode(records)?;
        let io = |source| JournalError::Io {
            path: self.path.clone(),
            source,
        };
        (&*self.file).write_all(&buf).map_err(io)?;
        self.lines += records.len();
        Ok(self.commit.appended(durability == Durability::Synced))
    }

    /// Syncs everything appended so far, here and now.
    pub fn flush(&mut self) -> Result<(), JournalError> {
        self.file.sync_data().map_err(|source| JournalError::Io {
            path: self.path.clone(),
            source,
        })?;
        self.commit.all_durable(None);
        Ok(())
    }

    /// The latest mark that must become durable: every [`Durability::Synced`] append so far
    /// is at or before it.
    pub fn wanted(&self) -> Mark {
        self.commit.wanted()
    }

    /// A handle to wait for durability with, outside the books' lock.
    pub fn durable(&self) -> Durable {
        self.commit.durable()
    }

    /// Lines in the file (since the last rewrite, plus what the rewrite wrote).
    pub fn lines(&self) -> usize {
        self.lines
    }

    /// Atomically replaces the journal with `records` (compaction): write a temporary file,
    /// sync it, rename it over the journal, sync the directory.
    pub fn rewrite(&mut self, records: &[Record]) -> Result<(), JournalError> {
        let tmp = self.path.with_extension("jsonl.tmp");
        let io = |source| JournalError::Io {
            path: tmp.clone(),
            source,
        };
        let buf = encode(records)?;
        {
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)
                .map_err(io)?;
            f.write_all(&buf).map_err(io)?;
            f.sync_all().map_err(io)?;
        }
        std::fs::rename(&tmp, &self.path).map_err(io)?;
        if let Some(dir) = self.path.parent() {
            sync_dir(dir).map_err(io)?;
        }
        self.file = Arc::new(OpenOptions::new().append(true).open(&self.path).map_err(
            |source| JournalError::Io {
                path: self.path.clone(),
                source,
            },
        )?);
        // The new file holds, durably, all that the appends before it recorded.
        self.commit.all_durable(Some(Arc::clone(&self.file)));
        self.lines = records.len();
        Ok(())
    }
}

/// `records` as JSON lines.
fn encode(records: &[Record]) -> Result<Vec<u8>, JournalError> {
    let mut buf = Vec::with_capacity(256 * records.len());
    for r in records {
        serde_json::to_writer(&mut buf, r)?;
        buf.push(b'\n');
    }
    Ok(buf)
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

fn replay(reader: impl BufRead, path: &Path) -> std::io::Result<(Replay, usize)> {
    let mut order: Vec<(FrameworkId, TaskId)> = Vec::new();
    let mut tasks: HashMap<(FrameworkId, TaskId), ReplayedTask> = HashMap::new();
    let mut statuses: Vec<TaskStatus> = Vec::new();
    let mut acked: HashSet<UpdateId> = HashSet::new();
    let mut partition: HashMap<FrameworkId, f64> = HashMap::new();
    let mut lines = 0;
    for (n, line) in reader.lines().enumerate() {
        let line = line?;
        lines += 1;
        if line.trim().is_empty() {
            continue;
        }
        let record: Record = match serde_json::from_str(&line) {
            Ok(r) => r,
            Err(e) => {
                // A torn final line is expected after a crash; anything else deserves a warning.
                tracing::warn!(journal = %path.display(), line = n + 1, "skipping unreadable journal line: {e}");
                continue;
            }
        };
        match record {
            Record::Launch {
                framework_id,
                spec,
                sandbox,
            } => {
                let id = (framework_id, spec.task_id.clone());
                if !tasks.contains_key(&id) {
                    order.push(id.clone());
                }
                tasks.insert(
                    id,
                    ReplayedTask {
                        framework_id,
                        spec,
                        sandbox,
                        process: None,
                        latest: None,
                        fenced: false,
                    },
                );
            }
            Record::Started {
                framework_id,
                task_id,
                pid,
                start_time,
                boot_id,
            } => {
                // An older journal names no framework: its task ids were unique.
                let framework_id = framework_id
                    .or_else(|| order.iter().rev().find(|k| k.1 == task_id).map(|k| k.0));
                let task = framework_id.and_then(|fw| tasks.get_mut(&(fw, task_id)));
                if let Some(t) = task {
                    t.process = Some(crate::process::Process {
                        pid,
                        start_time,
                        boot_id,
                    });
                }
            }
            Record::Status { status } => {
                if let Some(t) = tasks.get_mut(&(status.framework_id, status.task_id.clone())) {
                    t.latest = Some(status.clone());
                }
                statuses.push(status);
            }
            Record::Acked { update_id } => {
                acked.insert(update_id);
            }
            Record::Partition {
                framework_id,
                partition_timeout_s,
            } => match partition_timeout_s {
                Some(s) => {
                    partition.insert(framework_id, s);
                }
                None => {
                    partition.remove(&framework_id);
                }
            },
            Record::Fenced {
                framework_id,
                task_id,
            } => {
                if let Some(t) = tasks.get_mut(&(framework_id, task_id)) {
                    t.fenced = true;
                }
            }
        }
    }
    let unacked = statuses
        .into_iter()
        .filter(|s| !acked.contains(&s.update_id))
        .collect();
    let tasks = order
        .into_iter()
        .filter_map(|id| tasks.remove(&id))
        .collect();
    Ok((
        Replay {
            tasks,
            unacked,
            partition,
        },
        lines,
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use protocol::{AgentId, CommandSpec, Resources, TaskState};

    fn spec(id: &str) -> TaskSpec {
        TaskSpec {
            task_id: TaskId::new(id).unwrap(),
            name: String::new(),
            agent_id: AgentId::new(),
            resources: Resources::new(),
            command: CommandSpec::Shell("true".into()),
            env: Default::default(),
            duration_s: None,
            isolation: None,
            health_check: None,
            priority: None,
        }
    }

    fn status(id: &str, state: TaskState) -> TaskStatus {
        TaskStatus {
            task_id: TaskId::new(id).unwrap(),
            framework_id: FrameworkId::new(),
            agent_id: AgentId::new(),
            state,
            message: None,
            exit_code: None,
            update_id: UpdateId::new(),
            timestamp: protocol::now(),
            resources: None,
            reason: None,
            usage: None,
            gpu_devices: None,
            healthy: None,
        }
    }

    #[test]
    fn replay_returns_tasks_and_unacked_updates_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let (mut j, r) = Journal::open(dir.path()).unwrap();
        assert!(r.tasks.is_empty() && r.unacked.is_empty());
        let fw = FrameworkId::new();
        let mut s1 = status("a", TaskState::Starting);
        let mut s2 = status("a", TaskState::Running);
        (s1.framework_id, s2.framework_id) = (fw, fw);
        j.append(
            &[
                Record::Launch {
                    framework_id: fw,
                    spec: spec("a"),
                    sandbox: "/x".into(),
                },
                Record::Status { status: s1.clone() },
                Record::Started {
                    framework_id: None,
                    task_id: TaskId::new("a").unwrap(),
                    pid: 42,
                    start_time: Some(7),
                    boot_id: None,
                },
                Record::Status { status: s2.clone() },
                Record::Acked {
                    update_id: s1.update_id,
                },
            ],
            Durability::Synced,
        )
        .unwrap();
        drop(j);
        // A torn last line, as after a crash mid-append, is ignored.
        let path = dir.path().join(FILE_NAME);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"kind\":\"acked\",\"upd").unwrap();
        drop(f);

        let (j, r) = Journal::open(dir.path()).unwrap();
        assert_eq!(j.lines(), 6);
        assert_eq!(r.tasks.len(), 1);
        assert_eq!(r.tasks[0].framework_id, fw);
        assert_eq!(
            r.tasks[0].process.map(|p| (p.pid, p.start_time)),
            Some((42, Some(7)))
        );
        assert_eq!(
            r.tasks[0].latest.as_ref().unwrap().state,
            TaskState::Running
        );
        assert_eq!(r.unacked.iter().cloned().collect::<Vec<_>>(), vec![s2]);
    }

    #[test]
    fn replay_keeps_fences_and_the_latest_partition_timeouts() {
        let dir = tempfile::tempdir().unwrap();
        let (mut j, _) = Journal::open(dir.path()).unwrap();
        let (fw, other) = (FrameworkId::new(), FrameworkId::new());
        let partition = |framework_id, secs| Record::Partition {
            framework_id,
            partition_timeout_s: secs,
        };
        j.append(
            &[
                partition(fw, Some(60.0)),
                partition(other, Some(30.0)),
                Record::Launch {
                    framework_id: fw,
                    spec: spec("a"),
                    sandbox: "/x".into(),
                },
                Record::Launch {
                    framework_id: fw,
                    spec: spec("b"),
                    sandbox: "/y".into(),
                },
                Record::Fenced {
                    framework_id: fw,
                    task_id: TaskId::new("a").unwrap(),
                },
                // No longer partition-aware.
                partition(other, None),
            ],
            Durability::Synced,
        )
        .unwrap();
        drop(j);
        let (_, r) = Journal::open(dir.path()).unwrap();
        let fenced: Vec<_> = r.tasks.iter().map(|t| t.fenced).collect();
        assert_eq!(fenced, [true, false]);
        assert_eq!(r.partition, HashMap::from([(fw, 60.0)]));
    }

    #[tokio::test]
    async fn one_sync_makes_every_earlier_append_durable() {
        let dir = tempfile::tempdir().unwrap();
        let (mut j, _) = Journal::open(dir.path()).unwrap();
        let durable = j.durable();
        let record = |id: &str| Record::Status {
            status: status(id, TaskState::Running),
        };
        let mut marks = Vec::new();
        for i in 0..50 {
            let durability = match i % 3 {
                0 => Durability::Buffered,
                _ => Durability::Synced,
            };
            marks.push(j.append(&[record("a")], durability).unwrap());
        }
        assert!(
            marks.windows(2).all(|w| w[0] < w[1]),
            "marks follow the order"
        );
        // Every synced append is at or before the mark the shell waits for.
        assert_eq!(j.wanted(), marks[49]);
        durable.wait(j.wanted()).await.unwrap();
        assert!(marks.iter().all(|m| durable.is_settled(*m)));
        // A buffered append alone asks for no sync; a flush makes it durable.
        let late = j.append(&[record("b")], Durability::Buffered).unwrap();
        assert!(!durable.is_settled(late));
        j.flush().unwrap();
        assert!(durable.is_settled(late));
        // A compaction rewrites all there is, durably: the appends before it are settled.
        let pending = j.append(&[record("c")], Durability::Synced).unwrap();
        j.rewrite(&[record("c")]).unwrap();
        assert!(durable.is_settled(pending));
        let after = j.append(&[record("d")], Durability::Synced).unwrap();
        durable.wait(after).await.unwrap();
        drop(j);
        let (_, r) = Journal::open(dir.path()).unwrap();
        assert_eq!(
            r.unacked.len(),
            2,
            "the rewritten record and the one after it"
        );
    }

    #[test]
    fn rewrite_replaces_the_contents() {
        let dir = tempfile::tempdir().unwrap();
        let (mut j, _) = Journal::open(dir.path()).unwrap();
        let s = status("a", TaskState::Finished);
        for _ in 0..10 {
            j.append(
                &[Record::Status {
                    status: status("b", TaskState::Running),
                }],
                Durability::Buffered,
            )
            .unwrap();
        }
        j.rewrite(&[Record::Status { status: s.clone() }]).unwrap();
        assert_eq!(j.lines(), 1);
        j.append(
            &[Record::Acked {
                update_id: UpdateId::new(),
            }],
            Durability::Synced,
        )
        .unwrap();
        drop(j);
        let (j, r) = Journal::open(dir.path()).unwrap();
        assert_eq!(j.lines(), 2);
        assert_eq!(r.unacked.into_iter().collect::<Vec<_>>(), vec![s]);
        assert!(!dir.path().join("journal.jsonl.tmp").exists());
    }
}
