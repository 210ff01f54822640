//! [`Outbox`]: the queue of events between the books and one framework's stream, which coalesces
//! what it holds instead of growing with what is sent.
//!
//! A framework that reads its stream as fast as it can must never be cut off for being sent a
//! lot; only a reader that has stopped is. So the queue does not simply count events:
//!
//! - **Offers coalesce.** New offers join the `offers` event already waiting in the queue, if
//!   there is one: a framework behind on its stream gets one event with every offer made
//!   meanwhile, as Mesos sends one `OFFERS` event with many offers.
//! - **A rescind cancels an unread offer.** An offer rescinded before the framework read it is
//!   taken out of its waiting event and the rescind is not sent: the framework never sees
//!   either.
//! - **Updates are deferred, not lost.** An update whose id is already waiting is not queued
//!   twice (the books re-send unacknowledged updates on a timer). When the queue is full,
//!   new updates are left out and their ids noted; the books keep every unacknowledged update.
//!   Once the reader has taken the queue down to half its limit, the outbox asks for the
//!   noted updates again ([`Outbox::with_refill`]), so a slow reader gets them at the pace it
//!   reads rather than at the next re-send, which stays the safety net.
//! - **Only a stopped reader is cut off.** A push [`Push::Stalled`] when the queue is full and the
//!   reader has taken nothing for the stall time (two framework heartbeats), or when events
//!   that cannot be deferred (rescinds of delivered offers, drains, preemptions) pile up to
//!   four times the limit. The runtime then ends the stream.
//!
//! The queue itself is synchronous and takes the time as an argument, so it is tested without
//! a runtime; [`OutboxReader`] is the async end the SSE response reads from.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use protocol::{FrameworkEvent, Offer, OfferId, UpdateId};
use tokio::sync::Notify;

/// What became of one pushed event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Push {
    /// Queued, or merged into a waiting event.
    Queued,
    /// Not queued, and nothing is lost: a duplicate of a waiting update, an update deferred to
    /// the books' re-send, a rescind that cancelled an unread offer, or a stream already closed.
    Dropped,
    /// The reader has stopped (or fallen hopelessly behind): the stream should end.
    Stalled,
}

/// The queue of one stream. See the module documentation for its rules.
#[derive(Debug)]
pub struct Queue {
    events: VecDeque<FrameworkEvent>,
    /// The update ids waiting in `events`.
    updates: HashSet<UpdateId>,
    /// The unrescinded offers of the waiting `offers` event. There is at most one such event
    /// (new offers join it until it is read), and an offer rescinded while it waits is only
    /// taken out of this set: the event is filtered when read.
    offers: HashSet<OfferId>,
    /// Sequence number of `events[0]`; an event's number is its position plus this.
    front_seq: u64,
    /// The number of the waiting `offers` event, if one is waiting.
    open_offers: Option<u64>,
    /// The most events kept before updates are deferred.
    limit: usize,
    /// How long a reader may take nothing from a full queue before it counts as stopped.
    stall_after: Duration,
    /// Updates left out while the queue was full, oldest first, to ask for again once the
    /// reader has made room (at most four limits of them; the re-sends cover the rest).
    deferred: Vec<UpdateId>,
    /// When the reader last took an event (or the stream opened).
    last_read: Instant,
    closed: bool,
}

impl Queue {
    /// An empty queue of at most `limit` events (updates beyond it are deferred) whose reader
    /// counts as stopped after `stall_after` without reading from a full queue.
    pub fn new(limit: usize, stall_after: Duration, now: Instant) -> Self {
        Self {
            events: VecDeque::new(),
            updates: HashSet::new(),
            offers: HashSet::new(),
            front_seq: 0,
            open_offers: None,
            limit: limit.max(1),
            stall_after,
            deferred: Vec::new(),
            last_read: now,
            closed: false,
        }
    }

