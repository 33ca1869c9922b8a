//! Tests of the cost estimate: figures derived by hand (and met by an evaluation of a
//! worst-case input where one exists), reasons and positions of unbounded estimates, the
//! size bounds of schemas, the kcp-karmada rule and the bench expressions.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Value as Json, json};

use super::corpus::{fleet_workload_rule, rule_expressions};
use super::{check_with, repository, rule_env};
use crate::check::openapi::pattern_max_chars;
use crate::check::{
    Bounds, CostEstimate, Estimate, ObjectType, Type, TypeEnv, bounded_type_from_openapi, estimate,
    estimate_cost, object_type_without_schema, type_from_openapi,
};
use crate::env::{Activation, Env, Program};
use crate::value::Value;

fn compile(source: &str) -> Program {
    Env::new(crate::environment::CelEnvironment::all())
        .compile(source)
        .unwrap_or_else(|e| panic!("`{source}` does not compile: {e}"))
}

fn cost(source: &str, env: &TypeEnv) -> CostEstimate {
    estimate_cost(&compile(source), env)
}

/// `self` of a kind whose `spec` has the schema `spec`.
fn self_with_spec(spec: Json) -> TypeEnv {
    let schema = json!({"type": "object", "properties": {"spec": spec}});
    TypeEnv::new().with_variable("self", type_from_openapi(&schema, "T"))
}

/// `spec.items`: a list of integers, of at most `max_items` when given.
fn items(max_items: Option<u64>) -> TypeEnv {
    let mut list = json!({"type": "array", "items": {"type": "integer"}});
    if let Some(max) = max_items {
        list["maxItems"] = json!(max);
    }
    self_with_spec(json!({"type": "object", "properties": {"items": list}}))
}

/// What an evaluation with `self` = `object` costs (without a limit).
fn runtime_cost(source: &str, object: &Json) -> u64 {
    let env = Env::kubernetes();
    let program = compile(source);
    let mut activation = Activation::new(&env);
    activation.bind("self", Value::from_json(object));
    activation.with_budget(u64::MAX);
    let (_, cost) = program
        .eval_with_cost(&activation)
        .unwrap_or_else(|e| panic!("`{source}`: {e}"));
    cost
}

fn unbounded(reason: &str, line: usize, column: usize) -> CostEstimate {
    CostEstimate::Unbounded {
        reason: reason.to_string(),
        line,
        column,
    }
}

// ---- the figures of the brief --------------------------------------------------------------

#[test]
fn a_bounded_comprehension() {
    // maxItems 10. The loop node 1; its range `self.spec.items` 3 (`self`, `.spec`,
    // `.items`); per element (10 at most) the iteration 1 and the predicate `x > 0` 3 (`>`,
    // `x`, `0`): 1 + 3 + 10 × (1 + 3) = 44.
    let source = "self.spec.items.all(x, x > 0)";
    assert_eq!(cost(source, &items(Some(10))), CostEstimate::Bounded(44));
    // Ten elements, all positive (no short cut): the evaluation costs exactly that.
    let worst = json!({"spec": {"items": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}});
    assert_eq!(runtime_cost(source, &worst), 44);
    // Fewer elements cost less.
    let small = json!({"spec": {"items": [1, 2]}});
    assert_eq!(runtime_cost(source, &small), 12);
}

#[test]
fn nested_comprehensions_multiply() {
    // maxItems 1000. The inner loop: 1 + 3 + 1000 × (1 + 3) = 4004 (`y == x`: 3); the outer
    // one: 1 + 3 + 1000 × (1 + 4004) = 4,005,004, above the default limit of 1,000,000.
    let source = "self.spec.items.all(x, self.spec.items.exists_one(y, y == x))";
    let estimate = cost(source, &items(Some(1000)));
    assert_eq!(estimate, CostEstimate::Bounded(4_005_004));
    assert!(estimate.exceeds(crate::env::Limits::default().per_expression));
    // A thousand distinct elements: every inner loop runs to the end.
    let worst = json!({"spec": {"items": (0..1000).collect::<Vec<i64>>()}});
    assert_eq!(runtime_cost(source, &worst), 4_005_004);
}

#[test]
fn an_unbounded_list_is_named_where_it_is() {
    let env = items(None);
    assert_eq!(
        cost("self.spec.items.all(x, x > 0)", &env),
        unbounded("`self.spec.items` has no maxItems", 1, 1)
    );
    assert_eq!(
        cost(
            "size(self.spec.items) > 0 &&\n  self.spec.items.exists(x, x == 1)",
            &env
        ),
        unbounded("`self.spec.items` has no maxItems", 2, 3)
    );
    // Not iterated, not searched: bounded. `&&` 1; `>` 1, `size(...)` 1 + 3, `2` 1; `==` 1,
    // `[0]` 1 + 3 + 1, `1` 1.
    assert_eq!(
        cost("size(self.spec.items) > 2 && self.spec.items[0] == 1", &env),
        CostEstimate::Bounded(14)
    );
    // An empty literal range costs nothing per element, whatever the body.
    assert_eq!(
        cost("[].all(x, self.spec.items.exists(y, y == x))", &env),
        CostEstimate::Bounded(2)
    );
}

