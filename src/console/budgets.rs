//! `/budgets`: where each budget of the policy files stands in its period, worked out as the
//! tick and `ebb budgets` work it out: its burn-down as a chart (spend so far, the forecast to
//! the period's end, the amount and the notice thresholds), the boxes that spent most, and
//! what was noticed, refused or stopped for it.

use super::{ok, scale, scroll, time, Nav, PageResult};
use crate::api::ApiState;
use crate::budget::{self, money, Ran, Standing};
use crate::fleet::money::PriceTable;
use crate::policy::{Budget, PolicySet};
use crate::store::{AuditEntry, AuditFilter};
use chrono::{DateTime, Duration, Utc};
use maud::{html, Markup};

/// The drawing's size, in SVG units; it scales to the page's width.
const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 200.0;

/// The most audit rows of the periods the page reads.
const AUDIT_ROWS: i64 = 2000;

pub(super) async fn page(
    axum::extract::State(state): axum::extract::State<ApiState>,
) -> PageResult {
    let now = state.clock.now();
    let loaded = match crate::policies::current(&state.policies).await {
        Ok(loaded) => loaded,
        Err(err) => {
            let body = html! {
                p.problem role="alert" { "No valid policy set has been loaded: " (err.to_string()) }
            };
            return Ok(ok("Budgets", Nav::Budgets, body));
        }
    };
    let set: &PolicySet = &loaded.set;
    let prices = state.quoted_prices().await?;
    let stood = state
        .store
        .budget_standings(set, now, state.cloud, &prices)
        .await?;
    let Some((standings, ran)) = stood else {
        let body = html! {
            p { "The policy files have no budgets. A " code { "budgets" } " list beside the policies sets what the boxes a match selects may spend in a day, a week or a month, and what happens at the limit (docs/policies.md, Budgets)." }
        };
        return Ok(ok("Budgets", Nav::Budgets, body));
    };
    let since = standings.iter().map(|s| s.start).min().unwrap_or(now);
    let audit = state
        .store
        .audit(&AuditFilter {
            since: Some(since),
            limit: Some(AUDIT_ROWS),
            ..AuditFilter::default()
        })
        .await?;
    let body = html! {
        @for s in &standings {
            @if let Some(b) = set.budgets.iter().find(|b| b.name == s.budget) {
                (section(b, s, &state, &prices, &ran, &audit))
            }
        }
        p.note {
            "Spend is every hour a matched box ran since the period began, at its on-demand price in the price table (EBB_PRICES), "
            "less what the commitments held pay of each hour. The forecast keeps what runs now running through its policy's work hours, at on-demand prices. The same figures: "
            code { "ebb budgets" } "."
        }
    };
    Ok(ok("Budgets", Nav::Budgets, body))
}

/// One budget's standing: headline, burn-down, top boxes and what was done for it.
fn section(
    b: &Budget,
    s: &Standing,
    state: &ApiState,
    prices: &PriceTable,
    ran: &[Ran],
    audit: &[AuditEntry],
) -> Markup {
    let label = s.label();
    let done: Vec<&AuditEntry> = audit
        .iter()
        .filter(|a| a.entry.reason.starts_with(&format!("{label}:")))
        .filter(|a| a.entry.outcome != crate::store::Outcome::Intent)
        .collect();
    html! {
        section.budget aria-labelledby=(format!("budget-{}", slug(&label))) {
            h2 id=(format!("budget-{}", slug(&label))) { (label) }
            @match &s.spent {
                Ok(spent) => p.headline {
                    strong { (money(*spent, &s.currency)) } " of " (money(s.amount, &s.currency))
                    " spent (" (format!("{:.0}", spent / s.amount * 100.0)) "%) this " (b.period.as_str())
                    ", until " (s.until()) "; running now: " (money(s.per_hour, &s.currency)) " an hour"
                    @if let Some(f) = s.forecast { "; forecast " (money(f, &s.currency)) " by the period's end" }
                    ". At the limit: " code { (b.at_limit.as_str()) } "."
                    @if s.spot_hours >= 0.005 {
                        " Not counted: " (format!("{:.2}", s.spot_hours)) " h on spot, whose market price ebb does not keep (never priced at on-demand, so the budget acts only on what was surely spent)."
                    }
                },
                Err(why) => p.problem role="alert" {
                    "Spend unknown, so nothing is refused or stopped for this budget: " (why)
                },
            }
            @for r in &s.raises {
                p.note {
                    "Raised by " (r.by.text(&s.currency)) " by " strong { (r.by_whom) } " at " (time(r.made_at))
                    " until " (time(r.until)) ": " (r.reason)
                }
            }
            (burn_down(b, s, state, prices, ran))
            @if !s.boxes.is_empty() {
                (scroll(&format!("Boxes that spent most of {label}"), html! {
                    table {
                        thead { tr { th scope="col" { "Instance" } th scope="col" { "Spent this period" } } }
                        tbody {
                            @for (id, spent) in s.boxes.iter().take(10) {
                                tr {
                                    th scope="row" { a href=(format!("/instances/{id}")) { (id) } }
                                    td.num { (money(*spent, &s.currency)) }
                                }
                            }
                        }
                    }
                }))
            }
            @if !done.is_empty() {
                (scroll(&format!("What {label} did"), html! {
                    table {
                        thead { tr { th scope="col" { "When" } th scope="col" { "Instance" } th scope="col" { "Action" } th scope="col" { "Why" } } }
                        tbody {
                            @for a in &done {
                                tr {
                                    td { (time(a.entry.at)) }
                                    td { (a.entry.instance.as_deref().unwrap_or("")) }
                                    td { (a.entry.action) " " (a.entry.outcome.as_str()) }
                                    td { (a.entry.reason) }
                                }
                            }
                        }
                    }
                }))
            }
        }
    }
}

