//! `parley-launch`: the isolated task launcher (see `agent::isolation::launch`), a small
//! binary so that the two execs of every isolated launch stay cheap. The agent looks for it
//! beside its own executable; `agent __parley-launch` does the same work.
//!
//! ```text
//! parley-launch outer --hostname ID --procs CGROUP/cgroup.procs ... [--user UID:GID] -- PROGRAM ARGS...
//! ```

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    std::process::exit(agent::isolation::launch::main(&args));
}
