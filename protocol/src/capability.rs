//! Framework capabilities and the whole-device rule for `gpus`.
//!
//! A framework declares what it can handle in `RegisterFramework.capabilities` (strings, as Mesos'
//! `FrameworkInfo.capabilities`). Only [`GPU_RESOURCES`] means anything today: with GPU gating on,
//! offers from agents whose total has `gpus > 0` go only to frameworks that declared it. Unknown
//! capability strings are accepted and ignored, as Mesos does, so a newer framework can talk to an
//! older coordinator.
//!
//! `gpus` counts whole devices: [`check_whole_gpus`] is the one rule the coordinator (at accept),
//! the SDK (before sending) and the agent share.

use crate::resources::{Resources, MILLIS_PER_UNIT};

/// The capability string a framework declares to be offered agents with GPUs.
pub const GPU_RESOURCES: &str = "gpu_resources";

/// The resource name of whole GPU devices.
pub const GPUS: &str = "gpus";

/// The most capability strings one registration may carry.
pub const MAX_CAPABILITIES: usize = 16;

/// The longest capability string accepted.
pub const MAX_CAPABILITY_LEN: usize = 64;

/// Whether `capabilities` declares [`GPU_RESOURCES`] (case-insensitively, so Mesos'
/// `GPU_RESOURCES` spelling maps to the same).
pub fn declares_gpu_resources(capabilities: &[String]) -> bool {
    capabilities
        .iter()
        .any(|c| c.eq_ignore_ascii_case(GPU_RESOURCES))
}

/// Why a capability list is refused; the message names the field (`capabilities`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CapabilitiesError {
    /// More than [`MAX_CAPABILITIES`] entries.
    #[error("capabilities: at most {MAX_CAPABILITIES} entries, got {count}")]
    TooMany {
        /// How many were given.
        count: usize,
    },
    /// An entry empty or longer than [`MAX_CAPABILITY_LEN`].
    #[error("capabilities: each entry must be 1 to {MAX_CAPABILITY_LEN} characters, got {len} characters")]
    EntryLength {
        /// The entry's length.
        len: usize,
    },
}

/// A fractional `gpus` amount; the message names the field (`FIELD.gpus`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}.{GPUS} must be a whole number of devices, got {amount}")]
pub struct WholeGpusError {
    /// The resources' field, e.g. `resources`.
    pub field: String,
    /// The amount given, in devices.
    pub amount: f64,
}

/// Checks the shape of a capability list (how many, how long); the message names the field.
/// Unknown strings pass: they are ignored.
pub fn check_capabilities(capabilities: &[String]) -> Result<(), CapabilitiesError> {
    if capabilities.len() > MAX_CAPABILITIES {
        return Err(CapabilitiesError::TooMany {
            count: capabilities.len(),
        });
    }
    if let Some(c) = capabilities
        .iter()
        .find(|c| c.is_empty() || c.len() > MAX_CAPABILITY_LEN)
    {
        return Err(CapabilitiesError::EntryLength { len: c.len() });
    }
    Ok(())
}

/// The whole-device rule: `gpus` in `resources`, if present, must be a whole number (negative
/// amounts cannot be represented in a [`Resources`] at all: they are refused when parsed). The
/// error names the field as `field.gpus` (e.g. `resources.gpus`).
pub fn check_whole_gpus(field: &str, resources: &Resources) -> Result<(), WholeGpusError> {
    let millis = resources.millis(GPUS);
    if !millis.is_multiple_of(MILLIS_PER_UNIT) {
        return Err(WholeGpusError {
            field: field.to_string(),
            amount: millis as f64 / MILLIS_PER_UNIT as f64,
        });
    }
    Ok(())
}

/// Whether `resources` has any `gpus`.
pub fn has_gpus(resources: &Resources) -> bool {
    resources.millis(GPUS) > 0
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn r(s: &str) -> Resources {
        s.parse().unwrap()
    }

    #[test]
    fn whole_gpus_pass_and_fractions_name_the_field() {
        assert!(check_whole_gpus("resources", &r("cpus=0.5,mem=10")).is_ok());
        assert!(check_whole_gpus("resources", &r("cpus=1,gpus=2")).is_ok());
        assert!(check_whole_gpus("resources", &r("gpus=0")).is_ok());
        let err = check_whole_gpus("resources", &r("cpus=1,gpus=0.5"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("resources.gpus"), "{err}");
        assert!(err.contains("0.5"), "{err}");
        assert!(check_whole_gpus("resources", &r("gpus=1.001")).is_err());
    }

    #[test]
    fn negative_gpus_never_parse() {
        assert!("gpus=-1".parse::<Resources>().is_err());
    }

    #[test]
    fn the_capability_is_matched_in_either_spelling_and_unknown_ones_pass() {
        let caps = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(declares_gpu_resources(&caps(&["gpu_resources"])));
        assert!(declares_gpu_resources(&caps(&["x", "GPU_RESOURCES"])));
        assert!(!declares_gpu_resources(&caps(&["partition_aware"])));
        assert!(check_capabilities(&caps(&["partition_aware", "gpu_resources"])).is_ok());
        let many = vec!["a".to_string(); MAX_CAPABILITIES + 1];
        assert!(check_capabilities(&many)
            .unwrap_err()
            .to_string()
            .contains("capabilities"));
        assert!(check_capabilities(&caps(&[""])).is_err());
    }
}
