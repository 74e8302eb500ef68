//! The web console's pages over real HTTP and a real Postgres, served as `ebb serve` serves
//! them (the API's routes and the console's on one listener): what each page shows, its
//! filters and paging, escaping, and its errors.

use crate::common;

use base64::Engine as _;
use chrono::{Duration, Utc};
use common::{instance, t};
use ebb::api::ApiState;
use ebb::engine::{Action, Code, Decision};
use ebb::fleet::{Instance, InstanceState};
use ebb::store::{NewAuditEntry, Outcome, Store};
use reqwest::StatusCode;
use sha2::Digest as _;
use sqlx::PgPool;

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
pub(crate) struct Console {
    base: String,
    store: Store,
    http: reqwest::Client,
    /// The policy directory it loads: a test may write its own policies there.
    pub(crate) policies: tempfile::TempDir,
}

impl Console {
    async fn start(pool: &PgPool) -> Console {
        Console::start_with(pool, "", public(), ebb::clock::Clock::System).await
    }

    /// The console with `clock`'s time as now.
    pub(crate) async fn start_on(pool: &PgPool, clock: ebb::clock::Clock) -> Console {
        Console::start_with(pool, "", public(), clock).await
    }

    /// The console with `tokens` (as EBB_API_TOKENS), `limits`, and `clock`'s time as now.
    async fn start_with(
        pool: &PgPool,
        tokens: &str,
        limits: ebb::api::ApiLimits,
        clock: ebb::clock::Clock,
    ) -> Console {
        let store = Store::from_pool(pool.clone());
        store.migrate().await.unwrap();
        let policies = tempfile::tempdir().unwrap();
        std::fs::write(policies.path().join("p.yaml"), POLICY).unwrap();
        let base = common::api::serve_with_console(ApiState {
            tokens: common::api::tokens(tokens),
            limits,
            ..common::api::state(&store, vec![policies.path().to_path_buf()], clock)
        })
        .await;
        Console {
            base,
            store,
            http: reqwest::Client::new(),
            policies,
        }
    }

