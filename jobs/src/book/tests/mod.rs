//! The book's rules, checked without a coordinator or a clock.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use protocol::{AgentId, TaskId, TaskState};

use super::*;
use crate::spec::parse_any;
use crate::spec::{JobSpec, Kind};

fn spec(extra: &str) -> JobSpec {
    parse_any(&format!(
        "command = \"true\"\n{extra}\n[resources]\ncpus = 1\n"
    ))
    .unwrap()
}

fn launch_all(book: &mut Book, now: Millis) -> Vec<TaskId> {
    let agent = AgentId::new();
    book.candidates(now, usize::MAX)
        .iter()
        .map(|c| {
            let r = book.launched(c, agent, now).unwrap();
            task_id(&r.job, r.index, r.attempt)
        })
        .collect()
}

fn finish(book: &mut Book, id: &TaskId, state: TaskState, now: Millis) -> Option<AttemptRecord> {
    book.update(id, state, None, None, now)
}

#[test]
fn task_ids_name_job_index_and_attempt() {
    let id = task_id("my-job", 7, 2);
    assert_eq!(id.as_str(), "job-my-job-7-2");
    assert_eq!(parse_task_id(id.as_str()), Some(("my-job", 7, 2)));
    assert_eq!(parse_task_id("other-1-2"), None);
    assert_eq!(parse_task_id("job-x-y-2"), None);
}

#[test]
fn an_array_runs_every_index_and_retries_with_backoff() {
    let mut book = Book::default();
    book.submit(
        spec("name = \"a\"\ncount = 3\nmax_retries = 2\nbackoff_s = 1"),
        0,
    )
    .unwrap();
    assert_eq!(book.pending(0), 3);
    let ids = launch_all(&mut book, 0);
    assert_eq!(ids.len(), 3);
    assert_eq!(book.pending(0), 0);
    assert!(
        launch_all(&mut book, 0).is_empty(),
        "nothing launches twice"
    );
    finish(&mut book, &ids[0], TaskState::Finished, 10);
    finish(&mut book, &ids[2], TaskState::Finished, 10);
    let rec = book
        .update(
            &ids[1],
            TaskState::Failed,
            Some(3),
            Some("exited".into()),
            10,
        )
        .unwrap();
    assert_eq!((rec.state, rec.exit_code), (TaskState::Failed, Some(3)));
    assert_eq!(book.pending(10), 0, "the retry waits out its delay");
    assert_eq!(book.next_retry(10), Some(1010));
    let again = launch_all(&mut book, 1010);
    assert_eq!(again, [task_id("a", 1, 1)]);
    finish(&mut book, &again[0], TaskState::Failed, 1020);
    assert_eq!(book.next_retry(1020), Some(3020), "the delay doubles");
    let third = launch_all(&mut book, 3020);
    finish(&mut book, &third[0], TaskState::Finished, 3030);
    let view = book.view("a").unwrap();
    assert_eq!(view.summary.state, JobState::Succeeded);
    assert_eq!(view.succeeded, [(0, 3)]);
    assert_eq!(view.failures.len(), 2);
    assert_eq!(book.task("a", 1).unwrap().attempts, 3);
}

#[test]
fn an_index_out_of_retries_fails_the_job_with_its_exit_code() {
    let mut book = Book::default();
    book.submit(spec("name = \"a\"\ncount = 2"), 0).unwrap();
    let ids = launch_all(&mut book, 0);
    book.update(&ids[0], TaskState::Failed, Some(7), None, 1);
    assert_eq!(book.job("a").unwrap().state(), JobState::Active);
    finish(&mut book, &ids[1], TaskState::Finished, 2);
    let s = &book.summaries()[0];
    assert_eq!(s.state, JobState::Failed);
    assert!(
        s.reason.as_deref().unwrap().contains("exit code 7"),
        "{s:?}"
    );
}

#[test]
fn lost_tasks_run_again_without_using_a_retry() {
    let mut book = Book::default();
    book.submit(spec("name = \"a\""), 0).unwrap();
    let ids = launch_all(&mut book, 0);
    finish(&mut book, &ids[0], TaskState::Lost, 1);
    let again = launch_all(&mut book, 1);
    assert_eq!(again, [task_id("a", 0, 1)]);
    finish(&mut book, &again[0], TaskState::Finished, 2);
    assert_eq!(book.job("a").unwrap().state(), JobState::Succeeded);
}

