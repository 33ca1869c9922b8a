//! The evaluator: walks a [`Plan`](crate::plan::Plan) with the variables of an activation.
//!
//! Values flow as `Cow<Value>`: a variable, a field of a variable, or an element of a list
//! is borrowed, never copied; only computed values are owned. Comprehensions bind their
//! variables to borrowed elements in a [`Scope`] on the stack.
//!
//! Errors follow CEL: `&&`, `||` and the quantifier macros absorb an error when the other
//! side decides the result (`error || true` is `true`); every other error propagates. A
//! passed cost limit stops the evaluation at once, whatever the operator.
//!
//! Cost: 1 per node evaluated, 1 per comprehension iteration, and for operations whose work
//! grows with their operands (string concatenation, `contains`, `startsWith`, `endsWith`,
//! `matches`, `in` on a list, library functions that say so) 1 more per 10 elements (bytes
//! of strings, elements of lists); comparisons (`==`, `!=`, `<`, ...) are charged what they
//! read (`limits::equality_work`); what values are built, what work is quadratic and what
//! regular expressions are compiled are charged too, and built values are bounded (see
//! `limits.rs`).
//!
//! This file and `plan.rs` import each other, the only two files of the crate that do,
//! because the interpreter recurses through both: the evaluator walks the nodes `plan.rs`
//! defines, and lowering evaluates each node whose operands are constants with
//! [`eval_constant`] (constant folding). The other files they import are below them: none
//! imports `eval.rs` or `plan.rs`.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::sync::Arc;

use crate::conversions;
use crate::error::EvalError;
use crate::limits;
use crate::plan::{
    AddChain, Builtin, Call, CustomCall, Fold, Kind, Loop, LoopKind, Node, Op, Qualified,
};
use crate::registry::Cost;
use crate::value::{
    Duration, Hint, Key, Map, Timestamp, Value, compare, duration_in_range, equals, same_str,
    timestamp_in_range,
};

/// Why an evaluation stopped: the message, the node it happened at, and whether it is a
/// passed cost limit (which no operator absorbs).
pub(crate) struct Fault {
    pub message: String,
    pub id: u64,
    pub cost_exceeded: bool,
}

pub(crate) type Failure = Box<Fault>;
type Out<'a> = Result<Cow<'a, Value>, Failure>;

pub(crate) fn fail(id: u64, message: impl Into<String>) -> Failure {
    Box::new(Fault {
        message: message.into(),
        id,
        cost_exceeded: false,
    })
}

/// The cost counter of one evaluation.
pub(crate) struct Cx {
    pub cost: u64,
    pub limit: u64,
    /// The regular expressions compiled so far, by pattern: each pattern's compilation is
    /// charged once per evaluation, whatever the caches outside it hold.
    patterns: std::collections::HashSet<Arc<str>>,
}

impl Cx {
    pub(crate) fn new(limit: u64) -> Cx {
        Cx {
            cost: 0,
            limit,
            patterns: std::collections::HashSet::new(),
        }
    }

    /// Charges compiling `pattern` (`compile` compiles it and says what that costs) the
    /// first time the evaluation meets it.
    fn charge_pattern(
        &mut self,
        pattern: &Arc<str>,
        compile: impl FnOnce(&str) -> u64,
        id: u64,
    ) -> Result<(), Failure> {
        if self.patterns.contains(pattern) {
            return Ok(());
        }
        self.patterns.insert(Arc::clone(pattern));
        self.charge(compile(pattern), id)
    }

    /// What is left of the budget: charging more than this fails.
    fn remaining(&self) -> u64 {
        self.limit.saturating_sub(self.cost)
    }

    #[inline(always)]
    fn charge(&mut self, n: u64, id: u64) -> Result<(), Failure> {
        self.cost = self.cost.saturating_add(n);
        if self.cost > self.limit {
            return Err(Box::new(Fault {
                message: format!("cost limit exceeded: {} > {}", self.cost, self.limit),
                id,
                cost_exceeded: true,
            }));
        }
        Ok(())
    }
}

/// The variables in force: the activation's, and those of the enclosing comprehensions
/// and binds (innermost first).
#[derive(Clone, Copy)]
pub(crate) struct Scope<'a> {
    vars: &'a [(Cow<'a, str>, Value)],
    /// Whether some activation variable has a dotted name (`a.b`).
    dotted: bool,
    parent: Option<&'a Scope<'a>>,
    slots: [Option<&'a Value>; 3],
}

impl<'a> Scope<'a> {
    /// The scope of an activation's `vars`; `dotted`: whether a name of them has a dot.
    pub(crate) fn root(vars: &'a [(Cow<'a, str>, Value)], dotted: bool) -> Self {
        Scope {
            vars,
            dotted,
            parent: None,
            slots: [None; 3],
        }
    }

    fn local(&self, up: u32, slot: u8) -> Option<&'a Value> {
        let mut scope = self;
        for _ in 0..up {
            scope = scope.parent?;
        }
        scope.slots.get(usize::from(slot)).copied().flatten()
    }
}

/// The size cost of a value: 1 per 10 bytes of a string or bytes, per 10 elements of a
/// list or map.
fn size_cost(v: &Value) -> u64 {
    let n = match v {
        Value::String(s) => s.len(),
        Value::Bytes(b) => b.len(),
        Value::List(l) => l.len(),
        Value::Map(m) => m.len(),
        _ => 0,
    };
    (n as u64) / 10
}

fn no_overload(name: &str, args: &[&Value]) -> String {
    let types: Vec<String> = args.iter().map(|a| a.type_name()).collect();
    format!(
        "no matching overload for '{name}' applied to ({})",
        types.join(", ")
    )
}

fn no_method_overload(name: &str, args: &[&Value]) -> String {
    match args.split_first() {
        Some((target, rest)) => {
            let types: Vec<String> = rest.iter().map(|a| a.type_name()).collect();
            format!(
                "no matching overload for '{name}' applied to {}.({})",
                target.type_name(),
                types.join(", ")
            )
        }
        None => no_overload(name, args),
    }
}

