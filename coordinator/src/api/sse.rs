//! The two event streams: a framework's (`GET /api/v1/frameworks/{id}/events`) and the
//! operator offer stream (`GET /api/v1/offers/events`).
//!
//! A framework stream is a channel receiver the registry writes to, merged with `heartbeat`
//! events. It ends when the coordinator drops the sender (a newer stream replaced it, or the
//! framework was removed after an `error` event) or shuts down. When the client goes away, the
//! HTTP layer drops the stream; a guard inside it then tells the registry, which starts the
//! framework's failover timeout.

use std::convert::Infallible;
use std::time::Duration;

use crate::outbox::OutboxReader;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use protocol::{FrameworkEvent, FrameworkId};
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;
use tokio_stream::wrappers::BroadcastStream;
use tokio_util::sync::CancellationToken;

use crate::runtime::Coordinator;

/// Tells the registry the stream ended, whenever and however it is dropped.
struct DisconnectGuard {
    coordinator: Coordinator,
    framework: FrameworkId,
    generation: u64,
}

impl Drop for DisconnectGuard {
    fn drop(&mut self) {
        self.coordinator
            .stream_closed(self.framework, self.generation);
    }
}

struct FrameworkStream {
    rx: OutboxReader,
    heartbeat: tokio::time::Interval,
    shutdown: CancellationToken,
    _guard: DisconnectGuard,
}

fn to_sse(event: &FrameworkEvent) -> Event {
    let (name, data) = event.sse_parts();
    Event::default().event(name).data(data)
}

/// The SSE response of a framework stream.
pub fn framework_stream(
    coordinator: Coordinator,
    framework: FrameworkId,
    rx: OutboxReader,
    generation: u64,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let period = coordinator.config().framework_heartbeat_interval;
    let mut heartbeat = tokio::time::interval_at(
        tokio::time::Instant::now() + period,
        period.max(Duration::from_millis(1)),
    );
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let state = FrameworkStream {
        rx,
        heartbeat,
        shutdown: coordinator.shutdown_token().clone(),
        _guard: DisconnectGuard {
            coordinator,
            framework,
            generation,
        },
    };
    let stream = futures::stream::unfold(state, |mut s| async move {
        let event = tokio::select! {
            biased;
            _ = s.shutdown.cancelled() => return None,
            ev = s.rx.recv() => to_sse(&ev?),
            _ = s.heartbeat.tick() => to_sse(&FrameworkEvent::Heartbeat {}),
        };
        Some((Ok(event), s))
    });
    Sse::new(stream)
}

/// The SSE response of the operator offer stream. A reader too slow to keep up skips the
/// events it missed (a comment says how many).
pub fn offer_stream(
    coordinator: &Coordinator,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let shutdown = coordinator.shutdown_token().clone();
    let stream = BroadcastStream::new(coordinator.offer_events())
        .map(|item| {
            Ok(match item {
                Ok(ev) => {
                    let (name, data) = ev.sse_parts();
                    Event::default().event(name).data(data)
                }
                Err(BroadcastStreamRecvError::Lagged(n)) => {
                    Event::default().comment(format!("skipped {n} events"))
                }
            })
        })
        .take_until(shutdown.cancelled_owned());
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}
