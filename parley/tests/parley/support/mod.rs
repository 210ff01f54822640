//! Real processes for the chaos tests (and `ha.rs`, `partition.rs`, `multinode.rs`): etcd
//! members, `coordinator`, `agent` and `parley-jobs` processes (each in its own process group,
//! killed with the group on drop; task processes left behind are killed by [`Leftovers`]),
//! in-process frameworks driven by the SDK that record every update they receive, the seed, and
//! the checks the chaos tests share (tasks as their agents saw them, books back to zero or
//! balanced). [`netns`] makes a network of namespaces for tests that cut links.
//!
//! - [`procs`]: [`Proc`], [`Etcd`], [`Coord`], [`Agent`], [`binary`], [`Leftovers`];
//! - [`framework`]: [`Sleeper`], [`Retrier`], [`Seen`], [`driver_config`];
//! - [`checks`]: [`wait_all_terminal`], [`assert_tasks_as_agents_saw_them`],
//!   [`assert_books_zero`], [`assert_books_balance`], [`leader`].

#![allow(clippy::unwrap_used, dead_code, unused_imports)]

pub mod checks;
pub mod framework;
pub mod netns;
pub mod procs;

pub use checks::*;
pub use framework::*;
pub use procs::*;

use std::process::{Command, Stdio};
use std::time::Duration;

/// The token every test agent demands of callers of its API (the test reads `GET /tasks`).
pub const AGENT_TOKEN: &str = "chaos-agent-token";

/// The tests that start etcd or several processes and time failovers or link cuts (`chaos`,
/// `partition`, `ha`) run one at a time: they share this binary with the others, and two of
/// them at once on a 2-core machine would test the machine, not Parley.
pub static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Whether etcd is here; prints why not (and fails under `PARLEY_CI=1`).
pub fn have_etcd(test: &str) -> bool {
    let ok = Command::new("etcd")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var("PARLEY_CI").as_deref() != Ok("1"),
            "{test}: etcd is not installed (apt-get install etcd-server), and PARLEY_CI=1"
        );
        eprintln!("{test}: skipped: etcd is not installed (apt-get install etcd-server)");
    }
    ok
}

pub use testkit::free_port;

/// The seed of this run: `PARLEY_CHAOS_SEED` to replay one, else the clock. Printed.
pub fn seed(test: &str) -> u64 {
    let seed = std::env::var("PARLEY_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("{test}: seed {seed} (replay with PARLEY_CHAOS_SEED={seed})");
    seed
}

/// How many times to repeat a chaos scenario in one test (`PARLEY_CHAOS_RUNS`, default 1).
pub fn runs() -> usize {
    std::env::var("PARLEY_CHAOS_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1)
}
