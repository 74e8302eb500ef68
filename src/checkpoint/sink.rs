//! Where checkpoints are kept (`EBB_AUDIT_CHECKPOINTS`): `file:DIR`, one file per checkpoint,
//! created only if absent; or `s3://BUCKET/PREFIX`, one object per checkpoint, written with
//! `If-None-Match: *` so S3 refuses to replace one.

use super::Checkpoint;
use aws_config::BehaviorVersion;
use aws_sdk_s3::primitives::ByteStream;
use std::path::PathBuf;
use std::time::Duration;

/// A place checkpoints are written to and read from.
#[derive(Debug, Clone)]
pub enum Sink {
    /// A directory.
    Dir(PathBuf),
    /// Objects under a prefix of a bucket.
    S3 {
        /// The client.
        client: aws_sdk_s3::Client,
        /// The bucket.
        bucket: String,
        /// Object names begin with this (empty, or ending in `/`).
        prefix: String,
    },
}

/// Why a checkpoint could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The setting is neither `file:DIR` nor `s3://BUCKET/PREFIX`.
    #[error("EBB_AUDIT_CHECKPOINTS \"{0}\" is neither file:DIR nor s3://BUCKET/PREFIX")]
    Unknown(String),
    /// A file could not be written or read.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// S3 refused or failed.
    #[error("s3://{bucket}/{key}: {message}")]
    S3 {
        /// The bucket.
        bucket: String,
        /// The object or prefix.
        key: String,
        /// What S3 said.
        message: String,
    },
    /// A stored checkpoint is not one.
    #[error("{0} is not a checkpoint: {1}")]
    Malformed(String, serde_json::Error),
}

/// What writing a checkpoint did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// It is stored.
    New,
    /// One of the same row is stored already (another replica made it); it is kept.
    AlreadyThere,
}

/// Time allowed for one S3 call.
const S3_ATTEMPT: Duration = Duration::from_secs(10);

impl Sink {
    /// The place `setting` names; S3 with the standard AWS credential chain.
    pub async fn open(setting: &str) -> Result<Sink, SinkError> {
        if let Some(dir) = setting.strip_prefix("file:") {
            if !dir.is_empty() {
                return Ok(Sink::Dir(PathBuf::from(dir)));
            }
        }
        let Some(rest) = setting.strip_prefix("s3://") else {
            return Err(SinkError::Unknown(setting.to_string()));
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(SinkError::Unknown(setting.to_string()));
        }
        let mut prefix = prefix.trim_matches('/').to_string();
        if !prefix.is_empty() {
            prefix.push('/');
        }
        let timeouts = aws_config::timeout::TimeoutConfig::builder()
            .connect_timeout(Duration::from_secs(5))
            .operation_attempt_timeout(S3_ATTEMPT)
            .operation_timeout(S3_ATTEMPT * 3)
            .build();
        let config = aws_config::defaults(BehaviorVersion::latest())
            .timeout_config(timeouts)
            .load()
            .await;
        // An endpoint of its own (an emulator, a gateway) rarely resolves bucket subdomains.
        let path_style = config.endpoint_url().is_some();
        let s3 = aws_sdk_s3::config::Builder::from(&config)
            .force_path_style(path_style)
            .build();
        Ok(Sink::S3 {
            client: aws_sdk_s3::Client::from_conf(s3),
            bucket: bucket.to_string(),
            prefix,
        })
    }

    /// Stores `checkpoint` under its name, never over an existing one.
    pub async fn write(&self, checkpoint: &Checkpoint) -> Result<Written, SinkError> {
        let name = checkpoint.name();
        let body = serde_json::to_vec_pretty(checkpoint).unwrap_or_default();
        match self {
            Sink::Dir(dir) => {
                let path = dir.join(&name);
                match super::write_new(&path, &body, 0o444) {
                    Ok(()) => Ok(Written::New),
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        Ok(Written::AlreadyThere)
                    }
                    Err(source) => Err(SinkError::Io { path, source }),
                }
            }
            Sink::S3 {
                client,
                bucket,
                prefix,
            } => {
                let key = format!("{prefix}{name}");
                let put = client
                    .put_object()
                    .bucket(bucket)
                    .key(&key)
                    .if_none_match("*")
                    .content_type("application/json")
                    .body(ByteStream::from(body))
                    .send()
                    .await;
                match put {
                    Ok(_) => Ok(Written::New),
                    Err(e) if e.raw_response().map(|r| r.status().as_u16()) == Some(412) => {
                        Ok(Written::AlreadyThere)
                    }
                    Err(e) => Err(s3_error(bucket, &key, e)),
                }
            }
        }
    }

    /// Every checkpoint stored, with its name, in order of `seq`.
    pub async fn read_all(&self) -> Result<Vec<(String, Checkpoint)>, SinkError> {
        let mut found = match self {
            Sink::Dir(dir) => read_dir(dir)?,
            Sink::S3 {
                client,
                bucket,
                prefix,
            } => read_objects(client, bucket, prefix).await?,
        };
        found.sort_by_key(|(_, c)| c.seq);
        Ok(found)
    }
}

fn parse(name: &str, bytes: &[u8]) -> Result<Checkpoint, SinkError> {
    serde_json::from_slice(bytes).map_err(|e| SinkError::Malformed(name.to_string(), e))
}

fn is_checkpoint(name: &str) -> bool {
    name.starts_with("checkpoint-") && name.ends_with(".json")
}

fn read_dir(dir: &PathBuf) -> Result<Vec<(String, Checkpoint)>, SinkError> {
    let io = |path: PathBuf| move |source| SinkError::Io { path, source };
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io(dir.clone()))? {
        let path = entry.map_err(io(dir.clone()))?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        if is_checkpoint(&name) {
            let bytes = std::fs::read(&path).map_err(io(path.clone()))?;
            found.push((path.display().to_string(), parse(&name, &bytes)?));
        }
    }
    Ok(found)
}

async fn read_objects(
    client: &aws_sdk_s3::Client,
    bucket: &str,
    prefix: &str,
) -> Result<Vec<(String, Checkpoint)>, SinkError> {
    let mut found = Vec::new();
    let mut pages = client
        .list_objects_v2()
        .bucket(bucket)
        .prefix(prefix)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| s3_error(bucket, prefix, e))?;
        for object in page.contents() {
            let Some(key) = object.key() else { continue };
            if !is_checkpoint(key.rsplit('/').next().unwrap_or_default()) {
                continue;
            }
            let got = client
                .get_object()
                .bucket(bucket)
                .key(key)
                .send()
                .await
                .map_err(|e| s3_error(bucket, key, e))?;
            let bytes = got.body.collect().await.map_err(|e| SinkError::S3 {
                bucket: bucket.to_string(),
                key: key.to_string(),
                message: e.to_string(),
            })?;
            let name = format!("s3://{bucket}/{key}");
            found.push((name.clone(), parse(&name, &bytes.into_bytes())?));
        }
    }
    Ok(found)
}

fn s3_error<E, R>(bucket: &str, key: &str, err: aws_sdk_s3::error::SdkError<E, R>) -> SinkError
where
    E: std::error::Error + 'static,
    R: std::fmt::Debug,
{
    SinkError::S3 {
        bucket: bucket.to_string(),
        key: key.to_string(),
        message: aws_sdk_s3::error::DisplayErrorContext(&err).to_string(),
    }
}
