//! Which kind of principal may call which route ([`check_route`]), and why a request was
//! refused ([`Denial`]). Ownership of a framework or agent id, role subtrees and quotas are
//! checked by the handlers against the books (`crate::api::auth`), since only the books know
//! who registered an id.
//!
//! | route | who |
//! |---|---|
//! | `GET /health`, `GET /version`, the dashboard's static `/`, `/ui/app.js`, `/ui/style.css`, `POST /api/v1/login`, `/logout` | anyone, no credentials |
//! | `POST /api/v1/scheduler` (Mesos) | framework principals (their own frameworks) |
//! | `POST /api/v1/frameworks`, `POST /api/v1/frameworks/{id}/..`, `GET ../{id}/events` | framework principals (their own frameworks) |
//! | `DELETE /api/v1/frameworks/{id}` | its framework principal, or an admin operator |
//! | `POST /api/v1/agents`, `POST /api/v1/agents/{id}/..` | agent principals (their own agents) |
//! | `GET /api/v1/agents` | operators, and framework principals (the SDK checks that tasks fit) |
//! | `GET /api/v1/frameworks/{id}/explain` | operators, and the framework's own principal |
//! | every other `GET` (state, offers, offer stream, tasks, roles, metrics, the dashboard's reads) | operators |
//! | `PUT /api/v1/roles/{path}`, `GET /api/v1/registry/backup` | admin operators |
//! | `POST /api/v1/agents/{id}/drain`, `POST /api/v1/agents/{id}/reactivate` | admin operators |
//! | `POST /api/v1/frameworks/{id}/tasks/{task_id}/kill` (an operator's kill of one task) | admin operators |

use axum::http::Method;

use super::credentials::Principal;

/// Why a request was refused: the label of `parley_auth_denied_total{reason=...}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denial {
    /// No `Authorization` header (401).
    Missing,
    /// A malformed header or a token no principal has (401).
    Invalid,
    /// The principal's kind may not call this route (403).
    Kind,
    /// The framework or agent id belongs to another principal (403).
    NotOwner,
    /// The role is outside the principal's role patterns (403).
    Role,
    /// The principal has as many frameworks as `max_frameworks` allows (403).
    Quota,
}

impl Denial {
    /// Every reason, in metrics order.
    pub const ALL: [Denial; 6] = [
        Denial::Missing,
        Denial::Invalid,
        Denial::Kind,
        Denial::NotOwner,
        Denial::Role,
        Denial::Quota,
    ];

    /// The metrics label.
    pub fn label(self) -> &'static str {
        match self {
            Denial::Missing => "missing",
            Denial::Invalid => "invalid",
            Denial::Kind => "kind",
            Denial::NotOwner => "not_owner",
            Denial::Role => "role",
            Denial::Quota => "quota",
        }
    }

    /// Its index in [`Denial::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// 401 (who are you?) rather than 403 (not you).
    pub fn is_unauthenticated(self) -> bool {
        matches!(self, Denial::Missing | Denial::Invalid)
    }
}

/// Whether `principal` may call `method` on the route `route` (axum's matched path, e.g.
/// `/api/v1/frameworks/{id}/accept`; `None` for a path no route matches, which then answers
/// 404 to anyone authenticated). Ownership is checked later, by the handler.
pub fn check_route(
    method: &Method,
    route: Option<&str>,
    principal: &Principal,
) -> Result<(), RouteDenied> {
    let Some(route) = route else {
        return Ok(());
    };
    let allowed = match (method, route) {
        (&Method::GET, "/api/v1/frameworks/{id}/events") => principal.is_framework(),
        // Every principal's frameworks, with their owners.
        (&Method::GET, "/api/v1/registry/backup") => principal.is_admin(),
        (&Method::GET, "/api/v1/frameworks/{id}/explain") | (&Method::GET, "/api/v1/agents") => {
            principal.is_framework() || principal.is_operator()
        }
        (&Method::GET, _) | (&Method::HEAD, _) => principal.is_operator(),
        (&Method::DELETE, "/api/v1/frameworks/{id}") => {
            principal.is_framework() || principal.is_admin()
        }
        (&Method::PUT, "/api/v1/roles/{*path}") => principal.is_admin(),
        // Maintenance, before the agents' own POST routes.
        (&Method::POST, "/api/v1/agents/{id}/drain")
        | (&Method::POST, "/api/v1/agents/{id}/reactivate")
        // An operator's kill, before the frameworks' own POST routes.
        | (&Method::POST, "/api/v1/frameworks/{id}/tasks/{task_id}/kill") => principal.is_admin(),
        (&Method::POST, r) if r.starts_with("/api/v1/frameworks") => principal.is_framework(),
        // The Mesos scheduler API: its calls act as the principal's frameworks.
        (&Method::POST, "/api/v1/scheduler") => principal.is_framework(),
        (&Method::POST, r) if r.starts_with("/api/v1/agents") => principal.is_agent(),
        _ => principal.is_admin(),
    };
    if allowed {
        Ok(())
    } else {
        Err(RouteDenied {
            principal: principal.name.to_string(),
            kind: principal.kind_name(),
            method: method.clone(),
            route: route.to_string(),
        })
    }
}

