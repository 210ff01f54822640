//! Hostile input against a live coordinator: random call sequences over every
//! endpoint — well-formed bodies, bodies with one field replaced by something hostile, garbage
//! bodies (huge and negative numbers, NaN-like tokens, unicode, 10k-deep nesting, long strings,
//! many resource names), wrong Content-Types, known and random ids — from several clients, with
//! two simulated agents. After every call it checks that:
//!
//! - nothing panicked (a panic hook counts panics on this suite's threads: its test threads,
//!   its runtime's, the coordinator's registry writer) and `/health` answers 200;
//! - no call answered 5xx, and every refusal carries the API's error body;
//! - a refused call (4xx) changed nothing: `GET /api/v1/state`, taken once the cluster has
//!   settled, is the same after the call as before it (heartbeat times aside);
//! - the books balance: `parley_ledger_mismatches_total 0`, and for every agent and framework
//!   `offered` is the sum of its offers, `used` the sum of its non-terminal tasks, and on an
//!   agent `offered + used` fits in its total.
//!
//! A second run does the same with a credentials file of several principals and checks, besides,
//! that no one gets a 2xx beyond its rights (see [`hostile_principals_never_overstep`]).
//!
//! `PROPTEST_CASES` sets the number of sequences (default 64 open and 32 with credentials, a
//! sequence is 1 to 8 calls).
//! The coordinator is quiet between calls (no periodic allocation, offer expiry, failover or
//! agent loss within the test's time), so the state settles and the before/after comparison
//! is exact.

#![allow(clippy::unwrap_used)]

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use protocol::messages::ClusterState;
use protocol::{ErrorBody, Resources};
use serde_json::Value;
use tests::{deadline_in, fast_coordinator_config, Cluster, SseReader};

/// The coordinator's request body limit (`Config::max_body_bytes`' default).
const MAX_BODY_BYTES: usize = 1024 * 1024;

/// Panics seen on this suite's threads since it started.
static PANICS: AtomicUsize = AtomicUsize::new(0);

/// The first of those panics: its thread, place and message. Proptest's own panic handling can
/// keep the default hook from printing it, so the failure quotes it.
static FIRST_PANIC: Mutex<Option<String>> = Mutex::new(None);

/// The name of the suite's runtime threads (workers and blocking pool), which the panic hook
/// counts along with the test threads (named after this module) and the registry writer.
const RUNTIME_THREADS: &str = "hostile-runtime";

/// Counts panics on this suite's threads. The other tests of the binary run beside it, and a
/// failing assertion of theirs is not a panic of the coordinator under hostile input.
fn count_panics() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // Test threads are named after the test (`hostile::...`), the runtime's after
            // `RUNTIME_THREADS`.
            let ours = std::thread::current()
                .name()
                .is_some_and(|name| name.starts_with("hostile") || name == "registry-writer");
            if ours {
                PANICS.fetch_add(1, Ordering::SeqCst);
                let mut first = FIRST_PANIC.lock().unwrap_or_else(|e| e.into_inner());
                if first.is_none() {
                    let thread = std::thread::current().name().unwrap_or("?").to_string();
                    *first = Some(format!("on thread {thread}: {info}"));
                }
            }
            previous(info);
        }));
    });
}

// ---------------------------------------------------------------------------------------------
// What a step is
// ---------------------------------------------------------------------------------------------

/// A JSON fragment, possibly invalid; the big ones are rendered only when sent.
#[derive(Debug, Clone)]
enum Frag {
    /// Literal text.
    Raw(String),
    /// `n` nested arrays.
    Nested(usize),
    /// A string of `n` characters.
    Long(usize),
    /// An object with `n` distinct (valid) resource names.
    ManyNames(usize),
    /// A random JSON value.
    Json(Value),
}

impl Frag {
    fn render(&self) -> String {
        match self {
            Frag::Raw(s) => s.clone(),
            Frag::Nested(n) => format!("{}{}", "[".repeat(*n), "]".repeat(*n)),
            Frag::Long(n) => format!("\"{}\"", "é".repeat(*n / 2)),
            Frag::ManyNames(n) => {
                let mut s = String::from("{");
                for i in 0..*n {
                    let sep = if i == 0 { "" } else { "," };
                    let _ = write!(s, "{sep}\"r{i}\":1");
                }
                s.push('}');
                s
            }
            Frag::Json(v) => v.to_string(),
        }
    }
}

/// How an id is chosen: one the cluster knows, a fresh one, or junk.
#[derive(Debug, Clone)]
enum Pick {
    Known(Index),
    Fresh,
    Junk(Index),
}

/// Junk for path segments (already URL-safe or percent-encoded).
const JUNK_PATH: &[&str] = &[
    "not-a-uuid",
    "%00",
    "%2e%2e",
    "..",
    "%F0%9F%99%82",
    "00000000-0000-0000-0000-000000000000",
    "ffffffff-ffff-ffff-ffff-ffffffffffffffff",
    "%20",
    "a%2Fb",
];

/// What is sent with a body: the Content-Type header.
#[derive(Debug, Clone, Copy)]
enum Ct {
    Json,
    JsonUtf8,
    Missing,
    Text,
    Form,
}

/// How the body of a step is made from the call's well-formed body.
#[derive(Debug, Clone)]
enum Shape {
    /// As is.
    Valid,
    /// One field (by index; one past the end adds an unknown field) replaced by a fragment.
    Mutate(Index, Frag),
    /// The whole body replaced by a fragment.
    Replace(Frag),
    /// Cut at a fraction of its length.
    Truncate(Index),
    /// No body at all.
    Empty,
}

/// One endpoint call, with the choices it needs.
#[derive(Debug, Clone)]
enum Call {
    RegisterFramework {
        id: Option<Pick>,
        role: Index,
        demand: bool,
    },
    Subscribe(Pick),
    Disconnect(Index),
    Accept {
        offer: Pick,
        own: bool,
        tasks: usize,
        task: Pick,
        /// Which of [`TASK_RESOURCES`].
        res: Index,
        /// Which offers: 0 the one, 1 it twice, 2 another of the same agent too, 3 another of
        /// another agent too.
        offers: u8,
        /// Every task with the same id.
        dup: bool,
    },
    Decline {
        offer: Pick,
        own: bool,
    },
    /// `POST /api/v1/frameworks/{id}/reserve` (or `unreserve`) on an offer, with one of
    /// [`TASK_RESOURCES`].
    Reserve {
        offer: Pick,
        own: bool,
        unreserve: bool,
        res: Index,
    },
    Suppress(Pick),
    Revive(Pick),
    Kill(Pick, Pick),
    Acknowledge(Pick, Pick),
    Acknowledgements(Pick, Pick, usize),
    Reconcile(Pick, Pick, usize),
    Delete(Pick),
    Explain(Pick),
    SetWeight(Index),
    /// `PUT /api/v1/roles/{role}` with a guarantee and/or a limit (which of [`QUOTAS`] each).
    SetQuota {
        role: Index,
        guarantee: Option<Index>,
        limit: Option<Index>,
    },
    /// `POST /api/v1/agents/{id}/drain` with one of [`DRAIN_DEADLINES`].
    Drain(Pick, Index),
    /// `POST /api/v1/agents/{id}/reactivate`.
    Reactivate(Pick),
    RegisterAgent {
        id: Option<Pick>,
        endpoint: Index,
        /// Which of [`AGENT_RESOURCES`].
        res: Index,
        /// The task statuses it reports, picked from the books' tasks.
        tasks: Vec<Pick>,
        state: Index,
    },
    Heartbeat(Pick),
    Status {
        agent: Pick,
        task: Pick,
        state: Index,
        own: bool,
        /// Which of [`TASK_RESOURCES`] it reports, if any.
        res: Option<Index>,
    },
    Statuses {
        agent: Pick,
        task: Pick,
        state: Index,
        count: usize,
    },
    Read(Index, Pick),
    Raw {
        method: Index,
        path: Index,
        id: Pick,
    },
}

