//! An HTTP proxy between ebb and moto's EC2 server. It sees each EC2 query-protocol call by its
//! `Action` form field, counts the calls that reach the cloud, can hold one call at a trap for
//! the test (to kill `ebb tick` there, or to do something while the call is on the wire), and
//! can answer a chosen action with an injected EC2 error, or never, instead of forwarding it,
//! or forward it and lose the cloud's answer (the connection closed, or a 500 in its place).

use super::moto::Fixture;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;

/// The calls that change an instance, or an Auto Scaling group's capacity (a query-protocol
/// call too, on the same endpoint); the proxy keeps the order in which they arrive.
pub const MUTATING: [&str; 5] = [
    "StopInstances",
    "StartInstances",
    "CreateTags",
    "DeleteTags",
    "UpdateAutoScalingGroup",
];

/// An error EC2 answers with, or a call it never answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// 503 `RequestLimitExceeded`: retried by the SDK.
    Throttling,
    /// 500 `InternalError`: retried by the SDK.
    ServerError,
    /// 403 `UnauthorizedOperation`, as after an IAM change.
    AccessDenied,
    /// 500 `InsufficientInstanceCapacity`, what a start meets when the zone is full.
    InsufficientCapacity,
    /// 400 `InvalidInstanceID.NotFound`, EC2's eventual consistency.
    NotFound,
    /// No answer at all: the request hangs until the client gives up.
    Timeout,
    /// Forwarded, and carried out by the cloud; its answer is dropped and the connection
    /// closed.
    AnswerDropped,
    /// Forwarded, and carried out by the cloud; answered 500 `InternalError` in its place.
    ServerErrorAfter,
}

impl Fault {
    /// The HTTP status and EC2 error code, or `None` for a hang.
    fn answer(self) -> Option<(u16, &'static str)> {
        match self {
            Fault::Throttling => Some((503, "RequestLimitExceeded")),
            Fault::ServerError => Some((500, "InternalError")),
            Fault::AccessDenied => Some((403, "UnauthorizedOperation")),
            Fault::InsufficientCapacity => Some((500, "InsufficientInstanceCapacity")),
            Fault::NotFound => Some((400, "InvalidInstanceID.NotFound")),
            Fault::ServerErrorAfter => Some((500, "InternalError")),
            Fault::Timeout | Fault::AnswerDropped => None,
        }
    }

    /// Whether the call reaches the cloud before the fault.
    fn forwards(self) -> bool {
        matches!(self, Fault::AnswerDropped | Fault::ServerErrorAfter)
    }
}

/// Errors for the next requests of one action.
#[derive(Debug, Clone, Copy)]
pub struct Injection {
    /// The EC2 action.
    pub action: &'static str,
    /// What it gets instead of an answer from the cloud.
    pub fault: Fault,
    /// How many requests (attempts, retries included) get it.
    pub times: usize,
}

/// What a trapped call does once the test has been told.
pub enum Hold {
    /// Hangs for good: the test kills the caller.
    Forever,
    /// Goes on when the sender is used or dropped.
    Until(oneshot::Receiver<()>),
}

/// A trap for the next call of `action`.
pub struct Trap {
    /// The EC2 action.
    pub action: &'static str,
    /// `true`: after the cloud carried it out; `false`: before it is forwarded.
    pub through: bool,
    /// Told when the call reaches the trap.
    pub fire: oneshot::Sender<()>,
    /// What the call does then.
    pub hold: Hold,
}

/// The proxy's state, shared with the test.
#[derive(Default)]
pub struct Ec2Proxy {
    upstream: String,
    /// `(action, instance)` → calls that the cloud carried out.
    calls: Mutex<HashMap<(String, String), usize>>,
    /// Every request by action, injected ones included (attempts, not calls).
    requests: Mutex<HashMap<String, usize>>,
    /// The mutating calls in the order they arrived from ebb, whatever became of them.
    arrivals: Mutex<Vec<String>>,
    trap: Mutex<Option<Trap>>,
    /// Injections in force, each with the requests it has answered.
    injections: Mutex<Vec<(Injection, usize)>>,
}

