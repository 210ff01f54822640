//! A small fake coordinator: the framework API of the HTTP API reference, enough for driver tests.
//! It records every call, streams the events a test pushes, and can be told to reject calls.
#![allow(clippy::unwrap_used, dead_code)]

pub mod probe;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use futures::StreamExt;
use protocol::messages::{
    AcceptBatch, AcceptBatchResponse, AcceptRequest, AcceptResponse, AcceptResult,
    AcknowledgeBatch, AcknowledgeBatchResponse, AcknowledgeRequest, DeclineRequest,
    FrameworkRegistered, KillRequest, ReconcileRequest, RegisterFramework, RequestLimits,
    ReviveRequest,
};
use protocol::{AgentId, ErrorBody, FrameworkEvent, FrameworkId, Offer, OfferId, Resources};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Everything the fake saw, in order per kind; `log` interleaves the calls as they arrived.
#[derive(Debug, Default)]
pub struct Recorded {
    pub registrations: Vec<RegisterFramework>,
    pub streams_opened: usize,
    /// Every accept, whether sent alone or in a batch.
    pub accepts: Vec<AcceptRequest>,
    /// Calls that carried accepts (single or batch), answered or not.
    pub accept_calls: usize,
    /// Every gang launch (`gang-accepts`), answered or not.
    pub gang_accepts: Vec<protocol::gang::GangAccept>,
    /// The `pending_tasks` each batch of accepts said.
    pub accept_batch_pending: Vec<Option<u32>>,
    /// Requests refused for carrying `pending_tasks` (see [`Fake::without_pending_tasks`]).
    pub pending_refused: usize,
    pub declines: Vec<DeclineRequest>,
    pub suppresses: usize,
    pub revives: Vec<ReviveRequest>,
    pub kills: Vec<KillRequest>,
    pub acks: Vec<AcknowledgeRequest>,
    /// Requests that carried acknowledgements (single or batch).
    pub ack_requests: usize,
    pub reconciles: Vec<ReconcileRequest>,
    pub unregisters: usize,
    /// The actions refused `413` for their size, in order.
    pub too_large: Vec<String>,
    /// The body size of every action call under the limit.
    pub body_sizes: Vec<usize>,
}

#[derive(Default)]
struct Inner {
    recorded: Recorded,
    frameworks: Vec<FrameworkId>,
    stream: Option<mpsc::UnboundedSender<FrameworkEvent>>,
    reject_register: Option<(u16, ErrorBody)>,
    reject_accept: Option<(u16, ErrorBody)>,
    /// Answer batches of accepts 404, as a coordinator without the endpoint would.
    no_accept_batches: bool,
    /// Refuse `pending_tasks` as an unknown field, as a coordinator older than it would.
    no_pending_tasks: bool,
    /// The limits told at registration (none when `None`, as an older coordinator).
    limits: Option<RequestLimits>,
    /// Refuse action bodies over this many bytes `413`.
    max_body: Option<usize>,
    /// Answers for the next reconciles naming tasks, in order (then `200 {}`).
    reconcile_answers: std::collections::VecDeque<(u16, ErrorBody)>,
}

/// The server's state.
#[derive(Clone)]
struct Shared {
    inner: Arc<Mutex<Inner>>,
    log: Arc<Mutex<Vec<String>>>,
    keep_alive: bool,
}

/// A handle on the running fake; dropping it stops the server.
pub struct Fake {
    shared: Shared,
    /// Shared with the test's scheduler so the order of calls and callbacks can be checked.
    pub log: Arc<Mutex<Vec<String>>>,
    pub url: String,
    _stop: tokio_util::sync::DropGuard,
}

pub const HEARTBEAT_S: f64 = 0.2;

impl Fake {
    /// A fake whose streams carry SSE comments as keep-alives every 50 ms.
    pub async fn start() -> Fake {
        Self::start_with(true).await
    }

    /// A fake whose streams carry only the events a test pushes.
    pub async fn start_silent() -> Fake {
        Self::start_with(false).await
    }

