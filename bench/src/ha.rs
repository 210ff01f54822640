//! [`HaCluster`]: the failover benchmark's cluster as child processes: one etcd member,
//! several `coordinator --etcd` processes on free loopback ports, and one `agent --simulate N`
//! process given every coordinator's URL. Dropping it kills every child.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use protocol::Resources;
use serde::de::DeserializeOwned;
use tokio::process::{Child, Command};

use crate::cluster::{free_port, spawn, stop_child};
use crate::etcd::Etcd;

/// What to start.
#[derive(Debug, Clone)]
pub struct HaSpec {
    /// The coordinator binary.
    pub coordinator_bin: PathBuf,
    /// The agent binary.
    pub agent_bin: PathBuf,
    /// The etcd binary.
    pub etcd_bin: PathBuf,
    /// Where the children's output goes (`etcd.log`, `coordinator-{k}.log`, `agents.log`).
    pub log_dir: PathBuf,
    /// How many coordinators.
    pub coordinators: usize,
    /// How many simulated agents (one process).
    pub agents: usize,
    /// The resources of each.
    pub agent_resources: Resources,
    /// `--leader-lease-s`.
    pub lease_s: u64,
    /// `--reregister-grace-s`.
    pub reregister_grace_s: u64,
    /// More flags for every coordinator (e.g. `--agent-heartbeat-interval 5`).
    pub coordinator_args: Vec<String>,
    /// How long etcd, the first leader and every agent may take to come up.
    pub startup_timeout: Duration,
}

/// The running cluster; see the module documentation.
pub struct HaCluster {
    /// Each coordinator's base URL (also its `--advertise-url`).
    pub urls: Vec<String>,
    coordinators: Vec<Option<Child>>,
    agents: Option<Child>,
    etcd: Option<Etcd>,
    http: reqwest::Client,
    log_dir: PathBuf,
}

impl std::fmt::Debug for HaCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HaCluster")
            .field("urls", &self.urls)
            .finish_non_exhaustive()
    }
}

