//! Part 1, hierarchical fairness: one scenario tree under one allocator policy, filled task by
//! task through the production [`Allocator`] (H-DRF on its fast path; flattened weighted DRF and
//! plain-sum hierarchical DRF on the allocator's reference procedures, which live outside the
//! fast path), statically or with churn, and the guarantee and starvation metrics over time.
//!
//! Model: the cluster is one agent of the tree's capacity; each leaf is a role holding one
//! framework whose demand hint is its task shape (unlimited tasks). A fill gives the picked leaf
//! one task until no leaf's task fits. With churn, each step ends every running task
//! independently with probability `p_end` (a geometric task duration), then fills again.
//!
//! Hierarchical share guarantee (`docs/src/internals/algorithms.md`): a demanding node gets at
//! least `w_n / sum of its siblings' weights` of its parent's dominant share (the root's share is
//! the cluster's used dominant share), within one task's rounding: a shortfall counts as a
//! violation only when it exceeds the largest single-task dominant share in the node's subtree.
//! Every leaf has unlimited demand, so every node is demanding throughout. Starvation: a leaf
//! holding less than half its guarantee (or nothing at all) at a step; the longest such stretch is
//! reported.

use allocator::{Allocator, Policy};
use protocol::{AgentId, FrameworkId, Resources, RolePath, Weight};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use uuid::Uuid;

use crate::trees::{Node, Tree};

/// The three policies compared.
pub const POLICIES: [(&str, Policy); 3] = [
    ("H-DRF", Policy::Hdrf),
    ("flattened DRF", Policy::Drf),
    ("plain-sum DRF", Policy::PlainSum),
];

/// How a scenario is driven.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// One fill from an empty cluster.
    Static,
    /// `steps` rounds of random task ends (each with probability `p_end`) and refills.
    Churn {
        /// Rounds after the first fill.
        steps: usize,
        /// Each running task's chance to end in a round.
        p_end: f64,
        /// The random seed.
        seed: u64,
    },
}

/// A node of the flattened tree, for the metrics.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    /// Role path (`eng/dev`).
    pub path: String,
    /// Parent index (`None` for a top-level node, whose parent is the root).
    pub parent: Option<usize>,
    /// Weight among siblings.
    pub weight: f64,
    /// Sum of the weights of it and its siblings.
    pub sibling_weights: f64,
    /// Leaf indices in its subtree.
    pub leaves: Vec<usize>,
    /// The largest one-task dominant share in its subtree (the rounding tolerance).
    pub tolerance: f64,
    /// Whether it is a leaf (a framework).
    pub is_leaf: bool,
}

/// Per-node violation statistics over a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Violation {
    /// Steps in violation.
    pub steps: usize,
    /// The largest shortfall below the guarantee (dominant share).
    pub max_depth: f64,
    /// The longest run of consecutive steps in violation.
    pub longest: usize,
}

/// One run's result.
#[derive(Debug, Clone)]
pub struct FairnessRun {
    /// Policy name.
    pub policy: &'static str,
    /// Leaf names in tree order.
    pub leaves: Vec<String>,
    /// Per step (0 = first fill), per leaf: dominant share of the cluster.
    pub shares: Vec<Vec<f64>>,
    /// Per step, per leaf: running tasks.
    pub tasks: Vec<Vec<u64>>,
    /// The tree's nodes.
    pub nodes: Vec<NodeInfo>,
    /// Per node, its violations.
    pub violations: Vec<Violation>,
    /// Per node (0 for interior nodes), the longest run of steps a leaf starved.
    pub starved: Vec<usize>,
}

impl FairnessRun {
    /// Steps with any node in violation.
    pub fn violation_steps(&self) -> usize {
        self.violations.iter().map(|v| v.steps).max().unwrap_or(0)
    }
    /// The deepest shortfall of any node.
    pub fn max_depth(&self) -> f64 {
        self.violations
            .iter()
            .map(|v| v.max_depth)
            .fold(0.0, f64::max)
    }
    /// The longest violation of any node, in steps.
    pub fn longest_violation(&self) -> usize {
        self.violations.iter().map(|v| v.longest).max().unwrap_or(0)
    }
    /// The longest starvation of any leaf, in steps.
    pub fn longest_starvation(&self) -> usize {
        self.starved.iter().copied().max().unwrap_or(0)
    }
}

