//! [`SseReader`]: an event stream read one frame at a time, each read bounded by a deadline.
//!
//! It reads straight from the response body (no background task): events wait in the socket
//! and in the reader until asked for, and dropping the reader closes the connection.

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;

use futures::{Stream, StreamExt};
use tokio::time::Instant;

use protocol::sse::{SseFrame, SseParser};

/// Why no frame (or event) came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseError {
    /// Opening the stream answered this status instead of 200.
    Status(u16),
    /// The transport failed (connecting, or reading the body).
    Transport(String),
    /// The deadline passed first.
    TimedOut,
    /// The stream ended.
    Ended,
    /// A frame that is not a valid event of the expected type.
    Parse {
        /// The frame.
        frame: SseFrame,
        /// The parse error.
        error: String,
    },
}

impl fmt::Display for SseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Status(s) => write!(f, "the event stream answered {s}"),
            Self::Transport(e) => write!(f, "event stream transport: {e}"),
            Self::TimedOut => write!(f, "no event before the deadline"),
            Self::Ended => write!(f, "the event stream ended"),
            Self::Parse { frame, error } => {
                write!(f, "bad event {:?} {:?}: {error}", frame.event, frame.data)
            }
        }
    }
}

impl std::error::Error for SseError {}

/// A type an SSE frame decodes into.
pub trait SseEvent: Sized {
    /// Decodes one frame.
    fn from_frame(frame: &SseFrame) -> Result<Self, String>;
}

impl SseEvent for SseFrame {
    fn from_frame(frame: &SseFrame) -> Result<Self, String> {
        Ok(frame.clone())
    }
}

impl SseEvent for protocol::FrameworkEvent {
    fn from_frame(frame: &SseFrame) -> Result<Self, String> {
        Self::from_sse(&frame.event, &frame.data).map_err(|e| e.to_string())
    }
}

impl SseEvent for protocol::OfferEvent {
    fn from_frame(frame: &SseFrame) -> Result<Self, String> {
        Self::from_sse(&frame.event, &frame.data).map_err(|e| e.to_string())
    }
}

type Body = Pin<Box<dyn Stream<Item = Result<Vec<u8>, String>> + Send>>;

/// An open event stream.
pub struct SseReader {
    body: Body,
    parser: SseParser,
    ready: VecDeque<SseFrame>,
    ended: bool,
}

