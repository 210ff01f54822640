//! The election: a lease kept alive every TTL/3, a campaign on `<prefix>/leader` with this
//! coordinator's advertised URL, and, once elected, the take-over: load the registry from
//! etcd, install it (every later write fenced by the leader key's create revision), and offer
//! the agents as they re-register; with a quota set, first wait up to `reregister_grace` for
//! the loaded agents.
//!
//! While not leading, the leader's URL is polled from `/v3/election/leader` a few times a
//! second for the redirect middleware. The lease is lost (and `lost` cancelled) when a
//! keep-alive says it is gone, or no renewal lands within two thirds of the TTL (a local
//! deadline shorter than the TTL, so a coordinator stalled or cut off from etcd steps down
//! before etcd lets another take over).

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::etcd::{EtcdClient, EtcdError, LeaderKey, Lease};
use super::probe::LeaderWatch;
use super::{EtcdRegistry, HaOptions, Role};
use crate::runtime::Coordinator;
use crate::store::Registry;

/// How often a follower asks etcd who leads.
const OBSERVE_PERIOD: Duration = Duration::from_millis(200);

/// A running election: what shutdown needs to hand the leadership over.
#[derive(Debug)]
pub struct Election {
    client: Arc<EtcdClient>,
    lease: Lease,
    /// How often the lease is renewed, and how old the last renewal may get before this
    /// coordinator steps down ([`HaOptions::renew_period`], [`HaOptions::renew_deadline`]).
    renew: (Duration, Duration),
    leader: tokio::sync::Mutex<Option<LeaderKey>>,
}

