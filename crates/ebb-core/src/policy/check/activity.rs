//! `idle.activity`: what else shows a person using an instance, beside its GPUs.

use super::{child, keys, Checker};
use crate::policy::yaml::{Step, Value};
use crate::policy::{Signal, SignalSource, PRIVATE_IP};

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
        let what = "an activity signal (heartbeat, jupyter or prometheus)";
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
            _ => {
                let f = self.fields(body, &at, "prometheus settings", keys::PROMETHEUS_SIGNAL)?;
                let query = match f.get("query") {
                    Some((v, p)) => self.string(v, &p, "a PromQL query"),
                    None => {
                        self.missing(
                            &at,
                            "query",
                            "a prometheus signal needs \"query\": PromQL giving one series per instance".into(),
                        );
                        None
                    }
                };
                let active_above = match f.get("active_above") {
                    Some((v, p)) => self.number(v, &p),
                    None => Some(0.0),
                };
                let name = self.signal_name(&f, kind);
                let query = query?;
                if query.trim().is_empty() {
                    self.problem(&at, "the query is empty".into());
                    return None;
                }
                (
                    SignalSource::Prometheus {
                        query,
                        active_above: active_above?,
                    },
                    name?,
                )
            }
        };
        Some(Signal { name, source })
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
    fn signal_name(&mut self, f: &super::Fields, kind: &str) -> Option<String> {
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
