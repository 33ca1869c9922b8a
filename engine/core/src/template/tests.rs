use std::sync::Mutex;

use serde_json::{Map, json};

use super::*;

fn set_with(partials: &[(&str, &str)], name: &str, source: &str) -> TemplateSet {
    let mut set = TemplateSet::new(None);
    for (pname, psource) in partials {
        set.add_partial(pname, &format!("templates/{pname}.yaml.hbs"), psource)
            .unwrap();
    }
    set.add_template(name, &format!("{name}.yaml.hbs"), source)
        .unwrap();
    set
}

fn render(source: &str, context: &Value) -> Result<Vec<Value>, TemplateError> {
    set_with(&[], "t", source).render("t", context)
}

fn err(file: &str, line: usize, column: usize, message: &str) -> TemplateError {
    TemplateError {
        code: "template::syntax",
        file: file.to_owned(),
        line: Some(line),
        column: Some(column),
        message: message.to_owned(),
    }
}

fn render_err(file: &str, line: usize, column: usize, message: &str) -> TemplateError {
    TemplateError {
        code: "template::render",
        ..err(file, line, column, message)
    }
}

const DEPLOYMENT: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{self.metadata.name}}
  namespace: {{vars.ns}}
  labels: {{self.metadata.labels}}
spec:
  replicas: {{vars.replicas}}
  selector:
    matchLabels:
      app: {{self.metadata.name}}
      canary: {{self.metadata.labels.canary}}
  template:
    metadata:
      labels:
        {{> common/labels}}
        tier: backend
    spec:
      containers:
{{#each self.spec.containers}}
        - name: {{name}}
          image: \"{{image}}:{{@root.vars.tag}}\"
          ports:
            {{> container/ports}}
{{/each}}
";

const LABELS: &str = "\
app.kubernetes.io/name: {{self.metadata.name}}
{{#each vars.extraLabels}}
{{@key}}: {{this}}
{{/each}}
app.kubernetes.io/managed-by: switchyard
";

const PORTS: &str = "\
{{#each ports}}
- containerPort: {{this}}
{{/each}}
";

fn deployment_context() -> Value {
    json!({
        "self": {
            "metadata": {"name": "web", "labels": {"app": "web", "canary": "true"}},
            "spec": {"containers": [
                {"name": "app", "image": "nginx", "ports": [80, 443]},
                {"name": "sidecar", "image": "envoy", "ports": [9901]},
            ]},
        },
        "vars": {"ns": "prod", "replicas": 3, "tag": "1.27", "extraLabels": {"team": "infra"}},
    })
}

#[test]
fn deployment() {
    let set = set_with(
        &[("common/labels", LABELS), ("container/ports", PORTS)],
        "deployment",
        DEPLOYMENT,
    );
    assert!(set.has_template("deployment"));
    assert!(!set.has_template("common/labels"));
    let docs = set.render("deployment", &deployment_context()).unwrap();
    assert_eq!(
        docs,
        vec![json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "web",
                "namespace": "prod",
                "labels": {"app": "web", "canary": "true"},
            },
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web", "canary": "true"}},
                "template": {
                    "metadata": {"labels": {
                        "app.kubernetes.io/name": "web",
                        "team": "infra",
                        "app.kubernetes.io/managed-by": "switchyard",
                        "tier": "backend",
                    }},
                    "spec": {"containers": [
                        {
                            "name": "app",
                            "image": "nginx:1.27",
                            "ports": [{"containerPort": 80}, {"containerPort": 443}],
                        },
                        {
                            "name": "sidecar",
                            "image": "envoy:1.27",
                            "ports": [{"containerPort": 9901}],
                        },
                    ]},
                },
            },
        })]
    );
}

const HOSTILE: &[&str] = &[
    "evil\nkind: Secret",
    "a: b",
    "x\n---\napiVersion: v1\nkind: Secret",
    "{{self.secret}}",
    "' \" #comment",
    "&a *a !!str",
    "  leading",
    "\t",
    "__syv_0__",
    "- item",
    "[1, 2]",
    "{a: 1}",
    "}}{{",
    "|\n  block",
    "? key",
    "%YAML 1.2",
    "...",
    "\\\"",
    "ünïcødé \u{2028} \u{85} \u{feff} 🚀",
    "null",
    "true",
    "3",
    "",
    "trailing ",
    "x #y",
    "a\r\nb: c",
    "nul\0byte",
    "\\n",
];

