//! The Kubernetes regex library (`k8s.io/apiserver/pkg/cel/library/regex.go`): `find` and
//! `findAll`, with Go's RE2 semantics on the `regex` crate.
//!
//! Go's syntax is translated where the two differ: `\d \w \s \b` (and their negations) are
//! ASCII in Go and Unicode in Rust; `\Q...\E` quotes literally in Go; in a character class
//! Go reads `[`, `&&`, `~~` literally where Rust nests or combines classes. `findAll`
//! follows Go's `FindAllString` loop (an empty match right after a match is skipped; the
//! next search starts one character later).
//!
//! Compile errors carry Go's message for the common mistakes (unbalanced parentheses or
//! brackets, a trailing backslash, a repetition operator without operand, a counted
//! repetition past RE2's 1000, alone or nested); other invalid
//! patterns report the `regex` crate's reason after Go's `error parsing regexp: ` prefix.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use regex::Regex;

/// `Illegal regex: <Go's regexp error>`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("Illegal regex: error parsing regexp: {0}")]
pub struct RegexError(pub String);

/// Compiles a Go (RE2) pattern. Compiled patterns are cached (up to 256 of them).
pub fn compile(pattern: &str) -> Result<Arc<Regex>, RegexError> {
    compile_with_cost(pattern).0
}

/// What compiling `pattern` costs (see `limits::compile_regex`): the tier it compiles in,
/// or the first tier for a pattern that does not compile.
pub(crate) fn compile_cost(pattern: &str) -> u64 {
    compile_with_cost(pattern).1
}

type Compiled = (Result<Arc<Regex>, RegexError>, u64);
/// Compiled patterns, with what compiling each cost.
type Cache = Mutex<HashMap<String, (Arc<Regex>, u64)>>;

/// [`compile`] with what compiling cost; `matches` compiles through here too, so that it
/// reads patterns as Go does.
pub(crate) fn compile_with_cost(pattern: &str) -> Compiled {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Ok(map) = cache.lock()
        && let Some((re, cost)) = map.get(pattern)
    {
        return (Ok(Arc::clone(re)), *cost);
    }
    if let Some(reason) = go_syntax_error(pattern) {
        return (Err(RegexError(reason)), crate::limits::REGEX_SMALL_COST);
    }
    let translated = match translate(pattern) {
        Ok(t) => t,
        Err(e) => return (Err(RegexError(e)), crate::limits::REGEX_SMALL_COST),
    };
    let (re, cost) = crate::limits::compile_regex(&translated);
    let re = match re {
        Ok(re) => Arc::new(re),
        Err(e) => {
            let reason = e.to_string();
            let last = reason.lines().last().unwrap_or_default().trim().to_string();
            return (
                Err(RegexError(last.trim_start_matches("error: ").to_string())),
                cost,
            );
        }
    };
    if let Ok(mut map) = cache.lock() {
        if map.len() >= 256 {
            map.clear();
        }
        map.insert(pattern.to_string(), (Arc::clone(&re), cost));
    }
    (Ok(re), cost)
}

/// `s.find(pattern)`: the leftmost match, or `""`.
pub fn find(s: &str, pattern: &str) -> Result<String, RegexError> {
    Ok(compile(pattern)?
        .find(s)
        .map_or_else(String::new, |m| m.as_str().to_string()))
}

/// `s.findAll(pattern)` (`limit` -1) and `s.findAll(pattern, limit)`: successive
/// non-overlapping matches, at most `limit` of them when `limit` is not negative.
pub fn find_all(s: &str, pattern: &str, limit: i64) -> Result<Vec<String>, RegexError> {
    let re = compile(pattern)?;
    Ok(find_all_compiled(&re, s, limit))
}

