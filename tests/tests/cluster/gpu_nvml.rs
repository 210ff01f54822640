//! The agent's real NVML path (`agent/src/gpu/nvml.rs`, through `nvml-wrapper`, which dlopens
//! `libnvidia-ml.so.1`) and `scripts/gpu-check.sh`, end to end without a GPU: real `agent`
//! processes find a stub NVML library (`tests/nvml-stub/nvml_stub.c`, built with `cc` into a
//! temp dir put on `LD_LIBRARY_PATH`) instead of NVIDIA's, and a real coordinator reports what
//! they read. `tests/tests/cluster/gpu_agents.rs` covers the same paths with devices injected in
//! process; here everything the agent knows about its GPUs comes through NVML's C API.
//!
//! Without `cc` the tests print why they skip, unless `PARLEY_CI=1`. The first run builds the
//! `coordinator`, `agent` and `gpu-jobs` binaries (see `support::binaries`).
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;
use std::time::Duration;

use protocol::TaskState;
use support::{binaries, stub_dir, AgentProcess};
use tests::framework::{shell_task, TestFramework};
use tests::{metric_in, Cluster, WITHIN};

const MIB: u64 = 1024 * 1024;
/// What the stub reports for every device.
const MODEL: &str = "NVIDIA H100 80GB HBM3";
const MEMORY_MIB: u64 = 81559;

/// The coordinator's one agent, once it is active, as the coordinator lists it.
async fn active_agent(cluster: &Cluster) -> protocol::messages::AgentInfo {
    cluster
        .wait_for("the agent active", |c| async move {
            let list = c.agents().await.ok()?;
            list.agents.into_iter().find(|a| a.state == "active")
        })
        .await
        .unwrap()
}

