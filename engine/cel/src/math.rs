//! cel-go's math extension (`ext.Math`, version 2), which Kubernetes' base environment
//! does not have: the functions of the `math` namespace, with cel-go's results and error
//! messages.
//!
//! `math.greatest` and `math.least` are macros (see [`crate::macros`]): their argument
//! counts and literal arguments are checked when the expression is parsed, and they expand
//! to calls of `math.@max` and `math.@min` on the one argument, the two arguments, or a
//! list of the arguments when there are more. Those functions are here:
//!
//! - one number: itself; two numbers of any numeric types: the greater (lesser), the first
//!   when they are equal, each keeping its type (`math.greatest(1, 1.0)` is `1`); a NaN
//!   fails (`NaN values cannot be ordered: math.@max`);
//! - a list: its greatest (least) element, the first of equal ones, once every element is
//!   a number and none is NaN (else `no such overload: math.@max`); an empty list fails
//!   (`math.@max(list) argument must not be empty`). Its cost grows with the list's size.
//!
//! The others: `math.ceil`, `math.floor`, `math.round` (half away from zero), `math.trunc`,
//! `math.isInf`, `math.isNaN`, `math.isFinite` (of a `double`); `math.abs` and `math.sign`
//! (of an `int`, `uint` or `double`, keeping its type; `math.abs` of the least `int` fails
//! with `integer overflow`; the sign of NaN is NaN, of either zero `0.0`); `math.bitAnd`,
//! `math.bitOr`, `math.bitXor` (two `int`s or two `uint`s), `math.bitNot` (an `int` or a
//! `uint`), `math.bitShiftLeft` and `math.bitShiftRight` (an `int` or a `uint` shifted by
//! an `int`: a shift of 64 bits or more gives 0, a negative one fails, the right shift
//! fills with zeros, even for a negative `int`); `math.sqrt` (of any number, a `double`;
//! NaN for a negative one).

use std::cmp::Ordering;

use crate::EvalError;
use crate::registry::{Overload, Param, Value, no_such_overload};
use crate::value::compare_numbers;

/// The function `math.greatest` expands to.
pub(crate) const MAX: &str = "math.@max";
/// The function `math.least` expands to.
pub(crate) const MIN: &str = "math.@min";

const NUMBERS: [Param; 3] = [Param::Int, Param::Uint, Param::Double];

/// Every overload of the extension.
pub(crate) fn overloads() -> Vec<Overload> {
    let mut out = Vec::new();
    for (name, wanted) in [(MAX, Ordering::Greater), (MIN, Ordering::Less)] {
        for p in NUMBERS {
            out.push(Overload::global(name, &[p], |a| Ok(a[0].clone())));
        }
        for p in NUMBERS {
            for q in NUMBERS {
                out.push(Overload::global(name, &[p, q], move |a| {
                    extreme_of_two(name, wanted, &a[0], &a[1]).cloned()
                }));
            }
        }
        out.push(
            Overload::global(name, &[Param::List], move |a| {
                extreme_of_list(name, wanted, &a[0])
            })
            .linear_cost(),
        );
    }
    out.extend(doubles());
    out.extend(signs());
    out.extend(bits());
    for p in NUMBERS {
        out.push(Overload::global("math.sqrt", &[p], |a| {
            Ok(Value::Double(as_f64(&a[0], "math.sqrt", a)?.sqrt()))
        }));
    }
    out
}

/// The greater of two numbers (`wanted` `Greater`) or the lesser (`Less`); the first when
/// they are equal.
fn extreme_of_two<'v>(
    name: &str,
    wanted: Ordering,
    first: &'v Value,
    second: &'v Value,
) -> Result<&'v Value, EvalError> {
    match compare_numbers(first, second) {
        Some(o) if o == wanted.reverse() => Ok(second),
        Some(_) => Ok(first),
        None => Err(EvalError::new(format!(
            "NaN values cannot be ordered: {name}"
        ))),
    }
}

/// The greatest (least) element of a list of numbers; the first of equal ones.
fn extreme_of_list(name: &str, wanted: Ordering, list: &Value) -> Result<Value, EvalError> {
    let Value::List(items) = list else {
        return Err(no_such_overload(name, std::slice::from_ref(list)));
    };
    let Some((first, rest)) = items.split_first() else {
        return Err(EvalError::new(format!(
            "{name}(list) argument must not be empty"
        )));
    };
    // cel-go reports any element that is not a number, and any unordered pair, so.
    let no_overload = || EvalError::new(format!("no such overload: {name}"));
    if !is_number(first) {
        return Err(no_overload());
    }
    let mut best = first;
    for item in rest {
        if !is_number(item) {
            return Err(no_overload());
        }
        best = extreme_of_two(name, wanted, best, item).map_err(|_| no_overload())?;
    }
    Ok(best.clone())
}

fn is_number(v: &Value) -> bool {
    matches!(v, Value::Int(_) | Value::Uint(_) | Value::Double(_))
}

/// A number as a `double`, for `math.sqrt`.
fn as_f64(v: &Value, name: &str, args: &[Value]) -> Result<f64, EvalError> {
    match v {
        Value::Int(i) => Ok(*i as f64),
        Value::Uint(u) => Ok(*u as f64),
        Value::Double(d) => Ok(*d),
        _ => Err(no_such_overload(name, args)),
    }
}