/// Go's `Regexp.FindAllString(s, n)`.
pub fn find_all_compiled(re: &Regex, s: &str, limit: i64) -> Vec<String> {
    // One match past the size limit is enough for the caller to refuse the result.
    let n = if limit < 0 {
        usize::MAX
    } else {
        usize::try_from(limit).unwrap_or(usize::MAX)
    }
    .min(crate::limits::MAX_ELEMENTS + 1);
    let mut out = Vec::new();
    let mut pos = 0usize;
    let mut prev_end: Option<usize> = None;
    while out.len() < n && pos <= s.len() {
        let Some(m) = re.find_at(s, pos) else {
            break;
        };
        let mut accept = true;
        if m.end() == pos {
            // an empty match: not right after the previous match; move one character on
            if Some(m.start()) == prev_end {
                accept = false;
            }
            pos += s[pos..].chars().next().map_or(1, char::len_utf8);
        } else {
            pos = m.end();
        }
        prev_end = Some(m.end());
        if accept {
            out.push(m.as_str().to_string());
        }
    }
    out
}

const DIGIT: &str = "0-9";
const WORD: &str = "0-9A-Za-z_";
const SPACE: &str = "\\t\\n\\f\\r ";

/// Rewrites Go syntax into the `regex` crate's where they read differently.
fn translate(p: &str) -> Result<String, String> {
    let chars: Vec<char> = p.chars().collect();
    let mut out = String::with_capacity(p.len() + 16);
    let mut i = 0;
    let mut in_class = false;
    let mut class_start = false;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' && i + 1 < chars.len() {
            let e = chars[i + 1];
            i += 2;
            if e == 'Q' {
                let mut lit = String::new();
                while i < chars.len() {
                    if chars[i] == '\\' && chars.get(i + 1) == Some(&'E') {
                        i += 2;
                        break;
                    }
                    lit.push(chars[i]);
                    i += 1;
                }
                for ch in lit.chars() {
                    push_literal(&mut out, ch);
                }
                class_start = false;
                continue;
            }
            let (set, negated) = match e {
                'd' => (Some(DIGIT), false),
                'D' => (Some(DIGIT), true),
                'w' => (Some(WORD), false),
                'W' => (Some(WORD), true),
                's' => (Some(SPACE), false),
                'S' => (Some(SPACE), true),
                _ => (None, false),
            };
            match (set, in_class) {
                (Some(set), false) => {
                    out.push_str(if negated { "[^" } else { "[" });
                    out.push_str(set);
                    out.push(']');
                }
                (Some(set), true) if !negated => out.push_str(set),
                (Some(set), true) => {
                    out.push_str("[^");
                    out.push_str(set);
                    out.push(']');
                }
                (None, false) if e == 'b' => out.push_str("(?-u:\\b)"),
                (None, false) if e == 'B' => out.push_str("(?-u:\\B)"),
                (None, _) => match e {
                    // kept as they are: Rust reads them as Go does
                    'a' | 'f' | 'n' | 'r' | 't' | 'v' | 'x' | 'p' | 'P' => {
                        out.push('\\');
                        out.push(e);
                        // `\p{Greek}`, `\x{263a}`: the braces are the escape's
                        if matches!(e, 'x' | 'p' | 'P') && chars.get(i) == Some(&'{') {
                            let end = braces_end(&chars, i);
                            out.extend(&chars[i..end]);
                            i = end;
                        }
                    }
                    'A' | 'z' if !in_class => {
                        out.push('\\');
                        out.push(e);
                    }
                    // octal: \0 and up to two more digits, or \1-\7 and one or two more
                    '0'..='7' => {
                        let mut value = e.to_digit(8).unwrap_or(0);
                        let mut n = 0;
                        while n < 2 && i < chars.len() && chars[i].is_digit(8) {
                            value = value * 8 + chars[i].to_digit(8).unwrap_or(0);
                            i += 1;
                            n += 1;
                        }
                        if e != '0' && n == 0 {
                            return Err(format!("invalid escape sequence: `\\{e}`"));
                        }
                        out.push_str(&format!("\\x{{{value:X}}}"));
                    }
                    // any other ASCII punctuation is itself (Rust gives `\<` a meaning)
                    e if e.is_ascii() && !e.is_ascii_alphanumeric() => push_literal(&mut out, e),
                    e => return Err(format!("invalid escape sequence: `\\{e}`")),
                },
            }
            class_start = false;
            continue;
        }
        if in_class {
            match c {
                ']' if !class_start => {
                    in_class = false;
                    out.push(']');
                }
                '[' if chars.get(i + 1) == Some(&':') => {
                    // [:alpha:] and friends, copied whole
                    let close = (i + 2..chars.len().saturating_sub(1))
                        .find(|&j| chars[j] == ':' && chars[j + 1] == ']');
                    match close {
                        Some(j) => {
                            out.extend(&chars[i..j + 2]);
                            i = j + 2;
                            class_start = false;
                            continue;
                        }
                        None => out.push_str("\\["),
                    }
                }
                '[' | '&' | '~' => {
                    out.push('\\');
                    out.push(c);
                }
                '-' if chars.get(i + 1) == Some(&'-') => out.push_str("\\-"),
                _ => out.push(c),
            }
            class_start = false;
            i += 1;
            continue;
        }
        if c == '{' && counted_repetition(&chars[i..]).is_none() {
            // not a counted repetition: a literal in Go, an error in Rust
            out.push_str("\\{");
            i += 1;
            continue;
        }
        if c == '[' {
            in_class = true;
            class_start = true;
            out.push('[');
            if chars.get(i + 1) == Some(&'^') {
                out.push('^');
                i += 1;
            }
            i += 1;
            continue;
        }
        out.push(c);
        i += 1;
    }
    Ok(out)
}

