//! Tests of the image store as a whole, and of [`super::enter`] for real (as root, in a child
//! process in its own mount namespace).

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use super::archive::tests::{tar_of, E};
use super::*;

/// A store over `DIR/images` holding `rootfs.tar` (etc/os = "tarball"), `app` (an OCI layout)
/// and `junk.tar` (not a tar archive), caching into `DIR/cache`.
fn store(dir: &Path) -> ImageStore {
    let root = dir.join("images");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(
        root.join("rootfs.tar"),
        tar_of(&[E::Dir("etc"), E::File("etc/os", b"tarball"), E::Dir("mnt")]),
    )
    .unwrap();
    super::oci::tests::make_layout(&root.join("app"));
    std::fs::write(root.join("junk.tar"), b"not a tar archive ".repeat(64)).unwrap();
    ImageStore::new(root, dir.join("cache")).unwrap()
}

fn entries(dir: &Path) -> usize {
    std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}

#[test]
fn prepare_unpacks_once_and_cleanup_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let sandbox = dir.path().join("t1/sandbox");
    std::fs::create_dir_all(&sandbox).unwrap();
    let plan = store
        .prepare("rootfs.tar", &sandbox, &dir.path().join("t1"))
        .unwrap();
    assert_eq!(
        std::fs::read(plan.lower.join("etc/os")).unwrap(),
        b"tarball"
    );
    assert!(plan.lower.starts_with(&store.cache));
    for d in [&plan.upper, &plan.work, &plan.merged] {
        assert!(d.is_dir() && d.starts_with(dir.path().join("t1")) && !d.starts_with(&sandbox));
    }
    assert_eq!(plan.sandbox, sandbox);

    // A second task reuses the unpacked image: nothing is unpacked again.
    std::fs::write(plan.lower.join("sentinel"), b"").unwrap();
    let again = store
        .prepare("./rootfs.tar", &sandbox, &dir.path().join("t2"))
        .unwrap();
    assert_eq!(again.lower, plan.lower);
    assert!(again.lower.join("sentinel").exists());
    assert_eq!(entries(&store.cache.join("rootfs")), 1);

    plan.cleanup().unwrap();
    again.cleanup().unwrap();
    assert_eq!(
        entries(&dir.path().join("t1")),
        1,
        "only the sandbox is left"
    );
    assert!(!dir.path().join("t2").exists() || entries(&dir.path().join("t2")) == 0);
    assert!(sandbox.is_dir(), "the sandbox is not the image's to remove");
    assert!(plan.lower.is_dir(), "the cache stays");
    plan.cleanup().unwrap();
}

#[test]
fn an_oci_layout_prepares_from_its_layers() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let abs = store.root.join("app");
    let plan = store
        .prepare(
            abs.to_str().unwrap(),
            &dir.path().join("sb"),
            &dir.path().join("t"),
        )
        .unwrap();
    assert_eq!(std::fs::read(plan.lower.join("etc/os")).unwrap(), b"two");
    assert!(!plan.lower.join("etc/old").exists());
    // Two tasks whose sandboxes share a parent, given as their task_dir, get layers of their own.
    let shared = dir.path().join("fw");
    let a = store.prepare("app", &shared.join("a"), &shared).unwrap();
    let b = store.prepare("app", &shared.join("b"), &shared).unwrap();
    assert_ne!(a.upper, b.upper);
    assert!(!a.upper.starts_with(shared.join("a")));
    a.cleanup().unwrap();
    assert!(b.upper.is_dir());
    assert!(plan
        .lower
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("oci-"));
}

#[test]
fn failures_leave_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let task = dir.path().join("t");
    let sb = dir.path().join("sb");
    let e = store.prepare("missing.tar", &sb, &task).unwrap_err();
    assert!(matches!(e, ImageError::NotFound(_)), "{e}");
    assert_eq!(
        e.to_string(),
        "image \"missing.tar\" not found under the agent's image root"
    );
    let e = store.prepare("junk.tar", &sb, &task).unwrap_err();
    assert!(matches!(e, ImageError::Bad { .. }), "{e}");
    assert!(e.to_string().contains("not a tar archive"), "{e}");
    let e = store.prepare("/etc/passwd", &sb, &task).unwrap_err();
    assert!(matches!(e, ImageError::Outside(_)), "{e}");
    std::fs::create_dir(store.root.join("plain-dir")).unwrap();
    let e = store.prepare("plain-dir", &sb, &task).unwrap_err();
    assert!(e.to_string().contains("oci-layout"), "{e}");
    nix::unistd::mkfifo(
        &store.root.join("fifo.tar"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let e = store.prepare("fifo.tar", &sb, &task).unwrap_err();
    assert!(e.to_string().contains("regular file"), "{e}");
    assert!(!task.exists());
    assert_eq!(entries(&store.cache.join("rootfs")), 0);
    assert_eq!(entries(&store.cache.join("tmp")), 0);
}

#[test]
fn a_missing_image_root_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let e = ImageStore::new(dir.path().join("nope"), dir.path().join("c")).unwrap_err();
    assert!(matches!(e, ImageError::Io(_)), "{e}");
    std::fs::write(dir.path().join("file"), b"").unwrap();
    let e = ImageStore::new(dir.path().join("file"), dir.path().join("c")).unwrap_err();
    assert!(e.to_string().contains("not a directory"), "{e}");
}

