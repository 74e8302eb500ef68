//! Signed checkpoints of the audit chain's head, kept outside the database.
//!
//! The hash chain alone proves nothing against someone who can write the database: they can
//! delete the newest rows, or edit a row and recompute every hash after it. A checkpoint is the
//! head's `(seq, hash)` at a time, signed with an Ed25519 key that the database never holds, and
//! written where the database's users cannot rewrite it (a directory of write-once files, or
//! S3 objects written with `If-None-Match: *`), and also logged as a JSON line. `ebb audit
//! verify --checkpoints` then finds every checkpoint's row in the chain with the signed hash,
//! or names the checkpoint the log contradicts.
//!
//! Rows appended after the newest checkpoint are covered by nothing until the next one.

mod publish;
mod sink;

pub use publish::{PublishError, Published, Publisher};
pub use sink::{Sink, SinkError, Written};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use chrono::{DateTime, SecondsFormat, Utc};
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use ed25519_dalek::{Signature, Signer as _, SigningKey, Verifier as _, VerifyingKey};
use serde::{Deserialize, Serialize};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// What a signature covers, besides the fields: a checkpoint's signature cannot be mistaken for
/// a signature of anything else made with the same key.
const DOMAIN: &str = "ebb audit checkpoint v1";

/// The chain's head at a time, signed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The `seq` of the newest row.
    pub seq: i64,
    /// That row's hash, lower-case hex.
    pub hash: String,
    /// When the checkpoint was made.
    pub at: DateTime<Utc>,
    /// Ed25519 over [`Checkpoint::signed_text`], base64.
    pub signature: String,
}

/// Why a key or a checkpoint cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The key file cannot be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a key of the expected kind.
    #[error("{path} is not an Ed25519 {kind} key in PEM (make one with ebb audit keygen): {why}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// `private` or `public`.
        kind: &'static str,
        /// What the decoder said.
        why: String,
    },
}

impl Checkpoint {
    /// The head `(seq, hash)` at `at`, signed with `key`.
    pub fn sign(key: &SigningKey, seq: i64, hash: &str, at: DateTime<Utc>) -> Checkpoint {
        let text = signed_text(seq, hash, at);
        Checkpoint {
            seq,
            hash: hash.to_string(),
            at,
            signature: BASE64.encode(key.sign(text.as_bytes()).to_bytes()),
        }
    }

    /// Whether the signature is `key`'s over these fields.
    pub fn signed_by(&self, key: &VerifyingKey) -> bool {
        let Ok(bytes) = BASE64.decode(&self.signature) else {
            return false;
        };
        let Ok(signature) = Signature::from_slice(&bytes) else {
            return false;
        };
        let text = signed_text(self.seq, &self.hash, self.at);
        key.verify(text.as_bytes(), &signature).is_ok()
    }

    /// The name it is stored under: one per row, so a second checkpoint of the same head is
    /// refused rather than written over the first.
    pub fn name(&self) -> String {
        format!("checkpoint-{:020}.json", self.seq)
    }
}

/// The text a checkpoint's signature covers.
fn signed_text(seq: i64, hash: &str, at: DateTime<Utc>) -> String {
    format!(
        "{DOMAIN}\nseq {seq}\nhash {hash}\nat {}\n",
        at.to_rfc3339_opts(SecondsFormat::Micros, true)
    )
}

/// Makes a new key from the OS's random source: the private key (PKCS#8 PEM) to `path`,
/// readable by its owner only, and the public key (SPKI PEM) to `path.pub`. Refuses to write
/// over an existing file: an audit key lost is checkpoints that can no longer be verified.
pub fn keygen(path: &Path) -> Result<PathBuf, KeyError> {
    let key = SigningKey::generate(&mut rand_core::OsRng);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| KeyError::Io { path, source }
    };
    let malformed = |why: String| KeyError::Malformed {
        path: path.to_path_buf(),
        kind: "private",
        why,
    };
    let private = key
        .to_pkcs8_pem(Default::default())
        .map_err(|e| malformed(e.to_string()))?;
    let public = key
        .verifying_key()
        .to_public_key_pem(Default::default())
        .map_err(|e| malformed(e.to_string()))?;
    let public_path = public_path(path);
    write_new(path, private.as_bytes(), 0o600).map_err(io(path))?;
    write_new(&public_path, public.as_bytes(), 0o644).map_err(io(&public_path))?;
    Ok(public_path)
}

