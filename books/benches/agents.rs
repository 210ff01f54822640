//! What one agent's registration, loss and the dashboard's sample cost in books that hold many
//! tasks: the coordinator does all three under its one lock, so their cost at scale is how long
//! every request and the allocation loop wait.
//!
//! Books of `AGENTS` agents (default 10,000) and `FRAMEWORKS` frameworks (1,000), each agent
//! running `TASKS_PER_AGENT` tasks (10: 100,000 in all). Measured: every agent registering
//! again with its tasks (what a new leader takes after a failover, or a coordinator restarted
//! on its registry), then `LOST` agents (1,000) lost and registered again, then the history
//! sample the dashboard takes once a second. Prints each total and per call.
//!
//! ```sh
//! cargo bench -p parley-books --bench agents
//! AGENTS=50000 TASKS_PER_AGENT=2 cargo bench -p parley-books --bench agents
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use books::{AgentRegistration, FrameworkRegistration, Now, Settings, State};
use protocol::{AgentId, FrameworkId, TaskState, TaskStatus, UpdateId};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|v| v.parse().expect("a whole number"))
        .unwrap_or(default)
}

fn at(ms: u64) -> Now {
    let start = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap();
    Now {
        ms,
        wall: start + chrono::Duration::milliseconds(i64::try_from(ms).unwrap()),
    }
}

fn running(n: usize, fw: FrameworkId, agent: AgentId) -> TaskStatus {
    TaskStatus {
        task_id: format!("task-{n}").parse().unwrap(),
        framework_id: fw,
        agent_id: agent,
        state: TaskState::Running,
        message: None,
        exit_code: None,
        update_id: UpdateId::new(),
        timestamp: protocol::now(),
        resources: Some("cpus=0.1,mem=32".parse().unwrap()),
        reason: None,
        usage: None,
        gpu_devices: None,
        healthy: None,
    }
}

fn registration(agent: AgentId, tasks: Vec<TaskStatus>) -> AgentRegistration {
    AgentRegistration {
        agent_id: Some(agent),
        hostname: "h".into(),
        endpoint: "http://127.0.0.1:1".into(),
        resources: "cpus=24,mem=65536".parse().unwrap(),
        attributes: Default::default(),
        gpu_devices: Vec::new(),
        tasks,
        api_token: None,
        reservations: Vec::new(),
    }
}

fn per_call(total: Duration, calls: usize) -> String {
    format!(
        "{:.1} ms, {:.1} us per call",
        total.as_secs_f64() * 1e3,
        total.as_secs_f64() * 1e6 / calls.max(1) as f64
    )
}

fn main() {
    let (agents, frameworks) = (env("AGENTS", 10_000), env("FRAMEWORKS", 1_000));
    let per_agent = env("TASKS_PER_AGENT", 10);
    let lost = env("LOST", 1_000).min(agents);
    println!(
        "== books: {agents} agents x {frameworks} frameworks, {} running tasks",
        agents * per_agent
    );

    let settings = Settings {
        max_frameworks: frameworks.max(1),
        ..Settings::default()
    };
    let mut s = State::new(&settings);
    let mut fx = Vec::new();
    let fws: Vec<FrameworkId> = (0..frameworks.max(1))
        .map(|i| {
            let reg = FrameworkRegistration {
                name: format!("fw{i}"),
                role: format!("r{}", i % 10).parse().unwrap(),
                failover_timeout_s: None,
                framework_id: None,
                demand: None,
                owner: None,
                gpu_resources: false,
                partition_timeout_s: None,
            };
            s.register_framework(reg, &at(0), &mut fx).unwrap().0
        })
        .collect();
    let ids: Vec<AgentId> = (0..agents).map(|_| AgentId::new()).collect();
    let tasks: Vec<Vec<TaskStatus>> = ids
        .iter()
        .enumerate()
        .map(|(a, id)| {
            (0..per_agent)
                .map(|k| {
                    let n = a * per_agent + k;
                    running(n, fws[n % fws.len()], *id)
                })
                .collect()
        })
        .collect();

    let started = Instant::now();
    for (id, t) in ids.iter().zip(&tasks) {
        fx.clear();
        s.register_agent(registration(*id, t.clone()), &at(1), &mut fx)
            .unwrap();
    }
    println!(
        "first registrations (each with its tasks): {}",
        per_call(started.elapsed(), agents)
    );

    let mut took = Duration::ZERO;
    for (id, t) in ids.iter().zip(&tasks) {
        let reg = registration(*id, t.clone());
        fx.clear();
        let started = Instant::now();
        s.register_agent(reg, &at(2), &mut fx).unwrap();
        took += started.elapsed();
    }
    println!(
        "every agent registering again with its tasks: {}",
        per_call(took, agents)
    );

    let started = Instant::now();
    for id in &ids[..lost] {
        fx.clear();
        s.lose_agent(*id, &at(3), &mut fx);
    }
    println!("{lost} agents lost: {}", per_call(started.elapsed(), lost));
    let mut took = Duration::ZERO;
    for (id, t) in ids.iter().zip(&tasks).take(lost) {
        let reg = registration(*id, t.clone());
        fx.clear();
        let started = Instant::now();
        s.register_agent(reg, &at(4), &mut fx).unwrap();
        took += started.elapsed();
    }
    println!("the same {lost} back: {}", per_call(took, lost));

    let started = Instant::now();
    let samples = 20;
    for _ in 0..samples {
        std::hint::black_box(s.history_sample());
    }
    println!(
        "the dashboard's history sample: {}",
        per_call(started.elapsed(), samples)
    );
}
