//! `/advice`: what `ebb advise` says from Postgres over a window (the last 30 days unless
//! chosen): right-sizing, commitments and policy changes with their YAML diffs.
//!
//! The advice replays the policies over the window's recording, so it is bounded before it
//! starts: the window as a report's ([`Window`]: at most 400 days, ending by now), at most
//! [`MAX_INSTANCE_DAYS`] of recording, one advice worked out at a time per replica, on the
//! blocking pool with half the cores, and given up when its request is (the time limit, a
//! closed browser) at the next chunk of instances.

use super::{given, instance_link, ok, scroll, window_select, Nav, PageError, PageResult};
use crate::advise::reservations::{reservation_use, ReservationUse};
use crate::advise::rightsize::MIN_RECORDED;
use crate::advise::run::{self, AdviseError};
use crate::advise::{Advice, Inputs, Period};
use crate::api::ApiState;
use crate::budget::money;
use crate::fleet::GPU_BUSY_PERCENT;
use crate::replay::{self, Options, Recording};
use crate::report::Window;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use maud::{html, Markup};
use serde::Deserialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;

/// The windows offered; any `since` the API takes works in the address too.
const WINDOWS: [(&str, &str); 3] = [("7d", "7 days"), ("30d", "30 days"), ("90d", "90 days")];

/// The most recording the page works out advice on: instances at the window's start times
/// its days. About 1,300 instances over 30 days; `ebb advise` has no such limit.
pub const MAX_INSTANCE_DAYS: u64 = 40_000;

/// One advice at a time per replica: another request waits for it (within its time limit).
static ADVISING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(1);

/// The page's parameters.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AdviceQuery {
    since: Option<String>,
    until: Option<String>,
}

/// Sets its flag when dropped: the request was answered or given up.
struct GiveUpOnDrop(Arc<AtomicBool>);

impl Drop for GiveUpOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

pub(super) async fn page(
    State(state): State<ApiState>,
    query: Result<Query<AdviceQuery>, QueryRejection>,
) -> PageResult {
    let Query(q) = query?;
    let since = given(q.since).unwrap_or_else(|| "30d".to_string());
    let until = given(q.until);
    let window = Window::parse(&since, until.as_deref(), state.clock.now())
        .map_err(PageError::bad_request)?;
    let form = form(&since, until.as_deref());
    let loaded =
        crate::policies::current(&state.policies)
            .await
            .map_err(|err| {
                PageError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("no valid policy set has been loaded, so there is nothing to advise on: {err}"),
        )
            })?;
    let (instances, prior) = state.store.fleet_at(window.since).await?;
    if instances.is_empty() {
        let body = html! {
            (form)
            p.problem role="status" {
                "ebb tracked no instance at " (super::time(window.since))
                ": choose a window that starts after ebb's first tick."
            }
        };
        return Ok(ok("Advice", Nav::Advice, body));
    }
    let days = ((window.until - window.since).num_seconds() as u64).div_ceil(86_400);
    let size = instances.len() as u64 * days;
    if size > MAX_INSTANCE_DAYS {
        return Err(PageError::bad_request(format!(
            "{} instances over {days} days is more than the console works out (at most {MAX_INSTANCE_DAYS} instance-days): choose a shorter window, or run ebb advise, which has no such limit",
            instances.len()
        )));
    }
    // The reservations need no replay: shown whatever stops the rest.
    let period = Period {
        from: window.since,
        to: window.until,
    };
    let capacity_reads = state
        .store
        .capacity_reads(window.since, window.until)
        .await?;
    let table_prices = run::replay_prices(&state.prices);
    let reserved = reservation_use(&capacity_reads, &period, &run::on_demand(&table_prices));
    // Every type the price table lacks at once, before the work: the replay would stop at the
    // first.
    let unpriced = replay::unpriced(&table_prices, &instances);
    if !unpriced.is_empty() {
        let body = html! {
            (form)
            p.problem role="status" {
                "No on-demand price for " (unpriced.len()) " instance type(s) the advice costs: "
                (unpriced.join(", "))
                ". Add them to the price table (EBB_PRICES) under prices: REGION: TYPE for right-sizing, commitments, policy changes and subscriptions."
            }
            (reservations(&reserved, &period))
        };
        return Ok(ok("Advice", Nav::Advice, body));
    }
    let mut catalogue = crate::advise::catalogue::shipped();
    catalogue.update(state.store.instance_types().await?);
    let permit = ADVISING
        .acquire()
        .await
        .map_err(|_| PageError::new(StatusCode::SERVICE_UNAVAILABLE, "ebb is shutting down"))?;
    let given_up = Arc::new(AtomicBool::new(false));
    let _guard = GiveUpOnDrop(given_up.clone());
    let store = state.store.clone();
    let prices = state.prices.clone();
    // Subscriptions are advised at the clouds' kept quotes, over the table's.
    let quoted = state.quoted_prices().await?;
    let runtime = tokio::runtime::Handle::current();
    let compute = move || -> Result<Advice, AdviseError> {
        let _permit = permit;
        let set: &crate::policy::PolicySet = &loaded.set;
        let replay_prices = run::replay_prices(&prices);
        let on_demand = run::on_demand(&replay_prices);
        let commitment_rates = run::plan_rates(&prices);
        let subscription_tables = run::subscription_tables(&quoted);
        let inputs = Inputs {
            options: Options {
                levers: crate::cloud::levers(),
                from: window.since,
                to: window.until,
                tick: chrono::Duration::minutes(5),
                busy_threshold: GPU_BUSY_PERCENT,
            },
            policies: set,
            prices: &replay_prices,
            catalogue: &catalogue,
            on_demand: &on_demand,
            commitment_rates: &commitment_rates,
            max_unserved: None,
            subscription_tables: &subscription_tables,
        };
        let span = replay::readings_span(window.since, window.until, &[set]);
        let feed = |send: &SyncSender<Vec<Recording>>| {
            replay::in_chunks(
                &instances,
                |ids| {
                    if given_up.load(Ordering::Relaxed) {
                        return Err(AdviseError::Read("the request was given up".into()));
                    }
                    runtime
                        .block_on(store.kept_of(ids, span))
                        .map_err(|e| AdviseError::Read(e.to_string()))
                },
                |recordings| {
                    send.send(recordings)
                        .map_err(|_| AdviseError::Read("the advice stopped early".into()))
                },
            )
        };
        // Half the cores: the other half stays with the tick and the API.
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get() / 2);
        run::advise_all("the fleet in Postgres", &inputs, set, &prior, workers, feed)
    };
    let advice = match tokio::task::spawn_blocking(compute).await {
        Ok(advice) => advice,
        // As if it had run here: a panic stays a panic.
        Err(err) => std::panic::resume_unwind(err.into_panic()),
    };
    let advice = advice.map_err(|err| {
        tracing::error!(error = %err, "the console's advice failed");
        match err {
            AdviseError::Replay { .. } => PageError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("{err}: add the type to the price table (EBB_PRICES)"),
            ),
            _ => PageError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "the advice could not be worked out; the error is in ebb's log",
            ),
        }
    })?;
    let body = html! {
        (form)
        p.headline {
            "Advice from " (super::time(window.since)) " to " (super::time(window.until))
            ", from the policies in force replayed over the GPU readings ebb kept."
        }
        @if advice.longest_recorded < MIN_RECORDED {
            p.problem role="status" {
                "Fewer than 7 days of GPU readings in this window (the longest of any instance covers "
                (hours(advice.longest_recorded)) "): ebb advises nothing on less than a week. Choose a longer window, or come back when ebb has read a week."
            }
        } @else {
            (sections(&advice))
        }
        (reservations(&reserved, &period))
        p.note {
            "The same advice, with other prices or files: " code { "ebb advise" } ". Prices are the control plane's price table (EBB_PRICES); commitments are sized at its savings_plan rates."
        }
    };
    Ok(ok("Advice", Nav::Advice, body))
}