#[test]
fn contains_is_charged_by_the_bytes_of_the_string() {
    let env = |max_length: Option<u64>| {
        let mut name = json!({"type": "string"});
        if let Some(max) = max_length {
            name["maxLength"] = json!(max);
        }
        self_with_spec(json!({"type": "object", "properties": {"name": name}}))
    };
    // maxLength 100 characters: 400 bytes of UTF-8 at most. `contains` 1, `self.spec.name`
    // 3, `'abc'` 1, and 1 per 10 bytes searched: 1 + 3 + 1 + 400 / 10 = 45.
    let source = "self.spec.name.contains('abc')";
    assert_eq!(cost(source, &env(Some(100))), CostEstimate::Bounded(45));
    let worst = json!({"spec": {"name": "😀".repeat(100)}});
    assert_eq!(runtime_cost(source, &worst), 45);
    assert_eq!(
        cost(source, &env(None)),
        unbounded("`self.spec.name` has no maxLength", 1, 1)
    );
    // Bounded or not, `size` and comparisons do not read the string's bytes.
    assert_eq!(
        cost(
            "size(self.spec.name) < 5 || self.spec.name == 'a'",
            &env(None)
        ),
        CostEstimate::Bounded(12)
    );
}

// ---- how sizes flow -----------------------------------------------------------------------

/// `spec.names`: at most 5 strings of at most 10 characters (40 bytes); `spec.a`, `spec.b`:
/// strings of at most 5 characters (20 bytes); `spec.labels`: a map of at most 3 entries.
fn names() -> TypeEnv {
    self_with_spec(json!({"type": "object", "properties": {
        "names": {"type": "array", "maxItems": 5, "items": {"type": "string", "maxLength": 10}},
        "a": {"type": "string", "maxLength": 5},
        "b": {"type": "string", "maxLength": 5},
        "labels": {
            "type": "object",
            "maxProperties": 3,
            "additionalProperties": {"type": "string", "maxLength": 2}
        },
        "free": {"type": "array", "items": {"type": "string"}}
    }}))
}

#[test]
fn filter_and_map_keep_the_bound_of_their_range() {
    // filter: 1 + 3 + 5 × (1 + `startsWith` (1 + 1 + 1 + 40 / 10) + the element `n` 1) =
    // 49, a list of 5 strings of 40 bytes; map: 1 + 49 + 5 × (1 + `n + '-x'` (1 + 1 + 1 +
    // 42 / 10)) = 90, a list of 5 strings of 42 bytes; exists: 1 + 90 + 5 × (1 + `endsWith`
    // (1 + 1 + 1 + 42 / 10)) = 131.
    let source = "self.spec.names.filter(n, n.startsWith('a')).map(n, n + '-x')\
                  .exists(s, s.endsWith('z'))";
    assert_eq!(cost(source, &names()), CostEstimate::Bounded(131));
    // The longest names starting with `a` (10 characters) are 37 bytes: `startsWith` is
    // charged 3, `+` 39 / 10 = 3, `endsWith` 3; filter 4 + 5 × 8 = 44, map 45 + 5 × 7 = 80,
    // exists 81 + 5 × 7 = 116.
    let object = json!({"spec": {"names": vec!["a😀😀😀😀😀😀😀😀😀"; 5]}});
    assert_eq!(runtime_cost(source, &object), 116);
    // The result of `map` is bounded as its range: 5 elements of 42 bytes.
    let found = estimate(&compile("self.spec.names.map(n, n + '-x')"), &names());
    assert_eq!(found.result, Bounds::max(5).with_elements(Bounds::max(42)));
}

