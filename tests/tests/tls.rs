//! End to end over TLS: a coordinator and an agent serving HTTPS with a certificate from a
//! throwaway CA, the agent and the coordinator calling each other trusting that CA, and an SDK
//! framework (the `hello` example, `--ca-file`) running tasks through them. Clients that do not
//! trust the CA, and plain-HTTP clients, are refused.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use framework_sdk::{CoordinatorClient, SdkError};
use parley_tls::testing::TestPki;
use protocol::messages::{AgentList, RegisterFramework};
use protocol::TaskState;
use tests::{wait_until, WITHIN};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// A TLS cluster: the coordinator's `https://localhost:PORT` URL, the agent's listener address,
/// the CA, a client trusting it, and the token that stops both.
struct TlsCluster {
    url: String,
    agent_addr: std::net::SocketAddr,
    pki: TestPki,
    http: reqwest::Client,
    stop: CancellationToken,
    _dir: tempfile::TempDir,
}

async fn start() -> TlsCluster {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::generate(dir.path()).unwrap();
    let stop = CancellationToken::new();

    let config = coordinator::Config {
        allocation_interval: Duration::from_millis(100),
        agent_heartbeat_interval: Duration::from_millis(500),
        framework_heartbeat_interval: Duration::from_secs(1),
        update_resend_interval: Duration::from_millis(500),
        tls_cert: Some(pki.cert_file.clone()),
        tls_key: Some(pki.key_file.clone()),
        agent_ca_file: Some(pki.ca_file.clone()),
        ..coordinator::Config::default()
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "https://localhost:{}",
        listener.local_addr().unwrap().port()
    );
    tokio::spawn(coordinator::serve(
        config,
        listener,
        stop.clone().cancelled_owned(),
    ));

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
    let cluster = start().await;
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
    let cluster = start().await;
    cluster.active_agent_endpoint().await;

    // The SDK with the built-in roots only: the certificate is not trusted.
    let untrusting = CoordinatorClient::new(&cluster.url, Duration::from_secs(5)).unwrap();
    let request = RegisterFramework {
        name: "untrusting".into(),
        role: "tls".parse().unwrap(),
        framework_id: None,
        failover_timeout_s: None,
        demand: None,
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
