//! Helpers shared by the integration tests: policies from YAML text, instances, times, the
//! built binary ([`ebb`]) and waiting on other processes ([`eventually`]). The one layer over a
//! provider is [`intercept`]; the in-process world on the simulated fleet is [`world`].
#![allow(dead_code)] // each test binary uses a different part of this module

pub mod alibaba_fake;
pub mod alibaba_fake_api;
pub mod api;
pub mod cloudwatch_fake;
pub mod ec2_proxy;
pub mod events;
pub mod faulty;
pub mod groups;
pub mod intercept;
pub mod jupyter;
pub mod moto;
pub mod prometheus;
pub mod replica;
pub mod savings;
pub mod sim_ec2;
pub mod tencent_fake;
pub mod time;
mod wait;
pub mod webhook;
pub mod world;

pub use wait::eventually;

use chrono::{DateTime, Utc};
use ebb::engine::{decide, Decision, InstanceFacts, Override, Prior};
use ebb::fleet::{Billing, Fleet, Instance, InstanceState, Levers, Lifecycle, Prices, Sample};
use ebb::policy::PolicySet;
use std::collections::{BTreeMap, HashMap};

/// An RFC 3339 instant.
pub fn t(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s)
        .unwrap_or_else(|e| panic!("bad time {s}: {e}"))
        .with_timezone(&Utc)
}

/// Loads one policy file with `text`.
pub fn policies(text: &str) -> PolicySet {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("p.yaml"), text).unwrap();
    ebb::policy::load(&[dir.path().to_path_buf()]).unwrap_or_else(|e| panic!("{e}"))
}

/// A running on-demand g5.xlarge in us-east-1 with `tags`.
pub fn instance(id: &str, tags: &[(&str, &str)]) -> Instance {
    Instance {
        id: id.to_string(),
        region: "us-east-1".to_string(),
        instance_type: "g5.xlarge".to_string(),
        state: InstanceState::Running,
        state_since: None,
        lifecycle: Lifecycle::OnDemand,
        launched_at: None,
        tags: tags
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        gpus: None,
        gpu_util: Vec::new(),
        via_role: None,
        billing: Billing::EC2,
        private_ip: None,
    }
}

/// Samples `(time, percent)`, oldest first.
pub fn samples(points: &[(&str, f64)]) -> Vec<Sample> {
    points
        .iter()
        .map(|(at, percent)| Sample::new(t(at), *percent))
        .collect()
}

/// Samples every 5 minutes from `from` to `to` inclusive, all at `percent`.
pub fn steady(from: &str, to: &str, percent: f64) -> Vec<Sample> {
    let (mut at, end) = (t(from), t(to));
    let mut out = Vec::new();
    while at <= end {
        out.push(Sample::new(at, percent));
        at += chrono::Duration::minutes(5);
    }
    out
}

/// What ebb remembers, built up per test.
#[derive(Default)]
pub struct World {
    pub instances: Vec<Instance>,
    pub facts: HashMap<String, InstanceFacts>,
    pub overrides: Vec<Override>,
    pub prices: Prices,
    /// Instances whose GPU utilisation could not be read, with why.
    pub gpu_unread: HashMap<String, std::sync::Arc<str>>,
    /// The last start refused for lack of capacity, by region and type.
    pub capacity_failures: HashMap<(String, String), DateTime<Utc>>,
    /// What ebb can do on each cloud, when not what its providers implement.
    pub levers: Option<Levers>,
    /// The activity signals read, by instance and signal name.
    pub activity: ebb::fleet::activity::ActivityReadings,
}

impl World {
    pub fn with(instances: Vec<Instance>) -> Self {
        World {
            instances,
            ..Default::default()
        }
    }

    /// What ebb can do on each cloud: `levers` instead of what its providers implement.
    pub fn levers(mut self, levers: Levers) -> Self {
        self.levers = Some(levers);
        self
    }

    pub fn facts(mut self, id: &str, f: InstanceFacts) -> Self {
        self.facts.insert(id.to_string(), f);
        self
    }

    pub fn price(mut self, region: &str, ty: &str, on_demand: f64, spot: f64) -> Self {
        self.prices.entry(region.to_string()).or_default().insert(
            ty.to_string(),
            ebb::fleet::Price {
                on_demand: Some(on_demand),
                spot: Some(spot),
            },
        );
        self
    }

