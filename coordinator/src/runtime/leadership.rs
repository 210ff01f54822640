//! [`Role`] and [`HaStatus`]: whether this coordinator is standalone, the leader or a
//! follower, and the leader's URL. Plain shared data: the runtime holds it, the `ha` module's
//! election sets it, and the redirect middleware and `/health` read it. The middleware can
//! also wait for it to settle ([`HaStatus::settled`]) while an election or a take-over is
//! under way, so a request sent then is answered by its outcome instead of bounced.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

/// What this coordinator is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// No etcd: the only coordinator.
    Standalone,
    /// Elected: serves the API.
    Leader,
    /// Not elected: redirects to the leader.
    Follower,
}

impl Role {
    /// As `GET /health` shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Standalone => "standalone",
            Role::Leader => "leader",
            Role::Follower => "follower",
        }
    }
}

/// The shared value: the role, the leader's URL, and whether this coordinator has been elected
/// and is still taking over (loading the registry; a follower until it is done).
#[derive(Debug, Clone, PartialEq)]
struct Status {
    role: Role,
    leader: Option<String>,
    taking_over: bool,
}

impl Status {
    /// Whether a request can be answered now: served (leader, standalone), or redirected to a
    /// known leader by a follower that is not itself taking over.
    fn settled(&self) -> bool {
        match self.role {
            Role::Leader | Role::Standalone => true,
            Role::Follower => self.leader.is_some() && !self.taking_over,
        }
    }
}

/// The role and the leader's URL, shared by the election, the middleware and `/health`.
#[derive(Debug, Clone)]
pub struct HaStatus(Arc<watch::Sender<Status>>);

impl HaStatus {
    /// A status starting as `role`, no leader known.
    pub fn new(role: Role) -> Self {
        Self(Arc::new(watch::Sender::new(Status {
            role,
            leader: None,
            taking_over: false,
        })))
    }

    /// The role and the leader's URL (`None` while there is none, and when standalone).
    pub fn get(&self) -> (Role, Option<String>) {
        let s = self.0.borrow();
        (s.role, s.leader.clone())
    }

    /// Sets both. A take-over ends only when the role becomes leader (or standalone): a
    /// follower's late view of who leads does not end it.
    pub fn set(&self, role: Role, leader: Option<String>) {
        self.0.send_if_modified(|s| {
            let next = Status {
                role,
                leader,
                taking_over: s.taking_over && role == Role::Follower,
            };
            let changed = *s != next;
            *s = next;
            changed
        });
    }

    /// This coordinator has been elected and is taking over: until [`HaStatus::set`] makes it
    /// the leader, requests wait for it rather than being redirected.
    pub fn set_taking_over(&self) {
        self.0.send_modify(|s| s.taking_over = true);
    }

    /// Waits up to `limit` for the status to settle: this coordinator leads (or is
    /// standalone), or it follows a known leader and is not taking over. Returns the role and
    /// leader then, or as they are when `limit` passes.
    pub async fn settled(&self, limit: Duration) -> (Role, Option<String>) {
        // Every request passes here: the common case takes no subscription and no timer.
        if self.0.borrow().settled() {
            return self.get();
        }
        let mut rx = self.0.subscribe();
        // An error means the sender is gone, which cannot happen while `self` holds it.
        let _ = tokio::time::timeout(limit, rx.wait_for(Status::settled)).await;
        self.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn settled_waits_for_an_election_or_a_take_over_to_end() {
        let s = HaStatus::new(Role::Follower);
        // No leader known: waits, and gives up after the limit.
        let limit = Duration::from_millis(20);
        assert_eq!(s.settled(limit).await, (Role::Follower, None));
        // A leader appears meanwhile: answered with it.
        let waiting = tokio::spawn({
            let s = s.clone();
            async move { s.settled(Duration::from_secs(30)).await }
        });
        s.set(Role::Follower, Some("http://b".into()));
        assert_eq!(
            waiting.await.unwrap(),
            (Role::Follower, Some("http://b".into()))
        );
        // Elected and taking over: the stale leader is not used, nor a late view of who
        // leads; waits for the take-over.
        s.set_taking_over();
        s.set(Role::Follower, Some("http://me".into()));
        assert_eq!(s.settled(limit).await.1.as_deref(), Some("http://me"));
        let waiting = tokio::spawn({
            let s = s.clone();
            async move { s.settled(Duration::from_secs(30)).await }
        });
        s.set(Role::Leader, Some("http://me".into()));
        assert_eq!(waiting.await.unwrap().0, Role::Leader);
        // Settled at once when it already is.
        assert_eq!(s.settled(Duration::ZERO).await.0, Role::Leader);
    }
}
