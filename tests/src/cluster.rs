//! [`Cluster`]: a whole Parley cluster on loopback, in the test process — a real coordinator
//! and agents (real ones, each on its own `127.0.0.1:0` listener and work dir, and optionally a
//! simulated fleet behind one listener) — built with [`Cluster::builder`], read through the
//! coordinator's REST API, and stopped, restarted or shut down piece by piece.
//!
//! It is the one in-process cluster of the workspace: the end-to-end tests, `parleyctl`'s and
//! the jobs service's tests, and the benchmark's in-process run (`parley-bench`) all start it.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use protocol::messages::{
    AgentInfo, AgentList, FrameworkList, OfferList, RoleNode, TaskInfo, TaskList, TaskStatusList,
};
use protocol::{FrameworkId, Resources, TaskState};
use serde::de::DeserializeOwned;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::{fast_coordinator_config, wait_until, WITHIN};

/// A running piece of the cluster: how to stop it, and its task.
type Running = (CancellationToken, JoinHandle<anyhow::Result<()>>);

/// One real agent of a [`Cluster`].
struct AgentSlot {
    resources: Resources,
    /// Its `--attributes` (e.g. `zone`, `rack`).
    attributes: std::collections::BTreeMap<String, String>,
    /// Its `--reserve` static reservations.
    reservations: Vec<protocol::reservation::Reservation>,
    work_dir: PathBuf,
    running: Option<Running>,
    /// Ends the tasks of its latest start, even once stopped: a stopped agent leaves its tasks
    /// running, and the cluster's shutdown or drop must leave no process behind.
    killer: agent::TaskKiller,
}

/// A simulated fleet to start with the cluster.
struct FleetSpec {
    count: usize,
    resources: String,
}

/// TLS for a [`Cluster`]: the files of a test PKI (a CA, and one certificate for `localhost`
/// and `127.0.0.1` that every server uses), and how the coordinator uses them. The agents
/// (real and simulated) always serve HTTPS with the certificate and trust the CA; the
/// harness's own client trusts it too.
#[derive(Debug, Clone)]
pub struct ClusterTls {
    /// The CA's certificate (PEM).
    pub ca_file: PathBuf,
    /// The servers' certificate (PEM).
    pub cert_file: PathBuf,
    /// Its private key (PEM).
    pub key_file: PathBuf,
    /// The coordinator serves HTTPS (`https://localhost:PORT`), else plain HTTP.
    pub coordinator_https: bool,
    /// The coordinator trusts the CA when it calls agents (`agent_ca_file`), else only the
    /// built-in roots, so it cannot reach them.
    pub coordinator_trusts_agents: bool,
}

impl ClusterTls {
    /// TLS everywhere with `pki`'s files: the coordinator serves HTTPS and trusts the CA.
    pub fn of(pki: &parley_tls::testing::TestPki) -> Self {
        Self {
            ca_file: pki.ca_file.clone(),
            cert_file: pki.cert_file.clone(),
            key_file: pki.key_file.clone(),
            coordinator_https: true,
            coordinator_trusts_agents: true,
        }
    }
}

/// How to build a [`Cluster`]; from [`Cluster::builder`].
pub struct ClusterBuilder {
    config: coordinator::Config,
    /// Each real agent's resources and attributes.
    agents: Vec<(String, Vec<(String, String)>)>,
    fleet: Option<FleetSpec>,
    /// The fleet keeps `agent::SimConfig`'s default timing and stagger instead of the tests'.
    fleet_default_pacing: bool,
    startup_timeout: Duration,
    tls: Option<ClusterTls>,
    durable: bool,
    reap_orphans: bool,
    tokens: Tokens,
}

/// The tokens the harness itself presents when the coordinator has credentials.
#[derive(Clone, Default)]
struct Tokens {
    /// The real and simulated agents'.
    agent: Option<String>,
    /// The harness's own reads (`Cluster::get`): an operator's.
    operator: Option<String>,
}

