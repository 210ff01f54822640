//! RecordIO, the framing of Mesos' event streams: each record is its length in bytes as
//! decimal ASCII, `\n`, then the record (here one JSON object), with nothing between records.
//! [`encode`] frames one record; [`Decoder`] splits a byte stream back into records (for
//! clients and tests), whatever the chunk boundaries.

/// The longest length prefix [`Decoder`] accepts, in digits (records up to ~1 TB).
const MAX_DIGITS: usize = 12;

/// One record framed: `<len>\n<record>`.
pub fn encode(record: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(record.len() + 8);
    out.extend_from_slice(record.len().to_string().as_bytes());
    out.push(b'\n');
    out.extend_from_slice(record);
    out
}

/// Why a stream is not RecordIO.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed RecordIO: {0}")]
pub struct DecodeError(pub String);

/// Splits a RecordIO byte stream into records, fed in chunks of any size.
#[derive(Debug, Default)]
pub struct Decoder {
    buffer: Vec<u8>,
}

impl Decoder {
    /// An empty decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `chunk` and returns the records it completes, in order.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<Vec<u8>>, DecodeError> {
        self.buffer.extend_from_slice(chunk);
        let mut records = Vec::new();
        loop {
            let Some(newline) = self.buffer.iter().position(|b| *b == b'\n') else {
                if self.buffer.len() > MAX_DIGITS {
                    return Err(DecodeError("length prefix too long".into()));
                }
                break;
            };
            let digits = &self.buffer[..newline];
            if digits.is_empty()
                || digits.len() > MAX_DIGITS
                || !digits.iter().all(u8::is_ascii_digit)
            {
                return Err(DecodeError(format!(
                    "bad length prefix {:?}",
                    String::from_utf8_lossy(digits)
                )));
            }
            let len: usize = std::str::from_utf8(digits)
                .ok()
                .and_then(|d| d.parse().ok())
                .ok_or_else(|| DecodeError("length out of range".into()))?;
            let start = newline + 1;
            if self.buffer.len() < start + len {
                break;
            }
            records.push(self.buffer[start..start + len].to_vec());
            self.buffer.drain(..start + len);
        }
        Ok(records)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_record_is_its_byte_length_a_newline_and_itself() {
        assert_eq!(
            encode(br#"{"type":"HEARTBEAT"}"#),
            b"20\n{\"type\":\"HEARTBEAT\"}"
        );
        assert_eq!(encode("é".as_bytes()), "2\né".as_bytes());
    }

    #[test]
    fn records_split_at_any_boundary_come_back_whole() {
        let mut stream = encode(b"{\"a\":1}");
        stream.extend(encode(b""));
        stream.extend(encode(b"{\"type\":\"HEARTBEAT\"}"));
        for size in 1..stream.len() {
            let mut d = Decoder::new();
            let mut got = Vec::new();
            for chunk in stream.chunks(size) {
                got.extend(d.feed(chunk).unwrap());
            }
            assert_eq!(
                got,
                vec![
                    b"{\"a\":1}".to_vec(),
                    vec![],
                    b"{\"type\":\"HEARTBEAT\"}".to_vec()
                ],
                "chunk size {size}"
            );
        }
    }

    #[test]
    fn a_bad_prefix_is_an_error() {
        assert!(Decoder::new().feed(b"x1\n{}").is_err());
        assert!(Decoder::new().feed(b"\n{}").is_err());
        assert!(Decoder::new().feed(b"1234567890123").is_err());
    }
}
