//! What the restart tests share: an array command that logs each index's start and end, and
//! the checks that every index ran exactly once under one framework.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use protocol::FrameworkId;
use tests::Cluster;

/// A spec of `count` tasks, at most `max_running` at once, each appending `start` and `end`
/// to the file named by its index in `dir`.
pub fn logging_array(name: &str, count: u32, max_running: u32, dir: &Path) -> String {
    let dir = dir.display();
    format!(
        "name = \"{name}\"\ncount = {count}\nmax_running = {max_running}\n\
         command = \"echo start >> '{dir}'/$PARLEY_TASK_INDEX; sleep 0.4; echo end >> '{dir}'/$PARLEY_TASK_INDEX\"\n\
         [resources]\ncpus = 0.1\nmem = 16\n"
    )
}

/// Every index in `0..count` logged one start and one end: it ran once, never twice.
pub fn assert_each_ran_once(dir: &Path, count: u32) {
    for index in 0..count {
        let log = std::fs::read_to_string(dir.join(index.to_string())).unwrap();
        assert_eq!(log, "start\nend\n", "index {index} ran exactly once");
    }
}

/// The coordinator knows one framework, `id`: the restarted service took it over.
pub async fn assert_one_framework(cluster: &Cluster, id: FrameworkId) {
    let frameworks = cluster.frameworks().await.unwrap().frameworks;
    assert_eq!(
        frameworks.len(),
        1,
        "the restarted service took its framework over"
    );
    assert_eq!(frameworks[0].framework_id, id);
}
