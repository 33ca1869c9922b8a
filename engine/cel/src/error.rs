use thiserror::Error;

/// An expression that does not compile. Positions are 1-based and count characters (not
/// bytes) of the expression source, so callers can map them into the file the expression
/// came from.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{message}")]
pub struct CompileError {
    pub message: String,
    /// 1-based line within the expression.
    pub line: usize,
    /// 1-based column (in characters) within that line.
    pub column: usize,
}

impl CompileError {
    pub(crate) fn new(message: impl Into<String>, line: usize, column: usize) -> Self {
        CompileError {
            message: message.into(),
            line: line.max(1),
            column: column.max(1),
        }
    }

    /// The offending line of `source` with a caret under the error position. Tabs before
    /// the position are kept in the caret line so that it stays aligned.
    pub fn caret(&self, source: &str) -> String {
        let text = source
            .split('\n')
            .nth(self.line.saturating_sub(1))
            .unwrap_or("")
            .trim_end_matches('\r');
        let pad: String = text
            .chars()
            .chain(std::iter::repeat(' '))
            .take(self.column.saturating_sub(1))
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        format!("{text}\n{pad}^")
    }
}

/// An evaluation that failed: a missing field, a type without the called overload, an
/// error from a function, a cost limit passed.
///
/// `message` never includes the position; `line` and `column` (1-based, in characters,
/// within the expression) point at the expression node that failed, when known.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{message}")]
pub struct EvalError {
    pub message: String,
    /// 1-based line within the expression of the node that failed.
    pub line: Option<usize>,
    /// 1-based column (in characters) within that line.
    pub column: Option<usize>,
}

impl EvalError {
    /// An error without a position.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            line: None,
            column: None,
        }
    }
}

pub(crate) fn lowercase_first(message: &str) -> String {
    let mut chars = message.chars();
    match chars.next() {
        // Keep acronyms and names (`JSON`, `NaN`) as they are.
        Some(first) if first.is_uppercase() && !chars.next().is_some_and(char::is_uppercase) => {
            first
                .to_lowercase()
                .chain(message.chars().skip(1))
                .collect()
        }
        _ => message.to_string(),
    }
}

/// The messages of the `cel` parser that position themselves through the AST, in bytes
/// rather than characters (macro expansion errors).
fn positioned_in_bytes(message: &str) -> bool {
    message == "argument must be a simple name"
        || message == "invalid argument to has() macro"
        || message.starts_with("macro '")
        || message.starts_with("sortBy ")
        || message.starts_with("math.")
}

/// Messages of the `cel` parser about its own state rather than the expression: reported
/// along with a real syntax error, which is preferred.
fn is_internal(message: &str) -> bool {
    message.starts_with("Incomplete `") || message.starts_with("No `") || message == "UNKNOWN"
}

/// Converts the parser's errors into one [`CompileError`]: the first real error in source
/// order, its message reworded, its position in characters.
pub(crate) fn compile_error(source: &str, errors: &cel::ParseErrors) -> CompileError {
    let primary = errors
        .errors
        .iter()
        .find(|e| !is_internal(&e.msg))
        .or_else(|| errors.errors.first());
    let Some(error) = primary else {
        return CompileError::new("syntax error", 1, 1);
    };
    let mut msg = error.msg.clone();
    if msg == "UNKNOWN"
        && let Some(inner) = &error.source
    {
        msg = inner.to_string();
    }
    let (line, column) = if msg.contains("Recursion limit of") {
        (1, 1)
    } else {
        let line = usize::try_from(error.pos.0).unwrap_or(1).max(1);
        let column = usize::try_from(error.pos.1).unwrap_or(1).max(1);
        let column = if positioned_in_bytes(&msg) {
            byte_column_to_chars(source, line, column)
        } else {
            column
        };
        if msg == "unsupported syntax: '`'" {
            // The parser places a quoted field name at its `.`, cel-go at the backquote.
            let text = source.split('\n').nth(line - 1).unwrap_or("");
            let after = text.chars().skip(column - 1).position(|c| c == '`');
            (line, after.map_or(column, |n| column + n))
        } else {
            (line, column)
        }
    };
    CompileError::new(reword(&msg, source, line, column), line, column)
}

/// Converts a 1-based column counted in bytes of `line` into one counted in characters.
fn byte_column_to_chars(source: &str, line: usize, column: usize) -> usize {
    let text = source.split('\n').nth(line - 1).unwrap_or("");
    match text.get(..column - 1) {
        Some(prefix) => prefix.chars().count() + 1,
        None => column,
    }
}

/// A 1-based (line, column in characters) position from a byte offset into `source`.
pub(crate) fn position_of_byte(source: &str, offset: usize) -> (usize, usize) {
    let mut line = 1;
    let mut line_start = 0;
    for (i, c) in source.char_indices() {
        if i >= offset {
            break;
        }
        if c == '\n' {
            line += 1;
            line_start = i + 1;
        }
    }
    let end = offset.min(source.len());
    let column = source
        .get(line_start..end)
        .map_or(1, |prefix| prefix.chars().count() + 1);
    (line, column)
}

