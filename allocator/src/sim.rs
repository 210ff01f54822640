//! The scenario runner behind `hdrf-sim`: the paper's task-by-task simulation, driven through the
//! same [`Allocator`] the coordinator uses.
//!
//! Mapping: the cluster is one agent whose total is the scenario's capacity, so each decision's
//! `W` is the cluster's free resources. A tree node is a role (its path is the names from the top,
//! joined by `/`); a leaf is a role holding exactly one framework (weight 1, so the role's weight
//! is what counts). A leaf's task demand is its framework's demand hint (so a leaf whose next task
//! does not fit in `W` is blocked), and a leaf that reached `max_tasks` is suppressed. Each
//! decision gives the chosen leaf one task of its demand; a fill stops when every leaf is blocked.

use std::collections::{BTreeMap, HashMap, VecDeque};

use protocol::{AgentId, FrameworkId, Resources, RolePath, Weight};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{Allocator, AllocatorError, Policy};

/// The most decisions one fill may take (a guard against scenarios that would run for hours).
pub const MAX_DECISIONS_PER_FILL: u64 = 10_000_000;

/// A policy name as written in a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyName {
    /// [`Policy::Hdrf`].
    Hdrf,
    /// [`Policy::Drf`].
    Drf,
    /// [`Policy::PlainSum`].
    PlainSum,
}

impl From<PolicyName> for Policy {
    fn from(p: PolicyName) -> Policy {
        match p {
            PolicyName::Hdrf => Policy::Hdrf,
            PolicyName::Drf => Policy::Drf,
            PolicyName::PlainSum => Policy::PlainSum,
        }
    }
}

/// A scenario (see the `hdrf-sim` docs for the format).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// The policy.
    pub policy: PolicyName,
    /// The cluster's capacity.
    pub capacity: Resources,
    /// The top-level nodes, in tie-break order.
    pub tree: Vec<TreeNode>,
    /// Rounds after the first fill.
    #[serde(default)]
    pub rounds: Vec<Round>,
}

/// A node of the scenario tree: a leaf (with `demand`) or an interior node (with `children`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TreeNode {
    /// Unique among leaves and among siblings; a role path segment (`[a-z0-9_-]`).
    pub name: String,
    /// Weight (default 1).
    #[serde(default)]
    pub weight: Weight,
    /// A leaf's task demand.
    #[serde(default)]
    pub demand: Option<Resources>,
    /// A leaf's task limit (default unlimited).
    #[serde(default)]
    pub max_tasks: Option<u64>,
    /// An interior node's children.
    #[serde(default)]
    pub children: Option<Vec<TreeNode>>,
}

/// A round: end the oldest `n` running tasks of each named leaf, then fill again.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Round {
    /// Leaf name to the number of its oldest tasks to end.
    #[serde(default)]
    pub finish: BTreeMap<String, u64>,
}

/// One leaf's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeafOutcome {
    /// Running tasks.
    pub tasks: u64,
    /// What they hold.
    pub allocated: Resources,
}

/// The state after one round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundOutcome {
    /// Per leaf.
    pub leaves: BTreeMap<String, LeafOutcome>,
    /// Decisions taken in this round's fill.
    pub decisions: u64,
}

/// The simulation's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// Per leaf, after the first fill.
    pub leaves: BTreeMap<String, LeafOutcome>,
    /// Decisions taken in the first fill.
    pub decisions: u64,
    /// After each round.
    pub rounds: Vec<RoundOutcome>,
}

/// Why a scenario was rejected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    /// The scenario breaks a rule of the format.
    #[error("invalid scenario: {0}")]
    Invalid(String),
    /// The allocator refused a step (a bug if it happens).
    #[error("allocator error: {0}")]
    Allocator(#[from] AllocatorError),
    /// A fill would take too many decisions.
    #[error("a fill needs more than {MAX_DECISIONS_PER_FILL} decisions; use larger demands")]
    TooLong,
}

