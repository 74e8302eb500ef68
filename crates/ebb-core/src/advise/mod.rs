//! `ebb advise`: what to change beyond stopping, worked out on the team's own recording with
//! the replay's engine. Five sections:
//!
//! - **rightsize** (`rightsize`): the cheapest catalogue type that would have carried each
//!   instance's GPU load, priced on the hours the policies leave it running;
//! - **commitments** (`commitments`): the hourly commitment per region and term that saves the
//!   most on the spend after the policies, beside the one sized on the spend before them;
//! - **policy_changes** (`tuning`): one-key changes to each policy, each replayed on the
//!   instances the policy governs, kept when they cut cost without serving less;
//! - **subscriptions** (`subscriptions`): for each box paid by the hour that the price table
//!   prices a subscription for, the month paid each way after the policies, and which to keep;
//! - **reservations** (`reservations`): capacity reservations held outside ebb that ran below
//!   their size, from the hourly reads of them, with the boxes that could use them.
//!
//! Pure: the recording comes in a chunk at a time (as [`crate::replay`] takes it), once to
//! survey when each policy's instances are busy ([`survey`]) and once to replay ([`Advisor`]);
//! each chunk's findings merge into an [`Advice`].

pub mod catalogue;
pub mod commitments;
mod output;
pub mod reservations;
pub mod rightsize;
pub mod run;
pub mod subscriptions;
pub mod tuning;

pub use commitments::{Basis, Commitment, HourlySpend, Term};
pub use reservations::{IdleReservation, ReservationUse};
pub use rightsize::{Load, Sizing, Suggestion};
pub use subscriptions::{SubscriptionAdvice, TermPrice};
pub use tuning::{BusyHours, Candidate, Compared, PolicyChange};

use crate::engine;
use crate::fleet::money::PriceTable;
use crate::fleet::{Catalogue, Instance, InstanceState, Lifecycle, Prices};
use crate::names::INTERRUPTIBLE_TAG;
use crate::policy::PolicySet;
use crate::replay::{self, PolicyRun, Recording, ReplayError};
use chrono::{DateTime, Duration, Utc};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// Hours in a month, as AWS prices a month.
pub const MONTH_HOURS: f64 = 730.0;

/// An instance running at least this share of the period (and busy over half of it) is a
/// commitment's base.
pub const ALWAYS_ON_SHARE: f64 = 0.95;

/// The period advised on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Period {
    /// Its start.
    pub from: DateTime<Utc>,
    /// Its end (exclusive).
    pub to: DateTime<Utc>,
}

impl Period {
    /// Its length in hours.
    pub fn hours(&self) -> f64 {
        (self.to - self.from).num_seconds() as f64 / 3600.0
    }

    /// How many clock hours it touches, counted from `from`.
    pub fn buckets(&self) -> usize {
        ((self.to - self.from).num_seconds().max(0) as usize).div_ceil(3600)
    }
}

/// `usd` over `period` as a month of [`MONTH_HOURS`].
pub fn monthly(usd: f64, period: &Period) -> f64 {
    match period.hours() {
        h if h > 0.0 => usd * MONTH_HOURS / h,
        _ => 0.0,
    }
}

/// Savings Plan $/hour of one instance type in one region, by term.
pub type PlanRates = BTreeMap<Term, f64>;

/// What the advice is worked out from besides the recording.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// The replay's period, tick and busy threshold.
    pub options: replay::Options,
    /// The policies in force.
    pub policies: &'a PolicySet,
    /// Prices the replay costs with (on-demand and spot).
    pub prices: &'a Prices,
    /// The types right-sizing chooses from.
    pub catalogue: &'a Catalogue,
    /// On-demand $/hour: region → type → price (right-sizing's choices).
    pub on_demand: &'a BTreeMap<String, BTreeMap<String, f64>>,
    /// Savings Plan rates: region → type → term → $/hour.
    pub commitment_rates: &'a BTreeMap<String, BTreeMap<String, PlanRates>>,
    /// Unserved demand a policy change may reach beyond the current policy's.
    pub max_unserved: Option<Duration>,
    /// The price tables the billing model is advised from, each with its currency: a box is
    /// priced by the first that prices both its hour and a subscription of its type.
    pub subscription_tables: &'a [(&'a str, &'a PriceTable)],
}

impl Inputs<'_> {
    fn period(&self) -> Period {
        Period {
            from: self.options.from,
            to: self.options.to,
        }
    }
}

/// The first pass over a chunk: when the instances of each policy with work hours were busy.
pub fn survey(inputs: &Inputs, chunk: &[Recording]) -> BusyHours {
    let mut busy = BusyHours::default();
    for r in chunk {
        let Some(policy) = engine::governing_policy(inputs.policies, &r.instance) else {
            continue;
        };
        let Some(wh) = &policy.work_hours else {
            continue;
        };
        let spans = replay::busy_spans(&r.samples, inputs.options.busy_threshold);
        busy.add(&policy.name, wh.schedule.timezone, &spans);
    }
    busy
}

