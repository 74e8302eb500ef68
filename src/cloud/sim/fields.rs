//! The fields of a snapshot instance's `sim:` block that people type as text: a time zone and
//! a time of day, each with an error that says what is expected.

use chrono::NaiveTime;
use chrono_tz::Tz;
use serde::Deserialize;

/// A `timezone:` field: an IANA time zone.
pub(super) fn time_zone<'de, D: serde::Deserializer<'de>>(de: D) -> Result<Option<Tz>, D::Error> {
    let name = String::deserialize(de)?;
    name.parse::<Tz>().map(Some).map_err(|_| {
        serde::de::Error::custom(format!(
            "\"{name}\" is not an IANA time zone (like Europe/Berlin)"
        ))
    })
}

/// An `owner_starts_at:` field: a time of day, `HH:MM`.
pub(super) fn time_of_day<'de, D: serde::Deserializer<'de>>(
    de: D,
) -> Result<Option<NaiveTime>, D::Error> {
    let text = String::deserialize(de)?;
    NaiveTime::parse_from_str(&text, "%H:%M")
        .map(Some)
        .map_err(|_| {
            serde::de::Error::custom(format!("\"{text}\" is not a time of day (like 09:00)"))
        })
}
