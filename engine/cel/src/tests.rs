//! Tests of the public API: compile errors, references, evaluation, functions.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;

use crate::env::{Activation, Env, Program};
use crate::environment::CelEnvironment;
use crate::error::{CompileError, EvalError};
use crate::registry::CustomFunction;
use crate::test_support::full_env;
use crate::value::Value;

fn compile_err(source: &str) -> CompileError {
    match full_env().compile(source) {
        Ok(_) => panic!("`{source}` compiled"),
        Err(e) => e,
    }
}

fn eval_with(
    env: &Env,
    source: &str,
    vars: &[(&str, serde_json::Value)],
) -> Result<Value, EvalError> {
    let program = env.compile(source).unwrap();
    let mut activation = Activation::new(env);
    for (name, value) in vars {
        activation.bind(name, Value::from_json(value));
    }
    program.eval(&activation)
}

fn eval(source: &str) -> Result<Value, EvalError> {
    eval_with(&full_env(), source, &[])
}

fn eval_json(source: &str) -> serde_json::Value {
    eval(source).unwrap().to_json().unwrap()
}

fn eval_err(source: &str) -> String {
    match eval(source) {
        Ok(v) => panic!("`{source}` evaluated to {v:?}"),
        Err(e) => e.message,
    }
}

// ---- 1. compile errors ----------------------------------------------------------------

#[test]
fn compile_error_at_end_of_input() {
    let source = "self.spec.replicas >";
    let e = compile_err(source);
    assert_eq!(e.message, "unexpected end of input");
    assert_eq!((e.line, e.column), (1, 21));
    assert_eq!(
        e.caret(source),
        "self.spec.replicas >\n                    ^"
    );
}

#[test]
fn compile_error_in_an_incomplete_conditional() {
    let source = "a ? b";
    let e = compile_err(source);
    assert_eq!(e.message, "unexpected end of input, expected ':'");
    assert_eq!((e.line, e.column), (1, 6));
    assert_eq!(e.caret(source), "a ? b\n     ^");
}

#[test]
fn compile_error_for_an_unclosed_string() {
    let source = "self.name == 'abc";
    let e = compile_err(source);
    assert_eq!(e.message, "unterminated string literal");
    assert_eq!((e.line, e.column), (1, 14));
    assert_eq!(e.caret(source), "self.name == 'abc\n             ^");

    let e = compile_err("x == \"abc");
    assert_eq!(
        (e.message.as_str(), e.column),
        ("unterminated string literal", 6)
    );
}

#[test]
fn compile_error_on_the_second_line() {
    let source = "self.a &&\n  self.b +* 2";
    let e = compile_err(source);
    assert_eq!(e.message, "unexpected '*'");
    assert_eq!((e.line, e.column), (2, 11));
    assert_eq!(e.caret(source), "  self.b +* 2\n          ^");
}

#[test]
fn compile_error_columns_count_characters() {
    // 'é' is two bytes: columns are characters
    let source = "'éé' + x.all(1, y)";
    let e = compile_err(source);
    assert_eq!(e.message, "argument must be a simple name");
    assert_eq!((e.line, e.column), (1, 14));
    let e = compile_err("'éé' + has(1)");
    assert_eq!(e.message, "invalid argument to has() macro");
    assert_eq!(e.column, 12);
    let e = compile_err("'ééé' + )");
    assert_eq!((e.message.as_str(), e.column), ("unexpected ')'", 9));
}

#[test]
fn compile_error_messages_are_reworded() {
    for (source, message, column) in [
        ("[1, 2", "unexpected end of input, expected ']' or ','", 6),
        ("1 ++ 2", "unexpected '+'", 4),
        ("f(,)", "unexpected ','", 3),
        (
            "'a\\qb'",
            "invalid escape sequence '\\q' in string literal",
            1,
        ),
        ("if", "reserved identifier: if", 1),
        ("a.b(", "unexpected end of input", 5),
    ] {
        let e = compile_err(source);
        assert_eq!(
            (e.message.as_str(), e.column),
            (message, column),
            "{source}"
        );
    }
    let e = compile_err("a $ b");
    assert_eq!(e.message, "unexpected character '$'");
}

#[test]
fn compile_error_for_deep_nesting_and_long_expressions() {
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    assert_eq!(
        compile_err(&deep).message,
        "the expression is nested too deeply"
    );
    let long = format!("1{}", " + 1".repeat(crate::env::MAX_OPERATORS + 1));
    assert_eq!(
        compile_err(&long).message,
        "the expression is too long: 1001 operators, at most 1000"
    );
    // operators in strings do not count
    let quoted = format!("'{}' == ''", "+".repeat(5000));
    assert!(full_env().compile(&quoted).is_ok());
}

#[test]
fn reverse_of_lists_and_strings() {
    // Kubernetes' lists library (version 3) has `reverse` for lists; the strings library's
    // version 3, beyond Kubernetes' (version 2), has it for strings.
    assert_eq!(eval_json("[1, 2, 3].reverse()"), json!([3, 2, 1]));
    let env = full_env();
    let reversed = eval_with(
        &env,
        "'é' + self.name.reverse()",
        &[("self", json!({"name": "aé€b"}))],
    )
    .unwrap();
    assert_eq!(reversed.to_json().unwrap(), json!("éb€éa"));
    let e = eval_with(&env, "self.reverse()", &[("self", json!({"name": "ab"}))]).unwrap_err();
    assert_eq!(
        e.message,
        "no matching overload for 'reverse' applied to map.()"
    );
    assert_eq!((e.line, e.column), (Some(1), Some(13)));
}

// ---- 2. references --------------------------------------------------------------------

fn refs(source: &str) -> (Vec<String>, Vec<(String, String)>) {
    let program = full_env().compile(source).unwrap();
    let r = program.references();
    (
        r.variables.iter().cloned().collect(),
        r.selections.iter().cloned().collect(),
    )
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn references_list_free_variables_and_their_selections() {
    assert_eq!(
        refs("vars.namespace == object.metadata.namespace"),
        (
            strings(&["object", "vars"]),
            pairs(&[("object", "metadata"), ("vars", "namespace")])
        )
    );
    assert_eq!(
        refs("has(vars.x) && vars['y'] == 1 && vars.?z.hasValue() && vars[?'w'].hasValue()"),
        (
            strings(&["vars"]),
            pairs(&[("vars", "w"), ("vars", "x"), ("vars", "y"), ("vars", "z")])
        )
    );
    // a computed index is no selection
    assert_eq!(refs("vars[k]"), (strings(&["k", "vars"]), vec![]));
}

#[test]
fn references_skip_comprehension_variables() {
    assert_eq!(
        refs("x.exists(c, c.y) && x.all(c, c.z > limit)"),
        (strings(&["limit", "x"]), vec![])
    );
    assert_eq!(
        refs("items.map(i, i.name).filter(n, n != self.name)"),
        (strings(&["items", "self"]), pairs(&[("self", "name")]))
    );
    // a variable shadowed inside the comprehension only
    assert_eq!(
        refs("c.ok && [1].all(c, c > 0)"),
        (strings(&["c"]), pairs(&[("c", "ok")]))
    );
    // nested comprehensions
    assert_eq!(
        refs("a.all(x, x.b.exists(y, y == x.c && y == d))"),
        (strings(&["a", "d"]), vec![])
    );
    assert_eq!(
        refs("opt.optMap(v, v.name + suffix)"),
        (strings(&["opt", "suffix"]), vec![])
    );
}

#[test]
fn references_skip_function_namespaces() {
    assert_eq!(
        refs("optional.of(a).orValue(strings.quote(b))"),
        (strings(&["a", "b"]), vec![])
    );
    let env = full_env().with_function("pack.decide", Arc::new(|_| Ok(json!(1))));
    let program = env.compile("pack.decide(x)").unwrap();
    assert_eq!(
        program.references().variables,
        BTreeSet::from(["x".to_string()])
    );
    assert_eq!(
        program
            .eval(&{
                let mut a = Activation::new(&env);
                a.bind("x", Value::int(1));
                a
            })
            .unwrap(),
        Value::int(1)
    );
}

// ---- 3. evaluation and the shape of the environment ------------------------------------

#[test]
fn evaluates_with_bound_variables() {
    let object = json!({"spec": {"replicas": 3, "containers": [{"name": "a"}, {"name": "b"}]}});
    let env = full_env();
    let v = eval_with(
        &env,
        "self.spec.replicas > 2 && self.spec.containers.exists(c, c.name == want)",
        &[("self", object.clone()), ("want", json!("b"))],
    )
    .unwrap();
    assert_eq!(v.as_bool(), Some(true));
    let v = eval_with(
        &env,
        "self.spec.containers.map(c, c.name)",
        &[("self", object)],
    )
    .unwrap();
    assert_eq!(v.to_json().unwrap(), json!(["a", "b"]));
}

#[test]
fn one_value_is_bound_into_many_evaluations() {
    let env = full_env();
    let program = env
        .compile("self.items.filter(i, i > 1).size() + size(self.items)")
        .unwrap();
    let object = Value::from_json(&json!({"items": [1, 2, 3]}));
    for _ in 0..3 {
        let mut activation = Activation::new(&env);
        activation.bind("self", object.clone());
        assert_eq!(program.eval(&activation).unwrap(), Value::int(5));
    }
    // a returned sub-tree is a value like any other, and can be bound again
    let items = env
        .compile("self.items")
        .unwrap()
        .eval(&{
            let mut a = Activation::new(&env);
            a.bind("self", object.clone());
            a
        })
        .unwrap();
    let mut activation = Activation::new(&env);
    activation.bind("xs", items);
    activation.bind("xs", Value::list([Value::int(7)]));
    let program = env.compile("xs[0] + xs.size()").unwrap();
    assert_eq!(program.eval(&activation).unwrap(), Value::int(8));
}

#[test]
fn bound_strings_lists_and_maps_behave_as_literals() {
    let env = full_env();
    let vars = [
        ("s", json!("abc")),
        ("l", json!([1, "x", [2]])),
        ("m", json!({"k": "v", "n": {"x": 1}})),
    ];
    for source in [
        "s == 'abc' && s.startsWith('a') && s + 'd' == 'abcd' && size(s) == 3",
        "s.upperAscii() == 'ABC' && s.charAt(1) == 'b' && s < 'abd' && s in ['abc']",
        "l == [1, 'x', [2]] && l[2] == [2] && 'x' in l && l + [3] == [1, 'x', [2], 3]",
        "m == {'k': 'v', 'n': {'x': 1}} && m.n == {'x': 1} && 'k' in m && m[s.substring(0,0) + 'k'] == 'v'",
        "{s: 1}['abc'] == 1 && [s, s][1] == 'abc' && l.exists(e, e == [2])",
        "optional.of(m).value().n.x == 1 && m.?n.x.value() == 1 && [l][0][2][0] == 2",
        "type(s) == string && type(l) == list && type(m) == map",
    ] {
        let v = eval_with(&env, source, &vars).unwrap();
        assert_eq!(v.as_bool(), Some(true), "{source}");
    }
}

#[test]
fn custom_functions_take_any_arity_and_json() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let f: CustomFunction = Arc::new(move |args| {
        counter.fetch_add(1, Ordering::SeqCst);
        Ok(json!({"n": args.len(), "args": args}))
    });
    let env = full_env().with_function("echo", f);
    assert_eq!(
        eval_with(&env, "echo()", &[]).unwrap().to_json().unwrap(),
        json!({"n": 0, "args": []})
    );
    assert_eq!(
        eval_with(&env, "echo(1, 'a', [true], {'k': 2.5}, b'x')", &[])
            .unwrap()
            .to_json()
            .unwrap(),
        json!({"n": 5, "args": [1, "a", [true], {"k": 2.5}, "eA=="]})
    );
    // called as a method, the receiver comes first
    assert_eq!(
        eval_with(&env, "'r'.echo(2).args", &[])
            .unwrap()
            .to_json()
            .unwrap(),
        json!(["r", 2])
    );
    // the result is a CEL value with Kubernetes conventions
    assert_eq!(
        eval_with(&env, "echo(1).n + 1 == 2 && type(echo().n) == int", &[])
            .unwrap()
            .as_bool(),
        Some(true)
    );
    assert_eq!(calls.load(Ordering::SeqCst), 5);
}

