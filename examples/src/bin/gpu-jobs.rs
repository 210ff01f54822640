//! Run with:
//!
//! ```text
//! cargo run -p parley &                                              # on 127.0.0.1:5050
//! cargo run -p parley-agent --bin agent -- --listen 127.0.0.1:5051 --gpus auto &       # on a GPU machine
//! cargo run -p examples --bin gpu-jobs -- --tasks 2
//! ```
//!
//! Launches the tasks (one whole GPU each), prints what device each saw and the agent's usage
//! figures, and exits 0 iff all of them finished. When the coordinator's `explain` says that no
//! agent offers `gpus`, it exits 1 within seconds with that sentence.

use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    examples::common::init_logging();
    let args = examples::gpu_jobs::Args::parse();
    match examples::gpu_jobs::run(args, examples::common::ctrl_c()).await {
        Ok(outcome) => {
            let finished = outcome
                .reports
                .values()
                .filter(|r| r.state == framework_sdk::TaskState::Finished)
                .count();
            println!("{finished} of {} tasks finished", outcome.total);
            if outcome.all_finished() {
                std::process::ExitCode::SUCCESS
            } else {
                std::process::ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("gpu-jobs: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
