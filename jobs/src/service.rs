//! The running service: [`Shared`] state (the book behind one lock, the store's writer), the
//! [`ServiceConfig`], and [`run`], which opens the store, registers the framework through
//! the SDK's [`Driver`], serves the API and keeps time (retries, timeouts, reconciliation)
//! until shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use framework_sdk::protocol::messages::ReviveRequest;
use framework_sdk::{
    BearerToken, Connection, CoordinatorClient, Driver, DriverConfig, FrameworkId, RolePath,
    SdkError, TaskId,
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::book::{Input, Millis, QueueOrder, DEFAULT_AGING_MS};
use crate::scheduler::JobsScheduler;
use crate::store::{Store, StoreError};
use crate::users::Users;
use crate::writer::Writer;

/// How often the service looks at the clock: retries that came due, tasks past their time
/// limit, whether offers must be revived.
pub const TICK: Duration = Duration::from_millis(100);

/// How often the kills of stopped jobs' tasks still running are sent again, in milliseconds.
pub const SWEEP_MS: Millis = 5_000;

/// The file the store lives in, under the data directory.
pub const STORE_FILE: &str = "jobs.redb";

pub use crate::clock::now_ms;

/// How the service runs.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// The coordinator's URL, or several separated by commas.
    pub coordinator: String,
    /// A PEM file of the CA to trust for an `https://` coordinator.
    pub ca_file: Option<PathBuf>,
    /// The framework's name.
    pub name: String,
    /// The role its tasks run under.
    pub role: RolePath,
    /// The framework principal's token, for a coordinator with credentials.
    pub token: Option<BearerToken>,
    /// The token clients of this service's API must present (`None`: the API is open).
    /// Ignored when `users` is set.
    pub api_token: Option<String>,
    /// The API's users, each with its own token ([`Users`]); every request must then name
    /// one, and a user may change only its own jobs.
    pub users: Option<Users>,
    /// The most tasks the jobs of a user without a `max_running` of its own may run at once
    /// (the anonymous user's too); `None`: no limit.
    pub max_running_per_user: Option<u32>,
    /// The API's certificate and key: HTTPS when set, plain HTTP otherwise.
    pub tls: Option<parley_tls::ServerTls>,
    /// Where the store lives ([`STORE_FILE`] inside).
    pub data_dir: PathBuf,
    /// A queued job gains a point of priority each time this passes.
    pub aging: Duration,
    /// How jobs of the same priority share the queue.
    pub order: QueueOrder,
    /// How long the tasks survive when the service is away.
    pub failover_timeout: Duration,
    /// The jobs page's URL, registered as the framework's `webui_url` (the coordinator's
    /// dashboard links to it). `None`: the API's own address (`http(s)://ADDR/`), unless it
    /// listens on every interface (then no link: give the name clients reach it by).
    pub webui_url: Option<String>,
}

impl ServiceConfig {
    /// Defaults for everything but where the coordinator is, the role, and where the data
    /// goes.
    pub fn new(
        coordinator: impl Into<String>,
        role: RolePath,
        data_dir: impl Into<PathBuf>,
    ) -> Self {
        Self {
            coordinator: coordinator.into(),
            ca_file: None,
            name: "parley-jobs".into(),
            role,
            token: None,
            api_token: None,
            users: None,
            max_running_per_user: None,
            tls: None,
            data_dir: data_dir.into(),
            aging: Duration::from_millis(DEFAULT_AGING_MS),
            order: QueueOrder::Fifo,
            failover_timeout: framework_sdk::DEFAULT_FAILOVER_TIMEOUT,
            webui_url: None,
        }
    }
}

/// Why the service could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The store could not be opened or read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The driver could not be set up, or stopped with an error.
    #[error("framework: {0}")]
    Sdk(#[from] SdkError),
    /// The data directory or the listener failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A write to the store failed while running, and the service stopped (its log says
    /// which); the next start carries on from what was stored.
    #[error("the jobs store could not be written; the service stopped")]
    StoreFailed,
}

