//! The one place that parses YAML, so the parser can be swapped (serde_yaml is unmaintained).
//!
//! Policies are checked by walking a parsed [`Value`] and collecting every problem, which needs
//! each problem's line and column. serde_yaml keeps no positions in its values: [`Positions`]
//! reads the text once more with an event parser that does, and finds a path's node in that.

use yaml_rust2::parser::Event;
use yaml_rust2::scanner::TScalarStyle;

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

/// Where every node of one YAML text is, read in one pass, so that a file's many positions (a
/// policy's line, each problem's) cost one reading of it rather than one each.
///
/// serde_yaml keeps no positions, so the text is read again by an event parser that marks
/// each node where it starts. Positions are for messages and sources only: a text this reader
/// cannot follow (which serde_yaml accepted) gives the positions read before it stopped.
pub struct Positions {
    root: Option<Node>,
}

/// A node's position, and its children's.
struct Node {
    at: Position,
    children: Children,
}

enum Children {
    Leaf,
    /// Each entry's key text (`None` for a key that is not a scalar), the key's position, and
    /// the value.
    Map(Vec<(Option<String>, Position, Node)>),
    Seq(Vec<Node>),
}

/// A mapping or sequence being read, and, in a mapping, the key read before its value.
struct Open {
    node: Node,
    key: Option<(Option<String>, Position)>,
}

impl Positions {
    /// Reads `text`.
    pub fn of(text: &str) -> Positions {
        let breaks = ExtraBreaks::of(text);
        let mut parser = yaml_rust2::parser::Parser::new_from_str(text);
        let mut open: Vec<Open> = Vec::new();
        let mut root = None;
        while let Ok((event, mark)) = parser.next_token() {
            let at = breaks.position(mark.line(), mark.col());
            let (node, key) = match event {
                Event::StreamEnd => break,
                Event::MappingStart(..) | Event::SequenceStart(..) => {
                    let children = match event {
                        Event::MappingStart(..) => Children::Map(Vec::new()),
                        _ => Children::Seq(Vec::new()),
                    };
                    let node = Node { at, children };
                    open.push(Open { node, key: None });
                    continue;
                }
                Event::MappingEnd | Event::SequenceEnd => match open.pop() {
                    Some(done) => (done.node, None),
                    None => break,
                },
                Event::Scalar(value, style, ..) => {
                    let key = match (style, value.as_str()) {
                        (TScalarStyle::Plain, "" | "~") => "null".to_string(),
                        _ => value,
                    };
                    (Node::leaf(at), Some(key))
                }
                Event::Alias(_) => (Node::leaf(at), None),
                _ => continue,
            };
            Open::finish(&mut open, &mut root, node, key);
        }
        // A text this reader stopped in: the nodes still open keep what was read of them.
        while let Some(done) = open.pop() {
            Open::finish(&mut open, &mut root, done.node, None);
        }
        Positions { root }
    }

    /// The position of the node at `path`, or of the deepest ancestor that exists.
    pub fn locate(&self, path: &[Step]) -> Option<Position> {
        let mut node = self.root.as_ref()?;
        for step in path {
            let next = match (&node.children, step) {
                (Children::Seq(items), Step::Index(i)) => items.get(*i),
                (Children::Map(entries), Step::Value(k) | Step::Key(k)) => {
                    let Some((_, key_at, value)) =
                        entries.iter().find(|(key, ..)| key.as_deref() == Some(k))
                    else {
                        break;
                    };
                    if matches!(step, Step::Key(_)) {
                        return Some(*key_at);
                    }
                    Some(value)
                }
                _ => None,
            };
            match next {
                Some(child) => node = child,
                None => break,
            }
        }
        Some(node.at)
    }
}

/// The line breaks serde_yaml counts (libyaml reads YAML 1.1, where NEL, LS and PS end a line)
/// and the event parser does not (YAML 1.2), each at the event parser's line and column: what
/// turns its positions into serde_yaml's, the messages' other source. Its character index is
/// not used: it drifts after some multi-byte characters.
struct ExtraBreaks(Vec<(usize, usize)>);

