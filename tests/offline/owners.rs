//! Instances something else owns (an Auto Scaling group, an EKS node group, Karpenter,
//! SkyPilot, Batch, a Spot Fleet, an EC2 Fleet; Alibaba Cloud's ESS groups and ACK node pools;
//! Tencent Cloud's AS groups and TKE node pools; an unknown system tag): whatever a rule asks,
//! the engine does nothing to one alone and names its owner, and `ebb plan` shows them.
//! 2026-11-30 is a Monday.

use crate::common;

use common::*;
use ebb::engine::{tags_forbid_stop, Action, Code, InstanceFacts};
use ebb::fleet::{Instance, InstanceState};
use std::process::Output;

/// Office hours 09:00-18:00 UTC on weekdays, for dev boxes: stopped after the close.
const OFFICE: &str = r#"
policies:
  - name: office
    match: {tags: {env: dev}}
    work_hours:
      timezone: UTC
      periods: [{days: mon-fri, start: "09:00", stop: "18:00"}]
"#;

const EVENING: &str = "2026-11-30T18:05:00Z";

/// An owner's tags, the code that names it and words its reason says.
type OwnerCase = (&'static [(&'static str, &'static str)], Code, &'static str);

/// Each owner kind's case (Karpenter twice: its NodePool tag and the older Provisioner's).
const OWNERS: &[OwnerCase] = &[
    (
        &[("aws:autoscaling:groupName", "inference")],
        Code::OwnedByAsg,
        "Auto Scaling group inference",
    ),
    (
        &[
            ("aws:autoscaling:groupName", "eks-gpu-12ab"),
            ("eks:cluster-name", "prod"),
            ("eks:nodegroup-name", "gpu"),
        ],
        Code::OwnedByEksNodegroup,
        "EKS node group gpu of cluster prod",
    ),
    (
        &[("karpenter.sh/nodepool", "gpu-pool")],
        Code::OwnedByKarpenter,
        "Karpenter NodePool gpu-pool",
    ),
    (
        &[("karpenter.sh/provisioner-name", "old-prov")],
        Code::OwnedByKarpenter,
        "Karpenter NodePool old-prov",
    ),
    (
        &[("skypilot-cluster-name", "sky-llm")],
        Code::OwnedBySkypilot,
        "SkyPilot cluster sky-llm",
    ),
    (
        &[("aws:batch:compute-environment", "ce-gpu")],
        Code::OwnedByBatch,
        "AWS Batch compute environment ce-gpu",
    ),
    (
        &[("aws:ec2spot:fleet-request-id", "sfr-1")],
        Code::OwnedBySpotFleet,
        "Spot Fleet request sfr-1",
    ),
    (
        &[("aws:ec2:fleet-id", "fleet-1")],
        Code::OwnedByEc2Fleet,
        "EC2 Fleet fleet-1",
    ),
    (
        &[("aws:elasticmapreduce:job-flow-id", "j-1")],
        Code::OwnedByUnknown,
        "tag aws:elasticmapreduce:job-flow-id=j-1",
    ),
    // Alibaba Cloud: an ESS group's instance, an ACK node pool's node (also in the pool's ESS
    // group: ACK wins), a cluster's node without a pool, an unknown system tag.
    (
        &[("acs:autoscaling:scalingGroupId", "asg-bp1ess")],
        Code::OwnedByEss,
        "Alibaba Cloud Auto Scaling group asg-bp1ess",
    ),
    (
        &[
            ("ack.aliyun.com", "c61da77e"),
            ("ack.alibabacloud.com/nodepool-id", "np29c87"),
            ("acs:autoscaling:scalingGroupId", "asg-bp1pool"),
        ],
        Code::OwnedByAck,
        "ACK node pool np29c87 of cluster c61da77e",
    ),
    (
        &[("ack.aliyun.com", "c61da77e")],
        Code::OwnedByAck,
        "ACK cluster c61da77e",
    ),
    (
        &[("acs:ecs:somethingnew", "x")],
        Code::OwnedByUnknown,
        "tag acs:ecs:somethingnew=x",
    ),
    // Tencent Cloud: an AS group's instance, a TKE node pool's node (also in its AS group: TKE
    // wins), an unknown system tag.
    (
        &[(
            "tencentcloud:autoscaling:auto-scaling-group-id",
            "asg-2tayppxt",
        )],
        Code::OwnedByTencentAs,
        "Tencent Cloud Auto Scaling group asg-2tayppxt",
    ),
    (
        &[
            ("tke-clusterId", "cls-23iwxs1l"),
            ("tke-nodepool-id", "np-8k2j"),
            (
                "tencentcloud:autoscaling:auto-scaling-group-id",
                "asg-tkepool",
            ),
        ],
        Code::OwnedByTke,
        "TKE node pool np-8k2j of cluster cls-23iwxs1l",
    ),
    (
        &[("tencentcloud:somethingnew", "y")],
        Code::OwnedByUnknown,
        "tag tencentcloud:somethingnew=y",
    ),
];

