//! A small reader of text-format protobuf, for the CEL conformance suite's files: shared by
//! the conformance runner (`tests/conformance.rs`) and the type checker's tests (included
//! with `#[path]`).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// A text-format protobuf message: its fields in order, repeated fields repeated.
#[derive(Debug, Default)]
pub struct Message {
    pub fields: Vec<(String, Field)>,
}

#[derive(Debug)]
pub enum Field {
    Scalar(Scalar),
    Message(Message),
}

/// A scalar as written: a string literal (already unescaped, adjacent literals joined) or a
/// bare token (number, enum name, `true`).
#[derive(Debug)]
pub enum Scalar {
    Str(Vec<u8>),
    Token(String),
}

impl Scalar {
    pub fn text(&self) -> String {
        match self {
            Scalar::Str(b) => String::from_utf8_lossy(b).into(),
            Scalar::Token(t) => t.clone(),
        }
    }

    pub fn bytes(&self) -> Vec<u8> {
        match self {
            Scalar::Str(b) => b.clone(),
            Scalar::Token(t) => t.as_bytes().to_vec(),
        }
    }
}

impl Message {
    pub fn get(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, f)| f)
    }

    pub fn message(&self, name: &str) -> Option<&Message> {
        match self.get(name) {
            Some(Field::Message(m)) => Some(m),
            _ => None,
        }
    }

    pub fn messages<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Message> + 'a {
        self.fields.iter().filter_map(move |(n, f)| match f {
            Field::Message(m) if n == name => Some(m),
            _ => None,
        })
    }

    pub fn string(&self, name: &str) -> Option<String> {
        match self.get(name) {
            Some(Field::Scalar(s)) => Some(s.text()),
            _ => None,
        }
    }

    pub fn bool(&self, name: &str) -> bool {
        self.string(name).is_some_and(|s| s == "true" || s == "1")
    }

    /// Whether a field of that name (or an `Any` type URL naming it) occurs at any depth.
    pub fn contains_field_deep(&self, name: &str) -> bool {
        self.fields.iter().any(|(n, f)| {
            n == name
                || match f {
                    Field::Message(m) => m.contains_field_deep(name),
                    Field::Scalar(_) => false,
                }
        })
    }
}

pub fn parse_textproto(text: &str) -> Result<Message, String> {
    let mut lexer = Lexer {
        chars: text.chars().collect(),
        pos: 0,
    };
    let message = parse_fields(&mut lexer, None)?;
    Ok(message)
}

struct Lexer {
    chars: Vec<char>,
    pos: usize,
}

