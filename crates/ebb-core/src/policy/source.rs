//! Where a tick's policies come from: the files, loaded only when they change, and the last
//! valid set standing in while they are invalid. With `policy/load.rs`, the only part of
//! `policy` that reads files (and asks git): the model and its checks do no I/O.

use super::load::{calendar_like_files, load_with, policy_files, CalendarCopies, LoadError};
use super::PolicySet;
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The policy files, the set loaded from them, and the last set of them that was valid.
#[derive(Debug)]
pub struct PolicySource {
    paths: Vec<PathBuf>,
    /// The copies of what calendars' addresses served, as `ebb serve` last set them.
    copies: Mutex<CalendarCopies>,
    loaded: Mutex<Loaded>,
}

/// What was loaded, and from which files.
#[derive(Debug, Default)]
struct Loaded {
    /// The fingerprint of the files the fields below were loaded from.
    fingerprint: Option<[u8; 32]>,
    /// The last valid set, from these files or earlier ones.
    last_good: Option<Arc<PolicySet>>,
    /// Why these files could not be used, when `last_good` came from earlier ones.
    error: Option<String>,
}

/// The policies a tick acts on.
#[derive(Debug, Clone)]
pub struct LoadedPolicies {
    /// The set: the files as they are, or the last valid set when they are invalid.
    pub set: Arc<PolicySet>,
    /// Why the files as they are could not be used, when the last valid set stands in.
    pub error: Option<String>,
}

impl PolicySource {
    /// The policies in `paths` (directories or files).
    pub fn new(paths: Vec<PathBuf>) -> Self {
        PolicySource {
            paths,
            copies: Mutex::new(CalendarCopies::new()),
            loaded: Mutex::new(Loaded::default()),
        }
    }

    /// The policy files and directories.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// Takes `copies` as what the calendars' addresses serve; the next load reads them (a
    /// change of a copy is a change of the policies).
    pub fn set_copies(&self, copies: CalendarCopies) {
        *self.copies.lock().unwrap_or_else(|e| e.into_inner()) = copies;
    }

