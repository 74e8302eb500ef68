//! A box's Jupyter Server as an activity signal (`idle.activity: [{jupyter: {}}]`): its REST
//! API says when a person last used it. `GET /api/kernels` gives each kernel's
//! `execution_state` and `last_activity` (a busy kernel is in use now), and
//! `GET /api/terminals` gives each terminal's `last_activity`. `/api/status` is not used: its
//! `last_activity` counts API requests, ebb's own among them.
//!
//! The server's address is the instance's `ebb:jupyter` tag, or the signal's `url` with the
//! instance's private IP (`src/reconcile/read/activity.rs` makes it). ebb's token
//! (`EBB_JUPYTER_TOKEN`, or the file `EBB_JUPYTER_TOKEN_FILE` names, read at every request)
//! goes only to a private, loopback or link-local IP address, so that a tag cannot send it
//! elsewhere; it is never logged nor quoted. TLS certificates are verified.

use chrono::{DateTime, Utc};
use reqwest::{StatusCode, Url};
use serde::Deserialize;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

/// How long one server may take to answer both requests.
const TIMEOUT: Duration = Duration::from_secs(5);

/// Where the token Jupyter requests carry comes from.
#[derive(Clone)]
pub enum JupyterToken {
    /// The token itself (`EBB_JUPYTER_TOKEN`).
    Value(String),
    /// A file holding it, read at every request (`EBB_JUPYTER_TOKEN_FILE`).
    File(PathBuf),
}

impl std::fmt::Debug for JupyterToken {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            JupyterToken::Value(_) => f.write_str("Value(***)"),
            JupyterToken::File(path) => f.debug_tuple("File").field(path).finish(),
        }
    }
}

impl JupyterToken {
    fn read(&self) -> Result<String, String> {
        let token = match self {
            JupyterToken::Value(token) => token.trim().to_string(),
            JupyterToken::File(path) => std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read the Jupyter token file {}: {e}", path.display()))?
                .trim()
                .to_string(),
        };
        match token.is_empty() {
            true => Err("the Jupyter token is empty".to_string()),
            false => Ok(token),
        }
    }
}

/// A client for the boxes' Jupyter Servers.
#[derive(Debug, Clone)]
pub struct Jupyter {
    token: Option<JupyterToken>,
    client: reqwest::Client,
}

#[derive(Deserialize)]
struct Kernel {
    execution_state: String,
    last_activity: DateTime<Utc>,
}

#[derive(Deserialize)]
struct Terminal {
    last_activity: DateTime<Utc>,
}

impl Jupyter {
    /// A client sending `token`, if any.
    pub fn new(token: Option<JupyterToken>) -> Result<Jupyter, String> {
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("cannot set up the Jupyter client: {e}"))?;
        Ok(Jupyter { token, client })
    }

    /// When a person last used the server at `base` (see [`private_base`]), as of `now`: `now`
    /// while a kernel is busy, else the latest activity of a kernel or terminal, `None` with
    /// neither. Anything short of complete answers is an error, said without the token.
    pub async fn last_use(
        &self,
        base: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<DateTime<Utc>>, String> {
        let base = private_base(base)?;
        let kernels: Vec<Kernel> = self
            .get(&base, "api/kernels")
            .await?
            .ok_or("it has no /api/kernels")?;
        // A server without the terminals extension has no terminals.
        let terminals: Vec<Terminal> = self.get(&base, "api/terminals").await?.unwrap_or_default();
        if kernels.iter().any(|k| k.execution_state == "busy") {
            return Ok(Some(now));
        }
        let kernels = kernels.iter().map(|k| k.last_activity);
        let last = kernels
            .chain(terminals.iter().map(|t| t.last_activity))
            .max();
        Ok(last.map(|t| t.min(now)))
    }

    /// The answer to `GET base/path`, `None` when the server has no such path.
    async fn get<T: serde::de::DeserializeOwned>(
        &self,
        base: &Url,
        path: &str,
    ) -> Result<Option<T>, String> {
        let url = base.join(path).map_err(|e| format!("{base}{path}: {e}"))?;
        let mut request = self.client.get(url.clone());
        if let Some(token) = &self.token {
            request = request.header("Authorization", format!("token {}", token.read()?));
        }
        let response = request.send().await.map_err(|e| match e.is_timeout() {
            true => format!("{url} did not answer within {}s", TIMEOUT.as_secs()),
            false => format!("cannot reach {url}: {}", innermost(&e)),
        })?;
        match response.status() {
            StatusCode::OK => {}
            StatusCode::NOT_FOUND => return Ok(None),
            status @ (StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) => {
                return Err(format!(
                    "{url} refused ebb ({status}): set EBB_JUPYTER_TOKEN or EBB_JUPYTER_TOKEN_FILE to a token the server accepts"
                ))
            }
            status => return Err(format!("{url} answered {status}")),
        }
        let body = response
            .bytes()
            .await
            .map_err(|e| format!("the answer from {url} broke off: {}", e.without_url()))?;
        serde_json::from_slice(&body)
            .map(Some)
            .map_err(|e| format!("{url} answered with something that is not Jupyter's JSON: {e}"))
    }
}

