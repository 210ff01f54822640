//! What one health check costs the agent: `N` command checks (`test -f healthy` in a sandbox)
//! and `N` HTTP checks (`GET /` answered `200` by a local listener), one after another, each
//! timed from start to verdict. Prints the median and 90th percentile of each.
//!
//! ```text
//! cargo run -p parley-agent --example health_cost -- 200
//! ```

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use agent::health::probe::{self, CheckContext};
use protocol::{CommandSpec, HealthCheck};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn summary(name: &str, mut times: Vec<Duration>) {
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
    println!(
        "{name}: n={} p50={:.3} ms p90={:.3} ms",
        times.len(),
        at(0.5).as_secs_f64() * 1e3,
        at(0.9).as_secs_f64() * 1e3
    );
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100)
        .max(1);
    let dir = std::env::temp_dir().join(format!("health-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("healthy"), "")?;
    let env = BTreeMap::new();
    let ctx = CheckContext {
        sandbox: &dir,
        user: None,
        env: &env,
        task_id: "cost",
    };
    let command = HealthCheck::command(CommandSpec::Shell("test -f healthy".into()));
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        assert!(probe::run(&command, &ctx).await, "the command check passes");
        times.push(t.elapsed());
    }
    summary("command check", times);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = u32::from(listener.local_addr()?.port());
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let mut buf = [0u8; 512];
            let _ = s.read(&mut buf).await;
            let _ = s.write_all(b"HTTP/1.0 200 OK\r\n\r\n").await;
        }
    });
    let http = HealthCheck::http(port, "/");
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        assert!(probe::run(&http, &ctx).await, "the HTTP check passes");
        times.push(t.elapsed());
    }
    summary("http check", times);
    std::fs::remove_dir_all(&dir)
}
