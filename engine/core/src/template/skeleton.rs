//! Rendered template text parsed once: the YAML structure with its placeholders in place.
//!
//! The text a render produces is made of template source and placeholder tokens only (see
//! `decode`), so two renders that take the same branches and iterate the same number of
//! times produce the same text, whatever the values. A [`Skeleton`] is that text parsed
//! once: the documents as a tree whose scalars are either fixed (resolved with the YAML 1.2
//! core schema at parse time), one typed placeholder, or text mixed with placeholders.
//! Filling it with a render's value table gives exactly what `decode::decode` gives for the
//! same text and table; the template set keeps skeletons by text (see `SkeletonCache`), so
//! most renders parse no YAML at all.
//!
//! Only text that decodes without error gets a skeleton, and filling one reports nothing
//! but "the values make this invalid" (a duplicate key, a document that is not a mapping):
//! the caller then decodes the text again to get the exact error message of `decode`.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use serde_json::{Map, Value};
use yaml_rust2::parser::{Event, Parser};

use super::decode::{Piece, collection_tag, resolve_plain, split, string_tag};
use super::helpers::to_text;
use yaml_rust2::scanner::TScalarStyle;

/// A piece of a scalar with placeholders: literal text or a placeholder index.
#[derive(Debug, Clone, PartialEq)]
enum Part {
    Text(String),
    Token(usize),
}

/// A node of the parsed text.
#[derive(Debug, Clone, PartialEq)]
enum Skel {
    /// A scalar without placeholders: its value and its text as a mapping key.
    Fixed {
        value: Value,
        key: String,
    },
    /// A plain scalar that is exactly one placeholder: the typed value.
    Token(usize),
    /// A quoted, block or tagged scalar, or text mixed with placeholders: a string.
    Text(Vec<Part>),
    Seq(Vec<Skel>),
    Map(Vec<(Skel, Skel)>),
}

/// The documents of one rendered text (empty documents dropped).
#[derive(Debug)]
pub(super) struct Skeleton {
    docs: Vec<Skel>,
    /// How many times each placeholder appears (an alias repeats its anchor's).
    uses: Vec<u32>,
    /// Whether the values can make the text invalid: a mapping key or a document that is a
    /// placeholder.
    fallible: bool,
}

fn text_of(parts: &[Part], table: &[Value]) -> Option<String> {
    let mut out = String::new();
    for part in parts {
        match part {
            Part::Text(t) => out.push_str(t),
            Part::Token(idx) => out.push_str(&to_text(table.get(*idx)?)),
        }
    }
    Some(out)
}

impl Skel {
    /// The node's text as a mapping key (`None` for a collection).
    fn key(&self, table: &[Value]) -> Option<String> {
        match self {
            Skel::Fixed { key, .. } => Some(key.clone()),
            Skel::Token(idx) => table.get(*idx).map(to_text),
            Skel::Text(parts) => text_of(parts, table),
            Skel::Seq(_) | Skel::Map(_) => None,
        }
    }

    /// Whether filling the node with `table` gives a valid tree: every placeholder exists
    /// and no mapping has the same key twice.
    fn valid(&self, table: &[Value]) -> bool {
        match self {
            Skel::Fixed { .. } => true,
            Skel::Token(idx) => *idx < table.len(),
            Skel::Text(parts) => parts
                .iter()
                .all(|p| !matches!(p, Part::Token(idx) if *idx >= table.len())),
            Skel::Seq(items) => items.iter().all(|item| item.valid(table)),
            Skel::Map(entries) => {
                let mut keys = std::collections::HashSet::with_capacity(entries.len());
                entries.iter().all(|(key, value)| {
                    key.key(table).is_some_and(|k| keys.insert(k)) && value.valid(table)
                })
            }
        }
    }

    /// The node filled with `table`, a placeholder used once moved out of it; `None` for a
    /// placeholder that does not exist or a duplicate key.
    fn fill(&self, table: &mut [Value], uses: &[u32]) -> Option<Value> {
        Some(match self {
            Skel::Fixed { value, .. } => value.clone(),
            Skel::Token(idx) => {
                let value = table.get_mut(*idx)?;
                if uses.get(*idx) == Some(&1) {
                    std::mem::take(value)
                } else {
                    value.clone()
                }
            }
            Skel::Text(parts) => Value::String(text_of(parts, table)?),
            Skel::Seq(items) => Value::Array(
                items
                    .iter()
                    .map(|item| item.fill(table, uses))
                    .collect::<Option<Vec<_>>>()?,
            ),
            Skel::Map(entries) => {
                let mut map = Map::new();
                for (key, value) in entries {
                    let key = key.key(table)?;
                    if map.contains_key(&key) {
                        return None;
                    }
                    let value = value.fill(table, uses)?;
                    map.insert(key, value);
                }
                Value::Object(map)
            }
        })
    }