/// A principal's kind may not call a route.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("principal {principal:?} ({kind}) may not {method} {route}")]
pub struct RouteDenied {
    /// The principal's name.
    pub principal: String,
    /// Its kind (`framework`, `agent`, `operator`).
    pub kind: &'static str,
    /// The method called.
    pub method: Method,
    /// The route (axum's matched path).
    pub route: String,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::auth::credentials::{Access, Kind};
    use crate::auth::pattern::RolePattern;
    use crate::auth::secret::SecretHash;

    fn principal(kind: Kind) -> Principal {
        Principal::new("p", kind, SecretHash::of("t"))
    }

    #[test]
    fn each_kind_reaches_its_routes_only() {
        let fw = principal(Kind::Framework {
            roles: vec![RolePattern::Any],
            max_frameworks: None,
        });
        let agent = principal(Kind::Agent);
        let read = principal(Kind::Operator(Access::Read));
        let admin = principal(Kind::Operator(Access::Admin));
        let (get, post, put, delete) = (Method::GET, Method::POST, Method::PUT, Method::DELETE);
        // (method, route, [framework, agent, read, admin])
        let table: [(&Method, &str, [bool; 4]); 19] = [
            (&post, "/api/v1/frameworks", [true, false, false, false]),
            (
                &post,
                "/api/v1/frameworks/{id}/accept",
                [true, false, false, false],
            ),
            (
                &post,
                "/api/v1/frameworks/{id}/accepts",
                [true, false, false, false],
            ),
            (
                &post,
                "/api/v1/frameworks/{id}/gang-accepts",
                [true, false, false, false],
            ),
            (
                &get,
                "/api/v1/frameworks/{id}/events",
                [true, false, false, false],
            ),
            (
                &delete,
                "/api/v1/frameworks/{id}",
                [true, false, false, true],
            ),
            (&post, "/api/v1/agents", [false, true, false, false]),
            (
                &post,
                "/api/v1/agents/{id}/statuses",
                [false, true, false, false],
            ),
            (&get, "/api/v1/agents", [true, false, true, true]),
            (
                &get,
                "/api/v1/frameworks/{id}/explain",
                [true, false, true, true],
            ),
            (&get, "/api/v1/state", [false, false, true, true]),
            (&get, "/api/v1/offers/events", [false, false, true, true]),
            (&get, "/metrics", [false, false, true, true]),
            (&put, "/api/v1/roles/{*path}", [false, false, false, true]),
            (&get, "/api/v1/registry/backup", [false, false, false, true]),
            (&post, "/api/v1/scheduler", [true, false, false, false]),
            (
                &post,
                "/api/v1/agents/{id}/drain",
                [false, false, false, true],
            ),
            (
                &post,
                "/api/v1/agents/{id}/reactivate",
                [false, false, false, true],
            ),
            (
                &post,
                "/api/v1/frameworks/{id}/tasks/{task_id}/kill",
                [false, false, false, true],
            ),
        ];
        for (method, route, expected) in table {
            for (p, want) in [&fw, &agent, &read, &admin].into_iter().zip(expected) {
                assert_eq!(
                    check_route(method, Some(route), p).is_ok(),
                    want,
                    "{} {method} {route}",
                    p.kind_name()
                );
            }
        }
        assert!(
            check_route(&post, None, &agent).is_ok(),
            "unknown routes answer 404"
        );
    }
}
