//! Hostile templates: recursion through partials and deep nesting are refused when the
//! templates are registered (so `check`, `render` and the broker all refuse the pack), with
//! a positioned error instead of a stack overflow.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers panic on purpose

use std::collections::BTreeMap;

use serde_json::json;
use switchyard_core::template::{TemplateError, TemplateSet};
use switchyard_core::{PackFiles, load};

const HEAD: &str = "kind: ConfigMap\ndata:\n  a: '1'\n";

/// Registers `templates` in order and returns the first error.
fn register(templates: &[(&str, &str)]) -> Result<TemplateSet, TemplateError> {
    let mut set = TemplateSet::new(None);
    for (name, source) in templates {
        set.add_template(name, &format!("templates/{name}"), source)?;
    }
    Ok(set)
}

fn error(templates: &[(&str, &str)]) -> (String, &'static str) {
    match register(templates) {
        Ok(_) => panic!("registration succeeds"),
        Err(e) => (e.to_string(), e.code),
    }
}

#[test]
fn a_cycle_of_two_partials_is_refused() {
    let (message, code) = error(&[("a", &format!("{HEAD}{{{{> b}}}}\n")), ("b", "  {{> a}}\n")]);
    assert_eq!(code, "template::recursion");
    assert_eq!(
        message,
        "templates/b:1:3: partial `b` includes itself through `a` -> `b`"
    );
}

#[test]
fn a_self_include_is_refused() {
    let (message, code) = error(&[("a", &format!("{HEAD}{{{{#if x}}}}{{{{> a}}}}{{{{/if}}}}\n"))]);
    assert_eq!(code, "template::recursion");
    assert_eq!(message, "templates/a:4:10: partial `a` includes itself");
}

#[test]
fn a_cycle_of_three_partials_is_refused() {
    let (message, code) = error(&[
        ("a", &format!("{HEAD}{{{{> b}}}}\n")),
        ("b", "{{> c}}\n"),
        ("c", "x: 1\n{{#each xs}}\n{{> a}}\n{{/each}}\n"),
    ]);
    assert_eq!(code, "template::recursion");
    assert_eq!(
        message,
        "templates/c:3:1: partial `c` includes itself through `a` -> `b` -> `c`"
    );
}

#[test]
fn a_cycle_through_inline_partials_is_refused() {
    let (message, code) = error(&[(
        "a",
        "{{#*inline \"x\"}}{{> y}}{{/inline}}{{#*inline \"y\"}}{{> x}}{{/inline}}{{> x}}\n",
    )]);
    assert_eq!(code, "template::recursion");
    assert_eq!(
        message,
        "templates/a:1:17: partial `x` includes itself through `y` -> `x`"
    );
}

#[test]
fn the_refused_template_is_not_registered_and_the_others_still_render() {
    let mut set = register(&[("a", &format!("{HEAD}{{{{> b}}}}\n"))]).unwrap();
    assert!(set.add_template("b", "templates/b", "{{> a}}\n").is_err());
    // `b` is missing, as if it did not exist: a render error, not a crash.
    let e = set.render("a", &json!({})).unwrap_err();
    assert_eq!(e.to_string(), "templates/a:4:1: partial `b` not found");
    set.add_template("b", "templates/b", "  b: '2'\n").unwrap();
    assert_eq!(
        set.render("a", &json!({})).unwrap(),
        vec![json!({"kind": "ConfigMap", "data": {"a": "1", "b": "2"}})]
    );
}

#[test]
fn shared_partials_without_a_cycle_render() {
    // A diamond: `a` includes `b` and `c`, both include `d`.
    let set = register(&[
        ("d", "  d: '4'\n"),
        ("b", "{{> d}}\n"),
        ("c", "{{> d}}\n"),
        ("a", "kind: ConfigMap\ndata:\n{{> b}}\nother:\n{{> c}}\n"),
    ])
    .unwrap();
    assert_eq!(
        set.render("a", &json!({})).unwrap(),
        vec![json!({"kind": "ConfigMap", "data": {"d": "4"}, "other": {"d": "4"}})]
    );
}

