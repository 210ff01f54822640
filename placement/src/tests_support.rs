//! Builders shared by the placement tests.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use protocol::{AgentId, OfferId, Resources};

use super::{JobId, OfferSlot, PendingTask, PlacementInput};

/// An offer with free room `free` on an agent of total `total` (`cpus=4,mem=8` syntax).
pub(crate) fn slot(free: &str, total: &str) -> OfferSlot {
    OfferSlot {
        offer_id: OfferId::new(),
        agent_id: AgentId::new(),
        free: free.parse().unwrap(),
        total: total.parse().unwrap(),
    }
}

/// A task of `job` needing `demand`, running 10 s.
pub(crate) fn task(job: JobId, demand: &str) -> PendingTask {
    task_d(job, demand, 10.0)
}

/// A task of `job` needing `demand`, running `duration_s`.
pub(crate) fn task_d(job: JobId, demand: &str, duration_s: f64) -> PendingTask {
    PendingTask {
        job,
        demand: demand.parse().unwrap(),
        duration_s,
    }
}

/// An input whose cluster is the offers' agents.
pub(crate) fn input<'a>(
    offers: &'a [OfferSlot],
    tasks: &'a [PendingTask],
    usage: &'a BTreeMap<JobId, Resources>,
) -> PlacementInput<'a> {
    static EMPTY: std::sync::OnceLock<Resources> = std::sync::OnceLock::new();
    PlacementInput {
        offers,
        tasks,
        job_usage: usage,
        cluster_total: EMPTY.get_or_init(Resources::new),
    }
}
