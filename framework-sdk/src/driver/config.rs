//! [`DriverConfig`]: where the coordinator is, who the framework is, and the driver's timings.

use std::path::PathBuf;
use std::time::Duration;

use protocol::leader::UrlListError;
use protocol::messages::WebUiUrlError;
use protocol::partition::PartitionTimeoutError;
use protocol::{FrameworkId, RolePath};

/// Why a [`DriverConfig`] is not usable; the message names the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DriverConfigError {
    /// `webui_url` is not an http(s) URL.
    #[error("webui_url: {0}")]
    WebUiUrl(WebUiUrlError),
    /// `partition_aware`'s timeout is out of range.
    #[error("partition_aware: {0}")]
    PartitionAware(PartitionTimeoutError),
    /// `coordinator` is not a list of coordinator URLs.
    #[error("coordinator: {0}")]
    Coordinator(UrlListError),
    /// `name` is blank.
    #[error("name is empty; give the framework a name")]
    EmptyName,
    /// The reconnect backoff bounds are zero or crossed.
    #[error("reconnect_backoff_min must be > 0 and <= reconnect_backoff_max")]
    ReconnectBackoff,
    /// `missed_heartbeats` is 0.
    #[error("missed_heartbeats must be at least 1")]
    MissedHeartbeats,
    /// `offer_wait_warning` is 0.
    #[error("offer_wait_warning must be > 0")]
    OfferWaitWarning,
    /// `request_timeout` is 0.
    #[error("request_timeout must be > 0")]
    RequestTimeout,
    /// `max_concurrent_requests` is 0.
    #[error("max_concurrent_requests must be at least 1")]
    MaxConcurrentRequests,
    /// `ack_delay` is over a second.
    #[error(
        "ack_delay must be at most 1 s (the coordinator resends unacknowledged updates), got {0:?}"
    )]
    AckDelay(Duration),
}

/// The default failover timeout: one hour. When the driver loses its connection (or its process
/// restarts with the same `framework_id`), the framework's tasks keep running this long before
/// the coordinator tears the framework down. Mesos' default of zero killed every task on the
/// first network blip; an hour rides out restarts and deploys without leaking tasks forever.
pub const DEFAULT_FAILOVER_TIMEOUT: Duration = Duration::from_secs(3600);

/// The most acknowledgements the driver waits to send together (see
/// [`DriverConfig::ack_delay`]).
pub const MAX_ACKS_PER_REQUEST: usize = 1000;

