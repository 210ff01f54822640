//! The Parley coordinator: keeps the books of agents, frameworks, tasks and offers, decides with
//! hierarchical DRF who is offered what, and serves the HTTP API of `API.md`.
//!
//! # Layout
//!
//! - [`allocator`]: PURE (no I/O, no clock, no tokio): the role tree, DRF / H-DRF / plain-sum
//!   policies, decline filters, and the allocation cycle that turns free agent resources into
//!   decisions.
