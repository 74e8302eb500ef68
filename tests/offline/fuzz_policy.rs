//! Fuzzing of everything `ebb validate`, `ebb plan` and `ebb explain` read: policy files and
//! fleet snapshots. Nothing may panic.
//!
//! Four properties, each over generated text written to a fresh directory:
//! - generated policy files: YAML documents shaped like policies (real keys, misspelt keys,
//!   random keys; values that are right, nearly right or of the wrong kind), some with raw-text
//!   edits on top. Loading must return `Ok` or `Err`; every problem must have a one-line message
//!   and a position inside its file. A set that loads is run through `decide`, `explain` and the
//!   plan output over a generated fleet, at DST days of 2026, near 1970 and 2100, and anywhere
//!   in the years 0000–9999.
//! - the example policies of `policies/` with random line and character edits (deleted,
//!   duplicated, swapped or re-indented lines, inserted YAML punctuation, truncation), which
//!   reach the parser's own errors.
//! - fleet snapshots, generated (YAML or JSON) and mutated from `tests/fixtures/fleet.yaml`. A
//!   snapshot that loads is planned and explained under the example policies.
//! - snapshots whose times lie beyond year 9999, which chrono's parser accepts (`+262142-…`).
//!
//! The plain tests at the end keep the crashes these found, each with its smallest input.
//!
//! `cargo test` runs 48 cases of each property. For a long session set `PROPTEST_CASES`, e.g.
//! `PROPTEST_CASES=30000 cargo test --release --test offline fuzz_policy::` (about 17 minutes on two
//! cores). Failing cases are kept in `tests/offline/fuzz_policy.proptest-regressions` and replayed first.

use chrono::{DateTime, Duration, TimeZone, Utc};
use ebb::engine::{self, InstanceFacts, Override, Prior};
use ebb::fleet::{Billing, Fleet, Instance, InstanceState, Lifecycle, Price, Prices, Sample, Tags};
use ebb::policy::yaml::Position;
use ebb::policy::{self, LoadError, PolicySet};
use ebb::snapshot;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{select, Index};
use proptest::test_runner::FileFailurePersistence;
use serde_yaml::value::{Tag, TaggedValue};
use serde_yaml::{Mapping, Number, Value};
use std::collections::HashMap;
use std::path::Path;
use std::sync::OnceLock;

// ---------------------------------------------------------------------------------------------
// Vocabulary: the words generated documents are made of.

/// Every key a policy file or a fleet snapshot knows; most generated keys are drawn from here.
const KEYS: &[&str] = &[
    "calendars",
    "policies",
    "name",
    "description",
    "priority",
    "match",
    "regions",
    "tags",
    "instance_types",
    "work_hours",
    "timezone",
    "periods",
    "days",
    "start",
    "stop",
    "cron",
    "skip",
    "workdays",
    "workday_as",
    "date",
    "as",
    "outside_hours",
    "start_at_open",
    "busy_defers_stop",
    "max_defer",
    "late_start",
    "idle_for",
    "idle",
    "gpu_below",
    "for",
    "grace_after_start",
    "missing_metrics",
    "when",
    "action",
    "notify",
    "before",
    "spot",
    "min_savings",
    "checkpoint_max_age",
    "max_interruptions",
    "keep_original_for",
    "keep_image_for",
    "dry_run",
    "dates",
    "instances",
    "prices",
    "overrides",
    "id",
    "region",
    "type",
    "state",
    "state_since",
    "lifecycle",
    "launched_at",
    "gpu_util",
    "gpu_read_error",
    "stopped_by_ebb_at",
    "started_by_ebb_at",
    "notified_at",
    "started_by_person_at",
    "on_demand",
    "instance",
    "until",
    "reason",
    "by",
];

/// Policy names; few, so that duplicates across policies and files happen.
const POLICY_NAMES: &[&str] = &["a", "b", "research-dev-hours", "notebooks-idle", " ", ""];

/// Calendar names; the first three are those of `policies/calendars.yaml`.
const CALENDAR_NAMES: &[&str] = &["cn-holidays", "us-holidays", "cn-workdays", "x", ""];

/// Tag keys shared by policies and fleets, including the ones ebb reads itself.
const TAG_KEYS: &[&str] = &[
    "team",
    "env",
    "workload",
    "owner",
    "ebb:skip",
    "ebb:interruptible",
    "ebb:checkpoint-at",
    "ebb:keep-until",
    "ebb:migrating",
    "",
];

/// Tag values shared by policies and fleets.
const TAG_VALUES: &[&str] = &[
    "research", "dev", "platform", "training", "notebook", "true", "false", "*", "",
];

/// Regions shared by policies and fleets.
const REGIONS: &[&str] = &["us-east-1", "ap-east-1", "eu-central-1", ""];

/// Instance types and globs shared by policies and fleets.
const INSTANCE_TYPES: &[&str] = &[
    "g5.xlarge",
    "g6.xlarge",
    "p4d.24xlarge",
    "p4de.24xlarge",
    "t3.large",
    "g5.*",
    "*",
    "?",
    "[",
    "**.*",
    "",
];

/// Instance ids; few, so that duplicates happen.
const INSTANCE_IDS: &[&str] = &["i-1", "i-2", "i-3", "i-4", ""];

/// Time zones: far from UTC, half and quarter hours, whole-day and negative DST shifts, unknown.
const ZONES: &[&str] = &[
    "America/New_York",
    "Europe/London",
    "Europe/Berlin",
    "Asia/Shanghai",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "Pacific/Auckland",
    "Pacific/Apia",
    "Pacific/Kiritimati",
    "Australia/Lord_Howe",
    "Antarctica/Troll",
    "America/St_Johns",
    "Africa/Casablanca",
    "Europe/Dublin",
    "Etc/GMT+12",
    "UTC",
    "america/new_york",
    "Mars/Olympus_Mons",
    "",
];

/// Tags of instances that the example policies govern, and of one that none does.
const PROFILES: &[&[(&str, &str)]] = &[
    &[("team", "research"), ("env", "dev")],
    &[("team", "platform"), ("env", "dev")],
    &[("workload", "notebook")],
    &[("workload", "training"), ("ebb:interruptible", "true")],
    &[("workload", "training")],
    &[],
];

/// Day names and near misses, for `days` and cron fields.
const DAY_NAMES: &[&str] = &[
    "mon", "tue", "wed", "thu", "fri", "sat", "sun", "Monday", "SUN", "mo", "xyz", "", " ",
];

/// Strings that YAML or the checker may read in a surprising way.
const WEIRD: &[&str] = &[
    "",
    " ",
    "~",
    "null",
    "true",
    "yes",
    "no",
    "on",
    "0x1F",
    "0o17",
    "1e400",
    "-1e400",
    "-.inf",
    ".nan",
    "\u{0}ebb-locate",
    "\u{FEFF}",
    "\u{2028}",
    "\u{85}",
    "a\nb",
    "a\r\nb",
    "\r",
    "\t",
    "'",
    "\"",
    "#",
    "&a",
    "*a",
    "!!str",
    "<<",
    ": ",
    "- ",
    "g\u{0308}\u{0334}",
    "🚀",
    "東京",
    "Ω≈ç√∫",
];

/// Pieces of YAML syntax that raw-text edits insert.
const TOKENS: &[&str] = &[
    "&a ",
    "*a",
    "<<: *a\n",
    "---\n",
    "...\n",
    "!!binary ",
    "!tag ",
    "!!map ",
    "? ",
    ": ",
    "- ",
    "{",
    "}",
    "[",
    "]",
    ",",
    "'",
    "\"",
    "|\n",
    ">-\n",
    "#",
    "\t",
    "\u{FEFF}",
    "\r",
    "\r\n",
    "\u{2028}",
    "\u{85}",
    "%YAML 1.1\n",
    "@",
    "`",
    "\\",
    "\u{0}",
    "~",
    "null",
    "24:00",
    "fri-mon",
    "1e400",
    "  ",
    "\n",
];

/// Decision instants around which `decide` runs: DST changes of 2026 in New York and London,
/// the fixture's time, Samoa's skipped day, and the far past and future.
const ANCHORS: &[&str] = &[
    "2026-03-08T07:00:00Z",
    "2026-11-01T06:00:00Z",
    "2026-03-29T01:00:00Z",
    "2026-10-25T01:00:00Z",
    "2026-11-30T12:10:00Z",
    "2011-12-30T10:00:00Z",
    "1970-01-01T00:00:00Z",
    "2100-01-01T00:00:00Z",
    "2100-12-31T23:59:59Z",
    "0000-01-01T00:00:00Z",
    "9999-12-31T23:59:59Z",
];

// ---------------------------------------------------------------------------------------------
// Text leaves: for each kind, the valid texts, and all texts (valid ones mixed with broken ones).