    fn copies(&self) -> CalendarCopies {
        self.copies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The policies as the files are now. The files are parsed, checked and versioned (which
    /// runs `git rev-parse`) only when their fingerprint changed since the last load; otherwise
    /// the set loaded then is returned. When the files are invalid, the last valid set stands
    /// in, with the error; when none was ever valid, the error.
    pub fn load(&self) -> Result<LoadedPolicies, LoadError> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        let fingerprint = self.fingerprint_with(&loaded);
        if loaded.fingerprint == Some(fingerprint) {
            if let Some(set) = &loaded.last_good {
                return Ok(LoadedPolicies {
                    set: set.clone(),
                    error: loaded.error.clone(),
                });
            }
        }
        match load_with(&self.paths, &self.copies()) {
            Ok(set) => {
                let set = Arc::new(set);
                *loaded = Loaded {
                    fingerprint: Some(fingerprint),
                    last_good: Some(set.clone()),
                    error: None,
                };
                Ok(LoadedPolicies { set, error: None })
            }
            Err(err) => match loaded.last_good.clone() {
                Some(set) => {
                    loaded.fingerprint = Some(fingerprint);
                    loaded.error = Some(err.to_string());
                    Ok(LoadedPolicies {
                        set,
                        error: loaded.error.clone(),
                    })
                }
                // Nothing valid to stand in: the files are read again next time.
                None => Err(err),
            },
        }
    }

    /// A hash of the policy files' names and contents, of the calendar files the last valid
    /// set named, of those beside the policy files, and of the addresses' copies, which
    /// changes when any of them does.
    pub fn fingerprint(&self) -> [u8; 32] {
        let loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        self.fingerprint_with(&loaded)
    }

    /// [`PolicySource::fingerprint`], under the lock of what was `loaded`.
    fn fingerprint_with(&self, loaded: &Loaded) -> [u8; 32] {
        let mut h = Sha256::new();
        let named = loaded.last_good.iter().flat_map(|set| &set.calendar_files);
        let beside = calendar_like_files(&self.paths);
        match policy_files(&self.paths) {
            Ok(files) => {
                for file in files.iter().chain(named).chain(&beside) {
                    h.update(file.as_os_str().as_encoded_bytes());
                    match std::fs::read(file) {
                        Ok(bytes) => h.update(bytes),
                        Err(err) => h.update(err.to_string()),
                    }
                }
            }
            Err(err) => h.update(err.to_string()),
        }
        for (url, text) in &self.copies() {
            h.update(url.as_bytes());
            h.update(text.as_bytes());
        }
        h.finalize().into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "policies:\n  - name: nights\n    match: {}\n    work_hours:\n      timezone: UTC\n      periods: [{days: mon-fri, start: \"08:00\", stop: \"20:00\"}]\n";

    #[test]
    fn files_are_loaded_again_only_when_they_change() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.yaml");
        std::fs::write(&file, VALID).unwrap();
        let source = PolicySource::new(vec![dir.path().to_path_buf()]);
        let first = source.load().unwrap();
        let again = source.load().unwrap();
        // The same files: the very set loaded before, not a new one.
        assert!(Arc::ptr_eq(&first.set, &again.set));

        std::fs::write(&file, VALID.replace("20:00", "21:00")).unwrap();
        let changed = source.load().unwrap();
        assert!(!Arc::ptr_eq(&first.set, &changed.set));
        assert_ne!(first.set.version, changed.set.version);

        std::fs::write(&file, "policies: [{name: x, nonsense: 1}]\n").unwrap();
        let broken = source.load().unwrap();
        assert!(Arc::ptr_eq(&broken.set, &changed.set));
        assert!(broken.error.is_some());
        let still = source.load().unwrap();
        assert_eq!(still.error, broken.error);
    }

    #[test]
    fn a_calendar_file_the_policies_name_is_watched_with_them() {
        let dir = tempfile::tempdir().unwrap();
        let day = |d: &str| {
            format!("BEGIN:VCALENDAR\nVERSION:2.0\nBEGIN:VEVENT\nDTSTART;VALUE=DATE:{d}\nEND:VEVENT\nEND:VCALENDAR\n")
        };
        let ics = dir.path().join("holidays.ics");
        std::fs::write(&ics, day("20261225")).unwrap();
        let text = format!("calendars:\n  holidays: {{file: holidays.ics}}\n{VALID}");
        std::fs::write(dir.path().join("p.yaml"), text).unwrap();
        let source = PolicySource::new(vec![dir.path().to_path_buf()]);
        let first = source.load().unwrap();
        assert_eq!(first.set.calendar_files, std::slice::from_ref(&ics));
        let unchanged = source.fingerprint();
        std::fs::write(&ics, day("20261226")).unwrap();
        assert_ne!(source.fingerprint(), unchanged);
        let changed = source.load().unwrap();
        assert!(!Arc::ptr_eq(&first.set, &changed.set));
        let date = |s: &str| s.parse().unwrap();
        assert!(changed.set.calendars["holidays"].contains(date("2026-12-26")));
        assert!(!changed.set.calendars["holidays"].contains(date("2026-12-25")));

        // A policy that names a file not there yet: the last valid set stands in, and the
        // file is seen once it is added.
        let text = format!(
            "calendars:\n  holidays: {{file: holidays.ics}}\n  more: {{file: more.ics}}\n{VALID}"
        );
        std::fs::write(dir.path().join("p.yaml"), text).unwrap();
        let waiting = source.load().unwrap();
        assert!(waiting.error.is_some());
        let before = source.fingerprint();
        std::fs::write(dir.path().join("more.ics"), day("20261231")).unwrap();
        assert_ne!(source.fingerprint(), before);
        let added = source.load().unwrap();
        assert!(added.error.is_none(), "{:?}", added.error);
        assert!(added.set.calendars["more"].contains(date("2026-12-31")));
    }

    #[test]
    fn files_never_valid_are_an_error_each_time() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("p.yaml"), "policies: [{nonsense: 1}]\n").unwrap();
        let source = PolicySource::new(vec![dir.path().to_path_buf()]);
        assert!(source.load().is_err());
        assert!(source.load().is_err());
    }
}
