//! The coordinator's API tests, in one binary: each module one part of the HTTP API (framework,
//! agent, operator, auth, drain, dashboard, Mesos, the OpenAPI document, limits, registry
//! failures, fairness, the shape of `/metrics`), against a coordinator serving real HTTP on
//! loopback or its router called request by request ([`support`]). Run one module with
//! `cargo test -p parley-coordinator --test coordinator <module>::`.

mod agent_api;
mod agent_calls;
mod auth_api;
mod awaited_agents;
mod config_reference;
mod dashboard_api;
mod dashboard_login;
mod drain_api;
mod durable_lane;
mod fairness;
mod framework_api;
mod launch_window;
mod limits;
mod mesos_api;
mod metric_families;
mod metrics_reference;
mod openapi;
mod operator_api;
mod registry_failures;
mod support;
mod task_kill_api;