/// Valid `HH:MM` times, `24:00` included.
fn valid_time() -> BoxedStrategy<String> {
    prop_oneof![
        8 => (0u32..24, select(vec![0u32, 15, 30, 45, 59]))
            .prop_map(|(h, m)| format!("{h:02}:{m:02}")),
        1 => Just("24:00".to_string()),
    ]
    .boxed()
}

/// Times of day, with out-of-range and malformed ones (`25:00`, `8:00`).
fn time_text() -> BoxedStrategy<String> {
    prop_oneof![
        6 => valid_time(),
        2 => (0u32..=30, 0u32..=65).prop_map(|(h, m)| format!("{h:02}:{m:02}")),
        1 => select(vec!["25:00", "24:01", "8:00", "08:00:00", "-1:00", "ab:cd", ":", "", "٠٨:٣٠",
            " 08:30", "08 :30", "+8:00", "0x:10"])
            .prop_map(String::from),
    ]
    .boxed()
}

/// Valid day sets: lists and ranges of days, wrapping ones (`fri-mon`) included.
fn valid_days() -> BoxedStrategy<String> {
    let day = || select(&DAY_NAMES[..7]);
    prop_oneof![
        2 => select(vec!["mon-fri", "fri-mon", "sun-thu", "sat,sun", "mon-sun", "sun-sat"])
            .prop_map(String::from),
        3 => vec((day(), proptest::option::of(day())), 1..4).prop_map(|items| {
            let items: Vec<String> = items
                .into_iter()
                .map(|(a, b)| b.map_or(a.to_string(), |b| format!("{a}-{b}")))
                .collect();
            items.join(",")
        }),
    ]
    .boxed()
}

/// Day sets, with unknown names and broken lists mixed in.
fn days_text() -> BoxedStrategy<String> {
    prop_oneof![
        5 => valid_days(),
        1 => vec(select(DAY_NAMES), 1..4).prop_map(|d| d.join("-")),
        1 => select(vec!["mon--fri", "mon-tue-wed", ",", "", " , ", "MON-FRI", "Monday-Friday",
            "mon,", "-", "mon - fri"])
            .prop_map(String::from),
    ]
    .boxed()
}

/// Valid five-field cron expressions; some never fire (`31` of `feb`).
fn valid_cron() -> BoxedStrategy<String> {
    (
        select(vec!["0", "30", "*/15", "5", "0,30", "59"]),
        select(vec!["8", "20", "*/6", "9-17", "0", "2", "23"]),
        prop_oneof![6 => Just("*"), 1 => select(vec!["1", "15", "1-7", "29", "30", "31"])],
        prop_oneof![
            6 => Just("*"),
            1 => select(vec!["1-12", "jan", "*/2", "feb", "mar,oct", "dec-dec"]),
        ],
        prop_oneof![
            2 => Just("*"),
            3 => select(vec!["mon-fri", "sat,sun", "1-5", "0", "7", "fri-sun", "sun-sat",
                "fri-mon"]),
        ],
    )
        .prop_map(|(mi, h, dom, mo, dow)| format!("{mi} {h} {dom} {mo} {dow}"))
        .boxed()
}

/// One field of a cron expression: numbers, names, ranges, steps, and malformed items.
fn cron_field() -> BoxedStrategy<String> {
    prop_oneof![
        4 => select(vec!["*", "*/15", "0", "30", "8", "20", "1-5", "mon-fri", "*/1"])
            .prop_map(String::from),
        2 => select(vec!["*/0", "59", "60", "5-1", "fri-sun", "sun-sat", "jan", "dec-jan", "1,2,,3",
            "L", "?", "31", "30", "29", "2", "0-7", "7", "*/99999999999999999999", "1/2", "-",
            "mon-", "#", "W", "5#3", "feb", "sat-sun", "0,7"])
            .prop_map(String::from),
        1 => (0u64..100).prop_map(|n| n.to_string()),
        1 => (select(vec!["*", "0", "5", "1-10"]), 0u64..100).prop_map(|(b, s)| format!("{b}/{s}")),
        1 => (0u32..70, 0u32..70).prop_map(|(a, b)| format!("{a}-{b}")),
        1 => select(DAY_NAMES).prop_map(String::from),
    ]
    .boxed()
}

/// Cron expressions: valid ones, and any fields, usually five, sometimes three to seven.
fn cron_text() -> BoxedStrategy<String> {
    prop_oneof![
        3 => valid_cron(),
        3 => vec(cron_field(), 5..=5).prop_map(|fields| fields.join(" ")),
        1 => vec(cron_field(), 3..=7).prop_map(|fields| fields.join(" ")),
    ]
    .boxed()
}

/// Valid durations (`45m`, `1h30m`).
fn valid_duration() -> BoxedStrategy<String> {
    prop_oneof![
        4 => (1u64..100, select(vec!["m", "h", "s", "d"])).prop_map(|(n, u)| format!("{n}{u}")),
        1 => (1u64..24, 1u64..60).prop_map(|(h, m)| format!("{h}h{m}m")),
    ]
    .boxed()
}

/// Durations, with negative, zero, huge and unit-less ones.
fn duration_text() -> BoxedStrategy<String> {
    let unit = select(vec![
        "s", "m", "h", "d", "w", "y", "ms", "us", "ns", "min", "hours", "months", "", " m",
    ]);
    let number = prop_oneof![0u64..100, 0u64..1_000_000, any::<u64>()];
    prop_oneof![
        4 => valid_duration(),
        2 => (select(vec!["", "-", "+"]), number, unit).prop_map(|(s, n, u)| format!("{s}{n}{u}")),
        1 => select(vec!["45m", "4h", "-3h", "0s", "99999999999h", "1e400", "", "3650d", "3651d",
            "87600h", "1 week", "forever", "10y", "PT1H", "1h 30m", "∞", "0"])
            .prop_map(String::from),
    ]
    .boxed()
}

/// Percentages written as text, with out-of-range, non-finite and malformed ones.
fn percent_text() -> BoxedStrategy<String> {
    prop_oneof![
        3 => (0u32..=100).prop_map(|n| format!("{n}%")),
        1 => (-10.0f64..120.0).prop_map(|n| format!("{n}%")),
        1 => select(vec!["40%", "40", "100%", "101%", "-1%", "1e400", "1e400%", "NaN%", "nan",
            "inf%",
            "40 %", "%", "0%", "100.0000001%", " 5% ", "-0%"])
            .prop_map(String::from),
    ]
    .boxed()
}

/// Valid dates and date ranges around now.
fn valid_date() -> BoxedStrategy<String> {
    let date = || {
        (2025i32..2028, 1u32..=12, 1u32..=28).prop_map(|(y, m, d)| format!("{y:04}-{m:02}-{d:02}"))
    };
    prop_oneof![
        date(),
        (date(), date()).prop_map(|(a, b)| format!("{}..{}", a.clone().min(b.clone()), a.max(b))),
    ]
    .boxed()
}

/// Dates and date ranges, with impossible dates and ranges that run backwards.
fn date_text() -> BoxedStrategy<String> {
    let date = || {
        (0i32..=10000, 0u32..=13, 0u32..=32).prop_map(|(y, m, d)| format!("{y:04}-{m:02}-{d:02}"))
    };
    prop_oneof![
        4 => valid_date(),
        1 => date(),
        1 => (date(), date()).prop_map(|(a, b)| format!("{a}..{b}")),
        1 => select(vec!["2026-02-29", "2024-02-29", "9999-12-31", "0000-01-01",
            "2027-01-01..2026-01-01", "2026-1-1", "..", "2026-01-01..", "2026-01-01...2026-01-02",
            " 2026-01-01 .. 2026-01-02 "])
            .prop_map(String::from),
    ]
    .boxed()
}

/// RFC 3339 times around the fixture's day.
fn valid_instant() -> BoxedStrategy<String> {
    (28u32..=30, 0u32..24, 0u32..60)
        .prop_map(|(d, h, m)| format!("2026-11-{d:02}T{h:02}:{m:02}:00Z"))
        .boxed()
}

/// RFC 3339 times as a snapshot or a tag would write them: mostly around the fixture's day,
/// some at the ends of the four-digit years, some malformed.
fn instant_text() -> BoxedStrategy<String> {
    prop_oneof![
        6 => valid_instant(),
        1 => select(vec!["9999-12-31T23:59:59Z", "0000-01-01T00:00:00Z", "1970-01-01T00:00:00Z",
            "2026-11-30T12:00:00+14:00", "2026-11-30T12:00:00-23:59", "2026-11-30 12:00:00Z",
            "2026-11-30T12:00:00", "2026-11-30", "2026-11-30T24:00:00Z", "2026-11-30T23:59:60Z",
            "2026-11-30T12:00:00.999999999999Z"])
            .prop_map(String::from),
    ]
    .boxed()
}

