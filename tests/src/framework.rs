//! [`TestFramework`]: a tiny framework (scheduler) client over raw HTTP for end-to-end tests —
//! register, read the event stream (with `testkit`'s [`SseReader`], in a background task),
//! accept / decline / kill / acknowledge / remove. It keeps a log of every
//! event received, so tests can check afterwards which updates arrived.
//!
//! Deliberately independent of `framework-sdk`: the tests check the coordinator's wire
//! contract (`docs/src/reference/api.md`) directly.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use protocol::messages::{
    AcceptRequest, AcceptResponse, AcknowledgeRequest, DeclineRequest, FrameworkRegistered,
    KillRequest, RegisterFramework,
};
use protocol::{
    AgentId, CommandSpec, FrameworkEvent, FrameworkId, Offer, OfferId, Resources, RolePath, TaskId,
    TaskSpec, TaskStatus,
};
use reqwest::StatusCode;
use serde::Serialize;
use testkit::{SseEvent, SseReader};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A framework registered with a coordinator, with its event stream open.
pub struct TestFramework {
    /// Its id.
    pub id: FrameworkId,
    /// The coordinator's base URL.
    pub url: String,
    http: reqwest::Client,
    request: RegisterFramework,
    auto_ack: bool,
    events: mpsc::UnboundedReceiver<FrameworkEvent>,
    log: Arc<Mutex<Vec<FrameworkEvent>>>,
    reader: Option<(CancellationToken, JoinHandle<()>)>,
}

/// A shell task for `agent` with the given resources (`cpus=1,mem=64` form).
pub fn shell_task(task_id: &str, agent: AgentId, resources: &str, shell: &str) -> TaskSpec {
    TaskSpec {
        task_id: TaskId::new(task_id).unwrap_or_else(|e| panic!("bad task id {task_id}: {e}")),
        name: task_id.to_owned(),
        agent_id: agent,
        resources: resources
            .parse()
            .unwrap_or_else(|e| panic!("bad resources {resources}: {e}")),
        command: CommandSpec::Shell(shell.to_owned()),
        env: Default::default(),
        duration_s: None,
        isolation: None,
        health_check: None,
        priority: None,
    }
}

impl TestFramework {
    /// Registers `name` in `role` (acknowledging every update automatically) and opens its
    /// stream; returns once the `subscribed` event arrived.
    pub async fn register(url: &str, name: &str, role: &str) -> anyhow::Result<Self> {
        Self::register_capable(url, name, role, Vec::new()).await
    }

    /// As [`TestFramework::register`], declaring the `gpu_resources` capability (so GPU agents
    /// are offered to it under the coordinator's GPU gating).
    pub async fn register_gpu(url: &str, name: &str, role: &str) -> anyhow::Result<Self> {
        let capabilities = vec![protocol::capability::GPU_RESOURCES.to_owned()];
        Self::register_capable(url, name, role, capabilities).await
    }

    async fn register_capable(
        url: &str,
        name: &str,
        role: &str,
        capabilities: Vec<String>,
    ) -> anyhow::Result<Self> {
        let request = RegisterFramework {
            name: name.to_owned(),
            role: RolePath::new(role).context("role")?,
            failover_timeout_s: None,
            framework_id: None,
            demand: None,
            capabilities,
            partition_timeout_s: None,
            webui_url: None,
        };
        Self::register_with(url, request, true).await
    }

    /// Registers with the given request; `auto_ack` acknowledges each update as it arrives.
    pub async fn register_with(
        url: &str,
        request: RegisterFramework,
        auto_ack: bool,
    ) -> anyhow::Result<Self> {
        let http = reqwest::Client::new();
        let registered = register(&http, url, &request, StatusCode::CREATED).await?;
        let (_, events) = mpsc::unbounded_channel();
        let mut fw = TestFramework {
            id: registered.framework_id,
            url: url.to_owned(),
            http,
            request,
            auto_ack,
            events,
            log: Arc::default(),
            reader: None,
        };
        fw.open_stream().await?;
        Ok(fw)
    }

