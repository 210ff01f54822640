//! End to end: a real coordinator and real agents in this process on loopback, driven through
//! the coordinator's REST API and a raw-HTTP framework ([`tests::framework::TestFramework`]).
//! Registration and capacity, a failing task's exit code and output, kill of a whole process
//! group, and the books' invariants under load from several frameworks.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::killpg;
use nix::unistd::Pid;
use protocol::messages::{AgentList, ClusterState, TaskStatusList};
use protocol::{AgentId, FrameworkEvent, Resources, TaskState};
use tests::framework::{offered_per_agent, shell_task, TestFramework};
use tests::{wait_until, Cluster, WITHIN};
use tokio_util::sync::CancellationToken;

fn res(text: &str) -> Resources {
    text.parse().unwrap()
}

/// The root of the role tree has nothing allocated and every agent holds nothing.
async fn books_are_empty(c: &Cluster) -> Option<()> {
    let roots = c.roles().await.ok()?;
    let agents = c.agents().await.ok()?;
    (roots.allocated.is_empty()
        && agents
            .agents
            .iter()
            .all(|a| a.used.is_empty() && a.offered.is_empty()))
    .then_some(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_register_and_their_resources_make_the_capacity() {
    let specs = ["cpus=2,mem=1024", "cpus=4,mem=2048,disk=100"];
    let cluster = Cluster::start(&specs).await.unwrap();
    let list = cluster.agents().await.unwrap();
    assert_eq!(list.agents.len(), 2);
    let mut total = Resources::new();
    for (i, spec) in specs.iter().enumerate() {
        let a = cluster.agent_info(i).await.unwrap();
        assert_eq!(a.resources, res(spec), "agent {i}");
        assert_eq!(a.state, "active");
        assert!(a.used.is_empty() && a.offered.is_empty(), "{a:?}");
        // The endpoint it registered is where it really serves its API.
        let health = cluster
            .http
            .get(format!("{}/api/v1/health", a.endpoint))
            .send()
            .await
            .unwrap();
        assert_eq!(health.status(), 200, "agent {i} at {}", a.endpoint);
        total.add_assign(&a.resources);
    }
    let ids: HashSet<AgentId> = list.agents.iter().map(|a| a.agent_id).collect();
    assert_eq!(ids.len(), 2, "agent ids are distinct");

    // Nothing is allocated before a framework comes.
    let root = cluster.roles().await.unwrap();
    assert_eq!(root.path, "");
    assert!(root.allocated.is_empty(), "{root:?}");

    // A lone framework is offered the whole capacity: the root's allocation is the sum of the
    // agents, and its dominant share against the capacity is exactly 1.
    let mut fw = TestFramework::register(&cluster.url, "greedy", "eng")
        .await
        .unwrap();
    let mut seen = BTreeMap::new();
    while seen.len() < 2 {
        for o in fw.next_offers(WITHIN).await.unwrap() {
            assert_eq!(o.framework_id, fw.id);
            assert!(ids.contains(&o.agent_id));
            assert_eq!(o.resources, o.agent_total, "an idle agent is offered whole");
            seen.insert(o.agent_id, o.resources);
        }
    }
    let root = cluster
        .wait_for("the root to hold the whole capacity", |c| {
            let total = total.clone();
            async move {
                let root = c.roles().await.ok()?;
                (root.allocated == total).then_some(root)
            }
        })
        .await
        .unwrap();
    assert!((root.dominant_share - 1.0).abs() < 1e-9, "{root:?}");
    let eng = root.children.iter().find(|n| n.path == "eng").unwrap();
    assert_eq!(eng.frameworks, vec![fw.id]);
    assert_eq!(eng.allocated, total);
    fw.remove().await.unwrap();
    cluster
        .wait_for("offers to return", books_are_empty)
        .await
        .unwrap();
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_task_reports_its_exit_code_and_output_and_frees_its_resources() {
    let cluster = Cluster::start(&["cpus=2,mem=1024"]).await.unwrap();
    let mut fw = TestFramework::register(&cluster.url, "fails", "eng/batch")
        .await
        .unwrap();
    let task = fw
        .launch(
            WITHIN,
            shell_task(
                "t-fail",
                AgentId::default(),
                "cpus=1,mem=128",
                "echo hi; exit 3",
            ),
        )
        .await
        .unwrap();

    let failed = fw
        .wait_state(WITHIN, "t-fail", TaskState::Failed)
        .await
        .unwrap();
    assert_eq!(failed.exit_code, Some(3), "{failed:?}");
    assert_eq!(failed.agent_id, task.agent_id);
    assert_eq!(failed.framework_id, fw.id);
    assert!(
        failed.message.as_deref().unwrap_or("").contains("code 3"),
        "{failed:?}"
    );
    // Nothing after the terminal state, and no state other than the path to it.
    let states: Vec<TaskState> = fw.updates("t-fail").iter().map(|s| s.state).collect();
    assert!(
        states.iter().all(|s| matches!(
            s,
            TaskState::Starting | TaskState::Running | TaskState::Failed
        )),
        "{states:?}"
    );

    let info = cluster
        .tasks()
        .await
        .unwrap()
        .tasks
        .into_iter()
        .find(|t| t.task_id.as_str() == "t-fail")
        .unwrap();
    assert_eq!(info.state, TaskState::Failed);
    assert_eq!(info.exit_code, Some(3));
    assert_eq!(info.agent_id, task.agent_id);
    assert_eq!(info.resources, res("cpus=1,mem=128"));

    // The output, through the agent's own API: only for the holder of the agent's token.
    let agent = cluster.agent_info(0).await.unwrap();
    assert_eq!(agent.agent_id, task.agent_id);
    let url = format!("{}/api/v1/tasks/t-fail/stdout", agent.endpoint);
    let anonymous = cluster.http.get(&url).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    let work_dir = cluster.agent_work_dir(0).unwrap();
    let token = std::fs::read_to_string(work_dir.join(agent::auth::API_TOKEN_FILE)).unwrap();
    let stdout = cluster
        .http
        .get(&url)
        .bearer_auth(token.trim())
        .send()
        .await
        .unwrap();
    assert_eq!(stdout.status(), 200);
    assert_eq!(stdout.text().await.unwrap(), "hi\n");

    // The resources return to the pool: nothing is used any more.
    cluster
        .wait_for("the task's resources to be released", |c| {
            let id = fw.id;
            async move {
                let a = c.agent_info(0).await.ok()?;
                let f = c.frameworks().await.ok()?;
                let f = f.frameworks.into_iter().find(|f| f.framework_id == id)?;
                (a.used.is_empty() && f.used.is_empty() && f.active_tasks == 0).then_some(())
            }
        })
        .await
        .unwrap();
    fw.remove().await.unwrap();
    cluster
        .wait_for("the books to return to zero", books_are_empty)
        .await
        .unwrap();
    assert!(cluster.frameworks().await.unwrap().frameworks.is_empty());
    cluster.shutdown().await.unwrap();
}

/// The process group of a live process, from `/proc/PID/stat` (the third field after the
/// command name).
fn pgid_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(2)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_task_ends_killed_and_leaves_no_process() {
    let cluster = Cluster::start(&["cpus=2,mem=1024"]).await.unwrap();
    let mut fw = TestFramework::register(&cluster.url, "killer", "eng")
        .await
        .unwrap();
    // A shell with a child: both must go.
    fw.launch(
        WITHIN,
        shell_task(
            "t-sleep",
            AgentId::default(),
            "cpus=1,mem=128",
            "echo $$ > \"$PARLEY_SANDBOX/pid.tmp\"; mv \"$PARLEY_SANDBOX/pid.tmp\" \"$PARLEY_SANDBOX/pid\"; sleep 100",
        ),
    )
    .await
    .unwrap();
    fw.wait_state(WITHIN, "t-sleep", TaskState::Running)
        .await
        .unwrap();
    let pid_file = cluster.sandbox(0, fw.id, "t-sleep").unwrap().join("pid");
    let pid: i32 = wait_until(WITHIN, "the task to write its pid", || {
        let pid_file = pid_file.clone();
        async move { std::fs::read_to_string(&pid_file).ok()?.trim().parse().ok() }
    })
    .await
    .unwrap();
    let pgid = pgid_of(pid).expect("the task's shell is alive");
    assert!(pgid > 1);
    assert_ne!(
        pgid,
        pgid_of(std::process::id() as i32).unwrap(),
        "the task has a group of its own"
    );
    killpg(Pid::from_raw(pgid), None).expect("the task's group is alive");

    fw.kill("t-sleep").await.unwrap();
    let killed = fw
        .wait_state(WITHIN, "t-sleep", TaskState::Killed)
        .await
        .unwrap();
    assert_eq!(killed.framework_id, fw.id);
    cluster
        .wait_for_task_state("t-sleep", TaskState::Killed)
        .await
        .unwrap();
    // Every process of the group is gone (reaped, not only dead).
    wait_until(
        WITHIN,
        "the task's process group to vanish",
        || async move {
            (killpg(Pid::from_raw(pgid), None) == Err(nix::errno::Errno::ESRCH)).then_some(())
        },
    )
    .await
    .unwrap();
    cluster
        .wait_for("the agent's resources to be released", |c| async move {
            c.agent_info(0).await.ok()?.used.is_empty().then_some(())
        })
        .await
        .unwrap();
    fw.remove().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// Runs one framework of the load test: launches `count` tasks of `task_res` as offers come,
/// packing each offer, until all of them ended; every one must finish.
async fn run_batch(
    mut fw: TestFramework,
    prefix: &str,
    count: usize,
    task_res: Resources,
) -> anyhow::Result<TestFramework> {
    let mut launched = 0;
    let mut ended = HashSet::new();
    while ended.len() < count {
        match fw.recv(WITHIN).await? {
            FrameworkEvent::Offers { offers } => {
                for offer in offers {
                    let mut free = offer.resources.clone();
                    let mut tasks = Vec::new();
                    while launched < count {
                        let Some(rest) = free.checked_sub(&task_res) else {
                            break;
                        };
                        free = rest;
                        let mut t = shell_task(
                            &format!("{prefix}-{launched}"),
                            offer.agent_id,
                            "cpus=1",
                            "sleep 0.05",
                        );
                        t.resources = task_res.clone();
                        tasks.push(t);
                        launched += 1;
                    }
                    if tasks.is_empty() {
                        fw.decline(&[offer.offer_id], Some(0.5)).await?;
                    } else {
                        let n = tasks.len();
                        let ids = fw.accept(&[offer.offer_id], tasks).await?;
                        anyhow::ensure!(ids.len() == n, "accept launched {ids:?}");
                    }
                }
            }
            FrameworkEvent::Update { status } if status.state.is_terminal() => {
                anyhow::ensure!(
                    status.state == TaskState::Finished,
                    "task {} ended {}: {:?}",
                    status.task_id,
                    status.state,
                    status.message
                );
                ended.insert(status.task_id);
            }
            _ => {}
        }
    }
    Ok(fw)
}

/// Checks the books' invariants on one consistent snapshot (`/api/v1/state`) and on the
/// outstanding offers; returns a description of the first violation.
async fn check_invariants(c: &Cluster) -> Result<(), String> {
    let Ok(state) = c.get::<ClusterState>("/api/v1/state").await else {
        return Ok(()); // Unreachable between polls is not a violation of the books.
    };
    let mut used_by_agent: BTreeMap<AgentId, Resources> = BTreeMap::new();
    for t in state.tasks.iter().filter(|t| !t.state.is_terminal()) {
        used_by_agent
            .entry(t.agent_id)
            .or_default()
            .add_assign(&t.resources);
    }
    let mut held = Resources::new();
    for a in &state.agents {
        let both = a.used.add(&a.offered);
        if !both.fits_in(&a.resources) {
            return Err(format!(
                "agent {}: used {} + offered {} > total {}",
                a.hostname, a.used, a.offered, a.resources
            ));
        }
        let tasks = used_by_agent.remove(&a.agent_id).unwrap_or_default();
        if tasks != a.used {
            return Err(format!(
                "agent {}: used {} but its live tasks hold {tasks}",
                a.hostname, a.used
            ));
        }
        held.add_assign(&both);
    }
    if !used_by_agent.is_empty() {
        return Err(format!("live tasks on unknown agents: {used_by_agent:?}"));
    }
    let mut fw_held = Resources::new();
    for f in &state.frameworks {
        fw_held.add_assign(&f.used.add(&f.offered));
    }
    if fw_held != held || state.roles.allocated != held {
        return Err(format!(
            "agents hold {held}, frameworks {fw_held}, the role tree {}",
            state.roles.allocated
        ));
    }
    // No resource is in two outstanding offers: the offers on each agent sum to its `offered`.
    let ids: HashSet<_> = state.offers.iter().map(|o| o.offer_id).collect();
    if ids.len() != state.offers.len() {
        return Err("an offer id is listed twice".into());
    }
    let mut per_agent = offered_per_agent(&state.offers);
    for a in &state.agents {
        let sum = per_agent.remove(&a.agent_id).unwrap_or_default();
        if sum != a.offered {
            return Err(format!(
                "agent {}: outstanding offers sum to {sum}, but offered is {}",
                a.hostname, a.offered
            ));
        }
    }
    if let Some(agent) = per_agent.keys().next() {
        return Err(format!("an offer of unknown agent {agent}"));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn books_stay_consistent_under_load_from_several_frameworks() {
    let cluster = Arc::new(
        Cluster::start(&["cpus=2,mem=1024", "cpus=2,mem=1024", "cpus=3,mem=768"])
            .await
            .unwrap(),
    );
    const PER_FRAMEWORK: usize = 15;
    let roles = ["eng/batch", "eng/web", "ops"];

    // A watcher checks the invariants at every poll while the frameworks run.
    let stop = CancellationToken::new();
    let watcher = {
        let stop = stop.clone();
        let cluster = cluster.clone();
        tokio::spawn(async move {
            let mut polls = 0usize;
            loop {
                check_invariants(&cluster).await?;
                polls += 1;
                tokio::select! {
                    () = stop.cancelled() => return Ok::<usize, String>(polls),
                    () = tokio::time::sleep(Duration::from_millis(10)) => {}
                }
            }
        })
    };

    let mut runs = Vec::new();
    for (i, role) in roles.iter().enumerate() {
        let fw = TestFramework::register(&cluster.url, &format!("batch-{i}"), role)
            .await
            .unwrap();
        let prefix = format!("f{i}");
        runs.push(tokio::spawn(async move {
            run_batch(fw, &prefix, PER_FRAMEWORK, res("cpus=0.5,mem=64")).await
        }));
    }
    let mut frameworks = Vec::new();
    for run in runs {
        frameworks.push(run.await.unwrap().unwrap());
    }

    // Every task ended, finished, in the coordinator's books too.
    let tasks = cluster.tasks().await.unwrap().tasks;
    assert_eq!(tasks.len(), roles.len() * PER_FRAMEWORK);
    assert!(
        tasks.iter().all(|t| t.state == TaskState::Finished),
        "{tasks:?}"
    );
    let agents_used: HashSet<AgentId> = tasks.iter().map(|t| t.agent_id).collect();
    assert!(
        agents_used.len() >= 2,
        "the load spread over several agents"
    );

    for fw in frameworks {
        fw.remove().await.unwrap();
    }
    cluster
        .wait_for(
            "every agent's used and offered to be empty",
            books_are_empty,
        )
        .await
        .unwrap();
    stop.cancel();
    let polls = watcher.await.unwrap().unwrap_or_else(|v| panic!("{v}"));
    assert!(polls >= 5, "the invariants were checked only {polls} times");
    check_invariants(&cluster).await.unwrap();
    // The agents themselves agree that nothing runs.
    let agents: AgentList = cluster.get("/api/v1/agents").await.unwrap();
    for a in agents.agents {
        let list: TaskStatusList = cluster
            .http
            .get(format!("{}/api/v1/tasks", a.endpoint))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert!(list.tasks.iter().all(|t| t.state.is_terminal()), "{list:?}");
    }
    Arc::try_unwrap(cluster)
        .unwrap_or_else(|_| panic!("the watcher still holds the cluster"))
        .shutdown()
        .await
        .unwrap();
}
