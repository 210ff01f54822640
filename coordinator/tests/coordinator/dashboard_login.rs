//! The dashboard's login over real HTTP: without the cookie the page's reads are 401; a bad
//! token (or a framework's) sets nothing; after logging in with an operator's token the page's
//! requests and the offer stream work through the cookie alone; a change made with the cookie
//! needs the `X-Parley-CSRF` header; logging out clears the cookie.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use coordinator::auth::{Credentials, SecretHash};
use coordinator::Config;
use serde_json::{json, Value};

use crate::support::{fast_config, FakeAgent, TestCoordinator, DEADLINE};

const READER: &str = "reader-token";
const ADMIN: &str = "admin-token";
const FRAMEWORK: &str = "framework-token";
const AGENT: &str = "agent-token";

fn credentials() -> Credentials {
    let h = |t: &str| SecretHash::of(t).to_hex();
    Credentials::from_toml(&format!(
        "[[principals]]\nname = \"bob\"\nkind = \"operator\"\naccess = \"read\"\nsecret_sha256 = \"{}\"\n\
         [[principals]]\nname = \"alice\"\nkind = \"operator\"\naccess = \"admin\"\nsecret_sha256 = \"{}\"\n\
         [[principals]]\nname = \"batch\"\nkind = \"framework\"\nroles = [\"*\"]\nsecret_sha256 = \"{}\"\n\
         [[principals]]\nname = \"nodes\"\nkind = \"agent\"\nsecret_sha256 = \"{}\"\n",
        h(READER),
        h(ADMIN),
        h(FRAMEWORK),
        h(AGENT)
    ))
    .unwrap()
}

async fn secured() -> TestCoordinator {
    TestCoordinator::start(Config {
        credentials: Some(Arc::new(credentials())),
        ..fast_config()
    })
    .await
}

/// `POST /api/v1/login` with `token`: (status, Set-Cookie if any, body).
async fn login(c: &TestCoordinator, token: &str) -> (u16, Option<String>, Value) {
    let r = c
        .client
        .post(format!("{}/api/v1/login", c.base))
        .json(&json!({ "token": token }))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let cookie = r
        .headers()
        .get("set-cookie")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, cookie, r.json().await.unwrap_or(Value::Null))
}

/// `GET path` with the `Cookie` header `cookie` (none if `None`): the status.
async fn get(c: &TestCoordinator, path: &str, cookie: Option<&str>) -> u16 {
    let mut r = c.client.get(format!("{}{path}", c.base));
    if let Some(cookie) = cookie {
        r = r.header("cookie", cookie);
    }
    r.send().await.unwrap().status().as_u16()
}

/// What a browser sends back for a `Set-Cookie` value: its `name=value` part.
fn cookie_of(set_cookie: &str) -> String {
    set_cookie.split(';').next().unwrap().to_owned()
}

const PAGE_READS: [&str; 5] = [
    "/api/v1/state",
    "/api/v1/history?after=0",
    "/api/v1/dashboard/agents?offset=0&limit=50",
    "/api/v1/frameworks",
    "/api/v1/roles",
];

