//! The command line ([`Cli`], clap derive): global connection flags and one subcommand each.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// The task states `tasks --state` accepts.
pub const TASK_STATES: [&str; 8] = [
    "staging", "starting", "running", "finished", "failed", "killed", "lost", "error",
];

/// parleyctl: look at and steer a Parley coordinator from a terminal.
///
/// Exit codes: 0 ok, 1 the coordinator answered an error (or named no such thing), 2 usage,
/// 3 the coordinator could not be reached.
#[derive(Debug, Parser)]
#[command(
    name = "parleyctl",
    version,
    about,
    long_about = None,
    after_help = "A framework is named by its id or its unique name, an agent by its id or its unique hostname.\n\nExit codes: 0 ok, 1 the coordinator answered an error (or named no such thing), 2 usage, 3 the coordinator could not be reached."
)]
pub struct Cli {
    /// The coordinator's base URL; or several, separated by commas (the coordinators of a
    /// highly available cluster: requests go to the leader among them).
    #[arg(
        long,
        global = true,
        env = "PARLEY_COORDINATOR",
        default_value = "http://127.0.0.1:5050"
    )]
    pub coordinator: String,
    /// A bearer token (an operator principal's: `read` to look, `admin` to change weights or
    /// tear frameworks down), when the coordinator has credentials.
    #[arg(long, global = true, env = "PARLEY_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// A PEM file of the CA to trust for an https:// coordinator (instead of the system's).
    #[arg(long, global = true, value_name = "PEM")]
    pub ca_file: Option<PathBuf>,
    /// The jobs service's base URL (for `run`, `jobs` and `job`); `parley --dev` starts one
    /// on port 5070.
    #[arg(
        long,
        global = true,
        env = "PARLEY_JOBS_URL",
        default_value = "http://127.0.0.1:5070"
    )]
    pub jobs_url: String,
    /// The jobs service's API token, when it has one (its `--api-token`).
    #[arg(long, global = true, env = "PARLEY_JOBS_TOKEN", hide_env_values = true)]
    pub jobs_token: Option<String>,
    /// Print the API's JSON as it is, for scripts, instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// One subcommand.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The outstanding offers; with --watch, the offer event stream, one line per event.
    Offers {
        /// Follow `/api/v1/offers/events` until interrupted.
        #[arg(long)]
        watch: bool,
        /// With --watch: stop after this many events.
        #[arg(long, requires = "watch", value_name = "N")]
        count: Option<u64>,
    },
    /// The agents: capacity, used, offered.
    Agents,
    /// The frameworks: role, state, dominant share, tasks.
    Frameworks,
    /// The tasks, optionally of one framework, on one agent or in one state.
    Tasks {
        /// Only this framework's tasks (its id or its unique name).
        #[arg(long, value_name = "FRAMEWORK")]
        framework: Option<String>,
        /// Only the tasks on this agent (its id or its unique hostname). With --json, the
        /// API's list filtered to them.
        #[arg(long, value_name = "AGENT")]
        agent: Option<String>,
        /// Only tasks in this state.
        #[arg(long, value_parser = TASK_STATES)]
        state: Option<String>,
    },
    /// One task: kill it.
    Task {
        /// What to do with it.
        #[command(subcommand)]
        action: TaskAction,
    },
    /// One task, agent or framework in detail, in labelled lines (with --json, the API's
    /// answers it is made of).
    Describe {
        /// What to describe.
        #[command(subcommand)]
        what: Describe,
    },
    /// The role tree with weights, allocations and dominant shares.
    Roles,
    /// Prints a shell completion script for parleyctl.
    ///
    /// Load it in the current shell with, for example, `source <(parleyctl completions bash)`,
    /// or install it where your shell looks: `parleyctl completions bash >
    /// /etc/bash_completion.d/parleyctl`, `parleyctl completions zsh > "${fpath[1]}/_parleyctl"`,
    /// `parleyctl completions fish > ~/.config/fish/completions/parleyctl.fish`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Why a framework is, or is not, getting offers.
    Explain {
        /// The framework (its id or its unique name).
        framework: String,
    },
    /// Sets a role's weight (creating the role if needed); needs an admin token.
    Weight {
        /// The role's path, e.g. `eng/batch`.
        role: String,
        /// The new weight (a positive number).
        weight: f64,
    },
    /// Makes the roles of a TOML file so (weights, guarantees, limits), sending only what
    /// differs: a second apply changes nothing. The file is checked in full first; a mistake
    /// names its key and nothing is applied. Needs an admin token.
    Apply {
        /// The roles file: `[roles."eng"]` tables with `weight`, `guarantee = { cpus = 4 }`,
        /// `limit = {..}` (an empty table clears a guarantee or limit).
        #[arg(short = 'f', long = "file", value_name = "FILE")]
        file: PathBuf,
        /// Print what would change, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Removes a framework: kills its tasks, rescinds its offers; needs an admin token.
    Teardown {
        /// The framework (its id or its unique name).
        framework: String,
    },
    /// Drains an agent for maintenance: no new offers, its offers rescinded, its frameworks
    /// told; tasks still running after the deadline are killed. Needs an admin token.
    Drain {
        /// The agent (its id or its unique hostname).
        agent: String,
        /// Seconds until the tasks still running there are killed (0 kills them now).
        #[arg(long, value_name = "N", allow_negative_numbers = true)]
        deadline_s: f64,
    },
    /// Ends an agent's drain: it is offered again. Needs an admin token.
    Reactivate {
        /// The agent (its id or its unique hostname).
        agent: String,
    },
    /// A task's output (stdout, or stderr), read from its agent through the coordinator.
    Logs {
        /// The task's id.
        task: String,
        /// The task's framework (id or unique name), when several frameworks have a task of
        /// that id.
        #[arg(long, value_name = "FRAMEWORK")]
        framework: Option<String>,
        /// Show stderr instead of stdout.
        #[arg(long)]
        stderr: bool,
        /// Keep printing new output until the task ends.
        #[arg(long, short)]
        follow: bool,
    },
    /// Submits a job spec (TOML, or JSON for a `.json` file) to the jobs service. A service
    /// that exists is updated to the file's spec instead: scaled, or rolled replica by replica
    /// within its `max_unavailable` and `max_surge`.
    Run {
        /// The spec file.
        file: PathBuf,
        /// Wait for the job to end (a service: until every replica runs the latest spec),
        /// printing its progress; the exit code is 0 only if it succeeded. A periodic job is
        /// not waited for.
        #[arg(long)]
        wait: bool,
    },
    /// The jobs service's jobs.
    Jobs,
    /// One job of the jobs service.
    Job {
        /// What to do with it.
        #[command(subcommand)]
        action: JobAction,
    },
}

