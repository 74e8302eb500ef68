//! Fault injection for the tick. A proxy between ebb and moto's EC2 server ([`common::ec2_proxy`])
//! answers each cloud call of a tick with each class of error (throttling, 5xx, access denied,
//! insufficient capacity, not found, no answer), or holds it while `ebb tick` is killed with
//! SIGKILL just before or just after the cloud carries it out. The scenarios run over working
//! days (the notice and the stops of an evening, the starts of the next morning), each phase
//! followed by recovery ticks without faults, and then the invariants are checked from the store
//! and the proxy's counts:
//!
//! - every intent has exactly one outcome;
//! - no action is repeated: each box is stopped at most once an evening and started at most once
//!   a morning, at the cloud, and every research box ends the day as the schedule says;
//! - no person's stop is credited to ebb: a box a person stopped is never started by ebb;
//! - no stop on a failed read: a box under an idle rule, whose GPU utilisation moto cannot
//!   serve, is never stopped;
//! - in the kill matrix, an Auto Scaling group of inference boxes is scaled through its
//!   capacity at most once a phase, ends each phase at the capacity the schedule says, has no
//!   change left without its outcome, and none of its members is ever stopped.
//!
//! RELIABILITY.md reports the counts this prints.

use crate::common;

use aws_config::retry::RetryConfig;
use aws_config::{BehaviorVersion, Region};
use chrono::{Duration as Days, NaiveDate};
use common::ec2_proxy::{stop_as_a_person, Binary, Ec2Proxy, Fault, Hold, Injection, Trap};
use common::moto::{states, Fixture, Launch, G5};
use common::t;
use common::{a_past_monday, next_weekday};
use ebb::cloud::aws::{self, AwsProvider, Scope, Settings};
use ebb::reconcile::{Options, PolicySource, Reconciler};
use ebb::store::{Leadership, Store, Verification};
use sqlx::PgPool;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// Research boxes: work hours with a notice 15 minutes before the close. Stops do not wait for a
/// busy GPU (moto has no CloudWatch). Notebooks: an idle rule that would count a read with no
/// data as idle, so only the failed read itself keeps them running.
const POLICY: &str = r#"
policies:
  - name: research-hours
    match: {tags: {team: research}}
    work_hours:
      timezone: UTC
      periods:
        - {days: mon-fri, start: "09:00", stop: "19:00"}
      outside_hours: stop
      start_at_open: stopped-by-ebb
      busy_defers_stop: false
    notify:
      before: 15m
  - name: idle-notebooks
    match: {tags: {team: notebooks}}
    idle:
      gpu_below: 5
      for: 30m
      missing_metrics: idle
  - name: inference-hours
    match: {tags: {team: inference}}
    work_hours:
      timezone: UTC
      periods:
        - {days: mon-fri, start: "09:30", stop: "19:30"}
      outside_hours: stop
      start_at_open: stopped-by-ebb
      busy_defers_stop: false
"#;

/// The first tick of an evening (the notice is due from 18:45) and of a morning, and the first
/// tick after the work of a day without faults (notice, stop; start) is done; the next ticks
/// follow every [`STEP`] minutes.
const FIRST: [(Phase, &str, &str); 2] = [
    (Phase::Evening, "18:50", "19:20"),
    (Phase::Morning, "09:05", "09:15"),
];
/// Minutes between ticks: longer than the back-off after a first failure (1 minute).
const STEP: i64 = 10;
/// Ticks of a phase at most: enough for every call to meet its fault and recover.
const MAX_TICKS: usize = 10;

/// When in the day a fault happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Evening,
    Morning,
}

impl Phase {
    /// The call that changes the research boxes in this phase.
    fn action(self) -> &'static str {
        match self {
            Phase::Evening => "StopInstances",
            Phase::Morning => "StartInstances",
        }
    }
}

/// The cloud calls of a tick, by the phase in which each changes something.
const CALLS: [(Phase, &str); 5] = [
    (Phase::Evening, "DescribeInstances"),
    (Phase::Evening, "CreateTags"),
    (Phase::Evening, "StopInstances"),
    (Phase::Morning, "DescribeInstances"),
    (Phase::Morning, "StartInstances"),
];

/// The group's own call, in the kill matrix: the inference group closes at 19:30 and opens at
/// 09:30, after the research boxes' calls of the phase, so that each kill point has a tick of
/// its own.
const GROUP_CALLS: [(Phase, &str); 2] = [
    (Phase::Evening, "UpdateAutoScalingGroup"),
    (Phase::Morning, "UpdateAutoScalingGroup"),
];

