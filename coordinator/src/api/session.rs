//! The dashboard's login: `POST /api/v1/login` checks an operator's token and sets it in an
//! `HttpOnly` cookie ([`COOKIE`]), which the [`super::auth::guard`] accepts in place of
//! `Authorization: Bearer`, so the page's `fetch` calls and its `EventSource` (which cannot set
//! a header) work in a browser; `POST /api/v1/logout` clears it.
//!
//! The cookie carries the token itself, not a session id: the coordinator keeps no sessions,
//! a reloaded credentials file (`crate::reload`) takes a removed token's access away on its
//! next request, and several coordinators (HA) accept the same cookie. It is `HttpOnly` (no
//! script reads it), `SameSite=Strict` (no other site's page sends it), `Path=/`, and `Secure`
//! when this coordinator serves HTTPS (never sent over plain HTTP then).
//!
//! Cross-site request forgery: `SameSite=Strict` alone already keeps a browser from sending the
//! cookie with another site's requests. Because that depends on the browser, and a sibling
//! subdomain counts as the same site, the guard also refuses a cookie-authenticated request
//! other than `GET`/`HEAD` without the header [`CSRF_HEADER`]: a page of another origin
//! cannot add a custom header without a CORS preflight, which this server never grants. A
//! plain form cannot post JSON either (415), which also protects the login itself.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::extract::Body;
use super::Route;
use crate::auth::Denial;
use crate::runtime::Coordinator;
pub use crate::web::auth::{is_login_route, COOKIE, CSRF_HEADER};

/// The login routes; the guard lets them through without credentials (the login checks its
/// token itself: see [`is_login_route`]).
pub fn routes() -> Vec<Route> {
    vec![
        Route::post("/api/v1/login", login),
        Route::post("/api/v1/logout", logout),
    ]
}

/// `POST /api/v1/login`: the body.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Login {
    /// An operator principal's token.
    pub token: String,
}

/// `POST /api/v1/login`: the answer.
#[derive(Serialize, utoipa::ToSchema)]
pub struct LoggedIn {
    /// The principal's name.
    pub principal: String,
    /// `read` or `admin`.
    pub access: &'static str,
}

/// A cookie value may hold these characters only (RFC 6265 `cookie-octet`).
fn cookie_safe(token: &str) -> bool {
    token
        .bytes()
        .all(|b| matches!(b, 0x21 | 0x23..=0x2B | 0x2D..=0x3A | 0x3C..=0x5B | 0x5D..=0x7E))
}

/// The `Set-Cookie` value: `token` for the session, or empty and expired.
fn set_cookie(c: &Coordinator, token: Option<&str>) -> String {
    let secure = if c.server_tls().is_some() {
        "; Secure"
    } else {
        ""
    };
    match token {
        Some(t) => format!("{COOKIE}={t}; HttpOnly; SameSite=Strict; Path=/{secure}"),
        None => format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0{secure}"),
    }
}

#[utoipa::path(post, path = "/api/v1/login", tag = "dashboard",
    summary = "Log the dashboard in with an operator's token",
    description = "Checks the token and sets it in the `parley_session` cookie (`HttpOnly; \
        SameSite=Strict; Path=/`, and `Secure` over HTTPS), which then authenticates requests \
        like `Authorization: Bearer`. A request authenticated by the cookie other than `GET` \
        or `HEAD` must carry the header `X-Parley-CSRF`. An unknown token gets 401 and sets \
        nothing; a token of a principal that is not an operator gets 403; a coordinator \
        without credentials answers 400 (the dashboard needs no login).",
    request_body = Login,
    responses((status = 200, description = "Logged in; the cookie is set", body = LoggedIn)))]
async fn login(
    State(c): State<Coordinator>,
    Body(body): Body<Login>,
) -> Result<Response, ApiError> {
    let Some(credentials) = c.credentials() else {
        return Err(ApiError::InvalidField {
            field: "token",
            reason: "this coordinator has no credentials file: the API is open and needs no login"
                .into(),
        });
    };
    let Some(principal) = credentials.authenticate(&body.token) else {
        return Err(ApiError::Unauthenticated(
            Denial::Invalid,
            "unknown token".into(),
        ));
    };
    if !principal.is_operator() {
        return Err(ApiError::Forbidden(
            Denial::Kind,
            format!(
                "principal {:?} is a {}; only operators log in to the dashboard",
                &*principal.name,
                principal.kind_name()
            ),
        ));
    }
    if !cookie_safe(&body.token) {
        return Err(ApiError::InvalidField {
            field: "token",
            reason: "holds characters a cookie cannot carry (spaces, quotes, ',', ';' or '\\\\'); \
                     use Authorization: Bearer instead"
                .into(),
        });
    }
    let answer = LoggedIn {
        principal: principal.name.to_string(),
        access: if principal.is_admin() {
            "admin"
        } else {
            "read"
        },
    };
    Ok((
        [(header::SET_COOKIE, set_cookie(&c, Some(&body.token)))],
        axum::Json(answer),
    )
        .into_response())
}

#[utoipa::path(post, path = "/api/v1/logout", tag = "dashboard",
    summary = "Log the dashboard out",
    description = "Clears the `parley_session` cookie.",
    responses((status = 204, description = "The cookie is cleared")))]
async fn logout(State(c): State<Coordinator>) -> Response {
    (
        axum::http::StatusCode::NO_CONTENT,
        [(header::SET_COOKIE, set_cookie(&c, None))],
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_cookie_octets_pass() {
        assert!(cookie_safe("0123abcdef-_.~!#$%&'()*+/:<=>?@[]^`{|}"));
        for bad in ["a b", "a;b", "a,b", "a\"b", "a\\b", "é"] {
            assert!(!cookie_safe(bad), "{bad:?}");
        }
    }
}
