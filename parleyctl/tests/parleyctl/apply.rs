//! `parleyctl apply -f roles.toml` against a coordinator no agent has joined yet: quotas on the
//! standard resources are accepted at install time, a second apply changes nothing and says
//! so, and a bad file is refused naming its key before anything is applied.
#![allow(clippy::unwrap_used)]

use crate::support::{ctl, ok};
use parleyctl::CtlError;
use protocol::messages::RoleNode;
use tests::Cluster;

fn find<'a>(node: &'a RoleNode, path: &str) -> Option<&'a RoleNode> {
    if node.path == path {
        return Some(node);
    }
    node.children.iter().find_map(|c| find(c, path))
}

async fn roles(url: &str) -> RoleNode {
    serde_json::from_str(&ok(url, &["--json", "roles"]).await).unwrap()
}

#[tokio::test]
async fn a_roles_file_applies_before_agents_join_once_and_a_bad_one_changes_nothing() {
    let cluster = Cluster::start(&[]).await.unwrap();
    let url = cluster.url.clone();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("roles.toml");
    let path = file.to_str().unwrap();
    std::fs::write(
        &file,
        "[roles.eng]\nweight = 2\nguarantee = { cpus = 4, mem = 1024 }\n\n\
         [roles.\"eng/batch\"]\nlimit = { cpus = 2, gpus = 1 }\n\n\
         [roles.ops]\nweight = 0.5\n",
    )
    .unwrap();

    let out = ok(&url, &["apply", "-f", path, "--dry-run"]).await;
    assert!(
        out.contains("role eng: would change weight 1 -> 2"),
        "{out}"
    );
    assert!(
        find(&roles(&url).await, "eng").is_none(),
        "a dry run changes nothing"
    );

    let out = ok(&url, &["apply", "-f", path]).await;
    assert!(
        out.contains("role eng: changed weight 1 -> 2, guarantee - -> cpus=4,mem=1024"),
        "{out}"
    );
    assert!(
        out.contains("role eng/batch: changed limit - -> cpus=2,gpus=1"),
        "{out}"
    );
    assert!(out.contains("role ops: changed weight 1 -> 0.5"), "{out}");
    let tree = roles(&url).await;
    let eng = find(&tree, "eng").unwrap();
    assert_eq!(eng.weight, 2.0);
    assert_eq!(eng.guarantee, Some("cpus=4,mem=1024".parse().unwrap()));
    let batch = find(&tree, "eng/batch").unwrap();
    assert_eq!(batch.limit, Some("cpus=2,gpus=1".parse().unwrap()));

    let out = ok(&url, &["apply", "-f", path]).await;
    assert!(out.starts_with("nothing to change: the 3 roles"), "{out}");

    // A file with one bad key: refused, naming it, before anything is applied.
    std::fs::write(
        &file,
        "[roles.eng]\nweight = 3\n\n[roles.ops]\nlimit = { cpus = -1 }\n",
    )
    .unwrap();
    let (result, _) = ctl(&url, &["apply", "-f", path]).await;
    match result {
        Err(CtlError::Usage(e)) => assert!(e.contains("roles.\"ops\".limit"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(find(&roles(&url).await, "eng").unwrap().weight, 2.0);

    // A resource no agent offers and no setting declares is still refused by the coordinator.
    std::fs::write(&file, "[roles.eng]\nlimit = { fpga = 1 }\n").unwrap();
    let (result, _) = ctl(&url, &["apply", "-f", path]).await;
    match result {
        Err(CtlError::Api {
            status, message, ..
        }) => {
            assert_eq!(status, 400, "{message}");
            assert!(message.contains("known_resources"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}