#[test]
fn dependencies_start_after_success_and_fail_after_failure() {
    let mut book = Book::default();
    book.submit(spec("name = \"first\""), 0).unwrap();
    book.submit(spec("name = \"second\"\ndepends_on = [\"first\"]"), 0)
        .unwrap();
    book.submit(spec("name = \"third\"\ndepends_on = [\"second\"]"), 0)
        .unwrap();
    assert_eq!(book.job("second").unwrap().state(), JobState::Waiting);
    let ids = launch_all(&mut book, 0);
    assert_eq!(ids, [task_id("first", 0, 0)], "only the first is ready");
    finish(&mut book, &ids[0], TaskState::Finished, 1);
    assert_eq!(book.job("second").unwrap().state(), JobState::Active);
    let ids = launch_all(&mut book, 1);
    finish(&mut book, &ids[0], TaskState::Failed, 2);
    let third = book.view("third").unwrap().summary;
    assert_eq!(third.state, JobState::Failed);
    assert!(
        third
            .reason
            .unwrap()
            .contains("dependency \"second\" failed"),
        "the reason names the dependency"
    );
}

#[test]
fn unknown_dependencies_and_duplicates_are_refused_and_change_nothing() {
    let mut book = Book::default();
    let e = book
        .submit(spec("name = \"b\"\ndepends_on = [\"nope\"]"), 0)
        .unwrap_err();
    assert!(matches!(&e, BookError::UnknownDependency { field, .. } if field == "depends_on[0]"));
    assert!(book.summaries().is_empty());
    book.submit(spec("name = \"a\""), 0).unwrap();
    assert_eq!(
        book.submit(spec("name = \"a\""), 0).unwrap_err(),
        BookError::Exists("a".into())
    );
}

#[test]
fn priority_orders_the_queue_and_aging_lifts_old_jobs() {
    let mut book = Book::new(1000);
    book.submit(spec("name = \"low\"\npriority = 0"), 0)
        .unwrap();
    book.submit(spec("name = \"high\"\npriority = 5"), 0)
        .unwrap();
    let first = |b: &Book, now| b.candidates(now, 1)[0].job.clone();
    assert_eq!(first(&book, 0), "high");
    book.submit(spec("name = \"late\"\npriority = 5"), 10_000)
        .unwrap();
    // At 10 s `low` has aged by 10 and `high` too; `late` has not aged at all.
    assert_eq!(first(&book, 10_000), "high");
    assert_eq!(book.candidates(10_000, 3)[1].job, "low");
}

#[test]
fn max_running_limits_a_job() {
    let mut book = Book::default();
    book.submit(spec("name = \"a\"\ncount = 10\nmax_running = 3"), 0)
        .unwrap();
    assert_eq!(book.pending(0), 3);
    let ids = launch_all(&mut book, 0);
    assert_eq!(ids.len(), 3);
    finish(&mut book, &ids[0], TaskState::Finished, 1);
    assert_eq!(book.pending(1), 1);
}

fn owned(extra: &str, owner: &str) -> JobSpec {
    let mut s = spec(extra);
    s.owner = owner.into();
    s
}

