//! What the group tests on the simulated fleet share: an office-hours policy for the
//! `team: inference` groups and a box beside them, so that their region is listed.

use ebb::fleet::{Capacity, ScalingGroup};

/// Office hours for `team: inference`, 09:00-19:00 UTC on weekdays, a busy member no reason to
/// wait.
pub const OFFICE_POLICY: &str = r#"
policies:
  - name: office
    match: {tags: {team: inference}}
    work_hours:
      timezone: UTC
      periods:
        - {days: mon-fri, start: "09:00", stop: "19:00"}
      busy_defers_stop: false
"#;

/// A box of another team in us-east-1, so that the region is listed.
pub const BOX_BESIDE: &str = r#"
instances:
  - id: i-beside
    region: us-east-1
    type: g5.xlarge
    state: running
    tags: {team: other}
"#;

/// An opted-in group of `team: inference` in us-east-1 at `capacity`, with `extra_tags`
/// (an EKS node group's, say) and no members.
pub fn inference_group(
    name: &str,
    capacity: Capacity,
    extra_tags: &[(&str, &str)],
) -> ScalingGroup {
    ScalingGroup {
        name: name.to_string(),
        region: "us-east-1".to_string(),
        tags: [("team", "inference"), ("ebb:managed", "true")]
            .iter()
            .chain(extra_tags)
            .copied()
            .collect(),
        capacity,
        members: Vec::new(),
    }
}