    /// The status, content type and body of `path`.
    pub(crate) async fn get(&self, path: &str) -> (StatusCode, String, String) {
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
    pub(crate) async fn page(&self, path: &str) -> String {
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

/// The limits of a console whose reads are public.
fn public() -> ebb::api::ApiLimits {
    ebb::api::ApiLimits {
        public_reads: true,
        ..Default::default()
    }
}

/// The limits of a console whose reads need a token.
fn private() -> ebb::api::ApiLimits {
    ebb::api::ApiLimits {
        public_reads: false,
        ..Default::default()
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

/// A reason as long as those of instances something else owns.
const OWNED_REASON: &str = "owned by Auto Scaling group inference-eu, which would replace or \
    break an instance stopped under it: ebb does not act on it alone (the policy asks for \
    nothing now: in work hours (close 19:00 Europe/Berlin)); instead, scale the group itself";

#[sqlx::test(migrations = false)]
async fn the_fleet_page_shows_each_instance_its_decision_and_protections(pool: PgPool) {
    let console = Console::start(&pool).await;
    let keep = (Utc::now() + Duration::days(2)).to_rfc3339();
    let mut stopped = instance("i-3", &[("team", "research"), ("ebb:skip", "true")]);
    stopped.state = InstanceState::Stopped;
    // Still listed by its cloud for a while after it ended.
    let mut ended = instance("i-4", &[("team", "research")]);
    ended.state = InstanceState::Terminated;
    let fleet = [
        instance(
            "i-1",
            &[("team", "research"), ("Name", "<script>alert(1)</script>")],
        ),
        instance("i-2", &[("ebb:keep-until", &keep)]),
        stopped,
        ended,
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
                Decision {
                    policy: None,
                    ..decision("i-3", Action::None, Code::OwnedByAsg, OWNED_REASON)
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
        "Decision and reason",
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
        "3 live instances, page 1 of 1; 1 terminated not shown (<a href=\"/?state=terminated\">show them</a>)",
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
    // A reason of a paragraph is cut at a word, whole in its title and on the instance's page.
    let cut = "owned by Auto Scaling group inference-eu, which would replace or break an \
               instance stopped under it: ebb does not act…";
    assert!(html.contains(cut), "{html}");
    assert!(
        html.contains("<a href=\"/instances/i-3#decision\" aria-label=\"The whole reason for i-3\">whole reason</a>"),
        "{html}"
    );
    assert!(
        html.contains(&format!("title=\"{OWNED_REASON}\"")),
        "{html}"
    );

    // The terminated one, when asked for by its state; the tag filter still holds.
    assert_eq!(rows(&console.page("/?state=terminated").await), ["i-4"]);
    let research = console.page("/?tag=team%3Dresearch").await;
    assert_eq!(rows(&research), ["i-1", "i-3"]);
    assert!(
        research.contains("?state=terminated&amp;tag=team%3Dresearch"),
        "{research}"
    );
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
        html.split("<td class=\"num\" data-label=\"Row\">")
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

    // A changed row breaks the chain, and the page says where. A replica's first view reads
    // every row; later views read the rows appended since, and re-check the head they ended at.
    sqlx::query("ALTER TABLE audit_log DISABLE TRIGGER USER")
        .execute(&pool)
        .await
        .unwrap();
    let edit = |seq: i64| {
        sqlx::query("UPDATE audit_log SET reason = 'edited' WHERE seq = $1")
            .bind(seq)
            .execute(&pool)
    };
    edit(77).await.unwrap();
    let again = console.page("/audit").await;
    assert!(
        again.contains("Intact: verified rows 1 to 130."),
        "the rows this replica verified are not read again: {again}"
    );
    let restarted = Console::start(&pool).await;
    let broken = restarted.page("/audit").await;
    assert!(broken.contains("Broken at row 77"), "{broken}");
    for n in 0..2 {
        let reason = format!("later {n}");
        let until = now + Duration::hours(4);
        console
            .store
            .create_override("i-1", until, &reason, "bob", now)
            .await
            .unwrap();
    }
    edit(132).await.unwrap();
    let broken = console.page("/audit").await;
    assert!(
        broken.contains("Broken at row 132"),
        "rows appended since are read: {broken}"
    );
    edit(130).await.unwrap();
    let broken = console.page("/audit").await;
    assert!(
        broken.contains("Broken at row 130"),
        "the verified head is re-checked: {broken}"
    );
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
        .map(|n| ebb::fleet::Sample::new(now - Duration::minutes(60 - 5 * n), 10.0 * n as f64))
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

/// A stop whose answer was lost has an intent and no outcome yet: the timeline says it is
/// unknown and being resolved, and stops saying so once the outcome is written.
#[sqlx::test(migrations = false)]
async fn an_intent_without_an_outcome_is_shown_as_unknown_resolving(pool: PgPool) {
    let console = Console::start(&pool).await;
    let box1 = instance("i-1", &[("team", "research")]);
    console.sync(&[box1], "2026-11-30T09:00:00Z").await;
    let intent = NewAuditEntry {
        instance: Some("i-1".into()),
        region: Some("us-east-1".into()),
        outcome: Outcome::Intent,
        ..NewAuditEntry::event(
            t("2026-11-30T19:00:00Z"),
            "scheduler",
            "stop",
            "closed".into(),
        )
    };
    let written = console
        .store
        .append_audit(std::slice::from_ref(&intent))
        .await
        .unwrap();
    let html = console.page("/instances/i-1").await;
    assert!(html.contains("unknown, resolving"), "{html}");

    let outcome = NewAuditEntry {
        at: t("2026-11-30T19:10:00Z"),
        outcome: Outcome::Succeeded,
        intent_seq: Some(written[0].seq),
        ..intent
    };
    console.store.append_audit(&[outcome]).await.unwrap();
    let html = console.page("/instances/i-1").await;
    assert!(!html.contains("unknown, resolving"), "{html}");
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

/// In December, a calendar with no date next year is named on the policies page; in June,
/// nothing is said of it.
#[sqlx::test(migrations = false)]
async fn the_policies_page_names_a_calendar_that_may_have_run_out(pool: PgPool) {
    let december = ebb::clock::Clock::Fixed(t("2026-12-07T09:00:00Z"));
    let console = Console::start_on(&pool, december).await;
    let calendar = "calendars:\n  holidays:\n    dates: [\"2026-12-25\"]\n";
    std::fs::write(console.policies.path().join("calendars.yaml"), calendar).unwrap();
    let html = console.page("/policies").await;
    assert!(
        html.contains("calendar holidays names no date in 2027 yet"),
        "{html}"
    );
    let june = ebb::clock::Clock::Fixed(t("2026-06-01T09:00:00Z"));
    let console = Console::start_on(&pool, june).await;
    std::fs::write(console.policies.path().join("calendars.yaml"), calendar).unwrap();
    let html = console.page("/policies").await;
    assert!(!html.contains("names no date"), "{html}");
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
        // Gross to net: no commitments, so the net is the gross; the history's table prices no
        // volumes, so what the stopped boxes still paid is unknown, and not taken off the net.
        "<dt>Gross</dt><dd>$1090.00: every stopped hour at its on-demand price</dd>",
        "<dt>Net</dt><dd><strong>$1090.00</strong></dd>",
        "not taken off the net; unknown for 33.00 h stopped",
        "<th scope=\"col\">Policy</th>",
        "<th scope=\"row\">office</th><td class=\"num\" data-label=\"Saved\">$154.00</td>",
        "<th scope=\"row\">to-spot</th><td class=\"num\" data-label=\"Saved\">$936.00</td>",
        "<th scope=\"col\">team</th>",
        "<th scope=\"row\">cv</th><td class=\"num\" data-label=\"Saved\">$1046.00</td>",
        "<th scope=\"row\">ml</th><td class=\"num\" data-label=\"Saved\">$44.00</td>",
        "<th scope=\"row\">2026-11-30</th><td class=\"num\" data-label=\"Saved\">$380.00</td>",
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
    let (status, _, body) = console
        .get("/savings?since=0001-01-01T00:00:00Z&until=9999-12-31T00:00:00Z")
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("is after now"), "{body}");
    let (status, _, body) = console.get("/savings?since=0001-01-01T00:00:00Z").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("at most 400 days"), "{body}");
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
        "Mon 2026-11-30 19:00</time> Europe/London",
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
    let console = Console::start_with(&pool, &tokens, private(), ebb::clock::Clock::System).await;
    for path in [
        "/",
        "/audit",
        "/audit.csv",
        "/migrations",
        "/savings",
        "/policies",
        "/instances/i-1",
    ] {
        // A browser without a login is sent to log in, and back after it.
        let mut browser = Browser::new(&console);
        let (status, headers, _) = browser.get(path).await;
        assert_eq!(status, StatusCode::SEE_OTHER, "{path}");
        let wanted = format!("/login?next={}", path.replace('/', "%2F"));
        assert_eq!(location(&headers), wanted, "{path}");
        // A script's wrong token is refused as the API refuses it.
        let wrong = console
            .http
            .get(format!("{}{path}", console.base))
            .bearer_auth("not-a-token-0123456789")
            .send()
            .await
            .unwrap();
        assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED, "{path}");
        // A login follows the token's scopes, as a bearer token does.
        let mut writing = Browser::new(&console);
        writing.login(writer).await;
        let (status, _, body) = writing.get(path).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}");
        assert!(
            body.contains("the token writer has no read scope"),
            "{body}"
        );
        let mut reading = Browser::new(&console);
        reading.login(reader).await;
        let status = reading.get(path).await.0;
        assert!(
            status != StatusCode::SEE_OTHER && status != StatusCode::FORBIDDEN,
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

/// A browser without JavaScript: it keeps the cookies it is given, sends them back, and does not
/// follow redirects (the tests look at each).
struct Browser {
    http: reqwest::Client,
    base: String,
    cookies: std::collections::BTreeMap<String, String>,
    /// The `Set-Cookie` headers of the last answer.
    set: Vec<String>,
}

impl Browser {
    fn new(console: &Console) -> Browser {
        Browser {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            base: console.base.clone(),
            cookies: Default::default(),
            set: Vec::new(),
        }
    }

    fn cookie_header(&self) -> String {
        let pairs: Vec<String> = self
            .cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        pairs.join("; ")
    }

    async fn answer(
        &mut self,
        r: reqwest::Response,
    ) -> (StatusCode, reqwest::header::HeaderMap, String) {
        self.set = r
            .headers()
            .get_all("set-cookie")
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .collect();
        for set in &self.set {
            let (pair, _) = set.split_once(';').unwrap_or((set, ""));
            let (name, value) = pair.split_once('=').unwrap();
            if set.contains("Max-Age=0") {
                self.cookies.remove(name);
            } else {
                self.cookies.insert(name.to_string(), value.to_string());
            }
        }
        let (status, headers) = (r.status(), r.headers().clone());
        (status, headers, r.text().await.unwrap())
    }

    async fn get(&mut self, path: &str) -> (StatusCode, reqwest::header::HeaderMap, String) {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .header("cookie", self.cookie_header())
            .send()
            .await
            .unwrap();
        self.answer(r).await
    }

    async fn post(
        &mut self,
        path: &str,
        form: &[(&str, &str)],
    ) -> (StatusCode, reqwest::header::HeaderMap, String) {
        let body: Vec<String> = form
            .iter()
            .map(|(k, v)| format!("{k}={}", urlencode(v)))
            .collect();
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .header("cookie", self.cookie_header())
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body.join("&"))
            .send()
            .await
            .unwrap();
        self.answer(r).await
    }

    /// Logs in with `token` through the login form.
    async fn login(&mut self, token: &str) {
        let (status, _, html) = self.get("/login").await;
        assert_eq!(status, StatusCode::OK, "{html}");
        let csrf = hidden(&html, "csrf");
        let (status, headers, body) = self
            .post(
                "/login",
                &[("token", token), ("csrf", &csrf), ("next", "/")],
            )
            .await;
        assert_eq!(status, StatusCode::SEE_OTHER, "{body}");
        assert_eq!(location(&headers), "/");
    }
}

/// `text` as a form body encodes it.
fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The value of the first hidden field `name` of `html`.
fn hidden(html: &str, name: &str) -> String {
    let start = format!("name=\"{name}\" value=\"");
    let at = html
        .find(&start)
        .unwrap_or_else(|| panic!("no field {name}:\n{html}"))
        + start.len();
    html[at..at + html[at..].find('"').unwrap()].to_string()
}

fn location(headers: &reqwest::header::HeaderMap) -> &str {
    headers
        .get("location")
        .map(|v| v.to_str().unwrap())
        .unwrap_or("")
}

/// The audit rows about `instance` with `action`, as (actor, reason).
async fn audited(store: &Store, instance: &str, action: &str) -> Vec<(String, String)> {
    let filter = ebb::store::AuditFilter {
        instance: Some(instance.to_string()),
        action: Some(action.to_string()),
        ..Default::default()
    };
    let rows = store.audit(&filter).await.unwrap();
    rows.into_iter()
        .map(|r| (r.entry.actor, r.entry.reason))
        .collect()
}

const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789abc";
const ROOT: &str = "root-token-0123456789ab";
const READER: &str = "reader-token-0123456789";

fn tokens() -> String {
    format!("alice:{ALICE},bob:{BOB}:read+override,root:{ROOT}:admin,reader:{READER}:read")
}

#[sqlx::test(migrations = false)]
async fn a_login_is_a_server_side_session_in_a_strict_http_only_cookie_until_logout(pool: PgPool) {
    let console = Console::start_with(&pool, &tokens(), private(), ebb::clock::Clock::System).await;
    let mut browser = Browser::new(&console);
    let (status, headers, _) = browser.get("/audit?action=stop").await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(location(&headers), "/login?next=%2Faudit%3Faction%3Dstop");

    let (status, _, html) = browser.get("/login?next=%2Faudit%3Faction%3Dstop").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        html.contains("<label for=\"token\">API token</label>"),
        "{html}"
    );
    assert!(html.contains("type=\"password\""), "{html}");
    let login = browser.set.join("\n");
    assert!(login.starts_with("ebb_login="), "{login}");
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(login.contains(flag), "{login}");
    }
    let csrf = hidden(&html, "csrf");
    let next = hidden(&html, "next");
    assert_eq!(next, "/audit?action=stop");

    // Without the form's CSRF value, or with another, nothing is logged in.
    for wrong in ["", "forged"] {
        let form = [("token", ALICE), ("csrf", wrong), ("next", "/")];
        let (status, _, body) = browser.post("/login", &form).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        assert!(body.contains("did not come from this console"), "{body}");
        assert!(browser.set.is_empty(), "{:?}", browser.set);
    }
    // An unknown token is refused in words, and the form is shown again.
    let form = [
        ("token", "guess-0123456789abcdef"),
        ("csrf", &csrf),
        ("next", &next),
    ];
    let (status, _, body) = browser.post("/login", &form).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(
        body.contains("That token is not one of this ebb&#39;s API tokens")
            || body.contains("That token is not one of this ebb's API tokens"),
        "{body}"
    );
    assert!(!browser.cookies.contains_key("ebb_session"));

    let form = [("token", ALICE), ("csrf", &csrf), ("next", &next)];
    let (status, headers, _) = browser.post("/login", &form).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(location(&headers), "/audit?action=stop");
    let cookie = browser
        .set
        .iter()
        .find(|c| c.starts_with("ebb_session="))
        .unwrap()
        .clone();
    let session = browser.cookies["ebb_session"].clone();
    assert_eq!(
        cookie,
        format!("ebb_session={session}; HttpOnly; SameSite=Strict; Path=/; Max-Age=28800")
    );
    // A random id, not the token in any encoding; the database keeps only its hash.
    assert_eq!(session.len(), 43, "{session}");
    let alice_b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(ALICE);
    assert!(
        !cookie.contains(ALICE) && !cookie.contains(&alice_b64),
        "{cookie}"
    );
    let stored: Vec<(Vec<u8>, Vec<u8>)> =
        sqlx::query_as("SELECT id_hash, token_binding FROM console_sessions")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(stored.len(), 1);
    let id_hash: [u8; 32] = sha2::Sha256::digest(session.as_bytes()).into();
    assert_eq!(stored[0].0, id_hash);
    assert_ne!(stored[0].1, sha2::Sha256::digest(ALICE.as_bytes()).to_vec());
    assert_eq!(browser.get("/audit?action=stop").await.0, StatusCode::OK);
    let (_, _, html) = browser.get("/login").await;
    assert!(
        html.contains("You are logged in as <strong>alice</strong>"),
        "{html}"
    );

    // Logging out needs the login's CSRF token too.
    let (status, _, _) = browser.post("/logout", &[("csrf", "forged")]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(browser.get("/").await.0, StatusCode::OK, "still logged in");
    let csrf = hidden(&html, "csrf");
    let (status, headers, _) = browser.post("/logout", &[("csrf", &csrf)]).await;
    assert_eq!(
        (status, location(&headers)),
        (StatusCode::SEE_OTHER, "/login")
    );
    assert!(browser.set[0].starts_with("ebb_session=; ") && browser.set[0].contains("Max-Age=0"));
    assert_eq!(browser.get("/").await.0, StatusCode::SEE_OTHER);
    // Logging out ended the session on the server: a copy of the cookie is worth nothing.
    browser
        .cookies
        .insert("ebb_session".to_string(), session.clone());
    assert_eq!(browser.get("/").await.0, StatusCode::SEE_OTHER);
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM console_sessions")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(left, 0);

    // A login never sends the browser to another site.
    let mut browser = Browser::new(&console);
    let (_, _, html) = browser
        .get("/login?next=https%3A%2F%2Fevil.example%2F")
        .await;
    assert_eq!(hidden(&html, "next"), "/");
    let csrf = hidden(&html, "csrf");
    let form = [
        ("token", ALICE),
        ("csrf", &csrf),
        ("next", "//evil.example/"),
    ];
    let (_, headers, _) = browser.post("/login", &form).await;
    assert_eq!(location(&headers), "/");
}

#[sqlx::test(migrations = false)]
async fn a_session_ends_at_its_expiry_or_when_its_token_leaves_the_tokens(pool: PgPool) {
    let console = Console::start_with(&pool, &tokens(), private(), ebb::clock::Clock::System).await;
    let mut browser = Browser::new(&console);
    browser.login(ALICE).await;
    assert_eq!(browser.get("/").await.0, StatusCode::OK);
    sqlx::query("UPDATE console_sessions SET expires_at = now() - interval '1 second'")
        .execute(&pool)
        .await
        .unwrap();
    let (status, headers, _) = browser.get("/").await;
    assert_eq!(
        (status, location(&headers)),
        (StatusCode::SEE_OTHER, "/login?next=%2F")
    );

    // Logged in again; then the same database served by a replica whose tokens lost alice's.
    browser.login(ALICE).await;
    assert_eq!(browser.get("/").await.0, StatusCode::OK);
    let without_alice = format!("bob:{BOB}:read+override");
    let other =
        Console::start_with(&pool, &without_alice, private(), ebb::clock::Clock::System).await;
    let mut elsewhere = Browser::new(&other);
    elsewhere.cookies = browser.cookies.clone();
    assert_eq!(elsewhere.get("/").await.0, StatusCode::SEE_OTHER);
    // The replica that knows the token still honours the login: sessions are shared.
    assert_eq!(browser.get("/").await.0, StatusCode::OK);
    // A cookie that is not one of ours is no login (and no database error).
    browser.cookies.insert(
        "ebb_session".to_string(),
        "x'; DROP TABLE audit_log; --".to_string(),
    );
    assert_eq!(browser.get("/").await.0, StatusCode::SEE_OTHER);
}

#[sqlx::test(migrations = false)]
async fn a_login_with_a_next_a_browser_would_read_as_another_site_lands_on_the_console(
    pool: PgPool,
) {
    let console = Console::start_with(&pool, &tokens(), private(), ebb::clock::Clock::System).await;
    for (given, lands) in [
        ("/%09/evil.example", "/"),
        ("/%0a/evil.example", "/"),
        ("%09//evil.example", "/"),
        ("/%5C/evil.example", "/"),
        ("///evil.example", "/"),
        ("/%2509/evil.example", "/%09/evil.example"),
        ("/instances/i-1%3Fmade%3D2", "/instances/i-1?made=2"),
    ] {
        let mut browser = Browser::new(&console);
        let (status, _, html) = browser.get(&format!("/login?next={given}")).await;
        assert_eq!(status, StatusCode::OK, "{given}");
        assert_eq!(hidden(&html, "next"), lands, "{given}");
        // The form posted with the raw value, as a forged page would post it.
        let csrf = hidden(&html, "csrf");
        let raw = given
            .replace("%09", "\t")
            .replace("%0a", "\n")
            .replace("%5C", "\\");
        let form = [("token", ALICE), ("csrf", &csrf), ("next", raw.as_str())];
        let (status, headers, _) = browser.post("/login", &form).await;
        assert_eq!(status, StatusCode::SEE_OTHER, "{given}");
        let to = location(&headers).to_string();
        assert!(
            to.starts_with('/') && !to.starts_with("//"),
            "{given}: {to}"
        );
        assert!(!to.contains(['\t', '\n', '\\']), "{given}: {to:?}");
        // Followed as a browser would: a page of the console answers.
        let (status, _, _) = browser.get(&to).await;
        assert!(
            status == StatusCode::OK || status == StatusCode::NOT_FOUND,
            "{given}: {to} answered {status}"
        );
    }
}

#[sqlx::test(migrations = false)]
async fn every_answer_carries_the_security_headers(pool: PgPool) {
    let console = Console::start_with(&pool, &tokens(), private(), ebb::clock::Clock::System).await;
    for path in [
        "/login",
        "/",
        "/console.css",
        "/readyz",
        "/v1/instances",
        "/no-such-page",
    ] {
        let r = console
            .http
            .get(format!("{}{path}", console.base))
            .send()
            .await
            .unwrap();
        let h = r.headers();
        let csp = h["content-security-policy"].to_str().unwrap();
        for directive in [
            "default-src 'none'",
            "style-src 'self'",
            "frame-ancestors 'none'",
            "form-action 'self'",
        ] {
            assert!(csp.contains(directive), "{path}: {csp}");
        }
        assert_eq!(h["referrer-policy"], "same-origin", "{path}");
        assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(h["x-frame-options"], "DENY", "{path}");
    }
    // The console needs nothing the policy refuses: no script, no inline style.
    let mut browser = Browser::new(&console);
    browser.login(ALICE).await;
    let (_, _, html) = browser.get("/").await;
    for refused in ["<script", " style=\"", "<style"] {
        assert!(!html.contains(refused), "{refused}: {html}");
    }
}

#[sqlx::test(migrations = false)]
async fn the_audit_csv_holds_every_selected_row_with_formulas_neutralised(pool: PgPool) {
    const ROWS: usize = 10_345;
    let console = Console::start(&pool).await;
    let at = Utc::now() - Duration::hours(1);
    // More than the 10,000 rows the download used to stop at, silently.
    let rows: Vec<ebb::store::NewAuditEntry> = (0..ROWS)
        .map(|n| {
            let reason = if n % 100 == 0 {
                format!("=HYPERLINK(\"http://evil.example/{n}\")")
            } else {
                format!("row {n}")
            };
            ebb::store::NewAuditEntry::event(at, "@mallory", "note", reason)
        })
        .collect();
    console.store.append_audit(&rows).await.unwrap();
    let (status, kind, csv) = console.get("/audit.csv?action=note").await;
    assert_eq!(status, StatusCode::OK);
    assert!(kind.starts_with("text/csv"), "{kind}");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + ROWS, "a header and every row");
    assert!(lines[0].starts_with("seq,at,actor,"), "{}", lines[0]);
    assert_eq!(csv.matches("seq,at,").count(), 1, "one header");
    assert!(lines[1].starts_with("1,") && lines[ROWS].starts_with(&format!("{ROWS},")));
    assert!(lines[1].contains(",'@mallory,"), "{}", lines[1]);
    assert!(lines[1].contains("\"'=HYPERLINK("), "{}", lines[1]);
    assert!(!csv.contains(",=") && !csv.contains(",@") && !csv.contains(",\"="));
    // The download still verifies: `ebb audit verify --file` reads the cells back whole.
    let back = ebb::output::parse_audit_export(&csv).unwrap();
    assert_eq!(back.len(), ROWS);
    assert_eq!(back[0].entry.actor, "@mallory");
    assert!(back[0].entry.reason.starts_with("=HYPERLINK("));
    assert!(matches!(
        ebb::store::verify_rows(&back),
        ebb::store::Verification::Intact { .. }
    ));
}

#[sqlx::test(migrations = false)]
async fn the_cookie_is_secure_behind_a_tls_proxy_or_when_the_setting_says_so(pool: PgPool) {
    let console = Console::start_with(&pool, &tokens(), private(), ebb::clock::Clock::System).await;
    let http = reqwest::Client::new();
    let set_cookie =
        |r: &reqwest::Response| r.headers()["set-cookie"].to_str().unwrap().to_string();
    let plain = http
        .get(format!("{}/login", console.base))
        .send()
        .await
        .unwrap();
    assert!(
        !set_cookie(&plain).contains("Secure"),
        "{}",
        set_cookie(&plain)
    );
    for (name, value) in [
        ("x-forwarded-proto", "https"),
        ("forwarded", "for=10.0.0.1;proto=https"),
    ] {
        let proxied = http
            .get(format!("{}/login", console.base))
            .header(name, value)
            .send()
            .await
            .unwrap();
        assert!(
            set_cookie(&proxied).ends_with("; Secure"),
            "{name}: {}",
            set_cookie(&proxied)
        );
    }
    let limits = ebb::api::ApiLimits {
        secure_cookies: true,
        ..private()
    };
    let secure = Console::start_with(&pool, &tokens(), limits, ebb::clock::Clock::System).await;
    let r = http
        .get(format!("{}/login", secure.base))
        .send()
        .await
        .unwrap();
    assert!(set_cookie(&r).ends_with("; Secure"), "{}", set_cookie(&r));
}

#[sqlx::test(migrations = false)]
async fn overrides_are_made_and_revoked_from_the_instance_page_with_the_apis_rules(pool: PgPool) {
    let console = Console::start_with(&pool, &tokens(), private(), ebb::clock::Clock::System).await;
    console
        .sync(
            &[instance("i-1", &[("team", "research")])],
            "2026-11-30T09:00:00Z",
        )
        .await;
    let mut alice = Browser::new(&console);
    alice.login(ALICE).await;
    let (_, _, html) = alice.get("/instances/i-1").await;
    for shown in [
        "<label for=\"until\">Keep it until</label>",
        "<label for=\"reason\">Reason</label>",
        "<button type=\"submit\">Keep it</button>",
        "at most 7 days",
        "Logged in as <strong>alice</strong>",
    ] {
        assert!(
            html.contains(shown),
            "the instance page lacks {shown:?}:\n{html}"
        );
    }
    let csrf = hidden(&html, "csrf");

    // A form without the login's CSRF token, or with another login's, changes nothing.
    let mut bob = Browser::new(&console);
    bob.login(BOB).await;
    let bobs = hidden(&bob.get("/instances/i-1").await.2, "csrf");
    for wrong in ["", "forged", bobs.as_str()] {
        let form = [("until", "4h"), ("reason", "demo"), ("csrf", wrong)];
        let (status, _, body) = alice.post("/instances/i-1/overrides", &form).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        assert!(body.contains("nothing was changed"), "{body}");
    }
    // Nor does a body that is not the form (a script's JSON with the cookie).
    let json = alice
        .http
        .post(format!("{}/instances/i-1/overrides", console.base))
        .header("cookie", alice.cookie_header())
        .json(&serde_json::json!({"until": "4h", "reason": "demo", "csrf": csrf}))
        .send()
        .await
        .unwrap();
    assert_eq!(json.status(), StatusCode::FORBIDDEN);
    assert!(console.store.all_overrides().await.unwrap().is_empty());
    assert!(audited(&console.store, "i-1", "override").await.is_empty());

    // The API's rules, in words, with what was typed kept in the form.
    let long = "x".repeat(501);
    for (until, reason, said) in [
        (
            "30d",
            "a month",
            "the longest override is 7days (EBB_MAX_OVERRIDE)",
        ),
        (
            "4h",
            long.as_str(),
            "reason: 501 characters is too long; say why in at most 500",
        ),
        ("2020-01-01T00:00:00Z", "old", "is in the past"),
        ("soon", "when", "until: "),
        ("4h", " ", "reason: must say why"),
    ] {
        let form = [
            ("until", until),
            ("reason", reason),
            ("csrf", csrf.as_str()),
        ];
        let (status, _, body) = alice.post("/instances/i-1/overrides", &form).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{until}: {body}");
        assert!(
            body.contains("The override was not made: ") && body.contains(said),
            "{said}: {body}"
        );
        assert!(body.contains("role=\"alert\""), "{body}");
        assert!(
            body.contains(&format!("value=\"{until}\"")),
            "the form keeps {until}: {body}"
        );
    }
    let form = [("until", "4h"), ("reason", "demo"), ("csrf", csrf.as_str())];
    let (status, _, body) = alice.post("/instances/i-gone/overrides", &form).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(console.store.all_overrides().await.unwrap().is_empty());

    // Made, audited under the token's name, shown with its revoke button.
    let form = [
        ("until", "4h"),
        ("reason", "demo on Friday"),
        ("csrf", csrf.as_str()),
    ];
    let (status, headers, _) = alice.post("/instances/i-1/overrides", &form).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let made = console.store.all_overrides().await.unwrap();
    assert_eq!(made.len(), 1);
    assert_eq!(
        (made[0].created_by.as_str(), made[0].reason.as_str()),
        ("alice", "demo on Friday")
    );
    let id = made[0].id;
    assert_eq!(
        location(&headers),
        format!("/instances/i-1?made={id}#overrides")
    );
    let rows = audited(&console.store, "i-1", "override").await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].0, "alice");
    assert!(rows[0].1.contains("demo on Friday"), "{rows:?}");
    let (_, _, html) = alice.get(&format!("/instances/i-1?made={id}")).await;
    assert!(
        html.contains(&format!(
            "Override {id} made: ebb keeps the instance from being stopped until"
        )),
        "{html}"
    );
    assert!(
        html.contains(&format!("aria-label=\"Revoke override {id}\"")),
        "{html}"
    );

    // Another's override needs admin: bob is refused, and nothing changes.
    let (_, _, page) = bob.get("/instances/i-1").await;
    assert!(
        page.contains("only its maker or an admin token may revoke it"),
        "{page}"
    );
    let form = [("csrf", bobs.as_str()), ("instance", "i-1")];
    let (status, _, body) = bob.post(&format!("/overrides/{id}/revoke"), &form).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(body.contains(&format!("Override {id} was not revoked: override {id} was made by alice: only a token with the admin scope")), "{body}");
    assert_eq!(
        console
            .store
            .active_overrides(Utc::now())
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(audited(&console.store, "i-1", "override_revoked")
        .await
        .is_empty());

    // A read-only login sees no form and cannot make one by posting.
    let mut reader = Browser::new(&console);
    reader.login(READER).await;
    let (_, _, page) = reader.get("/instances/i-1").await;
    assert!(
        !page.contains("action=\"/instances/i-1/overrides\""),
        "{page}"
    );
    assert!(page.contains("The token reader may read only: making or revoking overrides needs a token with the override scope"), "{page}");
    let readers = hidden(&page, "csrf");
    let form = [
        ("until", "1h"),
        ("reason", "mine"),
        ("csrf", readers.as_str()),
    ];
    let (status, _, body) = reader.post("/instances/i-1/overrides", &form).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body.contains("the token reader has no override scope"),
        "{body}"
    );
    assert_eq!(console.store.all_overrides().await.unwrap().len(), 1);

    // The admin token revokes it: audited under its name.
    let mut root = Browser::new(&console);
    root.login(ROOT).await;
    let roots = hidden(&root.get("/instances/i-1").await.2, "csrf");
    let form = [("csrf", roots.as_str()), ("instance", "i-1")];
    let (status, headers, _) = root.post(&format!("/overrides/{id}/revoke"), &form).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(
        location(&headers),
        format!("/instances/i-1?revoked={id}#overrides")
    );
    let rows = audited(&console.store, "i-1", "override_revoked").await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].0, "root");
    assert!(console
        .store
        .active_overrides(Utc::now())
        .await
        .unwrap()
        .is_empty());
    let (_, _, html) = root.get(&format!("/instances/i-1?revoked={id}")).await;
    assert!(
        html.contains(&format!("Override {id} revoked.")) && html.contains("by root"),
        "{html}"
    );
    // Revoking it again is refused in words.
    let (status, _, body) = root.post(&format!("/overrides/{id}/revoke"), &form).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        body.contains(&format!("no active override with id {id}")),
        "{body}"
    );

