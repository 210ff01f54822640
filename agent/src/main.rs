//! The `agent` binary: parses the command line, binds the listener, and runs one real agent or
//! a fleet of simulated ones until Ctrl-C or SIGTERM.
//!
//! ```text
//! agent --coordinator http://127.0.0.1:5050 --listen 127.0.0.1:0 --resources cpus=4,mem=8192,gpus=1 \
//!       --attributes rack=r1,zone=a --work-dir DIR
//! agent --coordinator https://coord:5050 --ca-file ca.pem --tls-cert agent.crt --tls-key agent.key
//! agent --simulate 1000 --resources cpus=24,mem=4096 --coordinator http://127.0.0.1:5050
//! ```

/// mimalloc instead of the system allocator: the request path allocates many small objects
/// (JSON, ids, headers), and glibc's malloc took a fifth of the coordinator's CPU under load.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::Duration;

use agent::cli::{Cli, Settings};
use agent::{AgentConfig, SimConfig, Timing, TlsFiles};
use anyhow::Context;
use clap::{CommandFactory, FromArgMatches};
use protocol::Resources;

fn main() {
    // The isolated launcher the task wrapper re-executes (see agent::isolation::launch).
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args
        .get(1)
        .is_some_and(|a| a == agent::isolation::launch::LAUNCH_ARG)
    {
        std::process::exit(agent::isolation::launch::main(&args[2..]));
    }
    let (cli, from_flags) = match parse_command_line() {
        Ok(parsed) => parsed,
        Err(e) => match e.kind() {
            clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                e.exit()
            }
            // One line, naming the bad value; clap's usage hints follow on later lines.
            _ => fail(
                e.to_string()
                    .lines()
                    .next()
                    .unwrap_or("invalid arguments")
                    .trim_start_matches("error: "),
            ),
        },
    };
    let settings = match layers(&cli) {
        Ok(settings) => settings,
        Err(e) => fail(&e),
    };
    observe::logging::init(cli.log.log_format, observe::logging::Stream::Stderr);
    observe::limits::raise_open_file_limit_logged();
    let names = settings.names(&from_flags);
    let plan = match plan(settings.resolved, &names) {
        Ok(plan) => plan,
        Err(e) => fail(&format!("{e:#}")),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => fail(&format!("cannot start the runtime: {e}")),
    };
    if let Err(e) = runtime.block_on(serve(plan)) {
        fail(&format!("{e:#}"));
    }
}

fn fail(message: &str) -> ! {
    eprintln!("agent: {message}");
    std::process::exit(2)
}

/// What to run, with every setting checked.
enum Plan {
    Real(AgentConfig, String),
    Simulated(SimConfig, String),
}

/// The command line, and the ids of the settings it (or an environment variable) set.
fn parse_command_line() -> Result<(Cli, Vec<String>), clap::Error> {
    let matches = Cli::command().try_get_matches()?;
    let cli = Cli::from_arg_matches(&matches)?;
    let set = matches
        .ids()
        .filter(|id| {
            matches!(
                matches.value_source(id.as_str()),
                Some(
                    clap::parser::ValueSource::CommandLine | clap::parser::ValueSource::EnvVariable
                )
            )
        })
        .map(|id| id.as_str().to_owned())
        .collect();
    Ok((cli, set))
}

/// The settings of every layer stacked, and the keys the file set.
struct Layered {
    resolved: Settings,
    file: Option<(std::path::PathBuf, Settings)>,
}

impl Layered {
    /// How errors name each setting: its flag, or its file key when the value came from the file.
    fn names(&self, from_flags: &[String]) -> Names {
        let mut in_file = Vec::new();
        if let Some((path, file)) = &self.file {
            let keys = toml::Value::try_from(file)
                .ok()
                .and_then(|v| v.as_table().map(|t| t.keys().cloned().collect::<Vec<_>>()))
                .unwrap_or_default();
            for key in keys.into_iter().filter(|k| !from_flags.contains(k)) {
                in_file.push((key, path.display().to_string()));
            }
        }
        Names { in_file }
    }
}

/// Names settings in error messages as the layer that set them spells them.
struct Names {
    in_file: Vec<(String, String)>,
}

impl Names {
    /// `--work-dir`, or `work_dir (in FILE)` when the file set it.
    fn of(&self, key: &str) -> String {
        match self.in_file.iter().find(|(k, _)| k == key) {
            Some((_, file)) => format!("{key} (in {file})"),
            None => format!("--{}", key.replace('_', "-")),
        }
    }
}

/// The defaults, then the file's settings (if `--config`), then the flags' and variables'.
fn layers(cli: &Cli) -> Result<Layered, String> {
    let file = match &cli.config {
        Some(path) => Some((
            path.clone(),
            Settings::from_file(path).map_err(|e| e.to_string())?,
        )),
        None => None,
    };
    let mut resolved = Settings::defaults();
    if let Some((_, file)) = &file {
        resolved = file.clone().over(resolved);
    }
    resolved = cli.settings.clone().over(resolved);
    Ok(Layered { resolved, file })
}

