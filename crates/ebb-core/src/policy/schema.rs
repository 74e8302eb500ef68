//! The JSON Schema of policy files, for editors (`# yaml-language-server: $schema=...`) and
//! `ebb schema`. It is built from the same key lists the checker accepts, so the two cannot
//! drift; the checker remains the authority (time zones, cron fields and calendars are checked
//! only there).

use super::check::keys;
use serde_json::{json, Map, Value};

/// An object schema whose properties are exactly `keys`, described by `props`.
fn object(keys: &[&str], required: &[&str], props: &[(&str, Value)]) -> Value {
    let mut properties = Map::new();
    for key in keys {
        let schema = props
            .iter()
            .find(|(k, _)| k == key)
            .map_or_else(|| json!({}), |(_, v)| v.clone());
        properties.insert((*key).to_string(), schema);
    }
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": required,
        "properties": properties,
    })
}

fn duration(description: &str) -> Value {
    json!({
        "type": "string",
        "pattern": "^\\s*[0-9]+\\s*[a-zA-Z]+(\\s*[0-9]+\\s*[a-zA-Z]+)*\\s*$",
        "description": description,
        "examples": ["45m", "4h", "1h30m"],
    })
}

fn percent(description: &str) -> Value {
    json!({
        "description": description,
        "oneOf": [
            {"type": "number", "minimum": 0, "maximum": 100},
            {"type": "string", "pattern": "^\\s*[0-9]+(\\.[0-9]+)?\\s*%$"}
        ],
    })
}

fn choice(options: &[&str], default: &str, description: &str) -> Value {
    json!({"enum": options, "default": default, "description": description})
}

const TIME: &str = "^([01][0-9]|2[0-3]):[0-5][0-9]$|^24:00$";

/// The schema as a JSON value, keys sorted at every level.
pub fn schema() -> Value {
    let mut schema = unsorted();
    sort_keys(&mut schema);
    schema
}

/// Sorts object keys so the printed schema is the same whether or not serde_json keeps
/// insertion order (a feature other crates in the build may turn on).
fn sort_keys(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.sort_keys();
            map.values_mut().for_each(sort_keys);
        }
        Value::Array(items) => items.iter_mut().for_each(sort_keys),
        _ => {}
    }
}

/// The schema of one entry of `work_hours.periods`.
fn period_schema() -> Value {
    object(
        keys::PERIOD,
        keys::PERIOD,
        &[
            (
                "days",
                json!({
                    "description": "Days the window opens on: mon-fri, fri-mon (wraps), sat,sun, or a list",
                    "oneOf": [
                        {"type": "string"},
                        {"type": "array", "items": {"type": "string"}, "minItems": 1}
                    ]
                }),
            ),
            (
                "start",
                json!({"type": "string", "pattern": TIME, "description": "Local opening time, HH:MM"}),
            ),
            (
                "stop",
                json!({"type": "string", "pattern": TIME, "description": "Local closing time, HH:MM; at or before start closes the next day; 24:00 is the end of the day"}),
            ),
        ],
    )
}

/// The schema of `work_hours.cron`.
fn cron_schema() -> Value {
    object(
        keys::CRON,
        keys::CRON,
        &[
            (
                "start",
                json!({"type": "string", "description": "Standard 5-field cron (minute hour day-of-month month day-of-week), local time: opens the hours"}),
            ),
            (
                "stop",
                json!({"type": "string", "description": "Standard 5-field cron, local time: closes the hours"}),
            ),
        ],
    )
}

/// The schema of `work_hours`: `periods` or `cron`, not both.
fn work_hours_schema() -> Value {
    let period = period_schema();
    let cron = cron_schema();
    let mut work_hours = object(
        keys::WORK_HOURS,
        &["timezone"],
        &[
            (
                "timezone",
                json!({"type": "string", "description": "IANA time zone, e.g. Asia/Shanghai"}),
            ),
            (
                "periods",
                json!({"type": "array", "items": period, "minItems": 1}),
            ),
            ("cron", cron),
            (
                "skip",
                json!({"type": "array", "items": {"type": "string"}, "description": "Calendars whose dates open no window"}),
            ),
            (
                "workdays",
                json!({"type": "array", "items": {"type": "string"}, "description": "Calendars whose working days open as the weekday they name (periods only)"}),
            ),
            (
                "outside_hours",
                choice(
                    &["stop", "hibernate", "none"],
                    "stop",
                    "What to do with a running instance outside hours",
                ),
            ),
            (
                "start_at_open",
                choice(
                    &["stopped-by-ebb", "all", "never"],
                    "stopped-by-ebb",
                    "What to start when hours open",
                ),
            ),
            (
                "busy_defers_stop",
                json!({"type": "boolean", "default": true, "description": "A busy GPU delays the scheduled stop"}),
            ),
            (
                "max_defer",
                duration("Stop anyway this long after the close; absent = defer while busy"),
            ),
            (
                "start_ahead",
                duration("Start stopped instances this long before each opening (at most 12h); nothing is stopped for being outside hours meanwhile. Absent = at the opening"),
            ),
            ("late_start", late_start_schema()),
        ],
    );
    work_hours["oneOf"] = json!([{"required": ["periods"]}, {"required": ["cron"]}]);
    work_hours
}

