//! Templates compiled into structure render exactly as their text does: for a corpus of
//! templates using every block, partial and helper the structure models, each rendered with
//! hundreds of generated contexts (hostile strings, every JSON type, missing values), the
//! structural render equals the text render, and the templates it cannot model render as
//! text, each with a note naming the construct and where it is.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers panic on purpose

use std::sync::Arc;

use serde_json::{Map, Value, json};
use switchyard_core::template::{Decider, TemplateSet};

/// A deterministic generator (an LCG, as the benchmark's).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Strings that would change YAML structure if they were text, that look like the render's
/// own placeholders and markers, or that YAML would read as another type.
const STRINGS: &[&str] = &[
    "web",
    "",
    "a: b",
    "- x",
    "---",
    "...",
    "{{x}}",
    "__syv_0__",
    "__syk_o_1__",
    "__syk_c_1__\nz: 1",
    "line\nbreak",
    "#comment",
    "'quoted'",
    "\"dq\"",
    "true",
    "3",
    "null",
    "~",
    "  padded  ",
    "[1, 2]",
    "{a: 1}",
    "&anchor",
    "*alias",
    "é✓",
    "0x1F",
    "1e3",
    "k",
];

fn scalar(rng: &mut Rng) -> Value {
    match rng.below(9) {
        0 => Value::Null,
        1 => Value::Bool(rng.below(2) == 0),
        2 => json!(rng.below(4)),
        3 => json!(-(rng.below(3) as i64) - 1),
        4 => json!([0.0, 1.5, -2.25, 1e300, 5e-324][rng.below(5) as usize]),
        5 => json!(u64::MAX - rng.below(2)),
        _ => Value::String(STRINGS[rng.below(STRINGS.len() as u64) as usize].to_owned()),
    }
}

fn value(rng: &mut Rng, depth: u32) -> Value {
    match rng.below(if depth == 0 { 1 } else { 4 }) {
        0 | 1 => scalar(rng),
        2 => Value::Array((0..rng.below(4)).map(|_| value(rng, depth - 1)).collect()),
        _ => {
            let mut map = Map::new();
            for _ in 0..rng.below(4) {
                let key = ["k", "a", "name", "0", "x y", "a: b", "__syv_1__"]
                    [rng.below(7) as usize]
                    .to_owned();
                map.insert(key, value(rng, depth - 1));
            }
            Value::Object(map)
        }
    }
}

/// A context: each of the names the corpus reads, present or not, of any shape.
fn context(rng: &mut Rng) -> Value {
    let mut map = Map::new();
    for name in ["a", "b", "c", "n", "name", "list", "obj", "nested"] {
        if rng.below(6) != 0 {
            map.insert(name.to_owned(), value(rng, 2));
        }
    }
    // Shapes the templates expect, often enough to take the happy paths.
    if rng.below(2) == 0 {
        map.insert(
            "list".to_owned(),
            Value::Array((0..rng.below(4)).map(|_| scalar(rng)).collect()),
        );
    }
    if rng.below(2) == 0 {
        let mut obj = Map::new();
        obj.insert("k".to_owned(), scalar(rng));
        for key in ["team", "x y"] {
            if rng.below(2) == 0 {
                obj.insert(key.to_owned(), scalar(rng));
            }
        }
        map.insert("obj".to_owned(), Value::Object(obj));
    }
    if rng.below(2) == 0 {
        map.insert("name".to_owned(), Value::String("web".to_owned()));
    }
    Value::Object(map)
}

const PARTIALS: &[(&str, &str)] = &[
    (
        "labels",
        "app: {{name}}\n{{#each extra}}\n{{@key}}: {{this}}\n{{/each}}\n{{> inner}}\n",
    ),
    ("inner", "managed-by: switchyard\nfrom: {{name}}\n"),
    (
        "ports",
        "{{#each ports}}\n- containerPort: {{this}}\n  index: {{@index}}\n{{/each}}\n",
    ),
];

