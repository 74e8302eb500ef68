//! Early moves of a migration's replacement, made before EC2 takes it: on a rebalance
//! recommendation for a spot replacement, and back to spot after a fall back to on-demand.
//! Pure: which move is due, and whether the job's checkpoint is fresh enough to move it.
//!
//! An early move launches the next replacement beside the running one (recorded as the
//! migration's `outgoing`), and terminates the running one only once the new one is verified:
//! there is no moment at which neither runs. A new one that does not come up is terminated,
//! and the workload stays where it was.

use crate::cloud::Market;
use crate::names::CHECKPOINT_AT_TAG;
use crate::policy::SpotRule;
use crate::store::MigrationRecord;
use chrono::{DateTime, Duration, SecondsFormat, Utc};

/// How far in the future a checkpoint tag may be, for clocks that disagree a little.
const CLOCK_SKEW: Duration = Duration::minutes(5);

/// Why an early move is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Early {
    /// EC2 recommended rebalancing the spot replacement at this time: it is at an elevated
    /// risk of being reclaimed, so the next one goes to another pool now.
    Rebalance(DateTime<Utc>),
    /// The workload has run on-demand since this time, for `back_to_spot_after`.
    BackToSpot(DateTime<Utc>),
}

impl Early {
    /// What is said of it in the migration's history and the audit log.
    pub fn describe(self, current: &str) -> String {
        match self {
            Early::Rebalance(at) => format!(
                "EC2 recommended rebalancing {current} at {}",
                at.to_rfc3339_opts(SecondsFormat::Secs, true)
            ),
            Early::BackToSpot(since) => format!(
                "{current} has run on-demand since {}, for back_to_spot_after",
                since.to_rfc3339_opts(SecondsFormat::Secs, true)
            ),
        }
    }
}

