//! parleyctl against an HTTPS coordinator: `--ca-file` trusts its CA; without it the
//! certificate is unknown (unreachable, exit 3); a CA file that is not there is a usage error.
#![allow(clippy::unwrap_used)]

use crate::support::{binary, texts};
use parley_tls::testing::TestPki;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_coordinator_is_reached_with_its_ca_file() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::generate(dir.path()).unwrap();
    let cluster = tests::Cluster::builder()
        .tls(tests::ClusterTls::of(&pki))
        .start()
        .await
        .unwrap();
    let url = cluster.url.clone();
    assert!(url.starts_with("https://localhost:"), "{url}");
    let ca = pki.ca_file.to_str().unwrap();

    let out = binary(&["--coordinator", &url, "--ca-file", ca, "frameworks"], &[]).await;
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stdout.starts_with("FRAMEWORK "), "{stdout}");

    let out = binary(&["--coordinator", &url, "frameworks"], &[]).await;
    let (_, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "parleyctl: cannot reach the coordinator at {url}: "
        )),
        "{stderr}"
    );

    let missing = dir.path().join("missing.pem");
    let out = binary(
        &[
            "--coordinator",
            &url,
            "--ca-file",
            missing.to_str().unwrap(),
            "frameworks",
        ],
        &[],
    )
    .await;
    let (_, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--ca-file"), "{stderr}");

    cluster.shutdown().await.unwrap();
}
