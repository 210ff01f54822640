//! [`EtcdClient`]: a small typed client for etcd's JSON gRPC gateway (served by etcd 3.4 on
//! its client port under `/v3/`), on the workspace's `reqwest`: no `protoc`, no tonic.
//!
//! Only what the registry, the election and backups use: `kv/range`, `kv/txn` (put and
//! delete, with a `create_revision` compare, or, for a restore, a compare that no key of a
//! range exists), `lease/grant`, `lease/keepalive`, `lease/revoke`,
//! `election/campaign`, `election/leader`, `election/resign`. Keys and values are base64 in
//! the JSON; 64-bit integers are strings (the gateway writes them so, and reads both).
//!
//! With several endpoints, a request that cannot reach one (connection refused, timeout)
//! tries the next; an answer from etcd (even an error) is final.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};

/// How long a request other than `campaign` may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// A request to etcd failed.
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    /// No endpoint could be reached.
    #[error("etcd unreachable ({endpoints}): {error}")]
    Unreachable {
        /// The endpoints tried.
        endpoints: String,
        /// The last error.
        error: String,
    },
    /// etcd answered with an error.
    #[error("etcd {path}: {message} (code {code})")]
    Server {
        /// The API path.
        path: String,
        /// gRPC status code.
        code: i64,
        /// etcd's message.
        message: String,
    },
    /// This coordinator could not set up its side (a client, a thread).
    #[error("etcd client: {0}")]
    Setup(String),
    /// The answer did not parse.
    #[error("etcd {path}: unexpected answer: {reason}")]
    BadAnswer {
        /// The API path.
        path: String,
        /// Why.
        reason: String,
    },
}

/// A key-value pair as etcd returns it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct KeyValue {
    /// The key.
    #[serde(default, deserialize_with = "b64")]
    pub key: Vec<u8>,
    /// The value.
    #[serde(default, deserialize_with = "b64")]
    pub value: Vec<u8>,
    /// The revision that created the key.
    #[serde(default, deserialize_with = "int")]
    pub create_revision: i64,
    /// The lease the key is attached to (0: none).
    #[serde(default, deserialize_with = "int")]
    pub lease: i64,
}

/// One operation of a transaction.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Put `value` at `key`.
    Put(Vec<u8>, Vec<u8>),
    /// Delete `key`.
    Delete(Vec<u8>),
}

/// The election's leader key, as `campaign` returns it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaderKey {
    /// The election name.
    #[serde(serialize_with = "ser_b64", deserialize_with = "b64", default)]
    pub name: Vec<u8>,
    /// The key that holds the leadership (`name/<lease hex>`).
    #[serde(serialize_with = "ser_b64", deserialize_with = "b64", default)]
    pub key: Vec<u8>,
    /// Its creation revision: the leadership's epoch, compared by every fenced write.
    #[serde(serialize_with = "ser_int", deserialize_with = "int", default)]
    pub rev: i64,
    /// The lease it is attached to.
    #[serde(serialize_with = "ser_int", deserialize_with = "int", default)]
    pub lease: i64,
}

/// A lease granted by etcd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// Its id.
    pub id: i64,
    /// Its time to live in seconds, as granted (etcd may raise a short one to its minimum).
    pub ttl_s: i64,
}

/// The client: endpoints and one HTTP client.
#[derive(Debug)]
pub struct EtcdClient {
    http: reqwest::Client,
    endpoints: Vec<String>,
    /// The endpoint to try first (the last that answered).
    current: AtomicUsize,
}

