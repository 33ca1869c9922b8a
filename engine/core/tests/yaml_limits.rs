//! Hostile YAML: alias bombs, deep nesting, and the input quirks the reader accepts.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers panic on purpose

use std::time::{Duration, Instant};

use serde_json::json;
use switchyard_core::yaml::{MAX_DEPTH, Pos, parse_documents};

/// A 421-byte "billion laughs": nine levels of nine aliases, 9^10 nodes expanded.
fn alias_bomb() -> String {
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"];
    let mut text = String::from("a: &a [x, x, x, x, x, x, x, x, x]\n");
    for level in names.windows(2) {
        let refs = vec![format!("*{}", level[0]); 9].join(", ");
        text.push_str(&format!("{}: &{} [{refs}]\n", level[1], level[1]));
    }
    text
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed())
}

#[test]
fn alias_bomb_is_refused_at_the_alias() {
    let text = alias_bomb();
    assert_eq!(text.len(), 421);
    let (result, took) = timed(|| parse_documents(&text));
    let err = result.unwrap_err();
    println!("alias bomb ({} bytes): {took:?}", text.len());
    assert_eq!(err.message, "aliases expand to more than 100000 nodes");
    assert_eq!(err.pos, Pos { line: 6, column: 8 });
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[test]
fn aliases_within_the_budget_expand() {
    let docs = parse_documents("a: &a {x: 1}\nb: *a\nc: [*a, *a]\n").unwrap();
    assert_eq!(
        docs[0].to_json(),
        json!({"a": {"x": 1}, "b": {"x": 1}, "c": [{"x": 1}, {"x": 1}]})
    );
}

#[test]
fn aliases_count_across_documents() {
    // 2,000 nodes per alias, 30 aliases in each of two documents: 120,000 nodes in all.
    let items = vec!["x"; 1999].join(",");
    let doc = format!("a: &a [{items}]\nb: [{}]\n", vec!["*a"; 30].join(","));
    let text = format!("{doc}---\n{doc}");
    let err = parse_documents(&text).unwrap_err();
    assert_eq!(err.message, "aliases expand to more than 100000 nodes");
    assert_eq!(err.pos.line, 5);
}

#[test]
fn aliases_cannot_nest_past_the_depth_limit() {
    // Each anchor nests the previous one 60 levels deeper.
    let mut text = String::from("a0: &a0 x\n");
    for i in 1..4 {
        let open = "[".repeat(60);
        let close = "]".repeat(60);
        text.push_str(&format!("a{i}: &a{i} {open}*a{}{close}\n", i - 1));
    }
    let err = parse_documents(&text).unwrap_err();
    assert_eq!(err.message, "nesting deeper than 100");
    assert_eq!(
        err.pos,
        Pos {
            line: 3,
            column: 69
        }
    );
}

#[test]
fn alias_to_another_document_is_an_error() {
    let err = parse_documents("a: &a 1\n---\nb: *a\n").unwrap_err();
    assert_eq!(err.message, "alias to an anchor of another document");
    assert_eq!(err.pos, Pos { line: 3, column: 4 });
}

#[test]
fn deep_block_sequences_are_refused_without_overflow() {
    // 3,000 nested block sequences, one per line (the text grows with the square).
    let mut text = String::new();
    for depth in 0..3_000 {
        text.push_str(&" ".repeat(depth));
        text.push_str("-\n");
    }
    let (result, took) = timed(|| parse_documents(&text));
    println!(
        "3,000 nested block sequences ({} bytes): {took:?}",
        text.len()
    );
    let err = result.unwrap_err();
    assert_eq!(err.message, "nesting deeper than 100");
    assert_eq!(
        err.pos,
        Pos {
            line: 101,
            column: 101
        }
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[test]
fn deep_compact_sequences_are_refused_without_overflow() {
    let text = format!("{}x\n", "- ".repeat(30_000));
    let (result, took) = timed(|| parse_documents(&text));
    println!("30,000 nested compact sequences: {took:?}");
    let err = result.unwrap_err();
    assert_eq!(err.message, "nesting deeper than 100");
    assert_eq!(
        err.pos,
        Pos {
            line: 1,
            column: 201
        }
    );
}

#[test]
fn deep_block_maps_are_refused_without_overflow() {
    let mut text = String::new();
    for depth in 0..10_000 {
        text.push_str(&" ".repeat(depth));
        text.push_str("k:\n");
    }
    let (result, took) = timed(|| parse_documents(&text));
    println!("10,000 nested block maps: {took:?}");
    let err = result.unwrap_err();
    assert_eq!(err.message, "nesting deeper than 100");
    // yaml-rust2 marks a block mapping after its first key.
    assert_eq!(
        err.pos,
        Pos {
            line: 101,
            column: 102
        }
    );
}

#[test]
fn deep_flow_collections_are_refused_without_overflow() {
    let text = format!("{}{}", "[{a: ".repeat(50_000), "x");
    let (result, took) = timed(|| parse_documents(&text));
    println!("100,000 nested flow collections: {took:?}");
    let err = result.unwrap_err();
    assert_eq!(err.message, "nesting deeper than 100");
    // Where yaml-rust2's scanner, which reads ahead of the events, stops at 255 levels.
    assert_eq!(
        err.pos,
        Pos {
            line: 1,
            column: 637
        }
    );
}

#[test]
fn nesting_up_to_the_limit_is_accepted() {
    let text = format!("{}1{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
    let docs = parse_documents(&text).unwrap();
    let mut value = &docs[0].to_json();
    for _ in 0..MAX_DEPTH {
        value = &value[0];
    }
    assert_eq!(value, &json!(1));
    let text = format!(
        "{}1{}",
        "[".repeat(MAX_DEPTH + 1),
        "]".repeat(MAX_DEPTH + 1)
    );
    assert_eq!(
        parse_documents(&text).unwrap_err().message,
        "nesting deeper than 100"
    );
}

#[test]
fn serde_json_refuses_deep_json_by_default() {
    // The CLI reads `--var` values and `cel` prompt lines with serde_json: its default
    // recursion limit (128) is what bounds them.
    let deep = format!("{}{}", "[".repeat(128), "]".repeat(128));
    let err = serde_json::from_str::<serde_json::Value>(&deep).unwrap_err();
    assert!(
        err.to_string().starts_with("recursion limit exceeded"),
        "{err}"
    );
    let ok = format!("{}{}", "[".repeat(127), "]".repeat(127));
    assert!(serde_json::from_str::<serde_json::Value>(&ok).is_ok());
}

#[test]
fn byte_order_mark_is_skipped() {
    let docs = parse_documents("\u{feff}apiVersion: v1\nkind: ConfigMap\n").unwrap();
    assert_eq!(
        docs[0].to_json(),
        json!({"apiVersion": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(docs[0].pos, Pos { line: 1, column: 1 });
}

#[test]
fn json_surrogate_pairs_are_joined() {
    // What `json.dumps("😀 é")` writes.
    let docs = parse_documents(r#"{"a": "\ud83d\ude00 \u00e9", "\uD83D\uDE01": 1}"#).unwrap();
    assert_eq!(docs[0].to_json(), json!({"a": "😀 é", "😁": 1}));
}

#[test]
fn surrogate_escapes_outside_double_quotes_stay_literal() {
    let text = "a: \"\\ud83d\\ude00\"\nb: plain \\ud83d\\ude00\nc: |\n  \\ud83d\\ude00\nd: '\\ud83d\\ude00'\n";
    let docs = parse_documents(text).unwrap();
    assert_eq!(
        docs[0].to_json(),
        json!({"a": "😀", "b": "plain \\ud83d\\ude00", "c": "\\ud83d\\ude00\n", "d": "\\ud83d\\ude00"})
    );
}

#[test]
fn many_strings_with_surrogate_pairs_parse_in_one_pass() {
    let items: Vec<String> = (0..20_000)
        .map(|i| format!("\"{i} \\ud83d\\ude00\""))
        .collect();
    let text = format!("[{}]", items.join(", "));
    let (result, took) = timed(|| parse_documents(&text));
    println!("20,000 strings with surrogate pairs: {took:?}");
    let docs = result.unwrap();
    assert_eq!(docs[0].to_json()[19_999], json!("19999 😀"));
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[test]
fn lone_surrogates_are_refused_at_the_escape() {
    let err = parse_documents("a: 1\nb: \"x \\ud83d y\"\n").unwrap_err();
    assert_eq!(err.message, "lone UTF-16 surrogate `\\ud83d` in a string");
    assert_eq!(err.pos, Pos { line: 2, column: 7 });
    let err =
        parse_documents("a: \"\\ud83d\\ude00\"\nb: [\"ok\", \"\\uDE00\\uD83D\"]\n").unwrap_err();
    assert_eq!(err.message, "lone UTF-16 surrogate `\\uDE00` in a string");
    assert_eq!(
        err.pos,
        Pos {
            line: 2,
            column: 12
        }
    );
}

#[test]
fn lone_surrogates_after_wide_characters_are_placed_by_character() {
    let err = parse_documents("üü: [\"é\\ud83d\"]\n").unwrap_err();
    assert_eq!(err.pos, Pos { line: 1, column: 8 });
}

#[test]
fn escaped_backslashes_before_u_are_not_surrogates() {
    let docs = parse_documents(r#"a: "\\ud83d \ud83d\ude00""#).unwrap();
    assert_eq!(docs[0].to_json(), json!({"a": "\\ud83d 😀"}));
}

#[test]
fn surrogate_pairs_next_to_literal_escapes_are_joined_one_string_at_a_time() {
    // A plain scalar holding the text `\U0001f600` rules out rewriting every pair at once.
    let text = "a: \"\\ud83d\\ude00\"\nb: \\ud83d\\ude00 \\U0001f600\nc: [\"\\ud83d\\ude01\"]\n";
    let docs = parse_documents(text).unwrap();
    assert_eq!(
        docs[0].to_json(),
        json!({"a": "😀", "b": "\\ud83d\\ude00 \\U0001f600", "c": ["😁"]})
    );
}

#[test]
fn one_string_at_a_time_is_bounded() {
    let items: Vec<&str> = vec!["\"\\ud83d\\ude00\""; 150];
    let text = format!("a: x \\U0001f600\nb: [{}]\n", items.join(", "));
    let (result, took) = timed(|| parse_documents(&text));
    println!("150 strings rewritten one at a time: {took:?}");
    let err = result.unwrap_err();
    assert_eq!(
        err.message,
        "more than 100 strings with UTF-16 surrogate escapes next to literal `\\U` text; write these characters as `\\U` escapes"
    );
    assert_eq!(err.pos.line, 2);
}

#[test]
fn documents_are_bounded_in_nodes() {
    let text = format!("[{}]", vec!["0"; 2_000_000].join(","));
    let (result, took) = timed(|| parse_documents(&text));
    println!("2,000,001 nodes: {took:?}");
    let err = result.unwrap_err();
    assert_eq!(err.message, "document has more than 2000000 nodes");
    assert_eq!(
        err.pos,
        Pos {
            line: 1,
            column: 4_000_000
        }
    );
}

#[test]
fn positions_inside_scalars_ignore_the_byte_order_mark() {
    let text = "\u{feff}a: one\n  two\n";
    let docs = parse_documents(text).unwrap();
    let a = docs[0]
        .get(&switchyard_core::yaml::parse_path("a"))
        .unwrap();
    assert_eq!(
        switchyard_core::yaml::value_position(text, a, 1, 2),
        Pos { line: 1, column: 5 }
    );
}