#[test]
fn a_user_limit_caps_all_its_jobs_together_in_either_order() {
    for order in [QueueOrder::Fifo, QueueOrder::Fair] {
        let mut book = Book::default();
        book.set_order(order);
        let mut per_user = BTreeMap::new();
        per_user.insert("alice".to_owned(), 3);
        book.set_user_limits(UserLimits {
            per_user,
            default: Some(5),
        });
        book.submit(owned("name = \"a1\"\ncount = 4", "alice"), 0)
            .unwrap();
        book.submit(owned("name = \"a2\"\ncount = 4", "alice"), 0)
            .unwrap();
        book.submit(owned("name = \"b\"\ncount = 4", "bob"), 0)
            .unwrap();
        // alice 3 of 8, bob (the default limit, 5) all 4.
        assert_eq!(book.pending(0), 7, "{order:?}");
        let ids = launch_all(&mut book, 0);
        let by_job = |job: &str| ids.iter().filter(|i| i.as_str().contains(job)).count();
        assert_eq!(by_job("-a1-") + by_job("-a2-"), 3, "{order:?}: {ids:?}");
        assert_eq!(by_job("-b-"), 4, "{order:?}");
        assert_eq!(book.pending(0), 0, "alice is at her limit");
        assert!(book.candidates(0, 100).is_empty());
        // One of alice's ends: one more of hers may start, whichever job it is from.
        let alice = ids.iter().find(|i| !i.as_str().contains("-b-")).unwrap();
        finish(&mut book, alice, TaskState::Finished, 1);
        assert_eq!(book.pending(1), 1, "{order:?}");
        assert_eq!(launch_all(&mut book, 1).len(), 1);
        assert_eq!(book.pending(1), 0);
    }
}

#[test]
fn timeouts_are_reported_once_and_count_as_failures() {
    let mut book = Book::default();
    book.submit(spec("name = \"a\"\ntimeout_s = 1"), 0).unwrap();
    let ids = launch_all(&mut book, 0);
    assert!(book.timeouts(999).is_empty());
    assert_eq!(book.timeouts(1000).len(), 1);
    assert!(book.timeouts(2000).is_empty(), "killed once");
    let rec = finish(&mut book, &ids[0], TaskState::Killed, 2001).unwrap();
    assert_eq!(rec.message.as_deref(), Some("timed out after 1 s"));
    assert_eq!(book.job("a").unwrap().state(), JobState::Failed);
}

#[test]
fn stop_and_delete_return_the_tasks_to_kill() {
    let mut book = Book::default();
    book.submit(spec("name = \"a\"\ncount = 4\nmax_running = 2"), 0)
        .unwrap();
    let ids = launch_all(&mut book, 0);
    assert_eq!(book.stop("a", 1).unwrap(), ids);
    assert_eq!(book.stopped_running(), ids, "until their ends arrive");
    assert_eq!(book.pending(1), 0);
    assert_eq!(book.job("a").unwrap().state(), JobState::Stopped);
    assert_eq!(book.delete("a", 2).unwrap(), ids);
    assert!(book.job("a").is_none());
    assert!(finish(&mut book, &ids[0], TaskState::Killed, 3).is_none());
    assert_eq!(
        book.stop("a", 3).unwrap_err(),
        BookError::NotFound("a".into())
    );
}

#[test]
fn a_restored_book_carries_on_from_its_records() {
    let mut book = Book::default();
    let s = spec("name = \"a\"\ncount = 3\nmax_retries = 1\nbackoff_s = 0");
    book.submit(s.clone(), 0).unwrap();
    let agent = AgentId::new();
    let mut records = Vec::new();
    for c in book.candidates(0, usize::MAX) {
        records.push(book.launched(&c, agent, 0).unwrap());
    }
    records.push(finish(&mut book, &task_id("a", 0, 0), TaskState::Finished, 1).unwrap());
    records.push(finish(&mut book, &task_id("a", 1, 0), TaskState::Failed, 1).unwrap());
    let mut restored = Book::default();
    restored.restore_job(s, 0, 0, false, 2);
    // The store hands records back ordered by (job, index, attempt), latest state of each.
    records.sort_by_key(|r| (r.index, r.attempt));
    records.dedup_by(|later, earlier| {
        later.index == earlier.index && later.attempt == earlier.attempt && {
            std::mem::swap(later, earlier);
            true
        }
    });
    for r in &records {
        restored.restore_attempt(r, 2);
    }
    assert_eq!(restored.in_flight(), [task_id("a", 2, 0)]);
    let next = restored.candidates(2, usize::MAX);
    assert_eq!(
        next,
        [Candidate {
            job: "a".into(),
            index: 1,
            attempt: 1
        }]
    );
}