/// One step: a call, from one of several clients, with its body's shape and Content-Type.
#[derive(Debug, Clone)]
struct Step {
    client: Index,
    /// With credentials: sent as the principal the call is meant for (the framework's owner,
    /// the agent principal, an operator) rather than as `client`.
    natural: bool,
    call: Call,
    shape: Shape,
    ct: Ct,
}

// ---------------------------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------------------------

const LITERALS: &[&str] = &[
    "null",
    "true",
    "[]",
    "{}",
    "0",
    "-0",
    "-1",
    "0.0004",
    "0.0005",
    "1e9",
    "1000000000.001",
    "1e308",
    "-1e308",
    "1e309",
    "1e-400",
    "18446744073709551616",
    "-9223372036854775809",
    "123456789012345678901234567890",
    "NaN",
    "Infinity",
    "-Infinity",
    "\"\"",
    "\" \"",
    "\"eng\"",
    "\"_reserved\"",
    "\"eng//x\"",
    "\"/eng\"",
    "\"eng/\"",
    "\"a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r\"",
    "\"cpus=1\"",
    "{\"cpus\":-1}",
    "{\"cpus\":1e10}",
    "{\"cpus\":0}",
    "{\"CPU\":1}",
    "{\"\":1}",
    "{\"cpus\":\"1\"}",
    "{\"cpus\":1,\"cpus\":2}",
    "{\"shell\":\"\"}",
    "{\"argv\":[]}",
    "{\"shell\":\"a\\u0000b\"}",
    "[1,2,",
    "{\"a\":",
    "\"\\ud800\"",
    "\"\\u0000\"",
    "\"00000000-0000-0000-0000-000000000000\"",
    "[\"00000000-0000-0000-0000-000000000000\"]",
];

/// Field names of the API, so that random objects hit real fields.
const FIELDS: &[&str] = &[
    "name",
    "role",
    "demand",
    "framework_id",
    "failover_timeout_s",
    "offer_ids",
    "tasks",
    "task_id",
    "task_ids",
    "update_id",
    "refuse_seconds",
    "weight",
    "hostname",
    "endpoint",
    "resources",
    "attributes",
    "agent_id",
    "statuses",
    "acknowledgements",
    "state",
    "command",
    "cpus",
    "mem",
    "guarantee",
    "limit",
    "deadline_s",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<f64>().prop_map(|f| serde_json::json!(f)),
        any::<i64>().prop_map(|i| serde_json::json!(i)),
        ".{0,12}".prop_map(Value::String),
    ];
    let key = prop_oneof![
        proptest::sample::select(FIELDS).prop_map(str::to_owned),
        "[a-z_]{0,8}",
    ];
    leaf.prop_recursive(4, 32, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn frag() -> impl Strategy<Value = Frag> {
    prop_oneof![
        6 => proptest::sample::select(LITERALS).prop_map(|s| Frag::Raw(s.to_owned())),
        2 => any::<f64>().prop_map(|f| Frag::Raw(serde_json::json!(f).to_string())),
        1 => any::<u64>().prop_map(|n| Frag::Raw(n.to_string())),
        1 => any::<i64>().prop_map(|n| Frag::Raw(n.to_string())),
        3 => ".{0,24}".prop_map(|s| Frag::Raw(Value::String(s).to_string())),
        1 => proptest::sample::select(vec![129usize, 10_000, 200_000]).prop_map(Frag::Nested),
        1 => proptest::sample::select(vec![300usize, 70_000, 2_000_000]).prop_map(Frag::Long),
        1 => proptest::sample::select(vec![33usize, 300, 3_000]).prop_map(Frag::ManyNames),
        3 => json_value().prop_map(Frag::Json),
    ]
}

fn pick() -> impl Strategy<Value = Pick> {
    prop_oneof![
        8 => any::<Index>().prop_map(Pick::Known),
        1 => Just(Pick::Fresh),
        1 => any::<Index>().prop_map(Pick::Junk),
    ]
}

fn call() -> impl Strategy<Value = Call> {
    prop_oneof![
        6 => (prop::option::weighted(0.2, pick()), any::<Index>(), any::<bool>())
            .prop_map(|(id, role, demand)| Call::RegisterFramework { id, role, demand }),
        5 => pick().prop_map(Call::Subscribe),
        1 => any::<Index>().prop_map(Call::Disconnect),
        8 => (
            (pick(), prop::bool::weighted(0.9), 0usize..4, pick()),
            (any::<Index>(), prop_oneof![6 => Just(0u8), 1 => 1u8..4], prop::bool::weighted(0.1)),
        )
            .prop_map(|((offer, own, tasks, task), (res, offers, dup))| Call::Accept {
                offer,
                own,
                tasks,
                task,
                res,
                offers,
                dup,
            }),
        3 => (pick(), prop::bool::weighted(0.9))
            .prop_map(|(offer, own)| Call::Decline { offer, own }),
        2 => (pick(), prop::bool::weighted(0.9), any::<bool>(), any::<Index>())
            .prop_map(|(offer, own, unreserve, res)| Call::Reserve { offer, own, unreserve, res }),
        1 => pick().prop_map(Call::Suppress),
        1 => pick().prop_map(Call::Revive),
        2 => (pick(), pick()).prop_map(|(f, t)| Call::Kill(f, t)),
        1 => (pick(), pick()).prop_map(|(f, t)| Call::Acknowledge(f, t)),
        1 => (pick(), pick(), 0usize..300).prop_map(|(f, t, n)| Call::Acknowledgements(f, t, n)),
        2 => (pick(), pick(), 0usize..3000).prop_map(|(f, t, n)| Call::Reconcile(f, t, n)),
        1 => pick().prop_map(Call::Delete),
        1 => pick().prop_map(Call::Explain),
        1 => any::<Index>().prop_map(Call::SetWeight),
        1 => (
            any::<Index>(),
            prop::option::weighted(0.7, any::<Index>()),
            prop::option::weighted(0.7, any::<Index>()),
        )
            .prop_map(|(role, guarantee, limit)| Call::SetQuota { role, guarantee, limit }),
        1 => (pick(), any::<Index>()).prop_map(|(a, d)| Call::Drain(a, d)),
        1 => pick().prop_map(Call::Reactivate),
        2 => (
            prop::option::weighted(0.3, pick()),
            any::<Index>(),
            any::<Index>(),
            prop_oneof![3 => Just(vec![]), 1 => prop::collection::vec(pick(), 1..4)],
            any::<Index>(),
        )
            .prop_map(|(id, endpoint, res, tasks, state)| Call::RegisterAgent {
                id,
                endpoint,
                res,
                tasks,
                state,
            }),
        1 => pick().prop_map(Call::Heartbeat),
        2 => (
            pick(),
            pick(),
            any::<Index>(),
            prop::bool::weighted(0.8),
            prop::option::weighted(0.3, any::<Index>()),
        )
            .prop_map(|(agent, task, state, own, res)| Call::Status {
                agent,
                task,
                state,
                own,
                res,
            }),
        1 => (pick(), pick(), any::<Index>(), 0usize..50)
            .prop_map(|(agent, task, state, count)| Call::Statuses { agent, task, state, count }),
        2 => (any::<Index>(), pick()).prop_map(|(i, p)| Call::Read(i, p)),
        2 => (any::<Index>(), any::<Index>(), pick())
            .prop_map(|(method, path, id)| Call::Raw { method, path, id }),
    ]
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        10 => Just(Shape::Valid),
        6 => (any::<Index>(), frag()).prop_map(|(i, f)| Shape::Mutate(i, f)),
        2 => frag().prop_map(Shape::Replace),
        1 => any::<Index>().prop_map(Shape::Truncate),
        1 => Just(Shape::Empty),
    ]
}

