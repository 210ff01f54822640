//! The Parley framework SDK: write a scheduler, and the [`Driver`] runs it against a coordinator.
//!
//! A framework implements [`Scheduler`]: it answers offers with tasks to launch or declines,
//! and hears about task states. The driver does the rest, including what Mesos users had to
//! learn the hard way: it acknowledges updates after the scheduler has seen them, declines
//! offers the scheduler sits on, suppresses offers while the scheduler has nothing to launch and
//! revives (rate-limited) when work appears, reconnects with backoff under the same framework id
//! so running tasks survive, and uses a failover timeout of an hour unless told otherwise.
//! [`placement`] holds reusable policies, among them [`placement::Tetris`].
//!
//! # Layout
//!
//! - [`scheduler`]: the [`Scheduler`] trait, [`Context`] (kill, reconcile, stop, answer held
//!   offers) and [`Decisions`] (answers to offers).
//! - [`driver`]: [`Driver`] and [`DriverConfig`]: registration, the event loop, reconnection,
//!   suppress/revive, offer hold timeout.
//! - [`client`]: [`CoordinatorClient`], the framework HTTP API as typed calls.
//! - [`sse`]: an incremental Server-Sent Events parser.
//! - [`placement`]: [`placement::Placement`] and the policies `FirstFit`, `BestFit`, `Tetris`.
//! - [`error`]: the error type, [`SdkError`].
//!
//! # Example
//!
//! A framework that runs one `echo` per offer until it has launched three, then stops once all
//! three have ended.
//!
//! ```no_run
//! use framework_sdk::{Context, Decisions, Driver, DriverConfig, Scheduler};
//! use protocol::{CommandSpec, Offer, TaskId, TaskSpec, TaskStatus};
//!
//! struct Echo { launched: usize, ended: usize }
//!
//! #[async_trait::async_trait]
//! impl Scheduler for Echo {
//!     async fn offers(&mut self, _ctx: &mut Context, offers: Vec<Offer>) -> Decisions {
//!         Decisions::launch_or_decline(&offers, |offer| {
//!             let demand: protocol::Resources = "cpus=0.1,mem=32".parse().expect("valid");
//!             if self.launched == 3 || !demand.fits_in(&offer.resources) {
//!                 return vec![];
//!             }
//!             self.launched += 1;
//!             vec![TaskSpec {
//!                 task_id: TaskId::new(format!("echo-{}", self.launched)).expect("valid id"),
//!                 name: "echo".into(),
//!                 agent_id: offer.agent_id,
//!                 resources: demand,
//!                 command: CommandSpec::Shell("echo hi".into()),
//!                 env: Default::default(),
//!                 duration_s: None,
//!             }]
//!         })
//!     }
//!
//!     async fn status_update(&mut self, ctx: &mut Context, status: &TaskStatus) {
//!         println!("{} is {}", status.task_id, status.state);
//!         if status.state.is_terminal() {
//!             self.ended += 1;
//!             if self.ended == 3 {
//!                 ctx.stop();
//!             }
//!         }
//!     }
//!
//!     fn pending_tasks(&self) -> usize {
//!         3 - self.launched
//!     }
//! }
//!
//! # async fn run() -> Result<(), framework_sdk::SdkError> {
//! let role = "eng/batch".parse().expect("valid role");
//! let config = DriverConfig::new("http://127.0.0.1:5050", "echo", role);
//! let done = Driver::new(config, Echo { launched: 0, ended: 0 })?.run().await?;
//! assert_eq!(done.ended, 3);
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

pub mod client;
pub mod driver;
pub mod error;
pub mod placement;
pub mod scheduler;
pub mod sse;

pub use client::CoordinatorClient;
pub use driver::{Driver, DriverConfig, DEFAULT_FAILOVER_TIMEOUT};
pub use error::SdkError;
pub use scheduler::{Answer, Context, Decisions, Scheduler};
