//! The web console's pages over real HTTP and a real Postgres, served as `ebb serve` serves
//! them (the API's routes and the console's on one listener): what each page shows, its
//! filters and paging, escaping, and its errors.

mod common;

use chrono::{Duration, Utc};
use common::{instance, t};
use ebb::api::{self, ApiState, Tokens};
use ebb::control::Control;
use ebb::engine::{Action, Code, Decision};
use ebb::fleet::{Instance, InstanceState};
use ebb::reconcile::PolicySource;
use ebb::store::Store;
use reqwest::StatusCode;
use sqlx::PgPool;
use std::sync::Arc;

const POLICY: &str = r#"
policies:
  - name: office
    description: Research dev boxes
    match: {tags: {team: research}}
    work_hours:
      timezone: Europe/London
      periods:
        - {days: mon-fri, start: "09:00", stop: "19:00"}
      outside_hours: stop
"#;

/// The console and the API on a free port.
struct Console {
    base: String,
    store: Store,
    http: reqwest::Client,
    policies: tempfile::TempDir,
}

impl Console {
    async fn start(pool: &PgPool) -> Console {
        Console::start_with(pool, "", true, ebb::clock::Clock::System).await
    }

    /// The console with `clock`'s time as now.
    async fn start_on(pool: &PgPool, clock: ebb::clock::Clock) -> Console {
        Console::start_with(pool, "", true, clock).await
    }

    /// The console with `tokens` (as EBB_API_TOKENS), its reads public or not, and `clock`'s
    /// time as now.
    async fn start_with(
        pool: &PgPool,
        tokens: &str,
        public_reads: bool,
        clock: ebb::clock::Clock,
    ) -> Console {
        let store = Store::from_pool(pool.clone());
        store.migrate().await.unwrap();
        let policies = tempfile::tempdir().unwrap();
        std::fs::write(policies.path().join("p.yaml"), POLICY).unwrap();
        let state = ApiState {
            store: store.clone(),
            policies: Arc::new(PolicySource::new(vec![policies.path().to_path_buf()])),
            control: Arc::new(Control::default()),
            tokens: Arc::new(Tokens::parse(tokens).unwrap()),
            clock,
            checkpoints: None,
            limits: ebb::api::ApiLimits {
                public_reads,
                ..Default::default()
            },
            prices: Arc::new(common::savings::price_table()),
        };
        let routes = api::router(state.clone()).merge(ebb::console::router(state));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, routes).await });
        Console {
            base,
            store,
            http: reqwest::Client::new(),
            policies,
        }
    }

    /// The status, content type and body of `path`.
    async fn get(&self, path: &str) -> (StatusCode, String, String) {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        let status = r.status();
        let kind = r
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        (status, kind, r.text().await.unwrap())
    }

    /// The HTML of `path`, which must answer 200.
    async fn page(&self, path: &str) -> String {
        let (status, kind, body) = self.get(path).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        assert!(kind.starts_with("text/html"), "{path}: {kind}");
        body
    }

    /// Syncs `fleet` into us-east-1 at `at`.
    async fn sync(&self, fleet: &[Instance], at: &str) {
        let region = vec!["us-east-1".to_string()];
        self.store
            .sync_inventory(&region, fleet, t(at))
            .await
            .unwrap();
    }
}

fn decision(id: &str, action: Action, code: Code, reason: &str) -> Decision {
    Decision {
        instance: id.to_string(),
        region: "us-east-1".to_string(),
        action,
        policy: Some("office".to_string()),
        code,
        reason: reason.to_string(),
        dry_run: false,
        stop_at: None,
    }
}

/// The ids of the instance rows of a fleet page, in order.
fn rows(html: &str) -> Vec<String> {
    html.split("<th scope=\"row\"><a href=\"/instances/")
        .skip(1)
        .map(|rest| rest[..rest.find('"').unwrap()].to_string())
        .collect()
}