/// The driver's configuration. Build it with [`DriverConfig::new`] and adjust fields.
#[derive(Debug, Clone)]
pub struct DriverConfig {
    /// The coordinator's base URL, e.g. `http://127.0.0.1:5050` (or `https://...`); or several
    /// coordinators of a highly available cluster, separated by commas
    /// (`http://a:5050,http://b:5050`, see [`DriverConfig::with_coordinators`]): the driver
    /// follows the leader among them and registers again with a new one under the same
    /// framework id.
    pub coordinator: String,
    /// A PEM file of the CA certificates to trust for an `https://` coordinator (only those);
    /// `None` trusts the built-in Mozilla roots. Default `None`.
    pub ca_file: Option<PathBuf>,
    /// The framework's human-readable name.
    pub name: String,
    /// The role it runs under.
    pub role: RolePath,
    /// Set to take over an existing framework (after a restart of the framework's process).
    pub framework_id: Option<FrameworkId>,
    /// How long tasks survive a lost connection; see [`DEFAULT_FAILOVER_TIMEOUT`].
    pub failover_timeout: Duration,
    /// How long the first registration may keep failing (coordinator unreachable) before
    /// [`Driver::run`](crate::Driver::run) gives up. Default 60 s.
    pub register_timeout: Duration,
    /// An offer the scheduler neither launches on nor declines is declined after this long, so a
    /// framework never hoards resources. Default 2 s.
    pub offer_hold_timeout: Duration,
    /// The filter on declined offers when the scheduler gives none. Longer than the
    /// coordinator's default (5 s), because a framework that declines usually cannot use those
    /// resources soon, and a revive (sent when new work arrives) clears filters anyway.
    /// Default 30 s.
    pub decline_refuse: Duration,
    /// The filter on the unused rest of accepted offers. Default 5 s.
    pub accept_refuse: Duration,
    /// Revives are sent at most this often; frequent revives overload the allocator. Default 1 s.
    pub revive_interval: Duration,
    /// Send [`Scheduler::pending_tasks`](crate::Scheduler::pending_tasks) with every answer
    /// and revive (`pending_tasks`), so the coordinator stops offering once the outstanding
    /// offers hold that many tasks of the demand hint: the framework is not sent agents it
    /// would only decline, and they go to frameworks that want them. Turn it off for a
    /// scheduler that must see many offers to choose among them (strict placement
    /// constraints): it then gets every offer it is eligible for, as before. Default true.
    pub size_offers_to_demand: bool,
    /// A scheduler with pending tasks that has been offered nothing for this long is logged
    /// at warn level (again after each such wait), and the driver revives, stating how many
    /// tasks it wants: whatever the coordinator believed, it hears the truth again and its
    /// decline filters are cleared. Default 30 s.
    pub offer_wait_warning: Duration,
    /// The first reconnection delay; it doubles up to `reconnect_backoff_max`. Default 100 ms.
    pub reconnect_backoff_min: Duration,
    /// The longest reconnection delay. Default 5 s.
    pub reconnect_backoff_max: Duration,
    /// The stream is considered dead after this many heartbeat intervals without any event.
    /// Default 5.
    pub missed_heartbeats: u32,
    /// The time limit of each request other than the event stream. Default 10 s.
    pub request_timeout: Duration,
    /// The most requests the driver has in flight at once when it answers many offers (accepts,
    /// and declines that must go one by one) or acknowledges many updates. Default 32.
    pub max_concurrent_requests: usize,
    /// Acknowledgements wait at most this long after the first unsent one, so many go in one
    /// request (and at once when [`MAX_ACKS_PER_REQUEST`] are waiting). The coordinator sends
    /// an update again only after seconds without its acknowledgement, so a short wait costs
    /// nothing but saves a request per chunk of events under load. Zero sends them after every
    /// chunk of events. Default 20 ms.
    pub ack_delay: Duration,
    /// When the driver stops on request, unregister the framework (the coordinator kills its
    /// tasks). When false, the tasks run on for the failover timeout so another process can take
    /// over with the same `framework_id`. Default true.
    pub unregister_on_stop: bool,
    /// After reconnecting, ask for the latest state of all tasks, so states missed while away
    /// arrive as updates. Default true.
    pub reconcile_on_reregister: bool,
    /// The framework principal's token, for a coordinator with a credentials file (`None`:
    /// send no `Authorization`). Default `None`.
    pub token: Option<crate::BearerToken>,
    /// Declare the `gpu_resources` capability: with GPU gating on (the coordinator's default),
    /// only frameworks that declare it are offered agents with GPUs. Default false.
    pub gpu_resources: bool,
    /// Declare the `partition_aware` capability with this partition timeout: while an agent
    /// cannot reach the coordinator, this framework's tasks on it are `unreachable` (they may
    /// still run) instead of `lost`, come back `running` (or with their real end) when it
    /// returns, and are `gone` (killed if the agent ever returns) after the timeout. `None`
    /// (the default): they are `lost`, and the agent has killed them by then, so launching a
    /// lost task again never runs it twice.
    pub partition_aware: Option<Duration>,
    /// The URL of the framework's own web UI (Mesos' `webui_url`), sent at every registration:
    /// the coordinator's dashboard links to it. Default none.
    pub webui_url: Option<String>,
}

