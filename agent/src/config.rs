//! Configuration of a real agent ([`AgentConfig`]), of a simulated fleet ([`SimConfig`]), and the
//! intervals both use ([`Timing`]); plus the text forms the CLI accepts (`rack=r1,zone=a`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use protocol::Resources;

/// A configuration value that cannot be used. The message names the value and says what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The coordinator URL is not an `http://` or `https://` URL.
    #[error("invalid coordinator URL {0:?}: expected http://HOST:PORT")]
    BadCoordinator(String),
    /// The advertised URL is not an `http://` or `https://` URL.
    #[error("invalid advertise URL {0:?}: expected http://HOST:PORT")]
    BadAdvertiseUrl(String),
    /// An attribute item is not `name=value`, or its name is empty.
    #[error("invalid attribute {0:?}: expected name=value, e.g. rack=r1,zone=a")]
    BadAttribute(String),
    /// The same attribute was given twice.
    #[error("attribute {0:?} is given twice")]
    DuplicateAttribute(String),
    /// The work directory cannot be created or written.
    #[error("work dir {path}: {reason}")]
    WorkDir {
        /// The directory.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
    /// A simulated fleet of zero agents.
    #[error("--simulate needs at least 1 agent")]
    NoAgents,
    /// The API token is too short, too long, or not visible ASCII.
    #[error("invalid --api-token: give 16 to 512 visible ASCII characters")]
    BadApiToken,
    /// The task user cannot be used.
    #[error(transparent)]
    TaskUser(#[from] crate::task_user::TaskUserError),
    /// The image root cannot be used.
    #[error("--image-root {path}: {reason}")]
    ImageRoot {
        /// The directory.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
    /// `--gpus` cannot be used (a bad value, or a device the machine does not have).
    #[error(transparent)]
    Gpus(#[from] crate::gpu::GpuError),
    /// The agent runs as root and would run tasks as root.
    #[error("the agent runs as root: give --task-user USER for its tasks, or --allow-root-tasks")]
    RootTasks,
}

/// Intervals and limits. The defaults suit production; tests shorten them.
#[derive(Debug, Clone)]
pub struct Timing {
    /// First retry delay after a failed registration or status update.
    pub backoff_min: Duration,
    /// Retry delays double up to this cap (with jitter).
    pub backoff_max: Duration,
    /// Time between SIGTERM and SIGKILL when a task is killed.
    pub kill_grace: Duration,
    /// How often a re-adopted task (one started before an agent restart) is checked for exit.
    pub adopt_poll: Duration,
    /// Timeout of each request to the coordinator.
    pub request_timeout: Duration,
    /// The heartbeat interval the coordinator asks for is clamped to at least this.
    pub min_heartbeat: Duration,
    /// How long an update that finds nothing else to send waits for company, so tasks that end
    /// together share one status request. Zero sends at once.
    pub status_linger: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            backoff_min: Duration::from_millis(200),
            backoff_max: Duration::from_secs(30),
            kill_grace: Duration::from_secs(5),
            adopt_poll: Duration::from_secs(1),
            request_timeout: Duration::from_secs(10),
            min_heartbeat: Duration::from_millis(10),
            status_linger: Duration::from_millis(5),
        }
    }
}

impl Timing {
    /// The retry delays: from `backoff_min`, doubling up to `backoff_max`.
    pub fn backoff(&self) -> protocol::Backoff {
        protocol::Backoff::new(self.backoff_min, self.backoff_max)
    }

    /// Short intervals for tests: retries within tens of milliseconds, a 500 ms kill grace.
    pub fn fast() -> Self {
        Self {
            backoff_min: Duration::from_millis(10),
            backoff_max: Duration::from_millis(200),
            kill_grace: Duration::from_millis(500),
            adopt_poll: Duration::from_millis(50),
            request_timeout: Duration::from_secs(2),
            min_heartbeat: Duration::from_millis(10),
            status_linger: Duration::ZERO,
        }
    }
}

/// Configuration of one real agent.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Base URL of the coordinator, e.g. `http://127.0.0.1:5050`; or several, separated by
    /// commas, of which the agent follows the leader.
    pub coordinator: String,
    /// The resources to advertise; detected from the machine when `None`.
    pub resources: Option<Resources>,
    /// Attributes such as `rack` or `zone`.
    pub attributes: BTreeMap<String, String>,
    /// Static reservations (`--reserve ROLE:resources`), sent at registration.
    pub reservations: Vec<protocol::reservation::Reservation>,
    /// Where the journal, the agent id and the task sandboxes live.
    pub work_dir: PathBuf,
    /// The hostname to advertise; the machine's when `None`.
    pub hostname: Option<String>,
    /// The URL the coordinator uses to reach this agent; derived from the listener when `None`.
    pub advertise_url: Option<String>,
    /// A delegated cgroup v2 directory for per-task memory limits; RLIMIT_AS is used when `None`
    /// (see the crate docs).
    pub cgroup_root: Option<PathBuf>,
    /// Make the process a child subreaper and reap orphaned task processes (Linux). Turn off
    /// when embedding the agent in a process that waits for children of its own by pid with
    /// something other than tokio.
    pub reap_orphans: bool,
    /// How long a finished task's sandbox (its files, `stdout`, `stderr`) is kept after it was
    /// last written before it is deleted (default one day).
    pub sandbox_retention: Duration,
    /// Intervals and limits.
    pub timing: Timing,
    /// HTTPS for the agent API: the PEM certificate chain and key; plain HTTP when `None`.
    pub tls: Option<TlsFiles>,
    /// A PEM CA file to trust, instead of the built-in roots, when calling an `https://`
    /// coordinator.
    pub ca_file: Option<PathBuf>,
    /// The bearer token sent to the coordinator (an agent principal's secret, when the
    /// coordinator has a credentials file).
    pub token: Option<String>,
    /// The token the coordinator must present; generated and kept in the work dir when `None`
    /// (see [`crate::auth`]).
    pub api_token: Option<String>,
    /// The user tasks run as; the agent's own when `None`.
    pub task_user: Option<crate::task_user::TaskUser>,
    /// The directory under which tasks may name images (`isolation.image`): OCI image layouts
    /// and root filesystem tarballs, unpacked into `WORK_DIR/images`; advertised as the attribute
    /// `image_root` (its canonical path). No images when `None`.
    pub image_root: Option<PathBuf>,
    /// Whether to isolate tasks (a cgroup and namespaces each) where the machine allows it
    /// (`--isolation auto|none`; see [`crate::isolation`]).
    pub isolation: crate::isolation::IsolationChoice,
    /// The launcher binary the task wrapper re-executes (`parley-launch`, or the `agent`
    /// binary); when `None` and the running executable is the `agent` binary, the
    /// `parley-launch` beside it, else the agent itself. A program embedding the agent
    /// (tests, `parley --dev`) runs tasks without isolation unless it names one.
    pub launcher: Option<PathBuf>,
    /// `pids.max` of an isolated task that does not set `isolation.pids` (`--default-pids`).
    pub default_pids: u64,
    /// Whether an agent running as root may run tasks as root (without a `task_user`).
    /// [`AgentConfig::new`] allows it, so code that embeds the agent (tests, `--dev`) decides;
    /// the `agent` binary refuses unless given `--allow-root-tasks`.
    pub allow_root_tasks: bool,
    /// Which GPUs the agent uses (`--gpus auto|none|0,2`; see [`crate::gpu`]). [`AgentConfig::new`]
    /// says `None`, so agents embedded in tests leave a GPU machine's devices alone; the
    /// `agent` binary's default is `auto`.
    pub gpus: crate::gpu::GpuChoice,
    /// Where the GPUs come from: NVML when `None`; tests inject
    /// [`crate::gpu::fake::FakeGpus`].
    pub gpu_discovery: Option<std::sync::Arc<dyn crate::gpu::GpuDiscovery>>,
    /// How often the GPU usage of running GPU tasks is sampled (default one second).
    pub gpu_sample: Duration,
}

