//! `ebb report` and `GET /v1/report` on a history written through the store's own functions
//! (tests/common/savings.rs), whose answers are worked out by hand there.

use crate::common;

use common::savings::{history, Fleet, PRICES};
use common::{database_url, t};
use ebb::api::{self, ApiState};
use ebb::engine::Action;
use ebb::fleet::InstanceState;
use ebb::store::{Outcome, Store};
use serde_json::Value;
use sqlx::PgPool;
use std::sync::Arc;

/// The window: Monday 30 November and Tuesday 1 December 2026, UTC.
const SINCE: &str = "2026-11-30T00:00:00Z";
const UNTIL: &str = "2026-12-02T00:00:00Z";

/// The measures of `group` in a report's JSON, as (saved, stopped hours, stops, people's
/// starts, overrides, override hours).
fn measures(group: &Value) -> (f64, f64, u64, u64, u64, f64) {
    (
        group["saved_usd"].as_f64().unwrap(),
        group["stopped_hours"].as_f64().unwrap(),
        group["stops"].as_u64().unwrap(),
        group["people_starts"].as_u64().unwrap(),
        group["overrides"].as_u64().unwrap(),
        group["override_hours"].as_f64().unwrap(),
    )
}

/// The hand-worked answers of [`history`] in a report's JSON.
fn check(json: &Value) {
    let total = &json["total"];
    assert_eq!(measures(total), (1090.0, 33.0, 2, 2, 1, 4.0), "{json:#}");
    assert_eq!(total["stopped_saved_usd"], 154.0);
    assert_eq!(total["spot_saved_usd"], 936.0);
    assert_eq!(total["spot_hours"], 36.0);
    assert_eq!(total["spot_moves"], 1);
    assert_eq!(total["hibernations"], 0);
    assert_eq!(total["unpriced_stopped_hours"], 0.0);
    let policies: Vec<(&str, f64)> = json["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["policy"].as_str().unwrap(),
                p["saved_usd"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(policies, [("office", 154.0), ("to-spot", 936.0)]);
    assert_eq!(json["by"], "team");
    let tags = json["tags"].as_array().unwrap();
    assert_eq!(tags.len(), 2, "{json:#}");
    assert_eq!(tags[0]["value"], "cv");
    assert_eq!(measures(&tags[0]), (1046.0, 11.0, 1, 0, 0, 0.0));
    assert_eq!(tags[1]["value"], "ml");
    assert_eq!(measures(&tags[1]), (44.0, 22.0, 1, 2, 1, 4.0));
    // Monday: i-early 8 h ($16), i-ml 6 h ($12), i-cv 4 h ($40), spot 12 h ($312) = $380.
    let days = json["days"].as_array().unwrap();
    assert_eq!(days.len(), 2);
    assert_eq!(days[0]["day"], "2026-11-30");
    assert_eq!(days[0]["saved_usd"], 380.0);
    assert_eq!(days[0]["saved_by_tag"]["ml"], 28.0);
    assert_eq!(days[1]["saved_usd"], 710.0);
    assert_eq!(days[1]["saved_by_policy"]["to-spot"], 624.0);
    assert_eq!(json["tag_keys"], serde_json::json!(["team"]));
}

/// What time it is for `ebb report`: after every window of these tests (a window may not
/// end after now), whatever the date.
const NOW: &str = "2026-12-10T00:00:00Z";

/// Runs `ebb report ARGS` on the test's database with the price table, at [`NOW`] unless
/// `ARGS` say when.
fn ebb_report(pool: &PgPool, prices: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let at: &[&str] = if args.contains(&"--at") {
        &[]
    } else {
        &["--at", NOW]
    };
    let args: Vec<&str> = std::iter::once("report")
        .chain(args.iter().copied())
        .chain(at.iter().copied())
        .collect();
    let out = common::Ebb::on(&database_url(pool))
        .env("EBB_PRICES", prices)
        .env_remove("EBB_CLOUD")
        .run(&args);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[sqlx::test]
async fn ebb_report_works_out_the_hand_calculated_history(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    history(&store).await;
    let dir = tempfile::tempdir().unwrap();
    let prices = dir.path().join("prices.yaml");
    std::fs::write(&prices, PRICES).unwrap();
    let window = ["--since", SINCE, "--until", UNTIL, "--by", "team"];

    let (ok, json, err) = ebb_report(
        &pool,
        &prices,
        &[&window[..], &["--format", "json"]].concat(),
    );
    assert!(ok, "{err}");
    let json: Value = serde_json::from_str(&json).unwrap();
    check(&json);

    let (ok, table, err) = ebb_report(&pool, &prices, &window);
    assert!(ok, "{err}");
    assert!(
        table.starts_with(
            "ebb saved $1090.00 from 2026-11-30T00:00:00Z to 2026-12-02T00:00:00Z: $154.00 by keeping instances stopped 33.00 h (2 stops, 0 hibernations), $936.00 on spot (36.00 h); people made 1 override (4.00 h) and started 2 instances ebb had stopped\n"
        ),
        "{table}"
    );
    assert!(table.contains("\nGROUP "), "{table}");
    assert!(table.contains("\ntag:team  ml "), "{table}");

    let (ok, csv, err) = ebb_report(
        &pool,
        &prices,
        &[&window[..], &["--format", "csv"]].concat(),
    );
    assert!(ok, "{err}");
    assert!(
        csv.contains(
            // No commitments: the net is the gross. The table prices no volumes (no
            // while_stopped), so what the 33 stopped hours still paid is unknown. No reclaims.
            "\npolicy,office,154.00,154.00,0.00,2,0,33.00,0.00,0.00,0,0.00,1,4.00,2,0.00,0,0.00,154.00,0.00,0.00,0.00,0.00,33.00,0.00,0.00,0.00,0.00,0.00,0.00,0.00\n"
        ),
        "{csv}"
    );
    assert!(csv.contains("\nday,2026-12-01,710.00,"), "{csv}");

    // --at moves now: the 30 days back from Tuesday noon hold all of i-early's stop too:
    // 14 h ($28), i-ml 14 h ($28), i-cv 11 h ($110): $166 and 3 stops; spot from Monday noon
    // to Tuesday noon: 24 h x $26 = $624; the override until noon: 3 h.
    let (ok, json, err) = ebb_report(
        &pool,
        &prices,
        &["--at", "2026-12-01T12:00:00Z", "--format", "json"],
    );
    assert!(ok, "{err}");
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["total"]["stopped_saved_usd"], 166.0, "{json:#}");
    assert_eq!(json["total"]["stops"], 3);
    assert_eq!(json["total"]["spot_saved_usd"], 624.0, "{json:#}");
    assert_eq!(json["total"]["overrides"], 1);
    assert_eq!(json["total"]["override_hours"], 3.0);
    assert_eq!(json["tags"], serde_json::json!([]));

    // A window that ends before it starts is refused, saying which field is wrong.
    let (ok, _, err) = ebb_report(&pool, &prices, &["--since", UNTIL, "--until", SINCE]);
    assert!(!ok);
    assert!(
        err.starts_with("error: until: 2026-11-30T00:00:00+00:00 is not after since"),
        "{err}"
    );
}

/// The API on `store` with the price table and `tokens`, reads public or not.
async fn serve_api(store: Store, tokens: &str, public_reads: bool) -> String {
    let dir = tempfile::tempdir().unwrap();
    let prices = dir.path().join("prices.yaml");
    std::fs::write(&prices, PRICES).unwrap();
    let policies = vec![dir.path().to_path_buf()];
    let clock = ebb::clock::Clock::Fixed(t(UNTIL));
    let state = ApiState {
        tokens: common::api::tokens(tokens),
        limits: api::ApiLimits {
            public_reads,
            ..Default::default()
        },
        prices: Arc::new(ebb::cloud::prices::load(&prices).unwrap()),
        ..common::api::state(&store, policies, clock)
    };
    common::api::serve(api::router(state)).await
}

#[sqlx::test]
async fn get_v1_report_gives_the_same_json_as_the_command_with_a_read_token(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    history(&store).await;
    let base = serve_api(store, "ro:0123456789abcdef:read", false).await;
    let http = reqwest::Client::new();
    let url = format!("{base}/v1/report?since={SINCE}&until={UNTIL}&by=team");
    let refused = http.get(&url).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    let answer = http
        .get(&url)
        .bearer_auth("0123456789abcdef")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let api: Value = answer.json().await.unwrap();
    check(&api);

    let dir = tempfile::tempdir().unwrap();
    let prices = dir.path().join("prices.yaml");
    std::fs::write(&prices, PRICES).unwrap();
    let args = [
        "--since", SINCE, "--until", UNTIL, "--by", "team", "--format", "json",
    ];
    let (ok, cli, err) = ebb_report(&pool, &prices, &args);
    assert!(ok, "{err}");
    assert_eq!(serde_json::from_str::<Value>(&cli).unwrap(), api);

    // `since` as a duration counts back from the API's clock; a bad one is a 400 naming it.
    let week: Value = http
        .get(format!("{base}/v1/report?since=2d"))
        .bearer_auth("0123456789abcdef")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(week["since"], SINCE);
    assert_eq!(week["total"]["saved_usd"], 1090.0);
    let bad = http
        .get(format!("{base}/v1/report?since=yesterday"))
        .bearer_auth("0123456789abcdef")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let body: Value = bad.json().await.unwrap();
    assert!(
        body["error"].as_str().unwrap().starts_with("since: "),
        "{body}"
    );

    // A window of centuries, or one that ends after now, is refused before any work: a 400
    // that says what the limits are.
    for (query, says) in [
        (
            "since=0001-01-01T00:00:00Z&until=9999-12-31T00:00:00Z",
            "until: 9999-12-31T00:00:00+00:00 is after now",
        ),
        ("since=0001-01-01T00:00:00Z", "at most 400 days"),
        ("since=401d", "at most 400 days"),
    ] {
        let refused = http
            .get(format!("{base}/v1/report?{query}"))
            .bearer_auth("0123456789abcdef")
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 400, "{query}");
        let body: Value = refused.json().await.unwrap();
        assert!(
            body["error"].as_str().unwrap().contains(says),
            "{query}: {body}"
        );
    }
    let year: Value = http
        .get(format!("{base}/v1/report?since=400d"))
        .bearer_auth("0123456789abcdef")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // 400 days to the API's now (midnight): a row for each, and the two days above in them.
    assert_eq!(year["days"].as_array().unwrap().len(), 400, "{year}");
    assert!(
        year["total"]["saved_usd"].as_f64().unwrap() >= 1090.0,
        "{year}"
    );
}

#[sqlx::test]
async fn a_stop_long_before_the_window_counts_the_whole_window_while_it_lasts(pool: PgPool) {
    // i-old ($10/h) was stopped by ebb on 20 November and has not changed since: the whole
    // 48 h window, $480. Started by a person on 3 December, after the window, it still counts
    // 48 h for the window, and the start, outside it, is not counted.
    let store = Store::from_pool(pool.clone());
    let mut fleet = Fleet::new(store.clone());
    fleet.instances.retain(|id, _| *id == "i-cv");
    fleet.sync("2026-11-20T12:00:00Z").await;
    fleet
        .ebb_did(
            "2026-11-20T18:00:00Z",
            "i-cv",
            Action::Stop,
            Outcome::Succeeded,
            "office",
        )
        .await;
    fleet
        .seen("2026-11-20T18:05:00Z", "i-cv", InstanceState::Stopped)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let prices = dir.path().join("prices.yaml");
    std::fs::write(&prices, PRICES).unwrap();
    let args = ["--since", SINCE, "--until", UNTIL, "--format", "json"];
    let report = |pool: &PgPool| {
        let (ok, json, err) = ebb_report(pool, &prices, &args);
        assert!(ok, "{err}");
        serde_json::from_str::<Value>(&json).unwrap()
    };
    let json = report(&pool);
    assert_eq!(
        measures(&json["total"]),
        (480.0, 48.0, 0, 0, 0, 0.0),
        "{json:#}"
    );
    fleet
        .seen("2026-12-03T08:00:00Z", "i-cv", InstanceState::Running)
        .await;
    let json = report(&pool);
    assert_eq!(
        measures(&json["total"]),
        (480.0, 48.0, 0, 0, 0, 0.0),
        "{json:#}"
    );
    // Over a window that holds the start: 20 Nov 18:00 to 3 Dec 08:00 is 302 h, $3020.
    let (ok, json, err) = ebb_report(
        &pool,
        &prices,
        &[
            "--since",
            "2026-11-01T00:00:00Z",
            "--until",
            "2026-12-04T00:00:00Z",
            "--format",
            "json",
        ],
    );
    assert!(ok, "{err}");
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        measures(&json["total"]),
        (3020.0, 302.0, 1, 1, 0, 0.0),
        "{json:#}"
    );
}
