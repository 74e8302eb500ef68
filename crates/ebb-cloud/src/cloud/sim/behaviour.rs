//! How a simulated instance behaves: its GPU usage pattern (office-hours notebook work,
//! training runs, a box forgotten after lunch), its owner's arrival and refused starts, read
//! from the `sim:` block of a snapshot instance. Utilisation is a pure function of the
//! instance and the time, so a replay gives the same readings.

use super::READING_PERIOD;
use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveTime, Utc, Weekday};
use chrono_tz::Tz;
use serde::Deserialize;

/// How a simulated instance behaves: the `sim:` block of a snapshot instance.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Behaviour {
    /// How its GPUs are used.
    #[serde(default)]
    pub usage: Usage,
    /// The time zone of its user's office hours (`notebook` and `forgotten`).
    #[serde(default, deserialize_with = "time_zone")]
    pub timezone: Option<Tz>,
    /// Training runs (`training`): busy from `start` for `hours`.
    #[serde(default)]
    pub runs: Vec<Run>,
    /// The next this many starts fail for lack of capacity.
    #[serde(default)]
    pub start_failures: u32,
    /// Starts fail for lack of capacity while the instance has one of these types.
    #[serde(default)]
    pub no_capacity_for: Vec<String>,
    /// When its owner starts it, if it is stopped, on weekdays (local time, `HH:MM`).
    #[serde(default, deserialize_with = "time_of_day")]
    pub owner_starts_at: Option<NaiveTime>,
    /// Its cloud keeps billing it when stopped although its family could stop without charge
    /// (an account where the no-charge mode is off): the stopped mode read back says so.
    #[serde(default)]
    pub stops_keep_charging: bool,
    /// Its EBS volumes and Elastic IPs (what it pays while stopped); without it, one 100 GiB
    /// gp3 root volume and no Elastic IP, a common GPU box's. `volumes: null` simulates a
    /// failed read.
    #[serde(default)]
    pub attached: Option<crate::fleet::money::Attached>,
}

/// A GPU usage pattern.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Usage {
    /// No GPU metrics at all (no CloudWatch agent).
    #[default]
    None,
    /// Always below 3 %.
    Idle,
    /// Always above 90 %.
    Busy,
    /// Bursts of work on weekdays 09:00–12:30 and 13:00–18:30 local time; idle otherwise.
    Notebook,
    /// Like `notebook` in the morning, then idle from lunch on: forgotten.
    Forgotten,
    /// Busy during its `runs`, idle between them.
    Training,
}

/// One training run.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Run {
    /// When it starts.
    pub start: DateTime<Utc>,
    /// How long it lasts.
    pub hours: f64,
}

fn time_zone<'de, D: serde::Deserializer<'de>>(de: D) -> Result<Option<Tz>, D::Error> {
    let name = String::deserialize(de)?;
    name.parse::<Tz>().map(Some).map_err(|_| {
        serde::de::Error::custom(format!(
            "\"{name}\" is not an IANA time zone (like Europe/Berlin)"
        ))
    })
}

fn time_of_day<'de, D: serde::Deserializer<'de>>(de: D) -> Result<Option<NaiveTime>, D::Error> {
    let text = String::deserialize(de)?;
    NaiveTime::parse_from_str(&text, "%H:%M")
        .map(Some)
        .map_err(|_| {
            serde::de::Error::custom(format!("\"{text}\" is not a time of day (like 09:00)"))
        })
}

impl Behaviour {
    /// Its volumes and Elastic IPs, as the simulated cloud lists them.
    pub fn attached(&self) -> crate::fleet::money::Attached {
        self.attached
            .clone()
            .unwrap_or_else(|| crate::fleet::money::Attached {
                volumes: Some(vec![crate::fleet::money::Volume {
                    volume_type: "gp3".into(),
                    size_gib: 100,
                }]),
                elastic_ips: Some(0),
            })
    }

    /// Whether its owner starts it at `at`: a weekday, at or after `owner_starts_at`, and not
    /// on a day the owner already did (`last`).
    pub(super) fn owner_arrives(
        &self,
        at: DateTime<Utc>,
        last: Option<NaiveDate>,
    ) -> Option<NaiveDate> {
        let local = at.with_timezone(&self.timezone.unwrap_or(Tz::UTC));
        let weekday = !matches!(local.weekday(), Weekday::Sat | Weekday::Sun);
        let today = local.date_naive();
        (weekday && local.time() >= self.owner_starts_at? && last < Some(today)).then_some(today)
    }

