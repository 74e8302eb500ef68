//! Bearer tokens: `EBB_API_TOKENS=name:token[:scopes],...`, scopes joined by `+` (`read`,
//! `override`, `admin`). The name of the token a request carries is the audit actor of what it
//! changes. A token given no scopes has `read+override`, the rights every token had before
//! scopes: it reads, makes overrides, revokes its own and asks for ticks.

use super::heartbeat::HeartbeatKey;
use super::{ApiError, ApiState};
use crate::names;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode};
use sha2::{Digest, Sha256};

/// Tokens shorter than this are refused: they could be guessed.
const MIN_TOKEN_LEN: usize = 16;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Read every route and console page.
    Read,
    /// Make overrides, revoke its own, ask for a tick.
    Override,
    /// Everything, and revoke anyone's override.
    Admin,
}

impl Scope {
    fn parse(text: &str) -> Option<Scope> {
        match text {
            "read" => Some(Scope::Read),
            "override" => Some(Scope::Override),
            "admin" => Some(Scope::Admin),
            _ => None,
        }
    }
}

/// The scopes of one token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Scopes {
    read: bool,
    write: bool,
    admin: bool,
}

impl Scopes {
    /// What a token given no scopes may do: `read+override`.
    pub const UNSCOPED: Scopes = Scopes {
        read: true,
        write: true,
        admin: false,
    };

    /// Whether they include `scope` (`admin` includes every scope).
    pub fn allow(&self, scope: Scope) -> bool {
        self.admin
            || match scope {
                Scope::Read => self.read,
                Scope::Override => self.write,
                Scope::Admin => false,
            }
    }
}

/// The API tokens, by name, with their scopes (only their hashes are kept), and the key the
/// instances' heartbeat tokens are made with.
#[derive(Debug, Default)]
pub struct Tokens {
    by_name: Vec<(String, [u8; 32], Scopes)>,
    heartbeat_key: Option<HeartbeatKey>,
}

/// Why `EBB_API_TOKENS` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokensError {
    /// An entry is not `name:token[:scopes]`.
    #[error("EBB_API_TOKENS entry {0} is not name:token or name:token:scopes (like ci:s3cr3t-of-16-chars-or-more:read+override)")]
    Malformed(usize),
    /// A scope is not one of `read`, `override`, `admin`.
    #[error("EBB_API_TOKENS entry {position}: \"{scope}\" is not a scope: give read, override or admin, joined by +")]
    UnknownScope {
        /// 1-based position in the list.
        position: usize,
        /// What was given.
        scope: String,
    },
    /// A token is named after the scheduler, whose audit rows it could pass for.
    #[error("EBB_API_TOKENS entry {0} is named \"{ACTOR}\", the control loop's audit actor: give the token another name", ACTOR = names::ACTOR)]
    SchedulerName(usize),
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
    /// Parses `name:token[:scopes],...`; an empty text gives no tokens (writes are refused).
    pub fn parse(text: &str) -> Result<Tokens, TokensError> {
        let mut by_name: Vec<(String, [u8; 32], Scopes)> = Vec::new();
        if text.trim().is_empty() {
            return Ok(Tokens {
                by_name,
                heartbeat_key: None,
            });
        }
        for (i, entry) in text.split(',').map(str::trim).enumerate() {
            let position = i + 1;
            let mut parts = entry.splitn(3, ':');
            let (Some(name), Some(token)) = (parts.next(), parts.next()) else {
                return Err(TokensError::Malformed(position));
            };
            let scopes = match parts.next() {
                None => Scopes::UNSCOPED,
                Some(list) => parse_scopes(list, position)?,
            };
            let name = name.trim();
            if name.is_empty() || token.is_empty() {
                return Err(TokensError::Malformed(position));
            }
            if name == names::ACTOR {
                return Err(TokensError::SchedulerName(position));
            }
            if token.len() < MIN_TOKEN_LEN {
                return Err(TokensError::TooShort {
                    position,
                    name: name.to_string(),
                });
            }
            let hash = digest(token);
            if by_name.iter().any(|(n, h, _)| n == name || *h == hash) {
                return Err(TokensError::Repeated(position));
            }
            by_name.push((name.to_string(), hash, scopes));
        }
        Ok(Tokens {
            by_name,
            heartbeat_key: None,
        })
    }

    /// These tokens, and the instances' heartbeat tokens made with `key`.
    pub fn with_heartbeat_key(self, key: Option<HeartbeatKey>) -> Tokens {
        Tokens {
            heartbeat_key: key,
            ..self
        }
    }

    /// The key heartbeat tokens are made with, when heartbeats through the API are on.
    pub(super) fn heartbeat_key(&self) -> Option<&HeartbeatKey> {
        self.heartbeat_key.as_ref()
    }

    /// How many tokens there are.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// The name and scopes of `token`, if it is one of them. Compares hashes, in time
    /// independent of where they differ.
    fn find(&self, token: &str) -> Option<(&str, Scopes)> {
        let hash = digest(token);
        self.by_name
            .iter()
            .find(|(_, h, _)| h.iter().zip(&hash).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0)
            .map(|(name, _, scopes)| (name.as_str(), *scopes))
    }

    /// The caller of the console login `session` whose stored binding is `binding` (see
    /// [`session_binding`]): none when its token is no longer one of them.
    pub fn of_session(&self, session: &str, binding: &[u8]) -> Option<Caller> {
        self.by_name
            .iter()
            .find(|(_, hash, _)| {
                let ours = bind(session, hash);
                ours.len() == binding.len()
                    && ours
                        .iter()
                        .zip(binding)
                        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                        == 0
            })
            .map(|(name, _, scopes)| Caller {
                name: name.clone(),
                scopes: *scopes,
            })
    }
}

