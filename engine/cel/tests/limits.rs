//! The cost and size limits hold against the bombs of the hardening issue: each is refused
//! with a cost or size error, and the assertions are on the cost charged, never on time.

use switchyard_cel::{
    Activation, CelEnvironment, Env, MAX_SOURCE_BYTES, MAX_SOURCE_ELEMENTS, Value,
};

/// Evaluates `source` with `vars` bound, within `budget` (the default limit when `None`):
/// the value and its cost, or the error message.
fn run(source: &str, vars: &[(&str, Value)], budget: Option<u64>) -> Result<(Value, u64), String> {
    let env = Env::new(CelEnvironment::all());
    let program = env.compile(source).map_err(|e| format!("compile: {e}"))?;
    let mut activation = Activation::new(&env);
    for (name, value) in vars {
        activation.bind(name, value.clone());
    }
    if let Some(budget) = budget {
        activation.with_budget(budget);
    }
    program
        .eval_with_cost(&activation)
        .map_err(|e| e.to_string())
}

fn cost_of(source: &str, vars: &[(&str, Value)]) -> u64 {
    run(source, vars, Some(u64::MAX))
        .unwrap_or_else(|e| panic!("`{source}`: {e}"))
        .1
}

fn error_of(source: &str, vars: &[(&str, Value)], budget: Option<u64>) -> String {
    match run(source, vars, budget) {
        Ok((v, cost)) => {
            let shown: String = format!("{v:?}").chars().take(200).collect();
            panic!("`{source}` evaluated to {shown} (cost {cost})")
        }
        Err(e) => e,
    }
}

fn assert_cost_error(source: &str, vars: &[(&str, Value)]) {
    let e = error_of(source, vars, None);
    assert!(e.starts_with("cost limit exceeded: "), "`{source}`: {e}");
}

fn assert_size_error(source: &str, vars: &[(&str, Value)]) {
    // With no cost limit at all, the size limit still holds.
    let e = error_of(source, vars, Some(u64::MAX));
    assert!(e.contains("exceeds the size limit"), "`{source}`: {e}");
}

fn truth(source: &str) -> bool {
    match run(source, &[], None) {
        Ok((Value::Bool(b), _)) => b,
        other => panic!("`{source}`: {other:?}"),
    }
}

fn string(n: usize) -> Value {
    Value::from_json(&serde_json::json!("x".repeat(n)))
}

/// The cost figure of a `cost limit exceeded: <cost> > <limit>` message.
fn charged(message: &str) -> u64 {
    message
        .strip_prefix("cost limit exceeded: ")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not a cost error: {message}"))
}

#[test]
fn distinct_is_charged_for_the_algorithm_it_uses() {
    // Integers hash: linear work, charged 1 per element (and 1 per element built).
    let cost = cost_of("size(lists.range(100000).distinct())", &[]);
    assert!(cost >= 300_000, "{cost}");
    // Lists do not: every pair is compared, and charged before the work starts (the
    // issue's 14 s): n(n-1)/2 = 4,999,950,000.
    let e = error_of(
        "size(lists.range(100000).map(i, [i]).distinct())",
        &[],
        None,
    );
    assert!(charged(&e) > 4_999_950_000, "{e}");
    // Doubles compare numerically with integers: pairwise too.
    assert_cost_error("lists.range(2000).map(i, double(i)).distinct()", &[]);
    // Both algorithms keep the first of equal elements, with CEL equality.
    assert!(truth(
        "[1, 1u, 2, 'a', 'a', b'a', true, true, null].distinct() == [1, 2, 'a', b'a', true, null]"
    ));
    assert!(truth(
        "[1, 1u, 1.0, 2, [1], [1.0], 'a'].distinct() == [1, 2, [1], 'a']"
    ));
}

#[test]
fn a_million_integers_distinct_fails_on_cost() {
    // The tenant object: `size(self.spec.items.distinct())` on 1,000,000 integers
    // (7.9 MB) ran past 60 s; it is now refused before the work.
    let object = serde_json::json!({"spec": {"items": (0..1_000_000).collect::<Vec<i64>>()}});
    let vars = [("self", Value::from_json(&object))];
    assert_cost_error("size(self.spec.items.distinct())", &vars);
    let e = error_of("size(self.spec.items.distinct())", &vars, None);
    assert!(charged(&e) >= 1_000_000, "{e}");
}

