//! `hdrf-sim`: runs an H-DRF / DRF / plain-sum scenario task by task and prints the outcome.
//!
//! Run with: `cargo run -p parley-allocator --bin hdrf-sim -- scenario.json` (or the scenario on stdin).
//! The format is documented in `allocator::sim`. Invalid input exits with status 2 and a
//! one-line error on stderr.

use std::io::Read;

use anyhow::Context;

fn main() {
    match run() {
        Ok(json) => println!("{json}"),
        Err(e) => {
            eprintln!("hdrf-sim: {e:#}");
            std::process::exit(2);
        }
    }
}

fn run() -> anyhow::Result<String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let text = match args.as_slice() {
        [] => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .context("reading stdin")?;
            s
        }
        [arg] if arg == "-h" || arg == "--help" => {
            return Ok("usage: hdrf-sim [SCENARIO.json]   (reads stdin without an argument)".into())
        }
        [path] => std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?,
        _ => anyhow::bail!("usage: hdrf-sim [SCENARIO.json]"),
    };
    let scenario = allocator::sim::parse(&text)?;
    let outcome = allocator::sim::run(&scenario)?;
    Ok(serde_json::to_string_pretty(&outcome)?)
}