    // Its maker revokes its own without admin.
    let (_, _, page) = alice.get("/instances/i-1").await;
    let csrf = hidden(&page, "csrf");
    let form = [
        ("until", "2h"),
        ("reason", "again"),
        ("csrf", csrf.as_str()),
    ];
    assert_eq!(
        alice.post("/instances/i-1/overrides", &form).await.0,
        StatusCode::SEE_OTHER
    );
    let again = console.store.active_overrides(Utc::now()).await.unwrap()[0].id;
    let form = [("csrf", csrf.as_str()), ("instance", "i-1")];
    let (status, _, _) = alice
        .post(&format!("/overrides/{again}/revoke"), &form)
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let rows = audited(&console.store, "i-1", "override_revoked").await;
    assert_eq!(
        rows.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(),
        ["root", "alice"]
    );

    // A form posted without a login is sent to log in first.
    let mut stranger = Browser::new(&console);
    let (status, headers, _) = stranger.post("/instances/i-1/overrides", &form).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(location(&headers), "/login?next=%2Finstances%2Fi-1");
}

#[sqlx::test(migrations = false)]
async fn the_instance_page_says_what_ebb_explain_says_now(pool: PgPool) {
    // Monday 20:00 in London: the office is closed.
    let evening = t("2026-11-30T20:00:00Z");
    let console = Console::start_on(&pool, ebb::clock::Clock::Fixed(evening)).await;
    let mut box1 = instance("i-1", &[("team", "research")]);
    console.sync(&[box1.clone()], "2026-11-30T09:00:00Z").await;

    // What `ebb explain` computes for the same instance, policies and time.
    box1.state_since = Some(t("2026-11-30T09:00:00Z"));
    let set = common::policies(POLICY);
    let fleet = ebb::fleet::Fleet {
        instances: vec![box1],
        ..Default::default()
    };
    let explained = |prior: &ebb::engine::Prior| {
        ebb::engine::explain(evening, &set, &fleet, prior, "i-1").unwrap()
    };
    let shows = |html: &str, e: &ebb::engine::Explanation| {
        for step in &e.steps {
            let escaped = step
                .replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
                .replace('"', "&quot;");
            assert!(
                html.contains(&format!("<li>{escaped}</li>")),
                "the page lacks the step {step:?}:\n{html}"
            );
        }
        let d = &e.decision;
        let said = format!(
            "<strong>Decision: </strong>{} <code>{}</code> by office: {}",
            d.action, d.code, d.reason
        );
        assert!(html.contains(&said), "the page lacks {said:?}:\n{html}");
    };
    let closed = explained(&ebb::engine::Prior::default());
    assert_eq!(closed.decision.action, Action::Stop, "{closed}");
    let html = console.page("/instances/i-1").await;
    assert!(html.contains("Why, now"), "{html}");
    shows(&html, &closed);

    // An override in force is part of the explanation, as it is of `ebb explain`'s.
    let until = evening + Duration::hours(3);
    console
        .store
        .create_override("i-1", until, "late run", "alice", evening)
        .await
        .unwrap();
    let kept = ebb::engine::Override {
        instance: "i-1".into(),
        until,
        reason: "late run".into(),
        by: "alice".into(),
    };
    let held = explained(&ebb::engine::Prior::new(Default::default(), vec![kept]));
    assert_eq!(held.decision.action, Action::None, "{held}");
    shows(&console.page("/instances/i-1").await, &held);
}

