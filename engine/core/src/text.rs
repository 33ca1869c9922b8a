//! Strings from packs and tenants made safe to show: on a terminal, in a one-line message,
//! in a report.
//!
//! A tenant writes the objects the engine reports on, so a name, a status message or a
//! test case's name may hold escape sequences (which a terminal obeys: colours, cursor
//! moves, a rewritten title), newlines (a forged `PASS` line) or bidirectional overrides
//! (text that reads in another order than it is). Each is written as a visible escape
//! instead.

use std::borrow::Cow;

/// `text` with control characters other than newlines and tabs, and bidirectional
/// controls, written as escapes (`\u{1b}`, `\r`): for multi-line output such as diffs.
pub fn visible(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// `text` on one line: [`visible`], and newlines and tabs written as `\n` and `\t` too.
pub fn one_line(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

fn escape(text: &str, one_line: bool) -> Cow<'_, str> {
    let needs =
        |c: char| (c.is_control() && (one_line || (c != '\n' && c != '\t'))) || is_bidi_control(c);
    if !text.chars().any(needs) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !needs(c) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
        }
    }
    Cow::Owned(out)
}

/// Unicode's bidirectional overrides, embeddings, isolates and marks, which change the
/// order a reader sees characters in.
pub fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}'
    )
}

/// `text` with what XML 1.0 cannot hold at all (control characters other than tab,
/// newline and carriage return; U+FFFE, U+FFFF) written as visible escapes, `& < > " '` as
/// entities, and tab, newline and carriage return as character references (an attribute's
/// value would have them read as spaces): safe in an attribute and in element content.
pub fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' => out.push_str("&#9;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            c if c.is_control() || c == '\u{fffe}' || c == '\u{ffff}' => {
                out.push_str(&format!("\\u{{{:x}}}", u32::from(c)))
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed() {
        assert!(matches!(visible("web-1"), Cow::Borrowed("web-1")));
        assert!(matches!(one_line("a b"), Cow::Borrowed("a b")));
    }

    #[test]
    fn escapes_and_forged_lines_become_visible() {
        assert_eq!(
            visible("\u{1b}[31mred\u{1b}[0m\nnext\tline\r"),
            "\\u{1b}[31mred\\u{1b}[0m\nnext\tline\\r"
        );
        assert_eq!(one_line("ok\nPASS forged"), "ok\\nPASS forged");
        assert_eq!(one_line("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(one_line("\u{7f}\u{9b}"), "\\u{7f}\\u{9b}");
    }

    #[test]
    fn xml_holds_anything() {
        assert_eq!(
            xml("a<b>&\"c'\u{0}\u{1b}\u{ffff}\n"),
            "a&lt;b&gt;&amp;&quot;c&apos;\\u{0}\\u{1b}\\u{ffff}&#10;"
        );
    }
}
