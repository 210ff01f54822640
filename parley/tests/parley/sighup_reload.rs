//! SIGHUP to a running `coordinator`: the TLS certificate and the credentials file are read
//! again. A new token works and a removed one gets 401, a new handshake gets the new
//! certificate, an event stream opened before keeps delivering, and a bad file changes nothing.
//! SIGHUP to a running `agent` serving HTTPS: a new handshake gets its new certificate.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use base64::Engine;
use serde_json::json;

use crate::support::Proc;
use crate::tls_init::{init_loopback, start_agent, start_coordinator, token};

/// The DER of the first certificate of a PEM file.
fn der(pem_file: &Path) -> Vec<u8> {
    let text = std::fs::read_to_string(pem_file).unwrap();
    let body: String = text
        .lines()
        .skip_while(|l| !l.starts_with("-----BEGIN CERTIFICATE"))
        .skip(1)
        .take_while(|l| !l.starts_with("-----END"))
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .unwrap()
}

/// The certificate a fresh connection to `url` is served, with a client trusting `ca`.
async fn served_certificate(ca: &Path, url: &str) -> Vec<u8> {
    try_served_certificate(ca, url).await.unwrap()
}

/// As [`served_certificate`], `None` while nothing answers at `url` (or not with `ca`'s).
async fn try_served_certificate(ca: &Path, url: &str) -> Option<Vec<u8>> {
    let client = parley_tls::client_builder(Some(ca))
        .unwrap()
        .tls_info(true)
        .build()
        .unwrap();
    let r = client.get(url).send().await.ok()?;
    r.extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|i| i.peer_certificate())
        .map(<[u8]>::to_vec)
}

async fn status(client: &reqwest::Client, url: &str, token: &str) -> u16 {
    client
        .get(url)
        .bearer_auth(token)
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
}

async fn wait_log(coord: &Proc, text: &str) {
    let found = testkit::wait_for(Duration::from_secs(20), text, || async {
        coord.log().contains(text)
    })
    .await;
    assert!(found.is_ok(), "{text:?} not logged:\n{}", coord.log());
}

