//! The durable lane: calls that answer a client about a stored fact write their change to the
//! registry before the books change, so a failed write changes nothing (see
//! [`Coordinator::run_write_first`]).
//!
//! Two kinds of call go through it:
//! - **exclusive** ([`Coordinator::run_write_first`]): one at a time, from the check to the
//!   apply, after every pipelined call before it was applied. Reservations, role updates and
//!   removals, whose checks would not all hold again at apply.
//! - **pipelined** ([`Coordinator::run_write_pipelined`]): many at once. Each is checked and
//!   its change queued to the writer under the books' lock, so the writer's group commit
//!   makes one transaction of all those that arrive while the last one is written. They are
//!   applied strictly in the order they were written, by whichever write finished last in
//!   that order ([`Queue`]): no call waits for another's task to be scheduled. Because a call
//!   may be checked before the one ahead of it is applied, its apply checks everything again
//!   and, if it no longer passes, puts the registry back to what the books say. Framework
//!   registration is pipelined: 1,000 frameworks registering at once then cost a few registry
//!   commits, not 1,000 in a row.
//!
//! Writes and applies are in the same order for both kinds, so the registry and the books
//! agree once the queue is empty.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use tokio::sync::{oneshot, Notify, RwLock};

use super::{Coordinator, Dispatched, Inner, RegistryWriteFailed};
use crate::state::{Effects, Now, State};
use crate::store::Change;

/// What orders the lane's calls (in `Shared`).
#[derive(Default)]
pub(super) struct Lane {
    /// Exclusive calls hold it for writing from their wait for the queue to empty to their
    /// apply; pipelined calls hold it for reading while they check and queue their change.
    gate: Arc<RwLock<()>>,
    /// Woken when the queue of pipelined calls becomes empty.
    idle: Notify,
}

/// A pipelined call's apply, type-erased: runs it if its write succeeded (`true`), answers
/// its caller either way.
type Apply = Box<dyn FnOnce(&mut State, &Now, &mut Effects, bool) + Send>;

/// Pipelined calls that were written (or are being written) and wait to be applied, in the
/// order their changes went to the writer. Kept under the books' lock.
#[derive(Default)]
pub(super) struct Queue {
    /// The number of the first entry of `pending`.
    head: u64,
    /// Each call's apply and, once its write answered, whether it succeeded.
    pending: VecDeque<(Option<bool>, Apply)>,
}

impl Queue {
    /// Queues a call; `written` is `Some(true)` when it had nothing to write. Returns its
    /// number, for [`Queue::settle`].
    fn push(&mut self, written: Option<bool>, apply: Apply) -> u64 {
        self.pending.push_back((written, apply));
        self.head + self.pending.len() as u64 - 1
    }

    /// Records the writer's answer for call `seq`.
    fn settle(&mut self, seq: u64, ok: bool) {
        let Some(i) = seq.checked_sub(self.head) else {
            return;
        };
        if let Some(entry) = usize::try_from(i)
            .ok()
            .and_then(|i| self.pending.get_mut(i))
        {
            entry.0 = Some(ok);
        }
    }

    /// Takes the calls at the front whose writes have answered, in order.
    fn take_ready(&mut self) -> Vec<(bool, Apply)> {
        let mut ready = Vec::new();
        while let Some((Some(ok), _)) = self.pending.front() {
            let ok = *ok;
            if let Some((_, apply)) = self.pending.pop_front() {
                ready.push((ok, apply));
                self.head += 1;
            }
        }
        ready
    }

    fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

/// A pipelined call's answer: its result, or the panic of its apply (re-raised in the caller).
type Answer<T, E> = std::thread::Result<Result<T, E>>;

impl Coordinator {
    /// A call that changes stored facts (a removal, a role weight, a reservation), so that a
    /// failed registry write changes nothing: `plan` checks the call against the books and
    /// returns what to write without changing them; once that is durable, `apply` changes the
    /// books. If the write fails the answer is [`RegistryWriteFailed`] and `apply` never runs.
    ///
    /// Why write first rather than apply and undo on failure: an exact inverse is not always
    /// there (a removal kills tasks; a registration may create roles, which are never
    /// removed), whereas the books untouched until the write succeeds need none. The price is
    /// that the books may move between `plan` and `apply` (failover removals, placeholders,
    /// allocation: calls that do not come through the lane), so `apply` checks again and, if
    /// the call no longer passes, answers as it now would and queues the change that puts
    /// the registry back to what the books say. These calls run one at a time, after every
    /// pipelined call before them was applied (see the module docs), so none overtakes
    /// another between its write and its apply. The write and the apply run in a task of
    /// their own, so a client that hangs up cannot leave a durable change unapplied.
    pub async fn run_write_first<P, T, E>(
        &self,
        plan: impl FnOnce(&mut State, &Now) -> Result<(P, Vec<Change>), E>,
        apply: impl FnOnce(&mut State, P, &Now, &mut Effects) -> Result<T, E> + Send + 'static,
    ) -> Result<T, E>
    where
        P: Send + 'static,
        T: Send + 'static,
        E: From<RegistryWriteFailed> + Send + 'static,
    {
        let lane = &self.shared.lane;
        let gate = Arc::clone(&lane.gate).write_owned().await;
        // Every pipelined call queued before this one is applied first.
        loop {
            let idle = lane.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.lock().durable.is_empty() {
                break;
            }
            idle.await;
        }
        let now = self.now();
        let (planned, written) = {
            let mut inner = self.lock();
            let (planned, changes) = plan(&mut inner.state, &now)?;
            (planned, submit(&inner, changes))
        };
        let this = self.clone();
        let job = self.shared.tracker.spawn(async move {
            let _gate = gate;
            if let Some(rx) = written {
                if !matches!(rx.await, Ok(true)) {
                    return Err(RegistryWriteFailed.into());
                }
            }
            this.run(|state, now, fx| apply(state, planned, now, fx))
        });
        match job.await {
            Ok(out) => out,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // The runtime is shutting down.
            Err(_) => Err(RegistryWriteFailed.into()),
        }
    }

