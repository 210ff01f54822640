//! The HTTP side of [`crate::auth`]: the [`guard`] middleware in front of every route, the
//! [`Caller`] extractor, and the ownership checks the handlers run against the books.
//!
//! [`guard`] refuses, in this order:
//! 1. a body (or a `Content-Type`) on a request other than `GET`/`HEAD` that is not
//!    `application/json`: 415 `unsupported_media_type`, credentials or not. A browser can send
//!    a cross-site form or `text/plain` POST without asking; it cannot send
//!    `application/json` without a CORS preflight, which this server never grants.
//! 2. with credentials configured, any route but `/health` (and the Mesos API's `/version`,
//!    and the dashboard's static page, script and style, login and logout) without a valid `Authorization: Bearer <token>`
//!    or dashboard cookie ([`COOKIE`], set by `crate::api::session`): 401 `unauthorized` with
//!    `WWW-Authenticate: Bearer`. The Mesos scheduler API also takes
//!    `Basic base64(<principal>:<token>)`, which is what Mesos clients send. A request
//!    authenticated by the cookie other than `GET`/`HEAD` needs the `X-Parley-CSRF` header
//!    (403 without: see `crate::api::session` for why);
//! 3. a route the principal's kind may not call ([`crate::auth::policy`]): 403 `forbidden`.
//!
//! Then handlers check ownership under the books' lock ([`Caller::framework`],
//! [`Caller::register_framework`], [`Caller::agent`], [`Caller::register_agent`]): a framework
//! id belongs to the principal that registered it, an agent id likewise. Every refusal, the
//! handlers' too, is logged and counted (`parley_auth_denied_total{reason}`) here, from the
//! [`Denial`] the error response carries.

use std::sync::Arc;

use axum::extract::{FromRequestParts, MatchedPath, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use protocol::{AgentId, FrameworkId, RolePath};

use super::error::ApiError;
use crate::auth::{policy, Credentials, Denial, Principal};
use crate::runtime::Coordinator;
use crate::state::State as Books;

/// The authenticated principal of a request; `None` when no credentials are configured (the
/// API is open and every check passes).
#[derive(Debug, Clone, Default)]
pub struct Caller(pub Option<Arc<Principal>>);

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(parts
            .extensions
            .get::<Caller>()
            .cloned()
            .unwrap_or_default())
    }
}

fn not_owner(what: &str, p: &Principal, detail: &str) -> ApiError {
    ApiError::Forbidden(
        Denial::NotOwner,
        format!(
            "{what} {detail}; principal {:?} may not act on it",
            &*p.name
        ),
    )
}

/// Whether `p` may act as the owner of something whose owner is `owner` (`None`: unknown id,
/// left to the operation, which answers 404).
fn check_owner(what: &str, owner: Option<Option<&str>>, p: &Principal) -> Result<(), ApiError> {
    match owner {
        None => Ok(()),
        Some(Some(o)) if o == &*p.name => Ok(()),
        Some(Some(_)) => Err(not_owner(what, p, "belongs to another principal")),
        Some(None) => Err(not_owner(
            what,
            p,
            "was registered without credentials; register it again (with its id) to own it",
        )),
    }
}

impl Caller {
    /// May act as framework `id` (stream, accept, decline, suppress, revive, kill,
    /// acknowledge, reconcile, delete, explain): its owner; operators where the route
    /// policy let them in (explain, an admin's delete).
    pub fn framework(&self, books: &Books, id: FrameworkId) -> Result<(), ApiError> {
        match &self.0 {
            // A placeholder is nobody's: `framework_owner` calls it unknown (so that a
            // registration with its id claims it), but acting on it must not pass as "unknown,
            // left to the operation" (which would let anyone kill its adopted tasks).
            Some(p) if p.is_framework() && books.framework_is_placeholder(id) => Err(not_owner(
                &format!("framework {id}"),
                p,
                "has not registered since its tasks were adopted; register it (with its id) to own it",
            )),
            Some(p) if p.is_framework() => {
                check_owner(&format!("framework {id}"), books.framework_owner(id), p)
            }
            Some(p) if p.is_operator() => Ok(()),
            Some(p) => Err(not_owner(&format!("framework {id}"), p, "is a framework")),
            None => Ok(()),
        }
    }

