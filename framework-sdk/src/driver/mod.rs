//! The [`Driver`]: runs a [`Scheduler`] against the coordinator over HTTP and SSE.
//!
//! One task does everything, in order: it registers, reads the event stream, calls the
//! scheduler, carries out what the scheduler asked for, acknowledges updates, declines offers
//! held too long, suppresses and revives, and reconnects with backoff when the stream breaks.
//! After re-registering it reports launches the coordinator forgot (accepted just before a
//! coordinator crash or failover, never sent to the agent) as `lost` (`forgotten`).
//!
//! Its calls fit the coordinator's limits (`fit`: batches split to the body size and counts
//! the registration answer gives, and split again on a `413`), and a framework with tasks to
//! launch is never left without offers: after failed launches the coordinator is told the true
//! count again (`demand`), an accept interrupted after it was sent is reconciled
//! (`actions`), and a long wait for offers is logged and answered with a revive
//! ([`DriverConfig::offer_wait_warning`]).

mod actions;
mod config;
mod demand;
mod fit;
mod forgotten;
mod offer_book;

use std::collections::HashSet;
use std::future::Future;
use std::time::{Duration, Instant};

use futures::StreamExt;
use protocol::messages::{RegisterFramework, RequestLimits};
use protocol::{FrameworkEvent, FrameworkId, Offer, OfferId, TaskId, UpdateId};
use tokio_util::sync::CancellationToken;

pub use config::{DriverConfig, DriverConfigError, DEFAULT_FAILOVER_TIMEOUT, MAX_ACKS_PER_REQUEST};
use demand::DemandState;
use forgotten::Forgotten;
use offer_book::OfferBook;

use crate::client::{CoordinatorClient, Registration};
use crate::context::{Command, Context};
use crate::sse::SseParser;
use crate::Scheduler;
use crate::SdkError;

/// Used until the coordinator tells the stream's heartbeat interval.
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(15);

/// A scheduler that keeps asking for launches on offers that are gone would loop forever; the
/// driver carries out at most this many rounds of follow-up requests per callback.
const MAX_COMMAND_ROUNDS: usize = 64;

/// Runs a [`Scheduler`]: see the crate documentation for an example.
pub struct Driver<S> {
    config: DriverConfig,
    client: CoordinatorClient,
    scheduler: S,
    stop: CancellationToken,
}

impl<S> std::fmt::Debug for Driver<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<S: Scheduler> Driver<S> {
    /// A driver for `scheduler`; nothing happens until [`Driver::run`].
    pub fn new(config: DriverConfig, scheduler: S) -> Result<Self, SdkError> {
        config
            .validate()
            .map_err(|e| SdkError::InvalidConfig(e.to_string()))?;
        let client = CoordinatorClient::connect(
            &config.coordinator,
            config.request_timeout,
            &crate::client::Connection {
                ca_file: config.ca_file.clone(),
                token: config.token.clone(),
            },
        )?;
        Ok(Self {
            config,
            client,
            scheduler,
            stop: CancellationToken::new(),
        })
    }

    /// The same driver, with `faults` deciding what happens to each of its calls to the
    /// coordinator (see [`crate::faults`]): for tests of its failure paths.
    pub fn with_faults(mut self, faults: std::sync::Arc<dyn crate::faults::FaultInjector>) -> Self {
        self.client = self.client.with_faults(faults);
        self
    }