/// A dev box carrying `owner`'s tags.
fn owned(id: &str, owner: &[(&str, &str)]) -> Instance {
    let mut tags = vec![("env", "dev")];
    tags.extend_from_slice(owner);
    instance(id, &tags)
}

#[test]
fn each_owner_keeps_its_instance_from_the_close_with_a_code_naming_it() {
    let set = policies(OFFICE);
    for (tags, code, names) in OWNERS {
        let d = World::with(vec![owned("i-1", tags)]).one(EVENING, &set);
        assert_eq!((d.action, d.code), (Action::None, *code), "{tags:?}");
        assert!(d.reason.contains(names), "{}", d.reason);
        assert!(d.reason.contains("instead"), "{}", d.reason);
        assert!(
            d.reason.contains("the policy alone would stop"),
            "{}",
            d.reason
        );
    }
    // The same box without an owner is stopped.
    let d = World::with(vec![instance("i-1", &[("env", "dev")])]).one(EVENING, &set);
    assert_eq!((d.action, d.code), (Action::Stop, Code::OutsideHours));
}

#[test]
fn reasons_say_what_each_owner_offers_instead() {
    let set = policies(OFFICE);
    let reason = |tags: &[(&str, &str)]| {
        World::with(vec![owned("i-1", tags)])
            .one(EVENING, &set)
            .reason
    };
    assert!(reason(OWNERS[0].0).contains("scale the group itself"));
    assert!(reason(OWNERS[2].0).contains("disruption budgets"));
    assert!(reason(OWNERS[4].0).contains("autostop"));
    assert!(reason(OWNERS[5].0).contains("minimum vCPUs"));
    assert!(reason(OWNERS[6].0).contains("target capacity"));
    assert!(reason(OWNERS[9].0).contains("scale the scaling group itself"));
    assert!(reason(OWNERS[10].0).contains("scale the node pool itself"));
    assert!(reason(OWNERS[13].0).contains("scale the scaling group itself"));
    assert!(reason(OWNERS[14].0).contains("scale the node pool itself"));
}

#[test]
fn cloudformation_and_launch_template_tags_do_not_make_an_owner() {
    let set = policies(OFFICE);
    let plain = owned(
        "i-1",
        &[
            ("aws:cloudformation:stack-name", "gpu-box"),
            ("aws:cloudformation:logical-id", "Box"),
            ("aws:ec2launchtemplate:id", "lt-0abc"),
            ("aws:ec2launchtemplate:version", "3"),
        ],
    );
    let d = World::with(vec![plain]).one(EVENING, &set);
    assert_eq!((d.action, d.code), (Action::Stop, Code::OutsideHours));
}