/// The functions of a `double`.
fn doubles() -> Vec<Overload> {
    fn double(name: &'static str, f: fn(f64) -> Value) -> Overload {
        Overload::global(name, &[Param::Double], move |a| match &a[0] {
            Value::Double(d) => Ok(f(*d)),
            _ => Err(no_such_overload(name, a)),
        })
    }
    vec![
        double("math.ceil", |d| Value::Double(d.ceil())),
        double("math.floor", |d| Value::Double(d.floor())),
        // Go's `math.Round`: half away from zero, as `f64::round`.
        double("math.round", |d| Value::Double(d.round())),
        double("math.trunc", |d| Value::Double(d.trunc())),
        double("math.isInf", |d| Value::Bool(d.is_infinite())),
        double("math.isNaN", |d| Value::Bool(d.is_nan())),
        double("math.isFinite", |d| Value::Bool(d.is_finite())),
    ]
}

/// `math.abs` and `math.sign`.
fn signs() -> Vec<Overload> {
    vec![
        Overload::global("math.abs", &[Param::Int], |a| match &a[0] {
            Value::Int(i) => i
                .checked_abs()
                .map(Value::Int)
                .ok_or_else(|| EvalError::new("integer overflow")),
            _ => Err(no_such_overload("math.abs", a)),
        }),
        Overload::global("math.abs", &[Param::Uint], |a| Ok(a[0].clone())),
        Overload::global("math.abs", &[Param::Double], |a| match &a[0] {
            Value::Double(d) => Ok(Value::Double(d.abs())),
            _ => Err(no_such_overload("math.abs", a)),
        }),
        Overload::global("math.sign", &[Param::Int], |a| match &a[0] {
            Value::Int(i) => Ok(Value::Int(i.signum())),
            _ => Err(no_such_overload("math.sign", a)),
        }),
        Overload::global("math.sign", &[Param::Uint], |a| match &a[0] {
            Value::Uint(u) => Ok(Value::Uint(u64::from(*u != 0))),
            _ => Err(no_such_overload("math.sign", a)),
        }),
        Overload::global("math.sign", &[Param::Double], |a| match &a[0] {
            // Not `f64::signum`, which gives the zeros a sign: both are `0.0` here.
            Value::Double(d) => Ok(Value::Double(if d.is_nan() {
                *d
            } else if *d > 0.0 {
                1.0
            } else if *d < 0.0 {
                -1.0
            } else {
                0.0
            })),
            _ => Err(no_such_overload("math.sign", a)),
        }),
    ]
}

/// The bitwise functions.
fn bits() -> Vec<Overload> {
    fn ints(name: &'static str, f: fn(i64, i64) -> i64) -> Overload {
        Overload::global(name, &[Param::Int, Param::Int], move |a| {
            match (&a[0], &a[1]) {
                (Value::Int(x), Value::Int(y)) => Ok(Value::Int(f(*x, *y))),
                _ => Err(no_such_overload(name, a)),
            }
        })
    }
    fn uints(name: &'static str, f: fn(u64, u64) -> u64) -> Overload {
        Overload::global(name, &[Param::Uint, Param::Uint], move |a| {
            match (&a[0], &a[1]) {
                (Value::Uint(x), Value::Uint(y)) => Ok(Value::Uint(f(*x, *y))),
                _ => Err(no_such_overload(name, a)),
            }
        })
    }
    /// `value` shifted by `bits` (`left` or right), as Go shifts a 64-bit unsigned value:
    /// 0 once all bits are out; a negative shift fails.
    fn shift(name: &str, value: u64, bits: i64, left: bool) -> Result<u64, EvalError> {
        if bits < 0 {
            return Err(EvalError::new(format!("{name}() negative offset: {bits}")));
        }
        let shifted = match u32::try_from(bits) {
            Ok(bits) if left => value.checked_shl(bits),
            Ok(bits) => value.checked_shr(bits),
            Err(_) => None,
        };
        Ok(shifted.unwrap_or(0))
    }
    let mut out = vec![
        ints("math.bitAnd", |x, y| x & y),
        uints("math.bitAnd", |x, y| x & y),
        ints("math.bitOr", |x, y| x | y),
        uints("math.bitOr", |x, y| x | y),
        ints("math.bitXor", |x, y| x ^ y),
        uints("math.bitXor", |x, y| x ^ y),
        Overload::global("math.bitNot", &[Param::Int], |a| match &a[0] {
            Value::Int(x) => Ok(Value::Int(!x)),
            _ => Err(no_such_overload("math.bitNot", a)),
        }),
        Overload::global("math.bitNot", &[Param::Uint], |a| match &a[0] {
            Value::Uint(x) => Ok(Value::Uint(!x)),
            _ => Err(no_such_overload("math.bitNot", a)),
        }),
    ];
    for (name, left) in [("math.bitShiftLeft", true), ("math.bitShiftRight", false)] {
        out.push(Overload::global(
            name,
            &[Param::Int, Param::Int],
            move |a| match (&a[0], &a[1]) {
                // The bits of the `int` as they are: the right shift fills with zeros.
                (Value::Int(x), Value::Int(bits)) => {
                    shift(name, *x as u64, *bits, left).map(|v| Value::Int(v as i64))
                }
                _ => Err(no_such_overload(name, a)),
            },
        ));
        out.push(Overload::global(
            name,
            &[Param::Uint, Param::Int],
            move |a| match (&a[0], &a[1]) {
                (Value::Uint(x), Value::Int(bits)) => shift(name, *x, *bits, left).map(Value::Uint),
                _ => Err(no_such_overload(name, a)),
            },
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::tests::eval_source as eval;
    use crate::{Activation, Inspect, Value};

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
        let e = crate::tests::full_env().compile(source).unwrap_err();
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
        let env = crate::tests::full_env();
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
}
