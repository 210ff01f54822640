//! Task images (`isolation.image`) against a real agent and the fake coordinator:
//! `--image-root` is checked and advertised; a task with an image runs in it (reads the image's
//! `/etc/debian_version`, cannot see the host's files); a missing image fails the task clearly
//! and leaves nothing behind.
//!
//! Running a task in its image needs the isolated launcher (the agent's `mount` namespace): where
//! the agent cannot isolate (no usable cgroups), that test prints why it skips. It needs root and the Debian image
//! `.ci/run` builds (`PARLEY_TEST_IMAGE`), and skips with a printed reason without them unless
//! `PARLEY_CI=1`.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::{wait_for, Fake, Server};
use agent::{AgentConfig, Timing};
use protocol::isolation::{ATTR_IMAGE_ROOT, ATTR_NAMESPACES};
use protocol::{AgentId, FrameworkId, TaskState};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// The first unpack of the Debian image (145 MB) can take tens of seconds on a busy 2-core disk.
const UNPACK: Duration = Duration::from_secs(120);

struct Agent {
    url: String,
    stop: CancellationToken,
    handle: tokio::task::JoinHandle<Result<(), agent::AgentError>>,
}

async fn start(coordinator: &str, work_dir: &Path, image_root: &Path) -> Agent {
    let mut config = AgentConfig::new(coordinator, work_dir);
    config.resources = Some("cpus=4,mem=1024".parse().unwrap());
    config.timing = Timing::fast();
    config.image_root = Some(image_root.to_path_buf());
    // An embedded agent isolates only with a launcher binary: the one cargo built.
    config.launcher = Some(PathBuf::from(env!("CARGO_BIN_EXE_parley-launch")));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    let handle = tokio::spawn(agent::run(config, listener, stop.clone().cancelled_owned()));
    Agent { url, stop, handle }
}

impl Agent {
    async fn shutdown(self) {
        self.stop.cancel();
        self.handle.await.unwrap().unwrap();
    }
}

fn ci() -> bool {
    std::env::var("PARLEY_CI").is_ok_and(|v| v == "1")
}

#[tokio::test]
async fn the_image_root_is_checked_and_advertised() {
    let fake = Fake::new(0.05);
    let server = Server::start(&fake).await;
    let dir = tempfile::tempdir().unwrap();

    // A root that does not exist stops the agent before it registers, naming the flag.
    let missing = start(
        &server.url(),
        &dir.path().join("w0"),
        &dir.path().join("nope"),
    )
    .await;
    let e = missing.handle.await.unwrap().unwrap_err();
    assert!(e.to_string().contains("--image-root"), "{e}");
    assert!(fake.books().registrations.is_empty());

    let images = dir.path().join("images");
    std::fs::create_dir(&images).unwrap();
    let link = dir.path().join("images-link");
    std::os::unix::fs::symlink(&images, &link).unwrap();
    let agent = start(&server.url(), &dir.path().join("w1"), &link).await;
    fake.wait_registered().await;
    let advertised = fake.books().registrations[0]
        .attributes
        .get(ATTR_IMAGE_ROOT)
        .cloned();
    // The canonical path: what the coordinator compares absolute image names against.
    let canonical = std::fs::canonicalize(&images).unwrap();
    assert_eq!(advertised.as_deref(), canonical.to_str());
    assert!(dir.path().join("w1/images").is_dir());
    agent.shutdown().await;
}

fn launch(fw: FrameworkId, task_id: &str, shell: &str, image: &str) -> serde_json::Value {
    json!({"framework_id": fw, "tasks": [{
        "task_id": task_id, "agent_id": AgentId::new(), "resources": {"cpus": 1},
        "command": {"shell": shell}, "isolation": {"image": image}}]})
}

/// Every task root filesystem directory (`.rootfs-*`) under `dir`.
fn rootfs_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let path = e.path();
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            if e.file_name().to_string_lossy().starts_with(".rootfs-") {
                out.push(path.clone());
            }
            out.extend(rootfs_dirs(&path));
        }
    }
    out
}

#[tokio::test]
async fn a_task_runs_in_its_image_and_a_missing_image_fails_it() {
    if !agent::task_user::running_as_root() {
        assert!(!ci(), "PARLEY_CI=1: this test needs root");
        eprintln!("skipping: running a task in an image needs root");
        return;
    }
    let Some(image) = std::env::var_os("PARLEY_TEST_IMAGE")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
    else {
        assert!(
            !ci(),
            "PARLEY_CI=1: PARLEY_TEST_IMAGE names no Debian image"
        );
        eprintln!("skipping: PARLEY_TEST_IMAGE names no Debian image (.ci/run builds one)");
        return;
    };
    let root = image.parent().unwrap().to_path_buf();
    let name = image.file_name().unwrap().to_string_lossy().into_owned();
    let fake = Fake::new(0.05);
    let server = Server::start(&fake).await;
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let agent = start(&server.url(), &work, &root).await;
    fake.wait_registered().await;
    let namespaces = fake.books().registrations[0]
        .attributes
        .get(ATTR_NAMESPACES)
        .cloned()
        .unwrap_or_default();
    if !namespaces.split(',').any(|n| n.trim() == "mount") {
        assert!(
            !ci(),
            "the agent gives no mount namespace (attribute namespaces={namespaces:?}): no cgroups here?"
        );
        eprintln!(
            "skipping: the agent gives no mount namespace (attribute namespaces={namespaces:?}): \
             it found no usable cgroups"
        );
        agent.shutdown().await;
        return;
    }
    let client = fake.agent_client();
    let fw = FrameworkId::new();
    let marker = dir.path().join("host-marker");
    std::fs::write(&marker, b"host").unwrap();

    let shell = format!(
        "cat /etc/debian_version; test ! -e {} && echo no-host-marker",
        marker.display()
    );
    let resp = client
        .post(format!("{}/api/v1/tasks", agent.url))
        .json(&launch(fw, "in-image", &shell, &name))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    wait_for("in-image finished", UNPACK, || {
        fake.states_of("in-image").contains(&TaskState::Finished)
            || fake.states_of("in-image").contains(&TaskState::Failed)
    })
    .await;
    let out = client
        .get(format!("{}/api/v1/tasks/in-image/stdout", agent.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        fake.status_of("in-image", TaskState::Finished).is_some(),
        "{:?} {out}",
        fake.status_of("in-image", TaskState::Failed)
    );
    assert!(out.starts_with("12."), "{out}");
    assert!(out.contains("no-host-marker"), "{out}");

    let resp = client
        .post(format!("{}/api/v1/tasks", agent.url))
        .json(&launch(fw, "no-image", "true", "missing.tar"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    fake.wait_state("no-image", TaskState::Failed).await;
    let failed = fake.status_of("no-image", TaskState::Failed).unwrap();
    let message = failed.message.unwrap_or_default();
    assert!(
        message.contains("missing.tar") && message.contains("not found"),
        "{message}"
    );
    // Nothing is left: no task root filesystem, no half-unpacked image.
    wait_for("task root filesystems removed", UNPACK, || {
        rootfs_dirs(&work).is_empty()
    })
    .await;
    let tmp = work.join("images/tmp");
    assert_eq!(std::fs::read_dir(&tmp).map(|d| d.count()).unwrap_or(0), 0);
    agent.shutdown().await;
}