    /// Events waiting.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether no event is waiting.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Queues `event` by the module's rules.
    pub fn push(&mut self, event: FrameworkEvent, now: Instant) -> Push {
        if self.closed {
            return Push::Dropped;
        }
        let full = self.events.len() >= self.limit;
        if full && now.saturating_duration_since(self.last_read) >= self.stall_after {
            return Push::Stalled;
        }
        match event {
            FrameworkEvent::Offers { offers } => {
                self.push_offers(offers);
                Push::Queued
            }
            FrameworkEvent::Rescind { offer_id } => {
                if !self.offers.remove(&offer_id) {
                    return self.push_other(FrameworkEvent::Rescind { offer_id });
                }
                if self.offers.is_empty() {
                    self.drop_open_offers();
                }
                Push::Dropped
            }
            FrameworkEvent::Update { status } => {
                if self.updates.contains(&status.update_id) {
                    return Push::Dropped;
                }
                if full {
                    if self.deferred.len() < self.limit.saturating_mul(4) {
                        self.deferred.push(status.update_id);
                    }
                    return Push::Dropped;
                }
                self.updates.insert(status.update_id);
                self.events.push_back(FrameworkEvent::Update { status });
                Push::Queued
            }
            other => self.push_other(other),
        }
    }

    /// Takes the next event, if any.
    pub fn pop(&mut self, now: Instant) -> Option<FrameworkEvent> {
        let mut event = self.events.pop_front()?;
        self.front_seq += 1;
        self.last_read = now;
        match &mut event {
            FrameworkEvent::Update { status } => {
                self.updates.remove(&status.update_id);
            }
            FrameworkEvent::Offers { offers } => {
                // The one waiting offers event: what was rescinded meanwhile is left out.
                self.open_offers = None;
                offers.retain(|o| self.offers.remove(&o.offer_id));
                self.offers.clear();
            }
            _ => {}
        }
        Some(event)
    }

    /// Whether updates were left out and the reader has made room for them: at most half the
    /// limit waits.
    pub fn wants_refill(&self) -> bool {
        !self.deferred.is_empty() && !self.closed && self.events.len() <= self.limit / 2
    }

    /// The updates left out while the queue was full, oldest first, when there is room for
    /// them now ([`Queue::wants_refill`]); nothing otherwise.
    pub fn take_deferred(&mut self) -> Vec<UpdateId> {
        if self.wants_refill() {
            std::mem::take(&mut self.deferred)
        } else {
            Vec::new()
        }
    }

    /// Ends the queue: later pushes are dropped; what waits can still be read.
    pub fn close(&mut self) {
        self.closed = true;
    }

    /// Ends the queue and forgets what waits: for a stream replaced by a newer one, which gets
    /// the pending updates again (and whose subscription rescinds the older stream's offers).
    pub fn discard(&mut self) {
        self.events.clear();
        self.updates.clear();
        self.deferred.clear();
        self.offers.clear();
        self.open_offers = None;
        self.closed = true;
    }

    /// Whether [`Queue::close`] or [`Queue::discard`] was called.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    fn push_offers(&mut self, offers: Vec<Offer>) {
        let seq = match self.open_offers {
            Some(seq) => seq,
            None => {
                let seq = self.front_seq + self.events.len() as u64;
                self.events
                    .push_back(FrameworkEvent::Offers { offers: Vec::new() });
                self.open_offers = Some(seq);
                seq
            }
        };
        self.offers.extend(offers.iter().map(|o| o.offer_id));
        let index = (seq - self.front_seq) as usize;
        if let Some(FrameworkEvent::Offers { offers: waiting }) = self.events.get_mut(index) {
            waiting.extend(offers);
        }
    }

    /// Takes the waiting `offers` event out of the queue: every offer in it was rescinded.
    fn drop_open_offers(&mut self) {
        if let Some(seq) = self.open_offers.take() {
            self.events.remove((seq - self.front_seq) as usize);
        }
    }

    fn push_other(&mut self, event: FrameworkEvent) -> Push {
        if self.events.len() >= self.limit.saturating_mul(4) {
            return Push::Stalled;
        }
        self.events.push_back(event);
        Push::Queued
    }
}

/// Asks for an outbox's deferred updates again ([`Outbox::with_refill`]).
pub type Refill = Box<dyn Fn(&Arc<Outbox>) + Send + Sync>;

/// A stream's queue shared between the runtime (which pushes, under the books' lock) and the
/// SSE response (which reads).
pub struct Outbox {
    queue: Mutex<Queue>,
    ready: Notify,
    refill: Option<Refill>,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox")
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}

impl Outbox {
    /// A new outbox and the reader of its events; updates it defers come again only with the
    /// books' re-sends.
    pub fn new(limit: usize, stall_after: Duration) -> (Arc<Outbox>, OutboxReader) {
        Self::build(limit, stall_after, None)
    }

