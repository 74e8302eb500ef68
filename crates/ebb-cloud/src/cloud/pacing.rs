//! Pacing cloud calls within EC2's rate limits: a token bucket per account, region and API,
//! as EC2 meters them. A call waits for its tokens instead of failing; a throttle answer that
//! still comes back (`RequestLimitExceeded`) halves that bucket's rate, and each call accepted
//! after it gives some of the rate back.
//!
//! EC2 meters mutating calls twice: a request bucket (one token a call) and, for StartInstances,
//! StopInstances, RunInstances and TerminateInstances, a resource bucket (one token an
//! instance). [`RateLimits::default`] holds EC2's published defaults; accounts with raised
//! limits set their own (`EBB_EC2_RATE_LIMITS`).
//!
//! Time is tokio's (scaled by the simulated clock's speed), so tests run on a paused clock.
//! `governor` was considered: its quotas are fixed when made (no shrinking on a throttle) and
//! its clocks are not tokio's, so a paused test clock would not move its buckets.

use super::{CloudError, ErrorKind};
use crate::clock::Clock;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::future::Future;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// The slowest a bucket gets after throttles: a sixteenth of its rate.
const MIN_FACTOR: f64 = 1.0 / 16.0;
/// How much of its rate a bucket gets back with each call accepted after a throttle.
const RECOVERY: f64 = 1.0 / 16.0;
/// How many times a throttled call is made again, each after waiting for its tokens at the
/// shrunk rate: EC2 did not act on a throttled request, so making it again is safe.
const THROTTLE_RETRIES: u32 = 2;

/// A bucket's size and how fast it fills.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// The most tokens it holds (the largest burst).
    pub burst: f64,
    /// Tokens added each second.
    pub per_second: f64,
}

impl Rate {
    /// A bucket of `burst` tokens filled by `per_second`.
    pub const fn of(burst: f64, per_second: f64) -> Rate {
        Rate { burst, per_second }
    }
}

/// The buckets of one API.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limit {
    /// One token per call.
    pub requests: Rate,
    /// One token per instance, for the APIs EC2 meters by instance.
    pub instances: Option<Rate>,
}

/// A cloud's rate limits, by API (EC2's by default).
#[derive(Debug, Clone, PartialEq)]
pub struct RateLimits {
    by_api: BTreeMap<String, Limit>,
    /// The limit of an API not in `by_api`.
    otherwise: Limit,
}

/// EC2's published default for mutating calls without a bucket of their own.
const MUTATING: Limit = Limit {
    requests: Rate::of(200.0, 5.0),
    instances: None,
};

impl Default for RateLimits {
    /// EC2's published defaults (Amazon EC2 API request throttling).
    fn default() -> Self {
        let start = Limit {
            requests: Rate::of(5.0, 2.0),
            instances: Some(Rate::of(1000.0, 2.0)),
        };
        let stop = Limit {
            requests: MUTATING.requests,
            instances: Some(Rate::of(1000.0, 20.0)),
        };
        RateLimits {
            by_api: BTreeMap::from([
                ("StartInstances".to_string(), start),
                ("RunInstances".to_string(), start),
                ("StopInstances".to_string(), stop),
                ("TerminateInstances".to_string(), stop),
            ]),
            otherwise: MUTATING,
        }
    }
}

impl RateLimits {
    /// Another cloud's limits: `by_api`, and `otherwise` for every other API.
    pub fn new<'a>(by_api: impl IntoIterator<Item = (&'a str, Limit)>, otherwise: Limit) -> Self {
        RateLimits {
            by_api: by_api
                .into_iter()
                .map(|(api, limit)| (api.to_string(), limit))
                .collect(),
            otherwise,
        }
    }

    /// The buckets of `api`.
    pub fn of(&self, api: &str) -> Limit {
        self.by_api.get(api).copied().unwrap_or(self.otherwise)
    }
}

impl FromStr for RateLimits {
    type Err = String;

