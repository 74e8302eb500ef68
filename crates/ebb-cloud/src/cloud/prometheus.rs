//! GPU utilisation from Prometheus (`EBB_METRICS=prometheus:URL`), where GPU teams already
//! scrape NVIDIA's DCGM exporter: three range queries per tick for the whole fleet, instead of
//! a CloudWatch read (billed per metric) per region.
//!
//! The default query is the busiest GPU of each instance in each period,
//! `max by (LABEL) (max_over_time(DCGM_FI_DEV_GPU_UTIL[5m]))`, where `LABEL` is the label that
//! carries the EC2 instance id (`instance_id` by default; exporters and relabelling differ).
//! Beside it, the GPU memory used, `max by (LABEL) (max_over_time(DCGM_FI_DEV_FB_USED[5m]))`
//! (MiB, the GPU that held the most), and how many GPUs were busy,
//! `sum by (LABEL) (max_over_time(DCGM_FI_DEV_GPU_UTIL[5m]) >= bool 5)` (a `bool` comparison,
//! so that no busy GPU is a 0, not a missing series). An answer of any of the three that is
//! not a complete success (an error, a warning such as a partial response, a series without
//! the label, the same instance twice, a value out of range) is a failed read, never idleness;
//! an instance the memory or count answers do not name has no memory or count.
//!
//! Credentials go in a file, not the URL: a bearer token (`EBB_PROMETHEUS_BEARER_TOKEN_FILE`)
//! or `user:password` for basic authentication (`EBB_PROMETHEUS_BASIC_AUTH_FILE`), read again
//! at every query so that a rotated secret is picked up. Messages never quote a URL's user
//! information, should one be given anyway.

