//! `ebb serve` in this process, as `main` starts it, so that a test can pause its time (see
//! [`super::time`]) and wait on its ticks instead of on the wall clock.

use chrono::{DateTime, Utc};
use ebb::api::Tokens;
use ebb::clock::Clock;
use ebb::cloud::Provider;
use ebb::control::Control;
use ebb::reconcile::Reconciler;
use ebb::serve::{self, ServeError};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

/// `ebb serve`'s default tick deadline.
pub const DEADLINE: Duration = Duration::from_secs(300);

/// A serving replica.
pub struct Replica {
    /// Its control state: role and ticks.
    pub control: Arc<Control>,
    /// The API's base URL.
    pub api: String,
    task: JoinHandle<Result<(), ServeError>>,
    shutdown: oneshot::Sender<()>,
}

impl Replica {
    /// Serves `reconciler` as `name`, ticking every `interval` of `clock`'s time; the API
    /// listens on a free local port and accepts `tokens`.
    pub fn start<P: Provider + 'static>(
        name: &str,
        reconciler: Reconciler<P>,
        interval: Duration,
        clock: Clock,
        tokens: Tokens,
    ) -> Replica {
        Replica::start_with_deadline(name, reconciler, interval, clock, tokens, DEADLINE)
    }

    /// [`Replica::start`], abandoning a tick that runs past `deadline`.
    pub fn start_with_deadline<P: Provider + 'static>(
        name: &str,
        reconciler: Reconciler<P>,
        interval: Duration,
        clock: Clock,
        tokens: Tokens,
        deadline: Duration,
    ) -> Replica {
        let listen = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let config = serve::Config {
            name: name.to_string(),
            interval,
            deadline,
            clock,
            listen,
            http: Default::default(),
            tokens,
            checkpoints: None,
            limits: ebb::api::ApiLimits {
                public_reads: true,
                ..Default::default()
            },
            interruptions: None,
            prices: Default::default(),
            cloud: ebb::fleet::Cloud::Aws,
            events: None,
            trusted_proxies: Vec::new(),
            retention: serve::Retention {
                history: chrono::Duration::days(90),
                readings: chrono::Duration::days(35),
            },
        };
        let control = Arc::new(Control::default());
        let (shutdown, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve::run(
            reconciler,
            config,
            control.clone(),
            async move {
                let _ = stopped.await;
            },
        ));
        Replica {
            control,
            api: format!("http://{listen}"),
            task,
            shutdown,
        }
    }

    /// Follows the decision times of its ticks.
    pub fn ticks(&self) -> watch::Receiver<Option<DateTime<Utc>>> {
        self.control.ticks()
    }

    /// `GET path` on its API, parsed.
    pub async fn get(&self, path: &str) -> Value {
        self.get_with(path, None).await
    }

    /// `GET path` on its API with `token` (an admin's reads the errors in `/v1/status`), parsed.
    pub async fn get_as(&self, path: &str, token: &str) -> Value {
        self.get_with(path, Some(token)).await
    }

    async fn get_with(&self, path: &str, token: Option<&str>) -> Value {
        let request = http().get(format!("{}{path}", self.api));
        let request = match token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        request.send().await.unwrap().json().await.unwrap()
    }

    /// Ends it as SIGKILL would: its tick loop stops where it is and its leader session (if it
    /// led) is dropped. Its API task lingers until the runtime ends; nothing asks it anything.
    pub async fn kill(self) {
        self.task.abort();
        assert!(self.task.await.unwrap_err().is_cancelled());
    }

    /// Ends it as SIGTERM does: the tick in flight finishes, then it returns cleanly.
    pub async fn stop(self) {
        let _ = self.shutdown.send(());
        self.task.await.unwrap().unwrap();
    }
}

/// A client that keeps no idle connection open: an open one would hold the API's graceful
/// shutdown until its drain timeout, which paused time never reaches.
pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap()
}
