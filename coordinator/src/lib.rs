//! The Parley coordinator: keeps the books of agents, frameworks, tasks and offers, decides with
//! hierarchical DRF who is offered what, and serves the HTTP API of `docs/src/reference/api.md`.
//!
//! Start one with [`serve`] (or in a background task with [`Served`], as the tests and the
//! benchmark do, on `127.0.0.1:0`):
//!
//! ```no_run
//! # async fn run() -> anyhow::Result<()> {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let token = tokio_util::sync::CancellationToken::new();
//! coordinator::serve(coordinator::Config::default(), listener, token.cancelled_owned()).await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Layout
//!
//! - [`allocator`]: the `allocator` crate, re-exported (PURE: no I/O, no clock, no tokio; the
//!   compiler enforces it, the crate depends only on `protocol`): the role tree, DRF / H-DRF /
//!   plain-sum policies, decline filters, and the allocation cycle that turns free agent resources
//!   into decisions. Its `sim` module and `hdrf-sim` binary live there too.
//! - [`auth`]: the credentials file's principals (framework, agent, operator), hashed tokens,
//!   role patterns and which kind may call which route.
//! - [`config`]: [`Config`], every setting with its default; [`Overrides`], one layer of optional
//!   settings (the TOML file or the command line); validation.
//! - [`state`]: the books, the `parley-books` crate re-exported (PURE, like the allocator:
//!   `cargo tree -e normal -p parley-books` has no tokio, axum, hyper, reqwest or redb): agents,
//!   frameworks, tasks, offers, the ledger over the allocator, and the registry's record types.
//!   Synchronous; methods validate before mutating and return effects. [`config::Config`]
//!   converts into the `books::Settings` it reads.
//! - [`store`]: the durable registry behind [`store::Registry`], by default an embedded redb
//!   file: frameworks, removed framework ids, run-time role weights, agents (record types from
//!   the books, re-exported); written through [`state::Effect::Persist`], read at start; and
//!   [`store::backup`], the backup document of either backend (`coordinator backup`, `restore`,
//!   `GET /api/v1/registry/backup`).
//! - [`ha`]: high availability on etcd: the etcd client and registry backend (fenced writes),
//!   leader election, the followers' probe of a leader that may be gone, and the follower's
//!   redirect middleware; [`serve_ha`] runs it.
//! - [`outbox`]: the queue between the books and one framework's stream, which coalesces
//!   offers, cancels unread rescinded offers and defers updates, so that only a reader that
//!   has stopped is cut off.
//! - [`runtime`]: [`Coordinator`], the async shell: the lock around the state, effect dispatch
//!   (stream events, launches and kills sent to agents, allocation kicks).
//! - [`web`]: what both APIs share: the route type, the auth middleware and `Caller`
//!   extractor, the error bodies, validated inputs, registering a framework, requests counted
//!   by route.
//! - [`api`]: the native API's routes (framework, agent, operator), SSE streams.
//! - [`mesos`]: the Mesos v1 scheduler API (`POST /api/v1/scheduler`, `GET /version`) over the
//!   same books, so unmodified Mesos frameworks (pymesos) run on Parley.
//! - [`router`]: the one route table of both APIs, the router with its middleware, and the
//!   OpenAPI document of both.
//! - [`server`]: [`serve`]: wiring, graceful shutdown, supervised background loops
//!   (allocation, offer expiry, agent liveness, failover, update re-sends).
//! - [`served`]: [`Served`], a coordinator serving in a background task of the current
//!   runtime, with its address, a stop that waits for its result, and a stop on drop.
//! - [`reload`]: re-reading the TLS certificate and the credentials file while serving (on
//!   SIGHUP); a file that does not load replaces nothing.
//! - [`http`]: the HTTP/1 accept loop (header read and idle timeout, peer addresses for the
//!   rate limit, graceful shutdown).
//! - [`metrics`]: per-instance counters, and the `prometheus-client` registry that serves them
//!   with the books' gauges and the process' figures as Prometheus text.
//! - [`request_counts`]: the counters of requests by route (fed by `web::requests`).
//! - [`history`]: the ring of samples of the books (one a second, ten minutes) behind
//!   `GET /api/v1/history`, the dashboard's charts.
//! - `ui/`: the dashboard page served at `/` (static HTML, hand-written JS and CSS, SVG charts;
//!   no build step), routed by `api::ui`.
//!
//! # Layers
//!
//! Each module names only those below it: the books; [`auth`], [`config`], [`store`],
//! [`history`], [`http`], [`request_counts`], [`metrics`]; [`runtime`] (which holds the HA
//! role it is told, [`runtime::HaStatus`]); [`reload`]; [`ha`]; [`web`]; [`api`] and [`mesos`], which do not
//! name each other; [`router`]; [`server`]; [`served`]. `scripts/check-layers.py
//! coordinator/src` lists any import cycle (there is none).

pub mod api;
pub mod auth;
pub mod config;
pub mod ha;
pub mod history;
pub mod http;
pub mod mesos;
pub mod metrics;
pub mod outbox;
pub mod reload;
pub mod request_counts;
pub mod router;
pub mod runtime;
pub mod served;
pub mod server;
pub mod store;
pub mod web;

/// The books (the `parley-books` crate), re-exported under the name the coordinator's modules
/// have always used for them.
pub use books as state;

pub use allocator;
pub use config::{Config, ConfigError, Layer, Overrides};
pub use runtime::Coordinator;
pub use served::Served;
pub use server::{serve, serve_ha, ServeError};
