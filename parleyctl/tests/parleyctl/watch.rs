//! `offers --watch` against a peer that is not the coordinator's stream: an event that never
//! ends is refused at the SSE parser's limit (one clear error, exit code 1) instead of being
//! buffered without bound.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parleyctl::CtlError;
use protocol::sse::DEFAULT_MAX_FRAME_BYTES;
use tests::WITHIN;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::support::ctl;

/// How much the fake stream sends at most before it stops writing (and holds the connection
/// open): four times the parser's limit, far above what the socket buffers hold, so a watch
/// without a limit would read it all and then wait forever.
const SEND_AT_MOST: usize = 4 * DEFAULT_MAX_FRAME_BYTES;

/// Serves one connection: a `200 text/event-stream` answer whose body is one `data:` line
/// that never ends. Counts the bytes of the body it managed to write.
async fn endless_event(listener: TcpListener, sent: Arc<AtomicUsize>) {
    let (mut socket, _) = listener.accept().await.unwrap();
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = socket.read(&mut buf).await.unwrap();
        if n == 0 {
            return;
        }
        request.extend_from_slice(&buf[..n]);
    }
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
    socket.write_all(head.as_bytes()).await.unwrap();
    socket
        .write_all(b"event: offer_created\ndata: ")
        .await
        .unwrap();
    let chunk = vec![b'a'; 64 * 1024];
    while sent.load(Ordering::Relaxed) < SEND_AT_MOST {
        if socket.write_all(&chunk).await.is_err() {
            // The watch gave up and closed the connection.
            return;
        }
        sent.fetch_add(chunk.len(), Ordering::Relaxed);
    }
    // Hold the connection open, sending nothing more.
    std::future::pending::<()>().await;
}

#[tokio::test]
async fn an_event_past_the_limit_is_an_error_not_unbounded_memory() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let sent = Arc::new(AtomicUsize::new(0));
    let server = tokio::spawn(endless_event(listener, Arc::clone(&sent)));

    let (result, out) = tokio::time::timeout(WITHIN, ctl(&url, &["offers", "--watch"]))
        .await
        .expect("the watch kept reading an endless event instead of refusing it");
    server.abort();

    let error = result.expect_err("an endless event must fail the watch");
    assert!(matches!(error, CtlError::Protocol(_)), "{error:?}");
    assert_eq!(error.exit_code(), 1);
    let message = error.to_string();
    assert!(
        message.contains("/api/v1/offers/events")
            && message.contains(&format!("exceeds {DEFAULT_MAX_FRAME_BYTES} bytes")),
        "{message}"
    );
    assert!(
        out.is_empty(),
        "nothing is shown of the refused event: {out}"
    );
    // It stopped at the limit, not at the end of what the peer had to send.
    let sent = sent.load(Ordering::Relaxed);
    assert!(
        (DEFAULT_MAX_FRAME_BYTES..SEND_AT_MOST).contains(&sent),
        "{sent} bytes sent"
    );
}
