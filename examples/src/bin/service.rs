//! Run with:
//!
//! ```text
//! cargo run -p parley &
//! cargo run -p parley-agent --bin agent -- --listen 127.0.0.1:5051 --resources cpus=4,mem=4096 &
//! cargo run -p examples --bin service -- --replicas 3 --command 'sleep 3600'
//! ```
//!
//! Keeps three replicas running; kill one (`POST /api/v1/frameworks/{id}/kill`) and watch it be
//! replaced. Ctrl-C unregisters (killing the replicas) unless `--no-unregister` is given.

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    examples::common::init_logging();
    let args = examples::service::Args::parse();
    let outcome = examples::service::run(args, examples::common::ctrl_c()).await?;
    println!("stopped after {} replacements", outcome.replacements);
    Ok(())
}