#[test]
fn concatenation_adds_sizes() {
    // The chain node and its second `+` 2, the operands 3 + 1 + 3; each `+` 1 per 10
    // bytes of its result: (20 + 1) / 10 + (21 + 20) / 10 = 2 + 4. 2 + 7 + 6 = 15.
    let source = "self.spec.a + '-' + self.spec.b";
    assert_eq!(cost(source, &names()), CostEstimate::Bounded(15));
    let worst = json!({"spec": {"a": "😀".repeat(5), "b": "😀".repeat(5)}});
    assert_eq!(runtime_cost(source, &worst), 15);
    let found = estimate(&compile(source), &names());
    assert_eq!(found.result, Bounds::max(41));
    // Lists: `names + names` has 10 elements, each copied (1 per element), `in` 1 per 10,
    // and the needle compared with each (1 byte each: 10 / 10).
    // `in` 1, `'x'` 1, `+` 1 + 3 + 3 + 10: 1 + 1 + 17 + 10 / 10 + 10 / 10 = 21.
    assert_eq!(
        cost("'x' in self.spec.names + self.spec.names", &names()),
        CostEstimate::Bounded(21)
    );
    // A map is not searched element by element: `in` on it costs its operands only.
    assert_eq!(
        cost("'x' in self.spec.labels", &names()),
        CostEstimate::Bounded(5)
    );
    assert_eq!(
        cost("self.spec.a + self.spec.free[0]", &names()),
        unbounded("`self.spec.free[0]` has no maxLength", 1, 15)
    );
}

#[test]
fn library_functions_of_linear_cost_are_charged_by_their_arguments() {
    // `join`: 1, the list 3, `', '` 1, and its arguments 1 per 10 elements or bytes: 5 / 10
    // + 2 / 10 = 0; it builds its result, 5 × (40 + 2) = 210 bytes: 1 per 10, 21. 26.
    // `size` 1, `>` 1, `0` 1: 29.
    assert_eq!(
        cost("size(self.spec.names.join(', ')) > 0", &names()),
        CostEstimate::Bounded(29)
    );
    // Then `contains` 1 per 10 bytes of the joined string:
    // `contains` 1 + `join` 26 + `'x'` 1 + 21 = 49.
    assert_eq!(
        cost("self.spec.names.join(', ').contains('x')", &names()),
        CostEstimate::Bounded(49)
    );
    // `lowerAscii`: 1 + 3 + 20 / 10 = 6; its result is no longer: `startsWith` 1 + 6 + 1 + 2.
    assert_eq!(
        cost("self.spec.a.lowerAscii().startsWith('x')", &names()),
        CostEstimate::Bounded(10)
    );
    // Custom functions: 1 and their arguments; their results have no known size.
    let env = names().with_function("decide");
    assert_eq!(
        cost("decide('t', {'a': self.spec.a}) == null", &env),
        CostEstimate::Bounded(9)
    );
    assert_eq!(
        cost("decide('t', {}).all(x, x)", &env),
        unbounded(
            "the size of the result of `decide('t', {})` is unknown",
            1,
            1
        )
    );
}

#[test]
fn dyn_values_are_unbounded_only_where_their_size_matters() {
    let env = TypeEnv::new().with_variable("self", Type::Dyn);
    // A field of a `dyn` value costs 1 like any other: `self`, 4 selections, `==`, `1`.
    assert_eq!(cost("self.spec.x.y.z == 1", &env), CostEstimate::Bounded(7));
    assert_eq!(
        cost("self.spec.x.startsWith('a')", &env),
        unbounded("`self.spec.x` is dyn: its size is unknown", 1, 1)
    );
    assert_eq!(
        cost("[1, 2].exists(i, self.spec.list.exists(x, x == i))", &env),
        unbounded("`self.spec.list` is dyn: its size is unknown", 1, 18)
    );
    // `dyn + int` adds numbers: no size. `>` 1, `+` 1 + 3 + 1, `2` 1.
    assert_eq!(cost("self.spec.x + 1 > 2", &env), CostEstimate::Bounded(7));
    // Undeclared variables are `dyn`.
    assert_eq!(
        cost("other.items.map(i, i)", &TypeEnv::new()),
        unbounded("`other.items` is dyn: its size is unknown", 1, 1)
    );
}

#[test]
fn branches_and_optionals_take_the_larger() {
    // `?:` 1, the condition `self.spec.names == []` 5, the costlier branch
    // `self.spec.a + self.spec.b` 1 + 3 + 3 + 40 / 10 = 11: 17.
    assert_eq!(
        cost(
            "self.spec.names == [] ? 'none' : self.spec.a + self.spec.b",
            &names()
        ),
        CostEstimate::Bounded(17)
    );
    // `orValue([])` keeps the list's bound; an absent field gives the default.
    let source = "self.spec.?names.orValue([]).all(n, n.contains('x'))";
    // `orValue` 1, `.?names` 1 + `self.spec` 2, `[]` 1: 5; all: 1 + 5 + 5 × (1 + 1 + 1 + 1
    // + 4) = 46.
    assert_eq!(cost(source, &names()), CostEstimate::Bounded(46));
    let free = "self.spec.?free.orValue([]).all(n, n.contains('x'))";
    assert_eq!(
        cost(free, &names()),
        unbounded("`self.spec.?free` has no maxItems", 1, 1)
    );
}

