//! The rows of a table of metrics: each binary keeps one (`METRICS`), from which its `/metrics`
//! page takes every name, type and help text, and from which the book's reference is generated,
//! so no metric can be served undocumented.

use std::fmt::Write;

use prometheus_client::metrics::MetricType;

/// What a metric is in Prometheus' terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (until the process restarts).
    Counter,
    /// A value now.
    Gauge,
    /// Observations in buckets, with their sum and count.
    Histogram,
}

impl Kind {
    /// The name in `# TYPE` lines.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }

    /// The `prometheus-client` type.
    pub fn metric_type(self) -> MetricType {
        match self {
            Kind::Counter => MetricType::Counter,
            Kind::Gauge => MetricType::Gauge,
            Kind::Histogram => MetricType::Histogram,
        }
    }
}

/// One metric of a `/metrics` page: what its `# HELP` and `# TYPE` lines say, and its row in
/// the book's reference.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// Its name as served (a counter's ends in `_total`).
    pub name: &'static str,
    /// Its type.
    pub kind: Kind,
    /// Its labels (comma-separated when several), for a metric with one series per value.
    pub label: Option<&'static str>,
    /// The `# HELP` text.
    pub help: &'static str,
    /// The closest metric of Mesos, for the reference (Markdown).
    pub mesos: &'static str,
}

/// The reference as a Markdown table: metric (with its labels), type, meaning and the closest
/// Mesos metric.
pub fn reference_table<'a>(metrics: impl IntoIterator<Item = &'a Metric>) -> String {
    let mut out = String::from("| metric | type | what | Mesos equivalent |\n|---|---|---|---|\n");
    for m in metrics {
        let label = m.label.map(|l| format!("{{{l}}}")).unwrap_or_default();
        let _ = writeln!(
            out,
            "| `{}{label}` | {} | {} | {} |",
            m.name,
            m.kind.as_str(),
            m.help,
            m.mesos
        );
    }
    out
}
