//! How a task asks to be isolated on its agent ([`Isolation`]), what agents advertise they can
//! enforce (the `ATTR_*` attributes), and the checks both sides share: the form of a request
//! ([`Isolation::validate`], at accept time) and whether an agent can give it
//! ([`Isolation::check_agent`], against the attributes of the offer's agent). A task that asks
//! for what its agent cannot give is refused, never silently weakened.

use std::collections::BTreeMap;
use std::path::{Component, Path};

use serde::{Deserialize, Serialize};

/// Agent attribute: how per-task resource limits are enforced: `cgroups-v1`, `cgroups-v2`,
/// or `none` (no cgroups: memory by RLIMIT_AS, no CPU or pids limits).
pub const ATTR_ISOLATION: &str = "isolation";
/// Agent attribute: the namespaces every task gets, comma-separated, from `pid`, `mount`,
/// `ipc`, `uts`, and `net` when a task may ask for a loopback-only network
/// (e.g. `pid,mount,ipc,uts,net`); absent or empty when none.
pub const ATTR_NAMESPACES: &str = "namespaces";
/// Agent attribute: the directory under which task images (OCI image layouts or root
/// filesystem tarballs) may be named; absent when the agent runs no images.
pub const ATTR_IMAGE_ROOT: &str = "image_root";

/// The largest `pids` a task may ask for (the kernel's own `pid_max` ceiling).
pub const MAX_PIDS: i64 = 4_194_304;

/// A task's network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum NetworkMode {
    /// The host's network (the default).
    #[default]
    Host,
    /// A network namespace of its own with only the loopback interface.
    Loopback,
}

/// A task's isolation options; every field is optional and the agent's defaults apply. Each
/// field set requires its agent to enforce it (see [`Isolation::check_agent`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Isolation {
    /// At most this many processes and threads in the task's cgroup (the agent's default when
    /// unset). Needs cgroups on the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<i64>,
    /// The task's network. `loopback` needs the agent's `net` namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkMode>,
    /// Run as this user (name or uid) instead of the agent's `--task-user`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// A root filesystem: an OCI image layout directory or a root filesystem tarball, named
    /// relative to the agent's image root (or absolute, inside it). Needs the agent's
    /// `image_root` and its mount namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

/// Why [`Isolation`] options are refused, in form or on an agent; the message names the field
/// (`isolation.…`) and, on an agent, what it lacks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IsolationError {
    /// `pids` out of range.
    #[error("isolation.pids must be from 1 to {MAX_PIDS}, not {value}")]
    Pids {
        /// The value given.
        value: i64,
    },
    /// `user` is not a user name or uid.
    #[error("isolation.user {user:?} is not a user name or uid (1 to 32 of [A-Za-z0-9_.-])")]
    User {
        /// The value given.
        user: String,
    },
    /// `image` is empty, too long or holds a NUL.
    #[error("isolation.image must be a path of 1 to 1024 bytes without NUL")]
    ImageForm,
    /// `image` climbs out with `..`.
    #[error("isolation.image {image:?} must not contain '..'")]
    ImageParent {
        /// The value given.
        image: String,
    },
    /// `pids` on an agent without cgroups.
    #[error("isolation.pids needs cgroups, and this agent enforces none (attribute isolation)")]
    PidsNeedCgroups,
    /// `network=loopback` on an agent without network namespaces.
    #[error("isolation.network=loopback needs a network namespace, and this agent gives none (attribute namespaces)")]
    LoopbackNeedsNamespace,
    /// `image` on an agent without an image root.
    #[error("isolation.image: this agent runs no images (no attribute image_root)")]
    NoImageRoot,
    /// `image` on an agent without mount namespaces.
    #[error(
        "isolation.image needs a mount namespace, and this agent gives none (attribute namespaces)"
    )]
    ImageNeedsNamespace,
    /// An absolute `image` outside the agent's image root.
    #[error("isolation.image {image:?} is outside this agent's image root {root:?}")]
    ImageOutsideRoot {
        /// The value given.
        image: String,
        /// The agent's image root.
        root: String,
    },
}

impl Isolation {
    /// Checks the form of the options; the error names the field.
    pub fn validate(&self) -> Result<(), IsolationError> {
        if let Some(p) = self.pids {
            if !(1..=MAX_PIDS).contains(&p) {
                return Err(IsolationError::Pids { value: p });
            }
        }
        if let Some(u) = &self.user {
            let ok = !u.is_empty()
                && u.len() <= 32
                && u.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
            if !ok {
                return Err(IsolationError::User { user: u.clone() });
            }
        }
        if let Some(image) = &self.image {
            image_path_form(image)?;
        }
        Ok(())
    }

