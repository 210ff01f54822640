//! `task kill`, `describe task|agent|framework` and `tasks --agent` against a real coordinator
//! and agent on loopback, with a framework running a real task; and `job run --command`
//! against a jobs service on a real cluster. Bad input is a usage error naming the argument or
//! flag, or the coordinator's refusal, and changes nothing.
#![allow(clippy::unwrap_used)]

use crate::support::{binary, ctl, jobs_service, ok, texts};
use parleyctl::{CtlError, EXIT_API, EXIT_USAGE};
use protocol::messages::{TaskInfo, TaskList};
use protocol::TaskState;
use tests::framework::{shell_task, TestFramework};
use tests::{Cluster, WITHIN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_filter_and_kill_a_running_task() {
    let cluster = Cluster::start(&["cpus=2,mem=1024"]).await.unwrap();
    let url = cluster.url.clone();
    let agent = cluster.agent_info(0).await.unwrap();
    let mut fw = TestFramework::register(&url, "ctl-kill", "eng")
        .await
        .unwrap();
    let sleeper = shell_task("sleeper", agent.agent_id, "cpus=1,mem=64", "sleep 600");
    fw.launch(WITHIN, sleeper).await.unwrap();
    fw.wait_state(WITHIN, "sleeper", TaskState::Running)
        .await
        .unwrap();

    // describe task: labelled lines naming the framework and the agent.
    let out = ok(&url, &["describe", "task", "sleeper"]).await;
    for want in [
        "Task:             sleeper",
        "State:            running",
        "Resources:        cpus=1,mem=64",
        &format!("Framework:        {} (ctl-kill, role eng)", fw.id),
        &format!("Agent:            {} ({}", agent.agent_id, agent.hostname),
    ] {
        assert!(out.contains(want), "{want:?} not in\n{out}");
    }
    let json: TaskInfo =
        serde_json::from_str(&ok(&url, &["--json", "describe", "task", "sleeper"]).await).unwrap();
    assert_eq!((json.framework_id, json.state), (fw.id, TaskState::Running));

    // describe agent, by hostname: resources total, used and free, and the task on it.
    let out = ok(&url, &["describe", "agent", &agent.hostname]).await;
    for want in [
        &format!("Agent:            {}", agent.agent_id),
        "  Total:          cpus=2,mem=1024",
        "  Used:           cpus=1,mem=64",
        "Tasks (1):",
    ] {
        assert!(out.contains(want), "{want:?} not in\n{out}");
    }
    let task_row = out
        .lines()
        .find(|l| l.trim_start().starts_with("sleeper "))
        .unwrap();
    assert!(task_row.contains("running"), "{out}");
    let free = out.lines().find(|l| l.starts_with("  Free:")).unwrap();
    assert!(
        free.contains("cpus=1"),
        "half the cpus are free or offered: {out}"
    );
    let view: serde_json::Value = serde_json::from_str(
        &ok(
            &url,
            &["--json", "describe", "agent", &agent.agent_id.to_string()],
        )
        .await,
    )
    .unwrap();
    assert_eq!(view["agent"]["agent_id"], agent.agent_id.to_string());
    assert_eq!(view["task_count"], 1);

    // describe framework, by name: its role, its task and explain's summary.
    let out = ok(&url, &["describe", "framework", "ctl-kill"]).await;
    for want in [
        &format!("Framework:        {}", fw.id),
        "Role:             eng",
        "Active tasks:     1",
        "Offers explained:",
        "  Summary:",
    ] {
        assert!(out.contains(want), "{want:?} not in\n{out}");
    }
    assert!(
        out.lines().any(|l| l.trim_start().starts_with("sleeper ")),
        "{out}"
    );
    let view: serde_json::Value =
        serde_json::from_str(&ok(&url, &["--json", "describe", "framework", "ctl-kill"]).await)
            .unwrap();
    assert_eq!(view["framework"]["name"], "ctl-kill");
    assert!(view["explain"]["summary"].is_string(), "{view}");

    // tasks --agent, by hostname and by id; an unknown agent is named, not an empty list.
    let out = ok(&url, &["tasks", "--agent", &agent.hostname]).await;
    assert!(out.lines().any(|l| l.starts_with("sleeper ")), "{out}");
    let listed: TaskList = serde_json::from_str(
        &ok(
            &url,
            &["--json", "tasks", "--agent", &agent.agent_id.to_string()],
        )
        .await,
    )
    .unwrap();
    assert_eq!(listed.tasks.len(), 1);
    let unknown = protocol::AgentId::new().to_string();
    let (result, _) = ctl(&url, &["tasks", "--agent", &unknown]).await;
    assert!(
        matches!(&result, Err(CtlError::NotFound(m)) if m.contains("--agent") && m.contains(&unknown)),
        "{result:?}"
    );

    // Bad and unknown names: nothing is killed.
    let (result, _) = ctl(&url, &["task", "kill", "no/such"]).await;
    assert!(
        matches!(&result, Err(CtlError::Usage(m)) if m.starts_with("TASK:")),
        "{result:?}"
    );
    let (result, _) = ctl(&url, &["task", "kill", "nope"]).await;
    assert!(
        matches!(&result, Err(CtlError::NotFound(m)) if m.contains("nope")),
        "{result:?}"
    );
    let (result, _) = ctl(&url, &["task", "kill", "sleeper", "--framework", "other"]).await;
    assert!(matches!(&result, Err(CtlError::NotFound(_))), "{result:?}");
    for (what, name) in [("agent", "no-such-host"), ("framework", "no-such-fw")] {
        let (result, _) = ctl(&url, &["describe", what, name]).await;
        assert!(
            matches!(&result, Err(CtlError::NotFound(m)) if m.contains(name)),
            "{result:?}"
        );
    }
    assert_eq!(
        cluster.tasks().await.unwrap().tasks[0].state,
        TaskState::Running
    );

    // The kill: sent to the agent; the framework hears the task killed.
    let out = ok(&url, &["task", "kill", "sleeper"]).await;
    assert!(
        out.starts_with(&format!(
            "task sleeper of framework {}: kill sent to agent",
            fw.id
        )) && out.contains("(it was running)"),
        "{out}"
    );
    fw.wait_state(WITHIN, "sleeper", TaskState::Killed)
        .await
        .unwrap();
    cluster
        .wait_for("the coordinator to list it killed", |c| async move {
            let tasks = c.tasks().await.ok()?.tasks;
            (tasks[0].state == TaskState::Killed).then_some(())
        })
        .await
        .unwrap();
    // Once ended: the coordinator's 409, named.
    let (result, _) = ctl(&url, &["task", "kill", "sleeper"]).await;
    assert!(
        matches!(&result, Err(CtlError::Api { status: 409, code, message })
            if code == "task_terminal" && message.contains("sleeper")),
        "{result:?}"
    );
    let out = ok(&url, &["describe", "task", "sleeper"]).await;
    assert!(out.contains("State:            killed (ended)"), "{out}");
    // The real binary: the refusal on stderr with exit code 1, a malformed id exit code 2.
    let refused = binary(&["--coordinator", &url, "task", "kill", "sleeper"], &[]).await;
    let (stdout, stderr) = texts(&refused);
    assert_eq!(refused.status.code(), Some(EXIT_API), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.starts_with("parleyctl: 409 task_terminal: task sleeper has already ended"),
        "{stderr}"
    );
    let malformed = binary(&["--coordinator", &url, "task", "kill", "../x"], &[]).await;
    let (_, stderr) = texts(&malformed);
    assert_eq!(malformed.status.code(), Some(EXIT_USAGE), "{stderr}");
    assert!(stderr.contains("TASK: invalid task_id"), "{stderr}");

    fw.remove().await.unwrap();
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn job_run_refuses_bad_flags_by_name_and_sends_nothing() {
    // Nothing listens there: a request sent would be exit code 3, not a usage error.
    let dead = tests::fake_leader::dead_url().await.unwrap();
    let cases: [(&[&str], &str); 6] = [
        (&["--command", "  "], "--command"),
        (&["--command", "true", "--count", "0"], "--count"),
        (&["--command", "true", "--cpus", "0"], "--cpus"),
        (&["--command", "true", "--cpus", "NaN"], "--cpus"),
        (&["--command", "true", "--mem", "-1"], "--mem"),
        (&["--command", "true", "--name", "Bad_Name"], "--name"),
    ];
    for (flags, named) in cases {
        let mut args = vec!["--jobs-url", &dead, "job", "run"];
        args.extend_from_slice(flags);
        let (result, out) = ctl("http://127.0.0.1:1", &args).await;
        assert!(
            matches!(&result, Err(CtlError::Usage(m)) if m.starts_with(named)),
            "{flags:?}: {result:?}"
        );
        assert!(out.is_empty(), "{out}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_run_submits_a_command_array_and_waits_for_it() {
    let cluster = Cluster::start(&["cpus=2,mem=1024"]).await.unwrap();
    let (jobs, jobs_url, _data) = jobs_service(&cluster).await;
    let url = cluster.url.as_str();

    let out = ok(
        url,
        &[
            "--jobs-url",
            &jobs_url,
            "job",
            "run",
            "--command",
            "echo task-$PARLEY_TASK_INDEX",
            "--count",
            "3",
            "--cpus",
            "0.25",
            "--mem",
            "16",
            "--name",
            "wrapped",
            "--wait",
        ],
    )
    .await;
    assert!(out.starts_with("job wrapped submitted"), "{out}");
    assert!(
        out.lines()
            .last()
            .unwrap()
            .contains("wrapped: succeeded (3/3 succeeded)"),
        "{out}"
    );
    // The spec the flags made, as the service keeps it.
    let raw = ok(
        url,
        &[
            "--jobs-url",
            &jobs_url,
            "--json",
            "job",
            "status",
            "wrapped",
        ],
    )
    .await;
    let status: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(status["spec"]["count"], 3, "{status}");
    assert_eq!(status["spec"]["resources"]["cpus"], 0.25, "{status}");
    // Without --name, a name is made; the same name twice is the service's 409.
    let out = ok(
        url,
        &["--jobs-url", &jobs_url, "job", "run", "--command", "true"],
    )
    .await;
    assert!(out.starts_with("job run-"), "{out}");
    let (result, _) = ctl(
        url,
        &[
            "--jobs-url",
            &jobs_url,
            "job",
            "run",
            "--command",
            "true",
            "--name",
            "wrapped",
        ],
    )
    .await;
    assert!(
        matches!(&result, Err(CtlError::Api { status: 409, .. })),
        "{result:?}"
    );

    jobs.stop().await.unwrap();
    cluster.wait_agents_idle().await.unwrap();
    cluster.shutdown().await.unwrap();
}
