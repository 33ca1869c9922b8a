//! Parses rendered template output as YAML and substitutes the placeholder tokens.
//!
//! The text parsed here is made only of template source and ASCII tokens (`__syv_<N>__`), so
//! its YAML structure is fixed by the template author. Tenant values live in the placeholder
//! table and are put into the *parsed* tree, where they can only ever be a single node.

use std::collections::HashMap;

use serde_json::{Map, Number, Value};
use yaml_rust2::parser::{Event, Parser, Tag};
use yaml_rust2::scanner::TScalarStyle;

use super::helpers::{TOKEN_PREFIX, kind, to_text};

/// A piece of a scalar's text: literal template text or a placeholder.
#[derive(Debug, PartialEq)]
pub(super) enum Piece<'a> {
    Text(&'a str),
    Token(usize),
}

/// Splits `s` into text and `__syv_<N>__` tokens.
pub(super) fn split(s: &str) -> Result<Vec<Piece<'_>>, String> {
    let mut pieces = Vec::new();
    let mut text_start = 0;
    let mut pos = 0;
    while let Some(rel) = s[pos..].find(TOKEN_PREFIX) {
        let at = pos + rel;
        let digits_start = at + TOKEN_PREFIX.len();
        let digits = s[digits_start..]
            .bytes()
            .take_while(u8::is_ascii_digit)
            .count();
        let end = digits_start + digits;
        if digits > 0 && s[end..].starts_with("__") {
            if at > text_start {
                pieces.push(Piece::Text(&s[text_start..at]));
            }
            let idx = s[digits_start..end]
                .parse::<usize>()
                .map_err(|_| "internal error: malformed value placeholder".to_owned())?;
            pieces.push(Piece::Token(idx));
            pos = end + 2;
            text_start = pos;
        } else {
            // `TOKEN_PREFIX` is ASCII, so `at + 1` is a char boundary.
            pos = at + 1;
        }
    }
    if text_start < s.len() {
        pieces.push(Piece::Text(&s[text_start..]));
    }
    Ok(pieces)
}

fn lookup(table: &[Value], idx: usize) -> Result<&Value, String> {
    table
        .get(idx)
        .ok_or_else(|| format!("internal error: unknown value placeholder {idx}"))
}