#[test]
fn custom_function_errors() {
    let env = full_env()
        .with_function("fail", Arc::new(|_| Err("No matching row".to_string())))
        .with_function("id", Arc::new(|args| Ok(args[0].clone())));
    assert_eq!(
        eval_with(&env, "fail(1)", &[]).unwrap_err().message,
        "fail: no matching row"
    );
    assert_eq!(
        eval_with(&env, "id(type(1))", &[]).unwrap_err().message,
        "id: argument 1 cannot be passed as JSON: the type value int has no JSON form"
    );
    // replacing a custom function
    let env = env.with_function("fail", Arc::new(|_| Ok(json!("fine"))));
    assert_eq!(
        eval_with(&env, "fail()", &[]).unwrap().to_json().unwrap(),
        json!("fine")
    );
}

#[test]
fn a_custom_function_cannot_take_a_builtin_name() {
    for name in ["size", "sha256", "charAt"] {
        let env = full_env().with_function(name, Arc::new(|_| Ok(json!(null))));
        let e = env.compile("1").unwrap_err();
        assert_eq!(
            e.message,
            format!("the function '{name}' cannot be added: a built-in function has that name")
        );
    }
}

#[test]
fn deep_expressions_evaluate_on_a_small_stack() {
    // Test threads have 2 MiB of stack; an unoptimised evaluation of this needs more.
    let source = format!("0{}", " + 1".repeat(900));
    let env = full_env();
    let program = env.compile(&source).unwrap();
    let handle = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || program.eval(&Activation::new(&full_env())))
        .unwrap();
    assert_eq!(handle.join().unwrap().unwrap(), Value::int(900));
    let nested = format!("{}1{}", "[".repeat(90), "]".repeat(90));
    let program = env.compile(&nested).unwrap();
    let handle = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || program.eval(&Activation::new(&full_env())).is_ok())
        .unwrap();
    assert!(handle.join().unwrap());
}

#[test]
fn the_public_types_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Env>();
    check::<Program>();
    check::<Value>();
    check::<CompileError>();
    check::<EvalError>();
}

// ---- 4. JSON conventions of results -----------------------------------------------------

#[test]
fn results_convert_to_json_with_kubernetes_conventions() {
    assert_eq!(
        eval_json("{1: 'a', 2u: 'b', true: 'c', 'd': 4}"),
        json!({"1": "a", "2": "b", "true": "c", "d": 4})
    );
    assert_eq!(eval_json("b'\\xff\\x00abc'"), json!("/wBhYmM="));
    // At the offset it was written with, as cel-go's JSON conversion writes it.
    assert_eq!(
        eval_json("timestamp('2024-05-06T07:08:09+02:00')"),
        json!("2024-05-06T07:08:09+02:00")
    );
    assert_eq!(
        eval_json("timestamp('2024-05-06T07:08:09.120Z')"),
        json!("2024-05-06T07:08:09.12Z")
    );
    assert_eq!(eval_json("duration('1h30m')"), json!("5400s"));
    assert_eq!(eval_json("duration('1.5s')"), json!("1.5s"));
    assert_eq!(eval_json("duration('-90ms')"), json!("-0.09s"));
    assert_eq!(eval_json("string(duration('1h30m'))"), json!("5400s"));
    assert_eq!(eval_json("optional.of(1)"), json!(1));
    assert_eq!(eval_json("optional.none()"), json!(null));
    assert_eq!(
        eval_json("[optional.of([1]), optional.none()]"),
        json!([[1], null])
    );
    assert_eq!(eval_json("3.0").to_string(), "3.0");
    assert_eq!(eval_json("1.5 * 2.0").to_string(), "3.0");
    assert_eq!(eval_json("2 * 3").to_string(), "6");
    assert_eq!(
        eval_json("18446744073709551615u"),
        json!(18446744073709551615u64)
    );
    assert_eq!(eval_json("double('NaN')"), json!("NaN"));
    assert_eq!(
        eval_json("{'a': [1, {'b': null}]}"),
        json!({"a": [1, {"b": null}]})
    );
    assert_eq!(
        eval("type(1)").unwrap().to_json().unwrap_err().message,
        "the result cannot be represented as JSON: the type value int has no JSON form"
    );
}

#[test]
fn type_names() {
    for (source, name) in [
        ("1", "int"),
        ("1u", "uint"),
        ("1.0", "double"),
        ("'a'", "string"),
        ("b'a'", "bytes"),
        ("null", "null_type"),
        ("[1]", "list"),
        ("{}", "map"),
        ("duration('1s')", "google.protobuf.Duration"),
        ("optional.none()", "optional_type"),
        ("type(1)", "type"),
    ] {
        assert_eq!(eval(source).unwrap().type_name(), name, "{source}");
    }
}

// ---- 5. functions -------------------------------------------------------------------

