//! Registering a framework, which both APIs do: `POST /api/v1/frameworks` and the Mesos API's
//! `SUBSCRIBE`.

use protocol::messages::RegisterFramework;
use protocol::FrameworkId;

use super::auth::Caller;
use super::error::ApiError;
use super::input;
use crate::runtime::Coordinator;
use crate::store::Change;

/// What [`register_framework`] did.
#[derive(Debug, Clone, Copy)]
pub struct Registered {
    /// The framework's id (the same one on re-registration).
    pub framework_id: FrameworkId,
    /// A new framework (`false`: re-registered within its failover timeout).
    pub created: bool,
    /// The heartbeat interval of its stream, in seconds.
    pub heartbeat_interval_s: f64,
}

/// Registers (or re-registers) a framework for `caller`: validated, written first (unless the
/// registry holds its record as it is) and applied once durable, pipelined with other
/// registrations (see [`Coordinator::run_write_pipelined`]). Shared by `POST /api/v1/frameworks` and the Mesos
/// API's SUBSCRIBE.
pub async fn register_framework(
    c: &Coordinator,
    caller: &Caller,
    req: RegisterFramework,
) -> Result<Registered, ApiError> {
    let webui_url = req.webui_url.clone();
    let mut input = input::framework_registration(req)?;
    let at_plan = caller.clone();
    let at_apply = caller.clone();
    let (framework_id, created, heartbeat_interval_s) = c
        .run_write_pipelined(
            |s, now| {
                input.owner = at_plan.register_framework(s, &input.role, input.framework_id)?;
                let plan = s.plan_registration(&input, now)?;
                // A framework registering again as the registry already knows it (after a
                // failover, a reconnection) writes nothing: its answer still waits for every
                // change queued before it to be durable.
                let unchanged = s.stored_framework(plan.id).as_ref() == Some(&plan.record);
                let changes = if unchanged {
                    Vec::new()
                } else {
                    vec![Change::PutFramework(plan.record.clone())]
                };
                Ok::<_, ApiError>(((input, plan), changes))
            },
            move |s, (input, plan), now, fx| {
                // Registrations written before this one may have been applied since its plan
                // (the same framework id claimed by another principal, the principal's own
                // `max_frameworks` reached): the principal's checks are made again, as the
                // books' are in `apply_written_registration`.
                if let Err(e) = at_apply.register_framework(s, &input.role, Some(plan.id)) {
                    s.refuse_written_registration(&plan, fx);
                    return Err(e);
                }
                let (id, new) = s.apply_written_registration(input, &plan, now, fx)?;
                s.set_framework_webui_url(id, webui_url);
                Ok((id, new, s.framework_heartbeat_s()))
            },
        )
        .await?;
    Ok(Registered {
        framework_id,
        created,
        heartbeat_interval_s,
    })
}