fn ct() -> impl Strategy<Value = Ct> {
    prop_oneof![
        12 => Just(Ct::Json),
        1 => Just(Ct::JsonUtf8),
        1 => Just(Ct::Missing),
        1 => Just(Ct::Text),
        1 => Just(Ct::Form),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    (
        any::<Index>(),
        prop::bool::weighted(0.6),
        call(),
        shape(),
        ct(),
    )
        .prop_map(|(client, natural, call, shape, ct)| Step {
            client,
            natural,
            call,
            shape,
            ct,
        })
}

// ---------------------------------------------------------------------------------------------
// Rendering a step against the current books
// ---------------------------------------------------------------------------------------------

/// The ids the cluster knows, from one snapshot.
struct Known<'a> {
    state: &'a ClusterState,
}

fn fresh() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn choose<'v>(items: &'v [String], index: &Index) -> Option<&'v String> {
    (!items.is_empty()).then(|| &items[index.index(items.len())])
}

impl Known<'_> {
    fn frameworks(&self) -> Vec<String> {
        let s = self.state;
        s.frameworks
            .iter()
            .map(|f| f.framework_id.to_string())
            .collect()
    }

    fn agents(&self) -> Vec<String> {
        let s = self.state;
        s.agents.iter().map(|a| a.agent_id.to_string()).collect()
    }

    fn tasks(&self) -> Vec<String> {
        let s = self.state;
        s.tasks.iter().map(|t| t.task_id.to_string()).collect()
    }

    /// An id for a path segment.
    fn path_id(&self, pool: &[String], pick: &Pick) -> String {
        match pick {
            Pick::Known(i) => choose(pool, i).cloned().unwrap_or_else(fresh),
            Pick::Fresh => fresh(),
            Pick::Junk(i) => JUNK_PATH[i.index(JUNK_PATH.len())].to_owned(),
        }
    }

    /// An id as a JSON value.
    fn body_id(&self, pool: &[String], pick: &Pick) -> String {
        match pick {
            Pick::Junk(i) => {
                ["\"\"", "\"bad id\"", "42", "null", "\"a/../b\"", "\"é\""][i.index(6)].to_owned()
            }
            other => Value::String(self.path_id(pool, other)).to_string(),
        }
    }

    /// The offer a call on an offer names (a known one, when picked and there is any), the
    /// framework it is sent as (the offer's own when `own`, else a picked one) and the offer id
    /// as a JSON value.
    fn offer_call(&self, offer: &Pick, own: bool) -> (Option<&protocol::Offer>, String, String) {
        let offers = &self.state.offers;
        let chosen = match offer {
            Pick::Known(i) if !offers.is_empty() => Some(&offers[i.index(offers.len())]),
            _ => None,
        };
        let framework = match (chosen, own) {
            (Some(o), true) => o.framework_id.to_string(),
            _ => self.path_id(&self.frameworks(), offer),
        };
        let offer_id = chosen.map_or_else(
            || {
                let ids: Vec<String> = offers.iter().map(|o| o.offer_id.to_string()).collect();
                self.body_id(&ids, offer)
            },
            |o| Value::String(o.offer_id.to_string()).to_string(),
        );
        (chosen, framework, offer_id)
    }

    /// A task id for a body: a known one, or a fresh valid one.
    fn task_id(&self, pick: &Pick) -> String {
        let tasks = self.tasks();
        match pick {
            Pick::Known(_) | Pick::Junk(_)
                if !tasks.is_empty() || matches!(pick, Pick::Junk(_)) =>
            {
                self.body_id(&tasks, pick)
            }
            _ => Value::String(format!("h-{}", &fresh()[..8])).to_string(),
        }
    }
}

/// A request, ready to send.
struct Request {
    method: reqwest::Method,
    path: String,
    body: Option<Vec<u8>>,
    /// An event stream to keep open (subscribe), not a call to read to the end.
    stream_of: Option<String>,
}

const ROLES: &[&str] = &[
    "eng",
    "eng/batch",
    "eng/web",
    "ops",
    "ops/x/y",
    "a",
    "research",
];
/// Task resources in accepts and reported statuses.
const TASK_RESOURCES: &[&str] = &[
    r#"{"cpus":0.01,"mem":1}"#,
    r#"{"cpus":0.01,"mem":1}"#,
    r#"{"cpus":0.01,"mem":1}"#,
    r#"{"cpus":1}"#,
    r#"{"cpus":4,"mem":4096}"#,
    r#"{"gpus":1}"#,
    r#"{"cpus":0}"#,
    r#"{"cpus":0.0004}"#,
    r#"{}"#,
    r#"{"cpus":1e9}"#,
    r#"{"cpus":0.01,"mem":1,"disk":0}"#,
];
/// Agent totals in registrations.
const AGENT_RESOURCES: &[&str] = &[
    r#"{"cpus":2,"mem":512}"#,
    r#"{"cpus":2,"mem":512}"#,
    r#"{"cpus":0.001}"#,
    r#"{"gpus":2}"#,
    r#"{"cpus":1e9,"mem":1e9}"#,
    r#"{"cpus":0}"#,
    r#"{"cpus":4,"mem":4096,"disk":100,"gpus":1}"#,
];
/// Guarantees and limits in quota calls: valid, null (clears), and a few the coordinator must
/// refuse as a whole body (an unknown resource, a negative amount).
const QUOTAS: &[&str] = &[
    r#"{"cpus":1}"#,
    r#"{"cpus":0.5,"mem":128}"#,
    r#"{"cpus":100,"mem":100000}"#,
    r#"{"cpus":0}"#,
    "null",
    r#"{"cpus":-1}"#,
    r#"{"bogus":1}"#,
    r#"{"mem":1e10}"#,
];
/// Drain deadlines in seconds: all valid (mutations make the bad ones), and all far beyond the
/// suite's run, so that no deadline kill lands between a call and the snapshot after it.
const DRAIN_DEADLINES: &[&str] = &["3600", "86400", "2592000"];
const ENDPOINTS: &[&str] = &[
    "http://127.0.0.1:1",
    "http://127.0.0.1:1/",
    "http://[::1]:1",
    "https://localhost:1/x",
    "ftp://127.0.0.1:1",
    "127.0.0.1:1",
    "http://",
];
const STATES: &[&str] = &[
    "staging", "starting", "running", "finished", "failed", "killed", "lost", "error",
];
const READS: &[&str] = &[
    "/api/v1/offers",
    "/api/v1/offers?framework_id=",
    "/api/v1/offers?agent_id=",
    "/api/v1/offers?bogus=1",
    "/api/v1/tasks",
    "/api/v1/tasks?framework_id=",
    "/api/v1/tasks?framework_id=1&framework_id=2",
    "/api/v1/tasks?state=running",
    "/api/v1/tasks?state=RUNNING",
    "/api/v1/tasks?state=%00",
    "/api/v1/offers?framework_id=%ZZ",
    "/api/v1/offers?agent_id=%00&agent_id=%F0%9F",
    "/api/v1/tasks?=&&=&framework_id",
    "/api/v1/state",
    "/api/v1/roles",
    "/api/v1/frameworks",
    "/api/v1/agents",
    "/metrics",
    "/health",
    "/",
    "/ui/app.js",
];
const RAW_PATHS: &[&str] = &[
    "/api/v1/frameworks/{}",
    "/api/v1/frameworks/{}/accept",
    "/api/v1/frameworks/{}/events/x",
    "/api/v1/agents/{}",
    "/api/v1/agents/{}/status",
    "/api/v1/roles/{}",
    "/api/v1/roles/",
    "/api/v1/roles/a//b",
    "/api/v1/roles/%5Fsys",
    "/api/v1/state/{}",
    "/api/v2/{}",
    "/{}",
];

