//! The API's and the console's HTTP listener: one that no client can hold open.
//!
//! `axum::serve` runs hyper without a timer, so a connection that sends nothing, or trickles
//! its headers, stays open for ever; enough of them use up the process's file descriptors,
//! and with them the leader's Postgres and AWS connections. Here each connection has a
//! watchdog on tokio's clock that closes it when, with no request in flight:
//!
//! - a new connection has not sent a whole request head within the header timeout;
//! - a kept-alive connection has sent nothing for the idle timeout since its last response,
//!   or has begun its next request head and not finished it within the header timeout;
//! - a response body being sent (a streamed export) has had nothing written for the idle
//!   timeout: a slow reader keeps it open as long as it reads, a stalled one does not.
//!
//! A request in flight, until its response head, is bounded by the routes' own time limit, not
//! here. At most
//! [`HttpLimits::max_connections`] connections are served at once. Past that, up to
//! [`PROBE_SLOTS`] more are accepted for the health probes alone (`/healthz`, `/readyz`),
//! each closed if its request head is not in within [`PROBE_HEADER_TIMEOUT`]: a Kubernetes
//! probe with a 1 s timeout is answered while other clients hold every slot, so a flood of
//! idle connections does not restart the pod or move leadership. Any other request on such a
//! connection is answered 503 with `Retry-After`, and the connection closed. Beyond those,
//! new connections wait in the kernel's accept queue until one closes, which the timeouts
//! above make soon.

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::time::Instant;

/// How long the listener waits after a failed accept (out of file descriptors, say) before it
/// accepts again, so that it does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(250);

/// Connections accepted past the cap for the health probes alone.
pub const PROBE_SLOTS: usize = 256;

/// How long a connection accepted past the cap may take to send its request head: a probe
/// sends it at once.
pub const PROBE_HEADER_TIMEOUT: Duration = Duration::from_secs(1);

/// The paths answered on a connection accepted past the cap.
const PROBE_PATHS: [&str; 2] = ["/healthz", "/readyz"];

/// How long a client may hold a connection, and how many it may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// How long a request head may take to arrive: from the connection's opening, or from the
    /// first byte of a later request on a kept-alive connection.
    pub header_timeout: Duration,
    /// How long a kept-alive connection may wait, with nothing sent, for its next request.
    pub idle_timeout: Duration,
    /// How many connections may be open at once.
    pub max_connections: u32,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 512,
        }
    }
}

/// Serves `routes` on `listener` within `limits` until `shutdown` resolves; then stops
/// accepting, lets each request in flight finish, and returns once every connection is closed.
pub async fn serve(
    listener: TcpListener,
    routes: Router,
    limits: HttpLimits,
    shutdown: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections as usize));
    let probe_slots = Arc::new(Semaphore::new(PROBE_SLOTS));
    let probes = routes.clone().layer(axum::middleware::from_fn(probes_only));
    let (stop, stopping) = watch::channel(false);
    let mut shutdown = pin!(shutdown);
    loop {
        // A slot of the cap when one is free; otherwise one for the probes.
        let (slot, probes_only) = tokio::select! {
            biased;
            slot = slots.clone().acquire_owned() => (slot, false),
            slot = probe_slots.clone().acquire_owned() => (slot, true),
            () = &mut shutdown => break,
        };
        let slot = slot.expect("the semaphores are never closed");
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        match accepted {
            Ok((stream, peer)) => {
                let (routes, limits) = match probes_only {
                    false => (routes.clone(), limits),
                    true => (probes.clone(), probe_limits(limits)),
                };
                let stopping = stopping.clone();
                tokio::spawn(async move {
                    connection(stream, peer, routes, limits, !probes_only, stopping).await;
                    drop(slot);
                });
            }
            Err(err) => {
                tracing::warn!(error = %err, "the API cannot accept a connection");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
    let _ = stop.send(true);
    // Every connection holds a slot until it closes.
    let _ = slots.acquire_many(limits.max_connections).await;
    let _ = probe_slots.acquire_many(PROBE_SLOTS as u32).await;
}

/// The limits of a connection accepted past the cap: its head within
/// [`PROBE_HEADER_TIMEOUT`].
fn probe_limits(limits: HttpLimits) -> HttpLimits {
    HttpLimits {
        header_timeout: limits.header_timeout.min(PROBE_HEADER_TIMEOUT),
        ..limits
    }
}

/// On a connection accepted past the cap: the probes are answered, anything else is told to
/// come back.
async fn probes_only(request: Request, next: Next) -> Response {
    if PROBE_PATHS.contains(&request.uri().path()) {
        return next.run(request).await;
    }
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::RETRY_AFTER, "1")],
        "ebb's API has every connection it serves at once open (EBB_HTTP_MAX_CONNECTIONS); try again shortly\n",
    )
        .into_response()
}