/// Evaluates a node whose operands are constants, for constant folding, within `budget`;
/// also says what it spent.
pub(crate) fn eval_constant(node: &Node, budget: u64) -> (Option<Value>, u64) {
    let mut cx = Cx::new(budget);
    let value = eval(node, &Scope::root(&[], false), &mut cx)
        .ok()
        .map(Cow::into_owned);
    (value, cx.cost.min(budget))
}

pub(crate) fn eval<'a>(node: &'a Node, scope: &Scope<'a>, cx: &mut Cx) -> Out<'a> {
    // A qualified name is the select chain it wraps: it costs what the chain costs.
    if !matches!(node.kind, Kind::Qualified(_)) {
        cx.charge(1, node.id)?;
    }
    match &node.kind {
        Kind::Const(v) => Ok(Cow::Borrowed(v)),
        Kind::Global(name, hint) => match global(scope.vars, name, hint) {
            Some(v) => Ok(Cow::Borrowed(v)),
            None => Err(fail(node.id, format!("undeclared reference to '{name}'"))),
        },
        Kind::Local { up, slot } => scope
            .local(*up, *slot)
            .map(Cow::Borrowed)
            .ok_or_else(|| fail(node.id, "internal error: unbound variable")),
        Kind::Select(operand, field, hint) => {
            let v = eval(operand, scope, cx)?;
            match v {
                // A field of a map, borrowed: looked for where it was found the last time.
                Cow::Borrowed(Value::Map(m)) => match m.get_str_hinted(field, hint) {
                    Some(x) => Ok(Cow::Borrowed(x)),
                    None => Err(fail(node.id, format!("no such key: {field}"))),
                },
                Cow::Borrowed(v) => select(v, field, node.id),
                Cow::Owned(v) => select(&v, field, node.id).map(|c| Cow::Owned(c.into_owned())),
            }
        }
        Kind::Qualified(q) => {
            let Qualified {
                chain,
                segments,
                prefixes,
            } = &**q;
            // A name with a dot can only be a variable's when some variable's name has one.
            if scope.dotted {
                // The root alone is the chain's, but under a prefix.
                let shortest = if prefixes.is_empty() { 2 } else { 1 };
                for k in (shortest..=segments.len()).rev() {
                    let name = segments[..k].join(".");
                    let candidates = prefixes
                        .iter()
                        .map(|p| format!("{p}.{name}"))
                        .chain((k > 1).then(|| name.clone()));
                    for candidate in candidates {
                        if let Some((_, v)) = scope.vars.iter().find(|(n, _)| *n == candidate) {
                            let mut v = Cow::Borrowed(v);
                            for field in &segments[k..] {
                                v = match v {
                                    Cow::Borrowed(v) => select(v, field, node.id)?,
                                    Cow::Owned(v) => {
                                        Cow::Owned(select(&v, field, node.id)?.into_owned())
                                    }
                                };
                            }
                            return Ok(v);
                        }
                    }
                }
            }
            eval(chain, scope, cx)
        }
        Kind::Has(operand, field) => {
            let v = eval(operand, scope, cx)?;
            has(&v, field, node.id).map(|b| Cow::Owned(Value::Bool(b)))
        }
        Kind::OptSelect(operand, field) => {
            let v = eval(operand, scope, cx)?;
            opt_select(&v, field, node.id).map(Cow::Owned)
        }
        Kind::Index(operand, key) => {
            let v = eval(operand, scope, cx)?;
            let k = eval(key, scope, cx)?;
            match v {
                Cow::Borrowed(v) => index(v, &k, node.id),
                Cow::Owned(v) => index(&v, &k, node.id).map(|c| Cow::Owned(c.into_owned())),
            }
        }
        Kind::OptIndex(operand, key) => {
            let v = eval(operand, scope, cx)?;
            let k = eval(key, scope, cx)?;
            opt_index(&v, &k, node.id).map(Cow::Owned)
        }
        Kind::Not(a) => match &*eval(a, scope, cx)? {
            Value::Bool(b) => Ok(Cow::Owned(Value::Bool(!b))),
            other => Err(fail(node.id, no_overload("!_", &[other]))),
        },
        Kind::Neg(a) => {
            let v = eval(a, scope, cx)?;
            negate(&v).map(Cow::Owned).map_err(|m| fail(node.id, m))
        }
        Kind::NotStrictlyFalse(a) => match eval(a, scope, cx) {
            Ok(v) => Ok(Cow::Owned(Value::Bool(!matches!(&*v, Value::Bool(false))))),
            Err(f) if f.cost_exceeded => Err(f),
            Err(_) => Ok(Cow::Owned(Value::Bool(true))),
        },
        Kind::And(a, b) => logic(node.id, a, b, scope, cx, false),
        Kind::Or(a, b) => logic(node.id, a, b, scope, cx, true),
        Kind::Cond(parts) => {
            let (c, t, f) = &**parts;
            match &*eval(c, scope, cx)? {
                Value::Bool(true) => eval(t, scope, cx),
                Value::Bool(false) => eval(f, scope, cx),
                other => Err(fail(
                    node.id,
                    format!("expected bool, got {}", other.type_name()),
                )),
            }
        }
        Kind::Bin(op, a, b) => {
            let x = eval(a, scope, cx)?;
            let y = eval(b, scope, cx)?;
            binary(*op, &x, &y, node.id, cx).map(Cow::Owned)
        }
        Kind::AddChain(c) => add_chain(c, scope, cx).map(Cow::Owned),
        Kind::Fail(message) => Err(fail(node.id, message.to_string())),
        Kind::List(items, optional) => list(node.id, items, optional, scope, cx).map(Cow::Owned),
        Kind::Map(entries) => map(node.id, entries, scope, cx).map(Cow::Owned),
        Kind::Builtin(b, args) => builtin(node.id, b, args, scope, cx),
        Kind::Call(call) => library_call(node.id, call, scope, cx).map(Cow::Owned),
        Kind::Custom(call) => custom_call(node.id, call, scope, cx).map(Cow::Owned),
        Kind::Loop(l) => {
            let range = eval(&l.range, scope, cx)?;
            run_loop(node.id, l, &range, scope, cx).map(Cow::Owned)
        }
        Kind::Fold(f) => fold(node.id, f, scope, cx).map(Cow::Owned),
        Kind::Bind(b) => {
            let init = eval(&b.0, scope, cx)?;
            let inner = Scope {
                vars: scope.vars,
                dotted: scope.dotted,
                parent: Some(scope),
                slots: [Some(&*init), None, None],
            };
            let out = eval(&b.1, &inner, cx)?.into_owned();
            Ok(Cow::Owned(out))
        }
    }
}

