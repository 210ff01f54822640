//! Unit tests of the write-first calls' state side: planning changes nothing, and a plan whose
//! record was written is checked again when applied (see `Coordinator::run_write_first`).

#![allow(clippy::unwrap_used)]

use super::tests::new_books;
use super::*;
use crate::records::Change;

fn now(ms: u64) -> Now {
    let start = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap();
    Now {
        ms,
        wall: start + chrono::Duration::milliseconds(i64::try_from(ms).unwrap()),
    }
}

fn registration(name: &str, role: &str, id: Option<FrameworkId>) -> FrameworkRegistration {
    FrameworkRegistration {
        name: name.into(),
        role: role.parse().unwrap(),
        failover_timeout_s: Some(30.0),
        framework_id: id,
        demand: None,
        owner: None,
        gpu_resources: false,
        partition_timeout_s: None,
    }
}

/// What a caller can see of the books (the views the API serves).
fn books(s: &State) -> String {
    format!("{:?} {:?}", s.frameworks(), s.roles())
}

#[test]
fn planning_changes_no_books_and_applying_the_plan_is_registering() {
    let mut s = new_books(&Settings::default());
    let before = books(&s);
    let plan = s
        .plan_registration(&registration("f", "eng/new", None), &now(5))
        .unwrap();
    assert!(plan.new);
    assert_eq!(books(&s), before, "a plan changes nothing");
    let weight = protocol::Weight::new(2.0).unwrap();
    let role = "ops/new".parse().unwrap();
    assert_eq!(
        s.plan_role_weight(&role, weight).unwrap(),
        Change::SetWeight(role.clone(), weight)
    );
    assert_eq!(books(&s), before, "a weight plan creates no role");

    let mut fx = Vec::new();
    let (id, new) = s
        .apply_written_registration(registration("f", "eng/new", None), &plan, &now(9), &mut fx)
        .unwrap();
    assert_eq!((id, new), (plan.id, true));
    // Already written, and the books agree with it: nothing queued again (and no stream yet to
    // tell anything).
    assert_eq!(fx, vec![]);
    let fws = s.frameworks();
    assert_eq!(fws.len(), 1);
    assert_eq!(fws[0].registered_at, plan.record.registered_at);

    // The same as `register_framework` would have stored.
    let mut t = new_books(&Settings::default());
    let mut fx = Vec::new();
    t.register_framework(registration("f", "eng/new", None), &now(5), &mut fx)
        .unwrap();
    assert_eq!(fx, vec![Effect::Persist(Change::PutFramework(plan.record))]);
}

#[test]
fn a_written_registration_that_no_longer_passes_changes_nothing_and_puts_the_store_back() {
    let config = Settings {
        max_frameworks: 1,
        ..Settings::default()
    };
    let mut s = new_books(&config);
    // A new framework's record was written; meanwhile another took the last place.
    let plan = s
        .plan_registration(&registration("a", "eng", None), &now(0))
        .unwrap();
    let mut fx = Vec::new();
    s.register_framework(registration("b", "ops", None), &now(1), &mut fx)
        .unwrap();
    let before = books(&s);
    let mut fx = Vec::new();
    let err = s
        .apply_written_registration(registration("a", "eng", None), &plan, &now(2), &mut fx)
        .unwrap_err();
    assert!(matches!(err, StateError::TooManyFrameworks(1)), "{err}");
    assert_eq!(books(&s), before);
    assert_eq!(fx, vec![Effect::Persist(Change::ForgetFramework(plan.id))]);

    // A re-registration's record was written; meanwhile the framework was removed.
    let (b, _) = s
        .frameworks()
        .first()
        .map(|f| (f.framework_id, ()))
        .unwrap();
    let plan = s
        .plan_registration(&registration("b2", "eng", Some(b)), &now(3))
        .unwrap();
    assert!(!plan.new);
    let mut fx = Vec::new();
    s.remove_framework(b, "failover timeout passed", &mut fx)
        .unwrap();
    let before = books(&s);
    let mut fx = Vec::new();
    let err = s
        .apply_written_registration(registration("b2", "eng", Some(b)), &plan, &now(4), &mut fx)
        .unwrap_err();
    assert!(
        matches!(err, StateError::FrameworkRemoved(id) if id == b),
        "{err}"
    );
    assert_eq!(books(&s), before);
    assert_eq!(fx, vec![Effect::Persist(Change::RemoveFramework(b))]);
}

#[test]
fn a_written_removal_is_not_queued_again() {
    let mut s = new_books(&Settings::default());
    let mut fx = Vec::new();
    let (fw, _) = s
        .register_framework(registration("f", "eng", None), &now(0), &mut fx)
        .unwrap();
    assert_eq!(s.plan_removal(fw).unwrap(), Change::RemoveFramework(fw));
    assert_eq!(s.frameworks().len(), 1, "planning removes nothing");
    let mut fx = Vec::new();
    s.remove_written_framework(fw, "deleted by request", &mut fx)
        .unwrap();
    assert!(s.frameworks().is_empty());
    // Already written: the framework is told and its stream ended, nothing queued again.
    assert_eq!(
        fx,
        vec![
            Effect::ToFramework(
                fw,
                protocol::FrameworkEvent::Error {
                    message: "framework removed: deleted by request".into()
                }
            ),
            Effect::CloseStream(fw),
            Effect::Allocate,
        ]
    );
    // Gone meanwhile (a failover removal): refused as an unknown framework.
    assert!(matches!(
        s.remove_written_framework(fw, "again", &mut fx),
        Err(StateError::UnknownFramework(id)) if id == fw
    ));
    assert!(matches!(
        s.plan_removal(fw),
        Err(StateError::UnknownFramework(_))
    ));
}
