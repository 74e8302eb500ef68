//! The idle rule's activity signals in a replay. A utilisation file may record them
//! (`activity:NAME` columns): at each row's time, the latest use the signal had shown by then.
//! The engine is played a signal's last use as of each tick, as a tick reads it; a signal the
//! recording lacks, or has no row of in the [`RECENT`] before a tick, is unknown then, which
//! counts as in use, as a tick counts a signal it could not read.

use crate::engine::RECENT;
use crate::fleet::activity::{ActivityReadings, SignalReading};
use crate::fleet::Instance;
use crate::policy::PolicySet;
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// One signal's recording of one instance.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalRecording {
    /// The signal's name, as policies name it.
    pub name: String,
    /// At each row's time, oldest first, the latest use shown by then (`None`: none yet).
    pub seen: Vec<(DateTime<Utc>, Option<DateTime<Utc>>)>,
}

impl SignalRecording {
    /// The recording of signal `name` from `rows` (in any order): each row's last use is made
    /// the latest of those up to it, so that a row that forgot an earlier use does not hide it.
    pub fn new(name: &str, mut rows: Vec<(DateTime<Utc>, Option<DateTime<Utc>>)>) -> Self {
        rows.sort_by_key(|(at, _)| *at);
        let mut latest = None;
        for (_, last) in &mut rows {
            latest = latest.max(*last);
            *last = latest;
        }
        rows.shrink_to_fit();
        SignalRecording {
            name: name.to_string(),
            seen: rows,
        }
    }

    /// The recording of signal `name` with a row at each of `times`: the latest of `uses`
    /// (oldest first) at or before each, as `ebb metrics export` writes a signal's column.
    pub fn at_rows(name: &str, times: &[DateTime<Utc>], uses: &[DateTime<Utc>]) -> Self {
        let rows = times
            .iter()
            .map(|t| (*t, uses[..uses.partition_point(|u| u <= t)].last().copied()))
            .collect();
        SignalRecording::new(name, rows)
    }

    /// What a tick at `t` reads of it: the last use as of the newest row at or before `t`, or
    /// unknown without one in the [`RECENT`] before `t`.
    fn reading_at(&self, t: DateTime<Utc>, unknown: &Unknown) -> SignalReading {
        let seen = &self.seen[..self.seen.partition_point(|(at, _)| *at <= t)];
        match seen.last() {
            Some((at, last)) if t - *at <= RECENT => SignalReading::LastUse(*last),
            Some(_) => SignalReading::Unread(unknown.gap.clone()),
            None => SignalReading::Unread(unknown.before.clone()),
        }
    }
}

/// Why a signal is unknown at a tick, made once for the whole replay.
pub(super) struct Unknown {
    not_recorded: Arc<str>,
    gap: Arc<str>,
    before: Arc<str>,
}

impl Default for Unknown {
    fn default() -> Self {
        Unknown {
            not_recorded: Arc::from("the recording has no activity column for it"),
            gap: Arc::from("the recording has no row of it in the 10 minutes before"),
            before: Arc::from("the recording has no row of it yet"),
        }
    }
}

/// The names of the signals `set`'s policies list.
pub(super) fn signal_names(set: &PolicySet) -> BTreeSet<&str> {
    set.policies
        .iter()
        .flat_map(|p| p.idle.iter().flat_map(|i| &i.activity))
        .map(|s| s.name.as_str())
        .collect()
}

/// What a tick at `t` reads of each signal `names` of each of `instances`, with `recorded`
/// each one's recordings (in the same order).
pub(super) fn readings_at(
    names: &BTreeSet<&str>,
    instances: &[Instance],
    recorded: &[&[SignalRecording]],
    t: DateTime<Utc>,
    unknown: &Unknown,
    readings: &mut ActivityReadings,
) {
    if names.is_empty() {
        return;
    }
    for (inst, recorded) in instances.iter().zip(recorded) {
        let of = |name: &str| match recorded.iter().find(|r| r.name == name) {
            Some(r) => r.reading_at(t, unknown),
            None => SignalReading::Unread(unknown.not_recorded.clone()),
        };
        // In place after the first tick: a long replay allocates nothing per tick.
        match readings.get_mut(&inst.id) {
            Some(known) => known.iter_mut().for_each(|(n, r)| *r = of(n)),
            None => {
                let first: BTreeMap<String, SignalReading> =
                    names.iter().map(|n| (n.to_string(), of(n))).collect();
                readings.insert(inst.id.clone(), first);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn a_tick_reads_the_latest_use_of_a_recent_row_and_otherwise_nothing_known() {
        let r = SignalRecording::new(
            "jupyter",
            vec![
                (t("2026-11-30T10:05:00Z"), Some(t("2026-11-30T10:01:00Z"))),
                (t("2026-11-30T10:00:00Z"), None),
                // Forgets the use at 10:01: the latest stands.
                (t("2026-11-30T10:10:00Z"), None),
                (t("2026-11-30T10:40:00Z"), Some(t("2026-11-30T10:38:00Z"))),
            ],
        );
        let unknown = Unknown::default();
        let at = |s| r.reading_at(t(s), &unknown);
        assert_eq!(
            at("2026-11-30T09:59:00Z"),
            SignalReading::Unread(unknown.before.clone())
        );
        assert_eq!(at("2026-11-30T10:00:00Z"), SignalReading::LastUse(None));
        assert_eq!(
            at("2026-11-30T10:12:00Z"),
            SignalReading::LastUse(Some(t("2026-11-30T10:01:00Z")))
        );
        assert_eq!(
            at("2026-11-30T10:21:00Z"),
            SignalReading::Unread(unknown.gap.clone())
        );
        assert_eq!(
            at("2026-11-30T10:40:00Z"),
            SignalReading::LastUse(Some(t("2026-11-30T10:38:00Z")))
        );
    }
}
