//! The agent's integration tests, in one binary: the `agent` binary's command line (`cli`,
//! `gpu_cli`) and settings (`settings`), and an in-process agent against the fake coordinator of [`common`] (real tasks,
//! isolation, images, hardening, simulated agents). Run one module with
//! `cargo test -p parley-agent --test agent <module>::`.

mod cli;
mod cli_reference;
mod common;
mod gpu_cli;
mod hardening;
mod image;
mod isolation;
mod real_agent;
mod settings;
mod simulated;
