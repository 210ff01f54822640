//! Every input's whole effect list, exactly: what is stored, in which order, what is killed
//! and why, which jobs are said to have changed. A refused input changes nothing.

use protocol::{AgentId, TaskId, TaskState};

use super::*;

/// The agent every launch in these tests goes to.
fn agent() -> AgentId {
    "00000000-0000-0000-0000-000000000007".parse().unwrap()
}

/// A job spec from TOML lines (its name among them), owned by `alice`.
fn job(lines: &str) -> JobSpec {
    let mut s = spec(lines);
    s.owner = "alice".into();
    s
}

/// Applies `input` at `now` and asserts its effects are exactly `expect`.
fn check(book: &mut Book, input: Input, now: Millis, expect: &[Effect]) {
    let got = book.handle(input, now).unwrap();
    assert_eq!(got, expect);
}

/// Applies `input` and asserts it is refused with `error`, changing nothing.
fn refused(book: &mut Book, input: Input, error: &BookError) {
    let before = (book.summaries(), book.in_flight(), book.next_seq());
    assert_eq!(book.handle(input, 50).unwrap_err(), *error);
    assert_eq!(
        (book.summaries(), book.in_flight(), book.next_seq()),
        before
    );
}

/// Submits `spec` at time 0, dropping its effects.
fn submitted(book: &mut Book, spec: JobSpec) {
    book.handle(Input::Submit(spec), 0).unwrap();
}

/// Launches every candidate on [`agent`] at `now`, dropping the effects; their ids.
fn launched(book: &mut Book, now: Millis) -> Vec<TaskId> {
    let placed: Vec<_> = book
        .candidates(now, usize::MAX)
        .into_iter()
        .map(|c| (c, agent()))
        .collect();
    book.handle(Input::Launch(placed), now).unwrap();
    book.in_flight()
}

/// The record of attempt `attempt` of `job[index]`, launched on [`agent`] at `at`.
fn attempt(job: &str, index: u32, attempt: u32, at: Millis) -> AttemptRecord {
    AttemptRecord {
        job: job.into(),
        index,
        attempt,
        state: TaskState::Staging,
        exit_code: None,
        message: None,
        agent_id: Some(agent()),
        launched_ms: at,
        ended_ms: None,
        timed_out_ms: None,
        generation: 0,
    }
}

/// That attempt, ended in `state` at `ended`.
fn ended(
    r: AttemptRecord,
    state: TaskState,
    ended: Millis,
    message: Option<&str>,
) -> AttemptRecord {
    AttemptRecord {
        state,
        ended_ms: Some(ended),
        message: message.map(Into::into),
        ..r
    }
}

fn status(task: TaskId, state: TaskState) -> Input {
    Input::Status {
        task,
        state,
        exit_code: None,
        message: None,
        healthy: None,
    }
}

fn stored(name: &str, record: JobRecord) -> Effect {
    Effect::StoreJob {
        name: name.into(),
        record: Box::new(record),
    }
}

fn kill(task: TaskId, why: KillWhy) -> Effect {
    Effect::Kill { task, why }
}

fn changed(name: &str) -> Effect {
    Effect::Changed(name.into())
}

#[test]
fn a_submission_is_stored_then_said() {
    let mut book = Book::default();
    let a = job("name = \"a\"\ncount = 2");
    check(
        &mut book,
        Input::Submit(a.clone()),
        5,
        &[stored("a", JobRecord::new(&a, 0, 5)), changed("a")],
    );
    let b = job("name = \"b\"\ndepends_on = [\"a\"]");
    check(
        &mut book,
        Input::Submit(b.clone()),
        6,
        &[stored("b", JobRecord::new(&b, 1, 6)), changed("b")],
    );
}

#[test]
fn a_refused_submission_changes_nothing() {
    let mut book = Book::default();
    submitted(&mut book, job("name = \"a\""));
    refused(
        &mut book,
        Input::Submit(job("name = \"a\"")),
        &BookError::Exists("a".into()),
    );
    refused(
        &mut book,
        Input::Submit(job("name = \"b\"\ndepends_on = [\"nope\"]")),
        &BookError::UnknownDependency {
            field: "depends_on[0]".into(),
            name: "nope".into(),
        },
    );
}

#[test]
fn launches_are_stored_before_they_are_sent_and_a_stale_one_is_left() {
    let mut book = Book::default();
    submitted(&mut book, job("name = \"a\"\ncount = 2"));
    let cands = book.candidates(10, 10);
    let stale = Candidate {
        attempt: 3,
        ..cands[0].clone()
    };
    let placed = cands.into_iter().chain([stale]).map(|c| (c, agent()));
    check(
        &mut book,
        Input::Launch(placed.collect()),
        10,
        &[
            Effect::StoreAttempt(attempt("a", 0, 0, 10)),
            Effect::StoreAttempt(attempt("a", 1, 0, 10)),
            changed("a"),
        ],
    );
    // Launched already: nothing more.
    let again = Candidate {
        job: "a".into(),
        index: 0,
        attempt: 0,
    };
    check(&mut book, Input::Launch(vec![(again, agent())]), 11, &[]);
}

