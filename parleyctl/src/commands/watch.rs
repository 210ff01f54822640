//! `parleyctl offers --watch`: `GET /api/v1/offers/events` as one line per event (or, with
//! `--json`, one `{"event", "data"}` object per line), until `--count` events were shown or the
//! user interrupts.
//!
//! When the stream ends or breaks (a coordinator restart, a leader change, a proxy timeout) the
//! watch says so on stderr and connects again, waiting 100 ms, doubling up to 2 s, between
//! tries; events sent while it was away are not replayed. It gives up (exit 3, unreachable)
//! when no coordinator has answered for [`RECONNECT_FOR`]. The first connection is not retried:
//! a wrong URL fails at once, as every other command does.

use std::io::Write;
use std::time::{Duration, Instant};

use protocol::events::OfferEvent;
use protocol::sse::SseParser;

use crate::client::Api;
use crate::error::CtlError;
use crate::format;

/// `parleyctl offers --watch [--count N]`.
pub async fn watch(
    api: &Api,
    count: Option<u64>,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CtlError> {
    if count == Some(0) {
        return Ok(());
    }
    let mut resp = api.stream(PATH).await?;
    let mut shown = 0u64;
    loop {
        // A fresh parser per connection: a half-read event of a broken stream is dropped.
        let mut parser = SseParser::default();
        let why = loop {
            let chunk = match api.chunk(&mut resp).await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break "the offer event stream ended".to_owned(),
                Err(e) => break e.to_string(),
            };
            // A frame past the parser's limit is not an offer event: the peer is not the
            // coordinator's stream, and connecting again would not help.
            let frames = parser
                .feed(&chunk)
                .map_err(|e| CtlError::Protocol(format!("{PATH}: {e}")))?;
            for frame in frames {
                let line = if json {
                    json_line(&frame.event, &frame.data)
                } else {
                    text_line(&frame.event, &frame.data)
                };
                writeln!(out, "{line}")?;
                out.flush()?;
                shown += 1;
                if count.is_some_and(|n| shown >= n) {
                    return Ok(());
                }
            }
        };
        eprintln!("parleyctl: {why}; connecting again");
        resp = reconnect(api, &why).await?;
        eprintln!("parleyctl: watching offers again (events meanwhile are not shown)");
    }
}

/// The offer event stream.
const PATH: &str = "/api/v1/offers/events";

/// How long the watch tries to connect again before it gives up.
pub const RECONNECT_FOR: Duration = Duration::from_secs(30);

/// Connects to the stream again, with a growing wait between tries, for at most
/// [`RECONNECT_FOR`]; an API refusal (e.g. a revoked token) ends the watch at once.
async fn reconnect(api: &Api, why: &str) -> Result<reqwest::Response, CtlError> {
    let started = Instant::now();
    let mut wait = Duration::from_millis(100);
    loop {
        tokio::time::sleep(wait).await;
        match api.stream(PATH).await {
            Ok(resp) => return Ok(resp),
            Err(CtlError::Unreachable { .. }) if started.elapsed() < RECONNECT_FOR => {
                wait = (wait * 2).min(Duration::from_secs(2));
            }
            Err(CtlError::Unreachable { url, reason }) => {
                return Err(CtlError::Unreachable {
                    url,
                    reason: format!(
                        "{why}, and no coordinator answered for {} s: {reason}",
                        RECONNECT_FOR.as_secs()
                    ),
                })
            }
            Err(e) => return Err(e),
        }
    }
}

/// `{"event": NAME, "data": DATA}` on one line (DATA as sent when it is not JSON).
fn json_line(event: &str, data: &str) -> String {
    let data = serde_json::from_str::<serde_json::Value>(data)
        .unwrap_or_else(|_| serde_json::Value::String(data.to_owned()));
    serde_json::json!({ "event": event, "data": data }).to_string()
}

/// A readable line: the time, the event, then its fields.
pub fn text_line(event: &str, data: &str) -> String {
    let time = chrono::Utc::now().format("%H:%M:%S%.3f");
    let parsed = serde_json::from_str::<serde_json::Value>(data)
        .ok()
        .and_then(|data| {
            serde_json::from_value::<OfferEvent>(
                serde_json::json!({ "event": event, "data": data }),
            )
            .ok()
        });
    let fields = match parsed {
        Some(OfferEvent::OfferCreated(o)) => format!(
            "offer={} framework={} agent={} host={} resources={} expires={}",
            o.offer_id,
            o.framework_id,
            o.agent_id,
            o.hostname,
            format::resources(&o.resources),
            o.expires_at.format("%H:%M:%S"),
        ),
        Some(
            OfferEvent::OfferAccepted(o)
            | OfferEvent::OfferDeclined(o)
            | OfferEvent::OfferRescinded(o)
            | OfferEvent::OfferExpired(o),
        ) => {
            let mut text = format!(
                "offer={} framework={} agent={}",
                o.offer_id, o.framework_id, o.agent_id
            );
            if !o.tasks.is_empty() {
                let tasks: Vec<String> = o.tasks.iter().map(ToString::to_string).collect();
                text.push_str(&format!(" tasks={}", tasks.join(",")));
            }
            if let Some(reason) = &o.reason {
                text.push_str(&format!(" reason={reason:?}"));
            }
            text
        }
        Some(OfferEvent::AgentDraining(d)) => {
            let tasks: Vec<String> = d.task_ids.iter().map(ToString::to_string).collect();
            format!(
                "agent={} framework={} deadline={} tasks={}",
                d.agent_id,
                d.framework_id,
                d.deadline.format("%H:%M:%S"),
                tasks.join(",")
            )
        }
        Some(OfferEvent::Preemption(p)) => {
            let tasks: Vec<String> = p.task_ids.iter().map(ToString::to_string).collect();
            format!(
                "framework={} for_role={} deadline={} tasks={}",
                p.framework_id,
                p.for_role,
                p.deadline.format("%H:%M:%S"),
                tasks.join(",")
            )
        }
        None => data.to_owned(),
    };
    format!("{time} {event:<15} {fields}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_name_the_event_and_its_ids() {
        let fw = protocol::FrameworkId::new();
        let agent = protocol::AgentId::new();
        let offer = protocol::OfferId::new();
        let data = format!(
            r#"{{"offer_id":"{offer}","framework_id":"{fw}","agent_id":"{agent}","tasks":["t1"]}}"#
        );
        let line = text_line("offer_accepted", &data);
        assert!(
            line.contains(&format!(
                "offer_accepted  offer={offer} framework={fw} agent={agent} tasks=t1"
            )),
            "{line}"
        );
        let line = text_line("something_new", "{\"x\":1}");
        assert!(line.ends_with("something_new   {\"x\":1}"), "{line}");
        let json: serde_json::Value =
            serde_json::from_str(&json_line("e", "{\"x\":1}")).unwrap_or_default();
        assert_eq!(json["data"]["x"], 1);
    }
}
