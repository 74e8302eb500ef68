//! How the advice is shown: JSON, a table for a terminal, Markdown for a pull request or a
//! monthly review.

use super::{Advice, Commitment, IdleReservation, PolicyChange, SubscriptionAdvice, Suggestion};
use chrono::SecondsFormat;
use serde_json::{json, Value};
use std::fmt::Write as _;

fn round(x: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (x * f).round() / f
}

/// The key of a month's saving in `currency`: `monthly_savings_usd`, `monthly_savings_cny`.
fn monthly_savings_key(currency: &str) -> String {
    format!("monthly_savings_{}", currency.to_lowercase())
}

fn suggestion_json(s: &Suggestion) -> Value {
    let mut v = json!({
        "instance": s.instance,
        "type": s.instance_type,
        "suggested_type": s.suggested_type,
        "why": s.why,
        "currency": s.currency,
    });
    v[monthly_savings_key(s.currency)] = json!(round(s.monthly_savings, 2));
    v
}

fn commitment_json(c: &Commitment) -> Value {
    json!({
        "region": c.region,
        "term": c.term.as_str(),
        "hourly_commitment_usd": round(c.hourly_commitment_usd, 4),
        "utilisation_pct": round(c.utilisation_pct, 2),
        "coverage_pct": round(c.coverage_pct, 2),
        "monthly_savings_usd": round(c.monthly_savings_usd, 2),
        "basis": c.basis.as_str(),
    })
}

fn change_json(c: &PolicyChange) -> Value {
    let mut v = json!({
        "policy": c.policy,
        "key": c.key,
        "from": c.from,
        "to": c.to,
        "currency": c.currency,
        "unserved_busy_hours": round(c.unserved_busy_hours, 4),
        "current_unserved_busy_hours": round(c.current_unserved_busy_hours, 4),
        "wrongful_stops": c.wrongful_stops,
        "current_wrongful_stops": c.current_wrongful_stops,
        "yaml_diff": c.yaml_diff,
    });
    v[monthly_savings_key(c.currency)] = json!(round(c.monthly_savings, 2));
    v
}

fn subscription_json(s: &SubscriptionAdvice) -> Value {
    json!({
        "instance": s.instance,
        "region": s.region,
        "type": s.instance_type,
        "currency": s.currency,
        "running_hours_a_month": round(s.running_hours_a_month, 2),
        "pay_as_you_go_a_month": round(s.pay_as_you_go_a_month, 2),
        "all_month_a_month": round(s.all_month_a_month, 2),
        "terms": s.terms.iter().map(|t| json!({
            "months": t.months,
            "a_month": round(t.a_month, 2),
            "break_even_hours": round(t.break_even_hours, 2),
            "saving_a_month": round(t.saving_a_month, 2),
        })).collect::<Vec<_>>(),
        "advised_months": s.advised_months,
        "why": s.why,
        "action": s.action,
    })
}

fn reservation_json(r: &IdleReservation) -> Value {
    let held = &r.last_read;
    json!({
        "reservation": held.id,
        "region": r.region,
        "zone": held.zone,
        "type": held.instance_type,
        "platform": held.platform,
        "kind": held.kind,
        "targeted": held.targeted,
        "size": held.total,
        "ends": held.end.map(|e| e.to_rfc3339_opts(SecondsFormat::Secs, true)),
        "paid_hours": round(r.paid_hours, 2),
        "unused_hours": round(r.unused_hours, 2),
        "unused_usd": r.unused_usd.map(|v| round(v, 2)),
        "unused_usd_a_month": r.unused_usd_a_month.map(|v| round(v, 2)),
        "could_use": r.could_use,
        "why": r.why,
    })
}

/// `$12.30`, or "unknown".
fn usd_or_unknown(v: Option<f64>) -> String {
    v.map_or_else(|| "unknown".to_string(), |v| format!("${v:.2}"))
}

/// A subscription advice's verdict in a few words.
fn verdict(s: &SubscriptionAdvice) -> String {
    match s.advised_months {
        Some(m) => format!("{m}-month subscription"),
        None => "stay by the hour".to_string(),
    }
}

impl Advice {
    fn period_text(&self) -> (String, String) {
        let t = |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
        (t(self.period.from), t(self.period.to))
    }

