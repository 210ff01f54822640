//! GPUs on an agent: which devices it has ([`GpuDiscovery`]: NVML in [`nvml`], a
//! fake in [`fake`] for tests and simulated agents), which of them it uses (`--gpus`,
//! [`GpuChoice`]), what a task's environment says ([`task_env`]) and which device nodes its
//! cgroup may open ([`devices`]). Which task holds which device is the engine's business
//! (`engine::gpus`).
//!
//! A task is given its devices by UUID in both `CUDA_VISIBLE_DEVICES` and
//! `NVIDIA_VISIBLE_DEVICES`: a UUID names the same device whatever the numbering inside a
//! container or the CUDA device order. A task without `gpus` on an agent with GPUs gets
//! `CUDA_VISIBLE_DEVICES=` (empty) and `NVIDIA_VISIBLE_DEVICES=void`: it sees none.

pub mod devices;
pub mod fake;
pub mod nvml;

use std::str::FromStr;
use std::sync::Arc;

use protocol::gpu::GpuDevice;

/// One device of this machine: what is reported, and the minor number of its device node
/// (`/dev/nvidia<minor>`), which the cgroup device rules name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalGpu {
    /// What the agent reports.
    pub device: GpuDevice,
    /// The minor number of `/dev/nvidia<minor>` (NVML's; the index where unknown).
    pub minor: u32,
}

/// A device's usage at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuUsage {
    /// Memory used by the compute processes on the device, in bytes.
    pub memory_used_bytes: u64,
    /// Utilisation over the driver's last sample period, in percent.
    pub utilization_percent: f64,
}

/// Why the GPUs cannot be used as configured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GpuError {
    /// `--gpus` is not `auto`, `none` or a list of indices.
    #[error("invalid --gpus {0:?}: give auto, none, or device indices like 0,2")]
    BadChoice(String),
    /// `--gpus` names an index the machine does not have.
    #[error("--gpus names device {index}, but this machine has {found}")]
    NoSuchDevice {
        /// The index asked for.
        index: u32,
        /// The indices found, e.g. `devices 0, 1` or `no GPUs`.
        found: String,
    },
    /// The `gpus` of a simulated agent's `--resources` is not whole.
    #[error("--resources: {0}")]
    Resources(String),
    /// Discovery failed in a way that is not "no GPUs here".
    #[error("reading the GPUs: {0}")]
    Discovery(String),
}

/// Finds a machine's GPUs and reads their usage. `devices` answering an empty list, or an
/// error, both mean the machine has none to offer (`auto` then advertises no `gpus`).
pub trait GpuDiscovery: Send + Sync + std::fmt::Debug {
    /// Every device, in index order.
    fn devices(&self) -> Result<Vec<LocalGpu>, GpuError>;
    /// A device's usage now, when it can be read.
    fn usage(&self, uuid: &str) -> Option<GpuUsage>;
}

/// Which GPUs the agent uses: `--gpus auto|none|0,2,...`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum GpuChoice {
    /// Every device found (none found: no `gpus` resource, no error).
    #[default]
    Auto,
    /// None: the agent neither advertises GPUs nor hides them from tasks.
    None,
    /// These device indices (each must exist).
    Indices(Vec<u32>),
}

impl FromStr for GpuChoice {
    type Err = GpuError;

    fn from_str(s: &str) -> Result<Self, GpuError> {
        let bad = || GpuError::BadChoice(s.to_string());
        match s.trim() {
            "auto" => Ok(GpuChoice::Auto),
            "none" => Ok(GpuChoice::None),
            "" => Err(bad()),
            list => {
                let mut indices = Vec::new();
                for item in list.split(',') {
                    let i: u32 = item.trim().parse().map_err(|_| bad())?;
                    if indices.contains(&i) {
                        return Err(bad());
                    }
                    indices.push(i);
                }
                indices.sort_unstable();
                Ok(GpuChoice::Indices(indices))
            }
        }
    }
}

/// The devices the agent uses: `choice` applied to what `discovery` finds. `auto` with no
/// GPUs (or no driver) is an empty list and one info line; an index `--gpus` names that is not
/// there is an error.
pub fn select(choice: &GpuChoice, discovery: &dyn GpuDiscovery) -> Result<Vec<LocalGpu>, GpuError> {
    if *choice == GpuChoice::None {
        return Ok(Vec::new());
    }
    let found = match discovery.devices() {
        Ok(found) => found,
        Err(e) if *choice == GpuChoice::Auto => {
            tracing::info!("no GPUs: {e}");
            return Ok(Vec::new());
        }
        Err(e) => {
            let index = match choice {
                GpuChoice::Indices(want) => want.first().copied().unwrap_or(0),
                _ => 0,
            };
            return Err(GpuError::NoSuchDevice {
                index,
                found: format!("no readable GPUs ({e})"),
            });
        }
    };
    let chosen = match choice {
        GpuChoice::Indices(want) => {
            let mut chosen = Vec::new();
            for index in want {
                match found.iter().find(|g| g.device.index == *index) {
                    Some(g) => chosen.push(g.clone()),
                    None => {
                        return Err(GpuError::NoSuchDevice {
                            index: *index,
                            found: describe(&found),
                        })
                    }
                }
            }
            chosen
        }
        _ => found,
    };
    match chosen.is_empty() {
        true => tracing::info!("no GPUs found: the agent advertises no gpus"),
        false => tracing::info!(count = chosen.len(), models = %models(&chosen), "GPUs found"),
    }
    Ok(chosen)
}

