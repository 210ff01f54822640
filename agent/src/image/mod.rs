//! Task root filesystems from images on the agent's disk (`isolation.image`): an OCI image
//! layout directory or a root filesystem tarball under the agent's image root, unpacked once
//! into a cache and mounted per task as an overlay (the cache read-only below, the task's
//! changes above), with the task's sandbox bound inside.
//!
//! The isolated launcher calls [`enter`] inside the task's new mount namespace; the agent calls
//! [`ImageStore::prepare`] before the launch and [`RootfsPlan::cleanup`] after the task ends.
//!
//! An image is named relative to the image root (`--image-root`) or absolutely inside it; the
//! name must still be inside after resolving symbolic links. A directory with an `oci-layout`
//! file is an OCI image layout (the manifest for this machine's platform, its `tar` and
//! `tar+gzip` layers checked against their digests and applied in order, whiteouts honoured);
//! a file is a root filesystem tarball (`.tar` or `.tar.gz`). Each is unpacked once per content
//! (an OCI manifest's digest, a tarball's SHA-256) into `CACHE/rootfs/`, atomically; archives
//! cannot write outside their directory.
//!
//! # Layout
//!
//! - `resolve`: the name to a path inside the root.
//! - `oci`: OCI image layouts.
//! - `tarball`: root filesystem tarballs.
//! - `archive`: applying one tar layer safely (whiteouts, opaque directories, no escapes).
//! - `cache`: unpack once per content, atomically, safe against concurrent prepares.
//! - `digest`: SHA-256 of files, remembered for unchanged tarballs.
//! - `mount`: the overlay, the binds and `pivot_root` ([`enter`]).

mod archive;
mod cache;
mod digest;
mod mount;
mod oci;
mod resolve;
mod tarball;

use std::path::{Path, PathBuf};

pub use mount::{DEVICES, SANDBOX_IN_ROOT};