impl ExtraBreaks {
    fn of(text: &str) -> ExtraBreaks {
        let mut breaks = Vec::new();
        let (mut line, mut column) = (1, 0);
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\r' if chars.peek() == Some(&'\n') => {}
                '\n' | '\r' => (line, column) = (line + 1, 0),
                '\u{85}' | '\u{2028}' | '\u{2029}' => {
                    breaks.push((line, column));
                    column += 1;
                }
                _ => column += 1,
            }
        }
        ExtraBreaks(breaks)
    }

    /// serde_yaml's position of what the event parser marks at `line` (from 1) and `column`
    /// (from 0).
    fn position(&self, line: usize, column: usize) -> Position {
        let before = self.0.partition_point(|&(l, _)| l < line);
        let on_line = self.0[before..]
            .iter()
            .take_while(|&&(l, c)| l == line && c < column);
        let (count, last) = on_line.fold((0, None), |(n, _), &(_, c)| (n + 1, Some(c)));
        Position {
            line: line + before + count,
            column: last.map_or(column + 1, |at| column - at),
        }
    }
}

impl Node {
    fn leaf(at: Position) -> Node {
        Node {
            at,
            children: Children::Leaf,
        }
    }
}

impl Open {
    /// Adds a finished node to the innermost open one, or makes it the root.
    fn finish(open: &mut [Open], root: &mut Option<Node>, node: Node, key: Option<String>) {
        match open.last_mut() {
            None => *root = root.take().or(Some(node)),
            Some(parent) => parent.attach(node, key),
        }
    }

    /// Adds a finished node: a sequence's next item, or a mapping's key or the value of the
    /// key before it.
    fn attach(&mut self, node: Node, key_text: Option<String>) {
        match &mut self.node.children {
            Children::Seq(items) => items.push(node),
            Children::Map(entries) => match self.key.take() {
                None => {
                    // A block mapping is marked at its first key's `:`; it starts at the key.
                    if entries.is_empty() {
                        self.node.at = self.node.at.min(node.at);
                    }
                    self.key = Some((key_text, node.at));
                }
                Some((key, key_at)) => entries.push((key, key_at, node)),
            },
            Children::Leaf => {}
        }
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
        let positions = Positions::of(DOC);
        let at = |path: &[Step]| positions.locate(path).map(|p| (p.line, p.column));
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
        let p = Positions::of(doc)
            .locate(&[Step::Key("foo".into())])
            .unwrap();
        assert_eq!((p.line, p.column), (2, 1));
    }

    #[test]
    fn a_missing_step_falls_back_to_the_deepest_ancestor() {
        let p = Positions::of(DOC)
            .locate(&[v("policies"), Step::Index(1), v("nope")])
            .unwrap();
        assert_eq!((p.line, p.column), (4, 5));
    }

    #[test]
    fn a_text_the_reader_stops_in_keeps_the_positions_read_before() {
        let doc = "policies:\n  - name: a\n  - name: [b\n";
        assert!(parse(doc).is_err(), "an unclosed flow sequence");
        let p = Positions::of(doc)
            .locate(&[v("policies"), Step::Index(0), v("name")])
            .unwrap();
        assert_eq!((p.line, p.column), (2, 11));
    }

    /// serde_yaml counts a line separator (U+2028) as a line break, as YAML 1.1 does; the event
    /// parser does not. Positions count lines as the messages' other source does.
    #[test]
    fn lines_are_counted_as_serde_yaml_counts_them() {
        let doc = "a: \"x\u{2028}y\"\nb: [1]\n";
        // serde_yaml places its error at b's value, a sequence where a string was wanted.
        let serde = serde_yaml::from_str::<std::collections::BTreeMap<String, String>>(doc)
            .unwrap_err()
            .location()
            .unwrap();
        let p = Positions::of(doc).locate(&[v("b")]).unwrap();
        assert_eq!((p.line, p.column), (serde.line(), serde.column()));
        assert_eq!((p.line, p.column), (3, 4));
    }

    /// The event parser's character index drifts after some multi-byte characters in a block
    /// scalar; its lines and columns do not.
    #[test]
    fn multi_byte_characters_do_not_move_the_positions_after_them() {
        let doc = "a:\n- ? |\n    \u{a1}\u{800}\u{800}\n  : null\nb:\n- null\n";
        let p = Positions::of(doc)
            .locate(&[v("b"), Step::Index(0)])
            .unwrap();
        assert_eq!((p.line, p.column), (6, 3));
    }

    #[test]
    fn syntax_errors_carry_a_position() {
        let err = parse("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(err.position.is_some());
        assert!(!err.message.contains(" at line "));
    }
}
