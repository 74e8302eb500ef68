//! Incremental GPU reads. CloudWatch bills every metric a GetMetricData call asks for, a tick
//! comes every minute and a reading covers five, and Postgres already keeps what earlier ticks
//! read. So each instance is asked for at most once per five-minute period, from the period of
//! the newest reading Postgres holds of it (that period asked again: CloudWatch may not have
//! had all of it), and the engine sees the kept readings of its window with the new ones.
//! Where the kept readings leave the window uncovered (a gap, a late start), the whole window is
//! asked for again, so that datapoints CloudWatch received late fill it: that costs the same
//! one metric, since CloudWatch bills metrics, not points.

use crate::cloud::{redact_userinfo, Provider};
use crate::engine::RECENT;
use crate::fleet::{Fleet, Sample};
use crate::reconcile::{ReadFailure, Reconciler};
use chrono::{DateTime, Duration, DurationRound, Utc};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// The period of one reading: CloudWatch's (`EBB_GPU_METRIC`'s period), and the store's slot.
pub(super) const PERIOD: Duration = Duration::minutes(5);

/// The start of the period `t` falls in.
pub(super) fn period_of(t: DateTime<Utc>) -> DateTime<Utc> {
    t.duration_trunc(PERIOD).unwrap_or(t)
}

/// The instances read in the current period, and that period's start. In memory only: a
/// restarted process or a new leader asks each instance once more, from what Postgres holds.
#[derive(Debug, Default)]
pub(in crate::reconcile) struct Asked(std::sync::Mutex<(Option<DateTime<Utc>>, HashSet<String>)>);

impl Asked {
    /// Whether each of `ids` was read in `period` already.
    fn read_in(&self, period: DateTime<Utc>, ids: &[String]) -> Vec<bool> {
        let asked = self.0.lock().expect("asked instances poisoned");
        ids.iter()
            .map(|id| asked.0 == Some(period) && asked.1.contains(id))
            .collect()
    }

    /// Notes that `ids` were read, and their readings kept, in `period`.
    pub(super) fn mark<'a>(&self, period: DateTime<Utc>, ids: impl Iterator<Item = &'a String>) {
        let mut asked = self.0.lock().expect("asked instances poisoned");
        if asked.0 != Some(period) {
            *asked = (Some(period), HashSet::new());
        }
        asked.1.extend(ids.cloned());
    }
}

/// What a tick's GPU read brought besides the readings in the fleet.
#[derive(Debug, Default)]
pub(super) struct GpuRead {
    /// The regions (and how many of their instances) that could not be read.
    pub failures: Vec<ReadFailure>,
    /// The instances read this tick, and from when their readings are new: what is kept.
    pub fresh: HashMap<String, DateTime<Utc>>,
}

impl GpuRead {
    /// Marks `ids` of `region` unread in `fleet`, for `error`. The error becomes decision
    /// reasons, audit rows and `/v1/instances`: credentials of a URL it quotes are hidden.
    pub(super) fn unread(
        &mut self,
        fleet: &mut Fleet,
        region: &str,
        ids: Vec<String>,
        error: String,
    ) {
        let error = redact_userinfo(&error);
        let why: Arc<str> = error.as_str().into();
        match self.failures.iter_mut().find(|f| f.region == region) {
            Some(failure) => failure.instances += ids.len(),
            None => self.failures.push(ReadFailure {
                region: region.to_string(),
                instances: ids.len(),
                error,
            }),
        }
        fleet
            .gpu_unread
            .extend(ids.into_iter().map(|id| (id, why.clone())));
    }
}

impl<P: Provider> Reconciler<P> {
    /// Reads the GPU utilisation of the instances at `positions` in `region` over `[from, now]`
    /// into `fleet`: the readings Postgres keeps, and from the provider only the instances not
    /// read yet in this period, from their newest kept period on. An instance whose read
    /// failed is unread (unknown, never idle), whatever Postgres keeps of it.
    pub(super) async fn read_region_incrementally(
        &self,
        region: &str,
        positions: &[usize],
        from: DateTime<Utc>,
        now: DateTime<Utc>,
        fleet: &mut Fleet,
        read: &mut GpuRead,
    ) {
        let ids: Vec<String> = positions
            .iter()
            .map(|&i| fleet.instances[i].id.clone())
            .collect();
        let mut kept = match self.store.gpu_readings_of(&ids, from, now).await {
            Ok(kept) => kept,
            Err(err) => {
                let error = format!("cannot read the GPU readings kept in Postgres: {err}");
                return read.unread(fleet, region, ids, error);
            }
        };
        let period = period_of(now);
        let done = self.memo.gpu_asked.read_in(period, &ids);
        // The instances to ask for, by where their read starts.
        let mut starts: BTreeMap<DateTime<Utc>, Vec<usize>> = BTreeMap::new();
        for (&i, done) in positions.iter().zip(done) {
            let instance = &mut fleet.instances[i];
            if done {
                instance.gpu_util = kept.remove(&instance.id).unwrap_or_default();
            } else {
                let start = read_start(kept.get(&instance.id).map_or(&[], Vec::as_slice), from);
                starts.entry(start).or_default().push(i);
            }
        }
        for (start, group) in starts {
            let ids: Vec<String> = group
                .iter()
                .map(|&i| fleet.instances[i].id.clone())
                .collect();
            match self
                .provider
                .gpu_utilisation(region, &ids, start, now)
                .await
            {
                Ok(mut found) => {
                    let mut unread = Vec::new();
                    for i in group {
                        let instance = &mut fleet.instances[i];
                        if let Some(why) = found.unread.remove(&instance.id) {
                            // Its own query failed: unknown, and what Postgres keeps of it
                            // stays as it is, to be read again by the next tick.
                            unread.push((instance.id.clone(), why));
                            continue;
                        }
                        let new = found.samples.remove(&instance.id).unwrap_or_default();
                        // An answer without readings is not a read of this period: the next
                        // tick asks again (late datapoints), and nothing kept is dropped.
                        if !new.is_empty() {
                            read.fresh.insert(instance.id.clone(), start);
                        }
                        instance.gpu_util = merged(kept.remove(&instance.id), new, start);
                    }
                    for (id, why) in unread {
                        read.unread(fleet, region, vec![id], why);
                    }
                }
                Err(err) => read.unread(fleet, region, ids, err.to_string()),
            }
        }
    }
}

