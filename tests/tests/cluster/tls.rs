//! End to end over TLS: a coordinator and an agent serving HTTPS with a certificate from a
//! throwaway CA, the agent and the coordinator calling each other trusting that CA, and an SDK
//! framework (the `hello` example, `--ca-file`) running tasks through them. Clients that do not
//! trust the CA, and plain-HTTP clients, are refused.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use framework_sdk::{CoordinatorClient, SdkError};
use parley_tls::testing::TestPki;
use protocol::messages::{AgentList, RegisterFramework};
use protocol::{AgentId, TaskState};
use tests::framework::{shell_task, TestFramework};
use tests::{wait_until, WITHIN};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// A TLS cluster: the coordinator's `https://localhost:PORT` URL, the agent's listener address,
/// the CA, a client trusting it, the coordinator (stopped when dropped) and the token that stops
/// the agents.
struct TlsCluster {
    url: String,
    agent_addr: std::net::SocketAddr,
    pki: TestPki,
    http: reqwest::Client,
    stop: CancellationToken,
    _coordinator: coordinator::Served,
    _dir: tempfile::TempDir,
}

/// How the coordinator of a [`TlsCluster`] is set up.
#[derive(Clone, Copy)]
struct Coordinator {
    /// Serve HTTPS (else plain HTTP).
    tls: bool,
    /// Trust the test CA when calling agents (else the built-in roots only).
    trusts_agents: bool,
}

const ALL_TLS: Coordinator = Coordinator {
    tls: true,
    trusts_agents: true,
};

