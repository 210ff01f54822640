//! Every call but SUBSCRIBE: checked against the framework's live stream (`Mesos-Stream-Id`
//! missing or wrong: 400; no live stream: 403), then translated into the registry operation
//! the native API runs, with the same ownership checks. Success is `202` with no body, as
//! Mesos answers; call types Parley has no use for (MESSAGE, REQUEST, inverse offers,
//! operation status) are answered 202 and ignored, since any other status kills a pymesos
//! driver.
//!
//! Where Mesos reports a problem as a task status rather than an HTTP error, so does this:
//! an ACCEPT of offers that are gone answers 202 and reports its tasks `TASK_DROPPED` (other
//! refusals of the books: `TASK_ERROR`, with the reason in `message`); a KILL or RECONCILE of
//! an unknown task reports `TASK_UNKNOWN` (`PARTITION_AWARE` frameworks) or `TASK_LOST`. A
//! malformed call (bad ids, unsupported operations or resources) is a 4xx naming the field,
//! and changes nothing.

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use protocol::messages::{AcceptRequest, DeclineRequest};
use protocol::{FrameworkId, OfferId, TaskId};
use serde_json::Value;

use super::convert::{self, reconciled_json, state_name, update_event};
use super::stream::{Session, STREAM_ID_HEADER};
use super::types::{self, Call};
use super::{Mesos, Refusal};
use crate::state::{Decline, StateError};
use crate::web::auth::Caller;
use crate::web::error::ApiError;
use crate::web::input;

fn invalid(field: &'static str, reason: impl Into<String>) -> ApiError {
    ApiError::InvalidField {
        field,
        reason: reason.into(),
    }
}

/// Answers one call (not SUBSCRIBE).
pub async fn call(m: &Mesos, caller: &Caller, headers: &HeaderMap, call: Call) -> Response {
    match handle(m, caller, headers, call).await {
        Ok(()) => StatusCode::ACCEPTED.into_response(),
        Err(r) => r.into_response(),
    }
}

/// Whether a task unknown to the books may still be on an agent awaited since a restart or
/// failover: on the agent the framework names (`is_awaited`), or, naming none, on any
/// (`any_awaited`).
fn maybe_on_awaited(
    agent: Option<&types::Id>,
    any_awaited: bool,
    is_awaited: impl Fn(protocol::AgentId) -> bool,
) -> bool {
    match agent {
        Some(a) => a.value.parse().is_ok_and(is_awaited),
        None => any_awaited,
    }
}

/// The framework a call is from, with its live session.
fn session(
    m: &Mesos,
    headers: &HeaderMap,
    framework_id: Option<&types::Id>,
) -> Result<(FrameworkId, Session), Refusal> {
    let bad = |msg: String| Refusal::Mesos(StatusCode::BAD_REQUEST, "invalid_field", msg);
    let fid = framework_id.ok_or_else(|| {
        bad("invalid framework_id: every call but a first SUBSCRIBE names its framework".into())
    })?;
    let id: FrameworkId = convert::uuid_id(fid, "framework_id")?;
    let Some(given) = headers.get(STREAM_ID_HEADER) else {
        return Err(bad(
            "missing Mesos-Stream-Id header: send the one the SUBSCRIBE answer carried".into(),
        ));
    };
    let Some(session) = m.sessions.get(id) else {
        return Err(Refusal::Mesos(
            StatusCode::FORBIDDEN,
            "not_subscribed",
            format!("framework {id} is not subscribed: SUBSCRIBE first"),
        ));
    };
    if given.as_bytes() != session.stream_id.as_bytes() {
        return Err(bad(format!(
            "Mesos-Stream-Id does not match framework {id}'s current stream; SUBSCRIBE again"
        )));
    }
    Ok((id, session))
}

async fn handle(
    m: &Mesos,
    caller: &Caller,
    headers: &HeaderMap,
    call: Call,
) -> Result<(), Refusal> {
    let (id, session) = session(m, headers, call.framework_id.as_ref())?;
    let ctx = Ctx {
        m,
        caller,
        id,
        session: &session,
    };
    let out = match call.kind.as_str() {
        "ACCEPT" => ctx.accept(call.accept),
        "DECLINE" => ctx.decline(call.decline),
        "ACKNOWLEDGE" => ctx.acknowledge(call.acknowledge),
        "KILL" => ctx.kill(call.kill),
        "RECONCILE" => ctx.reconcile(call.reconcile.unwrap_or_default()),
        "REVIVE" => ctx.run(|s, now, fx| s.revive(id, None, now, fx)),
        "SUPPRESS" => ctx.run(|s, _, _| s.suppress(id)),
        "TEARDOWN" => ctx.teardown().await,
        other => {
            tracing::debug!(framework = %id, call = other, "Mesos call ignored");
            Ok(())
        }
    };
    Ok(out?)
}

struct Ctx<'a> {
    m: &'a Mesos,
    caller: &'a Caller,
    id: FrameworkId,
    session: &'a Session,
}

