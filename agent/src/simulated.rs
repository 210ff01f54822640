//! Simulated agents: thousands in one process, for scale tests of the coordinator.
//!
//! Each simulated agent registers and heartbeats like a real one, and serves the agent API under
//! `/sim/{i}` of one shared listener (agent `i` registers the endpoint `{base}/sim/{i}`). A
//! simulated task runs no process: it goes `starting` → `running` at once and `finished` after
//! its `duration_s` (without one, it runs until killed).
//!
//! Cost per agent is kept tiny: no tokio task per agent. One driver loop owns a timer heap of
//! everything due (registrations, heartbeats, update retries, task ends), starts due requests
//! through one shared HTTP client with a cap on requests in flight, and reacts to their answers.
//! First registrations are spread over `SimConfig::stagger`. Updates are kept in memory only (a
//! simulated agent has nothing to re-adopt after a restart) and sent in order, in batches of up
//! to `MAX_STATUS_BATCH` (256) per request and one request in flight per agent, until the
//! coordinator answers `200`; a task is forgotten once its terminal update is acknowledged.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::Context;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use protocol::messages::{AgentRegistered, Empty, RegisterAgent, StatusBatch, TaskStatusList};
use protocol::{AgentId, FrameworkId, TaskId, TaskState, TaskStatus, UpdateId};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::api::{parse_launch, parse_task_id, ApiError};
use crate::client::{backoff, heartbeat_interval, post_json, register, RequestError};
use crate::config::{self, SimConfig};

/// The most updates one agent sends in one request (`POST /api/v1/agents/{id}/statuses`).
const MAX_STATUS_BATCH: usize = 256;

/// Where one simulated agent stands with the coordinator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// A registration is scheduled.
    Waiting,
    /// A registration request is in flight.
    Registering,
    /// Registered; heartbeating.
    Registered,
}

#[derive(Debug)]
struct SimTask {
    latest: TaskStatus,
}

#[derive(Debug)]
struct SimAgent {
    agent_id: Option<AgentId>,
    phase: Phase,
    /// Bumped on every registration, so heartbeats scheduled for an older one are dropped.
    epoch: u32,
    interval: Duration,
    register_attempts: u32,
    status_attempts: u32,
    tasks: HashMap<TaskId, SimTask>,
    /// Updates not yet acknowledged, oldest first; the front ones are in flight when `sending`.
    pending: VecDeque<TaskStatus>,
    sending: bool,
    /// The coordinator refused a batch of this many updates: send them one at a time, so the
    /// refused one is found and dropped, then batch again.
    one_at_a_time: usize,
}

/// Something the driver must do at a given time.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Due {
    Register(usize),
    Heartbeat(usize, u32),
    RetryStatus(usize),
    Finish(usize, TaskId),
}

/// What the HTTP handlers tell the driver.
#[derive(Debug)]
enum Event {
    /// New updates are queued for this agent.
    Wake(usize),
    /// This task finishes after this long.
    FinishAfter(usize, TaskId, Duration),
}

/// An answer the driver reacts to.
enum Done {
    Registered(usize, Result<AgentRegistered, RequestError>),
    Heartbeat(usize, u32, Result<(), RequestError>),
    Status(usize, Vec<UpdateId>, Result<(), RequestError>),
}

type Pending = Pin<Box<dyn Future<Output = Done> + Send>>;

/// The fleet, shared by the driver and the HTTP handlers.
struct Sim {
    config: SimConfig,
    base_url: String,
    /// Held briefly, never across an `.await`.
    agents: Mutex<Vec<SimAgent>>,
    events: mpsc::UnboundedSender<Event>,
    accepting: AtomicBool,
}

