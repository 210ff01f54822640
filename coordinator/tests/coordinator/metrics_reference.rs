//! The book's metrics reference (`docs/src/reference/metrics.md`) is generated from the table
//! `/metrics` is written from (`coordinator::metrics::METRICS`); this test fails when the page
//! is stale (`PARLEY_BLESS=1` regenerates it).

/// The page's prose before the table.
const INTRO: &str = "# Metrics

`GET /metrics` (Prometheus text, version 0.0.4). Mesos names are the closest equivalent on a
Mesos master's `/metrics/snapshot`. This page is generated from the coordinator's table of
metrics (`coordinator/src/metrics.rs`, `METRICS`), the same table `/metrics` is written from,
followed by the process figures and build every Parley server serves. The agents' own metrics
are in [Agent metrics](agent-metrics.md).

";

/// The page's prose after the table.
const OUTRO: &str = "
Counters start at 0 when the coordinator starts, and `parley_tasks_terminal_total` also when a
coordinator takes over as leader: it counts the tasks that ended while this coordinator kept
the books, not a cluster's history. `parley_resources_total` is typed a counter, as it always
was, though it goes down when agents leave: read it as a gauge (no `rate()`).

`parley_tasks_fenced_total`: agents fence tasks reported `lost` or `gone` themselves first, so a
rising count means agents that could not (an older agent, a clock that jumped).

`allocator/event_queue_dispatches` (the allocator actor's queue) has no Parley equivalent: the
allocator is called inline under the books' lock, and kicks to the allocation loop coalesce
into one run (`allocation_batch_delay`), so there is no queue to grow; a backlog shows instead
as longer `parley_allocation_run_seconds` and `parley_offer_wait_seconds`.
";

#[test]
fn the_metrics_reference_is_fresh() {
    let page = format!("{INTRO}{}{OUTRO}", coordinator::metrics::reference_table());
    testkit::docs::fresh_or_bless(
        &testkit::docs::repository().join("docs/src/reference/metrics.md"),
        page.as_bytes(),
        "cargo test -p parley-coordinator --test coordinator metrics_reference::",
    );
}
