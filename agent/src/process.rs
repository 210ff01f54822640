//! A task's OS process as the engine, the journal and the isolation know it: which process it
//! is ([`Process`]) and how it ended ([`Exit`]). Plain types, below all three.

/// A task's OS process: its pid (also its process group), its start time in clock ticks since
/// boot and the boot it started in (`/proc/sys/kernel/random/boot_id`), which together tell a
/// re-used pid from ours, across reboots too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Process {
    /// The process (group) id.
    pub pid: u32,
    /// Its start time, when it could be read.
    pub start_time: Option<u64>,
    /// The boot it started in, when it could be read (journals of older agents lack it).
    pub boot_id: Option<uuid::Uuid>,
}

/// How a task's process ended (or failed to run), as the shell saw it.
#[derive(Debug, Clone, PartialEq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// It was terminated by this signal.
    Signal(i32),
    /// It ended without a known status; the message says what is known.
    Unknown(&'static str),
    /// It could not be started or waited for (a kill request does not change this).
    Error(String),
    /// A simulated task's `duration_s` is over.
    Elapsed,
    /// An isolated task's end, told by its cgroup: how it ended, and what it used (appended
    /// to the status message).
    Measured {
        /// How the process ended.
        exit: Box<Exit>,
        /// The kernel's OOM killer ended it: the message says `memory_limit` and the limit.
        memory_limit: Option<String>,
        /// What it used, e.g. `peak memory 12.0 MiB, CPU 1.02 s, throttled 0.98 s`.
        usage: String,
        /// The same, for the status's `usage`.
        report: protocol::TaskUsage,
    },
}
