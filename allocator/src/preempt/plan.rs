//! [`plan`]: which running tasks to take back for one starved role (see the module docs of
//! `preempt`).

use std::cmp::Reverse;
use std::collections::BTreeMap;

use protocol::FrameworkId;

use super::{FairShares, Plan, TaskInput, Victim, SHARE_TOLERANCE};

/// Tasks of one framework with the same priority and resources: the planner picks among
/// groups, then takes the group's tasks most recently launched first (the least work lost),
/// so a plan costs
/// O(victims x groups), not O(victims x tasks).
struct Group<'a> {
    framework: FrameworkId,
    priority: i32,
    res: Vec<f64>,
    size: f64,
    /// The nodes from the framework's leaf up to (not including) the lowest common ancestor
    /// with the starved role.
    path: Vec<usize>,
    tasks: Vec<&'a TaskInput>,
    next: usize,
}

/// `max_j (a_j + b_j + c_j) / cap_j`.
fn share3(cap: &[f64], a: &[f64], b: &[f64], c: &[f64]) -> f64 {
    let mut m = 0.0f64;
    for j in 0..cap.len() {
        m = m.max((a[j] + b[j] + c[j]) / cap[j]);
    }
    m
}

/// `max_j (a_j - b_j - c_j) / cap_j`.
fn share_less(cap: &[f64], a: &[f64], b: &[f64], c: &[f64]) -> f64 {
    let mut m = 0.0f64;
    for j in 0..cap.len() {
        m = m.max((a[j] - b[j] - c[j]) / cap[j]);
    }
    m
}