    /// EC2 refused a start of `ty` in `region` for lack of capacity at `at` (RFC 3339).
    pub fn refused(mut self, region: &str, ty: &str, at: &str) -> Self {
        let key = (region.to_string(), ty.to_string());
        self.capacity_failures.insert(key, t(at));
        self
    }

    /// Marks the GPU utilisation of `id` as not read, for `why`.
    pub fn unread(mut self, id: &str, why: &str) -> Self {
        self.gpu_unread.insert(id.to_string(), why.into());
        self
    }

    /// What the signal `name` of `id` read.
    pub fn reading(
        mut self,
        id: &str,
        name: &str,
        reading: ebb::fleet::activity::SignalReading,
    ) -> Self {
        let readings = self.activity.entry(id.to_string()).or_default();
        readings.insert(name.to_string(), reading);
        self
    }

    /// The fleet and what ebb remembers, as the engine takes them.
    pub fn fleet(&self) -> (Fleet, Prior) {
        let fleet = Fleet {
            instances: self.instances.clone(),
            prices: self.prices.clone(),
            gpu_unread: self.gpu_unread.clone(),
            levers: self.levers.unwrap_or_else(ebb::cloud::levers),
            activity: self.activity.clone(),
            ..Fleet::default()
        };
        let prior = Prior::new(self.facts.clone(), self.overrides.clone())
            .with_capacity_failures(self.capacity_failures.clone());
        (fleet, prior)
    }

    pub fn decide(&self, now: &str, set: &PolicySet) -> Vec<Decision> {
        let (fleet, prior) = self.fleet();
        decide(t(now), set, &fleet, &prior)
    }

    /// The one decision for the first instance.
    pub fn one(&self, now: &str, set: &PolicySet) -> Decision {
        self.decide(now, set).remove(0)
    }
}

/// An Auto Scaling client for a provider over mocked EC2 and CloudWatch: its calls (a tick
/// lists the groups) reach no network and fail, so the tick finds no group.
pub fn unused_autoscaling() -> aws_sdk_autoscaling::Client {
    aws_sdk_autoscaling::Client::from_conf(
        aws_sdk_autoscaling::Config::builder()
            .behavior_version(aws_sdk_autoscaling::config::BehaviorVersion::latest())
            .region(aws_sdk_autoscaling::config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_autoscaling::config::Credentials::new(
                "AKIDEXAMPLE",
                "secret",
                None,
                None,
                "test",
            ))
            .http_client(aws_smithy_mocks::create_mock_http_client())
            .build(),
    )
}

/// An EKS client for a provider over mocked EC2 and CloudWatch, reaching no network as
/// [`unused_autoscaling`] does.
pub fn unused_eks() -> aws_sdk_eks::Client {
    aws_sdk_eks::Client::from_conf(
        aws_sdk_eks::Config::builder()
            .behavior_version(aws_sdk_eks::config::BehaviorVersion::latest())
            .region(aws_sdk_eks::config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_eks::config::Credentials::new(
                "AKIDEXAMPLE",
                "secret",
                None,
                None,
                "test",
            ))
            .http_client(aws_smithy_mocks::create_mock_http_client())
            .build(),
    )
}

/// Tags as a map, for building instances by hand.
pub fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The URL of the test database behind `pool` (from `#[sqlx::test]`), on the server that
/// `DATABASE_URL` names.
pub fn database_url(pool: &sqlx::PgPool) -> String {
    let base = std::env::var("DATABASE_URL").expect("scripts/test sets DATABASE_URL");
    let (server, _) = base.rsplit_once('/').unwrap();
    format!(
        "{server}/{}",
        pool.connect_options().get_database().unwrap()
    )
}

/// A Monday five weeks or more ago. Days in the past for `ebb tick --at`: after a crash, ebb
/// credits a stop to itself only if EC2's state transition time (moto's real clock) is not
/// before the intent, so simulated days must not lie ahead of the real one.
pub fn a_past_monday() -> chrono::NaiveDate {
    use chrono::Datelike;
    let day = chrono::Utc::now().date_naive() - chrono::Duration::days(35);
    day - chrono::Duration::days(i64::from(day.weekday().num_days_from_monday()))
}

/// The next weekday (Monday to Friday) after `day`.
pub fn next_weekday(day: chrono::NaiveDate) -> chrono::NaiveDate {
    use chrono::Datelike;
    let mut next = day + chrono::Duration::days(1);
    while next.weekday().number_from_monday() > 5 {
        next += chrono::Duration::days(1);
    }
    next
}

