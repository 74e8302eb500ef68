//! The one place that parses YAML, so the parser can be swapped (serde_yaml is unmaintained).
//!
//! Policies are checked by walking a parsed [`Value`] and collecting every problem, which needs
//! each problem's line and column. serde_yaml keeps no positions in its values, but it attaches
//! the position of the node being read to any error a `Deserialize` impl raises there. [`locate`]
//! uses that: it reads the document again and fails on purpose at the node a path names.

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;

pub use serde_yaml::Value;

/// A line and column in a YAML text, both counted from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub column: usize,
}

/// A YAML text that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// Where the parser stopped, when it knows.
    pub position: Option<Position>,
    /// What went wrong.
    pub message: String,
}

/// One step from a node to a child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The value under a mapping key.
    Value(String),
    /// A mapping key itself (for problems with the key, such as an unknown one).
    Key(String),
    /// An item of a sequence.
    Index(usize),
}

/// Parses one YAML document. An empty document is `Value::Null`.
pub fn parse(text: &str) -> Result<Value, SyntaxError> {
    serde_yaml::from_str(text).map_err(|err| {
        let message = err.to_string();
        // serde_yaml appends " at line L column C"; the position is reported separately.
        let message = match message.find(" at line ") {
            Some(i) => message[..i].to_string(),
            None => message,
        };
        SyntaxError {
            position: err.location().map(|l| Position {
                line: l.line(),
                column: l.column(),
            }),
            message,
        }
    })
}

/// Reads a YAML document into a typed value (used for fleet snapshots); the error names the
/// line and column.
pub fn from_str<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    serde_yaml::from_str(text).map_err(|e| e.to_string())
}

/// Finds the position of the node at `path` in `text`, or of the deepest ancestor that exists.
pub fn locate(text: &str, path: &[Step]) -> Option<Position> {
    (0..=path.len())
        .rev()
        .find_map(|len| locate_exact(text, &path[..len]))
}

const MARKER: &str = "\u{0}ebb-locate";

fn locate_exact(text: &str, path: &[Step]) -> Option<Position> {
    let de = serde_yaml::Deserializer::from_str(text);
    match (Locate { path }).deserialize(de) {
        // serde_yaml prefixes the message with the node's path, so look for the marker inside it.
        Err(err) if err.to_string().contains(MARKER) => err.location().map(|l| Position {
            line: l.line(),
            column: l.column(),
        }),
        _ => None,
    }
}

/// Walks `path` and raises [`MARKER`] at the node it names; reaching the end of a node without
/// finding the next step succeeds, which means "not found".
struct Locate<'a> {
    path: &'a [Step],
}

impl<'de> DeserializeSeed<'de> for Locate<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_any(self)
    }
}

impl Locate<'_> {
    fn here<E: de::Error>(&self) -> Result<(), E> {
        if self.path.is_empty() {
            Err(E::custom(MARKER))
        } else {
            Ok(())
        }
    }
}

macro_rules! scalar_visits {
    ($($name:ident: $ty:ty),*) => {$(
        fn $name<E: de::Error>(self, _: $ty) -> Result<(), E> {
            self.here()
        }
    )*};
}

impl<'de> Visitor<'de> for Locate<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML node")
    }

    scalar_visits!(visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64, visit_str: &str);

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.here()
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.here()
    }

    fn visit_some<D: de::Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.here()?;
        let (first, rest) = (&self.path[0], &self.path[1..]);
        let mut index = 0;
        loop {
            let found = match first {
                Step::Index(i) if *i == index => {
                    seq.next_element_seed(Locate { path: rest })?.is_some()
                }
                _ => seq.next_element::<IgnoredAny>()?.is_some(),
            };
            if !found {
                return Ok(());
            }
            index += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.here()?;
        let (first, rest) = (&self.path[0], &self.path[1..]);
        let wanted = match first {
            Step::Value(k) | Step::Key(k) => Some(k.as_str()),
            Step::Index(_) => None,
        };
        let fail_on_key = matches!(first, Step::Key(_)) && rest.is_empty();
        while let Some(matched) = map.next_key_seed(KeyProbe {
            wanted,
            fail: fail_on_key,
        })? {
            if matched && matches!(first, Step::Value(_)) {
                map.next_value_seed(Locate { path: rest })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

/// Reads a mapping key; tells whether it is the wanted one, or fails there when asked to. The
/// failure must come from inside the key's own visit, so that serde_yaml marks it with the
/// key's position rather than the mapping's.
struct KeyProbe<'a> {
    wanted: Option<&'a str>,
    fail: bool,
}

impl KeyProbe<'_> {
    fn probe<E: de::Error>(self, text: Option<String>) -> Result<bool, E> {
        let matched = self.wanted.is_some() && text.as_deref() == self.wanted;
        if matched && self.fail {
            return Err(E::custom(MARKER));
        }
        Ok(matched)
    }
}

impl<'de> DeserializeSeed<'de> for KeyProbe<'_> {
    type Value = bool;

    fn deserialize<D: de::Deserializer<'de>>(self, de: D) -> Result<bool, D::Error> {
        de.deserialize_any(self)
    }
}

/// Key texts as [`key_text`] gives them.
impl<'de> Visitor<'de> for KeyProbe<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a mapping key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        self.probe(Some(v.to_string()))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<bool, E> {
        self.probe(Some(v.to_string()))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<bool, E> {
        self.probe(Some(v.to_string()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<bool, E> {
        self.probe(Some(v.to_string()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<bool, E> {
        self.probe(Some(serde_yaml::Number::from(v).to_string()))
    }

    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        self.probe(Some("null".to_string()))
    }

    fn visit_none<E: de::Error>(self) -> Result<bool, E> {
        self.probe(Some("null".to_string()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(false)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(false)
    }
}

/// The text of a scalar mapping key, as the policy checker names keys.
pub fn key_text(key: &Value) -> Option<String> {
    match key {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null => Some("null".to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "\
policies:
  - name: a
    match: {tags: {team: x}}
  - name: b
    work_hours:
      timezon: UTC
";

    fn v(k: &str) -> Step {
        Step::Value(k.to_string())
    }

    #[test]
    fn locates_values_keys_and_flow_nodes() {
        let at = |path: &[Step]| locate(DOC, path).map(|p| (p.line, p.column));
        assert_eq!(
            at(&[v("policies"), Step::Index(1), v("name")]),
            Some((4, 11))
        );
        assert_eq!(
            at(&[
                v("policies"),
                Step::Index(1),
                v("work_hours"),
                Step::Key("timezon".into())
            ]),
            Some((6, 7))
        );
        assert_eq!(
            at(&[
                v("policies"),
                Step::Index(0),
                v("match"),
                v("tags"),
                v("team")
            ]),
            Some((3, 26))
        );
    }

    #[test]
    fn a_key_is_located_at_itself_not_at_its_mapping() {
        let doc = "policies: []\nfoo: 1\n";
        let p = locate(doc, &[Step::Key("foo".into())]).unwrap();
        assert_eq!((p.line, p.column), (2, 1));
    }

    #[test]
    fn a_missing_step_falls_back_to_the_deepest_ancestor() {
        let p = locate(DOC, &[v("policies"), Step::Index(1), v("nope")]).unwrap();
        assert_eq!((p.line, p.column), (4, 5));
    }

    #[test]
    fn syntax_errors_carry_a_position() {
        let err = parse("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(err.position.is_some());
        assert!(!err.message.contains(" at line "));
    }
}
