//! Placement constraints over agent attributes, as **one filter stage** every
//! policy calls: [`FirstFit`](crate::FirstFit), [`BestFit`](crate::BestFit) and
//! [`Tetris`](crate::Tetris) ask the same question, "may a task of job `j` go on offer `o`?",
//! through `Problem::fits`, and keep only their own scoring and selection.
//!
//! A job's [`Constraint`]s hold for each of its tasks. Equality constraints are evaluated once
//! per call into a bitmap of allowed offers; counting constraints ([`Constraint::Spread`],
//! [`Constraint::MaxPerValue`]) keep, per distinct attribute value, how many of the job's tasks
//! are there: those already running (from [`ConstraintInput::running`]) plus those placed in
//! this call, updated as each task is placed. Counts only grow within a call, so an offer a job
//! may not use stays so — the property the policies' incremental bookkeeping relies on — and a
//! policy only needs to look again at the placed job's classes when a count reaches its limit
//! (`Stage::record` says when).
//!
//! Semantics (as Nomad's): an agent without the attribute does not satisfy `==`, satisfies
//! `!=`, and does not qualify for spread or max-per-value (it has no value to count).

use std::collections::{BTreeMap, HashMap};

use super::JobId;

/// A constraint on where a job's tasks may run, over the attributes of the offers' agents
/// (agents' `--attributes`, e.g. `zone=b,rack=r1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Constraint {
    /// The agent's `attribute` is `value`.
    Equals {
        /// The attribute's name.
        attribute: String,
        /// The value it must have.
        value: String,
    },
    /// The agent's `attribute` is not `value` (an agent without the attribute qualifies).
    NotEquals {
        /// The attribute's name.
        attribute: String,
        /// The value it must not have.
        value: String,
    },
    /// At most one of the job's tasks per distinct value of `attribute` (one per rack).
    Spread {
        /// The attribute's name.
        attribute: String,
    },
    /// At most `max` of the job's tasks per distinct value of `attribute`.
    MaxPerValue {
        /// The attribute's name.
        attribute: String,
        /// The most tasks per value.
        max: u32,
    },
}

impl Constraint {
    /// `attribute == value`.
    pub fn equals(attribute: impl Into<String>, value: impl Into<String>) -> Self {
        Self::Equals {
            attribute: attribute.into(),
            value: value.into(),
        }
    }

    /// `attribute != value`.
    pub fn not_equals(attribute: impl Into<String>, value: impl Into<String>) -> Self {
        Self::NotEquals {
            attribute: attribute.into(),
            value: value.into(),
        }
    }

    /// One task per distinct value of `attribute`.
    pub fn spread(attribute: impl Into<String>) -> Self {
        Self::Spread {
            attribute: attribute.into(),
        }
    }

    /// At most `max` tasks per distinct value of `attribute`.
    pub fn max_per_value(attribute: impl Into<String>, max: u32) -> Self {
        Self::MaxPerValue {
            attribute: attribute.into(),
            max,
        }
    }

    /// The counted attribute and its limit, for spread and max-per-value.
    fn counted(&self) -> Option<(&str, u32)> {
        match self {
            Self::Spread { attribute } => Some((attribute, 1)),
            Self::MaxPerValue { attribute, max } => Some((attribute, *max)),
            _ => None,
        }
    }

    /// Whether an agent with `attributes` passes the equality part (counting constraints pass
    /// when the agent has the attribute).
    pub fn admits(&self, attributes: &BTreeMap<String, String>) -> bool {
        match self {
            Self::Equals { attribute, value } => attributes.get(attribute) == Some(value),
            Self::NotEquals { attribute, value } => attributes.get(attribute) != Some(value),
            Self::Spread { attribute } | Self::MaxPerValue { attribute, .. } => {
                attributes.contains_key(attribute)
            }
        }
    }
}

impl std::fmt::Display for Constraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Equals { attribute, value } => write!(f, "{attribute} == {value}"),
            Self::NotEquals { attribute, value } => write!(f, "{attribute} != {value}"),
            Self::Spread { attribute } => write!(f, "spread over {attribute}"),
            Self::MaxPerValue { attribute, max } => write!(f, "at most {max} per {attribute}"),
        }
    }
}

/// What the constraint stage needs besides the [`PlacementInput`](crate::PlacementInput).
#[derive(Debug, Clone, Copy)]
pub struct ConstraintInput<'a> {
    /// The attributes of each offer's agent, by offer index ([`Offer::attributes`]); an offer
    /// past the end of the slice has none.
    ///
    /// [`Offer::attributes`]: protocol::Offer::attributes
    pub offer_attributes: &'a [BTreeMap<String, String>],
    /// Each job's constraints; a job absent here is unconstrained.
    pub jobs: &'a BTreeMap<JobId, Vec<Constraint>>,
    /// Where each job's tasks already run: the attributes of each running task's agent, one
    /// entry per task. Spread and max-per-value count them.
    pub running: &'a BTreeMap<JobId, Vec<BTreeMap<String, String>>>,
}

/// One counting constraint of one job, prepared.
struct Counter {
    max: u32,
    /// Per offer, its agent's value (an index into `count`); `None` without the attribute.
    value_of: Vec<Option<u32>>,
    /// Per value, the job's tasks there.
    count: Vec<u32>,
}