/// `a && b` (`or` false) and `a || b` (`or` true), with CEL's commutative error handling.
fn logic<'a>(
    id: u64,
    a: &'a Node,
    b: &'a Node,
    scope: &Scope<'a>,
    cx: &mut Cx,
    or: bool,
) -> Out<'a> {
    let decisive = Value::Bool(or);
    let name = if or { "_||_" } else { "_&&_" };
    let left = eval(a, scope, cx);
    let left_error = match &left {
        Ok(v) => match &**v {
            Value::Bool(x) if *x == or => return Ok(Cow::Owned(decisive)),
            Value::Bool(_) => None,
            other => Some(fail(id, no_overload(name, &[other]))),
        },
        Err(f) if f.cost_exceeded => return left,
        Err(_) => None,
    };
    let right = eval(b, scope, cx);
    let right_error = match right {
        Ok(v) => match &*v {
            Value::Bool(x) if *x == or => return Ok(Cow::Owned(decisive)),
            Value::Bool(_) => None,
            other => Some(fail(id, no_overload(name, &[other]))),
        },
        Err(f) => Some(f),
    };
    match (left, left_error, right_error) {
        (Err(f), _, _) => Err(f),
        (_, Some(f), _) => Err(f),
        (_, _, Some(f)) => Err(f),
        _ => Ok(Cow::Owned(Value::Bool(!or))),
    }
}

/// The activation variable `name`, looked for first where it was found the last time: the
/// expressions of a rule run against activations that bind the same names in the same order.
fn global<'a>(vars: &'a [(Cow<'a, str>, Value)], name: &str, hint: &Hint) -> Option<&'a Value> {
    if let Some((n, v)) = vars.get(hint.get())
        && same_str(n, name)
    {
        return Some(v);
    }
    let i = vars.iter().position(|(n, _)| same_str(n, name))?;
    hint.set(i);
    Some(&vars[i].1)
}

fn select<'v>(v: &'v Value, field: &str, id: u64) -> Result<Cow<'v, Value>, Failure> {
    match v {
        Value::Map(m) => match m.get_str(field) {
            Some(x) => Ok(Cow::Borrowed(x)),
            None => Err(fail(id, format!("no such key: {field}"))),
        },
        Value::Optional(o) => match o {
            Some(inner) => opt_select(inner, field, id),
            None => Ok(Value::Optional(None)),
        }
        .map(Cow::Owned),
        other => Err(fail(
            id,
            format!(
                "type '{}' does not support field selection",
                other.type_name()
            ),
        )),
    }
}

fn has(v: &Value, field: &str, id: u64) -> Result<bool, Failure> {
    match v {
        Value::Map(m) => Ok(m.get_str(field).is_some()),
        Value::Optional(Some(inner)) => has(inner, field, id),
        Value::List(_) => Err(fail(id, LIST_FIELD.to_string())),
        // cel-go: a value that has no fields has not this one (`has(dyn(1).x)`).
        _ => Ok(false),
    }
}

/// cel-go's error for a field of a list.
const LIST_FIELD: &str = "unsupported index type 'string' in list";

fn opt_select(v: &Value, field: &str, id: u64) -> Result<Value, Failure> {
    match v {
        Value::Map(m) => Ok(Value::Optional(m.get_str(field).cloned().map(Arc::new))),
        Value::Optional(Some(inner)) => opt_select(inner, field, id),
        Value::List(_) => Err(fail(id, LIST_FIELD.to_string())),
        // cel-go finds no field in a value that has none (`dyn(1).?x`).
        _ => Ok(Value::Optional(None)),
    }
}

/// The list index a value is: an `int`, a `uint` or an integral `double`.
fn list_index(k: &Value) -> Option<i64> {
    match k {
        Value::Int(i) => Some(*i),
        Value::Uint(u) => i64::try_from(*u).ok().or(Some(i64::MAX)),
        Value::Double(d) if d.fract() == 0.0 && d.is_finite() => Some(*d as i64),
        _ => None,
    }
}

fn shown_key(k: &Value) -> String {
    match k {
        Value::String(s) => s.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Uint(u) => format!("{u}u"),
        Value::Double(d) => d.to_string(),
        Value::Bool(b) => b.to_string(),
        other => other.type_name(),
    }
}

fn index<'v>(v: &'v Value, k: &Value, id: u64) -> Result<Cow<'v, Value>, Failure> {
    match v {
        Value::List(items) => {
            let Some(i) = list_index(k) else {
                return Err(fail(id, no_overload("_[_]", &[v, k])));
            };
            usize::try_from(i)
                .ok()
                .and_then(|i| items.get(i))
                .map(Cow::Borrowed)
                .ok_or_else(|| fail(id, format!("index out of bounds: {i}")))
        }
        // cel-go finds a `null` key with `in` only.
        Value::Map(_) if matches!(k, Value::Null) => Err(fail(id, NULL_QUALIFIER.to_string())),
        Value::Map(m) => match m.get(k) {
            Some(x) => Ok(Cow::Borrowed(x)),
            None if Key::from_value(k).is_none() && !matches!(k, Value::Double(_)) => {
                Err(fail(id, format!("unsupported key type: {}", k.type_name())))
            }
            None => Err(fail(id, format!("no such key: {}", shown_key(k)))),
        },
        Value::Optional(o) => match o {
            Some(inner) => opt_index(inner, k, id).map(Cow::Owned),
            None => Ok(Cow::Owned(Value::Optional(None))),
        },
        _ => Err(fail(id, no_overload("_[_]", &[v, k]))),
    }
}

