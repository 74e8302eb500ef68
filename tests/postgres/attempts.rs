//! The budget of console logins and snooze-link uses per client address
//! (`src/api/attempts.rs`): past it, 429 with `Retry-After` before any secret is checked;
//! other pages stay open, other addresses keep their own budgets, and `X-Forwarded-For` names
//! the client only from a trusted proxy.

use crate::common;

use common::api::{serve_with_console, state};
use ebb::api::{trusted_proxy, ApiState, Attempts, ATTEMPTS};
use ebb::clock::Clock;
use ebb::store::Store;
use reqwest::StatusCode;
use sqlx::PgPool;
use std::sync::Arc;

/// Posts a login with a wrong token and no CSRF cookie, as a script guessing would.
async fn guess(client: &reqwest::Client, base: &str, from: Option<&str>) -> reqwest::Response {
    let mut request = client
        .post(format!("{base}/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("token=not-a-token-of-this-ebb&csrf=x");
    if let Some(from) = from {
        request = request.header("x-forwarded-for", from);
    }
    request.send().await.unwrap()
}

#[sqlx::test]
async fn logins_and_snooze_links_past_an_addresss_budget_are_refused(pool: PgPool) {
    let store = Store::from_pool(pool);
    let base = serve_with_console(state(&store, Vec::new(), Clock::System)).await;
    let client = reqwest::Client::new();
    for _ in 0..ATTEMPTS {
        assert_eq!(
            guess(&client, &base, None).await.status(),
            StatusCode::FORBIDDEN
        );
    }
    let refused = guess(&client, &base, None).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (1..=30).contains(&wait),
        "one attempt back each 30 s: {wait}"
    );
    let page = refused.text().await.unwrap();
    assert!(
        page.contains("Too many logins or snooze links from your address"),
        "{page}"
    );
    // The snooze links share the budget; the login page and the rest stay open.
    let snooze = client
        .get(format!("{base}/snooze/anything"))
        .send()
        .await
        .unwrap();
    assert_eq!(snooze.status(), StatusCode::TOO_MANY_REQUESTS);
    let button = client
        .post(format!("{base}/snooze"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("link=anything")
        .send()
        .await
        .unwrap();
    assert_eq!(button.status(), StatusCode::TOO_MANY_REQUESTS);
    let login_page = client.get(format!("{base}/login")).send().await.unwrap();
    assert_eq!(login_page.status(), StatusCode::OK);
    // Not behind a trusted proxy, X-Forwarded-For names no one.
    assert_eq!(
        guess(&client, &base, Some("203.0.113.7")).await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[sqlx::test]
async fn behind_a_trusted_proxy_each_forwarded_client_has_its_own_budget(pool: PgPool) {
    let store = Store::from_pool(pool);
    let base = serve_with_console(ApiState {
        attempts: Arc::new(Attempts::new(vec![trusted_proxy("127.0.0.0/8").unwrap()])),
        ..state(&store, Vec::new(), Clock::System)
    })
    .await;
    let client = reqwest::Client::new();
    for _ in 0..ATTEMPTS {
        guess(&client, &base, Some("203.0.113.7")).await;
    }
    let spent = guess(&client, &base, Some("203.0.113.7")).await;
    assert_eq!(spent.status(), StatusCode::TOO_MANY_REQUESTS);
    // Another client behind the same proxy, and one that puts the spent address first in
    // the header (the proxy appends the address it saw), are not held.
    let other = guess(&client, &base, Some("203.0.113.8")).await;
    assert_eq!(other.status(), StatusCode::FORBIDDEN);
    let forged = guess(&client, &base, Some("203.0.113.7, 198.51.100.4")).await;
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
}
