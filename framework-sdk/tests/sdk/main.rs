//! The SDK's integration tests, in one binary: the `Driver` against the fake coordinator of
//! [`fake`] (subscription, offers, calls, reconnection, acknowledgements), and its failure
//! paths: requests split to fit the coordinator's limits, faults injected into its calls.

mod driver;
mod fake;
mod limits;
