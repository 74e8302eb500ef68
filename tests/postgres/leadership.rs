//! The leader's session keeps its lock whatever the role or database sets for idle sessions.

use crate::common;
use ebb::store::Store;
use sqlx::PgPool;

#[sqlx::test]
async fn a_role_level_idle_session_timeout_does_not_end_the_leaders_session(pool: PgPool) {
    let (role, url) = common::login_role(&pool, "idle").await;
    // As a DBA might set it for every session of the role ebb runs as.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "ALTER ROLE \"{role}\" SET idle_session_timeout = '200ms'"
    )))
    .execute(&pool)
    .await
    .unwrap();
    let store = Store::connect(&url).await.unwrap();
    let mut leader = store.try_lead("idle").await.unwrap().expect("no one leads");
    assert!(leader.held().await);
    // Longer than the role's idle limit, waited out by Postgres itself.
    sqlx::query("SELECT pg_sleep(1)")
        .execute(&pool)
        .await
        .unwrap();
    assert!(
        leader.held().await,
        "the leader's session was ended by the role's idle_session_timeout"
    );
    // No other session can take the lock meanwhile.
    assert!(store.try_lead("second").await.unwrap().is_none());
}
