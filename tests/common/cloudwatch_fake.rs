//! A fake of CloudWatch's GetMetricData, for the tests that run the `ebb` binary against moto
//! (which has no CloudWatch in the current SDK's protocol) with `AWS_ENDPOINT_URL_CLOUDWATCH`
//! pointed here.
//!
//! It speaks the protocol aws-sdk-cloudwatch sends today, Smithy RPC v2 CBOR: a `POST` to
//! `/service/GraniteServiceVersion20100801/operation/GetMetricData` whose body is a CBOR map
//! (`MetricDataQueries`, `StartTime`, `EndTime` as tag-1 epoch seconds), answered with a CBOR
//! map of `MetricDataResults` and the `smithy-protocol: rpc-v2-cbor` header. Each query is
//! answered by what the test set for the instance its `InstanceId` dimension names, or for
//! that instance's metric of the query's namespace, name and other dimensions: a reading at
//! every five-minute period of the window (or one that changes at a time), a `Complete` result
//! without readings, or no readings and a status of the test's choosing (`InternalError`,
//! `Forbidden`), as CloudWatch marks a query it failed in an answer of HTTP 200. Signatures are not checked. It runs on a
//! thread of its own, so that a test may block on the binary meanwhile.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::post;
use axum::Router;
use ciborium::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The path of GetMetricData in the RPC v2 CBOR protocol.
const GET_METRIC_DATA: &str = "/service/GraniteServiceVersion20100801/operation/GetMetricData";

/// What an instance's queries are answered with.
#[derive(Debug, Clone, PartialEq)]
pub enum Reading {
    /// `Complete`, this value at every five-minute period of the window asked.
    Value(f64),
    /// `Complete`, no readings: the agent sent nothing.
    NoData,
    /// No readings, the query marked with this status (`InternalError`, `Forbidden`).
    Failed(&'static str),
    /// `Complete`, at every five-minute period of the window `before` until epoch second
    /// `at`, then `after`.
    Changed { before: f64, at: i64, after: f64 },
}

/// A metric of one instance: its namespace, name and dimensions other than `InstanceId`.
type MetricOf = (String, String, String, BTreeMap<String, String>);

#[derive(Default)]
struct Fake {
    readings: BTreeMap<String, Reading>,
    /// What a metric's queries are answered with, when not the instance's reading; by
    /// instance and metric name, with the namespace and dimensions that must match.
    metrics: BTreeMap<(String, String), (MetricOf, Reading)>,
    /// Queries asked, by instance.
    asked: BTreeMap<String, usize>,
}

/// The fake, serving on 127.0.0.1.
pub struct CloudWatchFake {
    /// Its address, for `AWS_ENDPOINT_URL_CLOUDWATCH`.
    pub url: String,
    state: Arc<Mutex<Fake>>,
}

impl CloudWatchFake {
    /// Serves on a port of its own, on a thread of its own. Instances it was told nothing of
    /// are answered [`Reading::NoData`].
    pub fn start() -> CloudWatchFake {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(Fake::default()));
        let shared = state.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let app = Router::new()
                    .route(GET_METRIC_DATA, post(get_metric_data))
                    .with_state(shared);
                axum::serve(listener, app).await.unwrap();
            });
        });
        CloudWatchFake { url, state }
    }

    /// Answers `instance`'s queries with `reading` from now on.
    pub fn set(&self, instance: &str, reading: Reading) {
        let mut fake = self.state.lock().unwrap();
        fake.readings.insert(instance.to_string(), reading);
    }

    /// Answers the queries of `instance`'s metric `namespace`/`metric` whose other dimensions
    /// are exactly `dimensions` with `reading` from now on; a query of that metric with other
    /// dimensions or another namespace finds no data, as CloudWatch answers a metric it does
    /// not have.
    pub fn set_metric(
        &self,
        instance: &str,
        (namespace, metric): (&str, &str),
        dimensions: &[(&str, &str)],
        reading: Reading,
    ) {
        let dimensions = dimensions
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let of = (
            instance.to_string(),
            namespace.to_string(),
            metric.to_string(),
            dimensions,
        );
        let mut fake = self.state.lock().unwrap();
        let key = (instance.to_string(), metric.to_string());
        fake.metrics.insert(key, (of, reading));
    }

    /// How many queries named `instance` so far.
    pub fn asked(&self, instance: &str) -> usize {
        let fake = self.state.lock().unwrap();
        fake.asked.get(instance).copied().unwrap_or(0)
    }
}