/// A task named on the command line: its id, and its framework when several have that id.
#[derive(Debug, Clone, Args)]
pub struct TaskRef {
    /// The task's id.
    pub task: String,
    /// The task's framework (id or unique name), when several frameworks have a task of that
    /// id.
    #[arg(long, value_name = "FRAMEWORK")]
    pub framework: Option<String>,
}

/// What `parleyctl task` does.
#[derive(Debug, Subcommand)]
pub enum TaskAction {
    /// Kills the task: the kill goes to its agent, and its end reaches its framework as a
    /// status update. A task that has already ended is an error (409 task_terminal). Needs an
    /// admin token.
    Kill {
        /// The task.
        #[command(flatten)]
        task: TaskRef,
    },
}

/// What `parleyctl describe` shows.
#[derive(Debug, Subcommand)]
pub enum Describe {
    /// A task: its state and when it last changed, its framework and agent by name, its
    /// resources, exit code, reason, health and latest status message.
    Task {
        /// The task.
        #[command(flatten)]
        task: TaskRef,
    },
    /// An agent: address, state, attributes, resources total, used, offered and free,
    /// reservations, and the tasks and offers on it.
    Agent {
        /// The agent (its id or its unique hostname).
        agent: String,
    },
    /// A framework: role, state, dominant share, used and offered resources, its tasks and
    /// offers, and why it is or is not offered (`explain`'s summary, stalled included).
    Framework {
        /// The framework (its id or its unique name).
        framework: String,
    },
}

