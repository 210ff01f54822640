//! [`Metrics`]: counters of one coordinator instance, rendered as Prometheus text for
//! `/metrics` together with gauges read from the books.
//!
//! The counters are plain atomics owned by the instance rather than a global `metrics`
//! recorder: tests run several coordinators in one process, and each must report its own.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use protocol::events::OfferEvent;

use crate::state::Gauges;

/// Upper bounds (seconds) of the allocation-run histogram's buckets.
const RUN_BUCKETS: [f64; 10] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1.0,
];

/// Counters of one coordinator.
#[derive(Debug, Default)]
pub struct Metrics {
    offers_created: AtomicU64,
    offers_accepted: AtomicU64,
    offers_declined: AtomicU64,
    offers_rescinded: AtomicU64,
    offers_expired: AtomicU64,
    allocation_runs: AtomicU64,
    allocation_micros: AtomicU64,
    allocation_buckets: [AtomicU64; RUN_BUCKETS.len()],
    registry_write_errors: AtomicU64,
}

impl Metrics {
    /// Counts an offer's creation or end.
    pub fn count_offer_event(&self, event: &OfferEvent) {
        let counter = match event {
            OfferEvent::OfferCreated(_) => &self.offers_created,
            OfferEvent::OfferAccepted(_) => &self.offers_accepted,
            OfferEvent::OfferDeclined(_) => &self.offers_declined,
            OfferEvent::OfferRescinded(_) => &self.offers_rescinded,
            OfferEvent::OfferExpired(_) => &self.offers_expired,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a failed write to the durable registry.
    pub fn count_registry_write_error(&self) {
        self.registry_write_errors.fetch_add(1, Ordering::Relaxed);
    }

    /// Records how long one allocation run took.
    pub fn observe_allocation(&self, took: Duration) {
        self.allocation_runs.fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.allocation_micros.fetch_add(micros, Ordering::Relaxed);
        let secs = took.as_secs_f64();
        for (bound, bucket) in RUN_BUCKETS.iter().zip(&self.allocation_buckets) {
            if secs <= *bound {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Prometheus text exposition of the counters and the given gauges.
    pub fn render(&self, g: &Gauges) -> String {
        let mut out = String::new();
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let counters = [
            (
                "parley_offers_created_total",
                "Offers made.",
                load(&self.offers_created),
            ),
            (
                "parley_offers_accepted_total",
                "Offers accepted.",
                load(&self.offers_accepted),
            ),
            (
                "parley_offers_declined_total",
                "Offers declined.",
                load(&self.offers_declined),
            ),
            (
                "parley_offers_rescinded_total",
                "Offers rescinded.",
                load(&self.offers_rescinded),
            ),
            (
                "parley_offers_expired_total",
                "Offers expired unanswered.",
                load(&self.offers_expired),
            ),
            (
                "parley_registry_write_errors_total",
                "Changes the durable registry failed to write.",
                load(&self.registry_write_errors),
            ),
        ];
        for (name, help, v) in counters {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP parley_outstanding_offers Offers not yet answered.\n\
             # TYPE parley_outstanding_offers gauge\nparley_outstanding_offers {}",
            g.outstanding_offers
        );
        let labelled = [
            ("parley_tasks", "Tasks by state.", &g.tasks_by_state),
            ("parley_agents", "Agents by state.", &g.agents_by_state),
            (
                "parley_frameworks",
                "Frameworks by state.",
                &g.frameworks_by_state,
            ),
        ];
        for (name, help, map) in labelled {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
            for (state, n) in map.iter() {
                let _ = writeln!(out, "{name}{{state=\"{state}\"}} {n}");
            }
        }
        let _ = writeln!(
            out,
            "# HELP parley_role_dominant_share Dominant share of each role's allocation.\n\
             # TYPE parley_role_dominant_share gauge"
        );
        for (role, share) in &g.role_shares {
            let _ = writeln!(out, "parley_role_dominant_share{{role=\"{role}\"}} {share}");
        }
        let name = "parley_allocation_run_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Duration of allocation runs.\n# TYPE {name} histogram"
        );
        for (bound, bucket) in RUN_BUCKETS.iter().zip(&self.allocation_buckets) {
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {}", load(bucket));
        }
        let runs = load(&self.allocation_runs);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {runs}");
        let _ = writeln!(
            out,
            "{name}_sum {}",
            load(&self.allocation_micros) as f64 / 1e6
        );
        let _ = writeln!(out, "{name}_count {runs}");
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_histogram_and_gauges() {
        let m = Metrics::default();
        m.observe_allocation(Duration::from_micros(300));
        m.observe_allocation(Duration::from_secs(2));
        let mut g = Gauges {
            outstanding_offers: 3,
            ..Gauges::default()
        };
        g.tasks_by_state.insert("running", 2);
        g.role_shares.push(("eng".into(), 0.5));
        let text = m.render(&g);
        assert!(text.contains("parley_outstanding_offers 3"), "{text}");
        assert!(text.contains("parley_tasks{state=\"running\"} 2"), "{text}");
        assert!(
            text.contains("parley_role_dominant_share{role=\"eng\"} 0.5"),
            "{text}"
        );
        assert!(
            text.contains("parley_allocation_run_seconds_bucket{le=\"0.0005\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("parley_allocation_run_seconds_count 2"),
            "{text}"
        );
        assert!(text.contains("parley_offers_created_total 0"), "{text}");
    }
}
