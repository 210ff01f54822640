//! Detects the machine's resources: cores, memory, and the disk space of the work directory.

use std::path::Path;

use protocol::{ResourceError, Resources};

const MIB: u64 = 1024 * 1024;

/// The machine's resources: `cpus` (available parallelism), `mem` (total memory, MiB) and `disk`
/// (free space of the file system holding `work_dir`, MiB). A quantity that cannot be read is
/// left out rather than guessed.
pub fn detect(work_dir: &Path) -> Result<Resources, ResourceError> {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut sys = sysinfo::System::new();
    sys.refresh_memory();
    let mem_mib = sys.total_memory() / MIB;
    let disk_mib = disk_free_mib(work_dir).unwrap_or(0);
    Resources::from_units([
        ("cpus", cpus as f64),
        ("mem", mem_mib as f64),
        ("disk", disk_mib as f64),
    ])
}

/// Free space, in MiB, of the mounted file system whose mount point is the longest prefix of
/// `dir` (so `/` does not win over `/data` for `/data/agent`).
fn disk_free_mib(dir: &Path) -> Option<u64> {
    let dir = dir.canonicalize().ok()?;
    let disks = sysinfo::Disks::new_with_refreshed_list();
    disks
        .list()
        .iter()
        .filter(|d| dir.starts_with(d.mount_point()))
        .max_by_key(|d| d.mount_point().as_os_str().len())
        .map(|d| d.available_space() / MIB)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn detects_cpus_and_memory() {
        let dir = tempfile::tempdir().unwrap();
        let r = detect(dir.path()).unwrap();
        assert!(r.units("cpus") >= 1.0, "{r}");
        assert!(r.units("mem") >= 64.0, "{r}");
    }
}
