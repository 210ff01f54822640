//! The `coordinator` binary (package `parley`): command line and config file, and `--dev`;
//! everything else is the `coordinator` library.
//!
//! Modules: this file ([`coordinator::Overrides`] from the file and the flags, the runtime,
//! shutdown signals), `dev` (`--dev`: the coordinator plus local agents in one process), and in
//! the package's library `parley::cli` (the flags and the subcommands), `parley::secrets`
//! (`new-token` and `hash-secret` for credentials files), `parley::tls_init` (`tls init`) and
//! `parley::backup` (`backup` and `restore` of the registry).
//!
//! ```text
//! coordinator --listen 127.0.0.1:5050 [--config parley.toml] [--credentials creds.toml] ...
//! coordinator new-token            # a random token and the hash to put in the credentials file
//! printf %s "$TOKEN" | coordinator hash-secret
//! coordinator tls init --out pki --coordinator coord1=10.0.0.2,coord1.example
//! coordinator backup --out registry.json [--data-dir DIR | --etcd URL --etcd-prefix P]
//! coordinator restore --from registry.json [--data-dir DIR | --etcd URL --etcd-prefix P]
//! ```
//!
//! The durable registry is `--data-dir`/registry.redb (default `data/registry.redb`) unless
//! `--in-memory`; with `--etcd URL[,URL...] --advertise-url URL` it is on etcd instead, and
//! several coordinators elect a leader (`coordinator::ha`; exit code 3 when this one loses the
//! leadership: restart it and it rejoins as a follower). Settings: defaults, then the TOML file, then flags. SIGHUP re-reads
//! the TLS certificate and the credentials file (`coordinator::reload`). A bad flag or setting is a one-line
//! error naming it, before anything starts. Ctrl-C or SIGTERM shut down gracefully.

/// mimalloc instead of the system allocator: the request path allocates many small objects
/// (JSON, ids, headers), and glibc's malloc took a fifth of the coordinator's CPU under load.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use coordinator::{Config, Layer, Overrides};

mod dev;

use parley::cli::{self, Args};

/// The HA options of `--etcd`, if given (validated).
fn ha_options(args: &Args) -> anyhow::Result<Option<coordinator::ha::HaOptions>> {
    let Some(etcd) = &args.registry.etcd else {
        anyhow::ensure!(
            args.advertise_url.is_none(),
            "--advertise-url needs --etcd (it is how the other coordinators' followers reach this one)"
        );
        return Ok(None);
    };
    anyhow::ensure!(!args.dev, "--etcd is not supported with --dev");
    let Some(advertise_url) = args.advertise_url.clone() else {
        anyhow::bail!("--etcd needs --advertise-url URL (how the others reach this coordinator)");
    };
    let options = coordinator::ha::HaOptions {
        endpoints: coordinator::ha::HaOptions::parse_endpoints(etcd),
        prefix: args.registry.etcd_prefix.clone(),
        advertise_url,
        lease_ttl: std::time::Duration::from_secs(args.leader_lease_s),
        renew_deadline: args
            .leader_renew_deadline_ms
            .map(std::time::Duration::from_millis),
        reregister_grace: std::time::Duration::from_secs(args.reregister_grace_s),
        leader_probe: (args.leader_probe_ms > 0)
            .then(|| std::time::Duration::from_millis(args.leader_probe_ms)),
    };
    options.validate()?;
    Ok(Some(options))
}

/// Agents kill their tasks of frameworks that are not partition-aware a heartbeat before the
/// agent timeout without an answer from a coordinator; a failover longer than that (the
/// leader lease and the re-registration grace) would have them kill every such task.
fn warn_if_failover_outlasts_agent_timeout(
    config: &coordinator::Config,
    ha: &coordinator::ha::HaOptions,
) {
    let agent_timeout = config
        .agent_heartbeat_interval
        .saturating_mul(config.max_missed_heartbeats);
    let failover = ha.lease_ttl + ha.reregister_grace;
    if failover + config.agent_heartbeat_interval >= agent_timeout {
        tracing::warn!(
            ?agent_timeout,
            ?failover,
            "a failover (leader lease + re-registration grace) can outlast the agent timeout \
             (heartbeat interval x max missed heartbeats): agents cut off from every coordinator \
             that long kill their tasks of frameworks that are not partition-aware; raise \
             --max-missed-heartbeats"
        );
    }
}

