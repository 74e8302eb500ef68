//! An override on a member holds its Auto Scaling group's scale-down (issue 48 point 1): a
//! managed group of two whose member has an override is not scaled down at the close, and the
//! tick says which member and why; once the override is revoked, it is.

use super::tick::{Setup, EVENING, LATER};
use crate::common;

use sqlx::PgPool;

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
    // Far ahead, so that it covers EVENING whatever the date is now.
    let kept = s.ebb().run(&[
        "override",
        &members[1],
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
    let id = String::from_utf8_lossy(&kept.stdout)
        .strip_prefix("override ")
        .and_then(|rest| rest.split(':').next().map(str::to_string))
        .unwrap_or_else(|| panic!("{kept:?}"));

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