/// A server certificate chain and its private key, as PEM files (read when serving starts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, the server's own certificate first.
    pub cert: PathBuf,
    /// The private key of the certificate.
    pub key: PathBuf,
}

/// The default of [`AgentConfig::sandbox_retention`]: one day.
pub const DEFAULT_SANDBOX_RETENTION: Duration = Duration::from_secs(24 * 3600);

impl AgentConfig {
    /// A configuration with detected resources, no attributes and default timing.
    pub fn new(coordinator: impl Into<String>, work_dir: impl Into<PathBuf>) -> Self {
        Self {
            coordinator: coordinator.into(),
            resources: None,
            attributes: BTreeMap::new(),
            reservations: Vec::new(),
            work_dir: work_dir.into(),
            hostname: None,
            advertise_url: None,
            cgroup_root: None,
            reap_orphans: true,
            sandbox_retention: DEFAULT_SANDBOX_RETENTION,
            timing: Timing::default(),
            tls: None,
            ca_file: None,
            token: None,
            api_token: None,
            task_user: None,
            image_root: None,
            isolation: crate::isolation::IsolationChoice::Auto,
            launcher: None,
            default_pids: crate::isolation::DEFAULT_PIDS,
            allow_root_tasks: true,
            // Code embedding the agent (tests, `--dev`) opts in; the binary's `--gpus` is `auto`.
            gpus: crate::gpu::GpuChoice::None,
            gpu_discovery: None,
            gpu_sample: Duration::from_secs(1),
        }
    }