/// A coordinator (in process) and an `agent --gpus <gpus>` process over the stub with `env`.
async fn start(
    gpus: &str,
    env: &[(&str, &str)],
) -> Option<(Cluster, AgentProcess, tempfile::TempDir)> {
    let stub = stub_dir()?;
    binaries();
    let cluster = Cluster::builder().start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = AgentProcess::start(&cluster.url, dir.path(), gpus, stub, env);
    Some((cluster, agent, dir))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_advertises_every_device_nvml_lists() {
    let Some((cluster, agent, _dir)) = start("auto", &[("PARLEY_NVML_STUB_GPUS", "2")]).await
    else {
        return;
    };
    let info = active_agent(&cluster).await;
    assert_eq!(info.resources.units("gpus"), 2.0, "{info:?}");
    let devices: Vec<(u32, &str, &str, u64)> = info
        .gpu_devices
        .iter()
        .map(|d| (d.index, d.uuid.as_str(), d.model.as_str(), d.memory_mib))
        .collect();
    assert_eq!(
        devices,
        [
            (0, "GPU-stub-0", MODEL, MEMORY_MIB),
            (1, "GPU-stub-1", MODEL, MEMORY_MIB)
        ]
    );
    // The same on the wire, as a client sees it.
    let raw: serde_json::Value = cluster.get("/api/v1/agents").await.unwrap();
    assert_eq!(raw["agents"][0]["gpu_devices"][1]["uuid"], "GPU-stub-1");
    assert!(
        agent.log_text().contains("GPUs found"),
        "{}",
        agent.log_text()
    );
    drop(agent);
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_picks_that_device_only() {
    let Some((cluster, agent, _dir)) = start("1", &[("PARLEY_NVML_STUB_GPUS", "2")]).await else {
        return;
    };
    let info = active_agent(&cluster).await;
    assert_eq!(info.resources.units("gpus"), 1.0, "{info:?}");
    assert_eq!(info.gpu_devices.len(), 1, "{info:?}");
    assert_eq!(info.gpu_devices[0].index, 1);
    assert_eq!(info.gpu_devices[0].uuid, "GPU-stub-1");
    drop(agent);
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_index_stops_the_agent_naming_it() {
    let Some((cluster, mut agent, _dir)) = start("5", &[("PARLEY_NVML_STUB_GPUS", "2")]).await
    else {
        return;
    };
    let code = agent.exit_code_within(WITHIN).await;
    let log = agent.log_text();
    assert_eq!(code, Some(2), "{log}");
    let last = log.trim_end().lines().last().unwrap_or_default();
    assert_eq!(
        last, "agent: --gpus names device 5, but this machine has devices 0, 1",
        "{log}"
    );
    assert!(cluster.agents().await.unwrap().agents.is_empty());
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_driver_means_no_gpus_and_one_info_line() {
    let env = [
        ("PARLEY_NVML_STUB_GPUS", "2"),
        ("PARLEY_NVML_STUB_FAIL_INIT", "1"),
    ];
    let Some((cluster, agent, _dir)) = start("auto", &env).await else {
        return;
    };
    let info = active_agent(&cluster).await;
    assert_eq!(info.resources.units("gpus"), 0.0, "{info:?}");
    assert!(info.gpu_devices.is_empty(), "{info:?}");
    assert!(info.resources.units("cpus") > 0.0, "{info:?}");
    let log = agent.log_text();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("GPUs")).collect();
    assert_eq!(lines.len(), 1, "{log}");
    assert!(lines[0].contains(" INFO "), "{log}");
    assert!(
        lines[0].contains(
            "no GPUs: reading the GPUs: NVML is not available (NVIDIA driver is not loaded)"
        ),
        "{log}"
    );
    drop(agent);
    cluster.shutdown().await.unwrap();
}

/// The value of `name` in `env` output.
fn var<'a>(env: &'a str, name: &str) -> Option<&'a str> {
    env.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
}

/// A sample of `parley_...` in the coordinator's `/metrics`: the value on the line starting
/// with `series` and a space.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_tasks_see_their_device_and_nvml_usage_reaches_status_and_metrics() {
    let busy = tempfile::tempdir().unwrap();
    let busy_dir = busy.path().to_str().unwrap();
    let env = [
        ("PARLEY_NVML_STUB_GPUS", "2"),
        ("PARLEY_NVML_STUB_BUSY_DIR", busy_dir),
    ];
    let Some((cluster, agent, dir)) = start("auto", &env).await else {
        return;
    };
    let info = active_agent(&cluster).await;
    let agent_id = info.agent_id;
    let mut fw = TestFramework::register_gpu(&cluster.url, "nvml", "gpu")
        .await
        .unwrap();
    // Each task uses its device (the stub then lists a compute process on it) from its start
    // until `go` exists, then for 2.5 s of work (two or more of the agent's 1 s samples).
    let script = format!(
        "env; touch {busy_dir}/$CUDA_VISIBLE_DEVICES; \
         while [ ! -e {busy_dir}/go ]; do sleep 0.05; done; sleep 2.5; \
         rm {busy_dir}/$CUDA_VISIBLE_DEVICES"
    );
    for id in ["a", "b"] {
        let task = shell_task(id, agent_id, "cpus=1,mem=64,gpus=1", &script);
        fw.launch(WITHIN, task).await.unwrap();
        fw.wait_state(WITHIN, id, TaskState::Running).await.unwrap();
    }
    // Lowest free index first: a holds device 0, b device 1 (the coordinator's view).
    for (id, uuid) in [("a", "GPU-stub-0"), ("b", "GPU-stub-1")] {
        let listed = cluster
            .wait_for_task_state(id, TaskState::Running)
            .await
            .unwrap();
        assert_eq!(listed.gpu_devices, Some(vec![uuid.to_string()]), "{id}");
    }
    let metrics = cluster.metrics_text().await.unwrap();
    let agent_label = format!("{{agent=\"{agent_id}\"}}");
    assert_eq!(
        metric_in(&metrics, &format!("parley_agent_gpus{agent_label}")),
        Some(2.0),
        "{metrics}"
    );
    assert_eq!(
        metric_in(&metrics, &format!("parley_agent_gpus_used{agent_label}")),
        Some(2.0),
        "{metrics}"
    );
    std::fs::write(busy.path().join("go"), "").unwrap();

    // Device i's compute process uses (i + 1) * 512 MiB: each peak names the task's own device.
    for (id, uuid, memory) in [
        ("a", "GPU-stub-0", 512 * MIB),
        ("b", "GPU-stub-1", 1024 * MIB),
    ] {
        let end = fw
            .wait_state(WITHIN, id, TaskState::Finished)
            .await
            .unwrap();
        assert_eq!(end.gpu_devices, Some(vec![uuid.to_string()]), "{id}");
        let usage = end.usage.expect("a GPU task's end carries its GPU usage");
        assert_eq!(usage.gpu_memory_bytes, Some(memory), "{id}: {usage:?}");
        let util = usage.gpu_utilization_percent.unwrap();
        assert!(util > 0.0 && util <= 50.0, "{id}: {usage:?}");
        let stdout = dir
            .path()
            .join("work/sandboxes")
            .join(fw.id.to_string())
            .join(id)
            .join("stdout");
        let env = std::fs::read_to_string(stdout).unwrap();
        assert_eq!(var(&env, "CUDA_VISIBLE_DEVICES"), Some(uuid), "{env}");
        assert_eq!(var(&env, "NVIDIA_VISIBLE_DEVICES"), Some(uuid), "{env}");
    }
    let metrics = cluster.metrics_text().await.unwrap();
    assert_eq!(
        metric_in(&metrics, "parley_tasks_gpu_measured_total"),
        Some(2.0),
        "{metrics}"
    );
    assert_eq!(
        metric_in(&metrics, "parley_task_gpu_memory_bytes_total"),
        Some((1536 * MIB) as f64),
        "{metrics}"
    );
    let util = metric_in(&metrics, "parley_task_gpu_utilization_percent_total").unwrap();
    assert!(util > 0.0 && util <= 100.0, "{metrics}");
    assert_eq!(
        metric_in(&metrics, &format!("parley_agent_gpus_used{agent_label}")),
        Some(0.0),
        "{metrics}"
    );
    fw.remove().await.unwrap();
    drop(agent);
    cluster.shutdown().await.unwrap();
}

