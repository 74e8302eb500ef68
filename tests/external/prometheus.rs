//! GPU utilisation from a real Prometheus server (`EBB_METRICS=prometheus:URL`): DCGM's
//! `DCGM_FI_DEV_GPU_UTIL` and `DCGM_FI_DEV_FB_USED` history written with promtool, range
//! queries a tick for the whole fleet (the busiest GPU, the memory of the fullest, how many
//! GPUs were busy), and an answer that cannot be used (unreachable server, a label that names
//! no instance) a failed read: nothing is stopped for idleness then.

use crate::common;

use common::prometheus::{dcgm_history, Server};
use common::t;
use common::world::SimWorld;
use ebb::clock::Clock;
use ebb::cloud::prometheus::{Prometheus, PrometheusSettings};
use ebb::reconcile::{Options, TickReport};
use ebb::store::{Outcome, Store};
use sqlx::PgPool;

/// Stop a box whose GPUs stayed below 5 % for 45 minutes.
const POLICY: &str = r#"
policies:
  - name: idle-boxes
    match: {tags: {team: research}}
    idle: {gpu_below: 5, for: 45m}
"#;

const FLEET: &str = r#"
instances:
  - {id: i-busy, region: us-east-1, type: g5.12xlarge, state: running, tags: {team: research}}
  - {id: i-idle, region: eu-west-1, type: g5.xlarge, state: running, tags: {team: research}}
"#;

const NOW: &str = "2026-11-30T14:00:00Z";