/// Members of the inference group, and its min, desired and max while up.
const GROUP_SIZE: i32 = 2;

/// The boxes of a test.
struct Boxes {
    /// Research boxes ebb stops each evening and starts each morning.
    research: Vec<String>,
    /// A research box a person stopped: ebb must never start it.
    person: String,
    /// A notebook under the idle rule, whose GPU cannot be read: ebb must never stop it.
    notebook: String,
    /// An Auto Scaling group of inference boxes, opted in by its propagated tags, when the
    /// test has one: ebb scales it, never stops its members.
    group: Option<String>,
}

impl Boxes {
    async fn launch(f: &Fixture, with_group: bool) -> Boxes {
        let group = if with_group {
            let name = format!("inference-{}", f.managed);
            let size = GROUP_SIZE as u32;
            let tags = [("team", "inference"), ("ebb:managed", f.managed.as_str())];
            f.auto_scaling_group(&name, size, &tags).await;
            Some(name)
        } else {
            None
        };
        let mut research = Vec::new();
        for _ in 0..3 {
            research.push(f.launch(G5).await);
        }
        let person = f.launch(G5).await;
        stop_as_a_person(f, &person).await;
        let notebook = f
            .launch(Launch {
                tags: &[("team", "notebooks")],
                ..G5
            })
            .await;
        Boxes {
            research,
            person,
            notebook,
            group,
        }
    }
}

/// The counts of a run, and the invariant violations found.
#[derive(Default)]
struct Ledger {
    days: usize,
    scenarios: usize,
    kill_points: usize,
    killed: usize,
    faults: std::collections::BTreeSet<String>,
    injected: usize,
    violations: Vec<String>,
    /// Violations the test expects, each named: findings RELIABILITY.md reports.
    known: Vec<String>,
}

impl Ledger {
    fn check(&mut self, holds: bool, what: impl FnOnce() -> String) {
        if !holds {
            self.violations.push(what());
        }
    }

    fn print(&self, test: &str) {
        eprintln!(
            "{test}: {} days, {} scenarios, {} kill points ({} runs killed), {} fault kinds {:?} \
             ({} requests answered with a fault), invariant violations: {}, known: {}",
            self.days,
            self.scenarios,
            self.kill_points,
            self.killed,
            self.faults.len(),
            self.faults,
            self.injected,
            self.violations.len(),
            self.known.len(),
        );
        for v in &self.violations {
            eprintln!("  violation: {v}");
        }
        for v in &self.known {
            eprintln!("  known: {v}");
        }
    }
}

/// What the proxy has counted for each research box before a phase.
fn counts(proxy: &Ec2Proxy, action: &str, ids: &[String]) -> Vec<usize> {
    ids.iter().map(|id| proxy.calls(action, id)).collect()
}

/// The inference group's min, desired and max at the cloud.
async fn capacity(f: &Fixture, group: &str) -> (i32, i32, i32) {
    let autoscaling = aws_sdk_autoscaling::Client::new(&common::moto::emulator(f.region).await);
    let out = autoscaling
        .describe_auto_scaling_groups()
        .auto_scaling_group_names(group)
        .send()
        .await
        .unwrap();
    let g = &out.auto_scaling_groups()[0];
    let size = |n: Option<i32>| n.unwrap();
    (
        size(g.min_size()),
        size(g.desired_capacity()),
        size(g.max_size()),
    )
}

/// The capacity the inference group has once `phase` is done: min and desired 0 with max kept
/// after the close, all three as found after the opening.
fn settled(phase: Phase) -> (i32, i32, i32) {
    match phase {
        Phase::Evening => (0, 0, GROUP_SIZE),
        Phase::Morning => (GROUP_SIZE, GROUP_SIZE, GROUP_SIZE),
    }
}

/// Whether the test's group, if any, has the capacity `phase` ends with.
async fn group_settled(f: &Fixture, boxes: &Boxes, phase: Phase) -> bool {
    match &boxes.group {
        Some(group) => capacity(f, group).await == settled(phase),
        None => true,
    }
}

