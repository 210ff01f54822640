//! Periodic jobs' schedules: a cron pattern (five fields, or six with seconds first) read in
//! an IANA time zone, and what to do when a run is due while the last one still runs.

use std::fmt;
use std::str::FromStr;

use chrono::{TimeZone, Utc};
use croner::parser::{CronParser, Seconds};
use serde::{Deserialize, Serialize};

use crate::clock::Millis;
use crate::spec_error::SpecError;

/// When a periodic job runs.
#[derive(Clone)]
pub struct Schedule {
    cron: croner::Cron,
    zone: chrono_tz::Tz,
    pattern: String,
}

impl fmt::Debug for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Schedule({:?} in {})", self.pattern, self.zone.name())
    }
}

impl PartialEq for Schedule {
    fn eq(&self, other: &Self) -> bool {
        self.pattern == other.pattern && self.zone == other.zone
    }
}

impl Schedule {
    /// Reads `pattern` (field `schedule`) in the zone `zone` (field `time_zone`, e.g. `UTC`,
    /// `Europe/Paris`).
    pub fn parse(pattern: &str, zone: &str) -> Result<Self, SpecError> {
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .build()
            .parse(pattern)
            .map_err(|e| SpecError {
                field: "schedule".into(),
                message: format!("{pattern:?} is not a cron pattern: {e}"),
                line: None,
            })?;
        let zone = chrono_tz::Tz::from_str(zone).map_err(|_| SpecError {
            field: "time_zone".into(),
            message: format!("{zone:?} is not an IANA time zone (e.g. UTC, Europe/Paris)"),
            line: None,
        })?;
        Ok(Self {
            cron,
            zone,
            pattern: pattern.to_owned(),
        })
    }

    /// The first time after `after` (milliseconds since the epoch) that the pattern matches.
    pub fn next_after(&self, after: Millis) -> Option<Millis> {
        let start = Utc
            .timestamp_millis_opt(i64::try_from(after).ok()?)
            .single()?
            .with_timezone(&self.zone);
        let next = self.cron.find_next_occurrence(&start, false).ok()?;
        u64::try_from(next.timestamp_millis()).ok()
    }
}

/// What a periodic job does when a run is due and the previous one has not ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Concurrency {
    /// Skip this run.
    Forbid,
    /// Start it anyway.
    Allow,
    /// Stop the running ones and start it.
    Replace,
}

impl Concurrency {
    /// Reads the field `concurrency`.
    pub fn parse(text: &str) -> Result<Self, SpecError> {
        match text {
            "forbid" => Ok(Self::Forbid),
            "allow" => Ok(Self::Allow),
            "replace" => Ok(Self::Replace),
            other => Err(SpecError {
                field: "concurrency".into(),
                message: format!("{other:?} is not a policy: use forbid, allow or replace"),
                line: None,
            }),
        }
    }
}

/// A periodic job's schedule and policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Periodic {
    /// When it runs.
    pub schedule: Schedule,
    /// What to do when a run is due and the last still runs.
    pub concurrency: Concurrency,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_read_in_their_zone() {
        let hourly = Schedule::parse("0 * * * *", "UTC").unwrap();
        // 2024-01-01T00:30:00Z -> 01:00Z.
        let t = 1_704_069_000_000;
        assert_eq!(hourly.next_after(t), Some(1_704_070_800_000));
        let every_2s = Schedule::parse("*/2 * * * * *", "UTC").unwrap();
        assert_eq!(every_2s.next_after(t), Some(t + 2000));
        // Midnight in Paris is 23:00 UTC in winter.
        let paris = Schedule::parse("0 0 * * *", "Europe/Paris").unwrap();
        assert_eq!(paris.next_after(t), Some(1_704_150_000_000));
        assert_eq!(
            Schedule::parse("61 * * * *", "UTC").unwrap_err().field,
            "schedule"
        );
        assert_eq!(
            Schedule::parse("* * * * *", "Mars/Olympus")
                .unwrap_err()
                .field,
            "time_zone"
        );
        assert_eq!(
            Concurrency::parse("sometimes").unwrap_err().field,
            "concurrency"
        );
    }
}
