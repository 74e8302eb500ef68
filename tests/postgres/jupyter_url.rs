//! A jupyter signal's `url` template on the simulated fleet with a real Jupyter Server: a box
//! without the `ebb:jupyter` tag is asked at the template with its private IP, kept while its
//! kernel ran code within the idle rule's window and stopped once it has not; a box whose cloud
//! gave no private IP is kept as unreadable; the tag, where a box has one, wins. The console
//! lists what the tick read of each box's signal, and explains with it.

use crate::common::jupyter::Server;
use crate::common::world::SimWorld;
use chrono::Duration;
use ebb::clock::Clock;
use ebb::cloud::jupyter::{Jupyter, JupyterToken};
use ebb::reconcile::Options;
use ebb::store::Store;
use sqlx::PgPool;

/// What the store last decided for `id`: action, code and reason.
async fn decided(store: &Store, id: &str) -> (String, String, String) {
    let r = store.instance(id).await.unwrap().unwrap();
    (
        r.decided_action.unwrap(),
        r.decided_code.unwrap(),
        r.decided_reason.unwrap_or_default(),
    )
}

#[sqlx::test(migrations = false)]
async fn a_box_is_asked_at_the_url_template_with_its_private_ip(pool: PgPool) {
    let server = Server::start("t0ken").await;
    let kernel = server.kernel().await;
    server.run(&kernel, "1 + 1", false);
    let last = server.kernel_in(&kernel, "idle").await;
    let port = server.url.rsplit(':').next().unwrap().trim_end_matches('/');
    // A port nothing listens on once the listener is dropped.
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };

    let policy = format!(
        r#"
policies:
  - name: notebooks
    match: {{tags: {{kind: notebook}}}}
    idle:
      gpu_below: 5
      for: 30m
      activity: [{{jupyter: {{url: "http://{{private_ip}}:{port}"}}}}]
"#
    );
    let started = (last - Duration::hours(3)).to_rfc3339();
    let fleet = format!(
        r#"
instances:
  - {{id: i-ip, region: us-east-1, type: g5.xlarge, state: running, launched_at: "{started}", private_ip: 127.0.0.1, tags: {{kind: notebook}}, sim: {{usage: idle}}}}
  - {{id: i-no-ip, region: us-east-1, type: g5.xlarge, state: running, launched_at: "{started}", tags: {{kind: notebook}}, sim: {{usage: idle}}}}
  - {{id: i-tagged, region: us-east-1, type: g5.xlarge, state: running, launched_at: "{started}", private_ip: 127.0.0.1, tags: {{kind: notebook, "ebb:jupyter": "{refused}"}}, sim: {{usage: idle}}}}
"#
    );
    let store = Store::from_pool(pool);
    let options = Options {
        jupyter: Some(Jupyter::new(Some(JupyterToken::Value("t0ken".into()))).unwrap()),
        ..Options::default()
    };
    // The simulator's clock stands after every tick, so its readings reach each tick's time.
    let mut w = SimWorld::plan(&fleet)
        .policy("notebooks.yaml", &policy)
        .clock(Clock::Fixed(last + Duration::days(1)))
        .options(options)
        .start(store.clone())
        .await;

    w.tick_at(last + Duration::minutes(5)).await;
    let (action, code, reason) = decided(&store, "i-ip").await;
    assert_eq!(
        (action.as_str(), code.as_str()),
        ("none", "in_use"),
        "{reason}"
    );
    assert!(reason.contains("jupyter showed activity at"), "{reason}");
    let (_, code, reason) = decided(&store, "i-no-ip").await;
    assert_eq!(code, "activity_unreadable", "{reason}");
    assert!(reason.contains("gave no private IP"), "{reason}");
    let (_, code, reason) = decided(&store, "i-tagged").await;
    assert_eq!(code, "activity_unreadable", "{reason}");
    assert!(
        reason.contains(&format!("cannot reach {refused}/api/kernels")),
        "{reason}"
    );

    // The console lists what the tick read, and explains with it.
    let console = tempfile::tempdir().unwrap();
    std::fs::write(console.path().join("notebooks.yaml"), &policy).unwrap();
    let base = crate::common::api::serve_with_console(ebb::api::ApiState {
        limits: ebb::api::ApiLimits {
            public_reads: true,
            ..Default::default()
        },
        ..crate::common::api::state(
            &store,
            vec![console.path().to_path_buf()],
            Clock::Fixed(last + Duration::minutes(6)),
        )
    })
    .await;
    let page = |id: &str| reqwest::get(format!("{base}/instances/{id}"));
    let ip = page("i-ip").await.unwrap().text().await.unwrap();
    assert!(ip.contains("<code>jupyter</code>: last used"), "{ip}");
    assert!(
        ip.contains("Decision: </strong>none <code>in_use</code>"),
        "explained with the reading: {ip}"
    );
    let no_ip = page("i-no-ip").await.unwrap().text().await.unwrap();
    assert!(
        no_ip.contains("<code>jupyter</code>: could not be read (no ebb:jupyter tag, and its cloud gave no private IP"),
        "{no_ip}"
    );

    let report = w.tick_at(last + Duration::minutes(31)).await;
    let stopped: Vec<(&str, &str)> = report
        .actions
        .iter()
        .map(|a| (a.decision.instance.as_str(), a.decision.code.as_str()))
        .collect();
    assert_eq!(stopped, [("i-ip", "idle")], "{:?}", report.actions);
    assert!(
        report.actions[0]
            .decision
            .reason
            .contains("no use in the window shown by jupyter"),
        "{}",
        report.actions[0].decision.reason
    );
}
