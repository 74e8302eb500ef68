//! A stopped instance: whether work hours start it.

use super::text::span;
use super::{verdict, Action, Code, Eval, Trace, Verdict};
use crate::policy::{StartAtOpen, WorkHours};
use chrono::{DateTime, Utc};

/// The opening a stopped instance is considered for.
#[derive(Clone, Copy)]
pub(super) enum Opening {
    /// In work hours: the window opened then (`None`: always open).
    Opened(Option<DateTime<Utc>>),
    /// In the lead time of `start_ahead`: the window opens then.
    Ahead(DateTime<Utc>),
}

impl Eval<'_> {
    /// A stopped instance: started only in work hours, as the policy says.
    pub(super) fn stopped(&self, trace: &mut Trace) -> Verdict {
        let (Some(wh), Some(st)) = (&self.policy.work_hours, self.status) else {
            return verdict(
                Action::None,
                Code::StoppedNoHours,
                self.text(|| "stopped; the policy has no work hours to start it in".into()),
            );
        };
        if let Some(open) = self.opening_ahead() {
            return self.start_at_open(wh, Opening::Ahead(open), trace);
        }
        if !st.in_hours {
            let reason = self.text(|| {
                let closed = st
                    .since
                    .map_or(String::new(), |t| format!(" (closed {})", self.at(t)));
                format!("stopped, outside work hours{closed}{}", self.day_note())
            });
            return verdict(Action::None, Code::StoppedOutsideHours, reason);
        }
        self.start_at_open(wh, Opening::Opened(st.since), trace)
    }

    /// A stopped instance in work hours, or in the lead time before them: whether
    /// `start_at_open` starts it, by who stopped it and when.
    pub(super) fn start_at_open(
        &self,
        wh: &WorkHours,
        opening: Opening,
        trace: &mut Trace,
    ) -> Verdict {
        let (code, since) = match opening {
            Opening::Opened(since) => (Code::StartAtOpen, since),
            Opening::Ahead(open) => (Code::StartAhead, Some(open)),
        };
        let opened_text = || self.opening_texts(opening).0;
        // The window, for who stopped or started an instance in it, begins with its lead time:
        // a start made ahead of the opening (early too) is this window's.
        let window_start = since.map(|o| o - self.lead());
        let before_opening = |t: DateTime<Utc>| window_start.is_none_or(|o| t < o);
        let f = self.facts;
        trace.note(|| {
            format!(
                "start_at_open: {}; stopped by ebb at {}, started by ebb at {}, stopped since {}",
                wh.start_at_open.as_str(),
                f.stopped_by_ebb_at.map_or("-".into(), |t| self.at(t)),
                f.started_by_ebb_at.map_or("-".into(), |t| self.at(t)),
                self.inst
                    .state_since
                    .map_or("unknown".into(), |t| self.at(t)),
            )
        });
        let start = |how: &dyn Fn() -> String| {
            let reason = self.text(|| {
                format!(
                    "{}{}; {}",
                    self.opening_texts(opening).1,
                    self.day_note(),
                    how()
                )
            });
            verdict(Action::Start, code, reason)
        };
        let none = |code: Code, reason: &dyn Fn() -> String| {
            verdict(Action::None, code, self.text(reason))
        };
        match (wh.start_at_open, f.stopped_by_ebb_at) {
            (StartAtOpen::Never, _) => none(Code::StartNever, &|| {
                "stopped; start_at_open is never".into()
            }),
            (_, Some(s)) if !before_opening(s) => none(Code::StoppedInWindow, &|| {
                format!(
                    "ebb stopped it at {} inside this window ({}); it starts at the next opening",
                    self.at(s),
                    opened_text()
                )
            }),
            (_, Some(s)) => start(&|| format!("ebb stopped it at {}", self.at(s))),
            (StartAtOpen::StoppedByEbb, None) => none(Code::StoppedByPerson, &|| {
                "stopped, not by ebb; a person's stop sticks".into()
            }),
            (StartAtOpen::All, None) => match (f.started_by_ebb_at, self.inst.state_since) {
                (Some(s), _) if !before_opening(s) => none(Code::StartedThisWindow, &|| {
                    format!("ebb already started it at {} in this window", self.at(s))
                }),
                (_, Some(t)) if before_opening(t) => {
                    start(&|| format!("start_at_open is all; stopped since {}", self.at(t)))
                }
                (_, Some(t)) => none(Code::StoppedByPerson, &|| {
                    format!(
                        "stopped at {}, after this window's start ({}); a person's stop sticks",
                        self.at(t),
                        opened_text()
                    )
                }),
                (_, None) => none(Code::StopTimeUnknown, &|| {
                    "stopped at an unknown time, maybe by a person in this window; not started"
                        .into()
                }),
            },
        }
    }
    /// How `opening` reads in a verdict: the window's text and the reason's headline.
    fn opening_texts(&self, opening: Opening) -> (String, String) {
        match opening {
            Opening::Opened(since) => {
                let opened = since.map_or("always open".to_string(), |t| {
                    format!("opened {}", self.at(t))
                });
                (opened.clone(), format!("work hours {opened}"))
            }
            Opening::Ahead(open) => (
                format!(
                    "opens {}, started {} ahead",
                    self.at(open),
                    span(self.lead())
                ),
                format!(
                    "starting {} ahead of {}{}",
                    span(self.lead()),
                    self.at(open),
                    self.early_note()
                ),
            ),
        }
    }
}