/// Serves one connection from `peer` until it closes (after one answer unless `keep_alive`), its
/// watchdog expires, or the listener stops.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    routes: Router,
    limits: HttpLimits,
    keep_alive: bool,
    mut stopping: watch::Receiver<bool>,
) {
    let activity = Arc::new(Activity::new(Instant::now()));
    let router = TowerToHyperService::new(routes);
    let on_request = activity.clone();
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        // Where it came from, as axum::serve tells it: for the per-address budgets.
        request.extensions_mut().insert(ConnectInfo(peer));
        let activity = on_request.clone();
        let busy = Busy::begin(activity.clone());
        let answer = hyper::service::Service::call(&router, request);
        async move {
            let response = answer.await;
            let sending = SendingGuard::begin(activity);
            drop(busy);
            response.map(|r| {
                r.map(|body| {
                    Body::new(Sending {
                        body,
                        _sending: sending,
                    })
                })
            })
        }
    });
    let io = TokioIo::new(Watched {
        inner: stream,
        activity: activity.clone(),
    });
    // The watchdog keeps time; hyper's own header timer would also cut kept-alive connections
    // at the header timeout.
    let conn = http1::Builder::new()
        .keep_alive(keep_alive)
        .header_read_timeout(None::<Duration>)
        .serve_connection(io, service);
    let mut conn = pin!(conn);
    tokio::select! {
        result = conn.as_mut() => {
            if let Err(err) = result {
                tracing::debug!(error = %err, "API connection ended");
            }
            return;
        }
        () = activity.expired(limits) => {
            tracing::debug!("API connection closed: no request within its time");
            return;
        }
        _ = stopping.wait_for(|stop| *stop) => {}
    }
    // Stopping: the request in flight, if any, is answered; then the connection closes.
    conn.as_mut().graceful_shutdown();
    if let Err(err) = conn.await {
        tracing::debug!(error = %err, "API connection ended");
    }
}

/// What a connection has done lately, for its watchdog.
#[derive(Debug)]
struct Activity(Mutex<Moments>);

#[derive(Debug)]
struct Moments {
    /// Requests being answered, until their response heads.
    busy: usize,
    /// Response bodies being sent.
    sending: usize,
    /// When bytes were last written to the connection.
    last_write: Instant,
    /// When the connection opened, or its last answer was given.
    since: Instant,
    /// Whether it has been answered before (it is kept alive).
    answered: bool,
    /// The first byte read since `since`, with no request in flight.
    first_read: Option<Instant>,
}

impl Activity {
    fn new(opened: Instant) -> Self {
        Activity(Mutex::new(Moments {
            busy: 0,
            sending: 0,
            last_write: opened,
            since: opened,
            answered: false,
            first_read: None,
        }))
    }

    fn moments(&self) -> std::sync::MutexGuard<'_, Moments> {
        // The lock guards plain values, consistent after any panic.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// When the connection is to be closed, if nothing changes; none with a request in flight.
    fn deadline(&self, limits: HttpLimits) -> Option<Instant> {
        let m = self.moments();
        if m.busy > 0 {
            return None;
        }
        if m.sending > 0 {
            return Some(m.last_write.max(m.since) + limits.idle_timeout);
        }
        Some(match (m.answered, m.first_read) {
            (false, _) => m.since + limits.header_timeout,
            (true, Some(first)) => first + limits.header_timeout,
            (true, None) => m.since + limits.idle_timeout,
        })
    }