fn object(fields: &[(&str, String)]) -> Vec<(String, String)> {
    fields
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

fn small_resources() -> String {
    r#"{"cpus":0.01,"mem":1}"#.to_owned()
}

impl Step {
    /// The request this step sends, given the current books.
    fn render(&self, known: &Known<'_>) -> Request {
        let s = known.state;
        let frameworks = known.frameworks();
        let agents = known.agents();
        let fw = |p: &Pick| known.path_id(&frameworks, p);
        let post = |path: String, body: Vec<(String, String)>| (reqwest::Method::POST, path, body);
        let (method, path, body) = match &self.call {
            Call::RegisterFramework { id, role, demand } => {
                let mut body = object(&[
                    (
                        "name",
                        Value::String(format!("hostile-{}", role.index(1000))).to_string(),
                    ),
                    (
                        "role",
                        Value::String(ROLES[role.index(ROLES.len())].into()).to_string(),
                    ),
                ]);
                if let Some(id) = id {
                    body.push(("framework_id".into(), known.body_id(&frameworks, id)));
                }
                if *demand {
                    body.push(("demand".into(), small_resources()));
                }
                post("/api/v1/frameworks".into(), body)
            }
            Call::Subscribe(p) => {
                let id = fw(p);
                return Request {
                    method: reqwest::Method::GET,
                    path: format!("/api/v1/frameworks/{id}/events"),
                    body: None,
                    stream_of: Some(id),
                };
            }
            Call::Disconnect(_) => unreachable!("handled by the runner"),
            Call::Accept {
                offer,
                own,
                tasks,
                task,
                res,
                offers: which,
                dup,
            } => {
                let (chosen, framework, offer_id) = known.offer_call(offer, *own);
                let agent = chosen.map_or_else(fresh, |o| o.agent_id.to_string());
                let mut offer_ids = vec![offer_id.clone()];
                if let Some(o) = chosen {
                    let other = s.offers.iter().find(|x| {
                        x.offer_id != o.offer_id
                            && x.framework_id == o.framework_id
                            && (x.agent_id == o.agent_id) == (*which == 2)
                    });
                    match (which, other) {
                        (1, _) => offer_ids.push(offer_id),
                        (2 | 3, Some(x)) => offer_ids.push(format!("\"{}\"", x.offer_id)),
                        _ => {}
                    }
                }
                let resources = TASK_RESOURCES[res.index(TASK_RESOURCES.len())];
                let first = known.task_id(task);
                let specs: Vec<String> = (0..*tasks)
                    .map(|n| {
                        let id = if n == 0 || *dup {
                            first.clone()
                        } else {
                            known.task_id(&Pick::Fresh)
                        };
                        format!(
                            r#"{{"task_id":{id},"name":"h","agent_id":"{agent}","resources":{resources},"command":{{"shell":"sleep 1000"}}}}"#,
                        )
                    })
                    .collect();
                post(
                    format!("/api/v1/frameworks/{framework}/accept"),
                    object(&[
                        ("offer_ids", format!("[{}]", offer_ids.join(","))),
                        ("tasks", format!("[{}]", specs.join(","))),
                        ("refuse_seconds", "0.05".into()),
                    ]),
                )
            }
            Call::Reserve {
                offer,
                own,
                unreserve,
                res,
            } => {
                let (_, framework, offer_id) = known.offer_call(offer, *own);
                let op = if *unreserve { "unreserve" } else { "reserve" };
                post(
                    format!("/api/v1/frameworks/{framework}/{op}"),
                    object(&[
                        ("offer_id", offer_id),
                        (
                            "resources",
                            TASK_RESOURCES[res.index(TASK_RESOURCES.len())].into(),
                        ),
                    ]),
                )
            }
            Call::Decline { offer, own } => {
                let (_, framework, offer_id) = known.offer_call(offer, *own);
                post(
                    format!("/api/v1/frameworks/{framework}/decline"),
                    object(&[
                        ("offer_ids", format!("[{offer_id}]")),
                        ("refuse_seconds", "0.05".into()),
                    ]),
                )
            }
            Call::Suppress(p) => post(format!("/api/v1/frameworks/{}/suppress", fw(p)), vec![]),
            Call::Revive(p) => post(
                format!("/api/v1/frameworks/{}/revive", fw(p)),
                object(&[("demand", small_resources())]),
            ),
            Call::Kill(f, t) => post(
                format!("/api/v1/frameworks/{}/kill", fw(f)),
                object(&[("task_id", known.task_id(t))]),
            ),
            Call::Acknowledge(f, t) => post(
                format!("/api/v1/frameworks/{}/acknowledge", fw(f)),
                object(&[
                    ("task_id", known.task_id(t)),
                    ("update_id", Value::String(fresh()).to_string()),
                ]),
            ),
            Call::Acknowledgements(f, t, n) => {
                let one = format!(
                    r#"{{"task_id":{},"update_id":"{}"}}"#,
                    known.task_id(t),
                    fresh()
                );
                post(
                    format!("/api/v1/frameworks/{}/acknowledgements", fw(f)),
                    object(&[("acknowledgements", format!("[{}]", vec![one; *n].join(",")))]),
                )
            }
            Call::Reconcile(f, t, n) => {
                let ids = vec![known.task_id(t); *n].join(",");
                post(
                    format!("/api/v1/frameworks/{}/reconcile", fw(f)),
                    object(&[("task_ids", format!("[{ids}]"))]),
                )
            }
            Call::Delete(p) => (
                reqwest::Method::DELETE,
                format!("/api/v1/frameworks/{}", fw(p)),
                vec![],
            ),
            Call::Explain(p) => (
                reqwest::Method::GET,
                format!("/api/v1/frameworks/{}/explain", fw(p)),
                vec![],
            ),
            Call::SetWeight(i) => (
                reqwest::Method::PUT,
                format!("/api/v1/roles/{}", ROLES[i.index(ROLES.len())]),
                object(&[("weight", "2.5".into())]),
            ),
            Call::SetQuota {
                role,
                guarantee,
                limit,
            } => {
                let mut body = vec![];
                if let Some(g) = guarantee {
                    body.push(("guarantee".into(), QUOTAS[g.index(QUOTAS.len())].into()));
                }
                if let Some(l) = limit {
                    body.push(("limit".into(), QUOTAS[l.index(QUOTAS.len())].into()));
                }
                (
                    reqwest::Method::PUT,
                    format!("/api/v1/roles/{}", ROLES[role.index(ROLES.len())]),
                    body,
                )
            }
            Call::Drain(a, d) => post(
                format!("/api/v1/agents/{}/drain", known.path_id(&agents, a)),
                object(&[(
                    "deadline_s",
                    DRAIN_DEADLINES[d.index(DRAIN_DEADLINES.len())].into(),
                )]),
            ),
            Call::Reactivate(a) => post(
                format!("/api/v1/agents/{}/reactivate", known.path_id(&agents, a)),
                vec![],
            ),
            Call::RegisterAgent {
                id,
                endpoint,
                res,
                tasks,
                state,
            } => {
                let mut body = object(&[
                    ("hostname", "\"hostile-host\"".into()),
                    (
                        "endpoint",
                        Value::String(ENDPOINTS[endpoint.index(ENDPOINTS.len())].into())
                            .to_string(),
                    ),
                    (
                        "resources",
                        AGENT_RESOURCES[res.index(AGENT_RESOURCES.len())].into(),
                    ),
                ]);
                if let Some(id) = id {
                    let agent_id = known.body_id(&agents, id);
                    let reported: Vec<String> = tasks
                        .iter()
                        .map(|task| {
                            let (_, status) = status_body(known, &Pick::Fresh, task, state, true);
                            // Reported as this agent's, whichever agent the books say.
                            let mut status = parse_object(&status);
                            for field in &mut status {
                                if field.0 == "agent_id" {
                                    field.1 = agent_id.clone();
                                }
                            }
                            String::from_utf8_lossy(&Shape::Valid.apply(status)).into_owned()
                        })
                        .collect();
                    body.push(("agent_id".into(), agent_id));
                    body.push(("tasks".into(), format!("[{}]", reported.join(","))));
                }
                post("/api/v1/agents".into(), body)
            }
            Call::Heartbeat(p) => post(
                format!("/api/v1/agents/{}/heartbeat", known.path_id(&agents, p)),
                vec![],
            ),
            Call::Status {
                agent,
                task,
                state,
                own,
                res,
            } => {
                let (path_agent, status) = status_body(known, agent, task, state, *own);
                let mut body = parse_object(&status);
                if let Some(res) = res {
                    let resources = TASK_RESOURCES[res.index(TASK_RESOURCES.len())];
                    body.push(("resources".into(), resources.into()));
                }
                post(format!("/api/v1/agents/{path_agent}/status"), body)
            }
            Call::Statuses {
                agent,
                task,
                state,
                count,
            } => {
                let (path_agent, status) = status_body(known, agent, task, state, true);
                let all = vec![status; *count].join(",");
                post(
                    format!("/api/v1/agents/{path_agent}/statuses"),
                    object(&[("statuses", format!("[{all}]"))]),
                )
            }
            Call::Read(i, p) => {
                let mut path = READS[i.index(READS.len())].to_owned();
                if path.ends_with('=') {
                    path.push_str(&known.path_id(&frameworks, p));
                }
                (reqwest::Method::GET, path, vec![])
            }
            Call::Raw { method, path, id } => {
                let methods = [
                    reqwest::Method::GET,
                    reqwest::Method::POST,
                    reqwest::Method::PUT,
                    reqwest::Method::DELETE,
                    reqwest::Method::PATCH,
                ];
                let template = RAW_PATHS[path.index(RAW_PATHS.len())];
                let path = template.replace("{}", &known.path_id(&frameworks, id));
                (
                    methods[method.index(methods.len())].clone(),
                    path,
                    object(&[("x", "1".into())]),
                )
            }
        };
        let body = if method == reqwest::Method::GET && matches!(self.shape, Shape::Valid) {
            None
        } else {
            Some(self.shape.apply(body))
        };
        Request {
            method,
            path,
            body,
            stream_of: None,
        }
    }
}

/// The body of a status update: `(path agent, JSON)`; `own` sends it as the task's own agent.
fn status_body(
    known: &Known<'_>,
    agent: &Pick,
    task: &Pick,
    state: &Index,
    own: bool,
) -> (String, String) {
    let s = known.state;
    let existing = match task {
        Pick::Known(i) if !s.tasks.is_empty() => Some(&s.tasks[i.index(s.tasks.len())]),
        _ => None,
    };
    let agents = known.agents();
    let path_agent = match (existing, own) {
        (Some(t), true) => t.agent_id.to_string(),
        _ => known.path_id(&agents, agent),
    };
    let (task_id, framework_id) = match existing {
        Some(t) => (
            Value::String(t.task_id.to_string()).to_string(),
            t.framework_id.to_string(),
        ),
        None => (
            known.task_id(task),
            known.path_id(&known.frameworks(), task),
        ),
    };
    let status = format!(
        r#"{{"task_id":{task_id},"framework_id":"{framework_id}","agent_id":"{path_agent}","state":"{}","update_id":"{}","timestamp":"2026-01-01T00:00:00Z"}}"#,
        STATES[state.index(STATES.len())],
        fresh()
    );
    (path_agent, status)
}

/// A rendered JSON object back into fields (for bodies written whole).
fn parse_object(text: &str) -> Vec<(String, String)> {
    match serde_json::from_str::<serde_json::Map<String, Value>>(text) {
        Ok(map) => map.into_iter().map(|(k, v)| (k, v.to_string())).collect(),
        Err(_) => vec![],
    }
}

impl Shape {
    fn apply(&self, mut fields: Vec<(String, String)>) -> Vec<u8> {
        let join = |fields: &[(String, String)]| {
            let inner: Vec<String> = fields
                .iter()
                .map(|(k, v)| format!("{}:{v}", Value::String(k.clone())))
                .collect();
            format!("{{{}}}", inner.join(","))
        };
        match self {
            Shape::Valid => join(&fields).into_bytes(),
            Shape::Mutate(i, frag) => {
                let at = i.index(fields.len() + 1);
                match fields.get_mut(at) {
                    Some(field) => field.1 = frag.render(),
                    None => fields.push(("hostile".into(), frag.render())),
                }
                join(&fields).into_bytes()
            }
            Shape::Replace(frag) => frag.render().into_bytes(),
            Shape::Truncate(i) => {
                let mut bytes = join(&fields).into_bytes();
                bytes.truncate(i.index(bytes.len().max(1)));
                bytes
            }
            Shape::Empty => Vec::new(),
        }
    }
}

impl Ct {
    fn header(self) -> Option<&'static str> {
        match self {
            Ct::Json => Some("application/json"),
            Ct::JsonUtf8 => Some("application/json; charset=utf-8"),
            Ct::Missing => None,
            Ct::Text => Some("text/plain"),
            Ct::Form => Some("application/x-www-form-urlencoded"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The world: a live cluster, clients, open streams, and the checks
// ---------------------------------------------------------------------------------------------

/// Who sends a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    /// Anyone, without credentials configured.
    Open,
    /// A framework principal with these role patterns.
    Framework(&'static [&'static str]),
    /// The agent principal (the simulated agents' too).
    Agent,
    /// A `read` operator (the harness's own reads).
    Read,
    /// An `admin` operator.
    Admin,
    /// A client without a token, or with one no principal has.
    Stranger,
}

/// A client and the principal it acts as.
struct Identity {
    name: &'static str,
    token: Option<&'static str>,
    who: Who,
    client: reqwest::Client,
}

impl Identity {
    fn new(name: &'static str, token: Option<&'static str>, who: Who) -> Self {
        Self {
            name,
            token,
            who,
            client: reqwest::Client::new(),
        }
    }
}

const ENG_TOKEN: &str = "hostile-token-eng-team-0123456789abcdef";
const OPS_TOKEN: &str = "hostile-token-ops-team-0123456789abcdef";
const AGENT_TOKEN: &str = "hostile-token-nodes-0123456789abcdef";
const READ_TOKEN: &str = "hostile-token-reader-0123456789abcdef";
const ADMIN_TOKEN: &str = "hostile-token-admin-0123456789abcdef";
const ENG_ROLES: &[&str] = &["eng/*"];
const OPS_ROLES: &[&str] = &["ops"];
/// `max_frameworks` of `ops-team`.
const OPS_MAX_FRAMEWORKS: usize = 2;

/// The credentials file of the suite with credentials.
fn credentials() -> coordinator::auth::Credentials {
    let h = |t: &str| coordinator::auth::SecretHash::of(t).to_hex();
    coordinator::auth::Credentials::from_toml(&format!(
        r#"
[[principals]]
name = "eng-team"
kind = "framework"
secret_sha256 = "{}"
roles = ["eng/*"]

[[principals]]
name = "ops-team"
kind = "framework"
secret_sha256 = "{}"
roles = ["ops"]
max_frameworks = {OPS_MAX_FRAMEWORKS}

[[principals]]
name = "nodes"
kind = "agent"
secret_sha256 = "{}"

[[principals]]
name = "reader"
kind = "operator"
access = "read"
secret_sha256 = "{}"

[[principals]]
name = "admin"
kind = "operator"
access = "admin"
secret_sha256 = "{}"
"#,
        h(ENG_TOKEN),
        h(OPS_TOKEN),
        h(AGENT_TOKEN),
        h(READ_TOKEN),
        h(ADMIN_TOKEN),
    ))
    .unwrap()
}

/// Every principal of [`credentials`], a client without a token and one with a wrong token.
fn identities() -> Vec<Identity> {
    vec![
        Identity::new("eng-team", Some(ENG_TOKEN), Who::Framework(ENG_ROLES)),
        Identity::new("ops-team", Some(OPS_TOKEN), Who::Framework(OPS_ROLES)),
        Identity::new("nodes", Some(AGENT_TOKEN), Who::Agent),
        Identity::new("reader", Some(READ_TOKEN), Who::Read),
        Identity::new("admin", Some(ADMIN_TOKEN), Who::Admin),
        Identity::new("no-token", None, Who::Stranger),
        Identity::new(
            "wrong-token",
            Some("hostile-token-nobody-0123456789abcdef"),
            Who::Stranger,
        ),
    ]
}

/// Whether a role pattern of the credentials file (`*`, `eng/*`, `ops`) covers `role`.
fn role_matches(patterns: &[&str], role: &str) -> bool {
    patterns.iter().any(|p| match p.strip_suffix("/*") {
        _ if *p == "*" => true,
        Some(prefix) => role == prefix || role.starts_with(&format!("{prefix}/")),
        None => role == *p,
    })
}

/// The framework id a path acts on (`/api/v1/frameworks/{id}/..`).
fn framework_in(path: &str) -> Option<&str> {
    let rest = path
        .split('?')
        .next()?
        .strip_prefix("/api/v1/frameworks/")?;
    rest.split('/').next().filter(|id| !id.is_empty())
}

impl World {
    /// The index in `who` of the identity that sends `step`.
    fn caller(&self, step: &Step, path: &str) -> usize {
        let any = step.client.index(self.who.len());
        if !step.natural || self.who.iter().all(|i| i.who == Who::Open) {
            return any;
        }
        let named = |name: &str| self.who.iter().position(|i| i.name == name).unwrap_or(any);
        match &step.call {
            Call::RegisterFramework { role, .. } => {
                let role = ROLES[role.index(ROLES.len())];
                if role_matches(ENG_ROLES, role) {
                    named("eng-team")
                } else if role_matches(OPS_ROLES, role) {
                    named("ops-team")
                } else {
                    any
                }
            }
            Call::RegisterAgent { .. }
            | Call::Heartbeat(_)
            | Call::Status { .. }
            | Call::Statuses { .. } => named("nodes"),
            Call::SetWeight(_) | Call::SetQuota { .. } | Call::Drain(..) | Call::Reactivate(_) => {
                named("admin")
            }
            Call::Read(..) => named("reader"),
            _ => match framework_in(path).and_then(|id| self.owners.get(id)) {
                Some(owner) => named(owner),
                None => any,
            },
        }
    }

    /// Whether the identity `caller` may get a 2xx on `method path`: `Err` says why not.
    fn check_allowed(
        &self,
        caller: usize,
        method: &reqwest::Method,
        path: &str,
    ) -> Result<(), String> {
        use reqwest::Method;
        let me = &self.who[caller];
        let path = path.split('?').next().unwrap_or(path);
        let operator = matches!(me.who, Who::Read | Who::Admin);
        let ok = |allowed: bool, rule: &str| {
            if allowed {
                Ok(())
            } else {
                Err(format!("{rule}, and {} is {:?}", me.name, me.who))
            }
        };
        // Health, version, the login routes and the dashboard's static page and assets (which
        // hold no data) are open to anyone.
        let open = matches!(
            path,
            "/health"
                | "/version"
                | "/api/v1/login"
                | "/api/v1/logout"
                | "/"
                | "/ui/app.js"
                | "/ui/style.css"
        );
        match me.who {
            Who::Open => return Ok(()),
            _ if open => return Ok(()),
            Who::Stranger => return ok(false, "only health, version, login and the page are open"),
            _ => {}
        }
        if let Some(id) = framework_in(path) {
            if *method == Method::DELETE && me.who == Who::Admin {
                return Ok(());
            }
            if *method == Method::GET && !path.ends_with("/events") && operator {
                return Ok(());
            }
            return match self.owners.get(id) {
                Some(owner) if *owner == me.name => Ok(()),
                owner => Err(format!(
                    "framework {id} belongs to {owner:?}, not to {}",
                    me.name
                )),
            };
        }
        match (method, path) {
            (&Method::POST, "/api/v1/frameworks") => ok(
                matches!(me.who, Who::Framework(_)),
                "only framework principals register frameworks",
            ),
            (&Method::GET, "/api/v1/agents") => ok(
                operator || matches!(me.who, Who::Framework(_)),
                "only operators and frameworks list agents",
            ),
            (&Method::GET, _) => ok(operator, "only operators read"),
            (_, p) if p.starts_with("/api/v1/roles") => ok(
                me.who == Who::Admin,
                "only admin changes weights and quotas",
            ),
            (&Method::POST, p)
                if p.starts_with("/api/v1/agents/")
                    && (p.ends_with("/drain") || p.ends_with("/reactivate")) =>
            {
                ok(
                    me.who == Who::Admin,
                    "only admin drains and reactivates agents",
                )
            }
            (_, p) if p.starts_with("/api/v1/agents") => ok(
                me.who == Who::Agent,
                "only the agent principal acts as an agent",
            ),
            _ => ok(me.who == Who::Admin, "no other call is allowed"),
        }
    }

    /// Records who registered the framework of a 2xx `POST /api/v1/frameworks` answer; `Err`
    /// when it was someone else's.
    fn claim(&mut self, caller: usize, body: &[u8]) -> Result<(), String> {
        let me = &self.who[caller];
        if me.who == Who::Open {
            return Ok(());
        }
        let registered: protocol::messages::FrameworkRegistered =
            serde_json::from_slice(body).map_err(|e| format!("its answer does not parse: {e}"))?;
        let id = registered.framework_id.to_string();
        match self.owners.get(&id) {
            Some(owner) if *owner != me.name => Err(format!(
                "{} re-registered framework {id}, which belongs to {owner}",
                me.name
            )),
            _ => {
                self.owners.insert(id, me.name);
                Ok(())
            }
        }
    }

    /// With credentials: every framework in the books was registered by a principal whose
    /// role patterns cover its role (or is an unclaimed placeholder in `_orphans`), and
    /// `ops-team` has at most its `max_frameworks`.
    fn check_owners(&self, state: &ClusterState) -> Result<(), TestCaseError> {
        if self.who.iter().all(|i| i.who == Who::Open) {
            return Ok(());
        }
        let mut ops = 0;
        for fw in &state.frameworks {
            let id = fw.framework_id.to_string();
            let role = fw.role.to_string();
            let owner = self
                .owners
                .get(&id)
                .and_then(|o| self.who.iter().find(|i| i.name == *o));
            match owner.map(|o| (o.name, o.who)) {
                Some((name, Who::Framework(patterns))) if role_matches(patterns, &role) => {
                    ops += usize::from(name == "ops-team");
                }
                // The placeholder of a framework an agent reported a task of: nobody's until
                // a framework principal re-registers it.
                None if role == coordinator::state::ORPHAN_ROLE => {}
                other => {
                    return Err(fail(format!(
                        "framework {id} in role {role} registered by {other:?}"
                    )))
                }
            }
        }
        if ops > OPS_MAX_FRAMEWORKS {
            return Err(fail(format!(
                "ops-team has {ops} frameworks, more than its max_frameworks"
            )));
        }
        Ok(())
    }
}

struct World {
    cluster: Cluster,
    /// Who sends the calls: three anonymous clients in open mode, the principals of
    /// [`credentials`] (and clients without or with a wrong token) with credentials.
    who: Vec<Identity>,
    /// With credentials: the principal that registered each framework id (from the answers).
    owners: HashMap<String, &'static str>,
    streams: HashMap<String, SseReader>,
    calls: usize,
    by_status: BTreeMap<u16, usize>,
    by_call: BTreeMap<(String, u16), usize>,
}

/// A settled snapshot: the typed books and their comparable form.
struct Snapshot {
    state: ClusterState,
    comparable: Value,
}

fn fail(message: String) -> TestCaseError {
    TestCaseError::fail(message)
}

/// The state with volatile fields removed and every array sorted, so two snapshots of the same
/// books compare equal.
fn comparable(mut v: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(map) => {
                map.remove("last_heartbeat_at");
                map.values_mut().for_each(walk);
            }
            Value::Array(items) => {
                items.iter_mut().for_each(walk);
                items.sort_by_cached_key(|item| item.to_string());
            }
            _ => {}
        }
    }
    walk(&mut v);
    v
}

