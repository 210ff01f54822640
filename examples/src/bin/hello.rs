//! Run with:
//!
//! ```text
//! cargo run -p parley &                                              # on 127.0.0.1:5050
//! cargo run -p parley-agent --bin agent -- --listen 127.0.0.1:5051 --resources cpus=4,mem=4096 &
//! cargo run -p examples --bin hello -- --coordinator http://127.0.0.1:5050 --tasks 5 --command 'echo hi'
//! ```
//!
//! Launches the tasks, prints their states, and exits 0 iff all of them finished.

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<std::process::ExitCode> {
    examples::common::init_logging();
    let args = examples::hello::Args::parse();
    let outcome = examples::hello::run(args, examples::common::ctrl_c()).await?;
    let finished = outcome
        .states
        .values()
        .filter(|s| **s == framework_sdk::TaskState::Finished)
        .count();
    println!("{finished} of {} tasks finished", outcome.states.len());
    Ok(if outcome.all_finished() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    })
}