async fn start(how: Coordinator) -> TlsCluster {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::generate(dir.path()).unwrap();
    let stop = CancellationToken::new();

    let config = coordinator::Config {
        allocation_interval: Duration::from_millis(100),
        agent_heartbeat_interval: Duration::from_millis(500),
        framework_heartbeat_interval: Duration::from_secs(1),
        update_resend_interval: Duration::from_millis(500),
        tls_cert: how.tls.then(|| pki.cert_file.clone()),
        tls_key: how.tls.then(|| pki.key_file.clone()),
        agent_ca_file: how.trusts_agents.then(|| pki.ca_file.clone()),
        ..coordinator::Config::default()
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let url = match how.tls {
        true => format!("https://localhost:{port}"),
        false => format!("http://127.0.0.1:{port}"),
    };
    let served = coordinator::Served::spawn(config, listener).unwrap();

    let mut agent = agent::AgentConfig::new(url.clone(), dir.path().join("agent"));
    agent.resources = Some("cpus=2,mem=512".parse().unwrap());
    agent.timing = agent::Timing::fast();
    agent.reap_orphans = false;
    agent.tls = Some(agent::TlsFiles {
        cert: pki.cert_file.clone(),
        key: pki.key_file.clone(),
    });
    agent.ca_file = Some(pki.ca_file.clone());
    let agent_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let agent_addr = agent_listener.local_addr().unwrap();
    tokio::spawn(agent::run(
        agent,
        agent_listener,
        stop.clone().cancelled_owned(),
    ));

    let http = parley_tls::client_builder(Some(&pki.ca_file))
        .unwrap()
        .build()
        .unwrap();
    TlsCluster {
        url,
        agent_addr,
        pki,
        http,
        stop,
        _coordinator: served,
        _dir: dir,
    }
}

impl TlsCluster {
    /// Waits until the agent registered over HTTPS; returns the endpoint it advertised.
    async fn active_agent_endpoint(&self) -> String {
        let url = format!("{}/api/v1/agents", self.url);
        wait_until(WITHIN, "the agent is active", || async {
            let list: AgentList = self.http.get(&url).send().await.ok()?.json().await.ok()?;
            let agent = list.agents.into_iter().next()?;
            (agent.state == "active").then_some(agent.endpoint)
        })
        .await
        .unwrap()
    }
}

impl Drop for TlsCluster {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sdk_framework_runs_tasks_over_tls_end_to_end() {
    let cluster = start(ALL_TLS).await;
    let endpoint = cluster.active_agent_endpoint().await;
    assert_eq!(endpoint, format!("https://{}", cluster.agent_addr));

    let mut common = examples::common::CommonArgs::new(cluster.url.clone(), "tls".parse().unwrap());
    common.ca_file = Some(cluster.pki.ca_file.clone());
    common.no_unregister = true;
    let args = examples::hello::Args {
        common,
        tasks: 2,
        command: "echo over-tls".into(),
        resources: "cpus=0.5,mem=64".parse().unwrap(),
        duration_s: None,
    };
    let run = examples::hello::run(args, std::future::pending());
    let outcome = tokio::time::timeout(WITHIN, run).await.unwrap().unwrap();
    assert!(outcome.all_finished(), "{:?}", outcome.states);
    assert_eq!(outcome.states.len(), 2, "{:?}", outcome.states);
    assert!(outcome.states.values().all(|s| *s == TaskState::Finished));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_without_the_ca_or_without_tls_are_refused() {
    let cluster = start(ALL_TLS).await;
    cluster.active_agent_endpoint().await;

    // The SDK with the built-in roots only: the certificate is not trusted.
    let untrusting = CoordinatorClient::new(&cluster.url, Duration::from_secs(5)).unwrap();
    let request = RegisterFramework {
        name: "untrusting".into(),
        role: "tls".parse().unwrap(),
        framework_id: None,
        failover_timeout_s: None,
        demand: None,
        capabilities: Vec::new(),
        partition_timeout_s: None,
        webui_url: None,
    };
    let err = untrusting.register(&request).await.unwrap_err();
    let chain = format!("{err:?}");
    assert!(
        matches!(err, SdkError::Transport(ref e) if e.is_connect()),
        "{chain}"
    );
    assert!(
        chain.contains("UnknownIssuer"),
        "a certificate error: {chain}"
    );

    // Plain HTTP to the coordinator's and the agent's TLS ports gets no HTTP answer.
    let plain = reqwest::Client::new();
    let port = cluster.url.rsplit(':').next().unwrap();
    let coordinator = plain
        .get(format!("http://127.0.0.1:{port}/health"))
        .send()
        .await;
    assert!(coordinator.is_err(), "{coordinator:?}");
    let agent = plain
        .get(format!("http://{}/", cluster.agent_addr))
        .send()
        .await;
    assert!(agent.is_err(), "{agent:?}");

    // The agent's API, too, refuses a client that does not trust the CA.
    let untrusting = parley_tls::client_builder(None).unwrap().build().unwrap();
    let err = untrusting
        .get(format!("https://{}/", cluster.agent_addr))
        .send()
        .await
        .unwrap_err();
    assert!(format!("{err:?}").contains("UnknownIssuer"), "{err:?}");

    // And the trusting client still gets through.
    let health = cluster
        .http
        .get(format!("{}/health", cluster.url))
        .send()
        .await
        .unwrap();
    assert!(health.status().is_success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_coordinator_does_not_launch_on_an_agent_whose_certificate_it_does_not_trust() {
    // A plain-HTTP coordinator without --agent-ca-file, and an HTTPS agent with a certificate
    // from the test CA: the agent registers (HTTP and HTTPS mix), but a launch cannot reach it.
    let cluster = start(Coordinator {
        tls: false,
        trusts_agents: false,
    })
    .await;
    let endpoint = cluster.active_agent_endpoint().await;
    assert!(endpoint.starts_with("https://"), "{endpoint}");

    let mut framework = TestFramework::register(&cluster.url, "untrusting", "tls")
        .await
        .unwrap();
    let task = shell_task("t1", AgentId::default(), "cpus=0.5,mem=64", "echo never");
    framework.launch(WITHIN, task).await.unwrap();
    let lost = framework
        .wait_state(WITHIN, "t1", TaskState::Lost)
        .await
        .unwrap();
    let message = lost.message.unwrap_or_default();
    assert!(message.contains("unreachable"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simulated_fleet_serves_and_calls_over_tls() {
    let cluster = start(ALL_TLS).await;
    cluster.active_agent_endpoint().await;
    let resources = "cpus=4,mem=1024".parse().unwrap();
    let mut sim = agent::SimConfig::new(cluster.url.clone(), 3, resources);
    sim.stagger = Duration::from_millis(50);
    sim.timing = agent::Timing::fast();
    sim.tls = Some(agent::TlsFiles {
        cert: cluster.pki.cert_file.clone(),
        key: cluster.pki.key_file.clone(),
    });
    sim.ca_file = Some(cluster.pki.ca_file.clone());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let fleet = format!("https://{}", listener.local_addr().unwrap());
    tokio::spawn(agent::run_simulated(
        sim,
        listener,
        cluster.stop.clone().cancelled_owned(),
    ));
    let url = format!("{}/api/v1/agents", cluster.url);
    wait_until(WITHIN, "3 simulated agents active over https", || async {
        let list: AgentList = cluster
            .http
            .get(&url)
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        let simulated = list
            .agents
            .iter()
            .filter(|a| a.state == "active" && a.endpoint.starts_with(&fleet))
            .count();
        (list.agents.len() == 4 && simulated == 3).then_some(())
    })
    .await
    .unwrap();
}
