//! Noticing a dead leader before its lease runs out.
//!
//! A follower normally waits for the leader's lease to expire (`--leader-lease-s`) before the
//! election moves on. When the leader's process has died but its machine is up (a crash, an
//! OOM kill, a SIGKILL), the kernel says so at once: connections to the leader's advertised
//! address are refused. A follower that sees that address refuse [`REFUSALS`] connections in a
//! row, after it has seen it accept one during the same leadership, revokes the leader's lease,
//! and the election goes on in a fraction of a second instead of after the TTL.
//!
//! Safety does not rest on this guess: every write of a leader is fenced by its leader key's
//! revision, and a leader whose lease is gone steps down at its next renewal. Revoking the lease
//! of a leader that is in fact alive costs one needless failover, nothing more. Only a refusal
//! counts; a timeout or an unreachable host (a partition, a machine down) proves nothing and
//! leaves the decision to the lease. A leader that was never seen accepting (an advertised
//! address this follower cannot reach) is never revoked, so a misconfiguration cannot make the
//! leadership flap.
//!
//! One more case is certain: the leader key names this coordinator's own advertised URL under a
//! lease that is not its own. That is an earlier run of this coordinator, restarted since (by
//! its supervisor, on the same address), so the process holding that lease is gone.
//!
//! [`LeaderWatch`] is the decision, pure; [`probe`] is the one connection attempt.

use std::time::Duration;

/// How many refusals in a row mean the leader's process is gone.
pub const REFUSALS: u32 = 3;

/// What one connection attempt to the leader's address found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// The address accepted the connection: something listens there.
    Accepted,
    /// The connection was refused: nothing listens at that address.
    Refused,
    /// A timeout, an unreachable host, a name that did not resolve: proves nothing.
    Unclear,
}

/// The leader as the election names it, and what the probes found of it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Watched {
    url: String,
    lease: i64,
    seen_alive: bool,
    refusals: u32,
    /// Its lease was revoked (once is enough; the election names the next leader).
    revoked: bool,
}

/// Decides, from the leader the election names and the probes of its address, when a
/// follower revokes the leader's lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderWatch {
    own_url: String,
    own_lease: i64,
    leader: Option<Watched>,
}

impl LeaderWatch {
    /// A watch for the coordinator advertised at `own_url` campaigning on `own_lease`.
    pub fn new(own_url: impl Into<String>, own_lease: i64) -> Self {
        Self {
            own_url: own_url.into(),
            own_lease,
            leader: None,
        }
    }

    /// The leader the election names now (its advertised URL and lease), or none. A new URL
    /// or lease starts over: what was seen of the last one says nothing of this one.
    ///
    /// Returns a lease to revoke at once: the leader key names this coordinator's own URL
    /// under another lease, an earlier run of this coordinator.
    pub fn leader(&mut self, now: Option<(String, i64)>) -> Option<i64> {
        let Some((url, lease)) = now else {
            self.leader = None;
            return None;
        };
        let same = self
            .leader
            .as_ref()
            .is_some_and(|w| w.url == url && w.lease == lease);
        if !same {
            self.leader = Some(Watched {
                url,
                lease,
                seen_alive: false,
                refusals: 0,
                revoked: false,
            });
        }
        let w = self.leader.as_mut()?;
        if w.url == self.own_url && w.lease != self.own_lease && !w.revoked {
            w.revoked = true;
            return Some(w.lease);
        }
        None
    }

    /// The address to probe next: the leader's URL, unless there is none, it is this
    /// coordinator's own, or its lease was already revoked.
    pub fn target(&self) -> Option<&str> {
        self.leader
            .as_ref()
            .filter(|w| !w.revoked && w.url != self.own_url)
            .map(|w| w.url.as_str())
    }

    /// Whether the leader's address has accepted a probe during this leadership.
    pub fn seen_alive(&self) -> bool {
        self.leader.as_ref().is_some_and(|w| w.seen_alive)
    }

    /// Whether the last probe was a refusal (the next one then comes sooner).
    pub fn suspicious(&self) -> bool {
        self.leader.as_ref().is_some_and(|w| w.refusals > 0)
    }

    /// Records a probe of [`LeaderWatch::target`]; returns the lease to revoke when the
    /// leader's address, once seen accepting, has refused [`REFUSALS`] times in a row.
    pub fn probed(&mut self, probe: Probe) -> Option<i64> {
        let w = self.leader.as_mut().filter(|w| !w.revoked)?;
        match probe {
            Probe::Accepted => {
                w.seen_alive = true;
                w.refusals = 0;
            }
            Probe::Unclear => w.refusals = 0,
            Probe::Refused if w.seen_alive => {
                w.refusals += 1;
                if w.refusals >= REFUSALS {
                    w.revoked = true;
                    return Some(w.lease);
                }
            }
            Probe::Refused => {}
        }
        None
    }
}