/// The scalar's text with every token replaced by its value's text (see [`to_text`]).
fn concat(pieces: &[Piece<'_>], table: &[Value]) -> Result<String, String> {
    let mut out = String::new();
    for piece in pieces {
        match piece {
            Piece::Text(t) => out.push_str(t),
            Piece::Token(idx) => out.push_str(&to_text(lookup(table, *idx)?)),
        }
    }
    Ok(out)
}

const CORE_TAG_PREFIX: &str = "tag:yaml.org,2002:";

/// Whether a scalar's tag forces a string (`!!str`, or the non-specific `!`). Other tags are
/// refused: Kubernetes objects have no use for them.
pub(super) fn string_tag(tag: Option<&Tag>, line: usize) -> Result<bool, String> {
    match tag {
        None => Ok(false),
        Some(t) if t.handle == CORE_TAG_PREFIX && t.suffix == "str" => Ok(true),
        Some(t) if t.handle.is_empty() && t.suffix == "!" => Ok(true),
        Some(t) => Err(format!(
            "unsupported YAML tag `{}{}` (rendered line {line})",
            t.handle, t.suffix
        )),
    }
}

pub(super) fn collection_tag(tag: Option<&Tag>, expected: &str, line: usize) -> Result<(), String> {
    match tag {
        None => Ok(()),
        Some(t) if t.handle == CORE_TAG_PREFIX && t.suffix == expected => Ok(()),
        Some(t) => Err(format!(
            "unsupported YAML tag `{}{}` (rendered line {line})",
            t.handle, t.suffix
        )),
    }
}

/// `[-+]?[0-9]+`
fn is_decimal_int(s: &str) -> bool {
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`
fn is_float(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let mantissa_ok = match mantissa.split_once('.') {
        Some((int, frac)) => {
            int.bytes().all(|b| b.is_ascii_digit())
                && frac.bytes().all(|b| b.is_ascii_digit())
                && (!int.is_empty() || !frac.is_empty())
        }
        None => !mantissa.is_empty() && mantissa.bytes().all(|b| b.is_ascii_digit()),
    };
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit())
    });
    mantissa_ok && exponent_ok
}

fn float(f: f64, text: &str) -> Result<Value, String> {
    Number::from_f64(f)
        .map(Value::Number)
        .ok_or_else(|| format!("number `{text}` cannot be represented in JSON"))
}

/// Resolves a plain scalar written in the template (no placeholders) with the YAML 1.2 core
/// schema: null, booleans, integers (decimal, `0o` octal, `0x` hex), floats, else a string.
pub(super) fn resolve_plain(text: &str) -> Result<Value, String> {
    Ok(match text {
        "" | "~" | "null" | "Null" | "NULL" => Value::Null,
        "true" | "True" | "TRUE" => Value::Bool(true),
        "false" | "False" | "FALSE" => Value::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" | "-.inf" | "-.Inf" | "-.INF"
        | ".nan" | ".NaN" | ".NAN" => {
            return Err(format!("number `{text}` cannot be represented in JSON"));
        }
        _ if is_decimal_int(text) => {
            if let Ok(i) = text.parse::<i64>() {
                Value::from(i)
            } else if let Ok(u) = text.parse::<u64>() {
                Value::from(u)
            } else {
                float(text.parse::<f64>().map_err(|e| e.to_string())?, text)?
            }
        }
        _ if text.len() > 2
            && text.starts_with("0o")
            && text[2..].bytes().all(|b| (b'0'..=b'7').contains(&b)) =>
        {
            radix(&text[2..], 8, text)?
        }
        _ if text.len() > 2
            && text.starts_with("0x")
            && text[2..].bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            radix(&text[2..], 16, text)?
        }
        _ if is_float(text) => float(text.parse::<f64>().map_err(|e| e.to_string())?, text)?,
        _ => Value::String(text.to_owned()),
    })
}

fn radix(digits: &str, radix: u32, text: &str) -> Result<Value, String> {
    u64::from_str_radix(digits, radix)
        .map(Value::from)
        .map_err(|_| format!("number `{text}` is too large"))
}

/// A finished YAML node: its value and, for scalars, its text as a mapping key.
struct Node {
    value: Value,
    key: Option<String>,
}

enum Frame {
    Seq {
        items: Vec<Value>,
        anchor: usize,
        line: usize,
    },
    Map {
        map: Map<String, Value>,
        anchor: usize,
        line: usize,
        key: Option<String>,
    },
}

struct Builder<'t> {
    table: &'t [Value],
    stack: Vec<Frame>,
    anchors: HashMap<usize, (Value, Option<String>)>,
    root: Option<(Value, usize)>,
}

impl Builder<'_> {
    fn scalar(
        &self,
        text: &str,
        style: TScalarStyle,
        tag: Option<&Tag>,
        line: usize,
    ) -> Result<Node, String> {
        let pieces = split(text)?;
        let as_string = string_tag(tag, line)? || style != TScalarStyle::Plain;
        let key = concat(&pieces, self.table)?;
        let value = match pieces.as_slice() {
            _ if as_string => Value::String(key.clone()),
            // A plain scalar that is exactly one placeholder is the typed value itself.
            [Piece::Token(idx)] => lookup(self.table, *idx)?.clone(),
            // Plain text written by the template author: YAML 1.2 core schema.
            [] | [Piece::Text(_)] => resolve_plain(text)?,
            // Text mixed with placeholders is always a string.
            _ => Value::String(key.clone()),
        };
        Ok(Node {
            value,
            key: Some(key),
        })
    }

    /// Attaches a finished node to its parent (or makes it the document root).
    fn complete(&mut self, node: Node, anchor: usize, line: usize) -> Result<(), String> {
        if anchor != 0 {
            self.anchors
                .insert(anchor, (node.value.clone(), node.key.clone()));
        }
        match self.stack.last_mut() {
            None => self.root = Some((node.value, line)),
            Some(Frame::Seq { items, .. }) => items.push(node.value),
            Some(Frame::Map { map, key, .. }) => match key.take() {
                None => {
                    let text = node.key.ok_or_else(|| {
                        format!(
                            "mapping keys must be scalars, got {} (rendered line {line})",
                            kind(&node.value)
                        )
                    })?;
                    *key = Some(text);
                }
                Some(k) => {
                    if map.contains_key(&k) {
                        return Err(format!(
                            "duplicate mapping key {k:?} (rendered line {line})"
                        ));
                    }
                    map.insert(k, node.value);
                }
            },
        }
        Ok(())
    }
}

/// Parses the rendered `text` as a YAML stream and returns its documents with placeholders
/// substituted from `table`. Empty (null) documents are dropped; every other document must be
/// a mapping.
pub(super) fn decode(text: &str, table: &[Value]) -> Result<Vec<Value>, String> {
    let mut parser = Parser::new_from_str(text);
    let mut b = Builder {
        table,
        stack: Vec::new(),
        anchors: HashMap::new(),
        root: None,
    };
    let mut docs = Vec::new();
    let mut doc_no = 0;
    loop {
        let (event, mark) = parser.next_token().map_err(|e| {
            format!(
                "rendered output is not valid YAML: {} (rendered line {}{})",
                e.info(),
                e.marker().line(),
                rendered_line(text, e.marker().line())
            )
        })?;
        let line = mark.line();
        match event {
            Event::StreamEnd => break,
            Event::DocumentStart => b.root = None,
            Event::DocumentEnd => {
                doc_no += 1;
                match b.root.take() {
                    None | Some((Value::Null, _)) => {}
                    Some((doc @ Value::Object(_), _)) => docs.push(doc),
                    Some((other, line)) => {
                        return Err(format!(
                            "rendered document {doc_no} is {}, expected a mapping (rendered line {line})",
                            kind(&other)
                        ));
                    }
                }
            }
            Event::Scalar(value, style, anchor, tag) => {
                let node = b.scalar(&value, style, tag.as_ref(), line)?;
                b.complete(node, anchor, line)?;
            }
            Event::SequenceStart(anchor, tag) => {
                collection_tag(tag.as_ref(), "seq", line)?;
                b.stack.push(Frame::Seq {
                    items: Vec::new(),
                    anchor,
                    line,
                });
            }
            Event::MappingStart(anchor, tag) => {
                collection_tag(tag.as_ref(), "map", line)?;
                b.stack.push(Frame::Map {
                    map: Map::new(),
                    anchor,
                    line,
                    key: None,
                });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (value, anchor, line) = match b.stack.pop() {
                    Some(Frame::Seq {
                        items,
                        anchor,
                        line,
                    }) => (Value::Array(items), anchor, line),
                    Some(Frame::Map {
                        map, anchor, line, ..
                    }) => (Value::Object(map), anchor, line),
                    None => {
                        return Err("internal error: unbalanced YAML events".to_owned());
                    }
                };
                b.complete(Node { value, key: None }, anchor, line)?;
            }
            Event::Alias(id) => {
                let (value, key) = b
                    .anchors
                    .get(&id)
                    .cloned()
                    .ok_or_else(|| format!("unknown YAML alias (rendered line {line})"))?;
                b.complete(Node { value, key }, 0, line)?;
            }
            Event::StreamStart | Event::Nothing => {}
        }
    }
    Ok(docs)
}

/// `: "<line text>"` for error messages (the rendered text holds placeholders, never values).
fn rendered_line(text: &str, line: usize) -> String {
    match text.lines().nth(line.saturating_sub(1)) {
        Some(l) if !l.trim().is_empty() => {
            let short: String = l.chars().take(120).collect();
            format!(": {short:?}")
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn split_tokens() {
        assert_eq!(
            split("a___syv_1____syv_22__b__syv___syv_x__").unwrap(),
            vec![
                Piece::Text("a_"),
                Piece::Token(1),
                Piece::Token(22),
                Piece::Text("b__syv___syv_x__"),
            ]
        );
        assert_eq!(split("").unwrap(), vec![]);
    }

    #[test]
    fn core_schema() {
        for (text, want) in [
            ("", json!(null)),
            ("~", json!(null)),
            ("NULL", json!(null)),
            ("True", json!(true)),
            ("false", json!(false)),
            ("yes", json!("yes")),
            ("on", json!("on")),
            ("12", json!(12)),
            ("-12", json!(-12)),
            ("+12", json!(12)),
            ("0o17", json!(15)),
            ("0x1F", json!(31)),
            ("1.5", json!(1.5)),
            (".5", json!(0.5)),
            ("1e3", json!(1000.0)),
            (
                "18446744073709551615",
                json!(18_446_744_073_709_551_615_u64),
            ),
            ("1.2.3", json!("1.2.3")),
            ("0x", json!("0x")),
            ("e3", json!("e3")),
            (".", json!(".")),
            ("500m", json!("500m")),
        ] {
            assert_eq!(resolve_plain(text).unwrap(), want, "{text:?}");
        }
        assert!(resolve_plain(".nan").is_err());
    }

    #[test]
    fn anchors_aliases_and_tags() {
        let docs = decode(
            "a: &x {b: 1}\nc: *x\nd: !!str 12\ne: ! 12\n&k key: v\nf: *k\n",
            &[],
        )
        .unwrap();
        assert_eq!(
            docs,
            vec![
                json!({"a": {"b": 1}, "c": {"b": 1}, "d": "12", "e": "12", "key": "v", "f": "key"})
            ]
        );
        assert!(decode("a: !!int 12\n", &[]).is_err());
        assert!(decode("a: !custom x\n", &[]).is_err());
    }

    #[test]
    fn structural_errors() {
        assert!(
            decode("a: 1\na: 2\n", &[])
                .unwrap_err()
                .contains("duplicate")
        );
        assert!(
            decode("? [a]\n: 1\n", &[])
                .unwrap_err()
                .contains("mapping keys must be scalars")
        );
        assert!(
            decode("a: [\n", &[])
                .unwrap_err()
                .starts_with("rendered output is not valid YAML")
        );
    }
}