fn plan(s: Settings, names: &Names) -> anyhow::Result<Plan> {
    let name = |key: &str| names.of(key);
    // Every setting with a default has one after the layering; the fallbacks are never used.
    let defaults = Settings::defaults();
    let coordinator_text = s.coordinator.or(defaults.coordinator).unwrap_or_default();
    let coordinator = agent::config::parse_coordinator_urls(&coordinator_text)
        .with_context(|| name("coordinator"))?;
    let resources: Option<Resources> = s
        .resources
        .as_deref()
        .map(str::parse)
        .transpose()
        .with_context(|| name("resources"))?;
    let attributes = agent::config::parse_attributes(s.attributes.as_deref().unwrap_or(""))
        .with_context(|| name("attributes"))?;
    let reservations = s
        .reserve
        .unwrap_or_default()
        .iter()
        .map(|r| {
            r.parse::<protocol::reservation::Reservation>()
                .with_context(|| format!("{} {r:?}", name("reserve")))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let reserve_fraction = s.reserve_fraction.unwrap_or(1.0);
    anyhow::ensure!(
        (0.0..=1.0).contains(&reserve_fraction),
        "{} {reserve_fraction}: expected a number from 0 to 1",
        name("reserve_fraction")
    );
    let gpus: agent::gpu::GpuChoice = s.gpus.as_deref().unwrap_or("auto").parse()?;
    let kill_grace = seconds(&name("kill_grace_s"), s.kill_grace_s.unwrap_or(5.0))?;
    let stagger = seconds(&name("stagger_s"), s.stagger_s.unwrap_or(1.0))?;
    let sandbox_retention = seconds(
        &name("sandbox_retention_s"),
        s.sandbox_retention_s.unwrap_or(86_400.0),
    )?;
    let listen = s.listen.or(defaults.listen).unwrap_or_default();
    listen.parse::<std::net::SocketAddr>().with_context(|| {
        format!(
            "{} {listen:?}: expected HOST:PORT, e.g. 127.0.0.1:5051",
            name("listen")
        )
    })?;
    let timing = Timing {
        kill_grace,
        ..Timing::default()
    };
    let tls = match (s.tls_cert, s.tls_key) {
        (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
        (None, None) => None,
        (Some(_), None) => anyhow::bail!("{} needs {}", name("tls_cert"), name("tls_key")),
        (None, Some(_)) => anyhow::bail!("{} needs {}", name("tls_key"), name("tls_cert")),
    };

    if let Some(count) = s.simulate {
        anyhow::ensure!(
            count > 0,
            "{} {count}: expected a number of agents, at least 1",
            name("simulate")
        );
        let resources = match resources {
            Some(r) => r,
            None => {
                agent::resources::detect(&std::env::temp_dir()).context("detecting resources")?
            }
        };
        let mut config = SimConfig::new(coordinator, count as usize, resources);
        config.attributes = attributes;
        config.reservations = reservations;
        config.reserve_fraction = reserve_fraction;
        config.advertise_url = s.advertise_url;
        config.stagger = stagger;
        config.timing = timing;
        config.tls = tls;
        config.ca_file = s.ca_file;
        config.token = s.token;
        config.api_token = s.api_token;
        if let Some(h) = s.hostname {
            config.hostname_prefix = h;
        }
        return Ok(Plan::Simulated(config, listen));
    }
    let work_dir = s.work_dir.or(defaults.work_dir).unwrap_or_default();
    let mut config = AgentConfig::new(coordinator, work_dir);
    config.resources = resources;
    config.attributes = attributes;
    config.reservations = reservations;
    config.hostname = s.hostname;
    config.advertise_url = s.advertise_url;
    config.cgroup_root = s.cgroup_root;
    config.sandbox_retention = sandbox_retention;
    config.timing = timing;
    config.tls = tls;
    config.ca_file = s.ca_file;
    config.token = s.token;
    if let Some(token) = &s.api_token {
        agent::auth::check_form(token).with_context(|| name("api_token"))?;
    }
    config.api_token = s.api_token;
    config.task_user = s
        .task_user
        .as_deref()
        .map(agent::task_user::TaskUser::parse)
        .transpose()
        .with_context(|| name("task_user"))?;
    config.allow_root_tasks = s.allow_root_tasks.unwrap_or(false);
    config.image_root = s.image_root;
    config.isolation = s
        .isolation
        .as_deref()
        .unwrap_or("auto")
        .parse()
        .map_err(anyhow::Error::msg)?;
    let default_pids = s.default_pids.unwrap_or(agent::isolation::DEFAULT_PIDS);
    anyhow::ensure!(
        (1..=protocol::isolation::MAX_PIDS as u64).contains(&default_pids),
        "{} {default_pids}: expected a number from 1 to {}",
        name("default_pids"),
        protocol::isolation::MAX_PIDS
    );
    config.gpus = gpus;
    config.default_pids = default_pids;
    Ok(Plan::Real(config, listen))
}

/// A number of seconds, `name`d in the error: finite, not negative.
fn seconds(name: &str, value: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(value)
        .ok()
        .with_context(|| format!("{name} {value}: expected a non-negative number of seconds"))
}

async fn serve(plan: Plan) -> anyhow::Result<()> {
    match plan {
        Plan::Real(config, listen) => {
            let listener = bind(&listen).await?;
            Ok(agent::run(config, listener, observe::shutdown_signal()).await?)
        }
        Plan::Simulated(config, listen) => {
            let listener = bind(&listen).await?;
            Ok(agent::run_simulated(config, listener, observe::shutdown_signal()).await?)
        }
    }
}

async fn bind(listen: &str) -> anyhow::Result<tokio::net::TcpListener> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("--listen {listen}: cannot bind"))?;
    tracing::info!(addr = %listener.local_addr()?, "listening");
    Ok(listener)
}