#[test]
fn a_service_restarts_its_replicas_with_backoff_and_scales() {
    let mut book = Book::default();
    book.submit(
        parse_any(
            "name = \"web\"\nkind = \"service\"\nreplicas = 2\ncommand = \"serve\"\n\
             backoff_s = 1\n[resources]\ncpus = 1\n",
        )
        .unwrap(),
        0,
    )
    .unwrap();
    let ids = launch_all(&mut book, 0);
    assert_eq!(ids, [task_id("web", 0, 0), task_id("web", 1, 0)]);
    // A replica that exits at once waits the backoff, then doubles it.
    book.update(&ids[0], TaskState::Finished, Some(0), None, 100);
    assert_eq!(book.next_retry(100), Some(1100));
    let again = launch_all(&mut book, 1100);
    assert_eq!(again, [task_id("web", 0, 1)]);
    book.update(&again[0], TaskState::Failed, Some(1), None, 1200);
    assert_eq!(book.next_retry(1200), Some(3200));
    // A lost replica restarts at once.
    book.update(&ids[1], TaskState::Lost, None, None, 1300);
    assert_eq!(launch_all(&mut book, 1300), [task_id("web", 1, 1)]);
    assert_eq!(book.job("web").unwrap().state(), JobState::Active);
    // Scaling up queues new replicas; down returns the running ones to kill.
    assert!(book.scale("web", 3, 1400).unwrap().is_empty());
    assert_eq!(launch_all(&mut book, 1400), [task_id("web", 2, 0)]);
    // A restart kills every replica; each comes back at once, whatever its history.
    let running = book.restart("web").unwrap();
    assert_eq!(running, [task_id("web", 1, 1), task_id("web", 2, 0)]);
    book.update(&running[1], TaskState::Killed, None, None, 1450);
    assert_eq!(launch_all(&mut book, 1450), [task_id("web", 2, 1)]);
    let kill = book.scale("web", 1, 1500).unwrap();
    assert_eq!(kill, [task_id("web", 1, 1), task_id("web", 2, 1)]);
    book.update(&kill[0], TaskState::Killed, None, None, 1540);
    assert_eq!(book.pending(10_000), 1, "only replica 0 comes back");
    // Back up before the kill of replica 2 ended: it is not launched twice.
    assert!(book.scale("web", 3, 1550).unwrap().is_empty());
    assert_eq!(launch_all(&mut book, 1550), [task_id("web", 1, 2)]);
    assert_eq!(book.pending(1550), 0);
    book.update(&task_id("web", 2, 1), TaskState::Killed, None, None, 1560);
    assert_eq!(launch_all(&mut book, 2560), [task_id("web", 2, 2)]);
    assert_eq!(book.scale("web", 1, 2570).unwrap().len(), 2);
    assert_eq!(
        book.scale("nope", 1, 0).unwrap_err(),
        BookError::NotFound("nope".into())
    );
    book.submit(spec("name = \"batch\""), 0).unwrap();
    assert_eq!(
        book.scale("batch", 2, 0).unwrap_err(),
        BookError::NotService("batch".into())
    );
}

#[test]
fn periodic_runs_start_on_schedule_and_follow_their_policy() {
    let periodic = |policy: &str| {
        parse_any(&format!(
            "name = \"tick-{policy}\"\nkind = \"periodic\"\nschedule = \"*/10 * * * * *\"\n\
             concurrency = \"{policy}\"\ncommand = \"true\"\n[resources]\ncpus = 1\n"
        ))
        .unwrap()
    };
    let mut book = Book::default();
    book.submit(periodic("forbid"), 1_000).unwrap();
    book.submit(periodic("replace"), 1_000).unwrap();
    assert_eq!(book.pending(1_000), 0, "a periodic job runs nothing itself");
    assert!(book.due_runs(9_999).is_empty());
    let runs = book.due_runs(10_000);
    let names: Vec<&str> = runs.iter().map(|(r, _)| r.name.as_str()).collect();
    assert_eq!(names, ["tick-forbid-10", "tick-replace-10"]);
    for (run, replaced) in runs {
        assert!(replaced.is_empty());
        assert_eq!(run.kind, Kind::Batch);
        book.submit(run, 10_000).unwrap();
    }
    launch_all(&mut book, 10_000);
    // The first runs still run at the next tick: forbid skips, replace stops the old run.
    let runs = book.due_runs(20_000);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].0.name, "tick-replace-20");
    assert_eq!(runs[0].1, ["tick-replace-10"]);
    let next = book
        .summaries()
        .into_iter()
        .find(|s| s.name == "tick-forbid")
        .unwrap()
        .next_run_ms;
    assert_eq!(next, Some(30_000));
}

