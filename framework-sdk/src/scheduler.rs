//! The [`Scheduler`] trait a framework implements, the [`Context`] it acts through, and the
//! [`Decisions`] it answers offers with.

use async_trait::async_trait;
use protocol::{FrameworkId, Offer, OfferId, Resources, TaskId, TaskSpec, TaskStatus};

use crate::SdkError;

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

    /// New offers. Answer each with [`Decisions::launch`] or [`Decisions::decline`]. An offer
    /// left unanswered is held; answer it later through [`Context::launch`] or
    /// [`Context::decline`], or the driver declines it after
    /// [`DriverConfig::offer_hold_timeout`](crate::DriverConfig::offer_hold_timeout).
    async fn offers(&mut self, ctx: &mut Context, offers: Vec<Offer>) -> Decisions;

    /// An offer was withdrawn by the coordinator; it can no longer be used.
    async fn rescinded(&mut self, ctx: &mut Context, offer_id: OfferId) {
        let _ = (ctx, offer_id);
    }

    /// A task changed state. Updates arrive at least once (the same state may repeat after a
    /// reconnect); the driver acknowledges the update after this returns.
    async fn status_update(&mut self, ctx: &mut Context, status: &TaskStatus);

    /// Tasks of an accept that the coordinator did not launch (the offer was rescinded or had
    /// expired, or the tasks did not fit). They never ran; launch them again from a later offer.
    /// The default does nothing, which loses them.
    async fn launch_failed(&mut self, ctx: &mut Context, tasks: Vec<TaskSpec>, reason: &SdkError) {
        let _ = (ctx, tasks, reason);
    }

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
    /// [`DriverConfig::revive_interval`](crate::DriverConfig::revive_interval).
    fn pending_tasks(&self) -> usize;

    /// The resources of a typical next task, sent with registration and revives so the
    /// coordinator does not offer agents that cannot hold one. `None` (the default) sends none.
    fn demand_hint(&self) -> Option<Resources> {
        None
    }
}

/// One answer to one or more offers of a single agent.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Launch `tasks` on the agent of `offer_ids`; the unused rest returns to the pool.
    Launch {
        /// Offers to use, all of one agent.
        offer_ids: Vec<OfferId>,
        /// Tasks to launch; their resources must fit in the offers together.
        tasks: Vec<TaskSpec>,
    },
    /// Give the offer back; `refuse_seconds` (or the driver's default) filters it.
    Decline {
        /// The offer.
        offer_id: OfferId,
        /// How long the coordinator should not offer these resources again.
        refuse_seconds: Option<f64>,
    },
}

/// A framework's answers to offers, built with [`Decisions::launch`] and
/// [`Decisions::decline`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decisions {
    answers: Vec<Answer>,
}

impl Decisions {
    /// No answers (every offer is held, to be answered later or declined by the driver).
    pub fn new() -> Self {
        Self::default()
    }

    /// Launch `tasks` on one offer.
    pub fn launch(mut self, offer_id: OfferId, tasks: Vec<TaskSpec>) -> Self {
        self.answers.push(Answer::Launch {
            offer_ids: vec![offer_id],
            tasks,
        });
        self
    }

    /// Decline one offer with the driver's default filter.
    pub fn decline(mut self, offer_id: OfferId) -> Self {
        self.answers.push(Answer::Decline {
            offer_id,
            refuse_seconds: None,
        });
        self
    }

    /// Decline one offer, filtering it for `refuse_seconds`.
    pub fn decline_for(mut self, offer_id: OfferId, refuse_seconds: f64) -> Self {
        self.answers.push(Answer::Decline {
            offer_id,
            refuse_seconds: Some(refuse_seconds),
        });
        self
    }

    /// Adds any answer.
    pub fn push(&mut self, answer: Answer) {
        self.answers.push(answer);
    }

    /// Launches the given tasks per offer and declines every offer that gets none.
    pub fn launch_or_decline(
        offers: &[Offer],
        mut tasks_for: impl FnMut(&Offer) -> Vec<TaskSpec>,
    ) -> Self {
        let mut out = Self::new();
        for offer in offers {
            let tasks = tasks_for(offer);
            out = if tasks.is_empty() {
                out.decline(offer.offer_id)
            } else {
                out.launch(offer.offer_id, tasks)
            };
        }
        out
    }

    /// The answers, in the order given.
    pub fn answers(&self) -> &[Answer] {
        &self.answers
    }

    /// Consumes the decisions into their answers.
    pub fn into_answers(self) -> Vec<Answer> {
        self.answers
    }
}

/// A request the scheduler makes through the [`Context`]; the driver carries them out, in order,
/// after the current callback returns.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Command {
    Answer(Answer),
    Kill(TaskId),
    Reconcile(Vec<TaskId>),
    Stop,
}

/// What a scheduler may do besides answering offers. Requests are carried out, in order, right
/// after the callback that made them returns.
#[derive(Debug, Default)]
pub struct Context {
    framework_id: Option<FrameworkId>,
    held: Vec<OfferId>,
    pub(crate) commands: Vec<Command>,
}

impl Context {
    /// A context for a framework; the driver makes one, tests of schedulers may too.
    pub fn new(framework_id: Option<FrameworkId>) -> Self {
        Self {
            framework_id,
            held: Vec::new(),
            commands: Vec::new(),
        }
    }

    /// The framework's id, once registered.
    pub fn framework_id(&self) -> Option<FrameworkId> {
        self.framework_id
    }

    pub(crate) fn set_framework_id(&mut self, id: FrameworkId) {
        self.framework_id = Some(id);
    }

    pub(crate) fn set_held(&mut self, held: Vec<OfferId>) {
        self.held = held;
    }

    /// Offers received earlier and not answered yet (before the current callback's own).
    pub fn held_offers(&self) -> &[OfferId] {
        &self.held
    }

    /// Launches tasks on offers held from an earlier [`Scheduler::offers`] call.
    pub fn launch(&mut self, offer_ids: Vec<OfferId>, tasks: Vec<TaskSpec>) {
        self.commands
            .push(Command::Answer(Answer::Launch { offer_ids, tasks }));
    }

    /// Declines a held offer, with the driver's default filter when `refuse_seconds` is `None`.
    pub fn decline(&mut self, offer_id: OfferId, refuse_seconds: Option<f64>) {
        self.commands.push(Command::Answer(Answer::Decline {
            offer_id,
            refuse_seconds,
        }));
    }

    /// Kills a task; its end arrives as a `killed` update.
    pub fn kill(&mut self, task_id: TaskId) {
        self.commands.push(Command::Kill(task_id));
    }

    /// Asks for the latest state of these tasks (all tasks when empty), delivered as updates.
    pub fn reconcile(&mut self, task_ids: Vec<TaskId>) {
        self.commands.push(Command::Reconcile(task_ids));
    }

    /// Stops the driver after this callback: held offers are declined and, when
    /// [`DriverConfig::unregister_on_stop`](crate::DriverConfig::unregister_on_stop) is set,
    /// the framework is unregistered (its tasks are killed).
    pub fn stop(&mut self) {
        self.commands.push(Command::Stop);
    }

    /// True once [`Context::stop`] was called in this callback.
    pub fn is_stopping(&self) -> bool {
        self.commands.iter().any(|c| matches!(c, Command::Stop))
    }
}