impl EtcdClient {
    /// A client for `endpoints` (base URLs such as `http://127.0.0.1:2379`, at least one).
    pub fn new(endpoints: Vec<String>) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .build()?;
        let endpoints = endpoints
            .into_iter()
            .map(|e| e.trim_end_matches('/').to_owned())
            .collect();
        Ok(Self {
            http,
            endpoints,
            current: AtomicUsize::new(0),
        })
    }

    /// The endpoints, in the order given.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    async fn call<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &serde_json::Value,
        timeout: Option<Duration>,
    ) -> Result<T, EtcdError> {
        let n = self.endpoints.len().max(1);
        let first = self.current.load(Ordering::Relaxed);
        let mut last = String::from("no endpoints");
        for i in 0..n {
            let idx = (first + i) % n;
            let Some(base) = self.endpoints.get(idx) else {
                break;
            };
            let mut req = self.http.post(format!("{base}{path}")).json(body);
            if let Some(t) = timeout {
                req = req.timeout(t);
            }
            let resp = match req.send().await {
                Ok(r) => r,
                Err(e) => {
                    last = format!("{base}: {e}");
                    continue;
                }
            };
            self.current.store(idx, Ordering::Relaxed);
            let status = resp.status();
            let text = resp.text().await.map_err(|e| EtcdError::Unreachable {
                endpoints: base.clone(),
                error: e.to_string(),
            })?;
            return parse(path, status.is_success(), &text);
        }
        Err(EtcdError::Unreachable {
            endpoints: self.endpoints.join(","),
            error: last,
        })
    }

    /// Every key-value pair whose key starts with `prefix`.
    pub async fn range_prefix(&self, prefix: &[u8]) -> Result<Vec<KeyValue>, EtcdError> {
        Ok(self.range_prefix_at(prefix).await?.0)
    }

    /// Every key-value pair whose key starts with `prefix`, and the revision they were read
    /// at (one range read: a consistent view).
    pub async fn range_prefix_at(&self, prefix: &[u8]) -> Result<(Vec<KeyValue>, i64), EtcdError> {
        #[derive(Deserialize, Default)]
        struct Header {
            #[serde(default, deserialize_with = "int")]
            revision: i64,
        }
        #[derive(Deserialize)]
        struct Range {
            #[serde(default)]
            header: Header,
            #[serde(default)]
            kvs: Vec<KeyValue>,
        }
        let body = serde_json::json!({
            "key": B64.encode(prefix),
            "range_end": B64.encode(prefix_end(prefix)),
        });
        let r: Range = self
            .call("/v3/kv/range", &body, Some(REQUEST_TIMEOUT))
            .await?;
        Ok((r.kvs, r.header.revision))
    }

    /// Runs `ops` in one transaction if no key starts with `absent` (etcd compares each key
    /// of the range), or unconditionally when `absent` is `None`; returns whether the compare
    /// held (and so the ops ran).
    pub async fn txn_unless_any(
        &self,
        absent: Option<&[u8]>,
        ops: &[Op],
    ) -> Result<bool, EtcdError> {
        // An empty range compares as one key of version 0; any existing key has version >= 1.
        let compare: Vec<serde_json::Value> = absent
            .map(|absent| {
                serde_json::json!({
                    "key": B64.encode(absent),
                    "range_end": B64.encode(prefix_end(absent)),
                    "target": "VERSION",
                    "result": "EQUAL",
                    "version": "0",
                })
            })
            .into_iter()
            .collect();
        let body = serde_json::json!({ "compare": compare, "success": ops_json(ops) });
        self.txn(&body).await
    }

    /// Runs the transaction `body`; whether its compare held.
    async fn txn(&self, body: &serde_json::Value) -> Result<bool, EtcdError> {
        #[derive(Deserialize)]
        struct Txn {
            #[serde(default)]
            succeeded: bool,
        }
        let r: Txn = self.call("/v3/kv/txn", body, Some(REQUEST_TIMEOUT)).await?;
        Ok(r.succeeded)
    }

    /// Runs `ops` if `key` was created at revision `create_revision` (and still exists);
    /// returns whether the compare held (and so the ops ran).
    pub async fn txn_if_created(
        &self,
        key: &[u8],
        create_revision: i64,
        ops: &[Op],
    ) -> Result<bool, EtcdError> {
        self.txn(&txn_body(key, create_revision, ops)).await
    }

    /// Grants a lease of `ttl_s` seconds.
    pub async fn lease_grant(&self, ttl_s: i64) -> Result<Lease, EtcdError> {
        #[derive(Deserialize)]
        struct Grant {
            #[serde(rename = "ID", default, deserialize_with = "int")]
            id: i64,
            #[serde(rename = "TTL", default, deserialize_with = "int")]
            ttl: i64,
        }
        let body = serde_json::json!({ "TTL": ttl_s.to_string() });
        let r: Grant = self
            .call("/v3/lease/grant", &body, Some(REQUEST_TIMEOUT))
            .await?;
        if r.id == 0 || r.ttl <= 0 {
            return Err(EtcdError::BadAnswer {
                path: "/v3/lease/grant".into(),
                reason: format!("lease {} with TTL {}", r.id, r.ttl),
            });
        }
        Ok(Lease {
            id: r.id,
            ttl_s: r.ttl,
        })
    }

    /// Renews lease `id`; returns its remaining TTL in seconds (0: the lease is gone).
    pub async fn lease_keepalive(&self, id: i64, timeout: Duration) -> Result<i64, EtcdError> {
        #[derive(Deserialize)]
        struct Result_ {
            #[serde(rename = "TTL", default, deserialize_with = "int")]
            ttl: i64,
        }
        #[derive(Deserialize)]
        struct KeepAlive {
            result: Option<Result_>,
        }
        let body = serde_json::json!({ "ID": id.to_string() });
        let r: KeepAlive = self
            .call("/v3/lease/keepalive", &body, Some(timeout))
            .await?;
        Ok(r.result.map_or(0, |r| r.ttl))
    }

    /// Revokes lease `id` (its keys are deleted).
    pub async fn lease_revoke(&self, id: i64) -> Result<(), EtcdError> {
        let body = serde_json::json!({ "ID": id.to_string() });
        let _: serde_json::Value = self
            .call("/v3/lease/revoke", &body, Some(REQUEST_TIMEOUT))
            .await?;
        Ok(())
    }

    /// Campaigns for election `name` with `value`, on `lease`: blocks until elected.
    pub async fn campaign(
        &self,
        name: &[u8],
        lease: i64,
        value: &[u8],
    ) -> Result<LeaderKey, EtcdError> {
        #[derive(Deserialize)]
        struct Campaign {
            leader: Option<LeaderKey>,
        }
        let body = serde_json::json!({
            "name": B64.encode(name),
            "lease": lease.to_string(),
            "value": B64.encode(value),
        });
        let r: Campaign = self.call("/v3/election/campaign", &body, None).await?;
        r.leader.ok_or_else(|| EtcdError::BadAnswer {
            path: "/v3/election/campaign".into(),
            reason: "no leader key".into(),
        })
    }

    /// The current leader's value (its URL) of election `name`, `None` while there is none.
    pub async fn leader(&self, name: &[u8]) -> Result<Option<Vec<u8>>, EtcdError> {
        Ok(self.leader_kv(name).await?.map(|kv| kv.value))
    }

    /// The current leader's key of the election `name` (its value, the leader's advertised
    /// URL, and its lease), if any.
    pub async fn leader_kv(&self, name: &[u8]) -> Result<Option<KeyValue>, EtcdError> {
        #[derive(Deserialize)]
        struct Leader {
            kv: Option<KeyValue>,
        }
        let body = serde_json::json!({ "name": B64.encode(name) });
        match self
            .call::<Leader>("/v3/election/leader", &body, Some(REQUEST_TIMEOUT))
            .await
        {
            Ok(r) => Ok(r.kv),
            // "election: no leader"
            Err(EtcdError::Server { message, .. }) if message.contains("no leader") => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Gives up the leadership held by `leader`.
    pub async fn resign(&self, leader: &LeaderKey) -> Result<(), EtcdError> {
        let body = serde_json::json!({ "leader": leader });
        let _: serde_json::Value = self
            .call("/v3/election/resign", &body, Some(REQUEST_TIMEOUT))
            .await?;
        Ok(())
    }
}

/// The end of the range of keys starting with `prefix` (etcd's `range_end`): the prefix with
/// its last byte below 0xff incremented, the rest dropped.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // All 0xff (or empty): to the end of the keyspace.
    vec![0]
}

