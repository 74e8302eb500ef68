//! Snooze links: the links a notice of a coming stop carries ("keep it for 2 hours", "until
//! the next opening", "for a day"), each signed by ebb, so that the person it warns can keep
//! the instance with one click and no login.
//!
//! A link is its [`Link`] (the instance, the addressee who becomes the override's audit actor,
//! how long to keep it, the notice's time and when the link expires) encoded in the URL with an
//! Ed25519 signature over it. The key is ebb's own (kept in Postgres, `snooze_key`; never an
//! API token), so that nothing but ebb makes a link and no field of one can be changed. Ed25519
//! rather than an HMAC because ebb already signs its audit checkpoints with it: no second
//! scheme to keep. Pure: the time is an argument, the key is given.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use chrono::{DateTime, Duration, SecondsFormat, Utc};
use ed25519_dalek::{Signature, Signer as _, SigningKey};
use sha2::{Digest, Sha256};

/// How long after the stop it warns of a link still works: a person who reads the notice a
/// little late can still keep the instance from being stopped again once it is started.
pub const MARGIN: Duration = Duration::hours(1);

/// The addressee of a notice whose instance has no `ebb:owner` tag: the override's actor.
pub const NO_ADDRESSEE: &str = "notice link";

/// The version of the link format, first in every payload.
const FORMAT: &str = "ebb-snooze-1";

/// The key that signs and checks links.
#[derive(Clone)]
pub struct Key(SigningKey);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// The key of the 32 secret bytes `seed`.
    pub fn from_seed(seed: &[u8; 32]) -> Key {
        Key(SigningKey::from_bytes(seed))
    }

    /// The key kept as `bytes`, when they are 32.
    pub fn from_stored(bytes: &[u8]) -> Option<Key> {
        <[u8; 32]>::try_from(bytes).ok().map(|b| Key::from_seed(&b))
    }
}

/// How long a link keeps the instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// This long from when the link is used.
    For(Duration),
    /// Until this time (the next opening of the instance's work hours).
    Until(DateTime<Utc>),
}

impl Keep {
    /// When the override ends if the link is used at `now`.
    pub fn until(self, now: DateTime<Utc>) -> DateTime<Utc> {
        match self {
            Keep::For(d) => now + d,
            Keep::Until(t) => t,
        }
    }

    /// What it does, for people: "for 2 hours", "until the next opening".
    pub fn label(self) -> String {
        match self {
            Keep::For(d) if d == Duration::days(1) => "for a day".to_string(),
            Keep::For(d) if d.num_minutes() % 60 == 0 => {
                let h = d.num_hours();
                format!("for {h} hour{}", if h == 1 { "" } else { "s" })
            }
            Keep::For(d) => format!("for {} minutes", d.num_minutes()),
            Keep::Until(_) => "until the next opening".to_string(),
        }
    }

    fn encode(self) -> String {
        match self {
            Keep::For(d) => format!("for:{}", d.num_seconds()),
            Keep::Until(t) => format!("until:{}", t.timestamp()),
        }
    }

    fn decode(text: &str) -> Option<Keep> {
        let (kind, n) = text.split_once(':')?;
        let n: i64 = n.parse().ok()?;
        match kind {
            "for" if n > 0 => Some(Keep::For(Duration::try_seconds(n)?)),
            "until" => Some(Keep::Until(DateTime::from_timestamp(n, 0)?)),
            _ => None,
        }
    }
}

/// What one link does, as signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The instance it keeps.
    pub instance: String,
    /// Whom the notice was for: the override's audit actor.
    pub addressee: String,
    /// How long it keeps the instance.
    pub keep: Keep,
    /// When the notice was given (its tick's time).
    pub notice_at: DateTime<Utc>,
    /// When the link stops working: the stop it warns of, plus [`MARGIN`].
    pub expires_at: DateTime<Utc>,
}

/// Why a link is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Not a link ebb made, or one changed since.
    #[error("this link is not one ebb made, or it was changed since: ebb did not sign it. Use the link of the notice as it came, or make an override with ebb override or the console.")]
    NotSigned,
    /// Past its expiry.
    #[error("this link expired at {}, an hour after the stop it warned of. Make an override with ebb override or the console.", .0.to_rfc3339_opts(SecondsFormat::Secs, true))]
    Expired(DateTime<Utc>),
}

impl Link {
    /// The reason its override records.
    pub fn reason(&self) -> String {
        format!(
            "snoozed from the notice of {}",
            self.notice_at.to_rfc3339_opts(SecondsFormat::Secs, true)
        )
    }

    fn payload(&self) -> String {
        [
            FORMAT.to_string(),
            self.instance.clone(),
            self.addressee.clone(),
            self.keep.encode(),
            self.notice_at.timestamp().to_string(),
            self.expires_at.timestamp().to_string(),
        ]
        .join("\n")
    }

