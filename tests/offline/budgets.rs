//! Budgets without a database: `ebb validate` checks them with path:line; where each stands
//! is worked out from what ran and the price table, per owner and in the cloud's currency, an
//! unknown price or currency leaving the spend unknown; and the decisions do what a spent
//! budget asks, and nothing for one whose spend is unknown.

use crate::common::{ebb, instance, policies, samples, t, World};
use ebb::budget::{standings, Raise, RaiseBy, Ran};
use ebb::engine::{Action, BudgetStanding, Code};
use ebb::fleet::money::PriceTable;
use ebb::fleet::{Billing, Cloud, Fleet, InstanceState};
use std::collections::BTreeMap;

#[test]
fn validate_names_each_bad_budget_with_its_line() {
    let text = "\
policies:
  - name: p
    match: {}
budgets:
  - name: no-amount
    match: {tags: {team: research}}
    period: month
    timezone: Asia/Shanghai
  - name: odd-limit
    match: {}
    amount: 100
    period: week
    timezone: UTC
    at_limit: stop_all
  - name: yuan-on-ec2
    match: {instance_types: [g5.*]}
    amount: 1000
    currency: CNY
    period: month
    timezone: UTC
  - name: dollars-on-ecs
    match: {instance_types: [ecs.gn7i-*]}
    amount: 1000
    currency: USD
    period: month
    timezone: Asia/Shanghai
  - name: busy-wait
    match: {}
    amount: 10
    period: day
    timezone: UTC
    max_defer: 1h
";
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("budgets.yaml"), text).unwrap();
    let o = ebb(&["validate", dir.path().to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned() + &String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{err}");
    for (line, says) in [
        (5, "a budget needs an \"amount\""),
        (14, "at_limit: \"stop_all\" is not one of: notify, refuse_starts, stop_idle, stop (did you mean \"stop\"?)"),
        (18, "currency CNY does not match the boxes this budget matches: they are on AWS EC2, billed in USD"),
        (24, "currency USD does not match the boxes this budget matches: they are on Alibaba Cloud ECS, billed in CNY"),
        (32, "max_defer is for at_limit: stop"),
    ] {
        let at = format!("budgets.yaml:{line}:");
        assert!(
            err.lines().any(|l| l.contains(&at) && l.contains(says)),
            "{at} {says}\n{err}"
        );
    }
}

#[test]
fn a_budget_of_the_right_currency_loads_with_its_defaults() {
    let set = policies(
        "policies: []\nbudgets:\n  - {name: lab, match: {instance_types: [ecs.gn7i-*]}, amount: 150000, period: month, timezone: Asia/Shanghai}\n",
    );
    let b = &set.budgets[0];
    assert_eq!(b.currency, None, "the boxes' cloud's currency");
    assert_eq!(b.notify_at, [50.0, 80.0, 100.0]);
    assert_eq!(b.at_limit.as_str(), "notify");
    assert_eq!(b.source.line, 3);
}

fn ran(id: &str, ty: &str, region: &str, owner: &str, from: &str, to: &str) -> Ran {
    Ran {
        instance: id.into(),
        region: region.into(),
        instance_type: ty.into(),
        tags: [("team", "research"), ("ebb:owner", owner)]
            .into_iter()
            .collect(),
        spot: false,
        from: t(from),
        to: t(to),
    }
}

/// g5.xlarge at $2.50 in us-east-1; ecs.gn7i-c8g1.2xlarge at ¥20 in cn-hangzhou.
fn table() -> PriceTable {
    let mut usd = PriceTable::default();
    usd.prices
        .entry("us-east-1".into())
        .or_default()
        .insert("g5.xlarge".into(), 2.5);
    let mut cny = PriceTable::default();
    cny.prices
        .entry("cn-hangzhou".into())
        .or_default()
        .insert("ecs.gn7i-c8g1.2xlarge".into(), 20.0);
    usd.other_currencies.insert("CNY".into(), cny);
    usd
}

const PER_OWNER: &str = "
policies:
  - name: research
    match: {tags: {team: research}}
budgets:
  - name: per-person
    match: {tags: {team: research}}
    per: ebb:owner
    amount: 20
    period: day
    timezone: UTC
    at_limit: refuse_starts
    forecast: true
";

#[test]
fn each_owner_has_a_budget_of_their_own_and_the_forecast_runs_to_the_day_end() {
    let set = policies(PER_OWNER);
    let spans = [
        ran(
            "i-mei",
            "g5.xlarge",
            "us-east-1",
            "mei",
            "2026-11-30T20:00:00Z",
            "2026-12-01T08:00:00Z",
        ),
        ran(
            "i-ali",
            "g5.xlarge",
            "us-east-1",
            "ali",
            "2026-12-01T09:00:00Z",
            "2026-12-01T10:00:00Z",
        ),
    ];
    let mut running = instance("i-ali", &[("team", "research"), ("ebb:owner", "ali")]);
    running.state = InstanceState::Running;
    let fleet = Fleet {
        instances: vec![running],
        ..Fleet::default()
    };
    let now = t("2026-12-01T10:00:00Z");
    let out = standings(&set, now, Cloud::Aws, &spans, &fleet, &table(), &[]);
    let by: BTreeMap<_, _> = out.iter().map(|s| (s.key.clone().unwrap(), s)).collect();
    // Mei ran from midnight to 08:00 today: 8 h at $2.50; yesterday's hours are not today's.
    assert_eq!(by["mei"].spent, Ok(20.0));
    assert!(by["mei"].for_decisions().exhausted());
    assert_eq!(by["mei"].forecast, Some(20.0), "nothing of hers runs");
    // Ali ran an hour and still runs: $2.50 now, and 14 more hours to midnight.
    assert_eq!(by["ali"].spent, Ok(2.5));
    assert_eq!(by["ali"].per_hour, 2.5);
    assert_eq!(by["ali"].forecast, Some(2.5 + 14.0 * 2.5));
    let policy = &set.budgets[0];
    assert_eq!(
        by["ali"].crossed(policy),
        [(50.0, true), (80.0, true), (100.0, true)]
    );
    assert_eq!(
        by["mei"].summary(),
        "per-person (mei): $20.00 of $20.00 spent by 2026-12-01 10:00 UTC"
    );
}

/// A spot box's hours are not priced at on-demand (several times its bill): the spend is what
/// the on-demand boxes surely cost, so a budget with `at_limit: stop` does not stop boxes on
/// hours priced too high; the spot hours are said apart. A running spot box adds nothing to
/// the burn or the forecast.
#[test]
fn a_spot_box_s_hours_are_not_priced_at_on_demand_and_are_said_apart() {
    let set = policies(PER_OWNER);
    let spot = Ran {
        spot: true,
        ..ran(
            "i-spot",
            "g5.xlarge",
            "us-east-1",
            "mei",
            "2026-12-01T00:00:00Z",
            "2026-12-01T10:00:00Z",
        )
    };
    let spans = [
        spot,
        ran(
            "i-mei",
            "g5.xlarge",
            "us-east-1",
            "mei",
            "2026-12-01T08:00:00Z",
            "2026-12-01T10:00:00Z",
        ),
    ];
    let mut running = instance("i-spot", &[("team", "research"), ("ebb:owner", "mei")]);
    running.state = InstanceState::Running;
    running.lifecycle = ebb::fleet::Lifecycle::Spot;
    let fleet = Fleet {
        instances: vec![running],
        ..Fleet::default()
    };
    let now = t("2026-12-01T10:00:00Z");
    let out = standings(&set, now, Cloud::Aws, &spans, &fleet, &table(), &[]);
    let mei = &out[0];
    // Two on-demand hours at $2.50; the spot box's ten hours at on-demand would have made it
    // $30, past the $20 a day.
    assert_eq!(mei.spent, Ok(5.0));
    assert_eq!(mei.spot_hours, 10.0);
    assert!(!mei.for_decisions().exhausted());
    assert_eq!(mei.per_hour, 0.0);
    assert_eq!(mei.forecast, Some(5.0));
    assert_eq!(
        mei.summary(),
        "per-person (mei): $5.00 of $20.00 spent by 2026-12-01 10:00 UTC (and 10.00 h on spot, not priced: ebb keeps no spot prices)"
    );
    assert_eq!(mei.row("refuse_starts").spot_hours, 10.0);
}

#[test]
fn yuan_are_priced_from_the_yuan_table_and_an_unpriced_box_or_a_foreign_currency_leaves_spend_unknown(
) {
    let set = policies(
        "policies: []\nbudgets:\n  - {name: lab, match: {}, amount: 1000, period: month, timezone: Asia/Shanghai}\n  - {name: lab-usd, match: {}, amount: 100, currency: USD, period: month, timezone: UTC}\n",
    );
    let spans = [ran(
        "i-hz",
        "ecs.gn7i-c8g1.2xlarge",
        "cn-hangzhou",
        "mei",
        "2026-12-01T00:00:00Z",
        "2026-12-01T10:00:00Z",
    )];
    let now = t("2026-12-01T10:00:00Z");
    let out = standings(
        &set,
        now,
        Cloud::Alibaba,
        &spans,
        &Fleet::default(),
        &table(),
        &[],
    );
    assert_eq!(out[0].currency, "CNY");
    assert_eq!(out[0].spent, Ok(200.0));
    assert!(out[0]
        .summary()
        .starts_with("lab: ¥200.00 of ¥1,000.00 spent by 2026-12-01 18:00 Asia/Shanghai"));
    assert_eq!(
        out[1].spent,
        Err("the budget is in USD, but Alibaba Cloud ECS bills in CNY".into())
    );
    // A type the table does not list.
    let odd = [ran(
        "i-odd",
        "ecs.gn6v-c8g1.2xlarge",
        "cn-hangzhou",
        "mei",
        "2026-12-01T00:00:00Z",
        "2026-12-01T01:00:00Z",
    )];
    let out = standings(
        &set,
        now,
        Cloud::Alibaba,
        &odd,
        &Fleet::default(),
        &table(),
        &[],
    );
    let why = out[0].spent.clone().unwrap_err();
    assert!(
        why.contains("no CNY price of ecs.gn6v-c8g1.2xlarge in cn-hangzhou"),
        "{why}"
    );
    assert!(!out[0].for_decisions().exhausted());
}

fn standing(spent: Result<f64, String>) -> BudgetStanding {
    BudgetStanding {
        budget: "per-person".into(),
        key: Some("mei".into()),
        spent,
        amount: 20.0,
        summary: "per-person (mei): $21.00 of $20.00 spent by 2026-12-01 10:00 UTC".into(),
        period_start: t("2026-12-01T00:00:00Z"),
        until: "2026-12-02 00:00 UTC".into(),
    }
}

#[test]
fn a_spent_budget_refuses_only_its_owners_starts_and_an_unknown_spend_refuses_none() {
    let set = policies(&PER_OWNER.replace(
        "    match: {tags: {team: research}}\nbudgets:",
        "    match: {tags: {team: research}}\n    work_hours: {timezone: UTC, periods: [{days: mon-sun, start: \"09:00\", stop: \"18:00\"}], start_at_open: all}\nbudgets:",
    ));
    let stopped = |id: &str, owner: &str| {
        let mut i = instance(id, &[("team", "research"), ("ebb:owner", owner)]);
        i.state = InstanceState::Stopped;
        i.state_since = Some(t("2026-11-30T18:05:00Z"));
        i.billing = Billing::ec2(true);
        i
    };
    let w = World::with(vec![stopped("i-mei", "mei"), stopped("i-ali", "ali")]);
    let (fleet, prior) = w.fleet();
    let decide = |s: BudgetStanding| {
        let prior = prior.clone().with_budgets(vec![s]);
        ebb::engine::decide(t("2026-12-01T09:00:00Z"), &set, &fleet, &prior)
    };
    let d = decide(standing(Ok(21.0)));
    assert_eq!(
        (d[0].action, d[0].code),
        (Action::None, Code::BudgetExhausted),
        "{}",
        d[0].reason
    );
    assert!(
        d[0].reason.starts_with("per-person (mei): $21.00 of $20.00 spent by 2026-12-01 10:00 UTC; starts refused until 2026-12-02 00:00 UTC (at_limit: refuse_starts); without it: start ("),
        "{}",
        d[0].reason
    );
    assert_eq!(d[1].action, Action::Start, "Ali's budget is not spent");
    let d = decide(standing(Err("the price table has no USD price".into())));
    assert_eq!(d[0].action, Action::Start, "unknown spend refuses nothing");
}

const STOP_IDLE: &str = "
policies:
  - name: research
    match: {tags: {team: research}}
    work_hours: {timezone: UTC, periods: [{days: mon-sun, start: \"09:00\", stop: \"18:00\"}]}
    idle: {gpu_below: 5, for: 30m, when: outside_hours}
budgets:
  - {name: per-person, match: {tags: {team: research}}, per: ebb:owner, amount: 20, period: day, timezone: UTC, at_limit: stop_idle}
";

#[test]
fn stop_idle_applies_the_idle_rule_in_work_hours_once_spent() {
    let set = policies(STOP_IDLE);
    let mut idle = instance("i-mei", &[("team", "research"), ("ebb:owner", "mei")]);
    idle.launched_at = Some(t("2026-12-01T06:00:00Z"));
    idle.gpu_util = samples(&[
        ("2026-12-01T09:25:00Z", 1.0),
        ("2026-12-01T09:30:00Z", 1.0),
        ("2026-12-01T09:35:00Z", 1.0),
        ("2026-12-01T09:40:00Z", 1.0),
        ("2026-12-01T09:45:00Z", 1.0),
        ("2026-12-01T09:50:00Z", 1.0),
        ("2026-12-01T09:55:00Z", 1.0),
        ("2026-12-01T10:00:00Z", 1.0),
    ]);
    let w = World::with(vec![idle]);
    let (fleet, prior) = w.fleet();
    let now = t("2026-12-01T10:00:00Z");
    let d = ebb::engine::decide(
        now,
        &set,
        &fleet,
        &prior.clone().with_budgets(vec![standing(Ok(19.0))]),
    );
    assert_eq!(
        (d[0].action, d[0].code),
        (Action::None, Code::InHours),
        "not spent: {}",
        d[0].reason
    );
    let d = ebb::engine::decide(
        now,
        &set,
        &fleet,
        &prior.with_budgets(vec![standing(Ok(21.0))]),
    );
    assert_eq!(
        (d[0].action, d[0].code),
        (Action::Stop, Code::BudgetExhausted),
        "{}",
        d[0].reason
    );
    assert!(
        d[0].reason.starts_with("per-person (mei): $21.00 of $20.00 spent by 2026-12-01 10:00 UTC; at_limit: stop_idle, so the idle rule applies at any hour until 2026-12-02 00:00 UTC: "),
        "{}",
        d[0].reason
    );
}

#[test]
fn a_raise_in_force_adds_to_its_owners_amount_and_says_who_made_it() {
    let set = policies(PER_OWNER);
    let spans = [
        ran(
            "i-mei",
            "g5.xlarge",
            "us-east-1",
            "mei",
            "2026-12-01T00:00:00Z",
            "2026-12-01T08:00:00Z",
        ),
        ran(
            "i-ali",
            "g5.xlarge",
            "us-east-1",
            "ali",
            "2026-12-01T00:00:00Z",
            "2026-12-01T08:00:00Z",
        ),
    ];
    let raise = |key: Option<&str>, by, until: &str| Raise {
        budget: "per-person".into(),
        key: key.map(str::to_string),
        by,
        made_at: t("2026-12-01T08:30:00Z"),
        until: t(until),
        by_whom: "lead@example.com".into(),
        reason: "the paper deadline".into(),
    };
    let raises = [
        raise(Some("mei"), RaiseBy::Percent(50.0), "2026-12-01T18:00:00Z"),
        raise(Some("ali"), RaiseBy::Amount(5.0), "2026-12-01T09:00:00Z"),
    ];
    let at = |now: &str| {
        let out = standings(
            &set,
            t(now),
            Cloud::Aws,
            &spans,
            &Fleet::default(),
            &table(),
            &raises,
        );
        out.into_iter()
            .map(|s| (s.key.clone().unwrap(), s))
            .collect::<BTreeMap<_, _>>()
    };
    let by = at("2026-12-01T08:45:00Z");
    assert_eq!(by["mei"].amount, 30.0, "20 and 50 % of it");
    assert!(!by["mei"].for_decisions().exhausted());
    assert_eq!(
        by["mei"].summary(),
        "per-person (mei): $20.00 of $30.00 (raised 50% by lead@example.com until 2026-12-01 18:00 UTC) spent by 2026-12-01 08:45 UTC"
    );
    assert_eq!(by["ali"].amount, 25.0);
    // Ali's raise has ended at 09:00; Mei's has not.
    let by = at("2026-12-01T09:00:00Z");
    assert_eq!((by["mei"].amount, by["ali"].amount), (30.0, 20.0));
    assert!(by["ali"].for_decisions().exhausted());
    // Before it was made, no raise counts.
    let by = at("2026-12-01T08:00:00Z");
    assert_eq!(by["mei"].amount, 20.0);
}

#[test]
fn an_hour_a_commitment_pays_costs_a_budget_nothing_and_is_shared_among_the_boxes_that_ran() {
    let set = policies(PER_OWNER);
    // Mei's and Ali's boxes both run 8 h; one reserved g5.xlarge covers one of the two each
    // hour, shared between them.
    let spans = [
        ran(
            "i-mei",
            "g5.xlarge",
            "us-east-1",
            "mei",
            "2026-12-01T00:00:00Z",
            "2026-12-01T08:00:00Z",
        ),
        ran(
            "i-ali",
            "g5.xlarge",
            "us-east-1",
            "ali",
            "2026-12-01T00:00:00Z",
            "2026-12-01T08:00:00Z",
        ),
    ];
    let mut prices = table();
    prices
        .commitments
        .reserved_instances
        .push(ebb::fleet::money::ReservedInstances {
            instance_type: "g5.xlarge".into(),
            region: "us-east-1".into(),
            count: 1,
            term: ebb::fleet::money::Term::OneYear,
        });
    let now = t("2026-12-01T10:00:00Z");
    let by = |prices: &PriceTable| {
        let out = standings(
            &set,
            now,
            Cloud::Aws,
            &spans,
            &Fleet::default(),
            prices,
            &[],
        );
        out.into_iter()
            .map(|s| (s.key.clone().unwrap(), s.spent.unwrap()))
            .collect::<BTreeMap<_, _>>()
    };
    assert_eq!(
        by(&table()),
        BTreeMap::from([("ali".into(), 20.0), ("mei".into(), 20.0)])
    );
    assert_eq!(
        by(&prices),
        BTreeMap::from([("ali".into(), 10.0), ("mei".into(), 10.0)]),
        "half of each hour is the reservation's"
    );
    // Without Ali's box, the reservation pays all of Mei's hours.
    let alone = standings(
        &set,
        now,
        Cloud::Aws,
        &spans[..1],
        &Fleet::default(),
        &prices,
        &[],
    );
    assert_eq!(alone[0].spent, Ok(0.0));
}