/// The JSON of a transaction: `ops` if `key`'s create revision is `rev`.
fn txn_body(key: &[u8], rev: i64, ops: &[Op]) -> serde_json::Value {
    serde_json::json!({
        "compare": [{
            "key": B64.encode(key),
            "target": "CREATE",
            "result": "EQUAL",
            "create_revision": rev.to_string(),
        }],
        "success": ops_json(ops),
    })
}

/// The JSON of a transaction's operations.
fn ops_json(ops: &[Op]) -> Vec<serde_json::Value> {
    ops.iter()
        .map(|op| match op {
            Op::Put(k, v) => serde_json::json!({
                "request_put": { "key": B64.encode(k), "value": B64.encode(v) }
            }),
            Op::Delete(k) => serde_json::json!({
                "request_delete_range": { "key": B64.encode(k) }
            }),
        })
        .collect()
}

/// An answer: the value on success, the error body (`{"code","message"}`) otherwise.
fn parse<T: DeserializeOwned>(path: &str, ok: bool, text: &str) -> Result<T, EtcdError> {
    #[derive(Deserialize)]
    struct ErrorBody {
        #[serde(default)]
        code: i64,
        #[serde(default)]
        message: String,
        #[serde(default)]
        error: String,
    }
    let bad = |reason: String| EtcdError::BadAnswer {
        path: path.to_owned(),
        reason,
    };
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        bad(format!(
            "{e}: {}",
            text.chars().take(200).collect::<String>()
        ))
    })?;
    let has_error = value.get("error").is_some() || value.get("code").is_some();
    if !ok || (has_error && value.get("result").is_none()) {
        let e: ErrorBody = serde_json::from_value(value).map_err(|e| bad(e.to_string()))?;
        return Err(EtcdError::Server {
            path: path.to_owned(),
            code: e.code,
            message: if e.message.is_empty() {
                e.error
            } else {
                e.message
            },
        });
    }
    serde_json::from_value(value).map_err(|e| bad(e.to_string()))
}

