//! Every parleyctl command against a real coordinator and a real agent on loopback, with a
//! framework that runs real tasks: the tables show what they should, `--json` is the API's
//! JSON, `weight` and `teardown` change the cluster, `logs` shows what a task printed,
//! `offers --watch` (the real binary) prints offer lines.
#![allow(clippy::unwrap_used)]

use crate::support::{binary, ctl, ok, texts};
use protocol::messages::{
    AgentList, FrameworkExplanation, FrameworkList, OfferList, RoleNode, TaskList,
};
use protocol::TaskState;
use tests::framework::{shell_task, TestFramework};
use tests::{Cluster, WITHIN};

fn find<'a>(node: &'a RoleNode, path: &str) -> Option<&'a RoleNode> {
    if node.path == path {
        return Some(node);
    }
    node.children.iter().find_map(|c| find(c, path))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_against_a_live_cluster() {
    let cluster = Cluster::start(&["cpus=2,mem=1024"]).await.unwrap();
    let url = cluster.url.clone();
    let agent = cluster.agent_info(0).await.unwrap();
    let mut fw = TestFramework::register(&url, "ctl-fw", "eng/batch")
        .await
        .unwrap();
    let echo = shell_task(
        "echo-1",
        agent.agent_id,
        "cpus=0.5,mem=64",
        "echo hello-from-task; echo second line; echo oops >&2",
    );
    fw.launch(WITHIN, echo).await.unwrap();
    fw.wait_state(WITHIN, "echo-1", TaskState::Finished)
        .await
        .unwrap();
    let sleeper = shell_task("sleeper", agent.agent_id, "cpus=1,mem=128", "sleep 600");
    fw.launch(WITHIN, sleeper).await.unwrap();
    fw.wait_state(WITHIN, "sleeper", TaskState::Running)
        .await
        .unwrap();

    // agents: a table row for the agent; --json is the API's list.
    let out = ok(&url, &["agents"]).await;
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("AGENT") && lines[0].contains("HOSTNAME"),
        "{out}"
    );
    let row = lines
        .iter()
        .find(|l| l.contains(&agent.agent_id.to_string()))
        .unwrap();
    assert!(
        row.contains("active") && row.contains("cpus=2,mem=1024"),
        "{out}"
    );
    assert!(
        row.contains("cpus=1,mem=128"),
        "the sleeper's resources are used: {out}"
    );
    let listed: AgentList = serde_json::from_str(&ok(&url, &["--json", "agents"]).await).unwrap();
    let api = cluster.agents().await.unwrap();
    assert_eq!(
        listed
            .agents
            .iter()
            .map(|a| (a.agent_id, a.resources.clone()))
            .collect::<Vec<_>>(),
        api.agents
            .iter()
            .map(|a| (a.agent_id, a.resources.clone()))
            .collect::<Vec<_>>()
    );

    // frameworks, by name elsewhere.
    let out = ok(&url, &["frameworks"]).await;
    let row = out.lines().find(|l| l.contains("ctl-fw")).unwrap();
    assert!(
        row.contains(&fw.id.to_string()) && row.contains("eng/batch"),
        "{out}"
    );
    assert!(row.contains("connected"), "{out}");
    let listed: FrameworkList =
        serde_json::from_str(&ok(&url, &["--json", "frameworks"]).await).unwrap();
    assert_eq!(listed.frameworks.len(), 1);
    assert_eq!(listed.frameworks[0].framework_id, fw.id);
    assert_eq!(listed.frameworks[0].active_tasks, 1);

    // tasks, filtered by framework (its name) and by state.
    let out = ok(&url, &["tasks", "--framework", "ctl-fw"]).await;
    let echo_row = out.lines().find(|l| l.starts_with("echo-1 ")).unwrap();
    assert!(
        echo_row.contains("finished") && echo_row.contains(" 0 "),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("sleeper ") && l.contains("running")),
        "{out}"
    );
    let out = ok(&url, &["tasks", "--state", "running"]).await;
    assert!(out.contains("sleeper") && !out.contains("echo-1"), "{out}");
    let listed: TaskList =
        serde_json::from_str(&ok(&url, &["--json", "tasks", "--state", "finished"]).await).unwrap();
    assert_eq!(listed.tasks.len(), 1, "{listed:?}");
    assert_eq!(listed.tasks[0].task_id.as_str(), "echo-1");
    let all: TaskList = serde_json::from_str(&ok(&url, &["--json", "tasks"]).await).unwrap();
    assert_eq!(all.tasks.len(), cluster.tasks().await.unwrap().tasks.len());
    // The filters are the API's: `?state=` combines with `?framework_id=`; a bad state is 400.
    let (status, body) = cluster
        .send_json(
            reqwest::Method::GET,
            &format!("/api/v1/tasks?framework_id={}&state=running", fw.id),
            "",
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    let running: TaskList = serde_json::from_value(body).unwrap();
    let ids: Vec<&str> = running.tasks.iter().map(|t| t.task_id.as_str()).collect();
    assert_eq!(ids, ["sleeper"]);
    let (status, body) = cluster
        .send_json(reqwest::Method::GET, "/api/v1/tasks?state=sleeping", "")
        .await
        .unwrap();
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("state"), "{body}");
    let (err, _) = ctl(&url, &["tasks", "--framework", "no-such-framework"]).await;
    assert!(err
        .unwrap_err()
        .to_string()
        .contains("no framework has the id or name"));

    // logs: what the task printed, from its agent through the coordinator.
    assert_eq!(
        ok(&url, &["logs", "echo-1"]).await,
        "hello-from-task\nsecond line\n"
    );
    assert_eq!(ok(&url, &["logs", "echo-1", "--stderr"]).await, "oops\n");
    assert_eq!(
        ok(
            &url,
            &[
                "logs",
                "echo-1",
                "--framework",
                &fw.id.to_string(),
                "--follow"
            ]
        )
        .await,
        "hello-from-task\nsecond line\n",
        "--follow of an ended task prints everything and returns"
    );
    let (err, _) = ctl(&url, &["logs", "nope", "--framework", "ctl-fw"]).await;
    let err = err.unwrap_err();
    assert!(
        matches!(&err, parleyctl::CtlError::Api { status: 404, code, .. } if code == "task_not_found"),
        "{err}"
    );
    // The endpoint itself: a bad parameter names the field.
    let resp = cluster
        .http
        .get(format!(
            "{url}/api/v1/frameworks/{}/tasks/echo-1/output?file=journal",
            fw.id
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    assert!(resp.text().await.unwrap().contains("stdout or stderr"));

    // roles: the tree, indented; weight changes it.
    let out = ok(&url, &["roles"]).await;
    assert!(out.lines().any(|l| l.starts_with("  eng ")), "{out}");
    assert!(out.lines().any(|l| l.starts_with("    batch ")), "{out}");
    assert_eq!(
        ok(&url, &["weight", "eng", "3"]).await,
        "role eng: weight 3\n"
    );
    let out = ok(&url, &["roles"]).await;
    let eng = out.lines().find(|l| l.starts_with("  eng ")).unwrap();
    assert_eq!(eng.split_whitespace().nth(1), Some("3"), "{out}");
    let root: RoleNode = serde_json::from_str(&ok(&url, &["--json", "roles"]).await).unwrap();
    assert_eq!(find(&root, "eng").unwrap().weight, 3.0);
    assert_eq!(find(&root, "eng/batch").unwrap().frameworks, vec![fw.id]);
    assert_eq!(cluster.roles().await.unwrap(), root);

    // explain, by name.
    let out = ok(&url, &["explain", "ctl-fw"]).await;
    assert!(
        out.contains(&format!("framework:          {}", fw.id)),
        "{out}"
    );
    assert!(
        out.contains("role:               eng/batch") && out.contains("summary:"),
        "{out}"
    );
    let e: FrameworkExplanation =
        serde_json::from_str(&ok(&url, &["--json", "explain", "ctl-fw"]).await).unwrap();
    assert_eq!(e.framework_id, fw.id);

    // offers: the table and the API's list.
    let out = ok(&url, &["offers"]).await;
    assert!(out.starts_with("OFFER "), "{out}");
    let _: OfferList = serde_json::from_str(&ok(&url, &["--json", "offers"]).await).unwrap();

    // offers --watch (the binary): decline offers until it has printed two events, so at
    // least one is an offer made.
    let watch = tokio::spawn({
        let url = url.clone();
        async move {
            binary(
                &["--coordinator", &url, "offers", "--watch", "--count", "2"],
                &[],
            )
            .await
        }
    });
    let deadline = std::time::Instant::now() + WITHIN;
    while !watch.is_finished() {
        assert!(
            std::time::Instant::now() < deadline,
            "offers --watch printed no two events within {WITHIN:?}"
        );
        if let Ok(offers) = fw.next_offers(std::time::Duration::from_millis(200)).await {
            let ids: Vec<_> = offers.iter().map(|o| o.offer_id).collect();
            let _ = fw.decline(&ids, Some(0.0)).await;
        }
    }
    let output = watch.await.unwrap();
    let (stdout, stderr) = texts(&output);
    assert!(output.status.success(), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    let created = lines
        .iter()
        .find(|l| l.contains(" offer_created "))
        .unwrap_or_else(|| panic!("no offer_created line: {stdout}"));
    assert!(
        created.contains(&format!("framework={}", fw.id)),
        "{created}"
    );
    assert!(
        created.contains(&format!("agent={}", agent.agent_id)),
        "{created}"
    );
    assert!(created.contains("resources=cpus="), "{created}");

    // teardown, by name: the framework is gone.
    let out = ok(&url, &["teardown", "ctl-fw"]).await;
    assert!(
        out.contains(&format!("framework {} removed", fw.id)),
        "{out}"
    );
    let listed: FrameworkList =
        serde_json::from_str(&ok(&url, &["--json", "frameworks"]).await).unwrap();
    assert!(listed.frameworks.is_empty(), "{listed:?}");
    let (err, _) = ctl(&url, &["explain", &fw.id.to_string()]).await;
    assert!(
        matches!(err, Err(parleyctl::CtlError::Api { status: 404, .. })),
        "explain of a removed framework"
    );

    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_follow_a_running_task_and_say_when_its_agent_is_down() {
    let mut cluster = Cluster::start(&["cpus=1,mem=256"]).await.unwrap();
    let url = cluster.url.clone();
    let agent = cluster.agent_info(0).await.unwrap();
    let mut fw = TestFramework::register(&url, "logs-fw", "ops")
        .await
        .unwrap();
    fw.launch(
        WITHIN,
        shell_task("t", agent.agent_id, "cpus=0.1,mem=16", "echo hi"),
    )
    .await
    .unwrap();
    fw.wait_state(WITHIN, "t", TaskState::Finished)
        .await
        .unwrap();
    assert_eq!(ok(&url, &["logs", "t"]).await, "hi\n");
    // --follow on a running task: what it prints before and after the first read, until it
    // ends.
    fw.launch(
        WITHIN,
        shell_task(
            "slow",
            agent.agent_id,
            "cpus=0.1,mem=16",
            "echo one; sleep 1; echo two",
        ),
    )
    .await
    .unwrap();
    fw.wait_state(WITHIN, "slow", TaskState::Running)
        .await
        .unwrap();
    let followed = tokio::time::timeout(WITHIN, ok(&url, &["logs", "slow", "--follow"]))
        .await
        .expect("logs --follow returns once the task ended");
    assert_eq!(followed, "one\ntwo\n");
    let ended = cluster.tasks_of(fw.id).await.unwrap();
    assert!(ended
        .iter()
        .any(|t| t.task_id.as_str() == "slow" && t.state.is_terminal()));
    cluster.stop_agent(0).await.unwrap();
    let (err, _) = ctl(&url, &["logs", "t"]).await;
    let err = err.unwrap_err();
    match &err {
        parleyctl::CtlError::Api {
            status,
            code,
            message,
        } => {
            assert_eq!(
                (*status, code.as_str()),
                (502, "agent_unreachable"),
                "{err}"
            );
            assert!(message.contains(&agent.agent_id.to_string()), "{message}");
        }
        other => panic!("expected a 502, got {other}"),
    }
    assert_eq!(err.exit_code(), parleyctl::EXIT_API);
    cluster.shutdown().await.unwrap();
}

/// `offers --watch` outlives a coordinator restart: it says on stderr that the stream ended,
/// connects again, and goes on printing the new coordinator's events.
///
/// Nothing tells the test when the watch has connected, so each phase keeps making offer
/// events (declining, refused for 0 s, so the offer comes again) until the watch prints one of
/// that phase's framework; the line after the restart names the new framework, so it cannot be
/// one read before the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offers_watch_connects_again_after_the_coordinator_restarts() {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let mut cluster = Cluster::start(&["cpus=2,mem=1024"]).await.unwrap();
    let url = cluster.url.clone();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_parleyctl"))
        .args(["--coordinator", &url, "offers", "--watch"])
        .env_remove("PARLEY_COORDINATOR")
        .env_remove("PARLEY_TOKEN")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut errors = BufReader::new(child.stderr.take().unwrap()).lines();

    let mut fw = TestFramework::register(&url, "before", "eng")
        .await
        .unwrap();
    let first = watch_line_of(&mut lines, &mut fw, "before the restart").await;
    assert!(first.contains(" offer_"), "{first}");

    cluster.stop_coordinator().await.unwrap();
    cluster.start_coordinator().await.unwrap();
    let said = tokio::time::timeout(WITHIN, errors.next_line())
        .await
        .expect("offers --watch said nothing on stderr after the restart")
        .unwrap()
        .unwrap_or_default();
    assert!(said.contains("connecting again"), "{said}");

    // The new coordinator's books are empty: a framework registers again.
    let mut fw = tests::wait_until(WITHIN, "registering after the restart", || {
        let url = url.clone();
        async move { TestFramework::register(&url, "after", "eng").await.ok() }
    })
    .await
    .unwrap();
    let after = watch_line_of(&mut lines, &mut fw, "after the restart").await;
    assert!(after.contains(" offer_"), "{after}");
    let said = errors.next_line().await.unwrap().unwrap_or_default();
    assert!(said.contains("watching offers again"), "{said}");
    assert_eq!(
        child.try_wait().unwrap(),
        None,
        "the watch is still running"
    );
    child.kill().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// Reads the watch's lines until one names `fw`, meanwhile declining `fw`'s offers (refused
/// for 0 s, so each comes again) so that events keep coming until the watch is connected.
async fn watch_line_of(
    lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    fw: &mut TestFramework,
    when: &str,
) -> String {
    let tick = std::time::Duration::from_millis(200);
    let wanted = format!("framework={}", fw.id);
    let deadline = std::time::Instant::now() + WITHIN;
    loop {
        assert!(
            std::time::Instant::now() < deadline,
            "offers --watch printed no event of the framework {when} within {WITHIN:?}"
        );
        // `next_line` is cancel-safe: a line cut by the timeout is read whole next time.
        if let Ok(line) = tokio::time::timeout(tick, lines.next_line()).await {
            let line = line.unwrap().expect("offers --watch ended");
            if line.contains(&wanted) {
                return line;
            }
            continue;
        }
        if let Ok(offers) = fw.next_offers(tick).await {
            let ids: Vec<_> = offers.iter().map(|o| o.offer_id).collect();
            let _ = fw.decline(&ids, Some(0.0)).await;
        }
    }
}