#[sqlx::test(migrations = false)]
async fn the_fleet_page_shows_each_instance_its_decision_and_protections(pool: PgPool) {
    let console = Console::start(&pool).await;
    let keep = (Utc::now() + Duration::days(2)).to_rfc3339();
    let mut stopped = instance("i-3", &[("team", "research"), ("ebb:skip", "true")]);
    stopped.state = InstanceState::Stopped;
    let fleet = [
        instance(
            "i-1",
            &[("team", "research"), ("Name", "<script>alert(1)</script>")],
        ),
        instance("i-2", &[("ebb:keep-until", &keep)]),
        stopped,
    ];
    console.sync(&fleet, "2026-11-30T20:00:00Z").await;
    console
        .store
        .record_decisions(
            &[
                decision(
                    "i-1",
                    Action::Stop,
                    Code::OutsideHours,
                    "outside work hours",
                ),
                Decision {
                    policy: None,
                    ..decision("i-2", Action::None, Code::NoPolicy, "no policy matches")
                },
            ],
            t("2026-11-30T20:00:00Z"),
        )
        .await
        .unwrap();
    console
        .store
        .create_override(
            "i-1",
            Utc::now() + Duration::hours(4),
            "demo",
            "bob",
            Utc::now(),
        )
        .await
        .unwrap();

    let html = console.page("/").await;
    assert_eq!(rows(&html), ["i-1", "i-2", "i-3"]);
    for shown in [
        "<th scope=\"col\">Reason</th>",
        "outside work hours",
        "<code>outside_hours</code>",
        "no policy matches",
        "<code>no_policy</code>",
        "g5.xlarge",
        "us-east-1",
        "override until",
        "by bob",
        "ebb:keep-until",
        "ebb:skip",
        "3 live instances",
        "<label for=\"state\">State</label>",
    ] {
        assert!(
            html.contains(shown),
            "the fleet page lacks {shown:?}:\n{html}"
        );
    }
    // A tag is text, never markup.
    assert!(
        html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{html}"
    );
    assert!(!html.contains("<script>"), "{html}");

    // Filters, as the form sends them (a blank field is "any").
    assert_eq!(
        rows(&console.page("/?policy=&state=stopped").await),
        ["i-3"]
    );
    assert_eq!(rows(&console.page("/?policy=office&state=").await), ["i-1"]);
    let none = console.page("/?state=pending").await;
    assert!(rows(&none).is_empty() && none.contains("No live instance matches."));

    for (bad, mentions) in [("/?page=0", "page"), ("/?colour=red", "colour")] {
        let (status, kind, body) = console.get(bad).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
        assert!(kind.starts_with("text/html"), "{bad}: {kind}");
        assert!(body.contains(mentions), "{bad}: {body}");
    }
}

#[sqlx::test(migrations = false)]
async fn the_fleet_is_paged_200_instances_at_a_time(pool: PgPool) {
    let console = Console::start(&pool).await;
    let fleet: Vec<Instance> = (0..450)
        .map(|n| instance(&format!("i-{n:04}"), &[]))
        .collect();
    console.sync(&fleet, "2026-11-30T20:00:00Z").await;

    let first = console.page("/").await;
    let ids = rows(&first);
    assert_eq!(ids.len(), 200);
    assert_eq!((ids[0].as_str(), ids[199].as_str()), ("i-0000", "i-0199"));
    assert!(first.contains("450 live instances, page 1 of 3"), "{first}");
    assert!(first.contains("href=\"/?page=2\""), "{first}");
    assert!(!first.contains("Previous page"));

    let last = console.page("/?page=3").await;
    let ids = rows(&last);
    assert_eq!(ids.len(), 50);
    assert_eq!(ids.last().unwrap(), "i-0449");
    assert!(last.contains("href=\"/?page=2\"") && !last.contains("Next page"));
    assert!(rows(&console.page("/?page=4").await).is_empty());
}

