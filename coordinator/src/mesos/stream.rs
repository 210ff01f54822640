//! SUBSCRIBE: the framework registers (or fails over, with its `framework_id`) as through
//! `POST /api/v1/frameworks`, and its Parley event stream is answered as a chunked RecordIO
//! stream of Mesos events with a fresh `Mesos-Stream-Id`. Events the Mesos API makes itself
//! (reconciliation answers, dropped launches) come through a side channel of the session.
//! A new SUBSCRIBE of the same framework replaces the older stream, which ends.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use protocol::messages::RegisterFramework;
use protocol::{FrameworkEvent, FrameworkId};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::convert::{self, Shape};
use super::recordio;
use super::types::Call;
use super::Mesos;
use crate::outbox::OutboxReader;
use crate::runtime::Coordinator;
use crate::web::auth::Caller;
use crate::web::error::ApiError;
use crate::web::register::register_framework;

/// The header naming a subscription; every call after SUBSCRIBE must carry it.
pub const STREAM_ID_HEADER: &str = "mesos-stream-id";

/// The longest failover timeout kept; Mesos frameworks ask for weeks or more, Parley's
/// registration allows a year.
const MAX_FAILOVER_S: f64 = 31_536_000.0;

/// One live Mesos stream.
#[derive(Debug, Clone)]
pub struct Session {
    /// Its `Mesos-Stream-Id`.
    pub stream_id: String,
    /// The coordinator's number of the framework stream underneath.
    pub generation: u64,
    /// Events the Mesos API adds to the stream.
    pub extra: mpsc::Sender<Value>,
    /// The framework declared `PARTITION_AWARE`.
    pub partition_aware: bool,
}

/// The live Mesos streams, by framework.
#[derive(Debug, Clone, Default)]
pub struct Sessions(Arc<Mutex<HashMap<FrameworkId, Session>>>);

impl Sessions {
    fn lock(&self) -> MutexGuard<'_, HashMap<FrameworkId, Session>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The live session of a framework.
    pub fn get(&self, id: FrameworkId) -> Option<Session> {
        self.lock().get(&id).cloned()
    }

    fn insert(&self, id: FrameworkId, session: Session) {
        self.lock().insert(id, session);
    }

    fn remove(&self, id: FrameworkId, generation: u64) {
        let mut map = self.lock();
        if map.get(&id).is_some_and(|s| s.generation == generation) {
            map.remove(&id);
        }
    }
}

/// Tells the books and the sessions the stream ended, however it is dropped.
struct Guard {
    coordinator: Coordinator,
    sessions: Sessions,
    framework: FrameworkId,
    generation: u64,
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.sessions.remove(self.framework, self.generation);
        self.coordinator
            .stream_closed(self.framework, self.generation);
    }
}

struct Stream {
    rx: OutboxReader,
    extra: mpsc::Receiver<Value>,
    heartbeat: tokio::time::Interval,
    shutdown: CancellationToken,
    shape: Shape,
    _guard: Guard,
}

fn frame(events: &[Value]) -> Bytes {
    let mut out = Vec::new();
    for e in events {
        out.extend(recordio::encode(e.to_string().as_bytes()));
    }
    Bytes::from(out)
}

/// Answers a SUBSCRIBE call.
pub async fn subscribe(m: &Mesos, caller: &Caller, call: Call) -> Result<Response, ApiError> {
    let info = call
        .subscribe
        .ok_or_else(|| ApiError::InvalidField {
            field: "subscribe",
            reason: "a SUBSCRIBE call needs subscribe.framework_info".into(),
        })?
        .framework_info;
    let top = call
        .framework_id
        .as_ref()
        .map(|i| convert::uuid_id::<FrameworkId>(i, "framework_id"))
        .transpose()?;
    let inner = info
        .id
        .as_ref()
        .map(|i| convert::uuid_id::<FrameworkId>(i, "framework_info.id"))
        .transpose()?;
    if let (Some(a), Some(b)) = (top, inner) {
        if a != b {
            return Err(ApiError::InvalidField {
                field: "framework_id",
                reason: "differs from subscribe.framework_info.id".into(),
            });
        }
    }
    let (mesos_role, role) = convert::role(&info)?;
    let has = |cap: &str| info.capabilities.iter().any(|c| c.kind == cap);
    let shape = Shape {
        allocation_role: has("MULTI_ROLE").then(|| mesos_role.clone()),
    };
    let partition_aware = has("PARTITION_AWARE");
    let registered = register_framework(
        &m.coordinator,
        caller,
        RegisterFramework {
            name: info.name.clone(),
            role,
            failover_timeout_s: info.failover_timeout.map(|s| s.min(MAX_FAILOVER_S)),
            framework_id: top.or(inner),
            demand: None,
            // `{"type": "GPU_RESOURCES"}` is Parley's `gpu_resources`, `PARTITION_AWARE` its
            // `partition_aware` (tasks go `TASK_UNREACHABLE`, then `TASK_GONE`, instead of
            // `TASK_LOST`); other capabilities are handled above or ignored, as Mesos ignores
            // unknown ones.
            capabilities: [
                (has("GPU_RESOURCES"), protocol::capability::GPU_RESOURCES),
                (partition_aware, protocol::partition::PARTITION_AWARE),
            ]
            .into_iter()
            .filter(|(declared, _)| *declared)
            .map(|(_, name)| name.to_owned())
            .collect(),
            partition_timeout_s: None,
            // A URL Parley would refuse is left out rather than failing the subscription.
            webui_url: info
                .webui_url
                .clone()
                .filter(|u| protocol::messages::check_webui_url(u).is_ok()),
        },
    )
    .await?;
    let id = registered.framework_id;
    let c = &m.coordinator;
    let (rx, generation) = c.subscribe(id)?;
    let queue = c.config().max_stream_queue.max(1);
    let (extra_tx, extra) = mpsc::channel(queue);
    let stream_id = uuid::Uuid::new_v4().to_string();
    m.sessions.insert(
        id,
        Session {
            stream_id: stream_id.clone(),
            generation,
            extra: extra_tx,
            partition_aware,
        },
    );
    tracing::info!(framework = %id, role = %mesos_role, "Mesos framework subscribed");
    let period = c
        .config()
        .framework_heartbeat_interval
        .max(Duration::from_millis(1));
    let mut heartbeat = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let state = Stream {
        rx,
        extra,
        heartbeat,
        shutdown: c.shutdown_token().clone(),
        shape,
        _guard: Guard {
            coordinator: c.clone(),
            sessions: m.sessions.clone(),
            framework: id,
            generation,
        },
    };
    let body = futures::stream::unfold(state, |mut s| async move {
        let chunk = tokio::select! {
            biased;
            _ = s.shutdown.cancelled() => return None,
            ev = s.rx.recv() => frame(&convert::events(&ev?, &s.shape)),
            Some(ev) = s.extra.recv() => frame(&[ev]),
            _ = s.heartbeat.tick() => frame(&convert::events(&FrameworkEvent::Heartbeat {}, &s.shape)),
        };
        Some((Ok::<_, Infallible>(chunk), s))
    });
    let stream_header = HeaderValue::from_str(&stream_id).map_err(|_| ApiError::Internal)?;
    Ok((
        StatusCode::OK,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (HeaderName::from_static(STREAM_ID_HEADER), stream_header),
        ],
        Body::from_stream(body),
    )
        .into_response())
}
