//! A small YAML reader for the tests, which read CRDs and rule files: block mappings and
//! sequences, flow collections on one line, plain, quoted and block (`|`, `>`) scalars,
//! comments and `---` separated documents. Anchors, tags and complex keys are not
//! supported. (The crate has no YAML dependency; the engine's own reader lives in
//! switchyard-core.)

use serde_json::{Map, Value as Json};

/// Every document of `text`.
pub fn parse_all(text: &str) -> Result<Vec<Json>, String> {
    let mut documents = Vec::new();
    let mut current = Vec::new();
    for line in text.lines() {
        if line == "---" || line.starts_with("--- ") {
            documents.push(std::mem::take(&mut current));
        } else if line != "..." {
            current.push(line.to_string());
        }
    }
    documents.push(current);
    documents
        .into_iter()
        .map(|lines| Reader { lines, pos: 0 }.document())
        .filter(|d| !matches!(d, Ok(Json::Null)))
        .collect()
}

/// The first document of `text`.
pub fn parse(text: &str) -> Result<Json, String> {
    Ok(parse_all(text)?.into_iter().next().unwrap_or(Json::Null))
}

struct Reader {
    lines: Vec<String>,
    pos: usize,
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

fn is_blank(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

/// `- x` or `-` alone.
fn is_item(content: &str) -> bool {
    content == "-" || content.starts_with("- ")
}

/// The byte offset of the `:` ending a mapping key in `content`, if it is `key: ...`.
fn key_end(content: &str) -> Option<usize> {
    if let Some(quote @ ('"' | '\'')) = content.chars().next() {
        let close = content[1..].find(quote)? + 1;
        let rest = &content[close + 1..];
        let colon = rest.trim_start();
        return (colon == ":" || colon.starts_with(": "))
            .then(|| close + 1 + (rest.len() - colon.len()));
    }
    if content.starts_with(['[', '{', '#', '|', '>']) {
        return None;
    }
    let mut from = 0;
    while let Some(i) = content[from..].find(':') {
        let at = from + i;
        let after = &content[at + 1..];
        if after.is_empty() || after.starts_with(' ') {
            return (!content[..at].contains(" #")).then_some(at);
        }
        from = at + 1;
    }
    None
}

/// `text` without a trailing ` # comment` (outside quotes).
fn strip_comment(text: &str) -> &str {
    let mut quote = None;
    let mut previous = ' ';
    for (i, c) in text.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if (c == '"' || c == '\'') && (previous == ' ' || i == 0) => quote = Some(c),
            None if c == '#' && previous == ' ' => return text[..i].trim_end(),
            None => {}
        }
        previous = c;
    }
    text.trim_end()
}

impl Reader {
    fn document(mut self) -> Result<Json, String> {
        match self.peek() {
            None => Ok(Json::Null),
            Some((indent, _)) => self.block(indent),
        }
    }

    /// The next line with content: its indentation and content.
    fn peek(&mut self) -> Option<(usize, String)> {
        while let Some(line) = self.lines.get(self.pos) {
            if is_blank(line) {
                self.pos += 1;
                continue;
            }
            return Some((indent_of(line), line.trim_start_matches(' ').to_string()));
        }
        None
    }

    fn error(&self, what: &str) -> String {
        format!("line {}: {what}", self.pos + 1)
    }

    fn block(&mut self, indent: usize) -> Result<Json, String> {
        match self.peek() {
            Some((_, content)) if is_item(&content) => self.sequence(indent),
            Some(_) => self.mapping(indent),
            None => Ok(Json::Null),
        }
    }

    fn mapping(&mut self, indent: usize) -> Result<Json, String> {
        let mut map = Map::new();
        while let Some((at, content)) = self.peek() {
            if at < indent || (at == indent && is_item(&content)) {
                break;
            }
            if at > indent {
                return Err(self.error("unexpected indentation"));
            }
            let end = key_end(&content).ok_or_else(|| self.error("expected `key: value`"))?;
            let key = scalar(content[..end].trim(), true);
            let key = match key {
                Json::String(s) => s,
                other => other.to_string(),
            };
            let rest = content[end + 1..].trim().to_string();
            self.pos += 1;
            let value = self.value(&rest, indent, true)?;
            map.insert(key, value);
        }
        Ok(Json::Object(map))
    }

