//! `coordinator --dev`: a whole single-node cluster in one process — the coordinator plus a few
//! local agents that run real processes — for trying Parley out and for the tour in the README and
//! the book.
//!
//! The machine's resources (detected as a real agent would) are split evenly between the local
//! agents, so frameworks see several agents to choose between. Everything that must survive a
//! restart lives under the data directory (default `./data`): each agent's work dir, holding its
//! id, its journal of task states and the task sandboxes. Restarting `--dev` with the same data
//! directory re-registers the same agents and re-adopts tasks that are still running.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use protocol::Resources;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use coordinator::Config;

/// Settings of `--dev`.
#[derive(Debug, Clone)]
pub struct DevOptions {
    /// How many local agents to start (at least 1).
    pub agents: usize,
    /// Where the agents keep their work dirs (and the jobs service its store, in `jobs/`).
    pub data_dir: PathBuf,
    /// The port of the jobs service (`parley-jobs`, in this process), on the coordinator's
    /// address; `None` starts none.
    pub jobs_port: Option<u16>,
}

/// Splits `total` evenly into `parts` vectors (in thousandths; the remainder goes to the first).
pub fn split_resources(total: &Resources, parts: usize) -> Vec<Resources> {
    let parts = parts.max(1);
    let mut out = vec![Resources::new(); parts];
    for (name, millis) in total.iter() {
        let share = millis / parts as u64;
        let rest = millis % parts as u64;
        for (i, slot) in out.iter_mut().enumerate() {
            let extra = if i == 0 { rest } else { 0 };
            slot.set_millis(name.clone(), share + extra);
        }
    }
    out
}

/// The principal `--dev` adds for its local agents when a credentials file is given.
const DEV_AGENTS: &str = "_dev-agents";

/// Runs the coordinator on `listener` and `options.agents` local agents until `shutdown`.
pub async fn run(
    config: Config,
    listener: TcpListener,
    options: DevOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    anyhow::ensure!(options.agents >= 1, "--dev-agents must be at least 1");
    let addr: SocketAddr = listener.local_addr()?;
    let url = format!("http://{addr}");
    std::fs::create_dir_all(&options.data_dir)
        .with_context(|| format!("cannot create data dir {}", options.data_dir.display()))?;
    let machine = agent::resources::detect(&options.data_dir)
        .context("detecting this machine's resources")?;
    let shares = split_resources(&machine, options.agents);

    config.validate()?;
    // With credentials, the local agents get a principal of their own, with a fresh token.
    let mut config = config;
    let agent_token = match &config.credentials {
        Some(credentials) => {
            let token = parley::secrets::new_token();
            let mut credentials = (**credentials).clone();
            credentials
                .add(coordinator::auth::Principal::new(
                    DEV_AGENTS,
                    coordinator::auth::Kind::Agent,
                    coordinator::auth::SecretHash::of(&token),
                ))
                .map_err(anyhow::Error::msg)?;
            config.credentials = Some(std::sync::Arc::new(credentials));
            Some(token)
        }
        None => None,
    };
    let open = config.credentials.is_none();
    // Built before any agent starts, so a registry that cannot be opened fails at once.
    let registry = config.registry.clone();
    let token = CancellationToken::new();
    let built = coordinator::Coordinator::new(config, CancellationToken::new())?;
    let coordinator = tokio::spawn(coordinator::server::serve_coordinator(
        built,
        listener,
        token.clone().cancelled_owned(),
    ));

    let mut agents = Vec::new();
    for (i, resources) in shares.into_iter().enumerate() {
        let mut agent_config =
            agent::AgentConfig::new(url.clone(), options.data_dir.join(format!("agent-{i}")));
        agent_config.resources = Some(resources);
        agent_config.token = agent_token.clone();
        agent_config.hostname = Some(format!("{}-{i}", agent::machine_hostname()));
        let agent_listener = TcpListener::bind((addr.ip(), 0))
            .await
            .context("binding a local agent's listener")?;
        agents.push(tokio::spawn(agent::run(
            agent_config,
            agent_listener,
            token.clone().cancelled_owned(),
        )));
    }

    // The jobs service registers as a framework; with credentials it would need a framework
    // principal's token, so it runs only on an open dev cluster.
    let jobs = match options.jobs_port {
        Some(port) if open => {
            let jobs_listener = TcpListener::bind((addr.ip(), port))
                .await
                .with_context(|| {
                    format!("cannot listen on port {port} for the jobs service (--dev-jobs-port)")
                })?;
            let role = "default".parse().map_err(|e| anyhow::anyhow!("{e}"))?;
            let config =
                parley_jobs::ServiceConfig::new(url.clone(), role, options.data_dir.join("jobs"));
            Some(parley_jobs::start(config, jobs_listener).await?)
        }
        _ => None,
    };

    println!(
        "Parley dev cluster: coordinator and {} local agents ({machine} in all)",
        options.agents
    );
    println!("  dashboard:   {url}/");
    println!("  frameworks:  --coordinator {url}   e.g. cargo run -p examples --bin hello -- --coordinator {url}");
    println!("  watch offers: curl -N {url}/api/v1/offers/events");
    match registry {
        Some(path) => println!("  registry:    {}", path.display()),
        None => println!("  registry:    in memory (--in-memory)"),
    }
    println!("  agents' data: {}", options.data_dir.display());
    match &jobs {
        Some(j) => println!(
            "  jobs:        http://{}/api/v1/jobs   e.g. parleyctl run examples/jobs/array.toml --wait",
            j.addr
        ),
        None if options.jobs_port.is_some() => {
            println!("  jobs:        not started (it needs an open dev cluster, without credentials)")
        }
        None => {}
    }
    if open {
        println!(
            "  security:    OPEN, no credentials: anyone who can connect to {addr} can run \
             commands as this user (listening on loopback only; see docs/src/operating/security.md)"
        );
    } else {
        println!("  security:    credentials required (local agents use principal {DEV_AGENTS:?})");
    }

    shutdown.await;
    if let Some(j) = jobs {
        if let Err(e) = j.stop().await {
            tracing::error!("jobs service: {e:#}");
        }
    }
    token.cancel();
    for a in agents {
        if let Err(e) = a.await.context("local agent panicked")? {
            tracing::error!("local agent: {e:#}");
        }
    }
    Ok(coordinator.await.context("coordinator panicked")??)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_exact() {
        let total: Resources = "cpus=3,mem=1000.001".parse().unwrap();
        let parts = split_resources(&total, 2);
        assert_eq!(parts[0].millis("cpus") + parts[1].millis("cpus"), 3000);
        assert_eq!(parts[1].millis("cpus"), 1500);
        let mut sum = Resources::new();
        for p in &parts {
            sum.add_assign(p);
        }
        assert_eq!(sum, total);
    }
}