struct SimLeaf {
    name: String,
    fw: FrameworkId,
    demand: Resources,
    max_tasks: Option<u64>,
    running: VecDeque<u64>,
}

/// Parses a scenario from JSON text.
pub fn parse(text: &str) -> Result<Scenario, SimError> {
    serde_json::from_str(text).map_err(|e| SimError::Invalid(e.to_string()))
}

/// Runs a scenario.
pub fn run(scenario: &Scenario) -> Result<Outcome, SimError> {
    let mut alloc = Allocator::new(scenario.policy.into());
    let agent = AgentId(Uuid::from_u128(1));
    alloc.add_agent(agent, &scenario.capacity)?;
    let mut leaves = Vec::new();
    let mut names = HashMap::new();
    build(&mut alloc, &scenario.tree, "", &mut leaves, &mut names)?;
    if leaves.is_empty() {
        return Err(SimError::Invalid("the tree has no leaves".into()));
    }
    let mut task_seq = 0u64;
    let decisions = fill(&mut alloc, agent, &mut leaves, &mut task_seq)?;
    let first = snapshot(&alloc, &leaves);
    let mut rounds = Vec::new();
    for round in &scenario.rounds {
        for (name, &n) in &round.finish {
            let &i = names.get(name.as_str()).ok_or_else(|| {
                SimError::Invalid(format!("round finishes unknown leaf {name:?}"))
            })?;
            let leaf = &mut leaves[i];
            for _ in 0..n.min(leaf.running.len() as u64) {
                leaf.running.pop_front();
                alloc.release(leaf.fw, agent, &leaf.demand)?;
            }
            if leaf
                .max_tasks
                .is_none_or(|m| (leaf.running.len() as u64) < m)
            {
                alloc.revive(leaf.fw)?;
            }
        }
        let decisions = fill(&mut alloc, agent, &mut leaves, &mut task_seq)?;
        rounds.push(RoundOutcome {
            leaves: snapshot(&alloc, &leaves),
            decisions,
        });
    }
    Ok(Outcome {
        leaves: first,
        decisions,
        rounds,
    })
}

fn build(
    alloc: &mut Allocator,
    nodes: &[TreeNode],
    prefix: &str,
    leaves: &mut Vec<SimLeaf>,
    names: &mut HashMap<String, usize>,
) -> Result<(), SimError> {
    let mut siblings = std::collections::HashSet::new();
    for node in nodes {
        let bad = |why: &str| SimError::Invalid(format!("node {:?}: {why}", node.name));
        if node.name.contains('/') {
            return Err(bad("names may not contain '/'"));
        }
        let path = if prefix.is_empty() {
            node.name.clone()
        } else {
            format!("{prefix}/{}", node.name)
        };
        let role = RolePath::new(path.clone()).map_err(|e| bad(&e.to_string()))?;
        if !siblings.insert(node.name.as_str()) {
            return Err(bad("duplicate name among siblings"));
        }
        alloc.set_role_weight(&role, node.weight);
        match (&node.demand, &node.children) {
            (Some(_), Some(_)) => return Err(bad("a node has either demand (leaf) or children")),
            (None, None) => return Err(bad("a leaf needs a demand")),
            (None, Some(children)) => {
                if node.max_tasks.is_some() {
                    return Err(bad("max_tasks is for leaves"));
                }
                if children.is_empty() {
                    return Err(bad("children must not be empty"));
                }
                build(alloc, children, &path, leaves, names)?;
            }
            (Some(demand), None) => {
                if demand.is_empty() {
                    return Err(bad("demand must not be empty"));
                }
                if names.insert(node.name.clone(), leaves.len()).is_some() {
                    return Err(bad("duplicate leaf name"));
                }
                let fw = FrameworkId(Uuid::from_u128(leaves.len() as u128 + 1));
                alloc.add_framework(fw, &role)?;
                alloc.set_demand(fw, Some(demand.clone()))?;
                if node.max_tasks == Some(0) {
                    alloc.suppress(fw)?;
                }
                leaves.push(SimLeaf {
                    name: node.name.clone(),
                    fw,
                    demand: demand.clone(),
                    max_tasks: node.max_tasks,
                    running: VecDeque::new(),
                });
            }
        }
    }
    Ok(())
}

