//! [`Coordinator`]: the async shell around the registry. It owns the one lock on [`State`],
//! runs state methods, and performs the effects they return.
//!
//! Events for framework streams and the operator offer stream are handed to their channels
//! while the lock is still held, so every stream sees events in the order the books changed
//! (an `offers` event never overtakes the `rescind` of an earlier offer). Channel sends do not
//! block. Network effects (launch, kill) run after the lock is released, as tasks on a
//! [`TaskTracker`] that shutdown waits for. Changes to the durable registry are queued to its
//! [`Writer`] thread under the lock too (so they are written in the books' order) and written
//! after it is released, off the tokio worker threads. Calls that answer a client about a
//! stored fact go through the durable lane (`runtime/durable.rs`: [`Coordinator::run_write_first`]
//! and [`Coordinator::run_write_pipelined`]): the change is written before the books change, so
//! a failed write answers 503 and changes nothing.
//!
//! Agents are called through [`agent_call`]: no redirects, timeouts, the agent's own token,
//! error bodies cut to a short excerpt. After a take-over the agents the registry knew are
//! called back (`runtime/recall.rs`) so that they register again at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use protocol::events::OfferEvent;
use protocol::messages::{KillTask, LaunchTasks};
use protocol::{AgentId, FrameworkEvent, FrameworkId, TaskId, TaskState};
use tokio::sync::{broadcast, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::history::History;
use crate::metrics::Metrics;
use crate::outbox::{Outbox, OutboxReader, Push};
use crate::state::{AgentToken, Effect, Effects, Now, State, StateError};
use crate::store::{Registry, Snapshot, Store, StoreError, WriteFailures, Writer};

pub mod agent_call;
pub mod doorbell;
mod durable;
mod leadership;
mod recall;
pub mod task_output;

pub use doorbell::Doorbell;
pub use leadership::{HaStatus, Role};
pub use recall::Recalled;

/// Capacity of the operator offer stream; a slower reader skips what it missed.
const OFFER_EVENTS_CAPACITY: usize = 4096;

/// A change was made to the books but could not be written to the durable registry (logged
/// and counted where it failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the registry write failed")]
pub struct RegistryWriteFailed;

/// A cheap, clonable handle to one running coordinator.
#[derive(Clone)]
pub struct Coordinator {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator").finish_non_exhaustive()
    }
}

struct Shared {
    config: Config,
    /// The books and the open framework streams. A std mutex: it is never held across an
    /// `.await`, and every critical section is short and CPU-only.
    inner: Mutex<Inner>,
    /// Wakes the allocation loop's thread after a change that frees resources.
    doorbell: Doorbell,
    offer_events: broadcast::Sender<OfferEvent>,
    http: reqwest::Client,
    tracker: TaskTracker,
    shutdown: CancellationToken,
    start: Instant,
    metrics: Arc<Metrics>,
    /// What `/metrics` serves: the counters, the books' gauges read at each scrape, the
    /// process' figures ([`Metrics::registry`]).
    registry: observe::prometheus_client::registry::Registry,
    /// Samples of the books for the dashboard's charts.
    history: History,
    /// Test hook: bit `i` set makes background loop `LOOPS[i]` panic on its next turn
    /// ([`Coordinator::inject_loop_panic`]).
    injected_panics: AtomicU8,
    /// Orders the calls that write first ([`durable`]).
    lane: durable::Lane,
    /// Test hook: the registry's switch for failing writes ([`Coordinator::fail_registry_writes`]).
    write_failures: Option<WriteFailures>,
    /// Leader, follower or standalone, and who leads (`crate::ha`).
    ha: HaStatus,
    /// Whether the allocation loop makes offers: always when standalone; for an HA leader once
    /// the agents had their time to re-register.
    offering: AtomicBool,
    /// The principals requests are checked against: the config's at start, replaced by a
    /// reload (`crate::reload`). `None`: the API is open (a reload never changes that).
    credentials: std::sync::RwLock<Option<Arc<crate::auth::Credentials>>>,
    /// The certificate being served, once serving over HTTPS started (a reload replaces the
    /// pair inside it).
    tls: std::sync::OnceLock<parley_tls::ServerTls>,
}

