//! The [`Scheduler`] trait a framework implements.

use async_trait::async_trait;
use protocol::{FrameworkId, Offer, OfferId, Resources, TaskSpec, TaskStatus};

use crate::{Context, Decisions, SdkError};

/// A framework's policy. The [`Driver`](crate::Driver) calls these methods one at a time, in
/// the order events arrive; while one runs, events wait. After every call the driver asks
/// [`Scheduler::pending_tasks`] and suppresses or revives offers to match.
#[async_trait]
pub trait Scheduler: Send {
    /// The framework is registered (`reregistered` is false) or has reconnected and kept its
    /// tasks (`reregistered` is true).
    async fn registered(
        &mut self,
        ctx: &mut Context,
        framework_id: FrameworkId,
        reregistered: bool,
    ) {
        let _ = (ctx, framework_id, reregistered);
    }

    /// New offers. Answer each with [`Decisions::launch`] or [`Decisions::decline`] (or let
    /// [`Decisions::pack`] or [`Decisions::from_assignments`] answer them all). An offer left
    /// unanswered is held; answer it later through [`Context::launch`] or
    /// [`Context::decline`], or the driver declines it after
    /// [`DriverConfig::offer_hold_timeout`](crate::DriverConfig::offer_hold_timeout).
    async fn offers(&mut self, ctx: &mut Context, offers: Vec<Offer>) -> Decisions;

    /// An offer was withdrawn by the coordinator; it can no longer be used.
    async fn rescinded(&mut self, ctx: &mut Context, offer_id: OfferId) {
        let _ = (ctx, offer_id);
    }

    /// An agent where the framework has tasks is being drained: it makes no more
    /// offers, and `draining.task_ids` still running at `draining.deadline` are killed (their
    /// update says `killed`, reason `agent_drained`). A service may start replacements
    /// elsewhere and kill the old tasks itself ([`Context::kill`]) once they run. The default
    /// does nothing.
    async fn agent_draining(
        &mut self,
        ctx: &mut Context,
        draining: &protocol::maintenance::AgentDraining,
    ) {
        let _ = (ctx, draining);
    }

    /// Some of the framework's tasks are taken back for a starved role (preemption toward fair
    /// share): `preemption.task_ids` still running at `preemption.deadline` are
    /// killed (their update says `killed`, reason `preempted`, and reaches
    /// [`Scheduler::status_update`] as usual). A scheduler may checkpoint or stop them itself
    /// first. The default does nothing.
    async fn preempted(&mut self, ctx: &mut Context, preemption: &protocol::preempt::Preemption) {
        let _ = (ctx, preemption);
    }

    /// A member of a gang launched together ended (failed, lost, killed, or its agent could
    /// not start it) while others ran: the coordinator killed the others (their updates say
    /// `killed` and reach [`Scheduler::status_update`] as usual). The default does nothing.
    async fn gang_failed(&mut self, ctx: &mut Context, failed: &protocol::gang::GangFailed) {
        let _ = (ctx, failed);
    }

    /// A task changed state. Updates arrive at least once (the same state may repeat after a
    /// reconnect); the driver acknowledges the update after this returns. A task with a health
    /// check also gets a `running` update when its health changes: `status.healthy` is
    /// `Some(true)` or `Some(false)` (see [`crate::TaskBuilder::health_check`]).
    async fn status_update(&mut self, ctx: &mut Context, status: &TaskStatus);

    /// Tasks of an accept that the coordinator did not launch (the offer was rescinded or had
    /// expired, or the tasks did not fit), or of every accept of a call that failed as a whole
    /// (then they may span several agents). They never ran. The default logs why and hands each
    /// back to [`Scheduler::requeue`], to launch from a later offer; override it to do otherwise
    /// (count failures, give up after some).
    async fn launch_failed(&mut self, ctx: &mut Context, tasks: Vec<TaskSpec>, reason: &SdkError) {
        let _ = ctx;
        tracing::warn!(error = %reason, count = tasks.len(), "launch failed; tasks queued again");
        for task in tasks {
            self.requeue(task);
        }
    }

    /// Takes back a task that was never launched, so a later offer launches it (and
    /// [`Scheduler::pending_tasks`] counts it again). The default
    /// [`Scheduler::launch_failed`] calls it for each task the coordinator did not launch.
    fn requeue(&mut self, task: TaskSpec);

    /// The event stream broke. The driver reconnects by itself; tasks keep running on the
    /// agents for the failover timeout. Offers held so far are gone.
    async fn disconnected(&mut self, ctx: &mut Context) {
        let _ = ctx;
    }

    /// A call to the coordinator failed (a 4xx carries its code and message), or the driver is
    /// about to stop because of `error`.
    async fn error(&mut self, ctx: &mut Context, error: &SdkError) {
        let _ = (ctx, error);
    }

    /// How many tasks the framework still wants to launch. At zero the driver suppresses offers;
    /// when it becomes non-zero again (or grows) the driver revives them, at most once per
    /// [`DriverConfig::revive_interval`](crate::DriverConfig::revive_interval). The driver also
    /// sends it with every answer and revive, and the coordinator stops offering once the
    /// outstanding offers hold that many tasks of [`Scheduler::demand_hint`] (see
    /// [`DriverConfig::size_offers_to_demand`](crate::DriverConfig::size_offers_to_demand)), so
    /// count only what a launch could start now.
    fn pending_tasks(&self) -> usize;

    /// The resources of a typical next task, sent with registration and revives so the
    /// coordinator does not offer agents that cannot hold one. `None` (the default) sends none.
    fn demand_hint(&self) -> Option<Resources> {
        None
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use protocol::{AgentId, CommandSpec, TaskId};

    use super::*;

    /// A scheduler that overrides nothing it need not.
    struct Minimal {
        queue: Vec<TaskId>,
    }

    #[async_trait]
    impl Scheduler for Minimal {
        async fn offers(&mut self, _ctx: &mut Context, _offers: Vec<Offer>) -> Decisions {
            Decisions::new()
        }

        async fn status_update(&mut self, _ctx: &mut Context, _status: &TaskStatus) {}

        fn requeue(&mut self, task: TaskSpec) {
            self.queue.push(task.task_id);
        }

        fn pending_tasks(&self) -> usize {
            self.queue.len()
        }
    }

    fn spec(id: &str) -> TaskSpec {
        TaskSpec {
            task_id: TaskId::new(id).unwrap(),
            name: String::new(),
            agent_id: AgentId::new(),
            resources: "cpus=1".parse().unwrap(),
            command: CommandSpec::Shell("true".into()),
            env: Default::default(),
            duration_s: None,
            isolation: None,
            health_check: None,
            priority: None,
        }
    }

    #[tokio::test]
    async fn failed_launches_are_requeued_by_default() {
        let mut s = Minimal { queue: Vec::new() };
        let mut ctx = Context::new(None);
        let gone = SdkError::Protocol("offer gone".into());
        s.launch_failed(&mut ctx, vec![spec("a"), spec("b")], &gone)
            .await;
        assert_eq!(
            s.queue,
            [TaskId::new("a").unwrap(), TaskId::new("b").unwrap()]
        );
        assert_eq!(s.pending_tasks(), 2);
        assert!(ctx.commands.is_empty(), "and nothing else is asked");
    }
}
