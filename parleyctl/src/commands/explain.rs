//! `parleyctl explain FRAMEWORK`: the coordinator's explanation, as labelled lines.

use std::io::Write;

use protocol::messages::FrameworkExplanation;

use super::{print_raw, resolve_framework};
use crate::client::Api;
use crate::error::CtlError;
use crate::format;

/// `parleyctl explain FRAMEWORK`.
pub async fn explain(
    api: &Api,
    framework: &str,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CtlError> {
    let id = resolve_framework(api, framework).await?;
    let (raw, e): (_, FrameworkExplanation) =
        api.get(&format!("/api/v1/frameworks/{id}/explain")).await?;
    if json {
        return print_raw(out, &raw);
    }
    let state = if e.suppressed {
        format!("{} (suppressed)", e.state)
    } else if e.sated {
        format!("{} (sated: its offers hold the tasks it wants)", e.state)
    } else {
        e.state.clone()
    };
    let a = &e.agents;
    writeln!(out, "framework:          {}", e.framework_id)?;
    writeln!(out, "role:               {}", e.role)?;
    writeln!(out, "state:              {state}")?;
    writeln!(
        out,
        "demand:             {}",
        e.demand
            .as_ref()
            .map(format::resources)
            .unwrap_or_else(|| "-".into())
    )?;
    writeln!(
        out,
        "dominant share:     {}",
        format::share(e.dominant_share)
    )?;
    writeln!(out, "outstanding offers: {}", e.outstanding_offers)?;
    writeln!(
        out,
        "agents:             {} active: {} offered to it, {} eligible, {} nothing free, {} filtered, {} demand does not fit",
        a.active, a.offered_to_it, a.eligible, a.nothing_free, a.filtered, a.demand_does_not_fit
    )?;
    if let Some(s) = e.next_filter_ends_in_s {
        writeln!(out, "next filter ends:   in {s:.1}s")?;
    }
    writeln!(out, "summary:            {}", e.summary)?;
    Ok(())
}
