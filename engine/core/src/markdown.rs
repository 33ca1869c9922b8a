//! Markdown for pull-request comments that quote what packs and tenants wrote.
//!
//! Every string a pack or a tenant controls (kinds, names, clusters, the diffs of their
//! objects) goes inside code, where CommonMark renders nothing: no headings, links, images,
//! raw HTML or emphasis, and GitHub links no mentions and no issue references. A code span's
//! backtick fence is longer than any run of backticks inside it and a code block's longer
//! than any run in the block, so neither can be closed early; what would end a table row or
//! a line is written as an escape (`\|`, `\n`).

use crate::text;

/// `text` as an inline code span, safe inside a table cell: one line, `|` escaped (GitHub
/// splits table cells at `|` even inside code), control characters written as escapes.
pub fn code_span(text: &str) -> String {
    let line = text::one_line(text).replace('|', "\\|");
    let fence = "`".repeat(longest_run(&line, '`') + 1);
    // A space on each side keeps a leading or trailing backtick from joining the fence;
    // CommonMark strips one space from each side of a span that has both.
    if line.starts_with('`') || line.ends_with('`') || line.trim().is_empty() {
        format!("{fence} {line} {fence}")
    } else {
        format!("{fence}{line}{fence}")
    }
}

/// `text` as the content of an HTML element (`<code>` inside a `<summary>`): one line,
/// with `& < > " '` as entities, and the characters Markdown gives meaning to as numeric
/// references, inert whatever a renderer does with the element's content.
pub fn html_text(text: &str) -> String {
    let line = text::one_line(text);
    let mut out = String::with_capacity(line.len());
    for c in line.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '*' | '_' | '`' | '[' | ']' | '(' | ')' | '\\' | '@' | '#' | '!' | '~' | '|' => {
                out.push_str(&format!("&#{};", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out
}

/// `text` as a fenced code block with `info` (`diff`): the fence is longer than any run of
/// backticks in the text, so no line can close it; control characters other than newlines
/// and tabs are written as escapes.
pub fn code_block(text: &str, info: &str) -> String {
    let body = text::visible(text);
    let fence = "`".repeat((longest_run(&body, '`') + 1).max(3));
    let mut out = format!("{fence}{info}\n{body}");
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&fence);
    out.push('\n');
    out
}

fn longest_run(text: &str, c: char) -> usize {
    let mut longest = 0;
    let mut run = 0;
    for x in text.chars() {
        if x == c {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    longest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_outgrow_what_they_hold() {
        assert_eq!(code_span("a`b"), "``a`b``");
        assert_eq!(code_span("`x`"), "`` `x` ``");
        assert_eq!(code_span("a|b\nc"), "`a\\|b\\nc`");
        assert_eq!(code_span(""), "`  `");
        assert_eq!(
            code_block("x\n````\ny", "diff"),
            "`````diff\nx\n````\ny\n`````\n"
        );
        assert_eq!(code_block("x", ""), "```\nx\n```\n");
    }

    #[test]
    fn html_text_is_inert() {
        assert_eq!(
            html_text("<img src=x> @team [a](b)\n# h"),
            "&lt;img src=x&gt; &#64;team &#91;a&#93;&#40;b&#41;&#92;n&#35; h"
        );
    }
}