/// The UpdateAutoScalingGroup calls the cloud carried out on the test's group, and the
/// group changes the audit log holds as succeeded.
async fn group_counts(proxy: &Ec2Proxy, store: &Store, boxes: &Boxes) -> (usize, i64) {
    let calls = boxes
        .group
        .as_deref()
        .map_or(0, |g| proxy.calls("UpdateAutoScalingGroup", g));
    let succeeded: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM audit_log
         WHERE action IN ('scale_down_group', 'restore_group') AND outcome = 'succeeded'",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    (calls, succeeded)
}

/// Checks the group's invariants after a phase: one change at the cloud at most, and one
/// change the audit log says succeeded (a kill after the call resolved as done from the group's
/// capacity, a kill before it as interrupted, then made again), the capacity the phase ends
/// with, no change left pending, no member ever stopped.
async fn check_group(
    ledger: &mut Ledger,
    scenario: &str,
    phase: Phase,
    (f, proxy, store): (&Fixture, &Ec2Proxy, &Store),
    boxes: &Boxes,
    before: (usize, i64),
) {
    let group = boxes.group.as_deref().unwrap();
    let after = group_counts(proxy, store, boxes).await;
    let (calls, succeeded) = (after.0 - before.0, after.1 - before.1);
    ledger.check(calls <= 1, || {
        format!("{scenario}: the group's capacity changed {calls} times in the {phase:?}")
    });
    ledger.check(succeeded == 1, || {
        format!("{scenario}: {succeeded} group changes succeeded in the {phase:?}, not 1")
    });
    let found = capacity(f, group).await;
    ledger.check(found == settled(phase), || {
        format!("{scenario}: the group is at {found:?} after the {phase:?} and recovery")
    });
    let stored = store.groups_of(f.region).await.unwrap();
    ledger.check(
        stored.get(group).is_some_and(|g| g.pending.is_none()),
        || format!("{scenario}: the group's change has no outcome (or ebb forgot the group)"),
    );
    // Every member the group ever had, those it terminated included.
    let listed = f
        .ec2
        .describe_instances()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("tag:aws:autoscaling:groupName")
                .values(group)
                .build(),
        )
        .send()
        .await
        .unwrap();
    let members: Vec<String> = listed
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter_map(|i| i.instance_id().map(str::to_string))
        .collect();
    ledger.check(!members.is_empty(), || {
        format!("{scenario}: the group's members are not listed")
    });
    for id in members {
        ledger.check(proxy.calls("StopInstances", &id) == 0, || {
            format!("{scenario}: the group's member {id} was stopped one by one")
        });
    }
}

/// Checks the invariants after a phase and its recovery ticks. `window` is a research box a
/// person stopped between ebb's intent and its call in this phase, if any.
#[allow(clippy::too_many_arguments)]
async fn check_phase(
    ledger: &mut Ledger,
    scenario: &str,
    phase: Phase,
    f: &Fixture,
    proxy: &Ec2Proxy,
    store: &Store,
    boxes: &Boxes,
    before: &[usize],
    window: Option<&str>,
) {
    let action = phase.action();
    let after = counts(proxy, action, &boxes.research);
    for ((id, b), a) in boxes.research.iter().zip(before).zip(&after) {
        ledger.check(a - b <= 1, || {
            format!("{scenario}: {action} of {id} repeated ({} calls)", a - b)
        });
        if Some(id.as_str()) == window && phase == Phase::Morning && a > b {
            ledger.known.push(format!(
                "{scenario}: {id}, stopped by a person between ebb's intent and its call, was \
                 started by ebb in the morning"
            ));
        }
    }
    let expected = match phase {
        Phase::Evening => "stopped",
        Phase::Morning => "running",
    };
    let now = states(&f.ec2, &boxes.research).await;
    for (id, state) in &now {
        // The box a person stopped in the window is the subject of the known finding above.
        let theirs = phase == Phase::Morning && Some(id.as_str()) == window;
        ledger.check(theirs || state.as_str() == expected, || {
            format!("{scenario}: {id} is {state:?} after the {phase:?} and recovery")
        });
    }
    let person = states(&f.ec2, std::slice::from_ref(&boxes.person)).await;
    ledger.check(
        proxy.calls("StartInstances", &boxes.person) == 0
            && person[&boxes.person].as_str() == "stopped",
        || format!("{scenario}: the box a person stopped was started by ebb"),
    );
    let notebook = states(&f.ec2, std::slice::from_ref(&boxes.notebook)).await;
    ledger.check(
        proxy.calls("StopInstances", &boxes.notebook) == 0
            && notebook[&boxes.notebook].as_str() == "running",
        || format!("{scenario}: the notebook whose GPU read failed was stopped"),
    );
    let pending = store.pending_intents().await.unwrap();
    ledger.check(pending.is_empty(), || {
        format!("{scenario}: {} intents without an outcome", pending.len())
    });
    let (intents, outcomes): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE outcome = 'intent'),
                count(*) FILTER (WHERE intent_seq IS NOT NULL)
         FROM audit_log",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    ledger.check(intents == outcomes, || {
        format!("{scenario}: {intents} intents but {outcomes} outcomes")
    });
}

