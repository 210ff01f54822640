//! Simulated agents: thousands in one process, for scale tests of the coordinator. A thin shell
//! around one [`Engine`] per agent (the same core as the real agent's, with journaling off).
//!
//! Each simulated agent registers and heartbeats like a real one, and serves the agent API under
//! `/sim/{i}` of one shared listener (agent `i` registers the endpoint `{base}/sim/{i}`). A
//! simulated task runs no process: it goes `starting` → `running` at once and `finished` after
//! its `duration_s` (without one, it runs until killed; a kill ends it at once). A task with a
//! `health_check` (its form checked as on a real agent) runs no check: there is no process to
//! probe, so it is reported healthy once, with its `running` update (`healthy: true`).
//!
//! Cost per agent is kept tiny: no tokio task per agent. One driver loop owns a timer heap of
//! everything due (the cores' timers and the tasks' ends), starts due requests through one
//! shared HTTP client with a cap on requests in flight, and feeds their answers to the cores.
//! First registrations are spread over `SimConfig::stagger`. Updates are kept in memory only (a
//! simulated agent has nothing to re-adopt after a restart) and sent as the engine decides: in
//! order, in batches of up to [`MAX_STATUS_BATCH`](crate::engine::MAX_STATUS_BATCH) per request,
//! one request in flight per agent, until the coordinator answers `200`; a task is forgotten
//! once its terminal update is acknowledged.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use protocol::messages::{Empty, TaskStatusList};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::api::{
    parse_call_back, parse_kill, parse_launch, parse_task_id, partition_timeout, ApiError,
    OutputQuery,
};
use crate::auth;
use crate::client::{self, Call, Identity, LogLevel};
use crate::config::{self, SimConfig};
use crate::engine::{
    Command, Engine, EngineConfig, Exit, Launch, Now, Reply, Signal, TaskKey, Timer,
};
use crate::AgentError;

/// Something the driver must do at a given time.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Due {
    /// A timer of agent `i`'s core.
    Engine(usize, Timer),
    /// A simulated task's `duration_s` is over.
    Finish(usize, TaskKey),
}

/// What the HTTP handlers hand the driver: agent `i`'s commands to run (then its updates to
/// send), and tasks to finish after their duration.
#[derive(Debug)]
struct Event {
    agent: usize,
    commands: Vec<Command>,
    finishes: Vec<(TaskKey, Duration)>,
}

type Pending = Pin<Box<dyn Future<Output = (usize, (Reply, u64))> + Send>>;

/// The fleet, shared by the driver and the HTTP handlers.
struct Sim {
    config: SimConfig,
    base_url: String,
    /// The fleet's one API token ([`crate::auth`]).
    api_token: String,
    /// Held briefly, never across an `.await`.
    cores: Mutex<Vec<Engine>>,
    events: mpsc::UnboundedSender<Event>,
    /// The coordinators, and which of them leads (one for the fleet).
    leader: client::Leader,
}

impl Sim {
    fn lock(&self) -> MutexGuard<'_, Vec<Engine>> {
        self.cores.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Who agent `i` is.
    fn identity(&self, i: usize) -> Identity {
        let cfg = &self.config;
        let mut attributes = cfg.attributes.clone();
        attributes.insert("sim_index".into(), i.to_string());
        Identity {
            hostname: format!("{}-{i}", cfg.hostname_prefix),
            endpoint: format!("{}/sim/{i}", self.base_url),
            resources: cfg.resources.clone(),
            attributes,
            api_token: Some(self.api_token.clone()),
            gpu_devices: self.gpus(i),
            reservations: if cfg.reserves(i) {
                cfg.reservations.clone()
            } else {
                Vec::new()
            },
        }
    }

    /// The GPUs agent `i` invents for the `gpus` of its resources (whole devices).
    fn gpus(&self, i: usize) -> Vec<protocol::gpu::GpuDevice> {
        let n = self.config.resources.millis(protocol::gpu::GPUS) / 1000;
        crate::gpu::fake::simulated(i, u32::try_from(n).unwrap_or(0))
    }
}

