//! The shape of `/metrics` a populated coordinator serves: every metric family (name, type,
//! label names, help) recorded in `fixtures/metric_families.txt` must still be served exactly
//! so, whatever writes the page. The fixture was recorded from the hand-written exposition that
//! came before `prometheus-client`, so dashboards and alerts built on it keep working; families
//! added since are allowed (each is documented by `METRICS`, see `metrics_reference`).
//! `PARLEY_BLESS=1` re-records it; only do that for a deliberate, documented change of shape.

use std::collections::{BTreeMap, BTreeSet};

use protocol::{AgentId, FrameworkId, TaskState};
use serde_json::json;

use crate::agent_api::status_json;
use crate::support::{fast_config, FakeAgent, Rest, TestCoordinator};

/// One family: its type, the names of its series' labels, and its help.
#[derive(Debug, PartialEq, Eq)]
struct Family {
    kind: String,
    labels: BTreeSet<String>,
    help: String,
}

/// The families of a Prometheus text page. A series belongs to the family whose name is the
/// longest prefix of its name (so `x_bucket`, `x_sum`, `x_count` belong to histogram `x`).
fn families(text: &str) -> BTreeMap<String, Family> {
    let mut out: BTreeMap<String, Family> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            out.entry(name.to_string())
                .or_insert_with(|| Family {
                    kind: String::new(),
                    labels: BTreeSet::new(),
                    help: String::new(),
                })
                .help = help.to_string();
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            if let Some(f) = out.get_mut(name) {
                f.kind = kind.to_string();
            }
        }
    }
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let series = line.split([' ', '{']).next().unwrap_or_default();
        let Some(name) = out
            .keys()
            .filter(|n| series.starts_with(n.as_str()))
            .max_by_key(|n| n.len())
            .cloned()
        else {
            panic!("series {series} belongs to no family");
        };
        if let Some((_, labels)) = line.split_once('{') {
            let labels = labels.split_once('}').map_or("", |(l, _)| l);
            for pair in labels.split(',').filter(|p| !p.is_empty()) {
                let key = pair.split_once('=').map_or(pair, |(k, _)| k);
                if let Some(f) = out.get_mut(&name) {
                    f.labels.insert(key.to_string());
                }
            }
        }
    }
    out
}

/// One line per family: `name type label,label help`.
fn render(families: &BTreeMap<String, Family>) -> String {
    families
        .iter()
        .map(|(name, f)| {
            let labels: Vec<&str> = f.labels.iter().map(String::as_str).collect();
            let labels = if labels.is_empty() {
                "-".to_string()
            } else {
                labels.join(",")
            };
            format!("{name} {} {labels} {}\n", f.kind, f.help)
        })
        .collect()
}

/// The inverse of [`render`].
fn parse(fixture: &str) -> BTreeMap<String, Family> {
    fixture
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let mut parts = l.splitn(4, ' ');
            let name = parts.next().unwrap_or_default().to_string();
            let kind = parts.next().unwrap_or_default().to_string();
            let labels = match parts.next().unwrap_or_default() {
                "-" => BTreeSet::new(),
                l => l.split(',').map(str::to_string).collect(),
            };
            let help = parts.next().unwrap_or_default().to_string();
            (name, Family { kind, labels, help })
        })
        .collect()
}

/// A coordinator with an agent (with a GPU), a framework and a running task, so that every
/// labelled family has series.
async fn populated_metrics() -> String {
    let c = TestCoordinator::start(fast_config()).await;
    let agent = FakeAgent::start().await;
    let (agent_id, fw) = (AgentId::new(), FrameworkId::new());
    let (status, body) = c
        .post(
            "/api/v1/agents",
            json!({"hostname": "fake", "endpoint": agent.endpoint,
                   "resources": {"cpus": 4, "gpus": 1}, "agent_id": agent_id,
                   "tasks": [status_json(agent_id, fw, "t", "running")]}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = c
        .post(
            "/api/v1/frameworks",
            json!({"name": "f", "role": "eng", "framework_id": fw}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let mut events = c.subscribe(fw).await;
    events.update("t", TaskState::Running).await;
    let (status, text) = c.get_text("/metrics").await;
    assert_eq!(status, 200);
    text
}

#[tokio::test]
async fn every_recorded_metric_family_is_served_with_the_same_shape() {
    let text = populated_metrics().await;
    let now = families(&text);
    let path = testkit::docs::repository()
        .join("coordinator/tests/coordinator/fixtures/metric_families.txt");
    if std::env::var_os("PARLEY_BLESS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, render(&now)).unwrap();
        return;
    }
    let recorded = parse(&std::fs::read_to_string(&path).unwrap());
    assert!(recorded.len() >= 39, "the fixture lists too few families");
    for (name, before) in &recorded {
        assert_eq!(
            now.get(name),
            Some(before),
            "family {name} changed shape:\n{text}"
        );
    }
}
