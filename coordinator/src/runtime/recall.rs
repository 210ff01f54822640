//! Calling back the agents the registry knew. A coordinator that takes over (a new leader on
//! etcd, or one restarted on its redb registry) loads the agents it knew and waits for them
//! to register again before it offers their resources. An agent would only find the new
//! leader at its next heartbeat, up to an interval (15 s by default) away, so each awaited
//! agent is called (`POST {endpoint}/api/v1/reconnect`, a few at a time) and heartbeats at
//! once, finding the leader as it always does.
//!
//! The call carries nothing and needs no token (coordinators keep none for agents): an agent
//! only brings its next heartbeat forward, at most once a second. One that does not answer,
//! or an older agent without the route (`404`), comes back at its next heartbeat as before.
//! Agents that registered again meanwhile are not called.

use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use tokio_util::sync::CancellationToken;

use super::Coordinator;

/// How many call-backs are in flight at once.
const IN_FLIGHT: usize = 64;

/// How long one call-back may take (shorter than agent calls: an agent that is gone must not
/// hold up the others for long).
const CALL_TIMEOUT: Duration = Duration::from_secs(2);

/// What a round of call-backs did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recalled {
    /// Agents that answered the call.
    pub answered: usize,
    /// Agents that could not be reached or refused it.
    pub failed: usize,
    /// Agents not called: registered again before their turn, or the round was stopped.
    pub skipped: usize,
}

enum Outcome {
    Answered,
    Failed,
    Skipped,
}

impl Coordinator {
    /// Calls back every agent the registry knew that has not registered again yet (see the
    /// module docs), until done or `stop` is cancelled; logs and returns what it did.
    pub async fn recall_agents(&self, stop: &CancellationToken) -> Recalled {
        let started = Instant::now();
        let awaited = self.read(|s| s.awaited_endpoints());
        if awaited.is_empty() {
            return Recalled::default();
        }
        let http = self.shared.http.clone();
        let outcomes: Vec<Outcome> = stream::iter(awaited)
            .map(|(id, endpoint)| {
                let http = http.clone();
                async move {
                    if stop.is_cancelled() || !self.read(|s| s.is_awaited(id)) {
                        return Outcome::Skipped;
                    }
                    let url = format!("{}/api/v1/reconnect", endpoint.trim_end_matches('/'));
                    let call = http.post(url).timeout(CALL_TIMEOUT).send();
                    match call.await {
                        Ok(r) if r.status().is_success() => Outcome::Answered,
                        Ok(r) => {
                            tracing::debug!(agent_id = %id, status = r.status().as_u16(), "call-back refused");
                            Outcome::Failed
                        }
                        Err(e) => {
                            tracing::debug!(agent_id = %id, error = %super::agent_call::error_chain(&e), "call-back failed");
                            Outcome::Failed
                        }
                    }
                }
            })
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
        let mut done = Recalled::default();
        for o in outcomes {
            match o {
                Outcome::Answered => done.answered += 1,
                Outcome::Failed => done.failed += 1,
                Outcome::Skipped => done.skipped += 1,
            }
        }
        tracing::info!(
            answered = done.answered,
            failed = done.failed,
            skipped = done.skipped,
            ms = started.elapsed().as_millis() as u64,
            "called back the agents the registry knew"
        );
        done
    }

    /// Calls back the awaited agents (if any) on a task of the coordinator's own.
    pub fn spawn_recall(&self, stop: CancellationToken) {
        let this = self.clone();
        self.tracker().spawn(async move {
            this.recall_agents(&stop).await;
        });
    }
}