#[test]
fn set_relations_are_charged_by_the_pairs_they_compare() {
    // Hashable elements: linear (1 per element of each list).
    let cost = cost_of(
        "sets.contains(lists.range(100000), lists.range(100000))",
        &[],
    );
    assert!((400_000..500_000).contains(&cost), "{cost}");
    // Others: cel-go's `trackSetsCost`, the product of the sizes (9,000,000 here).
    assert_cost_error(
        "sets.contains(lists.range(3000).map(i, [i]), lists.range(3000).map(i, [i]))",
        &[],
    );
    assert_cost_error(
        "sets.intersects(lists.range(3000).map(i, double(i)), lists.range(3000))",
        &[],
    );
    // `sets.equivalent` twice the product.
    let lists = "lists.range(100).map(i, [i])";
    let contains = cost_of(&format!("sets.contains({lists}, {lists})"), &[]);
    let equivalent = cost_of(&format!("sets.equivalent({lists}, {lists})"), &[]);
    assert!(contains >= 10_000, "{contains}");
    assert!(equivalent >= contains + 10_000, "{equivalent}");
    // The hashing path keeps CEL equality (`1 == 1u`).
    assert!(truth("sets.contains([1, 2, 3u], [3, 1u])"));
    assert!(truth("sets.equivalent([1, 2], [2u, 1, 1])"));
    assert!(!truth("sets.intersects([1], [2, 'a'])"));
    assert!(truth("sets.intersects([1.0], [2, 1])"));
}

#[test]
fn regular_expressions_compiled_at_evaluation_are_charged() {
    let p = |s: &str| [("p", Value::from_json(&serde_json::json!(s)))];
    // A constant pattern is compiled with the expression; a variable one when evaluated,
    // charged 1,000 and 40 per byte of the pattern (`a+`: 1,080).
    assert!(cost_of("'aaa'.matches('a+')", &[]) < 100);
    let cost = cost_of("'aaa'.matches(p)", &p("a+"));
    assert!(cost >= 1_080, "{cost}");
    // Once per pattern and evaluation.
    let twice = cost_of("'aaa'.matches(p) && 'b'.matches(p)", &p("a+"));
    assert!(twice < cost + 100, "{twice}");
    // `find` and `findAll` compile their pattern when evaluated: charged once too.
    let s = [("s", string(3))];
    let find = cost_of("s.find('b') + s.find('b')", &s);
    assert!((1_000..2_000).contains(&find), "{find}");
    // A pattern past the first tier of compiled size (64 KB) costs the second tier's
    // 5,000 too, before it is compiled again: `(\pL{10}){10}` (which is too large even then;
    // `\w` is ASCII in Go's syntax, and small).
    let e = error_of("'x'.matches(p)", &p("(\\pL{10}){10}"), Some(5_999));
    assert!(charged(&e) >= 6_000, "{e}");
    let e = error_of("'x'.matches(p)", &p("(\\pL{10}){10}"), None);
    assert!(e.contains("exceeds size limit"), "{e}");
    // The 1,000 compilations of distinct patterns (55 s) stop at the budget: here
    // 60,000, so at most 10 compilations.
    let e = error_of(
        "lists.range(1000).all(i, !'x'.matches('(\\\\pL{10}){10}' + string(i)))",
        &[],
        Some(60_000),
    );
    assert!(e.starts_with("cost limit exceeded"), "{e}");
    // Patterns are at most 4 KB.
    let e = error_of("'x'.matches(p)", &p(&"a".repeat(5000)), None);
    assert!(e.contains("exceeds the size limit of 4096 bytes"), "{e}");
}

#[test]
fn strings_an_expression_builds_are_charged_and_bounded() {
    // The nested `replace` (1 GB): each result is charged 1 per 10 bytes, and none
    // may pass 10 MB.
    let replace = format!("'aaaaaaaaaa'{}", ".replace('a', 'aaaaaaaaaa')".repeat(8));
    assert_cost_error(&replace, &[]);
    assert_size_error(&replace, &[]);
    // `join` (100 MB at a cost of 1,100): checked before it is built, and charged for
    // what it builds (5 MB: 500,000).
    let s = [("s", string(100_000))];
    assert_size_error("lists.range(1000).map(i, s).join('')", &s);
    let s = [("s", string(5_000))];
    let cost = cost_of("size(lists.range(1000).map(i, s).join(''))", &s);
    assert!(cost >= 500_000, "{cost}");
    // Formatting, quoting, concatenation, base64.
    let s = [("s", string(100_000))];
    assert_size_error("'%s'.format([lists.range(1000).map(i, s)])", &s);
    let clauses = format!("'{}'.format(lists.range(200).map(i, s))", "%s".repeat(200));
    assert_size_error(&clauses, &s);
    let s = [("s", string(4_000_000))];
    assert_size_error("s + s + s", &s);
    // Searching a list for a long string compares it with each element of its length.
    let t = [
        ("s", string(1_000_000)),
        (
            "l",
            Value::from_json(&serde_json::json!(vec!["y".repeat(1_000_000); 20])),
        ),
    ];
    let cost = cost_of("s in l", &t);
    assert!(cost >= 2_000_000, "{cost}");
    // A conversion copies: charged as the value it builds (4 MB: 400,000 each).
    assert_cost_error("lists.range(3).all(i, size(bytes(s)) > 0)", &s);
    // Each `"` is quoted as two bytes.
    let q = [(
        "q",
        Value::from_json(&serde_json::json!("\"".repeat(6_000_000))),
    )];
    assert_size_error("strings.quote(q)", &q);
    assert_size_error("base64.encode(bytes(s + s))", &s);
    assert_size_error("s.replace('', 'ab')", &s);
    assert_size_error("s.split('')", &s);
}

