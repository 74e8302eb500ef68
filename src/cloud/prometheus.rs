//! GPU utilisation from Prometheus (`EBB_METRICS=prometheus:URL`), where GPU teams already
//! scrape NVIDIA's DCGM exporter: one range query per tick for the whole fleet, instead of a
//! CloudWatch read (billed per metric) per region.
//!
//! The default query is the busiest GPU of each instance in each period,
//! `max by (LABEL) (max_over_time(DCGM_FI_DEV_GPU_UTIL[5m]))`, where `LABEL` is the label that
//! carries the EC2 instance id (`instance_id` by default; exporters and relabelling differ).
//! An answer that is not a complete success (an error, a warning such as a partial response, a
//! series without the label, the same instance twice, a value that is not a percentage) is a
//! failed read, never idleness.
//!
//! Credentials go in a file, not the URL: a bearer token (`EBB_PROMETHEUS_BEARER_TOKEN_FILE`)
//! or `user:password` for basic authentication (`EBB_PROMETHEUS_BASIC_AUTH_FILE`), read again
//! at every query so that a rotated secret is picked up. Messages never quote a URL's user
//! information, should one be given anyway.

use super::{redact_userinfo, CloudError};
use crate::fleet::Sample;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

/// The operation named in errors.
const OPERATION: &str = "Prometheus query_range";

/// Where and how to read GPU utilisation from Prometheus.
#[derive(Debug, Clone)]
pub struct PrometheusSettings {
    /// The server's base URL (`http://prometheus:9090`).
    pub url: String,
    /// The label that names the EC2 instance id in the query's answer.
    pub label: String,
    /// The query, when not the default over DCGM's `DCGM_FI_DEV_GPU_UTIL`; it must give one
    /// series per instance, labelled with `label`.
    pub query: Option<String>,
    /// The period of one reading (the query's step).
    pub step: Duration,
    /// How long the query may take.
    pub timeout: Duration,
    /// How requests authenticate, if they do.
    pub auth: Option<PrometheusAuth>,
}

/// How requests to Prometheus authenticate: a secret read from a file at every query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrometheusAuth {
    /// `Authorization: Bearer` with the token the file holds.
    BearerTokenFile(PathBuf),
    /// Basic authentication with the `user:password` the file holds.
    BasicAuthFile(PathBuf),
}

impl PrometheusAuth {
    /// `request` with its credentials, or why the file cannot give them.
    fn apply(&self, request: reqwest::RequestBuilder) -> Result<reqwest::RequestBuilder, String> {
        let read = |path: &PathBuf| {
            std::fs::read_to_string(path)
                .map(|text| text.trim().to_string())
                .map_err(|e| format!("cannot read the credentials file {}: {e}", path.display()))
                .and_then(|text| {
                    if text.is_empty() {
                        Err(format!("the credentials file {} is empty", path.display()))
                    } else {
                        Ok(text)
                    }
                })
        };
        match self {
            PrometheusAuth::BearerTokenFile(path) => Ok(request.bearer_auth(read(path)?)),
            PrometheusAuth::BasicAuthFile(path) => {
                let text = read(path)?;
                let Some((user, password)) = text.split_once(':') else {
                    return Err(format!(
                        "the basic authentication file {} does not hold user:password",
                        path.display()
                    ));
                };
                Ok(request.basic_auth(user, Some(password)))
            }
        }
    }
}

impl PrometheusSettings {
    /// Settings for the server at `url`, with the defaults.
    pub fn new(url: &str) -> PrometheusSettings {
        PrometheusSettings {
            url: url.trim_end_matches('/').to_string(),
            label: "instance_id".to_string(),
            query: None,
            step: Duration::from_secs(300),
            timeout: Duration::from_secs(30),
            auth: None,
        }
    }

    /// The query sent.
    pub fn query(&self) -> String {
        self.query.clone().unwrap_or_else(|| {
            format!(
                "max by ({}) (max_over_time(DCGM_FI_DEV_GPU_UTIL[{}s]))",
                self.label,
                self.step.as_secs().max(1)
            )
        })
    }
}

/// A Prometheus server GPU utilisation is read from.
#[derive(Debug, Clone)]
pub struct Prometheus {
    settings: PrometheusSettings,
    client: reqwest::Client,
}

#[derive(Deserialize)]
struct Answer {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    result: Vec<Series>,
}

