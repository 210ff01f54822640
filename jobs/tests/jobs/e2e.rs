//! The jobs service end to end: a real coordinator and real agents (the `tests` crate's
//! `Cluster`), the service on `127.0.0.1:0`, and every request through its HTTP API.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use parley_jobs::service::Running;
use parley_jobs::ServiceConfig;
use serde_json::Value;
use tests::{wait_until, Cluster};

/// Generous: a debug build on a loaded two-core machine.
const WITHIN: Duration = Duration::from_secs(60);

async fn start_jobs(cluster: &Cluster, data: &Path) -> Running {
    let mut config = ServiceConfig::new(&cluster.url, "default".parse().unwrap(), data);
    config.failover_timeout = Duration::from_secs(120);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    parley_jobs::start(config, listener).await.unwrap()
}

struct Api {
    base: String,
    http: reqwest::Client,
}

impl Api {
    fn new(jobs: &Running) -> Self {
        Self {
            base: format!("http://{}/api/v1/jobs", jobs.addr),
            http: reqwest::Client::new(),
        }
    }

    async fn submit(&self, body: &str, content_type: &str) -> (u16, Value) {
        let r = self
            .http
            .post(&self.base)
            .header("content-type", content_type)
            .body(body.to_owned())
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    async fn submit_ok(&self, toml: &str) {
        let (status, body) = self.submit(toml, "application/toml").await;
        assert_eq!(status, 201, "{body}");
    }

    async fn get(&self, path: &str) -> Option<Value> {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .ok()?;
        r.status().is_success().then_some(())?;
        r.json().await.ok()
    }

    /// Stops job `name` and waits until none of its tasks runs; returns its view then.
    async fn stop_job(&self, name: &str) -> Value {
        let r = self
            .http
            .post(format!("{}/{name}/stop", self.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{}", r.text().await.unwrap());
        wait_until(WITHIN, &format!("no task of {name} left"), || async {
            let v = self.get(&format!("/{name}")).await?;
            v["running"].as_array()?.is_empty().then_some(v)
        })
        .await
        .unwrap()
    }

    /// Waits until job `name` is in a final state; returns its view.
    async fn wait_done(&self, name: &str) -> Value {
        wait_until(WITHIN, &format!("job {name} done"), || async {
            let v = self.get(&format!("/{name}")).await?;
            let state = v["state"].as_str()?.to_owned();
            ["succeeded", "failed", "stopped"]
                .contains(&state.as_str())
                .then_some(v)
        })
        .await
        .unwrap()
    }
}

fn shell_quote(p: &Path) -> String {
    format!("'{}'", p.display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_array_retries_the_tasks_that_fail_their_first_attempt() {
    let cluster = Cluster::start(&["cpus=4,mem=2048", "cpus=4,mem=2048"])
        .await
        .unwrap();
    let data = tempfile::tempdir().unwrap();
    let marks = tempfile::tempdir().unwrap();
    let jobs = start_jobs(&cluster, data.path()).await;
    let api = Api::new(&jobs);
    // Even indexes fail their first attempt (leaving a marker), and succeed the next.
    let command = format!(
        "m={}/$PARLEY_JOB-$PARLEY_TASK_INDEX; \
         if [ $((PARLEY_TASK_INDEX % 2)) -eq 0 ] && [ ! -e \"$m\" ]; then touch \"$m\"; exit 3; fi",
        shell_quote(marks.path())
    );
    let spec = serde_json::json!({
        "name": "flaky",
        "command": command,
        "count": 6,
        "max_retries": 2,
        "backoff_s": 0.1,
        "resources": {"cpus": 0.1, "mem": 16},
    });
    let (status, body) = api.submit(&spec.to_string(), "application/json").await;
    assert_eq!(status, 201, "{body}");
    let view = api.wait_done("flaky").await;
    assert_eq!(view["state"], "succeeded", "{view:#}");
    assert_eq!(view["tasks"]["succeeded"], 6);
    let failures = view["failures"].as_array().unwrap();
    let mut failed: Vec<u64> = failures
        .iter()
        .map(|f| {
            assert_eq!(f["exit_code"], 3, "{f}");
            assert_eq!(f["attempt"], 0, "{f}");
            f["index"].as_u64().unwrap()
        })
        .collect();
    failed.sort_unstable();
    assert_eq!(failed, [0, 2, 4]);
    let task = api.get("/flaky/tasks/2").await.unwrap();
    assert_eq!(
        (task["state"].as_str(), task["attempts"].as_u64()),
        (Some("succeeded"), Some(2))
    );
    jobs.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dependencies_start_after_success_and_fail_with_their_dependency() {
    let cluster = Cluster::start(&["cpus=4,mem=2048"]).await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let jobs = start_jobs(&cluster, data.path()).await;
    let api = Api::new(&jobs);
    let log = shell_quote(&out.path().join("order"));
    let job = |name: &str, command: &str, deps: &str| {
        format!(
            "name = \"{name}\"\ncommand = \"{command}\"\ndepends_on = [{deps}]\n\
             [resources]\ncpus = 0.1\nmem = 16\n"
        )
    };
    api.submit_ok(&job(
        "first",
        &format!("sleep 0.3; echo first >> {log}"),
        "",
    ))
    .await;
    api.submit_ok(&job(
        "second",
        &format!("echo second >> {log}"),
        "\"first\"",
    ))
    .await;
    api.submit_ok(&job("broken", "exit 4", "")).await;
    api.submit_ok(&job(
        "after-broken",
        &format!("echo never >> {log}"),
        "\"broken\"",
    ))
    .await;
    let second = api.wait_done("second").await;
    assert_eq!(second["state"], "succeeded", "{second:#}");
    let after = api.wait_done("after-broken").await;
    assert_eq!(after["state"], "failed", "{after:#}");
    let reason = after["reason"].as_str().unwrap();
    assert!(
        reason.contains("dependency \"broken\" failed") && reason.contains("exit code 4"),
        "{reason}"
    );
    assert_eq!(after["tasks"]["succeeded"], 0);
    assert!(
        after["failures"].as_array().unwrap().is_empty(),
        "it never ran"
    );
    let order = std::fs::read_to_string(out.path().join("order")).unwrap();
    assert_eq!(order, "first\nsecond\n");
    jobs.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_specs_are_refused_naming_the_field_and_nothing_is_queued() {
    let cluster = Cluster::start(&["cpus=1,mem=256"]).await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let jobs = start_jobs(&cluster, data.path()).await;
    let api = Api::new(&jobs);
    let base = "command = \"true\"\n[resources]\ncpus = 0.1\n";
    let cases = [
        (format!("name = \"a\"\ncuont = 2\n{base}"), "cuont", Some(2)),
        (
            format!("name = \"a\"\ncount = -3\n{base}"),
            "count",
            Some(2),
        ),
        (
            format!("name = \"a\"\n{base}gpus = 1.5\n"),
            "resources.gpus",
            Some(5),
        ),
        (
            format!("name = \"a\"\ndepends_on = [\"a\"]\n{base}"),
            "depends_on[0]",
            None,
        ),
        (
            format!("name = \"a\"\ndepends_on = [\"ghost\"]\n{base}"),
            "depends_on[0]",
            None,
        ),
    ];
    for (spec, field, line) in cases {
        let (status, body) = api.submit(&spec, "application/toml").await;
        assert_eq!(status, 400, "{spec}: {body}");
        assert_eq!(body["error"]["code"], "invalid_spec", "{body}");
        assert_eq!(body["error"]["field"], field, "{spec}: {body}");
        if let Some(line) = line {
            assert_eq!(body["error"]["line"], line, "{spec}: {body}");
        }
    }
    let (status, body) = api
        .submit(
            r#"{"name": "j", "command": "true", "resources": {"cpus": 1}, "colour": "red"}"#,
            "application/json",
        )
        .await;
    assert_eq!(
        (status, &body["error"]["field"]),
        (400, &Value::from("colour")),
        "{body}"
    );
    let list = api.get("").await.unwrap();
    assert_eq!(list["jobs"], serde_json::json!([]), "nothing was queued");
    jobs.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_service_finishes_the_array_launching_each_index_once() {
    let cluster = Cluster::start(&["cpus=4,mem=2048", "cpus=4,mem=2048"])
        .await
        .unwrap();
    let data = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let jobs = start_jobs(&cluster, data.path()).await;
    let api = Api::new(&jobs);
    let spec = crate::support::logging_array("steady", 12, 4, out.path());
    api.submit_ok(&spec).await;
    wait_until(WITHIN, "some tasks done and some running", || async {
        let v = api.get("/steady").await?;
        let t = &v["tasks"];
        (t["succeeded"].as_u64()? >= 2 && t["running"].as_u64()? >= 1).then_some(())
    })
    .await
    .unwrap();
    let framework = cluster
        .framework_named("parley-jobs")
        .await
        .unwrap()
        .unwrap();
    jobs.stop().await.unwrap();

    let jobs = start_jobs(&cluster, data.path()).await;
    let api = Api::new(&jobs);
    let view = api.wait_done("steady").await;
    assert_eq!(view["state"], "succeeded", "{view:#}");
    assert_eq!(view["succeeded"], serde_json::json!([[0, 12]]));
    assert!(view["failures"].as_array().unwrap().is_empty(), "{view:#}");
    crate::support::assert_each_ran_once(out.path(), 12);
    crate::support::assert_one_framework(&cluster, framework).await;
    jobs.stop().await.unwrap();
    cluster.wait_agents_idle().await.unwrap();
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_past_its_timeout_is_killed_and_fails_the_job() {
    let cluster = Cluster::start(&["cpus=2,mem=1024"]).await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let jobs = start_jobs(&cluster, data.path()).await;
    let api = Api::new(&jobs);
    api.submit_ok(
        "name = \"slow\"\ncommand = \"sleep 600\"\ntimeout_s = 0.5\n\
         [resources]\ncpus = 0.1\nmem = 16\n",
    )
    .await;
    let view = api.wait_done("slow").await;
    assert_eq!(view["state"], "failed", "{view:#}");
    let failure = &view["failures"][0];
    assert_eq!(failure["state"], "killed", "{view:#}");
    assert_eq!(failure["message"], "timed out after 0.5 s", "{view:#}");
    assert!(
        view["reason"].as_str().unwrap().contains("timed out"),
        "{view:#}"
    );
    jobs.stop().await.unwrap();
    cluster.wait_agents_idle().await.unwrap();
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_lost_with_their_agent_run_again_elsewhere() {
    let mut cluster = Cluster::start(&["cpus=4,mem=2048"]).await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let jobs = start_jobs(&cluster, data.path()).await;
    let api = Api::new(&jobs);
    // No retries: only losses (which use none) may run an index again.
    api.submit_ok(
        "name = \"survivor\"\ncount = 6\ncommand = \"sleep 1\"\n\
         [resources]\ncpus = 0.5\nmem = 16\n",
    )
    .await;
    wait_until(WITHIN, "tasks running on the first agent", || async {
        let v = api.get("/survivor").await?;
        (v["tasks"]["running"].as_u64()? == 6).then_some(())
    })
    .await
    .unwrap();
    cluster.add_agent("cpus=4,mem=2048").await.unwrap();
    cluster.stop_agent(0).await.unwrap();
    let view = api.wait_done("survivor").await;
    assert_eq!(view["state"], "succeeded", "{view:#}");
    let failures = view["failures"].as_array().unwrap();
    assert!(!failures.is_empty(), "{view:#}");
    assert!(
        failures
            .iter()
            .all(|f| f["state"] == "lost" && f["counted"] == false),
        "{view:#}"
    );
    jobs.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// The running replicas of service `web` as (index, attempt), once `want` of them run.
async fn replicas(api: &Api, want: usize) -> Vec<(u64, u64)> {
    wait_until(WITHIN, &format!("{want} replicas running"), || async {
        let v = api.get("/web").await?;
        let list = v["running"].as_array()?;
        let up: Vec<(u64, u64)> = list
            .iter()
            .filter(|r| r["state"] == "running")
            .filter_map(|r| Some((r["index"].as_u64()?, r["attempt"].as_u64()?)))
            .collect();
        (up.len() == want && list.len() == want).then_some(up)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_replaces_a_killed_replica_and_scales() {
    let cluster = Cluster::start(&["cpus=4,mem=2048"]).await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let jobs = start_jobs(&cluster, data.path()).await;
    let api = Api::new(&jobs);
    api.submit_ok(
        "name = \"web\"\nkind = \"service\"\nreplicas = 2\ncommand = \"sleep 600\"\n\
         backoff_s = 0.1\n[resources]\ncpus = 0.1\nmem = 16\n",
    )
    .await;
    assert_eq!(replicas(&api, 2).await, [(0, 0), (1, 0)]);
    jobs.shared
        .kill(&[parley_jobs::book::task_id("web", 0, 0)])
        .await;
    wait_until(WITHIN, "replica 0 replaced", || async {
        let v = api.get("/web").await?;
        let r = v["running"].as_array()?.first()?.clone();
        (r["attempt"] == 1 && r["state"] == "running").then_some(())
    })
    .await
    .unwrap();
    let scale = |n: u32| {
        let url = format!("{}/web/scale", api.base);
        let http = api.http.clone();
        async move {
            let r = http
                .post(url)
                .json(&serde_json::json!({ "replicas": n }))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), 200, "{}", r.text().await.unwrap());
        }
    };
    let restart = api
        .http
        .post(format!("{}/web/restart", api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(restart.status().as_u16(), 200);
    wait_until(WITHIN, "both replicas restarted", || async {
        let v = api.get("/web").await?;
        let list = v["running"].as_array()?;
        let restarted = list
            .iter()
            .filter(|r| r["state"] == "running")
            .filter(|r| r["attempt"] == if r["index"] == 0 { 2 } else { 1 })
            .count();
        (restarted == 2 && list.len() == 2).then_some(())
    })
    .await
    .unwrap();
    scale(3).await;
    assert_eq!(replicas(&api, 3).await.len(), 3);
    scale(1).await;
    assert_eq!(replicas(&api, 1).await, [(0, 2)]);
    let stopped = api.stop_job("web").await;
    assert_eq!(stopped["state"], "stopped");
    jobs.stop().await.unwrap();
    cluster.wait_agents_idle().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// The service's spec, version `v` (its replicas leave a marker `v{v}-INDEX` in `marks`).
fn web_spec(marks: &Path, v: u32, extra: &str) -> String {
    let command = format!(
        "touch {}/v{v}-$PARLEY_TASK_INDEX; exec sleep 600",
        shell_quote(marks)
    );
    let mut spec = serde_json::json!({
        "name": "web",
        "kind": "service",
        "replicas": 4,
        "max_unavailable": 1,
        "max_surge": 1,
        "command": command,
        "resources": {"cpus": 0.1, "mem": 16},
    });
    let extra: serde_json::Map<String, Value> = serde_json::from_str(extra).unwrap();
    for (key, value) in extra {
        spec[key] = value;
    }
    spec.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_rolls_to_a_new_spec_within_max_unavailable() {
    let cluster = Cluster::start(&["cpus=4,mem=2048"]).await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let marks = tempfile::tempdir().unwrap();
    let jobs = start_jobs(&cluster, data.path()).await;
    let api = Api::new(&jobs);
    let (status, body) = api
        .submit(&web_spec(marks.path(), 1, "{}"), "application/json")
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(replicas(&api, 4).await.len(), 4);
    let put = |body: String| {
        let http = api.http.clone();
        let url = format!("{}/web", api.base);
        async move {
            let r = http
                .put(url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    // Bad updates are refused naming the field, and change nothing.
    let (status, body) = put(web_spec(
        marks.path(),
        2,
        r#"{"max_unavailable": 0, "max_surge": 0}"#,
    ))
    .await;
    assert_eq!(
        (status, &body["error"]["field"]),
        (400, &Value::from("max_surge")),
        "{body}"
    );
    let (status, body) = put(web_spec(marks.path(), 2, r#"{"name": "other"}"#)).await;
    assert_eq!(
        (status, &body["error"]["field"]),
        (400, &Value::from("name")),
        "{body}"
    );
    let (status, body) = put(web_spec(marks.path(), 2, r#"{"depends_on": ["x"]}"#)).await;
    assert_eq!(
        (status, &body["error"]["field"]),
        (400, &Value::from("depends_on")),
        "{body}"
    );
    let unchanged = api.get("/web").await.unwrap();
    assert_eq!(unchanged["generation"], 0, "{unchanged:#}");
    assert_eq!(unchanged["outdated"], 0, "{unchanged:#}");

    let (status, body) = put(web_spec(marks.path(), 2, "{}")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["generation"], 1, "{body:#}");
    // Sampled while it rolls: replicas running (on either spec), never fewer than
    // replicas - max_unavailable = 3; the roll ends with all four on the new spec.
    let samples = std::sync::Mutex::new(Vec::new());
    let done = wait_until(WITHIN, "the roll to generation 1", || async {
        let v = api.get("/web").await?;
        let list = v["running"].as_array()?;
        let up = list.iter().filter(|r| r["state"] == "running").count();
        samples.lock().unwrap().push((up, v["outdated"].as_u64()?));
        let new = list
            .iter()
            .filter(|r| r["state"] == "running" && r["generation"] == 1)
            .count();
        (v["outdated"] == 0 && new == 4 && list.len() == 4).then_some(v)
    })
    .await
    .unwrap();
    let samples = samples.into_inner().unwrap();
    let least = samples.iter().map(|(up, _)| *up).min().unwrap();
    assert!(
        least >= 3,
        "{least} replicas running at one point: {samples:?}"
    );
    assert!(
        samples.iter().any(|(_, outdated)| *outdated > 0),
        "the roll was never seen under way: {samples:?}"
    );
    let replaced = done["failures"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["attempt"] == 0)
        .filter(|f| {
            f["message"]
                .as_str()
                .is_some_and(|m| m.contains("rolling update"))
        })
        .count();
    assert_eq!(replaced, 4, "{done:#}");
    for i in 0..4 {
        let marker = marks.path().join(format!("v2-{i}"));
        assert!(marker.exists(), "replica {i} never ran the new spec");
    }
    let stopped = api.stop_job("web").await;
    assert_eq!(stopped["state"], "stopped");
    jobs.stop().await.unwrap();
    cluster.wait_agents_idle().await.unwrap();
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_links_to_the_jobs_page_and_its_table() {
    let cluster = Cluster::start(&["cpus=2,mem=1024"]).await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let jobs = start_jobs(&cluster, data.path()).await;
    let api = Api::new(&jobs);
    api.submit_ok(
        "name = \"pair\"\ncommand = \"true\"\ncount = 2\n[resources]\ncpus = 0.1\nmem = 16\n",
    )
    .await;
    // The coordinator's frameworks API (the dashboard's frameworks table) carries the page's URL.
    let page_url = format!("http://{}/", jobs.addr);
    let http = reqwest::Client::new();
    let listed = wait_until(
        WITHIN,
        "the jobs framework listed with its web UI",
        || async {
            let v: Value = http
                .get(format!("{}/api/v1/frameworks", cluster.url))
                .send()
                .await
                .ok()?
                .json()
                .await
                .ok()?;
            v["frameworks"]
                .as_array()?
                .iter()
                .find(|f| f["name"] == "parley-jobs")
                .cloned()
        },
    )
    .await
    .unwrap();
    assert_eq!(listed["webui_url"], page_url, "{listed:#}");
    // The page is served there, and reads the jobs table with per-job progress.
    let page = http.get(&page_url).send().await.unwrap();
    assert_eq!(page.status().as_u16(), 200);
    assert!(page
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/html")));
    let html = page.text().await.unwrap();
    assert!(html.contains("<title>Parley jobs</title>") && html.contains("api/v1/jobs"));
    api.wait_done("pair").await;
    let table = api.get("").await.unwrap();
    let row = table["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["name"] == "pair")
        .unwrap()
        .clone();
    assert_eq!(row["tasks"]["total"], 2, "{row:#}");
    assert_eq!(row["tasks"]["succeeded"], 2, "{row:#}");
    jobs.stop().await.unwrap();
    cluster.wait_agents_idle().await.unwrap();
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_periodic_job_runs_on_a_fast_schedule_until_stopped() {
    let cluster = Cluster::start(&["cpus=2,mem=1024"]).await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let jobs = start_jobs(&cluster, data.path()).await;
    let api = Api::new(&jobs);
    let (status, body) = api
        .submit(
            "name = \"tick\"\nkind = \"periodic\"\nschedule = \"61 * * * *\"\n\
             command = \"true\"\n[resources]\ncpus = 0.1\n",
            "application/toml",
        )
        .await;
    assert_eq!(
        (status, &body["error"]["field"]),
        (400, &Value::from("schedule")),
        "{body}"
    );
    api.submit_ok(
        "name = \"tick\"\nkind = \"periodic\"\nschedule = \"* * * * * *\"\n\
         time_zone = \"Europe/Paris\"\ncommand = \"true\"\ncount = 2\n\
         [resources]\ncpus = 0.1\nmem = 16\n",
    )
    .await;
    // Every second a run, a batch job `tick-SECONDS`; wait for two that succeeded.
    let runs = wait_until(WITHIN, "two runs succeeded", || async {
        let list = api.get("").await?;
        let done: Vec<String> = list["jobs"]
            .as_array()?
            .iter()
            .filter(|j| j["state"] == "succeeded")
            .filter_map(|j| j["name"].as_str().map(str::to_owned))
            .collect();
        (done.len() >= 2).then_some(done)
    })
    .await
    .unwrap();
    assert!(runs.iter().all(|n| n.starts_with("tick-")), "{runs:?}");
    let parent = api.get("/tick").await.unwrap();
    assert_eq!(
        (parent["kind"].as_str(), parent["state"].as_str()),
        (Some("periodic"), Some("active"))
    );
    assert!(parent["next_run_ms"].as_u64().is_some(), "{parent:#}");
    let r = api
        .http
        .post(format!("{}/tick/stop", api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let stopped = api.get("/tick").await.unwrap();
    assert_eq!(stopped["state"], "stopped");
    assert!(stopped.get("next_run_ms").is_none(), "{stopped:#}");
    // Runs already started finish; no new one starts.
    let settled = wait_until(WITHIN, "every run ended", || async {
        let list = api.get("").await?;
        let jobs = list["jobs"].as_array()?.clone();
        jobs.iter()
            .all(|j| j["state"] != "active" && j["state"] != "waiting")
            .then_some(jobs.len())
    })
    .await
    .unwrap();
    let later = api.get("").await.unwrap()["jobs"].as_array().unwrap().len();
    assert_eq!(settled, later);
    jobs.stop().await.unwrap();
    cluster.wait_agents_idle().await.unwrap();
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_follows_a_job_to_its_end() {
    use futures::StreamExt;

    let cluster = Cluster::start(&["cpus=2,mem=1024"]).await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let jobs = start_jobs(&cluster, data.path()).await;
    let api = Api::new(&jobs);
    let stream = api
        .http
        .get(format!("{}/events", api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status().as_u16(), 200);
    let mut bytes = stream.bytes_stream();
    api.submit_ok(
        "name = \"watched\"\ncount = 3\ncommand = \"true\"\n[resources]\ncpus = 0.1\nmem = 16\n",
    )
    .await;
    let mut parser = protocol::sse::SseParser::default();
    let mut states = Vec::new();
    let seen = tokio::time::timeout(WITHIN, async {
        while let Some(chunk) = bytes.next().await {
            for frame in parser.feed(&chunk.unwrap()).unwrap() {
                assert_eq!(frame.event, "job", "{frame:?}");
                let v: Value = serde_json::from_str(&frame.data).unwrap();
                assert_eq!(v["name"], "watched");
                states.push(v["state"].as_str().unwrap().to_owned());
                if v["state"] == "succeeded" {
                    assert_eq!(v["tasks"]["succeeded"], 3);
                    return true;
                }
            }
        }
        false
    })
    .await
    .unwrap();
    assert!(seen, "{states:?}");
    assert_eq!(states.first().map(String::as_str), Some("active"));
    let r = api
        .http
        .delete(format!("{}/watched", api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let deleted = tokio::time::timeout(WITHIN, async {
        while let Some(chunk) = bytes.next().await {
            if let Some(frame) = parser.feed(&chunk.unwrap()).unwrap().into_iter().next() {
                return frame;
            }
        }
        panic!("the stream ended");
    })
    .await
    .unwrap();
    assert_eq!(deleted.event, "deleted");
    // Stopping the service ends the stream rather than waiting on it.
    jobs.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_can_demand_a_token_over_https() {
    let cluster = Cluster::start(&["cpus=1,mem=256"]).await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let pki = parley_tls::testing::TestPki::generate(data.path()).unwrap();
    let mut config = ServiceConfig::new(&cluster.url, "default".parse().unwrap(), data.path());
    config.api_token = Some("s3cret".into());
    config.tls =
        Some(parley_tls::ServerTls::from_pem_files(&pki.cert_file, &pki.key_file).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let jobs = parley_jobs::start(config, listener).await.unwrap();
    let http = parley_tls::client_builder(Some(&pki.ca_file))
        .unwrap()
        .build()
        .unwrap();
    let url = format!("https://localhost:{}/api/v1/jobs", jobs.addr.port());
    let bare = http.get(&url).send().await.unwrap();
    assert_eq!(bare.status().as_u16(), 401);
    let body: Value = bare.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unauthorized");
    let wrong = http.get(&url).bearer_auth("guess").send().await.unwrap();
    assert_eq!(wrong.status().as_u16(), 401);
    let right = http.get(&url).bearer_auth("s3cret").send().await.unwrap();
    assert_eq!(right.status().as_u16(), 200);
    let plain = reqwest::get(format!("http://{}/api/v1/jobs", jobs.addr)).await;
    assert!(plain.is_err(), "no plain HTTP on an HTTPS port");
    jobs.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unhealthy_replica_is_replaced() {
    let cluster = Cluster::start(&["cpus=2,mem=1024"]).await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let jobs = start_jobs(&cluster, data.path()).await;
    let api = Api::new(&jobs);
    api.submit_ok(
        "name = \"sick\"\nkind = \"service\"\ncommand = \"sleep 600\"\nbackoff_s = 0.1\n\
         [resources]\ncpus = 0.1\nmem = 16\n\
         [health_check]\ncommand = { shell = \"false\" }\ninterval_s = 0.2\nconsecutive_failures = 1\n",
    )
    .await;
    let view = wait_until(WITHIN, "a replica replaced", || async {
        let v = api.get("/sick").await?;
        let replaced = v["failures"]
            .as_array()?
            .iter()
            .any(|f| f["message"] == "unhealthy: killed after its health check failed");
        replaced.then_some(v)
    })
    .await
    .unwrap();
    assert_eq!(view["state"], "active", "{view:#}");
    let stopped = api.stop_job("sick").await;
    assert_eq!(stopped["state"], "stopped");
    jobs.stop().await.unwrap();
    cluster.wait_agents_idle().await.unwrap();
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_down_framework_is_registered_anew_and_the_array_finishes() {
    let cluster = Cluster::start(&["cpus=4,mem=2048"]).await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let jobs = start_jobs(&cluster, data.path()).await;
    let api = Api::new(&jobs);
    api.submit_ok(
        "name = \"phoenix\"\ncount = 6\nmax_running = 3\ncommand = \"sleep 0.5\"\n\
         [resources]\ncpus = 0.1\nmem = 16\n",
    )
    .await;
    wait_until(WITHIN, "tasks running", || async {
        let v = api.get("/phoenix").await?;
        (v["tasks"]["running"].as_u64()? >= 1).then_some(())
    })
    .await
    .unwrap();
    let old = cluster
        .framework_named("parley-jobs")
        .await
        .unwrap()
        .unwrap();
    let (status, body) = cluster
        .send_json(
            reqwest::Method::DELETE,
            &format!("/api/v1/frameworks/{old}"),
            "",
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    let view = api.wait_done("phoenix").await;
    assert_eq!(view["state"], "succeeded", "{view:#}");
    let frameworks = cluster.frameworks().await.unwrap().frameworks;
    assert!(
        frameworks
            .iter()
            .any(|f| f.name == "parley-jobs" && f.framework_id != old),
        "a new framework registered"
    );
    let lost = view["failures"].as_array().unwrap();
    assert!(
        !lost.is_empty() && lost.iter().all(|f| f["counted"] == false),
        "{view:#}"
    );
    jobs.stop().await.unwrap();
    cluster.wait_agents_idle().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// `printf %s TOKEN | sha256sum`, in hex.
fn sha256_hex(token: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `GET /api/v1/jobs` as the user of `token`.
async fn list_as(http: &reqwest::Client, base: &str, token: &str) -> Option<Value> {
    let r = http.get(base).bearer_auth(token).send().await.ok()?;
    r.json().await.ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_limit_caps_its_jobs_together_and_users_change_only_their_own() {
    let cluster = Cluster::start(&["cpus=4,mem=2048"]).await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let users = format!(
        "[[user]]\nname = \"alice\"\nsecret_sha256 = \"{}\"\nmax_running = 2\n\
         [[user]]\nname = \"bob\"\nsecret_sha256 = \"{}\"\n",
        sha256_hex("alice-token-0123456789"),
        sha256_hex("bob-token-0123456789ab")
    );
    let mut config = ServiceConfig::new(&cluster.url, "default".parse().unwrap(), data.path());
    config.users = Some(parley_jobs::users::Users::parse(&users).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let jobs = parley_jobs::start(config, listener).await.unwrap();
    let base = format!("http://{}/api/v1/jobs", jobs.addr);
    let http = reqwest::Client::new();
    let long = |name: &str| {
        format!("name = \"{name}\"\ncount = 3\ncommand = \"sleep 60\"\n[resources]\ncpus = 0.1\nmem = 16\n")
    };
    for (token, name) in [
        ("alice-token-0123456789", "a1"),
        ("alice-token-0123456789", "a2"),
        ("bob-token-0123456789ab", "b"),
    ] {
        let r = http
            .post(&base)
            .bearer_auth(token)
            .header("content-type", "application/toml")
            .body(long(name))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 201, "{}", r.text().await.unwrap());
    }
    let anonymous = http.get(&base).send().await.unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);
    // bob's three run, so the cluster had room; alice's two jobs run two tasks in all.
    let list = wait_until(WITHIN, "bob's 3 and alice's 2 running", || async {
        let v = list_as(&http, &base, "bob-token-0123456789ab").await?;
        let running = |job: &str| {
            v["jobs"]
                .as_array()
                .and_then(|l| l.iter().find(|j| j["name"] == job))
                .and_then(|j| j["tasks"]["running"].as_u64())
                .unwrap_or(0)
        };
        (running("b") == 3 && running("a1") + running("a2") == 2).then_some(v)
    })
    .await
    .unwrap();
    let owners: Vec<&str> = list["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["owner"].as_str().unwrap())
        .collect();
    assert_eq!(owners, ["alice", "alice", "bob"]);
    // bob may not stop alice's job; alice may.
    let r = http
        .post(format!("{base}/a1/stop"))
        .bearer_auth("bob-token-0123456789ab")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "not_owner");
    for (token, name) in [
        ("alice-token-0123456789", "a1"),
        ("alice-token-0123456789", "a2"),
        ("bob-token-0123456789ab", "b"),
    ] {
        let r = http
            .post(format!("{base}/{name}/stop"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{}", r.text().await.unwrap());
    }
    wait_until(WITHIN, "nothing left running", || async {
        let v = list_as(&http, &base, "alice-token-0123456789").await?;
        v["jobs"]
            .as_array()?
            .iter()
            .all(|j| j["tasks"]["running"] == 0)
            .then_some(())
    })
    .await
    .unwrap();
    jobs.stop().await.unwrap();
    cluster.shutdown().await.unwrap();
}
