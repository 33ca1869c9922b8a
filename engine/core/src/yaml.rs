//! YAML with source positions, and a deterministic emitter.
//!
//! Pack files are parsed into [`Node`]s that remember where each value was written, so every
//! error (an unknown field, a bad CEL expression, a table row) can name file, line and column.
//! Plain scalars follow the YAML 1.2 core schema. Output objects are emitted in the style of
//! `kubectl get -o yaml`: block style, sorted keys, strings quoted only where a plain scalar
//! would be read back as something else, by a YAML 1.2 reader or a YAML 1.1 one (kubectl).
//! Files come from tenants and pull requests: reading bounds nesting and alias expansion.
//!
//! The reader is here; the emitter is `emit`, and the core schema both use is `core_schema`.

mod core_schema;
mod emit;

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::{Map, Value};
use thiserror::Error;
use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

pub use core_schema::resolve_plain;
pub use emit::{string_scalar, to_yaml, to_yaml_stream};

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
    // Positions are those of the text after its byte order mark, as `parse_documents` reads it.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
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
            if block && lead > indent {
                // A more-indented line of a folded scalar keeps its extra indentation.
                (indent + 1, raw.chars().skip(indent).collect::<String>())
            } else {
                (lead + 1, trimmed.to_string())
            }
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

/// The deepest nesting of collections a document may have. Every reader of the tree recurses
/// per level, and serde_json refuses 128 levels by default: 100 leaves room for the few
/// levels the engine wraps around an input object.
pub const MAX_DEPTH: usize = 100;
/// How many nodes aliases may produce in one stream, all documents together. Kubernetes'
/// YAML reader (go-yaml v3) allows about 400,000 alias-driven decodes; 100,000 is plenty
/// for hand-written packs and keeps a "billion laughs" stream to a few megabytes.
pub const MAX_ALIAS_NODES: usize = 100_000;
/// How many nodes one document may have, aliases expanded: room for a `kind: List` of some
/// 60,000 objects, or one object with a million-element list (which CEL's cost limits then
/// refuse to work on), while a document stays within a few hundred megabytes.
pub const MAX_DOCUMENT_NODES: usize = 2_000_000;

/// How many double-quoted strings with surrogate pair escapes are rewritten one at a time,
/// when rewriting them all at once is not possible.
const MAX_SURROGATE_RETRIES: usize = 100;

/// Parses every document of a YAML stream. Empty documents are kept as null nodes so that
/// document indexes match what the author sees. A leading byte order mark is skipped; nesting
/// and alias expansion are bounded ([`MAX_DEPTH`], [`MAX_ALIAS_NODES`],
/// [`MAX_DOCUMENT_NODES`]).
pub fn parse_documents(text: &str) -> Result<Vec<Node>, YamlError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    match parse_events(text) {
        Err(Failure::Surrogate(pos)) => {
            // JSON writers (json.dumps) escape astral characters as UTF-16 surrogate pairs,
            // which YAML does not define: rewrite the pairs as `\U` escapes. First all of
            // them at once; if that touched anything but double-quoted strings (a `\u` in a
            // plain or block scalar is literal text), once per failing string instead.
            let joined = join_all_surrogate_pairs(text);
            if let Ok(documents) = parse_events(&joined)
                && !documents.iter().any(has_rewritten_literal)
            {
                return Ok(documents);
            }
            let mut owned = text.to_string();
            let mut at = pos;
            // Each string costs a parse of the whole text: bounded, so a file cannot make
            // this quadratic.
            for _ in 0..MAX_SURROGATE_RETRIES {
                owned = join_surrogate_pairs(&owned, at)?;
                match parse_events(&owned) {
                    Err(Failure::Surrogate(next)) if next > at => at = next,
                    Err(Failure::Surrogate(next)) => return Err(lone_surrogate(&owned, next)),
                    Err(Failure::Yaml(e)) => return Err(e),
                    Ok(documents) => return Ok(documents),
                }
            }
            Err(YamlError {
                pos: at,
                message: format!(
                    "more than {MAX_SURROGATE_RETRIES} strings with UTF-16 surrogate escapes \
                     next to literal `\\U` text; write these characters as `\\U` escapes"
                ),
            })
        }
        Err(Failure::Yaml(e)) => Err(e),
        Ok(documents) => Ok(documents),
    }
}