#[test]
fn a_running_update_is_said_not_stored_and_an_end_is_stored_later() {
    let mut book = Book::default();
    submitted(&mut book, job("name = \"a\"\ncount = 2"));
    let ids = launched(&mut book, 10);
    check(
        &mut book,
        status(ids[0].clone(), TaskState::Running),
        11,
        &[changed("a")],
    );
    // A repeat is about nothing new.
    check(
        &mut book,
        status(ids[0].clone(), TaskState::Running),
        12,
        &[],
    );
    let done = AttemptRecord {
        state: TaskState::Finished,
        ended_ms: Some(20),
        ..attempt("a", 0, 0, 10)
    };
    check(
        &mut book,
        status(ids[0].clone(), TaskState::Finished),
        20,
        &[Effect::StoreEnd(done), changed("a")],
    );
}

#[test]
fn the_last_success_starts_the_jobs_waiting_on_it() {
    let mut book = Book::default();
    submitted(&mut book, job("name = \"a\""));
    submitted(&mut book, job("name = \"b\"\ndepends_on = [\"a\"]"));
    let ids = launched(&mut book, 10);
    let done = ended(attempt("a", 0, 0, 10), TaskState::Finished, 20, None);
    check(
        &mut book,
        status(ids[0].clone(), TaskState::Finished),
        20,
        &[Effect::StoreEnd(done), changed("a"), changed("b")],
    );
    assert_eq!(book.job("b").unwrap().state(), JobState::Active);
}

#[test]
fn a_task_no_job_waits_on_is_killed() {
    let mut book = Book::default();
    let stray = task_id("gone", 0, 0);
    check(
        &mut book,
        status(stray.clone(), TaskState::Running),
        5,
        &[kill(stray.clone(), KillWhy::Unknown)],
    );
    // One that ended needs no kill.
    check(&mut book, status(stray, TaskState::Failed), 6, &[]);
}

#[test]
fn an_unhealthy_replica_is_killed_once() {
    let mut book = Book::default();
    submitted(
        &mut book,
        job("name = \"web\"\nkind = \"service\"\nreplicas = 1\n[health_check]\ncommand = { shell = \"true\" }"),
    );
    let ids = launched(&mut book, 10);
    let unhealthy = Input::Status {
        task: ids[0].clone(),
        state: TaskState::Running,
        exit_code: None,
        message: None,
        healthy: Some(false),
    };
    check(
        &mut book,
        unhealthy.clone(),
        11,
        &[kill(ids[0].clone(), KillWhy::Unhealthy), changed("web")],
    );
    check(&mut book, unhealthy, 12, &[]);
}

#[test]
fn launches_that_never_happened_are_stored_as_lost() {
    let mut book = Book::default();
    submitted(&mut book, job("name = \"a\""));
    let ids = launched(&mut book, 10);
    let lost = ended(attempt("a", 0, 0, 10), TaskState::Lost, 12, Some("refused"));
    let input = Input::NotLaunched {
        tasks: ids,
        why: "refused".into(),
    };
    check(
        &mut book,
        input,
        12,
        &[Effect::StoreAttempt(lost), changed("a")],
    );
    assert_eq!(book.candidates(12, 10)[0].attempt, 1, "it runs again");
}

#[test]
fn the_framework_removed_ends_every_attempt_in_flight() {
    let mut book = Book::default();
    submitted(&mut book, job("name = \"a\"\ncount = 2"));
    launched(&mut book, 10);
    let why = Some("the framework was removed");
    check(
        &mut book,
        Input::FrameworkRemoved,
        15,
        &[
            Effect::StoreAttempt(ended(attempt("a", 0, 0, 10), TaskState::Lost, 15, why)),
            Effect::StoreAttempt(ended(attempt("a", 1, 0, 10), TaskState::Lost, 15, why)),
            changed("a"),
        ],
    );
    assert!(book.in_flight().is_empty());
}

#[test]
fn stop_stores_the_job_stopped_and_kills_what_runs() {
    let mut book = Book::default();
    let a = job("name = \"a\"\ncount = 2");
    submitted(&mut book, a.clone());
    let ids = launched(&mut book, 10);
    refused(
        &mut book,
        Input::Stop {
            name: "a".into(),
            by: "bob".into(),
        },
        &BookError::NotOwner {
            name: "a".into(),
            owner: "alice".into(),
        },
    );
    let record = JobRecord {
        stopped: true,
        ..JobRecord::new(&a, 0, 0)
    };
    check(
        &mut book,
        Input::Stop {
            name: "a".into(),
            by: "alice".into(),
        },
        20,
        &[
            stored("a", record),
            kill(ids[0].clone(), KillWhy::Stopped),
            kill(ids[1].clone(), KillWhy::Stopped),
            changed("a"),
        ],
    );
}

