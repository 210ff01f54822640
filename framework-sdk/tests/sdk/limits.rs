//! The driver's failure paths against the fake coordinator: requests split to fit the limits
//! the coordinator told (and split again on a `413` it did not announce), the true count of
//! wanted tasks told again after launches fail, interrupted accepts settled by reconcile, and
//! a framework offered nothing for long reviving by itself.
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::driver::{config, count, has, start, start_with, stop, WITHIN};
use crate::fake::probe::{Mode, Probe};
use crate::fake::{offer, wait_for, Fake};
use framework_sdk::faults::{Call, Fault, FaultInjector};
use framework_sdk::Driver;
use protocol::messages::RequestLimits;
use protocol::FrameworkEvent;

const SMALL: RequestLimits = RequestLimits {
    max_body_bytes: 16 * 1024,
    ..RequestLimits::DEFAULT
};

fn offers(id: protocol::FrameworkId, n: usize) -> FrameworkEvent {
    FrameworkEvent::Offers {
        offers: (0..n)
            .map(|_| offer(id, "cpus=64,mem=65536", "cpus=64,mem=65536"))
            .collect(),
    }
}

/// Every task id accepted, and how many accepts named each.
fn accepted(fake: &Fake) -> (HashSet<String>, usize) {
    fake.recorded(|r| {
        let all: Vec<String> = r
            .accepts
            .iter()
            .flat_map(|a| a.tasks.iter().map(|t| t.task_id.to_string()))
            .collect();
        let n = all.len();
        (all.into_iter().collect(), n)
    })
}

#[tokio::test]
async fn accepts_are_split_to_fit_the_limits_the_coordinator_told() {
    let fake = Fake::start().await;
    fake.limits(SMALL);
    let (id, handle) = start(&fake, Probe::new(&fake, Mode::Pack(40), 800)).await;
    assert!(fake.push(offers(id, 20)));
    wait_for(WITHIN, "800 tasks accepted", || accepted(&fake).1 >= 800).await;
    let (unique, all) = accepted(&fake);
    assert_eq!((unique.len(), all), (800, 800), "each task once");
    fake.recorded(|r| {
        assert!(r.too_large.is_empty(), "nothing refused: {:?}", r.too_large);
        assert!(r.accept_calls > 1, "split into several calls");
        assert!(
            r.body_sizes
                .iter()
                .all(|&n| n as u64 <= SMALL.max_body_bytes),
            "{:?}",
            r.body_sizes
        );
    });
    assert!(!has(&fake, "launch_failed"));
    stop(&fake, id, handle).await;
}

#[tokio::test]
async fn a_413_is_answered_by_splitting_and_sending_again_never_by_giving_tasks_back() {
    let fake = Fake::start().await;
    // A limit nobody announced: a proxy in front, or a coordinator older than the limits.
    fake.body_limit(SMALL.max_body_bytes as usize);
    let (id, handle) = start(&fake, Probe::new(&fake, Mode::Pack(40), 800)).await;
    assert!(fake.push(offers(id, 20)));
    wait_for(WITHIN, "800 tasks accepted", || accepted(&fake).1 >= 800).await;
    let (unique, all) = accepted(&fake);
    assert_eq!((unique.len(), all), (800, 800), "each task once");
    let refused = fake.recorded(|r| r.too_large.clone());
    assert!(
        refused.iter().any(|a| a == "accepts"),
        "the first call was too large: {refused:?}"
    );
    assert!(!has(&fake, "launch_failed"), "no task was handed back");
    stop(&fake, id, handle).await;
}