/// cel-go's error for a map indexed with `null`.
const NULL_QUALIFIER: &str = "invalid qualifier type: null";

fn opt_index(v: &Value, k: &Value, id: u64) -> Result<Value, Failure> {
    match v {
        Value::List(items) => {
            let Some(i) = list_index(k) else {
                return Err(fail(id, no_overload("_[?_]", &[v, k])));
            };
            Ok(Value::Optional(
                usize::try_from(i)
                    .ok()
                    .and_then(|i| items.get(i))
                    .cloned()
                    .map(Arc::new),
            ))
        }
        Value::Map(_) if matches!(k, Value::Null) => Err(fail(id, NULL_QUALIFIER.to_string())),
        Value::Map(m) => Ok(Value::Optional(m.get(k).cloned().map(Arc::new))),
        Value::Optional(Some(inner)) => opt_index(inner, k, id),
        Value::Optional(None) => Ok(Value::Optional(None)),
        // cel-go finds nothing in a value that has no elements (`dyn(1)[?'x']`).
        _ => Ok(Value::Optional(None)),
    }
}

fn negate(v: &Value) -> Result<Value, String> {
    match v {
        Value::Int(i) => i
            .checked_neg()
            .map(Value::Int)
            .ok_or_else(|| "integer overflow".to_string()),
        Value::Double(d) => Ok(Value::Double(-d)),
        Value::Duration(d) => duration_result(Some(-*d)),
        other => Err(no_overload("-_", &[other])),
    }
}

const OVERFLOW: &str = "integer overflow";

fn timestamp_result(ts: Option<Timestamp>) -> Result<Value, String> {
    match ts {
        Some(ts) if timestamp_in_range(&ts) => Ok(Value::Timestamp(ts)),
        _ => Err("timestamp out of range".to_string()),
    }
}

fn duration_result(d: Option<Duration>) -> Result<Value, String> {
    match d {
        Some(d) if duration_in_range(&d) => Ok(Value::Duration(d)),
        _ => Err("duration out of range".to_string()),
    }
}

fn concat<T: Clone>(a: &Arc<[T]>, b: &Arc<[T]>) -> Arc<[T]> {
    if b.is_empty() {
        return Arc::clone(a);
    }
    if a.is_empty() {
        return Arc::clone(b);
    }
    let mut out = Vec::with_capacity(a.len() + b.len());
    out.extend_from_slice(a);
    out.extend_from_slice(b);
    Arc::from(out)
}

fn binary(op: Op, a: &Value, b: &Value, id: u64, cx: &mut Cx) -> Result<Value, Failure> {
    let result = match op {
        Op::Eq | Op::Ne => {
            // Comparing strings, bytes, lists and maps reads them: charged before, as
            // `limits::equality_work` bounds it.
            let cap = cx.remaining().saturating_mul(10).saturating_add(9);
            cx.charge(limits::equality_work(a, b, cap) / 10, id)?;
            let eq = equals(a, b);
            return Ok(Value::Bool(if op == Op::Eq { eq } else { !eq }));
        }
        Op::Lt | Op::Le | Op::Gt | Op::Ge => {
            // Strings and bytes are read up to the shorter's end.
            cx.charge(limits::order_cost(a, b), id)?;
            match compare(a, b) {
                // cel-go: an ordering of NaN is an error, not false.
                Ok(None) => Err("NaN values cannot be ordered".to_string()),
                Ok(Some(o)) => Ok(Value::Bool(match op {
                    Op::Lt => o == Ordering::Less,
                    Op::Le => o != Ordering::Greater,
                    Op::Gt => o == Ordering::Greater,
                    _ => o != Ordering::Less,
                })),
                Err(()) => Err(no_overload(op.name(), &[a, b])),
            }
        }
        Op::In => match b {
            Value::List(items) => {
                cx.charge(size_cost(b), id)?;
                // The needle is compared with every element (at worst): a string byte by
                // byte, 1 per 10 bytes of the shorter of the two; a list or map element by
                // element (`limits::equality_work`).
                cx.charge(limits::search_cost(items, a, cx.remaining()), id)?;
                Ok(Value::Bool(items.iter().any(|x| equals(a, x))))
            }
            Value::Map(m) => {
                // The key is hashed: 1 per 10 bytes.
                cx.charge(limits::byte_len(a) / 10, id)?;
                Ok(Value::Bool(m.contains(a)))
            }
            _ => Err(no_overload(op.name(), &[a, b])),
        },
        Op::Add => match (a, b) {
            (Value::Int(x), Value::Int(y)) => x
                .checked_add(*y)
                .map(Value::Int)
                .ok_or_else(|| OVERFLOW.to_string()),
            (Value::Uint(x), Value::Uint(y)) => x
                .checked_add(*y)
                .map(Value::Uint)
                .ok_or_else(|| OVERFLOW.to_string()),
            (Value::Double(x), Value::Double(y)) => Ok(Value::Double(x + y)),
            (Value::String(x), Value::String(y)) => {
                cx.charge((x.len() + y.len()) as u64 / 10, id)?;
                limits::check_bytes("string concatenation", x.len() + y.len())
                    .map_err(|m| fail(id, m))?;
                let mut s = String::with_capacity(x.len() + y.len());
                s.push_str(x);
                s.push_str(y);
                Ok(Value::String(Arc::from(s)))
            }
            (Value::Bytes(x), Value::Bytes(y)) => {
                cx.charge((x.len() + y.len()) as u64 / 10, id)?;
                limits::check_bytes("bytes concatenation", x.len() + y.len())
                    .map_err(|m| fail(id, m))?;
                Ok(Value::Bytes(concat(x, y)))
            }
            (Value::List(x), Value::List(y)) => {
                // The elements are copied: 1 per element of the result (see `limits.rs`).
                cx.charge((x.len() + y.len()) as u64, id)?;
                limits::check_elements("list concatenation", x.len() + y.len())
                    .map_err(|m| fail(id, m))?;
                Ok(Value::List(concat(x, y)))
            }
            (Value::Timestamp(t), Value::Duration(d))
            | (Value::Duration(d), Value::Timestamp(t)) => timestamp_result(t.checked_add(*d)),
            (Value::Duration(x), Value::Duration(y)) => duration_result(x.checked_add(y)),
            _ => Err(no_overload(op.name(), &[a, b])),
        },
        Op::Sub => match (a, b) {
            (Value::Int(x), Value::Int(y)) => x
                .checked_sub(*y)
                .map(Value::Int)
                .ok_or_else(|| OVERFLOW.to_string()),
            (Value::Uint(x), Value::Uint(y)) => x
                .checked_sub(*y)
                .map(Value::Uint)
                .ok_or_else(|| OVERFLOW.to_string()),
            (Value::Double(x), Value::Double(y)) => Ok(Value::Double(x - y)),
            (Value::Timestamp(x), Value::Timestamp(y)) => {
                duration_result(Some(x.instant().signed_duration_since(y.instant())))
            }
            // cel-go negates the duration first: the most negative one overflows.
            (Value::Timestamp(_), Value::Duration(d)) if d.num_nanoseconds() == Some(i64::MIN) => {
                Err(OVERFLOW.to_string())
            }
            (Value::Timestamp(t), Value::Duration(d)) => timestamp_result(t.checked_sub(*d)),
            (Value::Duration(x), Value::Duration(y)) => duration_result(x.checked_sub(y)),
            _ => Err(no_overload(op.name(), &[a, b])),
        },
        Op::Mul => match (a, b) {
            (Value::Int(x), Value::Int(y)) => x
                .checked_mul(*y)
                .map(Value::Int)
                .ok_or_else(|| OVERFLOW.to_string()),
            (Value::Uint(x), Value::Uint(y)) => x
                .checked_mul(*y)
                .map(Value::Uint)
                .ok_or_else(|| OVERFLOW.to_string()),
            (Value::Double(x), Value::Double(y)) => Ok(Value::Double(x * y)),
            _ => Err(no_overload(op.name(), &[a, b])),
        },
        Op::Div => match (a, b) {
            (Value::Int(_), Value::Int(0)) | (Value::Uint(_), Value::Uint(0)) => {
                Err("division by zero".to_string())
            }
            (Value::Int(x), Value::Int(y)) => x
                .checked_div(*y)
                .map(Value::Int)
                .ok_or_else(|| OVERFLOW.to_string()),
            (Value::Uint(x), Value::Uint(y)) => Ok(Value::Uint(x / y)),
            (Value::Double(x), Value::Double(y)) => Ok(Value::Double(x / y)),
            _ => Err(no_overload(op.name(), &[a, b])),
        },
        Op::Rem => match (a, b) {
            (Value::Int(_), Value::Int(0)) | (Value::Uint(_), Value::Uint(0)) => {
                Err("modulus by zero".to_string())
            }
            (Value::Int(x), Value::Int(y)) => x
                .checked_rem(*y)
                .map(Value::Int)
                .ok_or_else(|| OVERFLOW.to_string()),
            (Value::Uint(x), Value::Uint(y)) => Ok(Value::Uint(x % y)),
            _ => Err(no_overload(op.name(), &[a, b])),
        },
    };
    result.map_err(|m| fail(id, m))
}