/// Expired logins go without anyone logging in: the session pruner, a background task of
/// every replica, deletes them at each activation (every 10 minutes), and only them.
#[sqlx::test(migrations = false)]
async fn the_session_pruner_deletes_expired_logins_without_a_new_login(pool: PgPool) {
    use ebb::serve::{BackgroundTask as _, SessionPruner, SessionsPruned};
    let store = Store::from_pool(pool.clone());
    store.migrate().await.unwrap();
    let lasts = chrono::Duration::hours(1);
    store
        .start_console_session(&[1; 32], &[1; 32], lasts)
        .await
        .unwrap();
    store
        .start_console_session(&[2; 32], &[2; 32], lasts)
        .await
        .unwrap();
    sqlx::query(
        "UPDATE console_sessions SET expires_at = now() - interval '1 second' WHERE id_hash = $1",
    )
    .bind([1u8; 32].as_slice())
    .execute(&pool)
    .await
    .unwrap();

    let mut pruner = SessionPruner::new(store.clone());
    assert_eq!(
        pruner.activate().await.unwrap(),
        SessionsPruned { sessions: 1 }
    );
    assert_eq!(
        store.console_session(&[2; 32]).await.unwrap(),
        Some(vec![2; 32])
    );
    let left: Vec<Vec<u8>> = sqlx::query_scalar("SELECT id_hash FROM console_sessions")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(left, [vec![2u8; 32]]);
    assert_eq!(
        pruner.activate().await.unwrap(),
        SessionsPruned { sessions: 0 }
    );
}

