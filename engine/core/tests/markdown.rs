//! `switchyard diff -o markdown` quotes what packs and tenants wrote: whatever they write,
//! the comment parses (CommonMark, with GitHub's tables) into the same structure, and their
//! strings appear only as code.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use switchyard_core::diff::{Change, ChangeKind, PlanDiff};

/// Strings a hostile pack (a kind) or tenant (a name, a status message in a diff) may hold.
const HOSTILE: &[&str] = &[
    "Deployment` | `x` |\n# Owned\n[click](https://evil.example) ![i](https://evil.example/i.png)",
    "   ```\n# heading after a fence\n<img src=x onerror=alert(1)>\n```",
    "````\n~~~\n@org/team please merge #123 <script>alert(1)</script>",
    "</code></summary></details><a href=\"https://evil.example\">x</a>",
    "\u{1b}]0;title\u{7}\u{1b}[2J | *bold* _em_ \\`",
    "`",
    "",
];

fn diff_of(text: &str) -> PlanDiff {
    PlanDiff {
        changes: vec![
            Change {
                kind: ChangeKind::Added,
                subject: format!("v1 {text} default/{text}"),
                cluster: text.to_string(),
                diff: format!("--- base\n+++ head\n@@ -1 +1 @@\n-a\n+{text}\n   ```\n{text}\n"),
            },
            Change {
                kind: ChangeKind::Changed,
                subject: "status of source:Kind:ns/n".into(),
                cluster: "source".into(),
                diff: format!("-message: ok\n+message: {text}\n"),
            },
        ],
    }
}

/// The shape of a document: headings, tables, code, HTML, links and images, with code's
/// content left out (that is where the hostile text may go).
fn shape(markdown: &str) -> Vec<String> {
    let mut out = Vec::new();
    for event in Parser::new_ext(markdown, Options::ENABLE_TABLES) {
        match event {
            Event::Start(Tag::Heading { level, .. }) => out.push(format!("heading {level:?}")),
            Event::Start(Tag::Link { dest_url, .. }) => out.push(format!("link {dest_url}")),
            Event::Start(Tag::Image { dest_url, .. }) => out.push(format!("image {dest_url}")),
            Event::Start(Tag::Table(_)) => out.push("table".into()),
            Event::Start(Tag::TableRow) => out.push("row".into()),
            Event::Start(Tag::TableCell) => out.push("cell".into()),
            Event::Start(Tag::CodeBlock(_)) => out.push("code block".into()),
            Event::End(TagEnd::CodeBlock) => out.push("end code block".into()),
            Event::Start(Tag::Emphasis) | Event::Start(Tag::Strong) => out.push("emphasis".into()),
            Event::Start(Tag::HtmlBlock) => out.push("html block".into()),
            Event::Html(html) | Event::InlineHtml(html) => {
                // Only the comment's own tags; their text content is entity-escaped.
                let tags: Vec<&str> = html
                    .split('<')
                    .skip(1)
                    .map(|t| t.split(['>', ' ']).next().unwrap_or_default())
                    .collect();
                out.push(format!("html {}", tags.join(" ")));
            }
            Event::Code(_) => out.push("code".into()),
            _ => {}
        }
    }
    out
}

#[test]
fn hostile_strings_render_only_as_code() {
    let reference = shape(&diff_of("web").to_markdown("pack 1.0.0", "pack 1.1.0"));
    assert!(reference.contains(&"table".to_string()), "{reference:?}");
    for text in HOSTILE {
        let markdown = diff_of(text).to_markdown(&format!("pack {text}"), "pack 1.1.0");
        let found = shape(&markdown);
        assert_eq!(
            found, reference,
            "structure changed by {text:?}:\n{markdown}"
        );
        // Nothing outside code mentions, links or escapes: the hostile text's characters
        // that are not escaped appear only within code spans and blocks.
        let mut outside = String::new();
        let mut in_block = false;
        for event in Parser::new_ext(&markdown, Options::ENABLE_TABLES) {
            match event {
                Event::Start(Tag::CodeBlock(_)) => in_block = true,
                Event::End(TagEnd::CodeBlock) => in_block = false,
                Event::Text(t) if !in_block => outside.push_str(&t),
                _ => {}
            }
        }
        for needle in ["@org", "#123", "evil.example", "\u{1b}"] {
            assert!(
                !outside.contains(needle),
                "{needle:?} outside code: {outside:?}"
            );
        }
    }
}

#[test]
fn the_comment_reads_as_before_for_plain_names() {
    let markdown = diff_of("web").to_markdown("pack 1.0.0", "pack 1.1.0");
    assert!(
        markdown.starts_with("### switchyard diff: `pack 1.0.0` → `pack 1.1.0`\n\n1 added, 0 removed, 1 changed.\n\n| change | object | cluster |\n|---|---|---|\n| Added | `v1 web default/web` | `web` |\n"),
        "{markdown}"
    );
    assert!(markdown.contains(
        "<details><summary>Added <code>v1 web default/web</code></summary>\n\n````diff\n--- base\n"
    ));
    // The diff holds a line of three backticks: its fence is longer.
    assert!(
        markdown.contains("   ```\nweb\n````\n</details>"),
        "{markdown}"
    );
}
