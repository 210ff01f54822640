//! The books' side of `PUT /api/v1/roles/{path}`: a role's weight, guarantee and
//! limit, checked in full before anything changes, persisted as [`Change::SetWeight`] and
//! [`Change::SetQuota`].
//!
//! Rules (`docs/src/operating/quota.md`):
//! - a body names at least one of `weight`, `guarantee`, `limit`; an absent field keeps its
//!   value, `null` clears a guarantee or limit;
//! - amounts are checked by [`protocol::Resources`] when the body is read (finite,
//!   non-negative, at most `MAX_UNITS`); a resource name no registered agent offers is refused
//!   (`unknown resource`), so a typo cannot make a quota that never binds, unless it is a
//!   standard resource (`cpus`, `mem`, `disk`, `gpus`) or declared in `known_resources`:
//!   those may be given quotas at install time, before any agent joins;
//! - a limit below the guarantee in any resource is refused (after merging with what is set);
//! - a guarantee above the cluster's capacity is accepted and reported (`guarantee_unmet` in
//!   `GET /api/v1/roles`): agents come and go, a guarantee should not have to;
//! - children's guarantees may sum above their parent's: each guarantee is served on its own.

use std::collections::BTreeSet;

use protocol::messages::SetWeight;
use protocol::{Resources, RolePath};

use crate::error::StateError;
use crate::ledger::Ledger;
use crate::records::{Change, StoredQuota};
use crate::{Effect, Effects};

/// A role's quota as it is now.
pub(crate) fn role_quota(ledger: &Ledger, role: &RolePath) -> StoredQuota {
    let (guarantee, limit) = ledger.allocator().role_quota(role);
    StoredQuota { guarantee, limit }
}

/// The registry changes that `req` on `role` writes, if it may be applied; changes nothing.
/// `known` are the resource names a quota may name though no agent offers them yet.
pub(crate) fn plan(
    ledger: &Ledger,
    known: &BTreeSet<String>,
    max_roles: usize,
    role: &RolePath,
    req: &SetWeight,
) -> Result<Vec<Change>, StateError> {
    if role.as_str().starts_with('_') {
        return Err(StateError::ReservedRole);
    }
    if req.weight.is_none() && req.guarantee.is_none() && req.limit.is_none() {
        return Err(StateError::InvalidQuota {
            field: "body".into(),
            reason: "name at least one of weight, guarantee, limit".into(),
        });
    }
    ledger.check_roles(role, max_roles)?;
    let mut changes = Vec::new();
    if let Some(w) = req.weight {
        changes.push(Change::SetWeight(role.clone(), w));
    }
    if let Some(quota) = merged(ledger, role, req) {
        check(ledger, known, &quota)?;
        changes.push(Change::SetQuota(role.clone(), quota));
    }
    Ok(changes)
}

/// Applies `req` checked by [`plan`] without queuing a registry change (the caller wrote it
/// already); runs an allocation soon.
pub(crate) fn apply(ledger: &mut Ledger, role: &RolePath, req: &SetWeight, fx: &mut Effects) {
    if let Some(w) = req.weight {
        ledger.set_role_weight(role, w);
    }
    if let Some(quota) = merged(ledger, role, req) {
        ledger.set_role_quota(role, &quota);
    }
    fx.push(Effect::Allocate);
}

/// The role's quota after `req`, when `req` names a guarantee or a limit.
fn merged(ledger: &Ledger, role: &RolePath, req: &SetWeight) -> Option<StoredQuota> {
    if req.guarantee.is_none() && req.limit.is_none() {
        return None;
    }
    let now = role_quota(ledger, role);
    let pick = |new: &Option<Option<Resources>>, old: Option<Resources>| match new {
        Some(v) => v.clone().filter(|r| !r.is_empty()),
        None => old,
    };
    Some(StoredQuota {
        guarantee: pick(&req.guarantee, now.guarantee),
        limit: pick(&req.limit, now.limit),
    })
}

/// Refuses unknown resource names and a limit below the guarantee.
fn check(ledger: &Ledger, known: &BTreeSet<String>, q: &StoredQuota) -> Result<(), StateError> {
    let capacity = ledger.allocator().capacity();
    for (field, r) in [("guarantee", &q.guarantee), ("limit", &q.limit)] {
        for name in r.iter().flat_map(Resources::names) {
            if capacity.millis(name.as_str()) == 0 && !known.contains(name.as_str()) {
                return Err(StateError::InvalidQuota {
                    field: format!("{field}.{name}"),
                    reason: format!(
                        "unknown resource: no registered agent offers {name:?} and it is neither standard (cpus, mem, disk, gpus) nor in known_resources (the cluster has {capacity})"
                    ),
                });
            }
        }
    }
    if let (Some(g), Some(l)) = (&q.guarantee, &q.limit) {
        for (name, gv) in g.iter() {
            let lv = l.millis(name.as_str());
            if lv > 0 && lv < gv {
                return Err(StateError::InvalidQuota {
                    field: format!("limit.{name}"),
                    reason: format!(
                        "{} is below the guarantee {}",
                        lv as f64 / 1000.0,
                        gv as f64 / 1000.0
                    ),
                });
            }
        }
    }
    Ok(())
}
