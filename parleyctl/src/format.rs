//! How values read in a table: resources, shares, times, and framework names for ids.

use protocol::{Resources, Timestamp};

/// `cpus=2,mem=512`, or `-` when empty.
pub fn resources(r: &Resources) -> String {
    let text = r.to_string();
    if text.is_empty() {
        "-".to_owned()
    } else {
        text
    }
}

/// An agent's reservations: `eng: cpus=2 (static); ops: mem=512 (dynamic)`, or
/// `-` without any.
pub fn reservations(list: &[protocol::reservation::AgentReservation]) -> String {
    if list.is_empty() {
        return "-".to_owned();
    }
    list.iter()
        .map(|r| {
            let kind = match r.kind {
                protocol::reservation::ReservationKind::Static => "static",
                protocol::reservation::ReservationKind::Dynamic => "dynamic",
            };
            format!("{}: {} ({kind})", r.role, r.resources)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// A dominant share as a percentage with one decimal: `25.0%`.
pub fn share(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

/// A weight without needless decimals: `2`, `0.5`.
pub fn weight(w: f64) -> String {
    let text = format!("{w:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// Seconds from `now` to `at`, as `in 3s` or `4s ago`.
pub fn relative(at: &Timestamp, now: &Timestamp) -> String {
    let ms = (*at - *now).num_milliseconds();
    let s = ms.abs() / 1000;
    if ms >= 0 {
        format!("in {s}s")
    } else {
        format!("{s}s ago")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn reservations_read_well() {
        use protocol::reservation::{AgentReservation, ReservationKind};
        assert_eq!(reservations(&[]), "-");
        let list = [
            AgentReservation {
                role: "eng".parse().unwrap_or_else(|e| panic!("{e}")),
                resources: "cpus=2".parse().unwrap_or_default(),
                kind: ReservationKind::Static,
            },
            AgentReservation {
                role: "ops".parse().unwrap_or_else(|e| panic!("{e}")),
                resources: "mem=512".parse().unwrap_or_default(),
                kind: ReservationKind::Dynamic,
            },
        ];
        assert_eq!(
            reservations(&list),
            "eng: cpus=2 (static); ops: mem=512 (dynamic)"
        );
    }

    #[test]
    fn values_read_well() {
        assert_eq!(
            resources(&"cpus=2,mem=512".parse().unwrap()),
            "cpus=2,mem=512"
        );
        assert_eq!(resources(&Resources::default()), "-");
        assert_eq!(share(0.25), "25.0%");
        assert_eq!(weight(2.0), "2");
        assert_eq!(weight(0.5), "0.5");
        let now = chrono::Utc::now();
        assert_eq!(
            relative(&(now + chrono::Duration::seconds(3)), &now),
            "in 3s"
        );
        assert_eq!(
            relative(&(now - chrono::Duration::seconds(4)), &now),
            "4s ago"
        );
    }
}