fn same_amounts(a: &Resources, b: &Resources) -> bool {
    a.names()
        .chain(b.names())
        .all(|n| a.millis(n.as_str()) == b.millis(n.as_str()))
}

/// The books balance: per agent and per framework, `offered` is the sum of the offers and
/// `used` the sum of the non-terminal tasks; on an agent both fit in its total.
fn check_books(state: &ClusterState) -> Result<(), TestCaseError> {
    for agent in &state.agents {
        let offered = state
            .offers
            .iter()
            .filter(|o| o.agent_id == agent.agent_id)
            .fold(Resources::new(), |sum, o| sum.add(&o.resources));
        let used = state
            .tasks
            .iter()
            .filter(|t| t.agent_id == agent.agent_id && !t.state.is_terminal())
            .fold(Resources::new(), |sum, t| sum.add(&t.resources));
        if !same_amounts(&offered, &agent.offered) || !same_amounts(&used, &agent.used) {
            return Err(fail(format!(
                "agent {}: offered {} / used {} but its offers sum to {offered} and its tasks \
                 to {used}",
                agent.agent_id, agent.offered, agent.used
            )));
        }
        if !agent.offered.add(&agent.used).fits_in(&agent.resources) {
            return Err(fail(format!(
                "agent {}: offered {} + used {} exceed its total {}",
                agent.agent_id, agent.offered, agent.used, agent.resources
            )));
        }
    }
    for fw in &state.frameworks {
        let offered = state
            .offers
            .iter()
            .filter(|o| o.framework_id == fw.framework_id)
            .fold(Resources::new(), |sum, o| sum.add(&o.resources));
        let used = state
            .tasks
            .iter()
            .filter(|t| t.framework_id == fw.framework_id && !t.state.is_terminal())
            .fold(Resources::new(), |sum, t| sum.add(&t.resources));
        if !same_amounts(&offered, &fw.offered) || !same_amounts(&used, &fw.used) {
            return Err(fail(format!(
                "framework {}: offered {} / used {} but its offers sum to {offered} and its \
                 tasks to {used}",
                fw.framework_id, fw.offered, fw.used
            )));
        }
    }
    Ok(())
}

