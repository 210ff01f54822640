//! Settings defined once, as one struct that is both a binary's TOML settings file (serde) and
//! its flags with their `PARLEY_*` environment variables (`clap::Args`): the coordinator's
//! `Overrides`, the agent's and the jobs service's `Settings`. Helpers for the tests that walk
//! every setting through its flag, its variable and its file key ([`sample`], [`from_flags`],
//! [`EnvChild`]), and for the commented settings files the Debian package installs in
//! `/etc/parley` ([`file_keys`], [`commented_toml`]), generated from the same definitions.

use std::any::TypeId;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;

/// One sample value of a setting, as a flag or environment variable takes it and as the file
/// takes it (a whole `key = value` line, or a table).
#[derive(Debug, Clone)]
pub struct Sample {
    /// The flag's or variable's value.
    pub text: String,
    /// The file's line(s).
    pub toml: String,
}

/// A sample value for `arg`, from the type its value parser produces (text and TOML of a
/// number, a path or string, a boolean). `exceptions` are `(key, text, toml)` for the settings
/// with a form of their own (a repeatable flag that is a list or table in the file, `on`/`off`).
///
/// # Panics
///
/// When the type has no sample and `exceptions` do not name the setting.
pub fn sample(arg: &clap::Arg, exceptions: &[(&str, &str, &str)]) -> Sample {
    let key = arg.get_id().as_str();
    if let Some((_, text, toml)) = exceptions.iter().find(|(k, _, _)| *k == key) {
        return Sample {
            text: (*text).into(),
            toml: (*toml).into(),
        };
    }
    let ty = arg.get_value_parser().type_id();
    let (text, value) = if ty == TypeId::of::<f64>() {
        ("7.5", "7.5".to_owned())
    } else if ty == TypeId::of::<u32>() || ty == TypeId::of::<u64>() || ty == TypeId::of::<usize>()
    {
        ("7", "7".to_owned())
    } else if ty == TypeId::of::<PathBuf>() || ty == TypeId::of::<String>() {
        ("/etc/parley/sample", "\"/etc/parley/sample\"".to_owned())
    } else if ty == TypeId::of::<bool>() {
        ("true", "true".to_owned())
    } else {
        panic!("{key}: no sample for its type; add it to the exceptions");
    };
    Sample {
        text: text.into(),
        toml: format!("{key} = {value}\n"),
    }
}

/// The settings parsed from the command line `args` by `command` (named `name`), ignoring the
/// environment: the arguments are rewritten without their variables, so a `PARLEY_*` variable
/// set where the tests run cannot change the result.
///
/// # Panics
///
/// When the arguments do not parse.
pub fn from_flags<T: clap::FromArgMatches>(command: clap::Command, args: &[String]) -> T {
    let name = command.get_name().to_owned();
    let matches = command
        .mut_args(|a| a.env(None))
        .try_get_matches_from(std::iter::once(name).chain(args.iter().cloned()))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    T::from_arg_matches(&matches).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Settings parsed from the environment alone, in a child process: clap reads variables from
/// the process's environment at parse time, and setting one in the test process
/// (`std::env::set_var`) would race the binary's other tests, which run in parallel threads.
/// So the test binary runs one test again in a child process ([`EnvChild::is_child`] there),
/// `PARLEY_*` variables of this process removed and the given ones set; that test calls
/// [`EnvChild::print`] instead of testing, which prints the settings as their `Debug` text.
#[derive(Debug, Clone, Copy)]
pub struct EnvChild {
    /// The test to run in the child, its full path (`module::name`), which must start with
    /// `if CHILD.is_child() { return CHILD.print::<T>(command) }`.
    pub test: &'static str,
    /// The variable set in the child process, naming this harness.
    pub marker: &'static str,
}

/// What the child prints before the settings it parsed.
const CHILD_MARK: &str = "parsed from the environment: ";

impl EnvChild {
    /// Whether this process is the child.
    pub fn is_child(&self) -> bool {
        std::env::var_os(self.marker).is_some()
    }

    /// In the child: prints the settings `command` parses from this process's environment alone.
    ///
    /// # Panics
    ///
    /// When the environment does not parse.
    pub fn print<T: clap::FromArgMatches + std::fmt::Debug>(&self, command: clap::Command) {
        let name = command.get_name().to_owned();
        let matches = command
            .try_get_matches_from([name])
            .unwrap_or_else(|e| panic!("{e}"));
        let settings = T::from_arg_matches(&matches).unwrap_or_else(|e| panic!("{e}"));
        println!("{CHILD_MARK}{settings:?}");
    }

    /// The `Debug` text of the settings the child parses with `vars` set.
    ///
    /// # Panics
    ///
    /// When the child fails or prints no settings.
    pub fn parse(&self, vars: &[(&str, &str)]) -> String {
        let exe = std::env::current_exe().unwrap_or_else(|e| panic!("{e}"));
        let mut child = Command::new(exe);
        child.args(["--exact", self.test, "--nocapture", "--test-threads=1"]);
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("PARLEY_") {
                child.env_remove(name);
            }
        }
        child.env(self.marker, "1").envs(vars.iter().copied());
        let (stdout, stderr, exited) = run_to_end(child);
        // `None`: the exit status was taken by an agent's orphan reaper running in another
        // test of the same binary (it reaps any child of the process that nobody registered);
        // the settings line, printed last, then tells whether the child succeeded.
        assert!(exited != Some(false), "{vars:?}: {stdout}{stderr}");
        stdout
            .lines()
            .find_map(|l| l.split_once(CHILD_MARK).map(|(_, settings)| settings))
            .unwrap_or_else(|| panic!("{vars:?}: no settings in {stdout}{stderr}"))
            .to_owned()
    }
}

