//! Unit tests of the registry's limits: resource kinds, frameworks, the failover ceiling,
//! placeholder frameworks, remembered removals and `reconcile`. Each is allowed at its limit,
//! refused (or bounded) past it, and a refusal changes nothing.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use protocol::{Resources, TaskState, TaskStatus};

use super::tests::{kill, new_books, update};
use super::*;

fn at(ms: u64) -> Now {
    let start = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap();
    Now {
        ms,
        wall: start + chrono::Duration::milliseconds(i64::try_from(ms).unwrap()),
    }
}

fn registration(id: Option<FrameworkId>) -> FrameworkRegistration {
    FrameworkRegistration {
        name: "f".into(),
        role: "eng".parse().unwrap(),
        failover_timeout_s: None,
        framework_id: id,
        demand: None,
        owner: None,
        gpu_resources: false,
        partition_timeout_s: None,
    }
}

fn agent(total: Resources, id: Option<AgentId>, tasks: Vec<TaskStatus>) -> AgentRegistration {
    AgentRegistration {
        hostname: "h".into(),
        endpoint: "http://127.0.0.1:1".into(),
        resources: total,
        attributes: Default::default(),
        agent_id: id,
        tasks,
        api_token: None,
        reservations: Vec::new(),
        gpu_devices: Vec::new(),
    }
}

/// `n` distinct resource names `{prefix}{i}`, one unit each.
fn names(prefix: &str, n: usize) -> Resources {
    let mut r = Resources::new();
    for i in 0..n {
        r.set_millis(
            protocol::ResourceName::new(format!("{prefix}{i}")).unwrap(),
            1000,
        );
    }
    r
}

fn running(id: &str, fw: FrameworkId, agent: AgentId) -> TaskStatus {
    TaskStatus {
        task_id: id.parse().unwrap(),
        framework_id: fw,
        agent_id: agent,
        state: TaskState::Running,
        message: None,
        exit_code: None,
        update_id: protocol::UpdateId::new(),
        timestamp: protocol::now(),
        resources: Some("a0=1".parse().unwrap()),
        reason: None,
        usage: None,
        gpu_devices: None,
        healthy: None,
    }
}

#[test]
fn resource_kinds_are_capped_in_total_and_a_refusal_changes_nothing() {
    let config = Settings {
        max_resource_kinds: 4,
        ..Settings::default()
    };
    let mut s = new_books(&config);
    let mut fx = Vec::new();
    s.register_agent(agent(names("a", 3), None, vec![]), &at(0), &mut fx)
        .unwrap();
    let before = (s.agents(), s.frameworks().len());

    // One more kind: at the cap.
    s.register_agent(agent(names("b", 1), None, vec![]), &at(0), &mut fx)
        .unwrap();
    let before_b = (s.agents(), s.frameworks().len());
    assert_ne!(before, before_b);

    // 75k new names (the finding), in agent totals, then in a demand hint: refused.
    let flood = names("n", 75_000);
    let mut fx = Vec::new();
    let err = s
        .register_agent(agent(flood.clone(), None, vec![]), &at(0), &mut fx)
        .unwrap_err();
    assert_eq!(err, StateError::TooManyResourceKinds { known: 4, max: 4 });
    let err = s
        .register_framework(
            FrameworkRegistration {
                demand: Some(flood.clone()),
                ..registration(None)
            },
            &at(0),
            &mut fx,
        )
        .unwrap_err();
    assert!(
        matches!(err, StateError::TooManyResourceKinds { .. }),
        "{err}"
    );
    assert!(fx.is_empty(), "{fx:?}");
    assert_eq!((s.agents(), s.frameworks().len()), before_b);

    // Known names are always fine, in any number of vectors.
    let (fw, _) = s
        .register_framework(
            FrameworkRegistration {
                demand: Some("a0=1,b0=1".parse().unwrap()),
                ..registration(None)
            },
            &at(0),
            &mut fx,
        )
        .unwrap();
    let err = s
        .revive(fw, Some("c0=1".parse().unwrap()), &at(0), &mut fx)
        .unwrap_err();
    assert!(
        matches!(err, StateError::TooManyResourceKinds { .. }),
        "{err}"
    );
    assert_eq!(s.ledger_mismatches(), 0);
}

