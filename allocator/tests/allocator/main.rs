//! The allocator's integration tests, in one binary: property tests of the fast allocator
//! against the reference (`allocator_props`, `quota_props`, `reservation_props`), the
//! `hdrf-sim` binary over the scenario files in `tests/scenarios/`, and the cost of preemption
//! plans (`preempt_cost`).

mod allocator_props;
mod hdrf_sim;
mod preempt_cost;
mod quota_props;
mod reservation_props;