impl World {
    async fn start(auth: bool) -> anyhow::Result<Self> {
        let config = coordinator::Config {
            allocation_interval: Duration::from_secs(3600),
            offer_timeout: Duration::from_secs(3600),
            agent_heartbeat_interval: Duration::from_millis(500),
            max_missed_heartbeats: 1000,
            default_failover_timeout: Duration::from_secs(3600),
            update_resend_interval: Duration::from_secs(60),
            ..fast_coordinator_config()
        };
        let mut builder = Cluster::builder()
            .config(config)
            .simulated_agents(2, "cpus=4,mem=4096");
        let who = if auth {
            builder = builder.credentials(credentials(), AGENT_TOKEN, READ_TOKEN);
            identities()
        } else {
            (0..3)
                .map(|_| Identity::new("open", None, Who::Open))
                .collect()
        };
        let cluster = builder.start().await?;
        Ok(Self {
            cluster,
            who,
            owners: HashMap::new(),
            streams: HashMap::new(),
            calls: 0,
            by_status: BTreeMap::new(),
            by_call: BTreeMap::new(),
        })
    }

    async fn snapshot(&self) -> Result<Snapshot, TestCaseError> {
        let url = format!("{}/api/v1/state", self.cluster.url);
        let resp = self
            .cluster
            .http
            .get(&url)
            .send()
            .await
            .map_err(|e| fail(format!("GET /api/v1/state: {e}")))?;
        if resp.status() != 200 {
            return Err(fail(format!(
                "GET /api/v1/state answered {}",
                resp.status()
            )));
        }
        let text = resp
            .text()
            .await
            .map_err(|e| fail(format!("GET /api/v1/state body: {e}")))?;
        let state: ClusterState = serde_json::from_str(&text)
            .map_err(|e| fail(format!("GET /api/v1/state does not parse: {e}")))?;
        let value: Value = serde_json::from_str(&text).map_err(|e| fail(e.to_string()))?;
        Ok(Snapshot {
            state,
            comparable: comparable(value),
        })
    }

