//! The evaluation behind `docs/src/evaluation.md`: reproduces the H-DRF and Tetris
//! papers' findings on seeded workloads, plots them, and checks the live coordinator against the
//! pure allocator. Run it with `cargo run --release -p evaluation --bin evaluate`.
//!
//! # Layout
//!
//! - [`trees`]: the paper-style role trees of part 1.
//! - [`fairness`]: part 1, H-DRF vs flattened DRF vs plain-sum DRF, static and with churn
//!   (violations of the hierarchical share guarantee, starvation).
//! - [`workload`]: part 2's seeded trace-like batch workload.
//! - [`packing`]: part 2's event-driven packing simulator with the contention model.
//! - [`explain`]: part 2's comparison with the paper, quoting the numbers.
//! - [`online`]: part 3, the same scenario through a live coordinator, compared.
//! - [`plot`]: SVG line charts.
//! - [`report`]: runs everything and writes `evaluation.md` and the plots.

pub mod explain;
pub mod fairness;
pub mod online;
pub mod packing;
pub mod plot;
pub mod report;
pub mod trees;
pub mod workload;
