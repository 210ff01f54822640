//! Invented GPUs: for tests (a real agent with devices injected) and simulated agents
//! (`gpus=N` in `--resources` invents N devices per agent). Usage can be set per device.

use std::collections::HashMap;
use std::sync::Mutex;

use protocol::gpu::GpuDevice;

use super::{GpuDiscovery, GpuError, GpuUsage, LocalGpu};

/// Memory of an invented device, in MiB.
pub const FAKE_MEMORY_MIB: u64 = 16384;

/// Invented devices `0..n` and the usage tests set for them.
#[derive(Debug, Default)]
pub struct FakeGpus {
    devices: Vec<LocalGpu>,
    usage: Mutex<HashMap<String, GpuUsage>>,
}

impl FakeGpus {
    /// `n` devices with UUIDs `GPU-fake-<i>`.
    pub fn new(n: u32) -> Self {
        Self::named("fake", n)
    }

    /// `n` devices with UUIDs `GPU-<tag>-<i>` and model `Simulated GPU`.
    pub fn named(tag: &str, n: u32) -> Self {
        Self {
            devices: (0..n)
                .map(|index| LocalGpu {
                    device: GpuDevice {
                        index,
                        uuid: format!("GPU-{tag}-{index}"),
                        model: "Simulated GPU".into(),
                        memory_mib: FAKE_MEMORY_MIB,
                    },
                    minor: index,
                })
                .collect(),
            usage: Mutex::default(),
        }
    }

    /// Sets what [`GpuDiscovery::usage`] answers for a device.
    pub fn set_usage(&self, uuid: &str, usage: GpuUsage) {
        self.usage
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(uuid.to_string(), usage);
    }
}

impl GpuDiscovery for FakeGpus {
    fn devices(&self) -> Result<Vec<LocalGpu>, GpuError> {
        Ok(self.devices.clone())
    }

    fn usage(&self, uuid: &str) -> Option<GpuUsage> {
        self.usage
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(uuid)
            .copied()
    }
}

/// The UUID of device `index` of simulated agent `agent`.
pub fn simulated_uuid(agent: usize, index: u32) -> String {
    format!("GPU-sim-{agent}-{index}")
}

/// The devices a simulated agent (number `agent` of its fleet) invents for `gpus=n`: UUIDs
/// `GPU-sim-<agent>-<i>`.
pub fn simulated(agent: usize, n: u32) -> Vec<GpuDevice> {
    FakeGpus::named(&format!("sim-{agent}"), n)
        .devices
        .into_iter()
        .map(|g| g.device)
        .collect()
}