impl ClusterBuilder {
    /// Requires credentials (`credentials`) on the coordinator; the agents present
    /// `agent_token` (an agent principal's) and the harness's reads `operator_token` (an
    /// operator's).
    pub fn credentials(
        mut self,
        credentials: coordinator::auth::Credentials,
        agent_token: &str,
        operator_token: &str,
    ) -> Self {
        self.config.credentials = Some(std::sync::Arc::new(credentials));
        self.tokens = Tokens {
            agent: Some(agent_token.to_owned()),
            operator: Some(operator_token.to_owned()),
        };
        self
    }

    /// The coordinator's settings (default: [`fast_coordinator_config`]).
    pub fn config(mut self, config: coordinator::Config) -> Self {
        self.config = config;
        self
    }

    /// One more real agent with these resources (`cpus=2,mem=1024` form).
    pub fn agent(mut self, resources: &str) -> Self {
        self.agents.push((resources.to_owned(), Vec::new()));
        self
    }

    /// One more real agent with these resources and attributes (`[("zone", "b")]`), as
    /// `agent --attributes` sets them.
    pub fn agent_with_attributes(mut self, resources: &str, attributes: &[(&str, &str)]) -> Self {
        let attributes = attributes
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        self.agents.push((resources.to_owned(), attributes));
        self
    }

    /// `count` more real agents with these resources.
    pub fn agents(mut self, count: usize, resources: &str) -> Self {
        self.agents.extend(std::iter::repeat_n(
            (resources.to_owned(), Vec::new()),
            count,
        ));
        self
    }

    /// A fleet of `count` simulated agents (`agent::run_simulated`, one listener, fast timing,
    /// registrations staggered over 500 ms unless [`ClusterBuilder::fleet_default_pacing`])
    /// with these resources each.
    pub fn simulated_agents(mut self, count: usize, resources: &str) -> Self {
        self.fleet = Some(FleetSpec {
            count,
            resources: resources.to_owned(),
        });
        self
    }

    /// Paces the simulated fleet as `agent --simulate` does by default (its default timing
    /// and registration stagger) instead of as the tests do (fast timing, 500 ms): the
    /// benchmark runs its fleet as a real one would be run.
    pub fn fleet_default_pacing(mut self) -> Self {
        self.fleet_default_pacing = true;
        self
    }

