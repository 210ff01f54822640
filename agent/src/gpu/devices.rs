//! The cgroup v1 device rules of a GPU task (`devices.allow` lines, through
//! `isolation::cgroup::device_rules`): its own `/dev/nvidia<minor>` nodes plus the shared
//! `/dev/nvidiactl`, `/dev/nvidia-uvm` and `/dev/nvidia-uvm-tools`, so it cannot open the
//! other GPUs. Major and minor numbers are read from the device nodes, else from
//! `/proc/devices` (the uvm major is dynamic); nothing is hard-coded but NVIDIA's documented
//! minors where a node is missing (`nvidiactl` 255, uvm 0, uvm-tools 1).
//!
//! cgroup v2 has no `devices` files: its device control is an eBPF program, which this agent
//! does not load; there a task is steered by its environment only.

use std::collections::HashMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// `/proc/devices` names whose major the nodes use: the per-device nodes and `nvidiactl`
/// (`nvidia-frontend` on most drivers, `nvidia` on some) and the uvm ones.
const FRONTEND: [&str; 2] = ["nvidia-frontend", "nvidia"];
const UVM: &str = "nvidia-uvm";

/// The rules for a task holding the devices with these minor numbers; none when it holds
/// none (the default allow-list has no GPU node, so it can open none). `dev` is `/dev`;
/// `proc_devices` the text of `/proc/devices` (empty when unreadable).
pub fn rules(dev: &Path, proc_devices: &str, minors: &[u32]) -> Vec<String> {
    as_rules(resolve(dev, proc_devices, minors))
}

/// Each node such a task needs, by name, with its major and minor numbers where they are
/// known (from the node, else the major from `proc_devices` and the documented minor).
fn resolve(dev: &Path, proc_devices: &str, minors: &[u32]) -> Vec<(String, Option<(u64, u64)>)> {
    if minors.is_empty() {
        return Vec::new();
    }
    let majors = parse_proc_devices(proc_devices);
    let frontend = FRONTEND.iter().find_map(|n| majors.get(*n).copied());
    let uvm = majors.get(UVM).copied();
    let mut nodes: Vec<(String, Option<u64>, u64)> = minors
        .iter()
        .map(|m| (format!("nvidia{m}"), frontend, u64::from(*m)))
        .collect();
    nodes.push(("nvidiactl".into(), frontend, 255));
    nodes.push(("nvidia-uvm".into(), uvm, 0));
    nodes.push(("nvidia-uvm-tools".into(), uvm, 1));
    nodes
        .into_iter()
        .map(|(name, major, minor)| {
            let numbers = char_node(&dev.join(&name)).or(major.map(|m| (m, minor)));
            (name, numbers)
        })
        .collect()
}

/// The rules for a task of this machine: [`rules`] over `/dev` and `/proc/devices`. A node
/// that cannot be found either way (NVML lists the GPU but the driver's nodes are not there,
/// as over a stub NVML in tests) is one warning per task: on cgroup v1 such a task cannot open
/// that node, and it still runs.
pub fn host_rules(minors: &[u32]) -> Vec<String> {
    if minors.is_empty() {
        return Vec::new();
    }
    let proc_devices = std::fs::read_to_string("/proc/devices").unwrap_or_default();
    let nodes = resolve(Path::new("/dev"), &proc_devices, minors);
    let missing: Vec<&str> = nodes
        .iter()
        .filter(|(_, numbers)| numbers.is_none())
        .map(|(name, _)| name.as_str())
        .collect();
    if !missing.is_empty() {
        tracing::warn!(
            missing = %missing.join(", "),
            "GPU device nodes not found in /dev nor their majors in /proc/devices: an isolated \
             task on cgroup v1 cannot open them (the task still runs)"
        );
    }
    as_rules(nodes)
}

