//! [`Cluster`]: the coordinator and the simulated agents under test, started either as child
//! processes of release binaries (what the benchmark measures) or inside this process (what
//! the CI-sized test uses: `cargo test` builds no binaries of other crates). In process it is
//! the workspace's one in-process cluster, [`tests::Cluster`], with the coordinator's default
//! settings and the simulated agents' default timing.

use std::net::{Ipv4Addr, SocketAddr, TcpListener as StdListener};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use protocol::messages::AgentList;
use protocol::Resources;
use serde::de::DeserializeOwned;
use tokio::process::{Child, Command};

/// How to start the cluster.
#[derive(Debug, Clone)]
pub enum Launch {
    /// Child processes: `coordinator --in-memory` and `agent --simulate`.
    Processes {
        /// The coordinator binary.
        coordinator_bin: PathBuf,
        /// The agent binary.
        agent_bin: PathBuf,
        /// Simulated agents per agent process.
        agents_per_process: usize,
        /// Where the children's output goes (`coordinator.log`, `agents-{k}.log`).
        log_dir: PathBuf,
        /// Real agents instead of simulated ones: one `agent` process per agent, running its
        /// tasks as processes (as root: isolated, and allowed to run root tasks), each with
        /// its work directory `agent-{k}` under this one.
        real_agents: Option<PathBuf>,
    },
    /// Tasks of this process's runtime ([`tests::Cluster`]), with the coordinator's default
    /// settings.
    InProcess,
}

/// What to start.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    /// How.
    pub launch: Launch,
    /// How many simulated agents.
    pub agents: usize,
    /// The resources of each.
    pub agent_resources: Resources,
    /// How long the coordinator may take to answer `/health` and every agent to be active.
    pub startup_timeout: Duration,
}

// One value per benchmark run: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
enum Parts {
    Processes {
        coordinator: Child,
        agents: Vec<Child>,
        log_dir: PathBuf,
    },
    /// Cancelled when dropped without [`Cluster::shutdown`].
    InProcess(tests::Cluster),
}

/// A running coordinator and its simulated agents. Dropping it kills the children (started with
/// `kill_on_drop`) or cancels the in-process tasks; [`Cluster::shutdown`] stops them gracefully.
pub struct Cluster {
    /// The coordinator's base URL.
    pub url: String,
    /// From the first agent started to every agent active (registered), as polled every
    /// 100 ms.
    pub agents_registered_in: Duration,
    http: reqwest::Client,
    parts: Parts,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// Starts the coordinator, waits for `/health`, starts the agents and waits until all of
    /// them are active; fails with a message saying what did not come up.
    pub async fn start(spec: &ClusterSpec) -> anyhow::Result<Self> {
        if spec.agents == 0 {
            bail!("--agents must be at least 1");
        }
        let deadline = Instant::now() + spec.startup_timeout;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .context("building the HTTP client")?;
        let mut agents_started = Instant::now();
        let mut cluster = match &spec.launch {
            Launch::Processes {
                coordinator_bin,
                agent_bin,
                agents_per_process,
                log_dir,
                real_agents,
            } => {
                std::fs::create_dir_all(log_dir)
                    .with_context(|| format!("creating {}", log_dir.display()))?;
                let addr = free_port()?;
                let coordinator = spawn(
                    Command::new(coordinator_bin).args([
                        "--listen",
                        &addr.to_string(),
                        "--in-memory",
                    ]),
                    &log_dir.join("coordinator.log"),
                )
                .with_context(|| format!("starting {}", coordinator_bin.display()))?;
                let mut cluster = Cluster {
                    url: format!("http://{addr}"),
                    agents_registered_in: Duration::ZERO,
                    http,
                    parts: Parts::Processes {
                        coordinator,
                        agents: Vec::new(),
                        log_dir: log_dir.clone(),
                    },
                };
                cluster.wait_healthy(deadline).await?;
                agents_started = Instant::now();
                // A real agent is one process of one agent.
                let per = match real_agents {
                    Some(_) => 1,
                    None => (*agents_per_process).max(1),
                };
                let mut left = spec.agents;
                let mut k = 0;
                while left > 0 {
                    let n = left.min(per);
                    left -= n;
                    let mut command = Command::new(agent_bin);
                    command.args([
                        "--resources",
                        &spec.agent_resources.to_string(),
                        "--coordinator",
                        &cluster.url,
                        "--listen",
                        "127.0.0.1:0",
                        "--hostname",
                        &format!("bench{k}"),
                    ]);
                    match real_agents {
                        Some(dir) => {
                            let work = dir.join(format!("agent-{k}"));
                            std::fs::create_dir_all(&work)
                                .with_context(|| format!("creating {}", work.display()))?;
                            command
                                .arg("--work-dir")
                                .arg(work)
                                .arg("--allow-root-tasks");
                        }
                        None => {
                            command.args(["--simulate", &n.to_string()]);
                        }
                    }
                    let child = spawn(&mut command, &log_dir.join(format!("agents-{k}.log")))
                        .with_context(|| format!("starting {}", agent_bin.display()))?;
                    if let Parts::Processes { agents, .. } = &mut cluster.parts {
                        agents.push(child);
                    }
                    k += 1;
                }
                cluster
            }
            Launch::InProcess => {
                let inner = tests::Cluster::builder()
                    .config(coordinator::Config::default())
                    .simulated_agents(spec.agents, &spec.agent_resources.to_string())
                    .fleet_default_pacing()
                    .startup_timeout(spec.startup_timeout)
                    .start()
                    .await
                    .context("starting the in-process cluster")?;
                Cluster {
                    url: inner.url.clone(),
                    agents_registered_in: Duration::ZERO,
                    http,
                    parts: Parts::InProcess(inner),
                }
            }
        };
        cluster.wait_agents(spec.agents, deadline).await?;
        cluster.agents_registered_in = agents_started.elapsed();
        Ok(cluster)
    }

