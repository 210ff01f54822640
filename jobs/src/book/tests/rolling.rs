//! Services' rolling updates, step by step within their bounds, and across a restart.

use std::collections::BTreeSet;

use protocol::{TaskId, TaskState};

use super::*;

/// Drives a service's rolling update to its end the way the scheduler does (a roll step after
/// every change, kills landing one by one, launches coming up one by one) and checks after
/// every event that at least `replicas - max_unavailable` replicas serve and at most
/// `replicas + max_surge` are alive.
fn roll_to_the_end(replicas: u32, unavailable: u32, surge: u32) {
    let head = format!(
        "name = \"web\"\nkind = \"service\"\nreplicas = {replicas}\n\
         max_unavailable = {unavailable}\nmax_surge = {surge}"
    );
    let mut book = Book::default();
    book.submit(spec(&head), 0).unwrap();
    let mut killed: BTreeSet<TaskId> = BTreeSet::new();
    let mut now = 1;
    for id in launch_all(&mut book, now) {
        book.update(&id, TaskState::Running, None, None, now)
            .unwrap();
    }
    let new = parse_any(&format!(
        "{head}\ncommand = \"echo v2\"\n[resources]\ncpus = 1\n"
    ))
    .unwrap();
    let (generation, kill) = book.update_service(new, now).unwrap();
    assert_eq!(generation, 1);
    killed.extend(kill);
    let check = |book: &Book, killed: &BTreeSet<TaskId>| {
        let view = book.view("web").unwrap();
        let serving = view
            .running
            .iter()
            .filter(|r| r.state == TaskState::Running && !killed.contains(&r.task_id))
            .count();
        let floor = replicas.saturating_sub(unavailable) as usize;
        assert!(serving >= floor, "{serving} serving < {floor}: {view:#?}");
        let alive = view.running.len();
        assert!(
            alive <= (replicas + surge) as usize,
            "{alive} alive: {view:#?}"
        );
    };
    for _ in 0..100 {
        check(&book, &killed);
        let view = book.view("web").unwrap();
        if view.summary.outdated == 0
            && view.running.len() == replicas as usize
            && view
                .running
                .iter()
                .all(|r| r.generation == 1 && r.state == TaskState::Running)
        {
            assert!(view.running.iter().all(|r| !killed.contains(&r.task_id)));
            return;
        }
        now += 1;
        let ending: Vec<TaskId> = view
            .running
            .iter()
            .filter(|r| killed.contains(&r.task_id))
            .map(|r| r.task_id.clone())
            .collect();
        for id in ending {
            book.update(&id, TaskState::Killed, None, None, now)
                .unwrap();
            check(&book, &killed);
            killed.extend(book.roll_task(&id));
        }
        now += 1;
        for id in launch_all(&mut book, now) {
            check(&book, &killed);
            book.update(&id, TaskState::Running, None, None, now)
                .unwrap();
            killed.extend(book.roll_task(&id));
            check(&book, &killed);
        }
        killed.extend(book.roll());
    }
    panic!("the roll did not end: {:#?}", book.view("web"));
}

#[test]
fn a_rolling_update_stays_within_its_bounds_and_ends_on_the_new_spec() {
    for (replicas, unavailable, surge) in [
        (4, 0, 1),
        (4, 1, 0),
        (4, 1, 1),
        (5, 2, 3),
        (1, 0, 1),
        (1, 1, 0),
        (3, 10, 0),
        (3, 0, 10),
    ] {
        roll_to_the_end(replicas, unavailable, surge);
    }
}

#[test]
fn an_update_that_changes_only_the_count_scales_without_a_roll() {
    let head = "name = \"web\"\nkind = \"service\"\nreplicas = 2";
    let mut book = Book::default();
    book.submit(spec(head), 0).unwrap();
    for id in launch_all(&mut book, 1) {
        book.update(&id, TaskState::Running, None, None, 1).unwrap();
    }
    let (generation, kill) = book
        .update_service(spec("name = \"web\"\nkind = \"service\"\nreplicas = 1"), 2)
        .unwrap();
    assert_eq!(generation, 0, "no roll");
    assert_eq!(kill, [task_id("web", 1, 0)]);
    assert_eq!(book.view("web").unwrap().summary.outdated, 0);
    assert_eq!(
        book.check_update(&spec("name = \"web\"")),
        Err(BookError::Unchangeable {
            field: "kind".into(),
            why: "a service stays a service; delete it and submit the new job".into(),
        })
    );
    book.submit(spec("name = \"batch\""), 3).unwrap();
    assert_eq!(
        book.check_update(&spec("name = \"batch\"\nkind = \"service\"")),
        Err(BookError::NotService("batch".into()))
    );
}