struct Leaf {
    fw: FrameworkId,
    demand: Resources,
    running: u64,
}

fn build(
    alloc: &mut Allocator,
    nodes: &[Node],
    prefix: &str,
    parent: Option<usize>,
    capacity: &Resources,
    infos: &mut Vec<NodeInfo>,
    leaves: &mut Vec<(String, Leaf)>,
) -> anyhow::Result<Vec<usize>> {
    let sum: f64 = nodes.iter().map(|n| n.weight).sum();
    let mut under = Vec::new();
    for node in nodes {
        let path = if prefix.is_empty() {
            node.name.to_owned()
        } else {
            format!("{prefix}/{}", node.name)
        };
        let role = RolePath::new(path.clone())?;
        alloc.set_role_weight(&role, Weight::new(node.weight)?);
        let idx = infos.len();
        infos.push(NodeInfo {
            path: path.clone(),
            parent,
            weight: node.weight,
            sibling_weights: sum,
            leaves: Vec::new(),
            tolerance: 0.0,
            is_leaf: node.demand.is_some(),
        });
        let mine = match &node.demand {
            Some(demand) => {
                let fw = FrameworkId(Uuid::from_u128(leaves.len() as u128 + 1));
                alloc.add_framework(fw, &role)?;
                alloc.set_demand(fw, Some(demand.clone()))?;
                leaves.push((
                    node.name.to_owned(),
                    Leaf {
                        fw,
                        demand: demand.clone(),
                        running: 0,
                    },
                ));
                vec![leaves.len() - 1]
            }
            None => build(
                alloc,
                &node.children,
                &path,
                Some(idx),
                capacity,
                infos,
                leaves,
            )?,
        };
        let tolerance = mine
            .iter()
            .map(|&l| leaves[l].1.demand.dominant_share(capacity))
            .fold(0.0, f64::max);
        infos[idx].leaves.clone_from(&mine);
        infos[idx].tolerance = tolerance;
        under.extend(mine);
    }
    Ok(under)
}

/// Gives one task at a time to the picked leaf until none fits.
fn fill(
    alloc: &mut Allocator,
    agent: AgentId,
    leaves: &mut [(String, Leaf)],
) -> anyhow::Result<()> {
    let mut guard = 0u64;
    loop {
        let free = alloc.agent_free(agent).unwrap_or_default();
        let Some(fw) = alloc.pick(Some(agent), &free, 0) else {
            return Ok(());
        };
        let Some(leaf) = leaves.iter_mut().find(|(_, l)| l.fw == fw) else {
            anyhow::bail!("the allocator picked an unknown framework");
        };
        alloc.allocate(fw, agent, &leaf.1.demand)?;
        leaf.1.running += 1;
        guard += 1;
        if guard > 10_000_000 {
            anyhow::bail!("a fill took more than 10 million decisions");
        }
    }
}