#[sqlx::test(migrations = false)]
async fn the_audit_page_filters_pages_downloads_and_verifies_the_chain(pool: PgPool) {
    let console = Console::start(&pool).await;
    let now = Utc::now();
    for n in 0..130 {
        let id = if n % 10 == 0 { "i-2" } else { "i-1" };
        console
            .store
            .create_override(
                id,
                now + Duration::hours(4),
                &format!("keep {n}"),
                "bob",
                now,
            )
            .await
            .unwrap();
    }

    let newest = console.page("/audit").await;
    assert!(
        newest.contains("Intact: verified rows 1 to 130. Head hash"),
        "{newest}"
    );
    let seqs = |html: &str| -> Vec<i64> {
        html.split("<td class=\"num\">")
            .skip(1)
            .map(|rest| rest[..rest.find('<').unwrap()].parse().unwrap())
            .collect()
    };
    assert_eq!(seqs(&newest), (31..=130).rev().collect::<Vec<_>>());
    assert!(newest.contains("keep 129") && !newest.contains("keep 29<"));
    assert!(newest.contains("href=\"/audit?before=31\""), "{newest}");
    let older = console.page("/audit?before=31").await;
    assert_eq!(seqs(&older), (1..=30).rev().collect::<Vec<_>>());
    assert!(older.contains("Newest rows") && !older.contains("Older rows"));

    let only = console
        .page("/audit?instance=i-2&outcome=succeeded&since=1h")
        .await;
    assert_eq!(
        seqs(&only),
        [121, 111, 101, 91, 81, 71, 61, 51, 41, 31, 21, 11, 1]
    );
    assert!(
        only.contains("href=\"/audit.csv?instance=i-2&amp;outcome=succeeded&amp;since=1h\""),
        "{only}"
    );
    let (status, kind, csv) = console
        .get("/audit.csv?instance=i-2&outcome=succeeded&since=1h")
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(kind.starts_with("text/csv"), "{kind}");
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("seq,at,actor,instance,"), "{csv}");
    assert_eq!(lines.len(), 14, "a header and 13 rows:\n{csv}");
    assert!(lines[1].contains("keep 0") && lines[13].contains("keep 120"));

    for (bad, mentions) in [
        ("/audit?outcome=done", "outcome"),
        ("/audit?since=yesterday", "since"),
        ("/audit.csv?since=yesterday", "since"),
    ] {
        let (status, _, body) = console.get(bad).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
        assert!(body.contains(mentions), "{bad}: {body}");
    }

    // A changed row breaks the chain, and the page says where.
    sqlx::query("ALTER TABLE audit_log DISABLE TRIGGER USER")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("UPDATE audit_log SET reason = 'edited' WHERE seq = 77")
        .execute(&pool)
        .await
        .unwrap();
    let broken = console.page("/audit").await;
    assert!(broken.contains("Broken at row 77"), "{broken}");
}

#[sqlx::test(migrations = false)]
async fn an_instance_page_shows_its_timeline_chart_and_overrides(pool: PgPool) {
    let console = Console::start(&pool).await;
    let mut box1 = instance("i-1", &[("team", "research"), ("Name", "gpu box")]);
    console.sync(&[box1.clone()], "2026-11-30T09:00:00Z").await;
    box1.state = InstanceState::Stopped;
    console.sync(&[box1], "2026-11-30T19:05:00Z").await;
    console
        .store
        .record_decisions(
            &[decision(
                "i-1",
                Action::Stop,
                Code::OutsideHours,
                "outside work hours",
            )],
            t("2026-11-30T19:00:00Z"),
        )
        .await
        .unwrap();
    let made = console
        .store
        .create_override(
            "i-1",
            Utc::now() + Duration::hours(4),
            "demo tomorrow",
            "bob",
            Utc::now(),
        )
        .await
        .unwrap();
    console
        .store
        .revoke_override(made.id, "carol", Utc::now(), true)
        .await
        .unwrap();

    let html = console.page("/instances/i-1").await;
    for shown in [
        "Instance i-1",
        "gpu box",
        "outside work hours",
        "<code>outside_hours</code>",
        "demo tomorrow",
        "by carol",
        "state <span class=\"state\">stopped</span>",
        "from running (observed)",
        "first seen",
        "<svg",
        "GPU utilisation: no readings kept in this span",
        "team=research",
    ] {
        assert!(
            html.contains(shown),
            "the instance page lacks {shown:?}:\n{html}"
        );
    }
    // With readings kept, the GPU chart draws them.
    let now = Utc::now();
    let readings: Vec<ebb::fleet::Sample> = (0..6)
        .map(|n| ebb::fleet::Sample {
            at: now - Duration::minutes(60 - 5 * n),
            percent: 10.0 * n as f64,
        })
        .collect();
    console
        .store
        .record_gpu_readings(&[("i-1", &readings)])
        .await
        .unwrap();
    let charted = console.page("/instances/i-1").await;
    for shown in [
        "GPU utilisation of i-1",
        "class=\"gpu-line\"",
        "highest 50 %",
    ] {
        assert!(
            charted.contains(shown),
            "the instance page lacks {shown:?}:\n{charted}"
        );
    }
    // The override's two audit rows are on the timeline, newest first.
    let revoked = html.find("revoke").unwrap();
    let made = html.find("override <span").unwrap();
    assert!(revoked < made, "{html}");

    let (status, _, body) = console.get("/instances/i-nothing").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.contains("ebb knows no instance i-nothing"), "{body}");
    let (status, _, body) = console.get("/instances/%3Cb%3E").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        body.contains("&lt;b&gt;") && !body.contains("<b>"),
        "{body}"
    );
}