impl Sim {
    fn lock(&self) -> MutexGuard<'_, Vec<SimAgent>> {
        self.agents.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Runs `config.count` simulated agents on `listener` until `shutdown` completes.
pub async fn run_simulated(
    mut config: SimConfig,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    if config.count == 0 {
        return Err(config::ConfigError::NoAgents.into());
    }
    config.coordinator = config::parse_coordinator_url(&config.coordinator)?;
    let hostname = crate::machine_hostname();
    let base_url = crate::advertised_url(
        config.advertise_url.as_deref(),
        listener.local_addr()?,
        &hostname,
    )?;
    let agents = (0..config.count)
        .map(|_| SimAgent {
            agent_id: None,
            phase: Phase::Waiting,
            epoch: 0,
            interval: Duration::from_secs(15),
            register_attempts: 0,
            status_attempts: 0,
            tasks: HashMap::new(),
            pending: VecDeque::new(),
            sending: false,
            one_at_a_time: 0,
        })
        .collect();
    let (events, rx) = mpsc::unbounded_channel();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(config.max_in_flight.max(1))
        .build()
        .context("building the HTTP client")?;
    tracing::info!(count = config.count, %base_url, "simulated agents starting");
    let sim = Arc::new(Sim {
        config,
        base_url,
        agents: Mutex::new(agents),
        events,
        accepting: AtomicBool::new(true),
    });
    let cancel = CancellationToken::new();
    let driver = tokio::spawn(drive(sim.clone(), http, rx, cancel.clone()));

    let on_shutdown = sim.clone();
    let stop = cancel.clone();
    let served = axum::serve(listener, app(sim.clone()))
        .with_graceful_shutdown(async move {
            shutdown.await;
            on_shutdown.accepting.store(false, Ordering::SeqCst);
            stop.cancel();
        })
        .await;
    cancel.cancel();
    if let Err(e) = driver.await {
        tracing::error!("simulation driver ended abnormally: {e}");
    }
    served.context("serving the simulated agents' API")
}

/// The one loop behind every simulated agent.
async fn drive(
    sim: Arc<Sim>,
    http: reqwest::Client,
    mut events: mpsc::UnboundedReceiver<Event>,
    cancel: CancellationToken,
) {
    let cfg = sim.config.clone();
    let max_in_flight = cfg.max_in_flight.max(1);
    let mut heap: BinaryHeap<Reverse<(Instant, Due)>> = BinaryHeap::new();
    let start = Instant::now();
    let count = cfg.count as u32;
    for i in 0..cfg.count {
        let at = start + cfg.stagger.mul_f64(i as f64 / f64::from(count.max(1)));
        heap.push(Reverse((at, Due::Register(i))));
    }
    let mut in_flight: FuturesUnordered<Pending> = FuturesUnordered::new();
    let mut events_open = true;

    loop {
        let now = Instant::now();
        while in_flight.len() < max_in_flight {
            let due_now = heap.peek().is_some_and(|Reverse((at, _))| *at <= now);
            if !due_now {
                break;
            }
            let Some(Reverse((_, due))) = heap.pop() else {
                break;
            };
            start_due(&sim, &http, due, &mut heap, &mut in_flight);
        }
        let next_due = heap.peek().map(|Reverse((at, _))| *at);
        let can_start = in_flight.len() < max_in_flight;
        tokio::select! {
            () = cancel.cancelled() => return,
            Some(done) = in_flight.next(), if !in_flight.is_empty() => {
                on_done(&sim, &http, done, &mut heap, &mut in_flight);
            }
            event = events.recv(), if events_open => match event {
                Some(Event::Wake(i)) => try_send_status(&sim, &http, i, &mut in_flight),
                Some(Event::FinishAfter(i, task_id, after)) => {
                    heap.push(Reverse((Instant::now() + after, Due::Finish(i, task_id))));
                }
                None => events_open = false,
            },
            () = sleep_until(next_due), if can_start && next_due.is_some() => {}
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn start_due(
    sim: &Arc<Sim>,
    http: &reqwest::Client,
    due: Due,
    heap: &mut BinaryHeap<Reverse<(Instant, Due)>>,
    in_flight: &mut FuturesUnordered<Pending>,
) {
    let cfg = &sim.config;
    let timeout = cfg.timing.request_timeout;
    match due {
        Due::Register(i) => {
            let body = {
                let mut agents = sim.lock();
                let a = &mut agents[i];
                a.phase = Phase::Registering;
                let mut attributes = cfg.attributes.clone();
                attributes.insert("sim_index".into(), i.to_string());
                RegisterAgent {
                    hostname: format!("{}-{i}", cfg.hostname_prefix),
                    endpoint: format!("{}/sim/{i}", sim.base_url),
                    resources: cfg.resources.clone(),
                    attributes,
                    agent_id: a.agent_id,
                    tasks: a
                        .tasks
                        .values()
                        .map(|t| stamped(&t.latest, a.agent_id))
                        .collect(),
                }
            };
            let http = http.clone();
            let coordinator = cfg.coordinator.clone();
            in_flight.push(Box::pin(async move {
                Done::Registered(i, register(&http, &coordinator, &body, timeout).await)
            }));
        }
        Due::Heartbeat(i, epoch) => {
            let id = {
                let agents = sim.lock();
                let a = &agents[i];
                if a.phase != Phase::Registered || a.epoch != epoch {
                    return; // Scheduled for an older registration.
                }
                a.agent_id
            };
            let Some(id) = id else { return };
            let url = format!("{}/api/v1/agents/{id}/heartbeat", cfg.coordinator);
            let http = http.clone();
            in_flight.push(Box::pin(async move {
                let r = post_json(&http, &url, &Empty {}, timeout).await.map(|_| ());
                Done::Heartbeat(i, epoch, r)
            }));
        }
        Due::RetryStatus(i) => try_send_status(sim, http, i, in_flight),
        Due::Finish(i, task_id) => {
            let changed = {
                let mut agents = sim.lock();
                record(
                    &mut agents[i],
                    &task_id,
                    TaskState::Finished,
                    Some("finished after duration_s".into()),
                )
            };
            if changed {
                try_send_status(sim, http, i, in_flight);
            }
            let _ = heap; // Finishing schedules nothing new.
        }
    }
}

fn on_done(
    sim: &Arc<Sim>,
    http: &reqwest::Client,
    done: Done,
    heap: &mut BinaryHeap<Reverse<(Instant, Due)>>,
    in_flight: &mut FuturesUnordered<Pending>,
) {
    let timing = &sim.config.timing;
    let now = Instant::now();
    match done {
        Done::Registered(i, Ok(reg)) => {
            {
                let mut agents = sim.lock();
                let a = &mut agents[i];
                a.agent_id = Some(reg.agent_id);
                a.phase = Phase::Registered;
                a.epoch = a.epoch.wrapping_add(1);
                a.register_attempts = 0;
                a.interval = heartbeat_interval(reg.heartbeat_interval_s, timing.min_heartbeat);
                heap.push(Reverse((now + a.interval, Due::Heartbeat(i, a.epoch))));
            }
            try_send_status(sim, http, i, in_flight);
        }
        Done::Registered(i, Err(e)) => {
            let mut agents = sim.lock();
            let a = &mut agents[i];
            let delay = backoff(a.register_attempts, timing.backoff_min, timing.backoff_max);
            tracing::debug!(agent = i, ?delay, "simulated registration failed: {e}");
            a.register_attempts = a.register_attempts.saturating_add(1);
            a.phase = Phase::Waiting;
            heap.push(Reverse((now + delay, Due::Register(i))));
        }
        Done::Heartbeat(i, epoch, result) => {
            let mut agents = sim.lock();
            let a = &mut agents[i];
            if a.epoch != epoch || a.phase != Phase::Registered {
                return;
            }
            match result {
                Err(RequestError::NotFound(_)) => reregister(a, i, heap, now),
                Ok(()) => heap.push(Reverse((now + a.interval, Due::Heartbeat(i, epoch)))),
                Err(e) => {
                    tracing::debug!(agent = i, "simulated heartbeat failed: {e}");
                    heap.push(Reverse((now + a.interval, Due::Heartbeat(i, epoch))));
                }
            }
        }
        Done::Status(i, update_ids, result) => {
            let retry = {
                let mut agents = sim.lock();
                let a = &mut agents[i];
                a.sending = false;
                match result {
                    Ok(()) => {
                        a.status_attempts = 0;
                        for update_id in update_ids {
                            acknowledge(a, update_id);
                        }
                        false
                    }
                    Err(RequestError::NotFound(_)) => {
                        reregister(a, i, heap, now);
                        false
                    }
                    Err(RequestError::Status { status, body }) if (400..500).contains(&status) => {
                        if update_ids.len() > 1 {
                            // One of them was refused, and a batch is all or nothing: find it.
                            a.one_at_a_time = update_ids.len();
                        } else {
                            tracing::warn!(
                                agent = i,
                                status,
                                "coordinator refused an update; dropping it: {body}"
                            );
                            for update_id in update_ids {
                                acknowledge(a, update_id);
                            }
                        }
                        false
                    }
                    Err(e) => {
                        let delay =
                            backoff(a.status_attempts, timing.backoff_min, timing.backoff_max);
                        tracing::debug!(agent = i, ?delay, "simulated update failed: {e}");
                        a.status_attempts = a.status_attempts.saturating_add(1);
                        heap.push(Reverse((now + delay, Due::RetryStatus(i))));
                        true
                    }
                }
            };
            if !retry {
                try_send_status(sim, http, i, in_flight);
            }
        }
    }
}

/// The coordinator forgot the agent: register again now (once, however many answers said so).
fn reregister(
    a: &mut SimAgent,
    i: usize,
    heap: &mut BinaryHeap<Reverse<(Instant, Due)>>,
    now: Instant,
) {
    if a.phase == Phase::Registered {
        a.phase = Phase::Waiting;
        heap.push(Reverse((now, Due::Register(i))));
    }
}

/// Drops an acknowledged update; forgets its task when that was its terminal update.
fn acknowledge(a: &mut SimAgent, update_id: UpdateId) {
    if let Some(pos) = a.pending.iter().position(|s| s.update_id == update_id) {
        if let Some(s) = a.pending.remove(pos) {
            let still_pending = a.pending.iter().any(|p| p.task_id == s.task_id);
            if s.state.is_terminal() && !still_pending {
                a.tasks.remove(&s.task_id);
            }
        }
    }
}

/// Sends the agent's oldest pending updates (up to `MAX_STATUS_BATCH`) in one request, unless
/// some are in flight or it is not registered.
fn try_send_status(
    sim: &Arc<Sim>,
    http: &reqwest::Client,
    i: usize,
    in_flight: &mut FuturesUnordered<Pending>,
) {
    let (agent_id, batch) = {
        let mut agents = sim.lock();
        let Some(a) = agents.get_mut(i) else { return };
        if a.sending || a.phase != Phase::Registered || a.pending.is_empty() {
            return;
        }
        let Some(agent_id) = a.agent_id else { return };
        let limit = if a.one_at_a_time > 0 {
            a.one_at_a_time -= 1;
            1
        } else {
            MAX_STATUS_BATCH
        };
        let statuses: Vec<TaskStatus> = a
            .pending
            .iter()
            .take(limit)
            .map(|s| stamped(s, Some(agent_id)))
            .collect();
        a.sending = true;
        (agent_id, StatusBatch { statuses })
    };
    let url = format!(
        "{}/api/v1/agents/{agent_id}/statuses",
        sim.config.coordinator
    );
    let http = http.clone();
    let timeout = sim.config.timing.request_timeout;
    in_flight.push(Box::pin(async move {
        let r = post_json(&http, &url, &batch, timeout).await.map(|_| ());
        let ids = batch.statuses.iter().map(|s| s.update_id).collect();
        Done::Status(i, ids, r)
    }));
}

/// A status carrying the agent's current id.
fn stamped(status: &TaskStatus, agent_id: Option<AgentId>) -> TaskStatus {
    let mut s = status.clone();
    if let Some(id) = agent_id {
        s.agent_id = id;
    }
    s
}

/// Records a state change of a task that is not yet terminal; false when nothing changed.
fn record(a: &mut SimAgent, task_id: &TaskId, state: TaskState, message: Option<String>) -> bool {
    let agent_id = a.agent_id.unwrap_or(AgentId(uuid::Uuid::nil()));
    let Some(t) = a.tasks.get_mut(task_id) else {
        return false;
    };
    if t.latest.state.is_terminal() {
        return false;
    }
    let status = TaskStatus {
        task_id: task_id.clone(),
        framework_id: t.latest.framework_id,
        agent_id,
        state,
        message,
        exit_code: (state == TaskState::Finished).then_some(0),
        update_id: UpdateId::new(),
        timestamp: protocol::now(),
        // Carried from the launch, so a restarted coordinator can account the task.
        resources: t.latest.resources.clone(),
    };
    t.latest = status.clone();
    a.pending.push_back(status);
    true
}

// ---------------------------------------------------------------------------------------------
// HTTP: the agent API of every simulated agent, under /sim/{i}
// ---------------------------------------------------------------------------------------------

fn app(sim: Arc<Sim>) -> Router {
    Router::new()
        .route("/sim/{i}/api/v1/tasks", post(launch).get(list))
        .route("/sim/{i}/api/v1/tasks/{task_id}/kill", post(kill))
        .route("/sim/{i}/api/v1/tasks/{task_id}/stdout", get(output))
        .route("/sim/{i}/api/v1/tasks/{task_id}/stderr", get(output))
        .route("/sim/{i}/api/v1/health", get(health))
        .with_state(sim)
}

fn index(sim: &Sim, raw: &str) -> Result<usize, ApiError> {
    raw.parse::<usize>()
        .ok()
        .filter(|i| *i < sim.config.count)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "agent_not_found",
                format!(
                    "no simulated agent {raw:?}; indices run from 0 to {}",
                    sim.config.count - 1
                ),
            )
        })
}

async fn launch(
    State(sim): State<Arc<Sim>>,
    Path(i): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let i = index(&sim, &i)?;
    let launch = parse_launch(&body)?;
    if !sim.accepting.load(Ordering::SeqCst) {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "the agent is shutting down; launch elsewhere",
        ));
    }
    let framework_id: FrameworkId = launch.framework_id;
    let mut finishes = Vec::new();
    {
        let mut agents = sim.lock();
        let a = &mut agents[i];
        let mut seen = std::collections::HashSet::new();
        for s in &launch.tasks {
            if a.tasks.contains_key(&s.task_id) || !seen.insert(&s.task_id) {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    "task_exists",
                    format!("task {} already exists on this agent", s.task_id),
                ));
            }
        }
        let agent_id = a.agent_id.unwrap_or(AgentId(uuid::Uuid::nil()));
        for spec in launch.tasks {
            let starting = TaskStatus {
                task_id: spec.task_id.clone(),
                framework_id,
                agent_id,
                state: TaskState::Starting,
                message: None,
                exit_code: None,
                update_id: UpdateId::new(),
                timestamp: protocol::now(),
                resources: Some(spec.resources.clone()),
            };
            a.tasks.insert(
                spec.task_id.clone(),
                SimTask {
                    latest: starting.clone(),
                },
            );
            a.pending.push_back(starting);
            record(a, &spec.task_id, TaskState::Running, None);
            if let Some(d) = spec.duration_s {
                finishes.push((spec.task_id, Duration::from_secs_f64(d.min(1e9))));
            }
        }
    }
    // The driver only stops on shutdown; a send error then is harmless.
    for (task_id, after) in finishes {
        let _ = sim.events.send(Event::FinishAfter(i, task_id, after));
    }
    let _ = sim.events.send(Event::Wake(i));
    Ok((StatusCode::ACCEPTED, Json(Empty {})).into_response())
}

