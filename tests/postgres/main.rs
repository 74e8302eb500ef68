//! The integration tests that need Postgres (`DATABASE_URL`; `#[sqlx::test]` makes a database
//! for each test) and nothing else: the store, the reconciler in process on the simulated fleet
//! (acting, retries, fallbacks, pacing, timeouts, spot migrations under injected faults), the
//! API, the console, reports, replays from the store, the database roles and the events sent
//! to `EBB_EVENTS_URL`.

#[path = "../common/mod.rs"]
mod common;

mod acting;
mod activity_export;
mod alibaba;
mod api;
mod attempts;
mod budgets;
mod calendar_notices;
mod calendar_urls;
mod capacity_reads;
mod charging_stops;
mod cloudwatch_reads;
mod commitments;
mod console;
mod console_advice;
mod console_groups;
mod demo;
mod events;
mod fallback;
mod gpu_signals;
mod groups;
mod heartbeat;
mod history;
mod jupyter_url;
mod late_start;
mod leadership;
mod listener;
mod my_instances;
mod node_groups;
mod owners;
mod pacing;
mod pools;
mod prometheus_answers;
mod reclaim_report;
mod replay_store;
mod report;
mod report_rollup;
mod reserve_capacity;
mod retry;
mod roles;
mod runtime_limit;
mod secrets;
mod serve_clock;
mod snooze;
mod spot_early;
mod spot_faults;
mod spot_lost_answers;
mod spot_proofs;
mod store;
mod tencent;
mod timeouts;
mod unseen_restart;
mod why_late;
