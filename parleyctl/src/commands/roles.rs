//! `parleyctl roles`: the role tree, one role a line, children indented under their parent.

use std::io::Write;

use protocol::messages::RoleNode;

use super::print_raw;
use crate::client::Api;
use crate::error::CtlError;
use crate::format;
use crate::table::Table;

/// `parleyctl roles`.
pub async fn roles(api: &Api, json: bool, out: &mut dyn Write) -> Result<(), CtlError> {
    let (raw, root): (_, RoleNode) = api.get("/api/v1/roles").await?;
    if json {
        return print_raw(out, &raw);
    }
    let mut t = Table::new(&[
        "ROLE",
        "WEIGHT",
        "SHARE",
        "FRAMEWORKS",
        "ALLOCATED",
        "GUARANTEE",
        "LIMIT",
    ]);
    add(&mut t, &root, 0);
    Ok(t.write(out)?)
}

/// A guarantee or limit cell: `-` when unset, `(unmet)` appended when it exceeds the cluster.
fn quota(r: Option<&protocol::Resources>, unmet: bool) -> String {
    match r {
        None => "-".to_owned(),
        Some(r) if unmet => format!("{} (unmet)", format::resources(r)),
        Some(r) => format::resources(r),
    }
}

/// A node and its subtree: its last path segment, indented two spaces per level.
fn add(t: &mut Table, node: &RoleNode, depth: usize) {
    let name = match node.path.rsplit('/').next() {
        Some(last) if !node.path.is_empty() => last.to_owned(),
        _ => "/".to_owned(),
    };
    t.row(vec![
        format!("{}{name}", "  ".repeat(depth)),
        format::weight(node.weight),
        format::share(node.dominant_share),
        node.frameworks.len().to_string(),
        format::resources(&node.allocated),
        quota(node.guarantee.as_ref(), node.guarantee_unmet.is_some()),
        quota(node.limit.as_ref(), false),
    ]);
    for child in &node.children {
        add(t, child, depth + 1);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn node(path: &str, weight: f64, children: Vec<RoleNode>) -> RoleNode {
        RoleNode {
            path: path.into(),
            weight,
            allocated: Default::default(),
            dominant_share: 0.5,
            children,
            frameworks: vec![],
            guarantee: None,
            limit: Some("cpus=10".parse().unwrap()),
            guarantee_unmet: None,
            reserved: Default::default(),
        }
    }

    #[test]
    fn children_are_indented_under_their_parent() {
        let root = node(
            "",
            1.0,
            vec![
                node("eng", 2.0, vec![node("eng/batch", 0.5, vec![])]),
                node("ops", 1.0, vec![]),
            ],
        );
        let mut t = Table::new(&["ROLE", "WEIGHT", "SHARE", "FRAMEWORKS", "ALLOCATED"]);
        add(&mut t, &root, 0);
        let mut out = Vec::new();
        t.write(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[1].starts_with("/ "), "{text}");
        assert!(lines[2].starts_with("  eng "), "{text}");
        assert!(lines[3].starts_with("    batch  0.5"), "{text}");
        assert!(lines[4].starts_with("  ops "), "{text}");
    }
}