fn nested_ifs(n: usize) -> String {
    format!(
        "{HEAD}{}  b: '2'\n{}\n",
        "{{#if true}}".repeat(n),
        "{{/if}}".repeat(n)
    )
}

#[test]
fn five_thousand_nested_blocks_are_refused() {
    let (message, code) = error(&[("a", &nested_ifs(5_000))]);
    assert_eq!(code, "template::depth");
    assert_eq!(
        message,
        "templates/a:4:769: blocks nest more than 64 levels deep"
    );
}

#[test]
fn twenty_thousand_nested_blocks_are_refused() {
    let (message, code) = error(&[("a", &nested_ifs(20_000))]);
    assert_eq!(code, "template::depth");
    assert_eq!(
        message,
        "templates/a:4:769: blocks nest more than 64 levels deep"
    );
}

#[test]
fn sixty_four_nested_blocks_render() {
    let set = register(&[("a", &nested_ifs(64))]).unwrap();
    assert_eq!(
        set.render("a", &json!({})).unwrap(),
        vec![json!({"kind": "ConfigMap", "data": {"a": "1", "b": "2"}})]
    );
}

#[test]
fn deeply_nested_expressions_are_refused() {
    let deep = format!(
        "x: {{{{len {}xs{}}}}}\n",
        "(len ".repeat(10_000),
        ")".repeat(10_000)
    );
    let (message, code) = error(&[("a", &deep)]);
    assert_eq!(code, "template::depth");
    assert_eq!(
        message,
        "templates/a:1:4: an expression nests more than 32 levels deep"
    );
    let literal = format!("x: {{{{len {}}}}}\n", "[".repeat(100_000));
    assert_eq!(error(&[("a", &literal)]).1, "template::depth");
}

#[test]
fn blocks_in_comments_and_raw_blocks_do_not_count() {
    let comment = format!("{{{{!-- {} --}}}}\n{HEAD}", "{{#if x}}".repeat(1_000));
    register(&[("a", &comment)]).unwrap();
    let raw = format!(
        "{HEAD}  r: |\n    {{{{{{{{raw}}}}}}}}{}{{{{{{{{/raw}}}}}}}}\n",
        "{{#if x}}".repeat(1_000)
    );
    let set = register(&[("a", &raw)]).unwrap();
    let docs = set.render("a", &json!({})).unwrap();
    assert_eq!(
        docs[0]["data"]["r"],
        json!("{{#if x}}".repeat(1_000) + "\n")
    );
}

#[test]
fn a_long_chain_of_partials_is_refused() {
    // 200 partials each including the next, registered from the end (the chain closes at
    // every step) and from the start (the chain grows below the first one).
    let names: Vec<String> = (0..200).map(|i| format!("p{i:03}")).collect();
    let sources: Vec<String> = (0..200)
        .map(|i| match names.get(i + 1) {
            Some(next) => format!("{{{{> {next}}}}}\n"),
            None => "  a: '1'\n".to_string(),
        })
        .collect();
    let forward: Vec<(&str, &str)> = names
        .iter()
        .map(String::as_str)
        .zip(sources.iter().map(String::as_str))
        .collect();
    let (message, code) = error(&forward);
    assert_eq!(code, "template::depth");
    assert_eq!(
        message,
        "templates/p100:1:1: blocks and partials nest 101 levels deep when `p000` renders \
         (through `p000` -> `p001` -> `p002` -> `p003` -> `p004` -> `p005` -> … (96 more)); \
         at most 100 are allowed"
    );
    let backward: Vec<(&str, &str)> = forward.iter().rev().copied().collect();
    let (message, code) = error(&backward);
    assert_eq!(code, "template::depth");
    assert_eq!(
        message,
        "templates/p098:1:1: blocks and partials nest 101 levels deep when `p098` renders \
         (through `p098` -> `p099` -> `p100` -> `p101` -> `p102` -> `p103` -> … (96 more)); \
         at most 100 are allowed"
    );
}

