//! Run with:
//!
//! ```text
//! cargo run -p parley &
//! cargo run -p parley-agent --bin agent -- --simulate 20 --resources cpus=8,mem=16384 &
//! cargo run -p examples --bin tetris-batch -- --jobs 20 --max-tasks 30 --simulated --policy tetris
//! cargo run -p examples --bin tetris-batch -- --jobs 20 --max-tasks 30 --simulated --policy first-fit
//! ```
//!
//! Prints each job's completion, then the makespan and average job completion time. Without
//! `--simulated`, tasks run `sleep <duration>` on real agents.

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<std::process::ExitCode> {
    examples::common::init_logging();
    let args = examples::tetris_batch::Args::parse();
    let outcome = examples::tetris_batch::run(args, examples::common::ctrl_c()).await?;
    Ok(if outcome.jobs_completed == outcome.jobs {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    })
}