    /// May register a framework under `role`, as `framework_id` if given: the role must match
    /// the principal's patterns; an existing framework must be its own (or have no owner yet,
    /// which it then claims); a new one must fit `max_frameworks`. Returns the owner to record.
    pub fn register_framework(
        &self,
        books: &Books,
        role: &RolePath,
        framework_id: Option<FrameworkId>,
    ) -> Result<Option<Arc<str>>, ApiError> {
        let Some(p) = &self.0 else {
            return Ok(None);
        };
        if !p.may_use_role(role) {
            return Err(ApiError::Forbidden(
                Denial::Role,
                format!(
                    "principal {:?} may not register frameworks in role {role}; see its roles in the credentials file",
                    &*p.name
                ),
            ));
        }
        let existing = framework_id.and_then(|id| books.framework_owner(id));
        match existing {
            Some(Some(o)) if o != &*p.name => {
                return Err(not_owner(
                    &format!(
                        "framework {}",
                        framework_id.map(|i| i.to_string()).unwrap_or_default()
                    ),
                    p,
                    "belongs to another principal",
                ))
            }
            Some(_) => {}
            None => {
                if let crate::auth::Kind::Framework {
                    max_frameworks: Some(max),
                    ..
                } = p.kind
                {
                    if books.frameworks_owned_by(&p.name) >= max {
                        return Err(ApiError::Forbidden(
                            Denial::Quota,
                            format!(
                                "principal {:?} already has {max} frameworks (its max_frameworks); remove one first",
                                &*p.name
                            ),
                        ));
                    }
                }
            }
        }
        Ok(Some(Arc::clone(&p.name)))
    }

    /// May act as agent `id` (heartbeat, statuses): the agent principal that registered it.
    pub fn agent(&self, books: &Books, id: AgentId) -> Result<(), ApiError> {
        match &self.0 {
            Some(p) => check_owner(&format!("agent {id}"), books.agent_owner(id), p),
            None => Ok(()),
        }
    }

    /// May (re-)register as agent `id`: a known agent must be its own or have no owner yet.
    /// Returns the owner to record once registered.
    pub fn register_agent(
        &self,
        books: &Books,
        id: Option<AgentId>,
    ) -> Result<Option<Arc<str>>, ApiError> {
        let Some(p) = &self.0 else {
            return Ok(None);
        };
        if let Some(id) = id {
            if let Some(Some(o)) = books.agent_owner(id) {
                if o != &*p.name {
                    return Err(not_owner(
                        &format!("agent {id}"),
                        p,
                        "belongs to another principal",
                    ));
                }
            }
        }
        Ok(Some(Arc::clone(&p.name)))
    }
}

/// Whether the request carries a body or a `Content-Type`, on a method that takes one.
fn needs_json(method: &Method, headers: &HeaderMap) -> bool {
    if method == Method::GET || method == Method::HEAD || method == Method::OPTIONS {
        return false;
    }
    let length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    headers.contains_key(header::CONTENT_TYPE)
        || headers.contains_key(header::TRANSFER_ENCODING)
        || length.is_some_and(|n| n > 0)
}

/// `application/json`, with any parameters (`; charset=utf-8`).
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"))
}

/// The principal named by `Authorization: Bearer <token>`.
fn authenticate(
    credentials: &Credentials,
    headers: &HeaderMap,
    basic_ok: bool,
) -> Result<Arc<Principal>, ApiError> {
    if basic_ok {
        if let Some(found) = basic(credentials, headers) {
            return found;
        }
    }
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return match session_cookie(headers) {
            Some(token) => credentials.authenticate(token).cloned().ok_or_else(|| {
                ApiError::Unauthenticated(
                    Denial::Invalid,
                    "the dashboard session's token is no longer valid: log in again".into(),
                )
            }),
            None => Err(ApiError::Unauthenticated(
                Denial::Missing,
                "this coordinator requires credentials: send Authorization: Bearer <token>".into(),
            )),
        };
    };
    let token = value
        .to_str()
        .ok()
        .and_then(|v| {
            let (scheme, token) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        })
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            ApiError::Unauthenticated(
                Denial::Invalid,
                "malformed Authorization header: expected Bearer <token>".into(),
            )
        })?;
    credentials
        .authenticate(token)
        .cloned()
        .ok_or_else(|| ApiError::Unauthenticated(Denial::Invalid, "unknown bearer token".into()))
}

/// The dashboard's session cookie's name (set by the login, `crate::api::session`).
pub const COOKIE: &str = "parley_session";

/// The header a cookie-authenticated request other than `GET`/`HEAD` must carry (any value).
pub const CSRF_HEADER: &str = "x-parley-csrf";

/// Whether `path` is one of the login routes, which the guard lets through without
/// credentials (the login checks its token itself).
pub fn is_login_route(path: &str) -> bool {
    path == "/api/v1/login" || path == "/api/v1/logout"
}

/// The token of the dashboard's session cookie ([`COOKIE`]), if any.
fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim())
        .filter(|v| !v.is_empty())
}