const HOSTILE_TEMPLATE: &str = "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{x}}
  double: \"pre-{{x}}\"
  single: 'pre-{{x}}'
  plain: pre-{{x}}-post
  quoted: \"{{x}}\"
  flow: [{{x}}, \"{{x}}\", pre-{{x}}]
  map: { inner: {{x}} }
  {{x}}: key
  # {{x}}
data:
  script: |
    echo {{x}}
  labels:
{{#each labels}}
    {{@key}}: {{this}}
{{/each}}
";

#[test]
fn hostile_values_stay_verbatim() {
    let set = set_with(&[], "t", HOSTILE_TEMPLATE);
    for &x in HOSTILE {
        let ctx = json!({
            "x": x,
            "labels": {x: x, "safe": "value"},
            "self": {"secret": "leaked"},
        });
        let mut metadata = json!({
            "name": x,
            "double": format!("pre-{x}"),
            "single": format!("pre-{x}"),
            "plain": format!("pre-{x}-post"),
            "quoted": x,
            "flow": [x, x, format!("pre-{x}")],
            "map": {"inner": x},
        });
        metadata[x] = json!("key");
        let want = vec![json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": metadata,
            "data": {
                "script": format!("echo {x}\n"),
                "labels": {x: x, "safe": "value"},
            },
        })];
        assert_eq!(set.render("t", &ctx).unwrap(), want, "value {x:?}");
    }
}

#[test]
fn typed_values() {
    let docs = render(
        "\
kind: T
int: {{n}}
float: {{f}}
bool: {{b}}
null: {{z}}
str3: {{s3}}
strTrue: {{st}}
list: {{l}}
map: {{m}}
quotedInt: \"{{n}}\"
quotedMap: '{{m}}'
mixed: {{n}}-{{b}}-{{z}}-{{l}}
two: {{n}}{{n}}
author: [1, 1.5, true, ~, yes, 0x10, \"2\"]
tagged: !!str {{n}}
json: {{toJson m}}
",
        &json!({"n": 3, "f": 1.5, "b": true, "z": null, "s3": "3", "st": "true",
                "l": [1, "a"], "m": {"k": [1, {"x": null}]}}),
    )
    .unwrap();
    assert_eq!(
        docs,
        vec![json!({
            "kind": "T",
            "int": 3,
            "float": 1.5,
            "bool": true,
            "null": null,
            "str3": "3",
            "strTrue": "true",
            "list": [1, "a"],
            "map": {"k": [1, {"x": null}]},
            "quotedInt": "3",
            "quotedMap": "{\"k\":[1,{\"x\":null}]}",
            "mixed": "3-true--[1,\"a\"]",
            "two": "33",
            "author": [1, 1.5, true, null, "yes", 16, "2"],
            "tagged": "3",
            "json": {"k": [1, {"x": null}]},
        })]
    );
}

#[test]
fn whole_document_from_a_value() {
    let docs = render(
        "---\n{{obj}}\n---\nkind: B\n",
        &json!({"obj": {"kind": "A", "spec": {"a": "b\n---\nkind: C"}}}),
    )
    .unwrap();
    assert_eq!(
        docs,
        vec![
            json!({"kind": "A", "spec": {"a": "b\n---\nkind: C"}}),
            json!({"kind": "B"})
        ]
    );
    let e = render("{{s}}\n", &json!({"s": "kind: A"})).unwrap_err();
    assert_eq!(e.file, "t.yaml.hbs");
    assert_eq!(
        e.message,
        "rendered document 1 is a string, expected a mapping (rendered line 1)"
    );
}

#[test]
fn strict_missing_variable() {
    let src = "kind: A\nspec:\n  replicas: {{vars.replicsa}}\n";
    let e = render(src, &json!({"vars": {"replicas": 1}})).unwrap_err();
    assert_eq!(
        e,
        render_err("t.yaml.hbs", 3, 13, "variable `vars.replicsa` not found")
    );
    assert_eq!(
        e.to_string(),
        "t.yaml.hbs:3:13: variable `vars.replicsa` not found"
    );

    // Inside a block, in a helper argument, in a partial (named by its own file).
    let e = render(
        "kind: A\n{{#each items}}\n- {{nmae}}\n{{/each}}\n",
        &json!({"items": [{"name": "a"}]}),
    )
    .unwrap_err();
    assert_eq!(
        e,
        render_err("t.yaml.hbs", 3, 3, "variable `nmae` not found")
    );
    let e = render("kind: A\nname: {{lower vars.nmae}}\n", &json!({"vars": {}})).unwrap_err();
    assert_eq!(
        e,
        render_err("t.yaml.hbs", 2, 7, "variable `vars.nmae` not found")
    );
    let set = set_with(
        &[("common/labels", "a: 1\nb: {{vars.missing}}\n")],
        "t",
        "kind: A\nlabels:\n  {{> common/labels}}\n",
    );
    let e = set.render("t", &json!({"vars": {}})).unwrap_err();
    assert_eq!(
        e,
        render_err(
            "templates/common/labels.yaml.hbs",
            2,
            4,
            "variable `vars.missing` not found"
        )
    );
    let e = render(
        "kind: A\nx: {{#if (eq vars.x 1)}}a{{/if}}\n",
        &json!({"vars": {}}),
    )
    .unwrap_err();
    assert_eq!(e.line, Some(2));
    assert_eq!(e.column, Some(4));
}

#[test]
fn optional_values_through_blocks() {
    let src = "\
kind: A
{{#if vars.missing}}
bad: 1
{{/if}}
{{#unless vars.missing}}
unless: ok
{{/unless}}
{{#if vars.present}}
if: {{vars.present}}
{{else}}
bad: 2
{{/if}}
{{#each vars.missing}}
bad: 3
{{/each}}
{{#with vars.missing}}
bad: 4
{{/with}}
{{#each vars.empty}}
bad: 5
{{/each}}
{{#with vars.missing}}
bad: 6
{{else}}
with: fallback
{{/with}}
{{#with vars.obj}}
withName: {{name}}
{{/with}}
default: {{default vars.missing \"dflt\"}}
defaultEmpty: {{default vars.empty_str \"dflt\"}}
defaultZero: {{default vars.zero 5}}
";
    let docs = render(
        src,
        &json!({"vars": {"present": "p", "empty": [], "obj": {"name": "n"}, "empty_str": "", "zero": 0}}),
    )
    .unwrap();
    assert_eq!(
        docs,
        vec![json!({
            "kind": "A",
            "unless": "ok",
            "if": "p",
            "with": "fallback",
            "withName": "n",
            "default": "dflt",
            "defaultEmpty": "dflt",
            "defaultZero": 0,
        })]
    );
}

#[test]
fn documents() {
    let src = "\
---
{{#if vars.a}}
kind: A
{{/if}}
---
---
# only a comment
---
kind: B
...
---
~
";
    let docs = render(src, &json!({"vars": {"a": false}})).unwrap();
    assert_eq!(docs, vec![json!({"kind": "B"})]);
    assert_eq!(
        render("{{#if x}}kind: A{{/if}}", &json!({"x": false})).unwrap(),
        Vec::<Value>::new()
    );
    let e = render("kind: A\n---\n- a\n- b\n", &json!({})).unwrap_err();
    assert_eq!(
        e,
        TemplateError {
            code: "template::syntax",
            file: "t.yaml.hbs".to_owned(),
            line: None,
            column: None,
            message: "rendered document 2 is a list, expected a mapping (rendered line 3)"
                .to_owned(),
        }
    );
    assert_eq!(
        e.to_string(),
        "t.yaml.hbs: rendered document 2 is a list, expected a mapping (rendered line 3)"
    );
    let e = render("a: 1\n{{k}}: 2\n", &json!({"k": "a"})).unwrap_err();
    assert_eq!(e.message, "duplicate mapping key \"a\" (rendered line 2)");
    let e = render("a: [\n", &json!({})).unwrap_err();
    assert!(
        e.message.starts_with("rendered output is not valid YAML: "),
        "{e}"
    );
}

#[test]
fn registration_errors() {
    let mut set = TemplateSet::new(None);
    let reg =
        |set: &mut TemplateSet, src: &str| set.add_template("t", "t.yaml.hbs", src).unwrap_err();
    let raw = "raw output (`{{{…}}}` or `{{&…}}`) is not allowed: values are inserted as typed \
               YAML values, write `{{…}}`";
    assert_eq!(
        reg(&mut set, "kind: A\nname: {{{x}}}\n"),
        err("t.yaml.hbs", 2, 7, raw)
    );
    assert_eq!(
        reg(&mut set, "kind: A\n{{#if a}}\n  name: {{& x}}\n{{/if}}\n"),
        err("t.yaml.hbs", 3, 9, raw)
    );
    assert_eq!(
        reg(&mut set, "kind: A\nname: {{~{x}~}}\n"),
        err("t.yaml.hbs", 2, 7, raw)
    );
    assert_eq!(
        reg(&mut set, "kind: A\nname: x__syv_0__\n"),
        err(
            "t.yaml.hbs",
            2,
            8,
            "`__sy` is reserved and may not appear in a template"
        )
    );
    assert_eq!(
        reg(&mut set, "a: {{__sy_value x}}"),
        err(
            "t.yaml.hbs",
            1,
            6,
            "`__sy` is reserved and may not appear in a template"
        )
    );
    assert_eq!(
        reg(&mut set, "a: 1\nb: {{#lower x}}{{/lower}}\n"),
        err(
            "t.yaml.hbs",
            2,
            4,
            "`{{#lower}}` is not allowed: the block helpers are `if`, `unless`, `each`, `with` and `raw`"
        )
    );
    assert_eq!(
        reg(&mut set, "a: {{frobnicate x}}\n"),
        err("t.yaml.hbs", 1, 4, "unknown helper `frobnicate`")
    );
    assert_eq!(
        reg(&mut set, "a: {{lower (frobnicate x)}}\n"),
        err("t.yaml.hbs", 1, 4, "unknown helper `frobnicate`")
    );
    assert_eq!(
        reg(&mut set, "a: 1\n{{> (lookup this \"p\")}}\n"),
        err("t.yaml.hbs", 2, 1, "partial names must be static")
    );
    let e = reg(&mut set, "a: 1\nb: {{#if x}}\n");
    assert_eq!((e.file.as_str(), e.line.is_some()), ("t.yaml.hbs", true));
    assert!(e.message.starts_with("invalid handlebars syntax"), "{e}");
    assert!(!set.has_template("t"));
}

#[test]
fn string_helpers() {
    let docs = render(
        "\
kind: A
join: {{join l \",\"}}
joinDefault: {{join l}}
lower: {{lower s}}
upper: {{upper s}}
trunc: {{trunc long 5}}
truncNeg: {{trunc long -3}}
truncShort: {{trunc s 63}}
nested: {{upper (trunc (lower s) 2)}}
len: {{len l}}
eq: {{eq s \"MiXed\"}}
lookup: {{lookup m \"k\"}}
",
        &json!({"l": ["a", 1, true], "s": "MiXed", "long": "abcdéfgh", "m": {"k": "v"}}),
    )
    .unwrap();
    assert_eq!(
        docs,
        vec![json!({
            "kind": "A",
            "join": "a,1,true",
            "joinDefault": "a,1,true",
            "lower": "mixed",
            "upper": "MIXED",
            "trunc": "abcdé",
            "truncNeg": "fgh",
            "truncShort": "MiXed",
            "nested": "MI",
            "len": 3,
            "eq": true,
            "lookup": "v",
        })]
    );
    let e = render("kind: A\nx: {{join s}}\n", &json!({"s": "x"})).unwrap_err();
    assert_eq!(
        e,
        render_err(
            "t.yaml.hbs",
            2,
            4,
            "helper `join` expects a list, got a string"
        )
    );
}

#[test]
fn decide_helper() {
    type Calls = Mutex<Vec<(String, Map<String, Value>)>>;
    let calls: Arc<Calls> = Arc::default();
    let seen = Arc::clone(&calls);
    let decider: Decider = Arc::new(move |table, args| {
        seen.lock().unwrap().push((table.to_owned(), args.clone()));
        match table {
            "sizes" => Ok(json!({"cpu": "500m", "memory": "1Gi"})),
            _ => Err(format!("no table named `{table}`")),
        }
    });
    let mut set = TemplateSet::new(Some(decider));
    set.add_template(
        "t",
        "t.yaml.hbs",
        "kind: A\nresources: {{decide \"sizes\" tier=vars.tier replicas=vars.n env=\"prod\"}}\n",
    )
    .unwrap();
    let docs = set
        .render("t", &json!({"vars": {"tier": "gold", "n": 3}}))
        .unwrap();
    assert_eq!(
        docs,
        vec![json!({"kind": "A", "resources": {"cpu": "500m", "memory": "1Gi"}})]
    );
    let mut want = Map::new();
    want.insert("tier".to_owned(), json!("gold"));
    want.insert("replicas".to_owned(), json!(3));
    want.insert("env".to_owned(), json!("prod"));
    assert_eq!(*calls.lock().unwrap(), vec![("sizes".to_owned(), want)]);

    set.add_template("u", "u.yaml.hbs", "kind: A\nx: {{decide \"nope\" a=1}}\n")
        .unwrap();
    assert_eq!(
        set.render("u", &json!({})).unwrap_err(),
        render_err(
            "u.yaml.hbs",
            2,
            4,
            "decision table `nope`: no table named `nope`"
        )
    );
    let e = render("kind: A\nx: {{decide \"sizes\"}}\n", &json!({})).unwrap_err();
    assert_eq!(
        e.message,
        "helper `decide`: no decision tables are available (table `sizes`)"
    );
}

#[test]
fn referenced_paths() {
    let set = set_with(
        &[("common/labels", LABELS)],
        "t",
        "\
name: {{self.metadata.name}}
ns: {{vars.ns}}
{{#each self.spec.containers}}{{name}} {{@root.vars.x}}{{/each}}
{{#if (eq vars.mode \"a\")}}
mode: {{lower this.vars.mode}}
{{/if}}
{{#with self.spec}}{{replicas}}{{else}}{{vars.fallback}}{{/with}}
  {{> common/labels}}
",
    );
    let got: Vec<(String, usize, usize)> = set
        .referenced_paths("t")
        .into_iter()
        .map(|p| (p.path.join("."), p.line, p.column))
        .collect();
    let want: Vec<(String, usize, usize)> = [
        ("self.metadata.name", 1, 7),
        ("vars.ns", 2, 5),
        ("self.spec.containers", 3, 1),
        ("vars.x", 3, 40),
        ("vars.mode", 4, 1),
        ("vars.mode", 5, 7),
        ("self.spec", 7, 1),
        ("vars.fallback", 7, 40),
        ("self.metadata.name", 8, 3),
        ("vars.extraLabels", 8, 3),
    ]
    .into_iter()
    .map(|(p, l, c)| (p.to_owned(), l, c))
    .collect();
    assert_eq!(got, want);
    assert!(set.referenced_paths("nope").is_empty());
}

#[test]
fn partial_with_hash_and_context() {
    let set = set_with(
        &[("kv", "{{key}}: {{value}}\n")],
        "t",
        "kind: A\nitems:\n  {{> kv key=vars.k value=vars.v}}\n  {{> kv vars.pair}}\n",
    );
    let ctx = json!({"vars": {"k": "a", "v": 1, "pair": {"key": "b", "value": "x: y"}}});
    assert_eq!(
        set.render("t", &ctx).unwrap(),
        vec![json!({"kind": "A", "items": {"a": 1, "b": "x: y"}})]
    );
    let got: Vec<String> = set
        .referenced_paths("t")
        .into_iter()
        .map(|p| p.path.join("."))
        .collect();
    assert_eq!(got, ["vars.k", "vars.v", "vars.pair"]);
}

#[test]
fn render_errors() {
    let set = set_with(&[("p", "a: 1\n")], "t", "kind: A\n{{> missing}}\n");
    assert_eq!(
        set.render("t", &json!({})).unwrap_err(),
        render_err("t.yaml.hbs", 2, 1, "partial `missing` not found")
    );
    assert_eq!(
        set.render("p", &json!({})).unwrap_err().message,
        "template `p` not found"
    );
}

#[test]
fn handlebars_constructs() {
    let src = "\
kind: A
{{#*inline \"row\"}}
{{k}}: {{v}}
{{/inline}}
{{#if vars.a}}
chain: a
{{else if vars.b}}
chain: {{vars.b}}
{{else}}
chain: none
{{/if}}
{{#each vars.list as |item idx|}}
item{{idx}}: {{item}}
{{/each}}
rows:
  {{> row k=\"x\" v=vars.b}}
raw: \"{{{{raw}}}}{{not a value}}{{{{/raw}}}}\"
tight: [ {{~vars.b~}} ]
{{! a comment }}
{{!-- a {{long}} comment --}}
escaped: \"\\{{vars.b}}\"
";
    let docs = render(
        src,
        &json!({"vars": {"a": false, "b": "b: x", "list": ["p", "q"]}}),
    )
    .unwrap();
    assert_eq!(
        docs,
        vec![json!({
            "kind": "A",
            "chain": "b: x",
            "item0": "p",
            "item1": "q",
            "rows": {"x": "b: x"},
            "raw": "{{not a value}}",
            "tight": ["b: x"],
            "escaped": "{{vars.b}}",
        })]
    );
    let e = render(
        "kind: A\n{{#if a}}\n{{else if (eq b 1)}}\n{{/if}}\n",
        &json!({"a": false}),
    )
    .unwrap_err();
    assert_eq!(e.line, Some(2));
    assert!(e.message.starts_with("helper `eq`"), "{e}");
}

#[test]
fn concurrent_renders() {
    let set = set_with(
        &[],
        "t",
        "kind: A\nname: {{name}}\nn: {{n}}\nlist: {{list}}\n",
    );
    std::thread::scope(|scope| {
        for t in 0..4 {
            let set = &set;
            scope.spawn(move || {
                for i in 0..50 {
                    let name = format!("t{t}-{i}");
                    let docs = set
                        .render("t", &json!({"name": name, "n": i, "list": [t, i]}))
                        .unwrap();
                    assert_eq!(
                        docs,
                        vec![json!({"kind": "A", "name": name, "n": i, "list": [t, i]})]
                    );
                }
            });
        }
    });
}

#[test]
fn decider_may_render_templates() {
    let inner = set_with(&[], "inner", "kind: Inner\nv: {{v}}\n");
    let decider: Decider = Arc::new(move |_, args| {
        let docs = inner
            .render("inner", &Value::Object(args.clone()))
            .map_err(|e| e.to_string())?;
        Ok(docs.into_iter().next().unwrap_or(Value::Null))
    });
    let mut set = TemplateSet::new(Some(decider));
    set.add_template(
        "t",
        "t.yaml.hbs",
        "kind: A\nbefore: {{a}}\nnested: {{decide \"x\" v=b}}\nafter: {{c}}\n",
    )
    .unwrap();
    assert_eq!(
        set.render("t", &json!({"a": 1, "b": "two", "c": [3]}))
            .unwrap(),
        vec![
            json!({"kind": "A", "before": 1, "nested": {"kind": "Inner", "v": "two"}, "after": [3]})
        ]
    );
    // A failed render leaves no table behind.
    let e = set.render("t", &json!({"a": 1, "b": "two"})).unwrap_err();
    assert_eq!(e.message, "variable `c` not found");
    assert_eq!(
        set.render("t", &json!({"a": 1, "b": "two", "c": 3}))
            .unwrap()[0]["after"],
        json!(3)
    );
}

#[test]
fn send_sync_clone() {
    fn check<T: Send + Sync + Clone + std::fmt::Debug>() {}
    check::<TemplateSet>();
}

#[test]
fn partials_without_final_newline() {
    let set = set_with(
        &[
            ("kv", "a: {{x}}"),
            ("items", "{{#each l}}\n- {{this}}\n{{/each}}"),
        ],
        "t",
        "kind: A\nm:\n  {{> kv}}\n  b: 2\nl:\n  {{> items}}\nz: 1",
    );
    assert_eq!(
        set.render("t", &json!({"x": "X", "l": [1, 2]})).unwrap(),
        vec![json!({"kind": "A", "m": {"a": "X", "b": 2}, "l": [1, 2], "z": 1})]
    );
}

#[test]
fn a_partial_with_parameters_sees_only_them_and_root() {
    let set = set_with(
        &[
            ("own", "a: {{key}}\nb: {{@root.vars.k}}\n"),
            ("outer", "c: {{vars.k}}\n"),
        ],
        "t",
        "kind: A\nx:\n  {{> own key=vars.v}}\ny:\n  {{> outer}}\nz:\n  {{> outer shadow=1}}\n",
    );
    let ctx = json!({"vars": {"k": "root-k", "v": "param-v"}});
    // `outer` with a parameter no longer sees `vars`: strict mode reports it.
    let error = set.render("t", &ctx).unwrap_err();
    assert_eq!(error.message, "variable `vars.k` not found");
    let set = set_with(
        &[
            ("own", "a: {{key}}\nb: {{@root.vars.k}}\n"),
            ("outer", "c: {{vars.k}}\n"),
        ],
        "t",
        "kind: A\nx:\n  {{> own key=vars.v}}\ny:\n  {{> outer}}\n",
    );
    assert_eq!(
        set.render("t", &ctx).unwrap(),
        vec![json!({"kind": "A", "x": {"a": "param-v", "b": "root-k"}, "y": {"c": "root-k"}})]
    );
}
