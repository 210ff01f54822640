//! High availability: several coordinators on etcd, one leader at a time.
//!
//! - [`etcd`]: a small typed client for etcd's JSON gateway (no `protoc`).
//! - [`registry`]: [`EtcdRegistry`], the durable registry under a key prefix, every write
//!   fenced by the leadership; reading and replacing it without leading, for backups.
//! - [`election`]: the lease, its keep-alive, the campaign, watching who leads, and taking
//!   over as leader (load the registry, wait for agents, then offer).
//! - [`probe`]: noticing a dead leader (its address refuses connections) and revoking its
//!   lease, so a crash fails over without waiting for the lease to expire.
//! - [`redirect`]: the middleware with which a follower answers `307` to the leader (`503`
//!   while there is none).
//!
//! The shared state is [`HaStatus`]: this coordinator's [`Role`] and the leader's URL, read by
//! `GET /health` and the redirect middleware. A coordinator without etcd is
//! [`Role::Standalone`] and behaves as it always did.
//!
//! Stepping down: when the lease cannot be renewed in time or a fenced write fails its
//! compare, the election cancels its `lost` token and [`crate::server::serve_ha`] returns
//! [`crate::ServeError::LeadershipLost`]; the binary exits (code 3) with a clear log line and
//! its supervisor starts it again, as a follower. Simple and correct: no state of the old
//! term survives into the next.

pub mod election;
pub mod etcd;
pub mod probe;
pub mod redirect;
pub mod registry;

use std::time::Duration;

pub use registry::EtcdRegistry;

pub use crate::runtime::{HaStatus, Role};

/// The HA settings (the `--etcd` flags).
#[derive(Debug, Clone, PartialEq)]
pub struct HaOptions {
    /// etcd client URLs.
    pub endpoints: Vec<String>,
    /// Key prefix, e.g. `/parley`.
    pub prefix: String,
    /// How the others reach this coordinator (its base URL).
    pub advertise_url: String,
    /// The leader lease's TTL.
    pub lease_ttl: Duration,
    /// The renew deadline: a leader whose last successful renewal is older than this steps
    /// down (Kubernetes' `renewDeadline`); `None` means two thirds of the TTL. It must be
    /// shorter than the TTL, so the leader stops before etcd lets another one in.
    pub renew_deadline: Option<Duration>,
    /// With a quota set, how long a new leader waits for the agents it loaded to re-register
    /// before offering (without quotas it offers each agent once it is back).
    pub reregister_grace: Duration,
    /// How often a follower probes the leader's address, to revoke the lease of a leader
    /// whose process is gone ([`probe`]); `None` waits for the lease to expire.
    pub leader_probe: Option<Duration>,
}

/// A bad HA setting (the message names the flag).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HaOptionsError(pub String);

impl HaOptions {
    /// Checks every setting; the error names the flag.
    pub fn validate(&self) -> Result<(), HaOptionsError> {
        let bad = |m: String| Err(HaOptionsError(m));
        check_etcd(&self.endpoints, &self.prefix)?;
        if !is_base_url(&self.advertise_url) {
            return bad(format!(
                "--advertise-url: {:?} is not an http:// or https:// URL (how others reach this coordinator)",
                self.advertise_url
            ));
        }
        let ttl = self.lease_ttl.as_secs();
        // 1 s works: renewals go out every 333 ms and the leader steps down after 666 ms
        // without one. etcd may grant more than asked (its minimum TTL is 1.5 election
        // timeouts, rounded up: 2 s with its default 1 s election timeout); the election warns.
        if !(1..=3600).contains(&ttl) || self.lease_ttl.subsec_nanos() != 0 {
            return bad(format!(
                "--leader-lease-s: {} is not a whole number of seconds within 1..=3600",
                self.lease_ttl.as_secs_f64()
            ));
        }
        if let Some(deadline) = self.renew_deadline {
            if deadline < Duration::from_millis(100) || deadline >= self.lease_ttl {
                return bad(format!(
                    "--leader-renew-deadline-ms: {} is not within 100 ms and the lease ({} s), exclusive",
                    deadline.as_millis(),
                    ttl
                ));
            }
        }
        if self.reregister_grace > Duration::from_secs(3600) {
            return bad("--reregister-grace-s: at most 3600".into());
        }
        if let Some(every) = self.leader_probe {
            if every < Duration::from_millis(10) || every > Duration::from_secs(60) {
                return bad(format!(
                    "--leader-probe-ms: {} is not within 10..=60000 (0 turns the probe off)",
                    every.as_millis()
                ));
            }
        }
        Ok(())
    }

    /// The renew deadline in force: [`HaOptions::renew_deadline`] or two thirds of the TTL.
    pub fn renew_deadline(&self) -> Duration {
        self.renew_deadline.unwrap_or(self.lease_ttl * 2 / 3)
    }

    /// How often the lease is renewed: a third of the TTL, and at least twice within the
    /// renew deadline (so one failed renewal is retried before the deadline passes).
    pub fn renew_period(&self) -> Duration {
        (self.lease_ttl / 3).min(self.renew_deadline() / 2)
    }

    /// Splits `--etcd`'s comma-separated URLs.
    pub fn parse_endpoints(raw: &str) -> Vec<String> {
        raw.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| s.trim_end_matches('/').to_owned())
            .collect()
    }

    /// The election's name (its keys are `<prefix>/leader/<lease>`).
    pub fn election_name(&self) -> String {
        format!("{}/leader", self.prefix)
    }
}