/// The code point of the surrogate pair escape (`\ud83d\ude00`) that `escape` starts with.
fn surrogate_pair_at(escape: &str) -> Option<u32> {
    let high = hex4(escape.strip_prefix("\\u")?)?;
    let low = hex4(escape.get(6..)?.strip_prefix("\\u")?)?;
    ((0xD800..0xDC00).contains(&high) && (0xDC00..0xE000).contains(&low))
        .then(|| 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
}

/// Every surrogate pair escape of `text` as a `\U` escape, wherever it is.
fn join_all_surrogate_pairs(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        if let Some(code) = surrogate_pair_at(rest) {
            let _ = write!(out, "\\U{code:08x}");
            rest = &rest[12..];
        } else {
            // An escaped backslash is skipped whole, so `\\\\u` stays as written.
            let len = if rest.starts_with("\\\\") { 2 } else { 1 };
            out.push_str(&rest[..len]);
            rest = &rest[len..];
        }
    }
    out.push_str(rest);
    out
}

/// Whether a scalar other than a double-quoted one holds what [`join_all_surrogate_pairs`]
/// writes: there the rewrite changed literal text.
fn has_rewritten_literal(node: &Node) -> bool {
    match &node.value {
        NodeValue::Scalar(Value::String(s), style) => {
            *style != ScalarStyle::DoubleQuoted
                && s.match_indices("\\U").any(|(i, _)| {
                    s.get(i + 2..i + 10).is_some_and(|hex| {
                        hex.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f'))
                            && u32::from_str_radix(hex, 16).is_ok_and(|c| c >= 0x10000)
                    })
                })
        }
        NodeValue::Scalar(..) => false,
        NodeValue::Seq(items) => items.iter().any(has_rewritten_literal),
        NodeValue::Map(entries) => entries
            .iter()
            .any(|(k, v)| has_rewritten_literal(k) || has_rewritten_literal(v)),
    }
}

enum Failure {
    Yaml(YamlError),
    /// An invalid `\u` escape in the double-quoted scalar starting at this position.
    Surrogate(Pos),
}

fn parse_events(text: &str) -> Result<Vec<Node>, Failure> {
    let mut builder = Builder::default();
    // The event loop, not `Parser::load`: `load` recurses once per nesting level and
    // overflows the stack on deep input before any limit could apply.
    let mut parser = Parser::new_from_str(text);
    loop {
        let (event, mark) = parser.next_token().map_err(|e| {
            let pos = pos_of(*e.marker());
            if e.info().contains("invalid Unicode character escape") {
                Failure::Surrogate(pos)
            } else if e.info() == "recursion limit exceeded" {
                // The scanner's own bound on flow nesting (255 levels), reached while it looks
                // ahead of the events that count depth.
                Failure::Yaml(YamlError {
                    pos,
                    message: format!("nesting deeper than {MAX_DEPTH}"),
                })
            } else {
                Failure::Yaml(YamlError {
                    pos,
                    message: e.info().to_string(),
                })
            }
        })?;
        if event == Event::StreamEnd {
            break;
        }
        builder.on_event(event, mark).map_err(Failure::Yaml)?;
    }
    if let Some(error) = builder.error {
        return Err(Failure::Yaml(error));
    }
    Ok(builder.documents)
}

/// The byte offset of a 1-based position in `text`.
fn byte_offset(text: &str, pos: Pos) -> usize {
    let mut line_start = 0;
    for _ in 1..pos.line {
        match text[line_start..].find('\n') {
            Some(i) => line_start += i + 1,
            None => break,
        }
    }
    text[line_start..]
        .char_indices()
        .nth(pos.column.saturating_sub(1))
        .map_or(text.len(), |(i, _)| line_start + i)
}