/// Who a commitment should count on: the instances to commit (busy around the clock), to
/// schedule (tidal), and to move to spot (interruptible).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Roles {
    /// Running and busy around the clock under the policies: the commitment's base.
    pub commit: Vec<String>,
    /// Running part of the time: the schedule's.
    pub schedule: Vec<String>,
    /// Interruptible (tagged, or under a spot rule) or spot already: spot's.
    pub spot: Vec<String>,
}

/// The advice, or a worker's share of it.
#[derive(Debug, Clone)]
pub struct Advice {
    period: Period,
    /// Right-sizing suggestions.
    pub rightsize: Vec<Suggestion>,
    /// Per region: the spend after the policies and before them, each with its plan-rated
    /// usage per term.
    spend: BTreeMap<String, BTreeMap<Term, (HourlySpend, HourlySpend)>>,
    /// Per candidate change, its replay and the current policies' on the same instances.
    compared: Vec<Compared>,
    /// Who the commitment counts on.
    pub roles: Roles,
    /// Policy changes, once [`Advice::finish`] has chosen them.
    pub policy_changes: Vec<PolicyChange>,
    /// Commitments, once [`Advice::finish`] has sized them.
    pub commitments: Vec<Commitment>,
    /// The longest recording of any instance, first reading to last: under
    /// [`rightsize::MIN_RECORDED`], nothing is resized.
    pub longest_recorded: Duration,
    /// The billing model of each box paid by the hour that a table prices a subscription for.
    pub subscriptions: Vec<SubscriptionAdvice>,
    /// The capacity reservations held outside ebb that ran below their size, from the reads
    /// the caller gives ([`reservations::reservation_use`]); none read, until it does.
    pub reservations: ReservationUse,
}

impl Advice {
    fn new(period: Period, candidates: usize) -> Self {
        Advice {
            period,
            rightsize: Vec::new(),
            spend: BTreeMap::new(),
            compared: vec![Compared::default(); candidates],
            roles: Roles::default(),
            policy_changes: Vec::new(),
            commitments: Vec::new(),
            longest_recorded: Duration::zero(),
            subscriptions: Vec::new(),
            reservations: ReservationUse::default(),
        }
    }

    /// The period advised on.
    pub fn period(&self) -> Period {
        self.period
    }

    /// Adds a worker's share.
    pub fn merge(&mut self, other: Advice) {
        self.rightsize.extend(other.rightsize);
        for (region, terms) in other.spend {
            let mine = self.spend.entry(region).or_default();
            for (term, (after, before)) in terms {
                match mine.get_mut(&term) {
                    Some((a, b)) => {
                        a.merge(&after);
                        b.merge(&before);
                    }
                    None => {
                        mine.insert(term, (after, before));
                    }
                }
            }
        }
        for (mine, theirs) in self.compared.iter_mut().zip(other.compared) {
            mine.merge(theirs);
        }
        self.roles.commit.extend(other.roles.commit);
        self.roles.schedule.extend(other.roles.schedule);
        self.roles.spot.extend(other.roles.spot);
        self.longest_recorded = self.longest_recorded.max(other.longest_recorded);
        self.subscriptions.extend(other.subscriptions);
    }

    /// Chooses the policy changes among `candidates` and sizes the commitments; orders every
    /// section.
    pub fn finish(&mut self, candidates: &[Candidate], max_unserved: Option<Duration>) {
        self.policy_changes = tuning::keep(candidates, &self.compared, max_unserved, &self.period);
        self.commitments = self
            .spend
            .iter()
            .flat_map(|(region, terms)| {
                terms.iter().flat_map(|(term, (after, before))| {
                    commitments::advise(region, *term, after, before, &self.period)
                })
            })
            .collect();
        // By currency first: a saving in yuan is not ranked against one in dollars.
        self.rightsize.sort_by(|a, b| {
            (a.currency != "USD", a.currency)
                .cmp(&(b.currency != "USD", b.currency))
                .then_with(|| b.monthly_savings.total_cmp(&a.monthly_savings))
                .then_with(|| a.instance.cmp(&b.instance))
        });
        self.subscriptions
            .sort_by(|a, b| a.instance.cmp(&b.instance));
        for list in [
            &mut self.roles.commit,
            &mut self.roles.schedule,
            &mut self.roles.spot,
        ] {
            list.sort();
        }
    }
}

/// Whether `inst` should go to spot rather than be committed or scheduled.
fn interruptible(set: &PolicySet, inst: &Instance) -> bool {
    inst.lifecycle == Lifecycle::Spot
        || inst.tag(INTERRUPTIBLE_TAG) == Some("true")
        || engine::governing_policy(set, inst).is_some_and(|p| p.spot.is_some())
}

/// Replays chunks under the policies and under each candidate change; one per worker.
pub struct Advisor<'a> {
    inputs: &'a Inputs<'a>,
    current: PolicyRun<'a>,
    candidates: Vec<(&'a Candidate, PolicyRun<'a>)>,
    advice: Advice,
}