    /// [`Outbox::new`], and once the reader has made room after updates were deferred, the
    /// reader calls `refill` (holding no lock), which should push those updates again
    /// ([`Outbox::take_deferred`] names them).
    pub fn with_refill(
        limit: usize,
        stall_after: Duration,
        refill: Refill,
    ) -> (Arc<Outbox>, OutboxReader) {
        Self::build(limit, stall_after, Some(refill))
    }

    fn build(
        limit: usize,
        stall_after: Duration,
        refill: Option<Refill>,
    ) -> (Arc<Outbox>, OutboxReader) {
        let outbox = Arc::new(Outbox {
            queue: Mutex::new(Queue::new(limit, stall_after, Instant::now())),
            ready: Notify::new(),
            refill,
        });
        let reader = OutboxReader {
            outbox: outbox.clone(),
        };
        (outbox, reader)
    }

    /// The updates deferred while the queue was full, when the reader has made room for them
    /// (see [`Queue::take_deferred`]).
    pub fn take_deferred(&self) -> Vec<UpdateId> {
        self.queue().take_deferred()
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        // The queue is left consistent at every step, so a panic elsewhere does not spoil it.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `event` (see [`Queue::push`]) and wakes the reader.
    pub fn push(&self, event: FrameworkEvent) -> Push {
        let pushed = self.queue().push(event, Instant::now());
        if pushed == Push::Queued {
            self.ready.notify_one();
        }
        pushed
    }

    /// Ends the stream once the reader has read what waits.
    pub fn close(&self) {
        self.queue().close();
        self.ready.notify_one();
    }

    /// Ends the stream now, dropping what waits (see [`Queue::discard`]).
    pub fn discard(&self) {
        self.queue().discard();
        self.ready.notify_one();
    }
}

/// The reading end of an [`Outbox`]. Dropping it closes the outbox, so later pushes are dropped.
#[derive(Debug)]
pub struct OutboxReader {
    outbox: Arc<Outbox>,
}

impl OutboxReader {
    /// The next event; `None` once the outbox is closed and empty. Cancel-safe.
    pub async fn recv(&mut self) -> Option<FrameworkEvent> {
        loop {
            let popped = {
                let mut queue = self.outbox.queue();
                match queue.pop(Instant::now()) {
                    Some(event) => Some((event, queue.wants_refill())),
                    None if queue.is_closed() => return None,
                    None => None,
                }
            };
            if let Some((event, refill)) = popped {
                if let (true, Some(refill)) = (refill, &self.outbox.refill) {
                    refill(&self.outbox);
                }
                return Some(event);
            }
            // `notify_one` keeps a permit when nobody waits, so a push between the check above
            // and this wait is not missed.
            self.outbox.ready.notified().await;
        }
    }
}

impl Drop for OutboxReader {
    fn drop(&mut self) {
        self.outbox.queue().close();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use protocol::{AgentId, FrameworkId, Resources, TaskId, TaskState, TaskStatus};

    const STALL: Duration = Duration::from_secs(20);

    fn id(n: u8) -> uuid::Uuid {
        uuid::Uuid::from_bytes([n; 16])
    }

    fn offer(n: u8) -> Offer {
        Offer {
            offer_id: OfferId(id(n)),
            framework_id: FrameworkId(id(0xf0)),
            agent_id: AgentId(id(0xa0)),
            hostname: format!("host-{n}"),
            resources: Resources::default(),
            agent_total: Resources::default(),
            attributes: Default::default(),
            created_at: Default::default(),
            expires_at: Default::default(),
            reservation: None,
        }
    }

    fn offers(ns: &[u8]) -> FrameworkEvent {
        FrameworkEvent::Offers {
            offers: ns.iter().map(|&n| offer(n)).collect(),
        }
    }

    fn update(task: &str, n: u8) -> FrameworkEvent {
        FrameworkEvent::Update {
            status: TaskStatus {
                task_id: TaskId::new(task).unwrap(),
                framework_id: FrameworkId(id(0xf0)),
                agent_id: AgentId(id(0xa0)),
                state: TaskState::Running,
                message: None,
                exit_code: None,
                update_id: UpdateId(id(n)),
                timestamp: Default::default(),
                resources: None,
                reason: None,
                usage: None,
                gpu_devices: None,
                healthy: None,
            },
        }
    }

    fn rescind(n: u8) -> FrameworkEvent {
        FrameworkEvent::Rescind {
            offer_id: offer(n).offer_id,
        }
    }

    fn drain(q: &mut Queue, now: Instant) -> Vec<FrameworkEvent> {
        std::iter::from_fn(|| q.pop(now)).collect()
    }

    #[test]
    fn offers_waiting_coalesce_into_one_event_behind_what_came_first() {
        let t = Instant::now();
        let mut q = Queue::new(10, STALL, t);
        assert_eq!(q.push(update("a", 1), t), Push::Queued);
        assert_eq!(q.push(offers(&[1, 2]), t), Push::Queued);
        assert_eq!(q.push(update("b", 2), t), Push::Queued);
        assert_eq!(q.push(offers(&[3]), t), Push::Queued);
        assert_eq!(
            drain(&mut q, t),
            vec![update("a", 1), offers(&[1, 2, 3]), update("b", 2)]
        );
        // Once read, the next offers start a new event.
        assert_eq!(q.push(offers(&[4]), t), Push::Queued);
        assert_eq!(drain(&mut q, t), vec![offers(&[4])]);
    }

    #[test]
    fn a_rescind_cancels_an_unread_offer_and_is_not_sent() {
        let t = Instant::now();
        let mut q = Queue::new(10, STALL, t);
        q.push(offers(&[1, 2]), t);
        q.push(update("a", 1), t);
        assert_eq!(q.push(rescind(1), t), Push::Dropped);
        // Both offers of an event rescinded: the event goes, and later offers still coalesce.
        assert_eq!(q.push(rescind(2), t), Push::Dropped);
        q.push(offers(&[3]), t);
        assert_eq!(q.push(rescind(9), t), Push::Queued);
        assert_eq!(
            drain(&mut q, t),
            vec![update("a", 1), offers(&[3]), rescind(9)]
        );
        // A rescind of an offer already read is sent.
        assert_eq!(q.push(rescind(3), t), Push::Queued);
        assert_eq!(drain(&mut q, t), vec![rescind(3)]);
        // Of several waiting offers, only the rescinded one is left out.
        q.push(offers(&[4, 5]), t);
        q.push(offers(&[6]), t);
        assert_eq!(q.push(rescind(5), t), Push::Dropped);
        assert_eq!(drain(&mut q, t), vec![offers(&[4, 6])]);
    }

    #[test]
    fn duplicate_and_overflowing_updates_are_deferred_to_the_resend() {
        let t = Instant::now();
        let mut q = Queue::new(2, STALL, t);
        assert_eq!(q.push(update("a", 1), t), Push::Queued);
        assert_eq!(q.push(update("a", 1), t), Push::Dropped);
        assert_eq!(q.push(update("b", 2), t), Push::Queued);
        // Full, but the reader read recently: deferred, not cut off.
        assert_eq!(q.push(update("c", 3), t), Push::Dropped);
        // Offers still get through: they join nothing here, so they are queued past the limit.
        assert_eq!(q.push(offers(&[1]), t), Push::Queued);
        assert_eq!(q.len(), 3);
        assert_eq!(q.pop(t), Some(update("a", 1)));
        // Read: the id may be queued again (a re-send).
        assert_eq!(q.push(update("a", 1), t), Push::Dropped, "still full");
        q.pop(t);
        q.pop(t);
        assert_eq!(q.push(update("a", 1), t), Push::Queued);
    }

    #[test]
    fn deferred_updates_are_named_once_the_reader_made_room() {
        let t = Instant::now();
        let mut q = Queue::new(4, STALL, t);
        for n in 1..=4 {
            assert_eq!(q.push(update(&format!("t{n}"), n), t), Push::Queued);
        }
        // Full: left out and noted, once each, oldest first; a duplicate of a waiting one is not.
        assert_eq!(q.push(update("t5", 5), t), Push::Dropped);
        assert_eq!(q.push(update("t6", 6), t), Push::Dropped);
        assert_eq!(q.push(update("t1", 1), t), Push::Dropped);
        assert!(!q.wants_refill(), "four wait: no room yet");
        assert_eq!(q.take_deferred(), vec![], "nothing handed out without room");
        q.pop(t);
        assert!(!q.wants_refill(), "three wait, more than half the limit");
        q.pop(t);
        assert!(q.wants_refill());
        assert_eq!(q.take_deferred(), vec![UpdateId(id(5)), UpdateId(id(6))]);
        assert!(!q.wants_refill(), "taken");
        assert_eq!(q.take_deferred(), vec![]);
        // A discarded queue forgets them.
        q.push(update("t7", 7), t);
        q.push(update("t8", 8), t);
        q.push(update("t9", 9), t);
        q.discard();
        assert!(!q.wants_refill());
        assert_eq!(q.take_deferred(), vec![]);
    }

    #[tokio::test]
    async fn the_reader_asks_for_deferred_updates_when_it_made_room() {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let refill: Refill = {
            let asked = asked.clone();
            Box::new(move |outbox: &Arc<Outbox>| {
                // What a runtime does: take the ids and push those updates again.
                let ids = outbox.take_deferred();
                asked.lock().unwrap().extend(ids.iter().copied());
                for n in ids {
                    let n = n.0.as_bytes()[0];
                    outbox.push(update(&format!("t{n}"), n));
                }
            })
        };
        let (outbox, mut reader) = Outbox::with_refill(2, STALL, refill);
        outbox.push(update("t1", 1));
        outbox.push(update("t2", 2));
        assert_eq!(outbox.push(update("t3", 3)), Push::Dropped);
        assert_eq!(reader.recv().await, Some(update("t1", 1)));
        assert_eq!(*asked.lock().unwrap(), vec![UpdateId(id(3))]);
        assert_eq!(reader.recv().await, Some(update("t2", 2)));
        assert_eq!(
            reader.recv().await,
            Some(update("t3", 3)),
            "the deferred update came without a re-send"
        );
        assert_eq!(asked.lock().unwrap().len(), 1, "asked once");
    }

    #[test]
    fn only_a_reader_that_stopped_is_cut_off() {
        let t = Instant::now();
        let mut q = Queue::new(2, STALL, t);
        q.push(update("a", 1), t);
        q.push(update("b", 2), t);
        let later = t + STALL;
        assert_eq!(
            q.push(update("c", 3), later - Duration::from_millis(1)),
            Push::Dropped
        );
        assert_eq!(q.push(offers(&[1]), later), Push::Stalled);
        // A reader that keeps reading, however slowly, is not.
        q.pop(later);
        q.push(update("c", 3), later);
        assert_eq!(q.push(update("d", 4), later + STALL / 2), Push::Dropped);
        // Events that cannot be deferred, piled up to four times the limit: cut off.
        let mut q = Queue::new(2, STALL, t);
        for n in 0..8 {
            assert_eq!(q.push(rescind(n), t), Push::Queued);
        }
        assert_eq!(q.push(rescind(8), t), Push::Stalled);
    }

    #[test]
    fn a_closed_queue_drops_pushes_and_is_still_read() {
        let t = Instant::now();
        let mut q = Queue::new(4, STALL, t);
        q.push(update("a", 1), t);
        q.close();
        assert_eq!(q.push(update("b", 2), t), Push::Dropped);
        assert_eq!(drain(&mut q, t), vec![update("a", 1)]);
    }

    #[test]
    fn a_discarded_queue_ends_at_once() {
        let t = Instant::now();
        let mut q = Queue::new(4, STALL, t);
        q.push(update("a", 1), t);
        q.push(offers(&[1]), t);
        q.discard();
        assert!(q.is_closed());
        assert_eq!(q.push(offers(&[2]), t), Push::Dropped);
        assert_eq!(drain(&mut q, t), vec![]);
    }

    #[tokio::test]
    async fn the_reader_wakes_on_a_push_and_ends_after_close() {
        let (outbox, mut reader) = Outbox::new(4, STALL);
        let pushing = {
            let outbox = outbox.clone();
            tokio::spawn(async move {
                outbox.push(update("a", 1));
                outbox.close();
            })
        };
        assert_eq!(reader.recv().await, Some(update("a", 1)));
        assert_eq!(reader.recv().await, None);
        pushing.await.unwrap();
        drop(reader);
        assert_eq!(outbox.push(update("b", 2)), Push::Dropped);
    }
}