    /// A token that stops the driver when cancelled, as [`Context::stop`] does. (To stop on a
    /// future instead, use [`Driver::run_until`].)
    pub fn stop_token(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Runs as [`Driver::run`] does, and also stops once `shutdown` completes (Ctrl-C, a
    /// channel, a test's signal): held offers are declined and, when
    /// [`DriverConfig::unregister_on_stop`] is set, the framework is unregistered, as on
    /// [`Context::stop`]. Returns the scheduler.
    pub async fn run_until(self, shutdown: impl Future) -> Result<S, SdkError> {
        let stop = self.stop.clone();
        let run = self.run();
        tokio::pin!(run);
        tokio::select! {
            result = &mut run => result,
            _ = shutdown => {
                stop.cancel();
                run.await
            }
        }
    }

    /// Runs until the scheduler calls [`Context::stop`] or the stop token is cancelled, and
    /// returns the scheduler. Fails when the coordinator rejects the registration, removes the
    /// framework, or cannot be reached within the failover timeout; the scheduler's
    /// [`Scheduler::error`] sees the error first.
    pub async fn run(self) -> Result<S, SdkError> {
        let mut runner = Runner {
            demand: DemandState::new(self.config.revive_interval),
            config: self.config,
            client: self.client,
            scheduler: self.scheduler,
            stop: self.stop,
            ctx: Context::new(None),
            framework_id: None,
            offers: OfferBook::default(),
            heartbeat: DEFAULT_HEARTBEAT,
            session_generation: 0,
            acks: Vec::new(),
            ack_due: None,
            stopping: false,
            revive_at: None,
            forgotten: Forgotten::default(),
            limits: RequestLimits::DEFAULT,
            last_offer_at: Instant::now(),
        };
        runner.framework_id = runner.config.framework_id;
        match runner.run().await {
            Ok(()) => Ok(runner.scheduler),
            Err(e) => {
                tracing::error!(error = %e, "driver stopped");
                runner.scheduler.error(&mut runner.ctx, &e).await;
                runner.ctx.commands.clear();
                Err(e)
            }
        }
    }
}

/// Why a session (one registration and one stream) ended.
enum SessionEnd {
    Stopped,
    Lost(String),
}

struct Runner<S> {
    config: DriverConfig,
    client: CoordinatorClient,
    scheduler: S,
    stop: CancellationToken,
    ctx: Context,
    framework_id: Option<FrameworkId>,
    offers: OfferBook,
    demand: DemandState,
    heartbeat: Duration,
    /// The client's leader generation when the current stream opened: when another
    /// coordinator answers a call, the stream is on a deposed leader and the driver registers
    /// again.
    session_generation: u64,
    /// Updates the scheduler has seen, to acknowledge once the current chunk of events is done.
    acks: Vec<(TaskId, UpdateId)>,
    /// When the waiting acknowledgements must be sent (`ack_delay` after the first of them).
    ack_due: Option<Instant>,
    stopping: bool,
    revive_at: Option<Instant>,
    /// Launched tasks not yet terminal, to find those a coordinator forgot (see [`forgotten`]).
    forgotten: Forgotten,
    /// What the coordinator accepts in one request, as its registration answer said.
    limits: RequestLimits,
    /// When offers last arrived, or the framework registered, or the driver last warned that
    /// none came (see [`DriverConfig::offer_wait_warning`]).
    last_offer_at: Instant,
}

/// Most task ids in one reconcile of launches not heard of since a re-registration (well
/// under the coordinator's `max_stream_queue`, 10,000 by default).
const RECONCILE_BATCH: usize = 1000;

impl<S: Scheduler> Runner<S> {
    async fn run(&mut self) -> Result<(), SdkError> {
        let mut backoff = protocol::Backoff::new(
            self.config.reconnect_backoff_min,
            self.config.reconnect_backoff_max,
        );
        // Seeded once per driver, so drivers that lost the coordinator together draw apart.
        let mut jitter = protocol::backoff::SplitMix64::new(rand::random());
        // Give up reconnecting at this instant; it moves whenever a session is lost.
        let mut give_up_at = Instant::now() + self.config.register_timeout;
        loop {
            if self.stop.is_cancelled() || self.stopping {
                self.shutdown().await;
                return Ok(());
            }
            match self.connect().await {
                Ok(stream) => {
                    backoff.reset();
                    match self.session(stream).await? {
                        SessionEnd::Stopped => {
                            self.shutdown().await;
                            return Ok(());
                        }
                        SessionEnd::Lost(why) => {
                            tracing::warn!(reason = %why, "event stream lost; reconnecting");
                            // Offers die with the stream; the coordinator rescinds or expires
                            // them. Give them back now so they do not sit idle until then.
                            self.decline_all().await;
                            self.scheduler.disconnected(&mut self.ctx).await;
                            self.after_callback().await?;
                            give_up_at = Instant::now() + self.config.failover_timeout;
                        }
                    }
                }
                Err(e) if e.is_transient() => {
                    tracing::warn!(error = %e, "cannot reach the coordinator; retrying");
                    if Instant::now() >= give_up_at {
                        return Err(match self.framework_id {
                            Some(_) => {
                                SdkError::FailoverTimeoutExceeded(self.config.failover_timeout)
                            }
                            None => e,
                        });
                    }
                }
                Err(e) => return Err(e),
            }
            let delay = backoff.fail_jittered(jitter.next_unit());
            tokio::select! {
                _ = self.stop.cancelled() => {}
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }

    /// Registers (or re-registers) and opens the event stream.
    async fn connect(&mut self) -> Result<reqwest::Response, SdkError> {
        let request = RegisterFramework {
            name: self.config.name.clone(),
            role: self.config.role.clone(),
            failover_timeout_s: Some(self.config.failover_timeout.as_secs_f64()),
            framework_id: self.framework_id,
            demand: self.scheduler.demand_hint(),
            capabilities: [
                (
                    self.config.gpu_resources,
                    protocol::capability::GPU_RESOURCES,
                ),
                (
                    self.config.partition_aware.is_some(),
                    protocol::partition::PARTITION_AWARE,
                ),
            ]
            .into_iter()
            .filter(|(declared, _)| *declared)
            .map(|(_, name)| name.to_owned())
            .collect(),
            partition_timeout_s: self.config.partition_aware.map(|d| d.as_secs_f64()),
            webui_url: self.config.webui_url.clone(),
        };
        let registration = match self.client.register(&request).await {
            Ok(r) => r,
            Err(SdkError::Rejected {
                status: 404,
                message,
                ..
            }) if self.framework_id.is_some() => {
                return Err(SdkError::FrameworkRemoved(message));
            }
            Err(e) => return Err(e),
        };
        let Registration {
            registered,
            reregistered,
        } = registration;
        let id = registered.framework_id;
        if self.framework_id.is_some_and(|old| old != id) {
            tracing::warn!(old = ?self.framework_id, new = %id, "coordinator gave a new framework id; old tasks are gone");
        }
        self.framework_id = Some(id);
        self.ctx.set_framework_id(id);
        self.limits = registered.limits.unwrap_or(RequestLimits::DEFAULT);
        self.heartbeat = heartbeat_interval(registered.heartbeat_interval_s);
        let generation = self.client.leader_generation();
        let stream = self.client.events(id).await?;
        if self.client.leader_generation() != generation {
            // Registered with one coordinator, subscribed on another: register again there.
            return Err(SdkError::Server {
                status: 503,
                message: "the leader changed while subscribing".into(),
            });
        }
        self.session_generation = generation;
        tracing::info!(framework_id = %id, reregistered, coordinator = %self.client.current_url(), "registered");
        self.demand
            .registered(reregistered, self.scheduler.pending_tasks());
        self.last_offer_at = Instant::now();
        self.scheduler
            .registered(&mut self.ctx, id, reregistered)
            .await;
        if reregistered && self.config.reconcile_on_reregister {
            self.forgotten.reregistered();
            if let Err(e) = self.client.reconcile(id, Vec::new()).await {
                tracing::warn!(error = %e, "reconcile after re-registration failed");
            }
        }
        self.after_callback().await?;
        Ok(stream)
    }

    /// Reads one stream until it ends, the driver stops, or the coordinator removes us.
    async fn session(&mut self, stream: reqwest::Response) -> Result<SessionEnd, SdkError> {
        let mut bytes = std::pin::pin!(stream.bytes_stream());
        let mut parser = SseParser::default();
        let mut last_seen = Instant::now();
        loop {
            if self.stopping {
                return Ok(SessionEnd::Stopped);
            }
            if self.client.leader_generation() != self.session_generation {
                return Ok(SessionEnd::Lost(format!(
                    "another coordinator answers now ({})",
                    self.client.current_url()
                )));
            }
            let silence_limit = self.heartbeat * self.config.missed_heartbeats;
            let heartbeat_deadline = tokio::time::Instant::from_std(last_seen + silence_limit);
            let offer_deadline = self.offers.next_deadline();
            let revive_at = self.revive_at;
            let ack_due = self.ack_due;
            // Only while the scheduler wants tasks and holds no offer to place them on.
            let waited_too_long = (self.offers.len() == 0 && self.scheduler.pending_tasks() > 0)
                .then(|| self.last_offer_at + self.config.offer_wait_warning);
            tokio::select! {
                _ = self.stop.cancelled() => return Ok(SessionEnd::Stopped),
                chunk = bytes.next() => match chunk {
                    Some(Ok(chunk)) => {
                        last_seen = Instant::now();
                        let frames = match parser.feed(&chunk) {
                            Ok(frames) => frames,
                            Err(e) => return Ok(SessionEnd::Lost(e.to_string())),
                        };
                        let mut events = Vec::with_capacity(frames.len());
                        for frame in frames {
                            match FrameworkEvent::from_sse(&frame.event, &frame.data) {
                                Ok(event) => events.push(event),
                                Err(e) => tracing::warn!(event = %frame.event, error = %e, "ignoring an unreadable event"),
                            }
                        }
                        for event in coalesce_offers(events) {
                            self.handle_event(event).await?;
                        }
                        if self.ack_due.is_some_and(|due| due <= Instant::now())
                            || self.acks.len() >= config::MAX_ACKS_PER_REQUEST
                        {
                            self.flush_acks().await;
                        }
                    }
                    Some(Err(e)) => return Ok(SessionEnd::Lost(e.to_string())),
                    None => return Ok(SessionEnd::Lost("the coordinator closed the stream".into())),
                },
                _ = tokio::time::sleep_until(heartbeat_deadline) => {
                    return Ok(SessionEnd::Lost(format!("no event for {silence_limit:?}")));
                }
                _ = sleep_until_opt(offer_deadline) => {
                    let expired = self.offers.take_expired(Instant::now());
                    tracing::debug!(count = expired.len(), "declining offers held too long");
                    self.decline_many(expired).await;
                }
                _ = sleep_until_opt(ack_due) => self.flush_acks().await,
                _ = sleep_until_opt(revive_at) => {
                    self.revive_at = None;
                    self.sync_demand().await;
                }
                _ = sleep_until_opt(waited_too_long) => {
                    let waited = self.last_offer_at.elapsed();
                    self.last_offer_at = Instant::now();
                    tracing::warn!(
                        pending_tasks = self.scheduler.pending_tasks(),
                        waited_s = waited.as_secs(),
                        "no offer for a while although tasks are pending; reviving (explain \
                         on the coordinator says why: parleyctl explain)"
                    );
                    self.demand.starved();
                    self.sync_demand().await;
                }
            }
        }
    }

    async fn handle_event(&mut self, event: FrameworkEvent) -> Result<(), SdkError> {
        match event {
            FrameworkEvent::Subscribed(registered) => {
                self.heartbeat = heartbeat_interval(registered.heartbeat_interval_s);
            }
            FrameworkEvent::Offers { offers } => {
                let received = Instant::now();
                self.last_offer_at = received;
                let count = offers.len();
                self.ctx.set_held(self.offers.ids());
                let deadline = received + self.config.offer_hold_timeout;
                for offer in &offers {
                    self.offers.hold(offer.offer_id, deadline);
                }
                if self.stopping {
                    return Ok(());
                }
                self.report_forgotten_launches().await?;
                let decisions = self.scheduler.offers(&mut self.ctx, offers).await;
                // The decisions come first, then whatever the scheduler asked through the context.
                let mut commands: Vec<Command> = decisions
                    .into_answers()
                    .into_iter()
                    .map(Command::Answer)
                    .collect();
                commands.append(&mut self.ctx.commands);
                self.ctx.commands = commands;
                self.after_callback().await?;
                tracing::debug!(
                    offers = count,
                    still_held = self.offers.len(),
                    ms = received.elapsed().as_secs_f64() * 1e3,
                    "offers answered"
                );
            }
            FrameworkEvent::Rescind { offer_id } => {
                self.offers.remove(offer_id);
                self.scheduler.rescinded(&mut self.ctx, offer_id).await;
                self.after_callback().await?;
            }
            FrameworkEvent::Update { status } => {
                self.forgotten.heard(&status);
                self.scheduler.status_update(&mut self.ctx, &status).await;
                self.after_callback().await?;
                self.acks.push((status.task_id, status.update_id));
                if self.ack_due.is_none() {
                    self.ack_due = Some(Instant::now() + self.config.ack_delay);
                }
            }
            FrameworkEvent::AgentDraining(draining) => {
                self.scheduler
                    .agent_draining(&mut self.ctx, &draining)
                    .await;
                self.after_callback().await?;
            }
            FrameworkEvent::Preemption(preemption) => {
                self.scheduler.preempted(&mut self.ctx, &preemption).await;
                self.after_callback().await?;
            }
            FrameworkEvent::GangFailed(failed) => {
                self.scheduler.gang_failed(&mut self.ctx, &failed).await;
                self.after_callback().await?;
            }
            FrameworkEvent::Heartbeat {} => {}
            FrameworkEvent::Error { message } => return Err(SdkError::FrameworkRemoved(message)),
        }
        Ok(())
    }

    /// After a re-registration, at the first offers: the launched, unfinished tasks not heard
    /// of since are reconciled, together (in calls of at most [`RECONCILE_BATCH`] ids). A
    /// `200` means the coordinator knows them all (their states arrive as updates); `409
    /// task_not_yet_known` means it still awaits agents, so they are asked about again at
    /// later offers; `404 task_not_found` means at least one is unknown with no agent awaited,
    /// so each is asked about alone, and those unknown reach the scheduler as `lost` (see
    /// [`forgotten`]).
    async fn report_forgotten_launches(&mut self) -> Result<(), SdkError> {
        let Some(id) = self.framework_id else {
            return Ok(());
        };
        let check = self.forgotten.take_unheard(Instant::now());
        let mut alone = Vec::new();
        for batch in check.chunks(self.reconcile_batch()) {
            match self.client.reconcile(id, batch.to_vec()).await {
                Ok(()) => {}
                Err(e) if e.code() == Some("task_not_yet_known") => {
                    tracing::debug!(
                        tasks = batch.len(),
                        "the coordinator still awaits agents; asking again later"
                    );
                    batch.iter().for_each(|t| self.forgotten.not_yet_known(t));
                }
                Err(e) if e.code() == Some("task_not_found") => alone.extend_from_slice(batch),
                Err(e) => {
                    tracing::warn!(tasks = batch.len(), error = %e, "reconciling launched tasks failed");
                }
            }
        }
        if alone.is_empty() {
            return Ok(());
        }
        let limit = self.config.max_concurrent_requests.max(1);
        let results = actions::reconcile_each(&self.client, id, alone, |t| t, limit).await;
        for (task, result) in results {
            match result {
                Ok(()) => {}
                Err(e) if e.code() == Some("task_not_found") => {
                    if let Some(status) = self.forgotten.unknown(id, &task) {
                        tracing::warn!(task_id = %task, "the coordinator forgot a launch; reporting it lost");
                        self.scheduler.status_update(&mut self.ctx, &status).await;
                        self.after_callback().await?;
                    }
                }
                Err(e) if e.code() == Some("task_not_yet_known") => {
                    self.forgotten.not_yet_known(&task)
                }
                Err(e) => {
                    tracing::warn!(task_id = %task, error = %e, "reconciling a launched task failed")
                }
            }
        }
        Ok(())
    }

    /// Carries out what the scheduler asked for, then re-checks suppress/revive.
    async fn after_callback(&mut self) -> Result<(), SdkError> {
        for _ in 0..MAX_COMMAND_ROUNDS {
            let commands = std::mem::take(&mut self.ctx.commands);
            if commands.is_empty() {
                break;
            }
            // Consecutive answers go out together; other requests keep their place in between.
            let mut answers = Vec::new();
            for command in commands {
                if let Command::Answer(answer) = command {
                    answers.push(answer);
                    continue;
                }
                self.answer(std::mem::take(&mut answers)).await;
                match command {
                    Command::Answer(answer) => answers.push(answer),
                    Command::Kill(task_id) => {
                        if let Some(id) = self.framework_id {
                            if let Err(e) = self.client.kill(id, &task_id).await {
                                self.report(e).await;
                            }
                        }
                    }
                    Command::Reconcile(task_ids) => {
                        if let Some(id) = self.framework_id {
                            // An empty list asks for every task: one call.
                            let batches = match task_ids.is_empty() {
                                true => vec![task_ids],
                                false => task_ids
                                    .chunks(self.reconcile_batch())
                                    .map(<[TaskId]>::to_vec)
                                    .collect(),
                            };
                            for batch in batches {
                                if let Err(e) = self.client.reconcile(id, batch).await {
                                    self.report(e).await;
                                }
                            }
                        }
                    }
                    Command::Stop => self.stopping = true,
                }
            }
            self.answer(answers).await;
        }
        if !self.ctx.commands.is_empty() {
            tracing::error!("scheduler keeps issuing requests from its callbacks; dropping them");
            self.ctx.commands.clear();
        }
        self.ctx.set_held(self.offers.ids());
        self.sync_demand().await;
        Ok(())
    }

    /// The most task ids in one reconcile: [`RECONCILE_BATCH`], or fewer when the
    /// coordinator's limits say so.
    fn reconcile_batch(&self) -> usize {
        RECONCILE_BATCH.min(self.limits.max_reconcile_tasks.max(1) as usize)
    }

    async fn shutdown(&mut self) {
        // Updates the scheduler has seen are not sent again to a framework that fails over.
        self.flush_acks().await;
        self.decline_all().await;
        if let (true, Some(id)) = (self.config.unregister_on_stop, self.framework_id) {
            if let Err(e) = self.client.unregister(id).await {
                tracing::warn!(error = %e, "unregister failed");
            }
        }
    }
}

/// Merges every `offers` event of one read into one, at the place of the last of them, so the
/// scheduler places its queue once for all the offers that arrived together rather than once
/// per event (under load, offers arrive between task updates). Moving offers later is safe:
/// the scheduler only knows more when it sees them. An offer rescinded within the same read
/// before that place is dropped with its rescind: the scheduler never sees either.
fn coalesce_offers(events: Vec<FrameworkEvent>) -> Vec<FrameworkEvent> {
    let Some(last) = events
        .iter()
        .rposition(|e| matches!(e, FrameworkEvent::Offers { .. }))
    else {
        return events;
    };
    let mut offered: HashSet<OfferId> = HashSet::new();
    let mut cancelled: HashSet<OfferId> = HashSet::new();
    for event in &events[..last] {
        match event {
            FrameworkEvent::Offers { offers } => offered.extend(offers.iter().map(|o| o.offer_id)),
            FrameworkEvent::Rescind { offer_id } if offered.contains(offer_id) => {
                cancelled.insert(*offer_id);
            }
            _ => {}
        }
    }
    let mut merged: Vec<Offer> = Vec::new();
    let mut out: Vec<FrameworkEvent> = Vec::with_capacity(events.len());
    for (i, event) in events.into_iter().enumerate() {
        match event {
            FrameworkEvent::Offers { offers } => {
                merged.extend(
                    offers
                        .into_iter()
                        .filter(|o| !cancelled.contains(&o.offer_id)),
                );
                if i == last && !merged.is_empty() {
                    out.push(FrameworkEvent::Offers {
                        offers: std::mem::take(&mut merged),
                    });
                }
            }
            FrameworkEvent::Rescind { offer_id } if i < last && cancelled.contains(&offer_id) => {}
            other => out.push(other),
        }
    }
    out
}

fn heartbeat_interval(seconds: f64) -> Duration {
    if seconds.is_finite() && seconds > 0.0 {
        Duration::from_secs_f64(seconds.clamp(0.01, 3600.0))
    } else {
        DEFAULT_HEARTBEAT
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use protocol::{AgentId, Offer, OfferId, Resources};

    use super::*;

    fn offers(n: usize) -> FrameworkEvent {
        let offers = (0..n)
            .map(|_| Offer {
                offer_id: OfferId::new(),
                framework_id: FrameworkId::new(),
                agent_id: AgentId::new(),
                hostname: "h".into(),
                resources: Resources::new(),
                agent_total: Resources::new(),
                attributes: Default::default(),
                created_at: Default::default(),
                expires_at: Default::default(),
                reservation: None,
            })
            .collect();
        FrameworkEvent::Offers { offers }
    }

    fn shape(events: &[FrameworkEvent]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                FrameworkEvent::Offers { offers } => format!("offers {}", offers.len()),
                other => other.name().to_owned(),
            })
            .collect()
    }

    #[test]
    fn the_offer_events_of_one_read_are_merged_in_order_at_the_last() {
        let (a, b, c) = (offers(2), offers(3), offers(4));
        let ids = |e: &FrameworkEvent| -> Vec<OfferId> {
            let FrameworkEvent::Offers { offers } = e else {
                unreachable!()
            };
            offers.iter().map(|o| o.offer_id).collect()
        };
        let expected: Vec<OfferId> = [ids(&a), ids(&b), ids(&c)].concat();
        let merged = coalesce_offers(vec![
            a.clone(),
            b.clone(),
            FrameworkEvent::Heartbeat {},
            offers(0),
            FrameworkEvent::Heartbeat {},
            c.clone(),
            FrameworkEvent::Heartbeat {},
        ]);
        assert_eq!(
            shape(&merged),
            ["heartbeat", "heartbeat", "offers 9", "heartbeat"]
        );
        assert_eq!(ids(&merged[2]), expected, "arrival order is kept");
        let none = coalesce_offers(vec![FrameworkEvent::Heartbeat {}]);
        assert_eq!(shape(&none), ["heartbeat"]);
    }

    #[test]
    fn an_offer_rescinded_in_the_same_read_is_dropped_with_its_rescind() {
        let (a, b) = (offers(2), offers(1));
        let first = match &a {
            FrameworkEvent::Offers { offers } => offers[0].offer_id,
            _ => unreachable!(),
        };
        let other = OfferId::new();
        let merged = coalesce_offers(vec![
            a.clone(),
            FrameworkEvent::Rescind { offer_id: first },
            FrameworkEvent::Rescind { offer_id: other },
            b.clone(),
        ]);
        // An offer held from an earlier read is rescinded as before.
        assert_eq!(shape(&merged), ["rescind", "offers 2"]);
        assert_eq!(merged[0], FrameworkEvent::Rescind { offer_id: other });
        let FrameworkEvent::Offers { offers: left } = &merged[1] else {
            unreachable!()
        };
        assert!(left.iter().all(|o| o.offer_id != first));
        // Everything rescinded: no empty offers event.
        let gone = coalesce_offers(vec![offers(0), FrameworkEvent::Heartbeat {}]);
        assert_eq!(shape(&gone), ["heartbeat"]);
    }
}