fn policies() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("research.yaml"), POLICY).unwrap();
    dir
}

/// AWS limits for the day of hangs: an answer that never comes fails within 2 s. The other days
/// keep the binary's limits, so that a slow answer from moto on a busy machine is no fault.
pub(crate) const HASTY: aws::Timeouts = aws::Timeouts {
    connect: Duration::from_secs(1),
    attempt: Duration::from_secs(1),
    operation: Duration::from_secs(2),
};

/// Attempts per call, the first included: the binary's default is 5, with backoff from 0.5 s.
const ATTEMPTS: u32 = 3;

/// The provider `ebb tick` builds, through the proxy at `endpoint`, with the SDK's standard
/// retries (backoff from 1 ms, so that a matrix of throttled calls runs in seconds) and
/// `timeouts`.
pub(crate) async fn provider(f: &Fixture, endpoint: &str, timeouts: aws::Timeouts) -> AwsProvider {
    let config = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(f.region))
        .endpoint_url(endpoint)
        .retry_config(
            RetryConfig::standard()
                .with_max_attempts(ATTEMPTS)
                .with_initial_backoff(Duration::from_millis(1))
                .with_max_backoff(Duration::from_millis(10)),
        )
        .timeout_config(timeouts.config())
        .load()
        .await;
    let scope = Scope {
        region: f.region.to_string(),
        account: None,
        ec2: aws_sdk_ec2::Client::new(&config),
        cloudwatch: aws_sdk_cloudwatch::Client::new(&config),
        autoscaling: aws_sdk_autoscaling::Client::new(&config),
        eks: aws_sdk_eks::Client::new(&config),
    };
    let settings = Settings {
        max_attempts: ATTEMPTS,
        timeouts,
        ..f.settings()
    };
    AwsProvider::from_scopes(settings, vec![scope])
}

/// Ticks in this process as the leader, with the binary's AWS time limits or [`HASTY`] ones.
struct InProcess {
    patient: Reconciler<AwsProvider>,
    hasty: Reconciler<AwsProvider>,
    leader: Option<Leadership>,
    /// Whether the next ticks use [`HASTY`] limits.
    in_a_hurry: bool,
}

impl InProcess {
    async fn tick(&mut self, at: &str) {
        let reconciler = if self.in_a_hurry {
            &self.hasty
        } else {
            &self.patient
        };
        if let Some(held) = self.leader.as_mut() {
            if !held.held().await {
                self.leader = None;
            }
        }
        if self.leader.is_none() {
            self.leader = reconciler.store().try_lead("faults").await.unwrap();
        }
        let leader = self.leader.as_mut().expect("no one else leads");
        // A tick whose calls failed reports them; what matters is what it leaves behind.
        let _ = reconciler.tick(t(at), leader).await;
    }
}

/// The decision times of a phase on `date`, every [`STEP`] minutes from its first tick.
/// Each comes with whether it is late enough to end the phase when nothing is left to inject.
fn times(phase: Phase, date: NaiveDate) -> impl Iterator<Item = (String, bool)> {
    let &(_, first, done) = FIRST.iter().find(|(p, _, _)| *p == phase).unwrap();
    let start = t(&format!("{date}T{first}:00Z"));
    let done = t(&format!("{date}T{done}:00Z"));
    (0..MAX_TICKS as i64).map(move |i| {
        let at = start + Days::minutes(i * STEP);
        let text = at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        (text, at >= done)
    })
}