    /// How long [`ClusterBuilder::start`] waits for every agent to be active (default
    /// [`WITHIN`]).
    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = timeout;
        self
    }

    /// TLS between the harness, the coordinator and the agents (see [`ClusterTls`]).
    pub fn tls(mut self, tls: ClusterTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// A durable registry in the cluster's temp dir, so [`Cluster::stop_coordinator`] and
    /// [`Cluster::start_coordinator`] keep the stored books.
    pub fn durable_registry(mut self) -> Self {
        self.durable = true;
        self
    }

    /// Whether real agents reap orphaned processes (default off). The reaper reaps every
    /// zombie child of the process that no agent waits for, and a test process has children of
    /// its own (binaries, scripts, browsers) whose exit statuses it would steal (`ECHILD` in the
    /// test's `wait`); a test of reaping itself turns it on.
    pub fn reap_orphans(mut self, on: bool) -> Self {
        self.reap_orphans = on;
        self
    }

    /// Starts the coordinator and the agents, and waits until every agent is active.
    pub async fn start(self) -> anyhow::Result<Cluster> {
        let dirs = tempfile::tempdir()?;
        let mut config = self.config;
        if self.durable {
            config.registry = Some(dirs.path().join("registry.redb"));
        }
        if let Some(tls) = &self.tls {
            if tls.coordinator_https {
                config.tls_cert = Some(tls.cert_file.clone());
                config.tls_key = Some(tls.key_file.clone());
            }
            if tls.coordinator_trusts_agents {
                config.agent_ca_file = Some(tls.ca_file.clone());
            }
        }
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let ca_file = self.tls.as_ref().map(|t| t.ca_file.as_path());
        let mut http = parley_tls::client_builder(ca_file)?;
        if let Some(token) = &self.tokens.operator {
            let mut headers = reqwest::header::HeaderMap::new();
            headers.insert(
                reqwest::header::AUTHORIZATION,
                reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))?,
            );
            http = http.default_headers(headers);
        }
        let mut cluster = Cluster {
            url: base_url(self.tls.as_ref(), addr),
            http: http.build()?,
            agent_token: self.tokens.agent.clone(),
            addr,
            config,
            reap_orphans: self.reap_orphans,
            tls: self.tls,
            coordinator: None,
            agent_coordinators: None,
            agents: Vec::new(),
            fleet: None,
            _dirs: dirs,
        };
        cluster.serve(listener)?;
        for (resources, attributes) in &self.agents {
            cluster
                .add_agent_with_attributes(resources, attributes.iter().cloned().collect())
                .await?;
        }
        let mut want = self.agents.len();
        if let Some(fleet) = self.fleet {
            cluster
                .start_fleet(&fleet, self.fleet_default_pacing)
                .await?;
            want += fleet.count;
        }
        let c = &cluster;
        wait_until(
            self.startup_timeout,
            &format!("{want} active agents"),
            || async move {
                // A part that stopped by itself will not come up: stop waiting, say why below.
                if c.check_alive().is_err() {
                    return Some(());
                }
                let list = c.agents().await.ok()?;
                let active = list.agents.iter().filter(|a| a.state == "active").count();
                (list.agents.len() == want && active == want).then_some(())
            },
        )
        .await?;
        if let Some(error) = cluster.why_stopped().await {
            return Err(error.context("starting the cluster"));
        }
        Ok(cluster)
    }
}

/// A coordinator and its agents on loopback. Dropping it cancels everything and kills every
/// task process its real agents started; call [`Cluster::shutdown`] to also wait for a clean
/// stop.
pub struct Cluster {
    /// The coordinator's base URL, e.g. `http://127.0.0.1:40123`.
    pub url: String,
    /// A client for the REST API.
    pub http: reqwest::Client,
    /// The agents' token, with credentials.
    agent_token: Option<String>,
    addr: SocketAddr,
    config: coordinator::Config,
    reap_orphans: bool,
    tls: Option<ClusterTls>,
    /// The coordinator, unless stopped; it stops itself when dropped.
    coordinator: Option<coordinator::Served>,
    /// The coordinator list real agents started from now on are given (default: `url`).
    agent_coordinators: Option<String>,
    agents: Vec<AgentSlot>,
    fleet: Option<Running>,
    _dirs: tempfile::TempDir,
}

