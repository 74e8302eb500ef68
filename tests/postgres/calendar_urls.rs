//! Calendars taken from an address (a calendar's `url`): `ebb serve`'s calendar fetcher keeps
//! the last good copy of each in Postgres and hands the copies to the policy loader; a failed,
//! broken or partial fetch never replaces a copy; a restart that cannot reach the address
//! still has the dates. The commands fetch the addresses when they start.

use crate::common::{self, api};
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use ebb::clock::Clock;
use ebb::policy::PolicySource;
use ebb::serve::{BackgroundTask, CalendarFetchError, CalendarFetcher};
use ebb::store::Store;
use sqlx::PgPool;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// What the address answers now: its status and body.
type Answer = Arc<Mutex<(StatusCode, String)>>;

/// Serves `answer` at `/cn.json`: the address's URL.
async fn address(answer: Answer) -> String {
    let routes = axum::Router::new()
        .route(
            "/cn.json",
            get(|State(a): State<Answer>| async move { a.lock().unwrap().clone() }),
        )
        .with_state(answer);
    format!("{}/cn.json", api::serve(routes).await)
}

/// holiday-cn's JSON: the National Day week off and the make-up Saturday on, in `years`.
fn holiday_cn(years: &[i32]) -> String {
    let days: Vec<serde_json::Value> = years
        .iter()
        .flat_map(|y| {
            (1..=7)
                .map(move |d| serde_json::json!({"name": "国庆节", "date": format!("{y}-10-{d:02}"), "isOffDay": true}))
                .chain([serde_json::json!({"name": "国庆节", "date": format!("{y}-10-10"), "isOffDay": false})])
        })
        .collect();
    serde_json::json!({"year": years[0], "papers": [], "days": days}).to_string()
}

/// A policy directory whose calendar `cn` is taken from `url`.
fn policies(dir: &Path, url: &str) {
    std::fs::write(
        dir.join("beijing.yaml"),
        format!(
            "calendars:\n  cn:\n    url: {url}\n\
             policies:\n  - name: beijing\n    match: {{}}\n    work_hours:\n      timezone: Asia/Shanghai\n      \
             periods: [{{days: mon-fri, start: \"09:00\", stop: \"19:00\"}}]\n      skip: [cn]\n      workdays: [cn]\n"
        ),
    )
    .unwrap();
}

fn day(s: &str) -> chrono::NaiveDate {
    s.parse().unwrap()
}

#[sqlx::test]
async fn a_calendar_from_an_address_keeps_its_last_good_copy(pool: PgPool) {
    let store = Store::from_pool(pool);
    let answer: Answer = Arc::new(Mutex::new((StatusCode::OK, holiday_cn(&[2026]))));
    let url = address(answer.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    policies(dir.path(), &url);
    let paths = vec![dir.path().to_path_buf()];
    let source = Arc::new(PolicySource::new(paths.clone()));
    let clock = Clock::Fixed(common::t("2026-12-07T10:00:00Z"));

    // No copy yet: the policies cannot be used, and say why.
    let err = source.load().unwrap_err().to_string();
    assert!(
        err.contains(&format!("calendar url {url}: no copy of it yet")),
        "{err}"
    );

    // `ebb tick` fetches it before its tick, as serve does at start, and keeps the copy.
    let tick = tokio::process::Command::new(env!("CARGO_BIN_EXE_ebb"))
        .args(["tick", "--at", "2026-10-01T02:00:00Z", "--policies"])
        .arg(dir.path())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("DATABASE_URL", common::database_url(store.pool()))
        .env("EBB_CLOUD", "sim:tests/fixtures/fleet.yaml")
        .output()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&tick.stderr);
    assert!(tick.status.success(), "{said}");
    assert!(!said.contains("calendar"), "{said}");
    assert_eq!(
        store.calendar_copies().await.unwrap().get(&url),
        Some(&holiday_cn(&[2026]))
    );

    // The fetcher: kept in Postgres, and the calendar skips and opens its days.
    let mut fetcher = CalendarFetcher::new(store.clone(), source.clone(), clock);
    let fetched = fetcher.activate().await.unwrap();
    assert_eq!(fetched.fetched, std::slice::from_ref(&url));
    assert_eq!(store.calendar_copies().await.unwrap().len(), 1);
    let first = source.load().unwrap().set;
    let cn = &first.calendars["cn"];
    assert!(cn.contains(day("2026-10-01")) && !cn.contains(day("2026-10-09")));
    assert!(cn.working_day(day("2026-10-10")).is_some());

    // A failure, a broken answer and a partial one (2027 without 2026) each keep the copy.
    for (status, body, why) in [
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            "busy".to_string(),
            "the address answered 500",
        ),
        (
            StatusCode::OK,
            holiday_cn(&[2026])[..40].to_string(),
            "is not a holiday-cn calendar",
        ),
        (
            StatusCode::OK,
            holiday_cn(&[2027]),
            "partial: it names no date of 2026",
        ),
    ] {
        *answer.lock().unwrap() = (status, body);
        match fetcher.activate().await {
            Err(CalendarFetchError::Kept(kept)) => {
                assert!(kept[0].contains(why), "{kept:?}");
            }
            other => panic!("{status}: {other:?}"),
        }
        assert_eq!(
            store.calendar_copies().await.unwrap()[&url],
            holiday_cn(&[2026])
        );
        assert_eq!(source.load().unwrap().set.version, first.version);
    }

    // A whole answer with a year more replaces it: a new version that knows 2027.
    *answer.lock().unwrap() = (StatusCode::OK, holiday_cn(&[2026, 2027]));
    fetcher.activate().await.unwrap();
    let second = source.load().unwrap().set;
    assert_ne!(second.version, first.version);
    assert!(second.calendars["cn"].contains(day("2027-10-01")));

    // A restart that cannot reach the address: the copy from Postgres, the dates kept.
    *answer.lock().unwrap() = (StatusCode::SERVICE_UNAVAILABLE, String::new());
    let restarted = Arc::new(PolicySource::new(paths));
    restarted.set_copies(store.calendar_copies().await.unwrap());
    let mut fetcher = CalendarFetcher::new(store.clone(), restarted.clone(), clock);
    assert!(fetcher.activate().await.is_err());
    let kept = restarted.load().unwrap().set;
    assert_eq!(kept.version, second.version);
}

/// `ebb validate` on the policy directory: its exit code, stdout and stderr.
async fn validate(dir: &Path) -> (bool, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_ebb"))
        .arg("validate")
        .arg(dir)
        .output()
        .await
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn the_commands_fetch_a_calendar_address_when_they_start() {
    let answer: Answer = Arc::new(Mutex::new((StatusCode::OK, holiday_cn(&[2026]))));
    let url = address(answer.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    policies(dir.path(), &url);
    let (ok, out, err) = validate(dir.path()).await;
    assert!(ok, "{out}{err}");
    assert!(
        out.starts_with("ok: 1 policy and 1 calendar valid"),
        "{out}"
    );

    // An address that fails: said on stderr, and the calendar is a problem at its key.
    *answer.lock().unwrap() = (StatusCode::NOT_FOUND, String::new());
    let (ok, out, err) = validate(dir.path()).await;
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "warning: calendar url {url}: the address answered 404"
        )),
        "{err}"
    );
    assert!(out.contains("beijing.yaml:3:10: calendar url"), "{out}");
    assert!(out.contains("no copy of it yet"), "{out}");
}