struct Inner {
    state: State,
    streams: HashMap<FrameworkId, StreamSlot>,
    /// The durable registry's writer, if any. Fed under the books' lock, so it writes in the
    /// books' order; `None` again once closed.
    store: Option<Writer>,
    /// Pipelined durable calls written and not yet applied ([`durable`]).
    durable: durable::Queue,
}

struct StreamSlot {
    generation: u64,
    /// The stream's coalescing queue (see [`crate::outbox`]): only a reader that has stopped
    /// loses its stream.
    outbox: Arc<Outbox>,
}

impl Drop for StreamSlot {
    /// A slot removed or replaced ends its stream once the reader has read what waits.
    fn drop(&mut self) {
        self.outbox.close();
    }
}

/// What one dispatch left to do once the lock is released.
struct Dispatched {
    io: Vec<Io>,
    allocate: bool,
    /// The writer's answer for the registry changes, if there were any.
    written: Option<oneshot::Receiver<bool>>,
    /// Streams closed because their reader stopped: `(framework, generation)`.
    overflowed: Vec<(FrameworkId, u64)>,
}

/// Network work to do once the lock is released.
/// A kill to send: the agent's endpoint and token, the task, and the reason if any.
type KillCall = (
    String,
    Option<AgentToken>,
    FrameworkId,
    TaskId,
    Option<&'static str>,
);

enum Io {
    Launch {
        agent_id: AgentId,
        endpoint: String,
        token: Option<AgentToken>,
        body: LaunchTasks,
    },
    Kill {
        agent_id: AgentId,
        endpoint: String,
        token: Option<AgentToken>,
        framework_id: FrameworkId,
        task_id: TaskId,
        /// `agent_partitioned` for a fence (see [`Effect::Fence`]).
        reason: Option<&'static str>,
    },
}

