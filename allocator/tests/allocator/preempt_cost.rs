//! What the preemption check costs at scale: 1,000 agents, 10,000 running tasks,
//! 10 roles of 10 frameworks, one role starved. Prints the time of the per-check work
//! (`preemption_input` + `FairShares::compute`) and of one plan over all the tasks; run with
//! `cargo test --release -p parley-allocator --test allocator preempt_cost -- --nocapture` for the numbers in
//! the book's Performance page (`docs/src/performance.md`).
#![allow(clippy::unwrap_used)]

use std::time::Instant;

use allocator::preempt::{plan, FairShares, TaskInput};
use allocator::{Allocator, Policy};
use protocol::{AgentId, FrameworkId, Resources, RolePath};
use uuid::Uuid;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn the_check_and_a_plan_at_1000_agents_and_10000_tasks() {
    let mut a = Allocator::new(Policy::Hdrf);
    let agents: Vec<AgentId> = (0..1000u128)
        .map(|i| AgentId(Uuid::from_u128(1_000_000 + i)))
        .collect();
    let total: Resources = "cpus=24,mem=65536".parse().unwrap();
    for ag in &agents {
        a.add_agent(*ag, &total).unwrap();
    }
    let fws: Vec<(FrameworkId, usize)> = (0..100u128)
        .map(|i| (FrameworkId(Uuid::from_u128(i + 1)), (i / 10) as usize))
        .collect();
    for (fw, role) in &fws {
        a.add_framework(*fw, &RolePath::new(format!("r{role}")).unwrap())
            .unwrap();
    }
    // Roles r0..r8 run every task; r9 has demand and nothing.
    let busy: Vec<FrameworkId> = fws.iter().filter(|f| f.1 < 9).map(|f| f.0).collect();
    let task_res: Resources = "cpus=2.4,mem=6553".parse().unwrap();
    let mut tasks = Vec::new();
    for (n, ag) in agents.iter().enumerate() {
        for slot in 0..10 {
            let i = n * 10 + slot;
            let fw = busy[i % busy.len()];
            a.allocate(fw, *ag, &task_res).unwrap();
            tasks.push(TaskInput {
                framework: fw,
                task_id: format!("t{i}").parse().unwrap(),
                resources: task_res.clone(),
                priority: (i % 3) as i32,
                launch_order: i as u64,
                reserved_for: None,
            });
        }
    }
    let mut check = Vec::new();
    let mut shares = None;
    for _ in 0..21 {
        let t = Instant::now();
        let s = FairShares::compute(&a.preemption_input());
        check.push(t.elapsed().as_secs_f64() * 1e3);
        shares = Some(s);
    }
    let shares = shares.unwrap();
    assert_eq!(shares.starved(), vec!["r9".to_string()]);
    let t = Instant::now();
    let p = plan(&shares, "r9", &tasks).unwrap();
    let plan_ms = t.elapsed().as_secs_f64() * 1e3;
    // r9's fair share is a tenth: about 1,000 tasks of 1/10,000 each (less the tolerance).
    assert!(
        (980..=1000).contains(&p.victims.len()),
        "{}",
        p.victims.len()
    );
    assert!(p.victims.iter().all(|v| v.priority == 0 && v.role != "r9"));
    println!(
        "preemption check (input + fair shares), 1,000 agents / 100 frameworks / 10 roles: median {:.3} ms of 21; \
         plan over 10,000 tasks: {plan_ms:.1} ms ({} victims)",
        median(check),
        p.victims.len()
    );
}
