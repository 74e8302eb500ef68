//! Where GPU utilisation is read from: CloudWatch through the provider (the default), or a
//! Prometheus server (`EBB_METRICS=prometheus:URL`).

use crate::cloud::prometheus::{Prometheus, PrometheusSettings};
use anyhow::Result;
use clap::Args;

/// The GPU metric source flags.
#[derive(Args)]
pub(super) struct GpuSourceArgs {
    /// Where GPU utilisation is read from: cloudwatch, or prometheus:URL (one range query a
    /// tick for the whole fleet, over DCGM's DCGM_FI_DEV_GPU_UTIL by default).
    #[arg(long, env = "EBB_METRICS", default_value = "cloudwatch", value_parser = parse_source)]
    metrics: Source,
    /// The label of Prometheus's answer that holds the EC2 instance id.
    #[arg(
        long,
        env = "EBB_PROMETHEUS_INSTANCE_LABEL",
        default_value = "instance_id",
        value_name = "LABEL"
    )]
    prometheus_instance_label: String,
    /// The PromQL query, when not the busiest GPU per instance and 5 minutes; it must give one
    /// series per instance, labelled with the instance label.
    #[arg(long, env = "EBB_PROMETHEUS_QUERY", value_name = "PROMQL")]
    prometheus_query: Option<String>,
}

/// A GPU metric source.
#[derive(Clone)]
enum Source {
    CloudWatch,
    Prometheus(String),
}

fn parse_source(s: &str) -> Result<Source, String> {
    if s == "cloudwatch" {
        return Ok(Source::CloudWatch);
    }
    match s.strip_prefix("prometheus:") {
        Some(url) if url.starts_with("http://") || url.starts_with("https://") => {
            Ok(Source::Prometheus(url.to_string()))
        }
        _ => Err(format!(
            "\"{s}\" is not a metric source: cloudwatch, or prometheus:URL (like prometheus:http://prometheus:9090)"
        )),
    }
}

impl GpuSourceArgs {
    /// The Prometheus server to read from, when one is chosen.
    pub(super) fn prometheus(self) -> Result<Option<Prometheus>> {
        let Source::Prometheus(url) = self.metrics else {
            return Ok(None);
        };
        let mut settings = PrometheusSettings::new(&url);
        settings.label = self.prometheus_instance_label;
        settings.query = self.prometheus_query;
        Ok(Some(Prometheus::new(settings).map_err(anyhow::Error::msg)?))
    }
}
