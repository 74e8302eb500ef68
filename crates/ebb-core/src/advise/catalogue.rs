//! The catalogue shipped in the binary (`deploy/instance-types.yaml`), for offline use.

use crate::fleet::Catalogue;

/// The shipped file's text.
const SHIPPED: &str = include_str!("../../../../deploy/instance-types.yaml");

/// Reads a catalogue file's text; the error names the line and column.
pub fn parse(text: &str) -> Result<Catalogue, String> {
    crate::policy::yaml::from_str(text)
}

/// The catalogue shipped with ebb.
pub fn shipped() -> Catalogue {
    // The file is checked by the tests below: it always parses.
    parse(SHIPPED).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_catalogue_parses_and_holds_the_gpu_families() {
        let c = parse(SHIPPED).unwrap();
        for family in [
            "g4dn", "g5", "g6", "g6e", "gr6", "p3", "p4d", "p4de", "p5", "p5e", "trn1", "inf2",
        ] {
            assert!(
                c.types.keys().any(|t| t.split('.').next() == Some(family)),
                "{family}"
            );
        }
        let p4d = c.get("p4d.24xlarge").unwrap();
        assert_eq!(
            (p4d.gpus, p4d.model.as_str(), p4d.gpu_memory_mib),
            (8, "A100", 40960)
        );
        // An A10G box may take an A100 box's work (same generation), a T4 one may not.
        assert!(c.get("g5.xlarge").unwrap().can_replace(p4d));
        assert!(!c.get("g4dn.xlarge").unwrap().can_replace(p4d));
        // Inferentia does not train.
        assert!(!c
            .get("inf2.xlarge")
            .unwrap()
            .can_replace(c.get("trn1.2xlarge").unwrap()));
        assert_eq!(shipped(), c);
    }
}