    /// Registers again with this framework's id (after a stream loss or a coordinator
    /// restart), expecting `expect` (200 within the failover timeout), and reopens the stream.
    pub async fn reregister(&mut self, expect: StatusCode) -> anyhow::Result<()> {
        self.stop_reader();
        let mut request = self.request.clone();
        request.framework_id = Some(self.id);
        let registered = register(&self.http, &self.url, &request, expect).await?;
        if registered.framework_id != self.id {
            bail!(
                "re-registration gave a new id {} (was {})",
                registered.framework_id,
                self.id
            );
        }
        self.open_stream().await
    }

    fn stop_reader(&mut self) {
        if let Some((token, _)) = self.reader.take() {
            token.cancel();
        }
    }

    async fn open_stream(&mut self) -> anyhow::Result<()> {
        let resp = self
            .http
            .get(format!("{}/api/v1/frameworks/{}/events", self.url, self.id))
            .send()
            .await
            .context("opening the event stream")?;
        if resp.status() != StatusCode::OK {
            bail!("event stream: {}", resp.status());
        }
        let (tx, rx) = mpsc::unbounded_channel();
        self.events = rx;
        let token = CancellationToken::new();
        let ack = self
            .auto_ack
            .then(|| (self.http.clone(), self.url.clone(), self.id));
        let join = tokio::spawn(read_stream(resp, tx, self.log.clone(), ack, token.clone()));
        self.reader = Some((token, join));
        match self.recv(Duration::from_secs(10)).await? {
            FrameworkEvent::Subscribed(s) if s.framework_id == self.id => Ok(()),
            other => bail!("first event is not `subscribed` for {}: {other:?}", self.id),
        }
    }

    fn log(&self) -> MutexGuard<'_, Vec<FrameworkEvent>> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every event received so far, in order (across reconnections).
    pub fn events(&self) -> Vec<FrameworkEvent> {
        self.log().clone()
    }

    /// Every update of `task_id` received so far, in order (re-sends included).
    pub fn updates(&self, task_id: &str) -> Vec<TaskStatus> {
        self.log()
            .iter()
            .filter_map(|e| match e {
                FrameworkEvent::Update { status } if status.task_id.as_str() == task_id => {
                    Some(status.clone())
                }
                _ => None,
            })
            .collect()
    }

    /// The next event, or an error after `timeout` or when the stream ended.
    pub async fn recv(&mut self, timeout: Duration) -> anyhow::Result<FrameworkEvent> {
        match tokio::time::timeout(timeout, self.events.recv()).await {
            Ok(Some(event)) => Ok(event),
            Ok(None) => bail!("the event stream of {} ended", self.id),
            Err(_) => bail!("no event for {} within {timeout:?}", self.id),
        }
    }

