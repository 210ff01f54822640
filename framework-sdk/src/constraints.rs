//! Placement constraints for frameworks: tell a [`placement`] policy that a job's
//! tasks need `zone == b`, must avoid `rack == r9`, spread one per `rack`, or go at most N per
//! value of an attribute. The attributes are the agents' (`agent --attributes zone=b,rack=r1`),
//! carried by every offer ([`Offer::attributes`]).
//!
//! Spread and max-per-value count the job's tasks already running, which only the framework
//! knows: [`TaskPlaces`] remembers the attributes of the agent each launched task went to and
//! forgets the task when it ends. [`place`] runs a policy with both.
//!
//! ```
//! use std::collections::BTreeMap;
//! use framework_sdk::constraints::{Constraint, TaskPlaces};
//!
//! let constraints = BTreeMap::from([(0, vec![Constraint::equals("zone", "b"), Constraint::spread("rack")])]);
//! let places = TaskPlaces::new();
//! assert!(places.running().is_empty());
//! # let _ = constraints;
//! ```

use std::collections::{BTreeMap, HashMap};

use placement::{
    Assignment, ConstraintInput, JobId, OfferSlot, PendingTask, Placement, PlacementInput,
};
use protocol::{Offer, Resources, TaskId, TaskStatus};

pub use placement::{violations, Constraint};

/// An agent's attributes.
pub type Attributes = BTreeMap<String, String>;

/// Where the framework's live tasks run: each task's job and its agent's attributes.
#[derive(Debug, Clone, Default)]
pub struct TaskPlaces {
    tasks: HashMap<TaskId, (JobId, Attributes)>,
}

impl TaskPlaces {
    /// Knows no task.
    pub fn new() -> Self {
        Self::default()
    }

    /// Task `task` of `job` was launched on `offer`'s agent.
    pub fn launched(&mut self, task: TaskId, job: JobId, offer: &Offer) {
        self.tasks.insert(task, (job, offer.attributes.clone()));
    }

    /// A task update: a terminal state forgets the task. Returns whether it was known.
    pub fn status(&mut self, status: &TaskStatus) -> bool {
        if status.state.is_terminal() {
            self.tasks.remove(&status.task_id).is_some()
        } else {
            self.tasks.contains_key(&status.task_id)
        }
    }

    /// Forgets a task (launch refused, or ended).
    pub fn forget(&mut self, task: &TaskId) {
        self.tasks.remove(task);
    }

    /// How many live tasks are known.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// True when no live task is known.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Per job, the attributes of each live task's agent ([`ConstraintInput::running`]).
    pub fn running(&self) -> BTreeMap<JobId, Vec<Attributes>> {
        let mut out: BTreeMap<JobId, Vec<Attributes>> = BTreeMap::new();
        for (job, attrs) in self.tasks.values() {
            out.entry(*job).or_default().push(attrs.clone());
        }
        out
    }

    /// [`TaskPlaces::running`] of the jobs in `jobs` only: what [`place`] needs, which counts
    /// the live tasks of constrained jobs alone, so a round with no constraint costs nothing
    /// however many tasks run.
    pub fn running_of<V>(&self, jobs: &BTreeMap<JobId, V>) -> BTreeMap<JobId, Vec<Attributes>> {
        let mut out: BTreeMap<JobId, Vec<Attributes>> = BTreeMap::new();
        if jobs.is_empty() {
            return out;
        }
        for (job, attrs) in self.tasks.values() {
            if jobs.contains_key(job) {
                out.entry(*job).or_default().push(attrs.clone());
            }
        }
        out
    }
}

