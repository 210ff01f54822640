//! The role tree: roles and framework leaves in one slot vector, children in creation order.

use std::collections::HashMap;

use super::idhash::IdMap;

use protocol::{FrameworkId, RolePath};

use super::kinds::Dense;

/// Marks "no parent" (the root).
pub(crate) const NONE: u32 = u32::MAX;
/// The root's slot.
pub(crate) const ROOT: u32 = 0;

/// A framework leaf's own state.
#[derive(Debug, Clone)]
pub(crate) struct Leaf {
    pub(crate) id: FrameworkId,
    /// Subscribed (stream connected).
    pub(crate) active: bool,
    pub(crate) suppressed: bool,
    /// Held back because its outstanding offers already hold what it wants (set by the
    /// caller, see [`crate::Allocator::set_sated`]); filters and suppression are untouched.
    pub(crate) sated: bool,
    /// Demand hint: blocked for a `W` it does not fit in.
    pub(crate) demand: Option<Dense>,
    /// Declared `gpu_resources`: may be picked on agents with GPUs while gating is on.
    pub(crate) gpu_capable: bool,
}

/// A role or a framework leaf.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub(crate) parent: u32,
    /// Child roles and frameworks, in creation order (the tie-break order).
    pub(crate) children: Vec<u32>,
    /// The role's weight; 1 for frameworks.
    pub(crate) weight: f64,
    /// The role path ("" for the root and for leaves).
    pub(crate) path: String,
    /// `Some` for framework leaves.
    pub(crate) leaf: Option<Leaf>,
    /// What the subtree holds: for a leaf its allocation `U`, for a role the plain sum.
    pub(crate) raw: Dense,
    /// Depth below the root (root 0).
    pub(crate) depth: u32,
    /// False for a freed slot.
    pub(crate) live: bool,
    /// For a role, its dense role number (roles are never freed; the root is 0); `NONE` for a
    /// leaf. Per-agent filter counts are indexed by it.
    pub(crate) role_ix: u32,
}

impl Node {
    fn new(parent: u32, weight: f64, path: String, leaf: Option<Leaf>, depth: u32) -> Self {
        Self {
            parent,
            children: Vec::new(),
            weight,
            path,
            leaf,
            raw: Vec::new(),
            depth,
            live: true,
            role_ix: NONE,
        }
    }
}

/// The tree: node slots, a role index and a framework index.
#[derive(Debug, Clone)]
pub(crate) struct Tree {
    pub(crate) nodes: Vec<Node>,
    free: Vec<u32>,
    pub(crate) roles: HashMap<String, u32>,
    pub(crate) frameworks: IdMap<FrameworkId, u32>,
    /// Bumped on every structural or weight change (caches keyed on it rebuild).
    pub(crate) shape_version: u64,
    /// How many roles exist (the root included): the next role number.
    pub(crate) n_roles: u32,
}

impl Default for Tree {
    fn default() -> Self {
        let mut root = Node::new(NONE, 1.0, String::new(), None, 0);
        root.role_ix = 0;
        Self {
            nodes: vec![root],
            free: Vec::new(),
            roles: HashMap::new(),
            frameworks: IdMap::default(),
            shape_version: 0,
            n_roles: 1,
        }
    }
}

impl Tree {
    fn alloc_slot(&mut self, node: Node) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        }
    }

    /// The slot of `role`, creating it and its missing ancestors (weight 1) on demand.
    pub(crate) fn ensure_role(&mut self, role: &RolePath) -> u32 {
        if let Some(&i) = self.roles.get(role.as_str()) {
            return i;
        }
        let mut parent = ROOT;
        let mut path = String::new();
        for seg in role.segments() {
            if !path.is_empty() {
                path.push('/');
            }
            path.push_str(seg);
            parent = match self.roles.get(&path) {
                Some(&i) => i,
                None => {
                    let depth = self.nodes[parent as usize].depth + 1;
                    let mut node = Node::new(parent, 1.0, path.clone(), None, depth);
                    node.role_ix = self.n_roles;
                    self.n_roles += 1;
                    let i = self.alloc_slot(node);
                    self.nodes[parent as usize].children.push(i);
                    self.roles.insert(path.clone(), i);
                    self.shape_version += 1;
                    i
                }
            };
        }
        parent
    }

    /// Adds a framework leaf under `role`; the caller checked the id is new.
    pub(crate) fn add_leaf(&mut self, id: FrameworkId, role: &RolePath) -> u32 {
        let parent = self.ensure_role(role);
        let depth = self.nodes[parent as usize].depth + 1;
        let leaf = Leaf {
            id,
            active: true,
            suppressed: false,
            sated: false,
            demand: None,
            gpu_capable: false,
        };
        let i = self.alloc_slot(Node::new(parent, 1.0, String::new(), Some(leaf), depth));
        self.nodes[parent as usize].children.push(i);
        self.frameworks.insert(id, i);
        self.shape_version += 1;
        i
    }

    /// Calls `f` with the role number of each ancestor of `node` (nothing for an unknown slot).
    #[inline]
    pub(crate) fn for_each_role_above(&self, node: u32, mut f: impl FnMut(u32)) {
        let mut v = self.nodes.get(node as usize).map_or(NONE, |n| n.parent);
        while let Some(n) = self.nodes.get(v as usize) {
            f(n.role_ix);
            v = n.parent;
        }
    }

    /// Removes a leaf whose allocation is already zero. Its role stays (roles are kept).
    pub(crate) fn remove_leaf(&mut self, i: u32) {
        let parent = self.nodes[i as usize].parent;
        if let Some(leaf) = &self.nodes[i as usize].leaf {
            self.frameworks.remove(&leaf.id);
        }
        self.nodes[parent as usize].children.retain(|&c| c != i);
        let node = &mut self.nodes[i as usize];
        node.live = false;
        node.leaf = None;
        node.children.clear();
        node.raw.clear();
        self.free.push(i);
        self.shape_version += 1;
    }
}
