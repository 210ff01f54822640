//! Runs the built `hdrf-sim` binary over the scenarios in `tests/scenarios/` (the test vectors of
//! `docs/src/internals/algorithms.md`, under `hdrf`, `drf` and `plain_sum`) and checks each outcome
//! against the `NAME.expected.json` beside it; also checks that bad scenarios exit non-zero with a
//! one-line error.

#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn sim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hdrf-sim"))
}

fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios")
}

fn run_stdin(input: &str) -> Output {
    let mut child = sim()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// `{"leaf": tasks}` of one outcome (or round) object.
fn tasks(outcome: &Value) -> Value {
    let leaves = outcome["leaves"].as_object().unwrap();
    Value::Object(
        leaves
            .iter()
            .map(|(k, v)| (k.clone(), v["tasks"].clone()))
            .collect(),
    )
}

fn check(name: &str, got: &Value, want: &Value) {
    assert_eq!(got["decisions"], want["decisions"], "{name}: decisions");
    assert_eq!(tasks(got), want["tasks"], "{name}: tasks per leaf");
    let want_rounds = want["rounds"].as_array().cloned().unwrap_or_default();
    let got_rounds = got["rounds"].as_array().unwrap();
    assert_eq!(got_rounds.len(), want_rounds.len(), "{name}: rounds");
    for (i, (g, w)) in got_rounds.iter().zip(&want_rounds).enumerate() {
        assert_eq!(
            g["decisions"], w["decisions"],
            "{name}: round {i} decisions"
        );
        assert_eq!(tasks(g), w["tasks"], "{name}: round {i} tasks");
    }
}

#[test]
fn every_scenario_matches_its_expected_outcome() {
    let mut checked = 0;
    for entry in std::fs::read_dir(scenarios_dir()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".json") || name.ends_with(".expected.json") {
            continue;
        }
        let expected = path.with_extension("expected.json");
        let want: Value = serde_json::from_str(&std::fs::read_to_string(&expected).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", expected.display()));
        let out = sim().arg(&path).output().unwrap();
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got: Value = serde_json::from_slice(&out.stdout).unwrap();
        check(&name, &got, &want);
        checked += 1;
    }
    assert!(checked >= 9, "only {checked} scenarios found");
}

#[test]
fn reads_stdin_and_reports_allocations() {
    let text = std::fs::read_to_string(scenarios_dir().join("v3_hierarchy.json")).unwrap();
    let out = run_stdin(&text);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        got["leaves"]["sci"]["allocated"],
        serde_json::json!({"cpus": 5, "mem": 5})
    );
    assert_eq!(
        got["leaves"]["dev"]["allocated"],
        serde_json::json!({"cpus": 5})
    );
    assert_eq!(
        got["leaves"]["prod"]["allocated"],
        serde_json::json!({"mem": 5})
    );
    assert_eq!(got["rounds"], serde_json::json!([]));
}

#[test]
fn bad_scenarios_exit_non_zero_with_one_line() {
    let cases = [
        (
            r#"{"policy": "fifo", "capacity": {"cpus": 1}, "tree": []}"#,
            "unknown variant",
        ),
        (
            r#"{"policy": "hdrf", "capacity": {"cpus": 1}, "tree": [
                {"name": "a", "demand": {"cpus": 1}}, {"name": "a", "demand": {"cpus": 1}}]}"#,
            "duplicate",
        ),
        (
            r#"{"policy": "hdrf", "capacity": {"cpus": 1}, "tree": [
                {"name": "x", "children": [{"name": "a", "demand": {"cpus": 1}}]},
                {"name": "y", "children": [{"name": "a", "demand": {"cpus": 1}}]}]}"#,
            "duplicate leaf name",
        ),
        (
            r#"{"policy": "hdrf", "capacity": {"cpus": 1}, "tree": [{"name": "a"}]}"#,
            "needs a demand",
        ),
        (
            r#"{"policy": "hdrf", "capacity": {"cpus": -1}, "tree": []}"#,
            "negative",
        ),
        (
            r#"{"policy": "hdrf", "capacity": {"cpus": 1}, "tree": [{"name": "a", "demand": {"cpus": 1}, "max_tasks": -2}]}"#,
            "invalid value",
        ),
        (
            r#"{"policy": "hdrf", "capacity": {"cpus": 1}, "tree": [{"name": "a", "demand": {"cpus": 1}, "wieght": 2}]}"#,
            "unknown field",
        ),
        (
            r#"{"policy": "hdrf", "capacity": {"cpus": 1}, "tree": [{"name": "a", "demand": {"cpus": 1}, "weight": 0}]}"#,
            "invalid weight",
        ),
        (
            r#"{"policy": "hdrf", "capacity": {"cpus": 1}, "tree": [{"name": "a", "demand": {"cpus": 1}}], "rounds": [{"finish": {"b": 1}}]}"#,
            "unknown leaf",
        ),
        (
            r#"{"policy": "hdrf", "capacity": {"cpus": 1}, "tree": []}"#,
            "no leaves",
        ),
        ("not json", "invalid scenario"),
    ];
    for (input, want) in cases {
        let out = run_stdin(input);
        assert!(!out.status.success(), "accepted: {input}");
        assert!(
            out.stdout.is_empty(),
            "printed output for bad input: {input}"
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
        assert!(err.contains(want), "{input}: expected {want:?} in {err:?}");
    }
    let out = sim().arg("/nonexistent/scenario.json").output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("reading /nonexistent"));
}
