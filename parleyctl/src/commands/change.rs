//! The commands that change the cluster: `weight ROLE W` and `teardown FRAMEWORK`. Both are
//! admin operations when the coordinator has credentials.

use std::io::Write;

use protocol::{RolePath, Weight};
use reqwest::Method;

use super::{print_raw, resolve_framework};
use crate::client::Api;
use crate::error::CtlError;
use crate::format;

/// `parleyctl weight ROLE W`: `PUT /api/v1/roles/{role}`. The role and weight are checked
/// here first (the same rules as the coordinator's), so a typo is a usage error.
pub async fn weight(
    api: &Api,
    role: &str,
    weight: f64,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CtlError> {
    let role = RolePath::new(role).map_err(|e| CtlError::Usage(format!("ROLE: {e}")))?;
    let checked = Weight::new(weight).map_err(|e| CtlError::Usage(format!("WEIGHT: {e}")))?;
    let body = serde_json::json!({ "weight": checked });
    let raw = api
        .call(Method::PUT, &format!("/api/v1/roles/{role}"), Some(&body))
        .await?;
    if json {
        return print_raw(out, &raw);
    }
    writeln!(out, "role {role}: weight {}", format::weight(weight))?;
    Ok(())
}

/// `parleyctl teardown FRAMEWORK`: `DELETE /api/v1/frameworks/{id}`.
pub async fn teardown(
    api: &Api,
    framework: &str,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CtlError> {
    let id = resolve_framework(api, framework).await?;
    let raw = api
        .call(Method::DELETE, &format!("/api/v1/frameworks/{id}"), None)
        .await?;
    if json {
        return print_raw(out, &raw);
    }
    writeln!(
        out,
        "framework {id} removed: its tasks are being killed, its offers rescinded"
    )?;
    Ok(())
}
