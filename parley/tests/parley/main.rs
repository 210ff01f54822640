//! Tests of the `coordinator` binary as a real process, in one binary: its flags (`tls_flags`,
//! `security_cli`, `preemption_flag`), its registry across restarts and its `backup` and
//! `restore` (`backup`), `--dev` with the jobs
//! service, HA on etcd (`ha`), chaos runs (`chaos`), network partitions in namespaces
//! (`partition`) and a whole cluster on a network of namespaces under faults (`multinode`). The
//! process harness is in [`support`]. Run one module with
//! `cargo test -p parley --test parley <module>::`.

mod backup;
mod chaos;
mod cli_reference;
mod dev_jobs;
mod ha;
mod multinode;
mod partition;
mod preemption_flag;
mod recall;
mod registry_process;
mod security_cli;
mod sighup_reload;
mod support;
mod tls_flags;
mod tls_init;
