//! Carrying out requests on the coordinator: launches, declines, acknowledgements, and
//! suppress/revive, each reporting failures back to the scheduler. Answers to offers go out
//! together (declines and accepts batched, the batches concurrent), so a framework holding a
//! thousand offers answers them all in about one round trip over a few connections.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use futures::StreamExt;
use protocol::gang::GangAccept;
use protocol::messages::{
    AcceptBatch, AcceptRequest, AcknowledgeBatch, AcknowledgeRequest, DeclineRequest, ReviveRequest,
};
use protocol::{FrameworkId, OfferId, TaskId, TaskSpec};

use super::config::MAX_ACKS_PER_REQUEST;
use super::demand::DemandAction;
use super::{fit, Runner};
use crate::client::CoordinatorClient;
use crate::SdkError;
use crate::{Answer, Scheduler};

impl<S: Scheduler> Runner<S> {
    /// Carries out answers to offers together: every decline in one call per filter length,
    /// the launches in calls of up to 128 accepts (fewer where their tasks would make the call
    /// larger than the coordinator's limits allow), up to
    /// [`DriverConfig::max_concurrent_requests`](crate::DriverConfig::max_concurrent_requests)
    /// at a time, declines and accepts at once. Then tells the scheduler about the launches that
    /// failed.
    pub(super) async fn answer(&mut self, answers: Vec<Answer>) {
        if answers.is_empty() {
            return;
        }
        // What the scheduler still wants once these answers are carried out.
        let pending = self.pending_bound();
        let mut declines: Vec<(OfferId, Option<Duration>)> = Vec::new();
        let mut accepts: Vec<AcceptRequest> = Vec::new();
        let mut gangs: Vec<GangAccept> = Vec::new();
        let mut failed: Vec<(Vec<TaskSpec>, SdkError)> = Vec::new();
        for answer in answers {
            match answer {
                Answer::LaunchGang { gang_id, parts } => {
                    match self.gang_request(gang_id, parts, &mut declines) {
                        Ok(gang) => gangs.push(gang),
                        Err(failure) => failed.push(failure),
                    }
                }
                Answer::Decline { offer_id, refuse } => {
                    self.offers.remove(offer_id);
                    declines.push((offer_id, refuse));
                }
                Answer::Launch { offer_ids, tasks } if tasks.is_empty() => {
                    for offer_id in offer_ids {
                        self.offers.remove(offer_id);
                        declines.push((offer_id, None));
                    }
                }
                Answer::Launch { offer_ids, tasks } => {
                    if self.framework_id.is_none() || offer_ids.is_empty() {
                        let e = SdkError::Protocol("a launch must name at least one offer".into());
                        failed.push((tasks, e));
                    } else if let Some(reason) = tasks.iter().find_map(|t| {
                        protocol::capability::check_whole_gpus("resources", &t.resources)
                            .err()
                            .map(|r| format!("task {}: {r}", t.task_id))
                    }) {
                        // Refused here, before sending: the coordinator would answer 422.
                        for offer_id in offer_ids {
                            self.offers.remove(offer_id);
                            declines.push((offer_id, None));
                        }
                        failed.push((tasks, SdkError::Protocol(reason)));
                    } else if let Some(gone) = offer_ids.iter().find(|o| !self.offers.contains(**o))
                    {
                        // Rescinded, expired, already answered, or never ours: the coordinator
                        // would refuse.
                        let e = SdkError::Protocol(format!(
                            "offer {gone} is not held (rescinded or already answered)"
                        ));
                        failed.push((tasks, e));
                    } else {
                        for offer_id in &offer_ids {
                            self.offers.remove(*offer_id);
                        }
                        accepts.push(AcceptRequest {
                            offer_ids,
                            tasks,
                            refuse_seconds: Some(self.config.accept_refuse.as_secs_f64()),
                        });
                    }
                }
            }
        }
        let says_pending = !declines.is_empty() || !accepts.is_empty() || !gangs.is_empty();
        if let Some(id) = self.framework_id {
            let client = &self.client;
            let limit = self.config.max_concurrent_requests.max(1);
            let budget = fit::item_budget(&self.limits);
            let mut fitted = Vec::with_capacity(accepts.len());
            for accept in accepts {
                let (accept, size, rest) = fit::trim_accept(accept, budget);
                if !rest.is_empty() {
                    let e = SdkError::Protocol(format!(
                        "{} tasks of one accept are more than one request may carry \
                         (the coordinator's max_body_bytes is {})",
                        rest.len() + accept.tasks.len(),
                        self.limits.max_body_bytes
                    ));
                    failed.push((rest, e));
                }
                fitted.push((size, accept));
            }
            let per_call = ACCEPTS_PER_CALL.min(self.limits.max_accepts_per_call as usize);
            let calls = fit::sized_pieces(fitted, per_call, budget);
            let declined = decline_together(
                client,
                id,
                declines,
                self.config.decline_refuse,
                pending,
                limit,
                budget,
            );
            let accepted = futures::stream::iter(
                calls
                    .into_iter()
                    .map(|accepts| send_accepts(client, id, accepts, pending)),
            )
            .buffered(limit)
            .collect::<Vec<_>>();
            let gangs_sent = futures::stream::iter(gangs.into_iter().map(|gang| async move {
                let answer = client.gang_accept(id, &gang).await;
                let tasks: Vec<TaskSpec> = gang.accepts.into_iter().flat_map(|a| a.tasks).collect();
                (tasks, answer.map(|r| r.launched))
            }))
            .buffered(limit)
            .collect::<Vec<_>>();
            let ((), results, gang_results) = tokio::join!(declined, accepted, gangs_sent);
            let mut in_doubt: Vec<TaskSpec> = Vec::new();
            for (tasks, result) in results.into_iter().flatten().chain(gang_results) {
                match result {
                    Ok(launched) => {
                        let launched: HashSet<&TaskId> = launched.iter().collect();
                        let (ok, missing): (Vec<TaskSpec>, Vec<TaskSpec>) = tasks
                            .into_iter()
                            .partition(|t| launched.contains(&t.task_id));
                        if !ok.is_empty() {
                            self.demand.launched();
                        }
                        for t in ok {
                            self.forgotten.launched(t.task_id, t.agent_id);
                        }
                        if !missing.is_empty() {
                            let e = SdkError::Protocol(
                                "the coordinator did not launch every task".into(),
                            );
                            failed.push((missing, e));
                        }
                    }
                    Err(e) if e.in_doubt() => {
                        tracing::warn!(error = %e, tasks = tasks.len(), "accept interrupted; asking the coordinator whether it launched them");
                        in_doubt.extend(tasks);
                    }
                    Err(e) => {
                        // The scheduler's `launch_failed` hears of it (and by default warns).
                        tracing::debug!(error = %e, tasks = tasks.len(), "accept refused");
                        failed.push((tasks, e));
                    }
                }
            }
            if !in_doubt.is_empty() {
                let never = self.settle_in_doubt(id, in_doubt).await;
                if !never.is_empty() {
                    let e = SdkError::Protocol(
                        "an interrupted accept did not reach the coordinator".into(),
                    );
                    failed.push((never, e));
                }
            }
        }
        if self.framework_id.is_some() && says_pending {
            self.demand.told(pending.map(|n| n as usize));
        }
        if !failed.is_empty() {
            self.demand.launch_failed();
        }
        for (tasks, e) in failed {
            self.scheduler.launch_failed(&mut self.ctx, tasks, &e).await;
        }
    }