/// `a + b + c ...`: as the `+`s one after the other, but strings are appended to one
/// buffer, allocated once, rather than copied at each `+`.
#[inline(never)]
fn add_chain<'a>(c: &'a AddChain, scope: &Scope<'a>, cx: &mut Cx) -> Result<Value, Failure> {
    let Some((first, rest)) = c.operands.split_first() else {
        return Ok(Value::Null);
    };
    let mut acc = eval(first, scope, cx)?;
    let mut buf: Option<String> = None;
    for (i, (operand, &op)) in rest.iter().zip(&c.ops).enumerate() {
        if i > 0 {
            // the chain's node counted the first `+`
            cx.charge(1, op)?;
        }
        let v = eval(operand, scope, cx)?;
        if let Value::String(s) = &*v {
            if let Some(b) = buf.as_mut() {
                cx.charge((b.len() + s.len()) as u64 / 10, op)?;
                limits::check_bytes("string concatenation", b.len() + s.len())
                    .map_err(|m| fail(op, m))?;
                b.push_str(s);
                continue;
            }
            if let Value::String(a) = &*acc {
                cx.charge((a.len() + s.len()) as u64 / 10, op)?;
                limits::check_bytes("string concatenation", a.len() + s.len())
                    .map_err(|m| fail(op, m))?;
                let mut b = String::with_capacity((a.len() + s.len()) * 2 + 16);
                b.push_str(a);
                b.push_str(s);
                buf = Some(b);
                continue;
            }
        }
        if let Some(b) = buf.take() {
            acc = Cow::Owned(Value::String(Arc::from(b)));
        }
        acc = Cow::Owned(binary(Op::Add, &acc, &v, op, cx)?);
    }
    Ok(match buf {
        Some(b) => Value::String(Arc::from(b)),
        None => acc.into_owned(),
    })
}

#[inline(never)]
fn list<'a>(
    id: u64,
    items: &'a [Node],
    optional: &[bool],
    scope: &Scope<'a>,
    cx: &mut Cx,
) -> Result<Value, Failure> {
    let mut out = Vec::with_capacity(items.len());
    for (item, opt) in items.iter().zip(optional) {
        let v = eval(item, scope, cx)?;
        if *opt {
            match &*v {
                Value::Optional(Some(inner)) => out.push((**inner).clone()),
                Value::Optional(None) => {}
                other => {
                    return Err(fail(
                        id,
                        format!(
                            "cannot initialize an optional list element from a {}",
                            other.type_name()
                        ),
                    ));
                }
            }
        } else {
            out.push(v.into_owned());
        }
    }
    Ok(Value::List(Arc::from(out)))
}

