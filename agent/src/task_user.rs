//! [`TaskUser`]: the user tasks run as (`--task-user`), and whether the agent runs as root.
//!
//! A name is looked up in `/etc/passwd` (local accounts only: no NSS, no LDAP); `UID` or
//! `UID:GID` is taken as given. An agent running as root must be given a task user, or be told
//! that root tasks are allowed ([`crate::AgentConfig::allow_root_tasks`]).

use std::os::unix::fs::MetadataExt;

/// The uid and gid tasks run as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskUser {
    /// The user id.
    pub uid: u32,
    /// The group id (the user's primary group for a name).
    pub gid: u32,
    /// The name, when given by name (set as `USER` and `LOGNAME`).
    pub name: Option<String>,
}

/// A task user that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskUserError {
    /// Not a local user name, `UID` or `UID:GID`.
    #[error("--task-user {0:?}: no such user in /etc/passwd; give a name, UID or UID:GID")]
    Unknown(String),
    /// The user is root, which the option exists to avoid.
    #[error("--task-user {0:?} is root; give an unprivileged user (or --allow-root-tasks)")]
    Root(String),
}

impl TaskUser {
    /// Parses `NAME`, `UID` or `UID:GID` (a name is looked up in `/etc/passwd`).
    pub fn parse(text: &str) -> Result<TaskUser, TaskUserError> {
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        Self::parse_with(text, &passwd)
    }

    fn parse_with(text: &str, passwd: &str) -> Result<TaskUser, TaskUserError> {
        let unknown = || TaskUserError::Unknown(text.to_string());
        let user = if let Some((uid, gid)) = text.split_once(':') {
            TaskUser {
                uid: uid.parse().map_err(|_| unknown())?,
                gid: gid.parse().map_err(|_| unknown())?,
                name: None,
            }
        } else if let Ok(uid) = text.parse::<u32>() {
            TaskUser {
                uid,
                gid: uid,
                name: None,
            }
        } else {
            passwd
                .lines()
                .filter_map(|line| {
                    let mut f = line.split(':');
                    let name = f.next()?;
                    let (uid, gid) = (f.nth(1)?.parse().ok()?, f.next()?.parse().ok()?);
                    (name == text).then(|| TaskUser {
                        uid,
                        gid,
                        name: Some(name.to_string()),
                    })
                })
                .next()
                .ok_or_else(unknown)?
        };
        if user.uid == 0 {
            return Err(TaskUserError::Root(text.to_string()));
        }
        Ok(user)
    }
}

/// True when this process runs with effective uid 0 (read from `/proc/self`, which belongs to
/// the effective user; false where it cannot be read).
pub fn running_as_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn task_users_parse_by_name_and_number_and_refuse_root() {
        let passwd = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65533:n:/:/bin/false\n";
        let nobody = TaskUser::parse_with("nobody", passwd).unwrap();
        assert_eq!((nobody.uid, nobody.gid), (65534, 65533));
        assert_eq!(nobody.name.as_deref(), Some("nobody"));
        let numeric = TaskUser::parse_with("1000:100", passwd).unwrap();
        assert_eq!((numeric.uid, numeric.gid, numeric.name), (1000, 100, None));
        assert_eq!(TaskUser::parse_with("1000", passwd).unwrap().gid, 1000);
        assert!(matches!(
            TaskUser::parse_with("ghost", passwd),
            Err(TaskUserError::Unknown(_))
        ));
        assert!(matches!(
            TaskUser::parse_with("root", passwd),
            Err(TaskUserError::Root(_))
        ));
        assert!(matches!(
            TaskUser::parse_with("0:0", passwd),
            Err(TaskUserError::Root(_))
        ));
    }
}