    /// The request of a gang's launch, its offers taken from those held; or why it is not sent
    /// (its tasks, to hand back to the scheduler). A gang naming an offer not held, or a task
    /// of a fraction of a GPU, is not sent at all: the coordinator would refuse it whole.
    fn gang_request(
        &mut self,
        gang_id: String,
        parts: Vec<(Vec<OfferId>, Vec<TaskSpec>)>,
        declines: &mut Vec<(OfferId, Option<Duration>)>,
    ) -> Result<GangAccept, (Vec<TaskSpec>, SdkError)> {
        let offers: Vec<OfferId> = parts.iter().flat_map(|(o, _)| o.iter().copied()).collect();
        let tasks = || parts.iter().flat_map(|(_, t)| t.iter().cloned()).collect();
        if self.framework_id.is_none() || parts.iter().any(|(o, _)| o.is_empty()) {
            let e = SdkError::Protocol("each part of a gang must name at least one offer".into());
            return Err((tasks(), e));
        }
        let fraction = parts.iter().flat_map(|(_, t)| t).find_map(|t| {
            protocol::capability::check_whole_gpus("resources", &t.resources)
                .err()
                .map(|r| format!("task {}: {r}", t.task_id))
        });
        if let Some(reason) = fraction {
            for offer_id in offers {
                self.offers.remove(offer_id);
                declines.push((offer_id, None));
            }
            return Err((tasks(), SdkError::Protocol(reason)));
        }
        if let Some(gone) = offers.iter().find(|o| !self.offers.contains(**o)) {
            let e = SdkError::Protocol(format!(
                "offer {gone} of gang {gang_id} is not held (rescinded or already answered)"
            ));
            return Err((tasks(), e));
        }
        for offer_id in offers {
            self.offers.remove(offer_id);
        }
        let refuse_seconds = Some(self.config.accept_refuse.as_secs_f64());
        Ok(GangAccept {
            gang_id,
            accepts: parts
                .into_iter()
                .map(|(offer_ids, tasks)| AcceptRequest {
                    offer_ids,
                    tasks,
                    refuse_seconds,
                })
                .collect(),
        })
    }

