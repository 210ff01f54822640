//! The Parley agent: advertises a node's resources to the coordinator, runs the tasks the
//! coordinator sends as real OS processes, and reports every state change reliably. A simulated
//! mode runs thousands of agents in one process for scale tests.
//!
//! # Layout
//!
//! - [`cli`]: the `agent` binary's command line (clap), kept here for its generated reference.
//! - [`config`]: [`AgentConfig`], [`SimConfig`], [`Timing`] and the CLI's text forms.
//! - [`auth`]: the agent's API token (given, or generated and kept in the work dir) and the
//!   check that only its holder, the coordinator, launches, kills and reads output.
//! - [`task_user`]: the user tasks run as (`--task-user`), and the root check.
//! - [`resources`]: detection of cores, memory and disk of the work directory.
//! - [`engine`]: the agent engine shared by the real and the simulated agent: a synchronous state
//!   machine (registration, heartbeats, the task state machine, the unacknowledged updates)
//!   that does no I/O and emits [`engine::Command`]s for a shell to run.
//! - `real`: the real agent's shell: runs the engine's commands with processes, the journal and
//!   HTTP.
//! - [`process`]: a task's OS process ([`process::Process`]) and how it ended
//!   ([`process::Exit`]): plain types the engine, the journal and the isolation share.
//! - [`journal`]: append-only, fsync'd JSON lines in the work dir; replay and compaction; its
//!   group commit (one sync, on a thread of its own, for every record appended before it).
//! - [`executor`]: task processes: the wrapper, environment, memory limits, process-group
//!   signals, exit status, `/proc` checks for re-adoption.
//! - [`isolation`]: per-task cgroups (v1 and v2) and namespaces, detected at start; the
//!   launcher (`parley-launch`, or `agent __parley-launch`) the agent starts in place of the
//!   wrapper; kill of the whole cgroup.
//! - [`image`]: task root filesystems from images on the agent's disk (`isolation.image`):
//!   unpacked once into a cache, an overlay per task.
//! - [`gpu`]: GPUs: discovery behind a trait (NVML, or a fake), `--gpus`, the variables that
//!   tell a task its devices, and the cgroup v1 device rules of a GPU task.
//! - [`health`]: task health checks: the per-task state machine (grace,
//!   consecutive failures, recovery) and running one command or HTTP check.
//! - `gc`: deletes finished tasks' sandboxes after `AgentConfig::sandbox_retention`.
//! - `reaper`: makes the agent a child subreaper and reaps orphaned task processes.
//! - `client`: HTTP to the coordinator for both shells: an engine request in, an engine reply out;
//!   several coordinators (`--coordinator a,b,c`): follows the leader, and tells the shell when
//!   another coordinator answers, so the agent registers again with its running tasks.
//! - `api`: the agent's HTTP API (axum router).
//! - `api_error`: the API's error answer, shared by `api` and [`auth`].
//! - [`metrics`]: `GET /metrics`: the table of the agent's metrics, its counters, and the
//!   registry that writes them with the process' figures (`parley-observe`).
//! - [`simulated`]: the simulated agents' shell: many engines in one process, one listener, one
//!   driver loop, fake tasks.
//!
//! # Running tasks
//!
//! Each task runs in its own sandbox, `WORK_DIR/sandboxes/FRAMEWORK_ID/TASK_ID`, which is its
//! working directory and holds its `stdout` and `stderr` files; a finished task's sandbox is
//! deleted `AgentConfig::sandbox_retention` (default one day) after it was last written. Tasks
//! are known by (framework id, task id): two frameworks may each run a task `web` on one agent;
//! a kill or output read names the framework (`{"framework_id"}` in the kill body,
//! `?framework_id=` on the output), and without it is answered `409` when the id is ambiguous.
//!
//! Its environment is built from nothing: `PATH` ([`executor::BASE_PATH`]), `HOME` (the
//! sandbox), then the task's `env`, then, on an agent with GPUs, `CUDA_VISIBLE_DEVICES` and
//! `NVIDIA_VISIBLE_DEVICES` naming its own devices by UUID (or none: empty and `void`; see
//! [`gpu`]), then `PARLEY_TASK_ID`, `PARLEY_SANDBOX` and one
//! `PARLEY_<NAME>` per resource (`PARLEY_CPUS=2`, `PARLEY_MEM=4096`, ...); nothing of the
//! agent's own environment. With `AgentConfig::task_user` (`--task-user`) it runs as that uid
//! and gid, without supplementary groups, in a sandbox (0700) it owns; the work dir and
//! `sandboxes/` are 0711 and the journal, agent id and API token 0600, so a task can neither
//! read nor change them. The `agent` binary refuses to run as root without `--task-user` unless
//! given `--allow-root-tasks`.
//!
//! States: `starting` → `running` →
//! `finished` (exit 0), `failed` (non-zero exit, signal — `exit_code` is then 128 + the signal —
//! or could not start; the reason in `message`), or `killed`. A kill sends SIGTERM to the task's
//! process group, then SIGKILL after `Timing::kill_grace`; when a task's main process ends, the
//! rest of its group is killed, so no process is left behind. A group is only signalled when
//! it provably is the task's ([`executor::may_signal`]: same boot and start time). The agent
//! makes itself a child subreaper (unless `AgentConfig::reap_orphans` is off) and reaps orphaned
//! task processes, so none linger as zombies even where PID 1 does not reap.
//!
//! # Security
//!
//! The agent listens on loopback unless told otherwise (`--listen`). Launches, kills and
//! output reads need `Authorization: Bearer` with the agent's API token ([`auth`]), which it
//! sends the coordinator in its registration; `GET /api/v1/tasks` (statuses: no environment, no
//! output) and `GET /api/v1/health` stay open. Output reads return at most 1 MiB of a regular
//! file (`?offset=`/`?limit=`, else the end), never following a symlink the task left.
//!
//! # Memory limits
//!
//! A task's `mem` (MiB) is enforced by a small `sh` wrapper that runs before the task (the
//! workspace forbids `unsafe`, so there is no `pre_exec`):
//! - with `--cgroup-root DIR` (a delegated cgroup v2 directory whose `subtree_control` enables
//!   `memory`), each task gets its own cgroup there with `memory.max` = `mem`;
//! - otherwise `ulimit -v` sets RLIMIT_AS to `mem`. This limits *virtual* memory, which is
//!   stricter than resident memory: runtimes that reserve large address ranges (JVM, Go) need a
//!   `mem` above their reservation.
//!
//! # Reliability
//!
//! Every state change is appended to `WORK_DIR/journal.jsonl` and fsync'd before it is sent.
//! Updates go in order, up to 256 per `POST /api/v1/agents/{id}/statuses`, and are sent again
//! until the coordinator answers `200` (a batch the coordinator refuses with another 4xx is sent
//! again one update at a time, and the refused update is dropped with a warning, since it would
//! block every later one). On start
//! the agent replays the journal and re-sends what was not acknowledged. A task whose process
//! is still alive (same boot id, pid *and* start time from `/proc`) is **re-adopted**: the agent
//! watches it and reports its end, using the exit code the wrapper wrote to the sandbox. A task
//! whose process ended while the agent was down is reported `finished`/`failed` from that exit
//! code, or `lost` when there is none; one that never started is `failed`. The journal is
//! compacted when it grows well past what it must hold. The agent id the coordinator gives is
//! kept in `WORK_DIR/agent_id` and reused when registering again; registering again also
//! carries the latest status of every task the agent knows. On shutdown (Ctrl-C, SIGTERM) the
//! agent stops accepting launches, leaves running tasks alone and syncs the journal. An
//! embedding that must leave no process behind (the test cluster, whose work dirs are
//! temporary) runs the agent with [`run_with`] and ends its tasks with a [`TaskKiller`].
//!
//! # TLS
//!
//! With [`AgentConfig::tls`] the agent API is served over HTTPS (rustls, ring; `parley_tls`)
//! and the derived advertised URL is `https://`; the certificate and key are read and checked at
//! start. [`AgentConfig::ca_file`] is the CA the agent trusts when it calls an `https://`
//! coordinator (only it; without one, the built-in Mozilla roots). The simulated fleet takes
//! the same two settings in [`SimConfig`].