impl<'a> Advisor<'a> {
    /// An advisor of `candidates` from what `prior` remembers at the start.
    pub fn new(inputs: &'a Inputs<'a>, candidates: &'a [Candidate], prior: &engine::Prior) -> Self {
        let o = inputs.options;
        Advisor {
            inputs,
            current: PolicyRun::new(o, Cow::Borrowed(inputs.policies), inputs.prices, prior),
            candidates: candidates
                .iter()
                .map(|c| {
                    (
                        c,
                        PolicyRun::new(o, Cow::Borrowed(&c.set), inputs.prices, prior),
                    )
                })
                .collect(),
            advice: Advice::new(inputs.period(), candidates.len()),
        }
    }

    /// Replays `chunk` under the policies and each candidate, and adds what it finds.
    pub fn advise(&mut self, chunk: &[Recording]) -> Result<(), ReplayError> {
        let all: Vec<&Recording> = chunk.iter().collect();
        let played = self.current.replay(&all)?;
        let set = self.inputs.policies;
        let governing: Vec<Option<&str>> = chunk
            .iter()
            .map(|r| engine::governing_policy(set, &r.instance).map(|p| p.name.as_str()))
            .collect();
        for (r, p) in chunk.iter().zip(&played) {
            self.instance(r, p)?;
        }
        for (k, (candidate, run)) in self.candidates.iter_mut().enumerate() {
            let mine: Vec<usize> = (0..chunk.len())
                .filter(|i| governing[*i] == Some(candidate.policy.as_str()))
                .collect();
            if mine.is_empty() {
                continue;
            }
            let recordings: Vec<&Recording> = mine.iter().map(|i| &chunk[*i]).collect();
            let changed = run.replay(&recordings)?;
            let compared = &mut self.advice.compared[k];
            for (i, c) in mine.iter().zip(changed) {
                let currency = chunk[*i].instance.billing.cloud.currency();
                compared.add(currency, played[*i].tally, c.tally);
            }
        }
        Ok(())
    }

    /// Right-sizing, roles and spend of one instance.
    fn instance(&mut self, r: &Recording, played: &replay::Played) -> Result<(), ReplayError> {
        let inst = &r.instance;
        if replay::settled(inst.state) == InstanceState::Terminated {
            return Ok(());
        }
        let period = self.inputs.period();
        let tally = &played.tally;
        if let Some(load) = Load::of(&r.samples) {
            let longest = &mut self.advice.longest_recorded;
            *longest = (*longest).max(load.recorded);
            let sizing = Sizing {
                catalogue: self.inputs.catalogue,
                on_demand: self.inputs.on_demand,
            };
            if let Some(s) = sizing.suggest(inst, &load, tally.running_s, &period) {
                self.advice.rightsize.push(s);
            }
        }
        let length = (period.to - period.from).num_seconds();
        let busy_s = tally.running_s - tally.idle_running_s;
        let roles = &mut self.advice.roles;
        if interruptible(self.inputs.policies, inst) {
            roles.spot.push(inst.id.clone());
            return Ok(());
        }
        if tally.running_s as f64 >= ALWAYS_ON_SHARE * length as f64 && 2 * busy_s >= length {
            roles.commit.push(inst.id.clone());
        } else {
            roles.schedule.push(inst.id.clone());
        }
        let tables = self.inputs.subscription_tables;
        if let Some(s) = subscriptions::advise(inst, tally.running_s, &period, tables) {
            self.advice.subscriptions.push(s);
        }
        let Some(rates) = self
            .inputs
            .commitment_rates
            .get(&inst.region)
            .and_then(|r| r.get(&inst.instance_type))
        else {
            return Ok(());
        };
        let on_demand = replay::rate(self.inputs.prices, inst)?;
        let hours = period.buckets();
        let regional = self.advice.spend.entry(inst.region.clone()).or_default();
        for (term, plan) in rates {
            let (after, before) = regional
                .entry(*term)
                .or_insert_with(|| (HourlySpend::zero(hours), HourlySpend::zero(hours)));
            add_spans(after, &played.running, &period, on_demand, *plan);
            add_spans(
                before,
                &[(period.from, period.to)],
                &period,
                on_demand,
                *plan,
            );
        }
        Ok(())
    }

    /// What this worker found.
    pub fn finish(self) -> Advice {
        self.advice
    }
}

/// Adds the usage of `spans` to the clock hours of `period` they fall in.
fn add_spans(spend: &mut HourlySpend, spans: &[replay::Span], period: &Period, od: f64, plan: f64) {
    for &(a, b) in spans {
        let (a, b) = (a.max(period.from), b.min(period.to));
        let mut t = a;
        while t < b {
            let h = (t - period.from).num_seconds() / 3600;
            let hour_end = period.from + Duration::hours(h + 1);
            let end = hour_end.min(b);
            spend.add(h as usize, (end - t).num_seconds() as f64, od, plan);
            t = end;
        }
    }
}

/// An empty advice for `inputs`, to merge the workers' into.
pub fn empty(inputs: &Inputs, candidates: usize) -> Advice {
    Advice::new(inputs.period(), candidates)
}