    /// GPU utilisation at `at` of a running instance whose noise is seeded by `seed`; `None`
    /// when it reports no metrics.
    pub fn percent(&self, seed: u64, at: DateTime<Utc>) -> Option<f64> {
        let slot = at.timestamp().div_euclid(READING_PERIOD) as u64;
        let noise = unit(seed, slot);
        let working = |until: NaiveTime| {
            let local = at.with_timezone(&self.timezone.unwrap_or(Tz::UTC));
            let time = local.time();
            let weekday = !matches!(local.weekday(), Weekday::Sat | Weekday::Sun);
            let morning = time >= hm(9, 0) && time < hm(12, 30).min(until);
            let afternoon = time >= hm(13, 0) && time < hm(18, 30).min(until);
            weekday && (morning || afternoon)
        };
        // At work, six readings in ten are a burst; the rest are pauses.
        let at_work = |noise: f64| {
            if noise < 0.6 {
                20.0 + 65.0 * unit(seed ^ 0x9e37_79b9_7f4a_7c15, slot)
            } else {
                4.0 * noise
            }
        };
        Some(match self.usage {
            Usage::None => return None,
            Usage::Idle => 3.0 * noise,
            Usage::Busy => 90.0 + 9.0 * noise,
            Usage::Notebook if working(hm(23, 59)) => at_work(noise),
            Usage::Forgotten if working(hm(12, 30)) => at_work(noise),
            Usage::Notebook | Usage::Forgotten => 2.0 * noise,
            Usage::Training => {
                let in_run = self.runs.iter().any(|r| {
                    let end = r.start + Duration::seconds((r.hours * 3600.0) as i64);
                    r.start <= at && at < end
                });
                if in_run {
                    92.0 + 7.0 * noise
                } else {
                    noise
                }
            }
        })
    }
}

fn hm(h: u32, m: u32) -> NaiveTime {
    NaiveTime::from_hms_opt(h, m, 0).expect("a valid time of day")
}

/// A number in [0, 1) from `seed` and `slot` (splitmix64).
pub(super) fn unit(seed: u64, slot: u64) -> f64 {
    let mut z = seed ^ slot.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// A stable seed from an instance id (FNV-1a).
pub(super) fn seed(id: &str) -> u64 {
    id.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn a_simulated_box_has_a_root_volume_unless_its_block_says_otherwise() {
        let root = Behaviour::default().attached();
        let volumes = root.volumes.unwrap();
        assert_eq!(
            (volumes[0].volume_type.as_str(), volumes[0].size_gib),
            ("gp3", 100)
        );
        assert_eq!(root.elastic_ips, Some(0));
        let unread: Behaviour =
            crate::policy::yaml::from_str("attached: {volumes: null, elastic_ips: 2}").unwrap();
        assert_eq!(unread.attached().volumes, None);
        assert_eq!(unread.attached().elastic_ips, Some(2));
    }

    #[test]
    fn notebook_work_is_bursty_in_office_hours_and_idle_after() {
        let b = Behaviour {
            usage: Usage::Notebook,
            timezone: Some(chrono_tz::Europe::Berlin),
            ..Behaviour::default()
        };
        // Monday 10:00-11:00 Berlin: some bursts; 20:00-21:00: none.
        let hour = |start: &str| {
            (0..12)
                .map(|i| b.percent(7, at(start) + Duration::minutes(5 * i)).unwrap())
                .collect::<Vec<_>>()
        };
        assert!(hour("2026-11-30T09:00:00Z").iter().any(|p| *p >= 20.0));
        assert!(hour("2026-11-30T19:00:00Z").iter().all(|p| *p < 5.0));
        assert!(
            hour("2026-12-05T09:00:00Z").iter().all(|p| *p < 5.0),
            "Saturday"
        );
    }

    #[test]
    fn a_forgotten_box_goes_idle_after_lunch_and_training_is_busy_in_its_runs() {
        let forgotten = Behaviour {
            usage: Usage::Forgotten,
            ..Behaviour::default()
        };
        let afternoon = (0..24)
            .map(|i| forgotten.percent(3, at("2026-11-30T13:30:00Z") + Duration::minutes(5 * i)));
        assert!(afternoon.into_iter().all(|p| p.unwrap() < 5.0));
        let training = Behaviour {
            usage: Usage::Training,
            runs: vec![Run {
                start: at("2026-11-30T14:00:00Z"),
                hours: 2.5,
            }],
            ..Behaviour::default()
        };
        assert!(training.percent(1, at("2026-11-30T16:25:00Z")).unwrap() > 90.0);
        assert!(training.percent(1, at("2026-11-30T16:30:00Z")).unwrap() < 5.0);
        assert_eq!(
            Behaviour::default().percent(1, at("2026-11-30T16:30:00Z")),
            None
        );
    }
}