pub use crate::state::{JobEvent, Shared, EVENT_BUFFER};

/// A running service, as [`start`] returns it.
#[derive(Debug)]
pub struct Running {
    /// The API's address.
    pub addr: SocketAddr,
    /// The shared state (for tests and embedding).
    pub shared: Arc<Shared>,
    stop: CancellationToken,
    join: tokio::task::JoinHandle<Result<(), ServiceError>>,
}

impl Running {
    /// Stops the service and waits for it. Its tasks keep running for the failover timeout;
    /// a service started again on the same data directory takes them over.
    pub async fn stop(self) -> Result<(), ServiceError> {
        self.stop.cancel();
        match self.join.await {
            Ok(r) => r,
            Err(e) => Err(ServiceError::Io(std::io::Error::other(e.to_string()))),
        }
    }
}

/// Starts the service on `listener` in the background; see [`Running`].
pub async fn start(config: ServiceConfig, listener: TcpListener) -> Result<Running, ServiceError> {
    let addr = listener.local_addr()?;
    let (shared, driving) = prepare(&config, addr)?;
    let stop = shared.stop.clone();
    let shutdown = stop.clone();
    let s = shared.clone();
    let tls = config.tls.clone();
    let join = tokio::spawn(async move { serve(s, driving, listener, tls, shutdown).await });
    Ok(Running {
        addr,
        shared,
        stop,
        join,
    })
}