/// `value`'s entry `key`, when it is a map that has one.
fn field<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    value
        .as_map()?
        .iter()
        .find(|(k, _)| k.as_text() == Some(key))
        .map(|(_, v)| v)
}

/// A tag-1 timestamp's epoch seconds.
fn seconds(value: &Value) -> i64 {
    match value {
        Value::Tag(1, inner) => match &**inner {
            Value::Integer(n) => i64::try_from(*n).unwrap(),
            Value::Float(f) => *f as i64,
            other => panic!("a timestamp of {other:?}"),
        },
        other => panic!("not a timestamp: {other:?}"),
    }
}

/// The metric a query asks for; its instance is its `InstanceId` dimension.
fn metric_of(query: &Value) -> MetricOf {
    let metric = field(query, "MetricStat").and_then(|s| field(s, "Metric"));
    let text = |key: &str| {
        let value = metric.and_then(|m| field(m, key)).and_then(Value::as_text);
        value.unwrap_or_default().to_string()
    };
    let mut dimensions: BTreeMap<String, String> = metric
        .and_then(|m| field(m, "Dimensions"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|d| {
            let text = |key| field(d, key).and_then(Value::as_text).unwrap().to_string();
            (text("Name"), text("Value"))
        })
        .collect();
    let instance = dimensions
        .remove("InstanceId")
        .expect("a query of an instance");
    (instance, text("Namespace"), text("MetricName"), dimensions)
}

fn text(s: &str) -> Value {
    Value::Text(s.to_string())
}

async fn get_metric_data(State(state): State<Arc<Mutex<Fake>>>, body: Bytes) -> impl IntoResponse {
    let request: Value = ciborium::from_reader(&body[..]).expect("a CBOR request");
    let start = seconds(field(&request, "StartTime").expect("StartTime"));
    let end = seconds(field(&request, "EndTime").expect("EndTime"));
    let queries = field(&request, "MetricDataQueries")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut fake = state.lock().unwrap();
    let mut results = Vec::new();
    for query in &queries {
        let id = field(query, "Id").and_then(Value::as_text).unwrap();
        let metric = metric_of(query);
        let instance = metric.0.clone();
        *fake.asked.entry(instance.clone()).or_default() += 1;
        let reading = match fake.metrics.get(&(instance.clone(), metric.2.clone())) {
            Some((set, reading)) if *set == metric => reading.clone(),
            Some(_) => Reading::NoData,
            None => fake
                .readings
                .get(&instance)
                .cloned()
                .unwrap_or(Reading::NoData),
        };
        let (status, value) = match reading {
            Reading::Value(v) => ("Complete", Some((v, i64::MAX, v))),
            Reading::Changed { before, at, after } => ("Complete", Some((before, at, after))),
            Reading::NoData => ("Complete", None),
            Reading::Failed(status) => (status, None),
        };
        let (mut times, mut values) = (Vec::new(), Vec::new());
        if let Some((before, at, after)) = value {
            // Every period from the first whole one of the window to its end, newest first
            // (CloudWatch's default `TimestampDescending`).
            let mut period = end - end.rem_euclid(300);
            while period >= start {
                times.push(Value::Tag(1, Box::new(Value::Integer(period.into()))));
                let v = if period < at { before } else { after };
                values.push(Value::Float(v));
                period -= 300;
            }
        }
        results.push(Value::Map(vec![
            (text("Id"), text(id)),
            (text("Label"), text(id)),
            (text("Timestamps"), Value::Array(times)),
            (text("Values"), Value::Array(values)),
            (text("StatusCode"), text(status)),
        ]));
    }
    let answer = Value::Map(vec![
        (text("MetricDataResults"), Value::Array(results)),
        (text("Messages"), Value::Array(Vec::new())),
    ]);
    let mut body = Vec::new();
    ciborium::into_writer(&answer, &mut body).unwrap();
    (
        [
            (CONTENT_TYPE.as_str(), "application/cbor"),
            ("smithy-protocol", "rpc-v2-cbor"),
        ],
        body,
    )
}