    /// Declines offers with the default filter, in one call.
    pub(super) async fn decline_many(&mut self, offer_ids: Vec<OfferId>) {
        let Some(id) = self.framework_id else { return };
        let declines: Vec<_> = offer_ids.into_iter().map(|o| (o, None)).collect();
        let pending = self.pending_bound();
        if !declines.is_empty() {
            self.demand.told(pending.map(|n| n as usize));
        }
        decline_together(
            &self.client,
            id,
            declines,
            self.config.decline_refuse,
            pending,
            self.config.max_concurrent_requests.max(1),
            fit::item_budget(&self.limits),
        )
        .await;
    }

    /// The scheduler's pending tasks, as sent with answers and revives (`None` when
    /// [`DriverConfig::size_offers_to_demand`](crate::DriverConfig::size_offers_to_demand) is
    /// off).
    fn pending_bound(&self) -> Option<u32> {
        self.config
            .size_offers_to_demand
            .then(|| u32::try_from(self.scheduler.pending_tasks()).unwrap_or(u32::MAX))
    }

    pub(super) async fn decline_all(&mut self) {
        let all = self.offers.take_all();
        self.decline_many(all).await;
    }

    /// Acknowledges, in one call, every update the scheduler has seen since the last flush.
    pub(super) async fn flush_acks(&mut self) {
        self.ack_due = None;
        if self.acks.is_empty() {
            return;
        }
        let acks: Vec<AcknowledgeRequest> = std::mem::take(&mut self.acks)
            .into_iter()
            .map(|(task_id, update_id)| AcknowledgeRequest { task_id, update_id })
            .collect();
        let Some(id) = self.framework_id else { return };
        let mut calls = fit::pieces(acks, MAX_ACKS_PER_REQUEST, fit::item_budget(&self.limits));
        while let Some(acknowledgements) = calls.pop() {
            let count = acknowledgements.len();
            let batch = AcknowledgeBatch { acknowledgements };
            match self.client.acknowledge_batch(id, &batch).await {
                Ok(answer) if !answer.unknown.is_empty() => {
                    tracing::debug!(
                        unknown = answer.unknown.len(),
                        "acknowledged updates the coordinator no longer knows"
                    );
                }
                Ok(_) => {}
                Err(e) if too_large(&e) => match fit::halve(batch.acknowledgements) {
                    Ok((front, back)) => calls.extend([front, back]),
                    // The coordinator sends the update again; it is acknowledged then.
                    Err(_) => tracing::warn!(error = %e, "an acknowledgement alone is too large"),
                },
                // The coordinator sends unacknowledged updates again, so this heals by itself.
                Err(e) => tracing::warn!(error = %e, count, "acknowledge failed"),
            }
        }
    }

    /// Asks the coordinator about tasks whose accept broke off after it was sent (a timeout,
    /// a reset connection): it may have launched them or not. Those it knows are launched
    /// (their updates follow); those it does not know, with no agent awaited, never were and
    /// are returned, to go back to the scheduler. Tasks it cannot say about yet are kept as
    /// launched and asked about again at later offers, as after a failover ([`Forgotten`]).
    ///
    /// [`Forgotten`]: super::forgotten::Forgotten
    pub(super) async fn settle_in_doubt(
        &mut self,
        id: FrameworkId,
        tasks: Vec<TaskSpec>,
    ) -> Vec<TaskSpec> {
        let per_call = self.reconcile_batch();
        let mut never = Vec::new();
        let mut alone = Vec::new();
        let mut rest = tasks;
        while !rest.is_empty() {
            let batch: Vec<TaskSpec> = rest.drain(..per_call.min(rest.len())).collect();
            let ids = batch.iter().map(|t| t.task_id.clone()).collect();
            match self.client.reconcile(id, ids).await {
                Err(e) if e.code() == Some("task_not_found") => alone.extend(batch),
                other => {
                    for t in batch {
                        self.forgotten.launched(t.task_id, t.agent_id);
                    }
                    if let Err(e) = other {
                        // Checked again at the next offers, as after a re-registration.
                        tracing::debug!(error = %e, "reconcile of an interrupted accept failed");
                        self.forgotten.reregistered();
                    }
                }
            }
        }
        let limit = self.config.max_concurrent_requests.max(1);
        let answers = reconcile_each(&self.client, id, alone, |t| &t.task_id, limit).await;
        for (task, answer) in answers {
            match answer {
                Err(e) if e.code() == Some("task_not_found") => never.push(task),
                _ => self.forgotten.launched(task.task_id, task.agent_id),
            }
        }
        never
    }