#[sqlx::test(migrations = false)]
async fn a_reclaimed_box_is_restored_from_its_page_with_the_apis_rules(pool: PgPool) {
    use ebb::store::{NewAuditEntry, ReclaimState};
    let console = Console::start_with(&pool, &tokens(), private(), ebb::clock::Clock::System).await;
    let mut i = instance("i-1", &[("team", "research")]);
    i.state = ebb::fleet::InstanceState::Stopped;
    console.sync(&[i], "2026-11-30T09:00:00Z").await;
    let at = t("2026-12-30T09:00:00Z");
    let planned = NewAuditEntry::event(at, "scheduler", "reclaim", "planned".into());
    let mut r = console
        .store
        .plan_reclaim("i-1", "us-east-1", "research", at, at, at, planned)
        .await
        .unwrap()
        .unwrap();
    r.state = ReclaimState::Reclaimed;
    r.image = Some("ami-0reclaimed".into());
    r.image_volumes = Some(vec![ebb::fleet::money::Volume {
        volume_type: "gp3".into(),
        size_gib: 500,
    }]);
    console.store.save_reclaim(&r, &[]).await.unwrap();

    // A reader sees the reclaim, and no button.
    let mut reader = Browser::new(&console);
    reader.login(READER).await;
    let (_, _, html) = reader.get("/instances/i-1").await;
    assert!(html.contains("ami-0reclaimed"), "{html}");
    assert!(html.contains("holding 500 GiB of its volumes"), "{html}");
    assert!(!html.contains("Restore it from its image"), "{html}");
    let csrf = hidden(&html, "csrf");
    let (status, _, body) = reader
        .post("/instances/i-1/restore", &[("csrf", &csrf)])
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");

    // Bob may: a forged form changes nothing; his button asks for it, once.
    let mut bob = Browser::new(&console);
    bob.login(BOB).await;
    let (_, _, html) = bob.get("/instances/i-1").await;
    assert!(html.contains("Restore it from its image"), "{html}");
    let (status, _, _) = bob
        .post("/instances/i-1/restore", &[("csrf", "forged")])
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(audited(&console.store, "i-1", "restore_asked")
        .await
        .is_empty());
    let csrf = hidden(&html, "csrf");
    let (status, headers, body) = bob.post("/instances/i-1/restore", &[("csrf", &csrf)]).await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{body}");
    assert_eq!(location(&headers), "/instances/i-1#reclaim");
    let asked = audited(&console.store, "i-1", "restore_asked").await;
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0].0, "bob");
    let (_, _, html) = bob.get("/instances/i-1").await;
    assert!(!html.contains("Restore it from its image"), "{html}");
    assert!(html.contains("Restore asked by"), "{html}");
    let (status, _, body) = bob.post("/instances/i-1/restore", &[("csrf", &csrf)]).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body.contains("asked for already"), "{body}");
}
