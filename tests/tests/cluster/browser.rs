//! The dashboard in a real browser: headless Chromium (Debian's `chromium`, driven through
//! `chromedriver` from `chromium-driver` with a small WebDriver client) loads the page of a
//! running cluster (a coordinator, two real agents, a framework with a running task that keeps
//! declining its other offers) and, polling the page with a deadline, sees an offer appear in the
//! live event log, the task counted `running`, charts drawn from the history ring, and the task
//! `running` on the framework's page; then saves a screenshot to `target/dashboard.png`. On a
//! cluster with credentials, the page shows its login form, refuses a bad token, and after an
//! operator's token its reads and its offer stream work through the login cookie.
//! Without Chromium the test says why and skips, unless `PARLEY_CI=1` (then it fails).
#![allow(clippy::unwrap_used)]

mod webdriver;

use std::path::{Path, PathBuf};
use std::time::Duration;

use protocol::TaskState;
use serde_json::Value;
use tests::framework::{shell_task, TestFramework};
use tests::{wait_until, Cluster, WITHIN};
use tokio_util::sync::CancellationToken;
use webdriver::Browser;

/// Debian's `chromium` and `chromedriver` (`PARLEY_CHROMIUM`, `PARLEY_CHROMEDRIVER` override).
fn browser_paths() -> Option<(PathBuf, PathBuf)> {
    let path = |var: &str, default: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(default))
    };
    let chromium = path("PARLEY_CHROMIUM", "/usr/bin/chromium");
    let driver = path("PARLEY_CHROMEDRIVER", "/usr/bin/chromedriver");
    let missing: Vec<String> = [&chromium, &driver]
        .into_iter()
        .filter(|p| !p.exists())
        .map(|p| p.display().to_string())
        .collect();
    if missing.is_empty() {
        return Some((chromium, driver));
    }
    assert!(
        !tests::in_ci(),
        "PARLEY_CI=1 but {} missing (.ci/run installs Debian's chromium and chromium-driver)",
        missing.join(" and ")
    );
    eprintln!(
        "skipping the browser test: {} missing (apt-get install chromium chromium-driver)",
        missing.join(" and ")
    );
    None
}

/// What the page's markers say now (see the top of `coordinator/src/ui/app.js`).
const MARKERS: &str = r##"
const points = (id) => Number((document.querySelector("#" + id + " svg") || {dataset: {}}).dataset.points || 0);
const summary = document.getElementById("summary").dataset;
return {
  offers_created: Number(document.getElementById("events").dataset.offerCreated || 0),
  tasks_running: Number(summary.tasksRunning || 0),
  samples: Number(summary.samples || 0),
  charts: ["chart-roles", "chart-frameworks", "chart-usage", "chart-offers", "chart-tasks"].map(points),
  framework_links: document.querySelectorAll('a[href^="#framework/"]').length,
  agent_links: document.querySelectorAll('a[href^="#agent/"]').length,
  running_rows: [...document.querySelectorAll('tr[data-task-state="running"]')].map((r) => r.dataset.taskId),
  title: document.getElementById("detail-title").textContent,
};
"##;