#[test]
fn maps_and_objects_iterate_over_their_keys() {
    // 3 entries at most: 1 + 3 + 3 × (1 + 3) = 16.
    assert_eq!(
        cost("self.spec.labels.all(k, k != '')", &names()),
        CostEstimate::Bounded(16)
    );
    // Values of the map: `self.spec.labels[k]` is 2 characters (8 bytes).
    assert_eq!(
        cost(
            "self.spec.labels.all(k, self.spec.labels[k].contains('x'))",
            &names()
        ),
        CostEstimate::Bounded(1 + 3 + 3 * (1 + 1 + (1 + 3 + 1) + 1))
    );
    // Keys of a map, which no schema can bound, are as long as the largest request the API
    // server accepts (3 MiB), as Kubernetes' estimator takes them: 1 + 3 + 3 × (1 + `k`
    // 1 + startsWith (1 + 3 MiB / 10) ...), large but bounded.
    assert_eq!(
        cost("self.spec.labels.exists(k, k.startsWith('x'))", &names()),
        CostEstimate::Bounded(943_732)
    );
    // A closed object has its declared fields at most: `self.spec` has 5.
    assert_eq!(
        cost("self.spec.all(f, f != 'x')", &names()),
        CostEstimate::Bounded(1 + 2 + 5 * (1 + 3))
    );
}

#[test]
fn metadata_has_the_bounds_the_api_server_enforces() {
    let env = TypeEnv::new().with_variable("self", object_type_without_schema("Deployment"));
    // Label values: 63 bytes; `namespace`: 63.
    assert_eq!(
        cost("self.metadata.labels['app'].startsWith('web')", &env),
        CostEstimate::Bounded(1 + (1 + 3 + 1) + 1 + 6)
    );
    assert_eq!(
        cost("self.metadata.namespace + '/x'", &env),
        CostEstimate::Bounded(1 + 3 + 1 + 6)
    );
    assert_eq!(
        cost("self.metadata.name + '/x'", &env),
        unbounded("`self.metadata.name` has no maxLength", 1, 1)
    );
    assert_eq!(
        cost("self.metadata.labels.all(k, k != '')", &env),
        unbounded("`self.metadata.labels` has no maxProperties", 1, 1)
    );
}

#[test]
fn generic_comprehensions_and_binds() {
    // `cel.bind`: 1, the value, the body.
    assert_eq!(
        cost("cel.bind(n, self.spec.names, n.all(x, x != ''))", &names()),
        CostEstimate::Bounded(1 + 3 + (1 + 1 + 5 * (1 + 3)))
    );
    // transformMap: a map of the range's size.
    let found = estimate(
        &compile("self.spec.names.transformMap(i, n, n + '!')"),
        &names(),
    );
    assert_eq!(
        found.result,
        Bounds::max(5)
            .with_keys(Bounds::default())
            .with_elements(Bounds::max(41))
    );
}

#[test]
fn estimates_bound_every_evaluation() {
    // The estimate is never below what an evaluation costs.
    let object = json!({"spec": {
        "names": ["aaaaaaaaaa", "b😀", "c", "d", "e"],
        "a": "😀😀😀😀😀",
        "b": "bbbbb",
        "labels": {"x": "yy", "z": "😀😀"},
        "free": ["a"]
    }});
    for source in [
        "self.spec.names.all(n, n.size() < 20)",
        "self.spec.names.map(n, n.lowerAscii() + self.spec.a).exists(s, s.contains('q'))",
        "self.spec.labels.filter(k, self.spec.labels[k] != '').size() > 1",
        "self.spec.a + self.spec.b + self.spec.a == ''",
        "'b' in self.spec.names && self.spec.a.matches('^a+$')",
        "self.spec.names.transformList(i, n, i > 2 ? n : n + n)[0].endsWith('x')",
        "self.spec.names.join('/').split('/').size() == 5",
        "self.spec.a == self.spec.b && self.spec.a > self.spec.b",
        "self.spec.names.sort().indexOf(self.spec.b) < 0 && self.spec.a in self.spec.labels",
    ] {
        let CostEstimate::Bounded(bound) = cost(source, &names()) else {
            panic!("`{source}`: unbounded")
        };
        let spent = runtime_cost(source, &object);
        assert!(spent <= bound, "`{source}`: {spent} > {bound}");
    }
    // Where no node runs twice and none is charged by size, it is the number of nodes
    // evaluated, which the plan's count bounds (it also counts the node of a qualified name,
    // which the evaluator does not charge).
    for source in [
        "size(self.spec.a) == size(self.spec.b)",
        "has(self.spec.a) ? 1 : 2",
        "size(self.spec.names) > 9 || self.spec.labels['x'] == 'y'",
    ] {
        let program = compile(source);
        let found = estimate_cost(&program, &names());
        assert_eq!(
            found,
            CostEstimate::Bounded(runtime_cost(source, &object)),
            "`{source}`"
        );
        let nodes = program.static_cost_bound().unwrap();
        assert!(found.exceeds(0) && !found.exceeds(nodes), "`{source}`");
    }
}