#[test]
fn an_owned_instance_is_never_hibernated_given_notice_or_started() {
    let asg = OWNERS[0].0;
    let hibernate =
        policies(&OFFICE.replace("periods:", "outside_hours: hibernate\n      periods:"));
    let d = World::with(vec![owned("i-1", asg)]).one(EVENING, &hibernate);
    assert_eq!((d.action, d.code), (Action::None, Code::OwnedByAsg));
    assert!(d.reason.contains("would hibernate"), "{}", d.reason);

    let notice = policies(&format!("{OFFICE}    notify: {{before: 15m}}\n"));
    let d = World::with(vec![owned("i-1", asg)]).one("2026-11-30T17:50:00Z", &notice);
    assert_eq!((d.action, d.code), (Action::None, Code::OwnedByAsg));
    assert!(d.reason.contains("would notify"), "{}", d.reason);

    let mut stopped = owned("i-1", asg);
    stopped.state = InstanceState::Stopped;
    let by_ebb = InstanceFacts {
        stopped_by_ebb_at: Some(t("2026-11-30T18:01:00Z")),
        ..Default::default()
    };
    let d = World::with(vec![stopped])
        .facts("i-1", by_ebb)
        .one("2026-12-01T09:05:00Z", &policies(OFFICE));
    assert_eq!((d.action, d.code), (Action::None, Code::OwnedByAsg));
    assert!(d.reason.contains("would start"), "{}", d.reason);
}

#[test]
fn an_owned_instance_is_never_moved_to_spot() {
    let set = policies(
        r#"
policies:
  - name: training
    match: {tags: {workload: training}}
    spot: {min_savings: 40%, checkpoint_max_age: 30m}
"#,
    );
    let trainer = |extra: &[(&str, &str)]| {
        let mut tags = vec![
            ("workload", "training"),
            ("ebb:interruptible", "true"),
            ("ebb:checkpoint-at", "2026-11-30T11:50:00Z"),
        ];
        tags.extend_from_slice(extra);
        World::with(vec![instance("i-train", &tags)]).price("us-east-1", "g5.xlarge", 1.0, 0.3)
    };
    let d = trainer(&[]).one("2026-11-30T12:00:00Z", &set);
    assert_eq!(d.action, Action::MigrateToSpot, "{}", d.reason);
    let d = trainer(&[("skypilot-cluster-name", "sky-train")]).one("2026-11-30T12:00:00Z", &set);
    assert_eq!((d.action, d.code), (Action::None, Code::OwnedBySkypilot));
    assert!(d.reason.contains("would migrate_to_spot"), "{}", d.reason);
}

#[test]
fn the_check_before_each_call_refuses_an_owned_instance() {
    let now = t(EVENING);
    assert_eq!(
        tags_forbid_stop(&instance("i-1", &[("env", "dev")]), now),
        None
    );
    for (tags, _, names) in OWNERS {
        let why = tags_forbid_stop(&owned("i-1", tags), now).expect("refused");
        assert!(why.contains(names), "{why}");
    }
}

/// The snapshot of one dev box of each owner kind and one nobody owns.
fn snapshot() -> String {
    let mut text = String::from("instances:\n");
    for (n, (tags, _, _)) in OWNERS.iter().enumerate() {
        let tags: Vec<String> = tags
            .iter()
            .map(|(k, v)| format!("\"{k}\": \"{v}\""))
            .collect();
        text.push_str(&format!(
            "  - {{id: i-owned{n}, region: us-east-1, type: g5.xlarge, state: running, tags: {{env: dev, {}}}}}\n",
            tags.join(", ")
        ));
    }
    text.push_str(
        "  - {id: i-plain, region: us-east-1, type: g5.xlarge, state: running, tags: {env: dev}}\n",
    );
    // An owner given in the snapshot instead of by tags (an older snapshot has neither).
    text.push_str("  - {id: i-given, region: us-east-1, type: g5.xlarge, state: running, tags: {env: dev}, owner: {kind: karpenter, nodepool: given}}\n");
    text
}

fn plan(format: &str, dir: &tempfile::TempDir) -> Output {
    let fleet = dir.path().join("fleet.yaml");
    std::fs::write(&fleet, snapshot()).unwrap();
    let policies = dir.path().join("policies");
    std::fs::create_dir(&policies).unwrap();
    std::fs::write(policies.join("office.yaml"), OFFICE).unwrap();
    ebb(&[
        "plan",
        "--policies",
        policies.to_str().unwrap(),
        "--fleet",
        fleet.to_str().unwrap(),
        "--at",
        EVENING,
        "--format",
        format,
    ])
}

