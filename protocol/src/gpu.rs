//! GPUs: the devices an agent reports ([`GpuDevice`]), and how many whole devices a
//! task asks for ([`requested`]). A task holds whole devices only; the agent picks which.

use serde::{Deserialize, Serialize};

use crate::Resources;

/// The resource name of GPUs: a count of whole devices.
pub const GPUS: &str = "gpus";

/// One GPU of an agent, as it registers it and operators see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct GpuDevice {
    /// The driver's index of the device (`nvidia-smi`'s numbering).
    pub index: u32,
    /// The device's UUID, e.g. `GPU-5e8b…` (what a task's `CUDA_VISIBLE_DEVICES` names).
    pub uuid: String,
    /// The model name, e.g. `NVIDIA H100 80GB HBM3`.
    pub model: String,
    /// Its memory in MiB.
    pub memory_mib: u64,
}

/// Why a task's `gpus` cannot be held.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GpuRequestError {
    /// `gpus` is not a whole number of devices.
    #[error("resources.gpus must be a whole number of devices, got {0}")]
    NotWhole(String),
}

/// How many whole GPUs `resources` asks for (0 when it names none). Resource amounts are never
/// negative (`Resources` refuses them when parsed); a fraction is refused here.
pub fn requested(resources: &Resources) -> Result<u32, GpuRequestError> {
    let millis = resources.millis(GPUS);
    if !millis.is_multiple_of(1000) {
        return Err(GpuRequestError::NotWhole(format!(
            "{}",
            millis as f64 / 1000.0
        )));
    }
    u32::try_from(millis / 1000)
        .map_err(|_| GpuRequestError::NotWhole(format!("{}", millis / 1000)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_devices_are_requested() {
        let r = |s: &str| s.parse::<Resources>().expect("resources");
        assert_eq!(requested(&r("cpus=1")), Ok(0));
        assert_eq!(requested(&r("cpus=1,gpus=2")), Ok(2));
        let err = requested(&r("gpus=0.5")).expect_err("a fraction");
        assert_eq!(
            err.to_string(),
            "resources.gpus must be a whole number of devices, got 0.5"
        );
    }

    #[test]
    fn a_device_round_trips_and_refuses_unknown_fields() {
        let d = GpuDevice {
            index: 1,
            uuid: "GPU-1".into(),
            model: "Simulated GPU".into(),
            memory_mib: 16384,
        };
        let json = serde_json::to_string(&d).expect("json");
        assert_eq!(
            json,
            r#"{"index":1,"uuid":"GPU-1","model":"Simulated GPU","memory_mib":16384}"#
        );
        assert_eq!(serde_json::from_str::<GpuDevice>(&json).expect("parse"), d);
        assert!(serde_json::from_str::<GpuDevice>(r#"{"index":1}"#).is_err());
    }
}
