//! Property tests: after any sequence of framework and agent calls, the books' own totals
//! (each agent's and framework's `offered` and `used`, kept incrementally by the ledger) equal
//! what the allocator holds, and the ledger never found a mismatch.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use proptest::prelude::*;
use protocol::{FrameworkId, Resources, TaskId, TaskState, TaskStatus};

use super::tests::{at, registration, reregister, task};
use super::*;

/// One call on the books, with indexes into what exists at that point.
#[derive(Debug, Clone)]
enum Op {
    Allocate,
    /// Framework `fw` accepts its `offer`th outstanding offer with a task of `cpus` and `mem`.
    Accept {
        fw: usize,
        offer: usize,
        cpus: u8,
        mem: u8,
    },
    Decline {
        fw: usize,
        offer: usize,
    },
    /// The `task`th launched task reaches `state`, as its agent reports.
    Report {
        task: usize,
        running: bool,
        /// What its health check says, if it has one.
        healthy: Option<bool>,
    },
    Kill {
        task: usize,
    },
    ExpireOffers,
    RemoveFramework {
        fw: usize,
    },
    /// Agent `agent` re-registers, reporting none of its tasks.
    Reregister {
        agent: usize,
    },
    /// Agent `agent` is lost (it missed its heartbeats); a later `Reregister` brings it back.
    Lose {
        agent: usize,
    },
    /// Framework `fw` says how many more tasks it wants (`None`: no bound).
    Want {
        fw: usize,
        pending: Option<u32>,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Allocate),
        4 => (0..2usize, 0..3usize, 1..4u8, 1..60u8)
            .prop_map(|(fw, offer, cpus, mem)| Op::Accept { fw, offer, cpus, mem }),
        1 => (0..2usize, 0..3usize).prop_map(|(fw, offer)| Op::Decline { fw, offer }),
        3 => (0..8usize, any::<bool>(), proptest::option::of(any::<bool>()))
            .prop_map(|(task, running, healthy)| Op::Report { task, running, healthy }),
        1 => (0..8usize).prop_map(|task| Op::Kill { task }),
        1 => Just(Op::ExpireOffers),
        1 => (0..2usize).prop_map(|fw| Op::RemoveFramework { fw }),
        1 => (0..2usize).prop_map(|agent| Op::Reregister { agent }),
        1 => (0..2usize).prop_map(|agent| Op::Lose { agent }),
        2 => (0..2usize, proptest::option::of(0..5u32)).prop_map(|(fw, pending)| Op::Want { fw, pending }),
    ]
}

fn sum(a: &Resources, b: &Resources) -> Resources {
    let mut out = a.clone();
    out.add_assign(b);
    out
}

/// The books' totals against the allocator's, agent by agent and framework by framework.
fn assert_books_match_the_allocator(s: &State, frameworks: &[FrameworkId]) {
    assert_eq!(s.ledger_mismatches(), 0, "the ledger found a mismatch");
    let alloc = s.ledger.allocator();
    for a in s.agents() {
        if a.state != "active" {
            continue;
        }
        let total = alloc.agent_total(a.agent_id).unwrap();
        let free = alloc.agent_free(a.agent_id).unwrap();
        assert_eq!(
            sum(&a.offered, &a.used),
            total.saturating_sub(&free),
            "agent {}: offered + used against the allocator's allocated",
            a.agent_id
        );
    }
    for fw in frameworks {
        let Some(held) = alloc.allocation(*fw) else {
            continue;
        };
        let books = s.ledger.framework(*fw);
        assert_eq!(
            sum(&books.offered, &books.used),
            held,
            "framework {fw}: offered + used against the allocator's allocation"
        );
    }
    // What the frameworks use is what their tasks that hold resources hold.
    let tasks: Resources = s
        .tasks
        .records()
        .filter(|t| t.holds())
        .fold(Resources::default(), |acc, t| sum(&acc, &t.resources));
    let used: Resources = s
        .agents()
        .iter()
        .fold(Resources::default(), |acc, a| sum(&acc, &a.used));
    assert_eq!(used, tasks, "the agents' used against their tasks'");
    // The launch window's count of tasks launching is the tasks in `staging`.
    let staging = s
        .tasks
        .records()
        .filter(|t| t.state() == protocol::TaskState::Staging)
        .count();
    assert_eq!(
        s.launching(),
        staging,
        "tasks launching against those staging"
    );
    s.tasks.assert_indexes_agree();
    s.offers.assert_index_agrees();
    // Offers sized to demand: each framework's count of the tasks its offers hold, and whether
    // it is held back, in the books and in the allocator.
    for fw in frameworks {
        let Some(record) = s.frameworks.get(*fw) else {
            continue;
        };
        let holds: u32 = s
            .offers
            .iter()
            .filter(|r| r.offer().framework_id == *fw)
            .map(super::offer_book::OfferRecord::holds)
            .sum();
        assert_eq!(
            record.offered_tasks, holds,
            "framework {fw}: tasks its offers hold"
        );
        let sated = record.pending_tasks.is_some_and(|n| holds >= n);
        assert_eq!(record.is_sated(), sated, "framework {fw}: held back");
        assert_eq!(
            alloc.is_sated(*fw),
            Some(sated),
            "framework {fw}: the allocator"
        );
    }
}