/// `Authorization: Basic base64(<principal>:<token>)` (Mesos clients' principal and
/// secret): `None` when the header is not Basic; the principal when the token is its own.
fn basic(
    credentials: &Credentials,
    headers: &HeaderMap,
) -> Option<Result<Arc<Principal>, ApiError>> {
    use base64::Engine as _;
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let refused = || {
        ApiError::Unauthenticated(
            Denial::Invalid,
            "Basic credentials must be <principal>:<token> of a principal in the credentials file"
                .into(),
        )
    };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()
        .and_then(|b| String::from_utf8(b).ok());
    let Some((name, token)) = decoded.as_deref().and_then(|d| d.split_once(':')) else {
        return Some(Err(refused()));
    };
    Some(
        credentials
            .authenticate(token)
            .filter(|p| &*p.name == name)
            .cloned()
            .ok_or_else(refused),
    )
}

/// The middleware: content type, authentication, the route policy; then counts and logs any
/// refusal (its own or a handler's).
pub async fn guard(State(c): State<Coordinator>, mut req: Request, next: Next) -> Response {
    let Some(credentials) = c.credentials() else {
        // Open: only the content type to check, and nothing is refused that needs counting.
        if needs_json(req.method(), req.headers()) && !is_json(req.headers()) {
            return ApiError::UnsupportedMediaType.into_response();
        }
        return next.run(req).await;
    };
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let checked = check(&credentials, &mut req);
    let caller = req
        .extensions()
        .get::<Caller>()
        .and_then(|c| c.0.as_ref().map(|p| Arc::clone(&p.name)));
    let response = match checked {
        Ok(()) => next.run(req).await,
        Err(e) => e.into_response(),
    };
    if let Some(denial) = response.extensions().get::<Denial>() {
        c.metrics().count_auth_denied(*denial);
        tracing::warn!(
            %method,
            %path,
            reason = denial.label(),
            principal = caller.as_deref().unwrap_or("-"),
            status = response.status().as_u16(),
            "request refused"
        );
    }
    response
}

fn check(credentials: &Credentials, req: &mut Request) -> Result<(), ApiError> {
    if needs_json(req.method(), req.headers()) && !is_json(req.headers()) {
        return Err(ApiError::UnsupportedMediaType);
    }
    let path = req.uri().path();
    // The dashboard's page and assets are static and hold no data: served to anyone, so a
    // browser without the cookie gets the login form (its reads are then checked).
    let page = path == "/" || path == "/ui/app.js" || path == "/ui/style.css";
    if path == "/health" || path == "/version" || page || is_login_route(path) {
        return Ok(());
    }
    let basic_ok = path == "/api/v1/scheduler";
    let principal = authenticate(credentials, req.headers(), basic_ok)?;
    let by_cookie = !req.headers().contains_key(header::AUTHORIZATION);
    let safe = req.method() == Method::GET || req.method() == Method::HEAD;
    if by_cookie && !safe && !req.headers().contains_key(CSRF_HEADER) {
        return Err(ApiError::Forbidden(
            Denial::Kind,
            format!(
                "a request authenticated by the dashboard's cookie needs the {} header (or send Authorization: Bearer)",
                CSRF_HEADER
            ),
        ));
    }
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(MatchedPath::as_str);
    policy::check_route(req.method(), route, &principal)
        .map_err(|denied| ApiError::Forbidden(Denial::Kind, denied.to_string()))?;
    req.extensions_mut().insert(Caller(Some(principal)));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            if let Ok(v) = v.parse() {
                h.insert(k.clone(), v);
            }
        }
        h
    }

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let h = headers(&[(header::COOKIE, "a=1; parley_session=tok; b=2")]);
        assert_eq!(session_cookie(&h), Some("tok"));
        let h = headers(&[(header::COOKIE, "parley_sessionx=tok; parley_session=")]);
        assert_eq!(session_cookie(&h), None);
    }

    #[test]
    fn a_body_needs_json_and_a_bodiless_request_does_not() {
        let json = headers(&[(header::CONTENT_TYPE, "application/json; charset=utf-8")]);
        assert!(is_json(&json));
        let text = headers(&[
            (header::CONTENT_TYPE, "text/plain"),
            (header::CONTENT_LENGTH, "2"),
        ]);
        assert!(needs_json(&Method::POST, &text) && !is_json(&text));
        let form = headers(&[(header::CONTENT_TYPE, "application/x-www-form-urlencoded")]);
        assert!(needs_json(&Method::POST, &form) && !is_json(&form));
        let untyped = headers(&[(header::CONTENT_LENGTH, "2")]);
        assert!(needs_json(&Method::PUT, &untyped) && !is_json(&untyped));
        let empty = headers(&[(header::CONTENT_LENGTH, "0")]);
        assert!(!needs_json(&Method::POST, &empty));
        assert!(!needs_json(&Method::GET, &text));
    }
}