/// The schema of `work_hours.late_start`: `keep`, `enforce`, or `{idle_for}`.
fn late_start_schema() -> Value {
    json!({
        "description": "An instance a person started outside hours: keep (default) runs until idle for the idle rule's `for` (or idle_for, default 1h), counted from the start; enforce stops it like any other",
        "default": "keep",
        "oneOf": [
            {"enum": ["keep", "enforce"]},
            object(
                keys::LATE_START,
                &[],
                &[(
                    "idle_for",
                    duration("How long a late start must be idle before it is stopped, in a policy without an idle rule (default 1h)"),
                )],
            ),
        ],
    })
}

/// The schema of the idle rule.
fn idle_schema() -> Value {
    object(
        keys::IDLE,
        &["gpu_below", "for"],
        &[
            (
                "gpu_below",
                percent("Idle when every GPU sample is below this percentage"),
            ),
            (
                "gpu_memory_below",
                json!({"type": "integer", "minimum": 1, "description": "MiB: idle only when every sample also holds less than this on its fullest GPU (unset: memory is not looked at)"}),
            ),
            (
                "for",
                duration("How long the GPUs must have been below the threshold"),
            ),
            (
                "grace_after_start",
                duration("No idle stop this soon after a start"),
            ),
            (
                "missing_metrics",
                choice(
                    &["busy", "idle"],
                    "busy",
                    "How a window not covered by data counts",
                ),
            ),
            (
                "when",
                choice(
                    &["always", "outside_hours"],
                    "always",
                    "When the idle rule applies",
                ),
            ),
            (
                "action",
                choice(
                    &["stop", "hibernate"],
                    "stop",
                    "What to do with an idle instance",
                ),
            ),
            (
                "min_gap",
                duration("No idle stop when the next opening is closer than this and the instance's type had a start refused for lack of capacity within capacity_memory"),
            ),
            (
                "capacity_memory",
                duration("How far back (at most 30d, default 7d) a start refused for lack of capacity counts for min_gap"),
            ),
            ("activity", activity_schema()),
        ],
    )
}

/// The schema of `idle.activity`: a list of one-key mappings, each a kind of signal.
fn activity_schema() -> Value {
    let name = json!({"type": "string", "pattern": "^[A-Za-z0-9_-]+$", "description": "What reasons and explain call the signal (default: its kind); each signal of a rule has its own"});
    let heartbeat = object(
        keys::HEARTBEAT,
        &["max_age"],
        &[
            ("name", name.clone()),
            (
                "max_age",
                duration("How long the instance's ebb:active-at tag (RFC 3339) keeps it in use"),
            ),
        ],
    );
    let jupyter = object(
        keys::JUPYTER,
        &[],
        &[
            ("name", name.clone()),
            (
                "url",
                json!({"type": "string", "pattern": "^https?://\\{private_ip\\}([:/].*)?$", "description": "Where a box without an ebb:jupyter tag has its Jupyter Server: {private_ip} is its private IP address", "examples": ["http://{private_ip}:8888"]}),
            ),
        ],
    );
    let prometheus = object(
        keys::PROMETHEUS_SIGNAL,
        &["query"],
        &[
            ("name", name.clone()),
            (
                "query",
                json!({"type": "string", "minLength": 1, "description": "PromQL giving one series per instance, labelled as the GPU source's (EBB_PROMETHEUS_INSTANCE_LABEL)"}),
            ),
            (
                "active_above",
                json!({"type": "number", "default": 0, "description": "In use at each reading above this"}),
            ),
        ],
    );
    let cloudwatch = object(
        keys::CLOUDWATCH_SIGNAL,
        &["namespace", "metric"],
        &[
            ("name", name),
            (
                "namespace",
                json!({"type": "string", "minLength": 1, "description": "The metric's namespace", "examples": ["CWAgent", "AWS/EC2"]}),
            ),
            (
                "metric",
                json!({"type": "string", "minLength": 1, "description": "The metric's name, read as its Maximum over each five-minute period", "examples": ["procstat_lookup_pid_count"]}),
            ),
            (
                "dimensions",
                json!({"type": "object", "maxProperties": 29, "not": {"required": ["InstanceId"]}, "additionalProperties": {"type": ["string", "number", "boolean"]}, "description": "The metric's dimensions beside InstanceId, which ebb adds for each instance"}),
            ),
            (
                "active_above",
                json!({"type": "number", "default": 0, "description": "In use at each reading above this"}),
            ),
        ],
    );
    let one = |kind: &str, body: Value| json!({"type": "object", "additionalProperties": false, "required": [kind], "properties": {kind: body}});
    json!({
        "type": "array",
        "description": "What else shows a person using the instance: idle only when no signal showed use for `for` either; a signal that cannot be read counts as in use",
        "items": {"oneOf": [one("heartbeat", heartbeat), one("jupyter", jupyter), one("prometheus", prometheus), one("cloudwatch", cloudwatch)]},
    })
}

