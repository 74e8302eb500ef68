//! Owners in Postgres and what reads it: each instance's owner is stored with its tags at
//! every sync that finds them changed, and the API's instance JSON, the console's fleet page
//! and its instance page show it.

use crate::common;

use common::{instance, t};
use ebb::api::ApiState;
use ebb::fleet::Owner;
use ebb::store::Store;
use sqlx::PgPool;

/// Serves the API and the console over `store` on a free port, reads public; its base URL.
async fn serve(store: &Store, policies: &tempfile::TempDir) -> String {
    let policies = vec![policies.path().to_path_buf()];
    common::api::serve_with_console(ApiState {
        limits: common::api::public_reads(),
        ..common::api::state(store, policies, ebb::clock::Clock::System)
    })
    .await
}

async fn get(url: String) -> String {
    let answer = reqwest::get(&url).await.unwrap();
    assert!(answer.status().is_success(), "{url}: {}", answer.status());
    answer.text().await.unwrap()
}

/// The owner the store holds for `id`.
async fn owner(store: &Store, id: &str) -> Option<Owner> {
    store
        .instance(id)
        .await
        .unwrap()
        .unwrap()
        .owner
        .map(|o| o.0)
}

#[sqlx::test(migrations = false)]
async fn owners_are_stored_with_the_tags_and_shown_by_the_api_and_the_console(pool: PgPool) {
    let store = Store::from_pool(pool);
    store.migrate().await.unwrap();
    let region = vec!["us-east-1".to_string()];
    let plain = instance("i-plain", &[("team", "research")]);
    let member = instance(
        "i-member",
        &[
            ("team", "research"),
            ("aws:autoscaling:groupName", "inference"),
        ],
    );
    store
        .sync_inventory(&region, &[plain.clone(), member], t("2026-11-30T20:00:00Z"))
        .await
        .unwrap();
    // Karpenter takes the plain box over later: the next sync finds its tags changed.
    let mut adopted = plain;
    adopted
        .tags
        .insert("karpenter.sh/nodepool".into(), "gpu".into());
    let member = instance(
        "i-member",
        &[
            ("team", "research"),
            ("aws:autoscaling:groupName", "inference"),
        ],
    );
    store
        .sync_inventory(&region, &[adopted, member], t("2026-11-30T20:05:00Z"))
        .await
        .unwrap();
    assert_eq!(
        owner(&store, "i-member").await,
        Some(Owner::Asg {
            group: "inference".into()
        })
    );
    assert_eq!(
        owner(&store, "i-plain").await,
        Some(Owner::Karpenter {
            nodepool: "gpu".into()
        })
    );

    let policies = tempfile::tempdir().unwrap();
    let base = serve(&store, &policies).await;
    let listed: serde_json::Value =
        serde_json::from_str(&get(format!("{base}/v1/instances")).await).unwrap();
    let of = |id: &str| {
        let all = listed.as_array().unwrap();
        all.iter().find(|i| i["id"] == id).unwrap()["owner"].clone()
    };
    assert_eq!(
        of("i-member"),
        serde_json::json!({"kind": "asg", "group": "inference"})
    );
    assert_eq!(of("i-plain")["kind"], "karpenter");

    let fleet = get(format!("{base}/")).await;
    assert!(
        fleet.contains("owned by Auto Scaling group inference: never acted on alone"),
        "{fleet}"
    );
    let page = get(format!("{base}/instances/i-plain")).await;
    assert!(
        page.contains("<dt>Owner</dt><dd>Karpenter NodePool gpu</dd>"),
        "{page}"
    );
    // A group's member says what an override on it does: it holds the whole group.
    let page = get(format!("{base}/instances/i-member")).await;
    assert!(
        page.contains("an override on this member, or its ebb:keep-until or ebb:skip, holds the whole group's scale-down"),
        "{page}"
    );
}

/// Rows synced before migration 0012 have no owner, and an unchanged instance's row is not
/// written again; the migration clears the fingerprints so that the next sync writes every
/// listed instance's owner.
#[sqlx::test(migrations = false)]
async fn the_sync_after_the_migration_writes_the_owner_of_unchanged_instances(pool: PgPool) {
    let store = Store::from_pool(pool.clone());
    store.migrate().await.unwrap();
    let region = vec!["us-east-1".to_string()];
    let member = instance("i-member", &[("aws:autoscaling:groupName", "inference")]);
    store
        .sync_inventory(
            &region,
            std::slice::from_ref(&member),
            t("2026-11-30T20:00:00Z"),
        )
        .await
        .unwrap();
    // The row as a binary before 0012 left it, then the migration's statements run again.
    sqlx::query("UPDATE instances SET owner = NULL")
        .execute(&pool)
        .await
        .unwrap();
    let migration = include_str!("../../migrations/0012_instance_owners.sql");
    let update = migration.lines().find(|l| l.starts_with("UPDATE")).unwrap();
    sqlx::query(update).execute(&pool).await.unwrap();

    store
        .sync_inventory(&region, &[member], t("2026-11-30T20:05:00Z"))
        .await
        .unwrap();
    assert_eq!(
        owner(&store, "i-member").await,
        Some(Owner::Asg {
            group: "inference".into()
        })
    );
}
