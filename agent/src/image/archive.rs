//! Applies one tar layer onto a directory, as OCI image layers are applied: entries replace
//! what is there, `.wh.NAME` removes `NAME` from the layers below, `.wh..wh..opq` hides
//! everything the layers below put in its directory.
//!
//! Nothing lands outside the directory: an entry naming `..` is refused, an absolute name is
//! taken relative to the directory, an entry whose parent is a symbolic link is refused (links
//! are only ever created, never followed), hard links must point at an earlier entry inside.
//! Device nodes are skipped (the launcher binds the host's few safe ones); owners are kept when
//! the agent runs as root; modification times and extended attributes are not kept.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs::{self, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use super::ImageError;

/// The opaque-directory marker of OCI and Docker layers.
const OPAQUE: &str = ".wh..wh..opq";
/// The prefix of a whiteout file.
const WHITEOUT: &str = ".wh.";

/// What a layer held, for the log.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Applied {
    /// Entries written (files, directories, links).
    pub written: usize,
    /// Whiteouts and opaque markers honoured.
    pub whiteouts: usize,
    /// Device nodes and other entries skipped.
    pub skipped: usize,
}

/// Applies the tar stream `layer` onto `dest` (the image named `name`, for errors).
pub(crate) fn apply(layer: impl Read, dest: &Path, name: &str) -> Result<Applied, ImageError> {
    let bad = |reason: String| ImageError::Bad {
        name: name.into(),
        reason,
    };
    let as_root = crate::task_user::running_as_root();
    let mut archive = tar::Archive::new(layer);
    let mut written: HashSet<PathBuf> = HashSet::new();
    let mut dir_modes: Vec<(PathBuf, u32)> = Vec::new();
    let mut out = Applied::default();
    let entries = archive
        .entries()
        .map_err(|e| bad(format!("not a tar archive: {e}")))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| bad(format!("not a tar archive: {e}")))?;
        let raw = entry
            .path()
            .map_err(|e| bad(format!("bad entry name: {e}")))?
            .into_owned();
        let rel = clean(&raw).ok_or_else(|| {
            bad(format!(
                "archive entry {:?} leads outside the image ('..')",
                raw.display()
            ))
        })?;
        let Some(file_name) = rel.file_name().map(OsStr::to_os_string) else {
            // The root directory itself ("./"): keep ours.
            continue;
        };
        let parent_rel = rel.parent().unwrap_or(Path::new("")).to_path_buf();
        let file_name_text = file_name.to_string_lossy();
        if file_name_text == OPAQUE {
            if let Some(parent) = existing_dir(dest, &parent_rel).map_err(&bad)? {
                clear_except(&parent, &parent_rel, &written)?;
            }
            out.whiteouts += 1;
            continue;
        }
        if let Some(hidden) = file_name_text.strip_prefix(WHITEOUT) {
            if matches!(hidden, "" | "." | "..") {
                return Err(bad(format!("bad whiteout {:?}", rel.display())));
            }
            if let Some(parent) = existing_dir(dest, &parent_rel).map_err(&bad)? {
                remove_any(&parent.join(hidden))?;
            }
            out.whiteouts += 1;
            continue;
        }
        let kind = entry.header().entry_type();
        if matches!(
            kind,
            tar::EntryType::Char | tar::EntryType::Block | tar::EntryType::XGlobalHeader
        ) {
            out.skipped += 1;
            continue;
        }
        let parent = make_dirs(dest, &parent_rel).map_err(&bad)?;
        let target = parent.join(&file_name);
        let mode = entry.header().mode().unwrap_or(0o644) & 0o7777;
        let existing = fs::symlink_metadata(&target).ok();
        if kind == tar::EntryType::Directory {
            match existing {
                Some(m) if m.is_dir() => {}
                Some(_) => {
                    fs::remove_file(&target)?;
                    fs::create_dir(&target)?;
                }
                None => fs::create_dir(&target)?,
            }
            dir_modes.push((target.clone(), mode));
        } else {
            if existing.is_some() {
                remove_any(&target)?;
            }
            match kind {
                tar::EntryType::Regular | tar::EntryType::Continuous => {
                    let mut file = OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .mode(0o600)
                        .open(&target)?;
                    io::copy(&mut entry, &mut file)?;
                }
                tar::EntryType::Symlink => {
                    let link = entry
                        .link_name()
                        .map_err(|e| bad(format!("bad link in {}: {e}", rel.display())))?
                        .ok_or_else(|| bad(format!("symlink {} has no target", rel.display())))?;
                    std::os::unix::fs::symlink(&*link, &target)?;
                }
                tar::EntryType::Link => {
                    let link = entry
                        .link_name()
                        .map_err(|e| bad(format!("bad link in {}: {e}", rel.display())))?
                        .ok_or_else(|| bad(format!("hard link {} has no target", rel.display())))?;
                    let source = clean(&link)
                        .filter(|p| p.file_name().is_some())
                        .ok_or_else(|| {
                            bad(format!(
                                "hard link {} points outside the image",
                                rel.display()
                            ))
                        })?;
                    let source_parent =
                        existing_dir(dest, source.parent().unwrap_or(Path::new("")))
                            .map_err(&bad)?
                            .ok_or_else(|| {
                                bad(format!("hard link {} points at nothing", rel.display()))
                            })?;
                    let source = source_parent.join(source.file_name().unwrap_or_default());
                    fs::hard_link(&source, &target)
                        .map_err(|e| bad(format!("hard link {}: {e}", rel.display())))?;
                }
                tar::EntryType::Fifo => {
                    nix::unistd::mkfifo(&target, nix::sys::stat::Mode::from_bits_truncate(0o600))
                        .map_err(|e| ImageError::Io(e.into()))?;
                }
                _ => {
                    out.skipped += 1;
                    continue;
                }
            }
        }
        if as_root {
            let uid = entry
                .header()
                .uid()
                .ok()
                .and_then(|u| u32::try_from(u).ok());
            let gid = entry
                .header()
                .gid()
                .ok()
                .and_then(|g| u32::try_from(g).ok());
            std::os::unix::fs::lchown(&target, uid, gid)?;
        }
        if !matches!(kind, tar::EntryType::Symlink | tar::EntryType::Directory) {
            fs::set_permissions(&target, fs::Permissions::from_mode(mode))?;
        }
        // The entry and its parents are this layer's: an opaque marker later keeps them.
        let mut seen: Option<&Path> = Some(&rel);
        while let Some(p) = seen.filter(|p| !p.as_os_str().is_empty()) {
            if !written.insert(p.to_path_buf()) {
                break;
            }
            seen = p.parent();
        }
        out.written += 1;
    }
    // Directory modes last, so a read-only directory was still writable while filling it.
    for (dir, mode) in dir_modes.into_iter().rev() {
        fs::set_permissions(&dir, fs::Permissions::from_mode(mode))?;
    }
    Ok(out)
}

