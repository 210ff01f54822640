//! Writing a file atomically and with its final mode from the start: `tls init`'s keys and
//! tokens, and `backup`'s document. Its own file because both [`crate::tls_init`] and
//! [`crate::backup`] use it.

use std::io::Write;
use std::path::{Path, PathBuf};

/// A file that could not be written: its path and the I/O error.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {}: {source}", path.display())]
pub struct WriteError {
    /// The file.
    pub path: PathBuf,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

/// Writes `text` to a temporary file with the final mode, then renames it over `path`, so a
/// secret is never readable by others, not even for a moment.
pub(crate) fn write_file(path: &Path, text: &str, secret: bool) -> Result<(), WriteError> {
    use std::os::unix::fs::OpenOptionsExt;
    let err = |source: std::io::Error| WriteError {
        path: path.to_path_buf(),
        source,
    };
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(if secret { 0o600 } else { 0o644 })
        .open(&tmp)
        .map_err(err)?;
    file.write_all(text.as_bytes()).map_err(err)?;
    file.sync_all().map_err(err)?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(err)
}
