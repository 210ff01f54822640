//! A gang's fit: examples, and properties on random gangs against an exhaustive reference.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use proptest::prelude::*;
use protocol::gang::GangRules;
use protocol::Resources;

use super::gang::{fit_gang, AgentRoom, GangMiss};

fn r(s: &str) -> Resources {
    s.parse().unwrap()
}

fn attrs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn rooms<'a>(
    free: &'a [Resources],
    attributes: &'a [BTreeMap<String, String>],
) -> Vec<AgentRoom<'a>> {
    free.iter()
        .zip(attributes)
        .map(|(free, attributes)| AgentRoom { free, attributes })
        .collect()
}

/// Whether `placed` puts every member somewhere it fits, within the rules.
fn valid(
    members: &[Resources],
    rules: &GangRules,
    rooms: &[AgentRoom<'_>],
    placed: &[usize],
) -> bool {
    if placed.len() != members.len() {
        return false;
    }
    let mut used: Vec<Resources> = vec![Resources::new(); rooms.len()];
    let mut count = vec![0u32; rooms.len()];
    for (m, &room) in placed.iter().enumerate() {
        let Some(u) = used.get_mut(room) else {
            return false;
        };
        *u = u.add(&members[m]);
        count[room] += 1;
    }
    let fits = used.iter().zip(rooms).all(|(u, room)| u.fits_in(room.free));
    let cap = rules.max_per_agent.unwrap_or(u32::MAX);
    let within = count.iter().all(|c| *c <= cap);
    let shared = match &rules.same_attribute {
        None => true,
        Some(a) => {
            let values: Vec<Option<&String>> =
                placed.iter().map(|&i| rooms[i].attributes.get(a)).collect();
            values.iter().all(|v| v.is_some() && *v == values[0])
        }
    };
    fits && within && shared
}

/// Every assignment of members to rooms, tried one by one: whether any is valid.
fn reference(members: &[Resources], rules: &GangRules, rooms: &[AgentRoom<'_>]) -> bool {
    fn go(
        m: usize,
        placed: &mut Vec<usize>,
        members: &[Resources],
        rules: &GangRules,
        rooms: &[AgentRoom<'_>],
    ) -> bool {
        if m == members.len() {
            return valid(members, rules, rooms, placed);
        }
        for room in 0..rooms.len() {
            placed.push(room);
            if go(m + 1, placed, members, rules, rooms) {
                return true;
            }
            placed.pop();
        }
        false
    }
    go(0, &mut Vec::new(), members, rules, rooms)
}

#[test]
fn a_gang_packs_on_the_fewest_agents_and_refuses_what_cannot_fit() {
    let free = [r("cpus=4"), r("cpus=9"), r("cpus=4")];
    let a = [
        attrs(&[("rack", "a")]),
        attrs(&[("rack", "b")]),
        attrs(&[("rack", "a")]),
    ];
    let rooms = rooms(&free, &a);
    let six = vec![r("cpus=1"); 6];
    // Roomiest first: all six on the 9-cpu agent.
    assert_eq!(
        fit_gang(&six, &GangRules::default(), &rooms).unwrap(),
        [1; 6]
    );
    // At most 4 an agent: 4 there, 2 on the next roomiest.
    let four = GangRules {
        max_per_agent: Some(4),
        ..GangRules::default()
    };
    assert_eq!(fit_gang(&six, &four, &rooms).unwrap(), [1, 1, 1, 1, 0, 0]);
    // One rack: rack a (8 cpus over two agents) is a tighter fit than rack b (9 on one).
    let rack = GangRules {
        same_attribute: Some("rack".into()),
        max_per_agent: None,
    };
    let placed = fit_gang(&six, &rack, &rooms).unwrap();
    assert!(placed.iter().all(|i| *i != 1), "{placed:?}");
    // Eighteen cpus are more than the seventeen there are.
    let big = vec![r("cpus=1"); 18];
    assert_eq!(
        fit_gang(&big, &GangRules::default(), &rooms).unwrap_err(),
        GangMiss::TooBig {
            resource: "cpus".into(),
            want: "18".into(),
            have: "17".into()
        }
    );
    // Ten on one rack: neither rack holds them.
    let ten = vec![r("cpus=1"); 10];
    assert_eq!(
        fit_gang(&ten, &rack, &rooms).unwrap_err(),
        GangMiss::NoGroup {
            attribute: "rack".into()
        }
    );
    let zone = GangRules {
        same_attribute: Some("zone".into()),
        max_per_agent: None,
    };
    assert_eq!(
        fit_gang(&six, &zone, &rooms).unwrap_err(),
        GangMiss::NoAttribute("zone".into())
    );
    // Room in all (15 of 17 cpus), but in pieces of 4, 9 and 4 that take one 5-cpu member.
    let five = vec![r("cpus=5"); 3];
    assert_eq!(
        fit_gang(&five, &GangRules::default(), &rooms).unwrap_err(),
        GangMiss::Fragmented
    );
}

#[test]
fn a_member_s_gpus_stay_on_one_agent() {
    let free = [r("cpus=16,gpus=4"), r("cpus=16,gpus=8")];
    let a = [BTreeMap::new(), BTreeMap::new()];
    let rooms = rooms(&free, &a);
    let members = vec![r("cpus=2,gpus=4"), r("cpus=2,gpus=4"), r("cpus=2,gpus=4")];
    let placed = fit_gang(&members, &GangRules::default(), &rooms).unwrap();
    assert!(valid(&members, &GangRules::default(), &rooms, &placed));
    assert_eq!(placed, [1, 1, 0], "the roomiest agent first, whole");
}

fn room_strategy() -> impl Strategy<Value = (Resources, BTreeMap<String, String>)> {
    (0u32..6, 0u32..4, prop::option::of(0u32..3)).prop_map(|(c, g, rack)| {
        let free = Resources::from_units([("cpus", f64::from(c)), ("gpus", f64::from(g))]).unwrap();
        let attributes = rack
            .map(|v| attrs(&[("rack", &v.to_string())]))
            .unwrap_or_default();
        (free, attributes)
    })
}

fn member_strategy() -> impl Strategy<Value = Resources> {
    (1u32..4, 0u32..3).prop_map(|(c, g)| {
        Resources::from_units([("cpus", f64::from(c)), ("gpus", f64::from(g))]).unwrap()
    })
}

fn rules_strategy() -> impl Strategy<Value = GangRules> {
    (any::<bool>(), prop::option::of(1u32..4)).prop_map(|(rack, max)| GangRules {
        same_attribute: rack.then(|| "rack".to_owned()),
        max_per_agent: max,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// A fit is always valid, and none is claimed where none exists.
    #[test]
    fn a_fit_is_valid_and_a_miss_is_honest(
        agents in prop::collection::vec(room_strategy(), 1..4),
        members in prop::collection::vec(member_strategy(), 1..6),
        rules in rules_strategy(),
    ) {
        let (free, attributes): (Vec<_>, Vec<_>) = agents.into_iter().unzip();
        let rooms = rooms(&free, &attributes);
        match fit_gang(&members, &rules, &rooms) {
            Ok(placed) => prop_assert!(valid(&members, &rules, &rooms, &placed), "{placed:?}"),
            Err(GangMiss::Fragmented) => {}
            Err(miss) => prop_assert!(!reference(&members, &rules, &rooms), "{miss}"),
        }
    }

    /// Members of one shape fit whenever any assignment exists.
    #[test]
    fn members_of_one_shape_fit_whenever_they_can(
        agents in prop::collection::vec(room_strategy(), 1..4),
        member in member_strategy(),
        n in 1usize..7,
        rules in rules_strategy(),
    ) {
        let (free, attributes): (Vec<_>, Vec<_>) = agents.into_iter().unzip();
        let rooms = rooms(&free, &attributes);
        let members = vec![member; n];
        let found = fit_gang(&members, &rules, &rooms).is_ok();
        prop_assert_eq!(found, reference(&members, &rules, &rooms));
    }
}
