//! The task table (tasks by framework and id, in launch order) and what a process's end means
//! for its task.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use protocol::{TaskId, TaskSpec, TaskState, TaskStatus};

use super::command::{Exit, Process};
use super::key::TaskKey;

/// Exit code of the task wrapper when it cannot apply the memory limit.
pub const LIMIT_FAILED: i32 = 125;

/// Where a task is in its life (its reported state is in `latest`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Accepted; the shell has not started it yet.
    Accepted,
    /// Started; with its OS process when it has one (a simulated task has none).
    Started(Option<Process>),
}

/// One task the agent knows.
#[derive(Debug)]
pub(crate) struct Task {
    pub spec: TaskSpec,
    /// Its sandbox (a real agent's tasks have one).
    pub sandbox: Option<PathBuf>,
    pub stage: Stage,
    pub latest: TaskStatus,
    pub kill_requested: bool,
    /// Fenced: killed because its framework is (or will be) told it is not running; its end
    /// carries reason `agent_partitioned` (see [`super::fence`]).
    pub fenced: bool,
    /// Its GPU usage samples so far.
    pub gpu_samples: super::gpus::GpuSamples,
    /// Its place in launch order.
    seq: u64,
}

impl Task {
    /// Its key.
    pub fn key(&self) -> TaskKey {
        (self.latest.framework_id, self.spec.task_id.clone())
    }

    /// The task's process, once started.
    pub fn process(&self) -> Option<Process> {
        match self.stage {
            Stage::Started(p) => p,
            Stage::Accepted => None,
        }
    }
}

/// Tasks by key, and their launch order.
#[derive(Debug, Default)]
pub(crate) struct Table {
    tasks: HashMap<TaskKey, Task>,
    order: BTreeMap<u64, TaskKey>,
    next_seq: u64,
    /// How many tasks are terminal.
    terminal: usize,
}

impl Table {
    pub fn get(&self, key: &TaskKey) -> Option<&Task> {
        self.tasks.get(key)
    }

    pub fn get_mut(&mut self, key: &TaskKey) -> Option<&mut Task> {
        self.tasks.get_mut(key)
    }

    pub fn contains(&self, key: &TaskKey) -> bool {
        self.tasks.contains_key(key)
    }

    /// The keys of the tasks with this id (one per framework that has one).
    pub fn keys_of<'a>(&'a self, id: &'a TaskId) -> impl Iterator<Item = &'a TaskKey> + 'a {
        self.order.values().filter(move |k| &k.1 == id)
    }

    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Terminal tasks still held.
    pub fn terminal(&self) -> usize {
        self.terminal
    }

    /// Adds a task at the end of launch order.
    pub fn insert(
        &mut self,
        spec: TaskSpec,
        sandbox: Option<PathBuf>,
        stage: Stage,
        latest: TaskStatus,
    ) {
        let seq = self.next_seq;
        self.next_seq += 1;
        if latest.state.is_terminal() {
            self.terminal += 1;
        }
        let id = (latest.framework_id, spec.task_id.clone());
        self.order.insert(seq, id.clone());
        let task = Task {
            spec,
            sandbox,
            stage,
            latest,
            kill_requested: false,
            fenced: false,
            gpu_samples: Default::default(),
            seq,
        };
        if let Some(old) = self.tasks.insert(id, task) {
            // Not expected (launches refuse known ids); keep the books consistent anyway.
            self.order.remove(&old.seq);
            if old.latest.state.is_terminal() {
                self.terminal -= 1;
            }
        }
    }

    /// Sets the task's latest status.
    pub fn set_latest(&mut self, key: &TaskKey, status: TaskStatus) {
        if let Some(t) = self.tasks.get_mut(key) {
            if status.state.is_terminal() && !t.latest.state.is_terminal() {
                self.terminal += 1;
            }
            t.latest = status;
        }
    }

    pub fn remove(&mut self, key: &TaskKey) -> Option<Task> {
        let t = self.tasks.remove(key)?;
        self.order.remove(&t.seq);
        if t.latest.state.is_terminal() {
            self.terminal -= 1;
        }
        Some(t)
    }

    /// Tasks in launch order.
    pub fn in_order(&self) -> impl Iterator<Item = &Task> {
        self.order.values().filter_map(|id| self.tasks.get(id))
    }
}