// ---- the size bounds of schemas -----------------------------------------------------------

#[test]
fn schemas_bound_sizes() {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 63},
            "data": {"type": "string", "format": "byte", "maxLength": 100},
            "protocol": {"type": "string", "enum": ["TCP", "UDP", "SCTP"]},
            "at": {"type": "string", "format": "date-time"},
            "day": {"type": "string", "format": "date"},
            "id": {"type": "string", "format": "uuid", "maxLength": 100},
            "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{1,4}$"},
            "free": {"type": "string", "pattern": "^[a-z]+$"},
            "port": {"x-kubernetes-int-or-string": true, "maxLength": 5},
            "ports": {"type": "array", "maxItems": 8, "items": {
                "type": "object", "properties": {"name": {"type": "string", "maxLength": 15}}
            }},
            "matrix": {"type": "array", "maxItems": 3, "items": {
                "type": "array", "maxItems": 4, "items": {"type": "string", "maxLength": 1}
            }},
            "labels": {
                "type": "object",
                "maxProperties": 16,
                "additionalProperties": {"type": "string", "maxLength": 63}
            },
            "open": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "maxProperties": 2},
            "count": {"type": "integer"}
        }
    });
    let (ty, bounds) = bounded_type_from_openapi(&schema, "T");
    assert_eq!(bounds, Bounds::default());
    let Type::Object(object) = ty else {
        panic!("an object")
    };
    let field = |name: &str| object.field_bounds(name).cloned().unwrap_or_default();
    assert_eq!(field("name"), Bounds::max(252));
    assert_eq!(field("data"), Bounds::max(100));
    assert_eq!(field("protocol"), Bounds::max(4));
    assert_eq!(field("at"), Bounds::max(35));
    assert_eq!(field("day"), Bounds::max(10));
    assert_eq!(field("id"), Bounds::max(36));
    assert_eq!(field("code"), Bounds::max(28));
    assert_eq!(field("free"), Bounds::default());
    assert_eq!(field("port"), Bounds::max(20));
    assert_eq!(field("ports"), Bounds::max(8));
    assert_eq!(
        field("matrix"),
        Bounds::max(3).with_elements(Bounds::max(4).with_elements(Bounds::max(4)))
    );
    assert_eq!(
        field("labels"),
        Bounds::max(16).with_elements(Bounds::max(252))
    );
    assert_eq!(field("open"), Bounds::max(2));
    assert_eq!(field("count"), Bounds::default());
    assert!(object.field_bounds("count").is_none());
    let Some(Type::List(port)) = object.fields.get("ports") else {
        panic!("a list")
    };
    let Type::Object(port) = &**port else {
        panic!("an object")
    };
    assert_eq!(port.field_bounds("name"), Some(&Bounds::max(60)));
    // A field replaced without bounds loses them.
    let replaced = (*object).clone().with_field("name", Type::String);
    assert!(replaced.field_bounds("name").is_none());
}

#[test]
fn patterns_bound_what_they_repeat_boundedly() {
    assert_eq!(pattern_max_chars("^[a-z]{1,63}$"), Some(63));
    assert_eq!(pattern_max_chars("^(a|bcd)?-[^/]{3}\\.x$"), Some(9));
    assert_eq!(pattern_max_chars("^(?:ab){2}[[:alpha:]]\\d$"), Some(6));
    assert_eq!(pattern_max_chars("^[]a]$"), Some(1));
    assert_eq!(pattern_max_chars("^\\$$"), Some(1));
    for unbounded in [
        "[a-z]{1,63}",
        "^[a-z]{1,63}",
        "^a|b$",
        "^a*$",
        "^a+$",
        "^a{2,}$",
        "^(?i)a$",
        "^a\\$",
        "^(a$",
    ] {
        assert_eq!(pattern_max_chars(unbounded), None, "{unbounded}");
    }
}

// ---- the kcp-karmada rule and the bench expressions ----------------------------------------

