//! A whole gang on agents' free room, or why not ([`fit_gang`]): the one fit both sides use,
//! the coordinator to know when a gang's resources are assembled, a framework to place its
//! members on a gang offer.
//!
//! Members are placed largest first (by their dominant share of the room there is), each on
//! the first agent it fits, agents taken roomiest first, so a gang lands on as few agents as
//! it can (the collective traffic of a training run stays on few hosts, and its GPUs with it).
//! With [`GangRules::same_attribute`] the agents are grouped by that attribute's value and the
//! gang goes whole into one group: the group with the least room that holds it, so larger
//! groups stay for larger gangs. For members of one shape this finds a fit whenever there is
//! one; for mixed shapes it is first-fit decreasing, which may miss a packing that exists
//! (bin packing is NP-hard) and then says [`GangMiss::Fragmented`].

use std::collections::BTreeMap;

use protocol::gang::GangRules;
use protocol::Resources;

/// One agent's room, as a gang's fit sees it.
#[derive(Debug, Clone, Copy)]
pub struct AgentRoom<'a> {
    /// What is free on it for the gang.
    pub free: &'a Resources,
    /// Its attributes (`rack`, `zone`, ...).
    pub attributes: &'a BTreeMap<String, String>,
}

/// Why a gang does not fit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GangMiss {
    /// All the room there is, together, has less of a resource than the gang asks.
    #[error("the gang asks {want} {resource}, and the agents have {have} free in all")]
    TooBig {
        /// The resource.
        resource: String,
        /// What the gang asks, in units.
        want: String,
        /// What there is, in units.
        have: String,
    },
    /// No agent has the attribute the gang's members must share.
    #[error("no agent has the attribute {0:?} that the gang's members must share")]
    NoAttribute(String),
    /// No group of agents sharing a value of the attribute has room for the whole gang.
    #[error("no group of agents with one value of {attribute:?} has room for the whole gang")]
    NoGroup {
        /// The attribute.
        attribute: String,
    },
    /// There is room in all, but not in pieces the members fit (or not within
    /// `max_per_agent`).
    #[error("the free room is in pieces the gang's members do not fit")]
    Fragmented,
}

/// Places every member of a gang (`members`, by rank) on `rooms` under `rules`: for each
/// member, the index of its room. All or nothing: an `Err` says why the gang does not fit.
pub fn fit_gang(
    members: &[Resources],
    rules: &GangRules,
    rooms: &[AgentRoom<'_>],
) -> Result<Vec<usize>, GangMiss> {
    let want = members.iter().fold(Resources::new(), |acc, m| acc.add(m));
    let all = rooms
        .iter()
        .fold(Resources::new(), |acc, r| acc.add(r.free));
    if let Some((resource, want, have)) = short_of(&want, &all) {
        return Err(GangMiss::TooBig {
            resource,
            want,
            have,
        });
    }
    let groups = groups(rules, rooms)?;
    // Largest members first, by their dominant share of all the room there is.
    let mut order: Vec<usize> = (0..members.len()).collect();
    let size: Vec<f64> = members.iter().map(|m| m.dominant_share(&all)).collect();
    order.sort_by(|a, b| size[*b].total_cmp(&size[*a]).then(a.cmp(b)));
    // Groups with room for the whole gang, the tightest first.
    let mut candidates: Vec<(f64, &Vec<usize>)> = groups
        .iter()
        .filter_map(|group| {
            let room = group
                .iter()
                .fold(Resources::new(), |acc, i| acc.add(rooms[*i].free));
            short_of(&want, &room)
                .is_none()
                .then(|| (room.dominant_share(&all), group))
        })
        .collect();
    if candidates.is_empty() {
        if let Some(attribute) = &rules.same_attribute {
            return Err(GangMiss::NoGroup {
                attribute: attribute.clone(),
            });
        }
        return Err(GangMiss::Fragmented);
    }
    candidates.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (_, group) in candidates {
        if let Some(found) = first_fit(members, &order, rules, rooms, group, &all) {
            return Ok(found);
        }
    }
    Err(GangMiss::Fragmented)
}

/// The first resource `want` asks more of than `have` has: its name, and both amounts.
fn short_of(want: &Resources, have: &Resources) -> Option<(String, String, String)> {
    want.iter().find_map(|(name, millis)| {
        let there = have.millis(name.as_str());
        (millis > there).then(|| {
            let units = |m: u64| format!("{}", m as f64 / 1000.0);
            (name.as_str().to_owned(), units(millis), units(there))
        })
    })
}

/// The rooms grouped by the value of the attribute the gang must share (one group of all
/// without that rule).
fn groups(rules: &GangRules, rooms: &[AgentRoom<'_>]) -> Result<Vec<Vec<usize>>, GangMiss> {
    let Some(attribute) = &rules.same_attribute else {
        return Ok(vec![(0..rooms.len()).collect()]);
    };
    let mut by_value: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, room) in rooms.iter().enumerate() {
        if let Some(value) = room.attributes.get(attribute) {
            by_value.entry(value.as_str()).or_default().push(i);
        }
    }
    if by_value.is_empty() {
        return Err(GangMiss::NoAttribute(attribute.clone()));
    }
    Ok(by_value.into_values().collect())
}

/// First fit of the members, in `order`, on `group`'s rooms taken roomiest first.
fn first_fit(
    members: &[Resources],
    order: &[usize],
    rules: &GangRules,
    rooms: &[AgentRoom<'_>],
    group: &[usize],
    all: &Resources,
) -> Option<Vec<usize>> {
    let mut slots: Vec<usize> = group.to_vec();
    let roomy: Vec<f64> = rooms.iter().map(|r| r.free.dominant_share(all)).collect();
    slots.sort_by(|a, b| roomy[*b].total_cmp(&roomy[*a]).then(a.cmp(b)));
    let mut free: Vec<Resources> = slots.iter().map(|i| rooms[*i].free.clone()).collect();
    let mut count = vec![0u32; slots.len()];
    let cap = rules.max_per_agent.unwrap_or(u32::MAX);
    let mut placed = vec![usize::MAX; members.len()];
    for &m in order {
        let s = (0..slots.len()).find(|&s| count[s] < cap && members[m].fits_in(&free[s]))?;
        free[s] = free[s].checked_sub(&members[m])?;
        count[s] += 1;
        placed[m] = slots[s];
    }
    Some(placed)
}