/// The time now, from tokio's clock (so tests can pause it).
fn now() -> Now {
    Now::read(tokio::time::Instant::now().into_std())
}

/// Runs `config.count` simulated agents on `listener` until `shutdown` completes.
pub async fn run_simulated(
    mut config: SimConfig,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), AgentError> {
    if config.count == 0 {
        return Err(config::ConfigError::NoAgents.into());
    }
    config.coordinator = config::parse_coordinator_urls(&config.coordinator)?;
    let leader = client::Leader::new(&config.coordinator)?;
    let (tls, http) = crate::tls_and_client(config.tls.as_ref(), config.ca_file.as_deref())?;
    let hostname = crate::machine_hostname();
    let base_url = crate::advertised_url(
        config.advertise_url.as_deref(),
        listener.local_addr().map_err(AgentError::Serve)?,
        &hostname,
        tls.is_some(),
    )?;
    let seed: u64 = rand::random();
    // `gpus=N`: N invented devices per agent; a fraction is refused.
    let gpu_count = match protocol::gpu::requested(&config.resources) {
        Ok(n) => n,
        Err(e) => {
            return Err(
                config::ConfigError::Gpus(crate::gpu::GpuError::Resources(e.to_string())).into(),
            )
        }
    };
    let cores = (0..config.count)
        .map(|i| {
            let gpus = (0..gpu_count)
                .map(|g| crate::gpu::fake::simulated_uuid(i, g))
                .collect();
            let core =
                EngineConfig::simulated(config.timing.clone(), seed ^ i as u64).with_gpus(gpus);
            Engine::new(core, None)
        })
        .collect();
    let (events, rx) = mpsc::unbounded_channel();
    let http = crate::client::with_token(http, config.token.as_deref())
        .pool_max_idle_per_host(config.max_in_flight.max(1))
        .build()
        .map_err(AgentError::HttpClient)?;
    tracing::info!(count = config.count, %base_url, "simulated agents starting");
    let api_token = match &config.api_token {
        Some(token) => {
            crate::auth::check_form(token)?;
            token.clone()
        }
        None => crate::auth::generate(),
    };
    let sim = Arc::new(Sim {
        config,
        base_url,
        api_token,
        cores: Mutex::new(cores),
        events,
        leader,
    });
    let cancel = CancellationToken::new();
    let driver = tokio::spawn(drive(sim.clone(), http, rx, cancel.clone()));

    let on_shutdown = sim.clone();
    let stop = cancel.clone();
    let served = parley_tls::serve(listener, tls, app(sim.clone()), async move {
        shutdown.await;
        for core in on_shutdown.lock().iter_mut() {
            core.stop_accepting();
        }
        stop.cancel();
    })
    .await;
    cancel.cancel();
    if let Err(e) = driver.await {
        tracing::error!("simulation driver ended abnormally: {e}");
    }
    served.map_err(AgentError::Serve)
}

/// The driver's own state: the timer heap and the requests in flight.
struct Driver {
    sim: Arc<Sim>,
    http: reqwest::Client,
    heap: BinaryHeap<Reverse<(Instant, Due)>>,
    in_flight: FuturesUnordered<Pending>,
    /// Per agent, the [`client::Leader::generation`] of its last registration.
    registered_at: Vec<u64>,
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
    let mut d = Driver {
        sim,
        http,
        heap: BinaryHeap::new(),
        in_flight: FuturesUnordered::new(),
        registered_at: vec![0; cfg.count],
    };
    let start = now().at;
    let count = cfg.count as u32;
    for i in 0..cfg.count {
        let at = start + cfg.stagger.mul_f64(i as f64 / f64::from(count.max(1)));
        d.heap.push(Reverse((at, Due::Engine(i, Timer::Register))));
    }
    let mut events_open = true;