#[inline(never)]
fn map<'a>(
    id: u64,
    entries: &'a [(Node, Node, bool)],
    scope: &Scope<'a>,
    cx: &mut Cx,
) -> Result<Value, Failure> {
    let mut out = Vec::with_capacity(entries.len());
    for (k, v, opt) in entries {
        let key = eval(k, scope, cx)?;
        let Some(key) = Key::from_value(&key) else {
            return Err(fail(
                k.id,
                format!("unsupported key type: {}", key.type_name()),
            ));
        };
        let value = eval(v, scope, cx)?;
        if *opt {
            match &*value {
                Value::Optional(Some(inner)) => out.push((key, Some((**inner).clone()))),
                // cel-go removes the key an earlier entry set.
                Value::Optional(None) => out.push((key, None)),
                other => {
                    return Err(fail(
                        id,
                        format!(
                            "cannot initialize an optional map entry from a {}",
                            other.type_name()
                        ),
                    ));
                }
            }
        } else {
            out.push((key, Some(value.into_owned())));
        }
    }
    Ok(Value::Map(Arc::new(Map::from_literal(out))))
}

/// Go's zero `time.Time`, in seconds since the Unix epoch.
const GO_ZERO_TIME: i64 = -62_135_596_800;

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Int(i) => *i == 0,
        Value::Uint(u) => *u == 0,
        Value::Double(d) => *d == 0.0,
        Value::String(s) => s.is_empty(),
        Value::Bytes(b) => b.is_empty(),
        Value::List(l) => l.is_empty(),
        Value::Map(m) => m.is_empty(),
        Value::Duration(d) => d.is_zero(),
        // Go's zero time, 0001-01-01T00:00:00Z, not the Unix epoch.
        Value::Timestamp(t) => t.unix_seconds() == GO_ZERO_TIME && t.subsec_nanos() == 0,
        // cel-go's optional values have no zero value: `optional.none()` is kept.
        Value::Optional(_) => false,
        Value::Type(_) | Value::Opaque(_) => false,
    }
}

#[inline(never)]
fn builtin<'a>(
    id: u64,
    b: &'a Builtin,
    args: &'a [Node],
    scope: &Scope<'a>,
    cx: &mut Cx,
) -> Out<'a> {
    // The short-circuiting ones first: their argument is evaluated only when needed.
    if let (Builtin::OptOr | Builtin::OptOrValue, [a, alt]) = (b, args) {
        let v = eval(a, scope, cx)?;
        return match (&*v, b) {
            (Value::Optional(Some(_)), Builtin::OptOr) => Ok(v),
            (Value::Optional(Some(inner)), _) => Ok(Cow::Owned((**inner).clone())),
            (Value::Optional(None), _) => eval(alt, scope, cx),
            // cel-go returns a receiver that is not an optional as it is (the checker
            // refuses it unless it is `dyn`).
            _ => Ok(v),
        };
    }
    let mut values: [Cow<'a, Value>; 2] = [Cow::Owned(Value::Null), Cow::Owned(Value::Null)];
    if args.len() > 2 {
        return Err(fail(id, format!("too many arguments to '{}'", b.name())));
    }
    for (slot, arg) in values.iter_mut().zip(args) {
        *slot = eval(arg, scope, cx)?;
    }
    let [first, second] = &values;
    let (x, y): (&Value, &Value) = (first, second);
    let bad = |args: &[&Value]| {
        if b.is_method() {
            fail(id, no_method_overload(b.name(), args))
        } else {
            fail(id, no_overload(b.name(), args))
        }
    };
    let out = match b {
        Builtin::Size => match x.size() {
            Some(n) => Value::Int(i64::try_from(n).unwrap_or(i64::MAX)),
            None => return Err(bad(&[x])),
        },
        Builtin::Contains | Builtin::StartsWith | Builtin::EndsWith => {
            let (Value::String(s), Value::String(t)) = (x, y) else {
                return Err(bad(&[x, y]));
            };
            // `contains` reads the needle too (a linear search); `startsWith` and
            // `endsWith` read no more than the string.
            cx.charge(size_cost(x), id)?;
            if let Builtin::Contains = b {
                cx.charge(size_cost(y), id)?;
            }
            Value::Bool(match b {
                Builtin::Contains => s.contains(&**t),
                Builtin::StartsWith => s.starts_with(&**t),
                _ => s.ends_with(&**t),
            })
        }
        Builtin::Matches(compiled) => {
            let (Value::String(s), Value::String(p)) = (x, y) else {
                return Err(bad(&[x, y]));
            };
            cx.charge(size_cost(x), id)?;
            let matched = match compiled {
                Some(re) => re.is_match(s),
                None => {
                    // A pattern known only now: its compilation is charged (see `limits.rs`),
                    // once per pattern and evaluation.
                    // Go's syntax (RE2), as `find` reads it
                    let (re, cost) = crate::k8s::regex::compile_with_cost(p);
                    if cx.patterns.insert(Arc::clone(p)) {
                        cx.charge(cost, id)?;
                    }
                    re.map_err(|e| {
                        fail(id, format!("matches: invalid regular expression: {}", e.0))
                    })?
                    .is_match(s)
                }
            };
            Value::Bool(matched)
        }
        Builtin::ToInt => conversions::to_int(x).map_err(|m| fail(id, m))?,
        Builtin::ToUint => conversions::to_uint(x).map_err(|m| fail(id, m))?,
        Builtin::ToDouble => conversions::to_double(x).map_err(|m| fail(id, m))?,
        Builtin::ToString => {
            if let Value::String(_) = x {
                return Ok(values.into_iter().next().unwrap_or(Cow::Owned(Value::Null)));
            }
            if let Value::Bytes(_) = x {
                // A copy: 1 per 10 bytes, as the value built.
                cx.charge(size_cost(x), id)?;
            }
            conversions::to_string(x).map_err(|m| fail(id, m))?
        }
        Builtin::ToBool => conversions::to_bool(x).map_err(|m| fail(id, m))?,
        Builtin::ToBytes => {
            if let Value::String(_) = x {
                // A copy: 1 per 10 bytes, as the value built.
                cx.charge(size_cost(x), id)?;
            }
            conversions::to_bytes(x).map_err(|m| fail(id, m))?
        }
        Builtin::Dyn => return Ok(values.into_iter().next().unwrap_or(Cow::Owned(Value::Null))),
        Builtin::TypeOf => Value::Type(x.cel_type()),
        Builtin::OptionalOf => Value::Optional(Some(Arc::new(x.clone()))),
        Builtin::OptionalNone => {
            if !args.is_empty() {
                return Err(bad(&[x]));
            }
            Value::Optional(None)
        }
        Builtin::OptionalOfNonZero => {
            if is_zero(x) {
                Value::Optional(None)
            } else {
                Value::Optional(Some(Arc::new(x.clone())))
            }
        }
        Builtin::HasValue => match x {
            Value::Optional(o) => Value::Bool(o.is_some()),
            _ => return Err(bad(&[x])),
        },
        Builtin::OptValue => match x {
            Value::Optional(Some(v)) => (**v).clone(),
            Value::Optional(None) => {
                return Err(fail(id, "optional.none() dereference"));
            }
            _ => return Err(bad(&[x])),
        },
        Builtin::OptOr | Builtin::OptOrValue => return Err(bad(&[x])),
    };
    Ok(Cow::Owned(out))
}