#[test]
fn plan_stops_only_the_unowned_box_after_hours_and_names_every_owner() {
    let dir = tempfile::tempdir().unwrap();
    let o = plan("json", &dir);
    assert!(o.status.success(), "{o:?}");
    let items: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    let by_id = |id: &str| items.iter().find(|i| i["instance"] == id).unwrap();
    for (n, (_, code, names)) in OWNERS.iter().enumerate() {
        let item = by_id(&format!("i-owned{n}"));
        assert_eq!(item["action"], "none", "{item}");
        assert_eq!(item["code"], code.as_str(), "{item}");
        assert!(item["reason"].as_str().unwrap().contains(names), "{item}");
        assert!(item["owner"]["kind"].is_string(), "{item}");
    }
    assert_eq!(by_id("i-owned1")["owner"]["cluster"], "prod");
    assert_eq!(by_id("i-owned1")["owner"]["nodegroup"], "gpu");
    assert_eq!(by_id("i-given")["code"], "owned_by_karpenter");
    assert_eq!(by_id("i-given")["owner"]["nodepool"], "given");
    let plain = by_id("i-plain");
    assert_eq!(
        (&plain["action"], &plain["code"]),
        (&"stop".into(), &"outside_hours".into())
    );
    assert_eq!(plain["owner"], serde_json::Value::Null);
    let acted = items.iter().filter(|i| i["action"] != "none").count();
    assert_eq!(acted, 1, "only the unowned box is acted on: {items:#?}");
}

#[test]
fn the_plan_table_lists_what_policies_match_but_cannot_reach_by_owner() {
    let dir = tempfile::tempdir().unwrap();
    let o = plan("table", &dir);
    assert!(o.status.success(), "{o:?}");
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.starts_with("INSTANCE"), "{out}");
    assert!(out.lines().next().unwrap().contains("OWNER"), "{out}");
    let (_, owned) = out
        .split_once("owned by something else")
        .unwrap_or_else(|| panic!("no list of owned instances: {out}"));
    assert!(
        owned.contains("Auto Scaling group inference: i-owned0\n"),
        "{owned}"
    );
    assert!(
        owned.contains("Karpenter NodePool given: i-given\n"),
        "{owned}"
    );
    assert!(
        owned.contains("instead, use SkyPilot's autostop"),
        "{owned}"
    );
    assert!(!owned.contains("i-plain"), "{owned}");
}

#[test]
fn explain_names_the_owner() {
    let dir = tempfile::tempdir().unwrap();
    assert!(plan("json", &dir).status.success());
    let o = ebb(&[
        "explain",
        "i-owned1",
        "--policies",
        dir.path().join("policies").to_str().unwrap(),
        "--fleet",
        dir.path().join("fleet.yaml").to_str().unwrap(),
        "--at",
        EVENING,
    ]);
    assert!(o.status.success(), "{o:?}");
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(
        out.contains("\nowned by EKS node group gpu of cluster prod\n"),
        "{out}"
    );
    assert!(
        out.contains("decision: none [owned_by_eks_nodegroup]"),
        "{out}"
    );
    // The same as JSON, with the steps that led to it.
    let o = ebb(&[
        "explain",
        "i-owned1",
        "--policies",
        dir.path().join("policies").to_str().unwrap(),
        "--fleet",
        dir.path().join("fleet.yaml").to_str().unwrap(),
        "--at",
        EVENING,
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{o:?}");
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json["instance"], "i-owned1", "{json:#}");
    assert_eq!(json["action"], "none");
    assert_eq!(json["code"], "owned_by_eks_nodegroup");
    assert_eq!(json["owner"]["kind"], "eks_nodegroup");
    assert_eq!(json["at"], EVENING);
    assert!(!json["steps"].as_array().unwrap().is_empty(), "{json:#}");
}