    /// Waits for the next `offers` event (other events are only logged).
    pub async fn next_offers(&mut self, timeout: Duration) -> anyhow::Result<Vec<Offer>> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if let FrameworkEvent::Offers { offers } = self.recv(left).await? {
                return Ok(offers);
            }
        }
    }

    /// Waits for an update matching `pred` (looking first at those already received). Offers
    /// that arrive meanwhile are declined, so they go back to the pool.
    pub async fn wait_update(
        &mut self,
        timeout: Duration,
        what: &str,
        pred: impl Fn(&TaskStatus) -> bool,
    ) -> anyhow::Result<TaskStatus> {
        let found = self.log().iter().find_map(|e| match e {
            FrameworkEvent::Update { status } if pred(status) => Some(status.clone()),
            _ => None,
        });
        if let Some(status) = found {
            return Ok(status);
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self
                .recv(left)
                .await
                .with_context(|| format!("waiting for {what}"))?
            {
                FrameworkEvent::Update { status } if pred(&status) => return Ok(status),
                FrameworkEvent::Offers { offers } => {
                    let ids: Vec<_> = offers.iter().map(|o| o.offer_id).collect();
                    // A 409 (offer rescinded meanwhile) is fine here.
                    let _ = self.decline(&ids, None).await;
                }
                _ => {}
            }
        }
    }

    /// Waits until `task_id` reaches `state`.
    pub async fn wait_state(
        &mut self,
        timeout: Duration,
        task_id: &str,
        state: protocol::TaskState,
    ) -> anyhow::Result<TaskStatus> {
        self.wait_update(timeout, &format!("task {task_id} {state}"), |s| {
            s.task_id.as_str() == task_id && s.state == state
        })
        .await
    }

    /// Waits for offers until one can hold `task` (whose `agent_id` is then set to that
    /// offer's agent), accepts it with that one task and declines the other offers. Returns
    /// the task as launched.
    pub async fn launch(&mut self, timeout: Duration, task: TaskSpec) -> anyhow::Result<TaskSpec> {
        self.launch_where(timeout, task, |_| true).await
    }

    /// Like [`TestFramework::launch`], using only offers for which `usable` is true.
    pub async fn launch_where(
        &mut self,
        timeout: Duration,
        mut task: TaskSpec,
        usable: impl Fn(&Offer) -> bool,
    ) -> anyhow::Result<TaskSpec> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let offers = self
                .next_offers(left)
                .await
                .with_context(|| format!("waiting for an offer for {}", task.task_id))?;
            let (fit, rest): (Vec<_>, Vec<_>) = offers
                .into_iter()
                .partition(|o| usable(o) && task.resources.fits_in(&o.resources));
            if !rest.is_empty() {
                let ids: Vec<_> = rest.iter().map(|o| o.offer_id).collect();
                let _ = self.decline(&ids, Some(0.0)).await;
            }
            let Some((first, others)) = fit.split_first() else {
                continue;
            };
            if !others.is_empty() {
                let ids: Vec<_> = others.iter().map(|o| o.offer_id).collect();
                let _ = self.decline(&ids, Some(0.0)).await;
            }
            task.agent_id = first.agent_id;
            let Some(launched) = self
                .accept_outstanding(&[first.offer_id], vec![task.clone()])
                .await?
            else {
                // Rescinded (its agent re-registered, say) or expired while it was queued
                // here: as any framework would, wait for the next offer.
                continue;
            };
            if launched != [task.task_id.clone()] {
                bail!("accept launched {launched:?}, not {}", task.task_id);
            }
            return Ok(task);
        }
    }

    /// POSTs `body` to `/api/v1/frameworks/{id}/{action}`; returns the status and JSON body.
    pub async fn post<B: Serialize>(
        &self,
        action: &str,
        body: &B,
    ) -> anyhow::Result<(StatusCode, serde_json::Value)> {
        let resp = self
            .http
            .post(format!(
                "{}/api/v1/frameworks/{}/{action}",
                self.url, self.id
            ))
            .json(body)
            .send()
            .await
            .with_context(|| format!("POST {action}"))?;
        let status = resp.status();
        let body = resp.json().await.unwrap_or(serde_json::Value::Null);
        Ok((status, body))
    }

    async fn post_ok<B: Serialize>(
        &self,
        action: &str,
        body: &B,
    ) -> anyhow::Result<serde_json::Value> {
        let (status, body) = self.post(action, body).await?;
        if status != StatusCode::OK {
            bail!("POST {action}: {status}: {body}");
        }
        Ok(body)
    }

    /// Accepts `offer_ids` launching `tasks` (filter of the rest: 0 s); returns the launched ids.
    pub async fn accept(
        &self,
        offer_ids: &[OfferId],
        tasks: Vec<TaskSpec>,
    ) -> anyhow::Result<Vec<TaskId>> {
        self.accept_outstanding(offer_ids, tasks)
            .await?
            .context("POST accept: 409 Conflict: an offer is no longer outstanding")
    }

    /// [`TestFramework::accept`], answering `Ok(None)` when an offer is no longer outstanding
    /// (`409 offer_not_outstanding`: rescinded or expired).
    pub async fn accept_outstanding(
        &self,
        offer_ids: &[OfferId],
        tasks: Vec<TaskSpec>,
    ) -> anyhow::Result<Option<Vec<TaskId>>> {
        let request = AcceptRequest {
            offer_ids: offer_ids.to_vec(),
            tasks,
            refuse_seconds: Some(0.0),
        };
        let (status, body) = self.post("accept", &request).await?;
        if status == StatusCode::CONFLICT && body["error"]["code"] == "offer_not_outstanding" {
            return Ok(None);
        }
        if status != StatusCode::OK {
            bail!("POST accept: {status}: {body}");
        }
        let answer: AcceptResponse = serde_json::from_value(body).context("accept answer")?;
        Ok(Some(answer.launched))
    }

    /// Declines `offer_ids`.
    pub async fn decline(
        &self,
        offer_ids: &[OfferId],
        refuse_seconds: Option<f64>,
    ) -> anyhow::Result<()> {
        self.post_ok(
            "decline",
            &DeclineRequest {
                offer_ids: offer_ids.to_vec(),
                refuse_seconds,
                pending_tasks: None,
            },
        )
        .await
        .map(drop)
    }

    /// Asks the coordinator to kill `task_id`.
    pub async fn kill(&self, task_id: &str) -> anyhow::Result<()> {
        let task_id = TaskId::new(task_id).context("task id")?;
        self.post_ok("kill", &KillRequest { task_id })
            .await
            .map(drop)
    }

    /// Acknowledges one update.
    pub async fn acknowledge(&self, status: &TaskStatus) -> anyhow::Result<()> {
        self.post_ok(
            "acknowledge",
            &AcknowledgeRequest {
                task_id: status.task_id.clone(),
                update_id: status.update_id,
            },
        )
        .await
        .map(drop)
    }

    /// Asks for the latest state of every task of this framework (`reconcile` with no ids).
    pub async fn reconcile_all(&self) -> anyhow::Result<()> {
        self.post_ok("reconcile", &serde_json::json!({"task_ids": []}))
            .await
            .map(drop)
    }

    /// Suppresses offers.
    pub async fn suppress(&self) -> anyhow::Result<()> {
        self.post_ok("suppress", &serde_json::json!({}))
            .await
            .map(drop)
    }

    /// Removes the framework (`DELETE`): its tasks are killed, its offers rescinded.
    pub async fn remove(mut self) -> anyhow::Result<()> {
        let resp = self
            .http
            .delete(format!("{}/api/v1/frameworks/{}", self.url, self.id))
            .send()
            .await?;
        self.stop_reader();
        if resp.status() != StatusCode::OK {
            bail!("DELETE framework: {}", resp.status());
        }
        Ok(())
    }
}

