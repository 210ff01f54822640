//! End-to-end test support: a whole Parley cluster — a real coordinator and real agents — on
//! loopback, in the test process, plus helpers to read the coordinator's REST API and to wait
//! for a condition with a deadline (never a bare sleep).
//!
//! # Layout
//!
//! - [`Cluster`]: starts a coordinator on `127.0.0.1:0` and agents (each on its own
//!   `127.0.0.1:0` listener and temp work dir), stops and restarts agents and the coordinator
//!   (on the same port), shuts all down.
//! - [`fast_coordinator_config`]: coordinator settings with short intervals for tests.
//! - [`wait_until`]: polls an async condition until it yields a value or the deadline passes.
//! - [`framework`]: [`framework::TestFramework`], a tiny raw-HTTP framework client (register,
//!   event stream, accept / decline / kill / acknowledge / remove) with a log of its events.
//! - [`sse`]: the line parser the test framework reads its stream with.
//!
//! The tests themselves live in `tests/tests/`, one file per subject.

pub mod framework;
pub mod sse;

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use protocol::messages::{AgentInfo, AgentList, FrameworkList, OfferList, RoleNode, TaskList};
use protocol::Resources;
use serde::de::DeserializeOwned;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Coordinator settings for tests: allocation every 50 ms, heartbeats every 100 ms, offers that
/// expire after 10 s, updates re-sent every 200 ms.
pub fn fast_coordinator_config() -> coordinator::Config {
    coordinator::Config {
        allocation_interval: Duration::from_millis(50),
        allocation_batch_delay: Duration::from_millis(2),
        offer_timeout: Duration::from_secs(10),
        agent_heartbeat_interval: Duration::from_millis(100),
        max_missed_heartbeats: 5,
        framework_heartbeat_interval: Duration::from_millis(200),
        default_failover_timeout: Duration::from_secs(10),
        default_refuse_seconds: Duration::from_millis(200),
        update_resend_interval: Duration::from_millis(200),
        agent_request_timeout: Duration::from_secs(2),
        ..coordinator::Config::default()
    }
}

/// Polls `check` every 20 ms until it returns `Some`, or fails after `timeout` naming `what`.
pub async fn wait_until<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One agent of a [`Cluster`].
struct AgentSlot {
    resources: Resources,
    work_dir: PathBuf,
    running: Option<(CancellationToken, JoinHandle<anyhow::Result<()>>)>,
}

/// A coordinator and its agents on loopback. Dropping it cancels everything; call
/// [`Cluster::shutdown`] to also wait for a clean stop.
pub struct Cluster {
    /// The coordinator's base URL, e.g. `http://127.0.0.1:40123`.
    pub url: String,
    /// A client for the REST API.
    pub http: reqwest::Client,
    addr: SocketAddr,
    config: coordinator::Config,
    coordinator: Option<(CancellationToken, JoinHandle<anyhow::Result<()>>)>,
    agents: Vec<AgentSlot>,
    _dirs: tempfile::TempDir,
}

impl Cluster {
    /// Starts a coordinator with [`fast_coordinator_config`] and one agent per entry of
    /// `agents` (each `cpus=2,mem=1024` style), and waits until every agent is registered.
    pub async fn start(agents: &[&str]) -> anyhow::Result<Self> {
        Self::start_with(fast_coordinator_config(), agents).await
    }

    /// Like [`Cluster::start`], with a durable registry in the cluster's temp dir, so
    /// [`Cluster::stop_coordinator`] and [`Cluster::start_coordinator`] keep the stored books.
    pub async fn start_durable(agents: &[&str]) -> anyhow::Result<Self> {
        let dirs = tempfile::tempdir()?;
        let config = coordinator::Config {
            registry: Some(dirs.path().join("registry.redb")),
            ..fast_coordinator_config()
        };
        Self::start_in(config, agents, dirs).await
    }

    /// Like [`Cluster::start`], with the given coordinator settings.
    pub async fn start_with(config: coordinator::Config, agents: &[&str]) -> anyhow::Result<Self> {
        Self::start_in(config, agents, tempfile::tempdir()?).await
    }