impl Ec2Proxy {
    /// Starts a proxy to `upstream` on a free local port; returns it and its endpoint URL.
    pub async fn start(upstream: &str) -> (Arc<Ec2Proxy>, String) {
        let proxy = Arc::new(Ec2Proxy {
            upstream: upstream.to_string(),
            ..Ec2Proxy::default()
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let app = axum::Router::new()
            .fallback(relay)
            .with_state(proxy.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (proxy, endpoint)
    }

    /// Sets a trap (replacing any unfired one).
    pub fn trap(&self, trap: Trap) {
        *self.trap.lock().unwrap() = Some(trap);
    }

    /// Removes an unfired trap.
    pub fn disarm(&self) {
        self.trap.lock().unwrap().take();
    }

    /// Injects errors, beside the injections already in force (for other actions).
    pub fn inject(&self, injection: Injection) {
        self.injections.lock().unwrap().push((injection, 0));
    }

    /// Ends the injections that have answered a request; returns them, each with how many
    /// requests it answered.
    pub fn retire(&self) -> Vec<(Injection, usize)> {
        let mut injections = self.injections.lock().unwrap();
        let (fired, waiting) = injections.drain(..).partition(|(_, n)| *n > 0);
        *injections = waiting;
        fired
    }

    /// The injections that have not answered any request yet.
    pub fn waiting(&self) -> Vec<Injection> {
        self.injections
            .lock()
            .unwrap()
            .iter()
            .map(|(i, _)| *i)
            .collect()
    }

    /// Ends every injection.
    pub fn clear(&self) {
        self.injections.lock().unwrap().clear();
    }

    /// Calls of `action` on `id` (an instance, or a group by name) that the cloud carried out.
    pub fn calls(&self, action: &str, id: &str) -> usize {
        self.calls
            .lock()
            .unwrap()
            .get(&(action.to_string(), id.to_string()))
            .copied()
            .unwrap_or(0)
    }

    /// Requests of `action` that reached the proxy, retries and injected ones included.
    pub fn requests(&self, action: &str) -> usize {
        self.requests
            .lock()
            .unwrap()
            .get(action)
            .copied()
            .unwrap_or(0)
    }

    /// The mutating calls that reached the proxy, in order.
    pub fn arrivals(&self) -> Vec<String> {
        self.arrivals.lock().unwrap().clone()
    }

    /// The injected answer for a request of `action`, if one is due.
    fn fault_for(&self, action: &str) -> Option<Fault> {
        let mut injections = self.injections.lock().unwrap();
        let (due, answered) = injections
            .iter_mut()
            .find(|(i, _)| i.action == action && i.times > 0)?;
        due.times -= 1;
        *answered += 1;
        Some(due.fault)
    }
}

/// The form fields of a query-protocol request; none for other protocols (CloudWatch's).
fn form(body: &[u8]) -> Vec<(String, String)> {
    let Ok(text) = std::str::from_utf8(body) else {
        return Vec::new();
    };
    match reqwest::Url::parse(&format!("http://form/?{text}")) {
        Ok(url) => url.query_pairs().into_owned().collect(),
        Err(_) => Vec::new(),
    }
}

/// An EC2 error answer.
fn error(status: u16, code: &str) -> Response {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code>\
         <Message>injected by the test</Message></Error></Errors>\
         <RequestID>injected-{code}</RequestID></Response>"
    );
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = axum::http::StatusCode::from_u16(status).unwrap();
    response
        .headers_mut()
        .insert("content-type", "text/xml".parse().unwrap());
    response
}

/// An answer that never arrives whole: its body fails at once, so the server closes the
/// connection.
fn dropped() -> Response {
    let lost = std::io::Error::other("answer dropped by the test");
    let body = futures_util::stream::once(async move { Err::<axum::body::Bytes, _>(lost) });
    Response::new(Body::from_stream(body))
}

async fn relay(State(proxy): State<Arc<Ec2Proxy>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let pairs = form(&body);
    let action = pairs
        .iter()
        .find(|(k, _)| k == "Action")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    *proxy
        .requests
        .lock()
        .unwrap()
        .entry(action.clone())
        .or_default() += 1;
    if MUTATING.contains(&action.as_str()) {
        proxy.arrivals.lock().unwrap().push(action.clone());
    }
    let fault = proxy.fault_for(&action);
    if let Some(fault) = fault.filter(|f| !f.forwards()) {
        match fault.answer() {
            Some((status, code)) => return error(status, code),
            None => std::future::pending::<()>().await,
        }
    }
    let trap = {
        let mut trap = proxy.trap.lock().unwrap();
        match trap.take() {
            Some(t) if t.action == action => Some(t),
            other => {
                *trap = other;
                None
            }
        }
    };
    let (before, after) = match trap {
        Some(t) if t.through => (None, Some(t)),
        Some(t) => (Some(t), None),
        None => (None, None),
    };
    if let Some(trap) = before {
        hold(trap).await;
    }
    // Forwarded and counted in a task of its own: when ebb is killed, hyper drops this handler,
    // but a call already on its way to the cloud still happens and must still be counted.
    let (method, uri, headers) = (
        parts.method.clone(),
        parts.uri.clone(),
        parts.headers.clone(),
    );
    let counter = proxy.clone();
    let answer = tokio::spawn(async move {
        let mut upstream =
            reqwest::Client::new().request(method, format!("{}{uri}", counter.upstream));
        for (name, value) in &headers {
            if name != "host" && name != "content-length" {
                upstream = upstream.header(name, value);
            }
        }
        let answer = upstream.body(body.to_vec()).send().await.unwrap();
        if answer.status().is_success() && MUTATING.contains(&action.as_str()) {
            let mut calls = counter.calls.lock().unwrap();
            for (key, id) in &pairs {
                if key.starts_with("InstanceId.")
                    || key.starts_with("ResourceId.")
                    || key == "AutoScalingGroupName"
                {
                    *calls.entry((action.clone(), id.clone())).or_default() += 1;
                }
            }
        }
        answer
    })
    .await
    .unwrap();
    if let Some(trap) = after {
        hold(trap).await;
    }
    if let Some(fault) = fault.filter(|f| f.forwards()) {
        return match fault.answer() {
            Some((status, code)) => error(status, code),
            None => dropped(),
        };
    }
    let status = answer.status();
    let headers = answer.headers().clone();
    let mut response = Response::new(Body::from(answer.bytes().await.unwrap()));
    *response.status_mut() = status;
    for (name, value) in &headers {
        if name != "content-length" && name != "transfer-encoding" {
            response.headers_mut().insert(name, value.clone());
        }
    }
    response
}

/// Tells the test that `trap` fired, then holds the call as the trap says.
async fn hold(trap: Trap) {
    let _ = trap.fire.send(());
    match trap.hold {
        Hold::Forever => std::future::pending::<()>().await,
        Hold::Until(resume) => {
            let _ = resume.await;
        }
    }
}

/// `ebb tick` as a process, through the proxy.
pub struct Binary<'a> {
    /// The database.
    pub url: String,
    /// The test's region and management tag.
    pub f: &'a Fixture,
    /// The proxy it goes through.
    pub proxy: Arc<Ec2Proxy>,
    /// The proxy's endpoint.
    pub endpoint: String,
    /// The policy files.
    pub policies: tempfile::TempDir,
}

impl Binary<'_> {
    /// Runs `ebb tick --at AT`; with `trap`, kills it with SIGKILL once the call it names
    /// reaches the trap, after stopping `person` at the cloud if given. Returns whether the
    /// trap fired (and the run was killed).
    pub async fn tick(
        &self,
        at: &str,
        trap: Option<(&'static str, bool)>,
        person: Option<&str>,
    ) -> bool {
        let (fire, mut fired) = oneshot::channel();
        if let Some((action, through)) = trap {
            self.proxy.trap(Trap {
                action,
                through,
                fire,
                hold: Hold::Forever,
            });
        }
        let mut child = Command::new(env!("CARGO_BIN_EXE_ebb"))
            .args(["tick", "--at", at])
            .env("DATABASE_URL", &self.url)
            .env("AWS_ENDPOINT_URL", &self.endpoint)
            .env("EBB_POLICIES", self.policies.path())
            .env("EBB_REGIONS", self.f.region)
            .env("EBB_MANAGED_TAG", format!("ebb:managed={}", self.f.managed))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let every = Duration::from_millis(2);
        let ended = super::eventually(Duration::from_secs(60), every, async || {
            if child.try_wait().unwrap().is_some() {
                return Some(false);
            }
            if trap.is_some() && fired.try_recv().is_ok() {
                if let Some(id) = person {
                    stop_as_a_person(self.f, id).await;
                }
                child.kill().unwrap();
                child.wait().unwrap();
                return Some(true);
            }
            None
        });
        let killed = ended.await.unwrap_or_else(|| panic!("tick at {at} hangs"));
        self.proxy.disarm();
        killed
    }
}

/// Stops `id` straight at the cloud, not through ebb or its proxy.
pub async fn stop_as_a_person(f: &Fixture, id: &str) {
    f.ec2
        .stop_instances()
        .instance_ids(id)
        .send()
        .await
        .unwrap();
}
