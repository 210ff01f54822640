//! GPUs through NVML (`nvml-wrapper`, which loads `libnvidia-ml.so` at run time: an agent
//! without the driver builds and runs, and finds no GPUs).
//!
//! Usage is read per device: the memory of the compute processes NVML lists on it (a device
//! belongs to one task at a time, so what runs there is that task's) and the device's
//! utilisation over the driver's last sample period.

use std::sync::OnceLock;

use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::Nvml;
use protocol::gpu::GpuDevice;

use super::{GpuDiscovery, GpuError, GpuUsage, LocalGpu};

/// NVML, initialised on first use (once; a failure is kept and means no GPUs).
#[derive(Default)]
pub struct NvmlDiscovery {
    nvml: OnceLock<Result<Nvml, String>>,
}

impl std::fmt::Debug for NvmlDiscovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NvmlDiscovery")
    }
}

impl NvmlDiscovery {
    /// Not initialised yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn nvml(&self) -> Result<&Nvml, GpuError> {
        self.nvml
            .get_or_init(|| Nvml::init().map_err(|e| format!("NVML is not available ({e})")))
            .as_ref()
            .map_err(|e| GpuError::Discovery(e.clone()))
    }
}

impl GpuDiscovery for NvmlDiscovery {
    fn devices(&self) -> Result<Vec<LocalGpu>, GpuError> {
        let nvml = self.nvml()?;
        let fail = |what: &str, e: nvml_wrapper::error::NvmlError| {
            GpuError::Discovery(format!("NVML {what}: {e}"))
        };
        let count = nvml.device_count().map_err(|e| fail("device count", e))?;
        let mut gpus = Vec::new();
        for index in 0..count {
            let d = nvml.device_by_index(index).map_err(|e| fail("device", e))?;
            let uuid = d.uuid().map_err(|e| fail("uuid", e))?;
            let model = d.name().map_err(|e| fail("name", e))?;
            let memory = d.memory_info().map_err(|e| fail("memory", e))?;
            gpus.push(LocalGpu {
                device: GpuDevice {
                    index,
                    uuid,
                    model,
                    memory_mib: memory.total / (1024 * 1024),
                },
                minor: d.minor_number().unwrap_or(index),
            });
        }
        Ok(gpus)
    }

    fn usage(&self, uuid: &str) -> Option<GpuUsage> {
        let nvml = self.nvml().ok()?;
        let d = nvml.device_by_uuid(uuid).ok()?;
        let memory_used_bytes = d
            .running_compute_processes()
            .map(|ps| {
                ps.iter()
                    .map(|p| match p.used_gpu_memory {
                        UsedGpuMemory::Used(b) => b,
                        UsedGpuMemory::Unavailable => 0,
                    })
                    .sum()
            })
            .unwrap_or(0);
        let utilization_percent = d.utilization_rates().map_or(0.0, |u| f64::from(u.gpu));
        Some(GpuUsage {
            memory_used_bytes,
            utilization_percent,
        })
    }
}
