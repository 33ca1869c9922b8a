//! Tests of the math extension, through the environment.

use crate::env::Activation;
use crate::test_support::eval_source as eval;
use crate::value::{Inspect, Value};

fn ok(source: &str) -> Inspect {
    eval(source).unwrap_or_else(|e| panic!("{source}: {e}"))
}

fn err(source: &str) -> String {
    match eval(source) {
        Err(e) => e,
        Ok(v) => panic!("{source}: expected an error, got {v:?}"),
    }
}

fn compile_err(source: &str) -> (String, usize, usize) {
    let e = crate::test_support::full_env().compile(source).unwrap_err();
    (e.message, e.line, e.column)
}

#[test]
fn greatest_and_least_keep_the_type_of_the_winner() {
    use Inspect::*;
    for (source, expected) in [
        ("math.greatest(-5)", Int(-5)),
        ("math.greatest(5u)", Uint(5)),
        ("math.greatest(1, 1.0)", Int(1)),
        ("math.greatest(1.0, 1)", Double(1.0)),
        ("math.greatest(1u, 1)", Uint(1)),
        ("math.greatest(-7, 5)", Int(5)),
        ("math.greatest(5u, -7)", Uint(5)),
        ("math.greatest(-3, 3u)", Uint(3)),
        ("math.greatest(1, 1.797693e308)", Double(1.797693e308)),
        ("math.greatest(9223372036854775807, 1)", Int(i64::MAX)),
        (
            "math.greatest(5.4, 10, 3u, -5.0, 18446744073709551615u)",
            Uint(u64::MAX),
        ),
        ("math.greatest([5.4, 10, 3u, -5.0, 3.5])", Int(10)),
        ("math.greatest([dyn(5.4), dyn(10u)])", Uint(10)),
        ("math.greatest([1, 1.0, 1u])", Int(1)),
        ("math.least(1, 1u)", Int(1)),
        ("math.least(1u, 1.0)", Uint(1)),
        ("math.least(-9223372036854775808, 1)", Int(i64::MIN)),
        ("math.least(5.4, 10, 3u, -5.0, 1.797693e308)", Double(-5.0)),
        ("math.least([5.4, 10u, 3u, 1u, 3.5])", Uint(1)),
        ("math.least([2.5])", Double(2.5)),
        ("math.least(dyn(3))", Int(3)),
    ] {
        assert_eq!(ok(source), expected, "{source}");
    }
    // one argument is itself, NaN too
    assert!(matches!(ok("math.greatest(0.0/0.0)"), Double(d) if d.is_nan()));
    assert!(matches!(ok("math.greatest([0.0/0.0])"), Double(d) if d.is_nan()));
}

#[test]
fn greatest_and_least_errors() {
    assert_eq!(
        err("math.greatest(1.0, 0.0/0.0)"),
        "NaN values cannot be ordered: math.@max"
    );
    assert_eq!(
        err("math.least(0.0/0.0, 1)"),
        "NaN values cannot be ordered: math.@min"
    );
    assert_eq!(
        err("math.greatest([1.0, 0.0/0.0])"),
        "no such overload: math.@max"
    );
    assert_eq!(
        err("math.greatest(1, 2, dyn('a'))"),
        "no such overload: math.@max"
    );
    assert_eq!(
        err("math.least([dyn(true)])"),
        "no such overload: math.@min"
    );
    assert_eq!(
        err("math.greatest(dyn([]))"),
        "math.@max(list) argument must not be empty"
    );
    assert_eq!(
        err("math.least(dyn('a'), 1)"),
        "no matching overload for 'math.@min' applied to (string, int)"
    );
}

#[test]
fn greatest_and_least_check_their_arguments_when_parsed() {
    for (source, message, column) in [
        (
            "math.greatest()",
            "math.greatest() requires at least one argument",
            1,
        ),
        (
            "math.least()",
            "math.least() requires at least one argument",
            1,
        ),
        (
            "math.greatest('a')",
            "math.greatest() invalid single argument value",
            15,
        ),
        (
            "math.least([])",
            "math.least() invalid single argument value",
            12,
        ),
        (
            "math.least(['a', 1])",
            "math.least() invalid single argument value",
            12,
        ),
        (
            "math.greatest(1, true)",
            "math.greatest() simple literal arguments must be numeric",
            18,
        ),
        (
            "math.least(1, 2, [3])",
            "math.least() simple literal arguments must be numeric",
            18,
        ),
    ] {
        let (m, line, col) = compile_err(source);
        assert_eq!(m, message, "{source}");
        assert_eq!((line, col), (1, column), "{source}");
    }
    // another target is a method call like any other
    assert_eq!(err("[1].greatest()"), "undeclared reference to 'greatest'");
}

