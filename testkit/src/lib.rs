//! Test helpers shared by every test suite of the workspace (a dev-dependency of
//! `coordinator`, `agent` and `tests`; it depends on `protocol` only, so any crate's tests can
//! use it without a dependency cycle).
//!
//! # Layout
//!
//! - [`wait`]: [`wait_until`] and [`wait_for`], which poll a condition until it holds or a
//!   deadline passes (tests never sleep to wait for something), and [`TimedOut`].
//! - [`sse`]: [`SseLines`], the Server-Sent Events line parser (bytes in, [`Frame`]s out).
//! - [`stream`]: [`SseReader`], an event stream read frame by frame with a deadline
//!   (`next_frame`, `next_event`, `next_matching`, `until_end`), over a `reqwest` response
//!   or any byte stream, and the [`SseEvent`] trait for typed events.
//! - [`docs`]: generated documentation: [`docs::fresh_or_bless`] fails a test when a committed
//!   generated file is stale (`PARLEY_BLESS=1` rewrites it), and a binary's Markdown reference
//!   and man page from its clap definition.
//!
//! The SSE parser is independent of the SDK's on purpose: the tests check the coordinator's
//! streams against a second reading of the format.

pub mod docs;
pub mod sse;
pub mod stream;
pub mod wait;

pub use sse::{Frame, SseLines};
pub use stream::{SseError, SseEvent, SseReader};
pub use wait::{deadline_in, wait_for, wait_until, TimedOut, POLL};