/// Times beyond the four-digit years, which chrono's relaxed parser (the one a snapshot's times
/// go through) reads with a sign, up to the ends of its range.
fn extreme_instant() -> BoxedStrategy<String> {
    select(vec![
        "+262142-12-31T23:59:59Z",
        "+262142-12-31T12:00:00Z",
        "+262142-12-31T12:00:00-11:00",
        "-262143-01-01T00:00:00Z",
        "-262143-01-01T12:00:00Z",
        "+10000-01-01T00:00:00Z",
    ])
    .prop_map(String::from)
    .boxed()
}

/// Any text: everything above, the shared pools, weird strings and random unicode.
fn text() -> BoxedStrategy<String> {
    prop_oneof![
        time_text(),
        days_text(),
        cron_text(),
        duration_text(),
        percent_text(),
        date_text(),
        instant_text(),
        select(ZONES).prop_map(String::from),
        select(TAG_VALUES).prop_map(String::from),
        select(KEYS).prop_map(String::from),
        select(WEIRD).prop_map(String::from),
        "\\PC{0,16}",
        "(?s:.{0,12})",
    ]
    .boxed()
}

// ---------------------------------------------------------------------------------------------
// YAML values.

/// A string value from `strategy`.
fn string(strategy: BoxedStrategy<String>) -> BoxedStrategy<Value> {
    strategy.prop_map(Value::String).boxed()
}

/// A string value drawn from `pool`.
fn pick(pool: &'static [&'static str]) -> BoxedStrategy<Value> {
    select(pool).prop_map(|s| Value::String(s.into())).boxed()
}

/// Numbers: small and extreme integers, and floats including NaN and the infinities.
fn number() -> BoxedStrategy<Value> {
    prop_oneof![
        3 => (-5i64..30).prop_map(Number::from),
        1 => any::<i64>().prop_map(Number::from),
        1 => any::<u64>().prop_map(Number::from),
        1 => any::<f64>().prop_map(Number::from),
        1 => select(vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 1e308, 5.0, 99.9])
            .prop_map(Number::from),
    ]
    .prop_map(Value::Number)
    .boxed()
}

/// Small whole numbers.
fn small_int() -> BoxedStrategy<Value> {
    (-5i64..30).prop_map(|n| Value::Number(n.into())).boxed()
}

/// A boolean value.
fn boolean() -> BoxedStrategy<Value> {
    any::<bool>().prop_map(Value::Bool).boxed()
}

/// Any scalar: null, booleans, numbers and text.
fn scalar() -> BoxedStrategy<Value> {
    prop_oneof![
        1 => Just(Value::Null),
        1 => boolean(),
        2 => number(),
        6 => string(text()),
    ]
    .boxed()
}

/// A mapping key: usually a known key, sometimes any text or a key that is not text at all.
fn key() -> BoxedStrategy<Value> {
    prop_oneof![
        6 => pick(KEYS),
        2 => string(text()),
        1 => scalar(),
    ]
    .boxed()
}

/// Any YAML value: scalars, and sequences, mappings and tagged values nested a few levels.
fn value() -> BoxedStrategy<Value> {
    scalar()
        .prop_recursive(4, 48, 5, |inner| {
            prop_oneof![
                2 => vec(inner.clone(), 0..5).prop_map(Value::Sequence),
                3 => vec((key(), inner.clone()), 0..5)
                    .prop_map(|entries| Value::Mapping(entries.into_iter().collect())),
                1 => (select(vec!["!foo", "!!str", "!!int", "!!binary", "!!timestamp", "!!map"]),
                    inner)
                    .prop_map(|(tag, value)| {
                        // serde_yaml cannot write a tag directly on a tagged value: retag it.
                        let value = match value {
                            Value::Tagged(tagged) => tagged.value,
                            v => v,
                        };
                        Value::Tagged(Box::new(TaggedValue { tag: Tag::new(tag), value }))
                    }),
            ]
        })
        .boxed()
}

/// How far generated policies and snapshots stray from valid ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wild {
    /// Only valid values (files can still be invalid as a whole: duplicate names, unknown
    /// calendars, empty windows).
    No,
    /// In about this many cases out of a hundred, a value is of any kind, a key is misspelt
    /// or an unknown key is added; leaves are drawn from all texts, not only valid ones.
    Percent(u32),
}

impl Wild {
    /// `valid`, or in wild documents now and then a value of any kind.
    fn field(self, valid: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
        match self {
            Wild::No => valid,
            Wild::Percent(p) => prop_oneof![100 => valid, p => scalar(), p => value()].boxed(),
        }
    }

    /// A text leaf: from `valid` only, or (wild) from `all`; either way perhaps replaced by
    /// [`Wild::field`].
    fn leaf(
        self,
        valid: BoxedStrategy<String>,
        all: BoxedStrategy<String>,
    ) -> BoxedStrategy<Value> {
        match self {
            Wild::No => string(valid),
            Wild::Percent(_) => self.field(string(all)),
        }
    }

    /// One of `options`, or (wild) now and then any text.
    fn choice(self, options: &'static [&'static str]) -> BoxedStrategy<Value> {
        match self {
            Wild::No => pick(options),
            Wild::Percent(_) => {
                self.field(prop_oneof![8 => pick(options), 1 => string(text())].boxed())
            }
        }
    }

    /// How likely a required key is present.
    fn required(self) -> f64 {
        match self {
            Wild::No => 1.0,
            Wild::Percent(_) => 0.95,
        }
    }

    /// The key `k`, or (wild) now and then misspelt the ways people misspell keys.
    fn key(self, k: &'static str) -> BoxedStrategy<Value> {
        let Wild::Percent(p) = self else {
            return Just(Value::String(k.into())).boxed();
        };
        let mut short = k.to_string();
        short.pop();
        prop_oneof![
            400 => Just(k.to_string()),
            p => Just(short),
            p => Just(k.to_uppercase()),
            p => Just(format!("{k}s")),
            p => Just(k.replace('_', "-")),
        ]
        .prop_map(Value::String)
        .boxed()
    }

    /// A mapping whose entries are `(key, chance of being present, value)`, plus (wild) now
    /// and then an entry with any key.
    fn mapping(
        self,
        entries: Vec<(&'static str, f64, BoxedStrategy<Value>)>,
    ) -> BoxedStrategy<Value> {
        let present: Vec<_> = entries
            .into_iter()
            .map(|(k, p, v)| {
                let entry = (self.key(k), v);
                // `weighted` takes only probabilities strictly between 0 and 1.
                if p >= 1.0 {
                    entry.prop_map(Some).boxed()
                } else if p <= 0.0 {
                    Just(None).boxed()
                } else {
                    proptest::option::weighted(p, entry).boxed()
                }
            })
            .collect();
        let extra = match self {
            Wild::No => Just(Vec::new()).boxed(),
            Wild::Percent(p) => prop_oneof![
                100 => Just(Vec::new()),
                p => vec((key(), value()), 1..3),
            ]
            .boxed(),
        };
        (present, extra)
            .prop_map(|(present, extra)| {
                let mut m = Mapping::new();
                for (k, v) in present.into_iter().flatten().chain(extra) {
                    m.insert(k, v);
                }
                Value::Mapping(m)
            })
            .boxed()
    }

    /// A sequence of `len` items from `item`, each perhaps replaced by [`Wild::field`].
    fn seq(self, item: BoxedStrategy<Value>, len: std::ops::Range<usize>) -> BoxedStrategy<Value> {
        vec(self.field(item), len).prop_map(Value::Sequence).boxed()
    }
}

// ---------------------------------------------------------------------------------------------
// Policy documents, shaped like the real thing.

/// A whole policy file: calendars and policies.
fn policy_file(w: Wild) -> BoxedStrategy<Value> {
    let policies = match w {
        Wild::No => 1..4,
        Wild::Percent(_) => 0..4,
    };
    w.mapping(vec![
        ("calendars", 0.3, w.field(calendars(w))),
        (
            "policies",
            w.required(),
            w.field(w.seq(policy(w), policies)),
        ),
    ])
}

/// `calendars:`: names to lists of dates and of working days.
fn calendars(w: Wild) -> BoxedStrategy<Value> {
    let date = || w.leaf(valid_date(), date_text());
    let day = || {
        w.leaf(
            select(DAY_NAMES).prop_map(String::from).boxed(),
            days_text(),
        )
    };
    let workday = prop_oneof![
        3 => date(),
        1 => w.mapping(vec![("date", w.required(), date()), ("as", 0.7, day())]),
    ]
    .boxed();
    let calendar = w.mapping(vec![
        ("description", 0.3, w.field(string(text()))),
        ("dates", w.required(), w.field(w.seq(date(), 0..4))),
        ("workdays", 0.3, w.field(w.seq(workday, 0..4))),
        ("workday_as", 0.2, day()),
    ]);
    let name = match w {
        Wild::No => select(vec!["x", "y"])
            .prop_map(|s| Value::String(s.into()))
            .boxed(),
        Wild::Percent(_) => pick(CALENDAR_NAMES),
    };
    vec((name, calendar), 0..3)
        .prop_map(|entries| Value::Mapping(entries.into_iter().collect()))
        .boxed()
}