#[derive(Deserialize)]
struct Series {
    metric: HashMap<String, String>,
    #[serde(default)]
    values: Vec<(f64, String)>,
}

fn failed(message: String) -> CloudError {
    CloudError::other(OPERATION, message)
}

impl Prometheus {
    /// A client for the server `settings` names.
    pub fn new(settings: PrometheusSettings) -> Result<Prometheus, String> {
        let client = reqwest::Client::builder()
            .timeout(settings.timeout)
            .build()
            .map_err(|e| format!("cannot set up the Prometheus client: {e}"))?;
        Ok(Prometheus { settings, client })
    }

    /// Its settings.
    pub fn settings(&self) -> &PrometheusSettings {
        &self.settings
    }

    /// GPU utilisation of every instance the query answers for, from `from` to `to`: one
    /// reading per step, oldest first, by instance id.
    pub async fn gpu_utilisation(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<HashMap<String, Vec<Sample>>, CloudError> {
        let url = format!("{}/api/v1/query_range", self.settings.url);
        let form = [
            ("query", self.settings.query()),
            ("start", from.timestamp().to_string()),
            ("end", to.timestamp().to_string()),
            ("step", format!("{}s", self.settings.step.as_secs().max(1))),
        ];
        // What messages quote: the URL without its user information.
        let shown = redact_userinfo(&url);
        let request = reqwest::Url::parse_with_params(&url, &form)
            .map_err(|e| failed(format!("{shown} is not a URL: {e}")))?;
        let mut request = self.client.get(request);
        if let Some(auth) = &self.settings.auth {
            request = auth.apply(request).map_err(failed)?;
        }
        let response = request
            .send()
            .await
            .map_err(|e| failed(format!("cannot reach {shown}: {}", e.without_url())))?;
        let status = response.status();
        let body = response.text().await.map_err(|e| {
            failed(format!(
                "the answer from {shown} broke off: {}",
                e.without_url()
            ))
        })?;
        let answer: Answer = serde_json::from_str(&body).map_err(|e| {
            failed(format!(
                "{shown} answered {status} with something that is not Prometheus's JSON: {e}"
            ))
        })?;
        samples(answer, &self.settings.label)
    }
}

/// The samples of a complete answer, by the instance `label` names.
fn samples(answer: Answer, label: &str) -> Result<HashMap<String, Vec<Sample>>, CloudError> {
    if answer.status != "success" {
        return Err(failed(format!(
            "the query failed: {}",
            answer.error.unwrap_or(answer.status)
        )));
    }
    if !answer.warnings.is_empty() {
        return Err(failed(format!(
            "the answer may be partial: {}",
            answer.warnings.join("; ")
        )));
    }
    let data = answer
        .data
        .ok_or_else(|| failed("the answer has no data".to_string()))?;
    if data.result_type != "matrix" {
        return Err(failed(format!(
            "the query gave a {}, not a range of readings",
            data.result_type
        )));
    }
    let mut readings = HashMap::with_capacity(data.result.len());
    for series in data.result {
        let Some(id) = series.metric.get(label) else {
            return Err(failed(format!(
                "a series has no label {label} to name its instance (set EBB_PROMETHEUS_INSTANCE_LABEL to the label that holds the EC2 instance id): {:?}",
                series.metric
            )));
        };
        let mut samples = Vec::with_capacity(series.values.len());
        for (at, value) in &series.values {
            let percent: f64 = value.parse().unwrap_or(f64::NAN);
            let at = DateTime::from_timestamp_millis((at * 1000.0).round() as i64);
            match at {
                Some(at) if (0.0..=100.0).contains(&percent) => {
                    samples.push(Sample::new(at, percent))
                }
                _ => {
                    return Err(failed(format!(
                    "instance {id} has a reading that is not a GPU utilisation in percent: {value}"
                )))
                }
            }
        }
        if readings.insert(id.clone(), samples).is_some() {
            return Err(failed(format!(
                "instance {id} has more than one series: the query must aggregate by {label}"
            )));
        }
    }
    Ok(readings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<HashMap<String, Vec<Sample>>, CloudError> {
        samples(serde_json::from_str(json).unwrap(), "instance_id")
    }

    #[test]
    fn a_complete_matrix_gives_readings_by_instance() {
        let got = parse(
            r#"{"status":"success","data":{"resultType":"matrix","result":[
                {"metric":{"instance_id":"i-1"},"values":[[1764493200,"3"],[1764493500,"97.5"]]}]}}"#,
        )
        .unwrap();
        assert_eq!(got["i-1"].len(), 2);
        assert_eq!(got["i-1"][1].percent, 97.5);
        assert_eq!(got["i-1"][0].at.timestamp(), 1_764_493_200);
    }

    #[test]
    fn anything_short_of_a_complete_answer_is_a_failed_read() {
        for (json, says) in [
            (
                r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#,
                "parse error",
            ),
            (
                r#"{"status":"success","warnings":["partial response"],"data":{"resultType":"matrix","result":[]}}"#,
                "partial",
            ),
            (
                r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#,
                "vector",
            ),
            (
                r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"instance":"a:9400"},"values":[]}]}}"#,
                "EBB_PROMETHEUS_INSTANCE_LABEL",
            ),
            (
                r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"instance_id":"i-1"},"values":[[1,"NaN"]]}]}}"#,
                "not a GPU utilisation",
            ),
            (
                r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"instance_id":"i-1"},"values":[]},{"metric":{"instance_id":"i-1"},"values":[]}]}}"#,
                "more than one series",
            ),
        ] {
            let err = parse(json).unwrap_err().to_string();
            assert!(err.contains(says), "{err}");
        }
    }

    /// A Prometheus stand-in on a local port that answers only requests with `wanted` as
    /// their `Authorization` header.
    async fn guarded(wanted: &'static str) -> String {
        use axum::http::{HeaderMap, StatusCode};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let answer = move |headers: HeaderMap| async move {
            match headers.get("authorization").and_then(|v| v.to_str().ok()) {
                Some(given) if given == wanted => (
                    StatusCode::OK,
                    r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#,
                ),
                _ => (
                    StatusCode::UNAUTHORIZED,
                    r#"{"status":"error","error":"unauthorized"}"#,
                ),
            }
        };
        let app = axum::Router::new().route("/api/v1/query_range", axum::routing::get(answer));
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }

    async fn read(url: &str, auth: Option<PrometheusAuth>) -> Result<usize, String> {
        let mut settings = PrometheusSettings::new(url);
        settings.auth = auth;
        let to = Utc::now();
        Prometheus::new(settings)
            .unwrap()
            .gpu_utilisation(to - chrono::Duration::hours(1), to)
            .await
            .map(|found| found.len())
            .map_err(|e| e.to_string())
    }

    #[tokio::test]
    async fn credentials_come_from_a_file_read_at_each_query() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        let basic = dir.path().join("basic");
        std::fs::write(&token, "t0ken-from-file\n").unwrap();
        std::fs::write(&basic, "mei:pa55:word\n").unwrap();

        let url = guarded("Bearer t0ken-from-file").await;
        let bearer = Some(PrometheusAuth::BearerTokenFile(token.clone()));
        assert_eq!(read(&url, bearer.clone()).await, Ok(0));
        let refused = read(&url, None).await.unwrap_err();
        assert!(refused.contains("unauthorized"), "{refused}");
        // Rotated: the next query sends the new token.
        std::fs::write(&token, "another-token").unwrap();
        assert!(read(&url, bearer).await.is_err());

        // base64("mei:pa55:word"): the password may hold a colon.
        let url = guarded("Basic bWVpOnBhNTU6d29yZA==").await;
        let auth = Some(PrometheusAuth::BasicAuthFile(basic.clone()));
        assert_eq!(read(&url, auth).await, Ok(0));

        std::fs::write(&basic, "no-colon").unwrap();
        let auth = Some(PrometheusAuth::BasicAuthFile(basic));
        let err = read(&url, auth).await.unwrap_err();
        assert!(err.contains("does not hold user:password"), "{err}");
        let missing = Some(PrometheusAuth::BearerTokenFile(dir.path().join("gone")));
        let err = read(&url, missing).await.unwrap_err();
        assert!(err.contains("cannot read the credentials file"), "{err}");
    }

    #[tokio::test]
    async fn no_message_quotes_the_credentials_of_the_url() {
        // A port nothing listens on: the error quotes the URL.
        let unused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = unused.local_addr().unwrap().port();
        drop(unused);
        let err = read(&format!("http://mei:s3cr3t@127.0.0.1:{port}"), None)
            .await
            .unwrap_err();
        assert!(!err.contains("s3cr3t") && !err.contains("mei:"), "{err}");
        assert!(
            err.contains(&format!("http://***@127.0.0.1:{port}/api/v1/query_range")),
            "{err}"
        );
    }
}