pub mod auth;
pub mod cli;
pub mod config;
pub mod engine;
pub mod executor;
pub mod gpu;
pub mod health;
pub mod image;
pub mod isolation;
pub mod journal;
pub mod metrics;
pub mod process;
pub mod resources;
pub mod simulated;
pub mod task_user;

mod api;
mod api_error;
mod client;
mod gc;
mod output;
mod real;
mod reaper;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;

pub use config::{AgentConfig, ConfigError, SimConfig, Timing, TlsFiles};
pub use simulated::run_simulated;

/// Why an agent (or a simulated fleet) could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// A configuration value cannot be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The machine's resources could not be detected.
    #[error("detecting the machine's resources: {0}")]
    Resources(#[from] protocol::ResourceError),
    /// The journal cannot be opened, replayed or synced.
    #[error(transparent)]
    Journal(#[from] journal::JournalError),
    /// The HTTP client cannot be built.
    #[error("building the HTTP client: {0}")]
    HttpClient(#[source] reqwest::Error),
    /// A TLS certificate, key or CA file cannot be used (the message names the file).
    #[error(transparent)]
    Tls(#[from] parley_tls::TlsError),
    /// The listener failed (its address, or serving the API).
    #[error("serving the agent API: {0}")]
    Serve(#[source] std::io::Error),
}

/// Runs one real agent on `listener` until `shutdown` completes.
///
/// Registers with the coordinator, serves the agent API, runs tasks. Returns after a graceful
/// shutdown: launches refused, running tasks left running, journal synced.
pub async fn run(
    config: AgentConfig,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), AgentError> {
    run_with(config, listener, shutdown, TaskKiller::new()).await
}

/// Ends the tasks of agents run with [`run_with`], even after they stopped: for an embedding
/// that must leave no process behind (a test harness, whose work dirs go with it), since an
/// agent's shutdown leaves its tasks running for its next start to re-adopt.
///
/// One killer may serve an agent restarted on the same work dir: it ends the tasks of the
/// latest start (which re-adopted those still running).
#[derive(Clone, Default)]
pub struct TaskKiller {
    state: std::sync::Arc<std::sync::Mutex<KillerState>>,
}

#[derive(Default)]
struct KillerState {
    /// The latest agent run with this killer.
    agent: Option<std::sync::Arc<real::RealAgent>>,
    /// [`TaskKiller::kill_all`] was called: an agent attached later ends its tasks at once.
    killed: bool,
}

impl TaskKiller {
    /// A killer for no agent yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// SIGKILLs the process group (and, when isolated, the cgroup) of every task of the
    /// agent that has not ended, and of every task it starts from now on; synchronous, so it
    /// may run in a `Drop`. Returns how many tasks it found.
    pub fn kill_all(&self) -> usize {
        let agent = {
            let mut state = self.lock();
            state.killed = true;
            state.agent.clone()
        };
        agent.map_or(0, |a| a.end_tasks())
    }

    fn attach(&self, agent: &std::sync::Arc<real::RealAgent>) {
        let killed = {
            let mut state = self.lock();
            state.agent = Some(std::sync::Arc::clone(agent));
            state.killed
        };
        if killed {
            agent.end_tasks();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, KillerState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// [`run`], with `killer` able to end the agent's tasks (see [`TaskKiller`]).
pub async fn run_with(
    mut config: AgentConfig,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    killer: TaskKiller,
) -> Result<(), AgentError> {
    config.coordinator = config::parse_coordinator_urls(&config.coordinator)?;
    let leader = client::Leader::new(&config.coordinator)?;
    if config.task_user.is_none() && !config.allow_root_tasks && task_user::running_as_root() {
        return Err(ConfigError::RootTasks.into());
    }
    prepare_work_dir(&config.work_dir)?;
    // Images (`--image-root`): checked here, advertised as the `image_root` attribute.
    if let Some(store) = config.image_store()? {
        config.attributes.insert(
            protocol::isolation::ATTR_IMAGE_ROOT.into(),
            store.root.display().to_string(),
        );
        tracing::info!(root = %store.root.display(), cache = %store.cache.display(), "images from the image root");
    }
    let api_token = auth::load_or_create(config.api_token.as_deref(), &config.work_dir)?;
    let (tls, http) = tls_and_client(config.tls.as_ref(), config.ca_file.as_deref())?;
    let http = client::with_token(http, config.token.as_deref())
        .build()
        .map_err(AgentError::HttpClient)?;
    let resources = match &config.resources {
        Some(r) => r.clone(),
        None => resources::detect(&config.work_dir)?,
    };
    // GPUs: `gpus=N` is the number of devices found and chosen, whatever `--resources` says.
    let gpu_discovery = gpu::discovery(config.gpu_discovery.as_ref());
    let gpus = gpu::select(&config.gpus, gpu_discovery.as_ref()).map_err(ConfigError::from)?;
    let given = resources.millis(protocol::gpu::GPUS);
    if config.resources.is_some() && given != 0 && given != gpus.len() as u64 * 1000 {
        tracing::warn!(
            given = resources.units(protocol::gpu::GPUS),
            found = gpus.len(),
            "--resources names gpus; the agent advertises the GPUs it found instead"
        );
    }
    let resources = gpu::with_gpus(&resources, gpus.len());
    let hostname = config.hostname.clone().unwrap_or_else(machine_hostname);
    let endpoint = advertised_url(
        config.advertise_url.as_deref(),
        listener.local_addr().map_err(AgentError::Serve)?,
        &hostname,
        tls.is_some(),
    )?;
    let (journal, replay) = journal::Journal::open(&config.work_dir)?;
    tracing::info!(%endpoint, %resources, tasks = replay.tasks.len(), tls = tls.is_some(), "agent starting");

    let work_dir: PathBuf = config.work_dir.clone();
    let parts = real::Parts {
        config,
        resources,
        hostname,
        endpoint,
        http,
        api_token,
        leader,
        gpus,
        gpu_discovery,
    };
    let agent = real::RealAgent::restore(parts, journal, replay);
    killer.attach(&agent);
    if agent.config.reap_orphans && reaper::become_subreaper() {
        agent.tracker.spawn(reaper::reaper_loop(
            agent.config.timing.adopt_poll,
            agent.cancel.clone(),
        ));
    }
    agent.tracker.spawn(gc::gc_loop(agent.clone()));
    if agent.has_gpus() {
        agent.tracker.spawn(real::gpu_sampler(agent.clone()));
    }
    agent.feed(|core, now, out| core.start(now, out));

    if let (Some(server), Some(files)) = (&tls, &agent.config.tls) {
        let hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .map_err(AgentError::Serve)?;
        agent.tracker.spawn(reload_tls_on_sighup(
            hangups,
            server.clone(),
            files.clone(),
            agent.cancel.clone(),
        ));
    }
    let on_shutdown = agent.clone();
    let served = parley_tls::serve(listener, tls, api::app(agent.clone()), async move {
        shutdown.await;
        on_shutdown.stop_accepting();
        on_shutdown.cancel.cancel();
    })
    .await;
    agent.stop_accepting();
    agent.cancel.cancel();
    agent.tracker.close();
    agent.tracker.wait().await;
    agent.flush()?;
    tracing::info!(work_dir = %work_dir.display(), "agent stopped");
    served.map_err(AgentError::Serve)
}

/// Re-reads the agent's certificate and key on every SIGHUP: new connections get the new pair,
/// open ones keep theirs; a pair that does not load is logged and the one in use stays.
async fn reload_tls_on_sighup(
    mut hangups: tokio::signal::unix::Signal,
    server: parley_tls::ServerTls,
    files: TlsFiles,
    cancel: tokio_util::sync::CancellationToken,
) {
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            got = hangups.recv() => {
                if got.is_none() {
                    return;
                }
                match server.reload(&files.cert, &files.key) {
                    Ok(()) => tracing::info!("SIGHUP: reloaded the TLS certificate"),
                    Err(e) => tracing::error!(reason = %e, "SIGHUP: cannot reload the TLS certificate; keeping the one in use"),
                }
            }
        }
    }
}

/// Creates the work dir, and its `sandboxes` directory, as the agent's own: mode 0711, so
/// tasks (run as a task user) reach their own sandbox but cannot list the directory or read
/// the journal, the agent id or the API token (each 0600).
fn prepare_work_dir(work_dir: &std::path::Path) -> Result<(), ConfigError> {
    use std::os::unix::fs::PermissionsExt;
    let sandboxes = work_dir.join("sandboxes");
    std::fs::create_dir_all(&sandboxes)
        .and_then(|()| {
            for dir in [work_dir, sandboxes.as_path()] {
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711))?;
            }
            Ok(())
        })
        .map_err(|e| ConfigError::WorkDir {
            path: work_dir.to_path_buf(),
            reason: e.to_string(),
        })
}

/// The machine's hostname, or `localhost` when it cannot be read.
pub fn machine_hostname() -> String {
    sysinfo::System::host_name().unwrap_or_else(|| "localhost".into())
}

/// The listener's TLS (loaded and checked, or `None` for plain HTTP) and a client builder for
/// calls to the coordinator that trusts `ca_file` (or the built-in roots) and follows no
/// redirect by itself.
pub(crate) fn tls_and_client(
    tls: Option<&TlsFiles>,
    ca_file: Option<&std::path::Path>,
) -> Result<(Option<parley_tls::ServerTls>, reqwest::ClientBuilder), AgentError> {
    let server = tls
        .map(|f| parley_tls::ServerTls::from_pem_files(&f.cert, &f.key))
        .transpose()?;
    // Redirects are followed by the client module, which sends the same body and token to the
    // leader a follower names; reqwest would drop the token on the way.
    let client = parley_tls::client_builder(ca_file)?.redirect(reqwest::redirect::Policy::none());
    Ok((server, client))
}

/// The URL the coordinator uses to reach a listener: the given one (checked), or
/// `http://ADDR` (`https://` when `tls`) — with the hostname in place of an unspecified address
/// like `0.0.0.0`.
pub(crate) fn advertised_url(
    given: Option<&str>,
    local: SocketAddr,
    hostname: &str,
    tls: bool,
) -> Result<String, ConfigError> {
    let scheme = if tls { "https" } else { "http" };
    match given {
        Some(url) => {
            config::normalize_url(url).ok_or_else(|| ConfigError::BadAdvertiseUrl(url.to_string()))
        }
        None if local.ip().is_unspecified() => {
            Ok(format!("{scheme}://{hostname}:{}", local.port()))
        }
        None => Ok(format!("{scheme}://{local}")),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_advertised_url_is_https_when_serving_tls() {
        let local: SocketAddr = "127.0.0.1:5051".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:5051".parse().unwrap();
        let url = |given, local, tls| advertised_url(given, local, "node1", tls).unwrap();
        assert_eq!(url(None, local, false), "http://127.0.0.1:5051");
        assert_eq!(url(None, local, true), "https://127.0.0.1:5051");
        assert_eq!(url(None, any, true), "https://node1:5051");
        assert_eq!(url(Some("https://n:1/"), local, true), "https://n:1");
    }
}