/// Every expression of `rules/kcp-karmada/rules/fleet-workload.yaml`, with `self`, `fleet`
/// and `policy` typed by the CRDs of `config/crds`, `binding` without a schema, `vars` typed
/// and bounded by the estimates of their expressions. Prints each estimate.
#[test]
fn the_kcp_karmada_rule_is_estimated() {
    let rule = fleet_workload_rule();
    let (expressions, vars) = rule_expressions(&rule);
    let base = rule_env()
        .with_variable("binding", object_type_without_schema("ResourceBinding"))
        .with_function("decide");
    // The variables' types and bounds, each from the others', until they settle.
    let mut fields: BTreeMap<String, (Type, Bounds)> = BTreeMap::new();
    for _ in 0..=vars.len() {
        let env = vars_env(&base, &fields);
        let next: BTreeMap<String, (Type, Bounds)> = vars
            .iter()
            .map(|(name, source)| {
                let ty = check_with(source, &env).0;
                (name.clone(), (ty, estimate(&compile(source), &env).result))
            })
            .collect();
        if next == fields {
            break;
        }
        fields = next;
    }
    let env = vars_env(&base, &fields);
    let mut report = String::new();
    let (mut bounded, mut unbounded_count) = (0, 0);
    let mut figures: BTreeMap<String, CostEstimate> = BTreeMap::new();
    for (path, source) in expressions.iter().chain(vars.iter()).cloned() {
        let found = cost(&source, &env);
        match &found {
            CostEstimate::Bounded(_) => bounded += 1,
            CostEstimate::Unbounded { .. } => unbounded_count += 1,
        }
        let shown = source.split_whitespace().collect::<Vec<_>>().join(" ");
        writeln!(report, "{path}: {found}\n    {shown}").unwrap();
        figures.insert(path, found);
    }
    println!("fleet-workload.yaml: {bounded} bounded, {unbounded_count} unbounded\n{report}");
    println!("variables:");
    for (name, (ty, bounds)) in &fields {
        println!("  vars.{name}: {ty} {bounds:?}");
    }
    assert!(bounded + unbounded_count > 40);
    assert!(bounded > 0 && unbounded_count > 0);
    // Figures checked by hand.
    assert_eq!(figures["emitService"], CostEstimate::Bounded(9));
    // clusterRefs has maxItems 256 in config/crds: the loop 1 + the range 5
    // (fleet, .spec, .?clusterRefs, orValue, []) + 256 × (1 + `r.name` 2).
    assert_eq!(figures["clusterNames"], CostEstimate::Bounded(774));
    // Annotations hold 256 KiB at most: so does `vars.workspace`, which `sha256` reads
    // (1 + 262144 / 10 and the rest of the expression).
    assert_eq!(figures["namespace"], CostEstimate::Bounded(26_234));
    // `'[' + vars.policyName + ']'`: `vars.policyName` is `maxLength: 253` (1012 bytes) or ''.
    let policy = cost("'[' + vars.policyName + ']'", &env);
    assert_eq!(
        policy,
        CostEstimate::Bounded(2 + 1 + 2 + 1 + (1 + 1012) / 10 + (1013 + 1) / 10)
    );
    assert_eq!(figures["workspace"], CostEstimate::Bounded(1 + 3 + 1));
}

fn vars_env(base: &TypeEnv, fields: &BTreeMap<String, (Type, Bounds)>) -> TypeEnv {
    let mut object = ObjectType::new("vars");
    for (name, (ty, bounds)) in fields {
        object = object.with_bounded_field(name.clone(), ty.clone(), bounds.clone());
    }
    base.clone().with_variable("vars", Type::object(object))
}

