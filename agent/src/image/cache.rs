//! The unpacked-image cache: one directory per image content (`rootfs/KEY`), made by unpacking
//! into a private temporary directory and renaming it into place, so a reader never sees half an
//! image. Two prepares of one image in this process wait for each other; two processes sharing
//! a cache may both unpack, and the second rename loses harmlessly.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::ImageError;

/// Per-key locks of this process (entries stay: one per image ever prepared).
static LOCKS: Mutex<Option<HashMap<String, Arc<Mutex<()>>>>> = Mutex::new(None);
/// Makes temporary directory names unique within this process.
static SEQ: AtomicU64 = AtomicU64::new(0);

/// Where unpacked images live under `cache`.
pub(crate) fn rootfs_dir(cache: &Path) -> PathBuf {
    cache.join("rootfs")
}

/// Where unpacking happens before the rename.
pub(crate) fn tmp_dir(cache: &Path) -> PathBuf {
    cache.join("tmp")
}

/// The unpacked image `key` (`[a-z0-9-]`), running `unpack` into an empty directory first when
/// it is not there yet. Returns its path and whether this call unpacked it.
pub(crate) fn ensure(
    cache: &Path,
    key: &str,
    unpack: impl FnOnce(&Path) -> Result<(), ImageError>,
) -> Result<(PathBuf, bool), ImageError> {
    if key.is_empty()
        || !key
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(ImageError::Io(std::io::Error::other(format!(
            "bad cache key {key:?}"
        ))));
    }
    let done = rootfs_dir(cache).join(key);
    if done.is_dir() {
        return Ok((done, false));
    }
    let lock = {
        let mut locks = LOCKS.lock().unwrap_or_else(PoisonError::into_inner);
        locks
            .get_or_insert_with(HashMap::new)
            .entry(key.to_string())
            .or_default()
            .clone()
    };
    let _held = lock.lock().unwrap_or_else(PoisonError::into_inner);
    if done.is_dir() {
        return Ok((done, false));
    }
    let tmp = tmp_dir(cache).join(format!(
        "{key}.{}.{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let attempt = (|| {
        std::fs::create_dir_all(rootfs_dir(cache))?;
        std::fs::create_dir_all(&tmp)?;
        unpack(&tmp)?;
        match std::fs::rename(&tmp, &done) {
            Ok(()) => Ok(true),
            // Another process put it there first.
            Err(_) if done.is_dir() => Ok(false),
            Err(e) => Err(ImageError::Io(e)),
        }
    })();
    match attempt {
        Ok(true) => Ok((done, true)),
        Ok(false) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok((done, false))
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn unpacks_once_and_leaves_nothing_on_failure() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path();
        let (path, unpacked) = ensure(cache, "k1", |tmp| {
            std::fs::write(tmp.join("f"), b"1")?;
            Ok(())
        })
        .unwrap();
        assert!(unpacked);
        assert_eq!(std::fs::read(path.join("f")).unwrap(), b"1");
        let (again, unpacked) = ensure(cache, "k1", |_| panic!("unpacked twice")).unwrap();
        assert_eq!((again, unpacked), (path, false));

        let e = ensure(cache, "k2", |tmp| {
            std::fs::write(tmp.join("half"), b"")?;
            Err(ImageError::NotFound("x".into()))
        })
        .unwrap_err();
        assert!(matches!(e, ImageError::NotFound(_)));
        assert!(!rootfs_dir(cache).join("k2").exists());
        assert_eq!(std::fs::read_dir(tmp_dir(cache)).unwrap().count(), 0);
        assert!(ensure(cache, "../x", |_| Ok(())).is_err());
    }

    #[test]
    fn concurrent_prepares_unpack_once() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().to_path_buf();
        let runs = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (cache, runs) = (cache.clone(), runs.clone());
                std::thread::spawn(move || {
                    ensure(&cache, "same", |tmp| {
                        runs.fetch_add(1, Ordering::SeqCst);
                        std::fs::write(tmp.join("f"), b"x")?;
                        Ok(())
                    })
                    .unwrap()
                    .0
                })
            })
            .collect();
        for t in threads {
            assert_eq!(t.join().unwrap(), rootfs_dir(&cache).join("same"));
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }
}