fn b64<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    let s = String::deserialize(d)?;
    B64.decode(s).map_err(serde::de::Error::custom)
}

fn ser_b64<S: serde::Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&B64.encode(v))
}

fn ser_int<S: serde::Serializer>(v: &i64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&v.to_string())
}

/// A 64-bit integer written as a string (or, leniently, a number).
fn int<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Int {
        S(String),
        N(i64),
    }
    match Int::deserialize(d)? {
        Int::S(s) => s.parse().map_err(serde::de::Error::custom),
        Int::N(n) => Ok(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_increments_the_last_byte() {
        assert_eq!(prefix_end(b"/parley/"), b"/parley0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff"), vec![0]);
    }

    #[test]
    fn a_txn_compares_the_create_revision_and_encodes_keys() {
        let body = txn_body(
            b"/p/leader/1",
            42,
            &[
                Op::Put(b"/p/k".to_vec(), b"v".to_vec()),
                Op::Delete(b"/p/d".to_vec()),
            ],
        );
        assert_eq!(
            body,
            serde_json::json!({
                "compare": [{"key": "L3AvbGVhZGVyLzE=", "target": "CREATE", "result": "EQUAL",
                             "create_revision": "42"}],
                "success": [
                    {"request_put": {"key": "L3Avaw==", "value": "dg=="}},
                    {"request_delete_range": {"key": "L3AvZA=="}},
                ],
            })
        );
    }

    #[test]
    fn answers_parse_as_etcd_3_4_writes_them() {
        // Copied from etcd 3.4.23's gateway.
        let campaign = r#"{"header":{"revision":"2"},"leader":{"name":"L3AvbGVhZGVy",
            "key":"L3AvbGVhZGVyLzM5MGRhMjA5MzdkMWE4MDc=","rev":"2","lease":"4111120195334023175"}}"#;
        #[derive(Deserialize)]
        struct C {
            leader: LeaderKey,
        }
        let c: C = parse("/v3/election/campaign", true, campaign).unwrap();
        assert_eq!(c.leader.key, b"/p/leader/390da20937d1a807".to_vec());
        assert_eq!(c.leader.rev, 2);
        assert_eq!(c.leader.lease, 4111120195334023175);
        // Serialized back (resign) with strings for the integers.
        let back = serde_json::to_value(&c.leader).unwrap();
        assert_eq!(back["rev"], "2");
        assert_eq!(back["name"], "L3AvbGVhZGVy");

        let range = r#"{"header":{},"kvs":[{"key":"L3Av","create_revision":"7",
            "mod_revision":"7","version":"1","value":"aHR0cDovL3g="}],"count":"1"}"#;
        #[derive(Deserialize)]
        struct R {
            kvs: Vec<KeyValue>,
        }
        let r: R = parse("/v3/kv/range", true, range).unwrap();
        assert_eq!(r.kvs[0].value, b"http://x".to_vec());
        assert_eq!(r.kvs[0].create_revision, 7);
        assert_eq!(r.kvs[0].lease, 0);

        let none = r#"{"error":"election: no leader","message":"election: no leader","code":2}"#;
        let e = parse::<serde_json::Value>("/v3/election/leader", false, none).unwrap_err();
        assert!(
            matches!(&e, EtcdError::Server { code: 2, message, .. } if message == "election: no leader"),
            "{e}"
        );
        // A keep-alive of a revoked lease: a result without TTL.
        let gone = r#"{"result":{"header":{},"ID":"4111120195334023175"}}"#;
        let v: serde_json::Value = parse("/v3/lease/keepalive", true, gone).unwrap();
        assert!(v["result"].get("TTL").is_none());
        assert!(parse::<serde_json::Value>("/x", true, "not json").is_err());
    }
}