    /// Counts the placeholders of the node into `uses`; whether a mapping key has one.
    fn count(&self, uses: &mut Vec<u32>) -> bool {
        let mut add = |idx: usize| {
            if uses.len() <= idx {
                uses.resize(idx + 1, 0);
            }
            uses[idx] += 1;
        };
        match self {
            Skel::Fixed { .. } => false,
            Skel::Token(idx) => {
                add(*idx);
                false
            }
            Skel::Text(parts) => {
                for part in parts {
                    if let Part::Token(idx) = part {
                        add(*idx);
                    }
                }
                false
            }
            Skel::Seq(items) => items.iter().fold(false, |any, item| item.count(uses) | any),
            Skel::Map(entries) => entries.iter().fold(false, |any, (key, value)| {
                let dynamic = !matches!(key, Skel::Fixed { .. });
                key.count(uses) | value.count(uses) | dynamic | any
            }),
        }
    }
}

impl Skeleton {
    /// Parses rendered `text`; `None` if it does not decode without error (whatever the
    /// values), or uses YAML the skeleton does not model.
    pub(super) fn parse(text: &str) -> Option<Skeleton> {
        enum Frame {
            Seq(Vec<Skel>, usize),
            Map(Vec<(Skel, Skel)>, Option<Skel>, usize),
        }
        let mut parser = Parser::new_from_str(text);
        let mut stack: Vec<Frame> = Vec::new();
        let mut anchors: HashMap<usize, Skel> = HashMap::new();
        let mut root: Option<Skel> = None;
        let mut docs = Vec::new();
        loop {
            let (event, mark) = parser.next_token().ok()?;
            let line = mark.line();
            let (node, anchor) = match event {
                Event::StreamEnd => break,
                Event::DocumentStart => {
                    root = None;
                    continue;
                }
                Event::DocumentEnd => {
                    match root.take() {
                        None
                        | Some(Skel::Fixed {
                            value: Value::Null, ..
                        }) => {}
                        Some(doc @ (Skel::Map(_) | Skel::Token(_))) => docs.push(doc),
                        // Not a mapping whatever the values: `decode` reports it.
                        Some(_) => return None,
                    }
                    continue;
                }
                Event::Scalar(value, style, anchor, tag) => {
                    let pieces = split(&value).ok()?;
                    let as_string =
                        string_tag(tag.as_ref(), line).ok()? || style != TScalarStyle::Plain;
                    let node = match pieces.as_slice() {
                        [] | [Piece::Text(_)] => Skel::Fixed {
                            value: if as_string {
                                Value::String(value.clone())
                            } else {
                                resolve_plain(&value).ok()?
                            },
                            key: value.clone(),
                        },
                        [Piece::Token(idx)] if !as_string => Skel::Token(*idx),
                        _ => Skel::Text(
                            pieces
                                .iter()
                                .map(|p| match p {
                                    Piece::Text(t) => Part::Text((*t).to_owned()),
                                    Piece::Token(idx) => Part::Token(*idx),
                                })
                                .collect(),
                        ),
                    };
                    (node, anchor)
                }
                Event::SequenceStart(anchor, tag) => {
                    collection_tag(tag.as_ref(), "seq", line).ok()?;
                    stack.push(Frame::Seq(Vec::new(), anchor));
                    continue;
                }
                Event::MappingStart(anchor, tag) => {
                    collection_tag(tag.as_ref(), "map", line).ok()?;
                    stack.push(Frame::Map(Vec::new(), None, anchor));
                    continue;
                }
                Event::SequenceEnd | Event::MappingEnd => match stack.pop()? {
                    Frame::Seq(items, anchor) => (Skel::Seq(items), anchor),
                    Frame::Map(entries, None, anchor) => (Skel::Map(entries), anchor),
                    Frame::Map(_, Some(_), _) => return None,
                },
                Event::Alias(id) => (anchors.get(&id)?.clone(), 0),
                Event::StreamStart | Event::Nothing => continue,
            };
            if anchor != 0 {
                anchors.insert(anchor, node.clone());
            }
            match stack.last_mut() {
                None => root = Some(node),
                Some(Frame::Seq(items, _)) => items.push(node),
                Some(Frame::Map(entries, key, _)) => match key.take() {
                    // Mapping keys must be scalars: `decode` reports it.
                    None if matches!(node, Skel::Seq(_) | Skel::Map(_)) => return None,
                    None => *key = Some(node),
                    Some(k) => {
                        // Two fixed keys that are the same whatever the values: `decode`
                        // reports the duplicate.
                        if let Skel::Fixed { key: new, .. } = &k
                            && entries
                                .iter()
                                .any(|(e, _)| matches!(e, Skel::Fixed { key, .. } if key == new))
                        {
                            return None;
                        }
                        entries.push((k, node));
                    }
                },
            }
        }
        let mut uses = Vec::new();
        let mut fallible = false;
        for doc in &docs {
            fallible |= doc.count(&mut uses) | matches!(doc, Skel::Token(_));
        }
        Some(Skeleton {
            docs,
            uses,
            fallible,
        })
    }

    /// Whether `table` fills the skeleton into valid documents.
    fn valid(&self, table: &[Value]) -> bool {
        self.docs.iter().all(|doc| match doc {
            Skel::Token(idx) => matches!(table.get(*idx), Some(Value::Null | Value::Object(_))),
            other => other.valid(table),
        })
    }