/// What ties a console login `session` to the `token` it was made with, as stored: a hash of
/// both, so that the stored value neither gives the token away nor lets one be checked
/// without the session id, which only the browser holds. A token removed from or changed in
/// `EBB_API_TOKENS` ends its logins.
pub fn session_binding(session: &str, token: &str) -> [u8; 32] {
    bind(session, &digest(token.trim()))
}

fn bind(session: &str, token_hash: &[u8; 32]) -> [u8; 32] {
    let mut hash = Sha256::new();
    hash.update(b"ebb console session\0");
    hash.update(session.as_bytes());
    hash.update(token_hash);
    hash.finalize().into()
}

fn parse_scopes(list: &str, position: usize) -> Result<Scopes, TokensError> {
    let mut scopes = Scopes::default();
    for scope in list.split('+').map(str::trim) {
        match Scope::parse(scope) {
            Some(Scope::Read) => scopes.read = true,
            Some(Scope::Override) => scopes.write = true,
            Some(Scope::Admin) => scopes.admin = true,
            None => {
                return Err(TokensError::UnknownScope {
                    position,
                    scope: scope.to_string(),
                })
            }
        }
    }
    Ok(scopes)
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// The token a request carries: its name and scopes. Rejects the request with 401 when there
/// is none or it is unknown.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The token's name: the audit actor.
    pub name: String,
    /// What it may do.
    pub scopes: Scopes,
}

impl Caller {
    /// The caller's name when its token has `scope`; 403 otherwise.
    pub fn with(self, scope: Scope) -> Result<String, ApiError> {
        self.allowed(scope)?;
        Ok(self.name)
    }

    /// Nothing when its token has `scope`; 403 otherwise.
    pub fn allowed(&self, scope: Scope) -> Result<(), ApiError> {
        if self.scopes.allow(scope) {
            Ok(())
        } else {
            let needed = match scope {
                Scope::Read => "read",
                Scope::Override => "override",
                Scope::Admin => "admin",
            };
            Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!("the token {} has no {needed} scope", self.name),
            ))
        }
    }

    /// The caller whose token is `token`, if it is one of `tokens`.
    pub fn of_token(token: &str, tokens: &Tokens) -> Option<Caller> {
        tokens.find(token.trim()).map(|(name, scopes)| Caller {
            name: name.to_string(),
            scopes,
        })
    }

    /// The caller of the request with `headers`.
    pub fn of(headers: &HeaderMap, tokens: &Tokens) -> Result<Caller, ApiError> {
        let unauthorized = |message: &str| ApiError::new(StatusCode::UNAUTHORIZED, message);
        if tokens.is_empty() {
            return Err(unauthorized(
                "this ebb has no API tokens: set EBB_API_TOKENS=name:token to allow changes",
            ));
        }
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| unauthorized("send Authorization: Bearer TOKEN"))?;
        match tokens.find(token.trim()) {
            Some((name, scopes)) => Ok(Caller {
                name: name.to_string(),
                scopes,
            }),
            None => {
                tracing::warn!("API request with an unknown token refused");
                Err(unauthorized("the token is not one of EBB_API_TOKENS"))
            }
        }
    }
}

impl FromRequestParts<ApiState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, ApiError> {
        Caller::of(&parts.headers, &state.tokens)
    }
}
