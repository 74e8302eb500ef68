//! An EKS managed node group scheduled through EKS, `ebb tick` end to end against moto and a
//! real Postgres. moto keeps EKS node groups apart from Auto Scaling (its node groups launch
//! nothing), so the node group's Auto Scaling group is made beside it, tagged as EKS tags the
//! one it makes; and moto has no DescribeUpdate (its route answers 404), so each change stays
//! unknown until it is resolved from the node group's scaling config after the in-flight
//! window (`EBB_TICK_DEADLINE` 5 minutes plus the 2-minute AWS call limit).

use crate::common;

use aws_sdk_ec2::types::InstanceStateName;
use aws_sdk_eks::types::{NodegroupScalingConfig, VpcConfigRequest};
use common::moto::{states, Fixture};
use common::Ebb;
use serde_json::Value;
use sqlx::PgPool;

const POLICY: &str = r#"
policies:
  - name: research-hours
    match:
      tags: {team: research}
    work_hours:
      timezone: Europe/London
      periods:
        - {days: mon-fri, start: "09:00", stop: "19:00"}
      busy_defers_stop: false
"#;

/// `ebb tick --at at`, with this test's database, policies, region and management tag.
fn tick(ebb: &Ebb, at: &str) -> String {
    let out = ebb.run(&["tick", "--at", at]);
    assert!(out.status.success(), "tick at {at} failed: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The audit rows with `action`, as JSON objects.
fn group_audit(ebb: &Ebb, action: &str) -> Vec<Value> {
    let out = ebb.run(&["audit", "--action", action, "--format", "json"]);
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

fn outcomes(rows: &[Value]) -> Vec<&str> {
    rows.iter()
        .map(|r| r["outcome"].as_str().unwrap())
        .collect()
}

/// A node group of two GPU instances opted in and matching the policy is scaled through EKS:
/// after the close its scaling config has desired and min 0 and max 2 (EKS refuses 0), its Auto
/// Scaling group is never changed through the group API (which EKS would undo) and no member is
/// stopped; each change is unknown while DescribeUpdate cannot be read (moto's 404), never
/// taken for done, and resolved from the scaling config later; at the opening the size found is
/// back. The audit log verifies.
#[sqlx::test(migrations = false)]
async fn an_eks_node_group_is_scaled_through_eks_at_the_close_and_back_at_the_opening(
    pool: PgPool,
) {
    let f = Fixture::new("ca-west-1").await;
    let managed = f.managed.clone();
    let config = common::moto::emulator(f.region).await;
    let eks = aws_sdk_eks::Client::new(&config);
    let autoscaling = aws_sdk_autoscaling::Client::new(&config);
    let cluster = format!("research-{managed}");
    eks.create_cluster()
        .name(&cluster)
        .role_arn("arn:aws:iam::123456789012:role/eks-cluster")
        .resources_vpc_config(VpcConfigRequest::builder().subnet_ids("subnet-1").build())
        .send()
        .await
        .unwrap();
    eks.create_nodegroup()
        .cluster_name(&cluster)
        .nodegroup_name("gpu")
        .node_role("arn:aws:iam::123456789012:role/eks-node")
        .subnets("subnet-1")
        .scaling_config(
            NodegroupScalingConfig::builder()
                .min_size(2)
                .desired_size(2)
                .max_size(2)
                .build(),
        )
        .tags("ebb:managed", &managed)
        .send()
        .await
        .unwrap();
    let scaling = || async {
        let out = eks
            .describe_nodegroup()
            .cluster_name(&cluster)
            .nodegroup_name("gpu")
            .send()
            .await
            .unwrap();
        let s = out.nodegroup().unwrap().scaling_config().unwrap();
        (
            s.min_size().unwrap(),
            s.desired_size().unwrap(),
            s.max_size().unwrap(),
        )
    };
    let group = format!("eks-gpu-{managed}");
    let members = f
        .auto_scaling_group(
            &group,
            2,
            &[
                ("team", "research"),
                ("ebb:managed", &managed),
                ("eks:cluster-name", &cluster),
                ("eks:nodegroup-name", "gpu"),
            ],
        )
        .await;
    assert_eq!(members.len(), 2);
    let group_capacity = || async {
        let out = autoscaling
            .describe_auto_scaling_groups()
            .auto_scaling_group_names(&group)
            .send()
            .await
            .unwrap();
        let g = &out.auto_scaling_groups()[0];
        (
            g.min_size().unwrap(),
            g.desired_capacity().unwrap(),
            g.max_size().unwrap(),
        )
    };

    let policies = tempfile::tempdir().unwrap();
    std::fs::write(policies.path().join("research.yaml"), POLICY).unwrap();
    let ebb = Ebb::on(&common::migrated_for_runtime(&pool).await)
        .env("EBB_POLICIES", policies.path())
        .env("EBB_REGIONS", f.region)
        .env("EBB_MANAGED_TAG", format!("ebb:managed={managed}"));

    // The close: UpdateNodegroupConfig, whose update moto cannot describe.
    tick(&ebb, "2026-11-30T20:00:00Z");
    assert_eq!(scaling().await, (0, 0, 2), "desired and min 0, max kept");
    assert_eq!(
        group_capacity().await,
        (2, 2, 2),
        "never UpdateAutoScalingGroup on a node group's group"
    );
    let downs = group_audit(&ebb, "scale_down_group");
    assert_eq!(outcomes(&downs), ["intent"], "a 404 is no success");
    let reason = downs[0]["reason"].as_str().unwrap();
    assert!(reason.contains("UpdateNodegroupConfig"), "{reason}");
    let states = states(&f.ec2, &members).await;
    for member in &members {
        assert_eq!(states[member], InstanceStateName::Running, "{member}");
    }

    // Past the in-flight window: resolved from the node group's scaling config.
    tick(&ebb, "2026-11-30T20:10:00Z");
    let downs = group_audit(&ebb, "scale_down_group");
    assert_eq!(outcomes(&downs), ["intent", "succeeded"]);
    let reason = downs[1]["reason"].as_str().unwrap();
    assert!(reason.contains("could not be read"), "{reason}");
    tick(&ebb, "2026-11-30T20:20:00Z");
    assert_eq!(group_audit(&ebb, "scale_down_group").len(), 2, "one change");

    // The opening puts back what ebb found, through EKS again.
    tick(&ebb, "2026-12-01T09:05:00Z");
    assert_eq!(scaling().await, (2, 2, 2), "the size found is back");
    tick(&ebb, "2026-12-01T09:15:00Z");
    let ups = group_audit(&ebb, "restore_group");
    assert_eq!(outcomes(&ups), ["intent", "succeeded"]);
    assert_eq!(group_capacity().await, (2, 2, 2));
    assert!(ebb.run(&["audit", "verify"]).status.success());
}
