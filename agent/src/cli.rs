//! The `agent` binary's command line ([`Cli`], clap derive), here in the library so that its
//! reference (`docs/src/reference/cli/agent.md`, `docs/man/agent.1`) is generated from it.

use std::path::PathBuf;

use clap::Parser;

/// A Parley agent: advertises this node's resources and runs the tasks the coordinator sends.
#[derive(Debug, Parser)]
#[command(name = "agent", version)]
pub struct Cli {
    /// Base URL of the coordinator; or several, separated by commas (the coordinators of a
    /// highly available cluster: the agent follows the leader among them).
    #[arg(
        long,
        env = "PARLEY_COORDINATOR",
        default_value = "http://127.0.0.1:5050"
    )]
    pub coordinator: String,
    /// Bearer token for the coordinator (an agent principal's secret; needed when the
    /// coordinator has a credentials file).
    #[arg(long, env = "PARLEY_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Address to serve the agent API on (port 0 picks a free one). Loopback by default: give
    /// the node's address (or 0.0.0.0) for a coordinator on another machine.
    #[arg(long, default_value = "127.0.0.1:5051")]
    pub listen: String,
    /// Resources to advertise, e.g. cpus=4,mem=8192,gpus=1 (mem and disk in MiB); detected
    /// from the machine when absent.
    #[arg(long, allow_hyphen_values = true)]
    pub resources: Option<String>,
    /// Attributes, e.g. rack=r1,zone=a.
    #[arg(long, default_value = "")]
    pub attributes: String,
    /// Reserve resources for a role's subtree, e.g. eng:cpus=4,mem=8192 (repeatable; the role
    /// must exist on the coordinator, the sum must fit in --resources).
    #[arg(long = "reserve", value_name = "ROLE:RESOURCES")]
    pub reserve: Vec<String>,
    /// With --simulate: the fraction of the simulated agents (0 to 1, spread evenly) that send
    /// the --reserve reservations.
    #[arg(long, default_value = "1", allow_hyphen_values = true)]
    pub reserve_fraction: String,
    /// Directory for the journal, the agent id and task sandboxes.
    #[arg(long, default_value = "./parley-agent")]
    pub work_dir: PathBuf,
    /// Hostname to advertise (default: the machine's).
    #[arg(long)]
    pub hostname: Option<String>,
    /// URL the coordinator uses to reach this agent (default: derived from --listen).
    #[arg(long)]
    pub advertise_url: Option<String>,
    /// A delegated cgroup v2 directory for per-task memory limits (default: RLIMIT_AS).
    #[arg(long)]
    pub cgroup_root: Option<PathBuf>,
    /// Seconds between SIGTERM and SIGKILL when a task is killed.
    #[arg(long, default_value = "5", allow_hyphen_values = true)]
    pub kill_grace_s: String,
    /// Seconds a finished task's sandbox is kept before it is deleted (default one day).
    #[arg(long, default_value = "86400", allow_hyphen_values = true)]
    pub sandbox_retention_s: String,
    /// Run this many simulated agents in this process instead of one real agent.
    #[arg(long, allow_hyphen_values = true)]
    pub simulate: Option<String>,
    /// Spread the simulated agents' first registrations over this many seconds.
    #[arg(long, default_value = "1", allow_hyphen_values = true)]
    pub stagger_s: String,
    /// Serve the agent API over HTTPS with this PEM certificate chain (needs --tls-key).
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// Trust only the CAs in this PEM file when calling an https:// coordinator (default: the
    /// built-in Mozilla roots).
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// The token the coordinator must present on launches, kills and output reads; generated
    /// at first start and kept in WORK_DIR/api_token (0600) when not given.
    #[arg(long, env = "PARLEY_AGENT_API_TOKEN", hide_env_values = true)]
    pub api_token: Option<String>,
    /// Run tasks as this user (NAME, UID or UID:GID); needed when the agent runs as root.
    #[arg(long)]
    pub task_user: Option<String>,
    /// Let tasks name images (isolation.image) under this directory: OCI image layouts and
    /// root filesystem tarballs, unpacked once into WORK_DIR/images (advertised as the
    /// attribute image_root).
    #[arg(long, value_name = "DIR")]
    pub image_root: Option<PathBuf>,
    /// Let an agent running as root run tasks as root (without --task-user).
    #[arg(long)]
    pub allow_root_tasks: bool,
    /// Task isolation: auto (a cgroup, v1 or v2, and pid/mount/ipc/uts namespaces per task,
    /// where the agent runs as root and finds cgroups) or none (RLIMIT_AS only).
    #[arg(long, default_value = "auto")]
    pub isolation: String,
    /// pids.max of an isolated task that does not set isolation.pids.
    #[arg(long, default_value = "4096", allow_hyphen_values = true)]
    pub default_pids: String,
    /// GPUs: auto (every NVIDIA device NVML finds; none found: no gpus resource), none, or
    /// device indices like 0,2. Simulated agents take gpus=N from --resources instead.
    #[arg(long, default_value = "auto", allow_hyphen_values = true)]
    pub gpus: String,
    /// How log lines are written.
    #[command(flatten)]
    pub log: observe::logging::LogArgs,
}
