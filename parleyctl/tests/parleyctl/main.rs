//! `parleyctl`'s tests, in one binary: its commands run through the library or as the real
//! binary against a coordinator (and a jobs service) on loopback, its errors and exit codes,
//! TLS, maintenance, jobs, `task kill`, `describe` and `job run`, `offers --watch` against a misbehaving stream, and the generated command reference. Run one module with
//! `cargo test -p parleyctl --test parleyctl <module>::`.

mod apply;
mod cli_reference;
mod commands;
mod errors;
mod jobs;
mod maintenance;
mod support;
mod task_commands;
mod tls;
mod watch;