/// Where the read of a window from `from` starts, given the `kept` readings of it (oldest
/// first): the period of the newest, when they cover the window up to it (the engine's
/// coverage rule: a first reading within [`RECENT`] of the start, no gap over [`RECENT`]);
/// otherwise the window's first period.
fn read_start(kept: &[Sample], from: DateTime<Utc>) -> DateTime<Utc> {
    let covered = kept.first().is_some_and(|first| first.at - from <= RECENT)
        && kept.windows(2).all(|w| w[1].at - w[0].at <= RECENT);
    match kept.last() {
        Some(newest) if covered => period_of(newest.at),
        _ => period_of(from),
    }
}

/// The `kept` readings with the `new` ones (read from `start` on) in place of those kept of
/// the same periods, oldest first. A kept reading the new answer lacks stays: an answer that
/// left a period out does not make the box's busy minutes disappear.
fn merged(kept: Option<Vec<Sample>>, new: Vec<Sample>, start: DateTime<Utc>) -> Vec<Sample> {
    let mut samples: Vec<Sample> = new.into_iter().filter(|s| s.at >= start).collect();
    samples.extend(kept.unwrap_or_default());
    // A stable sort keeps the new reading of a period before the kept one, and `dedup` keeps
    // the first of each.
    samples.sort_by_key(|s| s.at);
    samples.dedup_by_key(|s| s.at);
    samples
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn at(time: &str, percent: f64) -> Sample {
        Sample::new(t(&format!("2026-11-30T{time}:00Z")), percent)
    }

    #[test]
    fn new_readings_replace_the_kept_ones_from_where_the_read_started() {
        let kept = vec![at("11:00", 1.0), at("11:05", 2.0), at("11:10", 3.0)];
        // The 11:10 reading was partial when kept; it is read again with 11:15.
        let new = vec![at("11:10", 40.0), at("11:15", 4.0)];
        let samples = merged(Some(kept), new, t("2026-11-30T11:10:00Z"));
        let percents: Vec<f64> = samples.iter().map(|s| s.percent).collect();
        assert_eq!(percents, [1.0, 2.0, 40.0, 4.0]);
    }

    #[test]
    fn an_answer_without_a_kept_period_does_not_drop_it() {
        // 11:10 was busy when kept; the answer read from 11:10 lacks it (or is empty): the
        // busy reading stays, and a newer one is added.
        let kept = vec![at("11:05", 2.0), at("11:10", 97.0)];
        let start = t("2026-11-30T11:10:00Z");
        let samples = merged(Some(kept.clone()), vec![], start);
        assert_eq!(samples, kept);
        let samples = merged(Some(kept), vec![at("11:15", 3.0)], start);
        let percents: Vec<f64> = samples.iter().map(|s| s.percent).collect();
        assert_eq!(percents, [2.0, 97.0, 3.0]);
    }

    #[test]
    fn a_read_starts_at_the_newest_kept_period_unless_the_window_is_not_covered() {
        let from = t("2026-11-30T10:32:00Z");
        let kept = [at("10:35", 1.0), at("10:40", 1.0), at("10:45", 1.0)];
        assert_eq!(read_start(&kept, from), t("2026-11-30T10:45:00Z"));
        // A gap (late datapoints may fill it), a late first reading, nothing: the window.
        let gap = [at("10:35", 1.0), at("10:50", 1.0)];
        assert_eq!(read_start(&gap, from), t("2026-11-30T10:30:00Z"));
        assert_eq!(read_start(&kept[2..], from), t("2026-11-30T10:30:00Z"));
        assert_eq!(read_start(&[], from), t("2026-11-30T10:30:00Z"));
    }

    #[test]
    fn periods_start_on_the_five_minutes() {
        assert_eq!(
            period_of(t("2026-11-30T11:04:59Z")),
            t("2026-11-30T11:00:00Z")
        );
        let asked = Asked::default();
        let ids = vec!["i-1".to_string(), "i-2".to_string()];
        asked.mark(t("2026-11-30T11:00:00Z"), ids[..1].iter());
        assert_eq!(
            asked.read_in(t("2026-11-30T11:00:00Z"), &ids),
            [true, false]
        );
        // A new period forgets the last one's.
        assert_eq!(
            asked.read_in(t("2026-11-30T11:05:00Z"), &ids),
            [false, false]
        );
        asked.mark(t("2026-11-30T11:05:00Z"), ids[1..].iter());
        assert_eq!(
            asked.read_in(t("2026-11-30T11:05:00Z"), &ids),
            [false, true]
        );
    }
}
