//! YAML with source positions, and a deterministic emitter.
//!
//! Pack files are parsed into [`Node`]s that remember where each value was written, so every
//! error (an unknown field, a bad CEL expression, a table row) can name file, line and column.
//! Plain scalars follow the YAML 1.2 core schema. Output objects are emitted in the style of
//! `kubectl get -o yaml`: block style, sorted keys, strings quoted only where a plain scalar
//! would be read back as something else.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::{Map, Number, Value};
use thiserror::Error;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// A 1-based position in a source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord)]
pub struct Pos {
    pub line: usize,
    pub column: usize,
}

/// How a scalar was written; needed to map a character offset inside it back to the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarStyle {
    Plain,
    SingleQuoted,
    DoubleQuoted,
    Literal,
    Folded,
}

#[derive(Debug, Clone, PartialEq)]
pub enum NodeValue {
    Scalar(Value, ScalarStyle),
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

/// A YAML value with the position where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub value: NodeValue,
    pub pos: Pos,
}

/// One step of a path into a document: a mapping key or a sequence index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathSegment {
    Key(String),
    Index(usize),
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{message}")]
pub struct YamlError {
    pub pos: Pos,
    pub message: String,
}

impl Node {
    /// The value as JSON (mapping keys become strings).
    pub fn to_json(&self) -> Value {
        match &self.value {
            NodeValue::Scalar(v, _) => v.clone(),
            NodeValue::Seq(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            NodeValue::Map(entries) => {
                let mut map = Map::new();
                for (k, v) in entries {
                    map.insert(key_string(k), v.to_json());
                }
                Value::Object(map)
            }
        }
    }

    /// The node at `path`, if present.
    pub fn get(&self, path: &[PathSegment]) -> Option<&Node> {
        let mut node = self;
        for segment in path {
            node = match (&node.value, segment) {
                (NodeValue::Map(entries), PathSegment::Key(key)) => entries
                    .iter()
                    .find(|(k, _)| key_string(k) == *key)
                    .map(|(_, v)| v)?,
                (NodeValue::Seq(items), PathSegment::Index(i)) => items.get(*i)?,
                _ => return None,
            };
        }
        Some(node)
    }

    /// The deepest node along `path` that exists: errors about a missing or bad field point at
    /// the closest thing the author wrote.
    pub fn closest(&self, path: &[PathSegment]) -> &Node {
        let mut node = self;
        for segment in path {
            let next = match (&node.value, segment) {
                (NodeValue::Map(entries), PathSegment::Key(key)) => entries
                    .iter()
                    .find(|(k, _)| key_string(k) == *key)
                    .map(|(_, v)| v),
                (NodeValue::Seq(items), PathSegment::Index(i)) => items.get(*i),
                _ => None,
            };
            match next {
                Some(n) => node = n,
                None => break,
            }
        }
        node
    }

    /// The position of the key `key` in this mapping (for "unknown field" errors).
    pub fn key_pos(&self, key: &str) -> Option<Pos> {
        match &self.value {
            NodeValue::Map(entries) => entries
                .iter()
                .find(|(k, _)| key_string(k) == key)
                .map(|(k, _)| k.pos),
            _ => None,
        }
    }

    /// Maps a character offset inside this scalar's text to a file position. Exact for plain,
    /// single-line quoted and literal block scalars; an approximation for folded scalars and
    /// quoted scalars with escapes.
    pub fn offset_pos(&self, line_in_value: usize, column_in_value: usize) -> Pos {
        let style = match &self.value {
            NodeValue::Scalar(_, style) => *style,
            _ => return self.pos,
        };
        match style {
            ScalarStyle::Plain => {
                if line_in_value <= 1 {
                    Pos {
                        line: self.pos.line,
                        column: self.pos.column + column_in_value.saturating_sub(1),
                    }
                } else {
                    Pos {
                        line: self.pos.line + line_in_value - 1,
                        column: column_in_value,
                    }
                }
            }
            ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted => Pos {
                line: self.pos.line + line_in_value.saturating_sub(1),
                column: if line_in_value <= 1 {
                    self.pos.column + column_in_value
                } else {
                    column_in_value
                },
            },
            ScalarStyle::Literal | ScalarStyle::Folded => {
                // yaml-rust2 marks a block scalar at its first content line; the column of
                // that mark is the block's indentation.
                Pos {
                    line: self.pos.line + line_in_value.saturating_sub(1),
                    column: self.pos.column + column_in_value.saturating_sub(1),
                }
            }
        }
    }
}

/// Maps a 1-based (line, column) inside a scalar's value to its position in `text`, the
/// file the scalar was parsed from. Literal blocks map line for line; folded blocks, plain
/// and quoted scalars that span lines are followed through YAML's line folding by reading
/// the source lines again. Escapes in quoted scalars are not undone, so a column after an
/// escape is approximate.
pub fn value_position(text: &str, node: &Node, line: usize, column: usize) -> Pos {
    let NodeValue::Scalar(Value::String(value), style) = &node.value else {
        return node.pos;
    };
    if *style == ScalarStyle::Literal {
        return node.offset_pos(line, column);
    }
    // The character offset of (line, column) in the value.
    let offset: usize = value
        .split('\n')
        .take(line.saturating_sub(1))
        .map(|l| l.chars().count() + 1)
        .sum::<usize>()
        + column.saturating_sub(1);
    let source: Vec<&str> = text.lines().collect();
    let Some(first) = source.get(node.pos.line.saturating_sub(1)) else {
        return node.offset_pos(line, column);
    };
    // (offset in the value where a source line's text starts, line, column of that text)
    let mut segments: Vec<(usize, usize, usize)> = Vec::new();
    let mut cursor = 0usize;
    let mut pending_join = false;
    let start_column = match style {
        ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted => node.pos.column + 1,
        _ => node.pos.column,
    };
    let block = *style == ScalarStyle::Folded;
    let indent = node.pos.column.saturating_sub(1);
    for (i, raw) in source.iter().enumerate().skip(node.pos.line - 1) {
        let (col, content) = if i + 1 == node.pos.line {
            let skip = start_column.saturating_sub(1);
            (start_column, first.chars().skip(skip).collect::<String>())
        } else {
            let trimmed = raw.trim_start();
            let lead = raw.chars().count() - trimmed.chars().count();
            if !trimmed.is_empty() && block && lead < indent {
                break;
            }
            if !trimmed.is_empty() && !block && lead < indent.min(1) {
                break;
            }
            (lead + 1, trimmed.to_string())
        };
        let content = content.trim_end().to_string();
        if content.is_empty() && i + 1 != node.pos.line {
            // An empty line is a newline in the value, and cancels the pending join.
            pending_join = false;
            cursor += 1;
            continue;
        }
        if pending_join {
            cursor += 1;
        }
        segments.push((cursor, i + 1, col));
        cursor += content.chars().count();
        pending_join = true;
        if cursor > value.chars().count() + 1 {
            break;
        }
    }
    match segments.iter().rev().find(|(start, _, _)| *start <= offset) {
        Some((start, line, col)) => Pos {
            line: *line,
            column: col + (offset - start),
        },
        None => node.offset_pos(line, column),
    }
}

fn key_string(node: &Node) -> String {
    match &node.value {
        NodeValue::Scalar(Value::String(s), _) => s.clone(),
        NodeValue::Scalar(Value::Null, _) => String::new(),
        NodeValue::Scalar(v, _) => v.to_string(),
        _ => serde_json::to_string(&node.to_json()).unwrap_or_default(),
    }
}

/// Renders a path as `spec.rules[2].when`.
pub fn path_to_string(path: &[PathSegment]) -> String {
    let mut out = String::new();
    for segment in path {
        match segment {
            PathSegment::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            PathSegment::Index(i) => {
                let _ = write!(out, "[{i}]");
            }
        }
    }
    out
}

/// Parses `spec.rows[2].when` back into segments.
pub fn parse_path(path: &str) -> Vec<PathSegment> {
    let mut segments = Vec::new();
    for part in path.split('.') {
        let mut rest = part;
        if let Some(open) = rest.find('[') {
            let key = &rest[..open];
            if !key.is_empty() {
                segments.push(PathSegment::Key(key.to_string()));
            }
            rest = &rest[open..];
            while let Some(stripped) = rest.strip_prefix('[') {
                let Some(close) = stripped.find(']') else {
                    break;
                };
                if let Ok(i) = stripped[..close].parse() {
                    segments.push(PathSegment::Index(i));
                }
                rest = &stripped[close + 1..];
            }
        } else if !rest.is_empty() {
            segments.push(PathSegment::Key(rest.to_string()));
        }
    }
    segments
}

/// Parses every document of a YAML stream. Empty documents are kept as null nodes so that
/// document indexes match what the author sees.
pub fn parse_documents(text: &str) -> Result<Vec<Node>, YamlError> {
    let mut builder = Builder::default();
    let mut parser = Parser::new_from_str(text);
    parser.load(&mut builder, true).map_err(|e| YamlError {
        pos: Pos {
            line: e.marker().line(),
            column: e.marker().col() + 1,
        },
        message: e.info().to_string(),
    })?;
    if let Some(error) = builder.error {
        return Err(error);
    }
    Ok(builder.documents)
}

#[derive(Default)]
struct Builder {
    documents: Vec<Node>,
    stack: Vec<(Node, Option<Node>, usize)>,
    anchors: HashMap<usize, Node>,
    error: Option<YamlError>,
}

impl Builder {
    fn push_value(&mut self, node: Node) {
        match self.stack.last_mut() {
            None => self.documents.push(node),
            Some((parent, pending_key, _)) => match &mut parent.value {
                NodeValue::Seq(items) => items.push(node),
                NodeValue::Map(entries) => match pending_key.take() {
                    None => *pending_key = Some(node),
                    Some(key) => {
                        if entries.iter().any(|(k, _)| k.value == key.value) && self.error.is_none()
                        {
                            self.error = Some(YamlError {
                                pos: key.pos,
                                message: format!("duplicate key `{}`", key_string(&key)),
                            });
                        }
                        entries.push((key, node));
                    }
                },
                NodeValue::Scalar(..) => {}
            },
        }
    }
}

fn pos_of(mark: Marker) -> Pos {
    Pos {
        line: mark.line(),
        column: mark.col() + 1,
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, event: Event, mark: Marker) {
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                let style = match style {
                    TScalarStyle::SingleQuoted => ScalarStyle::SingleQuoted,
                    TScalarStyle::DoubleQuoted => ScalarStyle::DoubleQuoted,
                    TScalarStyle::Literal => ScalarStyle::Literal,
                    TScalarStyle::Folded => ScalarStyle::Folded,
                    _ => ScalarStyle::Plain,
                };
                let value = match (&tag, style) {
                    (Some(tag), _) if tag.handle == "tag:yaml.org,2002:" || tag.handle == "!!" => {
                        match tag.suffix.as_str() {
                            "str" => Value::String(text),
                            "null" => Value::Null,
                            _ => resolve_plain(&text),
                        }
                    }
                    (_, ScalarStyle::Plain) => resolve_plain(&text),
                    _ => Value::String(text),
                };
                let node = Node {
                    value: NodeValue::Scalar(value, style),
                    pos: pos_of(mark),
                };
                if anchor > 0 {
                    self.anchors.insert(anchor, node.clone());
                }
                self.push_value(node);
            }
            Event::SequenceStart(anchor, _) => self.stack.push((
                Node {
                    value: NodeValue::Seq(Vec::new()),
                    pos: pos_of(mark),
                },
                None,
                anchor,
            )),
            Event::MappingStart(anchor, _) => self.stack.push((
                Node {
                    value: NodeValue::Map(Vec::new()),
                    pos: pos_of(mark),
                },
                None,
                anchor,
            )),
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some((mut node, _, anchor)) = self.stack.pop() {
                    // A block mapping's start mark can fall after its first key: point at
                    // whichever comes first.
                    if let NodeValue::Map(entries) = &node.value
                        && let Some((first, _)) = entries.first()
                        && first.pos < node.pos
                    {
                        node.pos = first.pos;
                    }
                    if anchor > 0 {
                        self.anchors.insert(anchor, node.clone());
                    }
                    self.push_value(node);
                }
            }
            Event::Alias(anchor) => {
                let node = self.anchors.get(&anchor).cloned().unwrap_or(Node {
                    value: NodeValue::Scalar(Value::Null, ScalarStyle::Plain),
                    pos: pos_of(mark),
                });
                self.push_value(node);
            }
            Event::DocumentStart
            | Event::DocumentEnd
            | Event::StreamStart
            | Event::StreamEnd
            | Event::Nothing => {}
        }
    }
}

