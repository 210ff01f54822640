//! `TaskSpec` and `TaskStatus` from JSON: never panics; what parses survives a JSON round trip,
//! and checking a parsed command never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use protocol::{TaskSpec, TaskStatus};

fuzz_target!(|data: &[u8]| {
    if let Ok(spec) = serde_json::from_slice::<TaskSpec>(data) {
        let _ = spec.command.validate();
        let json = serde_json::to_string(&spec).expect("a parsed spec serializes");
        let back: TaskSpec = serde_json::from_str(&json).expect("its JSON parses again");
        assert_eq!(back, spec, "round trip of {json}");
    }
    if let Ok(status) = serde_json::from_slice::<TaskStatus>(data) {
        let json = serde_json::to_string(&status).expect("a parsed status serializes");
        let back: TaskStatus = serde_json::from_str(&json).expect("its JSON parses again");
        assert_eq!(back, status, "round trip of {json}");
    }
});