    fn sequence(&mut self, indent: usize) -> Result<Json, String> {
        let mut items = Vec::new();
        while let Some((at, content)) = self.peek() {
            if at != indent || !is_item(&content) {
                if at > indent {
                    return Err(self.error("unexpected indentation"));
                }
                break;
            }
            let rest = content[1..].trim_start();
            if rest.is_empty() || rest.starts_with('#') {
                self.pos += 1;
                items.push(self.value("", indent, false)?);
            } else if is_item(rest) || key_end(rest).is_some() {
                // `- key: value` or `- - x`: the item is a block starting at `rest`.
                let inner = indent + (content.len() - rest.len());
                self.lines[self.pos] = format!("{}{rest}", " ".repeat(inner));
                items.push(self.block(inner)?);
            } else {
                let rest = rest.to_string();
                self.pos += 1;
                items.push(self.value(&rest, indent, false)?);
            }
        }
        Ok(Json::Array(items))
    }

    /// The value after `key:` or `- ` (`rest`, the line's remainder), in a collection at
    /// `indent`. A mapping's value may be a sequence at the key's own indentation.
    fn value(&mut self, rest: &str, indent: usize, in_mapping: bool) -> Result<Json, String> {
        let rest = strip_comment(rest);
        if rest.is_empty() {
            return match self.peek() {
                Some((at, _)) if at > indent => self.block(at),
                Some((at, content)) if in_mapping && at == indent && is_item(&content) => {
                    self.sequence(indent)
                }
                _ => Ok(Json::Null),
            };
        }
        if rest.starts_with('|') || rest.starts_with('>') {
            return Ok(Json::String(self.block_scalar(rest, indent)));
        }
        if rest.starts_with('[') || rest.starts_with('{') {
            let mut flow = Flow {
                chars: rest.chars().collect(),
                pos: 0,
            };
            let value = flow.value()?;
            return Ok(value);
        }
        if rest.starts_with('"') || rest.starts_with('\'') {
            // A quoted scalar may go on over lines: a line break is a space, a blank line
            // a line break.
            let mut text = rest.to_string();
            while unquote(&text).is_err() {
                let Some(line) = self.lines.get(self.pos) else {
                    break;
                };
                let line = line.trim();
                if line.is_empty() {
                    text.push('\n');
                } else {
                    if !text.ends_with('\n') {
                        text.push(' ');
                    }
                    text.push_str(line);
                }
                self.pos += 1;
            }
            return Ok(Json::String(unquote(&text)?));
        }
        // A plain scalar, continued on more indented lines.
        let mut text = rest.to_string();
        while let Some((at, content)) = self.peek() {
            if at <= indent {
                break;
            }
            text.push(' ');
            text.push_str(strip_comment(&content));
            self.pos += 1;
        }
        Ok(scalar(&text, false))
    }

    fn block_scalar(&mut self, header: &str, indent: usize) -> String {
        let folded = header.starts_with('>');
        let strip = header.contains('-');
        let mut lines: Vec<String> = Vec::new();
        let mut block_indent = None;
        while let Some(line) = self.lines.get(self.pos) {
            if line.trim().is_empty() {
                lines.push(String::new());
                self.pos += 1;
                continue;
            }
            let at = indent_of(line);
            let expected = *block_indent.get_or_insert(at);
            if at <= indent || at < expected {
                break;
            }
            lines.push(line[expected..].to_string());
            self.pos += 1;
        }
        // Trailing blank lines belong to what follows (or are chomped).
        while lines.last().is_some_and(String::is_empty) {
            lines.pop();
        }
        let mut out = String::new();
        if folded {
            #[derive(PartialEq)]
            enum Kind {
                Normal,
                More,
                Empty,
            }
            let mut previous: Option<Kind> = None;
            for line in &lines {
                if line.is_empty() {
                    out.push('\n');
                    previous = Some(Kind::Empty);
                    continue;
                }
                let more = line.starts_with([' ', '\t']);
                match previous {
                    Some(Kind::Normal) if !more => out.push(' '),
                    Some(Kind::Normal | Kind::More) => out.push('\n'),
                    _ => {}
                }
                out.push_str(line);
                previous = Some(if more { Kind::More } else { Kind::Normal });
            }
        } else {
            out = lines.join("\n");
        }
        if !strip && !out.is_empty() {
            out.push('\n');
        }
        out
    }
}

/// A quoted scalar (the whole of `text`, a comment after it aside).
fn unquote(text: &str) -> Result<String, String> {
    let mut chars = text.chars();
    let quote = chars.next().ok_or("empty scalar")?;
    let mut out = String::new();
    while let Some(c) = chars.next() {
        match (quote, c) {
            ('\'', '\'') => {
                if chars.clone().next() == Some('\'') {
                    chars.next();
                    out.push('\'');
                } else {
                    return Ok(out);
                }
            }
            ('"', '"') => return Ok(out),
            ('"', '\\') => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('u') => {
                    let hex: String = chars.by_ref().take(4).collect();
                    let code = u32::from_str_radix(&hex, 16).map_err(|e| e.to_string())?;
                    out.push(char::from_u32(code).ok_or("bad \\u escape")?);
                }
                Some(other) => out.push(other),
                None => return Err("unterminated escape".into()),
            },
            (_, c) => out.push(c),
        }
    }
    Err(format!("unterminated string: {text}"))
}