/// What became of a task whose process ended: its state, message and exit code.
pub(crate) fn outcome(
    exit: Exit,
    kill_requested: bool,
) -> (TaskState, Option<String>, Option<i32>) {
    match exit {
        Exit::Measured {
            exit,
            memory_limit,
            usage,
            ..
        } => {
            let (state, message, code) = match memory_limit {
                Some(limit) if !kill_requested => (TaskState::Failed, Some(limit), None),
                _ => outcome(*exit.clone(), kill_requested),
            };
            let code = code.or(match *exit {
                Exit::Code(c) => Some(c),
                _ => None,
            });
            let message = match message {
                Some(m) if !usage.is_empty() => Some(format!("{m} ({usage})")),
                m => m,
            };
            (state, message, code)
        }
        Exit::Error(message) => (TaskState::Failed, Some(message), None),
        Exit::Code(code) if kill_requested => (
            TaskState::Killed,
            Some("killed on request".into()),
            Some(code),
        ),
        _ if kill_requested => (TaskState::Killed, Some("killed on request".into()), None),
        Exit::Code(code) => code_outcome(code),
        // The shell convention: a signalled process reports 128 + the signal.
        Exit::Signal(sig) => (
            TaskState::Failed,
            Some(format!("terminated by signal {sig}")),
            Some(128 + sig),
        ),
        Exit::Unknown(message) => (TaskState::Failed, Some(message.into()), None),
        Exit::Elapsed => (
            TaskState::Finished,
            Some("finished after duration_s".into()),
            Some(0),
        ),
    }
}

/// What an exit code means.
pub fn code_outcome(code: i32) -> (TaskState, Option<String>, Option<i32>) {
    let message = match code {
        0 => {
            return (
                TaskState::Finished,
                Some("exited with code 0".into()),
                Some(0),
            )
        }
        LIMIT_FAILED => "could not apply the memory limit (exit code 125)".to_string(),
        126 => "exited with code 126 (command not executable)".to_string(),
        127 => "exited with code 127 (command not found)".to_string(),
        c if c > 128 => format!(
            "exited with code {c} (the command died of signal {})",
            c - 128
        ),
        c => format!("exited with code {c}"),
    };
    (TaskState::Failed, Some(message), Some(code))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_map_to_states() {
        assert_eq!(code_outcome(0).0, TaskState::Finished);
        let (state, msg, code) = code_outcome(3);
        assert_eq!((state, code), (TaskState::Failed, Some(3)));
        assert_eq!(msg.unwrap(), "exited with code 3");
        assert!(code_outcome(127).1.unwrap().contains("not found"));
        assert!(code_outcome(137).1.unwrap().contains("signal 9"));
    }

    #[test]
    fn a_kill_request_decides_unless_the_task_never_ran() {
        let killed = (TaskState::Killed, Some("killed on request".to_string()));
        let (s, m, c) = outcome(Exit::Signal(15), true);
        assert_eq!(((s, m), c), (killed.clone(), None));
        let (s, m, c) = outcome(Exit::Code(143), true);
        assert_eq!(((s, m), c), (killed, Some(143)));
        let (s, _, c) = outcome(Exit::Signal(9), false);
        assert_eq!((s, c), (TaskState::Failed, Some(137)));
        let (s, m, _) = outcome(Exit::Error("cannot start: x".into()), true);
        assert_eq!(
            (s, m.as_deref()),
            (TaskState::Failed, Some("cannot start: x"))
        );
        assert_eq!(outcome(Exit::Elapsed, false).0, TaskState::Finished);
        let measured = |code, limit: Option<&str>| Exit::Measured {
            exit: Box::new(Exit::Code(code)),
            memory_limit: limit.map(String::from),
            usage: "CPU 1.00 s".into(),
            report: Default::default(),
        };
        let (s, m, c) = outcome(measured(137, Some("memory_limit: 64 MiB")), false);
        assert_eq!(s, TaskState::Failed);
        assert_eq!(m.unwrap(), "memory_limit: 64 MiB (CPU 1.00 s)");
        assert_eq!(c, Some(137));
        let (s, m, _) = outcome(measured(0, None), false);
        assert_eq!(s, TaskState::Finished);
        assert_eq!(m.unwrap(), "exited with code 0 (CPU 1.00 s)");
        let (s, _, _) = outcome(measured(137, Some("memory_limit")), true);
        assert_eq!(s, TaskState::Killed);
    }
}
