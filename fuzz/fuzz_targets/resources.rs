//! `Resources` from JSON and from the `cpus=4,mem=1024` text form: never panics, and whatever
//! parses survives a round trip unchanged (JSON out and in; text out and in).
#![no_main]

use libfuzzer_sys::fuzz_target;
use protocol::Resources;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = serde_json::from_slice::<Resources>(data) {
        let json = serde_json::to_string(&r).expect("a parsed vector serializes");
        let back: Resources = serde_json::from_str(&json).expect("its JSON parses again");
        assert_eq!(back, r, "JSON round trip of {json}");
        let text = r.to_string();
        if !r.is_empty() {
            let back: Resources = text.parse().expect("its text form parses again");
            assert_eq!(back, r, "text round trip of {text}");
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(r) = text.parse::<Resources>() {
            let json = serde_json::to_string(&r).expect("a parsed vector serializes");
            let back: Resources = serde_json::from_str(&json).expect("its JSON parses again");
            assert_eq!(back, r, "JSON round trip of {text:?}");
        }
    }
});