/// One policy.
fn policy(w: Wild) -> BoxedStrategy<Value> {
    let name = match w {
        // Unique enough that most valid files have no duplicate names.
        Wild::No => string("[a-z]{1,8}".boxed()),
        Wild::Percent(_) => w.field(pick(POLICY_NAMES)),
    };
    let priority = match w {
        Wild::No => small_int(),
        Wild::Percent(_) => w.field(number()),
    };
    w.mapping(vec![
        ("name", w.required(), name),
        ("description", 0.3, w.field(string(text()))),
        ("priority", 0.5, priority),
        ("match", w.required(), w.field(matcher(w))),
        ("work_hours", 0.6, w.field(work_hours(w))),
        ("idle", 0.5, w.field(idle(w))),
        ("notify", 0.3, w.field(notify(w))),
        ("spot", 0.3, w.field(spot(w))),
        ("dry_run", 0.2, w.field(boolean())),
    ])
}

/// A tag value in `match.tags` or a snapshot: text, or an unquoted boolean or number.
fn tag_value(w: Wild) -> BoxedStrategy<Value> {
    w.field(
        prop_oneof![
            6 => pick(TAG_VALUES),
            1 => boolean(),
            1 => small_int(),
        ]
        .boxed(),
    )
}

/// `match.tags`: part of an instance profile (so that policies govern generated instances,
/// and several may match one), or random keys and values.
fn tags(w: Wild) -> BoxedStrategy<Value> {
    let from_profile =
        (select(PROFILES), any::<u8>(), any::<bool>()).prop_map(|(profile, keep, star)| {
            let m: Mapping = profile
                .iter()
                .enumerate()
                .filter(|(i, _)| keep & (1 << i) != 0)
                .map(|(_, (k, v))| {
                    let v = if star { "*" } else { v };
                    (Value::String((*k).into()), Value::String(v.into()))
                })
                .collect();
            Value::Mapping(m)
        });
    let random = vec((pick(TAG_KEYS), tag_value(w)), 0..3)
        .prop_map(|entries| Value::Mapping(entries.into_iter().collect()));
    prop_oneof![3 => from_profile, 1 => random].boxed()
}

/// `match:`, sometimes the empty mapping that matches everything.
fn matcher(w: Wild) -> BoxedStrategy<Value> {
    prop_oneof![
        1 => Just(Value::Mapping(Mapping::new())),
        4 => w.mapping(vec![
            ("regions", 0.3, w.field(w.seq(pick(REGIONS), 0..3))),
            ("tags", 0.7, w.field(tags(w))),
            ("instance_types", 0.3, w.field(w.seq(pick(INSTANCE_TYPES), 0..3))),
        ]),
    ]
    .boxed()
}

/// `work_hours:` with periods or with cron events (wild: sometimes both, sometimes neither).
fn work_hours(w: Wild) -> BoxedStrategy<Value> {
    let period = w.mapping(vec![
        (
            "days",
            w.required(),
            prop_oneof![
                4 => w.leaf(valid_days(), days_text()),
                1 => w.seq(pick(&DAY_NAMES[..7]), 1..4),
            ]
            .boxed(),
        ),
        ("start", w.required(), w.leaf(valid_time(), time_text())),
        ("stop", w.required(), w.leaf(valid_time(), time_text())),
    ]);
    let cron = w.mapping(vec![
        ("start", w.required(), w.leaf(valid_cron(), cron_text())),
        ("stop", w.required(), w.leaf(valid_cron(), cron_text())),
    ]);
    let zone = match w {
        Wild::No => select(&ZONES[..ZONES.len() - 3])
            .prop_map(|s| Value::String(s.into()))
            .boxed(),
        Wild::Percent(_) => w.field(pick(ZONES)),
    };
    let other = 1.0 - w.required();
    let with = |periods: f64, cron_: f64| {
        w.mapping(vec![
            ("timezone", w.required(), zone.clone()),
            ("periods", periods, w.field(w.seq(period.clone(), 1..4))),
            ("cron", cron_, w.field(cron.clone())),
            ("skip", 0.3, w.field(w.seq(pick(CALENDAR_NAMES), 0..3))),
            ("workdays", 0.2, w.field(w.seq(pick(CALENDAR_NAMES), 0..2))),
            (
                "outside_hours",
                0.5,
                w.choice(&["stop", "hibernate", "none"]),
            ),
            (
                "start_at_open",
                0.5,
                w.choice(&["stopped-by-ebb", "all", "never"]),
            ),
            ("busy_defers_stop", 0.4, w.field(boolean())),
            ("max_defer", 0.4, w.leaf(valid_duration(), duration_text())),
            ("late_start", 0.3, w.choice(&["keep", "enforce"])),
        ])
    };
    prop_oneof![3 => with(w.required(), other), 1 => with(other, w.required())].boxed()
}

/// A percentage as a number or as text.
fn percent(w: Wild) -> BoxedStrategy<Value> {
    match w {
        Wild::No => prop_oneof![
            (0u32..=100).prop_map(|n| Value::String(format!("{n}%"))),
            (0u32..=100).prop_map(|n| Value::Number(n.into())),
            (0.0f64..=100.0).prop_map(|n| Value::Number(n.into())),
        ]
        .boxed(),
        Wild::Percent(_) => w.field(prop_oneof![string(percent_text()), number()].boxed()),
    }
}

/// `idle:`.
fn idle(w: Wild) -> BoxedStrategy<Value> {
    w.mapping(vec![
        ("gpu_below", w.required(), percent(w)),
        (
            "for",
            w.required(),
            w.leaf(valid_duration(), duration_text()),
        ),
        (
            "grace_after_start",
            0.4,
            w.leaf(valid_duration(), duration_text()),
        ),
        ("missing_metrics", 0.4, w.choice(&["busy", "idle"])),
        ("when", 0.4, w.choice(&["always", "outside_hours"])),
        ("action", 0.4, w.choice(&["stop", "hibernate"])),
    ])
}

/// `notify:`.
fn notify(w: Wild) -> BoxedStrategy<Value> {
    w.mapping(vec![(
        "before",
        w.required(),
        w.leaf(valid_duration(), duration_text()),
    )])
}

/// `spot:`.
fn spot(w: Wild) -> BoxedStrategy<Value> {
    let interruptions = match w {
        Wild::No => (0i64..5).prop_map(|n| Value::Number(n.into())).boxed(),
        Wild::Percent(_) => w.field(number()),
    };
    w.mapping(vec![
        ("min_savings", w.required(), percent(w)),
        (
            "checkpoint_max_age",
            w.required(),
            w.leaf(valid_duration(), duration_text()),
        ),
        (
            "instance_types",
            0.5,
            w.field(w.seq(pick(INSTANCE_TYPES), 0..3)),
        ),
        ("max_interruptions", 0.4, interruptions),
        (
            "keep_original_for",
            0.4,
            w.leaf(valid_duration(), duration_text()),
        ),
        (
            "keep_image_for",
            0.4,
            w.leaf(valid_duration(), duration_text()),
        ),
    ])
}

/// `value` as YAML text. serde_yaml writes every value it can hold.
fn to_yaml(value: &Value) -> String {
    serde_yaml::to_string(value).expect("serde_yaml writes any Value")
}

// ---------------------------------------------------------------------------------------------
// Raw-text edits.

/// One edit of a text; indexes are taken modulo the current number of lines or characters.
#[derive(Debug, Clone)]
enum Edit {
    /// Remove a line.
    DeleteLine(Index),
    /// Repeat a line right after itself.
    DuplicateLine(Index),
    /// Exchange two lines.
    SwapLines(Index, Index),
    /// Add (positive) or remove (negative) leading spaces of a line.
    Indent(Index, i8),
    /// Insert text before a character.
    Insert(Index, String),
    /// Replace a character.
    Replace(Index, char),
    /// Remove up to this many characters from a position.
    Delete(Index, u8),
    /// Keep only the text before a character.
    Truncate(Index),
}

