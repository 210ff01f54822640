//! The jobs service's commands: `run FILE [--wait]`, `jobs`, `job status|stop|delete NAME`,
//! `job scale NAME N`, `job restart NAME`, `job logs NAME [--index I]` (the output itself comes from the
//! coordinator), and `job run --command CMD` (a batch job of one command, without a file).
//! They talk to the jobs service (`--jobs-url`, `PARLEY_JOBS_URL`), not to the coordinator,
//! through [`JobsApi`], and read its JSON loosely (as `serde_json::Value`), so this tool does
//! not depend on the service's crate.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use super::print_raw;
use crate::error::{root_cause, CtlError};
use crate::table::Table;

/// How often `run --wait` asks about the job.
const POLL: Duration = Duration::from_millis(250);

/// A client for the jobs service.
#[derive(Debug, Clone)]
pub struct JobsApi {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
}

impl JobsApi {
    /// A client for the service at `url` (e.g. `http://127.0.0.1:5070`), sending `token`.
    pub fn new(url: &str, token: Option<String>, ca_file: Option<&Path>) -> Result<Self, CtlError> {
        let base = url.trim().trim_end_matches('/').to_owned();
        let parsed = reqwest::Url::parse(&base)
            .map_err(|e| CtlError::Usage(format!("--jobs-url {url:?} is not a URL: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(CtlError::Usage(format!(
                "--jobs-url {url:?}: expected an http:// or https:// URL"
            )));
        }
        let http = parley_tls::client_builder(ca_file)
            .map_err(|e| CtlError::Usage(format!("--ca-file: {e}")))?
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| CtlError::Usage(format!("cannot set up the HTTP client: {e}")))?;
        Ok(Self { base, token, http })
    }

    /// Sends a request to `/api/v1/jobs{path}`: the answer's text, or the error it carries.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<(String, &str)>,
    ) -> Result<String, CtlError> {
        let url = format!("{}/api/v1/jobs{path}", self.base);
        let mut request = self.http.request(method, &url);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some((body, content_type)) = body {
            request = request.header("content-type", content_type).body(body);
        }
        let response = request
            .send()
            .await
            .map_err(|e| CtlError::JobsUnreachable {
                url: self.base.clone(),
                reason: root_cause(&e),
            })?;
        let status = response.status().as_u16();
        let text = response
            .text()
            .await
            .map_err(|e| CtlError::JobsUnreachable {
                url: self.base.clone(),
                reason: root_cause(&e),
            })?;
        if (200..300).contains(&status) {
            return Ok(text);
        }
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let error = &body["error"];
        let mut message = error["message"]
            .as_str()
            .map_or_else(|| text.chars().take(256).collect(), str::to_owned);
        if let Some(field) = error["field"].as_str() {
            if !message.starts_with(field) {
                message = format!("{field}: {message}");
            }
        }
        Err(CtlError::Api {
            status,
            code: error["code"].as_str().unwrap_or("error").to_owned(),
            message,
        })
    }

    async fn get(&self, path: &str) -> Result<(String, Value), CtlError> {
        let text = self.call(Method::GET, path, None).await?;
        let value = serde_json::from_str(&text).map_err(|e| CtlError::Protocol(e.to_string()))?;
        Ok((text, value))
    }
}

fn count(v: &Value, key: &str) -> u64 {
    v["tasks"][key].as_u64().unwrap_or(0)
}

/// `succeeded/total, N running, M failed` for a job's summary.
fn progress(v: &Value) -> String {
    let mut s = format!("{}/{} succeeded", count(v, "succeeded"), count(v, "total"));
    for (key, label) in [
        ("running", "running"),
        ("retrying", "retrying"),
        ("queued", "queued"),
        ("failed", "failed"),
    ] {
        let n = count(v, key);
        if n > 0 {
            s.push_str(&format!(", {n} {label}"));
        }
    }
    s
}

fn state(v: &Value) -> &str {
    v["state"].as_str().unwrap_or("?")
}

/// `parleyctl run FILE [--wait]`: submits a spec (TOML, or JSON for a `.json` file); with
/// `wait`, prints a progress line whenever it changes until the job ends, and fails unless
/// it succeeded.
pub async fn run(
    api: &JobsApi,
    file: &Path,
    wait: bool,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CtlError> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| CtlError::Usage(format!("cannot read {}: {e}", file.display())))?;
    let content_type = match file.extension().and_then(|e| e.to_str()) {
        Some("json") => "application/json",
        _ => "application/toml",
    };
    submit(api, text, content_type, wait, json, out).await
}

