//! `gpus` is one more dimension to every policy: a task asking for GPUs goes only where GPUs
//! are free, and GPUs weigh in best fit's leftover and Tetris' alignment like any resource.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use super::tests_support::{input, slot, task};
use super::{Assignment, BestFit, FirstFit, Placement, Tetris};

/// First fit skips an offer without GPUs, and places no more GPU tasks than there are GPUs.
#[test]
fn first_fit_places_gpu_tasks_only_where_gpus_are_free() {
    let offers = [
        slot("cpus=8,mem=8", "cpus=8,mem=8"),
        slot("cpus=8,mem=8,gpus=1", "cpus=8,mem=8,gpus=1"),
    ];
    let tasks = [task(1, "cpus=1,gpus=1"), task(1, "cpus=1,gpus=1")];
    let got = FirstFit.place(&input(&offers, &tasks, &BTreeMap::new()));
    assert_eq!(got, vec![Assignment { task: 0, offer: 1 }]);
}

/// Best fit counts the GPUs left over: the offer where the task uses the last GPU is tighter
/// (were `gpus` ignored, the two offers would tie and the earlier one win).
#[test]
fn best_fit_counts_leftover_gpus() {
    let offers = [
        slot("cpus=8,gpus=4", "cpus=8,gpus=4"),
        slot("cpus=8,gpus=1", "cpus=8,gpus=4"),
    ];
    let tasks = [task(1, "cpus=1,gpus=1")];
    let got = BestFit.place(&input(&offers, &tasks, &BTreeMap::new()));
    assert_eq!(got, vec![Assignment { task: 0, offer: 1 }]);
}

/// Tetris aligns on GPUs too: on an offer whose GPUs are its scarce, fully free dimension, the
/// GPU task aligns best and goes first (on CPUs alone the CPU task would).
#[test]
fn tetris_aligns_on_gpus() {
    let offers = [slot("cpus=4,gpus=2", "cpus=16,gpus=2")];
    let tasks = [task(1, "cpus=4"), task(1, "cpus=1,gpus=1")];
    let got = Tetris::new(0.0)
        .unwrap()
        .place(&input(&offers, &tasks, &BTreeMap::new()));
    assert_eq!(got[0], Assignment { task: 1, offer: 0 });
    // <4 cpus, 1 gpu> after it: the CPU task no longer fits; nothing is over-committed.
    assert_eq!(got.len(), 1, "{got:?}");
}