use super::{redact_userinfo, CloudError};
use crate::fleet::{Sample, GPU_BUSY_PERCENT};
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

    /// The GPU memory query: the most any GPU of each instance held in each period, MiB.
    fn memory_query(&self) -> String {
        format!(
            "max by ({}) (max_over_time(DCGM_FI_DEV_FB_USED[{}s]))",
            self.settings.label,
            self.settings.step.as_secs().max(1)
        )
    }

    /// The busy GPUs query: how many GPUs of each instance were at or above
    /// [`GPU_BUSY_PERCENT`] in each period.
    fn busy_query(&self) -> String {
        format!(
            "sum by ({}) (max_over_time(DCGM_FI_DEV_GPU_UTIL[{}s]) >= bool {GPU_BUSY_PERCENT})",
            self.settings.label,
            self.settings.step.as_secs().max(1)
        )
    }

    /// GPU readings of every instance the utilisation query answers for, from `from` to `to`:
    /// one per step, oldest first, by instance id, with the memory and busy count where their
    /// queries answer for the instance at that time.
    pub async fn gpu_utilisation(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<HashMap<String, Vec<Sample>>, CloudError> {
        let label = &self.settings.label;
        let (util, memory, busy) = futures_util::try_join!(
            self.range(self.settings.query(), from, to),
            self.range(self.memory_query(), from, to),
            self.range(self.busy_query(), from, to),
        )?;
        let percent = |v: f64| (0.0..=100.0).contains(&v);
        let util = series(util, label, "a GPU utilisation in percent", percent)?;
        let count = |v: f64| v >= 0.0 && v <= f64::from(u16::MAX) && v.fract() == 0.0;
        let memory = series(memory, label, "a GPU memory in MiB", |v| {
            v >= 0.0 && v <= f64::from(u32::MAX)
        })?;
        let busy = series(busy, label, "a count of GPUs", count)?;
        Ok(combined(util, &memory, &busy))
    }

    /// The values of the range `query` from `from` to `to` (one per step, oldest first), by
    /// the instance the label names: an activity signal's readings.
    pub async fn values(
        &self,
        query: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Points, CloudError> {
        let answer = self.range(query.to_string(), from, to).await?;
        series(answer, &self.settings.label, "a number", f64::is_finite)
    }

    /// The answer to the range `query` from `from` to `to`.
    async fn range(
        &self,
        query: String,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Answer, CloudError> {
        let url = format!("{}/api/v1/query_range", self.settings.url);
        let form = [
            ("query", query),
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
        serde_json::from_str(&body).map_err(|e| {
            failed(format!(
                "{shown} answered {status} with something that is not Prometheus's JSON: {e}"
            ))
        })
    }
}

/// Each instance's points of one query, oldest first.
pub type Points = HashMap<String, Vec<(DateTime<Utc>, f64)>>;

/// The utilisation `util` with, at each of its times, the `memory` and `busy` count of the
/// same instance and time when their answers have them.
fn combined(util: Points, memory: &Points, busy: &Points) -> HashMap<String, Vec<Sample>> {
    let at = |points: Option<&Vec<(DateTime<Utc>, f64)>>, t: DateTime<Utc>| {
        let points = points?;
        let k = points.binary_search_by_key(&t, |(at, _)| *at).ok()?;
        Some(points[k].1)
    };
    util.into_iter()
        .map(|(id, points)| {
            let (memory, busy) = (memory.get(&id), busy.get(&id));
            let samples = points
                .into_iter()
                .map(|(t, percent)| Sample {
                    at: t,
                    percent,
                    memory_mib: at(memory, t).map(|m| m.round() as u32),
                    gpus_busy: at(busy, t).map(|b| b as u16),
                })
                .collect();
            (id, samples)
        })
        .collect()
}

/// The points of a complete answer, by the instance `label` names, each value `valid` (it
/// is `what`).
fn series(
    answer: Answer,
    label: &str,
    what: &str,
    valid: impl Fn(f64) -> bool,
) -> Result<Points, CloudError> {
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
        for (at, text) in &series.values {
            let value: f64 = text.parse().unwrap_or(f64::NAN);
            let at = DateTime::from_timestamp_millis((at * 1000.0).round() as i64);
            match at {
                Some(at) if valid(value) => samples.push((at, value)),
                _ => {
                    return Err(failed(format!(
                        "instance {id} has a reading that is not {what}: {text}"
                    )))
                }
            }
        }
        // Prometheus answers in time order; the look-ups by time rely on it.
        samples.sort_by_key(|(at, _)| *at);
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

    fn parse(json: &str) -> Result<Points, CloudError> {
        parse_as(json, |v| (0.0..=100.0).contains(&v))
    }

    /// The points of `json`, each value `valid`.
    fn parse_as(json: &str, valid: fn(f64) -> bool) -> Result<Points, CloudError> {
        series(
            serde_json::from_str(json).unwrap(),
            "instance_id",
            "a GPU utilisation in percent",
            valid,
        )
    }

    #[test]
    fn a_complete_matrix_gives_readings_by_instance() {
        let got = parse(
            r#"{"status":"success","data":{"resultType":"matrix","result":[
                {"metric":{"instance_id":"i-1"},"values":[[1764493200,"3"],[1764493500,"97.5"]]}]}}"#,
        )
        .unwrap();
        assert_eq!(got["i-1"].len(), 2);
        assert_eq!(got["i-1"][1].1, 97.5);
        assert_eq!(got["i-1"][0].0.timestamp(), 1_764_493_200);
    }

    #[test]
    fn memory_and_busy_counts_join_the_utilisation_of_the_same_instance_and_time() {
        let util = parse(
            r#"{"status":"success","data":{"resultType":"matrix","result":[
                {"metric":{"instance_id":"i-1"},"values":[[1764493200,"3"],[1764493500,"97.5"],[1764493800,"40"]]},
                {"metric":{"instance_id":"i-2"},"values":[[1764493200,"0"]]}]}}"#,
        )
        .unwrap();
        let memory = parse_as(
            r#"{"status":"success","data":{"resultType":"matrix","result":[
                {"metric":{"instance_id":"i-1"},"values":[[1764493200,"12288"],[1764493500,"40960.4"]]}]}}"#,
            |v| v >= 0.0,
        )
        .unwrap();
        let busy = parse(
            r#"{"status":"success","data":{"resultType":"matrix","result":[
                {"metric":{"instance_id":"i-1"},"values":[[1764493200,"0"],[1764493800,"3"]]}]}}"#,
        )
        .unwrap();
        let got = combined(util, &memory, &busy);
        let i1: Vec<(Option<u32>, Option<u16>)> = got["i-1"]
            .iter()
            .map(|s| (s.memory_mib, s.gpus_busy))
            .collect();
        assert_eq!(
            i1,
            [(Some(12288), Some(0)), (Some(40960), None), (None, Some(3))]
        );
        assert_eq!(got["i-1"][1].percent, 97.5);
        assert_eq!(
            (got["i-2"][0].memory_mib, got["i-2"][0].gpus_busy),
            (None, None)
        );
    }

    #[test]
    fn the_memory_and_busy_queries_take_the_label_and_the_step() {
        let mut settings = PrometheusSettings::new("http://p:9090");
        settings.label = "host_id".into();
        let p = Prometheus::new(settings).unwrap();
        assert_eq!(
            p.memory_query(),
            "max by (host_id) (max_over_time(DCGM_FI_DEV_FB_USED[300s]))"
        );
        assert_eq!(
            p.busy_query(),
            "sum by (host_id) (max_over_time(DCGM_FI_DEV_GPU_UTIL[300s]) >= bool 5)"
        );
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
