//! Whole-cluster tests: a real coordinator, agents and frameworks over HTTP on loopback, in one
//! test binary (one link instead of one per file). Each module is one subject; run one with
//! `cargo test -p tests --test cluster <module>::`.
//!
//! The modules share the harness in the `tests` library (`tests::Cluster`, `TestFramework`,
//! polling helpers). Tests run in parallel within the binary, so none of them may change
//! process-wide state (environment variables, the working directory, signal dispositions)
//! that another test reads.

mod agent_reliability;
mod agent_security;
mod browser;
mod cluster;
mod drain;
mod examples;
mod gangs;
mod gpu;
mod gpu_agents;
mod gpu_nvml;
mod ha_clients;
mod harness;
mod health;
mod hostile;
mod isolation;
mod liveness;
mod preemption;
mod pymesos;
mod quota;
mod registry;
mod reservations;
mod security;
mod simulated_fleet;
mod tls;