/// Why a [`Coordinator`] could not be made, or could not take over as leader.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The durable registry could not be opened or read.
    #[error(transparent)]
    Registry(#[from] StoreError),
    /// The HTTP client for requests to agents could not be built.
    #[error("cannot build the HTTP client for agents")]
    HttpClient(#[from] reqwest::Error),
    /// The durable registry's writer thread could not be started.
    #[error("cannot start the registry writer thread")]
    RegistryWriter(#[source] std::io::Error),
    /// The CA file for calls to agents cannot be used (the message names the file).
    #[error(transparent)]
    Tls(#[from] parley_tls::TlsError),
}

/// What a scrape of `/metrics` reads: the books' gauges (once, under their lock) and whether
/// this coordinator leads. Holds the coordinator weakly: its registry is part of it.
fn scrape_source(weak: std::sync::Weak<Shared>) -> crate::metrics::Source {
    Box::new(move || {
        let c = Coordinator {
            shared: weak.upgrade()?,
        };
        let (role, _) = c.ha_status().get();
        Some(crate::metrics::Scraped {
            gauges: c.read(|s| s.gauges()),
            leader: role != Role::Follower,
        })
    })
}

impl Coordinator {
    /// A coordinator whose books hold what `config.registry` kept (empty without one).
    /// `shutdown` ends its streams and background loops. Fails if the registry cannot be opened
    /// or read: starting with empty books instead would forget frameworks silently.
    pub fn new(config: Config, shutdown: CancellationToken) -> Result<Self, StartError> {
        let start = Instant::now();
        let mut state = State::new(&books::Settings::from(&config));
        let metrics = Arc::new(Metrics::default());
        let mut write_failures = None;
        let store = match &config.registry {
            Some(path) => {
                let store = Store::open(path)?;
                let snapshot = store.load()?;
                tracing::info!(
                    registry = %path.display(),
                    frameworks = snapshot.frameworks.len(),
                    weights = snapshot.weights.len(),
                    "registry loaded"
                );
                let now = Now {
                    ms: 0,
                    wall: protocol::now(),
                };
                state.restore(snapshot, &now);
                write_failures = Some(store.write_failures());
                let counted = Arc::clone(&metrics);
                Some(
                    Writer::spawn(store, move |_, _| counted.count_registry_write_error())
                        .map_err(StartError::RegistryWriter)?,
                )
            }
            None => None,
        };
        let http = agent_call::client(
            parley_tls::client_builder(config.agent_ca_file.as_deref())?,
            config.agent_request_timeout,
        )?;
        let (offer_events, _) = broadcast::channel(OFFER_EVENTS_CAPACITY);
        let credentials = config.credentials.clone();
        Ok(Self {
            shared: Arc::new_cyclic(|weak: &std::sync::Weak<Shared>| Shared {
                registry: metrics.registry(scrape_source(weak.clone())),
                inner: Mutex::new(Inner {
                    state,
                    streams: HashMap::new(),
                    store,
                    durable: durable::Queue::default(),
                }),
                config,
                doorbell: Doorbell::default(),
                offer_events,
                http,
                tracker: TaskTracker::new(),
                shutdown,
                start,
                metrics,
                history: History::default(),
                injected_panics: AtomicU8::new(0),
                lane: durable::Lane::default(),
                write_failures,
                ha: HaStatus::new(Role::Standalone),
                offering: AtomicBool::new(true),
                credentials: std::sync::RwLock::new(credentials),
                tls: std::sync::OnceLock::new(),
            }),
        })
    }

    /// This coordinator's role and the leader's URL (`crate::ha`).
    pub fn ha_status(&self) -> &HaStatus {
        &self.shared.ha
    }

    /// Whether the allocation loop makes offers.
    pub fn offering(&self) -> bool {
        self.shared.offering.load(Ordering::SeqCst)
    }

    /// Starts or stops offers (an HA coordinator offers only as leader, after the
    /// re-registration grace).
    pub fn set_offering(&self, on: bool) {
        self.shared.offering.store(on, Ordering::SeqCst);
        if on {
            self.kick();
        }
    }

    /// Takes over as leader: puts `snapshot` (read from `registry`) into the books, which must
    /// be empty (a follower's are: it redirects every request), and writes every later change
    /// to `registry` through a new writer thread.
    pub fn take_over(
        &self,
        registry: Box<dyn Registry>,
        snapshot: Snapshot,
    ) -> Result<(), StartError> {
        let counted = Arc::clone(&self.shared.metrics);
        let writer = Writer::spawn(registry, move |_, _| counted.count_registry_write_error())
            .map_err(StartError::RegistryWriter)?;
        let now = self.now();
        let old = {
            let mut inner = self.lock();
            inner.state.restore(snapshot, &now);
            inner.store.replace(writer)
        };
        if let Some(old) = old {
            old.close();
        }
        self.kick();
        Ok(())
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// The principals requests are checked against now; `None` when the API is open.
    pub fn credentials(&self) -> Option<Arc<crate::auth::Credentials>> {
        let guard = self
            .shared
            .credentials
            .read()
            .unwrap_or_else(|e| e.into_inner());
        guard.clone()
    }

    /// Replaces the principals (a reload of the credentials file). Requests already past the
    /// check keep the principal they were let in as; streams stay open.
    pub fn set_credentials(&self, credentials: Arc<crate::auth::Credentials>) {
        let mut guard = self
            .shared
            .credentials
            .write()
            .unwrap_or_else(|e| e.into_inner());
        *guard = Some(credentials);
    }

    /// The certificate served over HTTPS, once serving started with one.
    pub fn server_tls(&self) -> Option<&parley_tls::ServerTls> {
        self.shared.tls.get()
    }

    /// Records the certificate being served (at most once; a later call is ignored).
    pub fn set_server_tls(&self, tls: parley_tls::ServerTls) {
        let _ = self.shared.tls.set(tls);
    }

    /// The metrics counters.
    pub fn metrics(&self) -> &Metrics {
        &self.shared.metrics
    }

    /// The `/metrics` page: Prometheus text of the counters, the books' gauges and the
    /// process' figures.
    pub fn render_metrics(&self) -> String {
        observe::encode(&self.shared.registry)
    }

    /// The ring of samples behind `GET /api/v1/history`.
    pub fn history(&self) -> &History {
        &self.shared.history
    }

    /// Takes one history sample: reads the books once (briefly, under their lock) and the
    /// offer counters, and adds it to the ring.
    pub fn sample_history(&self) {
        let books = self.read(|s| s.history_sample());
        let at_ms = u64::try_from(self.now().wall.timestamp_millis()).unwrap_or(0);
        self.shared
            .history
            .push(at_ms, self.shared.metrics.offer_counts(), books);
    }

    /// Cancelled when the coordinator shuts down.
    pub fn shutdown_token(&self) -> &CancellationToken {
        &self.shared.shutdown
    }

    /// Tracks the coordinator's spawned tasks (awaited on shutdown).
    pub fn tracker(&self) -> &TaskTracker {
        &self.shared.tracker
    }

    /// Test hook: the background loop `name` (one of [`crate::metrics::LOOPS`]) panics on its
    /// next turn, once, as a bug there would; its supervisor logs, counts and restarts it.
    pub fn inject_loop_panic(&self, name: &str) {
        if let Some(i) = crate::metrics::LOOPS.iter().position(|l| *l == name) {
            self.shared
                .injected_panics
                .fetch_or(1 << i, Ordering::SeqCst);
        }
    }

    /// Panics if [`Coordinator::inject_loop_panic`] asked loop `name` to (clearing the request).
    pub(crate) fn maybe_injected_panic(&self, name: &str) {
        if let Some(i) = crate::metrics::LOOPS.iter().position(|l| *l == name) {
            let bit = 1u8 << i;
            if self
                .shared
                .injected_panics
                .fetch_and(!bit, Ordering::SeqCst)
                & bit
                != 0
            {
                panic!("injected panic in the {name} loop (test hook)");
            }
        }
    }

    /// Test hook: while `fail` is on, every write to the durable registry fails (and writes
    /// nothing), as a full disk would. No effect without a registry.
    pub fn fail_registry_writes(&self, fail: bool) {
        if let Some(switch) = &self.shared.write_failures {
            switch.set(fail);
        }
    }

    /// The current time on both clocks.
    pub fn now(&self) -> Now {
        let ms = u64::try_from(self.shared.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        Now {
            ms,
            wall: protocol::now(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock is a bug already logged; the books are still the
        // best there are, so keep serving rather than poisoning every later request.
        match self.shared.inner.try_lock() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                // Only a wait is timed, so the lock taken free costs no clock read.
                let started = Instant::now();
                let guard = self.shared.inner.lock().unwrap_or_else(|p| p.into_inner());
                self.metrics().count_lock_wait(started.elapsed());
                guard
            }
        }
    }

    /// Closes the durable registry (at shutdown): writes what is queued, then releases the
    /// file for the next coordinator (blocking until then). Later changes are no longer
    /// persisted.
    pub fn close_registry(&self) {
        let writer = self.lock().store.take();
        if let Some(writer) = writer {
            writer.close();
        }
    }

    /// Reads every record of the durable registry, after the changes queued so far (see
    /// [`Writer::read`]); `None` without a registry (books in memory only, or a follower).
    pub fn read_registry(
        &self,
    ) -> Option<
        oneshot::Receiver<
            Result<(Snapshot, crate::store::backup::Source), crate::store::StoreError>,
        >,
    > {
        self.lock().store.as_ref().map(Writer::read)
    }

    /// Reads the books.
    pub fn read<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        f(&self.lock().state)
    }

    /// Runs one state operation and performs its effects. Registry changes are queued, not
    /// waited for (a failed write is logged and counted); see [`Coordinator::run_write_first`].
    pub fn run<T>(&self, f: impl FnOnce(&mut State, &Now, &mut Effects) -> T) -> T {
        self.run_queued(f).0
    }

    fn run_queued<T>(
        &self,
        f: impl FnOnce(&mut State, &Now, &mut Effects) -> T,
    ) -> (T, Option<oneshot::Receiver<bool>>) {
        let now = self.now();
        let mut fx = Vec::new();
        let (out, d) = {
            let mut inner = self.lock();
            let out = f(&mut inner.state, &now, &mut fx);
            let d = self.dispatch(&mut inner, fx);
            (out, d)
        };
        let written = self.perform(d);
        (out, written)
    }

    /// Opens a framework's event stream: returns its reader and number. The `subscribed`
    /// event and any unacknowledged updates are already queued on it.
    pub fn subscribe(&self, id: FrameworkId) -> Result<(OutboxReader, u64), StateError> {
        let now = self.now();
        let mut fx = Vec::new();
        let config = &self.shared.config;
        // A reader that takes nothing from a full queue for two heartbeats has stopped.
        let stall_after = config
            .framework_heartbeat_interval
            .saturating_mul(2)
            .max(Duration::from_secs(1));
        // Updates the stream leaves out while full come again as soon as the reader has made
        // room, not at the next re-send. Weak: the outbox lives in the books' stream slots.
        let weak = Arc::downgrade(&self.shared);
        let refill = Box::new(move |outbox: &Arc<Outbox>| {
            if let Some(shared) = weak.upgrade() {
                Coordinator { shared }.refill_stream(id, outbox);
            }
        });
        let (outbox, reader) = Outbox::with_refill(config.max_stream_queue, stall_after, refill);
        let (generation, d) = {
            let mut inner = self.lock();
            let generation = inner.state.subscribe(id, &now, &mut fx)?;
            // A newer stream replaces the older one, which ends at once: what it still held
            // comes again on this one (pending updates) or is rescinded (offers).
            if let Some(older) = inner.streams.insert(id, StreamSlot { generation, outbox }) {
                older.outbox.discard();
            }
            // Subscribing changes nothing stored.
            let d = self.dispatch(&mut inner, fx);
            (generation, d)
        };
        self.perform(d);
        Ok((reader, generation))
    }

    /// Pushes again the updates framework `id`'s stream `outbox` left out while it was full
    /// and has room for now (those still unacknowledged).
    fn refill_stream(&self, id: FrameworkId, outbox: &Arc<Outbox>) {
        let inner = self.lock();
        // Only the framework's current stream: a replaced one gets nothing more.
        if !inner
            .streams
            .get(&id)
            .is_some_and(|slot| Arc::ptr_eq(&slot.outbox, outbox))
        {
            return;
        }
        let deferred = outbox.take_deferred();
        for status in inner.state.unacknowledged(id, &deferred) {
            // Half the queue is free, so these fit; any left out again are noted again.
            outbox.push(FrameworkEvent::Update { status });
        }
    }

    /// A framework stream ended (its HTTP response was dropped).
    pub fn stream_closed(&self, id: FrameworkId, generation: u64) {
        self.run(|state, now, fx| {
            state.stream_closed(id, generation, now, fx);
        });
        let mut inner = self.lock();
        if inner
            .streams
            .get(&id)
            .is_some_and(|s| s.generation == generation)
        {
            inner.streams.remove(&id);
        }
    }

    /// A new receiver of the operator offer stream.
    pub fn offer_events(&self) -> broadcast::Receiver<OfferEvent> {
        self.shared.offer_events.subscribe()
    }

    /// Wakes the allocation loop.
    pub fn kick(&self) {
        self.shared.doorbell.ring();
    }

    /// What wakes the allocation loop (`server`'s allocation thread waits on it).
    pub fn doorbell(&self) -> &Doorbell {
        &self.shared.doorbell
    }

    /// Hands events to their channels and registry changes to the writer (both in the books'
    /// order, under the lock); returns the network work, whether to allocate, and the
    /// writer's answer for the registry changes, if there were any.
    fn dispatch(&self, inner: &mut Inner, fx: Effects) -> Dispatched {
        let mut io = Vec::new();
        let mut allocate = false;
        let mut changes = Vec::new();
        let mut overflowed = Vec::new();
        for effect in fx {
            let fence = matches!(effect, Effect::Fence { .. });
            match effect {
                Effect::ToFramework(id, event) => {
                    if let Some(slot) = inner.streams.get(&id) {
                        // Queued or dropped loses nothing: an update left out (a duplicate,
                        // a full queue, a stream going away) stays pending and is re-sent.
                        if slot.outbox.push(event) == Push::Stalled {
                            // The reader stopped: end its stream (removing the slot closes
                            // the outbox) and disconnect the framework, which reconnects and
                            // gets its unacknowledged updates again.
                            let generation = slot.generation;
                            inner.streams.remove(&id);
                            overflowed.push((id, generation));
                            self.shared.metrics.count_stream_overflow();
                            tracing::warn!(framework = %id, "event stream reader stopped: stream closed");
                        }
                    }
                }
                Effect::CloseStream(id) => {
                    inner.streams.remove(&id);
                }
                Effect::Offer(event) => {
                    self.shared.metrics.count_offer_event(&event);
                    // No receivers is fine: nobody is watching.
                    let _ = self.shared.offer_events.send(event);
                }
                Effect::Launch {
                    agent_id,
                    endpoint,
                    body,
                } => io.push(Io::Launch {
                    token: inner.state.agent_token(agent_id),
                    agent_id,
                    endpoint,
                    body,
                }),
                Effect::Kill {
                    agent_id,
                    framework_id,
                    endpoint,
                    task_id,
                }
                | Effect::Fence {
                    agent_id,
                    framework_id,
                    endpoint,
                    task_id,
                } => io.push(Io::Kill {
                    token: inner.state.agent_token(agent_id),
                    agent_id,
                    endpoint,
                    framework_id,
                    task_id,
                    reason: fence.then_some(protocol::task::REASON_AGENT_PARTITIONED),
                }),
                Effect::Allocate => allocate = true,
                Effect::Persist(change) => changes.push(change),
            }
        }
        let written = match (&inner.store, changes.is_empty()) {
            (Some(writer), false) => Some(writer.submit(changes)),
            _ => None,
        };
        Dispatched {
            io,
            allocate,
            written,
            overflowed,
        }
    }

    /// Does what [`Coordinator::dispatch`] left for after the lock; returns the writer's
    /// answer.
    fn perform(&self, d: Dispatched) -> Option<oneshot::Receiver<bool>> {
        for (id, generation) in d.overflowed {
            // The stream's sender is gone; the framework is disconnected now, not when its
            // reader (maybe stalled) finally lets go of the response.
            self.run(|state, now, fx| state.stream_closed(id, generation, now, fx));
        }
        let (io, allocate) = (d.io, d.allocate);
        if allocate {
            self.kick();
        }
        if io.is_empty() || tokio::runtime::Handle::try_current().is_err() {
            return d.written;
        }
        for job in io {
            let this = self.clone();
            match job {
                Io::Launch {
                    agent_id,
                    endpoint,
                    token,
                    body,
                } => {
                    self.shared
                        .tracker
                        .spawn(async move { this.launch(agent_id, endpoint, token, body).await });
                }
                Io::Kill {
                    agent_id,
                    endpoint,
                    token,
                    framework_id,
                    task_id,
                    reason,
                } => {
                    let call = (endpoint, token, framework_id, task_id, reason);
                    self.shared
                        .tracker
                        .spawn(async move { this.kill(agent_id, call).await });
                }
            }
        }
        d.written
    }

    async fn launch(
        &self,
        agent_id: AgentId,
        endpoint: String,
        token: Option<AgentToken>,
        body: LaunchTasks,
    ) {
        let url = format!("{endpoint}/api/v1/tasks");
        let request = agent_call::authorized(self.shared.http.post(&url), token.as_ref());
        let result = request.json(&body).send().await;
        let failure = match result {
            Ok(resp) if resp.status().is_success() => return,
            // The agent refused the tasks as described: they could not be launched.
            Ok(resp) if resp.status().is_client_error() => {
                let status = resp.status();
                let text = agent_call::error_excerpt(resp).await;
                (
                    TaskState::Error,
                    format!("agent {agent_id} refused the launch ({status}): {text}"),
                )
            }
            Ok(resp) => (
                TaskState::Lost,
                format!("agent {agent_id} failed the launch ({})", resp.status()),
            ),
            Err(e) => (
                TaskState::Lost,
                format!("agent {agent_id} unreachable at {url}: {e}"),
            ),
        };
        tracing::warn!(agent = %agent_id, message = %failure.1, "launch failed");
        let ids: Vec<TaskId> = body.tasks.iter().map(|t| t.task_id.clone()).collect();
        self.run(|state, now, fx| {
            state.launch_failed(body.framework_id, &ids, failure.0, &failure.1, now, fx)
        });
    }

    async fn kill(
        &self,
        agent_id: AgentId,
        (endpoint, token, framework_id, task_id, reason): KillCall,
    ) {
        let url = format!("{endpoint}/api/v1/tasks/{task_id}/kill");
        let body = KillTask {
            framework_id: Some(framework_id),
            reason: reason.map(str::to_owned),
        };
        let request = agent_call::authorized(self.shared.http.post(&url), token.as_ref());
        match request.json(&body).send().await {
            Ok(resp) if resp.status().is_success() => {}
            Ok(resp) => {
                tracing::warn!(agent = %agent_id, task = %task_id, status = %resp.status(), "kill refused")
            }
            Err(e) => tracing::warn!(agent = %agent_id, task = %task_id, error = %e, "kill failed"),
        }
    }
}
