//! The console's "my instances": a login is offered the fleet filtered by its token's name as
//! the instances' `ebb:owner` tag, over real HTTP and a real Postgres.

use crate::common::{instance, t};
use crate::snooze::serve_with;
use base64::Engine as _;
use ebb::clock::Clock;
use ebb::store::Store;
use sha2::Digest as _;
use sqlx::PgPool;

const MEI: &str = "mei-token-0123456789";

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
    // A login of the token mei, as `/login` makes one.
    let session = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode([5u8; 32]);
    let id_hash = sha2::Sha256::digest(session.as_bytes()).to_vec();
    let binding = ebb::api::session_binding(&session, MEI);
    store
        .start_console_session(&id_hash, &binding, chrono::Duration::hours(1))
        .await
        .unwrap();
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