#[tokio::test]
async fn a_single_accept_refused_as_too_large_is_sent_with_fewer_tasks_and_none_is_lost() {
    let fake = Fake::start().await;
    // Under one accept of 40 tasks: it is halved until it fits, unannounced.
    fake.body_limit(4 * 1024);
    let (id, handle) = start(&fake, Probe::new(&fake, Mode::Pack(40), 40)).await;
    assert!(fake.push(offers(id, 1)));
    wait_for(WITHIN, "a launch", || accepted(&fake).1 > 0).await;
    wait_for(WITHIN, "the rest handed back", || {
        has(&fake, "launch_failed")
    })
    .await;
    let (_, launched) = accepted(&fake);
    let probe = stop(&fake, id, handle).await;
    assert!(launched < 40, "{launched}");
    assert_eq!(
        launched + probe.pending,
        40,
        "every task launched or queued again"
    );
}

#[tokio::test]
async fn an_accept_larger_than_any_request_launches_what_fits_and_asks_for_the_rest() {
    let fake = Fake::start().await;
    fake.limits(RequestLimits {
        max_body_bytes: 8 * 1024,
        ..RequestLimits::DEFAULT
    });
    let (id, handle) = start(&fake, Probe::new(&fake, Mode::Pack(200), 200)).await;
    assert!(fake.push(offers(id, 1)));
    wait_for(WITHIN, "the rest handed back", || {
        has(&fake, "launch_failed")
    })
    .await;
    let (unique, all) = accepted(&fake);
    assert!(
        all > 0 && all < 200 && unique.len() == all,
        "{all} launched"
    );
    wait_for(WITHIN, "a revive for the rest", || {
        fake.recorded(|r| {
            r.revives
                .iter()
                .any(|v| v.pending_tasks == Some(200 - all as u32))
        })
    })
    .await;
    assert!(fake.recorded(|r| r.too_large.is_empty()));
    stop(&fake, id, handle).await;
}

#[tokio::test]
async fn after_launches_fail_the_coordinator_hears_the_true_count_again() {
    let fake = Fake::start().await;
    let (id, handle) = start(&fake, Probe::new(&fake, Mode::Pack(10), 100)).await;
    fake.reject_accept(503, "unavailable", "try again");
    assert!(fake.push(offers(id, 10)));
    wait_for(WITHIN, "the launches fail", || has(&fake, "launch_failed")).await;
    // The batch said nothing more was wanted: every task was placed.
    assert_eq!(fake.recorded(|r| r.accept_batch_pending.clone()), [Some(0)]);
    // Then the tasks are queued again, and the coordinator must hear so, or it never offers
    // this framework anything again.
    wait_for(WITHIN, "a revive with the true count", || {
        fake.recorded(|r| r.revives.iter().any(|v| v.pending_tasks == Some(100)))
    })
    .await;
    stop(&fake, id, handle).await;
}

/// Faults by rule: the first `times` calls of `action` get `fault`.
#[derive(Debug, Default)]
struct Script {
    rules: Mutex<Vec<(String, Fault, usize)>>,
    seen: Mutex<Vec<String>>,
}

impl Script {
    fn new(rules: &[(&str, Fault, usize)]) -> Arc<Self> {
        Arc::new(Self {
            rules: Mutex::new(
                rules
                    .iter()
                    .map(|(a, f, n)| ((*a).to_owned(), f.clone(), *n))
                    .collect(),
            ),
            seen: Mutex::default(),
        })
    }
}

impl FaultInjector for Script {
    fn fault(&self, call: &Call<'_>) -> Option<Fault> {
        self.seen.lock().unwrap().push(call.action().to_owned());
        let mut rules = self.rules.lock().unwrap();
        let rule = rules
            .iter_mut()
            .find(|(a, _, n)| a == call.action() && *n > 0)?;
        rule.2 -= 1;
        Some(rule.1.clone())
    }
}

async fn start_faulty(
    fake: &Fake,
    probe: Probe,
    faults: Arc<Script>,
) -> (
    protocol::FrameworkId,
    tokio::task::JoinHandle<Result<Probe, framework_sdk::SdkError>>,
) {
    let driver = Driver::new(config(fake), probe)
        .unwrap()
        .with_faults(faults);
    let handle = tokio::spawn(driver.run());
    wait_for(WITHIN, "stream open", || {
        fake.recorded(|r| r.streams_opened == 1)
    })
    .await;
    (fake.id(), handle)
}