/// Runs the service on `listener` until `shutdown` completes.
pub async fn run(
    config: ServiceConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServiceError> {
    let (shared, driving) = prepare(&config, listener.local_addr()?)?;
    let stop = shared.stop.clone();
    let serving = serve(shared, driving, listener, config.tls.clone(), stop.clone());
    tokio::pin!(serving);
    tokio::select! {
        r = &mut serving => r,
        () = shutdown => {
            stop.cancel();
            serving.await
        }
    }
}

/// The jobs page's URL for a service whose API listens on `addr`: as configured, or the
/// address itself unless it is every interface's.
pub fn webui_url(config: &ServiceConfig, addr: SocketAddr) -> Option<String> {
    if config.webui_url.is_some() {
        return config.webui_url.clone();
    }
    let scheme = if config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    (!addr.ip().is_unspecified()).then(|| format!("{scheme}://{addr}/"))
}

/// Opens the store, rebuilds the book and sets up the driver; `addr` is the API's.
fn prepare(
    config: &ServiceConfig,
    addr: SocketAddr,
) -> Result<(Arc<Shared>, Driving), ServiceError> {
    std::fs::create_dir_all(&config.data_dir)?;
    let store = Store::open(&config.data_dir.join(STORE_FILE))?;
    let aging_ms = config.aging.as_millis().max(1) as Millis;
    let mut book = store.load(aging_ms, now_ms())?;
    book.set_order(config.order);
    book.set_user_limits(
        config
            .users
            .as_ref()
            .map_or_else(Default::default, |u| u.limits(None))
            .with_default(config.max_running_per_user),
    );
    let framework_id = store.framework_id()?;
    let in_flight = book.in_flight();
    let connection = Connection {
        ca_file: config.ca_file.clone(),
        token: config.token.clone(),
    };
    let client =
        CoordinatorClient::connect(&config.coordinator, Duration::from_secs(10), &connection)?;
    let stop = CancellationToken::new();
    let writer = Writer::start(store, stop.clone())?;
    let shared = Arc::new(Shared {
        book: Mutex::new(book),
        writer,
        client,
        framework_id: Mutex::new(None),
        to_check: Mutex::new((!in_flight.is_empty()).then_some(in_flight)),
        last_offers_ms: AtomicU64::new(0),
        api_token: config.api_token.clone(),
        users: config.users.clone(),
        events: tokio::sync::broadcast::channel(EVENT_BUFFER).0,
        stop,
    });
    let mut dc = DriverConfig::new(&config.coordinator, &config.name, config.role.clone())
        .gpu_resources(true);
    dc.ca_file = config.ca_file.clone();
    dc.token = config.token.clone();
    dc.framework_id = framework_id;
    dc.failover_timeout = config.failover_timeout;
    dc.webui_url = webui_url(config, addr);
    // The jobs must outlive this process: a restarted service takes them over.
    dc.unregister_on_stop = false;
    let driver = Driver::new(dc.clone(), JobsScheduler::new(shared.clone()))?;
    Ok((shared, Driving { driver, config: dc }))
}

/// The driver, and its configuration to start another with.
struct Driving {
    driver: Driver<JobsScheduler>,
    config: DriverConfig,
}

/// Runs the driver until shutdown. When the coordinator has removed the framework (it was torn
/// down, or the service was away longer than its failover timeout), its tasks are gone: the
/// attempts in flight end as lost, and the service registers as a new framework and carries
/// on, rather than stopping for good.
async fn drive(
    shared: &Arc<Shared>,
    driving: Driving,
    stop: &CancellationToken,
) -> Result<(), SdkError> {
    let Driving { mut driver, config } = driving;
    loop {
        match driver.run_until(stop.clone().cancelled_owned()).await {
            Err(SdkError::FrameworkRemoved(why)) if !stop.is_cancelled() => {
                tracing::warn!(reason = %why, "the coordinator removed the framework; registering anew");
                shared.framework_removed();
                let mut fresh = config.clone();
                fresh.framework_id = None;
                driver = Driver::new(fresh, JobsScheduler::new(shared.clone()))?;
            }
            other => return other.map(|_| ()),
        }
    }
}

async fn serve(
    shared: Arc<Shared>,
    driving: Driving,
    listener: TcpListener,
    tls: Option<parley_tls::ServerTls>,
    stop: CancellationToken,
) -> Result<(), ServiceError> {
    let app = crate::api::router(shared.clone());
    let http = {
        let stop = stop.clone();
        tokio::spawn(parley_tls::serve(
            listener,
            tls,
            app,
            stop.cancelled_owned(),
        ))
    };
    let ticker = tokio::spawn(tick(shared.clone(), stop.clone()));
    let driven = drive(&shared, driving, &stop).await;
    // The driver ends on shutdown, or on an error it cannot get past: either way, stop all.
    stop.cancel();
    let _ = ticker.await;
    // The ends that waited are stored before the service stops.
    shared.writer.close();
    let served = http.await;
    if shared.writer.failed() {
        return Err(ServiceError::StoreFailed);
    }
    driven?;
    match served {
        Ok(r) => Ok(r?),
        Err(e) => Err(ServiceError::Io(std::io::Error::other(e.to_string()))),
    }
}

/// The service's clock: kills tasks past their time limit, asks the coordinator about tasks
/// launched before a restart, and revives offers when work is waiting but none come.
async fn tick(shared: Arc<Shared>, stop: CancellationToken) {
    let mut last_revive: Millis = 0;
    let mut last_sweep: Millis = 0;
    let mut last_check: Millis = 0;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(TICK) => {}
        }
        let Some(framework_id) = shared.framework_id() else {
            continue;
        };
        let now = now_ms();
        // Time limits, periodic runs, rolling updates: stored before their kills are sent.
        let mut kills = match shared.apply(Input::Tick, now) {
            Ok(applied) => applied.stored().await.unwrap_or_default(),
            Err(e) => {
                tracing::error!(error = %e, "the book refused a tick");
                Vec::new()
            }
        };
        let pending = shared.lock_book().pending(now);
        // A kill that failed, or was asked before the service had registered again after a
        // restart, is sent again: a stopped job's tasks must not run on.
        if now.saturating_sub(last_sweep) >= SWEEP_MS {
            last_sweep = now;
            kills.extend(shared.lock_book().stopped_running());
        }
        shared.kill(&kills).await;
        // At most once a second: a task the coordinator does not know yet is asked about
        // again, and its agents may take a while to come back.
        let check = if now.saturating_sub(last_check) >= 1000 {
            shared
                .to_check
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
        } else {
            None
        };
        if check.is_some() {
            last_check = now;
        }
        let mut again = Vec::new();
        for task in check.unwrap_or_default() {
            if reconcile_one(&shared, framework_id, &task).await {
                again.push(task);
            }
        }
        if !again.is_empty() {
            let mut to_check = shared
                .to_check
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            to_check.get_or_insert_with(Vec::new).extend(again);
        }
        let quiet = now.saturating_sub(shared.last_offers_ms.load(Ordering::Relaxed));
        if pending > 0 && quiet >= 1000 && now.saturating_sub(last_revive) >= 1000 {
            last_revive = now;
            if let Err(e) = shared
                .client
                .revive(framework_id, &ReviveRequest::default())
                .await
            {
                tracing::warn!(error = %e, "revive failed");
            }
        }
    }
}