/// The innermost cause of `e` ("Connection refused"), which says more than its own message.
fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    cause.to_string()
}

/// `base` (an `ebb:jupyter` tag, or a signal's url with the box's private IP) as a base URL ebb
/// may send its token to: http or https, to an IP address that is private, loopback or
/// link-local, with a trailing `/` so that paths join beneath it.
pub fn private_base(base: &str) -> Result<Url, String> {
    let mut url = Url::parse(base.trim()).map_err(|e| format!("{base:?} is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || !url.username().is_empty() {
        return Err(format!(
            "{base:?} is not an http or https URL without credentials"
        ));
    }
    let private = match url.host() {
        Some(url::Host::Ipv4(ip)) => is_private(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => is_private(IpAddr::V6(ip)),
        _ => false,
    };
    if !private {
        return Err(format!(
            "{base:?} is not at a private IP address: ebb sends its Jupyter token only to one"
        ));
    }
    if !url.path().ends_with('/') {
        url.set_path(&format!("{}/", url.path()));
    }
    url.set_query(None);
    url.set_fragment(None);
    Ok(url)
}

fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_private() || v4.is_loopback() || v4.is_link_local(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.is_unique_local() || v6.is_unicast_link_local(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_goes_only_to_a_private_address() {
        for ok in [
            "http://10.0.3.7:8888",
            "https://172.16.0.9:8888/user/mei/",
            "http://192.168.1.2:8888/lab?token=x",
            "http://127.0.0.1:8888",
            "http://[fd00::1]:8888",
        ] {
            let url = private_base(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
            assert!(url.path().ends_with('/') && url.query().is_none(), "{url}");
        }
        assert_eq!(
            private_base("https://172.16.0.9:8888/user/mei")
                .unwrap()
                .as_str(),
            "https://172.16.0.9:8888/user/mei/"
        );
        for (bad, says) in [
            (
                "http://jupyter.example.com:8888",
                "not at a private IP address",
            ),
            ("http://8.8.8.8:8888", "not at a private IP address"),
            ("ftp://10.0.0.1/", "not an http or https URL"),
            ("http://mei:pw@10.0.0.1/", "without credentials"),
            ("10.0.0.1:8888", "is not a URL"),
            ("not a url", "is not a URL"),
        ] {
            let err = private_base(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn a_token_given_in_full_is_never_printed() {
        let token = JupyterToken::Value("s3cr3t".into());
        assert!(!format!("{token:?}").contains("s3cr3t"));
        let client = Jupyter::new(Some(token)).unwrap();
        assert!(!format!("{client:?}").contains("s3cr3t"));
    }
}
