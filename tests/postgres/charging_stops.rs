//! After a stop on a cloud where a plain stop keeps charging (Alibaba Cloud ECS, simulated as
//! the demo fleet's `cn-hangzhou` region): the stopped mode read back after each stop is in its
//! outcome row ("stopped without charge", or "stopped, still charging"), a charging stop is told
//! to the webhook once and counts no saving in `ebb report` (which prices the others in yuan,
//! apart from the dollars), and a subscription box is never stopped.

use crate::common;
use common::t;
use common::world::SimWorld;
use ebb::reconcile::Options;
use ebb::report::{self, Window};
use ebb::store::{AuditFilter, Outcome, Store};
use sqlx::PgPool;
use std::path::Path;

/// The Hangzhou boxes of `deploy/demo-fleet.yaml`: two pay-as-you-go GPU boxes, one of the
/// local-disk family ecs.gn5, one subscription, and one whose account keeps stopped instances
/// billed.
const FLEET: &str = r#"
instances:
  - {id: i-bp1hz01, region: cn-hangzhou, type: ecs.gn7i-c8g1.2xlarge, state: running, cloud: alibaba, tags: {team: vision, env: dev}}
  - {id: i-bp1hz02, region: cn-hangzhou, type: ecs.gn7i-c8g1.2xlarge, state: running, cloud: alibaba, tags: {team: vision, env: dev}}
  - {id: i-bp1hz03, region: cn-hangzhou, type: ecs.gn5.2xlarge, state: running, cloud: alibaba, tags: {team: vision, env: dev}}
  - {id: i-bp1hz04, region: cn-hangzhou, type: ecs.gn7i-c8g1.2xlarge, state: running, cloud: alibaba, charge: subscription, tags: {team: vision, env: dev}}
  - {id: i-bp1hz05, region: cn-hangzhou, type: ecs.gn7i-c8g1.2xlarge, state: running, cloud: alibaba, tags: {team: vision, env: dev}, sim: {stops_keep_charging: true}}
"#;

/// The repository's policy file `name`.
fn policy(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("policies")
            .join(name),
    )
    .unwrap()
}

#[sqlx::test(migrations = false)]
async fn hangzhou_stops_say_their_billing_and_a_charging_one_saves_nothing(pool: PgPool) {
    let (url, texts) = common::webhook::receiver().await;
    let (webhook, poster) =
        ebb::webhook::Webhook::start(url.parse().unwrap(), ebb::control::Tasks::default());
    let options = Options {
        webhook: Some(webhook),
        ..Options::default()
    };
    let mut w = SimWorld::plan(FLEET)
        .policy("calendars.yaml", &policy("calendars.yaml"))
        .policy("hangzhou.yaml", &policy("hangzhou.yaml"))
        .options(options)
        .start(Store::from_pool(pool))
        .await;
    // Monday 19:05 in Beijing, after the close, then twice more.
    for at in ["11:05", "11:10", "11:15"] {
        w.tick(&format!("2026-11-30T{at}:00Z")).await;
    }
    let rows = w
        .store
        .audit(&AuditFilter {
            outcome: Some(Outcome::Succeeded),
            action: Some("stop".into()),
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    let stopped: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|r| {
            let e = &r.entry;
            (
                e.instance.as_deref().unwrap(),
                e.code.as_deref().unwrap(),
                e.reason.as_str(),
            )
        })
        .collect();
    let ids: Vec<&str> = stopped.iter().map(|s| s.0).collect();
    // The gn5 box and the subscription are never stopped.
    assert_eq!(ids, ["i-bp1hz01", "i-bp1hz02", "i-bp1hz05"], "{stopped:?}");
    for (id, code, reason) in &stopped[..2] {
        assert_eq!(*code, "outside_hours", "{id}");
        assert!(
            reason.ends_with("stopped without charge; the public IP will change; use an EIP to keep one (Alibaba Cloud ECS releases the public IP of an instance stopped without charge)"),
            "{id}: {reason}"
        );
    }
    let (_, code, reason) = stopped[2];
    assert_eq!(code, "stopped_still_charging");
    assert!(
        reason.contains(
            "; stopped, still charging: Alibaba Cloud ECS reports the stopped instance billed"
        ),
        "{reason}"
    );
    // Nothing at all was done to the subscription or the gn5 box.
    for id in ["i-bp1hz03", "i-bp1hz04"] {
        let rows = w
            .store
            .audit(&AuditFilter {
                instance: Some(id.into()),
                ..AuditFilter::default()
            })
            .await
            .unwrap();
        assert!(rows.is_empty(), "{id}: {rows:?}");
    }
    // The report: three stops, an hour of each by 12:05, the charging one's worth nothing.
    let history = w
        .store
        .report_history(
            t("2026-11-30T00:00:00Z"),
            t("2026-11-30T12:05:00Z"),
            &Default::default(),
        )
        .await
        .unwrap();
    let window = Window {
        since: t("2026-11-30T00:00:00Z"),
        until: t("2026-11-30T12:05:00Z"),
    };
    // Alibaba Cloud bills these boxes in yuan: priced from the table's CNY prices, as the
    // demo's are, and reported apart from the dollars.
    let price = [("ecs.gn7i-c8g1.2xlarge".to_string(), 1.5)].into();
    let yuan = ebb::cloud::PriceTable {
        source: "the simulated fleet".into(),
        prices: [("cn-hangzhou".to_string(), price)].into(),
        ..Default::default()
    };
    let prices = ebb::cloud::PriceTable {
        other_currencies: [("CNY".to_string(), yuan)].into(),
        ..Default::default()
    };
    let r = report::compute(&history, window, None, &prices);
    assert_eq!(r.total.stops, 3);
    assert_eq!(r.total.stopped_hours, 3.0);
    assert_eq!(r.total.charging_stopped_hours, 1.0);
    assert_eq!(
        r.total.saved_usd, 0.0,
        "no dollar is saved on Alibaba Cloud"
    );
    let cny = &r.other_currencies[0];
    assert_eq!(cny.currency, "CNY");
    assert_eq!(cny.saved, 3.0);
    assert_eq!(cny.priced_stopped_hours, 2.0);
    let table = report::table(&r);
    assert!(
        table.contains(
            "1.00 stopped hours are of stops their cloud still billed (stopped, still charging)"
        ),
        "{table}"
    );
    assert!(
        table.contains("in CNY, apart from the dollars (prices from the simulated fleet"),
        "{table}"
    );
    drop(w);
    poster.finish(std::time::Duration::from_secs(30)).await;
    // The shipped calendars name no 2027 date: their notices go out too, and are not this.
    let texts: Vec<String> = texts
        .lock()
        .unwrap()
        .iter()
        .filter(|t| !t.starts_with("Calendar: "))
        .cloned()
        .collect();
    assert_eq!(texts.len(), 1, "told once: {texts:?}");
    assert!(
        texts[0].starts_with("ebb stopped i-bp1hz05 (cn-hangzhou), policy vision-hangzhou-dev, but it is still charging"),
        "{}",
        texts[0]
    );
}
