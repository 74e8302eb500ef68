//! Fetches the calendars the policies take from an address (a calendar's `url`) at start and
//! daily, keeps the last good copy of each in Postgres (`calendar_copies`), and hands the
//! copies to the policy loader. A copy is replaced only by an answer that is a success, within
//! [`MAX_CALENDAR`], reads whole in the calendar's format, and names every year the copy named:
//! a failed or partial fetch keeps the last good copy, and fails the activation with why (in
//! `GET /v1/status` and the log), to be tried again an hour later.

use super::driver::BackgroundTask;
use crate::clock::Clock;
use crate::policy::{self, PolicySource};
use crate::schedule::{read_calendar, CalendarFormat};
use crate::store::{Store, StoreError};
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;

/// The largest calendar taken: a year of holidays is a few kilobytes.
pub const MAX_CALENDAR: usize = 2 << 20;

/// How long one fetch may take.
const FETCH_LIMIT: Duration = Duration::from_secs(30);

/// A client for fetching calendars: bounded in time, following a few redirects.
pub fn calendar_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(FETCH_LIMIT)
        .redirect(reqwest::redirect::Policy::limited(5))
        .build()
        .unwrap_or_default()
}

/// What `url` serves, if it can replace `kept` (the copy kept of it, if any) as a calendar in
/// `format`; else why not.
pub async fn fetch_calendar(
    client: &reqwest::Client,
    url: &str,
    format: CalendarFormat,
    kept: Option<&str>,
) -> Result<String, String> {
    let mut response = client
        .get(url)
        .send()
        .await
        .map_err(|e| format!("cannot fetch it: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("the address answered {}", response.status()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("the answer broke off: {e}"))?
    {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_CALENDAR {
            return Err(format!("it serves more than {MAX_CALENDAR} bytes"));
        }
    }
    let text =
        String::from_utf8(body).map_err(|_| "what it serves is not UTF-8 text".to_string())?;
    let read = read_calendar(format, &text)
        .map_err(|e| format!("what it serves is not a {} calendar: {e}", format.name()))?;
    if let Some(kept) = kept.and_then(|k| read_calendar(format, k).ok()) {
        let lost: Vec<String> = kept
            .years()
            .difference(&read.years())
            .map(i32::to_string)
            .collect();
        if !lost.is_empty() {
            return Err(format!(
                "partial: it names no date of {}, which the copy kept names",
                lost.join(", ")
            ));
        }
    }
    Ok(text)
}

/// Fetches the policies' calendar addresses at each activation.
pub struct CalendarFetcher {
    store: Store,
    policies: Arc<PolicySource>,
    client: reqwest::Client,
    clock: Clock,
}

impl CalendarFetcher {
    /// A fetcher of the addresses `policies` name, keeping copies in `store`.
    pub fn new(store: Store, policies: Arc<PolicySource>, clock: Clock) -> Self {
        CalendarFetcher {
            store,
            policies,
            client: calendar_client(),
            clock,
        }
    }
}

/// What an activation fetched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CalendarsFetched {
    /// The addresses whose copy was replaced by what they serve now.
    pub fetched: Vec<String>,
}

impl std::fmt::Display for CalendarsFetched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.fetched.len() {
            0 => write!(f, "no calendar is taken from an address"),
            n => write!(f, "fetched {n} calendar(s): {}", self.fetched.join(", ")),
        }
    }
}

/// Why an activation failed.
#[derive(Debug, thiserror::Error)]
pub enum CalendarFetchError {
    /// The copies could not be read or kept.
    #[error("cannot keep the calendars' copies: {0}")]
    Store(#[from] StoreError),
    /// Some addresses could not replace their copies; the last good copies stay.
    #[error("kept the last good copy of {}", .0.join("; "))]
    Kept(Vec<String>),
}

impl BackgroundTask for CalendarFetcher {
    const NAME: &'static str = "calendar_fetcher";
    const DESCRIPTION: &'static str =
        "fetches the calendars the policies take from an address, keeping the last good copies in Postgres";

    type Status = CalendarsFetched;
    type Error = CalendarFetchError;

    async fn activate(&mut self) -> Result<CalendarsFetched, CalendarFetchError> {
        let mut copies = self.store.calendar_copies().await?;
        let (paths, known) = (self.policies.paths().to_vec(), copies.clone());
        let mut urls =
            tokio::task::spawn_blocking(move || policy::load_listing_urls(&paths, &known).1)
                .await
                .unwrap_or_else(|failed| std::panic::resume_unwind(failed.into_panic()));
        urls.sort();
        urls.dedup();
        let (mut fetched, mut kept) = (Vec::new(), Vec::new());
        for (url, format) in urls {
            let copy = copies.get(&url).map(String::as_str);
            match fetch_calendar(&self.client, &url, format, copy).await {
                Ok(body) => {
                    self.store
                        .keep_calendar_copy(&url, &body, self.clock.now())
                        .await?;
                    copies.insert(url.clone(), body);
                    fetched.push(url);
                }
                Err(why) => kept.push(format!("{url} ({why})")),
            }
        }
        self.policies.set_copies(copies);
        match kept.is_empty() {
            true => Ok(CalendarsFetched { fetched }),
            false => Err(CalendarFetchError::Kept(kept)),
        }
    }

    fn retry_after_failure(&self) -> Option<Duration> {
        Some(Duration::from_secs(3600))
    }
}