#[inline(never)]
fn library_call<'a>(
    id: u64,
    call: &'a Call,
    scope: &Scope<'a>,
    cx: &mut Cx,
) -> Result<Value, Failure> {
    let mut args: Vec<Value> = Vec::with_capacity(call.args.len());
    for a in &call.args {
        args.push(eval(a, scope, cx)?.into_owned());
    }
    if call.undeclared {
        return Err(fail(id, format!("undeclared reference to '{}'", call.name)));
    }
    let Some(overload) = call.overloads.iter().find(|o| o.applies_to(&args)) else {
        let refs: Vec<&Value> = args.iter().collect();
        let mut message = if call.receiver {
            no_method_overload(&call.name, &refs)
        } else {
            no_overload(&call.name, &refs)
        };
        // An overload outside the environment would apply: say what brings it in.
        if let Some((_, needs)) = call.outside.iter().find(|(o, _)| o.applies_to(&args)) {
            message = format!("{message} in this environment: {needs}");
        }
        return Err(fail(id, message));
    };
    if overload.cost == Cost::Linear {
        cx.charge(args.iter().map(size_cost).sum(), id)?;
    }
    if let Some(Value::String(p)) = overload.pattern.and_then(|i| args.get(i)) {
        cx.charge_pattern(p, crate::k8s::pattern_cost, id)?;
    }
    if let Some(work) = overload.work {
        cx.charge(work(&args, cx.remaining()), id)?;
    }
    let result = (overload.function)(&args).map_err(|e| fail(id, e.message))?;
    limits::check_value(&call.name, &result).map_err(|m| fail(id, m))?;
    if overload.builds {
        cx.charge(limits::creation_cost(&result), id)?;
    }
    Ok(result)
}

#[inline(never)]
fn custom_call<'a>(
    id: u64,
    call: &'a CustomCall,
    scope: &Scope<'a>,
    cx: &mut Cx,
) -> Result<Value, Failure> {
    let mut args = Vec::with_capacity(call.args.len());
    for (i, a) in call.args.iter().enumerate() {
        let v = eval(a, scope, cx)?;
        // The argument is read whole (converted to JSON): charged by its size, before the
        // conversion, so a large object in a loop stops on the cost limit.
        cx.charge(limits::deep_cost(&v, cx.remaining()), id)?;
        let json = v.to_json().map_err(|e| {
            let reason = e
                .message
                .strip_prefix("the result cannot be represented as JSON: ")
                .unwrap_or(&e.message)
                .to_string();
            fail(
                id,
                format!(
                    "{}: argument {} cannot be passed as JSON: {reason}",
                    call.name,
                    i + 1
                ),
            )
        })?;
        args.push(json);
    }
    let result = (call.function)(&args).map_err(|e| {
        fail(
            id,
            format!("{}: {}", call.name, crate::error::lowercase_first(&e)),
        )
    })?;
    let result = Value::from_json(&result);
    cx.charge(limits::deep_cost(&result, cx.remaining()), id)?;
    Ok(result)
}

/// What a comprehension iterates over.
enum Items<'r> {
    List(&'r [Value]),
    Map(&'r Map, &'r [Value]),
}

impl Items<'_> {
    fn len(&self) -> usize {
        match self {
            Items::List(l) => l.len(),
            Items::Map(m, _) => m.len(),
        }
    }
}

fn items(range: &Value, id: u64) -> Result<Items<'_>, Failure> {
    match range {
        Value::List(l) => Ok(Items::List(l)),
        Value::Map(m) => Ok(Items::Map(m, m.keys())),
        other => Err(fail(
            id,
            format!(
                "expression of type '{}' cannot be the range of a comprehension",
                other.type_name()
            ),
        )),
    }
}

/// The values of the iteration variables for element `i`: the first, and the second for a
/// two-variable comprehension. `index` holds the list index when it is the first.
fn vars_at<'r>(
    items: &Items<'r>,
    i: usize,
    two: bool,
    index: &'r Value,
) -> (&'r Value, Option<&'r Value>) {
    match items {
        Items::List(l) => {
            if two {
                (index, l.get(i))
            } else {
                (&l[i], None)
            }
        }
        Items::Map(m, keys) => {
            if two {
                (&keys[i], m.value_at(i))
            } else {
                (&keys[i], None)
            }
        }
    }
}

/// Runs `body` for each element of `items`, in a scope binding the iteration variables,
/// until it answers `false`. Each iteration costs 1.
#[inline(always)]
fn iterate<'a, F>(
    id: u64,
    items: &Items<'_>,
    two: bool,
    scope: &Scope<'a>,
    cx: &mut Cx,
    mut body: F,
) -> Result<(), Failure>
where
    F: for<'r> FnMut(&Scope<'r>, &'r Value, &mut Cx) -> Result<bool, Failure>,
{
    for i in 0..items.len() {
        cx.charge(1, id)?;
        let index = Value::Int(i64::try_from(i).unwrap_or(i64::MAX));
        let (first, second) = vars_at(items, i, two, &index);
        let inner = Scope {
            vars: scope.vars,
            dotted: scope.dotted,
            parent: Some(scope),
            slots: [Some(first), second, None],
        };
        if !body(&inner, first, cx)? {
            break;
        }
    }
    Ok(())
}

