//! Where GPU utilisation is read from: CloudWatch through the provider (the default), or a
//! Prometheus server (`EBB_METRICS=prometheus:URL`); and the token the boxes' Jupyter Servers
//! are asked with, for the idle rule's activity signals.

use crate::cloud::jupyter::{Jupyter, JupyterToken};
use crate::cloud::prometheus::{Prometheus, PrometheusAuth, PrometheusSettings};
use crate::cloud::redact_userinfo;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

/// The GPU metric source flags.
#[derive(Args)]
#[command(next_help_heading = "GPU metrics and activity signals")]
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
    /// A file holding the bearer token Prometheus requests carry (read at every query).
    #[arg(long, env = "EBB_PROMETHEUS_BEARER_TOKEN_FILE", value_name = "FILE")]
    prometheus_bearer_token_file: Option<PathBuf>,
    /// A file holding user:password for Prometheus's basic authentication (read at every
    /// query).
    #[arg(
        long,
        env = "EBB_PROMETHEUS_BASIC_AUTH_FILE",
        value_name = "FILE",
        conflicts_with = "prometheus_bearer_token_file"
    )]
    prometheus_basic_auth_file: Option<PathBuf>,
    /// The token ebb asks the boxes' Jupyter Servers with (idle.activity's jupyter signal).
    #[arg(
        long,
        env = "EBB_JUPYTER_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    jupyter_token: Option<String>,
    /// A file holding that token, read at every request.
    #[arg(
        long,
        env = "EBB_JUPYTER_TOKEN_FILE",
        value_name = "FILE",
        conflicts_with = "jupyter_token"
    )]
    jupyter_token_file: Option<PathBuf>,
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
            "\"{}\" is not a metric source: cloudwatch, or prometheus:URL (like prometheus:http://prometheus:9090)",
            redact_userinfo(s)
        )),
    }
}

impl GpuSourceArgs {
    /// The client that asks the boxes' Jupyter Servers.
    pub(super) fn jupyter(&self) -> Result<Jupyter> {
        let token = self
            .jupyter_token
            .clone()
            .map(JupyterToken::Value)
            .or(self.jupyter_token_file.clone().map(JupyterToken::File));
        Jupyter::new(token).map_err(anyhow::Error::msg)
    }

    /// The Prometheus server to read from, when one is chosen.
    pub(super) fn prometheus(self) -> Result<Option<Prometheus>> {
        let Source::Prometheus(url) = self.metrics else {
            return Ok(None);
        };
        let mut settings = PrometheusSettings::new(&url);
        settings.label = self.prometheus_instance_label;
        settings.query = self.prometheus_query;
        settings.auth = self
            .prometheus_bearer_token_file
            .map(PrometheusAuth::BearerTokenFile)
            .or(self
                .prometheus_basic_auth_file
                .map(PrometheusAuth::BasicAuthFile));
        if url.split("://").nth(1).is_some_and(|rest| {
            rest.split(['/', '?', '#'])
                .next()
                .is_some_and(|host| host.contains('@'))
        }) {
            tracing::warn!(
                "EBB_METRICS carries credentials in its URL: ebb hides them in what it shows, \
                 but put them in EBB_PROMETHEUS_BEARER_TOKEN_FILE or \
                 EBB_PROMETHEUS_BASIC_AUTH_FILE instead"
            );
        }
        Ok(Some(Prometheus::new(settings).map_err(anyhow::Error::msg)?))
    }
}