/// Set in the child process of [`enter_pivots_into_the_image`]: the plan file and the host
/// marker, one per line.
const CHILD: &str = "PARLEY_IMAGE_ENTER_CHILD";

/// What the child process prints when every check passed.
const CHILD_OK: &str = "child: inside the image";

#[test]
fn enter_pivots_into_the_image() {
    if let Ok(spec) = std::env::var(CHILD) {
        return enter_child(&spec);
    }
    let ci = std::env::var("PARLEY_CI").is_ok_and(|v| v == "1");
    if !crate::task_user::running_as_root() {
        assert!(!ci, "PARLEY_CI=1: this test needs root");
        eprintln!("skipping enter_pivots_into_the_image: needs root (mounts, pivot_root)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The Debian image when CI built one, else a tiny root filesystem.
    let (root, name, debian) = match std::env::var_os("PARLEY_TEST_IMAGE").map(PathBuf::from) {
        Some(image) if image.is_file() => {
            let parent = image.parent().unwrap().to_path_buf();
            let name = image.file_name().unwrap().to_string_lossy().into_owned();
            (parent, name, true)
        }
        other => {
            assert!(
                !ci || other.is_some(),
                "PARLEY_CI=1: PARLEY_TEST_IMAGE names no Debian image"
            );
            let root = dir.path().join("images");
            std::fs::create_dir_all(&root).unwrap();
            std::fs::write(
                root.join("tiny.tar"),
                tar_of(&[E::Dir("etc"), E::File("etc/os", b"tiny"), E::Dir("tmp")]),
            )
            .unwrap();
            (root, "tiny.tar".to_string(), false)
        }
    };
    let store = ImageStore::new(root, dir.path().join("cache")).unwrap();
    let task = dir.path().join("task");
    let sandbox = task.join("sandbox");
    std::fs::create_dir_all(&sandbox).unwrap();
    std::fs::write(sandbox.join("hello"), b"from the sandbox").unwrap();
    let plan = store.prepare(&name, &sandbox, &task).unwrap();
    let marker = dir.path().join("host-marker");
    std::fs::write(&marker, b"host").unwrap();
    let plan_file = dir.path().join("plan.json");
    std::fs::write(&plan_file, serde_json::to_vec(&plan).unwrap()).unwrap();

    let exe = std::env::current_exe().unwrap();
    let out = Command::new("unshare")
        .args(["--mount", "--fork"])
        .arg(&exe)
        .args([
            "--exact",
            "image::tests::enter_pivots_into_the_image",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(
            CHILD,
            format!("{}\n{}\n{debian}", plan_file.display(), marker.display()),
        )
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "child failed: {text}");
    assert!(
        text.contains(CHILD_OK),
        "child did not run its checks: {text}"
    );
    if let Some(at) = text.find("child: enter took") {
        eprintln!("{}", text[at..].lines().next().unwrap_or_default());
    }
    // The task's writes went to its own layer and its sandbox, never to the cached image.
    assert!(plan.upper.join("written-by-task").is_file());
    assert!(!plan.lower.join("written-by-task").exists());
    assert_eq!(
        std::fs::read(sandbox.join("out")).unwrap(),
        b"written inside"
    );
    plan.cleanup().unwrap();
    let left: Vec<_> = std::fs::read_dir(&task)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("sandbox")]);
}

/// The child: makes mounts private, enters the image, and checks what it sees.
fn enter_child(spec: &str) {
    use nix::mount::{mount, MsFlags};
    let mut lines = spec.lines();
    let plan: RootfsPlan =
        serde_json::from_slice(&std::fs::read(lines.next().unwrap()).unwrap()).unwrap();
    let marker = PathBuf::from(lines.next().unwrap());
    let debian = lines.next() == Some("true");
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .unwrap();
    let started = std::time::Instant::now();
    enter(&plan).unwrap();
    println!("child: enter took {:?}", started.elapsed());
    assert!(
        !marker.exists(),
        "the host's file is visible inside the image"
    );
    assert_eq!(
        std::env::current_dir().unwrap(),
        PathBuf::from(SANDBOX_IN_ROOT)
    );
    assert_eq!(std::fs::read("hello").unwrap(), b"from the sandbox");
    if debian {
        let version = std::fs::read_to_string("/etc/debian_version").unwrap();
        assert!(version.starts_with("12"), "{version}");
    } else {
        assert_eq!(std::fs::read("/etc/os").unwrap(), b"tiny");
    }
    std::fs::write("/written-by-task", b"x").unwrap();
    std::fs::write("/mnt/sandbox/out", b"written inside").unwrap();
    std::fs::write("/dev/null", b"discarded").unwrap();
    println!("{CHILD_OK}");
}