#[test]
fn rounding_and_floating_point_helpers() {
    use Inspect::*;
    for (source, expected) in [
        ("math.ceil(-1.2)", Double(-1.0)),
        ("math.ceil(1.2)", Double(2.0)),
        ("math.floor(-1.2)", Double(-2.0)),
        ("math.floor(1.2)", Double(1.0)),
        ("math.round(-1.5)", Double(-2.0)),
        ("math.round(1.5)", Double(2.0)),
        ("math.round(-1.4)", Double(-1.0)),
        ("math.round(2.5)", Double(3.0)),
        ("math.trunc(-1.7)", Double(-1.0)),
        ("math.trunc(1.7)", Double(1.0)),
        ("math.isInf(1.0/0.0)", Bool(true)),
        ("math.isInf(0.0/0.0)", Bool(false)),
        ("math.isNaN(0.0/0.0)", Bool(true)),
        ("math.isNaN(1.0/0.0)", Bool(false)),
        ("math.isFinite(1.5)", Bool(true)),
        ("math.isFinite(-1.0/0.0)", Bool(false)),
        ("math.isFinite(0.0/0.0)", Bool(false)),
        ("math.sqrt(16)", Double(4.0)),
        ("math.sqrt(2u)", Double(std::f64::consts::SQRT_2)),
        ("math.sqrt(0.25)", Double(0.5)),
    ] {
        assert_eq!(ok(source), expected, "{source}");
    }
    assert!(matches!(ok("math.sqrt(-1)"), Double(d) if d.is_nan()));
    assert!(matches!(ok("math.round(0.0/0.0)"), Double(d) if d.is_nan()));
    assert_eq!(
        err("math.ceil(dyn(1))"),
        "no matching overload for 'math.ceil' applied to (int)"
    );
    assert_eq!(
        err("math.isNaN(dyn(true))"),
        "no matching overload for 'math.isNaN' applied to (bool)"
    );
}

#[test]
fn abs_and_sign() {
    use Inspect::*;
    for (source, expected) in [
        ("math.abs(-11)", Int(11)),
        ("math.abs(9223372036854775807)", Int(i64::MAX)),
        ("math.abs(1u)", Uint(1)),
        ("math.abs(-11.5)", Double(11.5)),
        ("math.sign(-11)", Int(-1)),
        ("math.sign(0)", Int(0)),
        ("math.sign(100)", Int(1)),
        ("math.sign(0u)", Uint(0)),
        ("math.sign(100u)", Uint(1)),
        ("math.sign(-32.0)", Double(-1.0)),
        ("math.sign(100.5)", Double(1.0)),
        ("math.sign(0.0)", Double(0.0)),
    ] {
        assert_eq!(ok(source), expected, "{source}");
    }
    assert!(matches!(ok("math.sign(-0.0)"), Double(d) if d == 0.0 && d.is_sign_positive()));
    assert!(matches!(ok("math.sign(0.0/0.0)"), Double(d) if d.is_nan()));
    assert_eq!(err("math.abs(-9223372036854775808)"), "integer overflow");
    assert_eq!(
        err("math.sign(dyn(true))"),
        "no matching overload for 'math.sign' applied to (bool)"
    );
}

#[test]
fn bitwise_functions() {
    use Inspect::*;
    for (source, expected) in [
        ("math.bitAnd(3, 5)", Int(1)),
        ("math.bitAnd(-3, -5)", Int(-7)),
        ("math.bitAnd(3u, 2u)", Uint(2)),
        ("math.bitOr(1, 2)", Int(3)),
        ("math.bitOr(-2, -4)", Int(-2)),
        ("math.bitOr(1u, 4u)", Uint(5)),
        ("math.bitXor(1, 3)", Int(2)),
        ("math.bitXor(4, -2)", Int(-6)),
        ("math.bitXor(3u, 5u)", Uint(6)),
        ("math.bitNot(1)", Int(-2)),
        ("math.bitNot(-1)", Int(0)),
        ("math.bitNot(0u)", Uint(u64::MAX)),
        ("math.bitShiftLeft(1, 2)", Int(4)),
        ("math.bitShiftLeft(-1, 2)", Int(-4)),
        ("math.bitShiftLeft(1, 63)", Int(i64::MIN)),
        ("math.bitShiftLeft(1, 64)", Int(0)),
        ("math.bitShiftLeft(-1, 200)", Int(0)),
        ("math.bitShiftLeft(1u, 2)", Uint(4)),
        ("math.bitShiftLeft(1u, 200)", Uint(0)),
        ("math.bitShiftRight(1024, 2)", Int(256)),
        (
            "math.bitShiftRight(-1024, 3)",
            Int(2_305_843_009_213_693_824),
        ),
        ("math.bitShiftRight(-1024, 64)", Int(0)),
        ("math.bitShiftRight(1024u, 2)", Uint(256)),
        ("math.bitShiftRight(1024u, 64)", Uint(0)),
    ] {
        assert_eq!(ok(source), expected, "{source}");
    }
    assert_eq!(
        err("math.bitShiftLeft(1u, -1)"),
        "math.bitShiftLeft() negative offset: -1"
    );
    assert_eq!(
        err("math.bitShiftRight(1, -2)"),
        "math.bitShiftRight() negative offset: -2"
    );
    assert_eq!(
        err("math.bitAnd(2u, dyn(''))"),
        "no matching overload for 'math.bitAnd' applied to (uint, string)"
    );
    assert_eq!(
        err("math.bitAnd(1, 2u)"),
        "no matching overload for 'math.bitAnd' applied to (int, uint)"
    );
}

#[test]
fn a_list_costs_by_its_size() {
    let env = crate::test_support::full_env();
    let program = env.compile("math.greatest(xs)").unwrap();
    let cost = |n: i64| {
        let mut activation = Activation::new(&env);
        activation.bind("xs", Value::list((0..n).map(Value::int)));
        program.eval_with_cost(&activation).unwrap().1
    };
    // 1 per 10 elements, besides the call and the variable
    assert_eq!(cost(5), 2);
    assert_eq!(cost(20), 4);
    assert_eq!(cost(100), 12);
}