/// A plain scalar: `null`, a bool, a number or a string.
fn scalar(text: &str, key: bool) -> Json {
    let text = text.trim();
    if key && (text.starts_with('"') || text.starts_with('\'')) {
        return Json::String(unquote(text).unwrap_or_else(|_| text.to_string()));
    }
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Json::Null,
        "true" | "True" | "TRUE" => return Json::Bool(true),
        "false" | "False" | "FALSE" => return Json::Bool(false),
        _ => {}
    }
    if let Ok(i) = text.parse::<i64>() {
        return Json::from(i);
    }
    if text.contains(['.', 'e', 'E'])
        && text.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '+' || c == '.')
        && let Ok(f) = text.parse::<f64>()
        && let Some(n) = serde_json::Number::from_f64(f)
    {
        return Json::Number(n);
    }
    Json::String(text.to_string())
}

/// A flow collection: `[a, 'b', {c: d}]`.
struct Flow {
    chars: Vec<char>,
    pos: usize,
}

impl Flow {
    fn skip(&mut self) {
        while self.chars.get(self.pos).is_some_and(|c| c.is_whitespace()) {
            self.pos += 1;
        }
    }

    fn value(&mut self) -> Result<Json, String> {
        self.skip();
        match self.chars.get(self.pos) {
            Some('[') => {
                self.pos += 1;
                let mut items = Vec::new();
                loop {
                    self.skip();
                    if self.chars.get(self.pos) == Some(&']') {
                        self.pos += 1;
                        return Ok(Json::Array(items));
                    }
                    items.push(self.value()?);
                    self.skip();
                    if self.chars.get(self.pos) == Some(&',') {
                        self.pos += 1;
                    }
                }
            }
            Some('{') => {
                self.pos += 1;
                let mut map = Map::new();
                loop {
                    self.skip();
                    if self.chars.get(self.pos) == Some(&'}') {
                        self.pos += 1;
                        return Ok(Json::Object(map));
                    }
                    let key = match self.value()? {
                        Json::String(s) => s,
                        other => other.to_string(),
                    };
                    self.skip();
                    if self.chars.get(self.pos) != Some(&':') {
                        return Err("expected `:` in a flow mapping".into());
                    }
                    self.pos += 1;
                    let value = self.value()?;
                    map.insert(key, value);
                    self.skip();
                    if self.chars.get(self.pos) == Some(&',') {
                        self.pos += 1;
                    }
                }
            }
            Some(&quote @ ('"' | '\'')) => {
                let start = self.pos;
                self.pos += 1;
                while let Some(&c) = self.chars.get(self.pos) {
                    self.pos += 1;
                    if c == '\\' && quote == '"' {
                        self.pos += 1;
                    } else if c == quote {
                        if quote == '\'' && self.chars.get(self.pos) == Some(&'\'') {
                            self.pos += 1;
                            continue;
                        }
                        break;
                    }
                }
                let text: String = self.chars[start..self.pos.min(self.chars.len())]
                    .iter()
                    .collect();
                Ok(Json::String(unquote(&text)?))
            }
            Some(_) => {
                let start = self.pos;
                while self
                    .chars
                    .get(self.pos)
                    .is_some_and(|c| !matches!(c, ',' | ']' | '}' | ':'))
                {
                    self.pos += 1;
                }
                let text: String = self.chars[start..self.pos].iter().collect();
                Ok(scalar(&text, false))
            }
            None => Err("unexpected end of a flow collection".into()),
        }
    }
}

#[test]
fn reads_the_yaml_the_tests_need() {
    let text = r#"
# a comment
a: 1
b: "two"  # trailing
c: 'it''s'
d:
  - x
  - y: 1
    z: [p, 'q', 2]
  - - nested
e: >-
  folded
  text

  para
f: |-
  keep
    this
g:
- same-indent item
h: {}
i: plain text
  continued
j: ^a#b$
k: ~
l: 'multi
  line

  quoted'
"#;
    let v = parse(text).unwrap();
    assert_eq!(
        v,
        serde_json::json!({
            "a": 1, "b": "two", "c": "it's",
            "d": ["x", {"y": 1, "z": ["p", "q", 2]}, ["nested"]],
            "e": "folded text\npara",
            "f": "keep\n  this",
            "g": ["same-indent item"],
            "h": {},
            "i": "plain text continued",
            "j": "^a#b$",
            "k": null,
            "l": "multi line\nquoted"
        })
    );
    let docs = parse_all("a: 1\n---\nb: 2\n").unwrap();
    assert_eq!(docs.len(), 2);
}