#[tokio::test]
async fn sighup_rotates_the_certificate_and_the_tokens_and_open_streams_stay() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pki");
    init_loopback(&dir);
    let (coord, base, client) = start_coordinator(&dir, tmp.path()).await;
    let state = format!("{base}/api/v1/state");
    let old_reader = token(&dir, "reader");
    assert_eq!(status(&client, &state, &old_reader).await, 200);
    let old_cert = der(&dir.join("coord1.crt"));
    assert_eq!(
        served_certificate(&dir.join("ca.pem"), &state).await,
        old_cert
    );

    // A framework and its event stream, open across the reloads.
    let fw_token = token(&dir, "batch");
    let r = client
        .post(format!("{base}/api/v1/frameworks"))
        .bearer_auth(&fw_token)
        .json(&json!({"name": "stays", "role": "eng"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let id = r.json::<serde_json::Value>().await.unwrap()["framework_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let stream_client = parley_tls::client_builder(Some(&dir.join("ca.pem")))
        .unwrap()
        .build()
        .unwrap();
    let response = stream_client
        .get(format!("{base}/api/v1/frameworks/{id}/events"))
        .bearer_auth(&fw_token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut stream = testkit::SseReader::from_response(response);
    let deadline = || testkit::deadline_in(Duration::from_secs(10));
    assert_eq!(
        stream.next_frame(deadline()).await.unwrap().event,
        "subscribed"
    );

    // A bad credentials file and a key of another certificate: logged, nothing changes.
    let credentials = dir.join("credentials.toml");
    let good_credentials = std::fs::read_to_string(&credentials).unwrap();
    std::fs::write(&credentials, "[[principals]]\nname = 1\n").unwrap();
    let good_key = std::fs::read(dir.join("coord1.key")).unwrap();
    std::fs::copy(next_key_of_another(&tmp), dir.join("coord1.key")).unwrap();
    coord.signal("HUP");
    wait_log(&coord, "cannot reload the credentials").await;
    wait_log(&coord, "cannot reload the TLS certificate").await;
    assert_eq!(status(&client, &state, &old_reader).await, 200);
    assert_eq!(
        served_certificate(&dir.join("ca.pem"), &state).await,
        old_cert
    );
    let log = coord.log();
    assert!(
        log.contains("credentials.toml") && log.contains("coord1.key"),
        "{log}"
    );
    std::fs::write(dir.join("coord1.key"), good_key).unwrap();

    // The new files: another init's credentials (new tokens for every principal) and a new
    // certificate for the same names from another CA, put in place of the old ones.
    let next = tmp.path().join("next");
    init_loopback(&next);
    std::fs::copy(next.join("credentials.toml"), &credentials).unwrap();
    std::fs::copy(next.join("coord1.crt"), dir.join("coord1.crt")).unwrap();
    std::fs::copy(next.join("coord1.key"), dir.join("coord1.key")).unwrap();
    assert_ne!(
        good_credentials,
        std::fs::read_to_string(&credentials).unwrap()
    );
    let new_reader = token(&next, "reader");
    assert_eq!(status(&client, &state, &new_reader).await, 401);
    coord.signal("HUP");
    let rotated = testkit::wait_for(Duration::from_secs(20), "the new token", || async {
        status(&client, &state, &new_reader).await == 200
    })
    .await;
    assert!(rotated.is_ok(), "{}", coord.log());
    assert_eq!(status(&client, &state, &old_reader).await, 401);
    assert_eq!(
        served_certificate(&next.join("ca.pem"), &state).await,
        der(&next.join("coord1.crt")),
        "a new handshake gets the new certificate"
    );

    // The stream opened before both reloads still delivers (heartbeats every 0.5 s).
    let frame = stream.next_frame(deadline()).await.unwrap();
    assert_eq!(frame.event, "heartbeat", "{frame:?}");
}

/// The key of another `tls init`'s coordinator certificate.
fn next_key_of_another(tmp: &tempfile::TempDir) -> std::path::PathBuf {
    let other = tmp.path().join("other");
    init_loopback(&other);
    other.join("coord1.key")
}

#[tokio::test]
async fn sighup_makes_the_agent_serve_its_new_certificate() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pki");
    init_loopback(&dir);
    let (_coord, base, _) = start_coordinator(&dir, tmp.path()).await;
    let (agent, agent_url) = start_agent(&dir, &base, &tmp.path().join("agent"));
    let health = format!("{agent_url}/health");
    let ca = dir.join("ca.pem");
    let old_cert = der(&dir.join("node1.crt"));
    let up = testkit::wait_for(Duration::from_secs(30), "the agent's HTTPS", || async {
        try_served_certificate(&ca, &health).await.is_some()
    })
    .await;
    assert!(up.is_ok(), "{}", agent.log());
    assert_eq!(served_certificate(&ca, &health).await, old_cert);

    // Another init's certificate for the same address, from another CA, in place of the old.
    let next = tmp.path().join("next");
    init_loopback(&next);
    std::fs::copy(next.join("node1.crt"), dir.join("node1.crt")).unwrap();
    std::fs::copy(next.join("node1.key"), dir.join("node1.key")).unwrap();
    // Not before the signal: the files are read on SIGHUP only.
    assert_eq!(served_certificate(&ca, &health).await, old_cert);
    agent.signal("HUP");
    wait_log(&agent, "reloaded the TLS certificate").await;
    assert_eq!(
        served_certificate(&next.join("ca.pem"), &health).await,
        der(&next.join("node1.crt")),
        "a new handshake gets the new certificate"
    );
    // The old CA no longer verifies the agent.
    assert_eq!(try_served_certificate(&ca, &health).await, None);
}