/// Two hours of history before [`NOW`]: i-busy has one GPU at 97 % and three at 1 %, its GPUs
/// holding 30,000, 20,000, 0 and 0 MiB; i-idle's only GPU sits at 2 %, its memory not
/// exported. The exporter labels the EC2 instance id `instance_id`.
async fn server() -> Server {
    let now = t(NOW).timestamp();
    let history = dcgm_history(
        &[
            (r#"gpu="0",instance_id="i-busy""#, 97.0),
            (r#"gpu="1",instance_id="i-busy""#, 1.0),
            (r#"gpu="2",instance_id="i-busy""#, 1.0),
            (r#"gpu="3",instance_id="i-busy""#, 1.0),
            (r#"gpu="0",instance_id="i-idle""#, 2.0),
        ],
        now - 7200,
        now,
    );
    // DCGM's frame buffer used, MiB, beside it in the same OpenMetrics text.
    let mut text = history.trim_end().trim_end_matches("# EOF").to_string();
    text.push_str("# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).\n# TYPE DCGM_FI_DEV_FB_USED gauge\n");
    for (gpu, mib) in [(0, 30_000), (1, 20_000), (2, 0), (3, 0)] {
        let mut at = now - 7200;
        while at <= now {
            text.push_str(&format!(
                "DCGM_FI_DEV_FB_USED{{gpu=\"{gpu}\",instance_id=\"i-busy\"}} {mib} {at}\n"
            ));
            at += 60;
        }
    }
    text.push_str("# EOF\n");
    Server::with_history(&text).await
}

#[tokio::test]
async fn range_queries_give_each_instance_s_busiest_gpu_memory_and_busy_gpus() {
    let server = server().await;
    let prometheus = Prometheus::new(PrometheusSettings::new(&server.url)).unwrap();
    let now = t(NOW);
    let read = prometheus
        .gpu_utilisation(now - chrono::Duration::hours(1), now)
        .await
        .unwrap();
    assert_eq!(read.len(), 2, "{read:?}");
    // A reading every 5 minutes over the hour, both ends included.
    assert_eq!(read["i-busy"].len(), 13);
    assert!(read["i-busy"].iter().all(|s| s.percent == 97.0));
    assert!(read["i-idle"].iter().all(|s| s.percent == 2.0));
    assert_eq!(read["i-idle"].last().unwrap().at, now);
    // The fullest GPU's memory, and one GPU of four busy; none of one, memory not exported.
    assert!(
        read["i-busy"]
            .iter()
            .all(|s| s.memory_mib == Some(30_000) && s.gpus_busy == Some(1)),
        "{:?}",
        read["i-busy"]
    );
    assert!(read["i-idle"]
        .iter()
        .all(|s| s.memory_mib.is_none() && s.gpus_busy == Some(0)));
}

/// The simulated fleet, reading GPU utilisation from `prometheus`.
async fn world(pool: PgPool, prometheus: Prometheus) -> SimWorld {
    let options = Options {
        prometheus: Some(prometheus),
        ..Options::default()
    };
    SimWorld::plan(FLEET)
        .policy("idle.yaml", POLICY)
        .clock(Clock::Fixed(t(NOW)))
        .options(options)
        .start(Store::from_pool(pool))
        .await
}

fn decided(report: &TickReport, code: &str) -> usize {
    report
        .decided
        .iter()
        .filter(|((_, c), _)| *c == code)
        .map(|(_, n)| n)
        .sum()
}

#[sqlx::test(migrations = false)]
async fn the_idle_box_is_stopped_and_the_busy_one_kept(pool: PgPool) {
    let server = server().await;
    let prometheus = Prometheus::new(PrometheusSettings::new(&server.url)).unwrap();
    let report = world(pool, prometheus).await.tick(NOW).await;
    assert!(report.gpu_read_failures.is_empty(), "{report:?}");
    let stopped: Vec<&str> = report
        .actions
        .iter()
        .filter(|a| a.outcome == Outcome::Succeeded)
        .map(|a| a.decision.instance.as_str())
        .collect();
    assert_eq!(stopped, ["i-idle"], "{}", report.headline());
    assert_eq!(decided(&report, "idle"), 1);
    assert_eq!(decided(&report, "not_idle"), 1);
}

#[sqlx::test(migrations = false)]
async fn a_label_that_names_no_instance_is_a_failed_read_not_idleness(pool: PgPool) {
    let server = server().await;
    // The exporter's `instance` label is its scrape target here, not an EC2 instance id: the
    // default query aggregates by a label the series do not have.
    let mut settings = PrometheusSettings::new(&server.url);
    settings.label = "instance".into();
    let prometheus = Prometheus::new(settings).unwrap();
    let report = world(pool, prometheus).await.tick(NOW).await;
    assert!(report.actions.is_empty(), "{}", report.headline());
    assert_eq!(decided(&report, "metrics_unreadable"), 2);
    assert_eq!(report.gpu_read_failures.len(), 2, "one per region");
    assert!(report.gpu_read_failures[0]
        .error
        .contains("EBB_PROMETHEUS_INSTANCE_LABEL"));
}

#[sqlx::test(migrations = false)]
async fn a_server_that_does_not_answer_is_a_failed_read_not_idleness(pool: PgPool) {
    let server = server().await;
    let url = server.url.clone();
    drop(server);
    let prometheus = Prometheus::new(PrometheusSettings::new(&url)).unwrap();
    let report = world(pool, prometheus).await.tick(NOW).await;
    assert!(report.actions.is_empty(), "{}", report.headline());
    assert_eq!(decided(&report, "metrics_unreadable"), 2);
    assert!(report.gpu_read_failures[0].error.contains("cannot reach"));
}

/// Three GPU-idle boxes under a policy whose activity signals count remote sessions
/// (node_exporter's `node_logind_sessions`, summed by instance), one of them only above five:
/// idle for 45 minutes.
const SESSIONS_POLICY: &str = r#"
policies:
  - name: idle-boxes
    match: {tags: {team: research}}
    idle:
      gpu_below: 5
      for: 45m
      activity:
        - prometheus:
            name: sessions
            query: 'sum by (instance_id) (node_logind_sessions{remote="true"})'
            active_above: 0
        - prometheus:
            name: crowd
            query: 'sum by (instance_id) (node_logind_sessions{remote="true"})'
            active_above: 5
"#;

const SESSIONS_FLEET: &str = r#"
instances:
  - {id: i-session, region: us-east-1, type: g5.xlarge, state: running, tags: {team: research}}
  - {id: i-alone, region: us-east-1, type: g5.xlarge, state: running, tags: {team: research}}
  - {id: i-unexported, region: us-east-1, type: g5.xlarge, state: running, tags: {team: research}}
"#;

/// Every GPU at 2 % from two hours before [`NOW`] to one hour after. i-session has a remote
/// SSH session until 13:50 and none after; i-alone has none; i-unexported exports no sessions.
async fn sessions_server() -> Server {
    let now = t(NOW).timestamp();
    let (from, to) = (now - 7200, now + 3600);
    let history = dcgm_history(
        &[
            (r#"gpu="0",instance_id="i-session""#, 2.0),
            (r#"gpu="0",instance_id="i-alone""#, 2.0),
            (r#"gpu="0",instance_id="i-unexported""#, 2.0),
        ],
        from,
        to,
    );
    let mut text = history.trim_end().trim_end_matches("# EOF").to_string();
    text.push_str("# HELP node_logind_sessions Number of sessions registered in logind.\n# TYPE node_logind_sessions gauge\n");
    let mut at = from;
    while at <= to {
        let open = if at <= now - 600 { 1 } else { 0 };
        for (id, remote, n) in [
            ("i-session", "true", open),
            ("i-session", "false", 1),
            ("i-alone", "true", 0),
        ] {
            text.push_str(&format!(
                "node_logind_sessions{{class=\"user\",instance_id=\"{id}\",remote=\"{remote}\",seat=\"\",type=\"tty\"}} {n} {at}\n"
            ));
        }
        at += 60;
    }
    text.push_str("# EOF\n");
    Server::with_history(&text).await
}

#[sqlx::test(migrations = false)]
async fn a_remote_session_keeps_a_gpu_idle_box_until_it_has_been_gone_for_the_window(pool: PgPool) {
    let server = sessions_server().await;
    let options = Options {
        prometheus: Some(Prometheus::new(PrometheusSettings::new(&server.url)).unwrap()),
        ..Options::default()
    };
    let mut world = SimWorld::plan(SESSIONS_FLEET)
        .policy("idle.yaml", SESSIONS_POLICY)
        .clock(Clock::Fixed(t(NOW)))
        .options(options)
        .start(Store::from_pool(pool))
        .await;
    let stopped = |report: &TickReport| -> Vec<String> {
        report
            .actions
            .iter()
            .filter(|a| a.outcome == Outcome::Succeeded)
            .map(|a| a.decision.instance.clone())
            .collect()
    };
    let report = world.tick(NOW).await;
    assert!(report.gpu_read_failures.is_empty(), "{report:?}");
    assert_eq!(stopped(&report), ["i-alone"], "{}", report.headline());
    assert_eq!(
        decided(&report, "in_use"),
        1,
        "i-session: a session at 13:50"
    );
    assert_eq!(decided(&report, "activity_unreadable"), 1, "i-unexported");
    let alone = report
        .actions
        .iter()
        .find(|a| a.decision.instance == "i-alone")
        .unwrap();
    // Two signals of one query: one range query, read for both.
    let reason = &alone.decision.reason;
    assert!(
        reason.contains("sessions: no use seen, crowd: no use seen"),
        "{reason}"
    );

    // 14:40: the session ended 50 minutes ago, longer than the window. The box without a
    // series is still kept.
    let report = world.tick("2026-11-30T14:40:00Z").await;
    assert_eq!(stopped(&report), ["i-session"], "{}", report.headline());
    assert_eq!(decided(&report, "activity_unreadable"), 1, "i-unexported");
}