#[test]
fn sha256_of_strings_and_bytes() {
    assert_eq!(
        eval_json("sha256('abc')"),
        json!("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    );
    assert_eq!(eval_json("sha256(b'abc') == sha256('abc')"), json!(true));
    assert_eq!(
        eval_json("sha256('é')"),
        json!(crate::functions::sha256_hex("é".as_bytes()))
    );
    assert_eq!(
        eval_err("sha256(1)"),
        "no matching overload for 'sha256' applied to (int)"
    );
    assert_eq!(
        eval_err("sha256('a', 'b')"),
        "no matching overload for 'sha256' applied to (string, string)"
    );
}

#[test]
fn dns1123_functions() {
    for (source, expected) in [
        ("isDNS1123Label('my-app')", json!(true)),
        ("isDNS1123Label('My-App')", json!(false)),
        ("isDNS1123Label('a.b')", json!(false)),
        ("isDNS1123Label('')", json!(false)),
    ] {
        assert_eq!(eval_json(source), expected, "{source}");
    }
    assert_eq!(
        eval_json("isDNS1123Subdomain('api.example.com')"),
        json!(true)
    );
    assert_eq!(
        eval_json("isDNS1123Subdomain('api..example.com')"),
        json!(false)
    );
    assert_eq!(eval_json("isDNS1123Subdomain('-a.b')"), json!(false));
    assert_eq!(eval_json("dns1123Label('my-app')"), json!("my-app"));
    assert_eq!(
        eval_json("dns1123Label('Team/My_App')"),
        json!(crate::functions::dns1123_label("Team/My_App"))
    );
    assert_eq!(
        eval_json("isDNS1123Label(dns1123Label('Team/My_App'))"),
        json!(true)
    );
    assert_eq!(
        eval_err("isDNS1123Label(1)"),
        "no matching overload for 'isDNS1123Label' applied to (int)"
    );
    assert_eq!(
        eval_err("isDNS1123Subdomain(null)"),
        "no matching overload for 'isDNS1123Subdomain' applied to (null_type)"
    );
    assert_eq!(
        eval_err("dns1123Label(['a'])"),
        "no matching overload for 'dns1123Label' applied to (list)"
    );
}

#[test]
fn merge_joins_two_maps_shallowly_the_argument_winning() {
    for (source, expected) in [
        ("{}.merge({})", json!({})),
        ("{'a': 1}.merge({'b': 2})", json!({"a": 1, "b": 2})),
        ("{'a': 1, 'b': 1}.merge({'a': 2})", json!({"a": 2, "b": 1})),
        (
            "{'a': {'x': 1}}.merge({'a': {'y': 2}})",
            json!({"a": {"y": 2}}),
        ),
        (
            "dyn({'app': 'web'}).merge(dyn({'tier': 1}))",
            json!({"app": "web", "tier": 1}),
        ),
    ] {
        assert_eq!(eval_json(source), expected, "{source}");
    }
    assert_eq!(
        eval_err("dyn({'a': 1}).merge(dyn([1]))"),
        "no matching overload for 'merge' applied to map.(list)"
    );
}

#[test]
fn strings_library() {
    for (source, expected) in [
        ("'TacoCat'.lowerAscii()", json!("tacocat")),
        ("'TacoCat'.upperAscii()", json!("TACOCAT")),
        ("'a-b-c'.replace('-', '+')", json!("a+b+c")),
        ("'a-b-c'.replace('-', '+', 1)", json!("a+b-c")),
        ("'a,b,c'.split(',')", json!(["a", "b", "c"])),
        ("'a,b,c'.split(',', 2)", json!(["a", "b,c"])),
        ("['a', 'b'].join()", json!("ab")),
        ("['a', 'b'].join('-')", json!("a-b")),
        ("'tacocat'.substring(4)", json!("cat")),
        ("'tacocat'.substring(0, 4)", json!("taco")),
        ("'  x \\t'.trim()", json!("x")),
        ("'hello'.indexOf('l')", json!(2)),
        ("'hello'.indexOf('l', 3)", json!(3)),
        ("'hello'.lastIndexOf('l')", json!(3)),
        ("'hello'.lastIndexOf('l', 2)", json!(2)),
        ("'héllo'.charAt(1)", json!("é")),
        ("'%s has %d items'.format(['x', 3])", json!("x has 3 items")),
        ("strings.quote('a\"b')", json!("\"a\\\"b\"")),
    ] {
        assert_eq!(eval_json(source), expected, "{source}");
    }
    assert_eq!(eval_err("'abc'.charAt(4)"), "charAt: index out of range: 4");
    assert_eq!(
        eval_err("'abc'.substring(2, 1)"),
        "substring: invalid substring range. start: 2, end: 1"
    );
    assert_eq!(
        eval_err("'abc'.lowerAscii(1)"),
        "no matching overload for 'lowerAscii' applied to string.(int)"
    );
}

#[test]
fn libraries_beyond_kubernetes_are_namespaced() {
    assert_eq!(eval_json("math.greatest(1, 2.5, 2u)"), json!(2.5));
    assert_eq!(eval_json("math.least([3, 1, 2])"), json!(1));
    assert_eq!(eval_json("base64.encode(b'hello')"), json!("aGVsbG8="));
    assert_eq!(
        eval_json("string(base64.decode('aGVsbG8'))"),
        json!("hello")
    );
    // a variable of the namespace's name is still a variable, its functions still functions
    let env = full_env();
    let vars = [("math", json!({"pi": 3.5})), ("base64", json!("x"))];
    assert_eq!(
        eval_with(&env, "math.pi + math.ceil(0.5)", &vars)
            .unwrap()
            .to_json()
            .unwrap(),
        json!(4.5)
    );
    assert_eq!(
        eval_with(&env, "base64 + base64.encode(b'a')", &vars)
            .unwrap()
            .to_json()
            .unwrap(),
        json!("xYQ==")
    );
    let program = env.compile("math.greatest(a, b) + math.abs(c)").unwrap();
    let variables: Vec<&String> = program.references().variables.iter().collect();
    assert_eq!(variables, ["a", "b", "c"]);
    assert_eq!(eval_err("'a'.upper()"), "undeclared reference to 'upper'");
}

#[test]
fn quoted_field_names() {
    let env = full_env();
    let vars = [(
        "m",
        json!({"content-type": "json", "foo.txt": 32, "a": {"b": 1}}),
    )];
    let eval = |source: &str| {
        eval_with(&env, source, &vars)
            .map(|v| v.to_json().unwrap())
            .map_err(|e| e.message)
    };
    assert_eq!(eval("m.`content-type`"), Ok(json!("json")));
    assert_eq!(eval("m.`foo.txt`"), Ok(json!(32)));
    assert_eq!(
        eval("has(m.`foo.txt`) && !has(m.`bar.txt`)"),
        Ok(json!(true))
    );
    assert_eq!(eval("m.`a`.b"), Ok(json!(1)));
    assert_eq!(eval("m.`foo`"), Err("no such key: foo".to_string()));
    let program = env.compile("m.`foo.txt` + m.x").unwrap();
    let selections: Vec<(String, String)> =
        program.references().selections.iter().cloned().collect();
    assert_eq!(
        selections,
        [("m".into(), "foo.txt".into()), ("m".into(), "x".into())]
    );
}

#[test]
fn containers_and_leading_dots() {
    let env = full_env().with_container("com.example");
    let vars = [
        ("com.example.y", json!("com.example.y")),
        ("com.z", json!("com.z")),
        ("y", json!("y")),
        ("z", json!("z")),
        ("w", json!({"v": "w.v"})),
    ];
    let eval = |source: &str| {
        eval_with(&env, source, &vars)
            .map(|v| v.to_json().unwrap())
            .map_err(|e| e.message)
    };
    assert_eq!(eval("y"), Ok(json!("com.example.y")));
    assert_eq!(eval("z"), Ok(json!("com.z")));
    assert_eq!(eval(".y"), Ok(json!("y")));
    assert_eq!(eval("w.v"), Ok(json!("w.v")));
    assert_eq!(
        eval("['a'].exists(y, y == 'a' && .y == 'y')"),
        Ok(json!(true))
    );
    // the longest dotted name first, under the container's prefixes before as written
    let vars = [
        ("com.example.a", json!({"b": "com.example.a/b"})),
        ("a.b", json!("a.b")),
    ];
    assert_eq!(
        eval_with(&env, "a.b", &vars).unwrap().to_json().unwrap(),
        json!("a.b")
    );
    assert_eq!(
        eval_with(&env, "a", &vars).unwrap().to_json().unwrap(),
        json!({"b": "com.example.a/b"})
    );
    // without a container, a leading dot still names the variable
    let plain = full_env();
    assert_eq!(
        eval_with(&plain, "[1].all(x, .x == 2)", &[("x", json!(2))])
            .unwrap()
            .to_json()
            .unwrap(),
        json!(true)
    );
    let program = plain.compile("[1].all(x, .x == x)").unwrap();
    let variables: Vec<&String> = program.references().variables.iter().collect();
    assert_eq!(variables, ["x"]);
}

#[test]
fn kubernetes_libraries_are_registered() {
    for (source, expected) in [
        (
            "quantity('1Gi').isGreaterThan(quantity('100Mi'))",
            json!(true),
        ),
        ("isQuantity('1x')", json!(false)),
        ("string(ip('10.0.0.1'))", json!("10.0.0.1")),
        ("type(ip('10.0.0.1')) == net.IP", json!(true)),
        ("cidr('10.0.0.0/8').containsIP(ip('10.1.2.3'))", json!(true)),
        ("ip.isCanonical('10.0.0.1')", json!(true)),
        (
            "url('https://example.com/x').getHost()",
            json!("example.com"),
        ),
        ("semver('1.2.3').major()", json!(1)),
        ("[1, 2, 3].sum()", json!(6)),
        ("[3, 1, 2].sortBy(x, -x)", json!([3, 2, 1])),
        ("lists.range(3)", json!([0, 1, 2])),
        ("[1, 2, 2].distinct()", json!([1, 2])),
        ("sets.contains([1, 2, 3], [2])", json!(true)),
        ("'abc 123'.find('[0-9]+')", json!("123")),
        ("'hello'.indexOf('l')", json!(2)),
        ("[1, 2, 1].lastIndexOf(1)", json!(2)),
        ("quantity('1.5Gi') == quantity('1536Mi')", json!(true)),
    ] {
        assert_eq!(eval_json(source), expected, "{source}");
    }
}

// ---- 6. evaluation errors ---------------------------------------------------------------

#[test]
fn evaluation_errors_are_clear() {
    let env = full_env();
    let object = json!({"spec": {"replicas": 3, "name": "x"}});
    let err = |source: &str| {
        eval_with(&env, source, &[("self", object.clone())])
            .unwrap_err()
            .message
    };
    assert_eq!(err("self.spec.replicsa > 1"), "no such key: replicsa");
    assert_eq!(err("self.spec['nope']"), "no such key: nope");
    assert_eq!(
        err("self.spec.name > 1"),
        "no matching overload for '_>_' applied to (string, int)"
    );
    assert_eq!(
        err("self.spec.replicas + 'a'"),
        "no matching overload for '_+_' applied to (int, string)"
    );
    assert_eq!(
        err("self.spec.name.contains(1)"),
        "no matching overload for 'contains' applied to string.(int)"
    );
    assert_eq!(err("other.x"), "undeclared reference to 'other'");
    assert_eq!(err("nope(1)"), "undeclared reference to 'nope'");
    assert_eq!(err("self.spec.replicas / 0"), "division by zero");
    assert_eq!(err("self.spec.replicas % 0"), "modulus by zero");
    assert_eq!(
        err("9223372036854775807 + self.spec.replicas"),
        "integer overflow"
    );
    assert_eq!(err("[1, 2][self.spec.replicas]"), "index out of bounds: 3");
    assert_eq!(err("self.spec.replicas ? 1 : 2"), "expected bool, got int");
    assert_eq!(
        err("int('x')"),
        "type conversion error from 'string' to 'int'"
    );
    assert_eq!(
        err("self.spec.replicas * 1.5"),
        "no matching overload for '_*_' applied to (int, double)"
    );
}

// ---- Kubernetes semantics ----------------------------------------------------------------

/// What Kubernetes' CEL answers where the CEL spec or Rust's parsers would answer otherwise
/// (checked against Kubernetes 1.34, `tools/cel-oracle`).
#[test]
fn literals_conversions_and_timestamps_answer_as_kubernetes() {
    for (source, expected) in [
        // A map literal keeps the last of a repeated key; an absent optional entry removes
        // the key; `1` and `1u` are two keys; double keys are looked up as cel-go does.
        ("{'a': 1, 'a': 2}", json!({"a": 2})),
        ("{'a': 1, ?'a': optional.none()}.size()", json!(0)),
        ("{dyn(1): 'a', dyn(1u): 'b'}.size()", json!(2)),
        ("dyn({1: 'a'}) == dyn({1.0: 'a'})", json!(false)),
        ("dyn({1.0: 'a'}) == dyn({1: 'a'})", json!(true)),
        ("{1.0: 'a'}[1.0]", json!("a")),
        // Strings read as Go reads them.
        ("int('+1')", json!(1)),
        ("double('0x1p-2')", json!(0.25)),
        ("double('1_000')", json!(1000.0)),
        ("bool('F')", json!(false)),
        (
            "duration('-9223372036854775808ns')",
            json!("-9223372036.854775808s"),
        ),
        // A timestamp keeps the offset it was written with; Go's zero time is year 1.
        (
            "string(timestamp('2024-06-01T12:00:00+02:00') + duration('1h'))",
            json!("2024-06-01T13:00:00+02:00"),
        ),
        (
            "timestamp('2024-06-01T12:00:00+02:00').getHours()",
            json!(10),
        ),
        (
            "string(timestamp('2024-01-01T1:00:00,5Z'))",
            json!("2024-01-01T01:00:00.5Z"),
        ),
        (
            "optional.ofNonZeroValue(timestamp('1970-01-01T00:00:00Z')).hasValue()",
            json!(true),
        ),
        (
            "optional.ofNonZeroValue(timestamp('0001-01-01T00:00:00Z')).hasValue()",
            json!(false),
        ),
        (
            "optional.ofNonZeroValue(optional.none()).hasValue()",
            json!(true),
        ),
    ] {
        assert_eq!(eval_json(source), expected, "{source}");
    }
    for source in [
        "uint('+1')",
        "double('1e400')",
        "double('-nan')",
        "timestamp('2024-01-01t00:00:00z')",
    ] {
        assert!(eval(source).is_err(), "{source}");
    }
    // A double key has no JSON form.
    assert!(eval("{1.0: 'a'}").is_ok_and(|v| v.to_json().is_err()));
}

/// Strict mode refuses what the API server refuses and packs are allowed.
#[test]
fn strict_mode_checks_as_the_api_server() {
    let relaxed = Env::kubernetes();
    let strict = Env::kubernetes().strict();
    assert_eq!(strict.strictness(), crate::Strictness::Kubernetes);
    for (source, message, column) in [
        ("[1, 'a']", "expected type 'int' but found 'string'", 5),
        (
            "{'a': 1, 'b': 'x'}",
            "expected type 'int' but found 'string'",
            15,
        ),
        ("m.`a-b`", "unsupported syntax: '`'", 3),
        (
            "null == 1",
            "found no matching overload for '_==_' applied to '(null, int)'",
            6,
        ),
        (
            "sha256('a')",
            "function 'sha256' is not in this environment: it is the engine's own, which \
             Kubernetes does not have (the environment is strict)",
            1,
        ),
    ] {
        assert!(relaxed.compile(source).is_ok(), "{source}");
        let e = strict.compile(source).unwrap_err();
        assert_eq!(
            (e.message.as_str(), e.column),
            (message, column),
            "{source}"
        );
    }
    // Variables declared `dyn` are `dyn` as Kubernetes declares them.
    let types = crate::check::TypeEnv::new().with_variable("x", crate::check::Type::Dyn);
    assert!(strict.compile("[x, 1]").is_ok());
    let e = strict.compile_with_types("[x, 1]", &types).unwrap_err();
    assert_eq!(e.message, "expected type 'dyn' but found 'int'");
    assert!(relaxed.compile_with_types("[x, 1]", &types).is_ok());
    // Custom functions stay.
    let custom = strict.with_function(
        "decide",
        std::sync::Arc::new(|_: &[serde_json::Value]| Ok(serde_json::json!(1))),
    );
    assert!(custom.compile("decide(1) == 1").is_ok());
}

#[test]
fn kubernetes_language_settings() {
    // cel.CrossTypeNumericComparisons
    assert_eq!(eval_json("1 < 2.5 && 2u > 1 && 1.0 == 1"), json!(true));
    // cel.DefaultUTCTimeZone
    assert_eq!(
        eval_json("timestamp('2024-01-01T23:00:00-05:00').getHours()"),
        json!(4)
    );
    assert_eq!(
        eval_json("timestamp('2024-01-01T23:00:00Z').getHours('America/New_York')"),
        json!(18)
    );
    // optional values
    assert_eq!(eval_json("{'a': 1}[?'b'].orValue(2)"), json!(2));
    assert_eq!(eval_json("[?optional.none(), ?optional.of(1)]"), json!([1]));
}

#[test]
fn macro_error_positions_on_later_lines_count_characters() {
    let source = "'éé'\n + 'é' + has(1)";
    let e = compile_err(source);
    assert_eq!(e.message, "invalid argument to has() macro");
    assert_eq!((e.line, e.column), (2, 14));
    assert_eq!(e.caret(source), " + 'é' + has(1)\n             ^");
}

#[test]
fn a_panicking_custom_function_fails_only_its_evaluation() {
    let env = full_env().with_function("boom", Arc::new(|_| panic!("kaboom")));
    // (the panic message printed here is expected)
    let result = eval_with(&env, "boom()", &[]);
    assert_eq!(
        result.unwrap_err().message,
        "internal error in the CEL interpreter: kaboom"
    );
    assert_eq!(eval_with(&env, "1 + 1", &[]).unwrap(), Value::int(2));
}

// ---- the evaluator: new language features ------------------------------------------------

#[test]
fn two_variable_comprehensions() {
    for (source, expected) in [
        ("[1, 2, 3].all(i, v, i < v)", json!(true)),
        (
            "{'hello': 'world', 'taco': 'taco'}.all(k, v, k != v)",
            json!(false),
        ),
        (
            "{'h': ['hello', 'hi'], 'j': ['joke', 'jog']}.all(k, vals, vals.all(v, v.startsWith(k)))",
            json!(true),
        ),
        (
            "{'greeting': 'hello', 'farewell': 'goodbye'}.exists(k, v, k.startsWith('good') || v.endsWith('bye'))",
            json!(true),
        ),
        (
            "[1, 2, 4, 8, 16].exists(i, v, v == 1024 && i == 10)",
            json!(false),
        ),
        (
            "[1, 2, 1, 3, 1, 4].existsOne(i, v, i == 1 || v == 1)",
            json!(false),
        ),
        (
            "[1, 1, 2, 2, 3, 3].existsOne(i, v, i == 2 && v == 2)",
            json!(true),
        ),
        (
            "{'i': 0, 'j': 1, 'k': 2}.exists_one(i, v, i == 'l' || v == 1)",
            json!(true),
        ),
        (
            "[1, 2, 3].transformList(i, v, (i * v) + v)",
            json!([1, 4, 9]),
        ),
        (
            "[1, 2, 3].transformList(i, v, i % 2 == 0, (i * v) + v)",
            json!([1, 9]),
        ),
        (
            "{'greeting': 'hello', 'farewell': 'goodbye'}.transformList(k, _, k)",
            json!(["farewell", "greeting"]),
        ),
        (
            "[1, 2, 3].transformMap(i, v, (i * v) + v)",
            json!({"0": 1, "1": 4, "2": 9}),
        ),
        (
            "[1, 2, 3].transformMap(i, v, i % 2 == 0, (i * v) + v)",
            json!({"0": 1, "2": 9}),
        ),
        (
            "{'greeting': 'hello'}.transformMap(k, v, v + '!')",
            json!({"greeting": "hello!"}),
        ),
        (
            "{'greeting': 'hello'}.transformMapEntry(k, v, {v: k})",
            json!({"hello": "greeting"}),
        ),
        (
            "[1, 2, 3].transformMapEntry(i, v, i > 0, {string(v): i})",
            json!({"2": 1, "3": 2}),
        ),
    ] {
        assert_eq!(eval_json(source), expected, "{source}");
    }
    assert_eq!(
        eval_err("{'greeting': 'aloha', 'farewell': 'aloha'}.transformMapEntry(k, v, {v: k})"),
        "repeated map key: 'aloha'"
    );
    let e = compile_err("[1].all(i, i, true)");
    assert_eq!(e.message, "duplicate variable name: i");
    let e = compile_err("[1].transformList(i, 1, true)");
    assert_eq!(e.message, "argument must be a simple name");
}

#[test]
fn cel_bind() {
    assert_eq!(eval_json("cel.bind(x, 'a', x + x)"), json!("aa"));
    assert_eq!(
        eval_json("cel.bind(t1, true, cel.bind(t2, false, t1 && !t2))"),
        json!(true)
    );
    assert_eq!(
        eval_json("cel.bind(v, [1, 2, 3], [3, 4].filter(e, e in v))"),
        json!([3])
    );
    // shadowing, and a bound name is no free variable
    assert_eq!(eval_json("cel.bind(x, 1, cel.bind(x, x + 1, x))"), json!(2));
    assert_eq!(refs("cel.bind(x, y, x + 1)"), (strings(&["y"]), vec![]));
    // another target's `bind` is a plain method call
    assert_eq!(
        eval_err("[1].bind(1, 1, 1)"),
        "undeclared reference to 'bind'"
    );
}

#[test]
fn maps_iterate_in_key_order() {
    assert_eq!(
        eval_json("{'b': 1, 'a': 2, 'c': 3}.map(k, k)"),
        json!(["a", "b", "c"])
    );
    assert_eq!(
        eval("{'b': 1, 'a': 2}")
            .unwrap()
            .to_json()
            .unwrap()
            .to_string(),
        r#"{"a":2,"b":1}"#
    );
    assert_eq!(eval_json("{2: 'x', 1: 'y'}.map(k, k)"), json!([1, 2]));
}

#[test]
fn short_circuits_absorb_errors_on_either_side() {
    for (source, expected) in [
        ("1 / 0 == 1 || true", json!(true)),
        ("true || 1 / 0 == 1", json!(true)),
        ("1 / 0 == 1 && false", json!(false)),
        ("false && 1 / 0 == 1", json!(false)),
        ("[1, 0].exists(x, 1 / x == 1)", json!(true)),
        ("[0, 1].all(x, 1 / x == 2)", json!(false)),
        ("optional.of(1).or(optional.of(1 / 0))", json!(1)),
        ("optional.of(1).orValue(1 / 0)", json!(1)),
        ("true ? 1 : 1 / 0", json!(1)),
    ] {
        assert_eq!(eval_json(source), expected, "{source}");
    }
    assert_eq!(eval_err("1 / 0 == 1 || false"), "division by zero");
    assert_eq!(eval_err("[0, 1].all(x, 1 / x == 1)"), "division by zero");
}

#[test]
fn evaluation_errors_point_at_the_failing_node() {
    let env = full_env();
    let object = json!({"spec": {"replicas": 3, "name": "x"}});
    let err = |source: &str| eval_with(&env, source, &[("self", object.clone())]).unwrap_err();
    let e = err("self.spec.name > 1");
    assert_eq!(
        e.message,
        "no matching overload for '_>_' applied to (string, int)"
    );
    assert_eq!((e.line, e.column), (Some(1), Some(16)));
    let e = err("self.spec.replicas > 1 &&\n  self.spec.nope == 2");
    assert_eq!(e.message, "no such key: nope");
    assert_eq!(e.line, Some(2));
    let e = err("[1, 2].map(x, x / (x - 1))");
    assert_eq!(e.message, "division by zero");
    assert_eq!((e.line, e.column), (Some(1), Some(17)));
    assert_eq!(e.to_string(), "division by zero");
    // errors from functions and conversions too
    let e = err("'abc'.charAt(9)");
    assert_eq!((e.line, e.column), (Some(1), Some(13)));
    let e = EvalError::new("x");
    assert_eq!((e.line, e.column), (None, None));
}

#[test]
fn evaluation_cost_is_metered() {
    let env = full_env();
    let mut activation = Activation::new(&env);
    activation.bind("self", Value::from_json(&json!({"items": [1, 2, 3]})));
    let program = env.compile("self.items.exists(x, x == 3)").unwrap();
    let (value, cost) = program.eval_with_cost(&activation).unwrap();
    assert_eq!(value, Value::bool(true));
    // exists 1 + range 2 (self, .items) + 3 iterations of (1 + 3 nodes)
    assert_eq!(cost, 15);
    assert_eq!(program.static_cost_bound(), None);

    let program = env.compile("self.items[0] + 1 > 1 && true").unwrap();
    let (_, cost) = program.eval_with_cost(&activation).unwrap();
    let bound = program.static_cost_bound().unwrap();
    assert!(cost <= bound, "{cost} <= {bound}");
    // constants are folded
    assert_eq!(
        env.compile("1 + 2 * 3 == 7").unwrap().static_cost_bound(),
        Some(1)
    );

    // a budget stops the evaluation at once, with the exact message
    activation.with_budget(10);
    let e = env
        .compile("self.items.exists(x, x == 3)")
        .unwrap()
        .eval(&activation)
        .unwrap_err();
    assert_eq!(e.message, "cost limit exceeded: 11 > 10");
    // no operator absorbs it
    let e = env
        .compile("true || self.items.exists(x, x == 3)")
        .unwrap()
        .eval(&activation);
    assert_eq!(e.unwrap(), Value::bool(true));
    let e = env
        .compile("self.items.exists(x, x == 3) || true")
        .unwrap()
        .eval(&activation)
        .unwrap_err();
    assert!(
        e.message.starts_with("cost limit exceeded: "),
        "{}",
        e.message
    );
    // sizes count: concatenating long strings costs more
    activation.with_budget(1_000_000);
    let long = "x".repeat(1000);
    activation.bind("s", Value::string(long));
    let (_, cost) = env
        .compile("s + s")
        .unwrap()
        .eval_with_cost(&activation)
        .unwrap();
    assert_eq!(cost, 3 + 200);
}

#[test]
fn a_quadratic_comprehension_is_stopped_by_the_default_limit() {
    let env = full_env();
    assert_eq!(
        env.limits(),
        crate::env::Limits {
            per_expression: 1_000_000
        }
    );
    let items: Vec<serde_json::Value> = (0..10_000).map(|i| json!(i)).collect();
    let program = env
        .compile("self.items.all(x, self.items.exists(y, y == x))")
        .unwrap();
    let mut activation = Activation::new(&env);
    activation.bind("self", Value::from_json(&json!({ "items": items })));
    let started = std::time::Instant::now();
    let e = program.eval(&activation).unwrap_err();
    assert_eq!(e.message, "cost limit exceeded: 1000001 > 1000000");
    println!("stopped after {:?}", started.elapsed());
    // a lower limit from the environment
    let env = env.with_limits(crate::env::Limits {
        per_expression: 500,
    });
    let program = env.compile("[1, 2, 3].map(x, x * 2)").unwrap();
    assert!(program.eval(&Activation::new(&env)).is_ok());
    let program = env.compile("self.items.all(x, x >= 0)").unwrap();
    let mut activation = Activation::new(&env);
    activation.bind(
        "self",
        Value::from_json(&json!({ "items": (0..1000).collect::<Vec<_>>() })),
    );
    assert_eq!(
        program.eval(&activation).unwrap_err().message,
        "cost limit exceeded: 501 > 500"
    );
}

#[test]
fn values_are_shared_not_copied() {
    let env = full_env();
    let object = Value::from_json(&json!({"spec": {"items": [{"a": 1}, {"a": 2}]}}));
    let mut activation = Activation::new(&env);
    activation.bind("self", object.clone());
    let items = env
        .compile("self.spec.items")
        .unwrap()
        .eval(&activation)
        .unwrap();
    let Value::Map(root) = &object else { panic!() };
    let Some(Value::Map(spec)) = root.get_str("spec") else {
        panic!()
    };
    let (Some(Value::List(original)), Value::List(returned)) = (spec.get_str("items"), &items)
    else {
        panic!()
    };
    assert!(Arc::ptr_eq(original, returned));
    let filtered = env
        .compile("self.spec.items.filter(i, i.a > 1)")
        .unwrap()
        .eval(&activation)
        .unwrap();
    let (Value::List(f), Value::Map(first)) = (&filtered, &original[1]) else {
        panic!()
    };
    let Value::Map(kept) = &f[0] else { panic!() };
    assert!(Arc::ptr_eq(first, kept));
}

#[test]
fn chains_of_additions_behave_as_the_additions_one_by_one() {
    let env = full_env();
    let vars = [("s", json!("x")), ("n", json!(2)), ("l", json!([1]))];
    for (source, expected) in [
        ("s + '/' + s + ':' + string(n)", json!("x/x:2")),
        ("n + 1 + n + 3", json!(8)),
        ("l + [2] + l", json!([1, 2, 1])),
        ("s + s + s + s + s", json!("xxxxx")),
    ] {
        let v = eval_with(&env, source, &vars).unwrap();
        assert_eq!(v.to_json().unwrap(), expected, "{source}");
    }
    let e = eval_with(&env, "s + s + n + s", &vars).unwrap_err();
    assert_eq!(
        e.message,
        "no matching overload for '_+_' applied to (string, int)"
    );
    assert_eq!((e.line, e.column), (Some(1), Some(7)));
    // the same cost as three separate additions: 4 operands + 3 `+`
    let program = env.compile("s + s + s + s").unwrap();
    let mut activation = Activation::new(&env);
    activation.bind("s", Value::string("y".repeat(100)));
    assert_eq!(
        program.eval_with_cost(&activation).unwrap().1,
        7 + 20 + 30 + 40
    );
}

// ---- agreement with Kubernetes (tests/differential.rs found these) ------------------------

/// cel-go's optional library, version 2, in Kubernetes 1.34: `first()`/`last()` of a list
/// are optional values.
#[test]
fn list_first_and_last_are_optionals() {
    for (source, expected) in [
        ("[1, 2, 3].first()", json!(1)),
        ("[1, 2, 3].last()", json!(3)),
        ("[].first()", json!(null)),
        ("[].last()", json!(null)),
        ("[1, 2, 3].first().value()", json!(1)),
        ("['a', 'b'].last().orValue('z')", json!("b")),
        ("[].first().hasValue()", json!(false)),
        ("[].last().orValue(7)", json!(7)),
        ("type([1].first()) == optional_type", json!(true)),
        ("dyn([[1], [2]]).last()", json!([2])),
    ] {
        assert_eq!(eval_json(source), expected, "{source}");
    }
    assert_eq!(
        eval_err("'abc'.first()"),
        "no matching overload for 'first' applied to string.()"
    );
}

/// cel-go v0.26: an offset at or past the end finds nothing (-1); an empty needle answers
/// the offset itself, even out of range; a negative offset is still an error.
#[test]
fn string_index_of_with_an_offset_past_the_end() {
    for (source, expected) in [
        ("'hello'.indexOf('l', 10)", -1),
        ("'hello'.lastIndexOf('l', 10)", -1),
        ("'héllo'.indexOf('l', 5)", -1),
        ("'abc'.indexOf('c', 3)", -1),
        ("'abc'.lastIndexOf('c', 3)", -1),
        ("'abc'.lastIndexOf('c', 2)", 2),
        ("'abc'.indexOf('c', 2)", 2),
        ("''.lastIndexOf('c', 0)", -1),
        ("'abc'.indexOf('', 4)", 4),
        ("'abc'.lastIndexOf('', 10)", 10),
        ("'abc'.indexOf('', -1)", -1),
        ("''.indexOf('', 0)", 0),
    ] {
        assert_eq!(eval_json(source), json!(expected), "{source}");
    }
    assert_eq!(
        eval_err("'abc'.indexOf('a', -1)"),
        "indexOf: index out of range: -1"
    );
    assert_eq!(
        eval_err("'abc'.lastIndexOf('a', -1)"),
        "lastIndexOf: index out of range: -1"
    );
}

/// cel-go: `duration.getMilliseconds()` is the whole duration in milliseconds (truncated
/// toward zero, as Go's `Duration.Milliseconds`), and `int(duration)` its nanoseconds.
#[test]
fn duration_milliseconds_and_int_of_a_duration() {
    for (source, expected) in [
        ("duration('1500ms').getMilliseconds()", 1500),
        ("duration('1h').getMilliseconds()", 3_600_000),
        ("duration('-1.5s').getMilliseconds()", -1500),
        ("duration('1.0005s').getMilliseconds()", 1000),
        ("duration('-1.0005s').getMilliseconds()", -1000),
        ("duration('1h').getSeconds()", 3600),
        ("timestamp('2020-01-01T00:00:01.5Z').getMilliseconds()", 500),
        ("int(duration('1s'))", 1_000_000_000),
        ("int(duration('-1.5s'))", -1_500_000_000),
        ("int(duration('0s'))", 0),
        ("int(dyn(duration('1ns')))", 1),
    ] {
        assert_eq!(eval_json(source), json!(expected), "{source}");
    }
}

/// `string(double)` and `%s` of a double are cel-go's `strconv.FormatFloat(d, 'g', -1, 64)`.
#[test]
fn string_of_a_double_is_go_s_shortest_g() {
    for (source, expected) in [
        ("string(1.0)", "1"),
        ("string(-0.0)", "-0"),
        ("string(1.5)", "1.5"),
        ("string(123.456)", "123.456"),
        ("string(-4.5e-3)", "-0.0045"),
        ("string(0.0001)", "0.0001"),
        ("string(0.00001234)", "1.234e-05"),
        ("string(1.5e-7)", "1.5e-07"),
        ("string(123456.0)", "123456"),
        ("string(999999.0)", "999999"),
        ("string(1e6)", "1e+06"),
        ("string(1234567.0)", "1.234567e+06"),
        ("string(-1234567.5)", "-1.2345675e+06"),
        ("string(1e21)", "1e+21"),
        ("string(-1.5e300)", "-1.5e+300"),
        ("string(5e-324)", "5e-324"),
        ("string(1.7976931348623157e308)", "1.7976931348623157e+308"),
        ("string(double('inf'))", "+Inf"),
        ("string(double('-inf'))", "-Inf"),
        ("string(double('nan'))", "NaN"),
        ("'%s'.format([1e6])", "1e+06"),
        ("'%s'.format([1.0])", "1"),
        ("'%s'.format([1e-7])", "1e-07"),
        ("'%s'.format([double('inf')])", "+Inf"),
        // durations keep every digit, as cel-go's `string(duration)`
        ("'%s'.format([duration('1000000s')])", "1000000s"),
        ("'%s'.format([duration('0.00001s')])", "0.00001s"),
    ] {
        assert_eq!(eval_json(source), json!(expected), "{source}");
    }
}

/// Conversions and `lists.range` at the edges, as cel-go v0.26: `uint()` of any negative
/// double fails, `double()` of a string beyond the double range fails, and
/// `lists.range()` of a negative size is empty.
#[test]
fn conversion_and_range_edges() {
    for (source, expected) in [
        ("uint(-0.0)", json!(0)),
        ("uint(0.9)", json!(0)),
        ("double('1e-400')", json!(0.0)),
        (
            "double('1.7976931348623157e308')",
            json!(1.7976931348623157e308),
        ),
        ("string(double('inf'))", json!("+Inf")),
        ("string(double('-Infinity'))", json!("-Inf")),
        ("lists.range(-1)", json!([])),
        ("lists.range(-9223372036854775808)", json!([])),
        ("lists.range(3)", json!([0, 1, 2])),
    ] {
        assert_eq!(eval_json(source), expected, "{source}");
    }
    for source in ["uint(-0.5)", "uint(dyn(-0.9))", "uint(double('nan'))"] {
        assert_eq!(
            eval_err(source),
            "uint: unsigned integer overflow",
            "{source}"
        );
    }
    for source in [
        "double('1e400')",
        "double('-1e400')",
        "double('1.7976931348623159e308')",
    ] {
        assert_eq!(
            eval_err(source),
            "type conversion error from 'string' to 'double'",
            "{source}"
        );
    }
}

/// `matches` reads patterns as Go's RE2 does, as `find` does: `\w \d \s \b` are ASCII
/// (literal text stays Unicode), and no counted repetition passes 1000, alone or nested.
#[test]
fn matches_follows_re2() {
    for (source, expected) in [
        ("'ÀÉ'.matches('^\\\\w+$')", false),
        ("'abc_9'.matches('^\\\\w+$')", true),
        ("'é'.matches('^\\\\W$')", true),
        ("'١'.matches('\\\\d')", false),
        ("'7'.matches('^\\\\d$')", true),
        ("'\\u00a0'.matches('\\\\s')", false),
        ("'\\t'.matches('^\\\\s$')", true),
        ("'éa'.matches('\\\\ba')", true),
        ("'ñ'.matches('^[\\\\w]$')", false),
        ("'mañana'.matches('a+ñ+a+')", true),
        ("'é'.matches('^\\\\pL$')", true),
        ("'a<b'.matches('\\\\<b')", true),
        ("'x'.matches('x{1000}')", false),
        ("'x'.matches('(x{10}){100}')", false),
        ("'x'.matches('(x{0}){1000}y{0}x')", true),
        ("'xa{'.matches('a{')", true),
        ("'a{,5}'.matches('a{,5}')", true),
        ("'abc'.matches('\\\\p{L}+')", true),
        ("'ab'.matches('^\\\\P{L}')", false),
        ("'\\u1001'.matches('^\\\\x{1001}$')", true),
        ("'é'.matches('^[\\\\p{L}]$')", true),
        ("'x'.matches('(x{0,1}){1000}')", true),
        ("'x'.matches('(x*){1000}')", true),
    ] {
        assert_eq!(eval_json(source), json!(expected), "{source}");
    }
    for (source, count) in [
        ("'x'.matches('x{1001}')", "{1001}"),
        ("'x'.matches('x{2,1001}')", "{2,1001}"),
        ("'x'.matches('x{1001,}')", "{1001,}"),
        ("'x'.matches('(x{10}){101}')", "{101}"),
        ("'x'.matches('((x{2}){2}){251}')", "{251}"),
        (
            "'x'.matches(dyn('x{99999999999999999999}'))",
            "{99999999999999999999}",
        ),
    ] {
        assert_eq!(
            eval_err(source),
            format!("matches: invalid regular expression: invalid repeat count: `{count}`"),
            "{source}"
        );
    }
    assert_eq!(
        eval_err("'x'.find('x{1001}')"),
        "Illegal regex: error parsing regexp: invalid repeat count: `{1001}`"
    );
}

/// Kubernetes' `min()`, `max()` and `isSorted()` compare as cel-go does: an element without
/// an order fails them (when reached, for `isSorted`), but unlike types (and NaN) compare
/// as neither smaller nor greater.
#[test]
fn min_max_and_is_sorted_of_unlike_values() {
    for (source, expected) in [
        ("[dyn('b'), dyn('a'), dyn(1)].max()", json!("b")),
        ("[dyn(1), dyn('b')].max()", json!(1)),
        ("[dyn(1), dyn('b')].min()", json!(1)),
        ("[dyn('b'), dyn(1)].min()", json!("b")),
        ("[dyn(2), dyn('b'), dyn(0)].min()", json!(0)),
        ("[dyn(2), dyn(1.5), dyn(3u)].min()", json!(1.5)),
        ("[dyn(true), dyn(1)].max()", json!(true)),
        (
            "[dyn(duration('1s')), dyn(timestamp('2020-01-01T00:00:00Z'))].min()",
            json!("1s"),
        ),
        ("[dyn(1), dyn('b')].isSorted()", json!(true)),
        ("[dyn(2), dyn('b'), dyn(0)].isSorted()", json!(true)),
        ("[dyn(2), dyn(1), dyn([1])].isSorted()", json!(false)),
        ("[1.0, double('nan'), 0.5].isSorted()", json!(true)),
        ("[1].max()", json!(1)),
    ] {
        assert_eq!(eval_json(source), expected, "{source}");
    }
    for (source, message) in [
        (
            "[dyn([1])].max()",
            "no matching overload for 'max' applied to (list)",
        ),
        (
            "[dyn(1), dyn(null)].max()",
            "no matching overload for 'max' applied to (null_type)",
        ),
        (
            "[dyn(null), dyn(1)].min()",
            "no matching overload for 'min' applied to (null_type)",
        ),
        (
            "[dyn([1])].isSorted()",
            "no matching overload for 'isSorted' applied to (list)",
        ),
        (
            "[dyn(1), dyn({'a': 1})].isSorted()",
            "no matching overload for 'isSorted' applied to (map)",
        ),
        (
            "[quantity('1'), quantity('2')].max()",
            "no matching overload for 'max' applied to (kubernetes.Quantity)",
        ),
        ("[].max()", "max called on empty list"),
    ] {
        assert_eq!(eval_err(source), message, "{source}");
    }
}

/// `string.format` as Kubernetes (cel-go v0.26): `%d` takes integers only, `%f` and `%e`
/// doubles only (and the strings `NaN`, `Infinity`, `-Infinity`), whether the argument is
/// a literal or a `dyn` value; doubles as its locale printer writes them.
#[test]
fn format_clauses_take_only_their_types() {
    for (source, expected) in [
        ("'%d'.format([1])", "1"),
        ("'%d'.format([dyn(1u)])", "1"),
        ("'%f'.format([1.5])", "1.500000"),
        ("'%.2f'.format([dyn(2.5)])", "2.50"),
        ("'%e'.format([2.71828])", "2.718280×10⁰⁰"),
        ("'%.2e'.format([0.000123])", "1.230000×10⁻⁰⁴"),
        ("'%f'.format([1.0 / 0.0])", "∞"),
        ("'%.1f'.format([1234567.25])", "1,234,567.2"),
        ("'%.3f'.format(['NaN'])", "NaN"),
        ("'%e'.format(['-Infinity'])", "    -∞"),
    ] {
        assert_eq!(eval_json(source), json!(expected), "{source}");
    }
    for (source, clause, given) in [
        (
            "'%d'.format([1.5])",
            "decimal clause can only be used on integers",
            "double",
        ),
        (
            "'%d'.format([dyn(1.5)])",
            "decimal clause can only be used on integers",
            "double",
        ),
        (
            "'%d'.format([double('nan')])",
            "decimal clause can only be used on integers",
            "double",
        ),
        (
            "'%d'.format(['1'])",
            "decimal clause can only be used on integers",
            "string",
        ),
        (
            "'%f'.format([1])",
            "fixed-point clause can only be used on doubles",
            "int",
        ),
        (
            "'%f'.format([dyn(1)])",
            "fixed-point clause can only be used on doubles",
            "int",
        ),
        (
            "'%.2f'.format([3u])",
            "fixed-point clause can only be used on doubles",
            "uint",
        ),
        (
            "'%e'.format([2])",
            "scientific clause can only be used on doubles",
            "int",
        ),
        (
            "'%e'.format([dyn(2u)])",
            "scientific clause can only be used on doubles",
            "uint",
        ),
    ] {
        assert_eq!(
            eval_err(source),
            format!("format: error during formatting: {clause}, was given {given}"),
            "{source}"
        );
    }
}

// ---- environments ---------------------------------------------------------------------

fn env_at(minor: u32, extensions: &[crate::environment::Extension]) -> Env {
    let version = crate::environment::KubernetesVersion::from_minor(minor).unwrap();
    Env::new(CelEnvironment::new(version, extensions.iter().copied()))
}

fn refused(env: &Env, source: &str) -> (String, usize, usize) {
    match env.compile(source) {
        Ok(_) => panic!("`{source}` compiled"),
        Err(e) => (e.message, e.line, e.column),
    }
}

#[test]
fn environments_refuse_extensions_they_do_not_declare() {
    let env = Env::kubernetes();
    let needs = |name: &str, extension: &str| {
        format!(
            "function '{name}' is not in this environment: it needs the extension '{extension}'"
        )
    };
    assert_eq!(
        refused(&env, "cel.bind(a, 1, a + 1)"),
        (needs("cel.bind", "bindings"), 1, 1)
    );
    assert_eq!(
        refused(&env, "1 + math.greatest(1, 2)"),
        (needs("math.greatest", "math"), 1, 5)
    );
    assert_eq!(
        refused(&env, "math.abs(-1)"),
        (needs("math.abs", "math"), 1, 1)
    );
    assert_eq!(
        refused(&env, "size(base64.encode(b'a'))"),
        (needs("base64.encode", "encoders"), 1, 6)
    );
    // Nested: the first call outside the environment, in source order.
    assert_eq!(
        refused(&env, "[1].all(x, cel.bind(y, x, math.abs(y)) > 0)"),
        (needs("cel.bind", "bindings"), 1, 12)
    );
    // The pack's settings are named when the environment says where they are.
    let env = Env::new(
        CelEnvironment::default().with_setting_names("spec.cel.kubernetes", "spec.cel.extensions"),
    );
    assert_eq!(
        refused(&env, "cel.bind(a, 1, a)").0,
        "function 'cel.bind' is not in this environment: it needs the extension 'bindings' \
         (spec.cel.extensions)"
    );
}

#[test]
fn environments_with_an_extension_have_it() {
    use crate::environment::Extension::{Bindings, Encoders, Math, StringsV3};
    let env = env_at(34, &[Bindings, Math, Encoders, StringsV3]);
    let eval = |source: &str| eval_with(&env, source, &[]).unwrap().to_json().unwrap();
    assert_eq!(eval("cel.bind(a, 2, a * a)"), json!(4));
    assert_eq!(eval("math.greatest(1, 5, 2) + math.abs(-1)"), json!(6));
    assert_eq!(eval("base64.encode(b'hi')"), json!("aGk="));
    assert_eq!(eval("'abc'.reverse()"), json!("cba"));
    // One extension does not bring the others.
    let env = env_at(34, &[Bindings]);
    assert!(env.compile("cel.bind(a, 2, a * a)").is_ok());
    assert_eq!(
        refused(&env, "cel.bind(a, 2, math.abs(a))").0,
        "function 'math.abs' is not in this environment: it needs the extension 'math'"
    );
}

#[test]
fn environments_follow_kubernetes_versions() {
    let at = |minor: u32, source: &str| refused(&env_at(minor, &[]), source);
    let since = |name: &str, minor: u32, env: u32| {
        format!(
            "function '{name}' is not in this environment: it was introduced in Kubernetes \
             1.{minor} (the environment is Kubernetes 1.{env})"
        )
    };
    assert_eq!(
        at(28, "'%s'.format(['a'])"),
        (since("format", 29, 28), 1, 6)
    );
    assert_eq!(at(28, "['a'].join()").0, since("join", 29, 28));
    assert_eq!(
        at(28, "sets.contains([1], [1])").0,
        since("sets.contains", 29, 28)
    );
    assert_eq!(at(29, "isIP('1.2.3.4')").0, since("isIP", 30, 29));
    assert_eq!(
        at(29, "cidr('10.0.0.0/8').prefixLength() > 0").0,
        since("cidr", 30, 29)
    );
    assert_eq!(
        at(30, "format.dns1123Label().validate('a')").0,
        since("format.dns1123Label", 31, 30)
    );
    assert_eq!(
        at(31, "{'a': 1}.all(k, v, v > 0)"),
        (
            "function 'all' with 3 arguments is not in this environment: it was introduced in \
             Kubernetes 1.32 (the environment is Kubernetes 1.31)"
                .to_string(),
            1,
            10
        )
    );
    assert_eq!(
        at(31, "[1].transformList(i, v, v * 2)").0,
        "function 'transformList' with 3 arguments is not in this environment: it was \
         introduced in Kubernetes 1.32 (the environment is Kubernetes 1.31)"
    );
    assert_eq!(at(32, "isSemver('1.0.0')").0, since("isSemver", 33, 32));
    assert_eq!(at(33, "[2, 1].sort()").0, since("sort", 34, 33));
    assert_eq!(
        at(33, "[2, 1].sortBy(x, -x)").0,
        "function 'sortBy' with 2 arguments is not in this environment: it was introduced in \
         Kubernetes 1.34 (the environment is Kubernetes 1.33)"
    );
    assert_eq!(at(33, "lists.range(3)").0, since("lists.range", 34, 33));
    // `reverse` is the lists library's (1.34) and the strings library's version 3.
    assert_eq!(
        at(33, "[1].reverse()").0,
        "function 'reverse' is not in this environment: it was introduced in Kubernetes 1.34 \
         (the environment is Kubernetes 1.33), or needs the extension 'strings-v3'"
    );
    // What every version has: the standard library, optionals, quantity, URLs, regex,
    // Kubernetes' list functions, strings version 0, and the engine's functions.
    let oldest = env_at(28, &[]);
    for source in [
        "optional.of(1).orValue(2) == 1",
        "[1, 2].first().value() == 1",
        "quantity('1Gi').isGreaterThan(quantity('1Mi'))",
        "isURL('https://example.com')",
        "'abc'.find('b') == 'b'",
        "[1, 2].isSorted() && [1, 2].sum() == 3",
        "'a,b'.split(',').size() == 2 && 'abc'.indexOf('c') == 2",
        "sha256('a').size() == 64 && isDNS1123Label('a') && dns1123Label('A').size() > 0",
        "1 < 2.5",
    ] {
        assert_eq!(
            eval_with(&oldest, source, &[]).unwrap().to_json().unwrap(),
            json!(true),
            "{source}"
        );
    }
    // And the newest has everything of Kubernetes.
    let newest = Env::kubernetes();
    for source in [
        "'%s'.format(['a']) == 'a'",
        "isIP('1.2.3.4') && cidr('10.0.0.0/8').prefixLength() == 8",
        "format.dns1123Label().validate('a') == optional.none()",
        "{'a': 1}.all(k, v, v > 0)",
        "isSemver('1.0.0')",
        "[2, 1].sortBy(x, x) == [1, 2] && [1, 2].reverse() == [2, 1]",
    ] {
        assert_eq!(
            eval_with(&newest, source, &[]).unwrap().to_json().unwrap(),
            json!(true),
            "{source}"
        );
    }
}

#[test]
fn environments_say_which_overload_is_outside_them() {
    // Kubernetes 1.34 has `reverse` for lists: a string's is the extension `strings-v3`,
    // known only when the receiver is.
    let env = Env::kubernetes();
    let e = eval_with(&env, "s.reverse()", &[("s", json!("abc"))]).unwrap_err();
    assert_eq!(
        e.message,
        "no matching overload for 'reverse' applied to string.() in this environment: it \
         needs the extension 'strings-v3'"
    );
    assert_eq!((e.line, e.column), (Some(1), Some(10)));
    let value = eval_with(&env, "s.reverse()", &[("s", json!([1, 2]))]).unwrap();
    assert_eq!(value.to_json().unwrap(), json!([2, 1]));
    // Arguments no overload takes, in or out of the environment: as before.
    let e = eval_with(&env, "s.reverse()", &[("s", json!(1))]).unwrap_err();
    assert_eq!(
        e.message,
        "no matching overload for 'reverse' applied to int.()"
    );
}

#[test]
fn environments_keep_custom_functions_and_variables() {
    // A variable may be named as a namespace; only calls are gated.
    let env = Env::kubernetes();
    let value = eval_with(&env, "math.x + 1", &[("math", json!({"x": 1}))]).unwrap();
    assert_eq!(value.to_json().unwrap(), json!(2));
    let f: CustomFunction = Arc::new(|_| Ok(json!(true)));
    let env = env_at(28, &[]).with_function("decide", f);
    assert!(env.compile("decide('t', {})").is_ok());
    assert_eq!(env.environment().kubernetes.minor(), 28);
    // A custom function cannot take the name of a built-in one the environment lacks.
    let f: CustomFunction = Arc::new(|_| Ok(json!(true)));
    let env = Env::kubernetes().with_function("base64.encode", f);
    assert_eq!(
        env.compile("true").unwrap_err().message,
        "the function 'base64.encode' cannot be added: a built-in function has that name"
    );
}

#[test]
fn one_program_reads_names_and_fields_wherever_each_evaluation_has_them() {
    // Lookups start where the previous evaluation found the name: activations binding the
    // names in another order, and maps of other shapes, still read the right values.
    let env = full_env();
    let program = env.compile("b.x + a.y").unwrap();
    let cases = [
        (vec![("a", json!({"y": 1})), ("b", json!({"x": 10}))], 11),
        (
            vec![
                ("b", json!({"w": 0, "x": 20})),
                ("a", json!({"a": 0, "b": 0, "y": 2})),
            ],
            22,
        ),
        (
            vec![
                ("c", json!(0)),
                ("a", json!({"y": 3})),
                ("b", json!({"x": 30, "z": 1})),
            ],
            33,
        ),
    ];
    for _ in 0..2 {
        for (vars, expected) in &cases {
            let mut activation = Activation::new(&env);
            for (name, value) in vars {
                activation.bind(name, Value::from_json(value));
            }
            let got = program.eval(&activation).unwrap().to_json().unwrap();
            assert_eq!(got, json!(expected));
        }
    }
    let mut activation = Activation::new(&env);
    activation.bind("a", Value::from_json(&json!({"y": 1})));
    activation.bind("b", Value::from_json(&json!({"w": 1})));
    assert_eq!(
        program.eval(&activation).unwrap_err().message,
        "no such key: x"
    );
}

#[test]
fn references_tell_names_read_whole_from_names_read_by_field() {
    let env = full_env();
    let whole = |source: &str| -> Vec<String> {
        env.compile(source)
            .unwrap()
            .references()
            .whole
            .iter()
            .cloned()
            .collect()
    };
    assert!(whole("vars.a + vars['b'] + vars.?c.orValue(1)").is_empty());
    assert!(whole("has(vars.a) && vars.a > 0").is_empty());
    assert_eq!(whole("size(vars) > 0 && vars.a > 0"), ["vars"]);
    assert_eq!(whole("[self].size() + x.y"), ["self"]);
    // A comprehension's variable is no name of the activation.
    assert!(whole("vars.list.all(v, v > 0)").is_empty());
}

#[test]
fn references_tell_the_fields_each_name_is_read_through() {
    use crate::value::Needed;
    let env = full_env();
    let fields = |source: &str| env.compile(source).unwrap().references().fields.clone();
    let map = |entries: &[(&str, Needed)]| {
        Needed::Fields(
            entries
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    };
    let found = fields(
        "has(self.spec.template) && self.spec.?replicas.orValue(1) > 0 \
         && self.metadata.labels['app'] == 'a' && 'x' in self.metadata.annotations",
    );
    assert_eq!(
        found["self"],
        map(&[
            (
                "metadata",
                map(&[
                    ("annotations", Needed::Whole),
                    ("labels", map(&[("app", Needed::Whole)])),
                ])
            ),
            (
                "spec",
                map(&[("replicas", Needed::Whole), ("template", Needed::Present)])
            ),
        ])
    );
    // Read whole somewhere: whole, whatever else reads fields of it.
    assert_eq!(
        fields("self.spec.a == 1 && size(self) > 0")["self"],
        Needed::Whole
    );
    assert_eq!(
        fields("self.spec.items.map(i, i.name)")["self"],
        map(&[("spec", map(&[("items", Needed::Whole)]))])
    );
    // A test of a field read elsewhere is the read.
    assert_eq!(
        fields("has(self.a) ? self.a : 0")["self"],
        map(&[("a", Needed::Whole)])
    );
    // `optional` is a namespace, not a name.
    assert!(!fields("optional.of(self.a).hasValue()").contains_key("optional"));
}

#[test]
fn a_value_converted_only_where_it_is_read_evaluates_as_the_whole() {
    let env = full_env();
    let object = json!({
        "metadata": {"name": "a", "labels": {"app": "x", "tier": "y"}, "uid": "u"},
        "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c"}]}},
                 "list": [{"a": 1}], "text": "t"},
        "status": {"ready": true}
    });
    for source in [
        "has(self.spec.template.spec) && self.spec.replicas == 2",
        "self.metadata.labels.app + self.spec.?text.orValue('')",
        "self.spec.list.map(x, x.a)",
        "has(self.spec.missing) || self.spec.?missing.?deeper.orValue(3) == 3",
        "self.spec.list.a",
        "self.spec.text.nope",
        "self.metadata.labels['none']",
    ] {
        let program = env.compile(source).unwrap();
        let needed = &program.references().fields["self"];
        let partial = Value::from_json_needed(&object, needed);
        let mut whole_activation = Activation::new(&env);
        whole_activation.bind("self", Value::from_json(&object));
        let mut partial_activation = Activation::new(&env);
        partial_activation.bind("self", partial);
        let whole = program
            .eval_with_cost(&whole_activation)
            .map(|(v, cost)| (v.to_json().unwrap(), cost))
            .map_err(|e| e.message);
        let projected = program
            .eval_with_cost(&partial_activation)
            .map(|(v, cost)| (v.to_json().unwrap(), cost))
            .map_err(|e| e.message);
        assert_eq!(projected, whole, "{source}");
    }
    // What is not read is not converted: the status, the pod spec only tested.
    let program = env
        .compile("has(self.spec.template.spec) && self.metadata.name == 'a'")
        .unwrap();
    let needed = &program.references().fields["self"];
    assert_eq!(
        Value::from_json_needed(&object, needed).to_json().unwrap(),
        json!({"metadata": {"name": "a"}, "spec": {"template": {"spec": null}}})
    );
}
