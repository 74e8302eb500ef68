//! A network partition between the leader and Postgres, mid-tick. Two `ebb serve` replicas run
//! in this process on paused time (see [`common::time`]); replica A reaches Postgres through a
//! TCP proxy the test controls, and each replica reaches moto's EC2 through a proxy of its own
//! that counts its calls ([`common::ec2_proxy`]). While A's first mutating call of a tick is on
//! the wire, the test cuts every connection of A at the TCP proxy (both sockets dropped, so
//! Postgres ends A's session and releases the lock) and refuses new ones. Then: B leads and
//! ticks within two tick intervals of the release, A makes no mutating call after the cut, and
//! every intent ends with exactly one outcome.

use crate::common;

use aws_config::BehaviorVersion;
use common::ec2_proxy::{Ec2Proxy, Hold, Trap};
use common::moto::{Fixture, Launch, G5};
use common::replica::Replica;
use common::time::{on_paused_time, watchdog};
use ebb::api::Tokens;
use ebb::clock::Clock;
use ebb::cloud::aws::AwsProvider;
use ebb::control::Control;
use ebb::reconcile::{Options, PolicySource, Reconciler};
use ebb::store::Store;
use sqlx::{Connection, PgConnection, PgPool};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Research boxes are outside hours at once (every date is skipped); a notebook is in the last
/// 15 minutes before its close at 19:00, so it gets a notice. A tick gives the notice first,
/// then stops: two mutating calls, the notice's first.
const POLICY: &str = r#"
calendars:
  every-day: {dates: ["2000-01-01..2999-12-31"]}
policies:
  - name: closed-research
    match: {tags: {team: research}}
    work_hours:
      timezone: UTC
      periods: [{days: mon-sun, start: "09:00", stop: "10:00"}]
      skip: [every-day]
      busy_defers_stop: false
  - name: notebooks
    match: {tags: {team: notebooks}}
    work_hours:
      timezone: UTC
      periods: [{days: mon-sun, start: "09:00", stop: "19:00"}]
      busy_defers_stop: false
    notify:
      before: 15m
"#;

const TICK: Duration = Duration::from_secs(60);

/// A TCP proxy to Postgres that the test can cut.
struct Cable {
    /// The address it listens on.
    addr: std::net::SocketAddr,
    cut: Arc<AtomicBool>,
    links: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Cable {
    async fn to(upstream: String) -> Cable {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = Arc::new(AtomicBool::new(false));
        let links: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let (is_cut, all) = (cut.clone(), links.clone());
        tokio::spawn(async move {
            loop {
                let (mut client, _) = listener.accept().await.unwrap();
                if is_cut.load(Ordering::SeqCst) {
                    // Refused: dropped at once.
                    continue;
                }
                let upstream = upstream.clone();
                all.lock().unwrap().push(tokio::spawn(async move {
                    let mut server = TcpStream::connect(&upstream).await.unwrap();
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }));
            }
        });
        Cable { addr, cut, links }
    }

    /// Drops both sockets of every connection, and refuses new ones from now on.
    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for link in self.links.lock().unwrap().drain(..) {
            link.abort();
        }
    }
}

/// The activations of a replica's tick loop that have finished.
fn finished(control: &Control) -> u64 {
    let statuses = control.tasks.statuses();
    statuses
        .get("tick_loop")
        .map_or(0, |s| s.activations - u64::from(s.running_since.is_some()))
}

/// Waits, yielding (time is paused), until `done`.
async fn until(mut done: impl FnMut() -> bool) {
    while !done() {
        tokio::task::yield_now().await;
    }
}

#[sqlx::test(migrations = false)]
async fn a_leader_cut_off_from_postgres_mid_tick_makes_no_further_call(pool: PgPool) {
    let url = common::database_url(&pool);
    on_paused_time(|| partition(&url));
}