    /// [`Coordinator::run_write_first`] for a call whose `apply` checks everything `plan`
    /// checked again (so it may run after other calls were checked and written, but before
    /// they were applied): many such calls are written together and applied in the order
    /// written (see the module docs). `apply` runs only if the write succeeded; when its
    /// checks now fail it must leave the books unchanged and queue the change that puts the
    /// registry back to what they say.
    pub async fn run_write_pipelined<P, T, E>(
        &self,
        plan: impl FnOnce(&mut State, &Now) -> Result<(P, Vec<Change>), E>,
        apply: impl FnOnce(&mut State, P, &Now, &mut Effects) -> Result<T, E> + Send + 'static,
    ) -> Result<T, E>
    where
        P: Send + 'static,
        T: Send + 'static,
        E: From<RegistryWriteFailed> + Send + 'static,
    {
        let gate = self.shared.lane.gate.read().await;
        let now = self.now();
        let (answer_tx, answer) = oneshot::channel::<Answer<T, E>>();
        let applied = {
            let mut inner = self.lock();
            let (planned, changes) = plan(&mut inner.state, &now)?;
            let apply: Apply = Box::new(move |state, now, fx, ok| {
                let out = if ok {
                    std::panic::catch_unwind(AssertUnwindSafe(|| apply(state, planned, now, fx)))
                } else {
                    Ok(Err(RegistryWriteFailed.into()))
                };
                // A caller that hung up still had its change applied.
                let _ = answer_tx.send(out);
            });
            match submit_or_barrier(&inner, changes) {
                Some(written) => {
                    let seq = inner.durable.push(None, apply);
                    let this = self.clone();
                    self.shared.tracker.spawn(async move {
                        let ok = matches!(written.await, Ok(true));
                        this.settle(seq, ok);
                    });
                    None
                }
                None => {
                    inner.durable.push(Some(true), apply);
                    Some(self.apply_ready(&mut inner, &now))
                }
            }
        };
        drop(gate);
        if let Some(d) = applied {
            self.perform(d);
        }
        match answer.await {
            Ok(Ok(out)) => out,
            Ok(Err(panic)) => std::panic::resume_unwind(panic),
            // Never applied nor refused: the runtime shut down before its write answered.
            Err(_) => Err(RegistryWriteFailed.into()),
        }
    }

    /// Records the writer's answer for pipelined call `seq` and applies what is ready.
    fn settle(&self, seq: u64, ok: bool) {
        let now = self.now();
        let d = {
            let mut inner = self.lock();
            inner.durable.settle(seq, ok);
            self.apply_ready(&mut inner, &now)
        };
        self.perform(d);
    }

    /// Applies (or refuses, where the write failed) the pipelined calls at the front of the
    /// queue whose writes have answered, in order, as one state call.
    fn apply_ready(&self, inner: &mut Inner, now: &Now) -> Dispatched {
        let mut fx = Vec::new();
        for (ok, apply) in inner.durable.take_ready() {
            apply(&mut inner.state, now, &mut fx, ok);
        }
        if inner.durable.is_empty() {
            self.shared.lane.idle.notify_waiters();
        }
        self.dispatch(inner, fx)
    }
}

/// Queues `changes` to the registry's writer; `None` when there is nothing to write (no
/// changes, or no registry).
fn submit(inner: &Inner, changes: Vec<Change>) -> Option<oneshot::Receiver<bool>> {
    match (&inner.store, changes.is_empty()) {
        (Some(writer), false) => Some(writer.submit(changes)),
        _ => None,
    }
}

/// As [`submit`], but a call with nothing to write still goes through the writer, as a
/// barrier: it is answered once every change queued before it is durable (at no cost of its
/// own: an empty write touches no store).
fn submit_or_barrier(inner: &Inner, changes: Vec<Change>) -> Option<oneshot::Receiver<bool>> {
    inner.store.as_ref().map(|writer| writer.submit(changes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nothing() -> Apply {
        Box::new(|_, _, _, _| {})
    }

    #[test]
    fn calls_come_out_in_the_order_written_once_their_writes_answered() {
        let mut q = Queue::default();
        let a = q.push(None, nothing());
        let b = q.push(None, nothing());
        let c = q.push(Some(true), nothing());
        assert_eq!((a, b, c), (0, 1, 2));
        // The second and third are ready, but the first is not: nothing comes out.
        q.settle(b, false);
        assert!(q.take_ready().is_empty());
        q.settle(a, true);
        let ready: Vec<bool> = q.take_ready().into_iter().map(|(ok, _)| ok).collect();
        assert_eq!(ready, [true, false, true]);
        assert!(q.is_empty());
        // Numbers go on from where they were; a stale or unknown number changes nothing.
        let d = q.push(None, nothing());
        assert_eq!(d, 3);
        q.settle(a, true);
        q.settle(99, true);
        assert!(q.take_ready().is_empty());
        q.settle(d, true);
        assert_eq!(q.take_ready().len(), 1);
    }
}