#[test]
fn lists_an_expression_builds_are_charged_and_bounded() {
    // The twenty `lists.range(10000000)` (4 GB): no list passes 1,000,000
    // elements, and each element built costs 1.
    let twenty = format!("size([{}])", vec!["lists.range(10000000)"; 20].join(", "));
    let e = error_of(&twenty, &[], None);
    assert!(
        e.contains("exceeds the size limit of 1000000 elements"),
        "{e}"
    );
    assert_cost_error("size(lists.range(1000000))", &[]);
    // (A variable, so that the expression is not folded when it compiles.)
    let n = [("n", Value::Int(1000))];
    let cost = cost_of("size(lists.range(n))", &n);
    assert!(cost >= 1_000, "{cost}");
    // Concatenation copies: 1 per element.
    let cost = cost_of("size(lists.range(n) + lists.range(n))", &n);
    assert!(cost >= 4_000, "{cost}");
    let l = [("l", Value::from_json(&serde_json::json!(vec![0; 600_000])))];
    assert_size_error("l + l", &l);
    // `flatten` of a list holding the same list many times is bounded as it grows.
    assert_size_error(
        "cel.bind(a, lists.range(1000), lists.range(2000).map(i, a).flatten())",
        &[],
    );
}

#[test]
fn constant_folding_is_bounded_too() {
    // A constant operation is folded when the expression compiles only within a budget:
    // `lists.range(1000000)` is left to the evaluation, which charges it.
    assert_cost_error("lists.range(1000000)", &[]);
    assert_cost_error(
        &format!("size([{}])", vec!["lists.range(1000000)"; 20].join(", ")),
        &[],
    );
}

#[test]
fn expressions_are_bounded_before_they_are_parsed() {
    let env = Env::new(CelEnvironment::all());
    // Source size (the 4 MB of `\U` escapes took 58 s in the parser).
    let long = format!("'{}'", "\\U0001F600".repeat(400_000));
    let e = env.compile(&long).unwrap_err().to_string();
    assert!(e.contains("too long: 4000002 bytes, at most 100000"), "{e}");
    let at_limit = format!("'{}'", "\\U0001F600".repeat((MAX_SOURCE_BYTES - 2) / 10));
    assert!(env.compile(&at_limit).is_ok());
    // List elements (the 2 MB list literal allocated 4 GB).
    let many = format!("[{}]", vec!["1"; MAX_SOURCE_ELEMENTS + 2].join(","));
    let e = env.compile(&many).unwrap_err().to_string();
    assert!(e.contains("too many elements: 10001 separators"), "{e}");
    let some = format!("size([{}]) == 1000", vec!["1"; 1000].join(","));
    assert!(env.compile(&some).is_ok());
}

/// A list of `n` strings of `len` bytes, all distinct allocations of equal contents.
fn strings(n: usize, len: usize) -> Value {
    Value::from_json(&serde_json::json!(vec!["x".repeat(len); n]))
}

#[test]
fn comparisons_are_charged_by_what_they_read() {
    let vars = [
        ("a", string(1000)),
        ("b", string(1000)),
        ("c", string(10)),
        ("x", string(1)),
        ("y", string(1)),
        ("l1", strings(100, 100)),
        ("l2", strings(100, 100)),
    ];
    // Three nodes; one-byte strings read nothing worth a unit.
    assert_eq!(cost_of("x == y", &vars), 3);
    assert_eq!(cost_of("x < y", &vars), 3);
    // As cel-go: 1 per 10 bytes of the shorter string (cel-go charges the call
    // ceil(1000 × 0.1) = 100 where a node costs 1 here: 3 + 100).
    assert_eq!(cost_of("a == b", &vars), 103);
    assert_eq!(cost_of("a != b", &vars), 103);
    assert_eq!(cost_of("a < b", &vars), 103);
    assert_eq!(cost_of("a == c", &vars), 4);
    assert_eq!(cost_of("a >= c", &vars), 4);
    // Lists: 1 per element, and what comparing the elements reads (cel-go charges the
    // elements only, 10): 100 + 100 × 100 bytes = 10,100, 1,010.
    assert_eq!(cost_of("l1 == l2", &vars), 3 + 1_010);
    // Nested: the outer lists' 1 element more (a map's key is hashed: 1 byte more).
    assert_eq!(cost_of("[l1] == [l2]", &vars), 1_015);
    assert_eq!(cost_of("{'k': l1} == {'k': l2}", &vars), 1_017);
    // `contains` reads the string and the needle (a linear search; cel-go charges their
    // product, 10,000); `startsWith` the string.
    assert_eq!(cost_of("a.contains(b)", &vars), 3 + 200);
    assert_eq!(cost_of("a.startsWith(b)", &vars), 3 + 100);
    // A map's key is hashed: 1 per 10 bytes.
    assert_eq!(cost_of("a in {'k': 1}", &vars), 103);
    assert_eq!(cost_of("x in {'k': 1}", &vars), 3);
}