    /// The documents filled with `table`, as `decode` gives them for the same text and
    /// table; `Err(table)`, untouched, where the values make the text invalid (decode it for
    /// the error).
    pub(super) fn fill(&self, mut table: Vec<Value>) -> Result<Vec<Value>, Vec<Value>> {
        if self.uses.len() > table.len() || (self.fallible && !self.valid(&table)) {
            return Err(table);
        }
        let mut out = Vec::with_capacity(self.docs.len());
        for doc in &self.docs {
            // Checked above: every placeholder exists, keys are unique, documents are maps.
            if let Some(doc @ Value::Object(_)) = doc.fill(&mut table, &self.uses) {
                out.push(doc);
            }
        }
        Ok(out)
    }
}

/// Skeletons by rendered text, shared by the clones of a template set. Bounded: past
/// [`SkeletonCache::MAX_BYTES`] of text it starts over.
#[derive(Debug, Default)]
pub(super) struct SkeletonCache {
    entries: RwLock<Entries>,
}

/// Skeletons by text (`None`: the text has none), and the bytes of text held.
type Entries = (HashMap<String, Option<Arc<Skeleton>>>, usize);

impl SkeletonCache {
    const MAX_BYTES: usize = 8 << 20;

    /// The skeleton of `text`, parsed on first use; `None` for text without one.
    pub(super) fn get(&self, text: &str) -> Option<Arc<Skeleton>> {
        if let Ok(entries) = self.entries.read()
            && let Some(found) = entries.0.get(text)
        {
            return found.clone();
        }
        let skeleton = Skeleton::parse(text).map(Arc::new);
        if let Ok(mut entries) = self.entries.write() {
            if entries.1 + text.len() > Self::MAX_BYTES {
                *entries = (HashMap::new(), 0);
            }
            entries.1 += text.len();
            entries.0.insert(text.to_owned(), skeleton.clone());
        }
        skeleton
    }
}

#[cfg(test)]
mod tests {
    use super::super::decode::decode;
    use super::*;
    use serde_json::json;

    /// The skeleton gives what `decode` gives, or nothing where `decode` fails.
    fn same(text: &str, table: &[Value]) {
        let decoded = decode(text, table);
        let filled = Skeleton::parse(text).and_then(|s| s.fill(table.to_vec()).ok());
        match (&decoded, &filled) {
            (Ok(d), Some(f)) => assert_eq!(d, f, "{text:?}"),
            (Err(_), None) => {}
            (Ok(_), None) => {
                // No skeleton for this text: `decode` is used; only unusual YAML.
                assert!(
                    Skeleton::parse(text).is_none(),
                    "skeleton refused valid values: {text:?}"
                );
            }
            (Err(e), Some(f)) => panic!("{text:?}: decode failed ({e}) but skeleton gave {f:?}"),
        }
    }

    #[test]
    fn agrees_with_decode() {
        let tables: Vec<Vec<Value>> = vec![
            vec![json!("a"), json!("b"), json!({"x": 1}), json!(null)],
            vec![
                json!("same"),
                json!("same"),
                json!([1, 2]),
                json!({"k": "v"}),
            ],
            vec![json!(3), json!(true), json!("a: b\nc: d"), json!("---")],
            vec![json!({"m": 1}), json!(""), json!(null), json!("x")],
        ];
        let texts = [
            "a: __syv_0__\nb: __syv_1__\n",
            "__syv_0__: 1\n__syv_1__: 2\n",
            "k: pre-__syv_0__-__syv_1__\nq: \"__syv_2__\"\n",
            "list:\n  - __syv_2__\n  - __syv_3__\n  - x\n",
            "a: &x {b: __syv_0__}\nc: *x\nd: !!str 12\ne: ! 12\n&k key: v\nf: *k\n",
            "__syv_0__\n",
            "---\n---\na: 1\n---\n__syv_3__\n",
            "a: 1\na: 2\n",
            "? [a]\n: 1\n",
            "a: [\n",
            "a: !!int 12\n",
            "x: .nan\n",
            "- a\n",
            "a: |\n  text __syv_0__\n  more\n",
            "a: '__syv_1__'\nb: yes\nc: 0x1F\nd: ~\n",
            "__syv_0__: x\nfixed: y\n",
            "m:\n  __syv_0__: 1\n  __syv_1__: 2\n",
        ];
        for text in texts {
            for table in &tables {
                same(text, table);
            }
        }
    }

    #[test]
    fn cache_reuses_and_bounds() {
        let cache = SkeletonCache::default();
        let a = cache.get("a: __syv_0__\n");
        let b = cache.get("a: __syv_0__\n");
        assert!(a.is_some());
        assert!(matches!((&a, &b), (Some(a), Some(b)) if Arc::ptr_eq(a, b)));
        assert!(cache.get("a: [\n").is_none());
        assert_eq!(
            a.and_then(|s| s.fill(vec![json!(7)]).ok()),
            Some(vec![json!({"a": 7})])
        );
    }
}
