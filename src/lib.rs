//! ebb: a control plane that makes a GPU cloud bill follow real demand.
//!
//! Policies in git ([`policy`]) say when instances may run ([`schedule`]); the pure decision
//! core ([`engine`]) turns the policies, the [`fleet`] and what ebb did before into decisions,
//! each with a stable code and a reason people can read. The [`store`] keeps what ebb knows
//! and the tamper-evident audit log in Postgres. The [`cloud`] is where instances are seen
//! and acted on; a [`snapshot`] file describes a fleet for `ebb plan`, `ebb explain` and the
//! simulated cloud.
//! Signed [`checkpoint`]s of the audit chain's head are kept outside the database. [`spot`]
//! moves interruptible work to spot capacity; [`reclaim`] images and terminates boxes stopped
//! for long, and brings them back.
//!
//! The workspace's crates are the module map's boundaries: `ebb-core` (crates/ebb-core) is the
//! decision core, `ebb-cloud` (crates/ebb-cloud) the providers, and this crate the application
//! (the control loop, the store, the API, the console and the command line). The core's and
//! the providers' modules are re-exported here, at the paths the application names them by.

pub use ebb_cloud::{clock, cloud};
pub use ebb_core::{
    advise, budget, engine, fleet, names, policy, replay, report, schedule, snooze, spreadsheet,
    when,
};

pub mod api;
pub mod checkpoint;
pub mod cli;
pub mod console;
pub mod control;
pub mod events;
pub mod metrics;
pub mod output;
pub mod policies;
pub mod reclaim;
pub mod reconcile;
pub mod serve;
pub mod snapshot;
pub mod spot;
pub mod store;
pub mod webhook;