    async fn start_with(keep_alive: bool) -> Fake {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let shared = Shared {
            inner: Arc::default(),
            log: Arc::default(),
            keep_alive,
        };
        let stop = CancellationToken::new();
        let app = Router::new()
            .route("/api/v1/frameworks", post(register))
            .route("/api/v1/frameworks/{id}", delete(unregister))
            .route("/api/v1/frameworks/{id}/events", get(events))
            .route("/api/v1/frameworks/{id}/{action}", post(action))
            .with_state(shared.clone());
        let token = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(token.cancelled_owned())
                .await;
        });
        Fake {
            log: shared.log.clone(),
            shared,
            url,
            _stop: stop.drop_guard(),
        }
    }

    pub fn recorded<T>(&self, f: impl FnOnce(&Recorded) -> T) -> T {
        f(&self.shared.inner.lock().unwrap().recorded)
    }

    /// Sends an event on the current stream; false when no stream is open.
    pub fn push(&self, event: FrameworkEvent) -> bool {
        let inner = self.shared.inner.lock().unwrap();
        inner
            .stream
            .as_ref()
            .is_some_and(|tx| tx.send(event).is_ok())
    }

    /// The id of the (last) framework registered.
    pub fn id(&self) -> FrameworkId {
        *self.shared.inner.lock().unwrap().frameworks.last().unwrap()
    }

    /// Ends the current stream, as a network failure would.
    pub fn drop_stream(&self) {
        self.shared.inner.lock().unwrap().stream = None;
    }

    pub fn reject_register(&self, status: u16, code: &str, message: &str) {
        self.shared.inner.lock().unwrap().reject_register =
            Some((status, ErrorBody::new(code, message)));
    }

    /// Answers batches of accepts `404 no_such_endpoint`, as an older coordinator would.
    pub fn without_accept_batches(&self) {
        self.shared.inner.lock().unwrap().no_accept_batches = true;
    }

    /// Refuses requests carrying `pending_tasks` (`400 invalid_body`, unknown field), as a
    /// coordinator older than the field would.
    pub fn without_pending_tasks(&self) {
        self.shared.inner.lock().unwrap().no_pending_tasks = true;
    }

    /// Answers the next reconcile that names tasks with this status and code (queued: each
    /// call queues one more answer).
    pub fn answer_reconcile(&self, status: u16, code: &str, message: &str) {
        self.shared
            .inner
            .lock()
            .unwrap()
            .reconcile_answers
            .push_back((status, ErrorBody::new(code, message)));
    }

    /// Tells these limits at registration and refuses bodies over `max_body_bytes` `413`.
    pub fn limits(&self, limits: RequestLimits) {
        let mut inner = self.shared.inner.lock().unwrap();
        inner.limits = Some(limits);
        inner.max_body = Some(limits.max_body_bytes as usize);
    }

    /// Refuses bodies over `max` bytes `413` without saying so at registration (a proxy's
    /// limit, or a coordinator older than the limits).
    pub fn body_limit(&self, max: usize) {
        self.shared.inner.lock().unwrap().max_body = Some(max);
    }

    /// Refuses every accept, alone or in a batch, with this status and code.
    pub fn reject_accept(&self, status: u16, code: &str, message: &str) {
        self.shared.inner.lock().unwrap().reject_accept =
            Some((status, ErrorBody::new(code, message)));
    }
}

impl Shared {
    fn note(&self, line: String) {
        self.log.lock().unwrap().push(line);
    }
}

fn error(status: u16, body: ErrorBody) -> Response {
    (StatusCode::from_u16(status).unwrap(), Json(body)).into_response()
}

async fn register(State(fake): State<Shared>, Json(req): Json<RegisterFramework>) -> Response {
    let mut inner = fake.inner.lock().unwrap();
    inner.recorded.registrations.push(req.clone());
    if let Some((status, body)) = inner.reject_register.clone() {
        return error(status, body);
    }
    let (id, status) = match req.framework_id {
        Some(id) if inner.frameworks.contains(&id) => (id, StatusCode::OK),
        Some(_) => {
            return error(
                404,
                ErrorBody::new("framework_not_found", "unknown framework"),
            )
        }
        None => {
            let id = FrameworkId::new();
            inner.frameworks.push(id);
            (id, StatusCode::CREATED)
        }
    };
    let limits = inner.limits;
    drop(inner);
    fake.note(format!("register {}", status.as_u16()));
    (
        status,
        Json(FrameworkRegistered {
            framework_id: id,
            heartbeat_interval_s: HEARTBEAT_S,
            limits,
        }),
    )
        .into_response()
}

