//! The native API's part of the OpenAPI 3.1 document (`crate::router::openapi` assembles the
//! whole): [`NativeDoc`], every annotated handler of this module's routes, in the order of the
//! book's API reference. The parameter lists of the annotations are in [`super::params`], the
//! schemas of answers without a Rust type of their own in [`super::answers`]: the handlers use
//! them too, and this file names the handlers.

use utoipa::OpenApi;

/// The native API's operations, in the order of the book's API reference.
#[derive(OpenApi)]
#[openapi(paths(
    super::frameworks::register,
    super::frameworks::list,
    super::frameworks::remove,
    super::frameworks::events,
    super::frameworks::accept,
    super::frameworks::accept_many,
    super::frameworks::gang_accept,
    super::frameworks::decline,
    super::frameworks::suppress,
    super::frameworks::revive,
    super::frameworks::kill,
    super::frameworks::acknowledge,
    super::frameworks::acknowledge_many,
    super::frameworks::reconcile,
    super::reservations::reserve,
    super::reservations::unreserve,
    super::agents::register,
    super::agents::list,
    super::agents::heartbeat,
    super::agents::status,
    super::agents::statuses,
    super::drain::drain,
    super::drain::reactivate,
    super::operator::offers,
    super::operator::offer_events,
    super::operator::state,
    super::operator::tasks,
    super::operator::roles,
    super::operator::explain,
    super::operator::set_weight,
    super::operator::backup,
    super::operator::metrics,
    super::operator::health,
    super::output::output,
    super::task_kill::kill_task,
    super::ui::page,
    super::ui::script,
    super::ui::style,
    super::ui::history,
    super::ui::agent_page,
    super::ui::agent_view,
    super::ui::framework_view,
    super::session::login,
    super::session::logout,
))]
pub struct NativeDoc;
