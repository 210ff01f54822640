//! [`serve`]: wires the registry, the API and the background loops, and runs them until the
//! shutdown future resolves. With `Config::tls_cert` and `Config::tls_key` it serves HTTPS
//! (rustls with ring, through `parley_tls`); otherwise plain HTTP. With
//! `Config::reload_on_sighup` a SIGHUP re-reads the certificate and the credentials file
//! (`crate::reload`).
//!
//! Background loops, each ending on the shutdown token:
//! - allocation: every `allocation_interval`, and `allocation_batch_delay` after a kick (a
//!   change that freed resources or made a framework eligible), so bursts of changes are
//!   batched into one run and offers follow freed resources within milliseconds; a kicked run
//!   waits at least as long as the previous run took, so kicks cannot keep the lock busy;
//! - maintenance: offer expiry, agent liveness, framework failover timeouts, and re-sends of
//!   unacknowledged updates, on a tick short enough for the shortest of those periods;
//! - history: one sample of the books a second for the dashboard (`crate::history`).
//!
//! Each loop is supervised ([`supervise`]): a panic in it is logged, counted
//! (`parley_loop_panics_total{loop=...}`) and the loop is started again, so a bug there never
//! stops offers silently. The books' lock survives such a panic (see `Coordinator::lock`).

use std::future::Future;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, ConfigError};
use crate::history::History;
use crate::runtime::doorbell::{CloseOnDrop, Woken};
use crate::runtime::{Coordinator, StartError};
use crate::state::{StallChange, Sweep};
use crate::store::StoreError;