fn hex4(text: &str) -> Option<u32> {
    let digits = text.get(..4)?;
    if digits.chars().all(|c| c.is_ascii_hexdigit()) {
        u32::from_str_radix(digits, 16).ok()
    } else {
        None
    }
}

/// Rewrites the UTF-16 surrogate pairs (`\ud83d\ude00`) of the double-quoted scalar starting
/// at `pos` as `\U0001f600`; a lone surrogate is an error at its escape.
fn join_surrogate_pairs(text: &str, pos: Pos) -> Result<String, YamlError> {
    let start = byte_offset(text, pos);
    let mut out = String::with_capacity(text.len());
    out.push_str(&text[..start]);
    let mut rest = &text[start..];
    // The opening quote.
    if let Some(q) = rest.strip_prefix('"') {
        out.push('"');
        rest = q;
    }
    while let Some(i) = rest.find(['\\', '"']) {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        if rest.starts_with('"') {
            break;
        }
        let after = &rest[1..];
        if let Some(code) = surrogate_pair_at(rest) {
            let _ = write!(out, "\\U{code:08x}");
            rest = &rest[12..];
            continue;
        }
        if after.starts_with('u')
            && hex4(&after[1..]).is_some_and(|c| (0xD800..0xE000).contains(&c))
        {
            let offset = text.len() - rest.len();
            return Err(YamlError {
                pos: pos_at(text, offset),
                message: format!("lone UTF-16 surrogate `{}` in a string", &rest[..6]),
            });
        }
        // Any other escape: copy the backslash and the escaped character.
        let escaped = after.chars().next().map_or(0, char::len_utf8);
        out.push_str(&rest[..1 + escaped]);
        rest = &rest[1 + escaped..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The 1-based position of a byte offset.
fn pos_at(text: &str, offset: usize) -> Pos {
    let before = &text[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    Pos {
        line: before.matches('\n').count() + 1,
        column: before[line_start..].chars().count() + 1,
    }
}

/// The error for an invalid `\u` escape that no rewriting fixed.
fn lone_surrogate(text: &str, pos: Pos) -> YamlError {
    match join_surrogate_pairs(text, pos) {
        Err(e) => e,
        Ok(_) => YamlError {
            pos,
            message: "while parsing a quoted scalar, found invalid Unicode character escape code"
                .to_string(),
        },
    }
}

/// A collection being built.
struct Open {
    node: Node,
    pending_key: Option<Node>,
    anchor: usize,
    /// Nodes of the document before this one started.
    nodes_before: usize,
    /// The deepest nesting below this collection.
    height: usize,
}

/// A finished anchored node, with what an alias to it costs.
struct Anchored {
    node: Node,
    nodes: usize,
    height: usize,
}

#[derive(Default)]
struct Builder {
    documents: Vec<Node>,
    stack: Vec<Open>,
    anchors: HashMap<usize, Anchored>,
    /// Nodes in the current document, aliases expanded.
    nodes: usize,
    alias_nodes: usize,
    /// The first duplicate key: reported only if the stream parses.
    error: Option<YamlError>,
}

impl Builder {
    /// Adds a finished node of `height` collection levels to its parent.
    fn push_value(&mut self, node: Node, height: usize) {
        let Some(open) = self.stack.last_mut() else {
            self.documents.push(node);
            return;
        };
        open.height = open.height.max(height);
        match &mut open.node.value {
            NodeValue::Seq(items) => items.push(node),
            NodeValue::Map(entries) => match open.pending_key.take() {
                None => open.pending_key = Some(node),
                Some(key) => {
                    if entries.iter().any(|(k, _)| k.value == key.value) && self.error.is_none() {
                        self.error = Some(YamlError {
                            pos: key.pos,
                            message: format!("duplicate key `{}`", key_string(&key)),
                        });
                    }
                    entries.push((key, node));
                }
            },
            NodeValue::Scalar(..) => {}
        }
    }

    /// Counts `count` more nodes in the document.
    fn count(&mut self, count: usize, pos: Pos) -> Result<(), YamlError> {
        self.nodes = self.nodes.saturating_add(count);
        if self.nodes > MAX_DOCUMENT_NODES {
            return Err(YamlError {
                pos,
                message: format!("document has more than {MAX_DOCUMENT_NODES} nodes"),
            });
        }
        Ok(())
    }

    fn open(&mut self, value: NodeValue, anchor: usize, mark: Marker) -> Result<(), YamlError> {
        let pos = pos_of(mark);
        if self.stack.len() >= MAX_DEPTH {
            return Err(YamlError {
                pos,
                message: format!("nesting deeper than {MAX_DEPTH}"),
            });
        }
        self.count(1, pos)?;
        self.stack.push(Open {
            node: Node { value, pos },
            pending_key: None,
            anchor,
            nodes_before: self.nodes - 1,
            height: 0,
        });
        Ok(())
    }

    fn on_event(&mut self, event: Event, mark: Marker) -> Result<(), YamlError> {
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                self.count(1, pos_of(mark))?;
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
                    self.anchors.insert(
                        anchor,
                        Anchored {
                            node: node.clone(),
                            nodes: 1,
                            height: 0,
                        },
                    );
                }
                self.push_value(node, 0);
            }
            Event::SequenceStart(anchor, _) => {
                self.open(NodeValue::Seq(Vec::new()), anchor, mark)?;
            }
            Event::MappingStart(anchor, _) => {
                self.open(NodeValue::Map(Vec::new()), anchor, mark)?;
            }
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some(mut open) = self.stack.pop() {
                    // A block mapping's start mark can fall after its first key: point at
                    // whichever comes first.
                    if let NodeValue::Map(entries) = &open.node.value
                        && let Some((first, _)) = entries.first()
                        && first.pos < open.node.pos
                    {
                        open.node.pos = first.pos;
                    }
                    let height = open.height + 1;
                    if open.anchor > 0 {
                        self.anchors.insert(
                            open.anchor,
                            Anchored {
                                node: open.node.clone(),
                                nodes: self.nodes - open.nodes_before,
                                height,
                            },
                        );
                    }
                    self.push_value(open.node, height);
                }
            }
            Event::Alias(anchor) => {
                let pos = pos_of(mark);
                let Some(anchored) = self.anchors.get(&anchor) else {
                    return Err(YamlError {
                        pos,
                        message: "alias to an anchor of another document".to_string(),
                    });
                };
                let (nodes, height) = (anchored.nodes, anchored.height);
                if self.stack.len() + height > MAX_DEPTH {
                    return Err(YamlError {
                        pos,
                        message: format!("nesting deeper than {MAX_DEPTH}"),
                    });
                }
                self.alias_nodes = self.alias_nodes.saturating_add(nodes);
                if self.alias_nodes > MAX_ALIAS_NODES {
                    return Err(YamlError {
                        pos,
                        message: format!("aliases expand to more than {MAX_ALIAS_NODES} nodes"),
                    });
                }
                self.count(nodes, pos)?;
                // Cloned only once the limits allow it.
                if let Some(anchored) = self.anchors.get(&anchor) {
                    let node = anchored.node.clone();
                    self.push_value(node, height);
                }
            }
            Event::DocumentStart => {
                // Anchors are per document, as `Parser::load` has them.
                self.anchors.clear();
                self.nodes = 0;
            }
            Event::DocumentEnd | Event::StreamStart | Event::StreamEnd | Event::Nothing => {}
        }
        Ok(())
    }
}

fn pos_of(mark: Marker) -> Pos {
    Pos {
        line: mark.line(),
        column: mark.col() + 1,
    }
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
