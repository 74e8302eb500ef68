//! The report's daily rollups (`report_days`, migration 0022, and `report_hours`, migration
//! 0033): each whole UTC day's stopped stretches, one row per instance and policy, and its
//! hourly totals of what ran and what ebb kept stopped, made once the day is over by the leader
//! (`serve`'s report rollup task, [`Store::roll_up_report_days`]), oldest day first, a few
//! days an activation. `report_rollup.rolled_until` is the first day not rolled up yet: every
//! day before it (from the first stop ebb recorded) has its rows. A report reads the rolled days
//! of its window summed in one statement (and their hours, with commitments held), and only the
//! rest of the window's stops from the audit log ([`Store::report_parts`]).

use super::{Result, Store};
use crate::fleet::money::{Attached, HeldCommitments, Volume};
use crate::report::{midnight, roll_up, History, HourlyTotals, Parts, RolledSum, Usage, Window};
use chrono::{DateTime, Duration, NaiveDate, Utc};
use futures_util::TryFutureExt;
use sqlx::types::Json;

/// How long after a day's end it is rolled up: a tick under way at midnight may still record
/// an outcome of the day before, within its deadline.
pub const ROLL_UP_AFTER: Duration = Duration::hours(1);

/// A row of the rolled days' sums: day, policy, region, type, tag value, volumes, Elastic
/// IPs, stops, hibernations, people's starts, hours that saved, hours still billed.
type SumRow = (
    NaiveDate,
    String,
    String,
    String,
    Option<String>,
    Option<Json<Vec<Volume>>>,
    Option<i32>,
    bool,
    i64,
    i64,
    i64,
    f64,
    f64,
    f64,
);

/// A row of the rolled hours: the hour, region, type, running and stopped instance-hours.
type HourRow = (DateTime<Utc>, String, String, f64, f64);

/// What one pass of the report's roll-up did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RolledDays {
    /// Days rolled up.
    pub days: u32,
    /// Days refused: their state changes were pruned before they were rolled up.
    pub refused: u32,
}

/// Moves the roll-up past `day`, within `tx`.
async fn advance_rollup(tx: &mut sqlx::PgConnection, day: NaiveDate) -> Result<()> {
    sqlx::query(
        "INSERT INTO report_rollup (rolled_until) VALUES ($1)
         ON CONFLICT (only_row) DO UPDATE SET rolled_until = greatest(
             report_rollup.rolled_until, excluded.rolled_until)",
    )
    .bind(day.succ_opt().unwrap_or(day))
    .execute(tx)
    .await?;
    Ok(())
}

impl Store {
    /// Rolls up, oldest first, at most `max_days` whole days not rolled up yet that ended at
    /// least [`ROLL_UP_AFTER`] before `now`, each day in one transaction; how many it rolled,
    /// and how many it refused because their state changes were pruned.
    pub async fn roll_up_report_days(
        &self,
        now: DateTime<Utc>,
        max_days: u32,
    ) -> Result<RolledDays> {
        let rolled_until: Option<NaiveDate> =
            sqlx::query_scalar("SELECT rolled_until FROM report_rollup")
                .fetch_optional(&self.pool)
                .await?;
        let first = match rolled_until {
            Some(day) => day,
            None => {
                // The predicate of migration 0010's partial index on ebb's actions.
                let first: Option<DateTime<Utc>> = sqlx::query_scalar(
                    "SELECT min(at) FROM audit_log
                     WHERE actor = 'scheduler' AND NOT dry_run AND outcome = 'succeeded'
                       AND action IN ('stop', 'hibernate', 'start')",
                )
                .fetch_one(&self.pool)
                .await?;
                match first {
                    Some(at) => at.date_naive(),
                    None => return Ok(RolledDays::default()),
                }
            }
        };
        let pruned: Option<DateTime<Utc>> =
            sqlx::query_scalar("SELECT before FROM state_changes_pruned")
                .fetch_optional(&self.pool)
                .await?;
        // Days before this one ended at least ROLL_UP_AFTER ago.
        let end = (now - ROLL_UP_AFTER).date_naive();
        let mut rolled = RolledDays::default();
        let mut day = first;
        while day < end && rolled.days + rolled.refused < max_days {
            if pruned.is_some_and(|before| midnight(day) < before) {
                self.refuse_day(day).await?;
                rolled.refused += 1;
            } else {
                self.roll_up_day(day).await?;
                rolled.days += 1;
            }
            day = day.succ_opt().unwrap_or(end);
        }
        Ok(rolled)
    }