#[test]
fn frameworks_are_capped_and_re_registration_still_works() {
    let config = Settings {
        max_frameworks: 2,
        ..Settings::default()
    };
    let mut s = new_books(&config);
    let mut fx = Vec::new();
    let (a, _) = s
        .register_framework(registration(None), &at(0), &mut fx)
        .unwrap();
    s.register_framework(registration(None), &at(0), &mut fx)
        .unwrap();
    let mut fx = Vec::new();
    let err = s
        .register_framework(registration(None), &at(0), &mut fx)
        .unwrap_err();
    assert_eq!(err, StateError::TooManyFrameworks(2));
    let err = s
        .register_framework(registration(Some(FrameworkId::new())), &at(0), &mut fx)
        .unwrap_err();
    assert_eq!(err, StateError::TooManyFrameworks(2), "adopting an id too");
    assert!(fx.is_empty());
    assert_eq!(s.frameworks().len(), 2);
    // A known framework re-registers at the cap.
    assert_eq!(
        s.register_framework(registration(Some(a)), &at(1), &mut fx)
            .unwrap(),
        (a, false)
    );
    // Removing one makes room.
    s.remove_framework(a, "test", &mut fx).unwrap();
    s.register_framework(registration(None), &at(2), &mut fx)
        .unwrap();
}

#[test]
fn roles_are_capped_counting_every_prefix() {
    let config = Settings {
        max_roles: 2,
        ..Settings::default()
    };
    let mut s = new_books(&config);
    let mut fx = Vec::new();
    let role = |r: &str| FrameworkRegistration {
        role: r.parse().unwrap(),
        ..registration(None)
    };
    // "eng" and "eng/batch": two roles, at the cap.
    s.register_framework(role("eng/batch"), &at(0), &mut fx)
        .unwrap();
    s.register_framework(role("eng"), &at(0), &mut fx).unwrap();
    let mut fx = Vec::new();
    assert_eq!(
        s.register_framework(role("ops"), &at(0), &mut fx),
        Err(StateError::TooManyRoles(2))
    );
    assert_eq!(
        s.set_role_weight(&"eng/web".parse().unwrap(), protocol::Weight::ONE, &mut fx),
        Err(StateError::TooManyRoles(2))
    );
    assert!(fx.is_empty());
    assert_eq!(s.frameworks().len(), 2);
    // Existing roles are always fine.
    s.set_role_weight(&"eng".parse().unwrap(), protocol::Weight::ONE, &mut fx)
        .unwrap();
}

#[test]
fn a_failover_timeout_past_the_ceiling_is_clamped() {
    let config = Settings {
        max_failover_timeout: Duration::from_secs(3600),
        ..Settings::default()
    };
    let mut s = new_books(&config);
    let mut fx = Vec::new();
    let year = 365.0 * 24.0 * 3600.0;
    let (fw, _) = s
        .register_framework(
            FrameworkRegistration {
                failover_timeout_s: Some(year),
                ..registration(None)
            },
            &at(0),
            &mut fx,
        )
        .unwrap();
    assert_eq!(s.frameworks[&fw].failover_timeout_s, 3600.0);
    let (at_limit, _) = s
        .register_framework(
            FrameworkRegistration {
                failover_timeout_s: Some(3600.0),
                ..registration(None)
            },
            &at(0),
            &mut fx,
        )
        .unwrap();
    assert_eq!(s.frameworks[&at_limit].failover_timeout_s, 3600.0);
    // It is removed an hour after it disconnects, not a year.
    s.subscribe(fw, &at(0), &mut fx).unwrap();
    let generation = s.frameworks[&fw].generation;
    s.stream_closed(fw, generation, &at(0), &mut fx);
    s.check_failover(&at(3_600_001), &mut fx);
    assert!(!s.frameworks.contains(fw));
}

#[test]
fn placeholder_frameworks_are_bounded_and_tasks_past_the_bound_are_killed() {
    let config = Settings {
        max_placeholder_frameworks: 1,
        ..Settings::default()
    };
    let mut s = new_books(&config);
    let (one, two) = (FrameworkId::new(), FrameworkId::new());
    let id = AgentId::new();
    let mut fx = Vec::new();
    let t1 = running("t1", one, id);
    s.register_agent(
        agent(
            "a0=4".parse().unwrap(),
            Some(id),
            vec![t1.clone(), running("t2", two, id)],
        ),
        &at(0),
        &mut fx,
    )
    .unwrap();
    assert_eq!(s.frameworks.len(), 1, "one placeholder, at the bound");
    assert!(s.frameworks.contains(one));
    assert_eq!(s.tasks.len(), 1);
    assert_eq!(
        fx,
        vec![update(one, t1), kill(id, two, "t2"), Effect::Allocate],
        "the adopted task's status is kept for its framework; the task past the bound is not \
         adopted, and killed"
    );
    assert_eq!(s.ledger_mismatches(), 0);
}

