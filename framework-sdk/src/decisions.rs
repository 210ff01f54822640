//! [`Decisions`]: a framework's answers to offers, built with `&mut self` methods (so they
//! grow in loops), and the ways the SDK fills them from a placement: [`Decisions::pack`] for a
//! queue of like tasks, [`Decisions::from_assignments`] for a [`placement`]
//! policy's choices, [`Decisions::launch_or_decline`] for any per-offer rule.

use std::time::Duration;

use placement::Assignment;
use protocol::{Offer, OfferId, TaskId, TaskSpec};

use crate::Task;

/// One answer to offers: a launch on one agent's offers, a gang's launch across agents, or a
/// decline. More kinds may come, so a `match` needs a `_` arm.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Answer {
    /// Launch `tasks` on the agent of `offer_ids`; the unused rest returns to the pool.
    Launch {
        /// Offers to use, all of one agent.
        offer_ids: Vec<OfferId>,
        /// Tasks to launch; their resources must fit in the offers together.
        tasks: Vec<TaskSpec>,
    },
    /// Launch a gang: each part's `tasks` on the agent of its `offer_ids`, all of them or none
    /// (`POST /frameworks/{id}/gang-accepts`). The members then end together: when one fails,
    /// the coordinator kills the others and the scheduler hears
    /// [`Scheduler::gang_failed`](crate::Scheduler::gang_failed).
    LaunchGang {
        /// The gang's id, unique among the framework's running gangs.
        gang_id: String,
        /// One part per agent: its offers and the members launched there.
        parts: Vec<(Vec<OfferId>, Vec<TaskSpec>)>,
    },
    /// Give the offer back, filtered for `refuse` (the driver's
    /// [`decline_refuse`](crate::DriverConfig::decline_refuse) when `None`).
    Decline {
        /// The offer.
        offer_id: OfferId,
        /// How long the coordinator should not offer these resources again.
        refuse: Option<Duration>,
    },
}

/// A framework's answers to offers. An offer left without an answer is held: answer it later
/// through the [`Context`](crate::Context), or the driver declines it after
/// [`DriverConfig::offer_hold_timeout`](crate::DriverConfig::offer_hold_timeout). The driver
/// sends all the declines of one answer in one call per filter length.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decisions {
    answers: Vec<Answer>,
}

impl Decisions {
    /// No answers (every offer is held, to be answered later or declined by the driver).
    pub fn new() -> Self {
        Self::default()
    }

    /// Launches `tasks` on one offer. An empty `tasks` declines the offer.
    pub fn launch(&mut self, offer_id: OfferId, tasks: Vec<TaskSpec>) -> &mut Self {
        self.answers.push(Answer::Launch {
            offer_ids: vec![offer_id],
            tasks,
        });
        self
    }

    /// Launches a gang across agents, all or none ([`Answer::LaunchGang`]): `parts` holds one
    /// entry per agent, its offers and the members launched there.
    pub fn launch_gang(
        &mut self,
        gang_id: impl Into<String>,
        parts: Vec<(Vec<OfferId>, Vec<TaskSpec>)>,
    ) -> &mut Self {
        self.answers.push(Answer::LaunchGang {
            gang_id: gang_id.into(),
            parts,
        });
        self
    }

    /// Declines one offer, filtered for `refuse`: `None` uses the driver's
    /// [`decline_refuse`](crate::DriverConfig::decline_refuse).
    pub fn decline(&mut self, offer_id: OfferId, refuse: Option<Duration>) -> &mut Self {
        self.answers.push(Answer::Decline { offer_id, refuse });
        self
    }

    /// Adds any answer.
    pub fn push(&mut self, answer: Answer) -> &mut Self {
        self.answers.push(answer);
        self
    }

    /// Launches the tasks `tasks_for` gives each offer, and declines (with the driver's filter)
    /// every offer that gets none.
    pub fn launch_or_decline(
        offers: &[Offer],
        mut tasks_for: impl FnMut(&Offer) -> Vec<TaskSpec>,
    ) -> Self {
        let mut out = Self::new();
        for offer in offers {
            let tasks = tasks_for(offer);
            if tasks.is_empty() {
                out.decline(offer.offer_id, None);
            } else {
                out.launch(offer.offer_id, tasks);
            }
        }
        out
    }

    /// Places copies of `task` on `offers`, in order: each offer takes as many as fit in it,
    /// each under the id `next_id` gives, until `next_id` returns `None`. All of one offer's
    /// tasks go in one launch; offers that take none are declined.
    pub fn pack(
        offers: &[Offer],
        task: &Task,
        mut next_id: impl FnMut() -> Option<TaskId>,
    ) -> Self {
        let mut more = true;
        Self::launch_or_decline(offers, |offer| {
            let mut room = offer.resources.clone();
            let mut tasks = Vec::new();
            while more {
                let Some(left) = room.checked_sub(task.resources()) else {
                    break;
                };
                let Some(id) = next_id() else {
                    more = false;
                    break;
                };
                room = left;
                tasks.push(task.on(offer, id));
            }
            tasks
        })
    }