    /// Refuses `day`, whose state changes were pruned before it was rolled up: rolled from
    /// what is left, its stopped stretches would never end, and the figure would stay wrong.
    /// Reports say they do not count it.
    async fn refuse_day(&self, day: NaiveDate) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("INSERT INTO report_days_uncounted (day) VALUES ($1) ON CONFLICT DO NOTHING")
            .bind(day)
            .execute(&mut *tx)
            .await?;
        advance_rollup(&mut tx, day).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Rolls up `day`: its rows and hours, and the rollup moved past it, in one transaction.
    async fn roll_up_day(&self, day: NaiveDate) -> Result<()> {
        let (since, until) = (midnight(day), midnight(day) + Duration::days(1));
        let mut history = self.report_stop_history(since, until).await?;
        history.running = self.running_spans(since, until, None).await?;
        let (rows, totals) = roll_up(&history, day);
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO report_days (day, instance, policy, stops, hibernations, people_starts,
                 stopped_hours, charging_hours, reserved_hours)
             SELECT $1, * FROM UNNEST($2::text[], $3::text[], $4::int[], $5::int[], $6::int[],
                 $7::float8[], $8::float8[], $9::float8[])
             ON CONFLICT (day, instance, policy) DO NOTHING",
        )
        .bind(day)
        .bind(rows.iter().map(|r| r.instance.as_str()).collect::<Vec<_>>())
        .bind(
            rows.iter()
                .map(|r| r.policy.as_deref().unwrap_or(""))
                .collect::<Vec<_>>(),
        )
        .bind(rows.iter().map(|r| r.stops as i32).collect::<Vec<_>>())
        .bind(
            rows.iter()
                .map(|r| r.hibernations as i32)
                .collect::<Vec<_>>(),
        )
        .bind(
            rows.iter()
                .map(|r| r.people_starts as i32)
                .collect::<Vec<_>>(),
        )
        .bind(rows.iter().map(|r| r.stopped_hours).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.charging_hours).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.reserved_hours).collect::<Vec<_>>())
        .execute(&mut *tx)
        .await?;
        let hours: Vec<_> = totals.rows().collect();
        sqlx::query(
            "INSERT INTO report_hours (hour, region, instance_type, running_hours, stopped_hours)
             SELECT * FROM UNNEST($1::timestamptz[], $2::text[], $3::text[], $4::float8[],
                 $5::float8[])
             ON CONFLICT (hour, region, instance_type) DO NOTHING",
        )
        .bind(hours.iter().map(|h| h.0).collect::<Vec<_>>())
        .bind(hours.iter().map(|h| h.1).collect::<Vec<_>>())
        .bind(hours.iter().map(|h| h.2).collect::<Vec<_>>())
        .bind(hours.iter().map(|h| h.3.running).collect::<Vec<_>>())
        .bind(hours.iter().map(|h| h.3.stopped).collect::<Vec<_>>())
        .execute(&mut *tx)
        .await?;
        advance_rollup(&mut tx, day).await?;
        tx.commit().await?;
        Ok(())
    }

    /// What a report over `window`, grouped by the tag `by` too when given, is worked out
    /// from: the rolled days inside it summed, the stops of the rest of it, and its spot
    /// migrations, overrides and groups' changes; with commitments `held`, the rolled days'
    /// hours and what ran in the rest of it. The reads are independent and run at once, each
    /// on a connection of its own, so that the page waits for the longest, not their sum.
    pub async fn report_parts(
        &self,
        window: Window,
        by: Option<&str>,
        held: &HeldCommitments,
    ) -> Result<Parts> {
        let rolled_until: Option<NaiveDate> =
            sqlx::query_scalar("SELECT rolled_until FROM report_rollup")
                .fetch_optional(&self.pool)
                .await?;
        let first_whole = {
            let day = window.since.date_naive();
            if midnight(day) == window.since {
                day
            } else {
                day.succ_opt().unwrap_or(day)
            }
        };
        let last_end = window.until.date_naive();
        let rolled_end = rolled_until.map_or(first_whole, |r| r.min(last_end));
        let rest = self.report_other_history(window.since, window.until);
        if rolled_end <= first_whole {
            let (rest, stops) = tokio::try_join!(rest, self.part_history(window, held))?;
            return Ok(Parts {
                stops: vec![(stops, window)],
                rest,
                ..Parts::default()
            });
        }
        let (from, to) = (midnight(first_whole), midnight(rolled_end));
        let head = Window {
            since: window.since,
            until: from,
        };
        let tail = Window {
            since: to,
            until: window.until,
        };
        let part = |part: Window| async move {
            if part.until > part.since {
                Ok(Some((self.part_history(part, held).await?, part)))
            } else {
                Ok(None)
            }
        };
        let hours = async {
            if held.is_empty() {
                Ok(HourlyTotals::default())
            } else {
                self.rolled_hours(from, to).await
            }
        };
        let uncounted = sqlx::query_scalar(
            "SELECT day FROM report_days_uncounted WHERE day >= $1 AND day < $2 ORDER BY day",
        )
        .bind(first_whole)
        .bind(rolled_end)
        .fetch_all(&self.pool)
        .err_into();
        let (rest, head, tail, rolled, rolled_tag_keys, hours, uncounted) = tokio::try_join!(
            rest,
            part(head),
            part(tail),
            self.rolled_sums(first_whole, rolled_end, by),
            self.rolled_tag_keys(first_whole, rolled_end),
            hours,
            uncounted,
        )?;
        Ok(Parts {
            stops: head.into_iter().chain(tail).collect(),
            rest,
            rolled,
            rolled_tag_keys,
            hours,
            uncounted,
        })
    }

    /// The stops of `part` of a window, with what ran in it in the regions commitments `held`
    /// can cover.
    async fn part_history(&self, part: Window, held: &HeldCommitments) -> Result<History> {
        let (mut stops, running) = tokio::try_join!(
            self.report_stop_history(part.since, part.until),
            self.report_running(part.since, part.until, held),
        )?;
        stops.running = running;
        Ok(stops)
    }

    /// The rolled days from `first` to before `end`, summed by day, policy, region, type,
    /// value of the tag `by`, volumes, Elastic IPs and whether spot.
    async fn rolled_sums(
        &self,
        first: NaiveDate,
        end: NaiveDate,
        by: Option<&str>,
    ) -> Result<Vec<RolledSum>> {
        let rows: Vec<SumRow> = sqlx::query_as(
            "SELECT r.day, r.policy, i.region, i.instance_type,
                    CASE WHEN $3::text IS NULL THEN NULL ELSE i.tags ->> $3 END AS tag,
                    i.volumes, i.elastic_ips, i.lifecycle = 'spot',
                    sum(r.stops)::bigint, sum(r.hibernations)::bigint,
                    sum(r.people_starts)::bigint, sum(r.stopped_hours),
                    sum(r.charging_hours), sum(r.reserved_hours)
             FROM report_days AS r JOIN instances AS i ON i.id = r.instance
             WHERE r.day >= $1 AND r.day < $2
             GROUP BY 1, 2, 3, 4, 5, 6, 7, 8",
        )
        .persistent(false)
        .bind(first)
        .bind(end)
        .bind(by)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|row| {
                let (day, policy, region, instance_type, tag, volumes, ips, spot) =
                    (row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7);
                RolledSum {
                    day,
                    policy: (!policy.is_empty()).then_some(policy),
                    region,
                    instance_type,
                    tag,
                    stops: row.8 as u64,
                    hibernations: row.9 as u64,
                    people_starts: row.10 as u64,
                    stopped_hours: row.11,
                    charging_hours: row.12,
                    reserved_hours: row.13,
                    interruptible: spot,
                    attached: Attached {
                        volumes: volumes.map(|v| v.0),
                        elastic_ips: ips.and_then(|n| u32::try_from(n).ok()),
                    },
                }
            })
            .collect())
    }

    /// The tag keys (ebb's own left out) of the instances with rolled days from `first` to
    /// before `end`.
    async fn rolled_tag_keys(&self, first: NaiveDate, end: NaiveDate) -> Result<Vec<String>> {
        // One look-up by index per instance, rather than the window's rows made distinct.
        Ok(sqlx::query_scalar(
            "SELECT DISTINCT k FROM instances AS i, jsonb_object_keys(i.tags) AS k
             WHERE EXISTS (SELECT 1 FROM report_days AS r
                           WHERE r.instance = i.id AND r.day >= $1 AND r.day < $2)
               AND k NOT LIKE 'ebb:%'
             ORDER BY k",
        )
        .persistent(false)
        .bind(first)
        .bind(end)
        .fetch_all(&self.pool)
        .await?)
    }

    /// The rolled hours in `[since, until)`.
    async fn rolled_hours(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<HourlyTotals> {
        let rows: Vec<HourRow> = sqlx::query_as(
            "SELECT hour, region, instance_type, running_hours, stopped_hours FROM report_hours
             WHERE hour >= $1 AND hour < $2",
        )
        .persistent(false)
        .bind(since)
        .bind(until)
        .fetch_all(&self.pool)
        .await?;
        let mut totals = HourlyTotals::default();
        for (hour, region, instance_type, running, stopped) in rows {
            totals.add(hour, &region, &instance_type, Usage { running, stopped });
        }
        Ok(totals)
    }
}
