//! The price table: EC2 has no cheap API for on-demand or commitment prices (the Price List
//! API is a multi-gigabyte catalogue), so they come from a table in the repository that users
//! can replace, with the commitments the team holds and what a stopped box still pays.

pub use crate::fleet::money::PriceTable;

use crate::fleet::money::{CommitmentKind, PlanKind};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Why the price table could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PricesError {
    /// The file could not be read.
    #[error("cannot read the price table {}: {source}; set EBB_PRICES to a readable file", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The file is not a price table.
    #[error("{}: not a valid price table: {message} (see deploy/prices.yaml for the format)", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// Reads a price table (see `deploy/prices.yaml`): the one place that reads the file.
pub fn load(path: &Path) -> Result<PriceTable, PricesError> {
    let text = std::fs::read_to_string(path).map_err(|source| PricesError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let table: PriceTable =
        crate::policy::yaml::from_str(&text).map_err(|message| PricesError::Invalid {
            path: path.to_path_buf(),
            message,
        })?;
    check(&table).map_err(|message| PricesError::Invalid {
        path: path.to_path_buf(),
        message,
    })?;
    Ok(table)
}

/// The first figure that is not a price, or a held commitment the table cannot price.
fn check(table: &PriceTable) -> Result<(), String> {
    let not_price = |p: f64| !(p.is_finite() && p >= 0.0);
    for (region, types) in &table.prices {
        if let Some((ty, price)) = types.iter().find(|(_, p)| not_price(**p)) {
            return Err(format!(
                "prices.{region}.{ty} is {price}, not a price in $/hour"
            ));
        }
    }
    for (name, rates) in [
        ("savings_plan", &table.savings_plan),
        ("reserved", &table.reserved),
    ] {
        for (region, types) in rates.iter().flat_map(|r| &r.rates) {
            for (ty, terms) in types {
                for (term, rate) in [("1y", terms.one_year), ("3y", terms.three_years)] {
                    if let Some(rate) = rate.filter(|r| not_price(*r)) {
                        return Err(format!(
                            "{name}.rates.{region}.{ty}.{term} is {rate}, not a price in $/hour"
                        ));
                    }
                }
            }
        }
    }
    for (region, types) in &table.subscription {
        for (ty, terms) in types {
            for (months, price) in terms {
                if !(1..=60).contains(months) {
                    return Err(format!(
                        "subscription.{region}.{ty}.{months} is not a term: give the term in months, 1 to 60"
                    ));
                }
                if not_price(*price) {
                    return Err(format!(
                        "subscription.{region}.{ty}.{months} is {price}, not a price a month"
                    ));
                }
            }
        }
    }
    if let Some(stopped) = &table.while_stopped {
        for (region, volumes) in &stopped.ebs_gb_month {
            if let Some((ty, price)) = volumes.iter().find(|(_, p)| not_price(**p)) {
                return Err(format!(
                    "while_stopped.ebs_gb_month.{region}.{ty} is {price}, not a price in $ per GB-month"
                ));
            }
        }
        if let Some((region, price)) = stopped.elastic_ip_hour.iter().find(|(_, p)| not_price(**p))
        {
            return Err(format!(
                "while_stopped.elastic_ip_hour.{region} is {price}, not a price in $/hour"
            ));
        }
    }
    for (i, ri) in table.commitments.reserved_instances.iter().enumerate() {
        let rate = table.commitment_rate(
            CommitmentKind::Reserved,
            ri.term,
            &ri.region,
            &ri.instance_type,
        );
        if rate.is_none() {
            return Err(format!(
                "commitments.reserved_instances[{i}] holds {} in {} for {}, but reserved.rates.{}.{}.{} gives no rate: add it",
                ri.instance_type, ri.region, ri.term.as_str(), ri.region, ri.instance_type, ri.term.as_str()
            ));
        }
    }
    for (i, plan) in table.commitments.savings_plans.iter().enumerate() {
        let at = format!("commitments.savings_plans[{i}]");
        if not_price(plan.hourly_usd) {
            return Err(format!(
                "{at}.hourly_usd is {}, not a commitment in $/hour",
                plan.hourly_usd
            ));
        }
        let scoped = plan.family.is_some() || plan.region.is_some();
        match plan.kind {
            PlanKind::Compute if scoped => {
                return Err(format!(
                    "{at} is a compute plan, which applies to every family and region: remove its family and region, or make it kind: instance_family"
                ))
            }
            PlanKind::InstanceFamily if plan.family.is_none() || plan.region.is_none() => {
                return Err(format!(
                    "{at} is an instance_family plan: give its family (such as g5) and its region"
                ))
            }
            _ => {}
        }
        if table.savings_plan.is_none() {
            return Err(format!(
                "{at} holds a Savings Plan, but the table has no savings_plan rates to price it: add them"
            ));
        }
    }
    check_other_currencies(table)
}

/// The first table of another currency that is not one: a code that is not a currency other
/// than the dollar, a table nested in it, a region priced in two currencies (its hours would
/// be counted twice), or a figure that is not a price.
fn check_other_currencies(table: &PriceTable) -> Result<(), String> {
    let mut priced_in: BTreeMap<&str, &str> =
        table.prices.keys().map(|r| (r.as_str(), "USD")).collect();
    for (code, other) in &table.other_currencies {
        let iso = code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase());
        if !iso || code == "USD" {
            return Err(format!(
                "other_currencies.{code}: name a currency other than the dollar by its ISO 4217 code, such as CNY"
            ));
        }
        if !other.other_currencies.is_empty() {
            return Err(format!(
                "other_currencies.{code} holds other_currencies of its own: list each currency once, at the top"
            ));
        }
        for region in other.prices.keys() {
            if let Some(first) = priced_in.insert(region, code) {
                return Err(format!(
                    "{region} is priced in both {first} and {code}: price each region in the one currency its account is billed in"
                ));
            }
        }
        check(other).map_err(|e| format!("other_currencies.{code}.{e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::money::Term;

    #[test]
    fn the_shipped_table_loads_and_states_its_source() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/prices.yaml");
        let table = load(&path).unwrap();
        assert!(table.source.starts_with("https://"), "{}", table.source);
        assert!(!table.as_of.is_empty());
        assert_eq!(table.get("us-east-1", "g5.xlarge"), Some(1.006));
        assert_eq!(table.get("us-east-1", "no.such"), None);
        let sp = table.savings_plan.as_ref().unwrap();
        let ri = table.reserved.as_ref().unwrap();
        let stopped = table.while_stopped.as_ref().unwrap();
        for source in [&sp.source, &ri.source, &stopped.source] {
            assert!(source.starts_with("https://aws.amazon.com/"), "{source}");
        }
        // Every commitment rate is below the on-demand price, and three years below one.
        for (kind, rates) in [
            (CommitmentKind::SavingsPlan, sp),
            (CommitmentKind::Reserved, ri),
        ] {
            for (region, types) in &rates.rates {
                for ty in types.keys() {
                    let on_demand = table.get(region, ty).unwrap();
                    let one = table
                        .commitment_rate(kind, Term::OneYear, region, ty)
                        .unwrap();
                    let three = table
                        .commitment_rate(kind, Term::ThreeYears, region, ty)
                        .unwrap();
                    assert!(three < one && one < on_demand, "{kind:?} {region} {ty}");
                }
            }
        }
        // 100 GiB of gp3 at $0.08 per GB-month of 730 hours: $8 a month, 8/730 an hour.
        let gp3 = stopped.volume_hour("us-east-1", "gp3", 100).unwrap();
        assert!((gp3 - 8.0 / 730.0).abs() < 1e-12, "{gp3}");
        assert_eq!(stopped.volume_hour("us-east-1", "no-such-type", 100), None);
        assert_eq!(stopped.elastic_ip("us-west-2"), Some(0.005));
        assert!(table.commitments.is_empty());
    }

    fn load_text(text: &str) -> Result<PriceTable, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.yaml");
        std::fs::write(&path, text).unwrap();
        load(&path).map_err(|e| e.to_string())
    }

    const ON_DEMAND: &str = "source: x\nas_of: y\nprices:\n  us-east-1:\n    g5.xlarge: 1.0\n";

    #[test]
    fn prices_in_another_currency_are_a_table_apart_and_a_region_has_one_currency() {
        let cny = format!(
            "{ON_DEMAND}other_currencies:\n  CNY:\n    source: z\n    as_of: w\n    prices:\n      cn-hangzhou:\n        ecs.gn7i-c8g1.2xlarge: 8.5\n"
        );
        let table = load_text(&cny).unwrap();
        assert_eq!(table.get("cn-hangzhou", "ecs.gn7i-c8g1.2xlarge"), None);
        let yuan = &table.other_currencies["CNY"];
        assert_eq!(yuan.get("cn-hangzhou", "ecs.gn7i-c8g1.2xlarge"), Some(8.5));
        let twice = cny.replace("cn-hangzhou", "us-east-1");
        let err = load_text(&twice).unwrap_err();
        assert!(
            err.contains("us-east-1 is priced in both USD and CNY"),
            "{err}"
        );
        let dollar = cny.replace("CNY", "USD");
        let err = load_text(&dollar).unwrap_err();
        assert!(err.contains("ISO 4217"), "{err}");
        let negative = cny.replace("8.5", "-1");
        let err = load_text(&negative).unwrap_err();
        assert!(
            err.contains("other_currencies.CNY.prices.cn-hangzhou"),
            "{err}"
        );
    }

    #[test]
    fn subscription_prices_are_by_the_terms_months() {
        let monthly = format!(
            "{ON_DEMAND}subscription:\n  us-east-1:\n    g5.xlarge: {{1: 600.0, 12: 450.0}}\n"
        );
        let table = load_text(&monthly).unwrap();
        assert_eq!(table.subscription["us-east-1"]["g5.xlarge"][&12], 450.0);
        let err = load_text(&monthly.replace("12:", "0:")).unwrap_err();
        assert!(
            err.contains("subscription.us-east-1.g5.xlarge.0 is not a term"),
            "{err}"
        );
        let err = load_text(&monthly.replace("450.0", "-1")).unwrap_err();
        assert!(err.contains("not a price a month"), "{err}");
    }

    #[test]
    fn a_table_of_on_demand_prices_alone_still_loads() {
        let table = load_text(ON_DEMAND).unwrap();
        assert_eq!(table.get("us-east-1", "g5.xlarge"), Some(1.0));
        assert!(table.savings_plan.is_none() && table.reserved.is_none());
        assert!(table.while_stopped.is_none() && table.commitments.is_empty());
    }

    #[test]
    fn held_commitments_load_with_their_rates() {
        let text = format!(
            "{ON_DEMAND}reserved:\n  source: r\n  as_of: d\n  rates:\n    us-east-1:\n      g5.xlarge: {{1y: 0.6}}\n\
             savings_plan:\n  source: s\n  as_of: d\n  rates:\n    us-east-1:\n      g5.xlarge: {{3y: 0.5}}\n\
             commitments:\n  reserved_instances:\n    - {{instance_type: g5.xlarge, region: us-east-1, count: 2, term: 1y}}\n\
             \x20 savings_plans:\n    - {{kind: instance_family, family: g5, region: us-east-1, hourly_usd: 1.5, term: 3y}}\n"
        );
        let table = load_text(&text).unwrap();
        let ri = &table.commitments.reserved_instances[0];
        assert_eq!((ri.count, ri.term), (2, Term::OneYear));
        let plan = &table.commitments.savings_plans[0];
        assert!(plan.covers("us-east-1", "g5.12xlarge"));
        assert!(!plan.covers("us-west-2", "g5.xlarge") && !plan.covers("us-east-1", "g6.xlarge"));
        let rate = table.commitment_rate(
            CommitmentKind::SavingsPlan,
            Term::ThreeYears,
            "us-east-1",
            "g5.xlarge",
        );
        assert_eq!(rate, Some(0.5));
    }

    #[test]
    fn a_held_reservation_without_its_rate_is_refused() {
        let text = format!(
            "{ON_DEMAND}commitments:\n  reserved_instances:\n    - {{instance_type: g5.xlarge, region: us-east-1, count: 1, term: 3y}}\n"
        );
        let err = load_text(&text).unwrap_err();
        assert!(
            err.contains("reserved.rates.us-east-1.g5.xlarge.3y gives no rate"),
            "{err}"
        );
    }

    #[test]
    fn an_instance_family_plan_needs_its_family_and_region() {
        let text = format!(
            "{ON_DEMAND}savings_plan:\n  source: s\n  as_of: d\n  rates: {{}}\n\
             commitments:\n  savings_plans:\n    - {{kind: instance_family, hourly_usd: 1.0, term: 1y}}\n"
        );
        let err = load_text(&text).unwrap_err();
        assert!(err.contains("give its family"), "{err}");
    }

    #[test]
    fn a_negative_volume_price_is_refused() {
        let text = format!(
            "{ON_DEMAND}while_stopped:\n  source: s\n  as_of: d\n  ebs_gb_month:\n    us-east-1:\n      gp3: -0.08\n"
        );
        let err = load_text(&text).unwrap_err();
        assert!(
            err.contains("while_stopped.ebs_gb_month.us-east-1.gp3 is -0.08"),
            "{err}"
        );
    }

    #[test]
    fn a_negative_price_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.yaml");
        std::fs::write(
            &path,
            "source: x\nas_of: y\nprices:\n  us-east-1:\n    g5.xlarge: -1\n",
        )
        .unwrap();
        let err = load(&path).unwrap_err().to_string();
        assert!(err.contains("prices.us-east-1.g5.xlarge is -1"), "{err}");
    }
}