#[sqlx::test(migrations = false)]
async fn every_error_class_at_every_call_keeps_the_invariants(pool: PgPool) {
    let f = Fixture::new("eu-west-3").await;
    let (proxy, endpoint) = Ec2Proxy::start(&std::env::var("AWS_ENDPOINT_URL").unwrap()).await;
    let store = Store::from_pool(pool);
    store.migrate().await.unwrap();
    let dir = policies();
    let policies = Arc::new(PolicySource::new(vec![dir.path().to_path_buf()]));
    let mut reconcilers = Vec::new();
    for timeouts in [aws::Timeouts::default(), HASTY] {
        reconcilers.push(Reconciler::new(
            provider(&f, &endpoint, timeouts).await,
            store.clone(),
            policies.clone(),
            Options::default(),
        ));
    }
    let (hasty, patient) = (reconcilers.pop().unwrap(), reconcilers.pop().unwrap());
    let mut ebb = InProcess {
        patient,
        hasty,
        leader: None,
        in_a_hurry: false,
    };
    let boxes = Boxes::launch(&f, false).await;

    // A day for each fault: injected into every call of the day, each at the first tick that
    // makes it, at every attempt (`usize::MAX`) or at the first only. `None`: a person stops a
    // box while ebb's stop call is on its way, and the call goes through.
    let days: Vec<Option<(Fault, usize)>> = vec![
        Some((Fault::Throttling, usize::MAX)),
        Some((Fault::ServerError, usize::MAX)),
        Some((Fault::AccessDenied, usize::MAX)),
        Some((Fault::InsufficientCapacity, usize::MAX)),
        Some((Fault::NotFound, usize::MAX)),
        Some((Fault::Timeout, usize::MAX)),
        Some((Fault::Throttling, 1)),
        None,
    ];
    let mut ledger = Ledger::default();
    let mut day = a_past_monday();
    for plan in days {
        let next = next_weekday(day);
        let name = match plan {
            Some((fault, usize::MAX)) => format!("{fault:?} at every attempt ({day})"),
            Some((fault, _)) => format!("{fault:?} at the first attempt ({day})"),
            None => format!("a person's stop while ebb's stop call is on the wire ({day})"),
        };
        let mut window = None;
        let hangs = matches!(plan, Some((Fault::Timeout, _)));
        for (phase, date) in [(Phase::Evening, day), (Phase::Morning, next)] {
            let before = counts(&proxy, phase.action(), &boxes.research);
            for (when, call) in CALLS {
                // Capacity is what a start meets; other calls get the fault's other days.
                let fits = plan.is_some_and(|(fault, _)| {
                    fault != Fault::InsufficientCapacity || call == "StartInstances"
                });
                if when == phase && fits {
                    let (fault, times) = plan.unwrap();
                    proxy.inject(Injection {
                        action: call,
                        fault,
                        times,
                    });
                }
            }
            let mut person = plan.is_none() && phase == Phase::Evening;
            for (at, late) in times(phase, date) {
                // Hasty limits only while a hang waits to be met: recovery ticks keep the
                // binary's, so that a slow answer from moto on a busy machine is no fault.
                ebb.in_a_hurry = hangs && !proxy.waiting().is_empty();
                let clean = proxy.waiting().is_empty() && !person && late;
                if person {
                    // The first research box is stopped by a person while ebb's call is held.
                    let (fire, fired) = oneshot::channel();
                    let (resume, resumed) = oneshot::channel();
                    proxy.trap(Trap {
                        action: "StopInstances",
                        through: false,
                        fire,
                        hold: Hold::Until(resumed),
                    });
                    let tick = async {
                        ebb.tick(&at).await;
                        // Unfired, the trap's sender goes with it: the person stops waiting.
                        proxy.disarm();
                    };
                    let someone = async {
                        if fired.await.is_ok() {
                            stop_as_a_person(&f, &boxes.research[0]).await;
                            window = Some(boxes.research[0].clone());
                        }
                        drop(resume);
                    };
                    tokio::join!(tick, someone);
                    person = window.is_none();
                } else {
                    ebb.tick(&at).await;
                }
                for (injection, answered) in proxy.retire() {
                    ledger.scenarios += 1;
                    ledger.injected += answered;
                    ledger.faults.insert(format!("{:?}", injection.fault));
                    eprintln!(
                        "{name}: {} at {at} got it {answered} time(s)",
                        injection.action
                    );
                }
                if clean {
                    break;
                }
            }
            for injection in proxy.waiting() {
                let call = injection.action;
                ledger
                    .violations
                    .push(format!("{name}: {call} never happened"));
            }
            proxy.clear();
            if person {
                ledger.violations.push(format!("{name}: ebb never stopped"));
            }
            if plan.is_none() && phase == Phase::Evening {
                ledger.scenarios += 1;
            }
            check_phase(
                &mut ledger,
                &name,
                phase,
                &f,
                &proxy,
                &store,
                &boxes,
                &before,
                window.as_deref(),
            )
            .await;
        }
        ledger.days += 1;
        day = next;
    }
    ledger.print("injected errors");
    assert!(matches!(
        store.verify_audit().await.unwrap(),
        Verification::Intact { .. }
    ));
    assert!(ledger.violations.is_empty(), "{:#?}", ledger.violations);
    // A person's stop that lands while ebb's stop call is on the wire is not ebb's: EC2's
    // previous state says the box was already stopped.
    assert_eq!(
        ledger.known.len(),
        0,
        "the known finding (RELIABILITY.md) changed: {:#?}",
        ledger.known
    );
}

