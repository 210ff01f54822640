//! [`Context`]: what a scheduler may do besides answering offers (kill, reconcile, stop, answer
//! held offers); the driver carries its requests out after each callback.

use std::time::Duration;

use protocol::{FrameworkId, OfferId, TaskId, TaskSpec};

use crate::Answer;

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

    /// Launches tasks on offers held from an earlier [`Scheduler::offers`](crate::Scheduler::offers) call.
    pub fn launch(&mut self, offer_ids: Vec<OfferId>, tasks: Vec<TaskSpec>) {
        self.commands
            .push(Command::Answer(Answer::Launch { offer_ids, tasks }));
    }

    /// Declines a held offer, filtered for `refuse`: `None` uses the driver's
    /// [`decline_refuse`](crate::DriverConfig::decline_refuse), as
    /// [`Decisions::decline`](crate::Decisions::decline) does.
    pub fn decline(&mut self, offer_id: OfferId, refuse: Option<Duration>) {
        self.commands
            .push(Command::Answer(Answer::Decline { offer_id, refuse }));
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