async fn events(State(fake): State<Shared>, Path(id): Path<FrameworkId>) -> Response {
    let (tx, mut rx) = mpsc::unbounded_channel();
    {
        let mut inner = fake.inner.lock().unwrap();
        if !inner.frameworks.contains(&id) {
            return error(
                404,
                ErrorBody::new("framework_not_found", "unknown framework"),
            );
        }
        inner.recorded.streams_opened += 1;
        // A newer stream replaces the older one: dropping the old sender ends it.
        inner.stream = Some(tx.clone());
    }
    let _ = tx.send(FrameworkEvent::Subscribed(FrameworkRegistered {
        framework_id: id,
        heartbeat_interval_s: HEARTBEAT_S,
        limits: None,
    }));
    drop(tx);
    let body = futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).map(|ev: FrameworkEvent| {
        Ok::<_, std::convert::Infallible>(Event::default().event(ev.name()).data(ev.data_json()))
    });
    if fake.keep_alive {
        Sse::new(body)
            .keep_alive(KeepAlive::new().interval(Duration::from_millis(50)))
            .into_response()
    } else {
        Sse::new(body).into_response()
    }
}

async fn action(
    State(fake): State<Shared>,
    Path((id, action)): Path<(FrameworkId, String)>,
    bytes: axum::body::Bytes,
) -> Response {
    let mut inner = fake.inner.lock().unwrap();
    if inner.max_body.is_some_and(|max| bytes.len() > max) {
        inner.recorded.too_large.push(action);
        return error(
            413,
            ErrorBody::new("body_too_large", "request body is too large"),
        );
    }
    inner.recorded.body_sizes.push(bytes.len());
    let body: serde_json::Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => return error(400, ErrorBody::new("invalid_body", e.to_string())),
    };
    if !inner.frameworks.contains(&id) {
        return error(
            404,
            ErrorBody::new("framework_not_found", "unknown framework"),
        );
    }
    let bad = |e: serde_json::Error| error(400, ErrorBody::new("bad_request", e.to_string()));
    if inner.no_pending_tasks && body.get("pending_tasks").is_some() {
        inner.recorded.pending_refused += 1;
        return error(
            400,
            ErrorBody::new(
                "invalid_body",
                "unknown field `pending_tasks`, expected `demand`",
            ),
        );
    }
    let line = action.clone();
    let answer = match action.as_str() {
        "accept" => {
            let req: AcceptRequest = match serde_json::from_value(body) {
                Ok(r) => r,
                Err(e) => return bad(e),
            };
            inner.recorded.accepts.push(req.clone());
            inner.recorded.accept_calls += 1;
            if let Some((status, body)) = inner.reject_accept.clone() {
                return error(status, body);
            }
            let launched = req.tasks.iter().map(|t| t.task_id.clone()).collect();
            Json(AcceptResponse { launched }).into_response()
        }
        "gang-accepts" => {
            let gang: protocol::gang::GangAccept = match serde_json::from_value(body) {
                Ok(r) => r,
                Err(e) => return bad(e),
            };
            let launched = gang
                .accepts
                .iter()
                .flat_map(|a| a.tasks.iter().map(|t| t.task_id.clone()))
                .collect();
            inner.recorded.gang_accepts.push(gang);
            if let Some((status, body)) = inner.reject_accept.clone() {
                return error(status, body);
            }
            Json(AcceptResponse { launched }).into_response()
        }
        "accepts" => {
            let batch: AcceptBatch = match serde_json::from_value(body) {
                Ok(r) => r,
                Err(e) => return bad(e),
            };
            inner.recorded.accept_calls += 1;
            inner
                .recorded
                .accept_batch_pending
                .push(batch.pending_tasks);
            if inner.no_accept_batches {
                return error(404, ErrorBody::new("no_such_endpoint", "no such endpoint"));
            }
            let reject = inner.reject_accept.clone();
            let results = batch
                .accepts
                .into_iter()
                .map(|req| {
                    let result = match &reject {
                        Some((status, body)) => AcceptResult {
                            status: *status,
                            launched: Vec::new(),
                            error: Some(body.error.clone()),
                        },
                        None => AcceptResult {
                            status: 200,
                            launched: req.tasks.iter().map(|t| t.task_id.clone()).collect(),
                            error: None,
                        },
                    };
                    inner.recorded.accepts.push(req);
                    result
                })
                .collect();
            Json(AcceptBatchResponse { results }).into_response()
        }
        "decline" => match serde_json::from_value(body) {
            Ok(r) => {
                inner.recorded.declines.push(r);
                Json(serde_json::json!({})).into_response()
            }
            Err(e) => return bad(e),
        },
        "suppress" => {
            inner.recorded.suppresses += 1;
            Json(serde_json::json!({})).into_response()
        }
        "revive" => match serde_json::from_value(body) {
            Ok(r) => {
                inner.recorded.revives.push(r);
                Json(serde_json::json!({})).into_response()
            }
            Err(e) => return bad(e),
        },
        "kill" => match serde_json::from_value(body) {
            Ok(r) => {
                inner.recorded.kills.push(r);
                Json(serde_json::json!({})).into_response()
            }
            Err(e) => return bad(e),
        },
        "acknowledge" => match serde_json::from_value::<AcknowledgeRequest>(body) {
            Ok(r) => {
                drop(inner);
                fake.note(format!("ack {}", r.task_id));
                let mut inner = fake.inner.lock().unwrap();
                inner.recorded.acks.push(r);
                inner.recorded.ack_requests += 1;
                return Json(serde_json::json!({})).into_response();
            }
            Err(e) => return bad(e),
        },
        "acknowledgements" => match serde_json::from_value::<AcknowledgeBatch>(body) {
            Ok(batch) => {
                drop(inner);
                let acknowledged = batch.acknowledgements.len();
                fake.inner.lock().unwrap().recorded.ack_requests += 1;
                for r in batch.acknowledgements {
                    fake.note(format!("ack {}", r.task_id));
                    fake.inner.lock().unwrap().recorded.acks.push(r);
                }
                return Json(AcknowledgeBatchResponse {
                    acknowledged,
                    unknown: Vec::new(),
                })
                .into_response();
            }
            Err(e) => return bad(e),
        },
        "reconcile" => match serde_json::from_value::<ReconcileRequest>(body) {
            Ok(r) => {
                let named = !r.task_ids.is_empty();
                inner.recorded.reconciles.push(r);
                let scripted = if named {
                    inner.reconcile_answers.pop_front()
                } else {
                    None
                };
                match scripted {
                    Some((status, body)) => error(status, body),
                    None => Json(serde_json::json!({})).into_response(),
                }
            }
            Err(e) => return bad(e),
        },
        _ => return error(404, ErrorBody::new("not_found", "no such action")),
    };
    drop(inner);
    fake.note(line);
    answer
}

async fn unregister(State(fake): State<Shared>, Path(id): Path<FrameworkId>) -> Response {
    let mut inner = fake.inner.lock().unwrap();
    inner.recorded.unregisters += 1;
    inner.frameworks.retain(|f| *f != id);
    inner.stream = None;
    Json(serde_json::json!({})).into_response()
}

/// An offer of `resources` on a fresh agent of total `total`.
pub fn offer(framework_id: FrameworkId, resources: &str, total: &str) -> Offer {
    let now = protocol::now();
    Offer {
        offer_id: OfferId::new(),
        framework_id,
        agent_id: AgentId::new(),
        hostname: "host".into(),
        resources: resources.parse::<Resources>().unwrap(),
        agent_total: total.parse::<Resources>().unwrap(),
        attributes: BTreeMap::new(),
        created_at: now,
        expires_at: now + std::time::Duration::from_secs(60),
        reservation: None,
    }
}

/// Polls `cond` until it holds or `within` passes.
pub async fn wait_for(within: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
