//! The SSE parser (`protocol::sse::SseParser`, which the SDK, `parleyctl` and the test kit
//! share): never panics, its frames do not depend on how the bytes are split into chunks, and
//! they respect its length limit. The first two bytes choose the split points and the limit.
#![no_main]

use protocol::sse::SseParser;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&[a, b], stream)) = data.split_first_chunk::<2>() else {
        return;
    };
    let max_len = 1 + usize::from(b) * 4;
    let step = 1 + usize::from(a % 17);
    let whole = SseParser::new(max_len).feed(stream);
    let mut parser = SseParser::new(max_len);
    let mut chunked = Ok(Vec::new());
    for chunk in stream.chunks(step) {
        match parser.feed(chunk) {
            Ok(more) => chunked
                .as_mut()
                .map(|f: &mut Vec<_>| f.extend(more))
                .unwrap_or(()),
            Err(e) => {
                chunked = Err(e);
                break;
            }
        }
    }
    assert_eq!(
        whole.is_ok(),
        chunked.is_ok(),
        "the error depends on the chunking"
    );
    if let (Ok(whole), Ok(chunked)) = (&whole, &chunked) {
        assert_eq!(whole, chunked, "frames depend on the chunking");
        for frame in whole {
            assert!(frame.data.len() <= max_len, "a frame over the limit");
        }
    }
});