impl fmt::Debug for SseReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SseReader")
            .field("ready", &self.ready)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl SseReader {
    /// Reads frames from a stream of byte chunks (an HTTP body).
    pub fn new<S, B, E>(body: S) -> Self
    where
        S: Stream<Item = Result<B, E>> + Send + 'static,
        B: AsRef<[u8]>,
        E: fmt::Display,
    {
        let body = body.map(|chunk| match chunk {
            Ok(bytes) => Ok(bytes.as_ref().to_vec()),
            Err(e) => Err(e.to_string()),
        });
        Self {
            body: Box::pin(body),
            parser: SseParser::default(),
            ready: VecDeque::new(),
            ended: false,
        }
    }

    /// Reads the body of `response` (whose status the caller has checked).
    pub fn from_response(response: reqwest::Response) -> Self {
        Self::new(response.bytes_stream())
    }

    /// GETs `url` and reads its stream; fails unless it answers 200.
    pub async fn open(client: &reqwest::Client, url: &str) -> Result<Self, SseError> {
        let response = client
            .get(url)
            .send()
            .await
            .map_err(|e| SseError::Transport(e.to_string()))?;
        match response.status().as_u16() {
            200 => Ok(Self::from_response(response)),
            other => Err(SseError::Status(other)),
        }
    }

    /// The next frame, waiting as long as it takes; `None` once the stream ended. For a reader
    /// that runs in its own task; tests use [`SseReader::next_frame`]. Cancel-safe.
    pub async fn recv(&mut self) -> Option<Result<SseFrame, SseError>> {
        loop {
            if let Some(frame) = self.ready.pop_front() {
                return Some(Ok(frame));
            }
            if self.ended {
                return None;
            }
            match self.body.next().await {
                Some(Ok(chunk)) => match self.parser.feed(&chunk) {
                    Ok(frames) => self.ready.extend(frames),
                    Err(e) => {
                        self.ended = true;
                        return Some(Err(SseError::Transport(e.to_string())));
                    }
                },
                Some(Err(e)) => {
                    self.ended = true;
                    return Some(Err(SseError::Transport(e)));
                }
                None => self.ended = true,
            }
        }
    }

    /// The next frame (keep-alive comments are skipped, heartbeat events are not), or an error
    /// when the stream ends or `deadline` passes first.
    pub async fn next_frame(&mut self, deadline: Instant) -> Result<SseFrame, SseError> {
        match tokio::time::timeout_at(deadline, self.recv()).await {
            Err(_) => Err(SseError::TimedOut),
            Ok(None) => Err(SseError::Ended),
            Ok(Some(frame)) => frame,
        }
    }

    /// The next frame decoded as `E`.
    pub async fn next_event<E: SseEvent>(&mut self, deadline: Instant) -> Result<E, SseError> {
        let frame = self.next_frame(deadline).await?;
        E::from_frame(&frame).map_err(|error| SseError::Parse { frame, error })
    }

    /// Skips events until one satisfies `pred`, and returns it.
    pub async fn next_matching<E: SseEvent>(
        &mut self,
        deadline: Instant,
        mut pred: impl FnMut(&E) -> bool,
    ) -> Result<E, SseError> {
        loop {
            let event = self.next_event(deadline).await?;
            if pred(&event) {
                return Ok(event);
            }
        }
    }

    /// Reads until the stream ends and returns the frames read meanwhile; fails if it is still
    /// open at `deadline`. A transport error counts as the end (the server dropped it).
    pub async fn until_end(&mut self, deadline: Instant) -> Result<Vec<SseFrame>, SseError> {
        let mut seen = Vec::new();
        loop {
            match self.next_frame(deadline).await {
                Ok(frame) => seen.push(frame),
                Err(SseError::Ended | SseError::Transport(_)) => return Ok(seen),
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::stream;

    use super::*;

    fn frame(event: &str, data: &str) -> SseFrame {
        SseFrame {
            event: event.into(),
            data: data.into(),
        }
    }

    fn chunks(parts: &[&'static str]) -> SseReader {
        let parts: Vec<Result<&'static [u8], String>> =
            parts.iter().map(|p| Ok(p.as_bytes())).collect();
        SseReader::new(stream::iter(parts))
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    #[tokio::test]
    async fn frames_across_chunks_then_the_end() {
        let mut r = chunks(&[
            "event: a\nda",
            "ta: 1\n\n: ping\n\nevent: b\n",
            "data: 2\n\n",
        ]);
        assert_eq!(r.next_frame(soon()).await, Ok(frame("a", "1")));
        assert_eq!(r.next_frame(soon()).await, Ok(frame("b", "2")));
        assert_eq!(r.next_frame(soon()).await, Err(SseError::Ended));
        assert_eq!(r.next_frame(soon()).await, Err(SseError::Ended));
    }

    #[tokio::test]
    async fn typed_events_matching_and_parse_errors() {
        let mut r = chunks(&[
            "event: heartbeat\ndata: {}\n\n",
            "event: rescind\ndata: {\"offer_id\": \"nope\"}\n\n",
            "event: heartbeat\ndata: {}\n\n",
        ]);
        let first: protocol::FrameworkEvent = r
            .next_matching(soon(), |e| {
                matches!(e, protocol::FrameworkEvent::Heartbeat {})
            })
            .await
            .expect("a heartbeat");
        assert_eq!(first, protocol::FrameworkEvent::Heartbeat {});
        let bad = r.next_event::<protocol::FrameworkEvent>(soon()).await;
        assert!(
            matches!(&bad, Err(SseError::Parse { frame, .. }) if frame.event == "rescind"),
            "{bad:?}"
        );
        assert_eq!(r.until_end(soon()).await.map(|f| f.len()), Ok(1));
    }

    #[tokio::test]
    async fn a_silent_stream_times_out_and_a_failed_one_ends() {
        let mut silent = SseReader::new(stream::pending::<Result<Vec<u8>, String>>());
        let deadline = Instant::now() + Duration::from_millis(20);
        assert_eq!(silent.next_frame(deadline).await, Err(SseError::TimedOut));
        assert_eq!(silent.until_end(deadline).await, Err(SseError::TimedOut));

        let failing = stream::iter(vec![Ok(b"data: x\n\n".to_vec()), Err("reset".to_owned())]);
        let mut r = SseReader::new(failing);
        assert_eq!(r.until_end(soon()).await, Ok(vec![frame("message", "x")]));
    }
}
