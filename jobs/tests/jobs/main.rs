//! The jobs service's tests, in one binary: end to end through its REST API on a real
//! coordinator and agents (`e2e`), killed and restarted mid-array (`crash`), and its settings
//! (`settings`). Run one module
//! with `cargo test -p parley-jobs --test jobs <module>::`.

mod cli_reference;
mod crash;
mod e2e;
mod settings;
mod support;
