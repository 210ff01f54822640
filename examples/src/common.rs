//! What every example shares: its common flags, the driver configuration built from them,
//! logging, and Ctrl-C as a shutdown future.

use std::time::Duration;

use framework_sdk::{BearerToken, DriverConfig, FrameworkId, RolePath};

/// Flags every example takes.
#[derive(Debug, Clone, clap::Args)]
pub struct CommonArgs {
    /// The coordinator's base URL; or several, separated by commas (the coordinators of a
    /// highly available cluster: the framework follows the leader among them).
    #[arg(
        long,
        env = "PARLEY_COORDINATOR",
        default_value = "http://127.0.0.1:5050"
    )]
    pub coordinator: String,
    /// Trust only the CAs in this PEM file for an https:// coordinator (default: the built-in
    /// Mozilla roots).
    #[arg(long, env = "PARLEY_CA_FILE", value_name = "FILE")]
    pub ca_file: Option<std::path::PathBuf>,
    /// The role to run under, e.g. `eng/batch`.
    #[arg(long, default_value = "default")]
    pub role: RolePath,
    /// Take over this framework (after a restart) instead of registering a new one.
    #[arg(long)]
    pub framework_id: Option<FrameworkId>,
    /// How long tasks survive when this process loses the coordinator, in seconds.
    #[arg(long, default_value_t = framework_sdk::DEFAULT_FAILOVER_TIMEOUT.as_secs_f64())]
    pub failover_timeout_s: f64,
    /// Unanswered offers are declined after this many seconds.
    #[arg(long, default_value_t = 2.0)]
    pub offer_hold_timeout_s: f64,
    /// On exit, leave the framework registered instead of unregistering (which kills its
    /// tasks): its tasks keep running and stay listed for the failover timeout, and
    /// `--framework-id` resumes it.
    #[arg(long)]
    pub no_unregister: bool,
    /// The framework principal's token, for a coordinator with a credentials file.
    #[arg(long, env = "PARLEY_TOKEN", hide_env_values = true)]
    pub token: Option<BearerToken>,
}

impl CommonArgs {
    /// Defaults for `coordinator`, as a test would set them.
    pub fn new(coordinator: impl Into<String>, role: RolePath) -> Self {
        Self {
            coordinator: coordinator.into(),
            ca_file: None,
            role,
            framework_id: None,
            failover_timeout_s: framework_sdk::DEFAULT_FAILOVER_TIMEOUT.as_secs_f64(),
            offer_hold_timeout_s: 2.0,
            no_unregister: false,
            token: None,
        }
    }

    /// The driver configuration for a framework called `name`.
    pub fn driver_config(&self, name: &str) -> anyhow::Result<DriverConfig> {
        framework_sdk::protocol::leader::parse_coordinator_urls(&self.coordinator)
            .map_err(|e| anyhow::anyhow!("--coordinator: {e}"))?;
        let mut config = DriverConfig::new(&self.coordinator, name, self.role.clone());
        config.ca_file = self.ca_file.clone();
        config.framework_id = self.framework_id;
        config.failover_timeout = seconds("--failover-timeout-s", self.failover_timeout_s)?;
        config.offer_hold_timeout = seconds("--offer-hold-timeout-s", self.offer_hold_timeout_s)?;
        config.unregister_on_stop = !self.no_unregister;
        config.token = self.token.clone();
        Ok(config)
    }
}

/// Checks a flag given in seconds.
pub fn seconds(flag: &str, value: f64) -> anyhow::Result<Duration> {
    if !value.is_finite() || !(0.0..=1e9).contains(&value) {
        anyhow::bail!("{flag} is {value}; use a number of seconds between 0 and 1e9");
    }
    Ok(Duration::from_secs_f64(value))
}

/// Logs to stderr, filtered by `RUST_LOG` (default `info`).
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Resolves on Ctrl-C (or never, if the signal cannot be watched).
pub async fn ctrl_c() {
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn several_coordinators_are_accepted_and_a_bad_one_is_named() {
        let role: RolePath = "a".parse().unwrap();
        let args = CommonArgs::new("http://a:1,http://b:2/", role.clone());
        assert_eq!(
            args.driver_config("x").unwrap().coordinator,
            "http://a:1,http://b:2/"
        );
        let err = CommonArgs::new("http://a:1,b:2", role)
            .driver_config("x")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("--coordinator") && err.contains("\"b:2\""),
            "{err}"
        );
    }
}