#[test]
fn partials_that_multiply_are_refused() {
    // Each level includes the next one twice: 2^20 expansions from 21 small files.
    let mut templates = Vec::new();
    for i in 0..20 {
        templates.push((
            format!("q{i:02}"),
            format!("{{{{> q{:02}}}}}\n{{{{> q{:02}}}}}\n", i + 1, i + 1),
        ));
    }
    templates.push(("q20".to_string(), "  a: '1'\n".to_string()));
    templates.reverse();
    let refs: Vec<(&str, &str)> = templates
        .iter()
        .map(|(n, s)| (n.as_str(), s.as_str()))
        .collect();
    let (message, code) = error(&refs);
    assert_eq!(code, "template::depth");
    assert_eq!(
        message,
        "templates/q11:1:1: rendering `q11` expands 1022 partials (partials that include \
         others several times multiply); at most 1000 are allowed"
    );
}

const PACK: &str = "apiVersion: switchyard.dev/v1alpha1
kind: RulePack
metadata:
  name: limits
  version: 0.1.0
spec:
  clusters:
    - name: source
      access: [read, write, writeStatus]
  scope:
    - cluster: source
      kinds:
        - apiVersion: v1
          kind: ConfigMap
      namespaces: [\"*\"]
";

fn load_diagnostics(templates: &[(&str, String)]) -> Vec<String> {
    let mut files = BTreeMap::from([("pack.yaml".to_string(), PACK.to_string())]);
    for (name, text) in templates {
        files.insert(format!("templates/{name}"), text.clone());
    }
    let result = load(&PackFiles {
        root: "limits".into(),
        files,
        shared_partials: BTreeMap::new(),
    });
    assert!(result.pack.is_none(), "the pack is refused");
    result.diagnostics.iter().map(ToString::to_string).collect()
}

#[test]
fn the_loader_refuses_a_pack_with_a_cycle_or_deep_blocks() {
    let lines = load_diagnostics(&[
        ("a.yaml.hbs", format!("{HEAD}{{{{> b.yaml.hbs}}}}\n")),
        ("b.yaml.hbs", "{{> a.yaml.hbs}}\n".to_string()),
    ]);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("limits/templates/b.yaml.hbs:1:1: error[")
                && l.ends_with(
                    "partial `b.yaml.hbs` includes itself through `a.yaml.hbs` -> `b.yaml.hbs`"
                )),
        "{lines:#?}"
    );
    let lines = load_diagnostics(&[("a.yaml.hbs", nested_ifs(20_000))]);
    assert!(
        lines.iter().any(
            |l| l.starts_with("limits/templates/a.yaml.hbs:4:769: error[")
                && l.ends_with("blocks nest more than 64 levels deep")
        ),
        "{lines:#?}"
    );
}

#[test]
fn the_deepest_allowed_render_does_not_overflow_the_stack() {
    // 64 nested blocks around a chain of 18 partials, 17 of them with a block: 99 levels, on a test thread's stack.
    let mut templates: Vec<(String, String)> = (0..18)
        .map(|i| {
            (
                format!("c{i:02}"),
                format!("{{{{#if true}}}}{{{{> c{:02}}}}}{{{{/if}}}}\n", i + 1),
            )
        })
        .collect();
    templates.last_mut().unwrap().1 = "  deep: '1'\n".to_string();
    templates.push((
        "a".to_string(),
        format!(
            "{HEAD}{}{{{{> c00}}}}\n{}\n",
            "{{#if true}}".repeat(64),
            "{{/if}}".repeat(64)
        ),
    ));
    let refs: Vec<(&str, &str)> = templates
        .iter()
        .map(|(n, s)| (n.as_str(), s.as_str()))
        .collect();
    let set = register(&refs).unwrap();
    assert_eq!(
        set.render("a", &json!({})).unwrap(),
        vec![json!({"kind": "ConfigMap", "data": {"a": "1", "deep": "1"}})]
    );
}