#[test]
fn delete_forgets_the_job_and_fails_its_dependents() {
    let mut book = Book::default();
    submitted(&mut book, job("name = \"a\""));
    submitted(&mut book, job("name = \"b\"\ndepends_on = [\"a\"]"));
    let ids = launched(&mut book, 10);
    check(
        &mut book,
        Input::Delete {
            name: "a".into(),
            by: "alice".into(),
        },
        20,
        &[
            Effect::ForgetJob("a".into()),
            kill(ids[0].clone(), KillWhy::Deleted),
            changed("a"),
            changed("b"),
        ],
    );
    assert_eq!(book.job("b").unwrap().state(), JobState::Failed);
    refused(
        &mut book,
        Input::Delete {
            name: "a".into(),
            by: "alice".into(),
        },
        &BookError::NotFound("a".into()),
    );
}

#[test]
fn scale_stores_the_new_count_and_kills_the_replicas_scaled_away() {
    let mut book = Book::default();
    let web = job("name = \"web\"\nkind = \"service\"\nreplicas = 2");
    submitted(&mut book, web.clone());
    let ids = launched(&mut book, 10);
    let mut raw = web.raw.clone();
    raw.replicas = Some(1);
    let record = JobRecord {
        spec: raw,
        ..JobRecord::new(&web, 0, 0)
    };
    let input = |replicas| Input::Scale {
        name: "web".into(),
        replicas,
        by: "alice".into(),
    };
    check(
        &mut book,
        input(1),
        20,
        &[
            stored("web", record),
            kill(ids[1].clone(), KillWhy::ScaledAway),
            changed("web"),
        ],
    );
    submitted(&mut book, job("name = \"batch\""));
    refused(
        &mut book,
        Input::Scale {
            name: "batch".into(),
            replicas: 2,
            by: "alice".into(),
        },
        &BookError::NotService("batch".into()),
    );
}

#[test]
fn restart_kills_every_replica_and_stores_nothing() {
    let mut book = Book::default();
    submitted(
        &mut book,
        job("name = \"web\"\nkind = \"service\"\nreplicas = 2"),
    );
    let ids = launched(&mut book, 10);
    check(
        &mut book,
        Input::Restart {
            name: "web".into(),
            by: "alice".into(),
        },
        20,
        &[
            kill(ids[0].clone(), KillWhy::Restarted),
            kill(ids[1].clone(), KillWhy::Restarted),
        ],
    );
}

#[test]
fn an_update_stores_the_next_generation_before_its_first_step() {
    let mut book = Book::default();
    let v1 =
        job("name = \"web\"\nkind = \"service\"\nreplicas = 1\nmax_surge = 0\nmax_unavailable = 1");
    submitted(&mut book, v1);
    let ids = launched(&mut book, 10);
    book.handle(status(ids[0].clone(), TaskState::Running), 11)
        .unwrap();
    let v2 = job("name = \"web\"\nkind = \"service\"\nreplicas = 1\nmax_surge = 0\nmax_unavailable = 1\nenv = { V = \"2\" }");
    let record = JobRecord {
        generation: 1,
        ..JobRecord::new(&v2, 0, 0)
    };
    check(
        &mut book,
        Input::Update(v2.clone()),
        20,
        &[
            stored("web", record),
            kill(ids[0].clone(), KillWhy::Updated),
            changed("web"),
        ],
    );
    let mut by_bob = v2;
    by_bob.owner = "bob".into();
    refused(
        &mut book,
        Input::Update(by_bob),
        &BookError::NotOwner {
            name: "web".into(),
            owner: "alice".into(),
        },
    );
}

#[test]
fn a_tick_stores_a_time_limit_before_its_kill() {
    let mut book = Book::default();
    submitted(&mut book, job("name = \"a\"\ntimeout_s = 1"));
    let ids = launched(&mut book, 10);
    check(&mut book, Input::Tick, 1009, &[]);
    let timed_out = AttemptRecord {
        timed_out_ms: Some(1010),
        ..attempt("a", 0, 0, 10)
    };
    check(
        &mut book,
        Input::Tick,
        1010,
        &[
            Effect::StoreAttempt(timed_out),
            kill(ids[0].clone(), KillWhy::TimedOut),
            changed("a"),
        ],
    );
    check(&mut book, Input::Tick, 2000, &[]);
}

#[test]
fn a_tick_starts_a_periodic_run_stored_as_a_job_of_its_own() {
    let mut book = Book::default();
    let every = job("name = \"p\"\nkind = \"periodic\"\nschedule = \"*/10 * * * * *\"");
    submitted(&mut book, every);
    check(&mut book, Input::Tick, 9_999, &[]);
    let effects = book.handle(Input::Tick, 10_000).unwrap();
    let run = book.job("p-10").unwrap().spec().clone();
    assert_eq!(
        effects,
        [
            stored("p-10", JobRecord::new(&run, 1, 10_000)),
            changed("p-10")
        ]
    );
}