/// Whether a filter admits the element.
#[inline(always)]
fn admits(filter: Option<&Node>, scope: &Scope<'_>, cx: &mut Cx) -> Result<bool, Failure> {
    let Some(f) = filter else {
        return Ok(true);
    };
    match &*eval(f, scope, cx)? {
        Value::Bool(b) => Ok(*b),
        other => Err(fail(
            f.id,
            format!("expected bool, got {}", other.type_name()),
        )),
    }
}

#[inline(never)]
fn run_loop<'a>(
    id: u64,
    l: &'a Loop,
    range: &Value,
    scope: &Scope<'a>,
    cx: &mut Cx,
) -> Result<Value, Failure> {
    let items = items(range, l.range.id)?;
    match &l.kind {
        LoopKind::All(p) | LoopKind::Exists(p) => {
            let exists = matches!(l.kind, LoopKind::Exists(_));
            let mut decided = false;
            let mut error: Option<Failure> = None;
            iterate(id, &items, l.two, scope, cx, |inner, _, cx| {
                match eval(p, inner, cx) {
                    Ok(v) => match &*v {
                        Value::Bool(b) if *b == exists => {
                            decided = true;
                            return Ok(false);
                        }
                        Value::Bool(_) => {}
                        other => {
                            let name = if exists { "_||_" } else { "_&&_" };
                            error.get_or_insert_with(|| fail(p.id, no_overload(name, &[other])));
                        }
                    },
                    Err(f) if f.cost_exceeded => return Err(f),
                    Err(f) => {
                        error.get_or_insert(f);
                    }
                }
                Ok(true)
            })?;
            match error {
                Some(f) if !decided => Err(f),
                _ => Ok(Value::Bool(decided == exists)),
            }
        }
        LoopKind::ExistsOne(p) => {
            let mut count: u64 = 0;
            iterate(id, &items, l.two, scope, cx, |inner, _, cx| {
                match &*eval(p, inner, cx)? {
                    Value::Bool(true) => count += 1,
                    Value::Bool(false) => {}
                    other => {
                        return Err(fail(
                            p.id,
                            format!("expected bool, got {}", other.type_name()),
                        ));
                    }
                }
                Ok(true)
            })?;
            Ok(Value::Bool(count == 1))
        }
        LoopKind::List(filter, e) => {
            let mut out: Vec<Value> = Vec::with_capacity(items.len());
            iterate(id, &items, l.two, scope, cx, |inner, _, cx| {
                if admits(filter.as_ref(), inner, cx)? {
                    out.push(eval(e, inner, cx)?.into_owned());
                }
                Ok(true)
            })?;
            Ok(Value::List(Arc::from(out)))
        }
        LoopKind::Map(filter, e) => {
            let mut out: Vec<(Key, Value)> = Vec::with_capacity(items.len());
            iterate(id, &items, l.two, scope, cx, |inner, first, cx| {
                if admits(filter.as_ref(), inner, cx)? {
                    let Some(key) = Key::from_value(first) else {
                        return Err(fail(
                            id,
                            format!("unsupported key type: {}", first.type_name()),
                        ));
                    };
                    out.push((key, eval(e, inner, cx)?.into_owned()));
                }
                Ok(true)
            })?;
            Map::from_entries(out)
                .map(|m| Value::Map(Arc::new(m)))
                .map_err(|e| fail(id, e.message))
        }
        LoopKind::MapEntry(filter, e) => {
            let mut out: Vec<(Key, Value)> = Vec::with_capacity(items.len());
            iterate(id, &items, l.two, scope, cx, |inner, _, cx| {
                if admits(filter.as_ref(), inner, cx)? {
                    match &*eval(e, inner, cx)? {
                        Value::Map(m) => {
                            out.extend(m.iter().map(|(k, x)| (k.clone(), x.clone())));
                        }
                        other => {
                            return Err(fail(
                                e.id,
                                format!(
                                    "transformMapEntry: expected a map, got {}",
                                    other.type_name()
                                ),
                            ));
                        }
                    }
                }
                Ok(true)
            })?;
            Map::from_entries(out)
                .map(|m| Value::Map(Arc::new(m)))
                .map_err(|e| fail(id, e.message))
        }
    }
}

#[inline(never)]
fn fold<'a>(id: u64, f: &'a Fold, scope: &Scope<'a>, cx: &mut Cx) -> Result<Value, Failure> {
    let range = eval(&f.range, scope, cx)?;
    let items = items(&range, f.range.id)?;
    let mut accu = eval(&f.init, scope, cx)?.into_owned();
    for i in 0..items.len() {
        cx.charge(1, id)?;
        let index = Value::Int(i64::try_from(i).unwrap_or(i64::MAX));
        let (first, second) = vars_at(&items, i, f.two, &index);
        let next = {
            let inner = Scope {
                vars: scope.vars,
                dotted: scope.dotted,
                parent: Some(scope),
                slots: [Some(first), second, Some(&accu)],
            };
            match &*eval(&f.cond, &inner, cx)? {
                Value::Bool(true) => {}
                Value::Bool(false) => break,
                other => {
                    return Err(fail(
                        f.cond.id,
                        format!("expected bool, got {}", other.type_name()),
                    ));
                }
            }
            eval(&f.step, &inner, cx)?.into_owned()
        };
        accu = next;
    }
    let inner = Scope {
        vars: scope.vars,
        dotted: scope.dotted,
        parent: Some(scope),
        slots: [None, None, Some(&accu)],
    };
    Ok(eval(&f.result, &inner, cx)?.into_owned())
}

/// Converts a failure into the public error, positioned with `position`.
pub(crate) fn to_eval_error(
    fault: &Fault,
    position: impl Fn(u64) -> Option<(usize, usize)>,
) -> EvalError {
    let mut e = EvalError::new(fault.message.clone());
    if let Some((line, column)) = position(fault.id) {
        e.line = Some(line);
        e.column = Some(column);
    }
    e
}