/// Chooses tasks to take back for the starved role `for_role` (see the module docs); `None`
/// when the role is unknown or not starved, or no task can be taken without taking some role
/// below its fair share or guarantee. Tasks of unknown frameworks are ignored. Costs
/// O(tasks log tasks) to group the tasks, then O(groups x depth x kinds) per victim.
pub fn plan(shares: &FairShares, for_role: &str, tasks: &[TaskInput]) -> Option<Plan> {
    let &s = shares.roles.get(for_role)?;
    let standing = shares.standing(s);
    if !standing.starved() {
        return None;
    }
    let k = shares.kinds.len();
    let cap = &shares.cap;
    let zero = vec![0.0; k];
    let s_held = &shares.nodes[s].held;
    let g_target: Vec<f64> = shares.nodes[s]
        .guarantee
        .iter()
        .zip(cap)
        .map(|(g, c)| g.min(*c))
        .collect();
    let fair = shares.nodes[s].fair;
    let satisfied = |freed: &[f64], more: &[f64]| {
        share3(cap, s_held, freed, more) + SHARE_TOLERANCE >= fair
            && (0..k).all(|j| s_held[j] + freed[j] + more[j] >= g_target[j])
    };
    // Group the candidates by (framework, priority, resources in thousandths).
    let mut groups: BTreeMap<(FrameworkId, i32, Vec<u64>), Vec<&TaskInput>> = BTreeMap::new();
    for t in tasks {
        let Some(&leaf) = shares.frameworks.get(&t.framework) else {
            continue;
        };
        if shares.is_ancestor(s, leaf) {
            continue;
        }
        if let Some(pool) = &t.reserved_for {
            // Freed, it returns to a pool only that role's subtree is offered.
            let serves_s = shares
                .roles
                .get(pool.as_str())
                .is_some_and(|&p| shares.is_ancestor(p, s));
            if !serves_s {
                continue;
            }
        }
        let millis: Vec<u64> = shares.kinds.iter().map(|n| t.resources.millis(n)).collect();
        if millis.iter().all(|v| *v == 0) {
            continue;
        }
        groups
            .entry((t.framework, t.priority, millis))
            .or_default()
            .push(t);
    }
    let mut groups: Vec<Group<'_>> = groups
        .into_iter()
        .map(|((framework, priority, millis), mut list)| {
            list.sort_by(|a, b| {
                b.launch_order
                    .cmp(&a.launch_order)
                    .then_with(|| a.task_id.cmp(&b.task_id))
            });
            let res: Vec<f64> = millis.iter().map(|v| *v as f64).collect();
            let leaf = shares.frameworks[&framework];
            Group {
                framework,
                priority,
                size: shares.share_of(&res),
                res,
                path: shares.path_below_lca(leaf, s),
                tasks: list,
                next: 0,
            }
        })
        .collect();
    let mut taken: Vec<Vec<f64>> = vec![Vec::new(); shares.nodes.len()];
    let mut freed = vec![0.0; k];
    let mut victims = Vec::new();
    while !satisfied(&freed, &zero) {
        let now_share = share3(cap, s_held, &freed, &zero);
        let short_of_share = now_share + SHARE_TOLERANCE < fair;
        // Smallest key wins: (priority, -excess, covers first, covers ? size : -size, the
        // most recently launched next task, group).
        let mut best: Option<(i32, f64, bool, f64, Reverse<u64>, usize)> = None;
        for (gi, g) in groups.iter().enumerate() {
            if g.next >= g.tasks.len() {
                continue;
            }
            let gains_share = short_of_share && share3(cap, s_held, &freed, &g.res) > now_share;
            let gains_guarantee =
                (0..k).any(|j| g.res[j] > 0.0 && s_held[j] + freed[j] < g_target[j]);
            if !gains_share && !gains_guarantee {
                continue;
            }
            let floor_ok = g.path.iter().enumerate().all(|(i, &n)| {
                let node = &shares.nodes[n];
                // Roles are protected; a framework only where it is the branch itself (it
                // sits directly beside the starved role's line).
                if node.leaf && i + 1 < g.path.len() {
                    return true;
                }
                let t = if taken[n].is_empty() {
                    &zero
                } else {
                    &taken[n]
                };
                share_less(cap, &node.held, t, &g.res) + 1e-12 >= node.fair
                    && (0..k).all(|j| {
                        g.res[j] == 0.0
                            || node.guarantee[j] == 0.0
                            || node.held[j] - t[j] - g.res[j] >= node.guarantee[j]
                    })
            });
            if !floor_ok {
                continue;
            }
            let branch = g.path.last().copied().unwrap_or(0);
            let bt = if taken[branch].is_empty() {
                &zero
            } else {
                &taken[branch]
            };
            let excess =
                share_less(cap, &shares.nodes[branch].held, bt, &zero) - shares.nodes[branch].fair;
            let covers = satisfied(&freed, &g.res);
            let key = (
                g.priority,
                -excess,
                !covers,
                if covers { g.size } else { -g.size },
                Reverse(g.tasks[g.next].launch_order),
                gi,
            );
            let better = best.as_ref().is_none_or(|b| {
                key.0
                    .cmp(&b.0)
                    .then(key.1.total_cmp(&b.1))
                    .then(key.2.cmp(&b.2))
                    .then(key.3.total_cmp(&b.3))
                    .then(key.4.cmp(&b.4))
                    .then(key.5.cmp(&b.5))
                    .is_lt()
            });
            if better {
                best = Some(key);
            }
        }
        let Some((_, excess_neg, _, _, _, gi)) = best else {
            break;
        };
        let g = &mut groups[gi];
        let task = g.tasks[g.next];
        g.next += 1;
        for &n in &g.path {
            if taken[n].is_empty() {
                taken[n] = vec![0.0; k];
            }
            for (t, r) in taken[n].iter_mut().zip(&g.res) {
                *t += r;
            }
        }
        for (f, r) in freed.iter_mut().zip(&g.res) {
            *f += r;
        }
        let role = g
            .path
            .first()
            .map(|&n| shares.nodes[n].path.clone())
            .unwrap_or_default();
        let branch = g.path.last().copied().unwrap_or(0);
        victims.push(Victim {
            framework: g.framework,
            task_id: task.task_id.clone(),
            role: role.clone(),
            priority: g.priority,
            why: format!(
                "role {role:?} (priority {} task) is {:.1} % above the fair share of {:?} ({:.1} %); {for_role:?} is at {:.1} % of its {:.1} %",
                g.priority,
                -excess_neg * 100.0,
                shares.nodes[branch].path,
                shares.nodes[branch].fair * 100.0,
                standing.share * 100.0,
                fair * 100.0
            ),
        });
    }
    (!victims.is_empty()).then(|| Plan {
        for_role: for_role.to_string(),
        share: standing.share,
        fair,
        victims,
    })
}
