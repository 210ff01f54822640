//! [`Etcd`]: one etcd member for the failover benchmark, on free loopback ports with a fresh
//! data directory, killed when dropped.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use tokio::process::{Child, Command};

use crate::cluster::{free_port, spawn, stop_child};

/// A running etcd member.
pub struct Etcd {
    /// Its client URL.
    pub url: String,
    child: Option<Child>,
    data_dir: PathBuf,
}

impl std::fmt::Debug for Etcd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Etcd").field("url", &self.url).finish()
    }
}

impl Etcd {
    /// Starts `bin` with its data under `log_dir/etcd-data` and its output in
    /// `log_dir/etcd.log`, and waits (until `deadline`) for its `/health` to say true.
    ///
    /// Its heartbeat is 50 ms and its election timeout 500 ms: etcd's shortest lease is 1.5
    /// election timeouts rounded up to a second, so with its defaults (100 ms, 1 s) a 1 s
    /// leader lease would be granted as 2 s.
    pub async fn start(bin: &Path, log_dir: &Path, deadline: Instant) -> anyhow::Result<Self> {
        let data_dir = log_dir.join("etcd-data");
        let client = format!("http://{}", free_port()?);
        let peer = format!("http://{}", free_port()?);
        let child = spawn(
            Command::new(bin)
                .args(["--name", "bench", "--data-dir"])
                .arg(&data_dir)
                .args(["--listen-client-urls", &client])
                .args(["--advertise-client-urls", &client])
                .args(["--listen-peer-urls", &peer])
                .args(["--initial-advertise-peer-urls", &peer])
                .args(["--initial-cluster", &format!("bench={peer}")])
                .args(["--heartbeat-interval=50", "--election-timeout=500"])
                .args(["--log-level", "warn"]),
            &log_dir.join("etcd.log"),
        )
        .with_context(|| format!("starting {} (etcd; give --etcd-bin)", bin.display()))?;
        let mut etcd = Etcd {
            url: client,
            child: Some(child),
            data_dir,
        };
        etcd.wait_healthy(deadline).await?;
        Ok(etcd)
    }

    async fn wait_healthy(&mut self, deadline: Instant) -> anyhow::Result<()> {
        let http = reqwest::Client::new();
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Some(status) = child.try_wait()? {
                    bail!("etcd exited ({status}); see etcd.log in the log directory");
                }
            }
            let healthy = match http
                .get(format!("{}/health", self.url))
                .timeout(Duration::from_secs(2))
                .send()
                .await
            {
                Ok(r) => r
                    .json::<serde_json::Value>()
                    .await
                    .is_ok_and(|v| v["health"] == "true"),
                Err(_) => false,
            };
            if healthy {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!("etcd at {} was not healthy before the deadline", self.url);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops it (SIGTERM, then SIGKILL) and removes its data.
    pub async fn shutdown(mut self) {
        if let Some(child) = self.child.take() {
            stop_child(child).await;
        }
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}