/// Checks `--etcd`'s URLs and `--etcd-prefix` (for the server and for `coordinator backup` and
/// `restore`); the error names the flag.
pub fn check_etcd(endpoints: &[String], prefix: &str) -> Result<(), HaOptionsError> {
    let bad = |m: String| Err(HaOptionsError(m));
    if endpoints.is_empty() {
        return bad("--etcd: give at least one URL".into());
    }
    for e in endpoints {
        if !is_base_url(e) {
            return bad(format!(
                "--etcd: {e:?} is not an http:// or https:// URL like http://127.0.0.1:2379"
            ));
        }
    }
    if !prefix.starts_with('/') || prefix.ends_with('/') || prefix.contains(char::is_whitespace) {
        return bad(format!(
            "--etcd-prefix: {prefix:?} must start with '/', not end with '/', and have no spaces"
        ));
    }
    Ok(())
}

fn is_base_url(s: &str) -> bool {
    let rest = s
        .strip_prefix("http://")
        .or_else(|| s.strip_prefix("https://"));
    rest.is_some_and(|r| !r.is_empty() && !r.contains(char::is_whitespace) && !r.contains('?'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> HaOptions {
        HaOptions {
            endpoints: HaOptions::parse_endpoints("http://127.0.0.1:2379, http://127.0.0.1:22379/"),
            prefix: "/parley".into(),
            advertise_url: "http://10.0.0.1:5050".into(),
            lease_ttl: Duration::from_secs(10),
            renew_deadline: None,
            reregister_grace: Duration::from_secs(10),
            leader_probe: Some(Duration::from_millis(100)),
        }
    }

    #[test]
    fn good_options_pass_and_endpoints_are_split() {
        let o = options();
        assert_eq!(
            o.endpoints,
            vec!["http://127.0.0.1:2379", "http://127.0.0.1:22379"]
        );
        o.validate().unwrap();
        assert_eq!(o.election_name(), "/parley/leader");
    }

    #[test]
    fn each_bad_option_names_its_flag() {
        let cases: Vec<(HaOptions, &str)> = vec![
            (
                HaOptions {
                    endpoints: vec![],
                    ..options()
                },
                "--etcd",
            ),
            (
                HaOptions {
                    endpoints: vec!["127.0.0.1:2379".into()],
                    ..options()
                },
                "--etcd",
            ),
            (
                HaOptions {
                    advertise_url: "me".into(),
                    ..options()
                },
                "--advertise-url",
            ),
            (
                HaOptions {
                    prefix: "parley".into(),
                    ..options()
                },
                "--etcd-prefix",
            ),
            (
                HaOptions {
                    prefix: "/parley/".into(),
                    ..options()
                },
                "--etcd-prefix",
            ),
            (
                HaOptions {
                    lease_ttl: Duration::ZERO,
                    ..options()
                },
                "--leader-lease-s",
            ),
            (
                HaOptions {
                    lease_ttl: Duration::from_secs(3601),
                    ..options()
                },
                "--leader-lease-s",
            ),
            (
                HaOptions {
                    reregister_grace: Duration::from_secs(7200),
                    ..options()
                },
                "--reregister-grace-s",
            ),
            (
                HaOptions {
                    leader_probe: Some(Duration::from_millis(5)),
                    ..options()
                },
                "--leader-probe-ms",
            ),
            (
                HaOptions {
                    renew_deadline: Some(Duration::from_secs(10)),
                    ..options()
                },
                "--leader-renew-deadline-ms",
            ),
            (
                HaOptions {
                    renew_deadline: Some(Duration::from_millis(50)),
                    ..options()
                },
                "--leader-renew-deadline-ms",
            ),
        ];
        for (o, flag) in cases {
            let e = o.validate().unwrap_err();
            assert!(e.to_string().starts_with(flag), "{e} should name {flag}");
        }
    }

    #[test]
    fn the_renew_deadline_defaults_to_two_thirds_of_the_lease_and_paces_renewals() {
        let o = options();
        assert_eq!(o.renew_deadline().as_millis(), 6_666);
        assert_eq!(o.renew_period().as_millis(), 3_333);
        let tight = HaOptions {
            renew_deadline: Some(Duration::from_secs(2)),
            ..options()
        };
        tight.validate().unwrap();
        assert_eq!(tight.renew_deadline(), Duration::from_secs(2));
        assert_eq!(tight.renew_period(), Duration::from_secs(1));
    }

    #[test]
    fn a_one_second_lease_is_accepted_and_renewed_well_within_it() {
        let o = HaOptions {
            lease_ttl: Duration::from_secs(1),
            ..options()
        };
        o.validate().unwrap();
        assert_eq!(o.renew_deadline().as_millis(), 666);
        assert_eq!(o.renew_period().as_millis(), 333);
        assert!(o.renew_period() * 2 <= o.renew_deadline());
        assert!(o.renew_deadline() < o.lease_ttl);
    }

    #[test]
    fn the_status_is_shared() {
        let s = HaStatus::new(Role::Follower);
        let t = s.clone();
        t.set(Role::Leader, Some("http://a".into()));
        assert_eq!(s.get(), (Role::Leader, Some("http://a".into())));
        assert_eq!(Role::Standalone.as_str(), "standalone");
    }
}
