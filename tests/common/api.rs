//! The API and the web console served in process on a free port, for the tests that call them
//! over HTTP: one [`state`] with a test's usual defaults, changed field by field where a test
//! needs more (`ApiState { tokens: api::tokens(".."), ..api::state(..) }`).

use ebb::api::{ApiLimits, ApiState, Tokens};
use ebb::clock::Clock;
use ebb::control::Control;
use ebb::reconcile::PolicySource;
use ebb::store::Store;
use std::path::PathBuf;
use std::sync::Arc;

/// The API's state over `store`, reading the policies under `policies` with `clock`'s time as
/// now: no tokens, default limits (reads need a token), no checkpoints, and the test price
/// table ([`super::savings::price_table`]).
pub fn state(store: &Store, policies: Vec<PathBuf>, clock: Clock) -> ApiState {
    ApiState {
        store: store.clone(),
        policies: Arc::new(PolicySource::new(policies)),
        control: Arc::new(Control::default()),
        tokens: tokens(""),
        clock,
        checkpoints: None,
        limits: ApiLimits::default(),
        prices: Arc::new(super::savings::price_table()),
        cloud: ebb::fleet::Cloud::Aws,
        change_budgets: Default::default(),
        attempts: Default::default(),
        audit_verified: Default::default(),
    }
}

/// The tokens `text` gives, written as `EBB_API_TOKENS` is.
pub fn tokens(text: &str) -> Arc<Tokens> {
    Arc::new(Tokens::parse(text).unwrap_or_else(|e| panic!("bad tokens {text:?}: {e}")))
}

/// The default limits with reads open to anyone.
pub fn public_reads() -> ApiLimits {
    ApiLimits {
        public_reads: true,
        ..ApiLimits::default()
    }
}

/// Serves `state`'s API and web console on a free port: their base URL.
pub async fn serve_with_console(state: ApiState) -> String {
    serve(ebb::api::router(state.clone()).merge(ebb::console::router(state))).await
}

/// Serves `routes` on a free port for the rest of the test, each request knowing its client's
/// address as under `ebb serve`: their base URL.
pub async fn serve(routes: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let service = routes.into_make_service_with_connect_info::<std::net::SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, service).await });
    base
}
