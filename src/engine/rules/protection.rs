//! What protects a running instance from stops: the `ebb:keep-until` tag or an override.

use super::{verdict, Action, Code, Eval, Trace, Verdict};
use crate::names::KEEP_UNTIL_TAG;
use chrono::{DateTime, Utc};

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
        let tag = self.inst.tag(KEEP_UNTIL_TAG).map(|raw| {
            (
                raw,
                DateTime::parse_from_rfc3339(raw.trim()).map(|t| t.with_timezone(&Utc)),
            )
        });
        let found = match tag {
            Some((raw, Err(_))) => Some(Protection {
                code: Code::KeepUntilInvalid,
                reason: format!(
                    "tag ebb:keep-until=\"{raw}\" is not an RFC 3339 time; no stop until it is fixed or removed"
                ),
            }),
            Some((_, Ok(until))) if until > now => Some(Protection {
                code: Code::KeepUntil,
                reason: format!("kept by tag ebb:keep-until until {}", self.at(until)),
            }),
            _ => None,
        };
        let found = found.or_else(|| {
            self.ctx
                .prior
                .active_override(&self.inst.id, now)
                .map(|o| Protection {
                    code: Code::Override,
                    reason: format!(
                        "override by {} until {}: {}",
                        if o.by.is_empty() { "someone" } else { &o.by },
                        self.at(o.until),
                        o.reason
                    ),
                })
        });
        trace.note(|| match &found {
            Some(p) => format!("protected: {}", p.reason),
            None => "not protected (no ebb:keep-until in the future, no active override)".into(),
        });
        found
    }
}
