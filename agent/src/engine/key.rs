//! [`TaskKey`], how the engine's parts (the task table, commands, GPU books) name a task.

use protocol::{FrameworkId, TaskId};

/// A task's key on an agent: task ids are unique per framework only, so two frameworks may
/// each run a task `web-1` on the same agent.
pub type TaskKey = (FrameworkId, TaskId);