/// `parleyctl job run --command CMD ...`: a batch job of one shell command, without a file.
#[derive(Debug, Clone)]
pub struct Wrap<'a> {
    /// `--command`: the shell command each task runs.
    pub command: &'a str,
    /// `--count`: how many tasks.
    pub count: u32,
    /// `--cpus`: CPUs per task.
    pub cpus: f64,
    /// `--mem`: MiB per task.
    pub mem: f64,
    /// `--name`: the job's name; `run-MILLIS` without it.
    pub name: Option<&'a str>,
}

impl Wrap<'_> {
    /// The job spec (JSON) the flags make, or a usage error naming the first bad flag. The
    /// service checks the spec again; these checks only spare a round trip and name the flag
    /// rather than the spec's field.
    pub fn spec(&self, now_ms: i64) -> Result<Value, CtlError> {
        let bad = |flag: &str, why: &str| CtlError::Usage(format!("{flag}: {why}"));
        if self.command.trim().is_empty() {
            return Err(bad("--command", "give the shell command each task runs"));
        }
        if self.count == 0 {
            return Err(bad("--count", "run at least 1 task"));
        }
        if !(self.cpus.is_finite() && self.cpus > 0.0) {
            return Err(bad("--cpus", "a number of CPUs above 0, such as 0.5 or 2"));
        }
        if !(self.mem.is_finite() && self.mem >= 0.0) {
            return Err(bad("--mem", "a number of MiB, 0 or more"));
        }
        let name = match self.name {
            Some(name) => {
                if !valid_job_name(name) {
                    return Err(CtlError::Usage(format!(
                        "--name: {name:?} is not a job name: use 1 to 63 lowercase letters, digits and inner dashes (not `events`)"
                    )));
                }
                name.to_owned()
            }
            None => format!("run-{now_ms}"),
        };
        Ok(serde_json::json!({
            "name": name,
            "command": self.command,
            "count": self.count,
            "resources": {"cpus": self.cpus, "mem": self.mem},
        }))
    }
}