/// Edits, weighted towards those that keep the text close to YAML.
fn edit() -> BoxedStrategy<Edit> {
    let insert = prop_oneof![
        4 => select(TOKENS).prop_map(String::from),
        2 => text(),
        1 => any::<char>().prop_map(String::from),
    ];
    prop_oneof![
        3 => any::<Index>().prop_map(Edit::DeleteLine),
        2 => any::<Index>().prop_map(Edit::DuplicateLine),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Edit::SwapLines(a, b)),
        3 => (any::<Index>(), -6i8..=6).prop_map(|(i, d)| Edit::Indent(i, d)),
        4 => (any::<Index>(), insert).prop_map(|(i, s)| Edit::Insert(i, s)),
        2 => (any::<Index>(), any::<char>()).prop_map(|(i, c)| Edit::Replace(i, c)),
        2 => (any::<Index>(), 1u8..20).prop_map(|(i, n)| Edit::Delete(i, n)),
        1 => any::<Index>().prop_map(Edit::Truncate),
    ]
    .boxed()
}

/// The byte offset of character `index` (modulo the number of characters, end included).
fn char_offset(text: &str, index: &Index) -> usize {
    let mut offsets: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
    offsets.push(text.len());
    offsets[index.index(offsets.len())]
}

/// `text` with `edit` applied.
fn apply(text: &str, edit: &Edit) -> String {
    let mut lines: Vec<String> = text.split_inclusive('\n').map(String::from).collect();
    let line = |i: &Index, lines: &[String]| i.index(lines.len());
    match edit {
        Edit::DeleteLine(i) if !lines.is_empty() => {
            lines.remove(line(i, &lines));
        }
        Edit::DuplicateLine(i) if !lines.is_empty() => {
            let n = line(i, &lines);
            lines.insert(n, lines[n].clone());
        }
        Edit::SwapLines(a, b) if !lines.is_empty() => {
            let (a, b) = (line(a, &lines), line(b, &lines));
            lines.swap(a, b);
        }
        Edit::Indent(i, delta) if !lines.is_empty() => {
            let n = line(i, &lines);
            let l = &mut lines[n];
            if *delta >= 0 {
                l.insert_str(0, &" ".repeat(delta.unsigned_abs().into()));
            } else {
                let spaces = l.len() - l.trim_start_matches(' ').len();
                l.drain(..spaces.min(delta.unsigned_abs().into()));
            }
        }
        Edit::Insert(i, s) => {
            let mut out = text.to_string();
            out.insert_str(char_offset(text, i), s);
            return out;
        }
        Edit::Replace(i, c) => {
            let at = char_offset(text, i);
            let mut out = text.to_string();
            if let Some(old) = out[at..].chars().next() {
                out.replace_range(at..at + old.len_utf8(), &c.to_string());
            }
            return out;
        }
        Edit::Delete(i, n) => {
            let at = char_offset(text, i);
            let end = text[at..]
                .char_indices()
                .nth((*n).into())
                .map_or(text.len(), |(j, _)| at + j);
            let mut out = text.to_string();
            out.replace_range(at..end, "");
            return out;
        }
        Edit::Truncate(i) => return text[..char_offset(text, i)].to_string(),
        _ => {}
    }
    lines.concat()
}

/// `text` with every edit applied in turn.
fn apply_all(text: &str, edits: &[Edit]) -> String {
    edits.iter().fold(text.to_string(), |t, e| apply(&t, e))
}

// ---------------------------------------------------------------------------------------------
// Policy texts as written to a directory.

/// The project's example policy files, `(file name, text)`, in name order.
fn example_files() -> &'static [(String, String)] {
    static FILES: OnceLock<Vec<(String, String)>> = OnceLock::new();
    FILES.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
        let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
            .expect("policies/ is readable")
            .map(|e| e.expect("policies/ entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .map(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                (
                    name,
                    std::fs::read_to_string(&p).expect("example policy is text"),
                )
            })
            .collect();
        files.sort();
        assert!(
            !files.is_empty(),
            "no example policies in {}",
            dir.display()
        );
        files
    })
}

/// The example policies, loaded once.
fn example_policies() -> &'static PolicySet {
    static SET: OnceLock<PolicySet> = OnceLock::new();
    SET.get_or_init(|| {
        policy::load(&[Path::new(env!("CARGO_MANIFEST_DIR")).join("policies")])
            .expect("the example policies are valid")
    })
}

/// One generated policy file's text: a shaped document (valid, close to valid, or wild), a
/// random value, or a shaped document with raw edits on top.
fn policy_text() -> BoxedStrategy<String> {
    prop_oneof![
        4 => policy_file(Wild::No).prop_map(|v| to_yaml(&v)),
        2 => policy_file(Wild::Percent(2)).prop_map(|v| to_yaml(&v)),
        2 => policy_file(Wild::Percent(15)).prop_map(|v| to_yaml(&v)),
        1 => value().prop_map(|v| to_yaml(&v)),
        2 => (policy_file(Wild::Percent(2)), vec(edit(), 1..4))
            .prop_map(|(v, e)| apply_all(&to_yaml(&v), &e)),
    ]
    .boxed()
}

/// One generated file (sometimes two or three), and whether the real `calendars.yaml` sits
/// next to them.
fn generated_dir() -> BoxedStrategy<Vec<(String, String)>> {
    let count = prop_oneof![4 => Just(1), 1 => 2usize..=3];
    (
        count.prop_flat_map(|n| vec(policy_text(), n)),
        any::<bool>(),
    )
        .prop_map(|(texts, with_calendars)| {
            let mut files: Vec<(String, String)> = texts
                .into_iter()
                .enumerate()
                .map(|(i, t)| (format!("p{i}.yaml"), t))
                .collect();
            if with_calendars {
                if let Some(c) = example_files().iter().find(|(n, _)| n == "calendars.yaml") {
                    files.push(c.clone());
                }
            }
            files
        })
        .boxed()
}

/// Every example file, each edited with some chance (and sometimes none: the baseline).
fn mutated_examples() -> BoxedStrategy<Vec<(String, String)>> {
    let n = example_files().len();
    vec(proptest::option::weighted(0.35, vec(edit(), 1..5)), n)
        .prop_map(|edits| {
            example_files()
                .iter()
                .zip(edits)
                .map(|((name, text), e)| {
                    (
                        name.clone(),
                        e.map_or(text.clone(), |e| apply_all(text, &e)),
                    )
                })
                .collect()
        })
        .boxed()
}

/// Writes `files` to a fresh directory.
fn write_dir(files: &[(String, String)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).expect("write test file");
    }
    dir
}

// ---------------------------------------------------------------------------------------------
// Fleets.

/// A time relative to the decision instant, or a fixed instant anywhere in years 0000–9999.
#[derive(Debug, Clone)]
enum When {
    /// This many seconds before the decision (negative: after).
    Ago(i64),
    /// This instant.
    At(DateTime<Utc>),
}

impl When {
    /// The instant, for a decision at `now`.
    fn at(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        match self {
            When::Ago(s) => now.checked_sub_signed(Duration::seconds(*s)).unwrap_or(now),
            When::At(t) => *t,
        }
    }
}

/// Any whole second of the years 0000 to 9999, the range RFC 3339 can write.
fn far_instant() -> BoxedStrategy<DateTime<Utc>> {
    (
        0i32..=9999,
        1u32..=12,
        1u32..=28,
        0u32..24,
        0u32..60,
        0u32..60,
    )
        .prop_map(|(y, mo, d, h, mi, s)| Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap())
        .boxed()
}

/// Mostly the last day (and a little of the future), sometimes anywhere.
fn when() -> BoxedStrategy<When> {
    prop_oneof![
        6 => (-3_600i64..100_000).prop_map(When::Ago),
        1 => far_instant().prop_map(When::At),
    ]
    .boxed()
}

/// `t`, kept within the years RFC 3339 can write (0000–9999), the ones `--at` accepts.
fn clamp(t: DateTime<Utc>) -> DateTime<Utc> {
    let first = Utc.with_ymd_and_hms(0, 1, 1, 0, 0, 0).unwrap();
    let last = Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59).unwrap();
    t.clamp(first, last)
}

/// An instant within two days of one of `anchors`.
fn near(anchors: &'static [&'static str]) -> BoxedStrategy<DateTime<Utc>> {
    (select(anchors), -172_800i64..=172_800)
        .prop_map(|(anchor, secs)| {
            let t: DateTime<Utc> = anchor.parse().expect("anchor is RFC 3339");
            clamp(t.checked_add_signed(Duration::seconds(secs)).unwrap_or(t))
        })
        .boxed()
}

/// A decision instant: near an anchor, or anywhere.
fn instant() -> BoxedStrategy<DateTime<Utc>> {
    prop_oneof![5 => near(ANCHORS), 1 => far_instant()].boxed()
}

/// A decision instant for a snapshot: mostly near the day its times are on.
fn snapshot_instant() -> BoxedStrategy<DateTime<Utc>> {
    prop_oneof![4 => near(&["2026-11-30T12:10:00Z"]), 1 => instant()].boxed()
}