#[test]
fn many_templates_register_without_quadratic_checks() {
    // 5,000 templates that all include one shared partial, registered before and after it.
    let start = std::time::Instant::now();
    let mut set = TemplateSet::new(None);
    for i in 0..2_500 {
        set.add_template(&format!("t{i}"), "templates/t", "kind: A\n{{> common}}\n")
            .unwrap();
    }
    set.add_partial("common", "templates/common", "x: 1\n")
        .unwrap();
    for i in 2_500..5_000 {
        set.add_template(&format!("t{i}"), "templates/t", "kind: A\n{{> common}}\n")
            .unwrap();
    }
    eprintln!("5,000 templates registered in {:?}", start.elapsed());
    assert_eq!(
        set.render("t4999", &json!({})).unwrap(),
        vec![json!({"kind": "A", "x": 1})]
    );
}

#[test]
fn deep_expressions_the_prescan_misreads_still_fail_cleanly() {
    // A quote inside a path key (`[a"]`) makes the pre-scan see a string where handlebars
    // sees none; handlebars' parser has its own stack guard behind it.
    for n in [1_000, 100_000] {
        let src = format!(
            "x: {{{{len xs.[a\"] \"}}}}\" {}xs{}}}}}\n",
            "(len ".repeat(n),
            ")".repeat(n)
        );
        let (message, code) = error(&[("a", &src)]);
        assert_eq!(code, "template::syntax");
        assert!(
            message.ends_with("invalid handlebars syntax: stack limit reached"),
            "{message}"
        );
    }
}

#[test]
fn escapes_and_unclosed_comments_do_not_hide_blocks() {
    // Two backslashes escape each other: the `{{#if}}` after them is a real block.
    let escaped = format!(
        "{HEAD}{}  b: '2'\n{}\n",
        "\\\\{{#if true}}".repeat(20_000),
        "{{/if}}".repeat(20_000)
    );
    let (message, code) = error(&[("a", &escaped)]);
    assert_eq!(code, "template::depth");
    assert_eq!(
        message,
        "templates/a:4:899: blocks nest more than 64 levels deep"
    );
    // `{{!--` without `--}}` is a short comment that ends at the first `}}`.
    let unclosed = format!("{{{{!-- }}}}\n{}", nested_ifs(20_000));
    assert_eq!(error(&[("a", &unclosed)]).1, "template::depth");
}

#[test]
fn templates_too_large_to_parse_in_reasonable_time_are_refused() {
    // Handlebars locates each tag by counting lines from the start of its file: 12,000 tags
    // in 240 KB took six seconds to register. Refused before it starts.
    let blocks: String = (0..4_000)
        .map(|i| format!("{{{{#if a}}}}\n  k{i}: {{{{b}}}}\n{{{{/if}}}}\n"))
        .collect();
    let (message, code) = error(&[("a", &format!("{HEAD}{blocks}"))]);
    assert_eq!(code, "template::depth");
    assert_eq!(
        message,
        "templates/a: the templates are too large for handlebars to parse in reasonable time \
         (it counts lines from the start of a file for every tag): split large templates into \
         partials"
    );
    // The same tags spread over partials parse quickly.
    let mut set = TemplateSet::new(None);
    for p in 0..40 {
        let part: String = (0..100)
            .map(|i| format!("{{{{#if a}}}}\nk{i}: {{{{b}}}}\n{{{{/if}}}}\n"))
            .collect();
        set.add_partial(&format!("p{p}"), &format!("templates/p{p}"), &part)
            .unwrap();
    }
}