    /// `{"from", "to", "rightsize": [...], "commitments": [...], "policy_changes": [...],
    /// "roles": {...}, "subscriptions": [...]}`.
    pub fn json(&self) -> String {
        let (from, to) = self.period_text();
        let value = json!({
            "from": from,
            "to": to,
            "rightsize": self.rightsize.iter().map(suggestion_json).collect::<Vec<_>>(),
            "commitments": self.commitments.iter().map(commitment_json).collect::<Vec<_>>(),
            "policy_changes": self.policy_changes.iter().map(change_json).collect::<Vec<_>>(),
            "roles": {
                "commit": self.roles.commit,
                "schedule": self.roles.schedule,
                "spot": self.roles.spot,
            },
            "subscriptions": self.subscriptions.iter().map(subscription_json).collect::<Vec<_>>(),
            "reservations": {
                "period_hours": round(self.period.hours(), 2),
                "hours_read": self.reservations.hours_read.iter().map(|(region, h)| (region.clone(), json!(round(*h, 2)))).collect::<serde_json::Map<_, _>>(),
                "idle": self.reservations.idle.iter().map(reservation_json).collect::<Vec<_>>(),
            },
        });
        format!("{value:#}\n")
    }

    /// A table per section.
    pub fn table(&self) -> String {
        let (from, to) = self.period_text();
        let mut out = format!("advice {from} to {to}\n\nrightsize\n");
        let _ = writeln!(
            out,
            "{:<20} {:<16} {:<16} {:<4} {:>12}  why",
            "instance", "type", "suggested", "cur", "a_month"
        );
        for s in &self.rightsize {
            let _ = writeln!(
                out,
                "{:<20} {:<16} {:<16} {:<4} {:>12.2}  {}",
                s.instance, s.instance_type, s.suggested_type, s.currency, s.monthly_savings, s.why
            );
        }
        out.push_str("\ncommitments (figures on the spend after the policies)\n");
        let _ = writeln!(
            out,
            "{:<16} {:<4} {:<16} {:>12} {:>8} {:>10} {:>12}",
            "region", "term", "basis", "usd_an_hour", "used_%", "covered_%", "usd_a_month"
        );
        for c in &self.commitments {
            let _ = writeln!(
                out,
                "{:<16} {:<4} {:<16} {:>12.4} {:>8.1} {:>10.1} {:>12.2}",
                c.region,
                c.term.as_str(),
                c.basis.as_str(),
                c.hourly_commitment_usd,
                c.utilisation_pct,
                c.coverage_pct,
                c.monthly_savings_usd
            );
        }
        let _ = writeln!(
            out,
            "commit: {}\nschedule: {}\nspot: {}",
            list(&self.roles.commit),
            list(&self.roles.schedule),
            list(&self.roles.spot)
        );
        out.push_str("\npolicy changes\n");
        let _ = writeln!(
            out,
            "{:<28} {:<28} {:>8} {:>8} {:<4} {:>12} {:>12}",
            "policy", "key", "from", "to", "cur", "a_month", "unserved_h"
        );
        for c in &self.policy_changes {
            let _ = writeln!(
                out,
                "{:<28} {:<28} {:>8} {:>8} {:<4} {:>12.2} {:>12.2}",
                c.policy, c.key, c.from, c.to, c.currency, c.monthly_savings, c.unserved_busy_hours
            );
        }
        out.push_str(
            "
subscriptions (figures a month, after the policies; ebb never switches)
",
        );
        let _ = writeln!(
            out,
            "{:<20} {:<24} {:<4} {:>8} {:>12}  advice, why",
            "instance", "type", "cur", "hours", "by_the_hour"
        );
        for s in &self.subscriptions {
            let _ = writeln!(
                out,
                "{:<20} {:<24} {:<4} {:>8.0} {:>12.2}  {}: {}{}",
                s.instance,
                s.instance_type,
                s.currency,
                s.running_hours_a_month,
                s.pay_as_you_go_a_month,
                verdict(s),
                s.why,
                s.action
                    .as_ref()
                    .map(|a| format!(" ({a})"))
                    .unwrap_or_default()
            );
        }
        let _ = writeln!(
            out,
            "\ncapacity reservations held outside ebb, below their size ({})",
            self.reservations.read_words(&self.period)
        );
        let _ = writeln!(
            out,
            "{:<22} {:<24} {:>4} {:>10} {:>10} {:>12}  could use, why",
            "reservation", "type", "size", "paid_h", "unused_h", "unused_usd"
        );
        for r in &self.reservations.idle {
            let _ = writeln!(
                out,
                "{:<22} {:<24} {:>4} {:>10.1} {:>10.1} {:>12}  {}: {}",
                r.last_read.id,
                format!("{} {}", r.last_read.instance_type, r.last_read.zone),
                r.last_read.total,
                r.paid_hours,
                r.unused_hours,
                usd_or_unknown(r.unused_usd),
                list(&r.could_use),
                r.why
            );
        }
        out
    }