/// Why a coordinator could not start, or stopped serving with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A setting is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The durable registry could not be opened or read.
    #[error(transparent)]
    Registry(#[from] StoreError),
    /// The HTTP client for requests to agents could not be built.
    #[error("cannot build the HTTP client for agents")]
    HttpClient(#[source] reqwest::Error),
    /// The durable registry's writer thread could not be started.
    #[error("cannot start the registry writer thread")]
    RegistryWriter(#[source] std::io::Error),
    /// A TLS certificate, key or CA file cannot be used (the message names the file).
    #[error(transparent)]
    Tls(#[from] parley_tls::TlsError),
    /// Serving the listener failed.
    #[error("serving HTTP")]
    Io(#[source] std::io::Error),
    /// A high-availability setting is invalid (the message names the flag).
    #[error(transparent)]
    Ha(#[from] crate::ha::HaOptionsError),
    /// etcd could not be used (at start: unreachable, refused the lease).
    #[error(transparent)]
    Etcd(#[from] crate::ha::etcd::EtcdError),
    /// This coordinator lost the leadership (or its lease) and stopped serving; start it again
    /// to rejoin as a follower.
    #[error("lost the leadership (lease expired or a fenced write failed): stopped; restart to rejoin as a follower")]
    LeadershipLost,
}

impl From<StartError> for ServeError {
    fn from(e: StartError) -> Self {
        match e {
            StartError::Registry(e) => ServeError::Registry(e),
            StartError::HttpClient(e) => ServeError::HttpClient(e),
            StartError::RegistryWriter(e) => ServeError::RegistryWriter(e),
            StartError::Tls(e) => ServeError::Tls(e),
        }
    }
}

impl From<reqwest::Error> for ServeError {
    fn from(e: reqwest::Error) -> Self {
        ServeError::HttpClient(e)
    }
}

/// Serves the coordinator on `listener` until `shutdown` resolves, then stops accepting,
/// ends the event streams and background loops, and waits for in-flight work.
pub async fn serve(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    config.validate()?;
    let coordinator = Coordinator::new(config, CancellationToken::new())?;
    serve_coordinator(coordinator, listener, shutdown).await
}

/// Serves one of several coordinators on etcd (`crate::ha`): a follower at first (redirecting),
/// campaigning; once elected it loads the registry from etcd and leads. Returns
/// [`ServeError::LeadershipLost`] when the lease or a fenced write says another leads (the
/// caller exits and is restarted as a follower); on `shutdown` it resigns and revokes its
/// lease, so another takes over at once. Needs a multi-threaded tokio runtime (the registry's
/// writer thread blocks on etcd requests driven by it).
pub async fn serve_ha(
    mut config: Config,
    options: crate::ha::HaOptions,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    use std::sync::Arc;

    use crate::ha::{election::Election, etcd::EtcdClient, Role};

    config.validate()?;
    options.validate()?;
    // The registry is etcd's, installed on election.
    config.registry = None;
    let coordinator = Coordinator::new(config, CancellationToken::new())?;
    coordinator.ha_status().set(Role::Follower, None);
    coordinator.set_offering(false);
    let client = Arc::new(EtcdClient::new(options.endpoints.clone())?);
    let lost = CancellationToken::new();
    let election = Election::start(client, &options, lost.clone()).await?;
    let stop = coordinator.shutdown_token().clone();
    {
        let (election, c, lost) = (Arc::clone(&election), coordinator.clone(), lost.clone());
        tokio::spawn(async move {
            if let Err(e) = election.lead(c, options, lost.clone(), stop).await {
                tracing::error!(error = %e, "taking over as leader failed: stepping down");
                lost.cancel();
            }
        });
    }
    let lost_watch = lost.clone();
    let until = async move {
        tokio::select! {
            _ = shutdown => {}
            _ = lost_watch.cancelled() => {}
        }
    };
    let result = serve_coordinator(coordinator, listener, until).await;
    if lost.is_cancelled() {
        return Err(ServeError::LeadershipLost);
    }
    lost.cancel();
    election.resign().await;
    result
}

/// Serves an already built coordinator (its books loaded from the registry) on `listener`
/// until `shutdown` resolves or its shutdown token is cancelled; see [`serve`].
pub async fn serve_coordinator(
    coordinator: Coordinator,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    // HTTPS when the config names a certificate and key (read and checked here, before
    // anything is served); plain HTTP otherwise.
    let config = coordinator.config();
    let tls = match parley_tls::ServerTls::from_options(
        config.tls_cert.as_deref(),
        config.tls_key.as_deref(),
    ) {
        Ok(tls) => tls,
        Err(e) => {
            coordinator.close_registry();
            return Err(e.into());
        }
    };
    if let Some(tls) = &tls {
        coordinator.set_server_tls(tls.clone());
    }
    let token = coordinator.shutdown_token().clone();
    let mut loops = spawn_loops(&coordinator);
    if config.reload_on_sighup {
        match crate::reload::reload_on_sighup(coordinator.clone()) {
            Ok(handle) => loops.push(handle),
            Err(e) => {
                coordinator.close_registry();
                return Err(ServeError::Io(e));
            }
        }
    }
    let app = crate::router::app(coordinator.clone());
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, tls = tls.is_some(), "coordinator listening");
    }
    // Restarted on its registry: the agents it knew come back now, not at their next beat.
    coordinator.spawn_recall(token.clone());
    let stop = token.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = shutdown => {}
            _ = stop.cancelled() => {}
        }
        // Streams and loops end on the token; the server then drains.
        stop.cancel();
    });
    let header_read_timeout = coordinator.config().header_read_timeout;
    let result = match tls {
        None => {
            crate::http::serve_http(listener, app, header_read_timeout, token.clone()).await;
            Ok(())
        }
        Some(tls) => match parley_tls::TlsListener::new(listener, tls) {
            Ok(listener) => {
                crate::http::serve_http(listener, app, header_read_timeout, token.clone()).await;
                Ok(())
            }
            Err(e) => Err(e),
        },
    };
    token.cancel();
    for handle in loops {
        let _ = handle.await;
    }
    coordinator.tracker().close();
    coordinator.tracker().wait().await;
    coordinator.close_registry();
    result.map_err(ServeError::Io)
}

/// Starts the allocation and maintenance loops of a coordinator, each supervised.
pub fn spawn_loops(coordinator: &Coordinator) -> Vec<tokio::task::JoinHandle<()>> {
    vec![
        tokio::spawn(supervise(
            coordinator.clone(),
            "allocation",
            allocation_loop,
        )),
        tokio::spawn(supervise(
            coordinator.clone(),
            "maintenance",
            maintenance_loop,
        )),
        tokio::spawn(supervise(coordinator.clone(), "history", history_loop)),
    ]
}

/// How long a supervisor waits before starting a loop that panicked again, so a panic on
/// every turn does not spin.
const RESTART_DELAY: Duration = Duration::from_millis(100);

/// Runs the loop `body` as a task of its own until it returns (at shutdown). When it panics,
/// the panic is logged and counted under `name` (`parley_loop_panics_total{loop=name}`) and the
/// loop is started again after 100 ms: never silent, never stopped for good.
pub async fn supervise<F, Fut>(c: Coordinator, name: &'static str, body: F)
where
    F: Fn(Coordinator) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let token = c.shutdown_token().clone();
    loop {
        match tokio::spawn(body(c.clone())).await {
            Ok(()) => return,
            Err(e) if e.is_panic() => {
                let panic = e.into_panic();
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                c.metrics().count_loop_panic(name);
                tracing::error!(r#loop = name, panic = %what, "background loop panicked; restarting it");
            }
            // Cancelled: the runtime is shutting down.
            Err(_) => return,
        }
        tokio::select! {
            _ = token.cancelled() => return,
            _ = tokio::time::sleep(RESTART_DELAY) => {}
        }
    }
}

/// Takes a history sample for the dashboard every [`History::INTERVAL`] (see
/// [`crate::history`]).
async fn history_loop(c: Coordinator) {
    let token = c.shutdown_token().clone();
    let mut tick = tokio::time::interval(History::INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = token.cancelled() => return,
            _ = tick.tick() => {}
        }
        c.maybe_injected_panic("history");
        c.sample_history();
    }
}

/// Agents per part of an allocation run: the books' lock is taken once per part, so a request
/// waits for at most one part, never a whole run of every agent.
const ALLOCATION_PART: usize = 1_000;

/// How often a run paused by a full launch window looks again.
const WINDOW_POLL: Duration = Duration::from_millis(2);

/// The allocation loop: runs on an OS thread of its own (tokio's blocking pool) rather than as
/// a task among the request handlers, so a kick wakes it at once instead of queuing it behind
/// every request waiting for the runtime's workers (see [`allocation_turns`]). This task only
/// starts the thread, stops it at shutdown (or when the runtime drops the task) and passes a
/// panic on to [`supervise`].
async fn allocation_loop(c: Coordinator) {
    let token = c.shutdown_token().clone();
    let bell = c.doorbell();
    bell.open();
    let _stop = CloseOnDrop(bell);
    let thread = {
        let c = c.clone();
        tokio::task::spawn_blocking(move || allocation_turns(&c))
    };
    let ended = tokio::select! {
        ended = thread => ended,
        _ = token.cancelled() => return,
    };
    if let Err(e) = ended {
        if e.is_panic() {
            std::panic::resume_unwind(e.into_panic());
        }
    }
}

/// The allocation thread's loop: a run over every agent on every tick of
/// `allocation_interval` and, when kicked, a run over the agents whose resources or filters
/// changed since a run last visited them ([`Sweep::Changed`], which visits every agent when
/// something else changed that can unblock frameworks anywhere) after `allocation_batch_delay`
/// (or as long as the last run took, if longer: a flood of kicks, frameworks reviving in a loop
/// as Mesos users knew, leaves the books' lock free at least half the time). Each run goes over
/// its agents in parts of [`ALLOCATION_PART`], fewer when the launch window has less room
/// ([`State::admissible_agents`](crate::state::State::admissible_agents)), pausing while it has
/// none. Returns when the doorbell is closed.
fn allocation_turns(c: &Coordinator) {
    let bell = c.doorbell();
    let interval = c.config().allocation_interval;
    let batch = c.config().allocation_batch_delay;
    let window = c.config().launch_window;
    let mut last_run = Duration::ZERO;
    // The first run is at once, as a tokio interval's first tick.
    let mut next_tick = Instant::now();
    loop {
        let sweep = match bell.wait_until(next_tick) {
            Woken::Closed => return,
            Woken::Deadline => {
                next_tick = Instant::now() + interval;
                Sweep::All
            }
            Woken::Rung => {
                let wait = batch.max(last_run);
                if !wait.is_zero() && !bell.sleep(wait) {
                    return;
                }
                Sweep::Changed
            }
        };
        c.maybe_injected_panic("allocation");
        if !c.offering() {
            // An HA follower, or a new leader still waiting for its agents.
            continue;
        }
        let started = Instant::now();
        let mut run = c.run(|state, now, _| state.start_run(sweep, now));
        let mut made = 0;
        let mut paused = Duration::ZERO;
        while !run.done() {
            let (m, waits, room) = c.run(|state, now, fx| {
                let room = state.admissible_agents(window, now);
                if room == 0 {
                    return (0, Vec::new(), 0);
                }
                let m = state.allocate_part(&mut run, ALLOCATION_PART.min(room), now, fx);
                (m, state.take_offer_waits(), room)
            });
            for ms in waits {
                c.metrics().observe_offer_wait(Duration::from_millis(ms));
            }
            made += m;
            if room == 0 {
                // The launch window is full: the same run goes on once agents have reported
                // some of the tasks launching, or offers were answered.
                let asleep = Instant::now();
                if !bell.sleep(WINDOW_POLL) {
                    return;
                }
                let waited = asleep.elapsed();
                paused += waited;
                c.metrics().count_window_wait(waited);
                if !c.offering() {
                    break;
                }
            }
        }
        // Time spent allocating, not waiting for the window: what spaces the next run.
        last_run = started.elapsed().saturating_sub(paused);
        c.metrics().observe_allocation(last_run);
        if made > 0 {
            tracing::debug!(
                offers = made,
                agents = run.visited(),
                full = run.full(),
                "allocation run"
            );
        }
    }
}

/// The maintenance tick: a fraction of the shortest period it serves, within [5 ms, 1 s].
fn maintenance_period(config: &Config) -> Duration {
    let shortest = [
        config.offer_timeout,
        config.agent_heartbeat_interval,
        config.update_resend_interval,
        config.framework_heartbeat_interval,
    ]
    .into_iter()
    .min()
    .unwrap_or(Duration::from_secs(1));
    (shortest / 4).clamp(Duration::from_millis(5), Duration::from_secs(1))
}

async fn maintenance_loop(c: Coordinator) {
    let token = c.shutdown_token().clone();
    let mut tick = tokio::time::interval(maintenance_period(c.config()));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = token.cancelled() => return,
            _ = tick.tick() => {}
        }
        c.maybe_injected_panic("maintenance");
        // A coordinator that makes no offers yet (an HA follower, or a leader in its
        // re-registration grace) holds frameworks back on purpose: no stall to report.
        let offering = c.offering();
        let stalls = c.run(|state, now, fx| {
            state.expire_offers(now, fx);
            state.check_agents(now, fx);
            state.check_drains(now, fx);
            state.check_preemption(now, fx);
            state.check_failover(now, fx);
            state.resend_updates(now, fx);
            if offering {
                state.check_stalls(now)
            } else {
                Vec::new()
            }
        });
        log_stalls(stalls);
    }
}

/// Logs, outside the books' lock, the stalls that began (a warning, once per stall) or ended
/// since the last check.
fn log_stalls(changes: Vec<StallChange>) {
    for change in changes {
        match change {
            StallChange::Began {
                framework_id,
                name,
                stalled_for_s,
                agents_with_room,
                reason,
            } => tracing::warn!(
                framework = %framework_id,
                name = %name,
                stalled_for_s,
                agents_with_room,
                reason = %reason,
                "framework stalled: it wants tasks and has had no offer while agents have room \
                 (see GET /api/v1/frameworks/{{id}}/explain)"
            ),
            StallChange::Ended {
                framework_id,
                name,
                stalled_for_s,
            } => tracing::info!(
                framework = %framework_id,
                name = %name,
                stalled_for_s,
                "framework no longer stalled"
            ),
        }
    }
}