/// A character matched literally, whatever Rust's syntax makes of it.
fn push_literal(out: &mut String, c: char) {
    if c.is_alphanumeric() || c == '_' {
        out.push(c);
    } else {
        out.push_str(&format!("\\x{{{:X}}}", c as u32));
    }
}

/// Go's message for the syntax errors patterns most often have.
fn go_syntax_error(p: &str) -> Option<String> {
    let chars: Vec<char> = p.chars().collect();
    let mut depth = 0usize;
    let mut i = 0;
    // whether the previous token can be repeated
    let mut operand = false;
    // RE2's bound on counted repetitions (Go's `repeatIsValid`): the product of the counts
    // nested in one another may not pass 1000. `groups` has, per open group, the largest
    // product inside it; `last` is that of the previous token.
    let mut groups: Vec<u64> = vec![1];
    let mut last: u64 = 1;
    while i < chars.len() {
        let c = chars[i];
        if c == '{'
            && operand
            && let Some((min, max, len)) = counted_repetition(&chars[i..])
        {
            let text: String = chars[i..i + len].iter().collect();
            let count = max.unwrap_or(min);
            if min > MAX_REPEAT || count > MAX_REPEAT {
                return Some(format!("invalid repeat count: `{text}`"));
            }
            // `{0}` hides its operand from the check; an unbounded `{n,}` counts n
            let product = match (max, count) {
                (Some(0), _) => 0,
                (_, 0 | 1) => last,
                (_, n) => n.saturating_mul(last),
            };
            if product > MAX_REPEAT {
                return Some(format!("invalid repeat count: `{text}`"));
            }
            last = product;
            if let Some(g) = groups.last_mut() {
                *g = (*g).max(product);
            }
            i += len;
            continue;
        }
        match c {
            '\\' => {
                if i + 1 >= chars.len() {
                    return Some("trailing backslash at end of expression: ``".to_string());
                }
                if chars[i + 1] == 'Q' {
                    let rest: String = chars[i + 2..].iter().collect();
                    let lit = rest.split("\\E").next().unwrap_or_default().chars().count();
                    i += 2 + lit + if rest.contains("\\E") { 2 } else { 0 };
                    operand = lit > 0;
                    last = 1;
                    continue;
                }
                i += 2;
                if matches!(chars[i - 1], 'x' | 'p' | 'P') && chars.get(i) == Some(&'{') {
                    i = braces_end(&chars, i);
                }
                operand = true;
                last = 1;
                continue;
            }
            '[' => {
                let start = i;
                i += 1;
                if chars.get(i) == Some(&'^') {
                    i += 1;
                }
                if chars.get(i) == Some(&']') {
                    i += 1;
                }
                loop {
                    match chars.get(i) {
                        None => {
                            let rest: String = chars[start..].iter().collect();
                            return Some(format!("missing closing ]: `{rest}`"));
                        }
                        Some('\\') => i += 2,
                        Some('[') if chars.get(i + 1) == Some(&':') => {
                            let close = (i + 2..chars.len().saturating_sub(1))
                                .find(|&j| chars[j] == ':' && chars[j + 1] == ']');
                            i = close.map_or(i + 1, |j| j + 2);
                        }
                        Some(']') => {
                            i += 1;
                            break;
                        }
                        Some(_) => i += 1,
                    }
                }
                operand = true;
                last = 1;
                continue;
            }
            '(' => {
                depth += 1;
                operand = false;
                groups.push(1);
                // skip a group's flags or name: (?i) (?: (?P<name> (?<name>
                if chars.get(i + 1) == Some(&'?') {
                    let mut j = i + 2;
                    while j < chars.len() && !matches!(chars[j], ')' | ':' | '>') {
                        j += 1;
                    }
                    if chars.get(j) == Some(&')') {
                        depth -= 1;
                        groups.pop();
                    }
                    i = j + 1;
                    continue;
                }
            }
            ')' => {
                if depth == 0 {
                    return Some(format!("unexpected ): `{p}`"));
                }
                depth -= 1;
                operand = true;
                last = groups.pop().unwrap_or(1);
                if let Some(g) = groups.last_mut() {
                    *g = (*g).max(last);
                }
            }
            '|' => operand = false,
            '*' | '+' | '?' => {
                if !operand {
                    return Some(format!("missing argument to repetition operator: `{c}`"));
                }
                // a lazy suffix (`*?`) is part of the operator
                let start = i;
                if chars.get(i + 1) == Some(&'?') {
                    i += 1;
                }
                if let Some('*' | '+' | '?') = chars.get(i + 1) {
                    let op: String = chars[start..i + 2].iter().collect();
                    return Some(format!("invalid nested repetition operator: `{op}`"));
                }
                operand = false;
            }
            _ => {
                operand = true;
                last = 1;
            }
        }
        i += 1;
    }
    if depth > 0 {
        return Some(format!("missing closing ): `{p}`"));
    }
    None
}