/// Runs the built `ebb migrate ARGS` on the test database behind `pool` as the server's
/// superuser (the owner of the tables), as the migrate step of a deployment does, and asserts
/// that it succeeded. Every other command refuses a database that is not migrated.
pub fn ebb_migrate(pool: &sqlx::PgPool, args: &[&str]) {
    let all: Vec<&str> = std::iter::once("migrate")
        .chain(args.iter().copied())
        .collect();
    let o = ebb_on(&database_url(pool), &all);
    assert!(
        o.status.success(),
        "ebb migrate {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A login role of this test (`KIND_` and the end of the test database's name: role names are
/// global to the server) with a password, made when missing; and the URL of the test database
/// as it.
pub async fn login_role(pool: &sqlx::PgPool, kind: &str) -> (String, String) {
    let options = pool.connect_options();
    let database = options.get_database().unwrap().to_string();
    // Postgres cuts names at 63 bytes; the end of the random database name keeps it unique.
    let role = format!("{kind}_{}", &database[database.len().saturating_sub(24)..]);
    let password = format!("pw-{role}");
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)")
            .bind(&role)
            .fetch_one(pool)
            .await
            .unwrap();
    let verb = if exists { "ALTER" } else { "CREATE" };
    // Only letters, digits and underscores: the names are the test's own.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "{verb} ROLE \"{role}\" LOGIN PASSWORD '{password}'"
    )))
    .execute(pool)
    .await
    .unwrap();
    let url = format!(
        "postgres://{role}:{password}@{}:{}/{database}",
        options.get_host(),
        options.get_port()
    );
    (role, url)
}

/// The URL of the test database as a runtime role of its own, granted by the built
/// `ebb migrate --grant-runtime` after it migrated the database: the role `serve` and `tick`
/// run as in production, which owns nothing and may only read and append the audit log.
pub async fn migrated_for_runtime(pool: &sqlx::PgPool) -> String {
    let (role, url) = login_role(pool, "ebb_runtime").await;
    ebb_migrate(pool, &["--grant-runtime", &role]);
    url
}

/// The built `ebb` with the environment a test gives it, run in the repository's root as a
/// user runs it there: `Ebb::on(url).env("EBB_ACTOR", "mei").run(&["audit"])`. A test file
/// that runs it often keeps its setting in a function returning an `Ebb`.
#[derive(Debug, Clone, Default)]
pub struct Ebb {
    /// Variables set (`Some`) or removed (`None`), in order.
    env: Vec<(std::ffi::OsString, Option<std::ffi::OsString>)>,
}

impl Ebb {
    /// With the test process's environment.
    pub fn new() -> Ebb {
        Ebb::default()
    }

    /// On the database at `url` (`DATABASE_URL`).
    pub fn on(url: &str) -> Ebb {
        Ebb::new().env("DATABASE_URL", url)
    }

    /// With `key` set to `value`.
    pub fn env(mut self, key: &str, value: impl AsRef<std::ffi::OsStr>) -> Ebb {
        self.env
            .push((key.into(), Some(value.as_ref().to_os_string())));
        self
    }

    /// With each of `vars` set.
    pub fn envs<V: AsRef<std::ffi::OsStr>>(
        self,
        vars: impl IntoIterator<Item = (&'static str, V)>,
    ) -> Ebb {
        vars.into_iter().fold(self, |ebb, (k, v)| ebb.env(k, v))
    }

    /// Without `key`, even when the test process has it.
    pub fn env_remove(mut self, key: &str) -> Ebb {
        self.env.push((key.into(), None));
        self
    }

    /// The command `ebb ARGS`, to run or spawn.
    pub fn command(&self, args: &[&str]) -> std::process::Command {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_ebb"));
        command.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
        for (key, value) in &self.env {
            match value {
                Some(value) => command.env(key, value),
                None => command.env_remove(key),
            };
        }
        command
    }

    /// Runs `ebb ARGS` to its end: its output.
    pub fn run(&self, args: &[&str]) -> std::process::Output {
        self.command(args).output().expect("run ebb")
    }
}

/// Runs the built `ebb` with `args` to its end ([`Ebb::run`]).
pub fn ebb(args: &[&str]) -> std::process::Output {
    Ebb::new().run(args)
}

/// [`ebb`] on the database at `url` (`DATABASE_URL`).
pub fn ebb_on(url: &str, args: &[&str]) -> std::process::Output {
    Ebb::on(url).run(args)
}