/// A tag value on an instance: from the shared pool, a time, or any text.
#[derive(Debug, Clone)]
enum TagValue {
    /// This text.
    Text(String),
    /// This time, as RFC 3339 (for `ebb:keep-until` and `ebb:checkpoint-at`).
    Time(When),
}

/// A generated instance; times are relative to the decision instant.
#[derive(Debug, Clone)]
struct InstanceSpec {
    id: &'static str,
    region: &'static str,
    instance_type: &'static str,
    state: InstanceState,
    state_since: Option<When>,
    lifecycle: Lifecycle,
    launched_at: Option<When>,
    tags: Vec<(&'static str, TagValue)>,
    gpu_util: Vec<(When, f64)>,
    /// stopped_by_ebb_at, started_by_ebb_at, notified_at.
    facts: [Option<When>; 3],
}

/// A generated fleet with prior facts and overrides.
#[derive(Debug, Clone)]
struct FleetSpec {
    instances: Vec<InstanceSpec>,
    prices: Prices,
    /// (instance id, until, reason).
    overrides: Vec<(&'static str, When, String)>,
}

/// GPU utilisation and prices: ordinary numbers, and the odd ones a snapshot can carry.
fn odd_f64(range: std::ops::Range<f64>) -> BoxedStrategy<f64> {
    prop_oneof![
        8 => range,
        1 => select(vec![0.0, -1.0, 100.0, 1e308, f64::NAN, f64::INFINITY, f64::NEG_INFINITY]),
    ]
    .boxed()
}

/// One instance.
fn instance_spec() -> BoxedStrategy<InstanceSpec> {
    let state = prop_oneof![
        5 => Just(InstanceState::Running),
        3 => Just(InstanceState::Stopped),
        1 => select(vec![
            InstanceState::Pending,
            InstanceState::Stopping,
            InstanceState::ShuttingDown,
            InstanceState::Terminated,
        ]),
    ];
    let lifecycle = select(vec![Lifecycle::OnDemand, Lifecycle::Spot]);
    let tag_value = prop_oneof![
        4 => select(TAG_VALUES).prop_map(|s| TagValue::Text(s.into())),
        3 => when().prop_map(TagValue::Time),
        1 => text().prop_map(TagValue::Text),
    ];
    let opt_when = || proptest::option::of(when());
    (
        (
            select(INSTANCE_IDS),
            select(REGIONS),
            instance_type(),
            state,
            lifecycle,
        ),
        (opt_when(), opt_when()),
        (select(PROFILES), vec((select(TAG_KEYS), tag_value), 0..4)).prop_map(
            |(profile, extra)| {
                let profile = profile
                    .iter()
                    .map(|(k, v)| (*k, TagValue::Text(v.to_string())));
                profile.chain(extra).collect::<Vec<_>>()
            },
        ),
        gpu_util(),
        [opt_when(), opt_when(), opt_when()],
    )
        .prop_map(
            |(
                (id, region, instance_type, state, lifecycle),
                (state_since, launched_at),
                tags,
                gpu_util,
                facts,
            )| {
                InstanceSpec {
                    id,
                    region,
                    instance_type,
                    state,
                    state_since,
                    lifecycle,
                    launched_at,
                    tags,
                    gpu_util,
                    facts,
                }
            },
        )
        .boxed()
}

/// GPU samples: scattered over the last day, or a regular series (one reading every few
/// minutes, at one level) that can cover an idle window.
fn gpu_util() -> BoxedStrategy<Vec<(When, f64)>> {
    prop_oneof![
        1 => vec((when(), odd_f64(0.0..100.0)), 0..16),
        2 => (1i64..=12, 0usize..40, -600i64..1200, odd_f64(0.0..12.0)).prop_map(
            |(step, count, end, percent)| {
                (0..count)
                    .map(|i| (When::Ago(end + step * 60 * i as i64), percent))
                    .collect()
            },
        ),
    ]
    .boxed()
}

/// A fleet of up to five instances.
fn fleet_spec() -> BoxedStrategy<FleetSpec> {
    let price = (
        proptest::option::of(odd_f64(0.0..50.0)),
        proptest::option::of(odd_f64(0.0..50.0)),
    )
        .prop_map(|(on_demand, spot)| Price { on_demand, spot });
    let by_type = proptest::collection::btree_map(
        select(&INSTANCE_TYPES[..5]).prop_map(String::from),
        price,
        0..5,
    );
    let prices = proptest::collection::btree_map(
        select(&REGIONS[..3]).prop_map(String::from),
        by_type,
        0..3,
    );
    (
        vec(instance_spec(), 1..6),
        prices,
        vec((select(INSTANCE_IDS), when(), text()), 0..3),
    )
        .prop_map(|(instances, prices, overrides)| FleetSpec {
            instances,
            prices,
            overrides,
        })
        .boxed()
}

impl FleetSpec {
    /// The fleet and prior facts for a decision at `now`.
    fn build(&self, now: DateTime<Utc>) -> (Fleet, Prior) {
        let at = |w: &Option<When>| w.as_ref().map(|w| w.at(now));
        let mut facts = HashMap::new();
        let instances = self
            .instances
            .iter()
            .map(|s| {
                let [stopped, started, notified] = &s.facts;
                facts.insert(
                    s.id.to_string(),
                    InstanceFacts {
                        stopped_by_ebb_at: at(stopped),
                        started_by_ebb_at: at(started),
                        notified_at: at(notified),
                        started_by_person_at: None,
                        busy_deferred_since: None,
                    },
                );
                let tags: Tags = s
                    .tags
                    .iter()
                    .map(|(k, v)| {
                        let v = match v {
                            TagValue::Text(t) => t.clone(),
                            TagValue::Time(w) => w.at(now).to_rfc3339(),
                        };
                        (k.to_string(), v)
                    })
                    .collect();
                // The fleet's contract: samples oldest first.
                let mut gpu_util: Vec<Sample> = s
                    .gpu_util
                    .iter()
                    .map(|(w, percent)| Sample::new(w.at(now), *percent))
                    .collect();
                gpu_util.sort_by_key(|s| s.at);
                Instance {
                    id: s.id.to_string(),
                    region: s.region.to_string(),
                    instance_type: s.instance_type.to_string(),
                    state: s.state,
                    state_since: at(&s.state_since),
                    lifecycle: s.lifecycle,
                    launched_at: at(&s.launched_at),
                    tags,
                    gpus: None,
                    gpu_util,
                    via_role: None,
                    billing: Billing::ec2(s.state == InstanceState::Stopped),
                    private_ip: None,
                }
            })
            .collect();
        let overrides = self
            .overrides
            .iter()
            .map(|(id, until, reason)| Override {
                instance: id.to_string(),
                until: until.at(now),
                reason: reason.clone(),
                by: String::new(),
            })
            .collect();
        (
            Fleet {
                instances,
                prices: self.prices.clone(),
                ..Fleet::default()
            },
            Prior::new(facts, overrides),
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Fleet snapshots as text.

/// Tags that make an instance match the example policies (or none of them), as a mapping.
fn profile_tags(w: Wild) -> BoxedStrategy<Value> {
    (select(PROFILES), vec((pick(TAG_KEYS), tag_value(w)), 0..3))
        .prop_map(|(profile, extra)| {
            let mut m: Mapping = profile
                .iter()
                .map(|(k, v)| (Value::String((*k).into()), Value::String((*v).into())))
                .collect();
            m.extend(extra);
            Value::Mapping(m)
        })
        .boxed()
}

/// An instance type: mostly a real one, sometimes a glob or empty.
fn instance_type() -> BoxedStrategy<&'static str> {
    prop_oneof![4 => select(&INSTANCE_TYPES[..5]), 1 => select(INSTANCE_TYPES)].boxed()
}

/// A snapshot document shaped like `tests/fixtures/fleet.yaml`; with `extreme`, half of its
/// times are beyond the four-digit years.
fn snapshot_doc(w: Wild, extreme: bool) -> BoxedStrategy<Value> {
    let time = || {
        if extreme {
            string(prop_oneof![valid_instant(), extreme_instant()].boxed())
        } else {
            w.leaf(valid_instant(), instant_text())
        }
    };
    let percent = match w {
        Wild::No => (0.0f64..100.0)
            .prop_map(|n| Value::Number(n.into()))
            .boxed(),
        Wild::Percent(_) => w.field(number()),
    };
    let sample = (time(), percent).prop_map(|(t, p)| Value::Sequence(vec![t, p]));
    let sample = match w {
        Wild::No => sample.boxed(),
        Wild::Percent(_) => prop_oneof![
            6 => sample,
            1 => w.seq(prop_oneof![4 => time(), 1 => scalar()].boxed(), 0..4),
        ]
        .boxed(),
    };
    let instance = w.mapping(vec![
        ("id", w.required(), w.field(pick(INSTANCE_IDS))),
        ("region", w.required(), w.field(pick(REGIONS))),
        (
            "type",
            w.required(),
            w.field(
                instance_type()
                    .prop_map(|t| Value::String(t.into()))
                    .boxed(),
            ),
        ),
        (
            "state",
            w.required(),
            w.choice(&[
                "running",
                "stopped",
                "pending",
                "stopping",
                "shutting-down",
                "terminated",
            ]),
        ),
        ("state_since", 0.3, time()),
        ("lifecycle", 0.3, w.choice(&["on-demand", "spot"])),
        ("launched_at", 0.5, time()),
        ("tags", 0.9, w.field(profile_tags(w))),
        ("gpu_util", 0.6, w.field(w.seq(sample, 0..8))),
        (
            "gpu_read_error",
            0.2,
            w.choice(&["GetMetricData: throttled", "AccessDenied"]),
        ),
        ("stopped_by_ebb_at", 0.2, time()),
        ("started_by_ebb_at", 0.2, time()),
        ("notified_at", 0.2, time()),
        ("started_by_person_at", 0.2, time()),
    ]);
    let dollars = || match w {
        Wild::No => (0.0f64..50.0).prop_map(|n| Value::Number(n.into())).boxed(),
        Wild::Percent(_) => w.field(number()),
    };
    let price = w.mapping(vec![
        ("on_demand", 0.8, dollars()),
        ("spot", 0.8, dollars()),
    ]);
    let prices = vec(
        (
            pick(REGIONS),
            vec((pick(INSTANCE_TYPES), price), 0..6)
                .prop_map(|e| Value::Mapping(e.into_iter().collect())),
        ),
        0..4,
    )
    .prop_map(|e| Value::Mapping(e.into_iter().collect()))
    .boxed();
    let override_ = w.mapping(vec![
        ("instance", w.required(), w.field(pick(INSTANCE_IDS))),
        ("until", w.required(), time()),
        ("reason", 0.5, w.field(string(text()))),
        ("by", 0.5, w.field(string(text()))),
    ]);
    w.mapping(vec![
        ("instances", w.required(), w.field(w.seq(instance, 0..6))),
        ("prices", 0.5, w.field(prices)),
        ("overrides", 0.3, w.field(w.seq(override_, 0..3))),
    ])
}

/// `value` as JSON, or as YAML when JSON cannot hold it (a key that is not text).
fn to_json_or_yaml(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| to_yaml(value))
}

/// A snapshot file `(name, text)`: generated or the fixture edited, as YAML or JSON.
fn snapshot_file() -> BoxedStrategy<(String, String)> {
    let fixture = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fleet.yaml"),
    )
    .expect("tests/fixtures/fleet.yaml is readable");
    let fixture_value: Value = serde_yaml::from_str(&fixture).expect("fixture is YAML");
    let fixture_json = to_json_or_yaml(&fixture_value);
    let doc = prop_oneof![
        2 => snapshot_doc(Wild::No, false),
        1 => snapshot_doc(Wild::Percent(2), false),
        1 => snapshot_doc(Wild::Percent(15), false),
    ];
    prop_oneof![
        3 => doc.clone().prop_map(|v| ("fleet.yaml".to_string(), to_yaml(&v))),
        2 => doc.prop_map(|v| ("fleet.json".to_string(), to_json_or_yaml(&v))),
        2 => vec(edit(), 1..6)
            .prop_map(move |e| ("fleet.yml".to_string(), apply_all(&fixture, &e))),
        1 => vec(edit(), 1..6)
            .prop_map(move |e| ("fleet.json".to_string(), apply_all(&fixture_json, &e))),
        1 => value().prop_map(|v| ("fleet.yaml".to_string(), to_yaml(&v))),
    ]
    .boxed()
}

// ---------------------------------------------------------------------------------------------
// Checks.

/// The lines of `text` as YAML (libyaml) counts them: a line ends at LF, CRLF, a lone CR, NEL,
/// LS or PS.
fn yaml_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(['\n', '\r', '\u{85}', '\u{2028}', '\u{2029}']) {
        lines.push(&rest[..at]);
        let brk = if rest[at..].starts_with("\r\n") {
            2
        } else {
            rest[at..].chars().next().map_or(1, char::len_utf8)
        };
        rest = &rest[at + brk..];
    }
    if !rest.is_empty() {
        lines.push(rest);
    }
    lines
}

/// Checks that `p` points into `text`: line and column from 1, the line at most one past the
/// last, the column at most one past the end of its line.
fn check_position(text: &str, p: Position) -> Result<(), TestCaseError> {
    let lines = yaml_lines(text);
    prop_assert!(
        p.line >= 1 && p.column >= 1,
        "position {p:?} is not counted from 1"
    );
    prop_assert!(
        p.line <= lines.len() + 1,
        "line {} of a {}-line text",
        p.line,
        lines.len()
    );
    let width = lines.get(p.line - 1).map_or(0, |l| l.chars().count());
    prop_assert!(
        p.column <= width + 1,
        "column {} of line {} that has {width} characters",
        p.column,
        p.line
    );
    Ok(())
}

/// Loads the policies in `files` (as `ebb validate` does) and checks the result: every problem
/// has a message and a position inside its file; every loaded policy points at a line of it.
fn check_load(files: &[(String, String)]) -> Result<Option<PolicySet>, TestCaseError> {
    let dir = write_dir(files);
    let text_of = |file: &Path| {
        let name = file.file_name().map(|n| n.to_string_lossy().into_owned());
        files
            .iter()
            .find(|(n, _)| Some(n) == name.as_ref())
            .map(|(_, t)| t.as_str())
    };
    match policy::load(&[dir.path().to_path_buf()]) {
        Ok(set) => {
            prop_assert_eq!(set.version.content_hash.len(), 64);
            let _ = set.version.to_string();
            for p in &set.policies {
                let text = text_of(&p.source.file);
                prop_assert!(
                    text.is_some(),
                    "policy {} from unknown file {}",
                    p.name,
                    p.source
                );
                let lines = yaml_lines(text.unwrap_or_default()).len();
                prop_assert!(
                    (1..=lines).contains(&p.source.line),
                    "policy {} is at {}, outside its {lines}-line file",
                    p.name,
                    p.source
                );
            }
            Ok(Some(set))
        }
        Err(LoadError::Invalid { problems }) => {
            prop_assert!(!problems.is_empty());
            for p in &problems {
                let shown = p.to_string();
                prop_assert!(!p.message.trim().is_empty(), "empty message: {shown}");
                // `ebb validate` prints one problem per line.
                prop_assert!(!shown.contains(char::is_control), "not one line: {shown:?}");
                let text = text_of(&p.file);
                prop_assert!(text.is_some(), "problem in unknown file: {shown}");
                if let (Some(text), Some(pos)) = (text, p.position) {
                    check_position(text, pos)
                        .map_err(|e| TestCaseError::fail(format!("{e} (problem: {shown})")))?;
                }
            }
            Ok(None)
        }
        // Every generated file is UTF-8 and named *.yaml, so reading cannot fail.
        Err(err) => Err(TestCaseError::fail(format!("unexpected load error: {err}"))),
    }
}

/// Runs what `ebb plan` and `ebb explain` run at `now` and checks that `explain` agrees with
/// `decide`.
fn check_decide(
    set: &PolicySet,
    fleet: &Fleet,
    prior: &Prior,
    now: DateTime<Utc>,
) -> Result<(), TestCaseError> {
    let decisions = engine::decide(now, set, fleet, prior);
    prop_assert_eq!(decisions.len(), fleet.instances.len());
    for d in &decisions {
        prop_assert!(!d.reason.is_empty(), "empty reason: {d:?}");
    }
    let _ = ebb::output::plan_json(&decisions, &fleet.instances);
    let _ = ebb::output::plan_table(&decisions, &fleet.instances);
    if let Some(first) = fleet.instances.first() {
        let explanation = engine::explain(now, set, fleet, prior, &first.id);
        prop_assert!(explanation.is_some(), "no explanation for {}", first.id);
        let explanation = explanation.unwrap();
        let _ = explanation.to_string();
        prop_assert_eq!(&explanation.decision, &decisions[0]);
    }
    prop_assert!(engine::explain(now, set, fleet, prior, "i-not-in-the-fleet").is_none());
    Ok(())
}

/// Loads `files`, and when they load, decides over `fleet` at every instant.
fn check_policies(
    files: &[(String, String)],
    fleet: &FleetSpec,
    instants: &[DateTime<Utc>],
) -> Result<(), TestCaseError> {
    if let Some(set) = check_load(files)? {
        for &now in instants {
            let (fleet, prior) = fleet.build(now);
            check_decide(&set, &fleet, &prior, now)?;
        }
    }
    Ok(())
}

/// Loads the snapshot `text` as file `name`, as `ebb plan` does; when it loads, plans and
/// explains it under the example policies at every instant.
fn check_snapshot(name: &str, text: &str, instants: &[DateTime<Utc>]) -> Result<(), TestCaseError> {
    let dir = write_dir(&[(name.to_string(), text.to_string())]);
    match snapshot::load_snapshot(&dir.path().join(name)) {
        Ok((fleet, prior)) => {
            for &now in instants {
                check_decide(example_policies(), &fleet, &prior, now)?;
            }
        }
        Err(err) => prop_assert!(!err.to_string().is_empty()),
    }
    Ok(())
}

/// The number of cases of each property: `PROPTEST_CASES` when set, else a few dozen.
fn config() -> ProptestConfig {
    let default = ProptestConfig::default();
    let cases = if std::env::var_os("PROPTEST_CASES").is_some() {
        default.cases
    } else {
        48
    };
    ProptestConfig {
        cases,
        // Next to this file: tests/offline/fuzz_policy.proptest-regressions.
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..default
    }
}

proptest! {
    #![proptest_config(config())]

    /// Generated policy files never make loading, deciding or explaining panic.
    #[test]
    fn generated_policies_never_panic(
        files in generated_dir(),
        fleet in fleet_spec(),
        instants in vec(instant(), 1..4),
    ) {
        check_policies(&files, &fleet, &instants)?;
    }

    /// The example policies with raw-text edits never make loading, deciding or explaining panic.
    #[test]
    fn mutated_examples_never_panic(
        files in mutated_examples(),
        fleet in fleet_spec(),
        instants in vec(instant(), 1..3),
    ) {
        check_policies(&files, &fleet, &instants)?;
    }

    /// Fleet snapshots never make loading panic; one that loads is planned and explained under
    /// the example policies as `ebb plan` and `ebb explain` would.
    #[test]
    fn snapshots_never_panic(
        (name, text) in snapshot_file(),
        instants in vec(snapshot_instant(), 1..3),
    ) {
        check_snapshot(&name, &text, &instants)?;
    }

    /// Snapshot times beyond year 9999, which chrono reads, never make `ebb plan` or
    /// `ebb explain` panic.
    #[test]
    fn snapshot_times_beyond_year_9999_never_panic(
        doc in snapshot_doc(Wild::No, true),
        instants in vec(snapshot_instant(), 1..3),
    ) {
        check_snapshot("fleet.yaml", &to_yaml(&doc), &instants)?;
    }
}

/// The example policies load as they are, so the mutation property starts from valid files.
#[test]
fn examples_load() {
    let files = example_files();
    let dir = write_dir(files);
    policy::load(&[dir.path().to_path_buf()]).expect("the example policies load");
}

/// `ebb validate` prints one line per problem (docs/commands.md), so a message must not carry the line
/// breaks or control characters of the text it quotes. Found by `generated_policies_never_panic`
/// (fixed in 63f2e9f).
#[test]
fn problem_messages_stay_on_one_line() {
    let texts = [
        // A value that is not one of the choices.
        "policies:\n- name: a\n  match: {}\n  idle: {gpu_below: 5, for: 1h, action: \"st\\nop\"}\n",
        "policies:\n- name: a\n  match: {}\n  idle: {gpu_below: 5, for: 45m, action: \"\\0\"}\n",
        // An unknown key.
        "policies:\n- name: a\n  match: {}\n  \"na\\r\\nme\": x\n",
        // An unknown time zone, with a terminal escape.
        concat!(
            "policies:\n- name: a\n  match: {}\n  work_hours:\n    timezone: \"\\e[31mUTC\"\n",
            "    periods: [{days: mon, start: \"08:00\", stop: \"09:00\"}]\n",
        ),
    ];
    for text in texts {
        let dir = write_dir(&[("p.yaml".to_string(), text.to_string())]);
        let Err(LoadError::Invalid { problems }) = policy::load(&[dir.path().to_path_buf()]) else {
            panic!("expected problems in {text:?}");
        };
        for p in problems {
            let line = p.to_string();
            assert!(!line.contains(char::is_control), "not one line: {line:?}");
        }
    }
}

/// Plans and explains every instance of the snapshot `fleet` under the policy file `policy` at
/// `at`, as `ebb plan` and `ebb explain` do; returns the snapshot's error when it is refused.
fn plan_and_explain(policy: &str, fleet: &str, at: &str) -> Result<(), String> {
    let policies = write_dir(&[("p.yaml".to_string(), policy.to_string())]);
    let set = policy::load(&[policies.path().to_path_buf()]).expect("the policy is valid");
    let snapshot = write_dir(&[("fleet.yaml".to_string(), fleet.to_string())]);
    let (fleet, prior) =
        snapshot::load_snapshot(&snapshot.path().join("fleet.yaml")).map_err(|e| e.to_string())?;
    let now = at.parse().expect("RFC 3339");
    engine::decide(now, &set, &fleet, &prior);
    for i in &fleet.instances {
        let _ = engine::explain(now, &set, &fleet, &prior, &i.id).map(|e| e.to_string());
    }
    Ok(())
}

/// The crashes below were fixed by reading snapshot times strictly (four-digit years): such a
/// snapshot is now refused with a message, before any decision.
fn assert_refused(result: Result<(), String>) {
    let err = result.expect_err("a time beyond year 9999 is refused");
    assert!(err.contains("is not an RFC 3339 time"), "{err}");
}

/// Crash found by `snapshot_times_beyond_year_9999_never_panic`: `launched_at + grace_after_start`
/// overflows (`DateTime + TimeDelta overflowed`, crates/ebb-core/src/engine/rules.rs, the idle rule).
#[test]
fn launch_time_at_the_end_of_time() {
    assert_refused(plan_and_explain(
        "policies: [{name: i, match: {}, idle: {gpu_below: 5, for: 1h, grace_after_start: 20m}}]\n",
        "instances: [{id: i-1, region: r, type: t, state: running,\n  \
         launched_at: \"+262142-12-31T23:59:59Z\"}]\n",
        "2026-11-30T12:10:00Z",
    ));
}

/// Crash found by `snapshot_times_beyond_year_9999_never_panic`: `notified_at + before`
/// overflows (`DateTime + TimeDelta overflowed`, crates/ebb-core/src/engine/rules.rs, `with_notice`).
#[test]
fn notice_time_at_the_end_of_time() {
    assert_refused(plan_and_explain(
        concat!(
            "policies: [{name: n, match: {}, notify: {before: 15m}, work_hours: {timezone: UTC,\n",
            "  periods: [{days: mon-sun, start: \"08:00\", stop: \"09:00\"}]}}]\n",
        ),
        "instances: [{id: i-1, region: r, type: t, state: running,\n  \
         notified_at: \"+262142-12-31T23:59:59Z\"}]\n",
        "2026-11-30T12:10:00Z",
    ));
}

/// Crash found by `snapshot_times_beyond_year_9999_never_panic`: a time near the end (start) of
/// chrono's range shown in a zone east (west) of UTC is out of range (`Local time out of range
/// for NaiveDateTime`, chrono's `naive_local` via `local` in crates/ebb-core/src/engine/rules.rs): an ebb stop
/// time, or the end of an override.
#[test]
fn times_at_the_ends_of_time_shown_in_a_zone() {
    let policy = |zone: &str| {
        format!(
            "policies: [{{name: h, match: {{}}, work_hours: {{timezone: {zone},\n  \
             periods: [{{days: mon-sun, start: \"08:00\", stop: \"20:00\"}}]}}}}]\n"
        )
    };
    let stopped = |at: &str| {
        format!(
            "instances: [{{id: i-1, region: r, type: t, state: stopped,\n  \
             stopped_by_ebb_at: \"{at}\"}}]\n"
        )
    };
    let overridden = |until: &str| {
        format!(
            "instances: [{{id: i-1, region: r, type: t, state: running}}]\n\
             overrides: [{{instance: i-1, until: \"{until}\"}}]\n"
        )
    };
    for (zone, fleet, at) in [
        (
            "Asia/Shanghai",
            stopped("+262142-12-31T23:59:59Z"),
            "2026-11-30T04:00:00Z",
        ),
        (
            "America/New_York",
            stopped("-262143-01-01T00:00:00Z"),
            "2026-11-30T16:00:00Z",
        ),
        (
            "Europe/Berlin",
            overridden("+262142-12-31T12:00:00-11:00"),
            "2026-11-30T22:00:00Z",
        ),
    ] {
        assert_refused(plan_and_explain(&policy(zone), &fleet, at));
    }
}
