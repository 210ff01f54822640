//! Placement policies: given offers and a framework's pending tasks, choose which task goes
//! where. Pure functions of their input (no I/O, no clock, no randomness, no async runtime), so
//! frameworks can compare them in simulation and tests can check them exactly. This crate
//! depends only on `protocol`; `framework-sdk` re-exports it as `framework_sdk::placement` and
//! turns its [`Assignment`]s into answers to offers (`Decisions::from_assignments`).
//!
//! Use [`Placement::place`] on a [`PlacementInput`]; the result lists [`Assignment`]s by index
//! into the input's offers and tasks, in the order they were chosen.
//!
//! # Layout
//!
//! - this file: the input and output types ([`OfferSlot`], [`PendingTask`], [`PlacementInput`],
//!   [`Assignment`]) and the [`Placement`] trait.
//! - `problem.rs`: the dense working state every policy shares (resource vectors, tasks grouped
//!   into classes of equal demand, jobs in DRF order), and `Problem::fits`, the one filter
//!   every policy asks (resources, then the constraint stage).
//! - `constraints.rs`: [`Constraint`]s over agent attributes (`==`, `!=`, spread, at most N
//!   per value) and the filter stage that applies them, prepared once per call
//!   ([`Placement::place_constrained`] with a [`ConstraintInput`]); [`violations`] checks a
//!   result independently.
//! - `first_fit.rs`: [`FirstFit`], jobs in DRF order, each task to the first offer it fits (the
//!   fair baseline).
//! - `best_fit.rs`: [`BestFit`], jobs in DRF order, each task to the offer it leaves the least
//!   room in.
//! - [`gang`]: [`gang::fit_gang`], a whole gang on agents' free room under its rules (one
//!   attribute value, at most N an agent), or why not.
//! - `tetris.rs`: [`Tetris`], alignment packing with shortest-remaining-work and a fairness
//!   knob, as in `docs/src/internals/algorithms.md`.
//! - tests only: `reference.rs` (straightforward versions of each policy, to check the fast
//!   ones against), `proptests.rs` (properties every policy keeps, on random input),
//!   `tests_constraints.rs` (each constraint under each policy; no placement violates one),
//!   `tests_gpus.rs` (`gpus` as one more dimension to each policy), `tests_gang.rs` (gang
//!   fits against an exhaustive reference), `tests_support.rs`
//!   (builders).

#![deny(missing_docs)]

mod best_fit;
mod constraints;
mod first_fit;
pub mod gang;
mod problem;
mod tetris;

use std::collections::BTreeMap;

use protocol::{AgentId, Offer, OfferId, Resources};

pub use best_fit::BestFit;
pub use constraints::{violations, Constraint, ConstraintInput};
pub use first_fit::FirstFit;
pub use tetris::{alignment, remaining_work, Tetris, TetrisError};

/// Identifies one of the framework's jobs (a group of tasks that completes together).
pub type JobId = u64;

/// One offer's room, as placement sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferSlot {
    /// The offer.
    pub offer_id: OfferId,
    /// Its agent.
    pub agent_id: AgentId,
    /// What is free (offered).
    pub free: Resources,
    /// The agent's whole capacity, which alignment normalises by.
    pub total: Resources,
}

impl From<&Offer> for OfferSlot {
    fn from(offer: &Offer) -> Self {
        Self {
            offer_id: offer.offer_id,
            agent_id: offer.agent_id,
            free: offer.resources.clone(),
            total: offer.agent_total.clone(),
        }
    }
}

/// A task waiting to be placed.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingTask {
    /// The job it belongs to.
    pub job: JobId,
    /// What it needs.
    pub demand: Resources,
    /// How long it is expected to run, in seconds (used by Tetris' remaining-work score).
    pub duration_s: f64,
}

/// Everything a policy decides from.
#[derive(Debug, Clone, Copy)]
pub struct PlacementInput<'a> {
    /// The offers to place on.
    pub offers: &'a [OfferSlot],
    /// The pending tasks, in the framework's preferred order within each job.
    pub tasks: &'a [PendingTask],
    /// What each job holds now (running tasks), for DRF among the framework's jobs. A job
    /// absent here holds nothing.
    pub job_usage: &'a BTreeMap<JobId, Resources>,
    /// The cluster's capacity, shares are measured against it. When empty, the sum of the
    /// totals of the offers' distinct agents is used.
    pub cluster_total: &'a Resources,
}

/// Task `task` (an index into [`PlacementInput::tasks`]) goes on offer `offer` (an index into
/// [`PlacementInput::offers`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Assignment {
    /// Index of the task.
    pub task: usize,
    /// Index of the offer.
    pub offer: usize,
}

/// A placement policy. Implementations never over-commit an offer and place each task at most
/// once.
pub trait Placement: Send + Sync {
    /// A short name for logs and reports, e.g. `tetris`.
    fn name(&self) -> &str;

    /// Chooses assignments, in the order they were made.
    fn place(&self, input: &PlacementInput<'_>) -> Vec<Assignment>;

    /// Chooses assignments that also keep every job's [`Constraint`]s: the same
    /// policy, with the shared constraint stage in its fit test. With no constraints it
    /// chooses exactly what [`Placement::place`] does.
    fn place_constrained(
        &self,
        input: &PlacementInput<'_>,
        constraints: &ConstraintInput<'_>,
    ) -> Vec<Assignment>;
}

/// Sums the totals of the distinct agents of `offers`: the best estimate of the cluster when the
/// framework knows nothing else.
pub fn agents_total(offers: &[OfferSlot]) -> Resources {
    let mut seen = std::collections::HashSet::new();
    let mut sum = Resources::new();
    for slot in offers {
        if seen.insert(slot.agent_id) {
            sum.add_assign(&slot.total);
        }
    }
    sum
}

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod reference;
#[cfg(test)]
mod tests_constraints;
#[cfg(test)]
mod tests_gang;
#[cfg(test)]
mod tests_gpus;
#[cfg(test)]
mod tests_support;
