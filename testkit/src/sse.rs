//! A Server-Sent Events line parser: bytes in, in chunks of any size (a frame or a UTF-8
//! character may be split anywhere), [`Frame`]s out.

/// One event of a stream: its `event:` name (`message` when absent) and its `data:` lines
/// joined with `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The event name.
    pub event: String,
    /// The data.
    pub data: String,
}

impl Frame {
    /// A frame with this name and data.
    pub fn new(event: impl Into<String>, data: impl Into<String>) -> Self {
        Self {
            event: event.into(),
            data: data.into(),
        }
    }
}

/// Incremental parser: feed chunks with [`SseLines::feed`].
#[derive(Debug, Default)]
pub struct SseLines {
    line: Vec<u8>,
    event: String,
    data: Vec<String>,
}

impl SseLines {
    /// Consumes one chunk; returns the frames it completed, in order. Lines end in `\n` (a `\r`
    /// before it is dropped); `:` lines are comments (keep-alives); a blank line ends a frame; a
    /// frame without `data:` is dropped; unknown fields are ignored.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<Frame> {
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
                if let Some(frame) = self.end_frame() {
                    frames.push(frame);
                }
            } else if !line.starts_with(':') {
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

    fn end_frame(&mut self) -> Option<Frame> {
        let event = std::mem::take(&mut self.event);
        let data = std::mem::take(&mut self.data);
        if data.is_empty() {
            return None;
        }
        let event = if event.is_empty() {
            "message".to_owned()
        } else {
            event
        };
        Some(Frame {
            event,
            data: data.join("\n"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_anywhere_and_comments_skipped() {
        let text = b": keep-alive\n\nevent: update\r\ndata: {\"a\":1}\r\n\r\nevent: heartbeat\ndata: {}\n\n";
        let whole = SseLines::default().feed(text);
        assert_eq!(
            whole,
            vec![
                Frame::new("update", "{\"a\":1}"),
                Frame::new("heartbeat", "{}")
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
        assert_eq!(frames, vec![Frame::new("message", "a\nb")]);
    }

    #[test]
    fn a_character_split_across_chunks_survives() {
        let text = "event: é\ndata: ü\n\n".as_bytes();
        let mut parser = SseLines::default();
        let mut frames = parser.feed(&text[..8]);
        frames.extend(parser.feed(&text[8..]));
        assert_eq!(frames, vec![Frame::new("é", "ü")]);
    }
}
