//! Writing families through `prometheus-client` with the name, type and help of a table row.
//!
//! A [`Scrape`] is what a `prometheus_client::collector::Collector` writes with: it looks each
//! name up in its table, so a family cannot be served with a type or help of its own, nor one
//! that is not in the table (debug builds panic; release builds skip it).

use std::collections::HashMap;
use std::fmt;

use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder};
use prometheus_client::metrics::exemplar::Exemplar;
use prometheus_client::registry::Registry;

use crate::table::{Kind, Metric};

/// The `Content-Type` of [`encode`]'s output: the Prometheus text format, version 0.0.4.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// `registry` as Prometheus text (version 0.0.4, what every Prometheus scrapes).
pub fn encode(registry: &Registry) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail; a collector's error leaves the page cut short.
    let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, registry);
    out
}

/// Writes families whose name, type and help come from `table`.
pub struct Scrape<'a> {
    encoder: DescriptorEncoder<'a>,
    table: &'a [Metric],
}

impl std::fmt::Debug for Scrape<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scrape")
            .field("metrics", &self.table.len())
            .finish()
    }
}

/// No exemplars: the type `prometheus-client` wants for "none".
type NoExemplars<'e> = Option<&'e HashMap<usize, Exemplar<Vec<(String, String)>, f64>>>;

impl<'a> Scrape<'a> {
    /// Writes through `encoder` (a collector's) the metrics of `table`.
    pub fn new(encoder: DescriptorEncoder<'a>, table: &'a [Metric]) -> Self {
        Self { encoder, table }
    }

    /// The `# HELP` and `# TYPE` lines of `name`, and the encoder of its series; `None` for a
    /// name not in the table, or of another kind than `kind`.
    ///
    /// # Panics
    ///
    /// In debug builds, for such a name: a metric nobody documented.
    fn family(&mut self, name: &str, kind: Kind) -> Result<Option<MetricEncoder<'_>>, fmt::Error> {
        let metric = self.table.iter().find(|m| m.name == name);
        debug_assert!(
            metric.is_some_and(|m| m.kind == kind),
            "metric {name} is not in the table as a {}",
            kind.as_str()
        );
        let Some(m) = metric.filter(|m| m.kind == kind) else {
            return Ok(None);
        };
        // prometheus-client adds `_total` to a counter's name itself.
        let base = match m.kind {
            Kind::Counter => m.name.strip_suffix("_total").unwrap_or(m.name),
            _ => m.name,
        };
        self.encoder
            .encode_descriptor(base, m.help, None, m.kind.metric_type())
            .map(Some)
    }

    /// A counter without labels.
    pub fn counter(&mut self, name: &str, value: u64) -> fmt::Result {
        match self.family(name, Kind::Counter)? {
            Some(mut e) => e.encode_counter::<Vec<(String, String)>, _, f64>(&value, None),
            None => Ok(()),
        }
    }

    /// A counter without labels whose value may have a fraction (seconds, percents).
    pub fn counter_f64(&mut self, name: &str, value: f64) -> fmt::Result {
        match self.family(name, Kind::Counter)? {
            Some(mut e) => counter_value(&mut e, value),
            None => Ok(()),
        }
    }

    /// A counter with one series per value of `label`, whose values may have a fraction.
    pub fn counters_f64<L: AsRef<str>>(
        &mut self,
        name: &str,
        label: &str,
        series: impl IntoIterator<Item = (L, f64)>,
    ) -> fmt::Result {
        self.labelled(name, Kind::Counter, label, series, counter_value)
    }

    /// A counter with one series per value of `label`.
    pub fn counters<L: AsRef<str>>(
        &mut self,
        name: &str,
        label: &str,
        series: impl IntoIterator<Item = (L, u64)>,
    ) -> fmt::Result {
        self.labelled(name, Kind::Counter, label, series, |e, v| {
            e.encode_counter::<Vec<(String, String)>, _, f64>(&v, None)
        })
    }

    /// Writes family `name` of kind `kind` with one series per value of `label`, each value
    /// written by `write`.
    fn labelled<L: AsRef<str>, V>(
        &mut self,
        name: &str,
        kind: Kind,
        label: &str,
        series: impl IntoIterator<Item = (L, V)>,
        write: impl Fn(&mut MetricEncoder<'_>, V) -> fmt::Result,
    ) -> fmt::Result {
        let Some(mut e) = self.family(name, kind)? else {
            return Ok(());
        };
        for (value, v) in series {
            let labels = [(label, value.as_ref())];
            write(&mut e.encode_family(&labels)?, v)?;
        }
        Ok(())
    }

    /// A gauge without labels.
    pub fn gauge(&mut self, name: &str, value: f64) -> fmt::Result {
        match self.family(name, Kind::Gauge)? {
            Some(mut e) => gauge_value(&mut e, value),
            None => Ok(()),
        }
    }

    /// A gauge with one series per value of `label`.
    pub fn gauges<L: AsRef<str>>(
        &mut self,
        name: &str,
        label: &str,
        series: impl IntoIterator<Item = (L, f64)>,
    ) -> fmt::Result {
        self.labelled(name, Kind::Gauge, label, series, gauge_value)
    }

    /// A gauge of one series, 1, whose labels are the information (`parley_build_info`).
    pub fn info(&mut self, name: &str, labels: &[(&str, &str)]) -> fmt::Result {
        match self.family(name, Kind::Gauge)? {
            Some(mut e) => e.encode_family(&labels)?.encode_gauge(&1_i64),
            None => Ok(()),
        }
    }

    /// A histogram: `buckets` are `(upper bound, observations in this bucket alone)`, in order;
    /// observations above the last bound are in `count` only.
    pub fn histogram(
        &mut self,
        name: &str,
        sum: f64,
        count: u64,
        buckets: &[(f64, u64)],
    ) -> fmt::Result {
        match self.family(name, Kind::Histogram)? {
            Some(mut e) => e.encode_histogram(sum, count, buckets, NoExemplars::None),
            None => Ok(()),
        }
    }
}

