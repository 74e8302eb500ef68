//! On-demand prices: EC2 has no cheap API for them (the Price List API is a multi-gigabyte
//! catalogue), so they come from a table in the repository that users can replace.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// On-demand $/hour by region and instance type, with where the figures come from.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OnDemandPrices {
    /// Where the figures were taken from.
    pub source: String,
    /// When they were taken (a date).
    pub as_of: String,
    /// region → instance type → $/hour.
    pub prices: BTreeMap<String, BTreeMap<String, f64>>,
}

/// Why the price table could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PricesError {
    /// The file could not be read.
    #[error("cannot read the on-demand price table {}: {source}; set EBB_PRICES to a readable file", path.display())]
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

impl OnDemandPrices {
    /// Reads a price table (see `deploy/prices.yaml`).
    pub fn load(path: &Path) -> Result<OnDemandPrices, PricesError> {
        let text = std::fs::read_to_string(path).map_err(|source| PricesError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let invalid = |message: String| PricesError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let table: OnDemandPrices = crate::policy::yaml::from_str(&text).map_err(invalid)?;
        for (region, types) in &table.prices {
            if let Some((ty, price)) = types.iter().find(|(_, p)| !(p.is_finite() && **p >= 0.0)) {
                return Err(invalid(format!(
                    "prices.{region}.{ty} is {price}, not a price in $/hour"
                )));
            }
        }
        Ok(table)
    }

    /// The on-demand $/hour of `instance_type` in `region`, when the table lists it.
    pub fn get(&self, region: &str, instance_type: &str) -> Option<f64> {
        self.prices.get(region)?.get(instance_type).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_table_loads_and_states_its_source() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prices.yaml");
        let table = OnDemandPrices::load(&path).unwrap();
        assert!(table.source.starts_with("https://"), "{}", table.source);
        assert!(!table.as_of.is_empty());
        assert_eq!(table.get("us-east-1", "g5.xlarge"), Some(1.006));
        assert_eq!(table.get("us-east-1", "no.such"), None);
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
        let err = OnDemandPrices::load(&path).unwrap_err().to_string();
        assert!(err.contains("prices.us-east-1.g5.xlarge is -1"), "{err}");
    }
}