/// Templates the structure models.
const STRUCTURED: &[(&str, &str)] = &[
    (
        "conditions",
        "kind: A
{{#if a}}
x: {{a}}
{{else if b}}
y: {{b}}
{{else}}
z: none
{{/if}}
{{#unless (eq c 1)}}
notOne: {{c}}
{{/unless}}
{{#if n includeZero=true}}
n: {{n}}
{{/if}}
meta:
  name: {{name}}
{{#if (and a (not b))}}
  aOnly: true
{{/if}}
",
    ),
    (
        "iteration",
        "kind: B
items:
{{#each list as |item i|}}
  - index: {{i}}
    first: {{@first}}
    last: {{@last}}
    value: {{item}}
    parent: {{../name}}
{{/each}}
map:
{{#each obj}}
  {{@key}}: {{this}}
{{/each}}
pairs:
{{#each obj as |v k|}}
- key: '{{k}}'
  value: \"{{v}}\"
  at: {{@index}}
{{else}}
- none
{{/each}}
",
    ),
    (
        "scopes",
        "kind: C
{{#with nested}}
inner: {{this}}
deep: {{../name}}
root: {{@root.name}}
{{else}}
inner: none
{{/with}}
{{#with obj as |o|}}
team: {{o.team}}
{{/with}}
",
    ),
    (
        "compare",
        "kind: D
eq: {{eq a b}}
ne: {{ne a b}}
gt: {{gt a b}}
gte: {{gte a b}}
lt: {{lt a b}}
lte: {{lte a b}}
",
    ),
    (
        "logic",
        "kind: D
and: {{and a b c}}
or: {{or a b}}
not: {{not a}}
{{#if (or (eq a 1) (gt b 2))}}
either: true
{{/if}}
",
    ),
    (
        "strings",
        "kind: D
default: {{default a \"fallback\"}}
lower: \"{{lower name}}\"
upper: {{upper name}}
trunc: {{trunc name 2}}
tail: {{trunc name -1}}
json: {{toJson obj}}
decided: {{decide \"sizes\" tier=name}}
",
    ),
    (
        "lookups",
        "kind: D
len: {{len list}}
lookup: {{lookup obj \"k\"}}
join: {{join list \"-\"}}
",
    ),
    (
        "scalars",
        "kind: D
text: pre-{{name}}-post {{a}}
quoted: \"{{a}}\"
single: '{{b}}'
block: |
  {{name}} and {{a}}
tagged: !!str {{n}}
{{name}}: key from a value
",
    ),
    (
        "documents",
        "{{#if a}}
kind: E
x: 1
{{/if}}
---
kind: F
{{#each list}}
item{{@index}}: {{this}}
{{/each}}
---
{{nested}}
",
    ),
    (
        "partials",
        "kind: G
metadata:
  labels:
    {{> labels name=name extra=obj}}
spec:
  ports:
    {{> ports ports=list}}
  same:
    {{> inner}}
{{#each list}}
  item{{@index}}:
    {{> inner name=this}}
{{/each}}
",
    ),
    (
        "sequences",
        "kind: H
flow: [{{a}}, {{b}}, fixed]
map: {x: {{a}}}
list:
- fixed
{{#each list}}
- {{this}}
{{/each}}
{{#if a}}
- last
{{/if}}
nested:
  -
{{#each obj}}
    {{@key}}: {{this}}
{{/each}}
",
    ),
    (
        "crlf",
        "kind: T\r\nitems:\r\n{{#each list}}\r\n  - {{this}}\r\n{{/each}}\r\nname: {{name}}\r\n",
    ),
];

/// Templates the structure does not model, with the note each gets.
const TEXT: &[(&str, &str, &str)] = &[
    (
        "inline",
        "kind: I\nname: {{#if a}}x{{else}}y{{/if}}\n",
        "templates/inline:2:7: template `inline` renders as text, not from compiled \
         structure: the block here does not stand on lines of its own",
    ),
    (
        "flow",
        "kind: J\nlist: [\n{{#each list}}\n  {{this}},\n{{/each}}\n]\n",
        "templates/flow:3:1: template `flow` renders as text, not from compiled \
         structure: the block here does not wrap whole YAML entries: its entries are in a flow \
         collection (`[…]` or `{…}`)",
    ),
    (
        "scalar",
        "kind: K\nscript: |\n  a\n{{#if a}}\n  b\n{{/if}}\n  c\n",
        "templates/scalar: template `scalar` renders as text, not from compiled \
         structure: a block or partial starts or ends inside a multi-line scalar",
    ),
    (
        "each-document",
        "{{#each list}}\n---\nkind: L\nname: {{this}}\n{{/each}}\n",
        "templates/each-document:1:1: template `each-document` renders as text, not from \
         compiled structure: the block here does not wrap whole YAML entries: it holds a \
         document marker (`---`)",
    ),
    (
        "value",
        "kind: M\nname:\n{{#if a}}\n  x\n{{/if}}\n",
        "templates/value:3:1: template `value` renders as text, not from compiled \
         structure: the block here does not wrap whole YAML entries: its lines hold a value, \
         not whole entries",
    ),
    (
        "log",
        "kind: N\n{{log a}}\nx: 1\n",
        "templates/log:2:1: template `log` renders as text, not from compiled \
         structure: `{{log}}` renders only as text",
    ),
    (
        "empty",
        "kind: O\n{{#if a}}\n{{/if}}\nx: 1\n",
        "templates/empty:2:1: template `empty` renders as text, not from compiled \
         structure: the block here does not wrap whole YAML entries: it renders no YAML entries",
    ),
    (
        "comment",
        "kind: R\n# replicas: {{a}}\nx: 1\n",
        "templates/comment: template `comment` renders as text, not from compiled structure: a \
         value is written where the YAML does not read it (a comment): handlebars evaluates it \
         all the same",
    ),
    (
        // Found by the fuzzer: YAML stops reading at a NUL, handlebars does not, and which
        // text follows the NUL depends on the blocks.
        "nul",
        "kind: S\nname: a\u{0}b {{a}}\n",
        "templates/nul: template `nul` renders as text, not from compiled structure: it holds \
         a NUL character, where YAML stops reading",
    ),
    (
        "nul-in-block",
        "{{#if a}}\n- x\u{0}\n{{/if}}\nb c\n",
        "templates/nul-in-block: template `nul-in-block` renders as text, not from compiled \
         structure: it holds a NUL character, where YAML stops reading",
    ),
    (
        "split",
        "kind: P\n{{#if a}}\nx:\n{{/if}}\n  y: 1\n",
        "templates/split:2:1: template `split` renders as text, not from compiled \
         structure: the block here does not wrap whole YAML entries: an entry it starts \
         continues after it",
    ),
];

fn set() -> TemplateSet {
    let decider: Decider = Arc::new(|table, args| Ok(json!({"table": table, "args": args})));
    let mut set = TemplateSet::new(Some(decider));
    for (name, source) in PARTIALS {
        set.add_partial(name, &format!("templates/{name}"), source)
            .unwrap();
    }
    for (name, source) in STRUCTURED {
        set.add_template(name, &format!("templates/{name}"), source)
            .unwrap();
    }
    for (name, source, _) in TEXT {
        set.add_template(name, &format!("templates/{name}"), source)
            .unwrap();
    }
    set
}

/// Contexts per template: `SWITCHYARD_TEMPLATE_DIFF_COUNT` (default 400), for a longer run
/// on demand.
fn count() -> usize {
    std::env::var("SWITCHYARD_TEMPLATE_DIFF_COUNT")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(400)
}

#[test]
fn structural_renders_equal_text_renders() {
    let set = set();
    let count = count();
    let mut rng = Rng(7);
    for (name, _) in STRUCTURED {
        assert!(set.is_structured(name), "{name} is not structured");
        let mut structured = 0;
        for _ in 0..count {
            let context = context(&mut rng);
            let text = set.render_as_text(name, &context);
            let rendered = set.render(name, &context);
            assert_eq!(rendered, text, "{name} with {context}");
            if let Some(documents) = set.render_structured(name, &context) {
                assert_eq!(Ok(documents), text, "{name} with {context}");
                structured += 1;
            }
        }
        // The happy paths are common enough: the structure is what is tested.
        eprintln!("{name}: {structured} of {count} renders structural");
        assert!(
            structured > count / 5,
            "{name}: only {structured} of {count} renders structural"
        );
    }
}

#[test]
fn what_the_structure_does_not_model_renders_as_text_with_a_note() {
    let set = set();
    let notes: Vec<String> = set
        .text_rendered()
        .iter()
        .map(ToString::to_string)
        .collect();
    let mut want: Vec<&str> = TEXT.iter().map(|(_, _, note)| *note).collect();
    want.sort_unstable();
    let mut got: Vec<&str> = notes.iter().map(String::as_str).collect();
    got.sort_unstable();
    assert_eq!(got, want);
    let mut rng = Rng(11);
    for (name, _, _) in TEXT {
        assert!(!set.is_structured(name));
        for _ in 0..50 {
            let context = context(&mut rng);
            assert_eq!(set.render_structured(name, &context), None);
            assert_eq!(
                set.render(name, &context),
                set.render_as_text(name, &context)
            );
        }
    }
}

#[test]
fn hostile_values_stay_values() {
    let set = set();
    for hostile in STRINGS {
        let context = json!({"a": hostile, "b": hostile, "name": hostile, "list": [hostile],
                             "obj": {"k": hostile, "team": hostile}, "c": 2, "n": 0,
                             "nested": {"n": hostile}});
        for (name, _) in STRUCTURED {
            let structural = set.render_structured(name, &context);
            let text = set.render_as_text(name, &context);
            if let Some(documents) = structural {
                assert_eq!(Ok(documents), text, "{name} with {hostile:?}");
            }
        }
        let documents = set.render_structured("iteration", &context).unwrap();
        assert_eq!(documents[0]["items"][0]["value"], json!(hostile));
        assert_eq!(documents[0]["map"]["k"], json!(hostile));
    }
}

#[test]
fn a_collection_its_blocks_leave_empty_is_null() {
    let set = set();
    let documents = set
        .render_structured("iteration", &json!({"list": [], "obj": {}, "name": "w"}))
        .unwrap();
    assert_eq!(
        documents,
        vec![json!({"kind": "B", "items": null, "map": null, "pairs": ["none"]})]
    );
    // A document whose entries all come from a false block is no document.
    let documents = set
        .render_structured(
            "documents",
            &json!({"a": false, "list": [], "nested": null}),
        )
        .unwrap();
    assert_eq!(documents, vec![json!({"kind": "F"})]);
}

#[test]
fn registering_again_compiles_again() {
    let mut set = set();
    assert!(set.is_structured("conditions"));
    set.add_template(
        "conditions",
        "templates/conditions",
        "kind: Q\nx: {{#if a}}1{{/if}}\n",
    )
    .unwrap();
    assert!(!set.is_structured("conditions"));
    // A partial that changes changes the templates that include it.
    set.add_partial("inner", "templates/inner", "a: {{#if name}}x{{/if}}\n")
        .unwrap();
    assert!(!set.is_structured("partials"));
    assert!(set.text_rendered().iter().any(|e| {
        e.to_string()
            .starts_with("templates/inner:1:4: template `partials`")
    }));
}

#[test]
fn a_template_whose_partials_expand_to_too_much_text_renders_as_text() {
    // 30 x 30 expansions of 20 KiB: 18 MiB of text per render, past the 16 MiB the
    // compilation looks at.
    let line = "key: value-value-value-value\n";
    let big: String = line.repeat(20 * 1024 / line.len());
    let mut set = TemplateSet::new(None);
    set.add_partial("big", "templates/big", &big).unwrap();
    set.add_partial("thirty", "templates/thirty", &"{{> big}}\n".repeat(30))
        .unwrap();
    set.add_template(
        "t",
        "templates/t",
        &format!("kind: A\n{}", "{{> thirty}}\n".repeat(30)),
    )
    .unwrap();
    let notes: Vec<String> = set
        .text_rendered()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        notes,
        [
            "templates/t: template `t` renders as text, not from compiled structure: with its \
          partials it expands to more than 16 MiB"
        ]
    );
}
