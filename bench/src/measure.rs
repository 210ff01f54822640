//! Pure arithmetic on what the harness records, and readers of what the OS and the coordinator
//! report: percentiles of samples, the sustained rate of a series of instants, quantiles of a
//! Prometheus histogram between two scrapes, and a process's CPU time and peak RSS from `/proc`.

use std::time::{Duration, Instant};

use anyhow::Context;

/// The `q` quantile (0 ≤ q ≤ 1) of `samples` by the nearest-rank method; `None` when empty.
/// Sorts `samples`.
pub fn percentile(samples: &mut [Duration], q: f64) -> Option<Duration> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_unstable();
    let rank = (q.clamp(0.0, 1.0) * samples.len() as f64).ceil() as usize;
    samples.get(rank.saturating_sub(1)).copied()
}

/// Events per second over the middle 80 % of `instants` (from the 10th to the 90th percentile
/// instant), so a slow start or a straggling tail does not count. `None` with fewer than ten
/// instants or when they all fall at once. Sorts `instants`.
pub fn sustained_rate(instants: &mut [Instant]) -> Option<f64> {
    if instants.len() < 10 {
        return None;
    }
    instants.sort_unstable();
    let n = instants.len();
    let first = n / 10;
    let last = n - 1 - n / 10;
    let span = instants[last].duration_since(instants[first]).as_secs_f64();
    (span > 0.0).then(|| (last - first) as f64 / span)
}

/// One histogram as scraped: `(upper bound, cumulative count)` per bucket, `+Inf` last.
pub type Buckets = Vec<(f64, u64)>;

/// The buckets of histogram `name` (e.g. `parley_allocation_run_fine_seconds`) in Prometheus
/// text; `None` when the text has no such histogram.
pub fn histogram(text: &str, name: &str) -> Option<Buckets> {
    let prefix = format!("{name}_bucket{{le=\"");
    let mut buckets: Buckets = text
        .lines()
        .filter_map(|line| line.strip_prefix(prefix.as_str()))
        .filter_map(|rest| rest.split_once("\"} "))
        .filter_map(|(le, count)| {
            let bound = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((bound, count.trim().parse().ok()?))
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    (!buckets.is_empty()).then_some(buckets)
}

/// The value of an unlabelled sample `name` (a counter or gauge) in Prometheus text.
pub fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter_map(|line| line.strip_prefix(name))
        .filter_map(|rest| rest.strip_prefix(' '))
        .find_map(|v| v.trim().parse().ok())
}

/// The value of sample `name{label="value"}` (one series of a labelled gauge or counter) in
/// Prometheus text, e.g. `parley_agents{state="active"}`.
pub fn labelled_sample(text: &str, name: &str, label: &str, value: &str) -> Option<f64> {
    let series = format!("{name}{{{label}=\"{value}\"}} ");
    text.lines()
        .filter_map(|line| line.strip_prefix(series.as_str()))
        .find_map(|v| v.trim().parse().ok())
}

/// Runs observed between two scrapes of one histogram: `after − before`, bucket by bucket.
/// A bucket missing from `before` counts as zero there (the coordinator had just started).
pub fn histogram_delta(before: Option<&Buckets>, after: &Buckets) -> Buckets {
    after
        .iter()
        .map(|&(bound, count)| {
            let earlier = before
                .and_then(|b| b.iter().find(|(eb, _)| *eb == bound))
                .map_or(0, |(_, c)| *c);
            (bound, count.saturating_sub(earlier))
        })
        .collect()
}

/// The `q` quantile of a cumulative histogram, interpolated linearly inside the bucket that
/// holds it (as Prometheus' `histogram_quantile` does); a quantile in the `+Inf` bucket is
/// reported as the largest finite bound. `None` when the histogram is empty.
pub fn histogram_quantile(buckets: &Buckets, q: f64) -> Option<f64> {
    let total = buckets.last()?.1;
    if total == 0 {
        return None;
    }
    let rank = q.clamp(0.0, 1.0) * total as f64;
    let mut lower_bound = 0.0;
    let mut lower_count = 0u64;
    for &(bound, count) in buckets {
        if count as f64 >= rank && count > lower_count {
            if bound.is_infinite() {
                return Some(lower_bound);
            }
            let inside = (rank - lower_count as f64) / (count - lower_count) as f64;
            return Some(lower_bound + (bound - lower_bound) * inside);
        }
        if bound.is_finite() {
            lower_bound = bound;
        }
        lower_count = count;
    }
    Some(lower_bound)
}

/// Clock ticks per second of `/proc/<pid>/stat` times: `USER_HZ`, 100 on every Linux
/// architecture the project builds for.
const USER_HZ: f64 = 100.0;

/// CPU time (user + system) a process has used so far, from `/proc/<pid>/stat`.
pub fn cpu_time(pid: u32) -> anyhow::Result<Duration> {
    let path = format!("/proc/{pid}/stat");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    parse_cpu_time(&text).with_context(|| format!("{path}: no utime/stime fields"))
}

/// utime + stime of one `/proc/<pid>/stat` line. The command name (field 2) is in parentheses
/// and may hold spaces, so fields are counted after its closing parenthesis.
fn parse_cpu_time(stat: &str) -> Option<Duration> {
    let (_, after_name) = stat.rsplit_once(')')?;
    // After the name: field 3 (state) is index 0, so utime (14) and stime (15) are 11 and 12.
    let mut fields = after_name.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_secs_f64((utime + stime) as f64 / USER_HZ))
}

