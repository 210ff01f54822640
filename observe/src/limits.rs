//! The open-file limit of a server process. Every connection is a file descriptor: a
//! coordinator holds one per framework stream, per agent connection and per call to an agent,
//! and a simulated fleet one per request in flight. Many systems start services with a soft
//! limit of 1,024 under a hard limit a thousand times higher, so a server that does not raise
//! it fails with "Too many open files" at its first thousand clients. Each server raises its
//! soft limit to the hard one at start (what the Go runtime and the JVM do by default) and says
//! so when what it got is still low.

/// Below this many descriptors, a server says that its limit is low.
pub const LOW_OPEN_FILES: u64 = 8_192;

/// Raises the soft open-file limit to the hard limit; returns the soft limit before and
/// after.
///
/// # Errors
///
/// When the limit cannot be read or set.
pub fn raise_open_file_limit() -> Result<(u64, u64), std::io::Error> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(std::io::Error::from)?;
    if soft >= hard {
        return Ok((soft, soft));
    }
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard).map_err(std::io::Error::from)?;
    Ok((soft, hard))
}

/// [`raise_open_file_limit`], logged: `info` when raised, `warn` when the limit stays below
/// [`LOW_OPEN_FILES`] (naming the systemd setting that raises it) or cannot be read.
pub fn raise_open_file_limit_logged() {
    match raise_open_file_limit() {
        Ok((before, now)) => {
            if now > before {
                tracing::info!(before, now, "raised the open-file limit");
            }
            if now < LOW_OPEN_FILES {
                tracing::warn!(
                    limit = now,
                    "the open-file limit is low for a server with many clients; raise the hard \
                     limit (systemd: LimitNOFILE=1048576, a shell: ulimit -Hn)"
                );
            }
        }
        Err(e) => tracing::warn!(error = %e, "cannot read or raise the open-file limit"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one() {
        use nix::sys::resource::{getrlimit, setrlimit, Resource};
        let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
        // Lower the soft limit (allowed without privileges), then raise it back.
        let lower = hard.min(4_096) / 2;
        setrlimit(Resource::RLIMIT_NOFILE, lower, hard).unwrap();
        let (before, now) = raise_open_file_limit().unwrap();
        assert_eq!((before, now), (lower, hard));
        assert_eq!(getrlimit(Resource::RLIMIT_NOFILE).unwrap(), (hard, hard));
        // Already at the hard limit: nothing to do.
        assert_eq!(raise_open_file_limit().unwrap(), (hard, hard));
    }
}
