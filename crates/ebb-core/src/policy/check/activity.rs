//! `idle.activity`: what else shows a person using an instance, beside its GPUs.

use super::{child, keys, Checker, Fields};
use crate::policy::yaml::{self, Step, Value};
use crate::policy::{Signal, SignalSource, PRIVATE_IP};
use std::collections::BTreeMap;

/// The dimension that names an instance's own metrics.
const INSTANCE_DIMENSION: &str = "InstanceId";

/// The most dimensions CloudWatch takes for one metric.
const MAX_DIMENSIONS: usize = 30;

impl Checker {
    /// The list of signals, each named once.
    pub(super) fn activity(&mut self, v: &Value, path: &[Step]) -> Option<Vec<Signal>> {
        let items = self.seq(v, path, "a list of activity signals")?;
        let mut signals = Vec::with_capacity(items.len());
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            let at = child(path, Step::Index(i));
            match self.signal(item, &at) {
                Some(s) if signals.iter().any(|o: &Signal| o.name == s.name) => {
                    self.problem(
                        &at,
                        format!(
                            "two activity signals are named \"{}\": give each its own name",
                            s.name
                        ),
                    );
                    ok = false;
                }
                Some(s) => signals.push(s),
                None => ok = false,
            }
        }
        ok.then_some(signals)
    }

    /// One signal: a mapping of one key, its kind, to its settings.
    fn signal(&mut self, v: &Value, path: &[Step]) -> Option<Signal> {
        let what = "an activity signal (heartbeat, jupyter, prometheus or cloudwatch)";
        let f = self.fields(v, path, what, keys::SIGNAL)?;
        let mut kinds = f.entries.iter().map(|(k, _)| k.as_str());
        let (Some(kind), None) = (kinds.next(), kinds.next()) else {
            self.problem(
                path,
                format!(
                    "an activity signal is a mapping of one kind to its settings, one of: {}",
                    keys::SIGNAL.join(", ")
                ),
            );
            return None;
        };
        let (body, at) = f.get(kind)?;
        let (source, name) = match kind {
            "heartbeat" => {
                let f = self.fields(body, &at, "heartbeat settings", keys::HEARTBEAT)?;
                let max_age = match f.get("max_age") {
                    Some((v, p)) => self.duration(v, &p, "max_age"),
                    None => {
                        self.missing(
                            &at,
                            "max_age",
                            "a heartbeat needs \"max_age\": how long one keeps the instance (like \"10m\")".into(),
                        );
                        None
                    }
                };
                let name = self.signal_name(&f, kind);
                (SignalSource::Heartbeat { max_age: max_age? }, name?)
            }
            "jupyter" => {
                let f = self.fields(body, &at, "jupyter settings", keys::JUPYTER)?;
                let url = match f.get("url") {
                    Some((v, p)) => {
                        let url = self.string(v, &p, "a URL like \"http://{private_ip}:8888\"");
                        Some(self.jupyter_template(url?, &p)?)
                    }
                    None => None,
                };
                (SignalSource::Jupyter { url }, self.signal_name(&f, kind)?)
            }
            "prometheus" => self.prometheus(body, &at)?,
            _ => self.cloudwatch(body, &at)?,
        };
        Some(Signal { name, source })
    }

    /// A prometheus signal's settings, and its name.
    fn prometheus(&mut self, body: &Value, at: &[Step]) -> Option<(SignalSource, String)> {
        let f = self.fields(body, at, "prometheus settings", keys::PROMETHEUS_SIGNAL)?;
        let query = self.required_text(
            &f,
            "query",
            "a prometheus signal needs \"query\": PromQL giving one series per instance",
        );
        let active_above = self.active_above(&f);
        let name = self.signal_name(&f, "prometheus");
        let source = SignalSource::Prometheus {
            query: query?,
            active_above: active_above?,
        };
        Some((source, name?))
    }

    /// A cloudwatch signal's settings, and its name. `InstanceId` is not a dimension to give:
    /// ebb adds each instance's own, so that no box reads another's metric.
    fn cloudwatch(&mut self, body: &Value, at: &[Step]) -> Option<(SignalSource, String)> {
        let f = self.fields(body, at, "cloudwatch settings", keys::CLOUDWATCH_SIGNAL)?;
        let namespace = self.required_text(
            &f,
            "namespace",
            "a cloudwatch signal needs \"namespace\": the metric's namespace (like \"CWAgent\")",
        );
        let metric = self.required_text(
            &f,
            "metric",
            "a cloudwatch signal needs \"metric\": the metric's name (like \"procstat_lookup_pid_count\")",
        );
        let dimensions = match f.get("dimensions") {
            Some((v, p)) => self.dimensions(v, &p),
            None => Some(BTreeMap::new()),
        };
        let active_above = self.active_above(&f);
        let name = self.signal_name(&f, "cloudwatch");
        let source = SignalSource::Cloudwatch {
            namespace: namespace?,
            metric: metric?,
            dimensions: dimensions?,
            active_above: active_above?,
        };
        Some((source, name?))
    }

    /// A cloudwatch signal's `dimensions`: names to values, beside the `InstanceId` ebb adds.
    fn dimensions(&mut self, v: &Value, path: &[Step]) -> Option<BTreeMap<String, String>> {
        let Value::Mapping(m) = v else {
            self.expected(path, "a mapping of dimension names to values", v);
            return None;
        };
        let mut dimensions = BTreeMap::new();
        let mut ok = true;
        for (k, value) in m {
            let Some(key) = yaml::key_text(k) else {
                self.problem(path, "a dimension's name is not text".into());
                ok = false;
                continue;
            };
            let at = child(path, Step::Key(key.clone()));
            if key.eq_ignore_ascii_case(INSTANCE_DIMENSION) {
                self.problem(
                    &at,
                    format!("leave out {INSTANCE_DIMENSION}: ebb adds each instance's own"),
                );
                ok = false;
                continue;
            }
            match self.scalar_text(value, &at, "a dimension value") {
                Some(text) if !key.is_empty() && !text.is_empty() => {
                    dimensions.insert(key, text);
                }
                Some(_) => {
                    self.problem(&at, "a dimension needs a name and a value".into());
                    ok = false;
                }
                None => ok = false,
            }
        }
        // CloudWatch takes at most 30 dimensions a metric, InstanceId among them.
        if dimensions.len() > MAX_DIMENSIONS - 1 {
            self.problem(
                path,
                format!(
                    "{} dimensions: CloudWatch takes at most {MAX_DIMENSIONS} a metric, {INSTANCE_DIMENSION} among them",
                    dimensions.len()
                ),
            );
            ok = false;
        }
        ok.then_some(dimensions)
    }

    /// A required, non-empty text field `key`, or `missing` said of it.
    fn required_text(&mut self, f: &Fields, key: &str, missing: &str) -> Option<String> {
        let Some((v, p)) = f.get(key) else {
            self.missing(&f.path, key, missing.to_string());
            return None;
        };
        let text = self.string(v, &p, "text")?;
        if text.trim().is_empty() {
            self.problem(&p, format!("the {key} is empty"));
            return None;
        }
        Some(text)
    }

    /// `active_above`, 0 unless given.
    fn active_above(&mut self, f: &Fields) -> Option<f64> {
        match f.get("active_above") {
            Some((v, p)) => self.number(v, &p),
            None => Some(0.0),
        }
    }

    /// A jupyter signal's `url`: `http://` or `https://`, then [`PRIVATE_IP`] as its whole
    /// host, so that the token goes only to each box's own private address.
    fn jupyter_template(&mut self, url: String, path: &[Step]) -> Option<String> {
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"));
        let host_is_ip = rest.is_some_and(|rest| {
            rest.strip_prefix(PRIVATE_IP)
                .is_some_and(|after| after.is_empty() || after.starts_with([':', '/']))
        });
        if !host_is_ip {
            self.problem(
                path,
                format!(
                    "url \"{url}\" must be http:// or https://, then {PRIVATE_IP} as its host (like \"http://{PRIVATE_IP}:8888\"): ebb sends its Jupyter token only to each box's own private address"
                ),
            );
            return None;
        }
        Some(url)
    }

    /// `name`, or the kind.
    fn signal_name(&mut self, f: &Fields, kind: &str) -> Option<String> {
        match f.get("name") {
            Some((v, p)) => {
                let name = self.string(v, &p, "a name")?;
                let fits = !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                if !fits {
                    self.problem(
                        &p,
                        format!("\"{name}\" is not a signal name: use letters, digits, - and _"),
                    );
                    return None;
                }
                Some(name)
            }
            None => Some(kind.to_string()),
        }
    }

    /// A finite number.
    fn number(&mut self, v: &Value, path: &[Step]) -> Option<f64> {
        match v.as_f64().filter(|n| n.is_finite()) {
            Some(n) => Some(n),
            None => {
                self.expected(path, "a number", v);
                None
            }
        }
    }
}