impl Election {
    /// Grants the lease and starts keeping it alive (cancelling `lost` when it cannot).
    pub async fn start(
        client: Arc<EtcdClient>,
        options: &HaOptions,
        lost: CancellationToken,
    ) -> Result<Arc<Self>, EtcdError> {
        let ttl = i64::try_from(options.lease_ttl.as_secs()).unwrap_or(10);
        let lease = client.lease_grant(ttl).await?;
        tracing::info!(lease = lease.id, ttl_s = lease.ttl_s, "etcd lease granted");
        if lease.ttl_s > ttl {
            // etcd raises a TTL below its minimum (1.5 election timeouts): failover then
            // takes the longer lease, while renewals keep the pace of the asked one.
            tracing::warn!(
                asked_s = ttl,
                granted_s = lease.ttl_s,
                "etcd granted a longer lease than --leader-lease-s (its minimum TTL is 1.5 \
                 election timeouts); failover takes the granted TTL"
            );
        }
        let this = Arc::new(Self {
            client,
            lease,
            renew: (options.renew_period(), options.renew_deadline()),
            leader: tokio::sync::Mutex::new(None),
        });
        // Renewals run on a thread and runtime of their own, with a client of their own (its
        // connections are driven by that runtime): a leader whose workers are saturated by
        // requests must not miss its renew deadline and step down for it.
        let renewer = EtcdClient::new(this.client.endpoints().to_vec())
            .map_err(|e| EtcdError::Setup(format!("building the lease client: {e}")))?;
        let weak = Arc::downgrade(&this);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| EtcdError::Setup(format!("the lease thread's runtime: {e}")))?;
        std::thread::Builder::new()
            .name("lease-keepalive".into())
            .spawn(move || runtime.block_on(keep_alive(renewer, weak, lost)))
            .map_err(|e| EtcdError::Setup(format!("starting the lease thread: {e}")))?;
        Ok(this)
    }

    /// The lease.
    pub fn lease(&self) -> Lease {
        self.lease
    }

    /// Campaigns until elected (meanwhile telling `coordinator` who leads), then takes over.
    /// Returns when this coordinator leads and offers, or `stop` is cancelled.
    pub async fn lead(
        self: Arc<Self>,
        coordinator: Coordinator,
        options: HaOptions,
        lost: CancellationToken,
        stop: CancellationToken,
    ) -> Result<(), EtcdError> {
        let name = options.election_name();
        let watch = CancellationToken::new();
        tokio::spawn(observe(
            Arc::clone(&self.client),
            name.clone(),
            coordinator.clone(),
            options.leader_probe.map(|every| {
                (
                    every,
                    LeaderWatch::new(options.advertise_url.clone(), self.lease.id),
                )
            }),
            watch.clone(),
        ));
        let key = tokio::select! {
            k = self.campaign(&name, &options.advertise_url, &lost) => k,
            _ = stop.cancelled() => { watch.cancel(); return Ok(()); }
        };
        watch.cancel();
        let key = key?;
        let elected = Instant::now();
        // Requests wait for the take-over instead of following the stale view of who leads.
        coordinator.ha_status().set_taking_over();
        tracing::info!(rev = key.rev, url = %options.advertise_url, "elected leader");
        *self.leader.lock().await = Some(key.clone());
        let registry = EtcdRegistry::new(
            Arc::clone(&self.client),
            &options.prefix,
            key,
            lost,
            tokio::runtime::Handle::current(),
        );
        let snapshot = registry
            .load_async()
            .await
            .map_err(|e| EtcdError::BadAnswer {
                path: "registry".into(),
                reason: e.to_string(),
            })?;
        tracing::info!(
            frameworks = snapshot.frameworks.len(),
            agents = snapshot.agents.len(),
            "registry loaded from etcd"
        );
        coordinator
            .take_over(Box::new(registry) as Box<dyn Registry>, snapshot)
            .map_err(|e| EtcdError::BadAnswer {
                path: "registry".into(),
                reason: e.to_string(),
            })?;
        coordinator
            .ha_status()
            .set(Role::Leader, Some(options.advertise_url.clone()));
        // The agents the old leader had come back now, not at their next heartbeat.
        coordinator.spawn_recall(stop.clone());
        // Offers go to the agents already back (an agent's free resources are known once it
        // has re-registered with its tasks, and a task on one still awaited is answered as
        // not known yet, never as lost). Only quotas need the whole picture: with a guarantee
        // or a limit set, wait (bounded) for the loaded agents, as Mesos' allocator does,
        // so a limit is not overrun by tasks not yet counted.
        let deadline = elected + options.reregister_grace;
        while Instant::now() < deadline
            && coordinator.read(|s| s.has_quota() && s.awaited_agents() > 0)
        {
            tokio::select! {
                _ = stop.cancelled() => return Ok(()),
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
        let awaited = coordinator.read(|s| s.awaited_agents());
        tracing::info!(
            waited_ms = elected.elapsed().as_millis() as u64,
            still_awaited = awaited,
            "offering as leader"
        );
        coordinator.set_offering(true);
        Ok(())
    }

    /// Campaigns until elected. A campaign cut short (the etcd member it waited on went away)
    /// is started again on the same lease, which resumes the same candidate key, for as long
    /// as the lease lives.
    async fn campaign(
        &self,
        name: &str,
        url: &str,
        lost: &CancellationToken,
    ) -> Result<LeaderKey, EtcdError> {
        loop {
            match self
                .client
                .campaign(name.as_bytes(), self.lease.id, url.as_bytes())
                .await
            {
                Ok(key) => return Ok(key),
                Err(e) if !lost.is_cancelled() => {
                    tracing::warn!(error = %e, "campaign interrupted; campaigning again");
                    tokio::select! {
                        _ = lost.cancelled() => return Err(e),
                        _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Hands the leadership over (resign) and revokes the lease, so another coordinator takes
    /// over at once instead of after the TTL.
    pub async fn resign(&self) {
        if let Some(key) = self.leader.lock().await.take() {
            if let Err(e) = self.client.resign(&key).await {
                tracing::warn!(error = %e, "resign failed");
            }
        }
        if let Err(e) = self.client.lease_revoke(self.lease.id).await {
            tracing::warn!(error = %e, "lease revoke failed");
        } else {
            tracing::info!(lease = self.lease.id, "lease revoked");
        }
    }
}

/// Renews the lease every renew period (TTL/3 by default); cancels `lost` at once when etcd
/// says the lease is gone or no renewal landed within the renew deadline (2/3 of the TTL by
/// default, `--leader-renew-deadline-ms`). Ends then, or once the election is dropped.
async fn keep_alive(client: EtcdClient, election: Weak<Election>, lost: CancellationToken) {
    let Some((lease, (period, deadline))) = election.upgrade().map(|e| (e.lease.id, e.renew))
    else {
        return;
    };
    let mut last_ok = Instant::now();
    loop {
        tokio::select! {
            _ = lost.cancelled() => return,
            _ = tokio::time::sleep(period.saturating_sub(last_ok.elapsed().min(period))) => {}
        }
        if election.strong_count() == 0 {
            return;
        }
        let left = deadline.saturating_sub(last_ok.elapsed());
        if left.is_zero() {
            tracing::error!(lease, "no lease renewal within the deadline: stepping down");
            lost.cancel();
            return;
        }
        // Counted from the request, not the answer: etcd renewed the lease no earlier than
        // this, so the local deadline stays ahead of etcd's expiry whatever the latency.
        let sent = Instant::now();
        match client.lease_keepalive(lease, left).await {
            Ok(ttl) if ttl > 0 => last_ok = sent,
            Ok(_) => {
                tracing::error!(
                    lease,
                    "the lease is gone (expired or revoked): stepping down"
                );
                lost.cancel();
                return;
            }
            Err(e) => {
                // Retried until the deadline passes.
                tracing::warn!(error = %e, "lease keep-alive failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Polls who leads and tells `coordinator` (as a follower) until `stop`. With `probe` (a
/// period and the watch), also probes the leader's address and revokes the lease of a leader
/// whose process is gone ([`super::probe`]).
async fn observe(
    client: Arc<EtcdClient>,
    name: String,
    c: Coordinator,
    mut probe: Option<(Duration, LeaderWatch)>,
    stop: CancellationToken,
) {
    let mut next_ask = Instant::now();
    loop {
        if Instant::now() >= next_ask {
            next_ask = Instant::now() + OBSERVE_PERIOD;
            match client.leader_kv(name.as_bytes()).await {
                Ok(kv) => {
                    let leader =
                        kv.map(|kv| (String::from_utf8_lossy(&kv.value).into_owned(), kv.lease));
                    if c.ha_status().get().0 != Role::Leader {
                        c.ha_status()
                            .set(Role::Follower, leader.as_ref().map(|(url, _)| url.clone()));
                    }
                    if let Some((_, watch)) = probe.as_mut() {
                        if let Some(lease) = watch.leader(leader) {
                            let why = "the leader key names this coordinator's own URL under \
                                       another lease: an earlier run of this coordinator";
                            revoke(&client, lease, why).await;
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot ask etcd who leads"),
            }
        }
        let mut pause = OBSERVE_PERIOD;
        if let Some((every, watch)) = probe.as_mut() {
            if let Some(url) = watch.target().map(str::to_owned) {
                let found = super::probe::probe(&url, *every * 2).await;
                let was_seen = watch.seen_alive();
                let revoked = watch.probed(found);
                if !was_seen && watch.seen_alive() {
                    tracing::info!(leader = %url, "the leader's address accepts connections; probing it");
                }
                if let Some(lease) = revoked {
                    let why = format!(
                        "the leader at {url} refused {} connections in a row: its process is gone",
                        super::probe::REFUSALS
                    );
                    revoke(&client, lease, &why).await;
                    // Ask etcd for the next leader at once.
                    next_ask = Instant::now();
                }
                // After a refusal, probe again soon; otherwise at the probe's pace.
                pause = if watch.suspicious() {
                    *every / 2
                } else {
                    *every
                };
            }
        }
        let pause = pause.min(next_ask.saturating_duration_since(Instant::now()));
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

/// Revokes the lease of a leader that is gone, so the election goes on without waiting for it
/// to expire. Another follower may have revoked it first.
async fn revoke(client: &EtcdClient, lease: i64, why: &str) {
    match client.lease_revoke(lease).await {
        Ok(()) => tracing::warn!(lease, reason = why, "revoked the leader's lease"),
        Err(e) => {
            tracing::info!(lease, error = %e, "revoking the gone leader's lease failed (already gone?)")
        }
    }
}