/// `devices.allow` lines of the nodes whose numbers are known.
fn as_rules(nodes: Vec<(String, Option<(u64, u64)>)>) -> Vec<String> {
    nodes
        .into_iter()
        .filter_map(|(_, numbers)| numbers)
        .map(|(major, minor)| format!("c {major}:{minor} rwm"))
        .collect()
}

/// A character device node's major and minor numbers.
fn char_node(path: &Path) -> Option<(u64, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.file_type().is_char_device() {
        return None;
    }
    let rdev = meta.rdev();
    Some((nix::sys::stat::major(rdev), nix::sys::stat::minor(rdev)))
}

/// The character devices' majors by name, from `/proc/devices`.
fn parse_proc_devices(text: &str) -> HashMap<String, u64> {
    let mut majors = HashMap::new();
    for line in text.lines() {
        if line.starts_with("Block devices") {
            break;
        }
        let mut parts = line.split_whitespace();
        if let (Some(major), Some(name)) = (parts.next(), parts.next()) {
            if let Ok(major) = major.parse() {
                majors.insert(name.to_string(), major);
            }
        }
    }
    majors
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const PROC_DEVICES: &str = "Character devices:\n  1 mem\n195 nvidia-frontend\n\
        195 nvidia\n508 nvidia-uvm\n\nBlock devices:\n  7 loop\n";

    #[test]
    fn without_nodes_the_numbers_come_from_proc_devices() {
        let empty = tempfile::tempdir().unwrap();
        let r = rules(empty.path(), PROC_DEVICES, &[1]);
        assert_eq!(
            r,
            ["c 195:1 rwm", "c 195:255 rwm", "c 508:0 rwm", "c 508:1 rwm"]
        );
        assert!(rules(empty.path(), PROC_DEVICES, &[]).is_empty());
        // No driver at all: no rules, so no GPU node can be opened.
        assert!(rules(empty.path(), "", &[0]).is_empty());
        assert_eq!(parse_proc_devices(PROC_DEVICES).get("loop"), None);
    }

    #[test]
    fn nodes_found_neither_way_are_named() {
        let empty = tempfile::tempdir().unwrap();
        // The driver's frontend is loaded, uvm is not (it loads on the first CUDA use).
        let nodes = resolve(empty.path(), "195 nvidia-frontend\n", &[3]);
        let missing: Vec<&str> = nodes
            .iter()
            .filter(|(_, n)| n.is_none())
            .map(|(name, _)| name.as_str())
            .collect();
        assert_eq!(missing, ["nvidia-uvm", "nvidia-uvm-tools"]);
        assert_eq!(nodes[0], ("nvidia3".to_string(), Some((195, 3))));
        assert_eq!(as_rules(nodes), ["c 195:3 rwm", "c 195:255 rwm"]);
    }

    #[test]
    fn the_nodes_numbers_win() {
        use nix::sys::stat::{makedev, mknod, Mode, SFlag};
        let dev = tempfile::tempdir().unwrap();
        let made = [
            ("nvidia2", 200, 2),
            ("nvidiactl", 200, 255),
            ("nvidia-uvm", 511, 0),
        ]
        .iter()
        .all(|(name, major, minor)| {
            mknod(
                &dev.path().join(name),
                SFlag::S_IFCHR,
                Mode::from_bits_truncate(0o600),
                makedev(*major, *minor),
            )
            .is_ok()
        });
        if !made {
            assert!(
                std::env::var("PARLEY_CI").as_deref() != Ok("1"),
                "CI runs as root and must be able to make device nodes"
            );
            println!("skipped: cannot make device nodes here (not root?)");
            return;
        }
        // A regular file where a node should be is not taken for one.
        std::fs::write(dev.path().join("nvidia-uvm-tools"), "").unwrap();
        let r = rules(dev.path(), PROC_DEVICES, &[2]);
        assert_eq!(
            r,
            ["c 200:2 rwm", "c 200:255 rwm", "c 511:0 rwm", "c 508:1 rwm"]
        );
    }
}