async fn list(
    State(sim): State<Arc<Sim>>,
    Path(i): Path<String>,
) -> Result<Json<TaskStatusList>, ApiError> {
    let i = index(&sim, &i)?;
    let agents = sim.lock();
    let a = &agents[i];
    Ok(Json(TaskStatusList {
        tasks: a
            .tasks
            .values()
            .map(|t| stamped(&t.latest, a.agent_id))
            .collect(),
    }))
}

async fn kill(
    State(sim): State<Arc<Sim>>,
    Path((i, task_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let i = index(&sim, &i)?;
    let id = parse_task_id(&task_id)?;
    {
        let mut agents = sim.lock();
        let a = &mut agents[i];
        if !a.tasks.contains_key(&id) {
            return Err(ApiError::unknown_task(&task_id));
        }
        record(a, &id, TaskState::Killed, Some("killed on request".into()));
    }
    let _ = sim.events.send(Event::Wake(i));
    Ok((StatusCode::ACCEPTED, Json(Empty {})).into_response())
}

async fn output(
    State(sim): State<Arc<Sim>>,
    Path((i, task_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let i = index(&sim, &i)?;
    let id = parse_task_id(&task_id)?;
    if !sim.lock()[i].tasks.contains_key(&id) {
        return Err(ApiError::unknown_task(&task_id));
    }
    // A simulated task prints nothing.
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "").into_response())
}

async fn health(
    State(sim): State<Arc<Sim>>,
    Path(i): Path<String>,
) -> Result<Json<Empty>, ApiError> {
    index(&sim, &i)?;
    Ok(Json(Empty {}))
}