/// One constrained job, prepared.
struct JobStage {
    /// Per offer, whether the equality constraints allow it.
    allowed: Vec<bool>,
    counters: Vec<Counter>,
}

/// The prepared filter stage of one placement call. Unconstrained jobs cost one `None` test.
pub(crate) struct Stage {
    /// By the problem's dense job index.
    jobs: Vec<Option<JobStage>>,
}

impl Stage {
    /// Prepares the stage for the problem's jobs (`job_ids[j]` is dense job `j`'s id) over
    /// `offers` offers.
    pub(crate) fn new(job_ids: &[JobId], offers: usize, input: &ConstraintInput<'_>) -> Self {
        static NONE: BTreeMap<String, String> = BTreeMap::new();
        let attrs = |o: usize| input.offer_attributes.get(o).unwrap_or(&NONE);
        let jobs = job_ids
            .iter()
            .map(|id| {
                let constraints = input.jobs.get(id).filter(|c| !c.is_empty())?;
                let allowed = (0..offers)
                    .map(|o| constraints.iter().all(|c| c.admits(attrs(o))))
                    .collect();
                let counters = constraints
                    .iter()
                    .filter_map(Constraint::counted)
                    .map(|(attribute, max)| {
                        let mut values: HashMap<&str, u32> = HashMap::new();
                        let mut value_of = Vec::with_capacity(offers);
                        for o in 0..offers {
                            value_of.push(attrs(o).get(attribute).map(|v| {
                                let n = values.len() as u32;
                                *values.entry(v.as_str()).or_insert(n)
                            }));
                        }
                        let mut count = vec![0u32; values.len()];
                        for running in input.running.get(id).into_iter().flatten() {
                            // Values no offer has cannot be placed on: not counted.
                            if let Some(v) = running.get(attribute) {
                                if let Some(&i) = values.get(v.as_str()) {
                                    count[i as usize] = count[i as usize].saturating_add(1);
                                }
                            }
                        }
                        Counter {
                            max,
                            value_of,
                            count,
                        }
                    })
                    .collect();
                Some(JobStage { allowed, counters })
            })
            .collect();
        Self { jobs }
    }

    /// Whether a task of dense job `j` may go on offer `o` now.
    #[inline]
    pub(crate) fn allows(&self, j: usize, o: usize) -> bool {
        match self.jobs.get(j) {
            Some(Some(job)) => {
                job.allowed[o]
                    && job
                        .counters
                        .iter()
                        .all(|c| c.value_of[o].is_some_and(|v| c.count[v as usize] < c.max))
            }
            _ => true,
        }
    }

    /// A task of dense job `j` was placed on offer `o`. True when a count reached its limit,
    /// so that offers the job could use before may no longer be used.
    pub(crate) fn record(&mut self, j: usize, o: usize) -> bool {
        let Some(Some(job)) = self.jobs.get_mut(j) else {
            return false;
        };
        let mut tightened = false;
        for c in &mut job.counters {
            if let Some(v) = c.value_of[o] {
                let n = &mut c.count[v as usize];
                *n = n.saturating_add(1);
                tightened |= *n >= c.max;
            }
        }
        tightened
    }
}

/// Every way `assignments` break the constraints, as sentences (empty when none): a
/// straightforward check, independent of the stage, for tests and for callers who want to be
/// sure.
pub fn violations(
    tasks: &[crate::PendingTask],
    assignments: &[crate::Assignment],
    input: &ConstraintInput<'_>,
) -> Vec<String> {
    static NONE: BTreeMap<String, String> = BTreeMap::new();
    let mut out = Vec::new();
    // (job, attribute, value) -> tasks there
    let mut counts: BTreeMap<(JobId, String, String), u32> = BTreeMap::new();
    for (job, running) in input.running {
        for attrs in running {
            for (k, v) in attrs {
                *counts.entry((*job, k.clone(), v.clone())).or_default() += 1;
            }
        }
    }
    for a in assignments {
        let Some(task) = tasks.get(a.task) else {
            out.push(format!("task index {} out of range", a.task));
            continue;
        };
        let attrs = input.offer_attributes.get(a.offer).unwrap_or(&NONE);
        for c in input.jobs.get(&task.job).into_iter().flatten() {
            if !c.admits(attrs) {
                out.push(format!("task {} on offer {}: not {c}", a.task, a.offer));
            }
        }
        for (k, v) in attrs {
            *counts.entry((task.job, k.clone(), v.clone())).or_default() += 1;
        }
    }
    for ((job, attribute, value), n) in &counts {
        for c in input.jobs.get(job).into_iter().flatten() {
            if let Some((attr, max)) = c.counted() {
                let placed_here = assignments.iter().any(|a| {
                    tasks.get(a.task).is_some_and(|t| t.job == *job)
                        && input
                            .offer_attributes
                            .get(a.offer)
                            .and_then(|m| m.get(attr))
                            == Some(value)
                });
                if attr == attribute && *n > max && placed_here {
                    out.push(format!("job {job}: {n} tasks on {attribute}={value}, {c}"));
                }
            }
        }
    }
    out
}