/// YAML 1.2 core schema resolution of a plain scalar.
pub fn resolve_plain(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" | "-.inf" | "-.Inf" | "-.INF"
        | ".nan" | ".NaN" | ".NAN" => return Value::String(text.to_string()),
        _ => {}
    }
    if let Some(n) = parse_int(text) {
        return n;
    }
    if is_float(text)
        && let Ok(f) = text.parse::<f64>()
        && let Some(n) = Number::from_f64(f)
    {
        return Value::Number(n);
    }
    Value::String(text.to_string())
}

fn parse_int(text: &str) -> Option<Value> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (radix, body) = if let Some(hex) = digits.strip_prefix("0x") {
        (16, hex)
    } else if let Some(oct) = digits.strip_prefix("0o") {
        (8, oct)
    } else {
        (10, digits)
    };
    if body.is_empty() || !body.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    if radix != 10 && negative {
        return None;
    }
    let magnitude = u64::from_str_radix(body, radix).ok()?;
    if negative {
        let value = i64::try_from(magnitude)
            .ok()
            .map(|m| -m)
            .or_else(|| (magnitude == i64::MIN.unsigned_abs()).then_some(i64::MIN))?;
        Some(Value::Number(value.into()))
    } else {
        Some(Value::Number(magnitude.into()))
    }
}

