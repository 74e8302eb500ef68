//! Hand-worked histories: each answer is worked out in the comment beside it.

use super::*;

fn t(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn action(instance: &str, at: &str, action: EbbAction, policy: &str) -> ActionRecord {
    ActionRecord {
        instance: instance.into(),
        at: t(at),
        action,
        policy: Some(policy.into()),
        saved: StopSaved::Saved,
    }
}

fn seen(instance: &str, at: &str, state: &str) -> StateChange {
    StateChange {
        instance: instance.into(),
        at: t(at),
        to_state: state.into(),
    }
}

fn info(instance_type: &str, team: Option<&str>) -> InstanceInfo {
    InstanceInfo {
        region: "us-east-1".into(),
        instance_type: instance_type.into(),
        tags: team
            .map(|v| [("team".to_string(), v.to_string())].into())
            .unwrap_or_default(),
        policy: Some("office".into()),
        attached: Default::default(),
        interruptible: false,
    }
}

/// $2/h for g.two, $10/h for g.ten; nothing else is priced.
fn prices() -> PriceTable {
    let types = [("g.two", 2.0), ("g.ten", 10.0)].map(|(t, p)| (t.to_string(), p));
    PriceTable {
        prices: [("us-east-1".to_string(), types.into())].into(),
        ..PriceTable::default()
    }
}

fn window(since: &str, until: &str) -> Window {
    Window {
        since: t(since),
        until: t(until),
    }
}

fn history(actions: Vec<ActionRecord>, changes: Vec<StateChange>) -> History {
    History {
        actions,
        changes,
        instances: [
            ("i-two".to_string(), info("g.two", Some("ml"))),
            ("i-ten".to_string(), info("g.ten", Some("cv"))),
            ("i-free".to_string(), info("g.unknown", None)),
        ]
        .into(),
        ..History::default()
    }
}

#[test]
fn a_stop_until_a_persons_start_the_next_morning_is_14_hours_and_28_dollars() {
    // Stopped Monday 18:00, seen running Tuesday 08:00: 14 h at $2/h = $28, 6 h ($12) on
    // Monday and 8 h ($16) on Tuesday; the start is a person's.
    let h = history(
        vec![action(
            "i-two",
            "2026-11-30T18:00:00Z",
            EbbAction::Stop,
            "office",
        )],
        vec![
            seen("i-two", "2026-11-30T18:05:00Z", "stopped"),
            seen("i-two", "2026-12-01T08:00:00Z", "running"),
        ],
    );
    let r = compute(
        &h,
        window("2026-11-30T00:00:00Z", "2026-12-02T00:00:00Z"),
        None,
        &prices(),
    );
    assert_eq!(r.total.stopped_hours, 14.0);
    assert_eq!(r.total.stopped_saved_usd, 28.0);
    assert_eq!(r.total.saved_usd, 28.0);
    assert_eq!(r.total.stops, 1);
    assert_eq!(r.total.people_starts, 1);
    assert_eq!(r.days.len(), 2);
    assert_eq!(r.days[0].measures.stopped_saved_usd, 12.0);
    assert_eq!(r.days[0].measures.stops, 1);
    assert_eq!(r.days[1].measures.stopped_saved_usd, 16.0);
    assert_eq!(r.days[1].measures.people_starts, 1);
    assert_eq!(r.days[1].saved_by_policy["office"], 16.0);
    assert_eq!(r.policies.len(), 1);
    assert_eq!(r.policies[0].policy, "office");
    assert_eq!(r.policies[0].measures, r.total);
}

#[test]
fn ebbs_own_start_ends_the_stretch_and_is_no_persons_start() {
    // Stopped 18:00, started by ebb 07:00 and seen running at the next tick: 13 h, $26.
    let h = history(
        vec![
            action("i-two", "2026-11-30T18:00:00Z", EbbAction::Stop, "office"),
            action("i-two", "2026-12-01T07:00:00Z", EbbAction::Start, "office"),
        ],
        vec![seen("i-two", "2026-12-01T07:05:00Z", "running")],
    );
    let r = compute(
        &h,
        window("2026-11-30T00:00:00Z", "2026-12-02T00:00:00Z"),
        None,
        &prices(),
    );
    assert_eq!(r.total.stopped_hours, 13.0);
    assert_eq!(r.total.saved_usd, 26.0);
    assert_eq!(r.total.people_starts, 0);
}

#[test]
fn the_window_clips_a_stop_before_its_start_and_a_stretch_past_its_end() {
    // Stopped Sunday 18:00, before the window opens Monday 00:00; seen running Monday 08:00:
    // 8 h ($16) inside, no stop counted, the person's start counted.
    let h = history(
        vec![
            action("i-two", "2026-11-29T18:00:00Z", EbbAction::Stop, "office"),
            // Stopped again Monday 20:00, still stopped when the window ends at 23:00: 3 h.
            action("i-two", "2026-11-30T20:00:00Z", EbbAction::Stop, "office"),
        ],
        vec![seen("i-two", "2026-11-30T08:00:00Z", "running")],
    );
    let r = compute(
        &h,
        window("2026-11-30T00:00:00Z", "2026-11-30T23:00:00Z"),
        None,
        &prices(),
    );
    assert_eq!(r.total.stopped_hours, 11.0);
    assert_eq!(r.total.saved_usd, 22.0);
    assert_eq!(r.total.stops, 1);
    assert_eq!(r.total.people_starts, 1);
    assert_eq!(r.days.len(), 1);
    // A window that ends before the second stop sees only the first stretch's 8 h.
    let r = compute(
        &h,
        window("2026-11-30T00:00:00Z", "2026-11-30T12:00:00Z"),
        None,
        &prices(),
    );
    assert_eq!((r.total.stopped_hours, r.total.stops), (8.0, 0));
}

#[test]
fn termination_ends_a_stretch_and_hibernations_count_apart() {
    // Hibernated 18:00, terminated (seen shutting down) 20:00: 2 h at $10/h = $20, no start.
    let h = history(
        vec![action(
            "i-ten",
            "2026-11-30T18:00:00Z",
            EbbAction::Hibernate,
            "office",
        )],
        vec![
            seen("i-ten", "2026-11-30T20:00:00Z", "shutting-down"),
            seen("i-ten", "2026-11-30T20:05:00Z", "terminated"),
        ],
    );
    let r = compute(
        &h,
        window("2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z"),
        None,
        &prices(),
    );
    assert_eq!(r.total.stopped_hours, 2.0);
    assert_eq!(r.total.saved_usd, 20.0);
    assert_eq!((r.total.stops, r.total.hibernations), (0, 1));
    assert_eq!(r.total.people_starts, 0);
}

#[test]
fn an_instance_the_price_table_lacks_counts_hours_but_no_dollars() {
    let h = history(
        vec![action(
            "i-free",
            "2026-11-30T10:00:00Z",
            EbbAction::Stop,
            "office",
        )],
        vec![],
    );
    let r = compute(
        &h,
        window("2026-11-30T00:00:00Z", "2026-11-30T15:00:00Z"),
        None,
        &prices(),
    );
    assert_eq!(r.total.stopped_hours, 5.0);
    assert_eq!(r.total.unpriced_stopped_hours, 5.0);
    assert_eq!(r.total.saved_usd, 0.0);
}

#[test]
fn a_stop_its_cloud_still_bills_counts_its_hours_and_no_dollars() {
    // i-ten ($10/h) stopped at 10:00 but still charging, and i-two ($2/h) stopped at 10:00
    // without charge; the window ends at 15:00: 5 h each, $10 saved, 5 h still charging.
    let charging = ActionRecord {
        saved: StopSaved::Charging,
        ..action("i-ten", "2026-11-30T10:00:00Z", EbbAction::Stop, "office")
    };
    let h = history(
        vec![
            charging,
            action("i-two", "2026-11-30T10:00:00Z", EbbAction::Stop, "office"),
        ],
        vec![],
    );
    let r = compute(
        &h,
        window("2026-11-30T00:00:00Z", "2026-11-30T15:00:00Z"),
        None,
        &prices(),
    );
    assert_eq!(r.total.stops, 2);
    assert_eq!(r.total.stopped_hours, 10.0);
    assert_eq!(r.total.charging_stopped_hours, 5.0);
    assert_eq!(r.total.unpriced_stopped_hours, 0.0);
    assert_eq!(r.total.saved_usd, 10.0);
    assert!(table(&r).contains("5.00 stopped hours are of stops their cloud still billed"));
}

#[test]
fn a_day_rolled_up_counts_the_hours_of_a_stop_its_cloud_still_bills_apart_from_those_saved() {
    // As above, over the whole day: i-ten's stop is counted, its 14 h are rolled as billed.
    let charging = ActionRecord {
        saved: StopSaved::Charging,
        ..action("i-ten", "2026-11-30T10:00:00Z", EbbAction::Stop, "office")
    };
    let h = history(
        vec![
            charging,
            action("i-two", "2026-11-30T10:00:00Z", EbbAction::Stop, "office"),
        ],
        vec![],
    );
    let day = chrono::NaiveDate::from_ymd_opt(2026, 11, 30).unwrap();
    let (rows, _) = super::roll_up(&h, day);
    let hours = |id: &str| {
        let row = rows.iter().find(|r| r.instance == id).unwrap();
        (row.stops, row.stopped_hours, row.charging_hours)
    };
    assert_eq!(hours("i-ten"), (1, 0.0, 14.0));
    assert_eq!(hours("i-two"), (1, 14.0, 0.0));
}

#[test]
fn spot_savings_count_the_hours_on_spot_inside_the_window() {
    // Running on spot since 10:00 at $14/h against $40/h on demand; the window ends at 20:00:
    // 10 h x $26 = $260, and the $50 earlier replacements saved (08:00 to 09:30) as well: $310.
    let mut h = history(vec![], vec![]);
    h.migrations.push(SpotMove {
        original: "i-ten".into(),
        policy: "to-spot".into(),
        created_at: t("2026-11-30T08:00:00Z"),
        on_spot: true,
        running_since: Some(t("2026-11-30T10:00:00Z")),
        ended_at: None,
        on_demand_price: Some(40.0),
        price: Some(14.0),
        saved_before: 50.0,
        earlier_until: Some(t("2026-11-30T09:30:00Z")),
    });
    let r = compute(
        &h,
        window("2026-11-30T00:00:00Z", "2026-11-30T20:00:00Z"),
        Some("team"),
        &prices(),
    );
    assert_eq!(r.total.spot_hours, 10.0);
    assert_eq!(r.total.spot_saved_usd, 310.0);
    assert_eq!(r.total.spot_moves, 1);
    assert_eq!(r.policies[0].policy, "to-spot");
    assert_eq!(r.tags[0].value.as_deref(), Some("cv"));
    assert_eq!(r.tags[0].measures.saved_usd, 310.0);
    // A window from noon: 8 h x $26 = $208; the migration and its earlier savings were before.
    let r = compute(
        &h,
        window("2026-11-30T12:00:00Z", "2026-11-30T20:00:00Z"),
        None,
        &prices(),
    );
    assert_eq!((r.total.spot_saved_usd, r.total.spot_moves), (208.0, 0));
    // From 09:00: the earlier $50 spread over 08:00-09:30 counts for its last half hour,
    // $16.67, beside 10 h x $26.
    let r = compute(
        &h,
        window("2026-11-30T09:00:00Z", "2026-11-30T20:00:00Z"),
        None,
        &prices(),
    );
    assert_eq!(r.total.spot_saved_usd, 276.67);
}

#[test]
fn overrides_count_when_made_and_their_hours_in_force_inside_the_window() {
    let mut h = history(vec![], vec![]);
    // Made at 09:00 for 4 h: counted, 4 h.
    h.overrides.push(OverrideSpan {
        instance: "i-two".into(),
        created_at: t("2026-11-30T09:00:00Z"),
        ends_at: t("2026-11-30T13:00:00Z"),
    });
    // Made the day before, in force until 02:00: not counted, 2 h.
    h.overrides.push(OverrideSpan {
        instance: "i-ten".into(),
        created_at: t("2026-11-29T20:00:00Z"),
        ends_at: t("2026-11-30T02:00:00Z"),
    });
    let r = compute(
        &h,
        window("2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z"),
        Some("team"),
        &prices(),
    );
    assert_eq!((r.total.overrides, r.total.override_hours), (1, 6.0));
    let by_team: Vec<(Option<&str>, u64, f64)> = r
        .tags
        .iter()
        .map(|t| {
            (
                t.value.as_deref(),
                t.measures.overrides,
                t.measures.override_hours,
            )
        })
        .collect();
    assert_eq!(by_team, [(Some("cv"), 0, 2.0), (Some("ml"), 1, 4.0)]);
}

#[test]
fn grouping_by_a_tag_puts_untagged_instances_last() {
    // i-two (ml) 2 h x $2, i-ten (cv) 1 h x $10, i-free untagged 3 h unpriced.
    let h = history(
        vec![
            action("i-two", "2026-11-30T10:00:00Z", EbbAction::Stop, "office"),
            action("i-ten", "2026-11-30T11:00:00Z", EbbAction::Stop, "labs"),
            action("i-free", "2026-11-30T09:00:00Z", EbbAction::Stop, "office"),
        ],
        vec![],
    );
    let r = compute(
        &h,
        window("2026-11-30T00:00:00Z", "2026-11-30T12:00:00Z"),
        Some("team"),
        &prices(),
    );
    let by_team: Vec<(Option<&str>, f64, f64)> = r
        .tags
        .iter()
        .map(|t| {
            (
                t.value.as_deref(),
                t.measures.saved_usd,
                t.measures.stopped_hours,
            )
        })
        .collect();
    assert_eq!(
        by_team,
        [
            (Some("cv"), 10.0, 1.0),
            (Some("ml"), 4.0, 2.0),
            (None, 0.0, 3.0)
        ]
    );
    let by_policy: Vec<(&str, f64)> = r
        .policies
        .iter()
        .map(|p| (p.policy.as_str(), p.measures.saved_usd))
        .collect();
    assert_eq!(by_policy, [("labs", 10.0), ("office", 4.0)]);
    assert_eq!(r.days[0].saved_by_tag["cv"], 10.0);
    assert!(!r.days[0].saved_by_tag.contains_key(UNTAGGED));
    assert_eq!(h.tag_keys(), ["team"]);
    let text = csv(&r);
    assert!(text.starts_with("group,name,saved_usd,"), "{text}");
    assert!(
        text.contains("\ntag:team,(untagged),0.00,0.00,0.00,1,0,3.00,3.00,"),
        "{text}"
    );
    assert!(text.contains("\nday,2026-11-30,14.00,"), "{text}");
    let shown = table(&r);
    assert!(
        shown.starts_with("ebb saved $14.00 from 2026-11-30T00:00:00Z"),
        "{shown}"
    );
    assert!(shown.contains("3.00 stopped hours are of instance types the price table lacks"));
}

#[test]
fn a_window_ends_by_now_and_is_at_most_400_days() {
    let now = t("2026-12-01T12:00:00Z");
    let err = |since: &str, until: Option<&str>| Window::parse(since, until, now).unwrap_err();
    // Centuries, and an end in the future: refused, saying which field and what to do.
    let future = err("0001-01-01T00:00:00Z", Some("9999-12-31T00:00:00Z"));
    assert!(
        future.starts_with("until:") && future.contains("after now"),
        "{future}"
    );
    let long = err("0001-01-01T00:00:00Z", None);
    assert!(
        long.starts_with("since:") && long.contains("400 days"),
        "{long}"
    );
    assert!(err("401d", None).contains("400 days"));
    assert!(err("30d", Some("2026-12-01T12:00:01Z")).contains("after now"));
    // 400 days to now, and 400 days that end earlier, are fine.
    let w = Window::parse("400d", None, now).unwrap();
    assert_eq!((w.until - w.since).num_days(), 400);
    assert!(Window::parse("2025-01-01T00:00:00Z", Some("2026-02-05T00:00:00Z"), now).is_ok());
}

#[test]
fn a_stretch_of_many_days_adds_its_whole_days_as_one_run() {
    // Stopped 1 January 18:00, still stopped when the 400-day window ends on 5 February of the
    // next year at 06:00: 6 h the first day, 24 h on each of the 399 days between, 6 h on
    // the last; 9,588 h at $2/h = $19,176.
    let h = history(
        vec![action(
            "i-two",
            "2025-01-01T18:00:00Z",
            EbbAction::Stop,
            "office",
        )],
        vec![],
    );
    let r = compute(
        &h,
        window("2025-01-01T06:00:00Z", "2026-02-05T06:00:00Z"),
        Some("team"),
        &prices(),
    );
    assert_eq!(r.days.len(), 401);
    assert_eq!(r.total.stopped_hours, 9_588.0);
    assert_eq!(r.total.saved_usd, 19_176.0);
    assert_eq!(r.days[0].measures.stopped_hours, 6.0);
    assert_eq!(r.days[0].saved_by_policy["office"], 12.0);
    for d in &r.days[1..400] {
        assert_eq!(d.measures.stopped_hours, 24.0, "{}", d.day);
        assert_eq!(d.saved_by_policy["office"], 48.0, "{}", d.day);
        assert_eq!(d.saved_by_tag["ml"], 48.0, "{}", d.day);
    }
    assert_eq!(r.days[400].measures.stopped_hours, 6.0);
    assert_eq!(r.days[400].saved_by_tag["ml"], 12.0);
    let by_day: f64 = r.days.iter().map(|d| d.measures.saved_usd).sum();
    assert_eq!(by_day, r.total.saved_usd);
}

#[test]
fn a_run_of_whole_days_ends_where_its_stretch_ends() {
    // Stopped Thursday 1 January 18:00, seen running Monday 5 January 08:00: 6 h, three
    // whole days, 8 h; nothing after, and no series left at zero on the later days.
    let h = history(
        vec![action(
            "i-ten",
            "2026-01-01T18:00:00Z",
            EbbAction::Stop,
            "office",
        )],
        vec![seen("i-ten", "2026-01-05T08:00:00Z", "running")],
    );
    let r = compute(
        &h,
        window("2026-01-01T00:00:00Z", "2026-01-08T00:00:00Z"),
        Some("team"),
        &prices(),
    );
    let hours: Vec<f64> = r.days.iter().map(|d| d.measures.stopped_hours).collect();
    assert_eq!(hours, [6.0, 24.0, 24.0, 24.0, 8.0, 0.0, 0.0]);
    assert_eq!(r.total.stopped_hours, 86.0);
    assert_eq!(r.total.saved_usd, 860.0);
    assert_eq!(r.days[4].saved_by_tag["cv"], 80.0);
    for d in &r.days[5..] {
        assert!(
            d.saved_by_policy.is_empty() && d.saved_by_tag.is_empty(),
            "{d:?}"
        );
        assert!(d.measures.saved_usd.is_sign_positive(), "{d:?}");
    }
}

fn group_change(at: &str, scale_down: bool) -> GroupChange {
    GroupChange {
        region: "us-east-1".into(),
        group: "inference".into(),
        at: t(at),
        scale_down,
        up_desired: 3,
        to_desired: if scale_down { 0 } else { 3 },
        instance_type: Some("g.two".into()),
        policy: Some("office".into()),
    }
}

#[test]
fn a_groups_scale_down_saves_its_removed_members_hours_until_the_restore() {
    // Three g.two members ($2/h) removed Monday 19:00, restored Tuesday 09:00: 14 h × 3 = 42
    // instance-hours, $84: 5 h × 3 × $2 = $30 on Monday, 9 h × 3 × $2 = $54 on Tuesday. Down
    // again Tuesday 19:00 until the window's end at 21:00: 2 h × 3 = 6 more, $12.
    let h = History {
        groups: vec![
            group_change("2026-11-30T19:00:00Z", true),
            group_change("2026-12-01T09:00:00Z", false),
            group_change("2026-12-01T19:00:00Z", true),
        ],
        ..History::default()
    };
    let r = compute(
        &h,
        window("2026-11-30T00:00:00Z", "2026-12-01T21:00:00Z"),
        None,
        &prices(),
    );
    assert_eq!(r.total.group_scale_downs, 2);
    assert_eq!(r.total.group_hours, 48.0);
    assert_eq!(r.total.group_saved_usd, 96.0);
    assert_eq!(r.total.saved_usd, 96.0, "group savings are savings");
    assert_eq!(r.total.stopped_hours, 0.0, "no instance was stopped");
    assert_eq!(r.groups.len(), 1);
    assert_eq!(r.groups[0].group, "inference");
    assert_eq!(r.groups[0].measures.group_hours, 48.0);
    assert_eq!(r.policies[0].policy, "office");
    assert_eq!(r.policies[0].measures.group_saved_usd, 96.0);
    assert_eq!(r.days[0].measures.group_saved_usd, 30.0);
    assert_eq!(r.days[1].measures.group_saved_usd, 66.0);
    let table = table(&r);
    assert!(
        table.contains("Auto Scaling groups: $96.00 by scaling 1 group down (2 scale-downs), 48.00 instance-hours"),
        "{table}"
    );
    assert!(table.contains("asg "), "a line for the group: {table}");
    assert!(
        csv(&r).contains("\nasg,us-east-1/inference,96.00,"),
        "{}",
        csv(&r)
    );
}

#[test]
fn a_group_down_before_the_window_counts_from_its_start_but_not_as_a_scale_down() {
    // Down since Sunday 19:00; the window opens Monday 00:00 and the group is restored at
    // 09:00: 9 h × 3 = 27 instance-hours, $54, and no scale-down inside the window.
    let h = History {
        groups: vec![
            group_change("2026-11-29T19:00:00Z", true),
            group_change("2026-11-30T09:00:00Z", false),
        ],
        ..History::default()
    };
    let r = compute(
        &h,
        window("2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z"),
        None,
        &prices(),
    );
    assert_eq!(r.total.group_scale_downs, 0);
    assert_eq!(r.total.group_hours, 27.0);
    assert_eq!(r.total.group_saved_usd, 54.0);
}

#[test]
fn hours_priced_in_yuan_are_reported_in_yuan_and_never_added_to_the_dollars() {
    // i-two (us-east-1, $2/h) and i-hz (cn-hangzhou, priced ¥9.5/h in the CNY table) are each
    // stopped 10 h: $20 in dollars, whose hours of i-hz are unpriced; ¥95 in yuan, apart.
    let mut h = history(
        vec![
            action("i-two", "2026-11-30T10:00:00Z", EbbAction::Stop, "office"),
            action("i-hz", "2026-11-30T10:00:00Z", EbbAction::Stop, "office"),
        ],
        vec![
            seen("i-two", "2026-11-30T20:00:00Z", "running"),
            seen("i-hz", "2026-11-30T20:00:00Z", "running"),
        ],
    );
    let hangzhou = InstanceInfo {
        region: "cn-hangzhou".into(),
        ..info("ecs.gn7i-c8g1.2xlarge", Some("vision"))
    };
    h.instances.insert("i-hz".into(), hangzhou);
    let yuan = PriceTable {
        source: "the account's bill".into(),
        as_of: "2026-12-01".into(),
        prices: [(
            "cn-hangzhou".to_string(),
            [("ecs.gn7i-c8g1.2xlarge".to_string(), 9.5)].into(),
        )]
        .into(),
        ..PriceTable::default()
    };
    let both = PriceTable {
        other_currencies: [("CNY".to_string(), yuan)].into(),
        ..prices()
    };
    let r = compute(
        &h,
        window("2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z"),
        None,
        &both,
    );
    assert_eq!(r.total.stopped_hours, 20.0);
    assert_eq!(r.total.saved_usd, 20.0);
    assert_eq!(r.total.unpriced_stopped_hours, 10.0);
    assert_eq!(
        r.other_currencies,
        [InCurrency {
            currency: "CNY".into(),
            source: "the account's bill".into(),
            as_of: "2026-12-01".into(),
            saved: 95.0,
            stopped_saved: 95.0,
            group_saved: 0.0,
            priced_stopped_hours: 10.0,
        }]
    );
    let text = table(&r);
    assert!(text.contains("ebb saved $20.00"), "{text}");
    assert!(
        text.contains("in CNY, apart from the dollars (prices from the account's bill, as of 2026-12-01): 95.00 CNY saved"),
        "{text}"
    );
}