    loop {
        let now = now();
        while d.in_flight.len() < max_in_flight {
            let due_now = d.heap.peek().is_some_and(|Reverse((at, _))| *at <= now.at);
            if !due_now {
                break;
            }
            let Some(Reverse((_, due))) = d.heap.pop() else {
                break;
            };
            d.fire(due, now);
        }
        let next_due = d.heap.peek().map(|Reverse((at, _))| *at);
        let can_start = d.in_flight.len() < max_in_flight;
        tokio::select! {
            () = cancel.cancelled() => return,
            Some((i, (mut reply, generation))) = d.in_flight.next(), if !d.in_flight.is_empty() => {
                let changed = d
                    .registered_at
                    .get_mut(i)
                    .is_some_and(|at| client::changed_coordinator(&mut reply, generation, at));
                client::log_failure(&reply, LogLevel::Debug);
                d.feed(i, self::now(), |core, now, out| {
                    if changed {
                        core.coordinator_changed(now, out);
                    }
                    core.reply(reply, now, out);
                });
            }
            event = events.recv(), if events_open => match event {
                Some(Event { agent, commands, finishes }) => {
                    let now = self::now();
                    for (task_id, after) in finishes {
                        d.heap.push(Reverse((now.at + after, Due::Finish(agent, task_id))));
                    }
                    d.feed(agent, now, |_, _, out| out.extend(commands));
                }
                None => events_open = false,
            },
            () = sleep_until(next_due), if can_start && next_due.is_some() => {}
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

impl Driver {
    fn fire(&mut self, due: Due, now: Now) {
        match due {
            Due::Engine(i, timer) => {
                self.feed(i, now, |core, now, out| core.timer(timer, now, out))
            }
            Due::Finish(i, task_id) => self.feed(i, now, |core, now, out| {
                core.exited(&task_id, Exit::Elapsed, now, out);
            }),
        }
    }

    /// Feeds agent `i`'s core one event, flushes its updates, and runs what it asks for.
    fn feed(&mut self, i: usize, now: Now, f: impl FnOnce(&mut Engine, Now, &mut Vec<Command>)) {
        let mut out = Vec::new();
        {
            let mut cores = self.sim.lock();
            let Some(core) = cores.get_mut(i) else { return };
            f(core, now, &mut out);
            out = settle(core, out, now);
            core.flush(now, &mut out);
        }
        for c in out {
            match c {
                Command::Send(request) => {
                    let call = Call::new(request, || self.sim.identity(i));
                    let http = self.http.clone();
                    let sim = Arc::clone(&self.sim);
                    let timeout = self.sim.config.timing.request_timeout;
                    self.in_flight.push(Box::pin(async move {
                        (i, call.send(&http, &sim.leader, timeout).await)
                    }));
                }
                Command::SetTimer { at, timer } => {
                    self.heap.push(Reverse((at, Due::Engine(i, timer))));
                }
                // Settled in the lock, or not used with journaling off.
                Command::Spawn(_)
                | Command::Signal { .. }
                | Command::Watch(..)
                | Command::Journal { .. }
                | Command::RewriteJournal { .. }
                | Command::PersistAgentId(_) => {}
            }
        }
    }
}

/// Carries out, on the engine itself, what a simulated task does at once: a spawned task is
/// running; a terminated one has ended. Returns the commands left for the driver.
fn settle(core: &mut Engine, mut commands: Vec<Command>, now: Now) -> Vec<Command> {
    let at_once = |c: &Command| matches!(c, Command::Spawn(_) | Command::Signal { .. });
    if !commands.iter().any(at_once) {
        return commands;
    }
    let mut rest = Vec::new();
    while !commands.is_empty() {
        let mut more = Vec::new();
        for c in commands {
            match c {
                Command::Spawn(task_id) => {
                    core.started(&task_id, None, now, &mut more);
                    // Nothing to probe: a simulated task with a health check is healthy.
                    if core
                        .spec(&task_id)
                        .is_some_and(|s| s.health_check.is_some())
                    {
                        core.health_changed(&task_id, true, now, &mut more);
                    }
                }
                Command::Signal {
                    task: task_id,
                    signal: Signal::Terminate,
                    ..
                } => core.exited(&task_id, Exit::Signal(15), now, &mut more),
                Command::Signal {
                    signal: Signal::Kill,
                    ..
                } => {}
                other => rest.push(other),
            }
        }
        commands = more;
    }
    rest
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
        .route("/sim/{i}/api/v1/reconnect", post(reconnect))
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

/// Feeds agent `i`'s core from a handler, settles what happens at once, and hands the rest to
/// the driver (which also sends the updates); `finishes` only when `f` succeeded.
fn handle<R, E>(
    sim: &Sim,
    i: usize,
    finishes: Vec<(TaskKey, Duration)>,
    f: impl FnOnce(&mut Engine, Now, &mut Vec<Command>) -> Result<R, E>,
) -> Result<R, E> {
    let now = now();
    let mut out = Vec::new();
    let (result, commands) = {
        let mut cores = sim.lock();
        let core = &mut cores[i];
        let result = f(core, now, &mut out);
        (result, settle(core, out, now))
    };
    let finishes = if result.is_ok() { finishes } else { Vec::new() };
    if !commands.is_empty() || !finishes.is_empty() || result.is_ok() {
        // The driver only stops on shutdown; a send error then is harmless.
        let _ = sim.events.send(Event {
            agent: i,
            commands,
            finishes,
        });
    }
    result
}

async fn launch(
    State(sim): State<Arc<Sim>>,
    Path(i): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let i = index(&sim, &i)?;
    auth::require(&headers, &sim.api_token)?;
    let launch = parse_launch(&body)?;
    let partition = partition_timeout(&launch);
    let finishes = launch
        .tasks
        .iter()
        .filter_map(|s| {
            let d = s.duration_s?;
            let key = (launch.framework_id, s.task_id.clone());
            Some((key, Duration::from_secs_f64(d.min(1e9))))
        })
        .collect();
    let launches = launch
        .tasks
        .into_iter()
        .map(|spec| Launch {
            spec,
            sandbox: None,
        })
        .collect();
    handle(&sim, i, finishes, |core, now, out| {
        core.launch_partitioned(launch.framework_id, launches, partition, now, out)
    })?;
    Ok((StatusCode::ACCEPTED, Json(Empty {})).into_response())
}

async fn list(
    State(sim): State<Arc<Sim>>,
    Path(i): Path<String>,
) -> Result<Json<TaskStatusList>, ApiError> {
    let i = index(&sim, &i)?;
    let tasks = sim.lock()[i].statuses();
    Ok(Json(TaskStatusList { tasks }))
}

async fn kill(
    State(sim): State<Arc<Sim>>,
    Path((i, task_id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let i = index(&sim, &i)?;
    auth::require(&headers, &sim.api_token)?;
    let id = parse_task_id(&task_id)?;
    let order = parse_kill(&body)?;
    handle(&sim, i, Vec::new(), |core, now, out| match order.fence {
        true => core.fence(order.framework_id, &id, now, out),
        false => core.kill(order.framework_id, &id, now, out),
    })?;
    Ok((StatusCode::ACCEPTED, Json(Empty {})).into_response())
}

async fn output(
    State(sim): State<Arc<Sim>>,
    Path((i, task_id)): Path<(String, String)>,
    Query(query): Query<OutputQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let i = index(&sim, &i)?;
    auth::require(&headers, &sim.api_token)?;
    let id = parse_task_id(&task_id)?;
    let framework = query.framework_id;
    sim.lock()[i].find(framework, &id)?;
    // A simulated task prints nothing.
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "").into_response())
}

/// A coordinator asks agent `i` to contact the leader now (open, as on a real agent).
async fn reconnect(
    State(sim): State<Arc<Sim>>,
    Path(i): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let i = index(&sim, &i)?;
    parse_call_back(&body)?;
    handle(&sim, i, Vec::new(), |core, now, out| {
        core.call_back(now, out);
        Ok::<(), ApiError>(())
    })?;
    Ok((StatusCode::ACCEPTED, Json(Empty {})).into_response())
}

async fn health(
    State(sim): State<Arc<Sim>>,
    Path(i): Path<String>,
) -> Result<Json<Empty>, ApiError> {
    index(&sim, &i)?;
    Ok(Json(Empty {}))
}