    /// Resolves when the connection has been quiet past its deadline.
    async fn expired(&self, limits: HttpLimits) {
        loop {
            match self.deadline(limits) {
                Some(at) if at <= Instant::now() => return,
                Some(at) => tokio::time::sleep_until(at).await,
                // A request in flight: look again later.
                None => tokio::time::sleep(limits.header_timeout).await,
            }
        }
    }

    fn read(&self) {
        let mut m = self.moments();
        if m.busy == 0 && m.first_read.is_none() {
            m.first_read = Some(Instant::now());
        }
    }

    fn wrote(&self) {
        self.moments().last_write = Instant::now();
    }
}

/// A response body being sent, from its head to its end (or its being dropped).
struct SendingGuard(Arc<Activity>);

impl SendingGuard {
    fn begin(activity: Arc<Activity>) -> Self {
        activity.moments().sending += 1;
        SendingGuard(activity)
    }
}

impl Drop for SendingGuard {
    fn drop(&mut self) {
        let mut m = self.0.moments();
        m.sending -= 1;
        m.since = Instant::now();
    }
}

/// A response body that holds its [`SendingGuard`] until it is sent.
struct Sending {
    body: Body,
    _sending: SendingGuard,
}

impl http_body::Body for Sending {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// A request in flight on a connection, from its head to its answer's head.
struct Busy(Arc<Activity>);

impl Busy {
    fn begin(activity: Arc<Activity>) -> Self {
        activity.moments().busy += 1;
        Busy(activity)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let mut m = self.0.moments();
        m.busy -= 1;
        m.since = Instant::now();
        m.answered = true;
        m.first_read = None;
    }
}

/// A connection's stream that tells its [`Activity`] when bytes arrive.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.read();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.wrote();
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.wrote();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const LIMITS: HttpLimits = HttpLimits {
        header_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(60),
        max_connections: 512,
    };