/// A process's peak resident set size in bytes (`VmHWM` of `/proc/<pid>/status`).
pub fn peak_rss(pid: u32) -> anyhow::Result<u64> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    parse_vm_hwm(&text).with_context(|| format!("{path}: no VmHWM line"))
}

/// A process's resident set size now, in bytes (`VmRSS` of `/proc/<pid>/status`).
pub fn rss(pid: u32) -> anyhow::Result<u64> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    parse_status_kib(&text, "VmRSS:").with_context(|| format!("{path}: no VmRSS line"))
}

fn parse_vm_hwm(status: &str) -> Option<u64> {
    parse_status_kib(status, "VmHWM:")
}

/// The `{field} N kB` line of a `/proc/<pid>/status`, in bytes.
fn parse_status_kib(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix(field))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn percentile_is_nearest_rank() {
        let mut s: Vec<Duration> = (1..=100).rev().map(ms).collect();
        assert_eq!(percentile(&mut s, 0.5), Some(ms(50)));
        assert_eq!(percentile(&mut s, 0.99), Some(ms(99)));
        assert_eq!(percentile(&mut s, 1.0), Some(ms(100)));
        assert_eq!(percentile(&mut s, 0.0), Some(ms(1)));
        assert_eq!(percentile(&mut [], 0.5), None);
        assert_eq!(percentile(&mut [ms(7)], 0.99), Some(ms(7)));
    }

    #[test]
    fn sustained_rate_ignores_the_first_and_last_tenth() {
        let start = Instant::now();
        // 100 events 10 ms apart, then 10 stragglers a second later each.
        let mut at: Vec<Instant> = (0..100).map(|i| start + ms(10 * i)).collect();
        at.extend((1..=10).map(|i| start + Duration::from_secs(10 + i)));
        let rate = sustained_rate(&mut at).unwrap();
        // Middle: instants 11..=98 → 87 intervals of 10 ms → 100/s.
        assert!((rate - 100.0).abs() < 1e-6, "{rate}");
        assert_eq!(sustained_rate(&mut at[..5]), None);
        assert_eq!(sustained_rate(&mut vec![start; 20]), None);
    }

    const TEXT: &str = "\
# TYPE h histogram
h_bucket{le=\"0.001\"} 10
h_bucket{le=\"0.01\"} 90
h_bucket{le=\"0.1\"} 100
h_bucket{le=\"+Inf\"} 100
h_count 100
other_total 42
g{state=\"active\"} 7
g{state=\"draining\"} 1
";

    #[test]
    fn reads_histograms_and_samples() {
        let h = histogram(TEXT, "h").unwrap();
        assert_eq!(h.len(), 4);
        assert_eq!(h[0], (0.001, 10));
        assert_eq!(h[3].0, f64::INFINITY);
        assert_eq!(histogram(TEXT, "missing"), None);
        assert_eq!(sample(TEXT, "other_total"), Some(42.0));
        assert_eq!(sample(TEXT, "h_count"), Some(100.0));
        assert_eq!(sample(TEXT, "other"), None);
        assert_eq!(labelled_sample(TEXT, "g", "state", "active"), Some(7.0));
        assert_eq!(labelled_sample(TEXT, "g", "state", "lost"), None);
        assert_eq!(labelled_sample(TEXT, "g", "role", "active"), None);
    }

    #[test]
    fn histogram_quantiles_interpolate_inside_a_bucket() {
        let h = histogram(TEXT, "h").unwrap();
        // Rank 50 is 40 of the 80 runs in (0.001, 0.01].
        let p50 = histogram_quantile(&h, 0.5).unwrap();
        assert!((p50 - 0.0055).abs() < 1e-12, "{p50}");
        let p99 = histogram_quantile(&h, 0.99).unwrap();
        assert!((p99 - 0.091).abs() < 1e-12, "{p99}");
        let empty = vec![(1.0, 0), (f64::INFINITY, 0)];
        assert_eq!(histogram_quantile(&empty, 0.5), None);
        // Everything past the last finite bound reads as that bound.
        let tail = vec![(1.0, 0), (f64::INFINITY, 5)];
        assert_eq!(histogram_quantile(&tail, 0.5), Some(1.0));
    }

    #[test]
    fn histogram_delta_subtracts_bucket_by_bucket() {
        let before = vec![(0.1, 3), (f64::INFINITY, 4)];
        let after = vec![(0.1, 10), (f64::INFINITY, 20)];
        assert_eq!(
            histogram_delta(Some(&before), &after),
            vec![(0.1, 7), (f64::INFINITY, 16)]
        );
        assert_eq!(histogram_delta(None, &after), after);
    }

    #[test]
    fn parses_proc_stat_and_status() {
        let stat = "1234 (tokio (worker)) S 1 1234 1234 0 -1 4194560 500 0 0 0 250 75 0 0 20 0 8";
        assert_eq!(parse_cpu_time(stat), Some(Duration::from_millis(3250)));
        assert_eq!(parse_cpu_time("garbage"), None);
        let status = "Name:\tcoordinator\nVmPeak:\t  100 kB\nVmHWM:\t   16600 kB\nVmRSS:\t 1 kB\n";
        assert_eq!(parse_vm_hwm(status), Some(16600 * 1024));
        assert_eq!(parse_vm_hwm("Name: x\n"), None);
        assert_eq!(parse_status_kib(status, "VmRSS:"), Some(1024));
    }

    #[test]
    fn reads_this_process() {
        let me = std::process::id();
        assert!(peak_rss(me).unwrap() > 0);
        assert!(rss(me).unwrap() > 0);
        cpu_time(me).unwrap();
    }
}