/// What the coordinator's answer to a reconcile of one task launched before a restart means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reconciled {
    /// It knows the task: its latest status comes as an update.
    Known,
    /// It does not know the task *yet* (`409 task_not_yet_known`: agents it knew before its
    /// own restart or failover have still to register again, and the task may run on one of
    /// them): ask again at a later tick, never count it lost, or it could run twice.
    AskAgain,
    /// It does not know the task (`404 task_not_found`): the launch never started, so its
    /// index runs again under the next attempt's id.
    NeverStarted,
    /// Any other failure: logged; the next restart asks again.
    Failed,
}

impl Reconciled {
    fn of(answer: &Result<(), SdkError>) -> Self {
        match answer {
            Ok(()) => Self::Known,
            Err(e) if e.code() == Some("task_not_yet_known") => Self::AskAgain,
            Err(SdkError::Rejected {
                status: 404, code, ..
            }) if code == "task_not_found" => Self::NeverStarted,
            Err(_) => Self::Failed,
        }
    }
}

/// Asks about one task launched before a restart ([`Reconciled`]); returns whether to ask
/// again at a later tick.
async fn reconcile_one(shared: &Shared, framework_id: FrameworkId, task: &TaskId) -> bool {
    let answer = shared
        .client
        .reconcile(framework_id, vec![task.clone()])
        .await;
    match Reconciled::of(&answer) {
        Reconciled::Known => false,
        Reconciled::AskAgain => true,
        Reconciled::NeverStarted => {
            tracing::warn!(task_id = %task, "a launch from before the restart never started");
            let input = Input::NotLaunched {
                tasks: vec![task.clone()],
                why: "unknown to the coordinator after a restart".into(),
            };
            if let Ok(applied) = shared.apply(input, now_ms()) {
                if let Err(e) = applied.stored().await {
                    tracing::error!(error = %e, "cannot record an attempt");
                }
            }
            false
        }
        Reconciled::Failed => {
            if let Err(e) = answer {
                tracing::warn!(task_id = %task, error = %e, "reconciling a task failed");
            }
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(status: u16, code: &str) -> Result<(), SdkError> {
        Err(SdkError::Rejected {
            status,
            code: code.into(),
            message: "m".into(),
        })
    }

    #[test]
    fn a_task_not_yet_known_is_asked_about_again_and_only_not_found_means_never_started() {
        assert_eq!(Reconciled::of(&Ok(())), Reconciled::Known);
        assert_eq!(
            Reconciled::of(&rejected(409, "task_not_yet_known")),
            Reconciled::AskAgain
        );
        assert_eq!(
            Reconciled::of(&rejected(404, "task_not_found")),
            Reconciled::NeverStarted
        );
        // Another 404 (the framework itself is unknown) or another 409 proves nothing of the
        // task: it is not taken for a launch that never started.
        assert_eq!(
            Reconciled::of(&rejected(404, "framework_not_found")),
            Reconciled::Failed
        );
        assert_eq!(
            Reconciled::of(&rejected(409, "framework_removed")),
            Reconciled::Failed
        );
        let server = Err(SdkError::Server {
            status: 503,
            message: "no leader".into(),
        });
        assert_eq!(Reconciled::of(&server), Reconciled::Failed);
    }
}
