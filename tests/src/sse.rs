//! A tiny Server-Sent Events line parser for the test framework client: bytes in, in chunks of
//! any size, `(event, data)` frames out. Independent of the SDK's parser on purpose, so the
//! end-to-end tests check the coordinator's stream against a second reading of the format.

/// Incremental parser: feed chunks with [`SseLines::feed`].
#[derive(Debug, Default)]
pub struct SseLines {
    line: Vec<u8>,
    event: String,
    data: Vec<String>,
}

impl SseLines {
    /// Consumes one chunk; returns the frames it completed as `(event, data)`, in order.
    /// Lines end in `\n` (a `\r` before it is dropped); `:` lines are comments; a blank line ends
    /// a frame; a frame without `data:` is dropped.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<(String, String)> {
        let mut frames = Vec::new();
        for &byte in chunk {
            if byte != b'\n' {
                self.line.push(byte);
                continue;
            }
            if self.line.last() == Some(&b'\r') {
                self.line.pop();
            }
            let line = String::from_utf8_lossy(&std::mem::take(&mut self.line)).into_owned();
            if line.is_empty() {
                let event = std::mem::take(&mut self.event);
                let data = std::mem::take(&mut self.data);
                if !data.is_empty() {
                    let event = if event.is_empty() {
                        "message".to_owned()
                    } else {
                        event
                    };
                    frames.push((event, data.join("\n")));
                }
            } else if line.starts_with(':') {
                // A comment (keep-alive).
            } else {
                let (field, value) = line.split_once(':').unwrap_or((line.as_str(), ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                match field {
                    "event" => self.event = value.to_owned(),
                    "data" => self.data.push(value.to_owned()),
                    _ => {}
                }
            }
        }
        frames
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_anywhere_and_comments_skipped() {
        let text = b": keep-alive\n\nevent: update\r\ndata: {\"a\":1}\r\n\r\nevent: heartbeat\ndata: {}\n\n";
        let whole = SseLines::default().feed(text);
        assert_eq!(
            whole,
            vec![
                ("update".to_owned(), "{\"a\":1}".to_owned()),
                ("heartbeat".to_owned(), "{}".to_owned())
            ]
        );
        let mut parser = SseLines::default();
        let mut bytewise = Vec::new();
        for b in text {
            bytewise.extend(parser.feed(&[*b]));
        }
        assert_eq!(bytewise, whole);
    }

    #[test]
    fn multi_line_data_and_default_event() {
        let frames = SseLines::default().feed(b"data: a\ndata:b\n\nevent: x\n\n");
        assert_eq!(frames, vec![("message".to_owned(), "a\nb".to_owned())]);
    }
}
