//! The agent's GPU books: which task holds which device. One device, one task: a task asking
//! `gpus=N` gets N free devices, lowest index first, for its whole life; they are free again
//! when it ends. The assignment rides on the task's statuses (`gpu_devices`), which the journal
//! keeps, so a restarted agent rebuilds it ([`GpuBooks::hold`]) before it gives anything out.
//!
//! Also the GPU usage a task's samples add up to ([`GpuSamples`]), for its terminal status.

use std::collections::HashMap;

use super::TaskKey;

/// Why a task cannot have the GPUs it asks for (`resources.gpus`); nothing was assigned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GpuAssignError {
    /// The agent has no GPUs.
    #[error("resources.gpus: the task asks for {asked} GPU(s); this agent has none")]
    NoDevices {
        /// Devices asked for.
        asked: usize,
    },
    /// Fewer devices are free than asked for.
    #[error(
        "resources.gpus: the task asks for {asked} GPU(s); this agent has {free} of {total} free"
    )]
    TooFewFree {
        /// Devices asked for.
        asked: usize,
        /// Devices free.
        free: usize,
        /// Devices in all.
        total: usize,
    },
}

/// The devices (UUIDs, in index order) and who holds each.
#[derive(Debug, Default)]
pub struct GpuBooks {
    devices: Vec<String>,
    held: HashMap<String, TaskKey>,
}

impl GpuBooks {
    /// Books over these devices (UUIDs in index order), none held.
    pub fn new(devices: Vec<String>) -> Self {
        Self {
            devices,
            held: HashMap::new(),
        }
    }

    /// True when the agent has GPUs.
    pub fn has_devices(&self) -> bool {
        !self.devices.is_empty()
    }

    /// How many devices no task holds.
    pub fn free(&self) -> usize {
        self.devices
            .iter()
            .filter(|d| !self.held.contains_key(*d))
            .count()
    }

    /// Gives `task` `n` free devices, lowest index first, or says why it cannot (nothing
    /// changes then).
    pub fn assign(&mut self, task: &TaskKey, n: u32) -> Result<Vec<String>, GpuAssignError> {
        let n = n as usize;
        let free: Vec<String> = self
            .devices
            .iter()
            .filter(|d| !self.held.contains_key(*d))
            .take(n)
            .cloned()
            .collect();
        if free.len() < n {
            return Err(match self.devices.len() {
                0 => GpuAssignError::NoDevices { asked: n },
                total => GpuAssignError::TooFewFree {
                    asked: n,
                    free: self.free(),
                    total,
                },
            });
        }
        for d in &free {
            self.held.insert(d.clone(), task.clone());
        }
        Ok(free)
    }

    /// Marks `devices` held by `task` (a task replayed from the journal). A device held by
    /// another task stays with it (and is logged: the journal disagrees with itself).
    pub fn hold(&mut self, task: &TaskKey, devices: &[String]) {
        for d in devices {
            match self.held.get(d) {
                Some(other) if other != task => {
                    tracing::warn!(device = %d, task = %task.1, holder = %other.1, "a replayed task names a GPU another task holds");
                }
                _ => {
                    self.held.insert(d.clone(), task.clone());
                }
            }
        }
    }

    /// Frees every device `task` holds.
    pub fn release(&mut self, task: &TaskKey) {
        self.held.retain(|_, holder| holder != task);
    }

    /// The devices `task` holds, in index order.
    pub fn held_by(&self, task: &TaskKey) -> Vec<String> {
        self.devices
            .iter()
            .filter(|d| self.held.get(*d) == Some(task))
            .cloned()
            .collect()
    }
}

/// A task's GPU samples so far: the peak of its devices' memory used (summed over its devices
/// at one sample), and the mean utilisation.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GpuSamples {
    /// The most memory its devices held at one sample, in bytes.
    pub peak_memory_bytes: u64,
    /// The sum of the samples' utilisation (percent, averaged over its devices).
    pub utilization_sum: f64,
    /// How many samples.
    pub samples: u32,
}

impl GpuSamples {
    /// Adds one sample: memory used on the task's devices together, and their mean utilisation.
    pub fn add(&mut self, memory_bytes: u64, utilization_percent: f64) {
        self.peak_memory_bytes = self.peak_memory_bytes.max(memory_bytes);
        self.utilization_sum += utilization_percent;
        self.samples += 1;
    }

    /// `usage` (the cgroup's, if any) with the GPU figures added; unchanged without samples.
    pub fn into_usage(self, usage: Option<protocol::TaskUsage>) -> Option<protocol::TaskUsage> {
        if self.samples == 0 {
            return usage;
        }
        let mut u = usage.unwrap_or_default();
        u.gpu_memory_bytes = Some(self.peak_memory_bytes);
        u.gpu_utilization_percent = Some(self.utilization_sum / f64::from(self.samples));
        Some(u)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use protocol::{FrameworkId, TaskId};

    fn key(id: &str) -> TaskKey {
        (FrameworkId(uuid::Uuid::nil()), TaskId::new(id).unwrap())
    }

    fn books() -> GpuBooks {
        GpuBooks::new(vec!["GPU-0".into(), "GPU-1".into(), "GPU-2".into()])
    }

    #[test]
    fn devices_go_lowest_index_first_and_come_back() {
        let mut b = books();
        assert_eq!(b.assign(&key("a"), 1).unwrap(), ["GPU-0"]);
        assert_eq!(b.assign(&key("b"), 2).unwrap(), ["GPU-1", "GPU-2"]);
        let err = b.assign(&key("c"), 1).unwrap_err();
        assert_eq!(
            err.to_string(),
            "resources.gpus: the task asks for 1 GPU(s); this agent has 0 of 3 free"
        );
        b.release(&key("a"));
        assert_eq!(b.assign(&key("c"), 1).unwrap(), ["GPU-0"]);
        assert_eq!(b.held_by(&key("b")), ["GPU-1", "GPU-2"]);
        assert_eq!(b.free(), 0);
    }

    #[test]
    fn a_refused_assignment_holds_nothing() {
        let mut b = books();
        b.assign(&key("a"), 2).unwrap();
        assert!(b.assign(&key("b"), 2).is_err());
        assert_eq!(b.free(), 1);
        assert!(GpuBooks::default()
            .assign(&key("x"), 1)
            .unwrap_err()
            .to_string()
            .contains("has none"));
    }

    #[test]
    fn replayed_holdings_are_kept_and_not_given_to_others() {
        let mut b = books();
        b.hold(&key("a"), &["GPU-1".into()]);
        b.hold(&key("b"), &["GPU-1".into(), "GPU-2".into()]);
        assert_eq!(b.held_by(&key("a")), ["GPU-1"]);
        assert_eq!(b.held_by(&key("b")), ["GPU-2"]);
        assert_eq!(b.assign(&key("c"), 1).unwrap(), ["GPU-0"]);
    }

    #[test]
    fn samples_add_up_to_a_peak_and_a_mean() {
        let mut s = GpuSamples::default();
        assert_eq!(s.into_usage(None), None);
        s.add(100, 10.0);
        s.add(300, 30.0);
        s.add(200, 50.0);
        let u = s.into_usage(None).unwrap();
        assert_eq!(u.gpu_memory_bytes, Some(300));
        assert_eq!(u.gpu_utilization_percent, Some(30.0));
        assert_eq!(u.cpu_seconds, None);
    }
}
