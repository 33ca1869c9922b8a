//! Tests of `format`, through the environment.

use crate::env::{Activation, Env};
use crate::value::Value;

fn formatted(source: &str) -> Result<String, String> {
    let env = Env::kubernetes();
    let program = env.compile(source).map_err(|e| e.message)?;
    match program.eval(&Activation::new(&env)) {
        Ok(Value::String(s)) => Ok(s.to_string()),
        Ok(other) => Err(format!("not a string: {:?}", other.inspect())),
        Err(e) => Err(e.message),
    }
}

#[test]
fn lists_and_maps_print_as_kubernetes_prints_them() {
    // As Kubernetes 1.34 (cel-go v0.26) prints them (tools/cel-oracle).
    let cases = [
        ("'%s'.format([{'a': 1}])", r#"{"a":1}"#),
        ("'%s'.format([{'b': 1, 'a': 2}])", r#"{"a":2, "b":1}"#),
        (
            "'%s'.format([{1: 'x', 2: 'y', 10: 'z'}])",
            r#"{1:"x", 10:"z", 2:"y"}"#,
        ),
        (
            "'%s'.format([{true: [1], false: []}])",
            "{false:[], true:[1]}",
        ),
        ("'%s'.format([[1, 'a', 2.5]])", r#"[1, "a", 2.500000]"#),
        (
            "'%s'.format([[1e100]])",
            "[10000000000000000159028911097599180468360808563945281389781327557747838772170381060813469985856815104.000000]",
        ),
        (
            "'%s'.format([[double('nan'), double('inf'), -double('inf')]])",
            r#"["NaN", "+Inf", "-Inf"]"#,
        ),
        (
            "'%s'.format([[duration('1m'), duration('-90m'), duration('1.5s')]])",
            r#"[duration("60s"), duration("-5400s"), duration("1.5s")]"#,
        ),
        (
            "'%s'.format([[timestamp('2024-01-01T00:00:00.5Z')]])",
            r#"[timestamp("2024-01-01T00:00:00.5Z")]"#,
        ),
        (
            "'%s'.format([[b'ab', null, true, 1u, type(1u)]])",
            r#"[b"ab", null, true, 1, uint]"#,
        ),
        (
            r#"'%s'.format([['a"b', 'c\\d', '\t\u0001', '\u00a0é']])"#,
            r#"["a\"b", "c\\d", "\t\x01", "\u00a0é"]"#,
        ),
        (
            "'%s'.format([{'a': {'b': [1.0]}, 'c': null}])",
            r#"{"a":{"b":[1.000000]}, "c":null}"#,
        ),
        // Outside a list or map, as before.
        (
            "'%s %s %s'.format([1.5, b'ab', duration('1.5s')])",
            "1.5 ab 1.5s",
        ),
    ];
    for (source, want) in cases {
        assert_eq!(formatted(source).as_deref(), Ok(want), "{source}");
    }
    assert!(formatted(r"'%s'.format([[b'\xff']])").is_err());
}