#[test]
fn a_restored_book_keeps_a_roll_s_retiring_replica() {
    let head = "name = \"web\"\nkind = \"service\"\nreplicas = 1\nmax_surge = 1";
    let mut book = Book::default();
    book.submit(spec(head), 0).unwrap();
    let old = launch_all(&mut book, 1);
    let mut records = vec![book
        .update(&old[0], TaskState::Running, None, None, 1)
        .unwrap()];
    let new = parse_any(&format!(
        "{head}\ncommand = \"echo v2\"\n[resources]\ncpus = 1\n"
    ))
    .unwrap();
    book.update_service(new.clone(), 2).unwrap();
    let agent = AgentId::new();
    let c = book.candidates(3, 10);
    assert_eq!(c.len(), 1);
    assert_eq!((c[0].index, c[0].attempt), (0, 1));
    records.push(book.launched(&c[0], agent, 3).unwrap());
    // As the store gives them back: the job at generation 1, then its attempts in order.
    let mut again = Book::default();
    again.restore_job(new, 0, 0, false, 4);
    again.restore_generation("web", 1);
    for r in &records {
        again.restore_attempt(r, 4);
    }
    let mut ids = again.in_flight();
    ids.sort();
    assert_eq!(ids, [task_id("web", 0, 0), task_id("web", 0, 1)]);
    assert!(again.is_current(&task_id("web", 0, 0)));
    assert_eq!(again.view("web").unwrap().summary.outdated, 1);
    // The successor comes up: the old replica is killed, and its end is the roll's end.
    again
        .update(&task_id("web", 0, 1), TaskState::Running, None, None, 5)
        .unwrap();
    assert_eq!(again.roll(), [task_id("web", 0, 0)]);
    again
        .update(&task_id("web", 0, 0), TaskState::Killed, None, None, 6)
        .unwrap();
    assert_eq!(again.view("web").unwrap().summary.outdated, 0);
    assert!(again.candidates(7, 10).is_empty());
}

#[test]
fn an_update_during_a_roll_rolls_on_to_the_newest_spec() {
    let head = "name = \"web\"\nkind = \"service\"\nreplicas = 2\nmax_surge = 1";
    let mut book = Book::default();
    book.submit(spec(head), 0).unwrap();
    for id in launch_all(&mut book, 1) {
        book.update(&id, TaskState::Running, None, None, 1).unwrap();
    }
    let v = |n: u32| {
        parse_any(&format!(
            "{head}\ncommand = \"echo v{n}\"\n[resources]\ncpus = 1\n"
        ))
        .unwrap()
    };
    assert_eq!(book.update_service(v(1), 2).unwrap(), (1, vec![]));
    // Index 0's successor (generation 1) comes up; generation 2 arrives before index 0's old
    // replica was killed.
    let successor = launch_all(&mut book, 3);
    assert_eq!(successor, [task_id("web", 0, 1)]);
    book.update(&successor[0], TaskState::Running, None, None, 4)
        .unwrap();
    let (generation, kill) = book.update_service(v(2), 5).unwrap();
    assert_eq!(generation, 2);
    assert!(
        kill.contains(&task_id("web", 0, 0)),
        "the old replica goes, as its successor serves: {kill:?}"
    );
    let mut now = 6;
    let mut killed: BTreeSet<TaskId> = kill.into_iter().collect();
    for _ in 0..20 {
        let view = book.view("web").unwrap();
        if view.summary.outdated == 0
            && view.running.len() == 2
            && view
                .running
                .iter()
                .all(|r| r.generation == 2 && r.state == TaskState::Running)
        {
            return;
        }
        now += 1;
        for r in view.running.iter().filter(|r| killed.contains(&r.task_id)) {
            book.update(&r.task_id, TaskState::Killed, None, None, now)
                .unwrap();
        }
        for id in launch_all(&mut book, now) {
            book.update(&id, TaskState::Running, None, None, now)
                .unwrap();
        }
        killed.extend(book.roll());
    }
    panic!(
        "the roll did not reach generation 2: {:#?}",
        book.view("web")
    );
}

#[test]
fn least_demand_is_the_element_wise_minimum_of_ready_jobs() {
    let mut book = Book::default();
    assert_eq!(book.least_demand(0), None, "nothing is ready");
    let sized = |name: &str, res: &str| {
        parse_any(&format!(
            "name = \"{name}\"\ncommand = \"true\"\n[resources]\n{res}\n"
        ))
        .unwrap()
    };
    book.submit(sized("big", "cpus = 4\nmem = 128"), 0).unwrap();
    book.submit(sized("small", "cpus = 1\nmem = 512\ngpus = 1"), 0)
        .unwrap();
    let least = book.least_demand(0).unwrap();
    assert_eq!(
        least,
        "cpus=1,mem=128".parse().unwrap(),
        "gpus: big asks none"
    );
    // Once `small` has launched its only task, only `big` is ready.
    let agent = AgentId::new();
    let c = book
        .candidates(0, usize::MAX)
        .into_iter()
        .find(|c| c.job == "small")
        .unwrap();
    book.launched(&c, agent, 0).unwrap();
    assert_eq!(
        book.least_demand(0),
        Some("cpus=4,mem=128".parse().unwrap())
    );
}