/// The schema of the notice before a stop.
fn notify_schema() -> Value {
    object(
        keys::NOTIFY,
        keys::NOTIFY,
        &[(
            "before",
            duration("Notice (tag ebb:stop-at and webhook) this long before a stop"),
        )],
    )
}

/// The schema of the spot rule.
fn spot_schema() -> Value {
    object(
        keys::SPOT,
        &["min_savings", "checkpoint_max_age"],
        &[
            (
                "min_savings",
                percent("Least saving of spot against on-demand, e.g. 40%"),
            ),
            (
                "checkpoint_max_age",
                duration("How fresh the tag ebb:checkpoint-at must be to move a running job"),
            ),
            (
                "instance_types",
                json!({"type": "array", "items": {"type": "string"}, "description": "Acceptable replacement types; default: the instance's own"}),
            ),
            (
                "max_interruptions",
                json!({"type": "integer", "minimum": 0, "default": 3, "description": "Interruptions per 24 h before falling back to on-demand"}),
            ),
            (
                "keep_original_for",
                duration(
                    "How long the stopped on-demand original is kept for rollback (default 6h)",
                ),
            ),
            (
                "keep_image_for",
                duration(
                    "How long the image is kept after the migration ended while it is the only copy of the workload's disks (default 7d)",
                ),
            ),
            (
                "avoid_reclaimed_for",
                duration("A pool (type and zone) interrupted this recently is not launched into (default 1h)"),
            ),
            (
                "placement_scores",
                json!({"type": "boolean", "default": false, "description": "Weigh EC2's Spot Placement Scores into the chance of an interruption (needs ec2:GetSpotPlacementScores)"}),
            ),
            (
                "back_to_spot_after",
                duration(
                    "How long a migration that fell back to on-demand runs there before spot is tried again (default 24h)",
                ),
            ),
        ],
    )
}

/// The schema of `match`.
fn matcher_schema() -> Value {
    object(
        keys::MATCH,
        &[],
        &[
            (
                "regions",
                json!({"type": "array", "items": {"type": "string"}}),
            ),
            (
                "tags",
                json!({
                    "type": "object",
                    "description": "Tags that must all match; \"*\" means the key is present",
                    "additionalProperties": {"type": ["string", "boolean", "number"]}
                }),
            ),
            (
                "instance_types",
                json!({"type": "array", "items": {"type": "string"}, "description": "Globs such as g5.*"}),
            ),
        ],
    )
}