fn status(
    fw: FrameworkId,
    agent: AgentId,
    task: &TaskId,
    state: TaskState,
    res: &Resources,
) -> TaskStatus {
    TaskStatus {
        task_id: task.clone(),
        framework_id: fw,
        agent_id: agent,
        state,
        message: None,
        exit_code: None,
        update_id: protocol::UpdateId::new(),
        timestamp: at(0).wall,
        resources: Some(res.clone()),
        reason: None,
        usage: None,
        gpu_devices: None,
        healthy: None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn the_books_totals_are_the_allocators(ops in proptest::collection::vec(op(), 1..40)) {
        let mut s = super::tests::new_books(&Settings::default());
        let mut fx = Vec::new();
        let mut frameworks = Vec::new();
        for (name, role) in [("f", "eng"), ("g", "ops")] {
            let (fw, _) = s.register_framework(registration(name, role, None, None), &at(0), &mut fx).unwrap();
            s.subscribe(fw, &at(0), &mut fx).unwrap();
            frameworks.push(fw);
        }
        // One with a demand hint (an offer holds as many tasks as fit), one without (one each).
        s.revive(frameworks[0], Some("cpus=1,mem=10".parse().unwrap()), &at(0), &mut fx).unwrap();
        let mut agents = Vec::new();
        for _ in 0..2 {
            let (agent, _) = s
                .register_agent(reregister(AgentId::new(), "cpus=4,mem=100", vec![]), &at(0), &mut fx)
                .unwrap();
            agents.push(agent);
        }
        // (framework, agent, task id, resources) of every task launched.
        let mut launched: Vec<(FrameworkId, AgentId, TaskId, Resources)> = Vec::new();
        let mut clock = 1;
        for op in ops {
            clock += 10;
            let now = at(clock);
            let mut fx = Vec::new();
            match op {
                Op::Allocate => {
                    s.allocate(&now, &mut fx);
                }
                Op::Accept { fw, offer, cpus, mem } => {
                    let fw = frameworks[fw];
                    if let Some(o) = s.offers(Some(fw), None).get(offer) {
                        let id = format!("t{}", launched.len());
                        let res = format!("cpus={cpus},mem={mem}");
                        let req = Accept {
                            offer_ids: vec![o.offer_id],
                            tasks: vec![task(&id, o.agent_id, &res)],
                            refuse: Some(Duration::ZERO),
                        };
                        if s.accept(fw, req, &now, &mut fx).is_ok() {
                            launched.push((fw, o.agent_id, id.parse().unwrap(), res.parse().unwrap()));
                        }
                    }
                }
                Op::Decline { fw, offer } => {
                    let fw = frameworks[fw];
                    if let Some(o) = s.offers(Some(fw), None).get(offer) {
                        let req = Decline { offer_ids: vec![o.offer_id], refuse: None };
                        s.decline(fw, req, &now, &mut fx).unwrap();
                    }
                }
                Op::Report { task, running, healthy } => {
                    if let Some((fw, agent, id, res)) = launched.get(task) {
                        let state = if running { TaskState::Running } else { TaskState::Finished };
                        let mut update = status(*fw, *agent, id, state, res);
                        update.healthy = healthy;
                        // Refused when the task or its framework is gone: nothing changes.
                        let _ = s.agent_status(*agent, update, &now, &mut fx);
                    }
                }
                Op::Kill { task } => {
                    if let Some((fw, _, id, _)) = launched.get(task) {
                        let _ = s.kill(*fw, id.clone(), &mut fx);
                    }
                }
                Op::ExpireOffers => {
                    clock += 60_000;
                    for agent in &agents {
                        // A lost agent's heartbeat is refused until it registers again.
                        let lost = s.agents().iter().any(|a| a.agent_id == *agent && a.state == "lost");
                        prop_assert_eq!(s.agent_heartbeat(*agent, &at(clock)).is_err(), lost);
                    }
                    s.expire_offers(&at(clock), &mut fx);
                }
                Op::RemoveFramework { fw } => {
                    let _ = s.remove_framework(frameworks[fw], "test", &mut fx);
                }
                Op::Reregister { agent } => {
                    let agent = agents[agent];
                    s.register_agent(reregister(agent, "cpus=4,mem=100", vec![]), &now, &mut fx).unwrap();
                }
                Op::Lose { agent } => s.lose_agent(agents[agent], &now, &mut fx),
                Op::Want { fw, pending } => {
                    // Refused (changing nothing) once the framework is removed.
                    let _ = s.want_tasks(frameworks[fw], pending, &mut fx);
                }
            }
            assert_books_match_the_allocator(&s, &frameworks);
        }
    }
}