impl Ctx<'_> {
    /// Runs one registry operation as the framework (ownership checked under the lock).
    fn run(
        &self,
        f: impl FnOnce(
            &mut crate::state::State,
            &crate::state::Now,
            &mut crate::state::Effects,
        ) -> Result<(), StateError>,
    ) -> Result<(), ApiError> {
        self.m.coordinator.run(|s, now, fx| {
            self.caller.framework(s, self.id)?;
            Ok(f(s, now, fx)?)
        })
    }

    /// Puts an event the Mesos API made on the framework's stream (dropped if the stream
    /// is too far behind, like a lost message; reconciliation can be asked again).
    fn push(&self, event: Value) {
        if self.session.extra.try_send(event).is_err() {
            tracing::warn!(framework = %self.id, "Mesos stream behind: event dropped");
        }
    }

    fn unknown_state(&self) -> &'static str {
        if self.session.partition_aware {
            "TASK_UNKNOWN"
        } else {
            "TASK_LOST"
        }
    }

    fn accept(&self, accept: Option<types::Accept>) -> Result<(), ApiError> {
        let a = accept.ok_or_else(|| invalid("accept", "an ACCEPT call needs accept"))?;
        let offer_ids = a
            .offer_ids
            .iter()
            .map(|o| convert::uuid_id::<OfferId>(o, "accept.offer_ids"))
            .collect::<Result<Vec<_>, _>>()?;
        let mut tasks = Vec::new();
        for op in &a.operations {
            if op.kind != "LAUNCH" {
                return Err(invalid(
                    "accept.operations.type",
                    format!(
                        "{:?} is not supported: Parley runs LAUNCH of command tasks only",
                        op.kind
                    ),
                ));
            }
            for t in op.launch.iter().flat_map(|l| &l.task_infos) {
                tasks.push(convert::task_spec(t)?);
            }
        }
        let req = input::accept(AcceptRequest {
            offer_ids,
            tasks,
            refuse_seconds: a.filters.and_then(|f| f.refuse_seconds),
        })?;
        let ids: Vec<TaskId> = req.tasks.iter().map(|t| t.task_id.clone()).collect();
        let agent = req.tasks.first().map(|t| t.agent_id.to_string());
        let id = self.id;
        let out = self.m.coordinator.run(|s, now, fx| {
            self.caller.framework(s, id)?;
            Ok::<_, ApiError>(s.accept(id, req, now, fx)?)
        });
        match out {
            Ok(_) => Ok(()),
            Err(ApiError::State(e)) => {
                let (state, reason) = match e {
                    StateError::UnknownOffer(_)
                    | StateError::OfferGone { .. }
                    | StateError::OfferNotYours(_) => ("TASK_DROPPED", "REASON_INVALID_OFFERS"),
                    _ => ("TASK_ERROR", "REASON_TASK_INVALID"),
                };
                tracing::info!(framework = %id, error = %e, "Mesos ACCEPT refused; tasks reported {state}");
                let at = convert::seconds(protocol::now());
                for t in ids {
                    let mut status =
                        reconciled_json(t.as_str(), state, agent.clone(), Some(&e.to_string()), at);
                    status["reason"] = Value::from(reason);
                    self.push(update_event(status));
                }
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn decline(&self, decline: Option<types::Decline>) -> Result<(), ApiError> {
        let d = decline.ok_or_else(|| invalid("decline", "a DECLINE call needs decline"))?;
        let offer_ids = d
            .offer_ids
            .iter()
            .map(|o| convert::uuid_id::<OfferId>(o, "decline.offer_ids"))
            .collect::<Result<Vec<_>, _>>()?;
        let d = input::decline(DeclineRequest {
            offer_ids,
            refuse_seconds: d.filters.and_then(|f| f.refuse_seconds),
            pending_tasks: None,
        })?;
        let id = self.id;
        self.m.coordinator.run(|s, now, fx| {
            self.caller.framework(s, id)?;
            // One at a time: Mesos ignores offers that are no longer outstanding.
            for offer in d.offer_ids {
                let one = Decline {
                    offer_ids: vec![offer],
                    refuse: d.refuse,
                };
                if let Err(e) = s.decline(id, one, now, fx) {
                    tracing::debug!(framework = %id, error = %e, "Mesos DECLINE of an offer ignored");
                }
            }
            Ok(())
        })
    }

    fn acknowledge(&self, ack: Option<types::Acknowledge>) -> Result<(), ApiError> {
        let a =
            ack.ok_or_else(|| invalid("acknowledge", "an ACKNOWLEDGE call needs acknowledge"))?;
        let task = convert::task_id(&a.task_id, "acknowledge.task_id")?;
        let update = convert::update_id(&a.uuid)?;
        let id = self.id;
        self.run(|s, _, _| {
            // An update already acknowledged, or of a forgotten task: nothing to do.
            if let Err(e) = s.acknowledge(id, task, update) {
                tracing::debug!(framework = %id, error = %e, "Mesos ACKNOWLEDGE ignored");
            }
            Ok(())
        })
    }

    fn kill(&self, kill: Option<types::Kill>) -> Result<(), ApiError> {
        let k = kill.ok_or_else(|| invalid("kill", "a KILL call needs kill"))?;
        let value = k.task_id.value.clone();
        let task = TaskId::new(value.clone()).ok();
        let id = self.id;
        let known = self.m.coordinator.run(|s, _, fx| {
            self.caller.framework(s, id)?;
            match task {
                Some(task) => match s.kill(id, task, fx) {
                    Ok(()) => Ok(true),
                    Err(StateError::UnknownTask(_)) => Ok(false),
                    Err(e) => Err(ApiError::State(e)),
                },
                None => Ok(false),
            }
        })?;
        if !known {
            let at = convert::seconds(protocol::now());
            let msg = "no such task of this framework";
            self.push(update_event(reconciled_json(
                &value,
                self.unknown_state(),
                None,
                Some(msg),
                at,
            )));
        }
        Ok(())
    }

    fn reconcile(&self, r: types::Reconcile) -> Result<(), ApiError> {
        let id = self.id;
        // For each task asked about: whether, if unknown, it may be on an awaited agent.
        let (tasks, may_wait) = self.m.coordinator.read(|s| {
            self.caller.framework(s, id)?;
            let any = s.awaited_agents() > 0;
            let may_wait: Vec<bool> = r
                .tasks
                .iter()
                .map(|t| maybe_on_awaited(t.agent_id.as_ref(), any, |a| s.is_awaited(a)))
                .collect();
            Ok::<_, ApiError>((s.tasks(Some(id)), may_wait))
        })?;
        let status = |t: &protocol::messages::TaskInfo| {
            reconciled_json(
                t.task_id.as_str(),
                state_name(t.state),
                Some(t.agent_id.to_string()),
                t.message.as_deref(),
                convert::seconds(t.updated_at),
            )
        };
        if r.tasks.is_empty() {
            // Implicit: every task that is not terminal, as Mesos does.
            for t in tasks.iter().filter(|t| !t.state.is_terminal()) {
                self.push(update_event(status(t)));
            }
            return Ok(());
        }
        let max = self.m.coordinator.config().max_stream_queue;
        if r.tasks.len() > max {
            return Err(invalid(
                "reconcile.tasks",
                format!("{} tasks; ask about at most {max} at a time", r.tasks.len()),
            ));
        }
        let now = convert::seconds(protocol::now());
        for (asked, may_wait) in r.tasks.iter().zip(may_wait) {
            match tasks
                .iter()
                .find(|t| t.task_id.as_str() == asked.task_id.value)
            {
                Some(t) => self.push(update_event(status(t))),
                // Unknown, but maybe on an agent that has not re-registered since a restart or
                // failover: no answer, as Mesos' master gives none while its agents are
                // transitioning (the framework asks again).
                None if may_wait => {}
                None => self.push(update_event(reconciled_json(
                    &asked.task_id.value,
                    self.unknown_state(),
                    None,
                    Some("no such task of this framework"),
                    now,
                ))),
            }
        }
        Ok(())
    }

    async fn teardown(&self) -> Result<(), ApiError> {
        let id = self.id;
        let caller = self.caller.clone();
        // Written first, applied once durable, as DELETE /api/v1/frameworks/{id}.
        self.m
            .coordinator
            .run_write_first(
                |s, _| {
                    caller.framework(s, id)?;
                    Ok::<_, ApiError>(((), vec![s.plan_removal(id)?]))
                },
                move |s, (), _, fx| {
                    Ok(s.remove_written_framework(id, "TEARDOWN by the framework", fx)?)
                },
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_task_waits_only_for_the_awaited_agent_it_names_or_any_when_none() {
        let (a, b, c) = (
            protocol::AgentId::new(),
            protocol::AgentId::new(),
            protocol::AgentId::new(),
        );
        let id = |v: protocol::AgentId| types::Id {
            value: v.to_string(),
        };
        let awaited = |x: protocol::AgentId| x == a || x == c;
        assert!(maybe_on_awaited(Some(&id(a)), true, awaited));
        assert!(maybe_on_awaited(Some(&id(c)), true, awaited));
        assert!(
            !maybe_on_awaited(Some(&id(b)), true, awaited),
            "a known agent"
        );
        let garbled = types::Id {
            value: "not-an-id".into(),
        };
        assert!(
            !maybe_on_awaited(Some(&garbled), true, awaited),
            "no such agent"
        );
        assert!(
            maybe_on_awaited(None, true, awaited),
            "no agent named: maybe any"
        );
        assert!(!maybe_on_awaited(None, false, |_| false), "none awaited");
        assert!(!maybe_on_awaited(Some(&id(a)), false, |_| false));
    }
}
