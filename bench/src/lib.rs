//! `parley-bench`: the end-to-end benchmark. It starts a coordinator and simulated agents (as
//! release binaries, or in this process), drives many SDK frameworks from one tokio runtime, and
//! reports task launches per second, launch and offer latency, allocation run times, the
//! coordinator's CPU and peak memory, and the time of `GET /api/v1/state` with many tasks
//! running, as one markdown table.
//!
//! # Layout
//!
//! - [`cluster`]: [`cluster::Cluster`] starts and stops the coordinator and the agents (child
//!   processes or in-process tasks) and waits, with deadlines, until they are up.
//! - [`framework`]: [`framework::BenchFramework`], the cheap SDK framework the harness runs
//!   many of, and [`framework::Progress`], what the frameworks of a phase share.
//! - [`mod@run`]: [`run::run`], the phases (throughput, accounting, state) and their figures.
//! - [`etcd`]: [`etcd::Etcd`], one etcd member on free loopback ports (for the failover run).
//! - [`ha`]: [`ha::HaCluster`], etcd, several `coordinator --etcd` processes and one simulated
//!   agent process given all their URLs; finds the leader and SIGKILLs it.
//! - [`mod@failover`]: [`failover::failover`], the leader's SIGKILL under load: recovery times
//!   and the check that nothing was lost or launched twice.
//! - [`mod@soak`]: [`soak::soak`], a steady launch rate for a long time, window by window.
//! - [`measure`]: percentiles, sustained rates, Prometheus histograms, `/proc` CPU and RSS.
//! - [`report`]: [`report::Report`] and [`report::Accounting`], the table and the JSON.
//!
//! The binary (`src/main.rs`) parses flags, starts the cluster, runs (the phases, `--soak`, or
//! the `failover` subcommand), prints the tables and exits non-zero when a phase fails or a
//! task is not accounted for.

#![deny(missing_docs)]

pub mod cluster;
pub mod etcd;
pub mod failover;
pub mod framework;
pub mod ha;
pub mod measure;
pub mod report;
pub mod run;
pub mod soak;

pub use cluster::{Cluster, ClusterSpec, Launch};
pub use report::{Accounting, Report};
pub use run::{run, RunConfig};