    /// A listener serving `/readyz`, on a local port, until the returned sender is dropped.
    async fn listening(
        limits: HttpLimits,
    ) -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>) {
        let routes = Router::new().route("/readyz", get(|| async { "ready" }));
        listening_to(routes, limits).await
    }

    /// A listener serving `routes`, on a local port, until the returned sender is dropped.
    async fn listening_to(
        routes: Router,
        limits: HttpLimits,
    ) -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(serve(listener, routes, limits, async move {
            let _ = stopped.await;
        }));
        (addr, stop)
    }

    /// Asks `/readyz` on `stream` and reads the answer's head.
    async fn ask_ready(stream: &mut TcpStream) -> String {
        stream
            .write_all(b"GET /readyz HTTP/1.1\r\nHost: ebb\r\n\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        let mut chunk = [0u8; 1024];
        while !answer.ends_with(b"ready") {
            match stream.read(&mut chunk).await.unwrap() {
                0 => break,
                n => answer.extend_from_slice(&chunk[..n]),
            }
        }
        String::from_utf8_lossy(&answer).into_owned()
    }

    /// Reads until the server closes `stream`.
    async fn closed(stream: &mut TcpStream) {
        let mut rest = [0u8; 256];
        while matches!(stream.read(&mut rest).await, Ok(n) if n > 0) {}
    }

    // On the real clock, unlike the tests beside it: 200 real connections on tokio's paused
    // clock let the clock jump ahead whenever the loaded machine leaves the runtime idle
    // between two sockets' readiness, so the connections' header timers started at times the
    // test cannot know. The header timeout is short and the idle timeout long, so a close
    // within half the idle timeout can only be the header timeout's.
    #[tokio::test]
    async fn connections_that_never_finish_their_headers_are_closed_while_it_answers() {
        let limits = HttpLimits {
            header_timeout: Duration::from_secs(1),
            ..LIMITS
        };
        let (addr, _stop) = listening(limits).await;
        let opened = Instant::now();
        let mut stalled = Vec::new();
        for _ in 0..200 {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            stream
                .write_all(b"GET /readyz HTTP/1.1\r\nHost: ebb\r\nX-Slow: ")
                .await
                .unwrap();
            stalled.push(stream);
        }
        let mut fresh = TcpStream::connect(addr).await.unwrap();
        let answer = ask_ready(&mut fresh).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("ready"), "{answer}");

        let all_closed = async {
            for stream in &mut stalled {
                closed(stream).await;
            }
        };
        tokio::time::timeout(limits.idle_timeout / 2, all_closed)
            .await
            .expect("connections that never finish their headers are closed");
        let took = opened.elapsed();
        assert!(took >= limits.header_timeout, "closed after {took:?}");
        // Still answering, on a new connection.
        let mut after = TcpStream::connect(addr).await.unwrap();
        assert!(ask_ready(&mut after).await.starts_with("HTTP/1.1 200"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_connection_is_closed_at_the_header_timeout() {
        let (addr, _stop) = listening(LIMITS).await;
        let opened = Instant::now();
        let mut silent = TcpStream::connect(addr).await.unwrap();
        tokio::time::timeout(LIMITS.idle_timeout, closed(&mut silent))
            .await
            .expect("a connection that sends nothing is closed");
        assert!(opened.elapsed() >= LIMITS.header_timeout);
    }

    #[tokio::test(start_paused = true)]
    async fn a_kept_alive_connection_is_closed_when_idle_and_not_before() {
        let (addr, _stop) = listening(LIMITS).await;
        let mut kept = TcpStream::connect(addr).await.unwrap();
        assert!(ask_ready(&mut kept).await.starts_with("HTTP/1.1 200"));
        let answered = Instant::now();
        // Past the header timeout, within the idle one: a second request is still answered.
        tokio::time::sleep(LIMITS.header_timeout * 3).await;
        assert!(ask_ready(&mut kept).await.starts_with("HTTP/1.1 200"));
        let answered_again = Instant::now();
        assert!(answered_again - answered >= LIMITS.header_timeout * 3);
        tokio::time::timeout(LIMITS.idle_timeout * 2, closed(&mut kept))
            .await
            .expect("an idle kept-alive connection is closed");
        let idle = answered_again.elapsed();
        assert!(
            idle >= LIMITS.idle_timeout && idle <= LIMITS.idle_timeout + Duration::from_secs(1),
            "closed after {idle:?} idle"
        );
    }

    /// Asks `path` on a new connection to `addr` and reads the whole answer (the server
    /// closes connections accepted past the cap after one answer).
    async fn ask_once(addr: std::net::SocketAddr, path: &str) -> String {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let head = format!("GET {path} HTTP/1.1\r\nHost: ebb\r\n\r\n");
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.unwrap();
        String::from_utf8_lossy(&answer).into_owned()
    }

    // On the real clock with timeouts of an hour: were the probe to wait for a slot, it would
    // wait that hour, and the test's own minute would run out. Nothing here is timed.
    #[tokio::test]
    async fn probes_are_answered_while_other_clients_hold_every_slot() {
        let limits = HttpLimits {
            header_timeout: Duration::from_secs(3600),
            idle_timeout: Duration::from_secs(3600),
            max_connections: 512,
        };
        let (addr, _stop) = listening(limits).await;
        // 600 idle connections of another client: every slot of the cap taken, and more.
        let mut held = Vec::new();
        for _ in 0..600 {
            held.push(TcpStream::connect(addr).await.unwrap());
        }
        let within = Duration::from_secs(60);
        let answer = tokio::time::timeout(within, ask_once(addr, "/readyz"))
            .await
            .expect("the probe is answered while the cap is used up");
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("ready"), "{answer}");
        // Anything else past the cap is told to come back, not queued.
        let other = tokio::time::timeout(within, ask_once(addr, "/v1/instances"))
            .await
            .expect("answered, not queued");
        assert!(other.starts_with("HTTP/1.1 503"), "{other}");
        assert!(other.to_lowercase().contains("retry-after: 1"), "{other}");
        // The served connections are still open: the cap's slots are theirs.
        let mut first = held.swap_remove(0);
        assert!(ask_ready(&mut first).await.starts_with("HTTP/1.1 200"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_past_the_cap_that_sends_nothing_is_closed_at_the_probe_timeout() {
        let limits = HttpLimits {
            max_connections: 2,
            ..LIMITS
        };
        let (addr, _stop) = listening(limits).await;
        let _held = [
            TcpStream::connect(addr).await.unwrap(),
            TcpStream::connect(addr).await.unwrap(),
        ];
        let opened = Instant::now();
        let mut third = TcpStream::connect(addr).await.unwrap();
        tokio::time::timeout(LIMITS.header_timeout, closed(&mut third))
            .await
            .expect("closed before the cap's header timeout");
        assert!(opened.elapsed() >= PROBE_HEADER_TIMEOUT);
    }

    /// `/export`: `parts` parts of a streamed body, one every 30 s, then its end, or, when
    /// `stalls`, nothing more.
    fn export(parts: usize, stalls: bool) -> Router {
        let route = move || async move {
            let body = futures_util::stream::unfold(0, move |n| async move {
                if n == parts {
                    if stalls {
                        std::future::pending::<()>().await;
                    }
                    return None;
                }
                if n > 0 {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                }
                let part = Bytes::from(format!("part {n}\n"));
                Some((Ok::<_, std::io::Error>(part), n + 1))
            });
            Body::from_stream(body)
        };
        Router::new().route("/export", get(route))
    }

    /// Asks `/export` on a new connection and reads until the body's end or the connection's.
    async fn download(addr: std::net::SocketAddr) -> String {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /export HTTP/1.1\r\nHost: ebb\r\n\r\n")
            .await
            .unwrap();
        let mut got = Vec::new();
        let mut chunk = [0u8; 1024];
        while !got.ends_with(b"0\r\n\r\n") {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&chunk[..n]),
            }
        }
        String::from_utf8_lossy(&got).into_owned()
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_streamed_for_longer_than_the_idle_timeout_is_sent_whole() {
        // Six parts over 150 s, well past the 60 s idle timeout, each within it of the last.
        let (addr, _stop) = listening_to(export(6, false), LIMITS).await;
        let asked = Instant::now();
        let got = download(addr).await;
        assert!(got.contains("part 5\n"), "{got}");
        assert!(got.ends_with("0\r\n\r\n"), "the body's end: {got}");
        assert!(asked.elapsed() >= Duration::from_secs(150));
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stops_making_progress_is_closed_at_the_idle_timeout() {
        let (addr, _stop) = listening_to(export(1, true), LIMITS).await;
        let asked = Instant::now();
        let got = tokio::time::timeout(LIMITS.idle_timeout * 3, download(addr))
            .await
            .expect("a stalled body's connection is closed");
        assert!(got.contains("part 0\n"), "{got}");
        assert!(!got.ends_with("0\r\n\r\n"), "not sent whole: {got}");
        assert!(asked.elapsed() >= LIMITS.idle_timeout);
    }

    #[tokio::test]
    async fn each_request_knows_the_address_it_came_from() {
        let routes = Router::new().route(
            "/readyz",
            get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move {
                format!("from {}: ready", peer.ip())
            }),
        );
        let (addr, _stop) = listening_to(routes, LIMITS).await;
        // Another loopback address than the listener's, as another host would be.
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
        let mut client = socket.connect(addr).await.unwrap();
        let answer = ask_ready(&mut client).await;
        assert!(answer.ends_with("from 127.0.0.2: ready"), "{answer}");
    }

    #[tokio::test(start_paused = true)]
    async fn stopping_answers_the_request_in_flight_then_returns() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (began, beginning) = tokio::sync::oneshot::channel::<()>();
        let began = Arc::new(Mutex::new(Some(began)));
        let routes = Router::new().route(
            "/readyz",
            get(move || {
                let began = began.lock().unwrap().take();
                async move {
                    if let Some(began) = began {
                        let _ = began.send(());
                    }
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    "ready"
                }
            }),
        );
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, routes, LIMITS, async move {
            let _ = stopped.await;
        }));
        let mut client = TcpStream::connect(addr).await.unwrap();
        let asked = tokio::spawn(async move { ask_ready(&mut client).await });
        beginning.await.unwrap();
        drop(stop);
        assert!(asked.await.unwrap().starts_with("HTTP/1.1 200"));
        server.await.unwrap();
    }
}
