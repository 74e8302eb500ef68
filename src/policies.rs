//! The policies a tick, the API or the console acts on, loaded off the async runtime: reading
//! and checking the files, and asking git for the commit, must not hold up its threads. The
//! loading itself ([`PolicySource::load`]) is the core's and knows nothing of the runtime.

use crate::policy::{LoadError, LoadedPolicies, PolicySource};
use std::sync::Arc;

/// The policies as the files of `source` are now, loaded on a blocking thread.
pub async fn current(source: &Arc<PolicySource>) -> Result<LoadedPolicies, LoadError> {
    let source = source.clone();
    tokio::task::spawn_blocking(move || source.load())
        .await
        .unwrap_or_else(|failed| std::panic::resume_unwind(failed.into_panic()))
}