/// Runs `cmd` to its end: its stdout, its stderr, and whether it succeeded (`None` when its
/// exit status was reaped by someone else, `ECHILD`).
fn run_to_end(mut cmd: Command) -> (String, String, Option<bool>) {
    use std::io::Read as _;
    use std::process::Stdio;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut err_pipe = child
        .stderr
        .take()
        .unwrap_or_else(|| panic!("no stderr pipe"));
    // Read on a thread of its own, so a full stderr pipe cannot stall the child.
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = err_pipe.read_to_string(&mut text);
        text
    });
    let mut stdout = String::new();
    if let Some(mut out) = child.stdout.take() {
        let _ = out.read_to_string(&mut stdout);
    }
    let stderr = stderr.join().unwrap_or_default();
    let exited = match child.wait() {
        Ok(status) => Some(status.success()),
        Err(e) if e.raw_os_error() == Some(ECHILD) => None,
        Err(e) => panic!("{e}"),
    };
    (stdout, stderr, exited)
}

/// Linux's `ECHILD`: no such child (its status was already collected).
const ECHILD: i32 = 10;

/// Checks every setting of `command` (a `clap::Args` struct's arguments): its flag is its
/// field's name with `-` for `_`, its environment variable is `env(key)` and no other setting's,
/// its file key is its name (the sample file line sets something), and it has help for the
/// reference. `parse` reads a settings file's text.
///
/// # Panics
///
/// On the first setting that breaks a rule.
pub fn check_named_after_fields<T: PartialEq + Default + std::fmt::Debug, E: std::fmt::Display>(
    command: &clap::Command,
    env: impl Fn(&str) -> String,
    samples: &[(&str, &str, &str)],
    parse: impl Fn(&str) -> Result<T, E>,
) {
    let mut variables = Vec::new();
    for arg in command.get_arguments() {
        let key = arg.get_id().as_str();
        assert_eq!(
            arg.get_long(),
            Some(key.replace('_', "-").as_str()),
            "{key}: its flag"
        );
        let variable = env(key);
        assert_eq!(
            arg.get_env().map(|e| e.to_string_lossy().into_owned()),
            Some(variable.clone()),
            "{key}: its environment variable"
        );
        assert!(!variables.contains(&variable), "{variable} twice");
        variables.push(variable);
        let file = parse(&sample(arg, samples).toml)
            .unwrap_or_else(|e| panic!("{key}: the file key {key} is not read: {e}"));
        assert_ne!(file, T::default(), "{key}: the file key sets nothing");
        assert!(
            arg.get_help().is_some_and(|h| !h.to_string().is_empty()),
            "{key}: no help for the reference"
        );
    }
}