/// Builds the config from defaults, the file and the flags; validates it (as
/// [`Config::from_layers`], with the file's `listen` read between the layers).
fn load(args: &Args) -> anyhow::Result<(Config, SocketAddr)> {
    let mut config = Config::default();
    let mut listen: SocketAddr = "127.0.0.1:5050".parse()?;
    if let Some(path) = &args.config {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        let file = Overrides::from_toml(&text)?;
        file.apply(&mut config, Layer::File)?;
        if let Some(l) = &file.listen {
            listen = l
                .parse()
                .with_context(|| format!("invalid listen {l:?} in config file"))?;
        }
    }
    args.settings.apply(&mut config, Layer::Flags)?;
    if let Some(l) = args.listen {
        listen = l;
    }
    config.validate()?;
    // The local agents of --dev call the coordinator by its loopback URL and would need the
    // certificate's CA; --dev is for trying Parley out on one machine.
    anyhow::ensure!(
        !(args.dev && config.tls_cert.is_some()),
        "--tls-cert/--tls-key are not supported with --dev (it serves plain HTTP on loopback)"
    );
    if args.dev && !listen.ip().is_loopback() && config.credentials.is_none() {
        anyhow::bail!(
            "--dev without --credentials is open to anyone who can connect, so it listens on \
             loopback only: use --listen 127.0.0.1:PORT, or give --credentials FILE"
        );
    }
    // SIGHUP re-reads the certificate and the credentials file. Not with --dev, whose local
    // agents' principal is added in code, not in the file.
    config.reload_on_sighup = !args.dev;
    if !args.registry.in_memory {
        config.registry = Some(args.registry.data_dir.join("registry.redb"));
    }
    Ok((config, listen))
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) if !e.use_stderr() => {
            // --help and --version.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let text = e.to_string();
            let line = text
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("invalid arguments");
            eprintln!("{line}");
            return ExitCode::from(2);
        }
    };
    if let Some(command) = &args.command {
        // `coordinator --data-dir DIR backup` would back up the default registry: the
        // subcommand has flags of its own.
        let before = Args::try_parse_from(["coordinator"]).map(|a| a.registry);
        let registry_command =
            matches!(command, cli::Command::Backup(_) | cli::Command::Restore(_));
        if registry_command && before.is_ok_and(|defaults| defaults != args.registry) {
            eprintln!(
                "error: --data-dir, --in-memory, --etcd and --etcd-prefix go after the \
                 subcommand, e.g. coordinator backup --data-dir DIR --out FILE"
            );
            return ExitCode::from(2);
        }
        return cli::run(command);
    }
    let loaded = load(&args).and_then(|(c, l)| Ok((c, l, ha_options(&args)?)));
    let (config, listen, ha) = match loaded {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(2);
        }
    };
    // Standard output, as the coordinator always logged (scripts read its listening line).
    observe::logging::init(config.log_format, observe::logging::Stream::Stdout);
    observe::limits::raise_open_file_limit_logged();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("cannot listen on {listen}"))?;
        if args.dev {
            let options = dev::DevOptions {
                agents: usize::from(args.dev_agents),
                data_dir: args.registry.data_dir.clone(),
                jobs_port: (args.dev_jobs_port != 0).then_some(args.dev_jobs_port),
            };
            dev::run(config, listener, options, observe::shutdown_signal()).await
        } else if let Some(ha) = ha {
            warn_if_failover_outlasts_agent_timeout(&config, &ha);
            // The registry is on etcd, not in --data-dir.
            Ok(coordinator::serve_ha(config, ha, listener, observe::shutdown_signal()).await?)
        } else {
            Ok(coordinator::serve(config, listener, observe::shutdown_signal()).await?)
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e)
            if matches!(
                e.downcast_ref::<coordinator::ServeError>(),
                Some(coordinator::ServeError::LeadershipLost)
            ) =>
        {
            // Stepping down by exiting: the supervisor starts this coordinator again, as a
            // follower with fresh books.
            eprintln!("error: {e:#}");
            ExitCode::from(3)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