async fn partition(url: &str) {
    let f = Fixture::new("sa-east-1").await;
    let moto = std::env::var("AWS_ENDPOINT_URL").unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("p.yaml"), POLICY).unwrap();
    Store::connect(url).await.unwrap().migrate().await.unwrap();
    // postgres://user:password@host:port/database → A's goes through the cable.
    let (head, database) = url.rsplit_once('/').unwrap();
    let (credentials, server) = head
        .rsplit_once('@')
        .map_or_else(|| head.rsplit_once("//").unwrap(), |(c, s)| (c, s));
    let cable = Cable::to(server.to_string()).await;
    let at = if head.contains('@') { "@" } else { "//" };
    let through_cable = format!("{credentials}{at}{}/{database}", cable.addr);

    let research = f.launch(G5).await;
    let notebook = f
        .launch(Launch {
            tags: &[("team", "notebooks")],
            ..G5
        })
        .await;

    let clock = Clock::simulated(common::t("2026-12-01T18:50:00Z"), 1.0);
    let mut proxies = Vec::new();
    let mut replicas = Vec::new();
    let (fire, fired) = oneshot::channel();
    let (resume, resumed) = oneshot::channel();
    let (mut fire, mut fired, mut resumed) = (Some(fire), Some(fired), Some(resumed));
    for (name, db) in [("a", &through_cable), ("b", &url.to_string())] {
        let (proxy, endpoint) = Ec2Proxy::start(&moto).await;
        if name == "a" {
            // A's first mutating call, the notice, is held at the proxy until the cut.
            proxy.trap(Trap {
                action: "CreateTags",
                through: false,
                fire: fire.take().unwrap(),
                hold: Hold::Until(resumed.take().unwrap()),
            });
        }
        let loader = aws_config::defaults(BehaviorVersion::latest()).endpoint_url(endpoint);
        let provider = AwsProvider::connect_from(f.settings(), loader)
            .await
            .unwrap();
        let reconciler = Reconciler::new(
            provider,
            Store::connect(db).await.unwrap(),
            Arc::new(PolicySource::new(vec![dir.path().to_path_buf()])),
            Options::default(),
        );
        replicas.push(Replica::start(
            name,
            reconciler,
            TICK,
            clock,
            Tokens::default(),
        ));
        proxies.push(proxy);
        if name == "a" {
            // A leads, and is in its first tick with the notice on the wire.
            watchdog(Duration::from_secs(600), "A's notice", async {
                fired.take().unwrap().await.unwrap();
            })
            .await;
            assert!(replicas[0].control.is_leader());
        }
    }
    let b = &replicas[1];
    let (to_a, to_b) = (&proxies[0], &proxies[1]);
    watchdog(Duration::from_secs(600), "the takeover", async {
        // B has tried to lead once, and follows.
        until(|| finished(&b.control) >= 1).await;
        assert!(!b.control.is_leader());

        cable.cut();
        let before_cut = to_a.arrivals();
        assert_eq!(before_cut, ["CreateTags"]);
        // Postgres ends A's session when it sees the closed socket: the lock is free.
        let mut probe = PgConnection::connect(url).await.unwrap();
        let limit = std::time::Duration::from_secs(60);
        let ended = common::eventually(limit, std::time::Duration::ZERO, async || {
            let held: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE application_name = 'ebb leader a' AND datname = current_database()",
            )
            .fetch_one(&mut probe)
            .await
            .unwrap();
            (held == 0).then_some(())
        });
        ended.await.expect("Postgres never ended A's session");
        // The notice reaches the cloud; A cannot record it, nor write the stop's intent.
        drop(resume);

        let mut intervals = 0;
        while b.control.last_tick().is_none() {
            assert!(
                intervals < 2,
                "B did not lead and tick within two intervals of the release"
            );
            let done = finished(&b.control);
            tokio::time::advance(TICK).await;
            intervals += 1;
            until(|| finished(&b.control) > done).await;
        }
        assert!(b.control.is_leader());
        // A keeps trying at its own ticks, and fails to reach the database.
        for _ in 0..3 {
            let done = finished(&b.control);
            tokio::time::advance(TICK).await;
            until(|| finished(&b.control) > done).await;
        }
        eprintln!(
            "B led and ticked {intervals} tick interval(s) after the release; A's mutating \
             calls after the cut: {:?}",
            &to_a.arrivals()[before_cut.len()..]
        );
        assert_eq!(to_a.arrivals(), before_cut, "A acted after the cut");
        assert_eq!(to_b.calls("StopInstances", &research), 1);
        assert_eq!(to_a.calls("StopInstances", &research), 0);
        assert_eq!(to_a.calls("CreateTags", &notebook), 1);
        assert_eq!(
            to_b.calls("CreateTags", &notebook),
            0,
            "B found A's notice and did not give it again"
        );
        let store = Store::connect(url).await.unwrap();
        let pending = store.pending_intents().await.unwrap();
        assert!(pending.is_empty(), "{pending:?}");
        let (intents, outcomes): (i64, i64) = sqlx::query_as(
            "SELECT count(*) FILTER (WHERE outcome = 'intent'),
                    count(*) FILTER (WHERE intent_seq IS NOT NULL)
             FROM audit_log",
        )
        .fetch_one(store.pool())
        .await
        .unwrap();
        assert_eq!((intents, outcomes), (2, 2), "the notice and the stop");
    })
    .await;
    for replica in replicas {
        replica.kill().await;
    }
}