#[test]
fn list_searches_and_sorts_are_charged_by_what_they_read() {
    let vars = [
        ("a", string(1000)),
        ("l", strings(100, 1000)),
        ("l1", strings(100, 100)),
    ];
    // 3 nodes, the call's 1 + 100 / 10 + 1000 / 10, and the needle compared with each
    // element: 100 × 1000 bytes, 10,000 (Kubernetes' traversal cost is 1 per element and 1
    // per 10 bytes of the elements: 10,100).
    assert_eq!(cost_of("l.indexOf(a)", &vars), 10_113);
    assert_eq!(cost_of("l.lastIndexOf(a)", &vars), 10_113);
    assert_eq!(cost_of("a in l", &vars), 10_013);
    // `min`, `max`, `isSorted`: 2 nodes, 1 + 100 / 10, and 1 per 10 bytes of the elements.
    assert_eq!(cost_of("l.min()", &vars), 10_012);
    assert_eq!(cost_of("l.max()", &vars), 10_012);
    assert_eq!(cost_of("l.isSorted()", &vars), 10_012);
    // `sort`: 100 × 7 comparisons, each 1 and 1 per 10 bytes of the second longest
    // element: 700 × 101 = 70,700, more than Kubernetes' charge for 100 strings (2.1 × 100²
    // + 10 = 21,010); with 2 nodes. Of short strings, Kubernetes' charge is more.
    assert_eq!(cost_of("l.sort()", &vars), 70_702);
    assert_eq!(cost_of("l1.sort()", &vars), 21_010 + 2);
    // `distinct` of strings hashes them: 1 per element and 1 per 10 bytes hashed (10,100),
    // less than Kubernetes' charge (21,010); with 2 nodes.
    assert_eq!(cost_of("l.distinct()", &vars), 21_010 + 2);
    assert_eq!(cost_of("l1.distinct()", &vars), 21_010 + 2);
}

#[test]
fn comparison_bombs_fail_on_cost() {
    let mb = 1_000_000;
    // 2,000 references to one 1 MB string, sorted: 22,000 comparisons of up to 1 MB each
    // (22 GB read) were charged 22,000; now 22,000 × 100,001 = 2,200,022,000 (more than
    // Kubernetes' 2.1 × 2,000²), and 4,004 for building the list, charged before the sort
    // starts.
    let e = error_of(
        "lists.range(2000).map(i, s).sort().size()",
        &[("s", string(mb))],
        None,
    );
    assert_eq!(charged(&e), 2_200_026_004, "{e}");
    // Two equal 1 MB strings compared in a loop: 100,000 units each (before, 3): after
    // the range (100,001) and 8 comparisons, the 9th fails.
    let e = error_of(
        "lists.range(100000).all(i, a == b)",
        &[("a", string(mb)), ("b", string(mb))],
        None,
    );
    assert_eq!(e, "cost limit exceeded: 1000039 > 1000000");
    // Searching 1,000 references to a 1 MB string for an equal one (1 GB read), charged
    // 1 + 100 + 100,000 before: the count of what it reads stops past the budget.
    let e = error_of(
        "lists.range(1000).map(i, s).indexOf(t)",
        &[("s", string(mb)), ("t", string(mb))],
        None,
    );
    assert_eq!(e, "cost limit exceeded: 1002104 > 1000000");
    // Lists of shared lists compared deeply: 1,000 × 1,000 strings of 1 KB (1 GB read) on
    // each side, charged 1,000 × 11 before: the count stops at the budget.
    let e = error_of(
        "lists.range(1000).map(i, l1) == lists.range(1000).map(i, l2)",
        &[("l1", strings(1000, 1000)), ("l2", strings(1000, 1000))],
        None,
    );
    assert!(e.starts_with("cost limit exceeded: "), "{e}");
    // `min` of 2,000 references to a 1 MB string, 100 times.
    let e = error_of(
        "lists.range(100).all(i, lists.range(2000).map(j, s).min() == s)",
        &[("s", string(mb))],
        None,
    );
    assert!(e.starts_with("cost limit exceeded: "), "{e}");
}