/// The expressions of `/work/shared/bench/cel/exprs.json` (beside the repository), with
/// `self` as `dyn`.
#[test]
fn the_bench_expressions_with_self_as_dyn() {
    let path = repository().join("../shared/bench/cel/exprs.json");
    let Ok(text) = std::fs::read_to_string(&path) else {
        println!("{} is missing: skipped", path.display());
        return;
    };
    let exprs: Vec<(String, String)> = serde_json::from_str(&text).unwrap();
    let env = TypeEnv::new().with_variable("self", Type::Dyn);
    let object: Option<Json> = std::fs::read_to_string(path.with_file_name("object.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    let mut found: BTreeMap<String, CostEstimate> = BTreeMap::new();
    for (name, source) in &exprs {
        let estimate = cost(source, &env);
        println!("{name}: {estimate}\n    {source}");
        if let (CostEstimate::Bounded(bound), Some(object)) = (&estimate, &object) {
            let spent = runtime_cost(source, object);
            assert!(spent <= *bound, "{name}: {spent} > {bound}");
        }
        found.insert(name.clone(), estimate);
    }
    // `>` (`self.spec.replicas` 3, `2`) 5, `==` (`[...]` 1 + 3 + 1, `'edge'`) 7, `&&` 1.
    assert_eq!(found["E1_and_index"], CostEstimate::Bounded(13));
    assert_eq!(
        found["E2_filter_map"],
        unbounded("`self.spec.clusters` is dyn: its size is unknown", 1, 1)
    );
    // Concatenation is charged by the bytes of strings whose size `dyn` does not bound.
    assert_eq!(
        found["E3_concat"],
        unbounded(
            "`self.metadata.namespace` is dyn: its size is unknown",
            1,
            1
        )
    );
    // `?:` 1, `has(self.spec.paused)` 1 + 2, the costlier branch `self.spec.strategy.type` 4.
    assert_eq!(found["E4_has_ternary"], CostEstimate::Bounded(8));
    assert_eq!(
        found["E5_exists"],
        unbounded(
            "`self.spec.template.spec.containers` is dyn: its size is unknown",
            1,
            1
        )
    );
    assert_eq!(found["E0_baseline_true"], CostEstimate::Bounded(1));
    // E3 is bounded where a schema bounds its strings.
    let typed = self_typed_for_e3();
    let e3 = &exprs.iter().find(|(n, _)| n == "E3_concat").unwrap().1;
    // The chain and its `+`s after the first 4, the operands 3 + 1 + 3 + 1 + (1 + 3), and
    // each `+` by the bytes of its result: namespace 63, name 253, replicas 20 digits:
    // (63+1)/10 + (64+253)/10 + (317+1)/10 + (318+20)/10 = 6 + 31 + 31 + 33.
    assert_eq!(
        cost(e3, &typed),
        CostEstimate::Bounded(4 + 12 + 6 + 31 + 31 + 33)
    );
}

fn self_typed_for_e3() -> TypeEnv {
    let metadata = ObjectType::new("ObjectMeta")
        .with_bounded_field("namespace", Type::String, Bounds::max(63))
        .with_bounded_field("name", Type::String, Bounds::max(253));
    let spec = ObjectType::new("Spec").with_field("replicas", Type::Int);
    let ty = Type::object(
        ObjectType::new("Deployment")
            .with_field("metadata", Type::object(metadata))
            .with_field("spec", Type::object(spec)),
    );
    TypeEnv::new().with_variable("self", ty)
}

#[test]
fn an_estimate_reads_like_a_warning() {
    assert_eq!(CostEstimate::Bounded(12).to_string(), "12");
    assert_eq!(
        unbounded("`self.spec.items` has no maxItems", 1, 1).to_string(),
        "unbounded: `self.spec.items` has no maxItems (at 1:1)"
    );
    assert!(!CostEstimate::Bounded(10).exceeds(10));
    assert!(CostEstimate::Bounded(11).exceeds(10));
    // Variables declared with bounds.
    let env = TypeEnv::new().with_bounded_variable("pods", Type::list(Type::Dyn), Bounds::max(100));
    assert_eq!(
        cost("pods.exists(p, p.ready)", &env),
        CostEstimate::Bounded(1 + 1 + 100 * (1 + 2))
    );
    let Estimate { result, .. } = estimate(&compile("pods.filter(p, p.ready)"), &env);
    assert_eq!(result, Bounds::max(100));
}

/// Over the CEL conformance suite (beside the repository): every expression is estimated
/// (variables `dyn`), and an expression without variables never costs more than its
/// estimate.
#[test]
fn the_conformance_suite_never_costs_more_than_its_estimate() {
    let dir = repository().join("../shared/cel-spec");
    let Some(files) = super::textproto::suite_files(&dir) else {
        println!("{} is missing: skipped", dir.display());
        return;
    };
    let env = Env::kubernetes();
    let (mut estimated, mut evaluated, mut unbounded_count) = (0, 0, 0);
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let file = super::textproto::parse_textproto(&text).unwrap();
        for section in file.messages("section") {
            for test in section.messages("test") {
                let Some(source) = test.string("expr") else {
                    continue;
                };
                let Ok(program) = env.compile(&source) else {
                    continue;
                };
                let found = estimate_cost(&program, &TypeEnv::new());
                estimated += 1;
                if let CostEstimate::Unbounded { reason, .. } = &found {
                    assert_ne!(reason, "the expression could not be analysed", "`{source}`");
                    unbounded_count += 1;
                }
                if !program.references().variables.is_empty() || test.get("container").is_some() {
                    continue;
                }
                let mut activation = Activation::new(&env);
                activation.with_budget(u64::MAX);
                if let Ok((_, spent)) = program.eval_with_cost(&activation) {
                    evaluated += 1;
                    if let CostEstimate::Bounded(bound) = found {
                        assert!(
                            spent <= bound,
                            "`{source}`: costs {spent}, estimated {bound}"
                        );
                    }
                }
            }
        }
    }
    println!(
        "conformance: {estimated} expressions estimated ({unbounded_count} unbounded), \
         {evaluated} evaluated within their estimate"
    );
    assert!(estimated > 1000);
}

#[test]
fn quadratic_work_and_built_values_are_estimated_as_charged() {
    // `distinct` of at most 100 integers: 1, the list 3, and Kubernetes' charge for
    // comparing every pair, 2 × 100² + 10 = 20,010 (more than hashing them, 100): 20,014.
    // A worst object costs that.
    let source = "self.spec.items.distinct()";
    assert_eq!(
        cost(source, &items(Some(100))),
        CostEstimate::Bounded(20_014)
    );
    let worst = json!({"spec": {"items": (0..100).collect::<Vec<i64>>()}});
    assert_eq!(runtime_cost(source, &worst), 20_014);
    // Elements that do not hash are compared pairwise: 100 × 99 / 2 = 4,950 pairs, each
    // reading 1 element (4,950 / 10 = 495), still less than Kubernetes' charge.
    let lists = self_with_spec(json!({"type": "object", "properties": {"items": {
        "type": "array", "maxItems": 100,
        "items": {"type": "array", "maxItems": 1, "items": {"type": "integer"}}
    }}}));
    assert_eq!(cost(source, &lists), CostEstimate::Bounded(20_014));
    let worst = json!({"spec": {"items": (0..100).map(|i| vec![i]).collect::<Vec<_>>()}});
    assert_eq!(runtime_cost(source, &worst), 20_014);
    // Few long elements: what comparing them reads is more (10 × 9 / 2 = 45 pairs of 1,000
    // elements: 45 + 4,500), and is charged instead.
    let long = self_with_spec(json!({"type": "object", "properties": {"items": {
        "type": "array", "maxItems": 10,
        "items": {"type": "array", "maxItems": 1000, "items": {"type": "integer"}}
    }}}));
    assert_eq!(cost(source, &long), CostEstimate::Bounded(4_549));
    let worst = json!({"spec": {"items": (0..10).map(|_| vec![0; 1000]).collect::<Vec<_>>()}});
    assert_eq!(runtime_cost(source, &worst), 4_549);
    // `sort` as Kubernetes charges it too: 2 × 100² + 10, and 1 and the list 3.
    let source = "self.spec.items.sort()";
    assert_eq!(
        cost(source, &items(Some(100))),
        CostEstimate::Bounded(20_014)
    );
    let worst = json!({"spec": {"items": (0..100).rev().collect::<Vec<i64>>()}});
    assert_eq!(runtime_cost(source, &worst), 20_014);
    // `flatten(depth)`: 1, the list 3, the depth 1, the depth per element of the receiver
    // and 10 (310), and the list it builds (100 elements).
    let source = "self.spec.items.flatten(3)";
    assert_eq!(cost(source, &lists), CostEstimate::Bounded(415));
    let worst = json!({"spec": {"items": (0..100).map(|i| vec![i]).collect::<Vec<_>>()}});
    assert_eq!(runtime_cost(source, &worst), 415);
    // Set relations: hashable lists 1 per element of each (200), else the product, twice
    // for `sets.equivalent` (20,000), and what comparing the pairs reads, 1 element each,
    // twice (2 × 10,000 / 10 = 2,000).
    let source = "sets.contains(self.spec.items, self.spec.items)";
    assert_eq!(cost(source, &items(Some(100))), CostEstimate::Bounded(227));
    let source = "sets.equivalent(self.spec.items, self.spec.items)";
    assert_eq!(cost(source, &lists), CostEstimate::Bounded(22_027));
    let worst = json!({"spec": {"items": (0..100).map(|i| vec![i]).collect::<Vec<_>>()}});
    assert_eq!(runtime_cost(source, &worst), 22_027);
    // Without `maxItems`, the work has no bound.
    assert!(matches!(
        cost("self.spec.items.distinct()", &items(None)),
        CostEstimate::Unbounded { .. }
    ));
    // A pattern known only at evaluation time: both tiers and 2 × 40 per byte of it
    // (5 characters: 20 bytes), 7,600; a constant one compiled at evaluation (`find`)
    // once, however many times it is called.
    assert_eq!(
        cost("'x'.matches(self.spec.a)", &names()),
        CostEstimate::Bounded(7_605)
    );
    let once = cost("self.spec.a.find('[a-z]+')", &names());
    let in_loop = cost("self.spec.names.all(n, n.find('[a-z]+') != '')", &names());
    let (CostEstimate::Bounded(once), CostEstimate::Bounded(in_loop)) = (once, in_loop) else {
        panic!("unbounded");
    };
    assert!(once > 1_000 && in_loop < 2 * once, "{once} {in_loop}");
}