#[test]
fn removed_framework_ids_are_bounded_oldest_forgotten_first() {
    let config = Settings {
        max_removed_frameworks: 2,
        ..Settings::default()
    };
    let mut s = new_books(&config);
    let mut fx = Vec::new();
    let mut ids = Vec::new();
    for _ in 0..3 {
        let (fw, _) = s
            .register_framework(registration(None), &at(0), &mut fx)
            .unwrap();
        s.remove_framework(fw, "test", &mut fx).unwrap();
        ids.push(fw);
    }
    assert_eq!(s.frameworks.removed_len(), 2);
    for &fw in &ids[1..] {
        assert_eq!(
            s.register_framework(registration(Some(fw)), &at(1), &mut fx),
            Err(StateError::FrameworkRemoved(fw)),
            "remembered"
        );
    }
    // The oldest is forgotten: its id is adopted again like any id the coordinator never saw.
    assert_eq!(
        s.register_framework(registration(Some(ids[0])), &at(1), &mut fx),
        Ok((ids[0], true))
    );
}

#[test]
fn lost_agents_are_forgotten_after_the_retention() {
    let config = Settings {
        agent_heartbeat_interval: Duration::from_secs(1),
        max_missed_heartbeats: 1,
        lost_agent_retention: Duration::from_secs(60),
        ..Settings::default()
    };
    let mut s = new_books(&config);
    let mut fx = Vec::new();
    let (id, _) = s
        .register_agent(
            agent("cpus=1".parse().unwrap(), None, vec![]),
            &at(0),
            &mut fx,
        )
        .unwrap();
    s.check_agents(&at(1_001), &mut fx);
    assert_eq!(s.agents.get(id).unwrap().state, AgentState::Lost);
    s.check_agents(&at(60_000), &mut fx);
    assert!(s.agents.contains(id), "kept for the retention");
    s.check_agents(&at(60_001), &mut fx);
    assert!(!s.agents.contains(id), "forgotten after it");
    // It comes back as after a restart: registered again under its id.
    let (again, created) = s
        .register_agent(
            agent("cpus=1".parse().unwrap(), Some(id), vec![]),
            &at(60_002),
            &mut fx,
        )
        .unwrap();
    assert_eq!((again, created), (id, true));
    assert_eq!(s.ledger_mismatches(), 0);
}

#[test]
fn unacknowledged_updates_are_bounded_per_framework() {
    let config = Settings {
        max_pending_updates_per_framework: 16,
        ..Settings::default()
    };
    let mut s = new_books(&config);
    let mut fx = Vec::new();
    let (fw, _) = s
        .register_framework(registration(None), &at(0), &mut fx)
        .unwrap();
    s.subscribe(fw, &at(0), &mut fx).unwrap();
    // An agent reports 20 finished tasks; the framework never acknowledges.
    let id = AgentId::new();
    let finished: Vec<TaskStatus> = (0..20)
        .map(|i| TaskStatus {
            state: TaskState::Finished,
            resources: None,
            ..running(&format!("t{i:02}"), fw, id)
        })
        .collect();
    let reports: Effects = finished.iter().map(|t| update(fw, t.clone())).collect();
    s.register_agent(
        agent("a0=4".parse().unwrap(), Some(id), finished),
        &at(0),
        &mut fx,
    )
    .unwrap();
    let f = &s.frameworks[&fw];
    assert_eq!(f.pending.len(), 16, "at the bound");
    // The 4 oldest were dropped and, terminal with nothing pending, completed.
    let completed: Vec<&str> = f.completed.iter().map(|t| t.as_str()).collect();
    assert_eq!(completed, ["t00", "t01", "t02", "t03"]);
    // Reconciliation still reports every task.
    let mut fx = Vec::new();
    s.reconcile(fw, vec![], &mut fx).unwrap();
    assert_eq!(fx, reports);
    assert_eq!(s.ledger_mismatches(), 0);
}

#[test]
fn reconcile_deduplicates_ids_and_is_capped() {
    let config = Settings {
        max_stream_queue: 16,
        ..Settings::default()
    };
    let mut s = new_books(&config);
    let mut fx = Vec::new();
    let (fw, _) = s
        .register_framework(registration(None), &at(0), &mut fx)
        .unwrap();
    s.subscribe(fw, &at(0), &mut fx).unwrap();
    let id = AgentId::new();
    let t = running("t", fw, id);
    s.register_agent(
        agent("a0=4".parse().unwrap(), Some(id), vec![t.clone()]),
        &at(0),
        &mut fx,
    )
    .unwrap();
    // 100k copies of one id (the finding) queue one event, not 100k.
    let mut fx = Vec::new();
    s.reconcile(fw, vec!["t".parse().unwrap(); 100_000], &mut fx)
        .unwrap();
    assert_eq!(fx, vec![update(fw, t)]);
    // At most max_stream_queue distinct ids.
    let many: Vec<TaskId> = (0..17).map(|i| format!("x{i}").parse().unwrap()).collect();
    let mut fx = Vec::new();
    assert_eq!(
        s.reconcile(fw, many, &mut fx),
        Err(StateError::TooManyTaskIds { given: 17, max: 16 })
    );
    assert!(fx.is_empty());
}