/// Why an image cannot be used (the message of the task's `failed` status).
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// This agent runs no images (no `--image-root`, or not built for it yet).
    #[error("this agent runs no images")]
    Unsupported,
    /// The name resolves outside the image root (after resolving symbolic links).
    #[error("image {0:?} is outside the agent's image root")]
    Outside(String),
    /// Nothing by that name under the image root.
    #[error("image {0:?} not found under the agent's image root")]
    NotFound(String),
    /// The image is malformed or could not be unpacked.
    #[error("image {name:?}: {reason}")]
    Bad {
        /// The image as named.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// I/O while unpacking or preparing.
    #[error("image: {0}")]
    Io(#[from] std::io::Error),
}

/// The images an agent may run, and where it unpacks them.
#[derive(Debug, Clone)]
pub struct ImageStore {
    /// Images are named relative to this directory (`--image-root`).
    pub root: PathBuf,
    /// Unpacked images are kept here, one directory per image content.
    pub cache: PathBuf,
}

impl ImageStore {
    /// An image store over `root` (which must exist; kept in canonical form, which is what the
    /// agent advertises), unpacking into `cache` (created when missing; unpacks a crash left
    /// half done are removed).
    pub fn new(root: PathBuf, cache: PathBuf) -> Result<ImageStore, ImageError> {
        let root = std::fs::canonicalize(&root)?;
        if !root.is_dir() {
            return Err(ImageError::Io(std::io::Error::other("not a directory")));
        }
        std::fs::create_dir_all(&cache)?;
        match std::fs::remove_dir_all(cache::tmp_dir(&cache)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
        Ok(ImageStore { root, cache })
    }

    /// Resolves `name` inside the root, unpacks it into the cache unless already there, and
    /// returns the task's root filesystem plan: its overlay directories in
    /// `task_dir/.rootfs-SANDBOX_NAME/` (beside the sandbox, not inside it: `task_dir` may be
    /// the sandbox's parent) and `sandbox` bound inside. On error
    /// nothing new is left behind (not in the cache, not under `task_dir`).
    pub fn prepare(
        &self,
        name: &str,
        sandbox: &Path,
        task_dir: &Path,
    ) -> Result<RootfsPlan, ImageError> {
        let lower = self.unpacked(name)?;
        // `.rootfs-SANDBOX`: unique per sandbox even in a shared `task_dir`, and no task id
        // (which starts with a letter or digit) can name it.
        let sandbox_name = sandbox
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "task".into());
        let base = task_dir.join(format!(".rootfs-{sandbox_name}"));
        let plan = RootfsPlan {
            lower,
            upper: base.join("upper"),
            work: base.join("work"),
            merged: base.join("merged"),
            sandbox: sandbox.to_path_buf(),
        };
        let made = (|| {
            if base.exists() {
                std::fs::remove_dir_all(&base)?;
            }
            for dir in [&plan.upper, &plan.work, &plan.merged] {
                std::fs::create_dir_all(dir)?;
            }
            Ok::<(), std::io::Error>(())
        })();
        if let Err(e) = made {
            let _ = plan.cleanup();
            return Err(e.into());
        }
        Ok(plan)
    }

    /// The unpacked image `name` in the cache (unpacking it when it is not there yet).
    pub fn unpacked(&self, name: &str) -> Result<PathBuf, ImageError> {
        let path = resolve::resolve(&self.root, name)?;
        let started = std::time::Instant::now();
        let (lower, unpacked) = if path.is_dir() {
            if !oci::is_layout(&path) {
                return Err(ImageError::Bad {
                    name: name.into(),
                    reason: "a directory without an oci-layout file is no OCI image layout".into(),
                });
            }
            let image = oci::read(&path, name)?;
            cache::ensure(&self.cache, &format!("oci-{}", image.manifest), |dest| {
                oci::unpack(&image, dest, name)
            })?
        } else if !path.is_file() {
            return Err(ImageError::Bad {
                name: name.into(),
                reason: "neither a regular file nor a directory".into(),
            });
        } else {
            let sha = digest::sha256_file_remembered(&path, &self.cache.join("stamps"))?;
            cache::ensure(&self.cache, &format!("tar-{sha}"), |dest| {
                tarball::unpack(&path, dest, name)
            })?
        };
        if unpacked {
            tracing::info!(image = name, path = %lower.display(), ms = started.elapsed().as_millis() as u64, "image unpacked into the cache");
        }
        Ok(lower)
    }
}

/// A task's root filesystem: where the overlay goes and what it is made of.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RootfsPlan {
    /// The unpacked image (read-only lower layer).
    pub lower: PathBuf,
    /// The task's writable layer.
    pub upper: PathBuf,
    /// Overlayfs' work directory (same file system as `upper`).
    pub work: PathBuf,
    /// Where the overlay is mounted, and the task's new root.
    pub merged: PathBuf,
    /// The task's sandbox, bound at `/mnt/sandbox` inside the new root.
    pub sandbox: PathBuf,
}

impl RootfsPlan {
    /// Removes the task's writable layer and mount point once the task has ended (the overlay
    /// was mounted in the task's own mount namespace, gone with it), and their parent directory
    /// when that is left empty. The cached image stays. Missing pieces are fine.
    pub fn cleanup(&self) -> std::io::Result<()> {
        for dir in [&self.upper, &self.work] {
            match std::fs::remove_dir_all(dir) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        // Not remove_dir_all: were the overlay still mounted here, that would delete through it.
        match std::fs::remove_dir(&self.merged) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        if let Some(parent) = self.upper.parent() {
            let _ = std::fs::remove_dir(parent);
        }
        Ok(())
    }
}

/// Inside the task's new mount namespace (mounts already private): mounts the overlay at
/// `merged`, binds the sandbox at `merged/mnt/sandbox`, pivots into `merged`, and changes
/// directory to `/mnt/sandbox`. The caller mounts `/proc` and `/tmp` afterwards.
///
/// The image's own device nodes are never created; the host's [`DEVICES`] are bound into its
/// `/dev` instead.
pub fn enter(plan: &RootfsPlan) -> Result<(), ImageError> {
    mount::enter(plan)
}

#[cfg(test)]
mod tests;