    /// The image store of [`AgentConfig::image_root`], caching into `WORK_DIR/images`; `None`
    /// when the agent runs no images.
    pub fn image_store(&self) -> Result<Option<crate::image::ImageStore>, ConfigError> {
        let Some(root) = &self.image_root else {
            return Ok(None);
        };
        crate::image::ImageStore::new(root.clone(), self.work_dir.join("images"))
            .map(Some)
            .map_err(|e| ConfigError::ImageRoot {
                path: root.clone(),
                reason: match e {
                    crate::image::ImageError::Io(io) => io.to_string(),
                    other => other.to_string(),
                },
            })
    }
}

/// Configuration of a fleet of simulated agents in one process.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Base URL of the coordinator; or several, separated by commas (see
    /// [`AgentConfig::coordinator`]).
    pub coordinator: String,
    /// How many agents to simulate.
    pub count: usize,
    /// The resources each simulated agent advertises.
    pub resources: Resources,
    /// Attributes of every simulated agent (each also gets `sim_index`).
    pub attributes: BTreeMap<String, String>,
    /// Static reservations of the reserving agents (see `reserve_fraction`).
    pub reservations: Vec<protocol::reservation::Reservation>,
    /// The fraction of the agents (0 to 1, spread evenly: agent `i` reserves when
    /// `floor((i + 1) x f) > floor(i x f)`) that send `reservations`.
    pub reserve_fraction: f64,
    /// Hostname prefix; agent `i` is `{prefix}-{i}`.
    pub hostname_prefix: String,
    /// Base URL of the shared listener; agent `i` is reached at `{base}/sim/{i}`. Derived from
    /// the listener when `None`.
    pub advertise_url: Option<String>,
    /// First registrations are spread evenly over this long, so a fleet does not stampede.
    pub stagger: Duration,
    /// At most this many requests to the coordinator are in flight at once.
    pub max_in_flight: usize,
    /// Intervals and limits.
    pub timing: Timing,
    /// HTTPS for the shared listener; plain HTTP when `None`.
    pub tls: Option<TlsFiles>,
    /// A PEM CA file to trust when calling an `https://` coordinator.
    pub ca_file: Option<PathBuf>,
    /// The bearer token sent to the coordinator (see [`AgentConfig::token`]).
    pub token: Option<String>,
    /// The token the coordinator must present to every agent of the fleet; random when `None`.
    pub api_token: Option<String>,
}

impl SimConfig {
    /// `count` agents of `resources` each, default timing, a one-second start stagger.
    pub fn new(coordinator: impl Into<String>, count: usize, resources: Resources) -> Self {
        Self {
            coordinator: coordinator.into(),
            count,
            resources,
            attributes: BTreeMap::new(),
            reservations: Vec::new(),
            reserve_fraction: 1.0,
            hostname_prefix: "sim".into(),
            advertise_url: None,
            stagger: Duration::from_secs(1),
            max_in_flight: 128,
            timing: Timing::default(),
            tls: None,
            ca_file: None,
            token: None,
            api_token: None,
        }
    }
}

impl SimConfig {
    /// Whether simulated agent `i` sends the reservations (see [`SimConfig::reserve_fraction`]).
    pub fn reserves(&self, i: usize) -> bool {
        let f = self.reserve_fraction.clamp(0.0, 1.0);
        ((i + 1) as f64 * f).floor() > (i as f64 * f).floor()
    }
}