    /// Suppresses or revives to match the scheduler's pending work.
    pub(super) async fn sync_demand(&mut self) {
        let Some(id) = self.framework_id else { return };
        let now = Instant::now();
        match self.demand.decide(self.scheduler.pending_tasks(), now) {
            DemandAction::None => {}
            DemandAction::Suppress => {
                let result = self.client.suppress(id).await;
                self.demand.suppressed(result.is_ok());
                if let Err(e) = result {
                    self.report(e).await;
                }
            }
            DemandAction::Revive => {
                let request = ReviveRequest {
                    demand: self.scheduler.demand_hint(),
                    pending_tasks: self.pending_bound(),
                };
                let result = self.client.revive(id, &request).await;
                let told = request.pending_tasks.map(|n| n as usize);
                self.demand.revived(result.is_ok(), told, now);
                match result {
                    Ok(()) => self.revive_at = None,
                    Err(e) => {
                        self.revive_at = Some(now + self.config.revive_interval);
                        self.report(e).await;
                    }
                }
            }
            DemandAction::ReviveAt(at) => self.revive_at = Some(at),
        }
    }

    /// Tells the scheduler about a failed call. Requests it makes in `error` wait for the next
    /// round of commands.
    pub(super) async fn report(&mut self, error: SdkError) {
        tracing::warn!(error = %error, "coordinator call failed");
        let pending = std::mem::take(&mut self.ctx.commands);
        self.scheduler.error(&mut self.ctx, &error).await;
        let mut added = std::mem::replace(&mut self.ctx.commands, pending);
        self.ctx.commands.append(&mut added);
    }
}

/// How many accepts go in one call at most (fewer when the coordinator's limits say so, or
/// their tasks fill the body): enough that a framework answers a round of offers over one
/// connection, few enough that the coordinator's books are not held long for one call.
const ACCEPTS_PER_CALL: usize = 128;

/// Whether the coordinator (or a proxy before it) refused a call for its size.
fn too_large(e: &SdkError) -> bool {
    matches!(e, SdkError::Rejected { status: 413, .. })
}

/// Reconciles each of `items` (task `key`) in a call of its own, up to `limit` at a time, and
/// answers for each: how a task unknown in a batch is told from the rest.
pub(super) async fn reconcile_each<T>(
    client: &CoordinatorClient,
    id: FrameworkId,
    items: Vec<T>,
    key: impl Fn(&T) -> &TaskId,
    limit: usize,
) -> Vec<(T, Result<(), SdkError>)> {
    let key = &key;
    futures::stream::iter(items.into_iter().map(|item| async move {
        let answer = client.reconcile(id, vec![key(&item).clone()]).await;
        (item, answer)
    }))
    .buffered(limit)
    .collect()
    .await
}

/// What became of the tasks of one accept: the ids launched, or why none was.
type Sent = (Vec<TaskSpec>, Result<Vec<TaskId>, SdkError>);

/// Sends `accepts` in one call, and answers for each. A call refused as too large is split in
/// two and both halves are sent again (a refused call changed nothing, so its offers are still
/// held); a single accept refused so is sent again with the first half of its tasks, and the
/// other half goes back to the scheduler.
fn send_accepts<'a>(
    client: &'a CoordinatorClient,
    id: FrameworkId,
    accepts: Vec<AcceptRequest>,
    pending: Option<u32>,
) -> futures::future::BoxFuture<'a, Vec<Sent>> {
    Box::pin(async move {
        let batch = AcceptBatch {
            accepts,
            pending_tasks: pending,
        };
        let e = match accept_chunk(client, id, &batch).await {
            Ok(results) => {
                return batch
                    .accepts
                    .into_iter()
                    .zip(results)
                    .map(|(a, r)| (a.tasks, r))
                    .collect()
            }
            Err(e) => e,
        };
        if !too_large(&e) {
            // Refused or lost as a whole: none of its tasks is known to be launched.
            let tasks = batch.accepts.into_iter().flat_map(|a| a.tasks).collect();
            return vec![(tasks, Err(e))];
        }
        tracing::info!(
            accepts = batch.accepts.len(),
            "the coordinator found the call too large; splitting it"
        );
        let mut accepts = match fit::halve(batch.accepts) {
            Ok((front, back)) => {
                let (mut a, b) = tokio::join!(
                    send_accepts(client, id, front, pending),
                    send_accepts(client, id, back, pending)
                );
                a.extend(b);
                return a;
            }
            Err(accepts) => accepts,
        };
        let Some(mut one) = accepts.pop() else {
            return Vec::new();
        };
        match fit::halve(std::mem::take(&mut one.tasks)) {
            Ok((keep, rest)) => {
                one.tasks = keep;
                let mut out = send_accepts(client, id, vec![one], pending).await;
                out.push((rest, Err(e)));
                out
            }
            Err(tasks) => vec![(tasks, Err(e))],
        }
    })
}

