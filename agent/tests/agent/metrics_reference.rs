//! The book's agent metrics reference (`docs/src/reference/agent-metrics.md`) is generated from
//! the table the agent's `/metrics` is written from (`agent::metrics::METRICS`, then the process'
//! figures of `observe::process::METRICS`); this test fails when the page is stale
//! (`PARLEY_BLESS=1` regenerates it).

/// The page's prose before the table.
const INTRO: &str = "# Agent metrics

`GET /metrics` on an agent's API address (Prometheus text, version 0.0.4). It needs no token:
it shows counts only, never task ids, commands or environments, and a Prometheus server should
not need the secret that lets the coordinator launch tasks (see
[Metrics](../operating/metrics.md)). Mesos names are the closest equivalent on a Mesos agent's
`/metrics/snapshot`. This page is generated from the agent's table of metrics
(`agent/src/metrics.rs`, `METRICS`) and the process figures every Parley server shares.

";

/// The page's prose after the table.
const OUTRO: &str = "
The terminal counters start at 0 when the agent starts: a restarted agent does not count again
the tasks its journal replays. Use `increase()` or `rate()` over them, as over any counter.
";

#[test]
fn the_agent_metrics_reference_is_fresh() {
    let page = format!("{INTRO}{}{OUTRO}", agent::metrics::reference_table());
    testkit::docs::fresh_or_bless(
        &testkit::docs::repository().join("docs/src/reference/agent-metrics.md"),
        page.as_bytes(),
        "cargo test -p parley-agent --test agent metrics_reference::",
    );
}
