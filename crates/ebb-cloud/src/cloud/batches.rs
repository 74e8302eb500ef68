//! Calls that change instances in batches, as EC2 and Tencent Cloud take them: a batch that
//! fails is split in halves until the ids that fail are alone, so one bad id costs about
//! 2·log2(batch) extra calls and never blocks the rest. An error about the call as a whole
//! (throttled after every retry, bad credentials, service down, an answer lost) fails every
//! remaining id at once instead: splitting would only add load, or send again what may have
//! been carried out.

use super::{ActionReport, CloudError, Failed};
use std::future::Future;

/// Runs `call` on `ids`, `size` at a time and split on failure as above; `accept` writes what
/// the cloud accepted of a batch into the report.
pub(crate) async fn split_on_failure<A, F, Fut>(
    ids: &[String],
    size: usize,
    call: F,
    mut accept: impl FnMut(Vec<String>, A, &mut ActionReport),
) -> ActionReport
where
    F: Fn(Vec<String>) -> Fut,
    Fut: Future<Output = Result<A, CloudError>>,
{
    let mut report = ActionReport::default();
    let mut work: Vec<Vec<String>> = ids.chunks(size.max(1)).rev().map(<[_]>::to_vec).collect();
    while let Some(mut batch) = work.pop() {
        match call(batch.clone()).await {
            Ok(accepted) => accept(batch, accepted, &mut report),
            Err(error) if error.kind.is_whole_call() => {
                let unsent = error.for_unsent();
                let rest = work.drain(..).rev().flatten().map(|instance| Failed {
                    instance,
                    error: unsent.clone(),
                });
                let this = batch.into_iter().map(|instance| Failed {
                    instance,
                    error: error.clone(),
                });
                report.failed.extend(this.chain(rest));
            }
            Err(error) if batch.len() == 1 => report.failed.push(Failed {
                instance: batch.remove(0),
                error,
            }),
            Err(_) => {
                let second = batch.split_off(batch.len() / 2);
                work.push(second);
                work.push(batch);
            }
        }
    }
    report
}
