//! `parleyctl`, the operators' command line for a Parley coordinator: the same HTTP API as
//! every client, shown as aligned tables (or the API's JSON with `--json`).
//!
//! Module map:
//! - [`cli`]: the command line (clap): `--coordinator` / `PARLEY_COORDINATOR`, `--token` /
//!   `PARLEY_TOKEN`, `--ca-file`, `--jobs-url` / `PARLEY_JOBS_URL`, `--json`, and the
//!   subcommands.
//! - [`client`]: [`client::Api`], HTTP to the coordinator, failures as [`CtlError`].
//! - [`commands`]: one file per kind of subcommand (lists, `describe`, roles, explain, changes,
//!   `task kill`, drain and reactivate, logs, the offer watch, and the jobs service's `run`,
//!   `jobs`, `job`).
//! - [`table`]: the aligned table writer; [`format`](mod@format): how values read in a table.
//! - [`error`]: [`CtlError`] and the exit codes.
//!
//! The binary (`src/main.rs`) parses the command line, calls [`run`] and exits with
//! [`CtlError::exit_code`]; tests call [`run`] with a buffer for the output.

pub mod cli;
pub mod client;
pub mod commands;
pub mod error;
pub mod format;
pub mod table;

use std::io::Write;

pub use cli::{Cli, Command, Describe, JobAction, TaskAction, TaskRef};
pub use error::{CtlError, EXIT_API, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE};

/// Runs one parsed command line, writing what it shows to `out`.
pub async fn run(cli: &Cli, out: &mut (dyn Write + Send)) -> Result<(), CtlError> {
    let json = cli.json;
    if let Command::Completions { shell } = &cli.command {
        return commands::completions(*shell, out);
    }
    if let Some(done) = run_jobs(cli, out).await {
        return done;
    }
    let api = client::Api::new(&cli.coordinator, cli.token.clone(), cli.ca_file.as_deref())?;
    match &cli.command {
        Command::Offers { watch: true, count } => {
            commands::watch::watch(&api, *count, json, out).await
        }
        Command::Offers { watch: false, .. } => commands::list::offers(&api, json, out).await,
        Command::Agents => commands::list::agents(&api, json, out).await,
        Command::Frameworks => commands::list::frameworks(&api, json, out).await,
        Command::Tasks {
            framework,
            agent,
            state,
        } => {
            let filter = commands::list::TaskFilter {
                framework: framework.as_deref(),
                agent: agent.as_deref(),
                state: state.as_deref(),
            };
            commands::list::tasks(&api, filter, json, out).await
        }
        Command::Task {
            action: TaskAction::Kill { task },
        } => commands::task::kill(&api, &task.task, task.framework.as_deref(), json, out).await,
        Command::Describe { what } => match what {
            Describe::Task { task } => {
                commands::describe::task(&api, &task.task, task.framework.as_deref(), json, out)
                    .await
            }
            Describe::Agent { agent } => commands::describe::agent(&api, agent, json, out).await,
            Describe::Framework { framework } => {
                commands::describe::framework(&api, framework, json, out).await
            }
        },
        Command::Roles => commands::roles::roles(&api, json, out).await,
        Command::Explain { framework } => {
            commands::explain::explain(&api, framework, json, out).await
        }
        Command::Weight { role, weight } => {
            commands::change::weight(&api, role, *weight, json, out).await
        }
        Command::Apply { file, dry_run } => commands::apply::apply(&api, file, *dry_run, out).await,
        Command::Teardown { framework } => {
            commands::change::teardown(&api, framework, json, out).await
        }
        Command::Drain { agent, deadline_s } => {
            commands::maintenance::drain(&api, agent, *deadline_s, json, out).await
        }
        Command::Reactivate { agent } => {
            commands::maintenance::reactivate(&api, agent, json, out).await
        }
        Command::Logs {
            task,
            framework,
            stderr,
            follow,
        } => commands::logs::logs(&api, task, framework.as_deref(), *stderr, *follow, out).await,
        Command::Run { .. } | Command::Jobs | Command::Job { .. } | Command::Completions { .. } => {
            Ok(())
        }
    }
}

/// Runs the jobs service's commands (`None` for the coordinator's).
async fn run_jobs(cli: &Cli, out: &mut (dyn Write + Send)) -> Option<Result<(), CtlError>> {
    use commands::jobs;
    let api = || {
        jobs::JobsApi::new(
            &cli.jobs_url,
            cli.jobs_token.clone(),
            cli.ca_file.as_deref(),
        )
    };
    let json = cli.json;
    let result = match &cli.command {
        Command::Run { file, wait } => match api() {
            Ok(api) => jobs::run(&api, file, *wait, json, out).await,
            Err(e) => Err(e),
        },
        Command::Jobs => match api() {
            Ok(api) => jobs::list(&api, json, out).await,
            Err(e) => Err(e),
        },
        Command::Job { action } => match api() {
            Ok(api) => match action {
                JobAction::Status { name } => jobs::status(&api, name, json, out).await,
                JobAction::Stop { name } => jobs::stop(&api, name, json, out).await,
                JobAction::Restart { name } => jobs::restart(&api, name, json, out).await,
                JobAction::Scale { name, replicas } => {
                    jobs::scale(&api, name, *replicas, json, out).await
                }
                JobAction::Delete { name } => jobs::delete(&api, name, json, out).await,
                JobAction::Run {
                    command,
                    count,
                    cpus,
                    mem,
                    name,
                    wait,
                } => {
                    let wrap = jobs::Wrap {
                        command,
                        count: *count,
                        cpus: *cpus,
                        mem: *mem,
                        name: name.as_deref(),
                    };
                    jobs::run_command(&api, &wrap, *wait, json, out).await
                }
                JobAction::Logs {
                    name,
                    index,
                    stderr,
                    follow,
                } => match client::Api::new(
                    &cli.coordinator,
                    cli.token.clone(),
                    cli.ca_file.as_deref(),
                ) {
                    Ok(coordinator) => {
                        jobs::logs(&api, &coordinator, name, *index, *stderr, *follow, out).await
                    }
                    Err(e) => Err(e),
                },
            },
            Err(e) => Err(e),
        },
        _ => return None,
    };
    Some(result)
}

/// Parses `args` and runs them: the exit code, with errors written to `err` as
/// `parleyctl: MESSAGE` (clap's own usage and help texts as clap writes them).
pub async fn main_with<I, T>(args: I, out: &mut (dyn Write + Send), err: &mut dyn Write) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::Parser;
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = write!(err, "{}", e.render());
            return e.exit_code();
        }
    };
    match run(&cli, out).await {
        Ok(()) => EXIT_OK,
        // The reader went away (`parleyctl tasks | head`): nothing more to say.
        Err(CtlError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => EXIT_OK,
        Err(e) => {
            let _ = writeln!(err, "parleyctl: {e}");
            e.exit_code()
        }
    }
}