/// Checks that each setting of `command` gives the same settings as a flag, as a file key
/// (`parse`) and as an environment variable (parsed in `child`), with a sample value that
/// sets something; and that the child parses the defaults when no variable is set.
///
/// # Panics
///
/// On the first setting whose three forms differ.
pub fn check_flag_variable_and_file_agree<T, E: std::fmt::Display>(
    command: impl Fn() -> clap::Command,
    child: EnvChild,
    samples: &[(&str, &str, &str)],
    parse: impl Fn(&str) -> Result<T, E>,
) where
    T: clap::FromArgMatches + PartialEq + Default + std::fmt::Debug,
{
    for arg in command().get_arguments() {
        let key = arg.get_id().as_str();
        let sample = sample(arg, samples);
        let long = arg.get_long().unwrap_or(key);
        let flag: T = from_flags(command(), &[format!("--{long}={}", sample.text)]);
        let file = parse(&sample.toml).unwrap_or_else(|e| panic!("{key}: {e}"));
        assert_ne!(flag, T::default(), "{key}: the flag sets nothing");
        assert_eq!(flag, file, "{key}: the flag and the file key differ");
        let env = arg
            .get_env()
            .map(|e| e.to_string_lossy().into_owned())
            .unwrap_or_else(|| panic!("{key}: no environment variable"));
        let from_env = child.parse(&[(env.as_str(), sample.text.as_str())]);
        assert_eq!(
            from_env,
            format!("{flag:?}"),
            "{key}: the flag and {env} differ"
        );
    }
    // With no variables set, the child parses nothing: the comparison above is not vacuous.
    assert_eq!(child.parse(&[]), format!("{:?}", T::default()));
}

/// One key of a settings file, as [`commented_toml`] writes it.
#[derive(Debug, Clone)]
pub struct FileKey {
    /// The file key.
    pub key: String,
    /// What it does (one paragraph).
    pub help: String,
    /// Its flag with its value's name (`--listen ADDR`); empty when it has none.
    pub flag: String,
    /// Its environment variable; empty when it has none.
    pub env: String,
    /// Its default, in words.
    pub default: String,
    /// The value the commented-out line shows: the default as TOML where it is one, else an
    /// empty value of the setting's type. For a table, the table's lines.
    pub value: String,
    /// A TOML table (`[roles]`): written last, so that uncommenting it cannot swallow the keys
    /// after it.
    pub table: bool,
}

