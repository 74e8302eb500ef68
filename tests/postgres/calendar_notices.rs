//! A calendar the policies use that names no date of the next year is noticed once, from
//! 1 November: an audit row (a CloudEvent) and a webhook post, however many ticks see it; a
//! dry run's notice is its own, and the real one still goes out after it.

use crate::common::{self, t, world::SimWorld};
use ebb::clock::Clock;
use ebb::reconcile::Options;
use ebb::store::{AuditFilter, Store};
use sqlx::PgPool;
use std::path::Path;

/// The repository's policy file `name`.
fn policy(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("policies")
            .join(name),
    )
    .unwrap()
}

const FLEET: &str = r#"
instances:
  - {id: i-bp1hz01, region: cn-hangzhou, type: ecs.gn7i-c8g1.2xlarge, state: running, cloud: alibaba, tags: {team: vision, env: dev}}
"#;

/// The calendar notices in the audit log: (dry run, reason).
async fn notices(store: &Store) -> Vec<(bool, String)> {
    let rows = store.audit(&AuditFilter::default()).await.unwrap();
    rows.iter()
        .filter(|r| r.entry.action == "calendar_notice")
        .map(|r| (r.entry.dry_run, r.entry.reason.clone()))
        .collect()
}

#[sqlx::test(migrations = false)]
async fn a_calendar_without_next_years_dates_is_noticed_once(pool: PgPool) {
    let store = Store::from_pool(pool);
    // A dry run first: its notices are dry runs, and nothing is posted.
    let mut dry = SimWorld::plan(FLEET)
        .policy("calendars.yaml", &policy("calendars.yaml"))
        .policy("hangzhou.yaml", &policy("hangzhou.yaml"))
        .clock(Clock::Fixed(t("2026-12-07T02:00:00Z")))
        .options(Options {
            dry_run: true,
            ..Options::default()
        })
        .start(store.clone())
        .await;
    dry.tick("2026-12-07T02:00:00Z").await;
    drop(dry);
    let seen = notices(&store).await;
    assert_eq!(seen.len(), 2, "{seen:#?}");
    assert!(seen.iter().all(|(dry_run, _)| *dry_run));

    let (url, texts) = common::webhook::receiver().await;
    let (webhook, poster) =
        ebb::webhook::Webhook::start(url.parse().unwrap(), ebb::control::Tasks::default());
    let mut w = SimWorld::plan(FLEET)
        .policy("calendars.yaml", &policy("calendars.yaml"))
        .policy("hangzhou.yaml", &policy("hangzhou.yaml"))
        .clock(Clock::Fixed(t("2026-12-07T02:00:00Z")))
        .options(Options {
            webhook: Some(webhook),
            ..Options::default()
        })
        .start(store.clone())
        .await;
    for at in [
        "2026-12-07T02:00:00Z",
        "2026-12-07T02:05:00Z",
        "2026-12-08T02:00:00Z",
    ] {
        w.tick(at).await;
    }
    drop(w);
    poster.finish(std::time::Duration::from_secs(30)).await;
    let real: Vec<String> = notices(&store)
        .await
        .into_iter()
        .filter(|(dry_run, _)| !dry_run)
        .map(|(_, reason)| reason)
        .collect();
    assert_eq!(real.len(), 2, "once each over three ticks: {real:#?}");
    for name in ["cn-holidays", "cn-workdays"] {
        assert!(
            real.iter()
                .any(|r| r.starts_with(&format!("calendar {name} names no date in 2027"))),
            "{real:#?}"
        );
    }
    let mut texts = texts.lock().unwrap().clone();
    texts.sort();
    assert_eq!(
        texts,
        [
            format!(
                "Calendar: {}",
                real.iter().find(|r| r.contains("cn-holidays")).unwrap()
            ),
            format!(
                "Calendar: {}",
                real.iter().find(|r| r.contains("cn-workdays")).unwrap()
            ),
        ],
    );
    // Each is a CloudEvent about its calendar.
    let rows = store.audit(&AuditFilter::default()).await.unwrap();
    let events: Vec<_> = rows
        .iter()
        .filter(|r| r.entry.action == "calendar_notice")
        .filter_map(|r| ebb::events::event_of("urn:test", r))
        .collect();
    assert_eq!(events.len(), 2, "the dry runs are not events");
    assert!(events
        .iter()
        .all(|e| e.event_type == "dev.ebb.calendar.running_out"));
    let mut subjects: Vec<_> = events.iter().filter_map(|e| e.subject.clone()).collect();
    subjects.sort();
    assert_eq!(subjects, ["cn-holidays", "cn-workdays"]);
}

/// In June the year is covered and November is months away: nothing is noticed.
#[sqlx::test(migrations = false)]
async fn a_covered_calendar_is_not_noticed(pool: PgPool) {
    let store = Store::from_pool(pool);
    let mut w = SimWorld::plan(FLEET)
        .policy("calendars.yaml", &policy("calendars.yaml"))
        .policy("hangzhou.yaml", &policy("hangzhou.yaml"))
        .clock(Clock::Fixed(t("2026-06-01T02:00:00Z")))
        .start(store.clone())
        .await;
    w.tick("2026-06-01T02:00:00Z").await;
    assert!(notices(&store).await.is_empty());
}
