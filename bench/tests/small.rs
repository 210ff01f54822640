//! The CI-sized run: the whole harness in process (coordinator and agents through their
//! libraries, so `cargo test -p parley-bench` needs no other binary) at 50 agents × 5
//! frameworks × 500 tasks, more than fit at once, so freed resources are offered again. It
//! checks that the run completes and every task is accounted for; it asserts no timings.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use parley_bench::{Cluster, ClusterSpec, Launch, RunConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_run_completes_and_accounts_for_every_task() {
    let spec = ClusterSpec {
        launch: Launch::InProcess,
        agents: 50,
        // Four tasks per agent: 200 at once for 500 tasks.
        agent_resources: "cpus=4,mem=4096".parse().unwrap(),
        startup_timeout: Duration::from_secs(60),
    };
    let config = RunConfig {
        frameworks: 5,
        tasks: 500,
        task_duration_s: 0.2,
        task_command: None,
        task_resources: "cpus=1,mem=256".parse().unwrap(),
        state_tasks: 100,
        state_task_resources: "cpus=0.1,mem=32".parse().unwrap(),
        shared_task_ids: false,
        stall_timeout: Duration::from_secs(60),
        progress_every: Duration::from_secs(5),
    };
    let mut cluster = Cluster::start(&spec).await.unwrap();
    let report = parley_bench::run(&config, &mut cluster).await.unwrap();
    cluster.shutdown().await.unwrap();
    println!("{}", report.markdown());

    let a = &report.accounting;
    assert_eq!(a.check(), Ok(()), "{a:?}");
    assert_eq!((a.launched, a.running, a.finished), (500, 500, 500));
    assert_eq!(a.ended_otherwise_count, 0);
    assert_eq!(a.coordinator_tasks, 500, "the coordinator lists every task");
    assert_eq!(a.coordinator_tasks_not_terminal, 0);
    assert!(a.books_released);

    assert_eq!(report.agents, 50);
    assert_eq!(report.launch_latency.samples, 500, "one per task");
    assert!(report.allocation_run.samples > 0, "{report:?}");
    assert_eq!(
        report.allocation_histogram,
        "parley_allocation_run_fine_seconds"
    );
    assert!(report.launches_per_s_sustained.is_some());
    // In process there is no child to read /proc of, but this process itself.
    assert_eq!(report.coordinator_cpu_s, None);
    assert!(report.harness_cpu_s.is_some());

    let state = report.state.as_ref().unwrap();
    assert_eq!(state.running_tasks, 100);
    assert_eq!(state.calls_ms.len(), 5);
    // The snapshot holds the 100 running tasks and the 500 completed ones.
    assert_eq!(state.snapshot_tasks, 600, "{state:?}");
    assert!(
        state.released,
        "removing the frameworks released their tasks"
    );
}
