//! Whether a policy's `match` holds for an instance, and why not when it does not.

use crate::fleet::Instance;
use crate::policy::{Policy, TagMatch, TypeGlob};

/// Why a policy does not match an instance; formatted only when someone asks (`explain`), since
/// most policies do not match most instances.
pub(super) enum Mismatch<'a> {
    Region(&'a Instance, &'a [String]),
    NoTag(&'a str),
    TagValue(&'a str, &'a str, &'a str),
    Type(&'a Instance, &'a [TypeGlob]),
}

impl std::fmt::Display for Mismatch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Mismatch::Region(i, regions) => {
                write!(f, "region {} is not in {}", i.region, regions.join(", "))
            }
            Mismatch::NoTag(key) => write!(f, "no tag {key}"),
            Mismatch::TagValue(key, have, want) => write!(f, "tag {key}={have}, wants {want}"),
            Mismatch::Type(i, globs) => {
                let names: Vec<&str> = globs.iter().map(|g| g.pattern.as_str()).collect();
                write!(f, "type {} is not in {}", i.instance_type, names.join(", "))
            }
        }
    }
}

/// Why `policy` does not match `inst`, or `None` when it does.
pub(super) fn mismatch<'a>(policy: &'a Policy, inst: &'a Instance) -> Option<Mismatch<'a>> {
    let m = &policy.matcher;
    if let Some(regions) = &m.regions {
        if !regions.contains(&inst.region) {
            return Some(Mismatch::Region(inst, regions));
        }
    }
    for (key, want) in &m.tags {
        match (want, inst.tag(key)) {
            (_, None) => return Some(Mismatch::NoTag(key)),
            (TagMatch::Equals(v), Some(have)) if v != have => {
                return Some(Mismatch::TagValue(key, have, v))
            }
            _ => {}
        }
    }
    if let Some(globs) = &m.instance_types {
        if !globs.iter().any(|g| g.matches(&inst.instance_type)) {
            return Some(Mismatch::Type(inst, globs));
        }
    }
    None
}
