//! The keys each mapping of a policy file may have; the JSON Schema is built from the same lists.

pub const FILE: &[&str] = &["calendars", "policies", "budgets"];
pub const BUDGET: &[&str] = &[
    "name",
    "description",
    "match",
    "per",
    "amount",
    "currency",
    "period",
    "timezone",
    "notify_at",
    "notify",
    "forecast",
    "at_limit",
    "max_defer",
    "notify_before",
];
pub const CALENDAR: &[&str] = &[
    "description",
    "dates",
    "workdays",
    "workday_as",
    "file",
    "url",
    "format",
];
pub const WORKDAY: &[&str] = &["date", "as"];
pub const POLICY: &[&str] = &[
    "name",
    "description",
    "priority",
    "match",
    "work_hours",
    "idle",
    "notify",
    "spot",
    "start",
    "stop",
    "runtime",
    "group",
    "stopped",
    "dry_run",
];
pub const MATCH: &[&str] = &["regions", "tags", "instance_types"];
pub const WORK_HOURS: &[&str] = &[
    "timezone",
    "periods",
    "cron",
    "skip",
    "workdays",
    "outside_hours",
    "start_at_open",
    "busy_defers_stop",
    "max_defer",
    "start_ahead",
    "late_start",
];
pub const LATE_START: &[&str] = &["idle_for"];
pub const PERIOD: &[&str] = &["days", "start", "stop"];
pub const CRON: &[&str] = &["start", "stop"];
pub const IDLE: &[&str] = &[
    "gpu_below",
    "gpu_memory_below",
    "for",
    "grace_after_start",
    "missing_metrics",
    "when",
    "action",
    "min_gap",
    "capacity_memory",
    "activity",
];
/// The kinds of `idle.activity` signals, each a one-key mapping.
pub const SIGNAL: &[&str] = &["heartbeat", "jupyter", "prometheus", "cloudwatch"];
pub const HEARTBEAT: &[&str] = &["name", "max_age"];
pub const JUPYTER: &[&str] = &["name", "url"];
pub const PROMETHEUS_SIGNAL: &[&str] = &["name", "query", "active_above"];
pub const CLOUDWATCH_SIGNAL: &[&str] =
    &["name", "namespace", "metric", "dimensions", "active_above"];
pub const NOTIFY: &[&str] = &["before"];
pub const START: &[&str] = &["fallback_types", "restore_type", "reserve_capacity"];
pub const STOP: &[&str] = &["allow_charging_stop", "in_reservation"];
pub const RUNTIME: &[&str] = &["max", "notify_before", "max_busy_without_checkpoint"];
pub const GROUP: &[&str] = &["protect_members"];
pub const STOPPED: &[&str] = &["reclaim_after", "reclaim", "keep_image_for"];
pub const SPOT: &[&str] = &[
    "min_savings",
    "checkpoint_max_age",
    "instance_types",
    "max_interruptions",
    "keep_original_for",
    "keep_image_for",
    "avoid_reclaimed_for",
    "placement_scores",
    "back_to_spot_after",
];
