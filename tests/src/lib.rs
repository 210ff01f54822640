//! End-to-end test support: a whole Parley cluster — a real coordinator and real or simulated
//! agents — on loopback, in the test process, plus a raw-HTTP framework client. Polling waits
//! and the SSE reader come from the workspace's `testkit` crate, shared with the coordinator's
//! and the agent's tests, and are re-exported here.
//!
//! # Layout
//!
//! - [`cluster`]: [`Cluster`] and its [`ClusterBuilder`] (coordinator settings, real agents,
//!   a simulated fleet, a durable registry, TLS with [`ClusterTls`]): start, stop and restart
//!   agents and the coordinator
//!   (on the same port), read the REST API, wait for a condition or a task state.
//! - [`fast_coordinator_config`]: coordinator settings with short intervals for tests.
//! - [`framework`]: [`framework::TestFramework`], a tiny raw-HTTP framework client (register,
//!   event stream, accept / decline / kill / acknowledge / remove) with a log of its events.
//! - [`fake_leader`]: coordinators that are not the leader (a follower answering `307` to the
//!   real one, one answering `503 no_leader`) and dead URLs, for the clients' leader-following.
//! - [`in_ci`]: whether a missing tool must fail the test (`PARLEY_CI=1`) rather than skip it.
//! - re-exported from `testkit`: [`wait_until`], [`wait_for`], [`deadline_in`], [`SseReader`].
//!
//! The tests themselves live in `tests/tests/`, one file per subject.

pub mod cluster;
pub mod fake_leader;
pub mod framework;

use std::time::Duration;

pub use cluster::{metric_in, Cluster, ClusterBuilder, ClusterTls};
pub use testkit::{deadline_in, wait_for, wait_until, SseReader, TimedOut};

/// Whether CI runs the tests (`PARLEY_CI=1`, set by `.ci/run`): a test whose tool or
/// environment is missing then fails instead of skipping.
pub fn in_ci() -> bool {
    std::env::var("PARLEY_CI").as_deref() == Ok("1")
}

/// The deadline of the end-to-end waits: generous, for a debug build on a loaded machine.
pub const WITHIN: Duration = Duration::from_secs(20);

/// Coordinator settings for tests: allocation every 50 ms, heartbeats every 100 ms, offers that
/// expire after 10 s, updates re-sent every 200 ms. An agent is lost after 20 missed heartbeats
/// (2 s): quick enough for the agent-loss tests, and far enough from a loaded machine's
/// scheduling delays that no agent fences its tasks (as it does, unheard, at its timeout less a
/// heartbeat) in a test that does not cut it off.
pub fn fast_coordinator_config() -> coordinator::Config {
    coordinator::Config {
        allocation_interval: Duration::from_millis(50),
        allocation_batch_delay: Duration::from_millis(2),
        offer_timeout: Duration::from_secs(10),
        agent_heartbeat_interval: Duration::from_millis(100),
        max_missed_heartbeats: 20,
        framework_heartbeat_interval: Duration::from_millis(200),
        default_failover_timeout: Duration::from_secs(10),
        default_refuse_seconds: Duration::from_millis(200),
        update_resend_interval: Duration::from_millis(200),
        agent_request_timeout: Duration::from_secs(2),
        ..coordinator::Config::default()
    }
}