fn is_float(text: &str) -> bool {
    // [-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?
    let s = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let mantissa_ok = match mantissa.split_once('.') {
        Some((int, frac)) => {
            (!int.is_empty() || !frac.is_empty())
                && int.chars().all(|c| c.is_ascii_digit())
                && frac.chars().all(|c| c.is_ascii_digit())
        }
        None => !mantissa.is_empty() && mantissa.chars().all(|c| c.is_ascii_digit()),
    };
    let exponent_ok = match exponent {
        None => true,
        Some(e) => {
            let digits = e.strip_prefix(['-', '+']).unwrap_or(e);
            !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit())
        }
    };
    mantissa_ok && exponent_ok
}

/// Emits a value as one YAML document body (no `---`), kubectl style.
pub fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(map) if !map.is_empty() => emit_map(&mut out, map, 0),
        Value::Array(items) if !items.is_empty() => emit_seq(&mut out, items, 0),
        other => {
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
    out
}

/// Emits several documents separated by `---`.
pub fn to_yaml_stream<'a>(values: impl IntoIterator<Item = &'a Value>) -> String {
    let mut out = String::new();
    for (i, value) in values.into_iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        out.push_str(&to_yaml(value));
    }
    out
}

fn emit_map(out: &mut String, map: &Map<String, Value>, indent: usize) {
    for (key, value) in map {
        out.push_str(&" ".repeat(indent));
        out.push_str(&string_scalar(key));
        out.push(':');
        emit_child(out, value, indent, false);
    }
}

