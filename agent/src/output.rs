//! Reading a task's `stdout` or `stderr` safely: the task owns its sandbox and may replace
//! these files with anything (a symlink to `/dev/zero` or to the agent's journal, a FIFO).
//! A read opens the file without following a symlink and without blocking (`O_NOFOLLOW`,
//! `O_NONBLOCK`), refuses anything but a regular file, and reads at most
//! [`MAX_OUTPUT_BYTES`]: from `offset` when given, else the end of the file.

use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The most bytes one read returns (1 MiB).
pub const MAX_OUTPUT_BYTES: u64 = 1024 * 1024;

/// Why output could not be read.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The file is a symlink, a FIFO, a device: not the output the agent wrote.
    #[error("the task's output file was replaced by something that is not a regular file")]
    NotRegular,
    /// Reading failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Up to `limit` (at most [`MAX_OUTPUT_BYTES`]) bytes of the regular file at `path`, from
/// `offset`, or its last `limit` bytes without one. A missing file reads as empty.
pub fn read_bounded(path: &Path, offset: Option<u64>, limit: u64) -> Result<Vec<u8>, OutputError> {
    let limit = limit.min(MAX_OUTPUT_BYTES);
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path);
    let mut file = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => {
            return Err(OutputError::NotRegular)
        }
        Err(e) => return Err(e.into()),
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(OutputError::NotRegular);
    }
    let len = meta.len();
    let start = match offset {
        Some(offset) => offset.min(len),
        None => len.saturating_sub(limit),
    };
    file.seek(SeekFrom::Start(start))?;
    let mut buf = Vec::new();
    file.take(limit).read_to_end(&mut buf)?;
    Ok(buf)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_bounded_and_of_regular_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("stdout");
        std::fs::write(&file, b"0123456789").unwrap();
        assert_eq!(read_bounded(&file, None, 4).unwrap(), b"6789");
        assert_eq!(read_bounded(&file, Some(2), 3).unwrap(), b"234");
        assert_eq!(read_bounded(&file, Some(99), 3).unwrap(), b"");
        assert!(read_bounded(&dir.path().join("none"), None, 4)
            .unwrap()
            .is_empty());

        // A symlink to an endless device is refused, not read forever.
        let link = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert!(matches!(
            read_bounded(&link, None, MAX_OUTPUT_BYTES),
            Err(OutputError::NotRegular)
        ));
        // So is a FIFO with no writer: opening it does not block.
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        assert!(matches!(
            read_bounded(&fifo, None, MAX_OUTPUT_BYTES),
            Err(OutputError::NotRegular)
        ));
        // A larger file gives its last MAX_OUTPUT_BYTES at most.
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'x'; (MAX_OUTPUT_BYTES + 10) as usize]).unwrap();
        let tail = read_bounded(&big, None, u64::MAX).unwrap();
        assert_eq!(tail.len() as u64, MAX_OUTPUT_BYTES);
    }
}