    /// Answers `offers` with a placement's `assignments` (indices into `offers` and into the
    /// tasks the policy placed): all the tasks assigned to one offer go in one launch, and
    /// offers with none are declined. `spec` makes each assigned task's wire spec for its offer,
    /// in assignment order; `None` leaves that task out (it stays unplaced).
    pub fn from_assignments(
        offers: &[Offer],
        assignments: &[Assignment],
        mut spec: impl FnMut(usize, &Offer) -> Option<TaskSpec>,
    ) -> Self {
        let mut per_offer: Vec<Vec<TaskSpec>> = vec![Vec::new(); offers.len()];
        for a in assignments {
            let (Some(offer), Some(tasks)) = (offers.get(a.offer), per_offer.get_mut(a.offer))
            else {
                continue;
            };
            if let Some(task) = spec(a.task, offer) {
                tasks.push(task);
            }
        }
        let mut per_offer = per_offer.into_iter();
        Self::launch_or_decline(offers, |_| per_offer.next().unwrap_or_default())
    }

    /// The answers, in the order given.
    pub fn answers(&self) -> &[Answer] {
        &self.answers
    }

    /// True when there is no answer.
    pub fn is_empty(&self) -> bool {
        self.answers.is_empty()
    }

    /// Consumes the decisions into their answers.
    pub fn into_answers(self) -> Vec<Answer> {
        self.answers
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use protocol::{AgentId, FrameworkId};

    use super::*;

    fn offer(free: &str) -> Offer {
        Offer {
            offer_id: OfferId::new(),
            framework_id: FrameworkId::new(),
            agent_id: AgentId::new(),
            hostname: "h".into(),
            resources: free.parse().unwrap(),
            agent_total: "cpus=8,mem=8192".parse().unwrap(),
            attributes: Default::default(),
            created_at: Default::default(),
            expires_at: Default::default(),
            reservation: None,
        }
    }

    fn ids(tasks: &[TaskSpec]) -> Vec<&str> {
        tasks.iter().map(|t| t.task_id.as_str()).collect()
    }

    #[test]
    fn decisions_grow_in_a_loop() {
        let offers = [offer("cpus=1"), offer("cpus=1")];
        let mut d = Decisions::new();
        assert!(d.is_empty());
        for (i, o) in offers.iter().enumerate() {
            if i == 0 {
                d.launch(o.offer_id, vec![]);
            } else {
                d.decline(o.offer_id, Some(Duration::from_secs(60)));
            }
        }
        assert_eq!(
            d.answers(),
            [
                Answer::Launch {
                    offer_ids: vec![offers[0].offer_id],
                    tasks: vec![]
                },
                Answer::Decline {
                    offer_id: offers[1].offer_id,
                    refuse: Some(Duration::from_secs(60))
                }
            ]
        );
    }

    #[test]
    fn pack_fills_offers_in_order_and_declines_the_rest() {
        let task = Task::shell("true").resources("cpus=1").build().unwrap();
        let offers = [
            offer("cpus=2.5,mem=10"),
            offer("cpus=0.5"),
            offer("cpus=4"),
            offer("cpus=4"),
        ];
        let mut queue = (0..5).map(|i| TaskId::new(format!("t{i}")).unwrap());
        let d = Decisions::pack(&offers, &task, || queue.next());
        let [Answer::Launch {
            offer_ids: first,
            tasks: a,
        }, Answer::Decline {
            offer_id: small,
            refuse: None,
        }, Answer::Launch {
            offer_ids: third,
            tasks: b,
        }, Answer::Decline {
            offer_id: last,
            refuse: None,
        }] = d.answers()
        else {
            panic!("{d:?}")
        };
        assert_eq!(
            (first, small, third, last),
            (
                &vec![offers[0].offer_id],
                &offers[1].offer_id,
                &vec![offers[2].offer_id],
                &offers[3].offer_id
            )
        );
        assert_eq!((ids(a), ids(b)), (vec!["t0", "t1"], vec!["t2", "t3", "t4"]));
        assert!(b.iter().all(|t| t.agent_id == offers[2].agent_id));
    }

    #[test]
    fn assignments_become_one_launch_per_offer() {
        let offers = [offer("cpus=4"), offer("cpus=4"), offer("cpus=4")];
        let assignments = [
            Assignment { task: 0, offer: 2 },
            Assignment { task: 1, offer: 0 },
            Assignment { task: 2, offer: 2 },
            // Out of range: ignored rather than a panic.
            Assignment { task: 3, offer: 9 },
        ];
        let d = Decisions::from_assignments(&offers, &assignments, |task, offer| {
            (task != 1).then(|| {
                Task::shell("true")
                    .resources("cpus=1")
                    .build()
                    .unwrap()
                    .on(offer, TaskId::new(format!("t{task}")).unwrap())
            })
        });
        let launched: Vec<(OfferId, Vec<&str>)> = d
            .answers()
            .iter()
            .filter_map(|a| match a {
                Answer::Launch { offer_ids, tasks } => Some((offer_ids[0], ids(tasks))),
                Answer::Decline { .. } | Answer::LaunchGang { .. } => None,
            })
            .collect();
        assert_eq!(launched, [(offers[2].offer_id, vec!["t0", "t2"])]);
        assert_eq!(d.answers().len(), 3, "the two others are declined");
    }
}