    /// The link's token, for its URL: the payload and ebb's signature of it, base64url.
    pub fn sign(&self, key: &Key) -> String {
        let payload = self.payload();
        let signature = key.0.sign(payload.as_bytes());
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(payload),
            URL_SAFE_NO_PAD.encode(signature.to_bytes())
        )
    }

    /// The link of `token` when `key` signed it and it has not expired at `now`.
    pub fn verify(key: &Key, token: &str, now: DateTime<Utc>) -> Result<Link, Refused> {
        let (payload, signature) = token.trim().split_once('.').ok_or(Refused::NotSigned)?;
        let payload = URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| Refused::NotSigned)?;
        let signature = URL_SAFE_NO_PAD
            .decode(signature)
            .ok()
            .and_then(|s| Signature::from_slice(&s).ok())
            .ok_or(Refused::NotSigned)?;
        key.0
            .verifying_key()
            .verify_strict(&payload, &signature)
            .map_err(|_| Refused::NotSigned)?;
        // Signed by ebb, so well formed; read it carefully all the same.
        let text = String::from_utf8(payload).map_err(|_| Refused::NotSigned)?;
        let link = Link::parse(&text).ok_or(Refused::NotSigned)?;
        if now >= link.expires_at {
            return Err(Refused::Expired(link.expires_at));
        }
        Ok(link)
    }

    fn parse(text: &str) -> Option<Link> {
        let fields: Vec<&str> = text.split('\n').collect();
        let [format, instance, addressee, keep, notice_at, expires_at] = fields[..] else {
            return None;
        };
        let time = |t: &str| DateTime::from_timestamp(t.parse().ok()?, 0);
        (format == FORMAT).then_some(())?;
        Some(Link {
            instance: instance.to_string(),
            addressee: addressee.to_string(),
            keep: Keep::decode(keep)?,
            notice_at: time(notice_at)?,
            expires_at: time(expires_at)?,
        })
    }

    /// The link's id, which Postgres records once it is used: a hash of what it says.
    pub fn id(&self) -> String {
        let hash = Sha256::digest(self.payload().as_bytes());
        hash[..16].iter().map(|b| format!("{b:02x}")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn link() -> Link {
        Link {
            instance: "i-0a".into(),
            addressee: "mei@example.com".into(),
            keep: Keep::For(Duration::hours(2)),
            notice_at: t("2026-11-30T18:45:00Z"),
            expires_at: t("2026-11-30T20:00:00Z"),
        }
    }

    #[test]
    fn a_signed_link_reads_back_until_it_expires() {
        let key = Key::from_seed(&[7; 32]);
        let token = link().sign(&key);
        assert_eq!(
            Link::verify(&key, &token, t("2026-11-30T19:59:59Z")),
            Ok(link())
        );
        assert_eq!(
            Link::verify(&key, &token, t("2026-11-30T20:00:00Z")),
            Err(Refused::Expired(t("2026-11-30T20:00:00Z")))
        );
        let until = Link {
            keep: Keep::Until(t("2026-12-01T09:00:00Z")),
            ..link()
        };
        let read = Link::verify(&key, &until.sign(&key), t("2026-11-30T19:00:00Z"));
        assert_eq!(read, Ok(until));
    }

    #[test]
    fn a_changed_or_foreign_link_is_refused() {
        let key = Key::from_seed(&[7; 32]);
        let now = t("2026-11-30T19:00:00Z");
        let token = link().sign(&key);
        let other = Key::from_seed(&[8; 32]);
        assert_eq!(
            Link::verify(&other, &token, now),
            Err(Refused::NotSigned),
            "another key's"
        );
        // A day instead of 2 hours, with the old signature.
        let longer = Link {
            keep: Keep::For(Duration::days(1)),
            ..link()
        };
        let (_, signature) = token.split_once('.').unwrap();
        let (payload, _) = longer
            .sign(&key)
            .split_once('.')
            .map(|(p, s)| (p.to_string(), s.to_string()))
            .unwrap();
        let forged = format!("{payload}.{signature}");
        assert_eq!(Link::verify(&key, &forged, now), Err(Refused::NotSigned));
        for junk in ["", ".", "abc", "a.b", &token[..token.len() - 2]] {
            assert_eq!(
                Link::verify(&key, junk, now),
                Err(Refused::NotSigned),
                "{junk}"
            );
        }
    }

    #[test]
    fn each_link_has_its_own_id_and_says_what_it_does() {
        let day = Link {
            keep: Keep::For(Duration::days(1)),
            ..link()
        };
        assert_ne!(link().id(), day.id());
        assert_eq!(link().id().len(), 32);
        assert_eq!(link().keep.label(), "for 2 hours");
        assert_eq!(day.keep.label(), "for a day");
        assert_eq!(
            Keep::Until(t("2026-12-01T09:00:00Z")).label(),
            "until the next opening"
        );
        assert_eq!(
            link().reason(),
            "snoozed from the notice of 2026-11-30T18:45:00Z"
        );
    }
}