fn num(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_offers_a_running_task_and_charts_in_chromium() {
    let Some((chromium, driver)) = browser_paths() else {
        return;
    };
    let cluster = Cluster::start(&["cpus=2,mem=1024", "cpus=2,mem=1024"])
        .await
        .unwrap();
    let mut fw = TestFramework::register(&cluster.url, "web", "eng")
        .await
        .unwrap();
    let any = protocol::AgentId::new(); // replaced by the offer's agent
    let task = shell_task("dash-1", any, "cpus=1,mem=64", "sleep 120");
    fw.launch(WITHIN, task).await.unwrap();
    fw.wait_state(WITHIN, "dash-1", TaskState::Running)
        .await
        .unwrap();
    let fw_id = fw.id;

    // Keep offers flowing while the browser watches: decline each one for a moment.
    let stop = CancellationToken::new();
    let decliner = tokio::spawn({
        let stop = stop.clone();
        async move {
            while !stop.is_cancelled() {
                if let Ok(offers) = fw.next_offers(Duration::from_millis(500)).await {
                    let ids: Vec<_> = offers.iter().map(|o| o.offer_id).collect();
                    let _ = fw.decline(&ids, Some(0.3)).await;
                }
            }
            fw
        }
    });

    let browser = Browser::start(&driver, &chromium).await.unwrap();
    browser.goto(&format!("{}/", cluster.url)).await.unwrap();
    let seen = wait_until(
        WITHIN,
        "the dashboard to show an offer, the task, charts",
        || {
            let browser = &browser;
            async move {
                let m = browser.eval(MARKERS).await.ok()?;
                let drawn = m["charts"]
                    .as_array()?
                    .iter()
                    .all(|p| p.as_u64().unwrap_or(0) > 1);
                (num(&m, "offers_created") >= 1 && num(&m, "tasks_running") == 1 && drawn)
                    .then_some(m)
            }
        },
    )
    .await
    .unwrap();
    assert!(num(&seen, "framework_links") >= 1, "{seen}");
    assert!(num(&seen, "agent_links") >= 2, "{seen}");

    // The framework's page lists its running task.
    browser
        .goto(&format!("{}/#framework/{fw_id}", cluster.url))
        .await
        .unwrap();
    let detail = wait_until(
        WITHIN,
        "the framework page to list its running task",
        || {
            let browser = &browser;
            async move {
                let m = browser.eval(MARKERS).await.ok()?;
                (m["running_rows"] == serde_json::json!(["dash-1"])).then_some(m)
            }
        },
    )
    .await
    .unwrap();
    assert_eq!(detail["title"], "Framework web", "{detail}");

    // Back to the overview for the screenshot, once its charts and event log are drawn again.
    browser.goto(&format!("{}/", cluster.url)).await.unwrap();
    wait_until(WITHIN, "the overview's charts and events", || {
        let browser = &browser;
        async move {
            let m = browser.eval(MARKERS).await.ok()?;
            let drawn = m["charts"]
                .as_array()?
                .iter()
                .all(|p| p.as_u64().unwrap_or(0) > 1);
            (drawn && num(&m, "offers_created") >= 1).then_some(())
        }
    })
    .await
    .unwrap();
    let png = browser.screenshot().await.unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    assert!(
        png.len() > 20_000,
        "a screenshot of a drawn page, not a blank one"
    );
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/dashboard.png");
    // `target/` is not there when the build goes elsewhere (CARGO_TARGET_DIR).
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    std::fs::write(&target, &png).unwrap();
    browser.close().await.unwrap();

    stop.cancel();
    let fw = decliner.await.unwrap();
    fw.remove().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// What the login form and the page say now.
const LOGIN_MARKERS: &str = r##"
return {
  login_shown: !document.getElementById("login").hidden,
  error: document.getElementById("login-error").textContent,
  samples: Number(document.getElementById("summary").dataset.samples || 0),
  agent_links: document.querySelectorAll('a[href^="#agent/"]').length,
};
"##;

/// Types `token` into the login form and submits it, as a person would.
fn submit_login(token: &str) -> String {
    format!(
        r#"document.getElementById("login-token").value = {token:?};
document.getElementById("login").requestSubmit();
return true;"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_logs_in_with_an_operator_token_in_chromium() {
    let Some((chromium, driver)) = browser_paths() else {
        return;
    };
    let hash = |t: &str| coordinator::auth::SecretHash::of(t).to_hex();
    let credentials = coordinator::auth::Credentials::from_toml(&format!(
        "[[principals]]\nname = \"nodes\"\nkind = \"agent\"\nsecret_sha256 = \"{}\"\n\
         [[principals]]\nname = \"bob\"\nkind = \"operator\"\naccess = \"read\"\nsecret_sha256 = \"{}\"\n",
        hash("browser-agent-token"),
        hash("browser-reader-token")
    ))
    .unwrap();
    let cluster = Cluster::builder()
        .credentials(credentials, "browser-agent-token", "browser-reader-token")
        .agent("cpus=2,mem=1024")
        .start()
        .await
        .unwrap();
    let browser = Browser::start(&driver, &chromium).await.unwrap();
    browser.goto(&format!("{}/", cluster.url)).await.unwrap();
    let marks = || {
        let browser = &browser;
        async move { browser.eval(LOGIN_MARKERS).await.ok() }
    };
    wait_until(WITHIN, "the login form after a 401", || async {
        marks().await.filter(|m| m["login_shown"] == true)
    })
    .await
    .unwrap();

    browser.eval(&submit_login("not-a-token")).await.unwrap();
    let refused = wait_until(WITHIN, "the refusal", || async {
        marks()
            .await
            .filter(|m| m["error"].as_str().is_some_and(|e| !e.is_empty()))
    })
    .await
    .unwrap();
    assert_eq!(refused["login_shown"], true, "{refused}");

    browser
        .eval(&submit_login("browser-reader-token"))
        .await
        .unwrap();
    let seen = wait_until(WITHIN, "the page's reads through the cookie", || async {
        marks().await.filter(|m| {
            m["login_shown"] == false && num(m, "samples") >= 1 && num(m, "agent_links") >= 1
        })
    })
    .await
    .unwrap();
    assert_eq!(seen["error"], "", "{seen}");
    // The live offer stream is open through the cookie too.
    let open = wait_until(WITHIN, "the offer stream to be open", || async {
        browser
            .eval("return source !== null && source.readyState === EventSource.OPEN;")
            .await
            .ok()
            .filter(|v| *v == true)
    })
    .await;
    assert!(open.is_ok(), "the EventSource did not open");
    browser.close().await.unwrap();
    cluster.shutdown().await.unwrap();
}
