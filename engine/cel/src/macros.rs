//! Macros the `cel` parser does not have, added to its macro table: the two-variable
//! comprehensions of cel-go's `ext.TwoVarComprehensions` (Kubernetes 1.32+) and
//! `cel.bind` of `ext.Bindings`.
//!
//! Their expansions follow cel-go's: a comprehension whose accumulator is `@result`, so the
//! planner recognises them as it does the standard macros and compiles them to loops.
//!
//! - `all(k, v, p)`, `exists(k, v, p)`, `existsOne(k, v, p)` (and `exists_one`);
//! - `transformList(k, v, [filter,] t)`: `@result + [t]`;
//! - `transformMap(k, v, [filter,] t)`: `cel.@mapInsert(@result, k, t)`;
//! - `transformMapEntry(k, v, [filter,] e)`: `cel.@mapInsert(@result, e)`;
//! - `cel.bind(name, init, body)`: a comprehension over no elements whose accumulator is
//!   `name`, initialised to `init`, with result `body`;
//! - `math.greatest(..)` and `math.least(..)` of cel-go's `ext.Math`: a call of `math.@max`
//!   (`math.@min`) on the one argument, the two arguments, or a list of the arguments when
//!   there are more (see [`crate::math`]). As cel-go's, they check their arguments: at
//!   least one; a single one that is a number or a list of numbers as far as the parser can
//!   tell; several that are numbers as far as it can tell (a literal that is not a number,
//!   a list or a map literal is refused).

use cel::common::ast::{
    CallExpr, ComprehensionExpr, Expr, IdedExpr, ListExpr, LiteralValue, MapExpr, operators,
};
use cel::parser::{Macro, MacroExprHelper, ParseError};

use crate::environment::Library;

/// The accumulator the standard macros use.
pub(crate) const RESULT: &str = "@result";
/// The function of `transformMap` and `transformMapEntry` steps; `@` keeps expressions from
/// naming it.
pub(crate) const MAP_INSERT: &str = "cel.@mapInsert";

type Args<'a> = &'a mut Vec<IdedExpr>;

/// Adds to `env` the macros of the libraries `has` accepts: an environment without a
/// library leaves its calls unexpanded, for the compiler to refuse by name.
pub(crate) fn register(
    env: &mut cel::Env,
    has: impl Fn(Library) -> bool,
) -> Result<(), cel::DeclarationError> {
    if has(Library::TwoVarComprehensions) {
        two_variable(env)?;
    }
    if has(Library::Bindings) {
        env.add_macro(Macro::receiver("bind", 3, bind))?;
    }
    if has(Library::Math) {
        env.add_macro(Macro::receiver_var_arg("greatest", |h, t, a| {
            extreme(h, t, a, "greatest", crate::math::MAX)
        }))?;
        env.add_macro(Macro::receiver_var_arg("least", |h, t, a| {
            extreme(h, t, a, "least", crate::math::MIN)
        }))?;
    }
    Ok(())
}

fn two_variable(env: &mut cel::Env) -> Result<(), cel::DeclarationError> {
    env.add_macro(Macro::receiver("all", 3, |h, t, a| {
        quantifier(h, t, a, Quantifier::All)
    }))?;
    env.add_macro(Macro::receiver("exists", 3, |h, t, a| {
        quantifier(h, t, a, Quantifier::Exists)
    }))?;
    env.add_macro(Macro::receiver("existsOne", 3, |h, t, a| {
        quantifier(h, t, a, Quantifier::ExistsOne)
    }))?;
    env.add_macro(Macro::receiver("exists_one", 3, |h, t, a| {
        quantifier(h, t, a, Quantifier::ExistsOne)
    }))?;
    for arity in [3, 4] {
        env.add_macro(Macro::receiver("transformList", arity, |h, t, a| {
            transform(h, t, a, Transform::List)
        }))?;
        env.add_macro(Macro::receiver("transformMap", arity, |h, t, a| {
            transform(h, t, a, Transform::Map)
        }))?;
        env.add_macro(Macro::receiver("transformMapEntry", arity, |h, t, a| {
            transform(h, t, a, Transform::MapEntry)
        }))?;
    }
    Ok(())
}

#[derive(Clone, Copy)]
enum Quantifier {
    All,
    Exists,
    ExistsOne,
}

#[derive(Clone, Copy)]
enum Transform {
    List,
    Map,
    MapEntry,
}

fn ident(h: &mut MacroExprHelper<'_>, name: &str) -> IdedExpr {
    h.next_expr(Expr::Ident(name.to_string()))
}