    async fn start_in(
        config: coordinator::Config,
        agents: &[&str],
        dirs: tempfile::TempDir,
    ) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let token = CancellationToken::new();
        let serve = coordinator::serve(config.clone(), listener, token.clone().cancelled_owned());
        let join = tokio::spawn(async move { Ok(serve.await?) });
        let mut cluster = Cluster {
            url: format!("http://{addr}"),
            http: reqwest::Client::new(),
            addr,
            config,
            coordinator: Some((token, join)),
            agents: Vec::new(),
            _dirs: dirs,
        };
        for resources in agents {
            cluster.add_agent(resources).await?;
        }
        let want = agents.len();
        cluster
            .wait_for(&format!("{want} active agents"), |c| async move {
                let list: AgentList = c.get("/api/v1/agents").await.ok()?;
                (list.agents.iter().filter(|a| a.state == "active").count() == want).then_some(())
            })
            .await?;
        Ok(cluster)
    }

    /// Starts one more agent with the given resources; returns its index.
    pub async fn add_agent(&mut self, resources: &str) -> anyhow::Result<usize> {
        let resources: Resources = resources.parse().context("agent resources")?;
        let index = self.agents.len();
        let work_dir = self._dirs.path().join(format!("agent-{index}"));
        self.agents.push(AgentSlot {
            resources,
            work_dir,
            running: None,
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
        let mut config = agent::AgentConfig::new(self.url.clone(), slot.work_dir.clone());
        config.resources = Some(slot.resources.clone());
        config.hostname = Some(format!("agent-{index}"));
        config.timing = agent::Timing::fast();
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let token = CancellationToken::new();
        let join = tokio::spawn(agent::run(
            config,
            listener,
            token.clone().cancelled_owned(),
        ));
        slot.running = Some((token, join));
        Ok(())
    }

    /// Stops agent `index` gracefully (its tasks keep running) and waits for it.
    pub async fn stop_agent(&mut self, index: usize) -> anyhow::Result<()> {
        let slot = self.agents.get_mut(index).context("no such agent")?;
        let (token, join) = slot.running.take().context("agent is not running")?;
        token.cancel();
        join.await.context("agent task panicked")?
    }

    /// Stops the coordinator (its in-memory books are lost, the registry's kept; agents keep
    /// running and retrying) and waits for it.
    pub async fn stop_coordinator(&mut self) -> anyhow::Result<()> {
        let (token, join) = self
            .coordinator
            .take()
            .context("the coordinator is not running")?;
        token.cancel();
        join.await.context("coordinator task panicked")?
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
        let token = CancellationToken::new();
        let serve = coordinator::serve(
            self.config.clone(),
            listener,
            token.clone().cancelled_owned(),
        );
        let join = tokio::spawn(async move { Ok(serve.await?) });
        self.coordinator = Some((token, join));
        Ok(())
    }

    /// The work dir of agent `index` (its journal, agent id and sandboxes).
    pub fn agent_work_dir(&self, index: usize) -> Option<&Path> {
        self.agents.get(index).map(|a| a.work_dir.as_path())
    }

    /// The sandbox of a task run by agent `index`.
    pub fn sandbox(
        &self,
        index: usize,
        framework: protocol::FrameworkId,
        task: &str,
    ) -> Option<PathBuf> {
        self.agent_work_dir(index)
            .map(|d| d.join("sandboxes").join(framework.to_string()).join(task))
    }

    /// The coordinator's agent list.
    pub async fn agents(&self) -> anyhow::Result<AgentList> {
        self.get("/api/v1/agents").await
    }

    /// The coordinator's record of agent `index` (found by its hostname `agent-{index}`).
    pub async fn agent_info(&self, index: usize) -> anyhow::Result<AgentInfo> {
        let hostname = format!("agent-{index}");
        self.agents()
            .await?
            .agents
            .into_iter()
            .find(|a| a.hostname == hostname)
            .with_context(|| format!("the coordinator does not know {hostname}"))
    }

    /// Stops the coordinator and every agent, and waits for them.
    pub async fn shutdown(mut self) -> anyhow::Result<()> {
        for index in 0..self.agents.len() {
            if self.agents[index].running.is_some() {
                self.stop_agent(index).await?;
            }
        }
        if let Some((token, join)) = self.coordinator.take() {
            token.cancel();
            join.await.context("coordinator task panicked")??;
        }
        Ok(())
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

    /// The coordinator's task list.
    pub async fn tasks(&self) -> anyhow::Result<TaskList> {
        self.get("/api/v1/tasks").await
    }

    /// The coordinator's framework list.
    pub async fn frameworks(&self) -> anyhow::Result<FrameworkList> {
        self.get("/api/v1/frameworks").await
    }

    /// The outstanding offers.
    pub async fn offers(&self) -> anyhow::Result<OfferList> {
        self.get("/api/v1/offers").await
    }

    /// The role tree.
    pub async fn roles(&self) -> anyhow::Result<RoleNode> {
        self.get("/api/v1/roles").await
    }

    /// [`wait_until`] with this cluster passed to the check, and a 20 s deadline.
    pub async fn wait_for<'a, T, F, Fut>(&'a self, what: &str, mut check: F) -> anyhow::Result<T>
    where
        F: FnMut(&'a Cluster) -> Fut,
        Fut: Future<Output = Option<T>> + 'a,
    {
        wait_until(Duration::from_secs(20), what, || check(self)).await
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for slot in &self.agents {
            if let Some((token, _)) = &slot.running {
                token.cancel();
            }
        }
        if let Some((token, _)) = &self.coordinator {
            token.cancel();
        }
    }
}