/// "36 h" or "6.5 days".
fn hours(d: chrono::Duration) -> String {
    let h = d.num_minutes() as f64 / 60.0;
    match h < 48.0 {
        true => format!("{h:.0} h"),
        false => format!("{:.1} days", h / 24.0),
    }
}

fn usd(v: f64) -> String {
    format!("${v:.2}")
}

/// The window form.
fn form(since: &str, until: Option<&str>) -> Markup {
    html! {
        form.filters method="get" action="/advice" {
            (window_select(&WINDOWS, since))
            @if let Some(u) = until { input type="hidden" name="until" value=(u); }
            button type="submit" { "Show" }
        }
    }
}

/// The four sections worked out from the GPU readings.
fn sections(advice: &Advice) -> Markup {
    let roles = &advice.roles;
    html! {
        h2 #rightsize { "Right-sizing" }
        @if advice.rightsize.is_empty() {
            p { "Nothing to resize: every instance's load needs its type, or no cheaper type in the catalogue carries it." }
        } @else {
            (scroll("Right-sizing", html! {
                table {
                    thead { tr {
                        th scope="col" { "Instance" }
                        th scope="col" { "Type" }
                        th scope="col" { "Suggested" }
                        th scope="col" { "A month less" }
                        th scope="col" { "Why" }
                    } }
                    tbody {
                        @for s in &advice.rightsize {
                            tr {
                                th scope="row" { (instance_link(&s.instance)) }
                                td { (s.instance_type) }
                                td { (s.suggested_type) }
                                td.num { (money(s.monthly_savings, s.currency)) }
                                td { (s.why) }
                            }
                        }
                    }
                }
            }))
        }
        h2 #commitments { "Commitments" }
        p.note { "Each sized on the spend after the policies, beside what the same method sizes on the spend before them; both measured on the spend after them." }
        @if advice.commitments.is_empty() {
            p { "No commitment rates for the fleet's types (savings_plan in the price table)." }
        } @else {
            (scroll("Commitments", html! {
                table {
                    thead { tr {
                        th scope="col" { "Region" }
                        th scope="col" { "Term" }
                        th scope="col" { "Sized on" }
                        th scope="col" { "$/hour" }
                        th scope="col" { "Used" }
                        th scope="col" { "Covered" }
                        th scope="col" { "A month less" }
                    } }
                    tbody {
                        @for c in &advice.commitments {
                            tr {
                                th scope="row" { (c.region) }
                                td { (c.term.as_str()) }
                                td { (c.basis.as_str()) }
                                td.num { (format!("${:.4}", c.hourly_commitment_usd)) }
                                td.num { (format!("{:.1} %", c.utilisation_pct)) }
                                td.num { (format!("{:.1} %", c.coverage_pct)) }
                                td.num { (usd(c.monthly_savings_usd)) }
                            }
                        }
                    }
                }
            }))
        }
        dl.facts {
            dt { "Commit" } dd { (ids(&roles.commit)) ": running and busy around the clock" }
            dt { "Schedule" } dd { (ids(&roles.schedule)) ": running part of the time" }
            dt { "Spot" } dd { (ids(&roles.spot)) ": interruptible" }
        }
        h2 #policy-changes { "Policy changes" }
        @if advice.policy_changes.is_empty() {
            p { "No change cuts cost without serving less." }
        }
        @for c in &advice.policy_changes {
            h3 { (c.policy) ": " code { (c.key) } " " (c.from) " → " (c.to) }
            dl.facts {
                dt { "A month less" } dd { (money(c.monthly_savings, c.currency)) }
                dt { "Unserved busy hours" } dd { (format!("{:.2}", c.unserved_busy_hours)) " (now " (format!("{:.2}", c.current_unserved_busy_hours)) ")" }
                dt { "Wrongful stops" } dd { (c.wrongful_stops) " (now " (c.current_wrongful_stops) ")" }
            }
            pre.diff { code { (c.yaml_diff) } }
        }
        h2 #subscriptions { "Subscriptions" }
        p.note { "A month paid by the hour after the policies, against each subscription term of the price table (subscription); ebb never switches a box." }
        @if advice.subscriptions.is_empty() {
            p { "No box paid by the hour has subscription prices in the price table." }
        } @else {
            (scroll("Subscriptions", html! {
                table {
                    thead { tr {
                        th scope="col" { "Instance" }
                        th scope="col" { "Type" }
                        th scope="col" { "Hours a month" }
                        th scope="col" { "By the hour" }
                        th scope="col" { "Advice" }
                        th scope="col" { "Why" }
                    } }
                    tbody {
                        @for s in &advice.subscriptions {
                            tr {
                                th scope="row" { (instance_link(&s.instance)) }
                                td { (s.instance_type) }
                                td.num { (format!("{:.0}", s.running_hours_a_month)) }
                                td.num { (format!("{:.2} {}", s.pay_as_you_go_a_month, s.currency)) }
                                td {
                                    @match s.advised_months {
                                        Some(m) => { (m) "-month subscription" }
                                        None => "stay by the hour",
                                    }
                                }
                                td {
                                    (s.why)
                                    @if let Some(a) = &s.action { " (" code { (a) } ")" }
                                }
                            }
                        }
                    }
                }
            }))
        }
    }
}