/// Runs `policy` on `offers` for `tasks` with each job's `constraints` (jobs absent are
/// unconstrained), counting the live tasks of `places`. `job_usage` and `cluster_total` are as
/// in [`PlacementInput`] (empty maps and resources are fine). Turn the result into answers with
/// [`Decisions::from_assignments`](crate::Decisions::from_assignments).
pub fn place(
    policy: &dyn Placement,
    offers: &[Offer],
    tasks: &[PendingTask],
    job_usage: &BTreeMap<JobId, Resources>,
    cluster_total: &Resources,
    constraints: &BTreeMap<JobId, Vec<Constraint>>,
    places: &TaskPlaces,
) -> Vec<Assignment> {
    let slots: Vec<OfferSlot> = offers.iter().map(OfferSlot::from).collect();
    let attributes: Vec<Attributes> = offers.iter().map(|o| o.attributes.clone()).collect();
    let running = places.running_of(constraints);
    let input = PlacementInput {
        offers: &slots,
        tasks,
        job_usage,
        cluster_total,
    };
    let c = ConstraintInput {
        offer_attributes: &attributes,
        jobs: constraints,
        running: &running,
    };
    policy.place_constrained(&input, &c)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use protocol::{AgentId, FrameworkId, OfferId, TaskState, UpdateId};

    fn offer(attrs: &[(&str, &str)]) -> Offer {
        Offer {
            offer_id: OfferId::new(),
            framework_id: FrameworkId::new(),
            agent_id: AgentId::new(),
            hostname: "h".into(),
            resources: "cpus=4".parse().unwrap(),
            agent_total: "cpus=4".parse().unwrap(),
            attributes: attrs
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            created_at: protocol::now(),
            expires_at: protocol::now(),
            reservation: None,
        }
    }

    #[test]
    fn running_of_lists_only_the_named_jobs() {
        let a = offer(&[("rack", "r1")]);
        let mut places = TaskPlaces::new();
        places.launched("t1".parse().unwrap(), 1, &a);
        places.launched("t2".parse().unwrap(), 2, &a);
        places.launched("t3".parse().unwrap(), 2, &a);
        let none: BTreeMap<JobId, ()> = BTreeMap::new();
        assert!(places.running_of(&none).is_empty());
        let two = places.running_of(&BTreeMap::from([(2, ())]));
        assert_eq!(two.keys().copied().collect::<Vec<_>>(), [2]);
        assert_eq!(two[&2].len(), 2);
        assert_eq!(places.running().len(), 2, "running() still lists every job");
    }

    #[test]
    fn spread_counts_running_tasks_until_they_end() {
        let offers = [offer(&[("rack", "r1")]), offer(&[("rack", "r2")])];
        let tasks = [PendingTask {
            job: 7,
            demand: "cpus=1".parse().unwrap(),
            duration_s: 1.0,
        }; 1]
            .to_vec();
        let constraints = BTreeMap::from([(7, vec![Constraint::spread("rack")])]);
        let mut places = TaskPlaces::new();
        let t1: TaskId = "t1".parse().unwrap();
        let t2: TaskId = "t2".parse().unwrap();
        places.launched(t1.clone(), 7, &offers[0]);
        places.launched(t2.clone(), 7, &offers[1]);
        let (usage, total) = (BTreeMap::new(), Resources::new());
        let policy = placement::FirstFit;
        let got = place(
            &policy,
            &offers,
            &tasks,
            &usage,
            &total,
            &constraints,
            &places,
        );
        assert!(got.is_empty(), "both racks hold one already: {got:?}");
        let ended = TaskStatus {
            task_id: t2,
            framework_id: offers[1].framework_id,
            agent_id: offers[1].agent_id,
            state: TaskState::Finished,
            message: None,
            exit_code: Some(0),
            update_id: UpdateId::new(),
            timestamp: protocol::now(),
            resources: None,
            reason: None,
            usage: None,
            gpu_devices: None,
            healthy: None,
        };
        assert!(places.status(&ended));
        assert_eq!(places.len(), 1);
        let got = place(
            &policy,
            &offers,
            &tasks,
            &usage,
            &total,
            &constraints,
            &places,
        );
        assert_eq!(
            got,
            vec![Assignment { task: 0, offer: 1 }],
            "r2 is free again"
        );
    }
}