/// One TCP connection attempt to the host and port of `url` (an `http://` or `https://` base
/// URL), given up after `timeout`. Nothing is sent: the connection is closed at once.
pub async fn probe(url: &str, timeout: Duration) -> Probe {
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return Probe::Unclear;
    };
    let (Some(host), Some(port)) = (parsed.host_str(), parsed.port_or_known_default()) else {
        return Probe::Unclear;
    };
    // An IPv6 literal comes bracketed in a URL; the resolver wants it bare.
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match tokio::time::timeout(timeout, tokio::net::TcpStream::connect((host, port))).await {
        Ok(Ok(_)) => Probe::Accepted,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => Probe::Refused,
        Ok(Err(_)) | Err(_) => Probe::Unclear,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEADER: &str = "http://10.0.0.1:5050";

    fn watching() -> LeaderWatch {
        let mut w = LeaderWatch::new("http://10.0.0.2:5050", 2);
        assert_eq!(w.leader(Some((LEADER.into(), 1))), None);
        w
    }

    #[test]
    fn a_leader_seen_alive_that_refuses_three_times_in_a_row_is_revoked_once() {
        let mut w = watching();
        assert_eq!(w.target(), Some(LEADER));
        assert!(!w.seen_alive());
        assert_eq!(w.probed(Probe::Accepted), None);
        assert!(w.seen_alive());
        assert_eq!(w.probed(Probe::Refused), None);
        assert!(w.suspicious());
        assert_eq!(w.probed(Probe::Refused), None);
        assert_eq!(w.probed(Probe::Refused), Some(1));
        // Once: no more probes, no second revocation, even when etcd names it again.
        assert_eq!(w.target(), None);
        assert_eq!(w.probed(Probe::Refused), None);
        assert_eq!(w.leader(Some((LEADER.into(), 1))), None);
        assert_eq!(w.target(), None);
    }

    #[test]
    fn a_leader_never_seen_accepting_is_never_revoked() {
        let mut w = watching();
        for _ in 0..10 {
            assert_eq!(w.probed(Probe::Refused), None);
        }
        assert!(!w.suspicious());
        assert_eq!(w.target(), Some(LEADER));
    }

    #[test]
    fn an_unclear_probe_or_an_accepted_one_starts_the_count_over() {
        let mut w = watching();
        w.probed(Probe::Accepted);
        for between in [Probe::Unclear, Probe::Accepted] {
            assert_eq!(w.probed(Probe::Refused), None);
            assert_eq!(w.probed(Probe::Refused), None);
            assert_eq!(w.probed(between), None);
            assert!(!w.suspicious());
        }
        assert_eq!(w.probed(Probe::Refused), None);
        assert_eq!(w.probed(Probe::Refused), None);
        assert_eq!(w.probed(Probe::Refused), Some(1));
    }

    #[test]
    fn a_new_leader_or_lease_starts_over_and_none_stops_the_probes() {
        let mut w = watching();
        w.probed(Probe::Accepted);
        w.probed(Probe::Refused);
        w.probed(Probe::Refused);
        // The same URL under a new lease: a new run, not yet seen alive.
        assert_eq!(w.leader(Some((LEADER.into(), 3))), None);
        assert!(!w.suspicious());
        for _ in 0..5 {
            assert_eq!(w.probed(Probe::Refused), None);
        }
        assert_eq!(w.leader(None), None);
        assert_eq!(w.target(), None);
        assert_eq!(w.probed(Probe::Accepted), None);
    }

    #[test]
    fn an_earlier_run_of_this_coordinator_is_revoked_at_once_but_its_own_lease_never() {
        let own = "http://10.0.0.2:5050";
        let mut w = LeaderWatch::new(own, 2);
        assert_eq!(w.leader(Some((own.into(), 7))), Some(7));
        assert_eq!(w.leader(Some((own.into(), 7))), None);
        assert_eq!(w.target(), None);
        let mut w = LeaderWatch::new(own, 2);
        assert_eq!(w.leader(Some((own.into(), 2))), None);
        assert_eq!(w.target(), None);
    }

    #[tokio::test]
    async fn a_probe_tells_a_listening_port_from_a_closed_one() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let url = format!("http://127.0.0.1:{port}");
        let timeout = Duration::from_secs(5);
        assert_eq!(probe(&url, timeout).await, Probe::Accepted);
        drop(listener);
        assert_eq!(probe(&url, timeout).await, Probe::Refused);
        assert_eq!(probe("not a url", timeout).await, Probe::Unclear);
    }
}