#[sqlx::test(migrations = false)]
async fn the_policies_page_shows_the_version_and_what_is_wrong_with_the_files(pool: PgPool) {
    let console = Console::start(&pool).await;
    let html = console.page("/policies").await;
    assert!(html.contains("valid and in force"), "{html}");
    assert!(html.contains("<th scope=\"row\">office</th>"), "{html}");
    assert!(html.contains("Research dev boxes") && html.contains("work hours"));
    assert!(html.contains("sha256:"), "{html}");

    std::fs::write(
        console.policies.path().join("p.yaml"),
        "policies: [{name: x, bogus: 1}]",
    )
    .unwrap();
    let html = console.page("/policies").await;
    assert!(html.contains("cannot be used"), "{html}");
    assert!(html.contains("bogus"), "{html}");
    assert!(
        html.contains("<th scope=\"row\">office</th>"),
        "the last valid set"
    );
}

#[sqlx::test(migrations = false)]
async fn the_migrations_page_and_the_stylesheet(pool: PgPool) {
    let console = Console::start(&pool).await;
    let html = console.page("/migrations").await;
    assert!(html.contains("No spot migrations yet"), "{html}");
    let (status, kind, css) = console.get("/console.css").await;
    assert_eq!(status, StatusCode::OK);
    assert!(kind.starts_with("text/css"), "{kind}");
    assert!(css.contains("@media (max-width: 640px)"));
    // The API's routes are still the API's.
    let (status, kind, _) = console.get("/v1/plan").await;
    assert_eq!(status, StatusCode::OK);
    assert!(kind.starts_with("application/json"), "{kind}");
}

#[sqlx::test(migrations = false)]
async fn the_savings_page_charts_and_tables_the_reports_dollars(pool: PgPool) {
    let console = Console::start(&pool).await;
    common::savings::history(&console.store).await;
    let window = "since=2026-11-30T00:00:00Z&until=2026-12-02T00:00:00Z";
    let html = console.page(&format!("/savings?{window}&by=team")).await;
    // The hand-worked answers of tests/common/savings.rs: $1090 in all, $154 of it by stops
    // under office, $936 on spot under to-spot; by team, cv $1046 and ml $44.
    for shown in [
        "<a href=\"/savings\" aria-current=\"page\">Savings</a>",
        "ebb saved <strong>$1090.00</strong>",
        "<th scope=\"col\">Policy</th>",
        "<th scope=\"row\">office</th><td class=\"num\">$154.00</td>",
        "<th scope=\"row\">to-spot</th><td class=\"num\">$936.00</td>",
        "<th scope=\"col\">team</th>",
        "<th scope=\"row\">cv</th><td class=\"num\">$1046.00</td>",
        "<th scope=\"row\">ml</th><td class=\"num\">$44.00</td>",
        "<th scope=\"row\">2026-11-30</th><td class=\"num\">$380.00</td>",
        "<svg",
        "Dollars saved per day by policy",
        "Dollars saved by team: cv $1046.00, ml $44.00.",
        "<title>01 Dec: to-spot $624.00</title>",
        "<option value=\"team\" selected>team</option>",
        "$154.00: 33.00 h after 2 stops and 0 hibernations",
        "$936.00: 36.00 h of replacements on spot, 1 move",
        "2 instances started by someone else",
    ] {
        assert!(html.contains(shown), "/savings lacks {shown:?}:\n{html}");
    }
    // Without a tag there is no tag table; the window's choices keep a given time.
    let html = console.page(&format!("/savings?{window}")).await;
    assert!(!html.contains("<th scope=\"col\">team</th>"), "{html}");
    assert!(
        html.contains("<option value=\"\" selected>no tag</option>"),
        "{html}"
    );
    assert!(html.contains("since 2026-11-30T00:00:00Z"), "{html}");
    // A window the API would refuse is a 400 page naming the field.
    let (status, _, body) = console.get("/savings?since=someday").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("since: "), "{body}");
}

