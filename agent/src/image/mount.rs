//! Entering a task's root filesystem inside its own mount namespace: the overlay, the sandbox
//! and a few device nodes bound in, then `pivot_root` and the old root detached.

use std::path::Path;

use nix::mount::{mount, umount2, MntFlags, MsFlags};

use super::{ImageError, RootfsPlan};

/// Where the sandbox appears inside the new root.
pub const SANDBOX_IN_ROOT: &str = "/mnt/sandbox";

/// Host device nodes bound into the new root's `/dev` (the image's own are never created).
pub const DEVICES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];

fn errno(what: String) -> impl FnOnce(nix::errno::Errno) -> ImageError {
    move |e| {
        ImageError::Io(std::io::Error::new(
            std::io::Error::from(e).kind(),
            format!("{what}: {e}"),
        ))
    }
}

/// A directory of the new root (`rel`, relative) that is a real directory, created when missing;
/// refused when the image made it a symbolic link (it would resolve against the host's root).
fn real_dir(root: &Path, rel: &str) -> Result<std::path::PathBuf, ImageError> {
    let mut here = root.to_path_buf();
    for part in Path::new(rel).components() {
        here.push(part);
        match std::fs::symlink_metadata(&here) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(ImageError::Io(std::io::Error::other(format!(
                    "the image's /{rel} is not a directory"
                ))))
            }
            Err(_) => std::fs::create_dir(&here)?,
        }
    }
    Ok(here)
}

/// See [`super::enter`].
pub(crate) fn enter(plan: &RootfsPlan) -> Result<(), ImageError> {
    for dir in [&plan.lower, &plan.upper, &plan.work] {
        let text = dir.to_string_lossy();
        if text.contains([',', ':']) || text.contains('\\') {
            return Err(ImageError::Io(std::io::Error::other(format!(
                "overlay directory {text:?} has a ',', ':' or '\\' in its path"
            ))));
        }
    }
    let options = format!(
        "lowerdir={},upperdir={},workdir={}",
        plan.lower.display(),
        plan.upper.display(),
        plan.work.display()
    );
    mount(
        Some("overlay"),
        &plan.merged,
        Some("overlay"),
        MsFlags::empty(),
        Some(options.as_str()),
    )
    .map_err(errno(format!(
        "mounting the overlay at {}",
        plan.merged.display()
    )))?;

    let sandbox = real_dir(&plan.merged, SANDBOX_IN_ROOT.trim_start_matches('/'))?;
    mount(
        Some(&plan.sandbox),
        &sandbox,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(errno(format!(
        "binding the sandbox {}",
        plan.sandbox.display()
    )))?;

    let dev = real_dir(&plan.merged, "dev")?;
    for name in DEVICES {
        let host = Path::new("/dev").join(name);
        if !host.exists() {
            continue;
        }
        let node = dev.join(name);
        match std::fs::symlink_metadata(&node) {
            Ok(m) if m.is_file() => {}
            Ok(m) => {
                if m.is_dir() {
                    std::fs::remove_dir_all(&node)?;
                } else {
                    std::fs::remove_file(&node)?;
                }
                std::fs::File::create(&node)?;
            }
            Err(_) => {
                std::fs::File::create(&node)?;
            }
        }
        mount(
            Some(&host),
            &node,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(errno(format!("binding {}", host.display())))?;
    }

    std::env::set_current_dir(&plan.merged)?;
    nix::unistd::pivot_root(".", ".").map_err(errno("pivot_root".into()))?;
    // The old root now sits on top of the new one at "/": detach it.
    umount2(".", MntFlags::MNT_DETACH).map_err(errno("detaching the old root".into()))?;
    std::env::set_current_dir(SANDBOX_IN_ROOT)?;
    Ok(())
}
