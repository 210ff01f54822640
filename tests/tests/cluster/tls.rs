//! End to end over TLS: a coordinator and an agent serving HTTPS with a certificate from a
//! throwaway CA, the agent and the coordinator calling each other trusting that CA, and an SDK
//! framework (the `hello` example, `--ca-file`) running tasks through them. Clients that do not
//! trust the CA, and plain-HTTP clients, are refused.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use framework_sdk::{CoordinatorClient, SdkError};
use parley_tls::testing::TestPki;
use protocol::messages::RegisterFramework;
use protocol::{AgentId, TaskState};
use tests::framework::{shell_task, TestFramework};
use tests::{Cluster, ClusterTls, WITHIN};

/// A TLS cluster ([`Cluster`] with [`ClusterTls`]): one real agent, and `fleet` simulated ones.
struct TlsCluster {
    cluster: Cluster,
    /// The real agent's listener address.
    agent_addr: String,
    pki: TestPki,
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

async fn start(how: Coordinator, fleet: usize) -> TlsCluster {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::generate(dir.path()).unwrap();
    let tls = ClusterTls {
        coordinator_https: how.tls,
        coordinator_trusts_agents: how.trusts_agents,
        ..ClusterTls::of(&pki)
    };
    let mut builder = Cluster::builder().tls(tls).agent("cpus=2,mem=512");
    if fleet > 0 {
        builder = builder.simulated_agents(fleet, "cpus=4,mem=1024");
    }
    let cluster = builder.start().await.unwrap();
    let endpoint = cluster.agent_info(0).await.unwrap().endpoint;
    let agent_addr = endpoint
        .strip_prefix("https://")
        .unwrap_or_else(|| panic!("the agent serves HTTPS: {endpoint}"))
        .to_owned();
    TlsCluster {
        cluster,
        agent_addr,
        pki,
        _dir: dir,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sdk_framework_runs_tasks_over_tls_end_to_end() {
    let cluster = start(ALL_TLS, 0).await;
    assert!(cluster.cluster.url.starts_with("https://localhost:"));

    let mut common =
        examples::common::CommonArgs::new(cluster.cluster.url.clone(), "tls".parse().unwrap());
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
    let cluster = start(ALL_TLS, 0).await;

    // The SDK with the built-in roots only: the certificate is not trusted.
    let untrusting = CoordinatorClient::new(&cluster.cluster.url, Duration::from_secs(5)).unwrap();
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
    let port = cluster.cluster.url.rsplit(':').next().unwrap();
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
        .cluster
        .http
        .get(format!("{}/health", cluster.cluster.url))
        .send()
        .await
        .unwrap();
    assert!(health.status().is_success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_coordinator_does_not_launch_on_an_agent_whose_certificate_it_does_not_trust() {
    // A plain-HTTP coordinator without --agent-ca-file, and an HTTPS agent with a certificate
    // from the test CA: the agent registers (HTTP and HTTPS mix), but a launch cannot reach it.
    let cluster = start(
        Coordinator {
            tls: false,
            trusts_agents: false,
        },
        0,
    )
    .await;
    assert!(cluster.cluster.url.starts_with("http://"));

    let mut framework = TestFramework::register(&cluster.cluster.url, "untrusting", "tls")
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
    // The start waited for the real agent and the three simulated ones to be active, which
    // took their calls to the coordinator and its to them, all over HTTPS.
    let cluster = start(ALL_TLS, 3).await;
    let agents = cluster.cluster.agents().await.unwrap().agents;
    assert_eq!(agents.len(), 4);
    let simulated: Vec<_> = agents
        .iter()
        .filter(|a| a.endpoint.contains("/sim/"))
        .collect();
    assert_eq!(simulated.len(), 3, "{agents:?}");
    for agent in &simulated {
        assert!(agent.endpoint.starts_with("https://"), "{}", agent.endpoint);
        assert_eq!(agent.state, "active");
    }
}
