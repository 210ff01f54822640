//! SHA-256 of files, as lowercase hex; a tarball's digest is remembered beside the cache (keyed
//! by its path, device, inode, size and times) so an unchanged image is not read again at every
//! launch.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use sha2::{Digest, Sha256};

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Whether `text` is a SHA-256 in lowercase hex.
pub(crate) fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// SHA-256 of everything `reader` yields.
pub(crate) fn sha256_reader(mut reader: impl Read) -> io::Result<String> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = reader.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

/// SHA-256 of the file at `path`.
pub(crate) fn sha256_file(path: &Path) -> io::Result<String> {
    sha256_reader(File::open(path)?)
}

/// SHA-256 of the file at `path`, remembered in `stamps` (a directory) while the file's device,
/// inode, size, modification and change times stay the same.
pub(crate) fn sha256_file_remembered(path: &Path, stamps: &Path) -> io::Result<String> {
    let meta = std::fs::metadata(path)?;
    let stamp = format!(
        "{} {} {} {}.{} {}.{}",
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec()
    );
    let memo = stamps.join(hex(&Sha256::digest(path.as_os_str().as_encoded_bytes())));
    if let Ok(text) = std::fs::read_to_string(&memo) {
        if let Some((seen, digest)) = text.trim_end().rsplit_once(' ') {
            if seen == stamp && is_sha256_hex(digest) {
                return Ok(digest.to_string());
            }
        }
    }
    let digest = sha256_file(path)?;
    std::fs::create_dir_all(stamps)?;
    let tmp = memo.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, format!("{stamp} {digest}\n"))?;
    std::fs::rename(&tmp, &memo)?;
    Ok(digest)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn digests_are_sha256_and_remembered_until_the_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"abc").unwrap();
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(sha256_file(&file).unwrap(), abc);
        let stamps = dir.path().join("stamps");
        assert_eq!(sha256_file_remembered(&file, &stamps).unwrap(), abc);
        assert_eq!(std::fs::read_dir(&stamps).unwrap().count(), 1);
        assert_eq!(sha256_file_remembered(&file, &stamps).unwrap(), abc);
        std::fs::write(&file, b"abcd").unwrap();
        assert_ne!(sha256_file_remembered(&file, &stamps).unwrap(), abc);
        assert!(is_sha256_hex(abc));
        assert!(!is_sha256_hex("../etc"));
    }
}