/// An entry name relative to the image root: leading `/` and `.` dropped; `None` when it has
/// a `..`.
pub(crate) fn clean(raw: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in raw.components() {
        match c {
            Component::Normal(part) => out.push(part),
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// Walks `rel` under `dest` through real directories only, creating missing ones (0755).
fn make_dirs(dest: &Path, rel: &Path) -> Result<PathBuf, String> {
    walk_dirs(dest, rel, true).map(|found| found.unwrap_or_else(|| dest.join(rel)))
}

/// `rel` under `dest` when it is a real directory reached through real directories only;
/// `None` when it is missing or not a directory.
fn existing_dir(dest: &Path, rel: &Path) -> Result<Option<PathBuf>, String> {
    walk_dirs(dest, rel, false)
}

/// Walks `rel` under `dest` one component at a time, refusing symbolic links on the way. A
/// missing directory is created when `create` is set; otherwise a missing one, or a file, ends
/// the walk with `None` (with `create`, a file on the way is an error).
fn walk_dirs(dest: &Path, rel: &Path, create: bool) -> Result<Option<PathBuf>, String> {
    let mut here = dest.to_path_buf();
    for part in rel.components() {
        here.push(part);
        match fs::symlink_metadata(&here) {
            Ok(m) if m.is_dir() => {}
            Ok(m) if m.file_type().is_symlink() => {
                return Err(format!(
                    "archive entry under {} goes through a symbolic link",
                    rel.display()
                ))
            }
            Ok(_) if create => {
                return Err(format!(
                    "archive entry under {} goes through a file",
                    rel.display()
                ))
            }
            Err(e) if create && e.kind() == io::ErrorKind::NotFound => {
                fs::create_dir(&here).map_err(|e| format!("{}: {e}", here.display()))?;
            }
            Err(e) if create => return Err(format!("{}: {e}", here.display())),
            _ => return Ok(None),
        }
    }
    Ok(Some(here))
}

/// Removes whatever is at `path` (a directory with its contents); nothing there is fine.
fn remove_any(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Empties `dir` (at `rel` in the image) of what the layers below put there, keeping what this
/// layer wrote (and, inside a kept directory, only what this layer wrote).
fn clear_except(dir: &Path, rel: &Path, written: &HashSet<PathBuf>) -> io::Result<()> {
    for child in fs::read_dir(dir)? {
        let child = child?;
        let child_rel = rel.join(child.file_name());
        if written.contains(&child_rel) {
            if child.file_type()?.is_dir() {
                clear_except(&child.path(), &child_rel, written)?;
            }
        } else {
            remove_any(&child.path())?;
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// One entry of a test archive.
    pub(crate) enum E<'a> {
        /// A regular file and its contents.
        File(&'a str, &'a [u8]),
        /// A directory.
        Dir(&'a str),
        /// A symbolic link and its target.
        Link(&'a str, &'a str),
        /// A hard link and the entry it points at.
        Hard(&'a str, &'a str),
        /// A character device.
        Dev(&'a str),
        /// A regular file whose name is written raw, past the tar crate's checks.
        Raw(&'a [u8], &'a [u8]),
    }

    /// A tar archive of `entries`, in order.
    pub(crate) fn tar_of(entries: &[E<'_>]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for e in entries {
            let mut h = tar::Header::new_gnu();
            h.set_mode(0o644);
            h.set_size(0);
            match e {
                E::File(p, data) => {
                    h.set_entry_type(tar::EntryType::Regular);
                    h.set_size(data.len() as u64);
                    b.append_data(&mut h, p, *data).unwrap();
                }
                E::Dir(p) => {
                    h.set_entry_type(tar::EntryType::Directory);
                    h.set_mode(0o755);
                    b.append_data(&mut h, p, &[][..]).unwrap();
                }
                E::Link(p, t) => {
                    h.set_entry_type(tar::EntryType::Symlink);
                    b.append_link(&mut h, p, t).unwrap();
                }
                E::Hard(p, t) => {
                    h.set_entry_type(tar::EntryType::Link);
                    b.append_link(&mut h, p, t).unwrap();
                }
                E::Dev(p) => {
                    h.set_entry_type(tar::EntryType::Char);
                    b.append_data(&mut h, p, &[][..]).unwrap();
                }
                E::Raw(name, data) => {
                    h.set_entry_type(tar::EntryType::Regular);
                    h.set_size(data.len() as u64);
                    h.as_old_mut().name[..name.len()].copy_from_slice(name);
                    h.set_cksum();
                    b.append(&h, *data).unwrap();
                }
            }
        }
        b.into_inner().unwrap()
    }

    fn read(dest: &Path, rel: &str) -> Option<String> {
        fs::read_to_string(dest.join(rel)).ok()
    }

    #[test]
    fn layers_apply_in_order_with_whiteouts_and_opaque_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path();
        let base = tar_of(&[
            E::Dir("etc"),
            E::File("etc/a", b"a1"),
            E::File("etc/gone", b"x"),
            E::Dir("var/cache"),
            E::File("var/cache/old", b"old"),
            E::Dir("var/cache/sub"),
            E::File("var/cache/sub/old2", b"old"),
            E::Link("bin", "usr/bin"),
            E::Dev("dev/null"),
        ]);
        let applied = apply(&base[..], dest, "img").unwrap();
        assert_eq!(applied.skipped, 1);
        let top = tar_of(&[
            E::File("etc/a", b"a2"),
            E::File("etc/.wh.gone", b""),
            E::File("var/cache/sub/new", b"new"),
            E::File("var/cache/.wh..wh..opq", b""),
            E::File("var/cache/late", b"late"),
            E::Hard("etc/a-again", "etc/a"),
        ]);
        let applied = apply(&top[..], dest, "img").unwrap();
        assert_eq!(applied.whiteouts, 2);
        assert_eq!(read(dest, "etc/a").as_deref(), Some("a2"));
        assert_eq!(read(dest, "etc/a-again").as_deref(), Some("a2"));
        assert!(!dest.join("etc/gone").exists());
        assert_eq!(read(dest, "var/cache/sub/new").as_deref(), Some("new"));
        assert_eq!(read(dest, "var/cache/late").as_deref(), Some("late"));
        assert!(!dest.join("var/cache/old").exists());
        assert!(!dest.join("var/cache/sub/old2").exists());
        assert!(!dest.join("var/cache/.wh..wh..opq").exists());
        assert_eq!(
            fs::read_link(dest.join("bin")).unwrap(),
            PathBuf::from("usr/bin")
        );
        assert!(!dest.join("dev/null").exists());
    }

    #[test]
    fn escapes_are_refused_or_contained() {
        let outer = tempfile::tempdir().unwrap();
        let dest = outer.path().join("root");
        fs::create_dir(&dest).unwrap();

        let dotdot = tar_of(&[E::Raw(b"../evil", b"x")]);
        let e = apply(&dotdot[..], &dest, "img").unwrap_err();
        assert!(e.to_string().contains("outside the image"), "{e}");
        assert!(!outer.path().join("evil").exists());

        // An absolute name lands inside the image.
        let absolute = tar_of(&[E::Raw(b"/abs-file", b"x")]);
        apply(&absolute[..], &dest, "img").unwrap();
        assert_eq!(read(&dest, "abs-file").as_deref(), Some("x"));

        // A symbolic link pointing out is created, never written through.
        let through = tar_of(&[
            E::Link("out", outer.path().to_str().unwrap()),
            E::File("out/evil", b"x"),
        ]);
        let e = apply(&through[..], &dest, "img").unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(!outer.path().join("evil").exists());

        // A file replacing a symbolic link replaces the link, not its target.
        fs::write(outer.path().join("victim"), b"keep").unwrap();
        let replace = tar_of(&[
            E::Link("v", outer.path().join("victim").to_str().unwrap()),
            E::File("v", b"new"),
        ]);
        apply(&replace[..], &dest, "img").unwrap();
        assert_eq!(read(outer.path(), "victim").as_deref(), Some("keep"));
        assert_eq!(read(&dest, "v").as_deref(), Some("new"));

        // A hard link to something outside is refused.
        let hard = tar_of(&[E::Hard("h", "../victim")]);
        assert!(apply(&hard[..], &dest, "img").is_err());

        // A whiteout of ".." would remove the directory above the image.
        fs::create_dir(outer.path().join("keep")).unwrap();
        let up = tar_of(&[E::File(".wh...", b"")]);
        let e = apply(&up[..], &dest, "img").unwrap_err();
        assert!(e.to_string().contains("whiteout"), "{e}");
        assert!(outer.path().join("keep").is_dir() && dest.is_dir());

        let garbage = b"this is not a tar archive at all, not even close".repeat(20);
        let e = apply(&garbage[..], &dest, "img").unwrap_err();
        assert!(matches!(e, ImageError::Bad { .. }), "{e}");
    }
}