/// The value of one series in a `/metrics` page: `series` is the name, with its labels
/// (`name{label="…"}`) exactly as the page prints them.
pub fn metric_in(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

impl Cluster {
    /// The coordinator's `/metrics` page.
    pub async fn metrics_text(&self) -> anyhow::Result<String> {
        let response = self
            .http
            .get(format!("{}/metrics", self.url))
            .send()
            .await?;
        Ok(response.error_for_status()?.text().await?)
    }

    /// One series' value on the coordinator's `/metrics` page (see [`metric_in`]); `None` when
    /// it is absent or the page cannot be read.
    pub async fn metric(&self, series: &str) -> Option<f64> {
        metric_in(&self.metrics_text().await.ok()?, series)
    }

    /// A builder with [`fast_coordinator_config`], no agents, no registry, reaping off.
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder {
            config: fast_coordinator_config(),
            agents: Vec::new(),
            fleet: None,
            fleet_default_pacing: false,
            startup_timeout: WITHIN,
            tls: None,
            durable: false,
            reap_orphans: false,
            tokens: Tokens::default(),
        }
    }

    /// Shorthand: the default builder with one real agent per entry of `agents`, started.
    pub async fn start(agents: &[&str]) -> anyhow::Result<Self> {
        agents
            .iter()
            .fold(Self::builder(), |b, r| b.agent(r))
            .start()
            .await
    }

    fn serve(&mut self, listener: TcpListener) -> anyhow::Result<()> {
        let served = coordinator::Served::spawn(self.config.clone(), listener)?;
        self.coordinator = Some(served);
        Ok(())
    }

    async fn start_fleet(&mut self, fleet: &FleetSpec, default_pacing: bool) -> anyhow::Result<()> {
        let resources: Resources = fleet.resources.parse().context("fleet resources")?;
        let mut sim = agent::SimConfig::new(self.url.clone(), fleet.count, resources);
        if !default_pacing {
            sim.stagger = Duration::from_millis(500);
            sim.timing = agent::Timing::fast();
        }
        if let Some(tls) = &self.tls {
            sim.tls = Some(agent_tls(tls));
            sim.ca_file = Some(tls.ca_file.clone());
        }
        sim.token = self.agent_token.clone();
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let token = CancellationToken::new();
        let stopped = token.clone().cancelled_owned();
        let join =
            tokio::spawn(async move { Ok(agent::run_simulated(sim, listener, stopped).await?) });
        self.fleet = Some((token, join));
        Ok(())
    }

    /// Starts one more real agent with the given resources; returns its index.
    pub async fn add_agent(&mut self, resources: &str) -> anyhow::Result<usize> {
        self.add_agent_with_attributes(resources, Default::default())
            .await
    }

    /// Starts one more real agent with the given resources and attributes; returns its index.
    pub async fn add_agent_with_attributes(
        &mut self,
        resources: &str,
        attributes: std::collections::BTreeMap<String, String>,
    ) -> anyhow::Result<usize> {
        let resources: Resources = resources.parse().context("agent resources")?;
        let index = self.agents.len();
        let work_dir = self._dirs.path().join(format!("agent-{index}"));
        self.agents.push(AgentSlot {
            resources,
            attributes,
            reservations: Vec::new(),
            work_dir,
            running: None,
            killer: agent::TaskKiller::new(),
        });
        self.start_agent(index).await?;
        Ok(index)
    }

    /// Starts one more real agent with the given resources and `--reserve` flags
    /// (`["eng:cpus=2"]`); returns its index. Its registration may be refused (a
    /// role that does not exist): this does not wait for it to be active.
    pub async fn add_agent_reserving(
        &mut self,
        resources: &str,
        reserve: &[&str],
    ) -> anyhow::Result<usize> {
        let resources: Resources = resources.parse().context("agent resources")?;
        let reservations = reserve
            .iter()
            .map(|r| r.parse().map_err(|e| anyhow::anyhow!("--reserve {r}: {e}")))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let index = self.agents.len();
        let work_dir = self._dirs.path().join(format!("agent-{index}"));
        self.agents.push(AgentSlot {
            resources,
            attributes: Default::default(),
            reservations,
            work_dir,
            running: None,
            killer: agent::TaskKiller::new(),
        });
        self.start_agent(index).await?;
        Ok(index)
    }

    /// Starts (or restarts) agent `index` with its work dir, so it keeps its id and journal.
    pub async fn start_agent(&mut self, index: usize) -> anyhow::Result<()> {
        let slot = self.agents.get_mut(index).context("no such agent")?;
        if slot.running.is_some() {
            bail!("agent {index} is already running");
        }
        let coordinators = self.agent_coordinators.as_ref().unwrap_or(&self.url);
        let mut config = agent::AgentConfig::new(coordinators.clone(), slot.work_dir.clone());
        config.resources = Some(slot.resources.clone());
        config.attributes.extend(slot.attributes.clone());
        config.reservations = slot.reservations.clone();
        config.hostname = Some(format!("agent-{index}"));
        config.timing = agent::Timing::fast();
        config.reap_orphans = self.reap_orphans;
        config.token = self.agent_token.clone();
        if let Some(tls) = &self.tls {
            config.tls = Some(agent_tls(tls));
            config.ca_file = Some(tls.ca_file.clone());
        }
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let token = CancellationToken::new();
        let stopped = token.clone().cancelled_owned();
        let killer = slot.killer.clone();
        let join =
            tokio::spawn(
                async move { Ok(agent::run_with(config, listener, stopped, killer).await?) },
            );
        slot.running = Some((token, join));
        Ok(())
    }

    /// The coordinator URLs (comma-separated) that real agents started from now on are given,
    /// instead of the cluster's URL: e.g. a follower first, then the real coordinator.
    pub fn set_agent_coordinators(&mut self, coordinators: impl Into<String>) {
        self.agent_coordinators = Some(coordinators.into());
    }

    /// Starts a new coordinator (same settings and registry) on another address, which becomes
    /// the cluster's URL: a new leader after the old one stopped.
    pub async fn start_coordinator_at(&mut self, addr: SocketAddr) -> anyhow::Result<()> {
        if self.coordinator.is_some() {
            bail!("the coordinator is already running");
        }
        self.addr = addr;
        self.url = base_url(self.tls.as_ref(), addr);
        self.start_coordinator().await
    }

    /// Stops agent `index` gracefully (its tasks keep running, for its restart to re-adopt,
    /// until the cluster is shut down or dropped) and waits for it.
    pub async fn stop_agent(&mut self, index: usize) -> anyhow::Result<()> {
        let slot = self.agents.get_mut(index).context("no such agent")?;
        let running = slot.running.take().context("agent is not running")?;
        stop(running, "agent").await
    }

    /// Stops the coordinator (its in-memory books are lost, the registry's kept; agents keep
    /// running and retrying) and waits for it.
    pub async fn stop_coordinator(&mut self) -> anyhow::Result<()> {
        let served = self
            .coordinator
            .take()
            .context("the coordinator is not running")?;
        Ok(served.stop().await?)
    }

    /// Starts a new coordinator (same settings: empty books, or the registry's) on the same
    /// address as before.
    pub async fn start_coordinator(&mut self) -> anyhow::Result<()> {
        if self.coordinator.is_some() {
            bail!("the coordinator is already running");
        }
        let addr = self.addr;
        // The port was just released; binding may briefly fail on a busy machine.
        let listener = wait_until(
            Duration::from_secs(10),
            "rebinding the port",
            || async move { TcpListener::bind(addr).await.ok() },
        )
        .await?;
        self.serve(listener)
    }

    /// Fails, naming it, when a part of the cluster that should be running (the coordinator,
    /// a real agent, the simulated fleet) has stopped by itself.
    pub fn check_alive(&self) -> anyhow::Result<()> {
        if self
            .coordinator
            .as_ref()
            .is_some_and(coordinator::Served::is_finished)
        {
            bail!("the coordinator stopped by itself");
        }
        let agents = self.agents.iter().enumerate().filter_map(|(i, a)| {
            let (_, join) = a.running.as_ref()?;
            Some((format!("agent {i}"), join))
        });
        let fleet = self
            .fleet
            .as_ref()
            .map(|(_, join)| ("the simulated fleet".to_owned(), join));
        for (what, join) in fleet.into_iter().chain(agents) {
            if join.is_finished() {
                bail!("{what} stopped by itself");
            }
        }
        Ok(())
    }

    /// The error of the first part that stopped by itself (see [`Cluster::check_alive`]), with
    /// what it returned; it is no longer counted as running.
    async fn why_stopped(&mut self) -> Option<anyhow::Error> {
        if self
            .coordinator
            .as_ref()
            .is_some_and(coordinator::Served::is_finished)
        {
            let why = match self.coordinator.take()?.stop().await {
                Ok(()) => anyhow::anyhow!("the coordinator stopped by itself"),
                Err(e) => anyhow::Error::new(e).context("the coordinator stopped by itself"),
            };
            return Some(why);
        }
        let mut parts = vec![("the simulated fleet".to_owned(), &mut self.fleet)];
        for (i, slot) in self.agents.iter_mut().enumerate() {
            parts.push((format!("agent {i}"), &mut slot.running));
        }
        for (what, running) in parts {
            if running.as_ref().is_some_and(|(_, join)| join.is_finished()) {
                let (_, join) = running.take()?;
                let why = match join.await {
                    Ok(Ok(())) => anyhow::anyhow!("{what} stopped by itself"),
                    Ok(Err(e)) => e.context(format!("{what} stopped by itself")),
                    Err(e) => anyhow::anyhow!("{what} panicked: {e}"),
                };
                return Some(why);
            }
        }
        None
    }

    /// Stops the simulated fleet, the real agents and the coordinator, and waits for them.
    /// Every task the real agents started is killed (its whole process group), whether its
    /// agent still runs or was stopped: no task process outlives the cluster.
    pub async fn shutdown(mut self) -> anyhow::Result<()> {
        if let Some(fleet) = self.fleet.take() {
            stop(fleet, "simulated fleet").await?;
        }
        for index in 0..self.agents.len() {
            self.agents[index].killer.kill_all();
            if self.agents[index].running.is_some() {
                self.stop_agent(index).await?;
            }
        }
        if let Some(served) = self.coordinator.take() {
            served.stop().await?;
        }
        Ok(())
    }

    /// The work dir of agent `index` (its journal, agent id and sandboxes).
    pub fn agent_work_dir(&self, index: usize) -> Option<&Path> {
        self.agents.get(index).map(|a| a.work_dir.as_path())
    }

    /// The sandbox of a task run by agent `index`.
    pub fn sandbox(&self, index: usize, framework: FrameworkId, task: &str) -> Option<PathBuf> {
        self.agent_work_dir(index)
            .map(|d| d.join("sandboxes").join(framework.to_string()).join(task))
    }

    /// GETs `path` from the coordinator and decodes the JSON answer.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        let resp = self.http.get(format!("{}{path}", self.url)).send().await?;
        let status = resp.status();
        if !status.is_success() {
            bail!(
                "GET {path}: {status}: {}",
                resp.text().await.unwrap_or_default()
            );
        }
        Ok(resp.json().await?)
    }

    /// Sends `body` as JSON with `method` to `path` on the coordinator: the status code and
    /// the JSON answer (`Null` when the answer is not JSON), whatever the status.
    pub async fn send_json(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &str,
    ) -> anyhow::Result<(u16, serde_json::Value)> {
        let resp = self
            .http
            .request(method, format!("{}{path}", self.url))
            .header("content-type", "application/json")
            .body(body.to_owned())
            .send()
            .await?;
        let status = resp.status().as_u16();
        Ok((status, resp.json().await.unwrap_or(serde_json::Value::Null)))
    }

    /// The coordinator's agent list.
    pub async fn agents(&self) -> anyhow::Result<AgentList> {
        self.get("/api/v1/agents").await
    }

    /// The coordinator's record of real agent `index` (found by its hostname `agent-{index}`).
    pub async fn agent_info(&self, index: usize) -> anyhow::Result<AgentInfo> {
        let hostname = format!("agent-{index}");
        self.agents()
            .await?
            .agents
            .into_iter()
            .find(|a| a.hostname == hostname)
            .with_context(|| format!("the coordinator does not know {hostname}"))
    }

    /// The coordinator's task list.
    pub async fn tasks(&self) -> anyhow::Result<TaskList> {
        self.get("/api/v1/tasks").await
    }

    /// The coordinator's tasks of one framework.
    pub async fn tasks_of(&self, framework: FrameworkId) -> anyhow::Result<Vec<TaskInfo>> {
        let mut tasks = self.tasks().await?.tasks;
        tasks.retain(|t| t.framework_id == framework);
        Ok(tasks)
    }

    /// The coordinator's framework list.
    pub async fn frameworks(&self) -> anyhow::Result<FrameworkList> {
        self.get("/api/v1/frameworks").await
    }

    /// The id of the framework registered under `name`, if any.
    pub async fn framework_named(&self, name: &str) -> anyhow::Result<Option<FrameworkId>> {
        Ok(self
            .frameworks()
            .await?
            .frameworks
            .into_iter()
            .find(|f| f.name == name)
            .map(|f| f.framework_id))
    }

    /// The outstanding offers.
    pub async fn offers(&self) -> anyhow::Result<OfferList> {
        self.get("/api/v1/offers").await
    }

    /// The role tree.
    pub async fn roles(&self) -> anyhow::Result<RoleNode> {
        self.get("/api/v1/roles").await
    }

    /// [`wait_until`] with this cluster passed to the check, and a [`WITHIN`] deadline.
    pub async fn wait_for<'a, T, F, Fut>(&'a self, what: &str, mut check: F) -> anyhow::Result<T>
    where
        F: FnMut(&'a Cluster) -> Fut,
        Fut: Future<Output = Option<T>> + 'a,
    {
        Ok(wait_until(WITHIN, what, || check(self)).await?)
    }

    /// Waits until the coordinator lists `task` in `state`; returns its record.
    pub async fn wait_for_task_state(
        &self,
        task: &str,
        state: TaskState,
    ) -> anyhow::Result<TaskInfo> {
        self.wait_for(&format!("task {task} {state}"), |c| async move {
            let tasks = c.tasks().await.ok()?.tasks;
            tasks
                .into_iter()
                .find(|t| t.task_id.as_str() == task && t.state == state)
        })
        .await
    }

    /// Waits until no agent the coordinator knows runs a task any more (asking each agent),
    /// so no task process outlives the test.
    pub async fn wait_agents_idle(&self) -> anyhow::Result<()> {
        for agent in self.agents().await?.agents {
            let url = format!("{}/api/v1/tasks", agent.endpoint);
            let url = url.as_str();
            self.wait_for(&format!("{} idle", agent.hostname), |c| async move {
                let list: TaskStatusList = c.http.get(url).send().await.ok()?.json().await.ok()?;
                list.tasks
                    .iter()
                    .all(|t| t.state.is_terminal())
                    .then_some(())
            })
            .await?;
        }
        Ok(())
    }
}