    /// The coordinator's process id, when it is a child process.
    pub fn coordinator_pid(&self) -> Option<u32> {
        match &self.parts {
            Parts::Processes { coordinator, .. } => coordinator.id(),
            Parts::InProcess(_) => None,
        }
    }

    /// The agent processes' ids (none in process).
    pub fn agent_pids(&self) -> Vec<u32> {
        match &self.parts {
            Parts::Processes { agents, .. } => agents.iter().filter_map(Child::id).collect(),
            Parts::InProcess(_) => Vec::new(),
        }
    }

    /// A shared HTTP client.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// GETs `path` from the coordinator and decodes the JSON answer.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        let resp = self
            .http
            .get(format!("{}{path}", self.url))
            .send()
            .await
            .with_context(|| format!("GET {path}"))?;
        let status = resp.status();
        if !status.is_success() {
            let body = resp.text().await.unwrap_or_default();
            bail!("GET {path}: {status}: {body}");
        }
        resp.json()
            .await
            .with_context(|| format!("GET {path}: decoding"))
    }

    /// GETs `path` as text.
    pub async fn get_text(&self, path: &str) -> anyhow::Result<String> {
        let resp = self
            .http
            .get(format!("{}{path}", self.url))
            .send()
            .await
            .with_context(|| format!("GET {path}"))?;
        let status = resp.status();
        if !status.is_success() {
            bail!("GET {path}: {status}");
        }
        resp.text()
            .await
            .with_context(|| format!("GET {path}: reading"))
    }

    /// Fails when a part of the cluster has stopped by itself, naming it and its log.
    pub fn check_alive(&mut self) -> anyhow::Result<()> {
        match &mut self.parts {
            Parts::Processes {
                coordinator,
                agents,
                log_dir,
            } => {
                if let Some(status) = coordinator.try_wait()? {
                    bail!(
                        "the coordinator exited ({status}); see {}",
                        log_dir.join("coordinator.log").display()
                    );
                }
                for (k, agent) in agents.iter_mut().enumerate() {
                    if let Some(status) = agent.try_wait()? {
                        bail!(
                            "agent process {k} exited ({status}); see {}",
                            log_dir.join(format!("agents-{k}.log")).display()
                        );
                    }
                }
            }
            Parts::InProcess(cluster) => cluster.check_alive()?,
        }
        Ok(())
    }

    async fn wait_healthy(&mut self, deadline: Instant) -> anyhow::Result<()> {
        loop {
            self.check_alive()?;
            let ok = self
                .http
                .get(format!("{}/health", self.url))
                .timeout(Duration::from_secs(2))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ok {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "the coordinator did not answer {}/health before the startup deadline",
                    self.url
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Polls until `want` agents are active. It reads the count from `/metrics` (a few KiB)
    /// rather than listing the agents, whose list at 50,000 agents is tens of MiB that the
    /// coordinator would serialize every poll while the agents register.
    async fn wait_agents(&mut self, want: usize, deadline: Instant) -> anyhow::Result<()> {
        let mut last_report = Instant::now();
        loop {
            self.check_alive()?;
            let active = self.active_agents().await;
            if active >= want {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!("only {active} of {want} agents are active at the startup deadline");
            }
            if last_report.elapsed() >= Duration::from_secs(5) {
                eprintln!("[parley-bench] waiting for agents: {active}/{want} active");
                last_report = Instant::now();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Agents the coordinator counts active: `parley_agents{state="active"}`, or for a
    /// coordinator without that gauge, the agent list; 0 when neither answers.
    async fn active_agents(&self) -> usize {
        if let Ok(text) = self.get_text("/metrics").await {
            if let Some(n) =
                crate::measure::labelled_sample(&text, "parley_agents", "state", "active")
            {
                return n as usize;
            }
        }
        match self.get::<AgentList>("/api/v1/agents").await {
            Ok(list) => list.agents.iter().filter(|a| a.state == "active").count(),
            Err(_) => 0,
        }
    }

    /// Stops the agents, then the coordinator (SIGTERM, then SIGKILL after 10 s), or cancels
    /// and awaits the in-process tasks.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        match self.parts {
            Parts::Processes {
                coordinator,
                agents,
                ..
            } => {
                for agent in agents {
                    stop_child(agent).await;
                }
                stop_child(coordinator).await;
            }
            Parts::InProcess(cluster) => cluster.shutdown().await?,
        }
        Ok(())
    }
}

/// A loopback address with a port that was free a moment ago.
pub fn free_port() -> anyhow::Result<SocketAddr> {
    let listener = StdListener::bind((Ipv4Addr::LOCALHOST, 0)).context("finding a free port")?;
    Ok(listener.local_addr()?)
}

/// Spawns `command` with its output to `log` (created), its `RUST_LOG` from
/// `PARLEY_BENCH_CHILD_LOG` (default `warn`), killed when its handle is dropped.
pub fn spawn(command: &mut Command, log: &std::path::Path) -> anyhow::Result<Child> {
    let out = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let err = out.try_clone()?;
    let child = command
        .env(
            "RUST_LOG",
            std::env::var("PARLEY_BENCH_CHILD_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .kill_on_drop(true)
        .spawn()?;
    Ok(child)
}

/// Stops a child: SIGTERM, then SIGKILL after 10 s.
pub async fn stop_child(mut child: Child) {
    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    if tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .is_err()
    {
        let _ = child.kill().await;
    }
}
