//! What isolation costs per task launch: `N` tasks (`true`, `mem=64,cpus=0.5`) started through
//! the agent's executor one after another, plain and isolated (a cgroup and pid, mount, ipc and
//! uts namespaces through the launcher), timed from spawn to the end of `wait` (which, isolated,
//! includes killing and removing the cgroup). Prints the median and 90th percentile of each.
//!
//! ```text
//! cargo build -p parley-agent --bin parley-launch --example launch_cost
//! sudo target/debug/examples/launch_cost target/debug/parley-launch 50
//! ```

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agent::executor::{self, MemoryLimits};
use agent::isolation::{self, IsolationChoice};
use protocol::{AgentId, CommandSpec, TaskId, TaskSpec};

fn spec(i: usize) -> TaskSpec {
    TaskSpec {
        task_id: TaskId::new(format!("cost-{i}")).expect("a valid task id"),
        name: "cost".into(),
        agent_id: AgentId::new(),
        resources: "mem=64,cpus=0.5".parse().expect("valid resources"),
        command: CommandSpec::Shell("true".into()),
        env: Default::default(),
        duration_s: None,
        isolation: None,
        health_check: None,
        priority: None,
    }
}

async fn run(
    n: usize,
    work: &Path,
    label: &str,
    isolator: Option<&isolation::Isolator>,
) -> Vec<Duration> {
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        let sandbox = work.join("sandboxes").join(label).join(format!("t{i}"));
        std::fs::create_dir_all(&sandbox).expect("sandbox");
        let start = Instant::now();
        let running = executor::spawn(
            &spec(i),
            &sandbox,
            &MemoryLimits::Rlimit,
            None,
            isolator,
            &Default::default(),
        )
        .expect("spawn");
        let exit = running.wait().await;
        times.push(start.elapsed());
        let text = format!("{exit:?}");
        assert!(text.contains("Code(0)"), "{label} task {i}: {text}");
    }
    times.sort();
    times
}

fn report(label: &str, times: &[Duration]) -> Duration {
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
    println!(
        "{label:>9}: median {:6.2} ms, p90 {:6.2} ms ({} launches)",
        at(0.5).as_secs_f64() * 1e3,
        at(0.9).as_secs_f64() * 1e3,
        times.len()
    );
    at(0.5)
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let launcher = PathBuf::from(
        args.next()
            .unwrap_or_else(|| "target/debug/parley-launch".into()),
    );
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(50);
    let work = tempfile_dir();
    let Some(iso) = isolation::detect(IsolationChoice::Auto, None, Some(&launcher), 64, &work)
    else {
        eprintln!("isolation is not available here (root and cgroups needed)");
        std::process::exit(1);
    };
    let plain = run(n, &work, "plain", None).await;
    let isolated = run(n, &work, "isolated", Some(&iso)).await;
    let a = report("plain", &plain);
    let b = report("isolated", &isolated);
    println!(
        "    extra: {:6.2} ms per launch (median)",
        (b.as_secs_f64() - a.as_secs_f64()) * 1e3
    );
    let _ = std::fs::remove_dir_all(&work);
}

fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("parley-launch-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("work dir");
    dir
}