/// The keys of the settings `command` defines (a `clap::Args` struct's arguments). `default`
/// gives each key's default in words and, where the default is a TOML value, as TOML.
pub fn file_keys(
    command: &clap::Command,
    default: impl Fn(&clap::Arg) -> (String, Option<String>),
) -> Vec<FileKey> {
    command
        .get_arguments()
        .map(|arg| {
            let key = arg.get_id().as_str().to_owned();
            let (words, toml) = default(arg);
            let ty = arg.get_value_parser().type_id();
            let empty = if ty == TypeId::of::<f64>() {
                "0.0"
            } else if ty == TypeId::of::<bool>() {
                "false"
            } else if ty == TypeId::of::<String>() || ty == TypeId::of::<PathBuf>() {
                "\"\""
            } else {
                "0"
            };
            FileKey {
                help: arg
                    .get_long_help()
                    .or(arg.get_help())
                    .map(|h| h.to_string())
                    .unwrap_or_default(),
                flag: arg
                    .get_long()
                    .map(|l| {
                        let value = arg
                            .get_value_names()
                            .map(|v| v.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(" "))
                            .unwrap_or_default();
                        format!("--{l} {value}").trim_end().to_owned()
                    })
                    .unwrap_or_default(),
                env: arg
                    .get_env()
                    .map(|e| e.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                default: words,
                value: toml.unwrap_or_else(|| empty.to_owned()),
                table: false,
                key,
            }
        })
        .collect()
}

/// `text`'s words as `# ` comment lines of at most 100 characters.
fn comment(out: &mut String, text: &str) {
    let mut line = String::from("#");
    for word in text.split_whitespace() {
        if line.len() + 1 + word.len() > 100 && line.len() > 1 {
            let _ = writeln!(out, "{line}");
            line = String::from("#");
        }
        line.push(' ');
        line.push_str(word);
    }
    if line.len() > 1 {
        let _ = writeln!(out, "{line}");
    }
}

/// A settings file with every key of `keys` commented out, each after its help, flag,
/// environment variable and default, except those `set` gives a value (`key`, TOML value),
/// which are written as settings. `header` (plain text) opens the file as a comment.
///
/// # Panics
///
/// When `set` names a key that is not in `keys`.
pub fn commented_toml(header: &str, keys: &[FileKey], set: &[(&str, &str)]) -> String {
    for (key, _) in set {
        assert!(keys.iter().any(|k| k.key == *key), "{key} is not a setting");
    }
    let mut out = String::new();
    for paragraph in header.split("\n\n") {
        comment(&mut out, paragraph);
        out.push_str("#\n");
    }
    // The last paragraph's `#` separator is not needed: the keys follow, each after a blank line.
    out.pop();
    out.pop();
    let ordered = keys
        .iter()
        .filter(|k| !k.table)
        .chain(keys.iter().filter(|k| k.table));
    for key in ordered {
        out.push('\n');
        comment(&mut out, &key.help);
        let mut names = Vec::new();
        if !key.flag.is_empty() {
            names.push(format!("flag {}", key.flag));
        }
        if !key.env.is_empty() {
            names.push(format!("environment variable {}", key.env));
        }
        names.push(format!("default: {}", key.default));
        comment(&mut out, &names.join("; "));
        match set.iter().find(|(k, _)| *k == key.key) {
            Some((_, value)) => {
                let _ = writeln!(out, "{} = {value}", key.key);
            }
            None if key.table => {
                for line in key.value.lines() {
                    let _ = writeln!(out, "#{line}");
                }
            }
            None => {
                let _ = writeln!(out, "#{} = {}", key.key, key.value);
            }
        }
    }
    out
}

/// Checks that uncommenting any one setting line of `text` (a file from [`commented_toml`])
/// gives a file that `parse` still loads.
///
/// # Panics
///
/// On the first line whose uncommented file does not load, naming it and the error.
pub fn check_each_line_uncommented_loads<T, E: std::fmt::Display>(
    text: &str,
    parse: impl Fn(&str) -> Result<T, E>,
) {
    for line in text
        .lines()
        .filter(|l| l.len() > 1 && l.starts_with('#') && !l.starts_with("# "))
    {
        let uncommented = text.replacen(line, &line[1..], 1);
        if let Err(e) = parse(&uncommented) {
            panic!("{line}: {e}");
        }
    }
}

/// A settings reference table in Markdown (file key, flag, environment variable, default,
/// meaning), one row per key; a default that is a TOML value is shown as code.
pub fn reference_table(keys: &[FileKey]) -> String {
    let cell = |s: &str| {
        s.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .replace('|', "\\|")
    };
    let code = |s: &str| {
        if s.is_empty() {
            String::new()
        } else {
            format!("`{}`", cell(s))
        }
    };
    let mut out = String::from(
        "| file key | flag | environment variable | default | meaning |\n|---|---|---|---|---|\n",
    );
    for key in keys {
        let default = if key.default == key.value {
            code(&key.default)
        } else {
            cell(&key.default)
        };
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {default} | {} |",
            key.key,
            code(&key.flag),
            code(&key.env),
            cell(&key.help)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commented_file_sets_only_what_it_is_told_and_puts_tables_last() {
        let keys = vec![
            FileKey {
                key: "roles".into(),
                help: "The role tree.".into(),
                flag: "--role".into(),
                env: String::new(),
                default: "none".into(),
                value: "[roles]\n\"eng\" = 2".into(),
                table: true,
            },
            FileKey {
                key: "work_dir".into(),
                help: "Where it works.".into(),
                flag: "--work-dir".into(),
                env: "PARLEY_WORK_DIR".into(),
                default: "./w".into(),
                value: "\"./w\"".into(),
                table: false,
            },
            FileKey {
                key: "kill_grace_s".into(),
                help: "Seconds.".into(),
                flag: "--kill-grace-s".into(),
                env: "PARLEY_KILL_GRACE_S".into(),
                default: "5".into(),
                value: "5.0".into(),
                table: false,
            },
        ];
        let file = commented_toml("A title.\n\nMore.", &keys, &[("work_dir", "\"/var/x\"")]);
        assert!(file.starts_with("# A title.\n#\n# More.\n\n"), "{file}");
        assert!(file.contains("\nwork_dir = \"/var/x\"\n"), "{file}");
        assert!(file.contains("\n#kill_grace_s = 5.0\n"), "{file}");
        assert!(file
            .contains("# flag --work-dir; environment variable PARLEY_WORK_DIR; default: ./w\n"));
        assert!(
            file.trim_end().ends_with("#[roles]\n#\"eng\" = 2"),
            "{file}"
        );
        let uncommented: Vec<&str> = file
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .collect();
        assert_eq!(uncommented, ["work_dir = \"/var/x\""]);
    }
}