/// The burn-down of one budget's period: spend so far each hour, the forecast from now to the
/// period's end, the amount and the thresholds.
fn burn_down(
    b: &Budget,
    s: &Standing,
    state: &ApiState,
    prices: &PriceTable,
    ran: &[Ran],
) -> Markup {
    let Ok(spent) = s.spent else {
        return html! {};
    };
    let mut points: Vec<DateTime<Utc>> = Vec::new();
    let mut t = s.start;
    while t < s.now {
        points.push(t);
        t += Duration::hours(1);
    }
    points.push(s.now);
    let series = budget::spent_by(b, s, state.cloud, ran, prices, &points);
    let forecast = s.forecast.unwrap_or(spent);
    // A little above the largest, so that a line at it is not drawn on the edge.
    let most = [s.amount, spent, forecast].into_iter().fold(0.0, f64::max);
    let step = scale::step(most * 1.05);
    let top = scale::top(step);
    let span = (s.end - s.start).num_seconds().max(1) as f64;
    let x =
        |t: DateTime<Utc>| ((t - s.start).num_seconds() as f64 / span * WIDTH).clamp(0.0, WIDTH);
    let y = |v: f64| HEIGHT - (v / top).clamp(0.0, 1.0) * HEIGHT;
    let line: Vec<String> = points
        .iter()
        .zip(&series)
        .map(|(t, v)| format!("{:.1},{:.1}", x(*t), y(*v)))
        .collect();
    let id = slug(&s.label());
    let summary = format!(
        "{} of {} spent by {}; forecast {} by {}",
        money(spent, &s.currency),
        money(s.amount, &s.currency),
        s.now.format("%Y-%m-%d %H:%M UTC"),
        money(forecast, &s.currency),
        s.until()
    );
    html! {
        figure.chart {
            div.plot {
            (scale::labels(step, &s.currency))
            svg.burn-down viewBox=(format!("0 0 {WIDTH} {HEIGHT}")) role="img"
                aria-labelledby=(format!("{id}-title {id}-desc")) preserveAspectRatio="none" {
                title id=(format!("{id}-title")) { "Burn-down of " (s.label()) }
                desc id=(format!("{id}-desc")) { (summary) }
                rect.backdrop x="0" y="0" width=(WIDTH) height=(HEIGHT) {}
                (scale::grid(WIDTH, HEIGHT))
                @for &pct in &b.notify_at {
                    @let v = y(s.amount * pct / 100.0);
                    line.notify-at x1="0" x2=(WIDTH) y1=(format!("{v:.1}")) y2=(format!("{v:.1}")) {
                        title { (format!("{pct}%")) " of the amount" }
                    }
                }
                @let a = y(s.amount);
                line.amount x1="0" x2=(WIDTH) y1=(format!("{a:.1}")) y2=(format!("{a:.1}")) {
                    title { "the amount, " (money(s.amount, &s.currency)) }
                }
                line.forecast x1=(format!("{:.1}", x(s.now))) y1=(format!("{:.1}", y(spent)))
                    x2=(WIDTH) y2=(format!("{:.1}", y(forecast))) {
                    title { "forecast " (money(forecast, &s.currency)) }
                }
                polyline.spend points=(line.join(" ")) {}
            }
            div.axis aria-hidden="true" {
                span { (s.start.with_timezone(&b.timezone).format("%Y-%m-%d %H:%M").to_string()) " " (b.timezone.name()) }
                span { (s.until()) }
            }
            }
            figcaption {
                ul.legend {
                    li { span.swatch.spend-swatch {} "spent so far" }
                    li { span.swatch.forecast-swatch {} "forecast to the period's end" }
                    li { span.swatch.amount-swatch {} "the amount" }
                    li { span.swatch.notify-swatch {} "notice thresholds" }
                }
                p.visually-hidden { (summary) }
            }
        }
    }
}

/// `label` as an HTML id: letters, digits and dashes.
fn slug(label: &str) -> String {
    label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}