/// Which early move of `m` is due at `now` under `rule`, given when EC2 last recommended
/// rebalancing its current replacement (`rebalance`), if it did: none unless the migration is
/// `done` with its replacement verified and running since (`running_since`), not ended, not
/// already moving, and not waiting after a failed attempt. A rebalance counts for a spot
/// replacement only; back to spot needs the image the next replacement is launched from.
pub fn due(
    m: &MigrationRecord,
    rule: &SpotRule,
    rebalance: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Option<Early> {
    let settled = m.state == crate::spot::State::Done
        && m.ended_at.is_none()
        && m.outgoing.is_none()
        && m.current.is_some()
        && m.retry_at.is_none_or(|t| now >= t);
    let since = m.running_since.filter(|_| settled)?;
    match m.market {
        Market::Spot => rebalance.map(Early::Rebalance),
        Market::OnDemand if m.image.is_some() && now - since >= rule.back_to_spot_after => {
            Some(Early::BackToSpot(since))
        }
        Market::OnDemand => None,
    }
}

/// Whether the job's last checkpoint (the `ebb:checkpoint-at` tag's value, `None` when the
/// instance has none) is within `max_age` of `now`: a move resumes the job from it, so work
/// since then is lost. Why not otherwise.
pub fn checkpoint_fresh(
    tag: Option<&str>,
    max_age: Duration,
    now: DateTime<Utc>,
) -> Result<DateTime<Utc>, String> {
    let tag = tag.ok_or_else(|| format!("it has no {CHECKPOINT_AT_TAG} tag"))?;
    let at = DateTime::parse_from_rfc3339(tag.trim())
        .map_err(|_| format!("its {CHECKPOINT_AT_TAG}=\"{tag}\" is not an RFC 3339 time"))?
        .with_timezone(&Utc);
    if at > now + CLOCK_SKEW {
        return Err(format!("its {CHECKPOINT_AT_TAG} {tag} is in the future"));
    }
    if now - at > max_age {
        return Err(format!(
            "its last checkpoint is {} min old, older than checkpoint_max_age ({} min)",
            (now - at).num_minutes(),
            max_age.num_minutes()
        ));
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spot::State;
    use sqlx::types::Json;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn rule() -> SpotRule {
        SpotRule {
            min_savings: 0.4,
            checkpoint_max_age: Duration::minutes(30),
            instance_types: Vec::new(),
            max_interruptions: 3,
            keep_original_for: Duration::hours(6),
            keep_image_for: Duration::days(7),
            avoid_reclaimed_for: Duration::hours(1),
            placement_scores: false,
            back_to_spot_after: Duration::hours(24),
        }
    }

    fn done(market: Market, since: &str) -> MigrationRecord {
        let t = at(since);
        MigrationRecord {
            id: 1,
            original: "i-1".into(),
            region: "us-east-1".into(),
            policy: "p".into(),
            state: State::Done,
            current: Some("i-2".into()),
            market,
            image: Some("ami-1".into()),
            instance_type: Some("p4d.24xlarge".into()),
            zone: Some("use1-az1".into()),
            subnet: Some("subnet-1".into()),
            on_demand_price: Some(32.0),
            price: Some(12.0),
            launches: 1,
            saved_before: 0.0,
            interruptions: Json(Vec::new()),
            steps: Json(Vec::new()),
            launch_spec: None,
            error: None,
            created_at: t,
            state_since: t,
            running_since: Some(t),
            original_terminated_at: None,
            original_returned_at: None,
            ended_at: None,
            failures: 0,
            retry_at: None,
            image_kept_until: None,
            snapshots: Vec::new(),
            outgoing: None,
        }
    }

    #[test]
    fn a_rebalance_moves_a_settled_spot_replacement_only() {
        let now = at("2026-12-01T12:00:00Z");
        let recommended = Some(at("2026-12-01T11:58:00Z"));
        let m = done(Market::Spot, "2026-12-01T10:00:00Z");
        assert_eq!(
            due(&m, &rule(), recommended, now),
            Some(Early::Rebalance(at("2026-12-01T11:58:00Z")))
        );
        assert_eq!(due(&m, &rule(), None, now), None);
        let launching = MigrationRecord {
            state: State::Launching,
            ..m.clone()
        };
        assert_eq!(due(&launching, &rule(), recommended, now), None);
        let waiting = MigrationRecord {
            retry_at: Some(at("2026-12-01T12:05:00Z")),
            ..m.clone()
        };
        assert_eq!(due(&waiting, &rule(), recommended, now), None);
        let not_running = MigrationRecord {
            running_since: None,
            ..m.clone()
        };
        assert_eq!(due(&not_running, &rule(), recommended, now), None);
        // On-demand: a rebalance recommendation is about spot capacity only.
        let on_demand = done(Market::OnDemand, "2026-12-01T10:00:00Z");
        assert_eq!(due(&on_demand, &rule(), recommended, now), None);
    }

    #[test]
    fn back_to_spot_waits_for_back_to_spot_after_and_needs_the_image() {
        let m = done(Market::OnDemand, "2026-12-01T10:00:00Z");
        assert_eq!(due(&m, &rule(), None, at("2026-12-02T09:59:00Z")), None);
        assert_eq!(
            due(&m, &rule(), None, at("2026-12-02T10:00:00Z")),
            Some(Early::BackToSpot(at("2026-12-01T10:00:00Z")))
        );
        let no_image = MigrationRecord {
            image: None,
            ..m.clone()
        };
        assert_eq!(
            due(&no_image, &rule(), None, at("2026-12-03T10:00:00Z")),
            None
        );
        let ended = MigrationRecord {
            ended_at: Some(at("2026-12-01T11:00:00Z")),
            ..m
        };
        assert_eq!(due(&ended, &rule(), None, at("2026-12-03T10:00:00Z")), None);
    }

    #[test]
    fn only_a_fresh_checkpoint_lets_a_replacement_move_early() {
        let now = at("2026-12-01T12:00:00Z");
        let max = Duration::minutes(30);
        assert_eq!(
            checkpoint_fresh(Some("2026-12-01T11:45:00Z"), max, now),
            Ok(at("2026-12-01T11:45:00Z"))
        );
        for (tag, why) in [
            (None, "no ebb:checkpoint-at"),
            (Some("2026-12-01T11:00:00Z"), "60 min old"),
            (Some("soon"), "not an RFC 3339"),
            (Some("2026-12-01T13:00:00Z"), "in the future"),
        ] {
            let err = checkpoint_fresh(tag, max, now).unwrap_err();
            assert!(err.contains(why), "{err}");
        }
    }
}
