//! `RolePath` and `Weight`: from text and from JSON, never panics; a valid path's segments
//! join back to it, and it round-trips through JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;
use protocol::{RolePath, Weight};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(path) = RolePath::new(text) {
            let joined: Vec<&str> = path.segments().collect();
            assert_eq!(joined.join("/"), path.as_str());
            let json = serde_json::to_string(&path).expect("a path serializes");
            let back: RolePath = serde_json::from_str(&json).expect("its JSON parses again");
            assert_eq!(back, path);
        }
    }
    let _ = serde_json::from_slice::<RolePath>(data);
    if let Ok(w) = serde_json::from_slice::<Weight>(data) {
        assert!(w.get().is_finite() && w.get() > 0.0, "weight {}", w.get());
    }
});
