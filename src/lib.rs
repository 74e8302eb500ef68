//! ebb: a control plane that makes a GPU cloud bill follow real demand.
//!
//! Policies in git ([`policy`]) say when instances may run ([`schedule`]); the pure decision
//! core ([`engine`]) turns the policies, the [`fleet`] and what ebb did before into decisions,
//! each with a stable code and a reason people can read. The [`store`] keeps what ebb knows
//! and the tamper-evident audit log in Postgres. The [`cloud`] is where instances are seen
//! and acted on; a [`snapshot`] file describes a fleet for `ebb plan`, `ebb explain` and the
//! simulated cloud.
//! Signed [`checkpoint`]s of the audit chain's head are kept outside the database.

pub mod advise;
pub mod api;
pub mod checkpoint;
pub mod cli;
pub mod clock;
pub mod cloud;
pub mod console;
pub mod control;
pub mod engine;
pub mod events;
pub mod fleet;
pub mod metrics;
pub mod names;
pub mod output;
pub mod policy;
pub mod reconcile;
pub mod replay;
pub mod report;
pub mod schedule;
pub mod serve;
pub mod snapshot;
pub mod snooze;
pub mod spot;
pub mod store;
pub mod webhook;
pub mod when;