fn emit_seq(out: &mut String, items: &[Value], indent: usize) {
    for item in items {
        out.push_str(&" ".repeat(indent));
        out.push('-');
        emit_child(out, item, indent, true);
    }
}

/// Emits the value after `key:` or `-`.
fn emit_child(out: &mut String, value: &Value, indent: usize, in_seq: bool) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            if in_seq {
                // `- key: value` with the rest of the mapping aligned under the first key.
                out.push(' ');
                let mut first = true;
                for (key, child) in map {
                    if !first {
                        out.push_str(&" ".repeat(indent + 2));
                    }
                    first = false;
                    out.push_str(&string_scalar(key));
                    out.push(':');
                    emit_child(out, child, indent + 2, false);
                }
            } else {
                out.push('\n');
                emit_map(out, map, indent + 2);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            out.push('\n');
            // kubectl style: a sequence under a key sits at the key's indentation.
            emit_seq(out, items, if in_seq { indent + 2 } else { indent });
        }
        Value::String(s) if is_block_candidate(s) => {
            let chomp = if s.ends_with("\n\n") {
                "+"
            } else if s.ends_with('\n') {
                ""
            } else {
                "-"
            };
            let _ = writeln!(out, " |{chomp}");
            let body = s.strip_suffix('\n').unwrap_or(s);
            for line in body.split('\n') {
                if line.is_empty() {
                    out.push('\n');
                } else {
                    let _ = writeln!(out, "{}{line}", " ".repeat(indent + 2));
                }
            }
        }
        other => {
            out.push(' ');
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
}