/// The capacity reservations held outside ebb that ran below their size over `period`: from
/// the hourly reads, not the GPU readings, so shown however long those are and whatever
/// prices the replay lacks.
fn reservations(used: &ReservationUse, period: &Period) -> Markup {
    html! {
        h2 #reservations { "Capacity reservations" }
        p.note { "Held outside ebb and paid whether used or not; " (used.read_words(period)) "." }
        @if used.idle.is_empty() {
            p { "No reservation read ran below its size." }
        } @else {
            (scroll("Capacity reservations", html! {
                table {
                    thead { tr {
                        th scope="col" { "Reservation" }
                        th scope="col" { "Type and zone" }
                        th scope="col" { "Size" }
                        th scope="col" { "Unused hours" }
                        th scope="col" { "Unused" }
                        th scope="col" { "Could use it" }
                        th scope="col" { "Why" }
                    } }
                    tbody {
                        @for r in &used.idle {
                            tr {
                                th scope="row" { code { (r.last_read.id) } }
                                td { (r.last_read.instance_type) " " (r.last_read.zone) }
                                td.num { (r.last_read.total) }
                                td.num { (format!("{:.1} of {:.1}", r.unused_hours, r.paid_hours)) }
                                td.num {
                                    @match r.unused_usd {
                                        Some(v) => (usd(v)),
                                        None => "unknown",
                                    }
                                }
                                td { (ids(&r.could_use)) }
                                td { (r.why) }
                            }
                        }
                    }
                }
            }))
        }
    }
}

/// Instance links, or "none".
fn ids(list: &[String]) -> Markup {
    html! {
        @if list.is_empty() {
            "none"
        } @else {
            @for (n, id) in list.iter().enumerate() {
                @if n > 0 { ", " }
                (instance_link(id))
            }
        }
    }
}
