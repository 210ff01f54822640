//! Task root filesystems from images on the agent's disk (`isolation.image`): an OCI image
//! layout directory or a root filesystem tarball under the agent's image root, unpacked once
//! into a cache and mounted per task as an overlay (the cache read-only below, the task's
//! changes above), with the task's sandbox bound inside.
//!
//! The isolated launcher calls [`enter`] inside the task's new mount namespace; the agent calls
//! [`ImageStore::prepare`] before the launch and [`RootfsPlan::cleanup`] after the task ends.
//!
//! (Interface fixed for the isolation work; the implementation is still to come: every call
//! answers [`ImageError::Unsupported`].)

use std::path::{Path, PathBuf};

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
    /// An image store over `root`, unpacking into `cache` (created when missing).
    pub fn new(root: PathBuf, cache: PathBuf) -> Result<ImageStore, ImageError> {
        Ok(ImageStore { root, cache })
    }

    /// Resolves `name` inside the root, unpacks it into the cache unless already there, and
    /// returns the task's root filesystem plan: its overlay directories under `task_dir` (beside
    /// the sandbox, not inside it) and `sandbox` bound inside.
    pub fn prepare(
        &self,
        name: &str,
        sandbox: &Path,
        task_dir: &Path,
    ) -> Result<RootfsPlan, ImageError> {
        let _ = (name, sandbox, task_dir);
        Err(ImageError::Unsupported)
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
    /// Removes the task's writable layer and mount point once the task has ended.
    pub fn cleanup(&self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Inside the task's new mount namespace (mounts already private): mounts the overlay at
/// `merged`, binds the sandbox at `merged/mnt/sandbox`, pivots into `merged`, and changes
/// directory to `/mnt/sandbox`. The caller mounts `/proc` and `/tmp` afterwards.
pub fn enter(plan: &RootfsPlan) -> Result<(), ImageError> {
    let _ = plan;
    Err(ImageError::Unsupported)
}
