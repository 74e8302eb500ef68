//! Snooze links over real HTTP and a real Postgres: a tick on the simulated fleet gives notice
//! to a local webhook with `EBB_PUBLIC_URL` set, and its links are followed against the API and
//! the console served as `ebb serve` serves them. Opening a link changes nothing; its button's
//! POST makes the override once, as the notice's addressee; the next tick keeps the box; a
//! changed, foreign or expired link is refused with a page that says why.

use crate::common::{self, t, world::SimWorld};
use chrono::{DateTime, Duration, Utc};
use ebb::api::{self, ApiState};
use ebb::clock::Clock;
use ebb::reconcile::Options;
use ebb::snooze::{Keep, Key, Link};
use ebb::store::Store;
use reqwest::StatusCode;
use sqlx::PgPool;

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

/// The API and the console on a free port, with `clock`'s time as now: its base URL.
async fn serve(store: &Store, clock: Clock) -> String {
    serve_with(store, clock, "", api::ApiLimits::default()).await
}

/// [`serve`] with `tokens` (as `EBB_API_TOKENS`) and `limits`.
pub(crate) async fn serve_with(
    store: &Store,
    clock: Clock,
    tokens: &str,
    limits: api::ApiLimits,
) -> String {
    store.migrate().await.unwrap();
    // Kept for the test's life: the console reads the policies at each page.
    let policies = tempfile::tempdir().unwrap().keep();
    std::fs::write(policies.join("office.yaml"), POLICY).unwrap();
    common::api::serve_with_console(ApiState {
        tokens: common::api::tokens(tokens),
        limits,
        ..common::api::state(store, vec![policies], clock)
    })
    .await
}

/// The notices the receiver got, once there are `n`: the webhook sender posts them over HTTP
/// beside the tick, so they are waited for (within a bound that fails the test).
async fn notices<T: Clone + std::fmt::Debug>(texts: &std::sync::Mutex<Vec<T>>, n: usize) -> Vec<T> {
    let got = common::eventually(
        std::time::Duration::from_secs(10),
        std::time::Duration::from_millis(20),
        async || {
            let got = texts.lock().unwrap().clone();
            (got.len() >= n).then_some(got)
        },
    )
    .await;
    got.unwrap_or_else(|| panic!("no notice came: {:?}", texts.lock().unwrap()))
}

/// The URL that follows `label: ` in `notice`.
fn link_after<'a>(notice: &'a str, label: &str) -> &'a str {
    let at = notice
        .find(&format!("{label}: "))
        .unwrap_or_else(|| panic!("no {label} link in {notice}"));
    notice[at + label.len() + 2..]
        .split_whitespace()
        .next()
        .unwrap()
}