    /// Markdown for a pull request or a monthly review, with each change's YAML.
    pub fn markdown(&self) -> String {
        let (from, to) = self.period_text();
        let mut out = format!("### ebb advise, {from} to {to}\n\n#### Right-sizing\n\n");
        if self.rightsize.is_empty() {
            out.push_str("Nothing to resize.\n");
        } else {
            out.push_str(
                "| instance | type | suggested | a month | why |\n|---|---|---|---:|---|\n",
            );
            for s in &self.rightsize {
                let _ = writeln!(
                    out,
                    "| `{}` | {} | {} | {} | {} |",
                    s.instance,
                    s.instance_type,
                    s.suggested_type,
                    crate::budget::money(s.monthly_savings, s.currency),
                    s.why
                );
            }
        }
        out.push_str("\n#### Commitments\n\nSized on the spend after the policies, beside what the same method sizes on the spend before them; both measured on the spend after them.\n\n");
        if self.commitments.is_empty() {
            out.push_str("No commitment rates for the fleet's types.\n");
        } else {
            out.push_str("| region | term | basis | $/hour | used | covered | a month |\n|---|---|---|---:|---:|---:|---:|\n");
            for c in &self.commitments {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {:.4} | {:.1} % | {:.1} % | ${:.2} |",
                    c.region,
                    c.term.as_str(),
                    c.basis.as_str(),
                    c.hourly_commitment_usd,
                    c.utilisation_pct,
                    c.coverage_pct,
                    c.monthly_savings_usd
                );
            }
        }
        let _ = writeln!(
            out,
            "\nCommit: {}. Schedule: {}. Spot: {}.\n\n#### Policy changes\n",
            list(&self.roles.commit),
            list(&self.roles.schedule),
            list(&self.roles.spot)
        );
        if self.policy_changes.is_empty() {
            out.push_str("No change cuts cost without serving less.\n");
        }
        for c in &self.policy_changes {
            let _ = writeln!(
                out,
                "- **{}** `{}`: {} → {}, {} a month less, {:.2} unserved busy hours (now {:.2})\n\n```diff\n{}```\n",
                c.policy,
                c.key,
                c.from,
                c.to,
                crate::budget::money(c.monthly_savings, c.currency),
                c.unserved_busy_hours,
                c.current_unserved_busy_hours,
                c.yaml_diff
            );
        }
        out.push_str("\n#### Subscriptions\n\nA month paid by the hour after the policies, against each subscription term; ebb never switches a box.\n\n");
        if self.subscriptions.is_empty() {
            out.push_str("No box paid by the hour has subscription prices in the price table.\n");
        } else {
            out.push_str("| instance | type | hours a month | by the hour | advice | why |\n|---|---|---:|---:|---|---|\n");
            for s in &self.subscriptions {
                let _ = writeln!(
                    out,
                    "| `{}` | {} | {:.0} | {:.2} {} | {} | {}{} |",
                    s.instance,
                    s.instance_type,
                    s.running_hours_a_month,
                    s.pay_as_you_go_a_month,
                    s.currency,
                    verdict(s),
                    s.why,
                    s.action
                        .as_ref()
                        .map(|a| format!(" (`{a}`)"))
                        .unwrap_or_default()
                );
            }
        }
        let _ = writeln!(
            out,
            "\n#### Capacity reservations\n\nHeld outside ebb and paid whether used or not; {}.\n",
            self.reservations.read_words(&self.period)
        );
        if self.reservations.idle.is_empty() {
            out.push_str("No reservation read ran below its size.\n");
        } else {
            out.push_str("| reservation | type and zone | size | paid hours | unused hours | unused | could use | why |\n|---|---|---:|---:|---:|---:|---|---|\n");
            for r in &self.reservations.idle {
                let _ = writeln!(
                    out,
                    "| `{}` | {} {} | {} | {:.1} | {:.1} | {} | {} | {} |",
                    r.last_read.id,
                    r.last_read.instance_type,
                    r.last_read.zone,
                    r.last_read.total,
                    r.paid_hours,
                    r.unused_hours,
                    usd_or_unknown(r.unused_usd),
                    list(&r.could_use),
                    r.why
                );
            }
        }
        out
    }
}

fn list(ids: &[String]) -> String {
    match ids.is_empty() {
        true => "none".to_string(),
        false => ids.join(", "),
    }
}