fn call(h: &mut MacroExprHelper<'_>, name: &str, args: Vec<IdedExpr>) -> IdedExpr {
    h.next_expr(Expr::Call(CallExpr {
        func_name: name.to_string(),
        target: None,
        args,
    }))
}

fn literal(h: &mut MacroExprHelper<'_>, value: LiteralValue) -> IdedExpr {
    h.next_expr(Expr::Literal(value))
}

/// The two iteration variables, which must be simple names, distinct from each other and
/// from the accumulator.
fn two_vars(
    h: &mut MacroExprHelper<'_>,
    args: &[IdedExpr],
) -> Result<(String, String), ParseError> {
    let name = |h: &mut MacroExprHelper<'_>, e: &IdedExpr| match &e.expr {
        Expr::Ident(name) => Ok(name.clone()),
        _ => Err(h.new_error(e.id, "argument must be a simple name")),
    };
    let (Some(first), Some(second)) = (args.first(), args.get(1)) else {
        return Err(h.new_error(0, "missing iteration variables"));
    };
    let k = name(h, first)?;
    let v = name(h, second)?;
    if k == v {
        return Err(h.new_error(second.id, format!("duplicate variable name: {v}")));
    }
    Ok((k, v))
}

#[allow(clippy::too_many_arguments)]
fn comprehension(
    h: &mut MacroExprHelper<'_>,
    range: IdedExpr,
    k: String,
    v: String,
    init: IdedExpr,
    cond: IdedExpr,
    step: IdedExpr,
    result: IdedExpr,
) -> IdedExpr {
    h.next_expr(Expr::Comprehension(Box::new(ComprehensionExpr {
        iter_range: range,
        iter_var: k,
        iter_var2: Some(v),
        accu_var: RESULT.to_string(),
        accu_init: init,
        loop_cond: cond,
        loop_step: step,
        result,
    })))
}

fn quantifier(
    h: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: Args<'_>,
    q: Quantifier,
) -> Result<Option<IdedExpr>, ParseError> {
    let (k, v) = two_vars(h, args)?;
    let Some(range) = target.take() else {
        return Err(h.new_error(0, "missing target"));
    };
    let Some(predicate) = args.pop() else {
        return Err(h.new_error(0, "missing predicate"));
    };
    args.clear();
    let accu = ident(h, RESULT);
    let expr = match q {
        Quantifier::All => {
            let init = literal(h, LiteralValue::Boolean(true.into()));
            let a = ident(h, RESULT);
            let cond = call(h, operators::NOT_STRICTLY_FALSE, vec![a]);
            let step = call(h, operators::LOGICAL_AND, vec![accu, predicate]);
            let result = ident(h, RESULT);
            comprehension(h, range, k, v, init, cond, step, result)
        }
        Quantifier::Exists => {
            let init = literal(h, LiteralValue::Boolean(false.into()));
            let a = ident(h, RESULT);
            let not = call(h, operators::LOGICAL_NOT, vec![a]);
            let cond = call(h, operators::NOT_STRICTLY_FALSE, vec![not]);
            let step = call(h, operators::LOGICAL_OR, vec![accu, predicate]);
            let result = ident(h, RESULT);
            comprehension(h, range, k, v, init, cond, step, result)
        }
        Quantifier::ExistsOne => {
            let init = literal(h, LiteralValue::Int(0.into()));
            let cond = literal(h, LiteralValue::Boolean(true.into()));
            let one = literal(h, LiteralValue::Int(1.into()));
            let plus = call(h, operators::ADD, vec![accu, one]);
            let same = ident(h, RESULT);
            let step = call(h, operators::CONDITIONAL, vec![predicate, plus, same]);
            let a = ident(h, RESULT);
            let one = literal(h, LiteralValue::Int(1.into()));
            let result = call(h, operators::EQUALS, vec![a, one]);
            comprehension(h, range, k, v, init, cond, step, result)
        }
    };
    Ok(Some(expr))
}