    /// EC2's defaults, changed by `API=BURST/RATE[:BURST/RATE]` items separated by commas: the
    /// request bucket, then the instance bucket (`StartInstances=20/10:5000/10`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut limits = RateLimits::default();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let bad = || {
                format!(
                    "\"{item}\" is not a rate limit: write API=BURST/RATE or \
                     API=BURST/RATE:BURST/RATE (requests, then instances), like \
                     StartInstances=5/2:1000/2"
                )
            };
            let (api, buckets) = item.split_once('=').ok_or_else(bad)?;
            let mut rates = buckets.split(':').map(|r| parse_rate(r).ok_or_else(bad));
            let requests = rates.next().ok_or_else(bad)??;
            let instances = rates.next().transpose()?;
            if rates.next().is_some() {
                return Err(bad());
            }
            limits.by_api.insert(
                api.trim().to_string(),
                Limit {
                    requests,
                    instances: instances.or(limits.of(api.trim()).instances),
                },
            );
        }
        Ok(limits)
    }
}

fn parse_rate(text: &str) -> Option<Rate> {
    let (burst, rate) = text.split_once('/')?;
    let (burst, per_second) = (burst.trim().parse().ok()?, rate.trim().parse().ok()?);
    (burst >= 1.0 && per_second > 0.0 && f64::is_finite(burst) && f64::is_finite(per_second))
        .then_some(Rate { burst, per_second })
}

impl fmt::Display for RateLimits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let items: Vec<String> = self
            .by_api
            .iter()
            .map(|(api, l)| {
                let mut item = format!("{api}={}/{}", l.requests.burst, l.requests.per_second);
                if let Some(i) = l.instances {
                    item.push_str(&format!(":{}/{}", i.burst, i.per_second));
                }
                item
            })
            .collect();
        f.write_str(&items.join(","))
    }
}

/// A token bucket on a time given in seconds.
#[derive(Debug, Clone)]
pub(crate) struct Bucket {
    rate: Rate,
    tokens: f64,
    at: f64,
}

impl Bucket {
    /// A full bucket at `at`.
    pub(crate) fn full(rate: Rate, at: f64) -> Bucket {
        Bucket {
            rate,
            tokens: rate.burst,
            at,
        }
    }

    /// Adds what `factor` times the rate filled since the last time.
    fn refill(&mut self, at: f64, factor: f64) {
        let added = (at - self.at).max(0.0) * self.rate.per_second * factor;
        self.tokens = (self.tokens + added).min(self.rate.burst);
        self.at = self.at.max(at);
    }

    /// `n` tokens (at most the whole bucket), or how many seconds until there are.
    fn take(&mut self, n: f64, at: f64, factor: f64) -> Result<(), f64> {
        self.refill(at, factor);
        let n = n.min(self.rate.burst);
        if self.tokens >= n {
            self.tokens -= n;
            Ok(())
        } else {
            Err((n - self.tokens) / (self.rate.per_second * factor))
        }
    }

    /// Whether `n` tokens are there at `at`, taking them if so: what EC2 does with a call.
    pub(crate) fn admit(&mut self, n: f64, at: f64) -> bool {
        self.take(n, at, 1.0).is_ok()
    }
}

/// What is being metered: an API in a region of an account (`None`: ebb's own).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// The account (the role assumed to reach it), `None` for ebb's own credentials.
    pub account: Option<String>,
    /// The region.
    pub region: String,
    /// The API operation.
    pub api: &'static str,
}

/// The buckets of one key, and how far throttles have slowed them.
#[derive(Debug)]
struct Paced {
    requests: Bucket,
    instances: Option<Bucket>,
    factor: f64,
}

/// The pacer's state, for the metrics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PacingCounts {
    /// Throttle answers that came back through the pacing, since the process started.
    pub throttles: u64,
    /// Calls waiting for tokens right now.
    pub waiting: usize,
    /// Request tokens left, by region and API (ebb's own account).
    pub tokens: BTreeMap<(String, &'static str), f64>,
}

/// Token buckets for every account, region and API a provider calls.
#[derive(Debug)]
pub struct Pacer {
    limits: RateLimits,
    origin: Instant,
    speed: f64,
    buckets: Mutex<HashMap<Key, Paced>>,
    throttles: AtomicU64,
    waiting: AtomicUsize,
}

