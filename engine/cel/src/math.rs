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

use crate::error::EvalError;
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
mod tests;