/// 2^53: every integer of smaller magnitude is exact in an `f64`.
const EXACT: f64 = 9_007_199_254_740_992.0;

/// Writes gauge value `v`, as an integer when it is one (`4`, not `4.0`: what the page always
/// showed).
fn gauge_value(e: &mut MetricEncoder<'_>, v: f64) -> fmt::Result {
    if v.fract() == 0.0 && v.abs() < EXACT {
        e.encode_gauge(&(v as i64))
    } else {
        e.encode_gauge(&v)
    }
}

/// Writes counter value `v`, as an integer when it is one.
fn counter_value(e: &mut MetricEncoder<'_>, v: f64) -> fmt::Result {
    if v.fract() == 0.0 && (0.0..EXACT).contains(&v) {
        e.encode_counter::<Vec<(String, String)>, _, f64>(&(v as u64), None)
    } else {
        e.encode_counter::<Vec<(String, String)>, _, f64>(&v, None)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use prometheus_client::collector::Collector;

    use super::*;

    const TABLE: [Metric; 4] = [
        Metric {
            name: "t_events_total",
            kind: Kind::Counter,
            label: Some("kind"),
            help: "Events.",
            mesos: "none",
        },
        Metric {
            name: "t_level",
            kind: Kind::Gauge,
            label: None,
            help: "A level.",
            mesos: "none",
        },
        Metric {
            name: "t_seconds",
            kind: Kind::Histogram,
            label: None,
            help: "Durations.",
            mesos: "none",
        },
        Metric {
            name: "t_build_info",
            kind: Kind::Gauge,
            label: Some("version"),
            help: "The build.",
            mesos: "none",
        },
    ];

    #[derive(Debug)]
    struct Fixed;

    impl Collector for Fixed {
        fn encode(&self, encoder: DescriptorEncoder) -> fmt::Result {
            let mut s = Scrape::new(encoder, &TABLE);
            s.counters("t_events_total", "kind", [("a", 2), ("b", 0)])?;
            s.gauge("t_level", 4.0)?;
            s.histogram("t_seconds", 1.5, 3, &[(0.5, 1), (1.0, 1)])?;
            s.info("t_build_info", &[("version", "1.2.3")])
        }
    }

    #[test]
    fn families_take_their_type_and_help_from_the_table() {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Fixed));
        let text = encode(&registry);
        let expected = "# HELP t_events_total Events.
# TYPE t_events_total counter
t_events_total{kind=\"a\"} 2
t_events_total{kind=\"b\"} 0
# HELP t_level A level.
# TYPE t_level gauge
t_level 4
# HELP t_seconds Durations.
# TYPE t_seconds histogram
t_seconds_bucket{le=\"0.5\"} 1
t_seconds_bucket{le=\"1\"} 2
t_seconds_bucket{le=\"+Inf\"} 3
t_seconds_sum 1.5
t_seconds_count 3
# HELP t_build_info The build.
# TYPE t_build_info gauge
t_build_info{version=\"1.2.3\"} 1
";
        assert_eq!(text, expected);
    }

    #[test]
    fn fractions_stay_fractions() {
        #[derive(Debug)]
        struct Half;
        impl Collector for Half {
            fn encode(&self, encoder: DescriptorEncoder) -> fmt::Result {
                Scrape::new(encoder, &TABLE).gauge("t_level", 0.25)
            }
        }
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Half));
        assert!(encode(&registry).contains("t_level 0.25\n"));
    }
}