/// `FILE.pub`.
fn public_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".pub");
    PathBuf::from(name)
}

/// Creates `path` with `mode` and `bytes`; fails if it exists.
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// The private key in `path` (as `ebb audit keygen` writes it).
pub fn signing_key(path: &Path) -> Result<SigningKey, KeyError> {
    let text = read(path)?;
    SigningKey::from_pkcs8_pem(&text).map_err(|e| KeyError::Malformed {
        path: path.to_path_buf(),
        kind: "private",
        why: e.to_string(),
    })
}

/// The public key in `path` (`FILE.pub` of `ebb audit keygen`).
pub fn verifying_key(path: &Path) -> Result<VerifyingKey, KeyError> {
    let text = read(path)?;
    VerifyingKey::from_public_key_pem(&text).map_err(|e| KeyError::Malformed {
        path: path.to_path_buf(),
        kind: "public",
        why: e.to_string(),
    })
}

fn read(path: &Path) -> Result<String, KeyError> {
    std::fs::read_to_string(path).map_err(|source| KeyError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// How one checkpoint compares with the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// Its row is in the log with the hash it signed.
    Holds,
    /// The signature is not the public key's: the checkpoint was forged or altered.
    BadSignature,
    /// The log ends before its row: rows were deleted.
    RowMissing {
        /// The log's last `seq` (0 when empty).
        last: i64,
    },
    /// Its row has another hash: a row at or before it was changed and the chain recomputed.
    HashDiffers {
        /// The hash in the log.
        found: String,
    },
}

impl Finding {
    /// How `checkpoint` compares with the log, whose last row is `last` and whose hash of the
    /// checkpoint's row is `hash_in_log`.
    pub fn of(
        checkpoint: &Checkpoint,
        key: &VerifyingKey,
        hash_in_log: Option<&str>,
        last: i64,
    ) -> Finding {
        if !checkpoint.signed_by(key) {
            return Finding::BadSignature;
        }
        match hash_in_log {
            None => Finding::RowMissing { last },
            Some(h) if h == checkpoint.hash => Finding::Holds,
            Some(h) => Finding::HashDiffers {
                found: h.to_string(),
            },
        }
    }

    /// What it means, for people, naming the checkpoint `name`.
    pub fn describe(&self, name: &str, checkpoint: &Checkpoint) -> String {
        let (seq, at) = (checkpoint.seq, checkpoint.at.to_rfc3339());
        match self {
            Finding::Holds => format!("checkpoint {name} (row {seq}, {at}) holds"),
            Finding::BadSignature => format!(
                "checkpoint {name} (row {seq}, {at}) is not signed by the public key: \
                 it was altered, or another key made it"
            ),
            Finding::RowMissing { last } => format!(
                "checkpoint {name} (row {seq}, {at}) contradicts the log: the log ends at row \
                 {last}, so rows up to {seq} were deleted"
            ),
            Finding::HashDiffers { found } => format!(
                "checkpoint {name} (row {seq}, {at}) contradicts the log: row {seq} has hash \
                 {found}, the checkpoint signed {}: a row at or before it was changed and the \
                 chain recomputed",
                checkpoint.hash
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_covers_every_field() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let at = "2026-12-01T09:00:00Z".parse().unwrap();
        let c = Checkpoint::sign(&key, 12, "ab", at);
        assert!(c.signed_by(&key.verifying_key()));
        for changed in [
            Checkpoint {
                seq: 11,
                ..c.clone()
            },
            Checkpoint {
                hash: "ac".into(),
                ..c.clone()
            },
            Checkpoint {
                at: at + chrono::Duration::seconds(1),
                ..c.clone()
            },
        ] {
            assert!(!changed.signed_by(&key.verifying_key()));
        }
        let other = SigningKey::from_bytes(&[8; 32]);
        assert!(!c.signed_by(&other.verifying_key()));
    }
}
