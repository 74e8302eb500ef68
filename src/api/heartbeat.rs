//! Heartbeats through the API: `POST /v1/instances/{id}/activity` says a person is using the
//! instance now, for the idle rule's `activity: [{heartbeat: {max_age}}]`, beside its
//! `ebb:active-at` tag. The token a box posts with is its own: HMAC-SHA256 of its instance id
//! under the key in `EBB_HEARTBEAT_KEY_FILE`, printed by `ebb heartbeat-token INSTANCE`. It is
//! good for that instance's heartbeats alone: it is not one of `EBB_API_TOKENS`, so it reads
//! nothing, and another instance's id does not match it. No per-box setting is kept.

use super::{ApiError, ApiResult, ApiState};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::path::Path as FilePath;

/// A key shorter than this is refused: the tokens it makes could be guessed.
const MIN_KEY_LEN: usize = 32;

/// The key heartbeat tokens are made with.
#[derive(Clone)]
pub struct HeartbeatKey(Vec<u8>);

impl std::fmt::Debug for HeartbeatKey {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("HeartbeatKey(***)")
    }
}

impl HeartbeatKey {
    /// The key the file at `path` holds (surrounding blanks ignored).
    pub fn from_file(path: &FilePath) -> Result<HeartbeatKey, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the heartbeat key file {}: {e}", path.display()))?;
        let key = text.trim();
        if key.len() < MIN_KEY_LEN {
            return Err(format!(
                "the heartbeat key file {} holds fewer than {MIN_KEY_LEN} characters: put a long random key in it (like the output of openssl rand -hex 32)",
                path.display()
            ));
        }
        Ok(HeartbeatKey(key.as_bytes().to_vec()))
    }

    fn mac(&self, instance: &str) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(b"ebb heartbeat\0");
        mac.update(instance.as_bytes());
        mac
    }

    /// The heartbeat token of `instance`, in hex.
    pub fn token_of(&self, instance: &str) -> String {
        let bytes = self.mac(instance).finalize().into_bytes();
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Whether `token` is the heartbeat token of `instance`, compared in constant time.
    fn verifies(&self, instance: &str, token: &str) -> bool {
        let token = token.trim();
        let bytes: Option<Vec<u8>> = (token.len() == 64)
            .then(|| {
                (0..64)
                    .step_by(2)
                    .map(|i| u8::from_str_radix(token.get(i..i + 2)?, 16).ok())
                    .collect()
            })
            .flatten();
        bytes.is_some_and(|b| self.mac(instance).verify_slice(&b).is_ok())
    }
}

/// `POST /v1/instances/{id}/activity`: 204 once the heartbeat is kept, at the database's time.
pub(super) async fn post(
    State(state): State<ApiState>,
    Path(instance): Path<String>,
    headers: HeaderMap,
) -> ApiResult<StatusCode> {
    let Some(key) = state.tokens.heartbeat_key() else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "heartbeats through the API are off: set EBB_HEARTBEAT_KEY_FILE",
        ));
    };
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "send Authorization: Bearer with the instance's heartbeat token",
            )
        })?;
    if !key.verifies(&instance, token) {
        tracing::warn!("heartbeat with a token that is not the instance's refused");
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "the token is not this instance's heartbeat token (ebb heartbeat-token INSTANCE)",
        ));
    }
    state.store.record_heartbeat(&instance).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_good_for_its_own_instance_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, "0123456789abcdef0123456789abcdef\n").unwrap();
        let key = HeartbeatKey::from_file(&path).unwrap();
        let token = key.token_of("i-0abc");
        assert_eq!(token.len(), 64);
        assert!(key.verifies("i-0abc", &token));
        assert!(!key.verifies("i-0abd", &token));
        assert!(!key.verifies("i-0abc", &token[..63]));
        assert!(!key.verifies("i-0abc", &token.replace(|c: char| c.is_ascii_digit(), "é")));
        assert!(!format!("{key:?}").contains("0123"));
        std::fs::write(&path, "short").unwrap();
        let err = HeartbeatKey::from_file(&path).unwrap_err();
        assert!(err.contains("fewer than 32 characters"), "{err}");
    }
}