impl Lexer {
    fn skip_space(&mut self) {
        while let Some(&c) = self.chars.get(self.pos) {
            if c == '#' {
                while self.chars.get(self.pos).is_some_and(|&c| c != '\n') {
                    self.pos += 1;
                }
            } else if c.is_whitespace() {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_space();
        self.chars.get(self.pos).copied()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn error(&self, what: &str) -> String {
        let line = self.chars[..self.pos.min(self.chars.len())]
            .iter()
            .filter(|&&c| c == '\n')
            .count()
            + 1;
        format!("line {line}: {what}")
    }

    /// A field name: an identifier, or `[type.googleapis.com/a.B]`.
    fn name(&mut self) -> Result<String, String> {
        let start = self.pos;
        if self.eat('[') {
            while self.chars.get(self.pos).is_some_and(|&c| c != ']') {
                self.pos += 1;
            }
            self.pos += 1;
            return Ok(self.chars[start..self.pos].iter().collect());
        }
        while self
            .chars
            .get(self.pos)
            .is_some_and(|&c| c.is_alphanumeric() || c == '_')
        {
            self.pos += 1;
        }
        if self.pos == start {
            return Err(self.error("expected a field name"));
        }
        Ok(self.chars[start..self.pos].iter().collect())
    }

    /// A bare token: a number, `-inf`, an enum name, `true`.
    fn token(&mut self) -> Result<String, String> {
        self.skip_space();
        let start = self.pos;
        while self
            .chars
            .get(self.pos)
            .is_some_and(|&c| c.is_alphanumeric() || matches!(c, '_' | '-' | '+' | '.'))
        {
            self.pos += 1;
        }
        if self.pos == start {
            return Err(self.error("expected a value"));
        }
        Ok(self.chars[start..self.pos].iter().collect())
    }

    /// One or more adjacent string literals, unescaped, joined.
    fn strings(&mut self) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        while let Some(quote @ ('"' | '\'')) = self.peek() {
            self.pos += 1;
            loop {
                let Some(&c) = self.chars.get(self.pos) else {
                    return Err(self.error("unterminated string"));
                };
                self.pos += 1;
                if c == quote {
                    break;
                }
                if c != '\\' {
                    let mut buf = [0; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                    continue;
                }
                self.escape(&mut out)?;
            }
        }
        Ok(out)
    }

    fn escape(&mut self, out: &mut Vec<u8>) -> Result<(), String> {
        let Some(&c) = self.chars.get(self.pos) else {
            return Err(self.error("unterminated escape"));
        };
        self.pos += 1;
        let simple = match c {
            'a' => Some(0x07),
            'b' => Some(0x08),
            'f' => Some(0x0c),
            'n' => Some(b'\n'),
            'r' => Some(b'\r'),
            't' => Some(b'\t'),
            'v' => Some(0x0b),
            '\\' => Some(b'\\'),
            '\'' => Some(b'\''),
            '"' => Some(b'"'),
            '?' => Some(b'?'),
            _ => None,
        };
        if let Some(b) = simple {
            out.push(b);
            return Ok(());
        }
        let digits = |lexer: &mut Lexer, radix: u32, max: usize| {
            let start = lexer.pos;
            while lexer.pos - start < max
                && lexer
                    .chars
                    .get(lexer.pos)
                    .is_some_and(|c| c.is_digit(radix))
            {
                lexer.pos += 1;
            }
            let text: String = lexer.chars[start..lexer.pos].iter().collect();
            u32::from_str_radix(&text, radix).map_err(|e| lexer.error(&format!("escape: {e}")))
        };
        match c {
            '0'..='7' => {
                self.pos -= 1;
                let n = digits(self, 8, 3)?;
                out.push(u8::try_from(n).map_err(|_| self.error("octal escape"))?);
            }
            'x' | 'X' => {
                let n = digits(self, 16, 2)?;
                out.push(u8::try_from(n).map_err(|_| self.error("hex escape"))?);
            }
            'u' | 'U' => {
                let n = digits(self, 16, if c == 'u' { 4 } else { 8 })?;
                let ch = char::from_u32(n).ok_or_else(|| self.error("unicode escape"))?;
                let mut buf = [0; 4];
                out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
            }
            other => return Err(self.error(&format!("unknown escape \\{other}"))),
        }
        Ok(())
    }
}

/// The fields of a message, up to `close` (or the end of input at the top level).
fn parse_fields(lexer: &mut Lexer, close: Option<char>) -> Result<Message, String> {
    let mut message = Message::default();
    loop {
        match (lexer.peek(), close) {
            (None, None) => return Ok(message),
            (None, Some(_)) => return Err(lexer.error("unexpected end of input")),
            (Some(c), Some(close)) if c == close => {
                lexer.pos += 1;
                return Ok(message);
            }
            _ => {}
        }
        let name = lexer.name()?;
        lexer.eat(':');
        if lexer.eat('[') {
            // a list of values: each is a repeated field
            while !lexer.eat(']') {
                let value = parse_value(lexer)?;
                message.fields.push((name.clone(), value));
                lexer.eat(',');
            }
        } else {
            let value = parse_value(lexer)?;
            message.fields.push((name, value));
        }
        if !lexer.eat(',') {
            lexer.eat(';');
        }
    }
}

fn parse_value(lexer: &mut Lexer) -> Result<Field, String> {
    match lexer.peek() {
        Some('{') => {
            lexer.pos += 1;
            Ok(Field::Message(parse_fields(lexer, Some('}'))?))
        }
        Some('<') => {
            lexer.pos += 1;
            Ok(Field::Message(parse_fields(lexer, Some('>'))?))
        }
        Some('"' | '\'') => Ok(Field::Scalar(Scalar::Str(lexer.strings()?))),
        _ => Ok(Field::Scalar(Scalar::Token(lexer.token()?))),
    }
}

/// The suite's `*.textproto` files in `dir`, in name order; `None` when the folder cannot be
/// read (the suite is not beside the workspace).
pub fn suite_files(dir: &Path) -> Option<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "textproto"))
        .collect();
    files.sort();
    Some(files)
}