/// Gives one task at a time to the chosen leaf until every leaf is blocked; returns the count.
fn fill(
    alloc: &mut Allocator,
    agent: AgentId,
    leaves: &mut [SimLeaf],
    task_seq: &mut u64,
) -> Result<u64, SimError> {
    let by_fw: HashMap<FrameworkId, usize> =
        leaves.iter().enumerate().map(|(i, l)| (l.fw, i)).collect();
    let mut decisions = 0u64;
    loop {
        let free = alloc.agent_free(agent).unwrap_or_default();
        let Some(fw) = alloc.pick(Some(agent), &free, 0) else {
            break;
        };
        let Some(&i) = by_fw.get(&fw) else { break };
        let leaf = &mut leaves[i];
        alloc.allocate(fw, agent, &leaf.demand)?;
        leaf.running.push_back(*task_seq);
        *task_seq += 1;
        if leaf
            .max_tasks
            .is_some_and(|m| leaf.running.len() as u64 >= m)
        {
            alloc.suppress(fw)?;
        }
        decisions += 1;
        if decisions > MAX_DECISIONS_PER_FILL {
            return Err(SimError::TooLong);
        }
    }
    Ok(decisions)
}

fn snapshot(alloc: &Allocator, leaves: &[SimLeaf]) -> BTreeMap<String, LeafOutcome> {
    leaves
        .iter()
        .map(|l| {
            let outcome = LeafOutcome {
                tasks: l.running.len() as u64,
                allocated: alloc.allocation(l.fw).unwrap_or_default(),
            };
            (l.name.clone(), outcome)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn tasks(policy: &str, capacity: &str, tree: &str) -> BTreeMap<String, u64> {
        let text = format!(r#"{{"policy": "{policy}", "capacity": {capacity}, "tree": {tree}}}"#);
        let out = run(&parse(&text).unwrap()).unwrap();
        out.leaves.into_iter().map(|(k, v)| (k, v.tasks)).collect()
    }

    fn want(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    const V3: &str = r#"[{"name": "sci", "demand": {"cpus": 1, "mem": 1}, "max_tasks": 10},
        {"name": "eng", "children": [{"name": "dev", "demand": {"cpus": 1}, "max_tasks": 10},
                                     {"name": "prod", "demand": {"mem": 1}, "max_tasks": 10}]}]"#;
    const V4: &str = r#"[{"name": "n1", "demand": {"cpus": 1}, "max_tasks": 30},
        {"name": "n2", "demand": {"cpus": 1}, "max_tasks": 30},
        {"name": "n3", "children": [{"name": "n31", "demand": {"cpus": 1}, "max_tasks": 30},
                                    {"name": "n32", "demand": {"gpus": 1}, "max_tasks": 30}]},
        {"name": "n4", "demand": {"gpus": 1}, "max_tasks": 30}]"#;
    const V5: &str = r#"[{"name": "n1", "demand": {"gpus": 1}},
        {"name": "n2", "children": [{"name": "n21", "demand": {"cpus": 1}},
                                    {"name": "n22", "demand": {"gpus": 1}}]}]"#;

    #[test]
    fn the_five_vectors_of_algorithms_md() {
        let v1 = r#"[{"name": "a", "demand": {"cpus": 1, "mem": 4}},
                     {"name": "b", "demand": {"cpus": 3, "mem": 1}}]"#;
        let v2 = r#"[{"name": "j1", "demand": {"cpus": 2, "mem": 8}},
                     {"name": "j2", "demand": {"cpus": 6, "mem": 2}}]"#;
        for policy in ["hdrf", "drf", "plain_sum"] {
            let cap1 = r#"{"cpus": 9, "mem": 18}"#;
            assert_eq!(
                tasks(policy, cap1, v1),
                want(&[("a", 3), ("b", 2)]),
                "{policy}"
            );
            let cap2 = r#"{"cpus": 18, "mem": 36}"#;
            assert_eq!(
                tasks(policy, cap2, v2),
                want(&[("j1", 3), ("j2", 2)]),
                "{policy}"
            );
        }
        let cap = r#"{"cpus": 10, "mem": 10}"#;
        assert_eq!(
            tasks("hdrf", cap, V3),
            want(&[("sci", 5), ("dev", 5), ("prod", 5)])
        );
        let cap = r#"{"cpus": 30, "gpus": 30}"#;
        assert_eq!(
            tasks("hdrf", cap, V4),
            want(&[("n1", 10), ("n2", 10), ("n31", 10), ("n32", 15), ("n4", 15)])
        );
        let cap = r#"{"cpus": 10, "gpus": 10}"#;
        assert_eq!(
            tasks("hdrf", cap, V5),
            want(&[("n1", 5), ("n21", 10), ("n22", 5)])
        );
    }

    #[test]
    fn flattened_and_plain_sum_outcomes_quoted_in_algorithms_md() {
        let cap = r#"{"cpus": 10, "mem": 10}"#;
        assert_eq!(
            tasks("drf", cap, V3),
            want(&[("sci", 7), ("dev", 3), ("prod", 3)])
        );
        let cap = r#"{"cpus": 10, "gpus": 10}"#;
        assert_eq!(
            tasks("plain_sum", cap, V5),
            want(&[("n1", 6), ("n21", 10), ("n22", 4)])
        );
    }

    #[test]
    fn weights_and_rounds() {
        let tree = r#"[{"name": "a", "weight": 3, "demand": {"cpus": 1}},
                       {"name": "b", "demand": {"cpus": 1}}]"#;
        assert_eq!(
            tasks("hdrf", r#"{"cpus": 8}"#, tree),
            want(&[("a", 6), ("b", 2)])
        );
        let text = format!(
            r#"{{"policy": "hdrf", "capacity": {{"cpus": 8}}, "tree": {tree},
                "rounds": [{{"finish": {{"b": 2}}}}, {{"finish": {{"a": 100}}}}]}}"#
        );
        let out = run(&parse(&text).unwrap()).unwrap();
        assert_eq!(out.decisions, 8);
        assert_eq!(
            out.rounds[0].decisions, 2,
            "b's two tasks go back to b (lowest share)"
        );
        assert_eq!(out.rounds[0].leaves["b"].tasks, 2);
        assert_eq!(out.rounds[1].leaves["a"].tasks, 6);
        assert_eq!(
            out.rounds[1].leaves["a"].allocated,
            "cpus=6".parse().unwrap()
        );
    }

    #[test]
    fn invalid_scenarios_are_rejected() {
        for (text, want) in [
            (
                r#"{"policy": "hdrf", "capacity": {}, "tree": [{"name": "A", "demand": {"cpus": 1}}]}"#,
                "invalid role",
            ),
            (
                r#"{"policy": "hdrf", "capacity": {}, "tree": [{"name": "a", "demand": {}}]}"#,
                "must not be empty",
            ),
            (
                r#"{"policy": "hdrf", "capacity": {}, "tree": [{"name": "a", "children": []}]}"#,
                "children must not be empty",
            ),
            (
                r#"{"policy": "hdrf", "capacity": {}, "tree": [{"name": "a", "demand": {"cpus": 1}, "children": [{"name": "b", "demand": {"cpus": 1}}]}]}"#,
                "either demand",
            ),
            (
                r#"{"policy": "hdrf", "capacity": {}, "tree": [{"name": "a", "max_tasks": 2, "children": [{"name": "b", "demand": {"cpus": 1}}]}]}"#,
                "max_tasks is for leaves",
            ),
        ] {
            let err = parse(text).and_then(|s| run(&s)).unwrap_err().to_string();
            assert!(err.contains(want), "{text}: {err}");
        }
    }
}
