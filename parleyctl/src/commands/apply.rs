//! `parleyctl apply -f roles.toml`: the roles of a file (weights, guarantees, limits) made so
//! on the coordinator, idempotently.
//!
//! ```toml
//! [roles."eng"]
//! weight = 2
//! guarantee = { cpus = 8, mem = 16384 }
//! limit = { cpus = 32 }
//!
//! [roles."eng/batch"]
//! weight = 1
//! limit = {}          # an empty table clears the limit
//! ```
//!
//! A key left out leaves that setting as it is. The whole file is read and checked first (an
//! unknown key, a bad role path, weight or resource amount is a usage error naming the key,
//! and nothing is applied); then the role tree is read, and only the settings that differ are
//! sent (`PUT /api/v1/roles/{path}`, one call per role that changes, in the file's order of
//! paths, parents first). A second apply of the same file sends nothing and says so.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use protocol::messages::RoleNode;
use protocol::{Resources, RolePath, Weight};
use reqwest::Method;
use serde::Deserialize;

use crate::client::Api;
use crate::error::CtlError;
use crate::format;

/// One role's wanted settings, as read and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct RoleSpec {
    /// The role.
    pub path: RolePath,
    /// Its weight, if the file sets one.
    pub weight: Option<Weight>,
    /// Its guarantee: `None` not set by the file, `Some(None)` cleared (an empty table).
    pub guarantee: Option<Option<Resources>>,
    /// Its limit, as for the guarantee.
    pub limit: Option<Option<Resources>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    roles: BTreeMap<String, Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    weight: Option<f64>,
    guarantee: Option<toml::Table>,
    limit: Option<toml::Table>,
}

/// Reads and checks a roles file: every mistake names its key.
pub(crate) fn parse(text: &str) -> Result<Vec<RoleSpec>, String> {
    let file: File = toml::from_str(text).map_err(|e| {
        e.to_string()
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" ")
    })?;
    let mut specs = Vec::new();
    for (key, entry) in file.roles {
        let at = |field: &str| format!("roles.{key:?}{field}");
        let path = RolePath::new(key.as_str()).map_err(|e| format!("{}: {e}", at("")))?;
        let weight = entry
            .weight
            .map(|w| Weight::new(w).map_err(|e| format!("{}: {e}", at(".weight"))))
            .transpose()?;
        let resources = |field: &str, table: Option<toml::Table>| {
            table
                .map(|t| {
                    if t.is_empty() {
                        return Ok(None);
                    }
                    let json = serde_json::to_value(&t).map_err(|e| e.to_string())?;
                    serde_json::from_value::<Resources>(json)
                        .map(Some)
                        .map_err(|e| format!("{}: {e}", at(field)))
                })
                .transpose()
        };
        let guarantee = resources(".guarantee", entry.guarantee)?;
        let limit = resources(".limit", entry.limit)?;
        if weight.is_none() && guarantee.is_none() && limit.is_none() {
            return Err(format!(
                "{}: sets nothing; give weight, guarantee or limit",
                at("")
            ));
        }
        specs.push(RoleSpec {
            path,
            weight,
            guarantee,
            limit,
        });
    }
    // Parents before their children (a BTreeMap orders "eng" before "eng/batch" already).
    Ok(specs)
}

/// The role `path` in the tree, if it exists.
fn find<'a>(node: &'a RoleNode, path: &str) -> Option<&'a RoleNode> {
    if node.path == path {
        return Some(node);
    }
    node.children.iter().find_map(|c| find(c, path))
}

