//! Bearer tokens: `EBB_API_TOKENS=name:token,...`. The name of the token a request carries is
//! the audit actor of what it changes.

use super::{ApiError, ApiState};
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use sha2::{Digest, Sha256};

/// Tokens shorter than this are refused: they could be guessed.
const MIN_TOKEN_LEN: usize = 16;

/// The API tokens, by name; only their hashes are kept.
#[derive(Debug, Default)]
pub struct Tokens {
    by_name: Vec<(String, [u8; 32])>,
}

/// Why `EBB_API_TOKENS` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokensError {
    /// An entry is not `name:token`.
    #[error("EBB_API_TOKENS entry {0} is not name:token (like ci:s3cr3t-of-16-chars-or-more)")]
    Malformed(usize),
    /// A token is too short.
    #[error("EBB_API_TOKENS entry {position} ({name}) has a token shorter than {MIN_TOKEN_LEN} characters")]
    TooShort {
        /// 1-based position in the list.
        position: usize,
        /// The token's name.
        name: String,
    },
    /// Two entries share a name or a token.
    #[error("EBB_API_TOKENS entry {0} repeats the name or the token of an earlier entry")]
    Repeated(usize),
}

impl Tokens {
    /// Parses `name:token,name:token`; an empty text gives no tokens (writes are refused).
    pub fn parse(text: &str) -> Result<Tokens, TokensError> {
        let mut by_name: Vec<(String, [u8; 32])> = Vec::new();
        if text.trim().is_empty() {
            return Ok(Tokens { by_name });
        }
        for (i, entry) in text.split(',').map(str::trim).enumerate() {
            let position = i + 1;
            let Some((name, token)) = entry.split_once(':') else {
                return Err(TokensError::Malformed(position));
            };
            let name = name.trim();
            if name.is_empty() || token.is_empty() {
                return Err(TokensError::Malformed(position));
            }
            if token.len() < MIN_TOKEN_LEN {
                return Err(TokensError::TooShort {
                    position,
                    name: name.to_string(),
                });
            }
            let hash = digest(token);
            if by_name.iter().any(|(n, h)| n == name || *h == hash) {
                return Err(TokensError::Repeated(position));
            }
            by_name.push((name.to_string(), hash));
        }
        Ok(Tokens { by_name })
    }

    /// How many tokens there are.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// The name of `token`, if it is one of them. Compares hashes, in time independent of
    /// where they differ.
    fn name_of(&self, token: &str) -> Option<&str> {
        let hash = digest(token);
        self.by_name
            .iter()
            .find(|(_, h)| h.iter().zip(&hash).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0)
            .map(|(name, _)| name.as_str())
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// The name of the token a request carries; rejects the request with 401 otherwise.
pub struct Caller(pub String);

impl FromRequestParts<ApiState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, ApiError> {
        let unauthorized = |message: &str| ApiError::new(StatusCode::UNAUTHORIZED, message);
        if state.tokens.is_empty() {
            return Err(unauthorized(
                "this ebb has no API tokens: set EBB_API_TOKENS=name:token to allow changes",
            ));
        }
        let token = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| unauthorized("send Authorization: Bearer TOKEN"))?;
        match state.tokens.name_of(token.trim()) {
            Some(name) => Ok(Caller(name.to_string())),
            None => {
                tracing::warn!("API request with an unknown token refused");
                Err(unauthorized("the token is not one of EBB_API_TOKENS"))
            }
        }
    }
}
