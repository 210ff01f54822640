//! Drain and maintenance routes, for admin operators:
//! `POST /api/v1/agents/{id}/drain` (`{"deadline_s": N}`) and
//! `POST /api/v1/agents/{id}/reactivate` (`{}`). Both answer the agent's state afterwards
//! ([`AgentMaintenance`]); an unknown agent is 404 `agent_not_found`, a bad deadline 400
//! `invalid_field` naming `deadline_s`, and a refused call changes nothing. Reactivating an
//! agent that is not draining is 200 and changes nothing (idempotent, as a retry should be).
//! The rules are the registry's (`State::drain_agent`).

use axum::extract::State;
use axum::Json;
use protocol::maintenance::{AgentMaintenance, DrainAgent};
use protocol::messages::Empty;
use protocol::AgentId;

use super::error::ApiError;
use super::extract::{Body, Id};
use super::params::AgentPath;
use super::Route;
use crate::runtime::Coordinator;

/// The drain and reactivate routes.
pub fn routes() -> Vec<Route> {
    vec![
        Route::post("/api/v1/agents/{id}/drain", drain),
        Route::post("/api/v1/agents/{id}/reactivate", reactivate),
    ]
}

/// Reads the drain body field by field, so that every refusal names `deadline_s` (serde's own
/// message for a string where a number belongs does not name the field).
fn drain_request(body: serde_json::Value) -> Result<DrainAgent, ApiError> {
    let invalid = |reason: String| ApiError::InvalidField {
        field: DrainAgent::FIELD,
        reason,
    };
    let serde_json::Value::Object(fields) = body else {
        return Err(ApiError::BadBody(
            "the body must be a JSON object: {\"deadline_s\": SECONDS}".into(),
        ));
    };
    if let Some(unknown) = fields.keys().find(|k| k.as_str() != DrainAgent::FIELD) {
        return Err(ApiError::BadBody(format!(
            "unknown field {unknown:?}; the only field is deadline_s"
        )));
    }
    let req = match fields.get(DrainAgent::FIELD) {
        None => {
            return Err(invalid(
                "missing: give the seconds until remaining tasks are killed".into(),
            ))
        }
        Some(serde_json::Value::Number(n)) => DrainAgent {
            deadline_s: n.as_f64().unwrap_or(f64::NAN),
        },
        Some(other) => return Err(invalid(format!("{other} is not a number of seconds"))),
    };
    req.validate().map_err(|e| invalid(e.to_string()))?;
    Ok(req)
}

#[utoipa::path(post, path = "/api/v1/agents/{id}/drain", tag = "maintenance",
    summary = "Drain an agent: no new offers, its tasks killed at the deadline",
    params(AgentPath),
    request_body = DrainAgent,
    responses((status = 200, description = "The agent's maintenance state afterwards", body = AgentMaintenance)))]
async fn drain(
    State(c): State<Coordinator>,
    Id(id): Id<AgentId>,
    Body(body): Body<serde_json::Value>,
) -> Result<Json<AgentMaintenance>, ApiError> {
    let req = drain_request(body)?;
    let answer = c.run(|s, now, fx| s.drain_agent(id, req.deadline_s, now, fx))?;
    Ok(Json(answer))
}

#[utoipa::path(post, path = "/api/v1/agents/{id}/reactivate", tag = "maintenance",
    summary = "Reactivate a draining or drained agent",
    params(AgentPath),
    request_body = Empty,
    responses((status = 200, description = "The agent's maintenance state afterwards", body = AgentMaintenance)))]
async fn reactivate(
    State(c): State<Coordinator>,
    Id(id): Id<AgentId>,
    Body(_): Body<Empty>,
) -> Result<Json<AgentMaintenance>, ApiError> {
    Ok(Json(c.run(|s, _, fx| s.reactivate_agent(id, fx))?))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_bad_deadline_names_the_field() {
        for bad in [
            r#"{}"#,
            r#"{"deadline_s": "10"}"#,
            r#"{"deadline_s": -1}"#,
            r#"{"deadline_s": 1e300}"#,
            r#"{"deadline_s": null}"#,
        ] {
            let err = drain_request(serde_json::from_str(bad).unwrap()).unwrap_err();
            assert!(err.to_string().contains("deadline_s"), "{bad}: {err}");
            assert!(matches!(err, ApiError::InvalidField { .. }), "{bad}: {err}");
        }
        for bad in [r#"[]"#, r#"{"deadline_s": 1, "force": true}"#] {
            let err = drain_request(serde_json::from_str(bad).unwrap()).unwrap_err();
            assert!(matches!(err, ApiError::BadBody(_)), "{bad}: {err}");
        }
        let ok = drain_request(serde_json::from_str(r#"{"deadline_s": 2.5}"#).unwrap()).unwrap();
        assert_eq!(ok.deadline_s, 2.5);
    }
}
