//! Carrying out requests on the coordinator: launches, declines, acknowledgements, and
//! suppress/revive, each reporting failures back to the scheduler.

use std::time::Instant;

use protocol::messages::{AcceptRequest, DeclineRequest, ReviveRequest};
use protocol::{OfferId, TaskSpec};

use super::demand::DemandAction;
use super::Runner;
use crate::scheduler::Scheduler;
use crate::SdkError;

impl<S: Scheduler> Runner<S> {
    pub(super) async fn launch(&mut self, offer_ids: Vec<OfferId>, tasks: Vec<TaskSpec>) {
        if tasks.is_empty() {
            for offer_id in offer_ids {
                self.offers.remove(offer_id);
                self.decline(offer_id, None).await;
            }
            return;
        }
        let (Some(id), true) = (self.framework_id, !offer_ids.is_empty()) else {
            let e = SdkError::Protocol("a launch must name at least one offer".into());
            self.scheduler.launch_failed(&mut self.ctx, tasks, &e).await;
            return;
        };
        if let Some(gone) = offer_ids.iter().find(|o| !self.offers.contains(**o)) {
            // Rescinded, expired, already answered, or never ours: the coordinator would refuse.
            let e = SdkError::Protocol(format!(
                "offer {gone} is not held (rescinded or already answered)"
            ));
            self.scheduler.launch_failed(&mut self.ctx, tasks, &e).await;
            return;
        }
        for offer_id in &offer_ids {
            self.offers.remove(*offer_id);
        }
        let request = AcceptRequest {
            offer_ids,
            tasks,
            refuse_seconds: Some(self.config.accept_refuse_seconds),
        };
        match self.client.accept(id, &request).await {
            Ok(answer) => {
                let missing: Vec<TaskSpec> = request
                    .tasks
                    .into_iter()
                    .filter(|t| !answer.launched.contains(&t.task_id))
                    .collect();
                if !missing.is_empty() {
                    let e = SdkError::Protocol("the coordinator did not launch every task".into());
                    self.scheduler
                        .launch_failed(&mut self.ctx, missing, &e)
                        .await;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                self.scheduler
                    .launch_failed(&mut self.ctx, request.tasks, &e)
                    .await;
            }
        }
    }

    pub(super) async fn decline(&mut self, offer_id: OfferId, refuse_seconds: Option<f64>) {
        let Some(id) = self.framework_id else { return };
        let request = DeclineRequest {
            offer_ids: vec![offer_id],
            refuse_seconds: Some(refuse_seconds.unwrap_or(self.config.decline_refuse_seconds)),
        };
        if let Err(e) = self.client.decline(id, &request).await {
            // An offer that is already gone needs no decline.
            tracing::debug!(%offer_id, error = %e, "decline failed");
        }
    }

    pub(super) async fn decline_all(&mut self) {
        for offer_id in self.offers.take_all() {
            self.decline(offer_id, None).await;
        }
    }

    /// Acknowledges, in one call, every update the scheduler has seen since the last flush.
    pub(super) async fn flush_acks(&mut self) {
        if self.acks.is_empty() {
            return;
        }
        let acks = std::mem::take(&mut self.acks);
        let Some(id) = self.framework_id else { return };
        match self.client.acknowledge_many(id, acks).await {
            Ok(answer) if !answer.unknown.is_empty() => {
                tracing::debug!(
                    unknown = answer.unknown.len(),
                    "acknowledged updates the coordinator no longer knows"
                );
            }
            Ok(_) => {}
            // The coordinator sends unacknowledged updates again, so this heals by itself.
            Err(e) => tracing::warn!(error = %e, "acknowledge failed"),
        }
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
                };
                let result = self.client.revive(id, &request).await;
                self.demand.revived(result.is_ok(), now);
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