/// The jobs service's rule for a job's name: 1-63 of `[a-z0-9-]`, no dash first or last, not
/// `events` (the service's event stream).
fn valid_job_name(name: &str) -> bool {
    name != "events"
        && (1..=63).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// `parleyctl job run --command CMD [--count N] [--cpus X] [--mem MB] [--name NAME] [--wait]`:
/// the flags are checked, then submitted as a JSON spec, as `run FILE` submits a file.
pub async fn run_command(
    api: &JobsApi,
    wrap: &Wrap<'_>,
    wait: bool,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CtlError> {
    let spec = wrap.spec(chrono::Utc::now().timestamp_millis())?;
    submit(api, spec.to_string(), "application/json", wait, json, out).await
}

/// Submits a spec's `text` of `content_type` (see [`run`]).
async fn submit(
    api: &JobsApi,
    text: String,
    content_type: &str,
    wait: bool,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CtlError> {
    let answer = match api
        .call(Method::POST, "", Some((text.clone(), content_type)))
        .await
    {
        Err(CtlError::Api {
            status: 409,
            code,
            message,
        }) if code == "job_exists" => {
            // Like `nomad job run`: a service that exists is updated to the file's spec (a
            // rolling update when what its replicas run changed); any other job is refused.
            let name = spec_name(&text, content_type).ok_or_else(|| CtlError::Api {
                status: 409,
                code: code.clone(),
                message: message.clone(),
            })?;
            let (_, existing) = api.get(&format!("/{name}")).await?;
            if existing["kind"] != "service" {
                return Err(CtlError::Api {
                    status: 409,
                    code,
                    message,
                });
            }
            let answer = api
                .call(Method::PUT, &format!("/{name}"), Some((text, content_type)))
                .await?;
            if !json {
                let updated: Value =
                    serde_json::from_str(&answer).map_err(|e| CtlError::Protocol(e.to_string()))?;
                writeln!(
                    out,
                    "service {name} updated to generation {} ({} replicas to replace)",
                    updated["generation"], updated["outdated"]
                )?;
            }
            answer
        }
        other => other?,
    };
    let submitted: Value =
        serde_json::from_str(&answer).map_err(|e| CtlError::Protocol(e.to_string()))?;
    let name = submitted["name"]
        .as_str()
        .ok_or_else(|| CtlError::Protocol("the answer names no job".into()))?
        .to_owned();
    // A periodic job never ends by itself: there is nothing to wait for.
    let periodic = submitted["kind"] == "periodic";
    if !wait || periodic {
        if json {
            return print_raw(out, &answer);
        }
        writeln!(out, "job {name} submitted: {}", progress(&submitted))?;
        return Ok(());
    }
    if !json {
        writeln!(out, "job {name} submitted")?;
    }
    let mut last = String::new();
    let (raw, view) = loop {
        let (raw, view) = api.get(&format!("/{name}")).await?;
        let line = format!("{name}: {} ({})", state(&view), progress(&view));
        if line != last && !json {
            writeln!(out, "{line}")?;
            out.flush()?;
            last = line;
        }
        if matches!(state(&view), "succeeded" | "failed" | "stopped") {
            break (raw, view);
        }
        // A service never ends by itself: it is up once every replica runs.
        let rolled = view["outdated"].as_u64().unwrap_or(0) == 0;
        if view["kind"] == "service" && rolled && count(&view, "running") == count(&view, "total") {
            let up = view["running"]
                .as_array()
                .is_some_and(|r| r.iter().all(|t| t["state"] == "running"));
            if up {
                break (raw, view);
            }
        }
        tokio::time::sleep(POLL).await;
    };
    if json {
        print_raw(out, &raw)?;
    }
    match state(&view) {
        "succeeded" => Ok(()),
        "active" => Ok(()),
        other => Err(CtlError::JobFailed(format!(
            "job {name} {other}{}",
            view["reason"]
                .as_str()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        ))),
    }
}

/// The `name` a spec file gives, read loosely (the service checks the rest).
fn spec_name(text: &str, content_type: &str) -> Option<String> {
    let value: Value = if content_type.contains("json") {
        serde_json::from_str(text).ok()?
    } else {
        toml::from_str(text).ok()?
    };
    value["name"].as_str().map(str::to_owned)
}

/// `parleyctl jobs`: every job, one line each.
pub async fn list(api: &JobsApi, json: bool, out: &mut dyn Write) -> Result<(), CtlError> {
    let (raw, list) = api.get("").await?;
    if json {
        return print_raw(out, &raw);
    }
    let mut table = Table::new(&[
        "NAME",
        "STATE",
        "PRIORITY",
        "SUCCEEDED",
        "RUNNING",
        "FAILED",
        "REASON",
    ]);
    for job in items(&list["jobs"]) {
        table.row(vec![
            job["name"].as_str().unwrap_or("?").to_owned(),
            state(job).to_owned(),
            job["priority"].to_string(),
            format!("{}/{}", count(job, "succeeded"), count(job, "total")),
            count(job, "running").to_string(),
            count(job, "failed").to_string(),
            job["reason"].as_str().unwrap_or("").to_owned(),
        ]);
    }
    if table.is_empty() {
        writeln!(out, "no jobs")?;
        return Ok(());
    }
    table.write(out)?;
    Ok(())
}

/// `parleyctl job status NAME`: the job's state, its tasks by state, and every failed attempt
/// with its exit code and reason.
pub async fn status(
    api: &JobsApi,
    name: &str,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CtlError> {
    let (raw, view) = api.get(&format!("/{name}")).await?;
    if json {
        return print_raw(out, &raw);
    }
    writeln!(out, "job {name}: {}", state(&view))?;
    if let Some(reason) = view["reason"].as_str() {
        writeln!(out, "  reason: {reason}")?;
    }
    writeln!(out, "  tasks:  {}", progress(&view))?;
    let running = items(&view["running"]);
    if !running.is_empty() {
        let mut table = Table::new(&["INDEX", "ATTEMPT", "STATE", "TASK", "AGENT"]);
        for r in running {
            table.row(vec![
                r["index"].to_string(),
                r["attempt"].to_string(),
                r["state"].as_str().unwrap_or("?").to_owned(),
                r["task_id"].as_str().unwrap_or("?").to_owned(),
                r["agent_id"].as_str().unwrap_or("-").to_owned(),
            ]);
        }
        writeln!(out, "running:")?;
        table.write(out)?;
    }
    let failures = items(&view["failures"]);
    if !failures.is_empty() {
        let mut table = Table::new(&["INDEX", "ATTEMPT", "STATE", "EXIT", "REASON"]);
        for f in failures {
            table.row(vec![
                f["index"].to_string(),
                f["attempt"].to_string(),
                f["state"].as_str().unwrap_or("?").to_owned(),
                f["exit_code"]
                    .as_i64()
                    .map_or_else(|| "-".to_owned(), |c| c.to_string()),
                f["message"].as_str().unwrap_or("").to_owned(),
            ]);
        }
        writeln!(out, "failed attempts:")?;
        table.write(out)?;
    }
    Ok(())
}

/// Sends a request that changes a job; prints the API's answer with `json`, else `done`.
async fn change(
    api: &JobsApi,
    method: Method,
    path: &str,
    json: bool,
    out: &mut dyn Write,
    done: &str,
) -> Result<(), CtlError> {
    let raw = api.call(method, path, None).await?;
    if json {
        return print_raw(out, &raw);
    }
    writeln!(out, "{done}")?;
    Ok(())
}

/// `parleyctl job stop NAME`: nothing more is launched; running tasks are killed.
pub async fn stop(
    api: &JobsApi,
    name: &str,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CtlError> {
    change(
        api,
        Method::POST,
        &format!("/{name}/stop"),
        json,
        out,
        &format!("job {name} stopped"),
    )
    .await
}

/// `parleyctl job scale NAME N`: a service's new number of replicas.
pub async fn scale(
    api: &JobsApi,
    name: &str,
    replicas: u32,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CtlError> {
    let body = serde_json::json!({ "replicas": replicas }).to_string();
    let raw = api
        .call(
            Method::POST,
            &format!("/{name}/scale"),
            Some((body, "application/json")),
        )
        .await?;
    if json {
        return print_raw(out, &raw);
    }
    writeln!(out, "service {name}: {replicas} replicas")?;
    Ok(())
}

/// `parleyctl job logs NAME [--index I] [--stderr] [-f]`: the output of the latest attempt of
/// task `index`, through the coordinator (as `parleyctl logs TASK`).
pub async fn logs(
    api: &JobsApi,
    coordinator: &crate::client::Api,
    name: &str,
    index: u32,
    stderr: bool,
    follow: bool,
    out: &mut dyn Write,
) -> Result<(), CtlError> {
    let (_, task) = api.get(&format!("/{name}/tasks/{index}")).await?;
    let attempts = task["attempts"].as_u64().unwrap_or(0);
    let Some(latest) = attempts.checked_sub(1) else {
        return Err(CtlError::NotFound(format!(
            "task {index} of job {name} has not run yet"
        )));
    };
    let task_id = format!("job-{name}-{index}-{latest}");
    super::logs::logs(coordinator, &task_id, None, stderr, follow, out).await
}

/// `parleyctl job restart NAME`: a service's replicas are killed and start again at once.
pub async fn restart(
    api: &JobsApi,
    name: &str,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CtlError> {
    change(
        api,
        Method::POST,
        &format!("/{name}/restart"),
        json,
        out,
        &format!("service {name} restarting"),
    )
    .await
}

/// `parleyctl job delete NAME`: forgets the job, killing what still runs.
pub async fn delete(
    api: &JobsApi,
    name: &str,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CtlError> {
    change(
        api,
        Method::DELETE,
        &format!("/{name}"),
        json,
        out,
        &format!("job {name} deleted"),
    )
    .await
}

/// The elements of a JSON array (none when `v` is not one).
fn items(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn wrap(command: &str) -> Wrap<'_> {
        Wrap {
            command,
            count: 1,
            cpus: 1.0,
            mem: 128.0,
            name: None,
        }
    }

    #[test]
    fn the_flags_make_a_batch_spec() {
        let spec = Wrap {
            count: 4,
            cpus: 0.5,
            mem: 0.0,
            name: Some("render-2"),
            ..wrap("echo $PARLEY_TASK_INDEX")
        }
        .spec(7)
        .unwrap();
        assert_eq!(
            spec,
            serde_json::json!({
                "name": "render-2",
                "command": "echo $PARLEY_TASK_INDEX",
                "count": 4,
                "resources": {"cpus": 0.5, "mem": 0.0},
            })
        );
        assert_eq!(wrap("true").spec(1_700_000).unwrap()["name"], "run-1700000");
    }

    #[test]
    fn each_bad_flag_is_named() {
        let cases = [
            (wrap(" \t"), "--command"),
            (
                Wrap {
                    count: 0,
                    ..wrap("true")
                },
                "--count",
            ),
            (
                Wrap {
                    cpus: 0.0,
                    ..wrap("true")
                },
                "--cpus",
            ),
            (
                Wrap {
                    cpus: f64::INFINITY,
                    ..wrap("true")
                },
                "--cpus",
            ),
            (
                Wrap {
                    mem: -1.0,
                    ..wrap("true")
                },
                "--mem",
            ),
            (
                Wrap {
                    mem: f64::NAN,
                    ..wrap("true")
                },
                "--mem",
            ),
        ];
        for (bad, flag) in cases {
            match bad.spec(1) {
                Err(CtlError::Usage(m)) => assert!(m.starts_with(flag), "{flag}: {m}"),
                other => panic!("{flag}: {other:?}"),
            }
        }
        for name in ["", "-a", "a-", "Upper", "a_b", "events", &"a".repeat(64)] {
            let bad = Wrap {
                name: Some(name),
                ..wrap("true")
            };
            assert!(
                matches!(bad.spec(1), Err(CtlError::Usage(m)) if m.starts_with("--name")),
                "{name:?}"
            );
        }
        assert!(Wrap {
            name: Some(&"a".repeat(63)),
            ..wrap("true")
        }
        .spec(1)
        .is_ok());
    }
}