fn describe(found: &[LocalGpu]) -> String {
    match found {
        [] => "no GPUs".into(),
        _ => format!(
            "devices {}",
            found
                .iter()
                .map(|g| g.device.index.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn models(gpus: &[LocalGpu]) -> String {
    gpus.iter()
        .map(|g| {
            format!(
                "{}: {} ({} MiB)",
                g.device.index, g.device.model, g.device.memory_mib
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The discovery a real agent uses: the injected one, else NVML.
pub fn discovery(injected: Option<&Arc<dyn GpuDiscovery>>) -> Arc<dyn GpuDiscovery> {
    match injected {
        Some(d) => Arc::clone(d),
        None => Arc::new(nvml::NvmlDiscovery::new()),
    }
}

/// What a task is given of the agent's GPUs: the variables of [`task_env`], and the cgroup v1
/// device rules of its own device nodes ([`devices`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskGpus {
    /// `CUDA_VISIBLE_DEVICES` and friends (empty on an agent without GPUs).
    pub env: Vec<(&'static str, String)>,
    /// Extra `devices.allow` rules of an isolated task on cgroup v1.
    pub device_rules: Vec<String>,
}

/// The variables that tell a task its GPUs: `devices` (UUIDs) when the agent has GPUs
/// (`agent_has_gpus`), none at all otherwise. Set after the task's own `env`, so a task cannot
/// widen its view.
pub fn task_env(devices: &[String], agent_has_gpus: bool) -> Vec<(&'static str, String)> {
    if !agent_has_gpus {
        return Vec::new();
    }
    let list = devices.join(",");
    let nvidia = match devices.is_empty() {
        true => "void".to_string(),
        false => list.clone(),
    };
    vec![
        ("CUDA_VISIBLE_DEVICES", list),
        ("NVIDIA_VISIBLE_DEVICES", nvidia),
        ("CUDA_DEVICE_ORDER", "PCI_BUS_ID".to_string()),
    ]
}

/// The `gpus` resource of `n` devices set on `resources` (removed for none).
pub fn with_gpus(resources: &protocol::Resources, n: usize) -> protocol::Resources {
    let mut r = protocol::Resources::new();
    for (name, millis) in resources.iter() {
        if name.as_str() != protocol::gpu::GPUS {
            r.set_millis(name.clone(), millis);
        }
    }
    if n > 0 {
        if let Ok(name) = protocol::ResourceName::new(protocol::gpu::GPUS) {
            r.set_millis(name, n as u64 * 1000);
        }
    }
    r
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_reads_auto_none_and_indices() {
        assert_eq!("auto".parse::<GpuChoice>().unwrap(), GpuChoice::Auto);
        assert_eq!("none".parse::<GpuChoice>().unwrap(), GpuChoice::None);
        assert_eq!(
            "2, 0".parse::<GpuChoice>().unwrap(),
            GpuChoice::Indices(vec![0, 2])
        );
        for bad in ["", "0,", "-1", "x", "0,0", "1.5", "all"] {
            let err = bad.parse::<GpuChoice>().unwrap_err();
            assert!(
                err.to_string().starts_with("invalid --gpus"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn selection_picks_indices_and_refuses_missing_ones() {
        let fake = fake::FakeGpus::new(3);
        assert_eq!(select(&GpuChoice::Auto, &fake).unwrap().len(), 3);
        assert!(select(&GpuChoice::None, &fake).unwrap().is_empty());
        let two = select(&GpuChoice::Indices(vec![0, 2]), &fake).unwrap();
        let idx: Vec<u32> = two.iter().map(|g| g.device.index).collect();
        assert_eq!(idx, [0, 2]);
        let err = select(&GpuChoice::Indices(vec![5]), &fake).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--gpus names device 5, but this machine has devices 0, 1, 2"
        );
        let none = fake::FakeGpus::new(0);
        assert!(select(&GpuChoice::Auto, &none).unwrap().is_empty());
        assert!(select(&GpuChoice::Indices(vec![0]), &none)
            .unwrap_err()
            .to_string()
            .ends_with("has no GPUs"));
    }

    #[test]
    fn no_driver_means_no_gpus_for_auto_and_an_error_for_indices() {
        let nvml = nvml::NvmlDiscovery::new();
        if nvml.devices().is_ok() {
            println!("skipped: this machine has an NVIDIA driver");
            return;
        }
        assert!(select(&GpuChoice::Auto, &nvml).unwrap().is_empty());
        let err = select(&GpuChoice::Indices(vec![0]), &nvml).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("--gpus names device 0, but this machine has no readable GPUs"),
            "{err}"
        );
    }

    #[test]
    fn a_task_sees_its_devices_or_none() {
        let env = task_env(&["GPU-a".into(), "GPU-b".into()], true);
        assert_eq!(env[0], ("CUDA_VISIBLE_DEVICES", "GPU-a,GPU-b".into()));
        assert_eq!(env[1], ("NVIDIA_VISIBLE_DEVICES", "GPU-a,GPU-b".into()));
        let none = task_env(&[], true);
        assert_eq!(none[0], ("CUDA_VISIBLE_DEVICES", String::new()));
        assert_eq!(none[1], ("NVIDIA_VISIBLE_DEVICES", "void".into()));
        assert!(task_env(&[], false).is_empty());
    }

    #[test]
    fn the_gpus_resource_counts_the_devices() {
        let r: protocol::Resources = "cpus=2,gpus=7".parse().unwrap();
        assert_eq!(
            with_gpus(&r, 2).to_string(),
            "cpus=2,gpus=2"
                .parse::<protocol::Resources>()
                .unwrap()
                .to_string()
        );
        assert_eq!(with_gpus(&r, 0).millis("gpus"), 0);
        assert_eq!(with_gpus(&r, 0).millis("cpus"), 2000);
    }
}