/// What `parleyctl job` does.
#[derive(Debug, Subcommand)]
pub enum JobAction {
    /// The job's state, its tasks by state, and its failed attempts with exit codes.
    Status {
        /// The job's name.
        name: String,
    },
    /// Stops the job: nothing more is launched, running tasks are killed.
    Stop {
        /// The job's name.
        name: String,
    },
    /// Sets a service's number of replicas.
    Scale {
        /// The service's name.
        name: String,
        /// How many replicas (0 or more).
        replicas: u32,
    },
    /// Restarts a service: its replicas are killed and start again at once.
    Restart {
        /// The service's name.
        name: String,
    },
    /// A task's output (stdout, or stderr): its latest attempt's, read from its agent through
    /// the coordinator.
    Logs {
        /// The job's name.
        name: String,
        /// The task's index in the array (or the service's replica).
        #[arg(long, short, default_value_t = 0)]
        index: u32,
        /// Show stderr instead of stdout.
        #[arg(long)]
        stderr: bool,
        /// Keep printing new output until the task ends.
        #[arg(long, short)]
        follow: bool,
    },
    /// Submits a batch job that runs one shell command COUNT times (like `sbatch --wrap`): no
    /// spec file needed. Each task gets `PARLEY_TASK_INDEX` in its environment. The flags are
    /// checked before anything is sent.
    Run {
        /// The shell command each task runs.
        #[arg(long, value_name = "CMD")]
        command: String,
        /// How many tasks (the array's size), 1 or more.
        #[arg(long, default_value_t = 1, value_name = "N")]
        count: u32,
        /// CPUs per task (more than 0).
        #[arg(
            long,
            default_value_t = 1.0,
            value_name = "X",
            allow_negative_numbers = true
        )]
        cpus: f64,
        /// Memory per task, in MiB (0 or more).
        #[arg(
            long,
            default_value_t = 128.0,
            value_name = "MB",
            allow_negative_numbers = true
        )]
        mem: f64,
        /// The job's name: 1-63 lowercase letters, digits and inner dashes. Without it, the
        /// job is named `run-` and the time in milliseconds.
        #[arg(long)]
        name: Option<String>,
        /// Wait for the job to end, printing its progress; the exit code is 0 only if it
        /// succeeded.
        #[arg(long)]
        wait: bool,
    },
    /// Deletes the job (killing what still runs).
    Delete {
        /// The job's name.
        name: String,
    },
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Each shell's script is not empty and completes the subcommands.
    #[test]
    fn completions_name_the_subcommands() {
        for shell in ["bash", "zsh", "fish"] {
            let cli = Cli::try_parse_from(["parleyctl", "completions", shell]).unwrap();
            let Command::Completions { shell } = cli.command else {
                panic!("not the completions command");
            };
            let mut out = Vec::new();
            crate::commands::completions(shell, &mut out).unwrap();
            let script = String::from_utf8(out).unwrap();
            assert!(!script.trim().is_empty(), "{shell}: empty");
            for sub in [
                "offers",
                "explain",
                "drain",
                "completions",
                "describe",
                "kill",
            ] {
                assert!(script.contains(sub), "{shell} does not complete {sub}");
            }
        }
        assert!(Cli::try_parse_from(["parleyctl", "completions", "tcsh"]).is_err());
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn bad_arguments_are_usage_errors() {
        for bad in [
            "weight eng heavy",
            "tasks --state sleeping",
            "offers --count 1",
            "nonsense",
            "",
            "task kill",
            "describe node x",
            "job run",
            "job run --command true --count -1",
            "job run --command true --cpus lots",
        ] {
            let bad: Vec<&str> = std::iter::once("parleyctl")
                .chain(bad.split_whitespace())
                .collect();
            let err = Cli::try_parse_from(&bad).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{bad:?}");
        }
        let cli =
            Cli::try_parse_from(["parleyctl", "--json", "tasks", "--state", "running"]).unwrap();
        assert!(cli.json);
        assert!(matches!(cli.command, Command::Tasks { state: Some(s), .. } if s == "running"));
        let cli = Cli::try_parse_from([
            "parleyctl",
            "--jobs-url",
            "http://h:1",
            "job",
            "status",
            "render",
        ])
        .unwrap();
        assert_eq!(cli.jobs_url, "http://h:1");
        assert!(
            matches!(cli.command, Command::Job { action: JobAction::Status { name } } if name == "render")
        );
        assert!(Cli::try_parse_from(["parleyctl", "job", "status"]).is_err());
    }
}
