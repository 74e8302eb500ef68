//! The policies as the commands read them: the calendars a policy takes from an address (its
//! `url`) are fetched when the command starts, each address once, as `ebb serve` fetches them.
//! An address that cannot be fetched says why on stderr, and the calendar is then a problem of
//! the policy files, so that no command decides on dates it could not read.

use crate::policy::{self, CalendarCopies, LoadError, PolicySet};
use crate::serve::{calendar_client, fetch_calendar};
use std::path::PathBuf;

/// The policies of `paths`, with the calendars their addresses serve now.
pub(super) fn load(paths: &[PathBuf]) -> Result<PolicySet, LoadError> {
    let (set, mut urls) = policy::load_listing_urls(paths, &CalendarCopies::new());
    if urls.is_empty() {
        return set;
    }
    urls.sort();
    urls.dedup();
    let copies = tokio::task::block_in_place(|| {
        tokio::runtime::Handle::current().block_on(async {
            let client = calendar_client();
            let mut copies = CalendarCopies::new();
            for (url, format) in urls {
                match fetch_calendar(&client, &url, format, None).await {
                    Ok(body) => {
                        copies.insert(url, body);
                    }
                    Err(why) => eprintln!("warning: calendar url {url}: {why}"),
                }
            }
            copies
        })
    });
    policy::load_with(paths, &copies)
}