    /// Checks that an agent with these attributes can give every option asked for; the error
    /// names the field and what the agent lacks.
    pub fn check_agent(&self, attributes: &BTreeMap<String, String>) -> Result<(), IsolationError> {
        let cgroups = attributes
            .get(ATTR_ISOLATION)
            .is_some_and(|v| v.starts_with("cgroups"));
        let namespaces: Vec<&str> = attributes
            .get(ATTR_NAMESPACES)
            .map(|v| v.split(',').map(str::trim).collect())
            .unwrap_or_default();
        if self.pids.is_some() && !cgroups {
            return Err(IsolationError::PidsNeedCgroups);
        }
        if self.network == Some(NetworkMode::Loopback) && !namespaces.contains(&"net") {
            return Err(IsolationError::LoopbackNeedsNamespace);
        }
        if let Some(image) = &self.image {
            let Some(root) = attributes.get(ATTR_IMAGE_ROOT) else {
                return Err(IsolationError::NoImageRoot);
            };
            if !namespaces.contains(&"mount") {
                return Err(IsolationError::ImageNeedsNamespace);
            }
            image_under(image, root)?;
        }
        Ok(())
    }
}

/// An image path's form: not empty, no NUL, no `..`, at most 1024 bytes.
fn image_path_form(image: &str) -> Result<(), IsolationError> {
    if image.is_empty() || image.len() > 1024 || image.contains('\0') {
        return Err(IsolationError::ImageForm);
    }
    if Path::new(image)
        .components()
        .any(|c| matches!(c, Component::ParentDir))
    {
        return Err(IsolationError::ImageParent {
            image: image.to_string(),
        });
    }
    Ok(())
}

/// `image` names something inside `root`: relative, or absolute and under it. (The agent
/// re-checks after resolving symbolic links.)
fn image_under(image: &str, root: &str) -> Result<(), IsolationError> {
    let path = Path::new(image);
    if path.is_absolute() && !path.starts_with(root) {
        return Err(IsolationError::ImageOutsideRoot {
            image: image.to_string(),
            root: root.to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn attrs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn unknown_options_and_modes_are_refused_by_the_type() {
        let e = serde_json::from_str::<Isolation>(r#"{"cpuset": 1}"#)
            .unwrap_err()
            .to_string();
        assert!(e.to_string().contains("unknown field `cpuset`"), "{e}");
        let e = serde_json::from_str::<Isolation>(r#"{"network": "bridge"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.to_string().contains("bridge"), "{e}");
        let ok: Isolation = serde_json::from_str(r#"{"network": "loopback", "pids": 8}"#).unwrap();
        assert_eq!(ok.network, Some(NetworkMode::Loopback));
    }

    #[test]
    fn forms_are_checked_with_the_field_named() {
        let bad = |i: Isolation| i.validate().unwrap_err().to_string();
        assert!(bad(Isolation {
            pids: Some(-1),
            ..Default::default()
        })
        .contains("isolation.pids"));
        assert!(bad(Isolation {
            pids: Some(0),
            ..Default::default()
        })
        .contains("isolation.pids"));
        assert!(bad(Isolation {
            user: Some("a b".into()),
            ..Default::default()
        })
        .contains("isolation.user"));
        assert!(bad(Isolation {
            image: Some("../etc".into()),
            ..Default::default()
        })
        .contains("isolation.image"));
        assert!(bad(Isolation {
            image: Some(String::new()),
            ..Default::default()
        })
        .contains("isolation.image"));
        let good = Isolation {
            pids: Some(64),
            network: Some(NetworkMode::Loopback),
            user: Some("nobody".into()),
            image: Some("debian.tar".into()),
        };
        assert_eq!(good.validate(), Ok(()));
    }

    #[test]
    fn what_the_agent_cannot_give_is_refused() {
        let none = attrs(&[("isolation", "none")]);
        let full = attrs(&[
            ("isolation", "cgroups-v1"),
            ("namespaces", "pid,mount,ipc,uts,net"),
            ("image_root", "/var/lib/parley/images"),
        ]);
        let pids = Isolation {
            pids: Some(8),
            ..Default::default()
        };
        assert!(pids
            .check_agent(&none)
            .unwrap_err()
            .to_string()
            .contains("isolation.pids"));
        assert_eq!(pids.check_agent(&full), Ok(()));
        let net = Isolation {
            network: Some(NetworkMode::Loopback),
            ..Default::default()
        };
        assert!(net
            .check_agent(&none)
            .unwrap_err()
            .to_string()
            .contains("isolation.network"));
        assert_eq!(net.check_agent(&full), Ok(()));
        let host = Isolation {
            network: Some(NetworkMode::Host),
            ..Default::default()
        };
        assert_eq!(host.check_agent(&none), Ok(()));
        let image = |p: &str| Isolation {
            image: Some(p.into()),
            ..Default::default()
        };
        assert!(image("debian.tar")
            .check_agent(&none)
            .unwrap_err()
            .to_string()
            .contains("image_root"));
        assert_eq!(image("debian.tar").check_agent(&full), Ok(()));
        assert_eq!(
            image("/var/lib/parley/images/debian").check_agent(&full),
            Ok(())
        );
        assert!(image("/etc")
            .check_agent(&full)
            .unwrap_err()
            .to_string()
            .contains("outside"));
        assert_eq!(Isolation::default().check_agent(&BTreeMap::new()), Ok(()));
    }
}