impl DriverConfig {
    /// A configuration with the defaults documented on each field.
    pub fn new(coordinator: impl Into<String>, name: impl Into<String>, role: RolePath) -> Self {
        Self {
            coordinator: coordinator.into(),
            ca_file: None,
            name: name.into(),
            role,
            framework_id: None,
            failover_timeout: DEFAULT_FAILOVER_TIMEOUT,
            register_timeout: Duration::from_secs(60),
            offer_hold_timeout: Duration::from_secs(2),
            decline_refuse: Duration::from_secs(30),
            accept_refuse: Duration::from_secs(5),
            revive_interval: Duration::from_secs(1),
            size_offers_to_demand: true,
            offer_wait_warning: Duration::from_secs(30),
            reconnect_backoff_min: Duration::from_millis(100),
            reconnect_backoff_max: Duration::from_secs(5),
            missed_heartbeats: 5,
            request_timeout: Duration::from_secs(10),
            max_concurrent_requests: 32,
            ack_delay: Duration::from_millis(20),
            unregister_on_stop: true,
            reconcile_on_reregister: true,
            token: None,
            gpu_resources: false,
            partition_aware: None,
            webui_url: None,
        }
    }

    /// As [`DriverConfig::new`], with several coordinators (the leader is found among them).
    pub fn with_coordinators<I, U>(coordinators: I, name: impl Into<String>, role: RolePath) -> Self
    where
        I: IntoIterator<Item = U>,
        U: AsRef<str>,
    {
        let list: Vec<String> = coordinators
            .into_iter()
            .map(|u| u.as_ref().to_owned())
            .collect();
        Self::new(list.join(","), name, role)
    }

    /// Sets [`DriverConfig::gpu_resources`] (builder style).
    pub fn gpu_resources(mut self, on: bool) -> Self {
        self.gpu_resources = on;
        self
    }

    /// Sets [`DriverConfig::partition_aware`] (builder style).
    pub fn partition_aware(mut self, partition_timeout: Option<Duration>) -> Self {
        self.partition_aware = partition_timeout;
        self
    }

    /// Checks the values are usable; the message names the bad field.
    pub fn validate(&self) -> Result<(), DriverConfigError> {
        if let Some(url) = &self.webui_url {
            protocol::messages::check_webui_url(url).map_err(DriverConfigError::WebUiUrl)?;
        }
        if let Some(timeout) = self.partition_aware {
            protocol::partition::check_partition_timeout(timeout.as_secs_f64())
                .map_err(DriverConfigError::PartitionAware)?;
        }
        if let Err(e) = protocol::leader::parse_coordinator_urls(&self.coordinator) {
            return Err(DriverConfigError::Coordinator(e));
        }
        if self.name.trim().is_empty() {
            return Err(DriverConfigError::EmptyName);
        }
        if self.reconnect_backoff_min.is_zero()
            || self.reconnect_backoff_max < self.reconnect_backoff_min
        {
            return Err(DriverConfigError::ReconnectBackoff);
        }
        if self.missed_heartbeats == 0 {
            return Err(DriverConfigError::MissedHeartbeats);
        }
        if self.offer_wait_warning.is_zero() {
            return Err(DriverConfigError::OfferWaitWarning);
        }
        if self.request_timeout.is_zero() {
            return Err(DriverConfigError::RequestTimeout);
        }
        if self.max_concurrent_requests == 0 {
            return Err(DriverConfigError::MaxConcurrentRequests);
        }
        if self.ack_delay > Duration::from_secs(1) {
            return Err(DriverConfigError::AckDelay(self.ack_delay));
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn several_coordinators_are_one_field_and_bad_ones_are_named() {
        let role: RolePath = "a".parse().unwrap();
        let c = DriverConfig::with_coordinators(["http://a:1", "http://b:2"], "f", role.clone());
        assert_eq!(c.coordinator, "http://a:1,http://b:2");
        assert!(c.validate().is_ok());
        let c = DriverConfig::with_coordinators(["http://a:1", "b:2"], "f", role.clone());
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.starts_with("coordinator: ") && e.contains("\"b:2\""),
            "{e}"
        );
        assert!(DriverConfig::new("http://a:1", "f", role)
            .validate()
            .is_ok());
    }
}
