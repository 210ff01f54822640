//! A root filesystem tarball (`.tar`, or gzip-compressed `.tar.gz`, told apart by its first
//! bytes, not its name): one layer applied onto an empty directory.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use super::{archive, ImageError};

/// Whether the file at `path` starts with gzip's magic bytes.
pub(crate) fn is_gzip(path: &Path) -> std::io::Result<bool> {
    let mut magic = [0u8; 2];
    let mut file = File::open(path)?;
    let mut read = 0;
    while read < 2 {
        let n = file.read(&mut magic[read..])?;
        if n == 0 {
            return Ok(false);
        }
        read += n;
    }
    Ok(magic == [0x1f, 0x8b])
}

/// Unpacks the tarball at `path` into `dest`.
pub(crate) fn unpack(path: &Path, dest: &Path, name: &str) -> Result<(), ImageError> {
    let gzip = is_gzip(path)?;
    let file = BufReader::with_capacity(1 << 20, File::open(path)?);
    let applied = if gzip {
        archive::apply(flate2::read::MultiGzDecoder::new(file), dest, name)?
    } else {
        archive::apply(file, dest, name)?
    };
    tracing::debug!(image = name, ?applied, "unpacked a root filesystem tarball");
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::super::archive::tests::{tar_of, E};
    use super::*;
    use std::io::Write;

    #[test]
    fn plain_and_gzip_tarballs_unpack() {
        let dir = tempfile::tempdir().unwrap();
        let tar = tar_of(&[E::Dir("./etc"), E::File("./etc/os", b"plain")]);
        std::fs::write(dir.path().join("r.tar"), &tar).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&tar).unwrap();
        std::fs::write(dir.path().join("r.tgz"), gz.finish().unwrap()).unwrap();
        for f in ["r.tar", "r.tgz"] {
            let dest = dir.path().join(format!("out-{f}"));
            std::fs::create_dir(&dest).unwrap();
            unpack(&dir.path().join(f), &dest, f).unwrap();
            assert_eq!(std::fs::read(dest.join("etc/os")).unwrap(), b"plain");
        }
        assert!(!is_gzip(&dir.path().join("r.tar")).unwrap());
        assert!(is_gzip(&dir.path().join("r.tgz")).unwrap());
    }
}
