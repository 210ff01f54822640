//! `evaluate`: regenerates the book's `docs/src/evaluation.md` and `docs/src/evaluation/*.svg`.
//!
//! Run with `cargo run --release -p evaluation --bin evaluate` from the workspace root;
//! `--out DIR` writes elsewhere, `--small` runs the tiny configuration the tests use.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};

/// Command-line arguments.
#[derive(Debug, Parser)]
#[command(about = "Reproduce the H-DRF and Tetris papers' findings into docs/src/evaluation.md")]
struct Args {
    /// Where `evaluation.md` and `evaluation/*.svg` go.
    #[arg(long, default_value = "docs/src")]
    out: PathBuf,
    /// The tiny configuration (seconds) instead of the full one.
    #[arg(long)]
    small: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let config = if args.small {
        evaluation::report::Config::small()
    } else {
        evaluation::report::Config::full()
    };
    let bar = ProgressBar::new(1);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} {msg}")?
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    let runtime = tokio::runtime::Runtime::new()?;
    let summary = runtime.block_on(evaluation::report::evaluate(&config, &args.out, &bar))?;
    println!(
        "wrote {} in {:.0} s: violations H-DRF/flattened/plain-sum {:?}, starvation {:?}; Tetris vs first-fit (makespan, JCT %) blind {:.1?}, aware {:.1?}; online deviation {:.4}",
        args.out.join("evaluation.md").display(),
        summary.seconds,
        summary.violation_steps,
        summary.starvation,
        summary.blind_gain,
        summary.aware_gain,
        summary.online_deviation
    );
    Ok(())
}
