//! A small Server-Sent Events parser: bytes in (in chunks of any size), frames out.
//!
//! Pure and synchronous, so it is tested byte by byte. It follows the parts of the
//! [SSE specification](https://html.spec.whatwg.org/multipage/server-sent-events.html) the
//! coordinator uses: lines end in `\n`, `\r\n` or `\r`; `event:` names the frame; `data:` lines
//! are joined with `\n`; a line starting with `:` is a comment; a blank line ends a frame; a frame
//! without data is dropped; `id:` and `retry:` are ignored.

/// One complete SSE frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseFrame {
    /// The `event:` name; `message` when the frame has none.
    pub event: String,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
}

/// Why the stream cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// One line or one frame grew past the limit, so the peer is not speaking SSE (or is
    /// misbehaving); the stream should be dropped.
    #[error("an SSE line or frame exceeds {0} bytes")]
    TooLong(usize),
}

/// Incremental parser state. Feed it chunks as they arrive with [`SseParser::feed`].
#[derive(Debug)]
pub struct SseParser {
    line: Vec<u8>,
    event: String,
    data: String,
    has_data: bool,
    // A chunk ended in `\r`: a `\n` at the start of the next chunk belongs to the same line end.
    skip_lf: bool,
    max_len: usize,
}

/// The default limit on one line or frame: far above any offer batch the coordinator sends.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

impl Default for SseParser {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_FRAME_BYTES)
    }
}

impl SseParser {
    /// A parser that refuses lines and frames longer than `max_len` bytes.
    pub fn new(max_len: usize) -> Self {
        Self {
            line: Vec::new(),
            event: String::new(),
            data: String::new(),
            has_data: false,
            skip_lf: false,
            max_len,
        }
    }

    /// Consumes one chunk and returns the frames it completed, in order.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<SseFrame>, SseError> {
        let mut frames = Vec::new();
        let mut rest = chunk;
        if self.skip_lf {
            if rest.is_empty() {
                return Ok(frames);
            }
            self.skip_lf = false;
            if rest[0] == b'\n' {
                rest = &rest[1..];
            }
        }
        // Whole runs up to each line end at a time, not byte by byte.
        while let Some(end) = memchr::memchr2(b'\n', b'\r', rest) {
            self.push_line_bytes(&rest[..end])?;
            let ended_by_cr = rest[end] == b'\r';
            rest = &rest[end + 1..];
            self.end_line(&mut frames)?;
            if ended_by_cr {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    Some(_) => {}
                    // The chunk ended in `\r`: a `\n` may start the next one.
                    None => self.skip_lf = true,
                }
            }
        }
        self.push_line_bytes(rest)?;
        Ok(frames)
    }

    fn push_line_bytes(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        if self.line.len() + bytes.len() > self.max_len {
            return Err(SseError::TooLong(self.max_len));
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn end_line(&mut self, frames: &mut Vec<SseFrame>) -> Result<(), SseError> {
        let line = std::mem::take(&mut self.line);
        let result = self.take_line(&line, frames);
        // Keep the buffer's capacity for the next line.
        self.line = line;
        self.line.clear();
        result
    }

    fn take_line(&mut self, line: &[u8], frames: &mut Vec<SseFrame>) -> Result<(), SseError> {
        if line.is_empty() {
            self.dispatch(frames);
            return Ok(());
        }
        // Split only on ASCII bytes, so multi-byte characters are whole here.
        let line = String::from_utf8_lossy(line);
        if line.starts_with(':') {
            return Ok(());
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_ref(), ""),
        };
        match field {
            "event" => value.clone_into(&mut self.event),
            "data" => {
                if self.data.len() + value.len() + 1 > self.max_len {
                    return Err(SseError::TooLong(self.max_len));
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, frames: &mut Vec<SseFrame>) {
        let event = std::mem::take(&mut self.event);
        let data = std::mem::take(&mut self.data);
        if std::mem::take(&mut self.has_data) {
            let event = if event.is_empty() {
                "message".to_owned()
            } else {
                event
            };
            frames.push(SseFrame { event, data });
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn frame(event: &str, data: &str) -> SseFrame {
        SseFrame {
            event: event.into(),
            data: data.into(),
        }
    }

    const STREAM: &str = ": hello comment\r\n\
        event: subscribed\r\n\
        data: {\"framework_id\": \"x\", \"héllo\": 1}\r\n\
        \r\n\
        event:heartbeat\n\
        data:{}\n\
        \n\
        id: 7\r\
        retry: 100\r\
        data: line one\r\
        data: line two\r\
        \r\
        event: no-data-frame\n\
        \n\
        event: offers\n\
        data\n\
        \n";

    fn expected() -> Vec<SseFrame> {
        vec![
            frame("subscribed", "{\"framework_id\": \"x\", \"héllo\": 1}"),
            frame("heartbeat", "{}"),
            frame("message", "line one\nline two"),
            frame("offers", ""),
        ]
    }

    #[test]
    fn parses_a_whole_stream() {
        let mut p = SseParser::default();
        assert_eq!(p.feed(STREAM.as_bytes()).unwrap(), expected());
    }

    #[test]
    fn chunks_split_at_every_byte_boundary() {
        let bytes = STREAM.as_bytes();
        for cut in 0..=bytes.len() {
            let mut p = SseParser::default();
            let mut got = p.feed(&bytes[..cut]).unwrap();
            got.extend(p.feed(&bytes[cut..]).unwrap());
            assert_eq!(got, expected(), "split at {cut}");
        }
        for cut1 in (0..bytes.len()).step_by(3) {
            for cut2 in cut1..=bytes.len() {
                let mut p = SseParser::default();
                let mut got = p.feed(&bytes[..cut1]).unwrap();
                got.extend(p.feed(&bytes[cut1..cut2]).unwrap());
                got.extend(p.feed(&bytes[cut2..]).unwrap());
                assert_eq!(got, expected(), "split at {cut1} and {cut2}");
            }
        }
    }

    #[test]
    fn one_byte_at_a_time() {
        let mut p = SseParser::default();
        let mut got = Vec::new();
        for b in STREAM.as_bytes() {
            got.extend(p.feed(std::slice::from_ref(b)).unwrap());
        }
        assert_eq!(got, expected());
    }

    #[test]
    fn an_unfinished_frame_is_not_emitted() {
        let mut p = SseParser::default();
        assert!(p.feed(b"event: offers\ndata: {}\n").unwrap().is_empty());
        assert_eq!(p.feed(b"\n").unwrap(), vec![frame("offers", "{}")]);
    }

    #[test]
    fn overlong_lines_are_refused() {
        let mut p = SseParser::new(16);
        assert_eq!(p.feed(&[b'a'; 17]), Err(SseError::TooLong(16)));
        let mut p = SseParser::new(16);
        assert!(p.feed(b"data: 0123456789\n").is_ok());
        assert_eq!(p.feed(b"data: 0123456789\n"), Err(SseError::TooLong(16)));
    }
}
