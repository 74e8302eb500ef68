//! The billing model: for each box paid by the hour whose price table (in its own currency)
//! also prices a subscription of its type, what a month costs each way from the hours the
//! policies leave it running, the break-even of each term, and whether to switch. ebb only
//! advises: the switch is the cloud's own call (`ModifyInstanceChargeType` on Alibaba Cloud,
//! `ModifyInstancesChargeType` on Tencent Cloud), made by a person. A box the policies stop
//! most nights is advised against a subscription, which would lose what stopping saves.

use super::{Period, MONTH_HOURS};
use crate::fleet::money::PriceTable;
use crate::fleet::{Charge, Cloud, Instance, Lifecycle};

/// One term's figures for one box.
#[derive(Debug, Clone, PartialEq)]
pub struct TermPrice {
    /// The term, in months.
    pub months: u32,
    /// What a month of it costs.
    pub a_month: f64,
    /// The running hours a month at which it costs what paying by the hour does.
    pub break_even_hours: f64,
    /// What it saves a month against paying by the hour after the policies (negative: it
    /// costs more).
    pub saving_a_month: f64,
}

/// The advice on one box's billing model.
#[derive(Debug, Clone, PartialEq)]
pub struct SubscriptionAdvice {
    /// The instance.
    pub instance: String,
    /// Its region.
    pub region: String,
    /// Its type.
    pub instance_type: String,
    /// The currency of every figure (the price table's).
    pub currency: String,
    /// The hours a month it runs after the policies.
    pub running_hours_a_month: f64,
    /// What a month costs paid by the hour, after the policies.
    pub pay_as_you_go_a_month: f64,
    /// What a month would cost paid by the hour had it run all month.
    pub all_month_a_month: f64,
    /// Each term the table prices.
    pub terms: Vec<TermPrice>,
    /// The term to switch to, if any saves.
    pub advised_months: Option<u32>,
    /// Why, in words.
    pub why: String,
    /// The cloud call that makes the switch, for a person to make.
    pub action: Option<String>,
}

/// The advice on `inst`'s billing model, from `running_s` seconds of running over `period`
/// after the policies, priced by the first of `tables` (currency, table) that prices both its
/// hour and a subscription of its type in its region. `None` for a box that is not paid by the
/// hour on demand, that something else owns (its owner decides how it is paid for), or that
/// no table prices so.
pub fn advise(
    inst: &Instance,
    running_s: i64,
    period: &Period,
    tables: &[(&str, &PriceTable)],
) -> Option<SubscriptionAdvice> {
    let by_the_hour =
        inst.billing.charge == Charge::PayAsYouGo && inst.lifecycle == Lifecycle::OnDemand;
    if !by_the_hour || inst.owner().is_some() {
        return None;
    }
    let (currency, hourly, terms) = tables.iter().find_map(|(currency, table)| {
        let hourly = table.get(&inst.region, &inst.instance_type)?;
        let terms = table
            .subscription
            .get(&inst.region)?
            .get(&inst.instance_type)?;
        (hourly > 0.0 && !terms.is_empty()).then_some((*currency, hourly, terms))
    })?;
    if period.hours() <= 0.0 {
        return None;
    }
    let hours = running_s as f64 / 3600.0 * MONTH_HOURS / period.hours();
    let pay_as_you_go = hours * hourly;
    let all_month = MONTH_HOURS * hourly;
    let terms: Vec<TermPrice> = terms
        .iter()
        .map(|(&months, &a_month)| TermPrice {
            months,
            a_month,
            break_even_hours: a_month / hourly,
            saving_a_month: pay_as_you_go - a_month,
        })
        .collect();
    let best = terms
        .iter()
        .filter(|t| t.saving_a_month >= 0.01)
        .max_by(|a, b| a.saving_a_month.total_cmp(&b.saving_a_month));
    let cheapest = terms
        .iter()
        .min_by(|a, b| a.a_month.total_cmp(&b.a_month))?;
    let why = match best {
        Some(t) => format!(
            "it runs {hours:.0} h a month after the policies, over the {:.0} h break-even of a {}-month term: {:.2} {currency} a month against {pay_as_you_go:.2} paid by the hour",
            t.break_even_hours, t.months, t.a_month
        ),
        None if cheapest.a_month < all_month => format!(
            "the policies leave it running {hours:.0} h a month, under the {:.0} h break-even of the cheapest term ({} months, {:.2} {currency} a month): paid by the hour it costs {pay_as_you_go:.2}; a subscription would lose the {:.2} {currency} a month that stopping it saves",
            cheapest.break_even_hours,
            cheapest.months,
            cheapest.a_month,
            all_month - pay_as_you_go
        ),
        None => format!(
            "the cheapest term ({} months, {:.2} {currency} a month) costs more than running it all month by the hour ({all_month:.2})",
            cheapest.months, cheapest.a_month
        ),
    };
    let action = best.and_then(|t| switch_call(inst.billing.cloud, t.months));
    Some(SubscriptionAdvice {
        instance: inst.id.clone(),
        region: inst.region.clone(),
        instance_type: inst.instance_type.clone(),
        currency: currency.to_string(),
        running_hours_a_month: hours,
        pay_as_you_go_a_month: pay_as_you_go,
        all_month_a_month: all_month,
        advised_months: best.map(|t| t.months),
        terms,
        why,
        action,
    })
}

/// The call of `cloud` that moves a box paid by the hour to a subscription of `months`.
fn switch_call(cloud: Cloud, months: u32) -> Option<String> {
    match cloud {
        Cloud::Alibaba => Some(format!(
            "ModifyInstanceChargeType InstanceChargeType=PrePaid Period={months} PeriodUnit=Month"
        )),
        Cloud::Tencent => Some(format!(
            "ModifyInstancesChargeType InstanceChargeType=PREPAID InstanceChargePrepaid.Period={months}"
        )),
        Cloud::Aws => None,
    }
}