/// What must change for `spec`: the body to send and a description, or `None`.
fn plan(spec: &RoleSpec, now: Option<&RoleNode>) -> Option<(serde_json::Value, Vec<String>)> {
    let mut body = serde_json::Map::new();
    let mut said = Vec::new();
    let current_weight = now.map_or(1.0, |n| n.weight);
    if let Some(w) = spec.weight {
        if w.get() != current_weight {
            body.insert("weight".into(), serde_json::json!(w.get()));
            said.push(format!(
                "weight {} -> {}",
                format::weight(current_weight),
                format::weight(w.get())
            ));
        }
    }
    let show = |r: Option<&Resources>| r.map_or_else(|| "-".to_owned(), format::resources);
    for (name, wanted, current) in [
        (
            "guarantee",
            &spec.guarantee,
            now.and_then(|n| n.guarantee.as_ref()),
        ),
        ("limit", &spec.limit, now.and_then(|n| n.limit.as_ref())),
    ] {
        if let Some(wanted) = wanted {
            if wanted.as_ref() != current {
                body.insert(
                    name.into(),
                    serde_json::to_value(wanted).unwrap_or(serde_json::Value::Null),
                );
                said.push(format!(
                    "{name} {} -> {}",
                    show(current),
                    show(wanted.as_ref())
                ));
            }
        }
    }
    (!body.is_empty()).then_some((serde_json::Value::Object(body), said))
}

/// `parleyctl apply -f FILE [--dry-run]`.
pub async fn apply(
    api: &Api,
    file: &Path,
    dry_run: bool,
    out: &mut dyn Write,
) -> Result<(), CtlError> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| CtlError::Usage(format!("cannot read {}: {e}", file.display())))?;
    let specs = parse(&text).map_err(|e| CtlError::Usage(format!("{}: {e}", file.display())))?;
    let (_, root): (_, RoleNode) = api.get("/api/v1/roles").await?;
    let changes: Vec<_> = specs
        .iter()
        .filter_map(|s| plan(s, find(&root, s.path.as_str())).map(|p| (s, p)))
        .collect();
    if changes.is_empty() {
        writeln!(
            out,
            "nothing to change: the {} roles of {} are as the file says",
            specs.len(),
            file.display()
        )?;
        return Ok(());
    }
    for (spec, (body, said)) in &changes {
        if !dry_run {
            api.call(
                Method::PUT,
                &format!("/api/v1/roles/{}", spec.path),
                Some(body),
            )
            .await?;
        }
        let verb = if dry_run { "would change" } else { "changed" };
        writeln!(out, "role {}: {verb} {}", spec.path, said.join(", "))?;
    }
    let unchanged = specs.len() - changes.len();
    if unchanged > 0 {
        writeln!(out, "{unchanged} other roles already as the file says")?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_read_and_every_mistake_names_its_key() {
        let specs = parse(
            "[roles.eng]\nweight = 2\nguarantee = { cpus = 4 }\n[roles.\"eng/batch\"]\nlimit = {}\n",
        )
        .unwrap();
        assert_eq!(specs.len(), 2);
        assert_eq!(specs[0].path.as_str(), "eng");
        assert_eq!(specs[0].weight.unwrap().get(), 2.0);
        assert_eq!(specs[0].guarantee, Some(Some("cpus=4".parse().unwrap())));
        assert_eq!(specs[1].limit, Some(None));
        let cases = [
            ("[roles.eng]\nwieght = 2\n", "unknown field `wieght`"),
            ("[roles.eng]\nweight = -1\n", "roles.\"eng\".weight"),
            ("[roles.\"Eng!\"]\nweight = 1\n", "roles.\"Eng!\""),
            (
                "[roles.eng]\nguarantee = { cpus = -1 }\n",
                "roles.\"eng\".guarantee",
            ),
            (
                "[roles.eng]\nlimit = { \"Bad Name\" = 1 }\n",
                "roles.\"eng\".limit",
            ),
            ("[roles.eng]\n", "sets nothing"),
            ("[role.eng]\nweight = 1\n", "unknown field `role`"),
        ];
        for (text, expected) in cases {
            let err = parse(text).unwrap_err();
            assert!(err.contains(expected), "{text:?}: {err}");
        }
    }
}