impl HaCluster {
    /// Starts etcd, the coordinators, waits for a leader, starts the agents and waits until
    /// the leader counts every one active.
    pub async fn start(spec: &HaSpec) -> anyhow::Result<Self> {
        if spec.agents == 0 || spec.coordinators < 2 {
            bail!("need at least one agent and two coordinators");
        }
        let deadline = Instant::now() + spec.startup_timeout;
        std::fs::create_dir_all(&spec.log_dir)
            .with_context(|| format!("creating {}", spec.log_dir.display()))?;
        let etcd = Etcd::start(&spec.etcd_bin, &spec.log_dir, deadline).await?;
        let mut cluster = HaCluster {
            urls: Vec::new(),
            coordinators: Vec::new(),
            agents: None,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .context("building the HTTP client")?,
            log_dir: spec.log_dir.clone(),
            etcd: Some(etcd),
        };
        let etcd_url = cluster
            .etcd
            .as_ref()
            .map(|e| e.url.clone())
            .unwrap_or_default();
        for k in 0..spec.coordinators {
            let addr = free_port()?;
            let url = format!("http://{addr}");
            let child = spawn(
                Command::new(&spec.coordinator_bin)
                    .args(["--listen", &addr.to_string(), "--advertise-url", &url])
                    .args(["--etcd", &etcd_url, "--etcd-prefix", "/bench"])
                    .args(["--leader-lease-s", &spec.lease_s.to_string()])
                    .args(["--reregister-grace-s", &spec.reregister_grace_s.to_string()])
                    .arg("--data-dir")
                    .arg(spec.log_dir.join(format!("coordinator-{k}-data")))
                    .args(&spec.coordinator_args),
                &spec.log_dir.join(format!("coordinator-{k}.log")),
            )
            .with_context(|| format!("starting {}", spec.coordinator_bin.display()))?;
            cluster.urls.push(url);
            cluster.coordinators.push(Some(child));
        }
        let leader = cluster.wait_leader(deadline).await?;
        let agents = spawn(
            Command::new(&spec.agent_bin).args([
                "--simulate",
                &spec.agents.to_string(),
                "--resources",
                &spec.agent_resources.to_string(),
                "--coordinator",
                &cluster.urls.join(","),
                "--listen",
                &free_port()?.to_string(),
                "--hostname",
                "bench",
            ]),
            &spec.log_dir.join("agents.log"),
        )
        .with_context(|| format!("starting {}", spec.agent_bin.display()))?;
        cluster.agents = Some(agents);
        let mut last_line = Instant::now();
        loop {
            cluster.check_alive()?;
            let active = cluster.active_agents(leader).await.unwrap_or(0);
            if active >= spec.agents {
                return Ok(cluster);
            }
            if Instant::now() >= deadline {
                bail!(
                    "only {active} of {} agents are active at the startup deadline",
                    spec.agents
                );
            }
            if last_line.elapsed() >= Duration::from_secs(5) {
                eprintln!(
                    "[parley-bench] waiting for agents: {active}/{}",
                    spec.agents
                );
                last_line = Instant::now();
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Every coordinator's URL, comma-separated (what agents and frameworks are given).
    pub fn joined_urls(&self) -> String {
        self.urls.join(",")
    }

    /// A shared HTTP client.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// The coordinator that says it leads, among those still running.
    pub async fn leader(&self) -> Option<usize> {
        for (k, url) in self.urls.iter().enumerate() {
            if self.coordinators[k].is_none() {
                continue;
            }
            let health = self
                .http
                .get(format!("{url}/health"))
                .timeout(Duration::from_millis(500))
                .send()
                .await;
            let Ok(health) = health else { continue };
            let Ok(body) = health.json::<serde_json::Value>().await else {
                continue;
            };
            if body["role"] == "leader" {
                return Some(k);
            }
        }
        None
    }

    /// Polls until a coordinator leads; which.
    pub async fn wait_leader(&mut self, deadline: Instant) -> anyhow::Result<usize> {
        loop {
            self.check_alive()?;
            if let Some(k) = self.leader().await {
                return Ok(k);
            }
            if Instant::now() >= deadline {
                bail!("no coordinator leads before the deadline");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// GETs `path` from coordinator `k` and decodes the JSON answer (a follower redirects to
    /// the leader, and the client follows).
    pub async fn get<T: DeserializeOwned>(&self, k: usize, path: &str) -> anyhow::Result<T> {
        self.fetch(k, path)
            .await?
            .json()
            .await
            .with_context(|| format!("GET {}{path}: decoding", self.urls[k]))
    }

    /// GETs `path` from coordinator `k`; an answer other than a success is an error.
    async fn fetch(&self, k: usize, path: &str) -> anyhow::Result<reqwest::Response> {
        let url = format!("{}{path}", self.urls[k]);
        let resp = self
            .http
            .get(&url)
            .send()
            .await
            .with_context(|| format!("GET {url}"))?;
        let status = resp.status();
        if !status.is_success() {
            bail!("GET {url}: {status}");
        }
        Ok(resp)
    }

    /// How many agents coordinator `k` counts active and how many frameworks it counts
    /// connected, from `/metrics` (a few KiB) rather than the agent and framework lists, which
    /// at 10,000 agents are megabytes the coordinator would serialize at every poll while it
    /// takes the re-registrations in (a state absent from a gauge counts none).
    pub async fn counts(&self, k: usize) -> anyhow::Result<(usize, usize)> {
        let text = self
            .fetch(k, "/metrics")
            .await?
            .text()
            .await
            .with_context(|| format!("GET {}/metrics: reading", self.urls[k]))?;
        let count = |name, state| {
            crate::measure::labelled_sample(&text, name, "state", state).unwrap_or(0.0) as usize
        };
        Ok((
            count("parley_agents", "active"),
            count("parley_frameworks", "connected"),
        ))
    }

    /// How many agents coordinator `k` counts active.
    pub async fn active_agents(&self, k: usize) -> anyhow::Result<usize> {
        Ok(self.counts(k).await?.0)
    }

    /// Coordinator `k`'s process id, while it runs.
    pub fn pid(&self, k: usize) -> Option<u32> {
        self.coordinators.get(k)?.as_ref()?.id()
    }

    /// SIGKILLs coordinator `k` and reaps it.
    pub async fn kill(&mut self, k: usize) -> anyhow::Result<()> {
        let Some(mut child) = self.coordinators.get_mut(k).and_then(Option::take) else {
            bail!("coordinator {k} is not running");
        };
        child.kill().await.context("SIGKILL of the leader")?;
        Ok(())
    }

    /// Fails when a part of the cluster stopped by itself (a killed coordinator excepted),
    /// naming it and its log.
    pub fn check_alive(&mut self) -> anyhow::Result<()> {
        for (k, coordinator) in self.coordinators.iter_mut().enumerate() {
            if let Some(status) = coordinator
                .as_mut()
                .map(Child::try_wait)
                .transpose()?
                .flatten()
            {
                bail!(
                    "coordinator {k} exited ({status}); see {}",
                    self.log_dir.join(format!("coordinator-{k}.log")).display()
                );
            }
        }
        if let Some(status) = self
            .agents
            .as_mut()
            .map(Child::try_wait)
            .transpose()?
            .flatten()
        {
            bail!(
                "the agent process exited ({status}); see {}",
                self.log_dir.join("agents.log").display()
            );
        }
        Ok(())
    }

    /// Stops the agents, the coordinators and etcd (SIGTERM, then SIGKILL after 10 s).
    pub async fn shutdown(mut self) {
        if let Some(agents) = self.agents.take() {
            stop_child(agents).await;
        }
        for child in self.coordinators.drain(..).flatten() {
            stop_child(child).await;
        }
        if let Some(etcd) = self.etcd.take() {
            etcd.shutdown().await;
        }
    }
}