#[tokio::test]
async fn an_operator_logs_in_and_the_page_and_its_stream_work_through_the_cookie() {
    let c = secured().await;
    for path in PAGE_READS {
        assert_eq!(get(&c, path, None).await, 401, "{path}");
    }
    // The page itself is static: served without credentials, so it can show its login form.
    for path in ["/", "/ui/app.js", "/ui/style.css"] {
        assert_eq!(get(&c, path, None).await, 200, "{path}");
    }

    // Refused logins set nothing.
    for (token, status) in [("wrong", 401), (FRAMEWORK, 403), (AGENT, 403)] {
        let (got, cookie, body) = login(&c, token).await;
        assert_eq!(got, status, "{token}: {body}");
        assert_eq!(cookie, None, "{token}");
    }
    let r = c
        .client
        .post(format!("{}/api/v1/login", c.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("token=reader-token")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 415, "a cross-site form cannot log in");
    assert!(r.headers().get("set-cookie").is_none());

    let (status, set, body) = login(&c, READER).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"principal": "bob", "access": "read"}));
    let set = set.unwrap();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(attribute), "{set}");
    }
    assert!(!set.contains("Secure"), "plain HTTP: {set}");
    let cookie = cookie_of(&set);
    for path in PAGE_READS {
        assert_eq!(get(&c, path, Some(&cookie)).await, 200, "{path}");
    }
    let bad = "parley_session=wrong";
    assert_eq!(get(&c, "/api/v1/state", Some(bad)).await, 401);
    // A reader's cookie reaches no admin route.
    let r = c
        .client
        .put(format!("{}/api/v1/roles/eng", c.base))
        .header("cookie", &cookie)
        .header("x-parley-csrf", "1")
        .json(&json!({"weight": 2}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);

    // The offer stream through the cookie: an agent and a framework make an offer, the
    // stream shows it.
    let r = c
        .client
        .get(format!("{}/api/v1/offers/events", c.base))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut stream = testkit::SseReader::from_response(r);
    let agent = FakeAgent::start().await;
    let r = c
        .client
        .post(format!("{}/api/v1/agents", c.base))
        .bearer_auth(AGENT)
        .json(&json!({"hostname": "a", "endpoint": agent.endpoint, "resources": {"cpus": 2}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let r = c
        .client
        .post(format!("{}/api/v1/frameworks", c.base))
        .bearer_auth(FRAMEWORK)
        .json(&json!({"name": "f", "role": "eng"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let fw = r.json::<Value>().await.unwrap()["framework_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let events = c
        .client
        .get(format!("{}/api/v1/frameworks/{fw}/events", c.base))
        .bearer_auth(FRAMEWORK)
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), 200);
    let deadline = testkit::deadline_in(DEADLINE + Duration::from_secs(5));
    loop {
        let frame = stream.next_frame(deadline).await.unwrap();
        if frame.event == "offer_created" {
            assert!(frame.data.contains(&fw), "{frame:?}");
            break;
        }
    }
    drop(events);
}

#[tokio::test]
async fn a_change_made_with_the_cookie_needs_the_csrf_header_and_logout_clears_it() {
    let c = secured().await;
    let (status, set, _) = login(&c, ADMIN).await;
    assert_eq!(status, 200);
    let cookie = cookie_of(&set.unwrap());
    let put = |csrf: bool| {
        let mut r = c
            .client
            .put(format!("{}/api/v1/roles/eng", c.base))
            .header("cookie", &cookie)
            .json(&json!({"weight": 3}));
        if csrf {
            r = r.header("x-parley-csrf", "1");
        }
        r.send()
    };
    let refused = put(false).await.unwrap();
    assert_eq!(refused.status(), 403);
    let body: Value = refused.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("x-parley-csrf"),
        "{body}"
    );
    let roles: Value = c
        .client
        .get(format!("{}/api/v1/roles", c.base))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        !roles.to_string().contains("\"eng\""),
        "refused, nothing changed: {roles}"
    );
    assert_eq!(put(true).await.unwrap().status(), 200);
    // The bearer header needs no CSRF header (no browser sends it on its own).
    let r = c
        .client
        .put(format!("{}/api/v1/roles/eng", c.base))
        .bearer_auth(ADMIN)
        .json(&json!({"weight": 4}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    let r = c
        .client
        .post(format!("{}/api/v1/logout", c.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let cleared = r.headers().get("set-cookie").unwrap().to_str().unwrap();
    assert!(
        cleared.starts_with("parley_session=;") && cleared.contains("Max-Age=0"),
        "{cleared}"
    );
}

#[tokio::test]
async fn an_open_coordinator_needs_no_login() {
    let c = TestCoordinator::start(fast_config()).await;
    let (status, cookie, body) = login(&c, READER).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(cookie, None);
    assert_eq!(get(&c, "/api/v1/state", None).await, 200);
}
