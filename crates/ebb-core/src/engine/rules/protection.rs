//! What protects a running instance from stops: the `ebb:keep-until` tag or an override.

use super::{verdict, Action, Code, Eval, Trace, Verdict};
use crate::fleet::{Instance, Tags};
use crate::names::{KEEP_UNTIL_TAG, SKIP_TAG};
use chrono::{DateTime, SecondsFormat, Utc};

/// The `ebb:keep-until` tag of `tags`: the time it holds, or the raw text when that is not an
/// RFC 3339 time; `None` without the tag.
fn keep_until(tags: &Tags) -> Option<Result<DateTime<Utc>, &str>> {
    let raw = tags.get(KEEP_UNTIL_TAG)?;
    Some(
        DateTime::parse_from_rfc3339(raw.trim())
            .map(|t| t.with_timezone(&Utc))
            .map_err(|_| raw),
    )
}

/// Why the instance's own tags forbid stopping it at `now`, if they do: `ebb:skip=true`, an
/// owner's tag (an Auto Scaling group, Karpenter, ...), an `ebb:keep-until` in the future, or
/// one that is not a time. The same judgement as the rules', for the check right before each
/// stop and each step of a spot migration: people change tags between a tick's listing and
/// its calls, and an owner may adopt an instance (attach it to a group) at any time.
pub fn tags_forbid_stop(inst: &Instance, now: DateTime<Utc>) -> Option<String> {
    if let Some(owner) = inst.owner() {
        return Some(format!(
            "owned by {owner}: ebb does not act on it alone; instead, {}",
            owner.kind().instead()
        ));
    }
    tags_protect(&inst.tags, now)
}

/// Why `tags` (an instance's, or a group's) keep ebb from stopping or scaling down at `now`, if
/// they do: `ebb:skip=true`, an `ebb:keep-until` in the future, or one that is not a time.
pub(crate) fn tags_protect(tags: &Tags, now: DateTime<Utc>) -> Option<String> {
    if tags.get(SKIP_TAG) == Some("true") {
        return Some("tagged ebb:skip=true".to_string());
    }
    match keep_until(tags)? {
        Err(raw) => Some(format!(
            "tag ebb:keep-until=\"{raw}\" is not an RFC 3339 time"
        )),
        Ok(until) if until > now => Some(format!(
            "kept by tag ebb:keep-until until {}",
            until.to_rfc3339_opts(SecondsFormat::Secs, true)
        )),
        Ok(_) => None,
    }
}

/// What blocks stops of an instance.
pub(super) struct Protection {
    /// Which protection it is.
    pub(super) code: Code,
    /// For people: what protects it, and until when.
    pub(super) reason: String,
}

impl Protection {
    /// The verdict when this protection blocks a rule's action.
    pub(super) fn verdict(&self) -> Verdict {
        verdict(Action::None, self.code, self.reason.clone())
    }
}

impl Eval<'_> {
    /// `ebb:keep-until` or an override, when one protects the instance now.
    pub(super) fn protection(&self, trace: &mut Trace) -> Option<Protection> {
        let now = self.now();
        let found = match keep_until(&self.inst.tags) {
            Some(Err(raw)) => Some(Protection {
                code: Code::KeepUntilInvalid,
                reason: self.text(|| format!(
                    "tag ebb:keep-until=\"{raw}\" is not an RFC 3339 time; no stop until it is fixed or removed"
                )),
            }),
            Some(Ok(until)) if until > now => Some(Protection {
                code: Code::KeepUntil,
                reason: self.text(|| format!("kept by tag ebb:keep-until until {}", self.at(until))),
            }),
            _ => None,
        };
        let found = found.or_else(|| {
            self.ctx
                .prior
                .active_override(&self.inst.id, now)
                .map(|o| Protection {
                    code: Code::Override,
                    reason: self.text(|| {
                        format!(
                            "override by {} until {}: {}",
                            if o.by.is_empty() { "someone" } else { &o.by },
                            self.at(o.until),
                            o.reason
                        )
                    }),
                })
        });
        trace.note(|| match &found {
            Some(p) => format!("protected: {}", p.reason),
            None => "not protected (no ebb:keep-until in the future, no active override)".into(),
        });
        found
    }
}