#[tokio::test]
async fn an_accept_whose_answer_is_lost_is_settled_by_reconcile_not_launched_twice() {
    let fake = Fake::start().await;
    let faults = Script::new(&[("accepts", Fault::LoseAnswer, 1)]);
    let (id, handle) = start_faulty(&fake, Probe::new(&fake, Mode::Launch, 3), faults).await;
    assert!(fake.push(offers(id, 3)));
    wait_for(WITHIN, "a reconcile of the three", || {
        fake.recorded(|r| r.reconciles.iter().any(|c| c.task_ids.len() == 3))
    })
    .await;
    // The coordinator knows them (it answered 200): launched, not handed back.
    assert!(!has(&fake, "launch_failed"));
    assert_eq!(accepted(&fake).1, 3, "sent once");
    let probe = stop(&fake, id, handle).await;
    assert_eq!(probe.pending, 0);
}

#[tokio::test]
async fn an_interrupted_accept_the_coordinator_never_saw_goes_back_to_the_queue() {
    let fake = Fake::start().await;
    let faults = Script::new(&[("accepts", Fault::LoseAnswer, 1)]);
    // Not known, as a whole and then each alone.
    for _ in 0..3 {
        fake.answer_reconcile(404, "task_not_found", "unknown task");
    }
    let (id, handle) = start_faulty(&fake, Probe::new(&fake, Mode::Launch, 2), faults).await;
    assert!(fake.push(offers(id, 2)));
    wait_for(WITHIN, "the two handed back", || {
        count(&fake, "launch_failed 2 -") == 1
    })
    .await;
    let probe = stop(&fake, id, handle).await;
    assert_eq!(probe.pending, 2);
}

#[tokio::test]
async fn refused_rate_limited_and_unavailable_calls_end_in_launches() {
    let fake = Fake::start().await;
    let unavailable = Fault::Answer {
        status: 503,
        code: "unavailable".into(),
    };
    let faults = Script::new(&[
        ("accepts", Fault::Refuse, 1),
        (
            "accepts",
            Fault::Answer {
                status: 429,
                code: "rate_limited".into(),
            },
            1,
        ),
        ("accepts", unavailable.clone(), 1),
        ("revive", unavailable, 1),
    ]);
    let probe = Probe::new(&fake, Mode::Launch, 2);
    let (id, handle) = start_faulty(&fake, probe, faults.clone()).await;
    let tries = || {
        faults
            .seen
            .lock()
            .unwrap()
            .iter()
            .filter(|a| *a == "accepts")
            .count()
    };
    // Each round of offers meets the next fault.
    for round in 1..=3 {
        assert!(fake.push(offers(id, 2)));
        wait_for(WITHIN, "the round answered", || tries() >= round).await;
    }
    assert_eq!(count(&fake, "launch_failed 2 rate_limited"), 1);
    // The failures are followed by a revive that says what is wanted, past the one refused.
    wait_for(WITHIN, "a revive", || {
        fake.recorded(|r| r.revives.iter().any(|v| v.pending_tasks == Some(2)))
    })
    .await;
    assert!(fake.push(offers(id, 2)));
    wait_for(WITHIN, "both launched", || accepted(&fake).1 == 2).await;
    stop(&fake, id, handle).await;
}

#[tokio::test]
async fn a_framework_offered_nothing_for_long_revives_with_its_count() {
    let fake = Fake::start().await;
    let mut c = config(&fake);
    c.offer_wait_warning = Duration::from_millis(200);
    let (id, handle) = start_with(&fake, Probe::new(&fake, Mode::Launch, 5), c).await;
    wait_for(WITHIN, "a revive", || {
        fake.recorded(|r| r.revives.iter().any(|v| v.pending_tasks == Some(5)))
    })
    .await;
    stop(&fake, id, handle).await;
}
