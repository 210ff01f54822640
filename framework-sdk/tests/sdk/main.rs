//! The SDK's integration tests, in one binary: the `Driver` against the fake coordinator of
//! [`fake`] (subscription, offers, calls, reconnection, acknowledgements).

mod driver;
mod fake;