/// The end of the `{...}` at `start` (after its `}`), or of the pattern.
fn braces_end(chars: &[char], start: usize) -> usize {
    chars[start..]
        .iter()
        .position(|&c| c == '}')
        .map_or(chars.len(), |p| start + p + 1)
}

/// RE2's largest repetition count.
const MAX_REPEAT: u64 = 1000;

/// `{n}`, `{n,}` or `{n,m}` at the start of `chars`: (n, m or `None` for no upper bound,
/// its length). Anything else after a `{` is a literal `{` in Go.
fn counted_repetition(chars: &[char]) -> Option<(u64, Option<u64>, usize)> {
    let close = chars.iter().position(|&c| c == '}')?;
    let body: String = chars.get(1..close)?.iter().collect();
    let number = |s: &str| {
        if s.is_empty() || !s.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        // Go refuses a count it cannot read as well as one past 1000
        Some(s.parse::<u64>().unwrap_or(u64::MAX))
    };
    let (min, max) = match body.split_once(',') {
        None => {
            let n = number(&body)?;
            (n, Some(n))
        }
        Some((min, "")) => (number(min)?, None),
        Some((min, max)) => (number(min)?, Some(number(max)?)),
    };
    Some((min, max, close + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_examples() {
        assert_eq!(find("abc 123", "[0-9]+"), Ok("123".to_string()));
        // [0-9]* matches the empty string at 0 (the library doc's '123' is wrong)
        assert_eq!(find("abc 123", "[0-9]*"), Ok(String::new()));
        assert_eq!(find("abc 123", "xyz"), Ok(String::new()));
        assert_eq!(
            find_all("123 abc 456", "[0-9]+", -1),
            Ok(vec!["123".into(), "456".into()])
        );
        assert_eq!(find_all("123 abc 456", "[0-9]+", 1), Ok(vec!["123".into()]));
        assert_eq!(find_all("123 abc 456", "xyz", -1), Ok(vec![]));
        assert_eq!(find_all("123 abc 456", "[0-9]+", 0), Ok(vec![]));
        // Go's empty-match rules (kubernetes/website#46695)
        assert_eq!(
            find_all("1, 2, 3, 4", "[0-9]*", -1),
            Ok(vec!["1", "", "2", "", "3", "", "4"]
                .into_iter()
                .map(String::from)
                .collect())
        );
        assert_eq!(
            find_all("baaab", "a*", -1),
            Ok(vec!["", "aaa", ""].into_iter().map(String::from).collect())
        );
        assert_eq!(find_all("héllo", "", -1).map(|v| v.len()), Ok(6));
    }

    #[test]
    fn go_syntax() {
        // ASCII perl classes
        assert_eq!(find("٣3", r"\d"), Ok("3".into()));
        assert_eq!(find("é_a", r"\w+"), Ok("_a".into()));
        assert_eq!(find("a\u{a0}b c", r"\s"), Ok(" ".into()));
        // é is not a word character for Go: a boundary precedes the a
        assert_eq!(find("éa", r"\ba"), Ok("a".into()));
        assert_eq!(find("x9y", r"[\d]"), Ok("9".into()));
        assert_eq!(find("9x", r"[^\d]"), Ok("x".into()));
        assert_eq!(find("a.b*c", r"\Q.b*\E"), Ok(".b*".into()));
        assert_eq!(find("a[b", r"[[]"), Ok("[".into()));
        assert_eq!(find("a&b", r"[&&]"), Ok("&".into()));
        assert_eq!(find("abc", r"[[:alpha:]]+"), Ok("abc".into()));
        assert_eq!(find("ABC", r"(?i)abc"), Ok("ABC".into()));
        assert_eq!(find("a]b", r"[]a]+"), Ok("a]".into()));
        // Go reads \< as a literal, octal escapes as characters
        assert_eq!(find("a<b", r"\<b"), Ok("<b".into()));
        assert_eq!(find("a\nb", r"\012"), Ok("\n".into()));
        assert_eq!(find("a<b", r"\Q<\E"), Ok("<".into()));
    }

    #[test]
    fn errors() {
        let e = |p: &str| compile(p).unwrap_err().to_string();
        assert_eq!(
            e("(abc"),
            "Illegal regex: error parsing regexp: missing closing ): `(abc`"
        );
        assert_eq!(
            e("abc)"),
            "Illegal regex: error parsing regexp: unexpected ): `abc)`"
        );
        assert_eq!(
            e("[abc"),
            "Illegal regex: error parsing regexp: missing closing ]: `[abc`"
        );
        assert_eq!(
            e("ab\\"),
            "Illegal regex: error parsing regexp: trailing backslash at end of expression: ``"
        );
        assert_eq!(
            e("*a"),
            "Illegal regex: error parsing regexp: missing argument to repetition operator: `*`"
        );
        assert_eq!(
            e("a**"),
            "Illegal regex: error parsing regexp: invalid nested repetition operator: `**`"
        );
        assert!(e("a{2,1}").starts_with("Illegal regex: error parsing regexp: "));
        assert_eq!(
            e(r"\y"),
            "Illegal regex: error parsing regexp: invalid escape sequence: `\\y`"
        );
        assert_eq!(
            e(r"\1"),
            "Illegal regex: error parsing regexp: invalid escape sequence: `\\1`"
        );
        assert_eq!(
            e(r"\u0041"),
            "Illegal regex: error parsing regexp: invalid escape sequence: `\\u`"
        );
        assert!(compile("(?i)(?:a|b)*?c").is_ok());
        assert!(compile("(?P<x>a)(?<y>b)").is_ok());
    }
}