#[sqlx::test(migrations = false)]
async fn a_tick_killed_before_or_after_each_cloud_call_keeps_the_invariants(pool: PgPool) {
    let f = Fixture::new("eu-north-1").await;
    let (proxy, endpoint) = Ec2Proxy::start(&std::env::var("AWS_ENDPOINT_URL").unwrap()).await;
    let store = Store::from_pool(pool.clone());
    store.migrate().await.unwrap();
    let ebb = Binary {
        url: common::database_url(&pool),
        f: &f,
        proxy: proxy.clone(),
        endpoint,
        policies: policies(),
    };
    let boxes = Boxes::launch(&f, true).await;

    // A day killed after each call, one killed before each mutating call, each kill at the
    // first tick that makes the call (the group's after the boxes'); then a day where a person
    // stops a box after ebb's stop intent, while its call is on the way, and ebb dies before
    // the call reaches the cloud.
    let calls = || CALLS.iter().chain(&GROUP_CALLS);
    let after: Vec<(Phase, &str, bool)> = calls().map(|&(p, c)| (p, c, true)).collect();
    let before: Vec<(Phase, &str, bool)> = calls()
        .filter(|(_, c)| *c != "DescribeInstances")
        .map(|&(p, c)| (p, c, false))
        .collect();
    let window = vec![(Phase::Evening, "StopInstances", false)];
    let days = [(after, false), (before, false), (window, true)];

    let mut ledger = Ledger::default();
    let mut day = a_past_monday();
    for (points, person) in days {
        let next = next_weekday(day);
        let name = format!(
            "killed {} each call{} ({day})",
            if points[0].2 { "after" } else { "before" },
            if person {
                ", a person stopping a box first"
            } else {
                ""
            }
        );
        let window = person.then(|| boxes.research[0].clone());
        for (phase, date) in [(Phase::Evening, day), (Phase::Morning, next)] {
            let before = counts(&proxy, phase.action(), &boxes.research);
            let group_before = group_counts(&proxy, &store, &boxes).await;
            let mut queue: std::collections::VecDeque<(&str, bool)> = points
                .iter()
                .filter(|(p, _, _)| *p == phase)
                .map(|&(_, c, through)| (c, through))
                .collect();
            for (at, late) in times(phase, date) {
                let Some(&(call, through)) = queue.front() else {
                    // Recovery, without faults, until the group's pending change is resolved
                    // and, when it never landed, made again.
                    ebb.tick(&at, None, None).await;
                    if late && group_settled(&f, &boxes, phase).await {
                        break;
                    }
                    continue;
                };
                let someone = window.as_deref();
                if ebb.tick(&at, Some((call, through)), someone).await {
                    eprintln!("{name}: killed at {call} at {at}");
                    ledger.killed += 1;
                    ledger.scenarios += 1;
                    ledger.kill_points += usize::from(!person);
                    queue.pop_front();
                }
            }
            for (call, _) in queue {
                ledger
                    .violations
                    .push(format!("{name}: never killed at {call}"));
            }
            check_phase(
                &mut ledger,
                &name,
                phase,
                &f,
                &proxy,
                &store,
                &boxes,
                &before,
                window.as_deref(),
            )
            .await;
            let cloud = (&f, &*proxy, &store);
            check_group(&mut ledger, &name, phase, cloud, &boxes, group_before).await;
        }
        ledger.days += 1;
        day = next;
    }
    ledger.print("killed ticks");
    assert!(matches!(
        store.verify_audit().await.unwrap(),
        Verification::Intact { .. }
    ));
    assert!(ledger.violations.is_empty(), "{:#?}", ledger.violations);
    assert_eq!(
        ledger.known.len(),
        1,
        "the known finding (RELIABILITY.md) changed: {:#?}",
        ledger.known
    );
}