impl Drop for TestFramework {
    fn drop(&mut self) {
        self.stop_reader();
    }
}

async fn register(
    http: &reqwest::Client,
    url: &str,
    request: &RegisterFramework,
    expect: StatusCode,
) -> anyhow::Result<FrameworkRegistered> {
    let resp = http
        .post(format!("{url}/api/v1/frameworks"))
        .json(request)
        .send()
        .await
        .context("registering a framework")?;
    let status = resp.status();
    if status != expect {
        bail!(
            "register framework: {status} (expected {expect}): {}",
            resp.text().await.unwrap_or_default()
        );
    }
    Ok(resp.json().await?)
}

/// Reads the stream until it ends or `cancel`: logs each event, acknowledges updates when
/// `ack` is given, and forwards events to the test.
async fn read_stream(
    resp: reqwest::Response,
    tx: mpsc::UnboundedSender<FrameworkEvent>,
    log: Arc<Mutex<Vec<FrameworkEvent>>>,
    ack: Option<(reqwest::Client, String, FrameworkId)>,
    cancel: CancellationToken,
) {
    let mut reader = SseReader::from_response(resp);
    loop {
        let frame = tokio::select! {
            () = cancel.cancelled() => return,
            frame = reader.recv() => frame,
        };
        let Some(Ok(frame)) = frame else {
            return;
        };
        let event = match FrameworkEvent::from_frame(&frame) {
            Ok(event) => event,
            Err(e) => {
                tracing::error!("unparsable event {frame:?}: {e}");
                continue;
            }
        };
        if let (Some((http, url, id)), FrameworkEvent::Update { status }) = (&ack, &event) {
            let body = AcknowledgeRequest {
                task_id: status.task_id.clone(),
                update_id: status.update_id,
            };
            // A lost acknowledgement only means a re-send.
            let _ = http
                .post(format!("{url}/api/v1/frameworks/{id}/acknowledge"))
                .json(&body)
                .send()
                .await;
        }
        log.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(event.clone());
        let _ = tx.send(event);
    }
}

/// Sums the resources of `offers` per agent.
pub fn offered_per_agent(offers: &[Offer]) -> std::collections::BTreeMap<AgentId, Resources> {
    let mut out = std::collections::BTreeMap::<AgentId, Resources>::new();
    for o in offers {
        out.entry(o.agent_id).or_default().add_assign(&o.resources);
    }
    out
}
