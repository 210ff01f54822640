//! [`Role`] and [`HaStatus`]: whether this coordinator is standalone, the leader or a
//! follower, and the leader's URL. Plain shared data: the runtime holds it, the `ha` module's
//! election sets it, and the redirect middleware and `/health` read it.

use std::sync::{Arc, RwLock};

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

/// The role and the leader's URL, shared by the election, the middleware and `/health`.
#[derive(Debug, Clone)]
pub struct HaStatus(Arc<RwLock<(Role, Option<String>)>>);

impl HaStatus {
    /// A status starting as `role`, no leader known.
    pub fn new(role: Role) -> Self {
        Self(Arc::new(RwLock::new((role, None))))
    }

    /// The role and the leader's URL (`None` while there is none, and when standalone).
    pub fn get(&self) -> (Role, Option<String>) {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Sets both.
    pub fn set(&self, role: Role, leader: Option<String>) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = (role, leader);
    }
}