#[test]
fn fair_order_shares_the_queue_between_jobs_of_one_priority() {
    let mut book = Book::default();
    book.set_order(QueueOrder::Fair);
    book.submit(spec("name = \"big\"\ncount = 100"), 0).unwrap();
    let agent = AgentId::new();
    for c in book.candidates(0, 3) {
        book.launched(&c, agent, 0).unwrap();
    }
    book.submit(spec("name = \"small\"\ncount = 2"), 1).unwrap();
    book.submit(spec("name = \"urgent\"\npriority = 9"), 2)
        .unwrap();
    let jobs: Vec<String> = book.candidates(2, 6).into_iter().map(|c| c.job).collect();
    // The higher priority first; then `small` (running none) until it has as many as `big`.
    assert_eq!(jobs, ["urgent", "small", "small", "big", "big", "big"]);
    book.set_order(QueueOrder::Fifo);
    let jobs: Vec<String> = book.candidates(2, 3).into_iter().map(|c| c.job).collect();
    assert_eq!(jobs, ["urgent", "big", "big"]);
}

#[test]
fn a_job_learns_how_long_its_tasks_run() {
    let mut book = Book::default();
    book.submit(spec("name = \"a\"\ncount = 3\ntimeout_s = 30"), 0)
        .unwrap();
    assert_eq!(
        book.job("a").unwrap().estimated_task_s(0),
        30.0,
        "the limit first"
    );
    let ids = launch_all(&mut book, 0);
    finish(&mut book, &ids[0], TaskState::Finished, 2_000);
    finish(&mut book, &ids[1], TaskState::Finished, 4_000);
    finish(&mut book, &ids[2], TaskState::Failed, 9_000);
    assert_eq!(
        book.job("a").unwrap().estimated_task_s(1),
        3.0,
        "the average of those that succeeded"
    );
}

#[test]
fn declared_sizes_weight_the_learned_length() {
    let mut book = Book::default();
    book.submit(
        spec("name = \"a\"\ncount = 4\ntimeout_s = 30\nsizes = [1, 3, 2, 2]"),
        0,
    )
    .unwrap();
    let job = |b: &Book, i| b.job("a").unwrap().estimated_task_s(i);
    // Before any end: the limit, scaled by size over the mean size (2).
    assert_eq!((job(&book, 0), job(&book, 1)), (15.0, 45.0));
    let ids = launch_all(&mut book, 0);
    // Index 0 (size 1) ran 1 s, index 1 (size 3) 5 s: 6 s for 4 units, 1.5 s a unit.
    finish(&mut book, &ids[0], TaskState::Finished, 1_000);
    finish(&mut book, &ids[1], TaskState::Finished, 5_000);
    assert_eq!((job(&book, 2), job(&book, 0)), (3.0, 1.5));
}

#[test]
fn ten_million_queued_tasks_are_one_range() {
    let mut book = Book::default();
    book.submit(spec("name = \"huge\"\ncount = 10000000"), 0)
        .unwrap();
    let agent = AgentId::new();
    let round = book.candidates(0, 5_000);
    assert_eq!(round.len(), 5_000);
    for c in &round {
        book.launched(c, agent, 0).unwrap();
    }
    assert_eq!(book.pending(0), 9_995_000);
    let job = book.job("huge").unwrap();
    assert_eq!(
        job.unlaunched.spans(),
        [(5_000, 10_000_000)],
        "still one range"
    );
    for c in &round {
        book.update(
            &task_id("huge", c.index, 0),
            TaskState::Finished,
            Some(0),
            None,
            1,
        );
    }
    assert_eq!(book.view("huge").unwrap().succeeded, [(0, 5_000)]);
}

mod effects;
mod rolling;
