//! What every Parley server shares to be observed, so the coordinator, the agent and the jobs
//! service expose the same figures the same way without depending on one another.
//!
//! # Layout
//!
//! - [`table`]: [`Metric`] and [`Kind`], the rows of a binary's table of metrics (the one
//!   place a metric is named, typed and explained), and [`table::reference_table`], the
//!   Markdown the book's reference pages are generated from.
//! - [`scrape`]: [`Scrape`], which writes a family through `prometheus-client` taking its type
//!   and help from a table, and [`encode`], a registry as Prometheus text (version 0.0.4).
//! - [`process`]: this process' figures read from `/proc/self` (CPU seconds, resident memory,
//!   open and maximum file descriptors, start time) and the build's
//!   (`parley_build_info`), as one [`process::ProcessCollector`].
//! - [`limits`]: raising the open-file limit to the hard one at start, with a warning when it
//!   stays low for a server with many clients.
//! - [`logging`]: [`LogFormat`] (`text` or `json`) and [`logging::init`], the one
//!   `tracing` subscriber setup of every binary (no colours unless writing to a terminal).
//! - [`settings_file`]: reading a binary's TOML settings file with one-line errors naming the
//!   file, line and key, and [`layer_settings!`], the layering of settings structs.
//! - [`signal`]: [`shutdown_signal`], Ctrl-C or SIGTERM, which every server stops on.
//!
//! `prometheus-client` is re-exported so that users name the same version.

pub mod limits;
pub mod logging;
pub mod process;
pub mod scrape;
pub mod settings_file;
pub mod signal;
pub mod table;

pub use logging::LogFormat;
pub use prometheus_client;
pub use scrape::{encode, Scrape, CONTENT_TYPE};
pub use signal::shutdown_signal;
pub use table::{Kind, Metric};