/// The schema of one policy.
fn policy_schema() -> Value {
    let matcher = matcher_schema();
    let work_hours = work_hours_schema();
    let idle = idle_schema();
    let notify = notify_schema();
    let spot = spot_schema();
    let start = object(
        keys::START,
        &[],
        &[
            (
                "fallback_types",
                json!({"type": "array", "items": {"type": "string", "pattern": "^[A-Za-z0-9-]+\\.[A-Za-z0-9-]+$"}, "description": "Types to change a stopped instance to, in order, when EC2 has no capacity for its own"}),
            ),
            (
                "restore_type",
                json!({"type": "boolean", "description": "Change an instance ebb moved to a fallback type back to its own type at a later start"}),
            ),
            (
                "reserve_capacity",
                json!({"type": "boolean", "default": false, "description": "Start an instance whose start EC2 refused for lack of capacity within idle.capacity_memory (default 7d) into a capacity reservation made for it, cancelled once it runs"}),
            ),
        ],
    );
    let stop = object(
        keys::STOP,
        &[],
        &[
            (
                "allow_charging_stop",
                json!({"type": "boolean", "default": false, "description": "Stop an instance even when its family cannot stop without charge (Alibaba, Tencent: local disks), though the stop keeps it billed"}),
            ),
            (
                "in_reservation",
                json!({"enum": ["keep", "stop"], "default": "keep", "description": "A box running in a capacity reservation or Capacity Block held outside ebb (paid whether it runs or not): keep it running (a stop saves nothing), or stop it to free the capacity for other boxes"}),
            ),
        ],
    );
    let mut runtime = object(
        keys::RUNTIME,
        &[],
        &[
            (
                "max",
                duration("How long a box may run from its last start; past it, it is stopped after its notice whether busy or not"),
            ),
            (
                "notify_before",
                duration("How long before a runtime stop the notice goes out (default 1h, or half of the shorter limit when that is shorter); shorter than each limit"),
            ),
            (
                "max_busy_without_checkpoint",
                duration("How long a box may stay busy (every reading at or above the busy threshold) past an ebb:checkpoint-at tag that old; then it is stopped after its notice. A box without the tag is not judged"),
            ),
        ],
    );
    runtime["anyOf"] =
        json!([{"required": ["max"]}, {"required": ["max_busy_without_checkpoint"]}]);
    let group = object(
        keys::GROUP,
        &[],
        &[(
            "protect_members",
            json!({"type": "boolean", "default": false, "description": "An Auto Scaling group the policy governs is scaled down around members something protects (an override, ebb:keep-until, ebb:skip): they are protected from the group's scale-in and the group keeps just them. Without it, such a member holds the whole scale-down"}),
        )],
    );
    let stopped = object(
        keys::STOPPED,
        &["reclaim_after", "reclaim"],
        &[
            (
                "reclaim_after",
                duration("How long a box must have been stopped (by ebb or by a person) before it is reclaimed; the notice goes out notify.before ahead"),
            ),
            (
                "reclaim",
                json!({"enum": ["image"], "description": "image: an image of the box with all its volumes is made and proven, then the box is terminated; `ebb restore` brings it back"}),
            ),
            (
                "keep_image_for",
                duration("Delete the image and its snapshots once the box restored from it has been up this long (absent: the image is kept until a person deletes it); never while the image may be the only copy"),
            ),
        ],
    );
    object(
        keys::POLICY,
        &["name", "match"],
        &[
            (
                "name",
                json!({"type": "string", "minLength": 1, "description": "Unique across all files"}),
            ),
            ("description", json!({"type": "string"})),
            (
                "priority",
                json!({"type": "integer", "default": 0, "description": "Higher wins when several policies match"}),
            ),
            ("match", matcher),
            ("work_hours", work_hours),
            ("idle", idle),
            ("notify", notify),
            ("spot", spot),
            ("start", start),
            ("stop", stop),
            ("runtime", runtime),
            ("group", group),
            ("stopped", stopped),
            ("dry_run", json!({"type": "boolean", "default": false})),
        ],
    )
}

/// The schema of one budget.
fn budget_schema() -> Value {
    let text = |d: &str| json!({"type": "string", "minLength": 1, "description": d});
    object(
        keys::BUDGET,
        &["name", "match", "amount", "period", "timezone"],
        &[
            ("name", text("Unique across all files")),
            ("description", json!({"type": "string"})),
            ("match", matcher_schema()),
            ("per", text("A tag key (ebb:owner): one budget of the amount for each of its values")),
            ("amount", json!({"type": "number", "exclusiveMinimum": 0, "description": "What the period may spend, in the currency"})),
            ("currency", json!({"type": "string", "pattern": "^[A-Z]{3}$", "description": "ISO 4217; default the boxes' cloud's: USD on AWS, CNY on Alibaba Cloud and Tencent Cloud"})),
            ("period", choice(&["day", "week", "month"], "month", "The calendar period spend is counted over")),
            ("timezone", text("The IANA zone of the periods (Asia/Shanghai)")),
            ("notify_at", json!({"type": "array", "items": percent("A share of the amount"), "default": ["50%", "80%", "100%"], "description": "Shares of the amount whose crossing sends a notice"})),
            ("notify", json!({"type": "array", "items": {"type": "string"}, "description": "Who the notices go to besides the boxes' ebb:owner tags"})),
            ("forecast", json!({"type": "boolean", "default": false, "description": "Notify when the forecast to the period's end crosses a threshold, not only spend so far"})),
            ("at_limit", choice(&["notify", "refuse_starts", "stop_idle", "stop"], "notify", "What happens once spend reaches the amount: only the notice; no matched box started; the idle rule at any hour; every matched running box stopped after its notice")),
            ("max_defer", duration("With at_limit: stop, how long a busy box's stop may wait after its notice (default: not at all)")),
            ("notify_before", duration("With at_limit: stop, how long before the stop its notice goes out (default 1h)")),
        ],
    )
}

