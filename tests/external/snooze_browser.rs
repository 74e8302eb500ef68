//! A notice's snooze link followed as a person does it, in headless Chromium: a tick on the
//! simulated fleet gives notice to a local webhook, with `EBB_PUBLIC_URL` the API and console
//! served in process; Chromium opens the notice's "for 2 hours" link (nothing changes), its
//! button is pressed from the keyboard (the override is made, as the notice's addressee), the
//! next tick keeps the box, and the link, used again, is refused.

use crate::common::{self, t, world::SimWorld};
use crate::console_browser::{chromium, Devtools};
use ebb::clock::Clock;
use ebb::reconcile::Options;
use ebb::store::{AuditFilter, Store};
use sqlx::PgPool;
use std::time::Duration;

const POLICY: &str = r#"
policies:
  - name: office
    match: {tags: {team: research}}
    work_hours:
      timezone: UTC
      periods: [{days: mon-fri, start: "09:00", stop: "19:00"}]
      outside_hours: stop
    notify:
      before: 30m
"#;

const FLEET: &str = r#"
instances:
  - {id: i-0a, region: us-east-1, type: g5.xlarge, state: running, tags: {team: research, "ebb:owner": mei@example.com}}
"#;

/// The API and the console on a free port, at 18:40 UTC: their base URL.
async fn serve(store: &Store) -> String {
    let clock = Clock::Fixed(t("2026-11-30T18:40:00Z"));
    common::api::serve_with_console(common::api::state(store, Vec::new(), clock)).await
}

/// Runs `act` on the browser on a blocking thread: the DevTools calls wait, and the test's
/// runtime, which serves the console, must go on meanwhile.
async fn browse<T: Send + 'static>(
    mut d: Devtools,
    act: impl FnOnce(&mut Devtools) -> T + Send + 'static,
) -> (Devtools, T) {
    tokio::task::spawn_blocking(move || {
        let out = act(&mut d);
        (d, out)
    })
    .await
    .unwrap()
}

#[sqlx::test(migrations = false)]
async fn a_notices_link_keeps_the_box_from_chromium_once(pool: PgPool) {
    let chromium = chromium();
    let store = Store::from_pool(pool);
    store.migrate().await.unwrap();
    let base = serve(&store).await;
    let (hook, texts) = common::webhook::receiver().await;
    let (webhook, _poster) =
        ebb::webhook::Webhook::start(hook.parse().unwrap(), ebb::control::Tasks::default());
    let options = Options {
        webhook: Some(webhook),
        public_url: Some(base.parse().unwrap()),
        ..Options::default()
    };
    let mut w = SimWorld::plan(FLEET)
        .policy("office.yaml", POLICY)
        .options(options)
        .start(store.clone())
        .await;
    w.tick("2026-11-30T18:30:00Z").await;
    let notice = common::eventually(
        Duration::from_secs(30),
        Duration::from_millis(20),
        async || texts.lock().unwrap().first().cloned(),
    )
    .await
    .expect("no notice reached the webhook");
    let label = "for 2 hours: ";
    let at = notice.find(label).unwrap_or_else(|| panic!("{notice}"));
    let link = notice[at + label.len()..]
        .split_whitespace()
        .next()
        .unwrap();
    assert!(link.starts_with(&format!("{base}/snooze/")), "{notice}");

    // Opening it shows what it will do; nothing changes.
    let d = Devtools::start(&chromium);
    let page = link.to_string();
    let (d, html) = browse(d, move |d| {
        d.open(&page);
        d.dom()
    })
    .await;
    assert!(html.contains("mei@example.com"), "{html}");
    assert!(html.contains("Keep it running for 2 hours"), "{html}");
    assert!(store.all_overrides().await.unwrap().is_empty());

    // The button, from the keyboard: the override, as the notice's addressee.
    let (d, html) = browse(d, |d| {
        d.focus("form[action=\"/snooze\"] button");
        d.loads(|d| d.press("Enter"));
        d.dom()
    })
    .await;
    assert!(html.contains("made: ebb keeps"), "{html}");
    let made = store.all_overrides().await.unwrap();
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(made[0].created_by, "mei@example.com");
    assert_eq!(
        made[0].reason,
        "snoozed from the notice of 2026-11-30T18:30:00Z"
    );
    let filter = AuditFilter {
        action: Some("override".into()),
        ..Default::default()
    };
    let audited = store.audit(&filter).await.unwrap();
    assert_eq!(audited.len(), 1, "{audited:?}");
    assert_eq!(audited[0].entry.actor, "mei@example.com");

    // The next ticks keep the box: the notice withdrawn, then the override alone.
    w.tick("2026-11-30T19:00:00Z").await;
    let report = w.tick("2026-11-30T19:01:00Z").await;
    assert!(report.actions.is_empty(), "{:?}", report.actions);
    let record = store.instance("i-0a").await.unwrap().unwrap();
    assert_eq!(record.decided_code.as_deref(), Some("override"));
    assert_eq!(record.state, "running");

    // The same link again, in the browser: refused, and nothing more is made.
    let page = link.to_string();
    let (_d, html) = browse(d, move |d| {
        d.open(&page);
        d.dom()
    })
    .await;
    assert!(html.contains("used already"), "{html}");
    assert_eq!(store.all_overrides().await.unwrap().len(), 1);
}
