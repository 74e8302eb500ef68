//! An override on a member holds its Auto Scaling group's scale-down (issue 48 point 1): a
//! managed group of two whose member has an override is not scaled down at the close, and the
//! tick says which member and why; once the override is revoked, it is. With
//! `group.protect_members`, the group is scaled down around that member instead.

use super::tick::{Setup, EVENING, LATER, MORNING};
use crate::common;

use aws_sdk_ec2::types::InstanceStateName;

use sqlx::PgPool;

/// Alice's override on `member` for her training run, far ahead so that it covers EVENING
/// whatever the date is now: its id.
fn keep_for_alice(s: &Setup, member: &str) -> String {
    let kept = s.ebb().run(&[
        "override",
        member,
        "--until",
        "87600h",
        "--max-override",
        "87601h",
        "--reason",
        "training run until Friday",
        "--actor",
        "alice",
    ]);
    assert!(kept.status.success(), "{kept:?}");
    String::from_utf8_lossy(&kept.stdout)
        .strip_prefix("override ")
        .and_then(|rest| rest.split(':').next().map(str::to_string))
        .unwrap_or_else(|| panic!("{kept:?}"))
}

#[sqlx::test(migrations = false)]
async fn an_override_on_a_member_holds_the_groups_scale_down(pool: PgPool) {
    let s = Setup::new(&pool, "ca-central-1").await;
    let managed = s.f.managed.clone();
    let group = format!("held-{managed}");
    let members =
        s.f.auto_scaling_group(
            &group,
            2,
            &[("team", "research"), ("ebb:managed", &managed)],
        )
        .await;
    let autoscaling = aws_sdk_autoscaling::Client::new(&common::moto::emulator(s.f.region).await);
    let capacity = || async {
        let out = autoscaling
            .describe_auto_scaling_groups()
            .auto_scaling_group_names(&group)
            .send()
            .await
            .unwrap();
        let g = &out.auto_scaling_groups()[0];
        (g.min_size().unwrap(), g.desired_capacity().unwrap())
    };
    // Overrides are for instances ebb lists: a tick in working hours lists the members.
    let listed = s.tick("2026-11-30T12:00:00Z", &[]);
    assert!(listed.contains("0 actions"), "{listed}");
    let id = keep_for_alice(&s, &members[1]);

    let out = s
        .ebb()
        .env("EBB_LOG", "info")
        .run(&["tick", "--at", EVENING]);
    assert!(out.status.success(), "{out:?}");
    let evening = String::from_utf8_lossy(&out.stdout);
    assert!(
        evening.contains("1 Auto Scaling groups, 0 capacity changes"),
        "{evening}"
    );
    let logged = String::from_utf8_lossy(&out.stderr);
    assert!(logged.contains("scale-down held"), "{logged}");
    assert!(
        logged.contains(&format!(
            "member {} has an override by alice until",
            members[1]
        )),
        "{logged}"
    );
    assert_eq!(capacity().await, (2, 2), "not scaled down");

    let revoked = s.ebb().run(&["override", "--revoke", &id]);
    assert!(revoked.status.success(), "{revoked:?}");
    let later = s.tick(LATER, &[]);
    assert!(
        later.contains("1 Auto Scaling groups, 1 capacity changes (1 succeeded"),
        "{later}"
    );
    assert_eq!(
        capacity().await,
        (0, 0),
        "scaled down once nothing protects a member"
    );
}

/// With `group.protect_members: true`, the same group is scaled down around the member with
/// the override: that member is protected from the group's scale-in and the group keeps just
/// it; at the opening the group is back to two and the protection comes off.
#[sqlx::test(migrations = false)]
async fn with_protect_members_the_group_is_scaled_down_around_the_kept_member(pool: PgPool) {
    let s = Setup::new(&pool, "ca-central-1").await;
    let policy = format!(
        "{}    group:\n      protect_members: true\n",
        super::tick::POLICY
    );
    std::fs::write(s.policies.path().join("research.yaml"), policy).unwrap();
    let managed = s.f.managed.clone();
    let group = format!("around-{managed}");
    let members =
        s.f.auto_scaling_group(
            &group,
            2,
            &[("team", "research"), ("ebb:managed", &managed)],
        )
        .await;
    let autoscaling = aws_sdk_autoscaling::Client::new(&common::moto::emulator(s.f.region).await);
    // Capacity (min, desired) and each member's scale-in protection.
    let described = || async {
        let out = autoscaling
            .describe_auto_scaling_groups()
            .auto_scaling_group_names(&group)
            .send()
            .await
            .unwrap();
        let g = &out.auto_scaling_groups()[0];
        let protection: Vec<(String, bool)> = g
            .instances()
            .iter()
            .map(|i| {
                (
                    i.instance_id().unwrap().to_string(),
                    i.protected_from_scale_in().unwrap_or(false),
                )
            })
            .collect();
        (
            (g.min_size().unwrap(), g.desired_capacity().unwrap()),
            protection,
        )
    };
    s.tick("2026-11-30T12:00:00Z", &[]);
    keep_for_alice(&s, &members[1]);

    let evening = s.tick(EVENING, &[]);
    assert!(
        evening.contains("1 Auto Scaling groups, 1 capacity changes (1 succeeded"),
        "{evening}"
    );
    let (capacity, protection) = described().await;
    assert_eq!(capacity, (1, 1), "down to the one member kept");
    assert_eq!(protection, [(members[1].clone(), true)], "only it is left");
    assert_eq!(
        s.state(&members[1]).await,
        InstanceStateName::Running,
        "the member with the override runs on"
    );
    assert_ne!(s.state(&members[0]).await, InstanceStateName::Running);
    let rows = super::tick::group_audit(&s, "scale_down_group");
    let intent = rows
        .iter()
        .find(|r| r["outcome"] == "intent")
        .unwrap_or_else(|| panic!("{rows:#?}"));
    let reason = intent["reason"].as_str().unwrap();
    assert!(
        reason.contains("group.protect_members")
            && reason.contains(&format!("member {} has an override by alice", members[1])),
        "{reason}"
    );

    let morning = s.tick(MORNING, &[]);
    assert!(
        morning.contains("1 Auto Scaling groups, 1 capacity changes (1 succeeded"),
        "{morning}"
    );
    let (capacity, protection) = described().await;
    assert_eq!(capacity, (2, 2), "the size found put back");
    assert!(
        protection.contains(&(members[1].clone(), false)),
        "ebb's protection taken off: {protection:?}"
    );
}