/// The coordinator's base URL at `addr`: `https://localhost:PORT` (the name its certificate
/// has) when it serves HTTPS, else `http://ADDR`.
fn base_url(tls: Option<&ClusterTls>, addr: SocketAddr) -> String {
    match tls {
        Some(tls) if tls.coordinator_https => format!("https://localhost:{}", addr.port()),
        _ => format!("http://{addr}"),
    }
}

/// An agent's server certificate and key.
fn agent_tls(tls: &ClusterTls) -> agent::TlsFiles {
    agent::TlsFiles {
        cert: tls.cert_file.clone(),
        key: tls.key_file.clone(),
    }
}

/// Cancels a running piece and waits for its result.
async fn stop((token, join): Running, what: &str) -> anyhow::Result<()> {
    token.cancel();
    join.await
        .with_context(|| format!("{what} task panicked"))?
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let agents = self.agents.iter().filter_map(|a| a.running.as_ref());
        // The coordinator stops itself when dropped.
        for (token, _) in agents.chain(&self.fleet) {
            token.cancel();
        }
        // A stopped agent leaves its tasks running, and the runtime may end before a graceful
        // stop is over: the tasks are killed here, synchronously, so none outlives the test
        // (their sandboxes go with the cluster's temp dir).
        for slot in &self.agents {
            slot.killer.kill_all();
        }
    }
}
