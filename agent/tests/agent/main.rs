//! The agent's integration tests, in one binary: the `agent` binary's command line (`cli`,
//! `gpu_cli`) and settings (`settings`), an in-process agent against the fake coordinator of
//! [`common`] (real tasks, isolation, images, hardening, simulated agents), and the agent's
//! section of the metrics reference. Run one module with
//! `cargo test -p parley-agent --test agent <module>::`.

mod cli;
mod cli_reference;
mod common;
mod gpu_cli;
mod hardening;
mod image;
mod isolation;
mod metrics_reference;
mod real_agent;
mod settings;
mod simulated;
