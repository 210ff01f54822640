//! Every request body of the API: the first byte picks the type, the rest is the JSON. Parsing
//! never panics, and what parses survives a JSON round trip unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use protocol::messages::{
    AcceptRequest, AcknowledgeBatch, AcknowledgeRequest, DeclineRequest, Empty, KillRequest,
    LaunchTasks, ReconcileRequest, RegisterAgent, RegisterFramework, ReviveRequest, SetWeight,
    StatusBatch,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

fn round_trip<T: DeserializeOwned + Serialize + PartialEq + std::fmt::Debug>(json: &[u8]) {
    if let Ok(value) = serde_json::from_slice::<T>(json) {
        let text = serde_json::to_string(&value).expect("a parsed body serializes");
        let back: T = serde_json::from_str(&text).expect("its JSON parses again");
        assert_eq!(back, value, "round trip of {text}");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, json)) = data.split_first() else {
        return;
    };
    match which % 13 {
        0 => round_trip::<RegisterFramework>(json),
        1 => round_trip::<AcceptRequest>(json),
        2 => round_trip::<DeclineRequest>(json),
        3 => round_trip::<ReviveRequest>(json),
        4 => round_trip::<KillRequest>(json),
        5 => round_trip::<AcknowledgeRequest>(json),
        6 => round_trip::<AcknowledgeBatch>(json),
        7 => round_trip::<ReconcileRequest>(json),
        8 => round_trip::<RegisterAgent>(json),
        9 => round_trip::<StatusBatch>(json),
        10 => round_trip::<SetWeight>(json),
        11 => round_trip::<LaunchTasks>(json),
        _ => round_trip::<Empty>(json),
    }
});