    /// Polls the state until three snapshots in a row are the same; returns the last.
    async fn settled(&self) -> Result<Snapshot, TestCaseError> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut last = self.snapshot().await?;
        let mut same = 0;
        while same < 2 {
            if Instant::now() > deadline {
                return Err(fail(
                    "the cluster's state did not settle within 10 s".into(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(15)).await;
            let next = self.snapshot().await?;
            same = if next.comparable == last.comparable {
                same + 1
            } else {
                0
            };
            last = next;
        }
        Ok(last)
    }

    /// No panic, `/health` 200, no ledger mismatch.
    async fn check_alive(&self) -> Result<(), TestCaseError> {
        let panics = PANICS.load(Ordering::SeqCst);
        if panics > 0 {
            let first = FIRST_PANIC
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let first = first.unwrap_or_default();
            return Err(fail(format!(
                "{panics} panic(s) in the test process; the first {first}"
            )));
        }
        let health = self
            .cluster
            .http
            .get(format!("{}/health", self.cluster.url))
            .send()
            .await
            .map_err(|e| fail(format!("/health: {e}")))?;
        if health.status() != 200 {
            return Err(fail(format!("/health answered {}", health.status())));
        }
        let metrics = self
            .cluster
            .http
            .get(format!("{}/metrics", self.cluster.url))
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .map_err(|e| fail(format!("/metrics: {e}")))?
            .text()
            .await
            .map_err(|e| fail(format!("/metrics: {e}")))?;
        let mismatches = metrics
            .lines()
            .find_map(|l| l.strip_prefix("parley_ledger_mismatches_total "))
            .ok_or_else(|| fail("/metrics has no parley_ledger_mismatches_total".into()))?;
        if mismatches.trim() != "0" {
            return Err(fail(format!("parley_ledger_mismatches_total {mismatches}")));
        }
        Ok(())
    }

    async fn run(&mut self, steps: Vec<Step>) -> Result<(), TestCaseError> {
        for step in &steps {
            self.run_step(step).await?;
        }
        Ok(())
    }

    /// Reads what the open streams have ready, as a framework would, so no stream's queue
    /// fills up while the suite runs; forgets the streams that ended.
    async fn drain_streams(&mut self) {
        let mut ended = Vec::new();
        for (id, reader) in &mut self.streams {
            loop {
                match reader.next_frame(tokio::time::Instant::now()).await {
                    Ok(_) => continue,
                    Err(testkit::SseError::TimedOut) => break,
                    Err(_) => {
                        ended.push(id.clone());
                        break;
                    }
                }
            }
        }
        for id in ended {
            self.streams.remove(&id);
        }
    }

    async fn run_step(&mut self, step: &Step) -> Result<(), TestCaseError> {
        self.drain_streams().await;
        let before = self.settled().await?;
        if let Call::Disconnect(i) = &step.call {
            let mut ids: Vec<String> = self.streams.keys().cloned().collect();
            ids.sort();
            if let Some(id) = choose(&ids, i) {
                self.streams.remove(&id.clone());
            }
            return self.check_alive().await;
        }
        let request = step.render(&Known {
            state: &before.state,
        });
        let caller = self.caller(step, &request.path);
        let identity = &self.who[caller];
        let mut builder = identity.client.request(
            request.method.clone(),
            format!("{}{}", self.cluster.url, request.path),
        );
        if let Some(token) = identity.token {
            builder = builder.bearer_auth(token);
        }
        if let Some(body) = request.body.clone() {
            if let Some(ct) = step.ct.header() {
                builder = builder.header("content-type", ct);
            }
            builder = builder.body(body);
        }
        let what = format!(
            "{} {} as {} ({:?}, {:?}, {:?})",
            request.method,
            request.path,
            identity.name,
            step.ct,
            step.shape,
            request
                .body
                .as_ref()
                .map(|b| String::from_utf8_lossy(&b[..b.len().min(300)]).into_owned())
        );
        let oversized = request
            .body
            .as_ref()
            .is_some_and(|b| b.len() > MAX_BODY_BYTES);
        let response = match builder.timeout(Duration::from_secs(30)).send().await {
            Ok(response) => response,
            // A server may answer a body it will not read (over the size limit, or from a
            // caller refused before the body is read) and close the connection while the
            // client is still writing: the client then sees a broken connection instead of
            // the answer. That is still a refusal, so it must have changed nothing.
            Err(e) if oversized && !e.is_timeout() => {
                self.calls += 1;
                *self.by_status.entry(0).or_default() += 1;
                let after = self.settled().await?;
                if after.comparable != before.comparable {
                    return Err(fail(format!(
                        "{what}: the connection closed ({e}) but the state changed"
                    )));
                }
                return self.check_alive().await;
            }
            Err(e) => return Err(fail(format!("{what}: {e}"))),
        };
        let status = response.status().as_u16();
        self.calls += 1;
        *self.by_status.entry(status).or_default() += 1;
        let kind = format!("{:?}", step.call);
        let kind = kind.split([' ', '(']).next().unwrap_or_default().to_owned();
        *self.by_call.entry((kind, status)).or_default() += 1;
        if status == 401 {
            let challenge = response.headers().get(reqwest::header::WWW_AUTHENTICATE);
            if challenge.and_then(|v| v.to_str().ok()) != Some("Bearer") {
                return Err(fail(format!(
                    "{what}: answered 401 with WWW-Authenticate {challenge:?}"
                )));
            }
        }
        if (200..300).contains(&status) {
            self.check_allowed(caller, &request.method, &request.path)
                .map_err(|e| fail(format!("{what}: answered {status}, but {e}")))?;
            if let Some(id) = request.stream_of {
                let mut reader = SseReader::from_response(response);
                let first = reader
                    .next_frame(deadline_in(Duration::from_secs(10)))
                    .await
                    .map_err(|e| fail(format!("{what}: no first event: {e}")))?;
                if first.event != "subscribed" {
                    return Err(fail(format!("{what}: first event {first:?}")));
                }
                self.streams.insert(id, reader);
            } else {
                let body = response.bytes().await.unwrap_or_default();
                if request.method == reqwest::Method::POST && request.path == "/api/v1/frameworks" {
                    self.claim(caller, &body)
                        .map_err(|e| fail(format!("{what}: answered {status}, but {e}")))?;
                }
            }
        } else {
            let body = response.bytes().await.unwrap_or_default();
            if status >= 500 {
                return Err(fail(format!(
                    "{what}: answered {status}: {}",
                    String::from_utf8_lossy(&body)
                )));
            }
            if serde_json::from_slice::<ErrorBody>(&body).is_err() {
                return Err(fail(format!(
                    "{what}: answered {status} without the error body: {}",
                    String::from_utf8_lossy(&body)
                )));
            }
            let after = self.snapshot().await?;
            if after.comparable != before.comparable {
                return Err(fail(format!(
                    "{what}: answered {status} but changed the state\nbefore: {}\nafter: {}",
                    before.comparable, after.comparable
                )));
            }
        }
        self.check_alive().await?;
        let settled = self.settled().await?;
        self.check_owners(&settled.state)?;
        check_books(&settled.state)
    }
}

#[test]
fn hostile_call_sequences_break_nothing() -> Result<(), String> {
    run_suite(false, 64)
}

/// The same sequences with a credentials file of several principals (two framework principals
/// with different roles, an agent principal, a read and an admin operator) and clients without
/// a token or with a wrong one. Besides the checks above, after every call: a 2xx only where
/// the caller's principal may (a framework's calls and stream only for its owner, an admin's
/// delete aside; weights, quotas, drains and reactivations only for admin; agent calls only for
/// the agent principal; reads only for operators; nothing but health, version, login and the
/// dashboard's static page and assets without a valid token),
/// every framework in the books
/// registered by a principal whose roles cover its role, within `max_frameworks`, and every
/// 401 with `WWW-Authenticate: Bearer`.
#[test]
fn hostile_principals_never_overstep() -> Result<(), String> {
    run_suite(true, 32)
}

/// Runs one suite. A failed case is returned, not panicked, so that the other suite's panic
/// count (which covers every thread named `hostile…`) does not see it.
fn run_suite(auth: bool, default_cases: u32) -> Result<(), String> {
    count_panics();
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_cases);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(RUNTIME_THREADS)
        .enable_all()
        .build()
        .unwrap();
    let world = RefCell::new(rt.block_on(World::start(auth)).unwrap());
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 200,
        ..Config::default()
    });
    let started = Instant::now();
    let result = runner.run(&prop::collection::vec(step(), 1..8), |steps| {
        let mut world = world.borrow_mut();
        rt.block_on(world.run(steps))
    });
    let world = world.into_inner();
    let label = if auth {
        "hostile (credentials)"
    } else {
        "hostile"
    };
    eprintln!(
        "{label}: {cases} sequences, {} calls in {:.1} s; answers by status: {:?}",
        world.calls,
        started.elapsed().as_secs_f64(),
        world.by_status
    );
    eprintln!("{label}: answers by call: {:?}", world.by_call);
    rt.block_on(world.cluster.shutdown()).unwrap();
    result.map_err(|e| e.to_string())
}
