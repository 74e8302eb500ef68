//! The integration tests that run other programs besides Postgres, each installed by
//! `scripts/test`: headless Chromium (the console in a browser), a Prometheus server, the
//! parliament IAM linter, Alibaba Cloud's Python SDK, PgBouncer in front of the tests'
//! Postgres, and a Postgres of the test's own that accepts only TLS (`openssl`).

#[path = "../common/mod.rs"]
mod common;

mod alerts;
mod cloud_sdks;
mod console_browser;
mod iam;
mod pooler;
mod prometheus;
mod snooze_browser;
mod tls;