/// Runs `tree` under `policy` in `mode`.
pub fn run(
    tree: &Tree,
    name: &'static str,
    policy: Policy,
    mode: Mode,
) -> anyhow::Result<FairnessRun> {
    let mut alloc = Allocator::new(policy);
    let agent = AgentId(Uuid::from_u128(1));
    alloc.add_agent(agent, &tree.capacity)?;
    let mut nodes = Vec::new();
    let mut leaves = Vec::new();
    build(
        &mut alloc,
        &tree.top,
        "",
        None,
        &tree.capacity,
        &mut nodes,
        &mut leaves,
    )?;
    let mut out = FairnessRun {
        policy: name,
        leaves: leaves.iter().map(|(n, _)| n.clone()).collect(),
        shares: Vec::new(),
        tasks: Vec::new(),
        violations: vec![Violation::default(); nodes.len()],
        starved: vec![0; nodes.len()],
        nodes,
    };
    let mut current = vec![0usize; out.nodes.len()];
    let mut starving = vec![0usize; out.nodes.len()];
    let (steps, p_end, seed) = match mode {
        Mode::Static => (0, 0.0, 0),
        Mode::Churn { steps, p_end, seed } => (steps, p_end, seed),
    };
    let mut rng = StdRng::seed_from_u64(seed);
    for step in 0..=steps {
        if step > 0 {
            for (_, leaf) in leaves.iter_mut() {
                let ended = (0..leaf.running).filter(|_| rng.gen_bool(p_end)).count() as u64;
                for _ in 0..ended {
                    alloc.release(leaf.fw, agent, &leaf.demand)?;
                }
                leaf.running -= ended;
            }
        }
        fill(&mut alloc, agent, &mut leaves)?;
        let held: Vec<Resources> = leaves
            .iter()
            .map(|(_, l)| alloc.allocation(l.fw).unwrap_or_default())
            .collect();
        out.shares.push(
            held.iter()
                .map(|h| h.dominant_share(&tree.capacity))
                .collect(),
        );
        out.tasks
            .push(leaves.iter().map(|(_, l)| l.running).collect());
        record(&mut out, &held, &tree.capacity, &mut current, &mut starving);
    }
    Ok(out)
}

/// Node shares for one step, and the violation bookkeeping.
fn record(
    out: &mut FairnessRun,
    held: &[Resources],
    capacity: &Resources,
    current: &mut [usize],
    starving: &mut [usize],
) {
    let share_of = |leaves: &[usize]| {
        let mut sum = Resources::new();
        for &l in leaves {
            sum.add_assign(&held[l]);
        }
        sum.dominant_share(capacity)
    };
    let all: Vec<usize> = (0..held.len()).collect();
    let root = share_of(&all);
    let shares: Vec<f64> = out.nodes.iter().map(|n| share_of(&n.leaves)).collect();
    for (i, node) in out.nodes.iter().enumerate() {
        let parent = node.parent.map_or(root, |p| shares[p]);
        let guarantee = parent * node.weight / node.sibling_weights;
        let short = guarantee - shares[i];
        let v = &mut out.violations[i];
        if short > node.tolerance + 1e-9 {
            v.steps += 1;
            v.max_depth = v.max_depth.max(short);
            current[i] += 1;
            v.longest = v.longest.max(current[i]);
        } else {
            current[i] = 0;
        }
        if node.is_leaf {
            let starves = shares[i] < guarantee / 2.0 - 1e-9 || shares[i] == 0.0;
            starving[i] = if starves { starving[i] + 1 } else { 0 };
            out.starved[i] = out.starved[i].max(starving[i]);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::trees::paper_trees;

    #[test]
    fn static_outcomes_match_the_vectors() {
        let trees = paper_trees(1);
        let h = run(&trees[0], "H-DRF", Policy::Hdrf, Mode::Static).unwrap();
        assert_eq!(h.tasks[0], [5, 5, 5]);
        assert_eq!(h.violation_steps(), 0);
        let d = run(&trees[0], "DRF", Policy::Drf, Mode::Static).unwrap();
        assert_eq!(d.tasks[0], [7, 3, 3]);
        assert_eq!(d.violation_steps(), 1, "eng gets 0.3 of a guaranteed 0.5");
        assert!((d.max_depth() - 0.2).abs() < 1e-9);
        let p = run(&trees[2], "plain", Policy::PlainSum, Mode::Static).unwrap();
        assert_eq!(p.tasks[0], [6, 10, 4]);
    }

    #[test]
    fn churn_starves_under_plain_sums_only() {
        let tree = &paper_trees(2)[2];
        let mode = Mode::Churn {
            steps: 60,
            p_end: 0.2,
            seed: 7,
        };
        let h = run(tree, "H-DRF", Policy::Hdrf, mode).unwrap();
        assert_eq!((h.violation_steps(), h.longest_starvation()), (0, 0));
        let p = run(tree, "plain", Policy::PlainSum, mode).unwrap();
        assert!(p.violation_steps() > 0 && p.longest_starvation() > 0);
    }
}