/// Posts the snooze button's form with `link`.
async fn press(http: &reqwest::Client, base: &str, link: &str) -> (StatusCode, String) {
    let r = http
        .post(format!("{base}/snooze"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("link={}", link.replace('=', "%3D")))
        .send()
        .await
        .unwrap();
    (r.status(), r.text().await.unwrap())
}

/// The GET of `url`: status, `Cache-Control`, body.
async fn open(http: &reqwest::Client, url: &str) -> (StatusCode, String, String) {
    let r = http.get(url).send().await.unwrap();
    let cache = r
        .headers()
        .get("cache-control")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (r.status(), cache, r.text().await.unwrap())
}

/// The overrides' (actor, reason, until) as stored.
async fn overrides(store: &Store) -> Vec<(String, String, DateTime<Utc>)> {
    store
        .all_overrides()
        .await
        .unwrap()
        .into_iter()
        .map(|o| (o.created_by, o.reason, o.until))
        .collect()
}

#[sqlx::test(migrations = false)]
async fn a_notice_link_opens_a_page_and_its_button_keeps_the_box_once(pool: PgPool) {
    let store = Store::from_pool(pool);
    let base = serve(&store, Clock::Fixed(t("2026-11-30T18:40:00Z"))).await;
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
    let notice = notices(&texts, 1).await.remove(0);
    assert!(notice.contains("ebb will stop i-0a"), "{notice}");
    assert!(notice.contains("For mei@example.com."), "{notice}");
    assert!(!notice.contains("ebb override"), "{notice}");
    let two_hours = link_after(&notice, "for 2 hours");
    let opening = link_after(&notice, "until the next opening");
    let day = link_after(&notice, "for a day");
    assert!(
        two_hours.starts_with(&format!("{base}/snooze/")),
        "{two_hours}"
    );
    assert!(two_hours != opening && opening != day, "{notice}");

    // Opening the link, as an unfurler or a mail scanner would, changes nothing.
    let http = reqwest::Client::new();
    for _ in 0..2 {
        let (status, cache, page) = open(&http, two_hours).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        assert_eq!(cache, "no-store");
        assert!(page.contains("mei@example.com"), "{page}");
        assert!(page.contains("for 2 hours"), "{page}");
        assert!(
            page.contains("2026-11-30 20:40:00"),
            "until two hours from now: {page}"
        );
        assert!(page.contains(r#"action="/snooze""#), "{page}");
    }
    assert_eq!(overrides(&store).await, []);

    // The button's POST makes the override, as the addressee, for the notice's reason.
    let token = two_hours.rsplit('/').next().unwrap();
    let (status, page) = press(&http, &base, token).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("made"), "{page}");
    let reason = "snoozed from the notice of 2026-11-30T18:30:00Z".to_string();
    assert_eq!(
        overrides(&store).await,
        [(
            "mei@example.com".to_string(),
            reason.clone(),
            t("2026-11-30T20:40:00Z")
        )]
    );
    let audited = store
        .audit(&ebb::store::AuditFilter {
            action: Some("override".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(audited.len(), 1, "{audited:?}");
    assert_eq!(audited[0].entry.actor, "mei@example.com");

    // Once only: the same link again is refused, and so is its page.
    let (status, page) = press(&http, &base, token).await;
    assert_eq!(status, StatusCode::GONE, "{page}");
    assert!(page.contains("used already"), "{page}");
    let (status, _, page) = open(&http, two_hours).await;
    assert_eq!(status, StatusCode::GONE, "{page}");
    assert_eq!(overrides(&store).await.len(), 1);

    // The next tick, at the close, keeps the box for the override and withdraws the notice;
    // the one after keeps it for the override alone.
    let report = w.tick("2026-11-30T19:00:00Z").await;
    let actions: Vec<&str> = report
        .actions
        .iter()
        .map(|a| a.decision.action.as_str())
        .collect();
    assert_eq!(actions, ["withdraw_notice"], "{:?}", report.actions);
    let report = w.tick("2026-11-30T19:01:00Z").await;
    assert!(report.actions.is_empty(), "{:?}", report.actions);
    let record = store.instance("i-0a").await.unwrap().unwrap();
    assert_eq!(record.decided_code.as_deref(), Some("override"));
    assert_eq!(record.decided_action.as_deref(), Some("none"));
    assert_eq!(record.state, "running");

    // Another link of the notice is a link of its own: "until the next opening" still works.
    let (status, page) = press(&http, &base, opening.rsplit('/').next().unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let latest = overrides(&store).await.pop().unwrap();
    assert_eq!(latest.2, t("2026-12-01T09:00:00Z"), "the next opening");
}

#[sqlx::test(migrations = false)]
async fn a_changed_foreign_or_expired_link_is_refused_with_a_page_that_says_why(pool: PgPool) {
    let store = Store::from_pool(pool);
    let base = serve(&store, Clock::Fixed(t("2026-11-30T18:40:00Z"))).await;
    let late = serve(&store, Clock::Fixed(t("2026-11-30T20:00:00Z"))).await;
    let key = Key::from_stored(&store.snooze_key_seed().await.unwrap()).unwrap();
    let link = Link {
        instance: "i-0a".into(),
        addressee: "mei@example.com".into(),
        keep: Keep::For(Duration::hours(2)),
        notice_at: t("2026-11-30T18:30:00Z"),
        expires_at: t("2026-11-30T20:00:00Z"),
    };
    let token = link.sign(&key);
    let (payload, signature) = token.split_once('.').unwrap();
    let longer = Link {
        keep: Keep::For(Duration::days(7)),
        ..link.clone()
    }
    .sign(&key);
    let changed = format!("{}.{signature}", longer.split_once('.').unwrap().0);
    let foreign = link.sign(&Key::from_seed(&[9; 32]));
    let mut flipped = payload.to_string().into_bytes();
    flipped[3] = if flipped[3] == b'A' { b'B' } else { b'A' };
    let flipped = format!("{}.{signature}", String::from_utf8(flipped).unwrap());

    let http = reqwest::Client::new();
    for bad in [&changed, &foreign, &flipped, &"not-a-link".to_string()] {
        let (status, _, page) = open(&http, &format!("{base}/snooze/{bad}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
        assert!(page.contains("not one ebb made"), "{page}");
        let (status, page) = press(&http, &base, bad).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
        assert!(page.contains("Nothing was changed"), "{page}");
    }
    let (status, page) = press(&http, &base, "").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");

    // At its expiry (the stop, plus a margin), the signed link is refused too.
    let (status, _, page) = open(&http, &format!("{late}/snooze/{token}")).await;
    assert_eq!(status, StatusCode::GONE, "{page}");
    assert!(page.contains("expired at 2026-11-30T20:00:00Z"), "{page}");
    let (status, page) = press(&http, &late, &token).await;
    assert_eq!(status, StatusCode::GONE, "{page}");
    assert_eq!(overrides(&store).await, []);

    // An override the API refuses (no such instance here) does not spend the link.
    let (status, page) = press(&http, &base, &token).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
    assert!(page.contains("The override was not made"), "{page}");
    assert_eq!(store.snooze_link_used(&link.id()).await.unwrap(), None);
}

/// A tick at 18:30 on the fleet, giving notice to a webhook in `format` with `public_url`: the
/// notice's JSON body, and the store.
async fn notice_in(
    pool: PgPool,
    format: ebb::webhook::Format,
    public_url: Option<&str>,
) -> (serde_json::Value, Store) {
    let store = Store::from_pool(pool);
    let (hook, bodies) = common::webhook::bodies().await;
    let (webhook, _poster) = ebb::webhook::Webhook::start_as(
        hook.parse().unwrap(),
        format,
        ebb::control::Tasks::default(),
    );
    let options = Options {
        webhook: Some(webhook),
        public_url: public_url.map(|u| u.parse().unwrap()),
        ..Options::default()
    };
    let mut w = SimWorld::plan(FLEET)
        .policy("office.yaml", POLICY)
        .options(options)
        .start(store.clone())
        .await;
    w.tick("2026-11-30T18:30:00Z").await;
    (notices(&bodies, 1).await.remove(0), store)
}

#[sqlx::test(migrations = false)]
async fn a_slack_notice_names_the_owner_and_carries_the_links_as_buttons(pool: PgPool) {
    let public = "https://ebb.example.com/ops";
    let (body, store) = notice_in(pool, ebb::webhook::Format::Slack, Some(public)).await;
    let section = body["blocks"][0]["text"]["text"].as_str().unwrap();
    assert!(section.contains("ebb will stop i-0a"), "{body}");
    assert!(section.contains("For mei@example.com."), "{body}");
    assert!(
        body["text"].as_str().unwrap().contains("for 2 hours: "),
        "the fallback text has the links: {body}"
    );
    let buttons = body["blocks"][1]["elements"].as_array().unwrap();
    let labels: Vec<&str> = buttons
        .iter()
        .map(|b| b["text"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        [
            "Keep it running for 2 hours",
            "Keep it running until the next opening",
            "Keep it running for a day"
        ]
    );
    let key = Key::from_stored(&store.snooze_key_seed().await.unwrap()).unwrap();
    for button in buttons {
        let url = button["url"].as_str().unwrap();
        let token = url
            .strip_prefix(&format!("{public}/snooze/"))
            .unwrap_or_else(|| panic!("{url}"));
        let link = Link::verify(&key, token, t("2026-11-30T18:40:00Z")).unwrap();
        assert_eq!(link.instance, "i-0a");
        assert_eq!(link.addressee, "mei@example.com");
        assert_eq!(
            link.expires_at,
            t("2026-11-30T20:00:00Z"),
            "the stop plus an hour"
        );
    }
}

#[sqlx::test(migrations = false)]
async fn without_a_public_url_a_plain_notice_says_how_to_keep_it_by_command(pool: PgPool) {
    let (body, _) = notice_in(pool, ebb::webhook::Format::Plain, None).await;
    let text = body["text"].as_str().unwrap();
    assert_eq!(body.as_object().unwrap().len(), 1, "only text: {body}");
    assert!(text.contains("For mei@example.com."), "{text}");
    assert!(text.contains("ebb override i-0a --until 4h"), "{text}");
    assert!(!text.contains("/snooze/"), "{text}");
}

/// A used link is forgotten only once it has expired by the database's clock: a replica whose
/// clock runs hours ahead claims another link, and the first, which can still be pressed,
/// stays used rather than becoming usable again.
#[sqlx::test]
async fn a_replica_ahead_of_the_database_forgets_no_used_link_that_still_works(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    let db_now: DateTime<Utc> = sqlx::query_scalar("SELECT now()")
        .fetch_one(&pool)
        .await
        .unwrap();
    let expires = db_now + chrono::Duration::hours(1);
    assert!(store
        .claim_snooze_link("link-1", "i-1", expires, db_now)
        .await
        .unwrap());
    // Another replica, two hours ahead, claims another link.
    let ahead = db_now + chrono::Duration::hours(2);
    assert!(store
        .claim_snooze_link("link-2", "i-2", ahead + chrono::Duration::hours(1), ahead)
        .await
        .unwrap());
    assert!(store.snooze_link_used("link-1").await.unwrap().is_some());
    assert!(
        !store
            .claim_snooze_link("link-1", "i-1", expires, db_now)
            .await
            .unwrap(),
        "a used link cannot be used again"
    );
}