impl Pacer {
    /// A pacer with `limits`, on the time of `clock` (the simulated clock runs faster).
    pub fn new(limits: RateLimits, clock: &Clock) -> Pacer {
        let speed = match *clock {
            Clock::Simulated { speed, .. } => speed,
            Clock::System | Clock::Fixed(_) => 1.0,
        };
        Pacer {
            limits,
            origin: Instant::now(),
            speed,
            buckets: Mutex::new(HashMap::new()),
            throttles: AtomicU64::new(0),
            waiting: AtomicUsize::new(0),
        }
    }

    /// The limits it paces by.
    pub fn limits(&self) -> &RateLimits {
        &self.limits
    }

    /// Seconds since it was made, on its clock.
    fn now(&self) -> f64 {
        self.origin.elapsed().as_secs_f64() * self.speed
    }

    fn with<T>(&self, key: &Key, f: impl FnOnce(&mut Paced, f64) -> T) -> T {
        let now = self.now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let paced = buckets.entry(key.clone()).or_insert_with(|| {
            let limit = self.limits.of(key.api);
            Paced {
                requests: Bucket::full(limit.requests, now),
                instances: limit.instances.map(|r| Bucket::full(r, now)),
                factor: 1.0,
            }
        });
        f(paced, now)
    }

    /// Waits until `key` has the tokens of one call on `instances` instances, and takes them.
    pub async fn acquire(&self, key: &Key, instances: usize) {
        // Counted down also when the wait is dropped (a tick abandoned at its deadline).
        struct Waiting<'a>(&'a AtomicUsize);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::Relaxed);
            }
        }
        self.waiting.fetch_add(1, Ordering::Relaxed);
        let _waiting = Waiting(&self.waiting);
        loop {
            let wait = self.with(key, |p, now| {
                // Both buckets must hold enough before either is drawn from.
                let mut requests = p.requests.clone();
                let mut per_instance = p.instances.clone();
                let a = requests.take(1.0, now, p.factor);
                let b = per_instance
                    .as_mut()
                    .map_or(Ok(()), |b| b.take(instances as f64, now, p.factor));
                match (a, b) {
                    (Ok(()), Ok(())) => {
                        p.requests = requests;
                        p.instances = per_instance;
                        None
                    }
                    (a, b) => Some(a.err().unwrap_or(0.0).max(b.err().unwrap_or(0.0))),
                }
            });
            match wait {
                None => break,
                Some(seconds) => {
                    let real = seconds / self.speed;
                    // At least a millisecond: tokio's timers count whole milliseconds.
                    tokio::time::sleep(Duration::from_secs_f64(real.max(0.001))).await;
                }
            }
        }
    }

    /// A throttle answer came back for `key`: its rate halves (down to [`MIN_FACTOR`]) and its
    /// request tokens are spent, so that the next call waits.
    pub fn throttled(&self, key: &Key) {
        self.throttles.fetch_add(1, Ordering::Relaxed);
        self.with(key, |p, now| {
            p.requests.refill(now, p.factor);
            p.requests.tokens = 0.0;
            p.factor = (p.factor / 2.0).max(MIN_FACTOR);
        });
        tracing::warn!(
            api = key.api,
            region = key.region,
            "EC2 throttled a call ebb paced: its pace is halved, and comes back with each call accepted"
        );
    }

    /// A call for `key` was accepted: its rate comes back by [`RECOVERY`].
    pub fn accepted(&self, key: &Key) {
        self.with(key, |p, now| {
            p.requests.refill(now, p.factor);
            if let Some(b) = &mut p.instances {
                b.refill(now, p.factor);
            }
            p.factor = (p.factor + RECOVERY).min(1.0);
        });
    }

    /// Makes `call` for `instances` instances of `key` within the buckets: waits for tokens,
    /// and when EC2 still throttles it, slows down and makes it again, up to
    /// [`THROTTLE_RETRIES`] times.
    pub async fn call<T, F, Fut>(
        &self,
        key: &Key,
        instances: usize,
        mut call: F,
    ) -> Result<T, CloudError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, CloudError>>,
    {
        let mut retries = 0;
        loop {
            self.acquire(key, instances).await;
            match call().await {
                Err(e) if e.kind == ErrorKind::Throttled => {
                    self.throttled(key);
                    if retries == THROTTLE_RETRIES {
                        return Err(e);
                    }
                    retries += 1;
                }
                other => {
                    self.accepted(key);
                    return other;
                }
            }
        }
    }

    /// How many instances calls of `api` in `region` can act on within `within` from now,
    /// `batch` instances a call, in the account whose bucket is emptiest (the tick does not
    /// know which account each instance is in): what a tick takes on, the rest waiting for the
    /// next tick.
    pub fn servable(
        &self,
        region: &str,
        api: &'static str,
        within: Duration,
        batch: usize,
    ) -> usize {
        let own = Key {
            account: None,
            region: region.to_string(),
            api,
        };
        // Ebb's own account's bucket exists from here on: full when new.
        self.with(&own, |_, _| ());
        let at = self.now() + within.as_secs_f64() * self.speed;
        let buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        buckets
            .iter()
            .filter(|(k, _)| k.region == region && k.api == api)
            .map(|(_, p)| {
                let mut requests = p.requests.clone();
                requests.refill(at, p.factor);
                let by_requests = requests.tokens.floor() * batch.max(1) as f64;
                let by_instances = p.instances.clone().map_or(f64::INFINITY, |mut b| {
                    b.refill(at, p.factor);
                    b.tokens.floor()
                });
                by_requests.min(by_instances).max(0.0) as usize
            })
            .min()
            .unwrap_or(0)
    }

    /// Its state, for the metrics.
    pub fn counts(&self) -> PacingCounts {
        let now = self.now();
        let buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let tokens = buckets
            .iter()
            .filter(|(k, _)| k.account.is_none())
            .map(|(k, p)| {
                let mut requests = p.requests.clone();
                requests.refill(now, p.factor);
                ((k.region.clone(), k.api), requests.tokens)
            })
            .collect();
        PacingCounts {
            throttles: self.throttles.load(Ordering::Relaxed),
            waiting: self.waiting.load(Ordering::Relaxed),
            tokens,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(api: &'static str) -> Key {
        Key {
            account: None,
            region: "eu-west-1".into(),
            api,
        }
    }

    fn throttle() -> CloudError {
        CloudError::throttled("StartInstances")
    }

    #[test]
    fn limits_default_to_ec2s_and_parse_raised_ones() {
        let d = RateLimits::default();
        assert_eq!(d.of("StartInstances").requests, Rate::of(5.0, 2.0));
        assert_eq!(
            d.of("StartInstances").instances,
            Some(Rate::of(1000.0, 2.0))
        );
        assert_eq!(
            d.of("StopInstances").instances,
            Some(Rate::of(1000.0, 20.0))
        );
        assert_eq!(d.of("CreateTags"), MUTATING);
        let raised: RateLimits = "StartInstances=20/10:5000/10, CreateTags=100/50"
            .parse()
            .unwrap();
        assert_eq!(
            raised.of("StartInstances").instances,
            Some(Rate::of(5000.0, 10.0))
        );
        assert_eq!(raised.of("CreateTags").requests, Rate::of(100.0, 50.0));
        assert_eq!(raised.of("StopInstances"), d.of("StopInstances"));
        assert_eq!(raised.to_string().parse::<RateLimits>().unwrap(), raised);
        for bad in [
            "StartInstances",
            "StartInstances=5",
            "StartInstances=0/2",
            "X=1/2:3/4:5/6",
        ] {
            let err = bad.parse::<RateLimits>().unwrap_err();
            assert!(err.contains("StartInstances=5/2:1000/2"), "{err}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn calls_wait_for_both_buckets() {
        let pacer = Pacer::new(RateLimits::default(), &Clock::System);
        let k = key("StartInstances");
        let began = Instant::now();
        // 5 calls of 100 instances are the request burst; the 6th waits half a second.
        for _ in 0..5 {
            pacer.acquire(&k, 100).await;
        }
        assert_eq!(began.elapsed(), Duration::ZERO);
        pacer.acquire(&k, 100).await;
        assert_eq!(began.elapsed().as_millis(), 500);
        // 1000 instances burst, then 2 a second: 400 left, so 500 more wait 50 s.
        pacer.acquire(&k, 500).await;
        let waited = began.elapsed().as_secs_f64();
        assert!((50.0..50.6).contains(&waited), "{waited}");
        assert_eq!(
            pacer.servable("eu-west-1", "StartInstances", Duration::ZERO, 100),
            0
        );
        assert_eq!(
            pacer.servable("eu-west-1", "StartInstances", Duration::from_secs(60), 100),
            120
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_given_up_is_no_longer_counted() {
        let pacer = Pacer::new(RateLimits::default(), &Clock::System);
        let k = key("StartInstances");
        pacer.acquire(&k, 1000).await;
        let waited = tokio::time::timeout(Duration::from_secs(1), pacer.acquire(&k, 100)).await;
        assert!(waited.is_err(), "100 instance tokens take 50 s");
        assert_eq!(pacer.counts().waiting, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn what_a_tick_takes_on_is_what_the_emptiest_accounts_bucket_serves() {
        let pacer = Pacer::new(RateLimits::default(), &Clock::System);
        let start = |account: Option<&str>| Key {
            account: account.map(str::to_string),
            region: "eu-west-1".into(),
            api: "StartInstances",
        };
        assert_eq!(
            pacer.servable("eu-west-1", "StartInstances", Duration::ZERO, 100),
            500
        );
        // Another account's bucket gave 900 instances: 100 left there.
        for _ in 0..3 {
            pacer
                .acquire(&start(Some("arn:aws:iam::2:role/ebb")), 300)
                .await;
        }
        assert_eq!(
            pacer.servable("eu-west-1", "StartInstances", Duration::ZERO, 100),
            100
        );
        assert_eq!(
            pacer.servable("us-east-1", "StartInstances", Duration::ZERO, 100),
            500
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_throttle_halves_the_rate_and_accepted_calls_bring_it_back() {
        let pacer = Pacer::new(RateLimits::default(), &Clock::System);
        let k = key("CreateTags");
        let made = std::sync::atomic::AtomicU32::new(0);
        let began = Instant::now();
        // EC2 throttles the first attempt: the pacer waits for a token at half of 5 a second
        // (0.4 s) and makes the call again; nothing reaches the caller.
        let answer = pacer
            .call(&k, 1, || async {
                match made.fetch_add(1, Ordering::Relaxed) {
                    0 => Err(throttle()),
                    n => Ok(n),
                }
            })
            .await;
        assert_eq!(answer.unwrap(), 1);
        assert_eq!(began.elapsed().as_millis(), 400);
        assert_eq!(pacer.counts().throttles, 1);
        // The accepted call gave back a sixteenth: the rate is 9/16 of 5 a second.
        let factor = pacer.with(&k, |p, _| p.factor);
        assert!((factor - 0.5625).abs() < 1e-9, "{factor}");
        for _ in 0..10 {
            pacer.accepted(&k);
        }
        assert_eq!(pacer.with(&k, |p, _| p.factor), 1.0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_throttle_that_persists_comes_back_after_the_retries() {
        let pacer = Pacer::new(RateLimits::default(), &Clock::System);
        let k = key("StopInstances");
        let made = std::sync::atomic::AtomicU32::new(0);
        let answer: Result<(), _> = pacer
            .call(&k, 10, || async {
                made.fetch_add(1, Ordering::Relaxed);
                Err(throttle())
            })
            .await;
        assert_eq!(answer.unwrap_err().kind, ErrorKind::Throttled);
        assert_eq!(made.load(Ordering::Relaxed), THROTTLE_RETRIES + 1);
        let halved = 0.5f64.powi(THROTTLE_RETRIES as i32 + 1).max(MIN_FACTOR);
        assert_eq!(pacer.with(&k, |p, _| p.factor), halved);
    }
}
