//! The real binary's errors and exit codes: an unreachable coordinator (3), bad arguments (2),
//! 401 without a token and 403 with too weak a one when credentials are on, 404 (1); several
//! coordinators, of which the leader is found.
#![allow(clippy::unwrap_used)]

use crate::support::{binary, texts};
use coordinator::auth::{Credentials, SecretHash};
use tests::fake_leader::FakeFollower;
use tests::Cluster;

const NODES: &str = "ctl-token-nodes-0123456789abcdef";
const READ: &str = "ctl-token-read-0123456789abcdef";
const ADMIN: &str = "ctl-token-admin-0123456789abcdef";
const TEAM: &str = "ctl-token-team-0123456789abcdef";

/// A loopback address nothing listens on.
async fn closed_port_url() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}

#[tokio::test]
async fn an_unreachable_coordinator_is_exit_code_3_with_a_hint() {
    let url = closed_port_url().await;
    let expected = format!(
        "parleyctl: cannot reach the coordinator at {url}: connection refused; is it running? set --coordinator or PARLEY_COORDINATOR\n"
    );
    let out = binary(&["--coordinator", &url, "agents"], &[]).await;
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert_eq!(stderr, expected);
    assert!(stdout.is_empty());
    // The same through the environment.
    let out = binary(&["frameworks"], &[("PARLEY_COORDINATOR", &url)]).await;
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(texts(&out).1, expected);
}

#[tokio::test]
async fn bad_arguments_are_exit_code_2() {
    let url = closed_port_url().await;
    for (args, needle) in [
        (vec!["weight", "eng", "heavy"], "invalid value 'heavy'"),
        (
            vec!["tasks", "--state", "sleeping"],
            "invalid value 'sleeping'",
        ),
        (vec!["explode"], "unrecognized subcommand"),
        (vec!["weight", "Bad Role!", "1"], "ROLE"),
        (vec!["weight", "eng", "-1"], "WEIGHT"),
        (vec!["logs", "../etc"], "TASK"),
    ] {
        let mut argv = vec!["--coordinator", url.as_str()];
        argv.extend(&args);
        let out = binary(&argv, &[]).await;
        let (_, stderr) = texts(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
    let out = binary(&["--coordinator", "localhost:5050", "agents"], &[]).await;
    assert_eq!(out.status.code(), Some(2), "{}", texts(&out).1);
}

fn credentials() -> Credentials {
    let h = |t: &str| SecretHash::of(t).to_hex();
    Credentials::from_toml(&format!(
        r#"
[[principals]]
name = "nodes"
kind = "agent"
secret_sha256 = "{}"

[[principals]]
name = "team"
kind = "framework"
secret_sha256 = "{}"
roles = ["*"]

[[principals]]
name = "viewer"
kind = "operator"
access = "read"
secret_sha256 = "{}"

[[principals]]
name = "root"
kind = "operator"
access = "admin"
secret_sha256 = "{}"
"#,
        h(NODES),
        h(TEAM),
        h(READ),
        h(ADMIN)
    ))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_credentials_a_token_is_needed_and_its_rights_apply() {
    let cluster = Cluster::builder()
        .agent("cpus=1,mem=256")
        .credentials(credentials(), NODES, READ)
        .start()
        .await
        .unwrap();
    let url = cluster.url.as_str();

    let out = binary(&["--coordinator", url, "agents"], &[]).await;
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("parleyctl: 401 unauthorized: "),
        "{stderr}"
    );
    assert!(stderr.contains("--token or PARLEY_TOKEN"), "{stderr}");
    assert!(stdout.is_empty());

    let agent = cluster.agent_info(0).await.unwrap();
    let out = binary(&["--coordinator", url, "agents"], &[("PARLEY_TOKEN", READ)]).await;
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stdout.contains(&agent.agent_id.to_string()), "{stdout}");

    // A read operator may not change weights; an admin may.
    let out = binary(
        &["--coordinator", url, "--token", READ, "weight", "eng", "2"],
        &[],
    )
    .await;
    let (_, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with("parleyctl: 403 forbidden: "), "{stderr}");
    let out = binary(
        &["--coordinator", url, "--token", ADMIN, "weight", "eng", "2"],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", texts(&out).1);
    assert_eq!(texts(&out).0, "role eng: weight 2\n");

    // An unknown framework: 404 with the API's message, exit 1.
    let id = protocol::FrameworkId::new();
    let out = binary(
        &[
            "--coordinator",
            url,
            "--token",
            ADMIN,
            "explain",
            &id.to_string(),
        ],
        &[],
    )
    .await;
    let (_, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("parleyctl: 404 framework_not_found: "),
        "{stderr}"
    );

    // A task's output is an operator read: frameworks and agents may not call it.
    let output = format!("{url}/api/v1/frameworks/{id}/tasks/t/output");
    let http = reqwest::Client::new();
    for (token, status) in [(TEAM, 403), (NODES, 403), (READ, 404), (ADMIN, 404)] {
        let resp = http.get(&output).bearer_auth(token).send().await.unwrap();
        assert_eq!(resp.status(), status, "{token}");
    }
    assert_eq!(http.get(&output).send().await.unwrap().status(), 401);
    cluster.shutdown().await.unwrap();
}

/// Several coordinators: requests reach the leader past a dead URL, a follower's `307` (the
/// token and a POST body go with it) and a coordinator without a leader; a bad entry in the
/// list is a usage error naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_is_found_among_several_coordinators() {
    let cluster = Cluster::builder()
        .agent("cpus=1,mem=256")
        .credentials(credentials(), NODES, READ)
        .start()
        .await
        .unwrap();
    let url = cluster.url.as_str();
    let agent = cluster.agent_info(0).await.unwrap();
    let dead = closed_port_url().await;
    let follower = FakeFollower::redirecting_to(url).await.unwrap();
    let leaderless = FakeFollower::without_leader().await.unwrap();

    let list = format!("{dead},{},{url}", follower.url);
    let out = binary(
        &["--coordinator", &list, "agents"],
        &[("PARLEY_TOKEN", READ)],
    )
    .await;
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stdout.starts_with("AGENT"), "{stdout}");
    assert!(stdout.contains(&agent.agent_id.to_string()), "{stdout}");
    assert!(stderr.contains("trying"), "a progress line: {stderr}");
    assert_eq!(
        follower.hits(),
        1,
        "the dead URL is skipped, the follower redirects"
    );

    let list = format!("{},{url}", leaderless.url);
    let out = binary(
        &["--coordinator", &list, "--json", "agents"],
        &[("PARLEY_TOKEN", READ)],
    )
    .await;
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let agents: protocol::messages::AgentList = serde_json::from_str(&stdout).unwrap();
    assert_eq!(agents.agents.len(), 1);
    assert!(leaderless.hits() >= 1);

    // A POST through the follower: its body and the admin token reach the leader.
    let out = binary(
        &[
            "--coordinator",
            &follower.url,
            "--token",
            ADMIN,
            "weight",
            "eng",
            "3",
        ],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", texts(&out).1);
    assert_eq!(texts(&out).0, "role eng: weight 3\n");
    assert_eq!(follower.hits(), 2);

    let out = binary(&["--coordinator", &format!("{url},nope"), "agents"], &[]).await;
    let (_, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("\"nope\""), "{stderr}");
    cluster.shutdown().await.unwrap();
}
