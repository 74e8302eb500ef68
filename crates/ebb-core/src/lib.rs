//! ebb's decision core: everything that decides, and nothing that acts. No async runtime, no
//! database, no cloud SDK; its only I/O is reading the policy files (and asking git for their
//! commit) in [`policy`].
//!
//! Policies in git ([`policy`]) say when instances may run ([`schedule`], on instants from
//! [`when`]); the pure decision engine ([`engine`]) turns the policies, the [`fleet`] and what
//! ebb did before into decisions, each with a stable code and a reason people can read. The
//! calculations of `ebb replay` ([`replay`]), `ebb report` ([`report`]) and `ebb advise`
//! ([`advise`]) are here too, and where each budget stands ([`budget`]); [`names`] are the tags and labels ebb reads and writes,
//! [`snooze`] its signed links, and [`spreadsheet`] the CSV cells it writes.

pub mod advise;
pub mod budget;
pub mod engine;
pub mod fleet;
pub mod names;
pub mod policy;
pub mod replay;
pub mod report;
pub mod schedule;
pub mod snooze;
pub mod spreadsheet;
pub mod when;
