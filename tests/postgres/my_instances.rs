//! The console knows who is logged in, over real HTTP and a real Postgres: "my instances" (the
//! fleet filtered by the token's name as the instances' `ebb:owner` tag), and the instance
//! page's snooze buttons for a login that may make overrides.

use crate::common::{instance, t};
use crate::snooze::serve_with;
use base64::Engine as _;
use ebb::clock::Clock;
use ebb::engine::{Action, Code, Decision};
use ebb::store::Store;
use sha2::Digest as _;
use sqlx::PgPool;

const MEI: &str = "mei-token-0123456789";

/// A login of the token mei, as `/login` makes one: its session id, for the cookie.
async fn login(store: &Store) -> String {
    let session = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode([5u8; 32]);
    let id_hash = sha2::Sha256::digest(session.as_bytes()).to_vec();
    let binding = ebb::api::session_binding(&session, MEI);
    store
        .start_console_session(&id_hash, &binding, chrono::Duration::hours(1))
        .await
        .unwrap();
    session
}

#[sqlx::test(migrations = false)]
async fn a_login_sees_its_own_instances_by_their_owner_tag(pool: PgPool) {
    let store = Store::from_pool(pool);
    let limits = ebb::api::ApiLimits {
        public_reads: true,
        ..Default::default()
    };
    let tokens = format!("mei:{MEI}:read");
    let base = serve_with(&store, Clock::System, &tokens, limits).await;
    let fleet = [
        instance("i-0mine", &[("ebb:owner", "mei")]),
        instance("i-0bobs", &[("ebb:owner", "bob")]),
        instance("i-0nobodys", &[]),
    ];
    let regions = vec!["us-east-1".to_string()];
    store
        .sync_inventory(&regions, &fleet, t("2026-11-30T20:00:00Z"))
        .await
        .unwrap();
    let session = login(&store).await;
    let http = reqwest::Client::new();
    let page = async |path: &str, cookie: Option<&str>| {
        let mut request = http.get(format!("{base}{path}"));
        if let Some(cookie) = cookie {
            request = request.header("cookie", format!("ebb_session={cookie}"));
        }
        let r = request.send().await.unwrap();
        assert_eq!(r.status(), reqwest::StatusCode::OK, "{path}");
        r.text().await.unwrap()
    };

    let anyone = page("/", None).await;
    assert!(
        !anyone.contains("My instances"),
        "no login, no offer: {anyone}"
    );
    let all = page("/", Some(&session)).await;
    assert!(
        all.contains(r#"<a href="/?tag=ebb%3Aowner%3Dmei">My instances</a>"#),
        "{all}"
    );
    assert!(all.contains("i-0bobs") && all.contains("i-0mine"), "{all}");
    let mine = page("/?tag=ebb%3Aowner%3Dmei", Some(&session)).await;
    assert!(mine.contains("i-0mine"), "{mine}");
    assert!(
        !mine.contains("i-0bobs") && !mine.contains("i-0nobodys"),
        "{mine}"
    );
    assert!(mine.contains("Your instances"), "{mine}");
}

#[sqlx::test(migrations = false)]
async fn a_login_that_may_override_keeps_an_instance_running_with_one_button(pool: PgPool) {
    let store = Store::from_pool(pool);
    let tokens = format!("mei:{MEI}:read+override");
    let clock = Clock::Fixed(t("2026-11-30T18:40:00Z"));
    let base = serve_with(&store, clock, &tokens, Default::default()).await;
    let fleet = [instance("i-0mine", &[("team", "research")])];
    let regions = vec!["us-east-1".to_string()];
    let at = t("2026-11-30T18:30:00Z");
    store.sync_inventory(&regions, &fleet, at).await.unwrap();
    let decision = Decision {
        instance: "i-0mine".into(),
        region: "us-east-1".into(),
        action: Action::None,
        policy: Some("office".into()),
        code: Code::InHours,
        reason: "inside work hours".into(),
        dry_run: false,
        stop_at: None,
    };
    store.record_decisions(&[decision], at).await.unwrap();
    let session = login(&store).await;
    let http = reqwest::Client::new();
    let cookie = format!("ebb_session={session}");
    let page = http
        .get(format!("{base}/instances/i-0mine"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for label in ["for 2 hours", "until the next opening", "for a day"] {
        assert!(page.contains(&format!("Keep it running {label}")), "{page}");
    }
    assert!(
        page.contains(r#"name="until" value="2026-12-01T09:00:00Z""#),
        "the next opening: {page}"
    );
    assert!(
        page.contains(r#"name="reason" value="snoozed from the console, for 2 hours""#),
        "{page}"
    );
    let start = r#"name="csrf" value=""#;
    let at = page.find(start).unwrap() + start.len();
    let csrf = &page[at..at + page[at..].find('"').unwrap()];

    // The first button's form, as the browser posts it.
    let r = http
        .post(format!("{base}/instances/i-0mine/overrides"))
        .header("cookie", &cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!(
            "csrf={csrf}&until=2h&reason=snoozed+from+the+console%2C+for+2+hours"
        ))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let made = store.all_overrides().await.unwrap();
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(made[0].created_by, "mei");
    assert_eq!(made[0].until, t("2026-11-30T20:40:00Z"));
    assert_eq!(made[0].reason, "snoozed from the console, for 2 hours");
}
