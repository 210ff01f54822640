//! [`TaskUser`]: the user tasks run as (`--task-user`), and whether the agent runs as root.
//!
//! A name is looked up through the system's user database (`getpwnam_r`, so NSS: local
//! accounts, LDAP, SSSD, whatever `/etc/nsswitch.conf` names); `UID` or `UID:GID` is taken as
//! given. An agent running as root must be given a task user, or be told
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
    /// Not a known user name, `UID` or `UID:GID`.
    #[error("--task-user {0:?}: no such user in the user database; give a name, UID or UID:GID")]
    Unknown(String),
    /// The user database could not be read (an NSS source failed).
    #[error("--task-user {0:?}: the user database could not be read: {1}")]
    Lookup(String, String),
    /// The user is root, which the option exists to avoid.
    #[error("--task-user {0:?} is root; give an unprivileged user (or --allow-root-tasks)")]
    Root(String),
}

impl TaskUser {
    /// Parses `NAME`, `UID` or `UID:GID` (a name is looked up through NSS).
    pub fn parse(text: &str) -> Result<TaskUser, TaskUserError> {
        Self::parse_with(text, |name| {
            nix::unistd::User::from_name(name)
                .map(|user| user.map(|u| (u.uid.as_raw(), u.gid.as_raw())))
                .map_err(|e| e.to_string())
        })
    }

    /// [`TaskUser::parse`] with the name lookup given: `lookup(name)` answers the user's uid and
    /// primary gid, `None` for no such user.
    fn parse_with(
        text: &str,
        lookup: impl FnOnce(&str) -> Result<Option<(u32, u32)>, String>,
    ) -> Result<TaskUser, TaskUserError> {
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
            let (uid, gid) = lookup(text)
                .map_err(|e| TaskUserError::Lookup(text.to_string(), e))?
                .ok_or_else(unknown)?;
            TaskUser {
                uid,
                gid,
                name: Some(text.to_string()),
            }
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

    /// A user database of two users; a lookup of any other name finds nothing.
    fn users(name: &str) -> Result<Option<(u32, u32)>, String> {
        Ok(match name {
            "root" => Some((0, 0)),
            "nobody" => Some((65534, 65533)),
            "broken" => return Err("LDAP server unreachable".into()),
            _ => None,
        })
    }

    #[test]
    fn task_users_parse_by_name_and_number_and_refuse_root() {
        let passwd = users;
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
        let failed = TaskUser::parse_with("broken", passwd).unwrap_err();
        assert!(
            failed.to_string().contains("LDAP server unreachable"),
            "{failed}"
        );
    }

    /// Through the real user database: the user this test runs as is found by name with its
    /// uid and primary group (refused as root when the tests run as root), and a name no
    /// database has is unknown.
    #[test]
    fn names_are_found_through_the_system_user_database() {
        let me = nix::unistd::User::from_uid(nix::unistd::getuid())
            .unwrap()
            .expect("the test's own user is in the user database");
        match TaskUser::parse(&me.name) {
            Ok(user) => {
                assert_eq!((user.uid, user.gid), (me.uid.as_raw(), me.gid.as_raw()));
                assert_eq!(user.name.as_deref(), Some(me.name.as_str()));
            }
            Err(e) => {
                assert_eq!(me.uid.as_raw(), 0, "{e}");
                assert!(matches!(e, TaskUserError::Root(_)), "{e}");
            }
        }
        assert!(matches!(
            TaskUser::parse("no-such-user-parley-test"),
            Err(TaskUserError::Unknown(_))
        ));
    }
}