/// Rewords a parser message: lowercase, no ANTLR jargon, no token sets of a dozen entries.
fn reword(msg: &str, source: &str, line: usize, column: usize) -> String {
    if msg.contains("Recursion limit of") {
        return "the expression is nested too deeply".to_string();
    }
    let Some(syntax) = msg.strip_prefix("Syntax error: ") else {
        return lowercase_first(msg);
    };
    if let Some(text) = syntax.strip_prefix("token recognition error at: ") {
        let text = strip_quotes(text);
        return match text.chars().next() {
            Some(q @ ('\'' | '"')) => string_error(text, q, source, line, column),
            Some(c) if text[c.len_utf8()..].starts_with(['\'', '"']) => {
                // r'.., b'..: a prefixed string
                let q = text[c.len_utf8()..].chars().next().unwrap_or('\'');
                string_error(&text[c.len_utf8()..], q, source, line, column)
            }
            Some(c) => format!("unexpected character '{c}'"),
            None => "unexpected character".to_string(),
        };
    }
    for prefix in ["mismatched input ", "extraneous input "] {
        if let Some(rest) = syntax.strip_prefix(prefix) {
            let (found, expected) = match rest.split_once(" expecting ") {
                Some((found, expected)) => (found, Some(expected)),
                None => (rest, None),
            };
            return unexpected(strip_quotes(found), expected);
        }
    }
    if let Some(rest) = syntax.strip_prefix("missing ")
        && let Some((what, _)) = rest.split_once(" at ")
    {
        return format!("missing {}", describe_expected(what));
    }
    if let Some(rest) = syntax.strip_prefix("no viable alternative at input ") {
        let input = strip_quotes(rest);
        let last = input.split_whitespace().last().unwrap_or(input);
        return unexpected(last, None);
    }
    lowercase_first(syntax)
}

fn strip_quotes(text: &str) -> &str {
    text.strip_prefix('\'')
        .and_then(|t| t.strip_suffix('\''))
        .unwrap_or(text)
}

fn unexpected(found: &str, expected: Option<&str>) -> String {
    let found = if found == "<EOF>" {
        "end of input".to_string()
    } else {
        format!("'{found}'")
    };
    match expected.map(describe_expected) {
        Some(expected) if !expected.is_empty() => {
            format!("unexpected {found}, expected {expected}")
        }
        _ => format!("unexpected {found}"),
    }
}

/// `{']', ','}` as "']' or ','"; an empty string for sets too large to be helpful.
fn describe_expected(set: &str) -> String {
    let inner = set
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .unwrap_or(set);
    let items: Vec<String> = inner
        .split(", ")
        .map(|item| match item {
            "<EOF>" => "end of input".to_string(),
            "NUM_INT" | "NUM_UINT" | "NUM_FLOAT" => "a number".to_string(),
            "STRING" => "a string".to_string(),
            "BYTES" => "bytes".to_string(),
            "IDENTIFIER" => "a name".to_string(),
            other => other.to_string(),
        })
        .collect();
    match items.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        // A long set is noise, but in one with ':' the ':' is what is missing: the end of a
        // conditional or of a map entry's key.
        _ if items.len() > 4 && items.iter().any(|i| i == "':'") => "':'".to_string(),
        _ if items.len() > 4 => String::new(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// A string literal the lexer could not read: unterminated, or with an invalid escape.
fn string_error(text: &str, quote: char, source: &str, line: usize, column: usize) -> String {
    // The lexer stops at an invalid escape sequence: the text then holds a backslash, and
    // the literal goes on after it in the source.
    if let Some(escape_at) = text.rfind('\\') {
        let rest: String = source
            .split('\n')
            .nth(line - 1)
            .map(|l| l.chars().skip(column - 1 + text.chars().count()).collect())
            .unwrap_or_default();
        if rest.contains(quote) {
            return format!(
                "invalid escape sequence '{}' in string literal",
                &text[escape_at..]
            );
        }
    }
    "unterminated string literal".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caret_points_at_the_column_and_keeps_tabs() {
        let e = CompileError::new("x", 2, 4);
        assert_eq!(e.caret("a\n\tbc d"), "\tbc d\n\t  ^");
        let e = CompileError::new("x", 1, 3);
        assert_eq!(e.caret("ab"), "ab\n  ^");
    }

    #[test]
    fn byte_offsets_become_character_positions() {
        assert_eq!(position_of_byte("ab", 0), (1, 1));
        assert_eq!(position_of_byte("'é' + x", 5), (1, 5));
        assert_eq!(position_of_byte("a\n'é'x", 6), (2, 4));
    }

    #[test]
    fn lowercase_first_keeps_acronyms() {
        assert_eq!(lowercase_first("Index out of range"), "index out of range");
        assert_eq!(lowercase_first("JSON broke"), "JSON broke");
        assert_eq!(lowercase_first(""), "");
    }
}
