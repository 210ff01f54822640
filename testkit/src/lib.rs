//! Test helpers shared by every test suite of the workspace (a dev-dependency of
//! `coordinator`, `agent` and `tests`; it depends on `protocol` only, so any crate's tests can
//! use it without a dependency cycle).
//!
//! # Layout
//!
//! - [`wait`]: [`wait_until`] and [`wait_for`], which poll a condition until it holds or a
//!   deadline passes (tests never sleep to wait for something), and [`TimedOut`].
//! - [`stream`]: [`SseReader`], an event stream read frame by frame with a deadline
//!   (`next_frame`, `next_event`, `next_matching`, `until_end`), over a `reqwest` response
//!   or any byte stream, and the [`SseEvent`] trait for typed events.
//! - [`docs`]: generated documentation: [`docs::fresh_or_bless`] fails a test when a committed
//!   generated file is stale (`PARLEY_BLESS=1` rewrites it), and a binary's Markdown reference
//!   and man page from its clap definition.
//! - [`settings`]: settings defined once as a flag, an environment variable and a file key:
//!   the helpers of the tests that walk each through the three, and the commented settings
//!   files and reference tables generated from the definitions.
//! - [`port`]: [`free_port`] and [`free_port_pair`], loopback ports below the kernel's
//!   ephemeral range for children started on a fixed address (a port bound at 0 and
//!   released can be taken by any outgoing connection before the child binds it).
//!
//! Frames are read with `protocol::sse`, the parser every client uses (the SDK, `parleyctl`),
//! so the tests read the coordinator's streams exactly as its clients do; the parser itself is
//! tested byte by byte and fuzzed (`fuzz/fuzz_targets/sse.rs`).

pub mod docs;
pub mod port;
pub mod settings;
pub mod stream;
pub mod wait;

pub use port::{free_port, free_port_pair};
pub use protocol::sse::SseFrame;
pub use stream::{SseError, SseEvent, SseReader};
pub use wait::{deadline_in, wait_for, wait_until, TimedOut, POLL};
