//! The fairness scenarios: paper-style role trees (test vectors 3, 4 and 5 of
//! `docs/src/internals/algorithms.md`, from the H-DRF paper and its slides), each leaf with one
//! task shape and unlimited demand.

use protocol::Resources;

/// A node of a scenario tree.
#[derive(Debug, Clone)]
pub struct Node {
    /// Role path segment (`[a-z0-9_]`), unique in the tree.
    pub name: &'static str,
    /// Weight among its siblings.
    pub weight: f64,
    /// A leaf's task demand (`None` for an interior node).
    pub demand: Option<Resources>,
    /// An interior node's children.
    pub children: Vec<Node>,
}

/// A named scenario: a tree on a cluster of the given capacity.
#[derive(Debug, Clone)]
pub struct Tree {
    /// Short name used in tables and plot file names.
    pub name: &'static str,
    /// What it shows.
    pub about: &'static str,
    /// The cluster's capacity.
    pub capacity: Resources,
    /// The top-level nodes, in tie-break order.
    pub top: Vec<Node>,
}

fn res(text: &str) -> Resources {
    // The literals below are fixed and valid; an empty vector would only make a leaf idle.
    text.parse().unwrap_or_default()
}

fn leaf(name: &'static str, demand: &str) -> Node {
    Node {
        name,
        weight: 1.0,
        demand: Some(res(demand)),
        children: Vec::new(),
    }
}

fn inner(name: &'static str, children: Vec<Node>) -> Node {
    Node {
        name,
        weight: 1.0,
        demand: None,
        children,
    }
}

/// The scenarios, scaled by `scale` (capacity multiplied, so more tasks fit).
pub fn paper_trees(scale: u32) -> Vec<Tree> {
    let s = f64::from(scale.max(1));
    vec![
        Tree {
            name: "sci_eng",
            about: "vector 3: root -> sci <1,1>; eng -> {dev <1,0>, prod <0,1>} (flattening breaks eng's half)",
            capacity: res(&format!("cpus={},mem={}", 10.0 * s, 10.0 * s)),
            top: vec![
                leaf("sci", "cpus=1,mem=1"),
                inner(
                    "eng",
                    vec![leaf("dev", "cpus=1"), leaf("prod", "mem=1")],
                ),
            ],
        },
        Tree {
            name: "blocked",
            about: "vector 4: n1, n2 <1,0>; n3 -> {n31 <1,0>, n32 <0,1>}; n4 <0,1> (blocked siblings)",
            capacity: res(&format!("cpus={},gpus={}", 30.0 * s, 30.0 * s)),
            top: vec![
                leaf("n1", "cpus=1"),
                leaf("n2", "cpus=1"),
                inner("n3", vec![leaf("n31", "cpus=1"), leaf("n32", "gpus=1")]),
                leaf("n4", "gpus=1"),
            ],
        },
        Tree {
            name: "starve",
            about: "vector 5: n1 <0,1>; n2 -> {n21 <1,0>, n22 <0,1>} (plain sums starve n22)",
            capacity: res(&format!("cpus={},gpus={}", 10.0 * s, 10.0 * s)),
            top: vec![
                leaf("n1", "gpus=1"),
                inner("n2", vec![leaf("n21", "cpus=1"), leaf("n22", "gpus=1")]),
            ],
        },
    ]
}

/// Leaves in tree order.
pub fn leaves(tree: &Tree) -> Vec<&Node> {
    fn walk<'a>(nodes: &'a [Node], out: &mut Vec<&'a Node>) {
        for n in nodes {
            if n.demand.is_some() {
                out.push(n);
            } else {
                walk(&n.children, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(&tree.top, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trees_have_the_papers_leaves() {
        let t = paper_trees(1);
        let names: Vec<Vec<&str>> = t
            .iter()
            .map(|t| leaves(t).iter().map(|n| n.name).collect())
            .collect();
        assert_eq!(names[0], ["sci", "dev", "prod"]);
        assert_eq!(names[2], ["n1", "n21", "n22"]);
        assert_eq!(t[0].capacity.units("cpus"), 10.0);
        assert_eq!(paper_trees(3)[2].capacity.units("gpus"), 30.0);
    }
}