/// One call's accepts, answered one by one: the tasks launched, or why that accept was
/// refused. A coordinator without the batch endpoint gets them as single accepts.
async fn accept_chunk(
    client: &CoordinatorClient,
    id: FrameworkId,
    batch: &AcceptBatch,
) -> Result<Vec<Result<Vec<TaskId>, SdkError>>, SdkError> {
    // One accept goes alone, unless it says what is still wanted (only batches carry that).
    if let ([one], None) = (batch.accepts.as_slice(), batch.pending_tasks) {
        return Ok(vec![client.accept(id, one).await.map(|a| a.launched)]);
    }
    let n = batch.accepts.len();
    match client.accept_many(id, batch).await {
        Ok(answer) if answer.results.len() == n => Ok(answer
            .results
            .into_iter()
            .map(|r| match r.error {
                None => Ok(r.launched),
                Some(e) => Err(SdkError::from_detail(r.status, e)),
            })
            .collect()),
        Ok(answer) => Err(SdkError::Protocol(format!(
            "{} results to {n} accepts",
            answer.results.len()
        ))),
        Err(e) if e.code() == Some("no_such_endpoint") => {
            let mut out = Vec::with_capacity(n);
            for request in &batch.accepts {
                out.push(client.accept(id, request).await.map(|a| a.launched));
            }
            Ok(out)
        }
        Err(e) => Err(e),
    }
}

/// Declines `declines` (offer, filter or the default `default_refuse`): one call per filter
/// length (more when its offer ids are over `budget` bytes), each saying the tasks still
/// `pending`. When a call fails (typically one of its
/// offers is already gone, which fails the whole call), its offers are declined one by one, up
/// to `limit` calls at a time, so the others are still given back.
async fn decline_together(
    client: &CoordinatorClient,
    id: FrameworkId,
    declines: Vec<(OfferId, Option<Duration>)>,
    default_refuse: Duration,
    pending: Option<u32>,
    limit: usize,
    budget: usize,
) {
    let mut groups: Vec<(Duration, Vec<OfferId>)> = Vec::new();
    for (offer_id, refuse) in declines {
        let refuse = refuse.unwrap_or(default_refuse);
        match groups.iter_mut().find(|(r, _)| *r == refuse) {
            Some((_, ids)) => ids.push(offer_id),
            None => groups.push((refuse, vec![offer_id])),
        }
    }
    let groups = groups.into_iter().flat_map(|(refuse, ids)| {
        fit::pieces(ids, usize::MAX, budget)
            .into_iter()
            .map(move |piece| (refuse, piece))
    });
    let calls = groups.map(|(refuse, offer_ids)| async move {
        let refuse = refuse.as_secs_f64();
        let request = DeclineRequest {
            offer_ids,
            refuse_seconds: Some(refuse),
            pending_tasks: pending,
        };
        let Err(e) = client.decline(id, &request).await else {
            return;
        };
        if request.offer_ids.len() == 1 {
            // An offer that is already gone needs no decline.
            tracing::debug!(offer_id = %request.offer_ids[0], error = %e, "decline failed");
            return;
        }
        tracing::debug!(error = %e, count = request.offer_ids.len(), "decline failed; declining one by one");
        futures::stream::iter(request.offer_ids.into_iter().map(|offer_id| async move {
            let one = DeclineRequest {
                offer_ids: vec![offer_id],
                refuse_seconds: Some(refuse),
                pending_tasks: pending,
            };
            if let Err(e) = client.decline(id, &one).await {
                tracing::debug!(%offer_id, error = %e, "decline failed");
            }
        }))
        .buffer_unordered(limit)
        .collect::<()>()
        .await;
    });
    futures::future::join_all(calls).await;
}