/// Checks a base URL and removes a trailing slash.
pub(crate) fn normalize_url(url: &str) -> Option<String> {
    let trimmed = url.trim().trim_end_matches('/');
    let rest = trimmed
        .strip_prefix("http://")
        .or_else(|| trimmed.strip_prefix("https://"))?;
    if rest.is_empty() || rest.contains(char::is_whitespace) {
        return None;
    }
    Some(trimmed.to_string())
}

/// Checks the coordinator URL; returns it without a trailing slash.
pub fn parse_coordinator_url(url: &str) -> Result<String, ConfigError> {
    normalize_url(url).ok_or_else(|| ConfigError::BadCoordinator(url.to_string()))
}

/// Checks a comma-separated list of coordinator URLs (one URL is a list of one; the agent
/// follows the leader among several); returns them normalized, joined by commas. The error
/// names the bad entry.
pub fn parse_coordinator_urls(text: &str) -> Result<String, ConfigError> {
    match protocol::leader::parse_coordinator_urls(text) {
        Ok(urls) => Ok(urls.join(",")),
        Err(protocol::leader::UrlListError::Bad(url)) => Err(ConfigError::BadCoordinator(url)),
        Err(protocol::leader::UrlListError::Empty) => {
            Err(ConfigError::BadCoordinator(text.to_owned()))
        }
    }
}

/// Parses `rack=r1,zone=a` (an empty string is no attributes).
pub fn parse_attributes(text: &str) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut out = BTreeMap::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, value) = item
            .split_once('=')
            .ok_or_else(|| ConfigError::BadAttribute(item.to_string()))?;
        let name = name.trim();
        if name.is_empty() {
            return Err(ConfigError::BadAttribute(item.to_string()));
        }
        if out
            .insert(name.to_string(), value.trim().to_string())
            .is_some()
        {
            return Err(ConfigError::DuplicateAttribute(name.to_string()));
        }
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_reserve_fraction_picks_that_share_of_the_simulated_agents() {
        let mut c = SimConfig::new("http://x", 100, "cpus=1".parse().unwrap());
        c.reserve_fraction = 0.1;
        assert_eq!((0..100).filter(|&i| c.reserves(i)).count(), 10);
        c.reserve_fraction = 1.0;
        assert!((0..100).all(|i| c.reserves(i)));
        c.reserve_fraction = 0.0;
        assert!(!(0..100).any(|i| c.reserves(i)));
    }

    #[test]
    fn attributes_parse_and_reject_bad_items() {
        let a = parse_attributes("rack=r1, zone=a").unwrap();
        assert_eq!(a["rack"], "r1");
        assert_eq!(a["zone"], "a");
        assert!(parse_attributes("").unwrap().is_empty());
        assert_eq!(
            parse_attributes("rack").unwrap_err(),
            ConfigError::BadAttribute("rack".into())
        );
        assert_eq!(
            parse_attributes("=x").unwrap_err(),
            ConfigError::BadAttribute("=x".into())
        );
        assert_eq!(
            parse_attributes("a=1,a=2").unwrap_err(),
            ConfigError::DuplicateAttribute("a".into())
        );
    }

    #[test]
    fn the_image_root_is_checked_and_canonical() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = AgentConfig::new("http://127.0.0.1:1", dir.path().join("work"));
        assert!(config.image_store().unwrap().is_none());
        config.image_root = Some(dir.path().join("missing"));
        let e = config.image_store().unwrap_err();
        assert!(e.to_string().starts_with("--image-root "), "{e}");
        std::fs::create_dir(dir.path().join("images")).unwrap();
        config.image_root = Some(dir.path().join("./images"));
        let store = config.image_store().unwrap().unwrap();
        assert_eq!(
            store.root,
            std::fs::canonicalize(dir.path().join("images")).unwrap()
        );
        assert_eq!(store.cache, dir.path().join("work/images"));
    }

    #[test]
    fn coordinator_urls_are_checked() {
        assert_eq!(parse_coordinator_url("http://h:1/").unwrap(), "http://h:1");
        assert!(parse_coordinator_url("h:1").is_err());
        assert!(parse_coordinator_url("http://").is_err());
        assert!(parse_coordinator_url("ftp://h").is_err());
        assert_eq!(
            parse_coordinator_urls("http://a:1/, http://b:2").unwrap(),
            "http://a:1,http://b:2"
        );
        assert_eq!(
            parse_coordinator_urls("http://a:1,b:2").unwrap_err(),
            ConfigError::BadCoordinator("b:2".into())
        );
        assert!(parse_coordinator_urls("").is_err());
    }
}
