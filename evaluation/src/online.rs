//! Part 3, online equals offline: a fairness scenario of part 1 run through the real coordinator
//! (the `coordinator` library on `127.0.0.1:0`, in process) with one simulated agent of the
//! tree's capacity (`agent::simulated`) and one SDK framework per leaf (its role is the leaf's
//! path). Each framework launches one task of its shape per offer and declares that shape as
//! its demand hint, so each allocator decision gives one task, as the offline fill does. Once
//! the live cluster has as many running tasks as the offline fill, each leaf's dominant share
//! is compared with the pure allocator's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use framework_sdk::driver::{Driver, DriverConfig};
use framework_sdk::{Context, Decisions, Scheduler};
use parley_bench::{Cluster, ClusterSpec, Launch};
use protocol::{
    CommandSpec, FrameworkId, Offer, Resources, RolePath, TaskId, TaskSpec, TaskState, TaskStatus,
};

use crate::fairness::{self, Mode};
use crate::trees::{leaves, Node, Tree};

/// The comparison for one tree.
#[derive(Debug, Clone)]
pub struct OnlineRun {
    /// Leaf names.
    pub leaves: Vec<String>,
    /// Per leaf, tasks in the pure allocator's fill.
    pub offline: Vec<u64>,
    /// Per leaf, tasks running in the live cluster.
    pub online: Vec<u64>,
    /// The largest difference of a leaf's dominant share, offline vs online.
    pub max_deviation: f64,
    /// Seconds the live fill took.
    pub seconds: f64,
}

struct OneAtATime {
    demand: Resources,
    prefix: String,
    next: u64,
    running: Arc<AtomicU64>,
}

#[async_trait::async_trait]
impl Scheduler for OneAtATime {
    async fn registered(&mut self, _ctx: &mut Context, _id: FrameworkId, _re: bool) {}

    async fn offers(&mut self, _ctx: &mut Context, offers: Vec<Offer>) -> Decisions {
        let mut launched = false;
        Decisions::launch_or_decline(&offers, |offer| {
            if launched || !self.demand.fits_in(&offer.resources) {
                return Vec::new();
            }
            let Ok(task_id) = TaskId::new(format!("{}-{}", self.prefix, self.next)) else {
                return Vec::new();
            };
            launched = true;
            self.next += 1;
            vec![TaskSpec {
                task_id,
                name: "eval".into(),
                agent_id: offer.agent_id,
                resources: self.demand.clone(),
                command: CommandSpec::Shell("simulated".into()),
                env: Default::default(),
                duration_s: None,
                isolation: None,
                health_check: None,
                priority: None,
            }]
        })
    }

    async fn status_update(&mut self, _ctx: &mut Context, status: &TaskStatus) {
        if status.state == TaskState::Running {
            self.running.fetch_add(1, Ordering::Relaxed);
        } else if status.state.is_terminal() {
            self.running.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn requeue(&mut self, _task: TaskSpec) {}

    fn pending_tasks(&self) -> usize {
        usize::MAX / 2
    }

    fn demand_hint(&self) -> Option<Resources> {
        Some(self.demand.clone())
    }
}

fn paths(nodes: &[Node], prefix: &str, out: &mut HashMap<&'static str, String>) {
    for n in nodes {
        let path = if prefix.is_empty() {
            n.name.to_owned()
        } else {
            format!("{prefix}/{}", n.name)
        };
        if n.demand.is_some() {
            out.insert(n.name, path);
        } else {
            paths(&n.children, &path, out);
        }
    }
}

/// Runs `tree`'s static H-DRF fill through a live coordinator and compares it with the pure
/// allocator's; fails when the live cluster does not reach the offline task count in `timeout`.
pub async fn compare(tree: &Tree, timeout: Duration) -> anyhow::Result<OnlineRun> {
    let offline = fairness::run(tree, "H-DRF", allocator::Policy::Hdrf, Mode::Static)?;
    let want: u64 = offline.tasks[0].iter().sum();
    let started = Instant::now();
    let cluster = Cluster::start(&ClusterSpec {
        launch: Launch::InProcess,
        agents: 1,
        agent_resources: tree.capacity.clone(),
        startup_timeout: Duration::from_secs(30),
    })
    .await?;
    let mut role_of = HashMap::new();
    paths(&tree.top, "", &mut role_of);
    let mut counters = Vec::new();
    let mut stops = Vec::new();
    let mut handles = Vec::new();
    // Frameworks register in tree order, so the coordinator's tie-break order is the offline one.
    for (i, leaf) in leaves(tree).into_iter().enumerate() {
        let role: RolePath = role_of
            .get(leaf.name)
            .cloned()
            .unwrap_or_default()
            .parse()
            .map_err(|e| anyhow::anyhow!("role of {}: {e}", leaf.name))?;
        let mut config =
            DriverConfig::new(cluster.url.clone(), format!("eval-{}", leaf.name), role);
        // The paper trees count GPUs; every leaf takes part in them as in the pure allocator,
        // so every framework declares the capability the coordinator's GPU gating asks for.
        config = config.gpu_resources(true);
        config.accept_refuse = Duration::ZERO;
        config.decline_refuse = Duration::from_millis(100);
        let running = Arc::new(AtomicU64::new(0));
        let scheduler = OneAtATime {
            demand: leaf.demand.clone().unwrap_or_default(),
            prefix: format!("{}{i}", leaf.name),
            next: 0,
            running: running.clone(),
        };
        let driver = Driver::new(config, scheduler)?;
        stops.push(driver.stop_token());
        counters.push(running);
        handles.push(tokio::spawn(driver.run()));
        // Register one at a time so the creation order is the tree order.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let list: serde_json::Value = cluster.get("/api/v1/frameworks").await?;
            let n = list
                .get("frameworks")
                .and_then(|f| f.as_array())
                .map_or(0, Vec::len);
            if n > i {
                break;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "framework {} did not register",
                leaf.name
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let deadline = Instant::now() + timeout;
    let online: Vec<u64> = loop {
        let now: Vec<u64> = counters.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        if now.iter().sum::<u64>() >= want || Instant::now() >= deadline {
            break now;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let seconds = started.elapsed().as_secs_f64();
    for s in &stops {
        s.cancel();
    }
    for h in handles {
        let _ = h.await;
    }
    cluster.shutdown().await?;
    let got: u64 = online.iter().sum();
    anyhow::ensure!(
        got >= want,
        "the live cluster reached {got} of {want} tasks in {timeout:?}"
    );
    let demands: Vec<Resources> = leaves(tree)
        .iter()
        .map(|l| l.demand.clone().unwrap_or_default())
        .collect();
    let share = |tasks: u64, d: &Resources| {
        let mut sum = Resources::new();
        for _ in 0..tasks {
            sum.add_assign(d);
        }
        sum.dominant_share(&tree.capacity)
    };
    let max_deviation = offline.tasks[0]
        .iter()
        .zip(&online)
        .zip(&demands)
        .map(|((&a, &b), d)| (share(a, d) - share(b, d)).abs())
        .fold(0.0, f64::max);
    Ok(OnlineRun {
        leaves: offline.leaves.clone(),
        offline: offline.tasks[0].clone(),
        online,
        max_deviation,
        seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trees::paper_trees;

    #[test]
    fn leaves_get_their_role_paths() {
        let mut out = HashMap::new();
        paths(&paper_trees(1)[0].top, "", &mut out);
        assert_eq!(out.len(), 3);
        assert_eq!(out["sci"], "sci");
        assert_eq!(out["dev"], "eng/dev");
        assert_eq!(out["prod"], "eng/prod");
    }
}