fn transform(
    h: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: Args<'_>,
    t: Transform,
) -> Result<Option<IdedExpr>, ParseError> {
    let (k, v) = two_vars(h, args)?;
    let Some(range) = target.take() else {
        return Err(h.new_error(0, "missing target"));
    };
    let Some(expr) = args.pop() else {
        return Err(h.new_error(0, "missing transform"));
    };
    let filter = if args.len() == 3 { args.pop() } else { None };
    args.clear();
    let accu = ident(h, RESULT);
    let (init, step) = match t {
        Transform::List => {
            let init = h.next_expr(Expr::List(ListExpr::new(Vec::new())));
            let item = h.next_expr(Expr::List(ListExpr::new(vec![expr])));
            (init, call(h, operators::ADD, vec![accu, item]))
        }
        Transform::Map => {
            let init = h.next_expr(Expr::Map(MapExpr::default()));
            let key = ident(h, &k);
            (init, call(h, MAP_INSERT, vec![accu, key, expr]))
        }
        Transform::MapEntry => {
            let init = h.next_expr(Expr::Map(MapExpr::default()));
            (init, call(h, MAP_INSERT, vec![accu, expr]))
        }
    };
    let step = match filter {
        Some(filter) => {
            let same = ident(h, RESULT);
            call(h, operators::CONDITIONAL, vec![filter, step, same])
        }
        None => step,
    };
    let cond = literal(h, LiteralValue::Boolean(true.into()));
    let result = ident(h, RESULT);
    Ok(Some(comprehension(
        h, range, k, v, init, cond, step, result,
    )))
}

/// `cel.bind(name, init, body)`; any other `x.bind(..)` is left as the call it is.
fn bind(
    h: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: Args<'_>,
) -> Result<Option<IdedExpr>, ParseError> {
    if !matches!(target.as_ref().map(|t| &t.expr), Some(Expr::Ident(ns)) if ns == "cel") {
        return Ok(None);
    }
    let name = match args.first().map(|a| &a.expr) {
        Some(Expr::Ident(name)) => name.clone(),
        _ => {
            let id = args.first().map_or(0, |a| a.id);
            return Err(h.new_error(id, "cel.bind() variable names must be simple identifiers"));
        }
    };
    let (Some(body), Some(init)) = (args.pop(), args.pop()) else {
        return Err(h.new_error(0, "cel.bind() needs three arguments"));
    };
    args.clear();
    target.take();
    let range = h.next_expr(Expr::List(ListExpr::new(Vec::new())));
    let cond = literal(h, LiteralValue::Boolean(false.into()));
    let step = ident(h, &name);
    Ok(Some(h.next_expr(Expr::Comprehension(Box::new(
        ComprehensionExpr {
            iter_range: range,
            iter_var: "#unused".to_string(),
            iter_var2: None,
            accu_var: name,
            accu_init: init,
            loop_cond: cond,
            loop_step: step,
            result: body,
        },
    )))))
}

/// `math.greatest(..)` or `math.least(..)` (the macro `name`): a call of `function` on the
/// arguments, refused as cel-go refuses them. Any other target is left as the call it is.
fn extreme(
    h: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: Args<'_>,
    name: &str,
    function: &str,
) -> Result<Option<IdedExpr>, ParseError> {
    let Some(target_id) = target
        .as_ref()
        .filter(|t| matches!(&t.expr, Expr::Ident(ns) if ns == "math"))
        .map(|t| t.id)
    else {
        return Ok(None);
    };
    let invalid = match args.as_slice() {
        [] => Some((target_id, "requires at least one argument")),
        [arg] if !is_numeric_list(arg) && !may_be_numeric(arg) => {
            Some((arg.id, "invalid single argument value"))
        }
        [_] => None,
        args => args
            .iter()
            .find(|arg| !may_be_numeric(arg))
            .map(|arg| (arg.id, "simple literal arguments must be numeric")),
    };
    if let Some((id, message)) = invalid {
        return Err(h.new_error(id, format!("math.{name}() {message}")));
    }
    target.take();
    let mut args = std::mem::take(args);
    if args.len() > 2 {
        args = vec![h.next_expr(Expr::List(ListExpr::new(args)))];
    }
    Ok(Some(call(h, function, args)))
}

/// Whether `arg` may be a number, as far as the parser can tell: a numeric literal, or
/// anything but another literal, a list, a map or a message literal.
fn may_be_numeric(arg: &IdedExpr) -> bool {
    match &arg.expr {
        Expr::Literal(literal) => matches!(
            literal,
            LiteralValue::Int(_) | LiteralValue::UInt(_) | LiteralValue::Double(_)
        ),
        Expr::List(_) | Expr::Map(_) | Expr::Struct(_) => false,
        _ => true,
    }
}

/// Whether `arg` is a list literal, not empty, of what may be numbers.
fn is_numeric_list(arg: &IdedExpr) -> bool {
    matches!(&arg.expr, Expr::List(list)
        if !list.elements.is_empty() && list.elements.iter().all(may_be_numeric))
}