/// A fake `nvidia-smi` (`-L` lists the stub's device 0) in a new directory, for `PATH`.
fn fake_nvidia_smi(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("nvidia-smi");
    std::fs::write(
        &path,
        format!("#!/bin/sh\necho 'GPU 0: {MODEL} (UUID: GPU-stub-0)'\n"),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `scripts/gpu-check.sh` from start to end over the stub (one device) and a fake `nvidia-smi`:
/// the debug binaries, a real coordinator and agent, and two `gpu-jobs` tasks, one after the
/// other on the one device.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_check_script_passes_over_the_stub() {
    let Some(stub) = stub_dir() else {
        return;
    };
    // The script reads the coordinator's API with curl (CI installs it).
    if std::process::Command::new("curl")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(!tests::in_ci(), "PARLEY_CI=1 and curl is missing");
        eprintln!("skipped: gpu-check.sh needs curl, which is not installed");
        return;
    }
    let bins = binaries();
    let tools = tempfile::tempdir().unwrap();
    fake_nvidia_smi(tools.path());
    let work = tempfile::tempdir().unwrap();
    let path = format!(
        "{}:{}",
        tools.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/gpu-check.sh");
    let mut cmd = tokio::process::Command::new("bash");
    cmd.arg(&script)
        .env("COORDINATOR_BIN", &bins.coordinator)
        .env("AGENT_BIN", &bins.agent)
        .env("GPU_JOBS_BIN", &bins.gpu_jobs)
        .env("LD_LIBRARY_PATH", stub)
        .env("PATH", path)
        .env("PARLEY_CHECK_PORT", support::free_port_pair().to_string())
        .env("GPU_CHECK_WORK", work.path())
        .env("PARLEY_NVML_STUB_GPUS", "1")
        .env_remove("PARLEY_NVML_STUB_BUSY_DIR")
        .env_remove("PARLEY_BIN")
        .kill_on_drop(true);
    // The script stops what it started on exit; a hung run is killed with it (kill_on_drop).
    let out = tokio::time::timeout(Duration::from_secs(180), cmd.output())
        .await
        .expect("gpu-check.sh did not finish within 180 s")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let logs = ["coordinator.log", "agent.log"]
        .map(|f| std::fs::read_to_string(work.path().join(f)).unwrap_or_default());
    let all = format!(
        "stdout:\n{stdout}\nstderr:\n{stderr}\nagent.log:\n{}\ncoordinator.log:\n{}",
        logs[1], logs[0]
    );
    assert_eq!(out.status.code(), Some(0), "{all}");
    // Pretty-printed by python3 where it exists, compact otherwise.
    let compact = stdout.replace("\": ", "\":");
    for needle in [
        "\"gpus\":1",
        &format!("\"model\":\"{MODEL}\""),
        &format!("\"memory_mib\":{MEMORY_MIB}"),
        "\"uuid\":\"GPU-stub-0\"",
        "gpu-0 saw: CUDA_VISIBLE_DEVICES=GPU-stub-0 NVIDIA_VISIBLE_DEVICES=GPU-stub-0",
        "gpu-1 saw: CUDA_VISIBLE_DEVICES=GPU-stub-0 NVIDIA_VISIBLE_DEVICES=GPU-stub-0",
        &format!("\"gpu_memory_bytes\":{}", 512 * MIB),
        "done: every task finished",
    ] {
        assert!(compact.contains(needle), "missing {needle:?} in\n{all}");
    }
    // Each task's usage line carries the figure.
    let usage_lines = stdout
        .lines()
        .filter(|l| l.contains(" usage: ") && l.contains("\"gpu_memory_bytes\":"))
        .count();
    assert_eq!(usage_lines, 2, "{all}");
    // Isolated on cgroup v1 without the driver's device nodes (this stub's machine), each GPU
    // task is one warning naming them, and runs.
    let cgroup_v1 = logs[1].contains("mode=\"cgroups-v1\"");
    if cgroup_v1 && !Path::new("/dev/nvidia0").exists() {
        let warnings = logs[1]
            .lines()
            .filter(|l| l.contains("WARN") && l.contains("GPU device nodes not found"))
            .count();
        assert_eq!(warnings, 2, "{all}");
        assert!(logs[1].contains("missing=nvidia0, nvidiactl"), "{all}");
    }
}