fn is_block_candidate(s: &str) -> bool {
    s.contains('\n')
        && !s.starts_with([' ', '\t', '\n'])
        && !s.contains('\r')
        && s.chars().all(|c| c == '\n' || c == '\t' || !c.is_control())
        && !s.split('\n').any(|l| l.ends_with(' ') || l.ends_with('\t'))
        && !s.ends_with("\n\n\n")
}

fn scalar(value: &Value) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => string_scalar(s),
        Value::Array(_) => "[]".to_string(),
        Value::Object(_) => "{}".to_string(),
    }
}

/// A string as a YAML scalar that reads back as the same string under both YAML 1.1
/// (go-yaml, kubectl) and 1.2 parsers: plain when that is unambiguous, else double-quoted
/// with JSON escapes (valid YAML).
pub fn string_scalar(s: &str) -> String {
    if is_safe_plain(s) {
        s.to_string()
    } else {
        serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
    }
}

fn is_safe_plain(s: &str) -> bool {
    if s.is_empty() || s.len() > 200 {
        return false;
    }
    let first = s.chars().next().unwrap_or(' ');
    if !(first.is_ascii_alphanumeric() || first == '/' || first == '_' || first == '.') {
        return false;
    }
    if s.ends_with(':') || s.contains(": ") || s.contains(" #") || s.ends_with(' ') {
        return false;
    }
    if !s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || " _./:@%+=-()~,".contains(c))
    {
        return false;
    }
    if resolve_plain(s) != Value::String(s.to_string()) {
        return false;
    }
    // YAML 1.1 readers (go-yaml v2, used by kubectl) also take these as booleans, numbers
    // with underscores or sexagesimal, and timestamps.
    let lower = s.to_ascii_lowercase();
    if matches!(lower.as_str(), "y" | "n" | "yes" | "no" | "on" | "off")
        || s.starts_with('.')
            && s[1..].chars().all(|c| c.is_ascii_alphabetic())
            && matches!(lower.as_str(), ".inf" | ".nan")
    {
        return false;
    }
    let numeric_like = s
        .chars()
        .all(|c| c.is_ascii_digit() || "_:.-+eExXoObB".contains(c));
    if numeric_like && s.chars().any(|c| c.is_ascii_digit()) {
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn positions_are_one_based() {
        let docs = parse_documents("a: 1\nb:\n  c: [x, y]\n").unwrap();
        let root = &docs[0];
        assert_eq!(root.key_pos("b"), Some(Pos { line: 2, column: 1 }));
        let c = root.get(&parse_path("b.c[1]")).unwrap();
        assert_eq!(
            c.pos,
            Pos {
                line: 3,
                column: 10
            }
        );
        assert_eq!(c.to_json(), json!("y"));
    }

    #[test]
    fn core_schema_scalars() {
        let docs = parse_documents("a: 1\nb: '1'\nc: true\nd: yes\ne: 1.5\nf: ~\ng: 0x1F\nh: -3\n")
            .unwrap();
        assert_eq!(
            docs[0].to_json(),
            json!({"a": 1, "b": "1", "c": true, "d": "yes", "e": 1.5, "f": null, "g": 31, "h": -3})
        );
    }

    #[test]
    fn duplicate_keys_are_errors() {
        let err = parse_documents("a: 1\nb: 2\na: 3\n").unwrap_err();
        assert_eq!(err.pos, Pos { line: 3, column: 1 });
        assert_eq!(err.message, "duplicate key `a`");
    }

    #[test]
    fn multi_document_stream() {
        let docs = parse_documents("a: 1\n---\nb: 2\n").unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].pos.line, 3);
    }

    #[test]
    fn syntax_error_has_position() {
        let err = parse_documents("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(err.pos.line >= 1);
        assert!(!err.message.is_empty());
    }

    #[test]
    fn paths_round_trip() {
        let path = parse_path("spec.rules[2].when[0]");
        assert_eq!(path_to_string(&path), "spec.rules[2].when[0]");
    }

    #[test]
    fn emitter_is_kubectl_style() {
        let value = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "x", "labels": {"a": "true", "b": "1.0"}},
            "data": {"script": "echo hi\nexit 0\n", "empty": ""},
            "list": [{"name": "a", "ports": [{"port": 80}]}, "plain"]
        });
        let text = to_yaml(&value);
        assert_eq!(
            text,
            "apiVersion: v1\ndata:\n  empty: \"\"\n  script: |\n    echo hi\n    exit 0\nkind: ConfigMap\nlist:\n- name: a\n  ports:\n  - port: 80\n- plain\nmetadata:\n  labels:\n    a: \"true\"\n    b: \"1.0\"\n  name: x\n"
        );
    }

    #[test]
    fn positions_inside_folded_and_plain_scalars() {
        let text = "a: >-\n  one two\n  three four\n\n  five\nb: x y\n   z w\n";
        let docs = parse_documents(text).unwrap();
        let a = docs[0].get(&parse_path("a")).unwrap();
        assert_eq!(a.to_json(), json!("one two three four\nfive"));
        // `three` starts at character 9 of the first value line.
        assert_eq!(value_position(text, a, 1, 9), Pos { line: 3, column: 3 });
        assert_eq!(value_position(text, a, 1, 1), Pos { line: 2, column: 3 });
        assert_eq!(value_position(text, a, 2, 1), Pos { line: 5, column: 3 });
        let b = docs[0].get(&parse_path("b")).unwrap();
        assert_eq!(b.to_json(), json!("x y z w"));
        assert_eq!(value_position(text, b, 1, 5), Pos { line: 7, column: 4 });
        assert_eq!(value_position(text, b, 1, 3), Pos { line: 6, column: 6 });
    }

    #[test]
    fn hostile_strings_round_trip() {
        let hostile = [
            "evil\nkind: Secret",
            "a: b",
            "x\n---\napiVersion: v1",
            "{{self}}",
            "' \" #c",
            "&a *a !!str",
            "  leading",
            "\t",
            "trailing ",
            "yes",
            "0755",
            "1e3",
            "12:30",
            "- item",
            "? key",
            "%TAG",
            "@at",
            "`tick",
            "null",
            "multi\nline\n",
            "multi\n\n",
            "tab\tin\nblock",
            "ünïcödé",
            "\u{1b}[31m",
        ];
        for s in hostile {
            let value = json!({"k": s, s: [s]});
            let text = to_yaml(&value);
            let back = parse_documents(&text).unwrap();
            assert_eq!(back.len(), 1, "{s:?} gave {text}");
            assert_eq!(back[0].to_json(), value, "{s:?} gave {text}");
        }
    }
}