#[sqlx::test(migrations = false)]
async fn the_fleet_page_filters_by_tag_sorts_by_a_column_and_shows_the_next_change(pool: PgPool) {
    // Monday noon in London: the office is open.
    let noon = ebb::clock::Clock::Fixed(t("2026-11-30T12:00:00Z"));
    let console = Console::start_on(&pool, noon).await;
    let mut stopped = instance("i-1", &[("team", "research")]);
    stopped.state = InstanceState::Stopped;
    stopped.instance_type = "p5.48xlarge".into();
    let mut big = instance("i-3", &[("team", "research")]);
    big.instance_type = "p4d.24xlarge".into();
    let fleet = [stopped, instance("i-2", &[("team", "ml")]), big];
    console.sync(&fleet, "2026-11-30T11:00:00Z").await;
    let decided = ["i-1", "i-3"].map(|id| decision(id, Action::None, Code::InHours, "in hours"));
    console
        .store
        .record_decisions(&decided, t("2026-11-30T11:00:00Z"))
        .await
        .unwrap();

    assert_eq!(rows(&console.page("/?tag=team%3Dml").await), ["i-2"]);
    assert_eq!(
        rows(&console.page("/?tag=team=research").await),
        ["i-1", "i-3"]
    );
    let by_type = console.page("/?sort=type").await;
    assert_eq!(rows(&by_type), ["i-2", "i-3", "i-1"]);
    assert!(by_type.contains("aria-sort=\"ascending\""), "{by_type}");
    let (status, _, body) = console.get("/?sort=cost").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("sort by one of id, type"), "{body}");
    let (status, _, body) = console.get("/?tag=team").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("KEY=VALUE"), "{body}");

    // The running box under the office's hours stops at 19:00 London time; the stopped one
    // starts at Tuesday's opening if ebb stopped it; the box under no policy has no next change.
    let html = console.page("/").await;
    for shown in [
        "stops at the close",
        "Mon 2026-11-30 19:00 Europe/London",
        "(19:00 UTC)",
        "hours close",
    ] {
        assert!(
            html.contains(shown),
            "the fleet page lacks {shown:?}:\n{html}"
        );
    }
}

#[sqlx::test(migrations = false)]
async fn pages_follow_the_apis_rule_for_reads(pool: PgPool) {
    let reader = "reader-token-0123456789";
    let writer = "writer-token-0123456789";
    let tokens = format!("reader:{reader}:read,writer:{writer}:override");
    let console = Console::start_with(&pool, &tokens, false, ebb::clock::Clock::System).await;
    for path in [
        "/",
        "/audit",
        "/audit.csv",
        "/migrations",
        "/savings",
        "/policies",
        "/instances/i-1",
    ] {
        assert_eq!(
            console.get(path).await.0,
            StatusCode::UNAUTHORIZED,
            "{path}"
        );
        let get = |token: &str| {
            console
                .http
                .get(format!("{}{path}", console.base))
                .bearer_auth(token)
                .send()
        };
        assert_eq!(
            get(writer).await.unwrap().status(),
            StatusCode::FORBIDDEN,
            "{path}"
        );
        assert_ne!(
            get(reader).await.unwrap().status(),
            StatusCode::UNAUTHORIZED,
            "{path}"
        );
        assert_ne!(
            get(reader).await.unwrap().status(),
            StatusCode::FORBIDDEN,
            "{path}"
        );
    }
    assert_eq!(console.get("/console.css").await.0, StatusCode::OK);
}
