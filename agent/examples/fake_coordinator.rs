//! Run with:
//!
//! ```text
//! cargo run --release -p parley-agent --example fake_coordinator -- 127.0.0.1:5050 1.0
//! ```
//!
//! The agent tests' fake coordinator as a standalone server (listen address, heartbeat interval
//! in seconds), for measuring simulated agents without the real coordinator. Prints the number
//! of agents and heartbeats it has seen every 10 s.

#![allow(clippy::unwrap_used)]

#[path = "../tests/agent/common/mod.rs"]
mod common;

use std::time::Duration;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args
        .next()
        .unwrap_or_else(|| "127.0.0.1:5050".into())
        .parse()?;
    let interval: f64 = args.next().unwrap_or_else(|| "1.0".into()).parse()?;
    let fake = common::Fake::new(interval);
    let server = common::Server::start_on(&fake, addr).await;
    println!("fake coordinator on {}", server.url());
    loop {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(10)) => {}
            r = tokio::signal::ctrl_c() => { r?; break; }
        }
        let books = fake.books();
        let beats: usize = books.heartbeats.values().sum();
        println!("agents {} heartbeats {beats}", books.known.len());
    }
    server.stop().await;
    Ok(())
}