/// A date or an inclusive range of dates.
const DATE_RANGE: &str = "^[0-9]{4}-[0-9]{2}-[0-9]{2}(\\.\\.[0-9]{4}-[0-9]{2}-[0-9]{2})?$";

/// One day, as `workday_as` and a working day's `as` take it.
fn weekday(description: &str) -> Value {
    json!({
        "enum": [
            "mon", "tue", "wed", "thu", "fri", "sat", "sun", "monday", "tuesday", "wednesday",
            "thursday", "friday", "saturday", "sunday"
        ],
        "default": "mon",
        "description": description,
    })
}

/// The schema of one calendar: `dates`, `workdays`, or both.
fn calendar_schema() -> Value {
    let date = json!({"type": "string", "pattern": DATE_RANGE});
    let workday = object(
        keys::WORKDAY,
        &["date"],
        &[
            ("date", date.clone()),
            (
                "as",
                weekday("The weekday whose periods open on these dates"),
            ),
        ],
    );
    let mut calendar = object(
        keys::CALENDAR,
        &[],
        &[
            ("description", json!({"type": "string"})),
            (
                "dates",
                json!({
                    "type": "array",
                    "items": date,
                    "description": "Dates (YYYY-MM-DD) and inclusive ranges (YYYY-MM-DD..YYYY-MM-DD) that open no window"
                }),
            ),
            (
                "workdays",
                json!({
                    "type": "array",
                    "items": {"oneOf": [date, workday]},
                    "description": "Working days whatever their weekday (make-up workdays, 调休): dates, ranges, or {date, as} naming the weekday whose periods open on them"
                }),
            ),
            (
                "workday_as",
                weekday("The weekday whose periods open on the workdays that name none"),
            ),
            (
                "file",
                json!({"type": "string", "minLength": 1, "description": "A file of dates in a public format, relative to this policy file: iCalendar (.ics, its all-day events open no window) or holiday-cn's JSON (its off days open no window, its other days are workdays)", "examples": ["cn-2027.json", "us-holidays.ics"]}),
            ),
            (
                "url",
                json!({"type": "string", "pattern": "^https?://", "description": "An address serving dates in the formats of file: ebb serve fetches it at start and daily and keeps the last good copy in Postgres (a failed or partial fetch never replaces it); the commands that read policies fetch it when they start. Not with file", "examples": ["https://raw.githubusercontent.com/NateScarlet/holiday-cn/master/2027.json"]}),
            ),
            (
                "format",
                json!({"enum": ["ics", "holiday-cn"], "description": "The format of the file or of what the url serves, when its extension (.ics, .json) does not say"}),
            ),
        ],
    );
    calendar["anyOf"] = json!([
        {"required": ["dates"]},
        {"required": ["workdays"]},
        {"required": ["file"]},
        {"required": ["url"]}
    ]);
    calendar
}

/// The whole schema, a policy file, with keys in insertion order.
fn unsorted() -> Value {
    let calendar = calendar_schema();
    let policy = policy_schema();
    let mut file = object(
        keys::FILE,
        &[],
        &[
            (
                "calendars",
                json!({"type": "object", "additionalProperties": calendar}),
            ),
            ("policies", json!({"type": "array", "items": policy})),
            (
                "budgets",
                json!({"type": "array", "items": budget_schema()}),
            ),
        ],
    );
    file["$schema"] = json!("http://json-schema.org/draft-07/schema#");
    file["title"] = json!("ebb policy file");
    file
}

/// The schema as pretty-printed JSON with a final newline, as in `deploy/policy.schema.json`.
pub fn schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&schema()).unwrap_or_default();
    text.push('\n');
    text
}
