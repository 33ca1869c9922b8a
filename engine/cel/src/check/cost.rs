//! The worst-case cost of an expression, from the size bounds of its variables: the static
//! counterpart of [`crate::Program::eval_with_cost`], after Kubernetes' estimate of the cost
//! of CRD validation rules (cel-go's `checker/cost.go` over the types of
//! `k8s.io/apiserver/pkg/cel/common`).
//!
//! The expression is lowered into the evaluator's plan again (constants folded, macros
//! turned into loops, as [`crate::Env::compile`] does), and the plan is walked with an
//! abstract value for every node: its [`Type`], and a bound of its size. Every node is
//! charged what the evaluator charges it, at the largest sizes its operands can have:
//!
//! - 1 per node evaluated (a qualified name `a.b.c` costs its selections); both operands
//!   of `&&`, `||`, `orValue` and `or`, and the costlier branch of `?:`;
//! - a comprehension costs 1, its range, then per element of the range (at most its bound)
//!   1 and its body (predicate, filter and transform): nested comprehensions multiply;
//! - `contains`, `startsWith`, `endsWith`, `matches`: 1 per 10 bytes of the string they
//!   search (`contains` of its needle too); `==`, `!=` and the orderings: 1 per 10 bytes of
//!   the shorter string, elements of the shorter list, and what comparing the elements
//!   reads; `in` on a list: 1 per 10 elements and the needle compared with each; on a map,
//!   1 per 10 bytes of the key hashed; `+` on strings and bytes: 1 per 10 bytes
//!   of the result, on lists 1 per element of it (each `+` of a chain `a + b + c` its
//!   own); library
//!   functions of linear cost (the strings library, `sha256`, Kubernetes' lists and regex
//!   functions, ...): 1 per 10 bytes, elements or entries of their arguments;
//! - the work that is not linear (`distinct`, `sort`, `sets.*`: pairwise unless the
//!   element type hashes; with the bytes they hash or compare; `min`, `max`, `isSorted`,
//!   `indexOf` with the bytes they compare), the values functions build (1 per 10 bytes,
//!   1 per element), and patterns compiled at evaluation time (a constant one once;
//!   another at each call, at its worst), as `limits.rs` charges them.
//!
//! Sizes flow through the expression: `map` and `filter` give lists no longer than their
//! range (and `map` of the elements its transform gives), concatenation adds sizes,
//! `?:` and `orValue` take the larger, `lowerAscii`, `trim`, `substring`, `split`, `join`,
//! `replace`, `find` and `findAll` bound their results by their arguments', conversions
//! by their argument's type (`string(int)`: 20 bytes), and literals have their own.
//!
//! A value whose size nothing bounds (a list without `maxItems`, a string without
//! `maxLength`, a `dyn` value, a custom function's result) makes the estimate unbounded
//! only when a comprehension iterates over it or a size-dependent operation reads it: a
//! field selected on a `dyn` value costs 1 like any other.

use std::collections::HashMap;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::rc::Rc;
use std::sync::{Arc, LazyLock};

use cel::common::ast::{EntryExpr, Expr, IdedEntryExpr, IdedExpr, SourceInfo};

use super::decls::{Arg, DECLARATIONS, merge, resolve};
use super::parse::{PARSER, outside_literals};
use super::type_env::TypeEnv;
use super::types::{Bounds, ObjectType, Type};
use crate::env::Program;
use crate::error::position_of_byte;
use crate::plan::{AddChain, Builtin, Call, Fold, Kind, Loop, LoopKind, Lowering, Node, Op};
use crate::registry::{Cost as Charge, Registry};
use crate::value::Value;

/// The worst-case cost of an expression, in the units of
/// [`crate::Program::eval_with_cost`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CostEstimate {
    /// No evaluation costs more than this (saturating at `u64::MAX`).
    Bounded(u64),
    /// Nothing bounds the cost: `reason` says which value's size is not bounded (``
    /// `self.spec.items` has no maxItems ``), and where that value is in the expression
    /// (1-based line and column in characters, as [`super::TypeIssue`]'s).
    Unbounded {
        reason: String,
        line: usize,
        column: usize,
    },
}

impl CostEstimate {
    /// Whether some evaluation may cost more than `limit`: the estimate is above it, or
    /// unbounded.
    pub fn exceeds(&self, limit: u64) -> bool {
        match self {
            CostEstimate::Bounded(cost) => *cost > limit,
            CostEstimate::Unbounded { .. } => true,
        }
    }
}

/// `1234`, or `unbounded: <reason> (at line:column)`.
impl fmt::Display for CostEstimate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CostEstimate::Bounded(cost) => write!(f, "{cost}"),
            CostEstimate::Unbounded {
                reason,
                line,
                column,
            } => write!(f, "unbounded: {reason} (at {line}:{column})"),
        }
    }
}

/// What [`estimate`] finds: the worst-case cost, and the size bounds of the result (of a
/// variable's expression, say, for the expressions that read the variable: see
/// [`super::ObjectType::with_bounded_field`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Estimate {
    pub cost: CostEstimate,
    pub result: Bounds,
}

/// The worst-case cost of evaluating `program` with variables of the types and size bounds
/// of `env` (see the module documentation for the rules): [`CostEstimate::Unbounded`] when a
/// comprehension iterates over, or a size-dependent operation reads, a value whose size
/// nothing bounds, naming the first such value.
pub fn estimate_cost(program: &Program, env: &TypeEnv) -> CostEstimate {
    estimate(program, env).cost
}

/// [`estimate_cost`], with the size bounds of the result.
pub fn estimate(program: &Program, env: &TypeEnv) -> Estimate {
    estimate_source(program.source(), env)
}

/// The registry of [`crate::Env::kubernetes`]: only the call styles, arities and cost kinds
/// of its overloads matter here.
static REGISTRY: LazyLock<Registry> = LazyLock::new(crate::builtins::builtin_registry);

/// The parser recurses deeply (see `Env::compile`): parsing, lowering and the walk run on
/// a stack of their own.
const STACK: usize = 256 * 1024 * 1024;

fn estimate_source(source: &str, env: &TypeEnv) -> Estimate {
    let run = || {
        stacker::grow(STACK, || {
            let parser = PARSER.as_ref()?;
            let (expression, info) = parser
                .parser()
                .enable_ident_escape_syntax(true)
                .parse_with_source_info(source)
                .ok()?;
            // Custom functions cost what undeclared ones do (1 and their arguments): only
            // their names matter to the lowering.
            let custom: Vec<(String, crate::registry::CustomFunction)> = env
                .functions
                .iter()
                .map(|name| {
                    let function: crate::registry::CustomFunction =
                        Arc::new(|_: &[serde_json::Value]| Ok(serde_json::Value::Null));
                    (name.clone(), function)
                })
                .collect();
            let plan = Lowering::new(&REGISTRY, &custom).plan(&expression);
            let mut nodes = HashMap::new();
            index_nodes(&expression, &mut nodes);
            let mut walker = Walker {
                source,
                info: &info,
                nodes,
                env,
                scopes: Vec::new(),
                folds: 0,
                patterns: HashMap::new(),
            };
            let (cost, shape) = walker.node(&plan.root);
            let cost = cost.plus_n(walker.patterns.values().sum());
            let cost = match cost {
                Cost::Max(n) => CostEstimate::Bounded(n),
                Cost::Unbounded(why) => {
                    let (line, column) = position_of_byte(source, why.at);
                    CostEstimate::Unbounded {
                        reason: why.message.to_string(),
                        line,
                        column,
                    }
                }
            };
            Some(Estimate {
                cost,
                result: shape.bounds(),
            })
        })
    };
    match catch_unwind(AssertUnwindSafe(run)) {
        Ok(Some(estimate)) => estimate,
        // A program that compiled parses: this is a bug, reported as unbounded rather
        // than as a figure nobody checked.
        _ => Estimate {
            cost: CostEstimate::Unbounded {
                reason: "the expression could not be analysed".to_string(),
                line: 1,
                column: 1,
            },
            result: Bounds::default(),
        },
    }
}

fn index_nodes<'a>(e: &'a IdedExpr, nodes: &mut HashMap<u64, &'a IdedExpr>) {
    nodes.insert(e.id, e);
    for child in children(e) {
        index_nodes(child, nodes);
    }
}

fn children(e: &IdedExpr) -> Vec<&IdedExpr> {
    match &e.expr {
        Expr::Select(select) => vec![&select.operand],
        Expr::Call(call) => call
            .target
            .as_deref()
            .into_iter()
            .chain(&call.args)
            .collect(),
        Expr::List(list) => list.elements.iter().collect(),
        Expr::Map(map) => entry_children(&map.entries),
        Expr::Struct(message) => entry_children(&message.entries),
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        Expr::Unspecified | Expr::Literal(_) | Expr::Ident(_) => Vec::new(),
    }
}

/// The keys and values of a map literal, or the values of a message literal.
fn entry_children(entries: &[IdedEntryExpr]) -> Vec<&IdedExpr> {
    entries
        .iter()
        .flat_map(|entry| match &entry.expr {
            EntryExpr::MapEntry(entry) => vec![&entry.key, &entry.value],
            EntryExpr::StructField(field) => vec![&field.value],
        })
        .collect()
}

// ---- costs and sizes ----------------------------------------------------------------------

/// Why a size is not bounded, and where the value is (a byte offset in the source).
#[derive(Debug, Clone)]
struct Why {
    message: Rc<str>,
    at: usize,
    /// What the value lacks, to say it again of another expression reading the value.
    lacks: Lacks,
}

#[derive(Debug, Clone, Copy)]
enum Lacks {
    /// A schema keyword (`maxLength`, ...).
    Bound(&'static str),
    /// Any bound: the value is `dyn`.
    Type,
    /// `maxProperties`, on an object keeping unknown fields.
    OpenObject,
    Other,
}

impl Why {
    fn new(message: String, at: usize) -> Why {
        Why {
            message: message.into(),
            at,
            lacks: Lacks::Other,
        }
    }

    /// Why a value named `label` at `at` lacks what this value lacks.
    fn of(&self, label: &Label, at: usize) -> Why {
        let message = match self.lacks {
            Lacks::Bound(bound) => label.lacks(bound),
            Lacks::Type => label.is_dyn(),
            Lacks::OpenObject => label.keeps_unknown_fields(),
            Lacks::Other => return self.clone(),
        };
        Why {
            message: message.into(),
            at,
            lacks: self.lacks,
        }
    }
}

/// A cost so far: a bound, or the first reason there is none.
#[derive(Debug, Clone)]
enum Cost {
    Max(u64),
    Unbounded(Why),
}

impl Cost {
    fn plus(self, other: Cost) -> Cost {
        match (self, other) {
            (Cost::Max(a), Cost::Max(b)) => Cost::Max(a.saturating_add(b)),
            (Cost::Unbounded(why), _) | (_, Cost::Unbounded(why)) => Cost::Unbounded(why),
        }
    }

    fn plus_n(self, n: u64) -> Cost {
        self.plus(Cost::Max(n))
    }

    /// The cost of `times` evaluations of something costing `self` (nothing for none).
    fn times(self, times: &Size) -> Cost {
        match (times, self) {
            (Ok(0), _) => Cost::Max(0),
            (Err(why), _) => Cost::Unbounded(why.clone()),
            (Ok(n), Cost::Max(each)) => Cost::Max(each.saturating_mul(*n)),
            (Ok(_), unbounded) => unbounded,
        }
    }

    /// `self` times `each`: `n` comparisons each costing `each`.
    fn times_cost(self, each: Cost) -> Cost {
        match (self, each) {
            (Cost::Max(0), _) => Cost::Max(0),
            (Cost::Max(n), Cost::Max(e)) => Cost::Max(n.saturating_mul(e)),
            (Cost::Unbounded(why), _) | (_, Cost::Unbounded(why)) => Cost::Unbounded(why),
        }
    }

    /// The larger of two costs (of the branches of `?:`).
    fn max(self, other: Cost) -> Cost {
        match (self, other) {
            (Cost::Max(a), Cost::Max(b)) => Cost::Max(a.max(b)),
            (Cost::Unbounded(why), _) | (_, Cost::Unbounded(why)) => Cost::Unbounded(why),
        }
    }

    /// 1 per 10 bytes, elements or entries of a value of size `size`.
    fn per_ten(size: &Size) -> Cost {
        match size {
            Ok(n) => Cost::Max(n / 10),
            Err(why) => Cost::Unbounded(why.clone()),
        }
    }

    /// `f` of a size, when it has a bound.
    fn of(size: &Size, f: impl FnOnce(u64) -> u64) -> Cost {
        match size {
            Ok(n) => Cost::Max(f(*n)),
            Err(why) => Cost::Unbounded(why.clone()),
        }
    }

    /// What creating a value of this shape costs (`limits::creation_cost`): 1 per 10 bytes
    /// of a string or bytes, 1 per element or entry of a list or map (and of a value of
    /// unknown type: the larger).
    fn creation(shape: &Shape) -> Cost {
        if shape.is_unsized() {
            return Cost::Max(0);
        }
        match shape.ty {
            Type::String | Type::Bytes => Cost::per_ten(&shape.len),
            _ => Cost::of(&shape.len, |n| n),
        }
    }
}

/// The bound of a size, or why there is none.
type Size = Result<u64, Why>;

fn size_max(a: &Size, b: &Size) -> Size {
    match (a, b) {
        (Ok(a), Ok(b)) => Ok(*a.max(b)),
        (Err(why), _) | (_, Err(why)) => Err(why.clone()),
    }
}

fn size_sum(a: &Size, b: &Size) -> Size {
    match (a, b) {
        (Ok(a), Ok(b)) => Ok(a.saturating_add(*b)),
        (Err(why), _) | (_, Err(why)) => Err(why.clone()),
    }
}

fn size_product(a: &Size, b: &Size) -> Size {
    match (a, b) {
        (Ok(a), Ok(b)) => Ok(a.saturating_mul(*b)),
        (Err(why), _) | (_, Err(why)) => Err(why.clone()),
    }
}

/// The smaller of two size bounds: bounded when either is.
fn size_min(a: &Size, b: &Size) -> Size {
    match (a, b) {
        (Ok(x), Ok(y)) => Ok(*x.min(y)),
        (Ok(x), Err(_)) | (Err(_), Ok(x)) => Ok(*x),
        (Err(why), Err(_)) => Err(why.clone()),
    }
}

/// A bound of `limits::equality_work` (bytes and elements read) for values of shapes `a`
/// and `b`: the shorter of two strings or bytes; for lists and maps, 1 per element of the
/// shorter and what comparing the elements (and hashing the keys) reads. Objects are
/// compared as cel-go charges them, 1 per field of the smaller: the estimate knows no
/// common shape of their values.
fn equality_work(a: &Shape, b: &Shape) -> Size {
    if a.never || b.never {
        return Ok(0);
    }
    if let (Type::Optional(_), Type::Optional(_)) = (&a.ty, &b.ty) {
        return equality_work(&a.elem(), &b.elem());
    }
    if a.is_unsized() || b.is_unsized() {
        return Ok(0);
    }
    let shorter = size_min(&a.len, &b.len);
    let is_map = |s: &Shape| matches!(s.ty, Type::Map(..));
    let deep = |s: &Shape| matches!(s.ty, Type::List(_)) || is_map(s);
    if !(deep(a) || deep(b)) {
        return shorter;
    }
    let mut each = size_sum(&Ok(1), &equality_work(&a.elem(), &b.elem()));
    if is_map(a) || is_map(b) {
        // The keys of `a` are hashed to be looked up in `b`.
        let key = a.key().charged_size();
        each = size_sum(&each, &key);
    }
    size_product(&shorter, &each)
}

/// What the walk knows of a value: its type, and the bound of its size (bytes of a string
/// or bytes, elements of a list, entries of a map or object; 0 for a value the evaluator
/// does not charge by size), with those of its elements and keys.
#[derive(Debug, Clone)]
struct Shape {
    ty: Type,
    len: Size,
    /// A list's elements, a map's values, an optional's value. `None` when unknown (a
    /// `dyn` value's): see [`Shape::elem`].
    elem: Option<Rc<Shape>>,
    /// A map's (or an object's) keys.
    key: Option<Rc<Shape>>,
    /// No value at all: the element of an empty list, the value of `optional.none()`.
    never: bool,
}

impl Shape {
    fn scalar(ty: Type) -> Shape {
        Shape {
            ty,
            len: Ok(0),
            elem: None,
            key: None,
            never: false,
        }
    }

    fn never() -> Shape {
        Shape {
            never: true,
            ..Shape::scalar(Type::Dyn)
        }
    }

    fn unknown(ty: Type, why: Why) -> Shape {
        Shape {
            ty,
            len: Err(why),
            elem: None,
            key: None,
            never: false,
        }
    }

    fn string(len: Size) -> Shape {
        Shape {
            len,
            ..Shape::scalar(Type::String)
        }
    }

    fn list(len: Size, elem: Shape) -> Shape {
        Shape {
            ty: Type::list(elem.ty.clone()),
            len,
            elem: Some(Rc::new(elem)),
            key: None,
            never: false,
        }
    }

    fn map(len: Size, key: Shape, value: Shape) -> Shape {
        Shape {
            ty: Type::map(key.ty.clone(), value.ty.clone()),
            len,
            elem: Some(Rc::new(value)),
            key: Some(Rc::new(key)),
            never: false,
        }
    }

    fn optional(value: Shape) -> Shape {
        Shape {
            ty: Type::optional(value.ty.clone()),
            len: Ok(0),
            elem: Some(Rc::new(value)),
            key: None,
            never: false,
        }
    }

    /// Why the elements or keys of this value have no known size: its own reason (a `dyn`
    /// value's elements are unknown for the same reason it is).
    fn why(&self) -> Why {
        match &self.len {
            Err(why) => why.clone(),
            Ok(_) => Why::new("a value of unknown size".to_string(), 0),
        }
    }

    fn elem(&self) -> Shape {
        match &self.elem {
            Some(elem) => (**elem).clone(),
            None => Shape::unknown(Type::Dyn, self.why()),
        }
    }

    fn key(&self) -> Shape {
        match &self.key {
            Some(key) => (**key).clone(),
            None => Shape::unknown(Type::Dyn, self.why()),
        }
    }

    /// Whether the evaluator never charges this value by size: not a string, bytes, list
    /// or map (an object is a map at run time), nor possibly one (`dyn`).
    fn is_unsized(&self) -> bool {
        self.never
            || !matches!(
                self.ty,
                Type::String
                    | Type::Bytes
                    | Type::List(_)
                    | Type::Map(..)
                    | Type::Object(_)
                    | Type::Dyn
                    | Type::Error
            )
    }

    /// The size the evaluator charges by (`size_cost`): 0 for an unsized value.
    fn charged_size(&self) -> Size {
        if self.is_unsized() {
            Ok(0)
        } else {
            self.len.clone()
        }
    }

    /// The value of an optional, or the value itself.
    fn unwrap_optional(&self) -> Shape {
        match self.ty {
            Type::Optional(_) => self.elem(),
            _ => self.clone(),
        }
    }

    /// The size bounds of the value (an optional's are its value's).
    fn bounds(&self) -> Bounds {
        if let Type::Optional(_) = self.ty {
            return self.elem().bounds();
        }
        if self.never || self.is_unsized() {
            return Bounds::default();
        }
        let mut bounds = Bounds {
            max: self.len.as_ref().ok().copied(),
            ..Bounds::default()
        };
        if let Some(elem) = &self.elem {
            bounds = bounds.with_elements(elem.bounds());
        }
        if let Some(key) = &self.key {
            bounds = bounds.with_keys(key.bounds());
        }
        bounds
    }
}

/// The shape of a value that is `a` or `b`: the larger sizes.
fn join(a: &Shape, b: &Shape) -> Shape {
    if a.never {
        return b.clone();
    }
    if b.never {
        return a.clone();
    }
    let part = |x: &Option<Rc<Shape>>, x_shape: &Shape, y: &Option<Rc<Shape>>, y_shape: &Shape| {
        match (x, y) {
            (None, None) => None,
            (Some(x), Some(y)) => Some(Rc::new(join(x, y))),
            // A scalar has no elements: the other side's are all there are.
            (Some(x), None) if y_shape.is_unsized() => Some(Rc::clone(x)),
            (None, Some(y)) if x_shape.is_unsized() => Some(Rc::clone(y)),
            (Some(x), None) => Some(Rc::new(join(x, &Shape::unknown(Type::Dyn, y_shape.why())))),
            (None, Some(y)) => Some(Rc::new(join(&Shape::unknown(Type::Dyn, x_shape.why()), y))),
        }
    };
    Shape {
        ty: merge(&a.ty, &b.ty),
        len: size_max(&a.len, &b.len),
        elem: part(&a.elem, a, &b.elem, b),
        key: part(&a.key, a, &b.key, b),
        never: false,
    }
}

/// What a value is called in the reasons: an expression of the source, or a part of one.
#[derive(Debug, Clone)]
enum Label {
    /// The expression's text.
    Expr(String),
    /// `the elements of`, ...: the part, and the text of the whole.
    Part(String, String),
}

impl Label {
    fn lacks(&self, bound: &str) -> String {
        match self {
            Label::Expr(text) => format!("`{text}` has no {bound}"),
            Label::Part(part, text) => format!("{part} `{text}` have no {bound}"),
        }
    }

    fn is_dyn(&self) -> String {
        match self {
            Label::Expr(text) => format!("`{text}` is dyn: its size is unknown"),
            Label::Part(part, text) => format!("{part} `{text}` are dyn: their size is unknown"),
        }
    }

    fn keeps_unknown_fields(&self) -> String {
        match self {
            Label::Expr(text) => {
                format!("`{text}` keeps unknown fields and has no maxProperties")
            }
            Label::Part(part, text) => {
                format!("{part} `{text}` keep unknown fields and have no maxProperties")
            }
        }
    }

    /// `the elements of`, `the values of`, `the keys of` this.
    fn part(&self, name: &str) -> Label {
        match self {
            Label::Expr(text) => Label::Part(format!("the {name} of"), text.clone()),
            Label::Part(part, text) => Label::Part(
                format!("the {name} of {}", part.trim_start_matches("the ")),
                text.clone(),
            ),
        }
    }
}

/// The largest request body the API server accepts (3 MiB): no string of an object is longer.
const MAX_REQUEST_BYTES: u64 = 3 * 1024 * 1024;

/// The shape of a value of type `ty` with the size bounds `bounds`, named `label`, at `at`.
fn from_type(ty: &Type, bounds: Option<&Bounds>, label: &Label, at: usize) -> Shape {
    let max = bounds.and_then(|b| b.max);
    let elements = bounds.and_then(|b| b.elements.as_deref());
    let keys = bounds.and_then(|b| b.keys.as_deref());
    let missing = |bound: &'static str| Why {
        lacks: Lacks::Bound(bound),
        ..Why::new(label.lacks(bound), at)
    };
    match ty {
        Type::String | Type::Bytes => Shape {
            len: max.ok_or_else(|| missing("maxLength")),
            ..Shape::scalar(ty.clone())
        },
        Type::List(element) => Shape {
            ty: ty.clone(),
            len: max.ok_or_else(|| missing("maxItems")),
            elem: Some(Rc::new(from_type(
                element,
                elements,
                &label.part("elements"),
                at,
            ))),
            key: None,
            never: false,
        },
        Type::Map(key, value) => Shape {
            ty: ty.clone(),
            len: max.ok_or_else(|| missing("maxProperties")),
            elem: Some(Rc::new(from_type(
                value,
                elements,
                &label.part("values"),
                at,
            ))),
            key: Some(Rc::new(match keys {
                Some(keys) => from_type(key, Some(keys), &label.part("keys"), at),
                // A schema cannot bound a map's keys: like Kubernetes' estimator, take the
                // largest request the API server accepts, rather than warn about what no
                // pack or CRD author can state.
                None if **key == Type::String => Shape::string(Ok(MAX_REQUEST_BYTES)),
                None => from_type(key, None, &label.part("keys"), at),
            })),
            never: false,
        },
        Type::Object(object) => object_shape(ty, object, max, label, at),
        Type::Optional(value) => Shape::optional(from_type(value, bounds, label, at)),
        Type::Dyn | Type::Error => {
            let why = Why {
                lacks: Lacks::Type,
                ..Why::new(label.is_dyn(), at)
            };
            let mut shape = Shape::unknown(Type::Dyn, why);
            if let Some(max) = max {
                shape.len = Ok(max);
            }
            if let Some(elements) = elements {
                let elem = from_type(&Type::Dyn, Some(elements), &label.part("elements"), at);
                shape.elem = Some(Rc::new(elem));
            }
            if let Some(keys) = keys {
                let key = from_type(&Type::Dyn, Some(keys), &label.part("keys"), at);
                shape.key = Some(Rc::new(key));
            }
            shape
        }
        _ => Shape::scalar(ty.clone()),
    }
}

/// An object is a map at run time: of its declared fields (when it keeps no others), whose
/// names are its keys.
fn object_shape(
    ty: &Type,
    object: &ObjectType,
    max: Option<u64>,
    label: &Label,
    at: usize,
) -> Shape {
    let (len, key) = if object.open {
        let why = Why {
            lacks: Lacks::OpenObject,
            ..Why::new(label.keeps_unknown_fields(), at)
        };
        let key_why = Why {
            lacks: Lacks::Bound("maxLength"),
            ..Why::new(label.part("keys").lacks("maxLength"), at)
        };
        (max.ok_or(why), Shape::unknown(Type::String, key_why))
    } else {
        let fields = object.fields.len() as u64;
        let longest = object
            .fields
            .keys()
            .map(|k| k.len() as u64)
            .max()
            .unwrap_or(0);
        (
            Ok(max.map_or(fields, |m| m.min(fields))),
            Shape::string(Ok(longest)),
        )
    };
    let values = Why {
        lacks: Lacks::Type,
        ..Why::new(label.part("values").is_dyn(), at)
    };
    Shape {
        ty: ty.clone(),
        len,
        elem: Some(Rc::new(Shape::unknown(Type::Dyn, values))),
        key: Some(Rc::new(key)),
        never: false,
    }
}

/// The shape of a constant.
fn of_value(v: &Value) -> Shape {
    match v {
        Value::Null => Shape::scalar(Type::Null),
        Value::Bool(_) => Shape::scalar(Type::Bool),
        Value::Int(_) => Shape::scalar(Type::Int),
        Value::Uint(_) => Shape::scalar(Type::Uint),
        Value::Double(_) => Shape::scalar(Type::Double),
        Value::String(s) => Shape::string(Ok(s.len() as u64)),
        Value::Bytes(b) => Shape {
            len: Ok(b.len() as u64),
            ..Shape::scalar(Type::Bytes)
        },
        Value::List(items) => {
            let elem = items.iter().fold(Shape::never(), |joined, item| {
                join(&joined, &of_value(item))
            });
            Shape::list(Ok(items.len() as u64), elem)
        }
        Value::Map(m) => {
            let key = m
                .keys()
                .iter()
                .fold(Shape::never(), |joined, k| join(&joined, &of_value(k)));
            let value = m
                .iter()
                .fold(Shape::never(), |joined, (_, v)| join(&joined, &of_value(v)));
            Shape::map(Ok(m.len() as u64), key, value)
        }
        Value::Timestamp(_) => Shape::scalar(Type::Timestamp),
        Value::Duration(_) => Shape::scalar(Type::Duration),
        Value::Type(_) => Shape::scalar(Type::Type),
        Value::Optional(value) => Shape::optional(match value {
            Some(value) => of_value(value),
            None => Shape::never(),
        }),
        // A library value (quantity, IP, ...): never charged by size.
        Value::Opaque(_) => Shape::scalar(Type::Dyn),
    }
}

/// The most bytes `string(x)` gives for an `x` of this shape.
fn string_of(arg: &Shape, why: Why) -> Shape {
    let len = match &arg.ty {
        Type::String | Type::Bytes => arg.len.clone(),
        // i64::MIN, u64::MAX: 20 digits or sign and 19.
        Type::Int | Type::Uint => Ok(20),
        Type::Bool => Ok(5),
        // Every digit of a double (`-4.9e-324` in full is 326 bytes).
        Type::Double => Ok(330),
        // RFC 3339 with nanoseconds: `9999-12-31T23:59:59.999999999Z`.
        Type::Timestamp => Ok(30),
        // `-315576000000.999999999s` is 24 bytes; 32 leaves room for any chrono duration's
        // seconds.
        Type::Duration => Ok(32),
        _ => Err(why),
    };
    Shape::string(len)
}

// ---- the walk -----------------------------------------------------------------------------

struct Walker<'a> {
    source: &'a str,
    info: &'a SourceInfo,
    /// The AST nodes by id, for the text of the expression a plan node comes from.
    nodes: HashMap<u64, &'a IdedExpr>,
    env: &'a TypeEnv,
    /// The shapes of the variables of the enclosing loops, folds and binds (innermost
    /// last), in the evaluator's slots.
    scopes: Vec<[Option<Shape>; 3]>,
    /// Generic comprehensions whose step is being tried (see [`Walker::fold`]).
    folds: usize,
    /// The constant regular expressions compiled at evaluation time, with what compiling
    /// each costs: charged once per evaluation (see [`Walker::pattern`]).
    patterns: HashMap<String, u64>,
}

/// How many generic comprehensions deep a step is walked twice (each doubles the walk).
const MAX_TRIED_FOLDS: usize = 4;

impl Walker<'_> {
    /// The cost of evaluating `node` once at worst, and the shape of its value.
    fn node(&mut self, node: &Node) -> (Cost, Shape) {
        let id = node.id;
        match &node.kind {
            Kind::Const(v) => (Cost::Max(1), of_value(v)),
            Kind::Global(name, _) => {
                let ty = self.env.variable(name).cloned().unwrap_or(Type::Dyn);
                let bounds = self.env.variable_bounds(name);
                let at = self.start(id);
                let shape = from_type(&ty, bounds, &Label::Expr(name.to_string()), at);
                (Cost::Max(1), shape)
            }
            Kind::Local { up, slot } => {
                let up = usize::try_from(*up).unwrap_or(usize::MAX);
                let shape = self
                    .scopes
                    .len()
                    .checked_sub(up.saturating_add(1))
                    .and_then(|i| self.scopes.get(i))
                    .and_then(|scope| scope.get(usize::from(*slot)))
                    .and_then(Clone::clone)
                    .unwrap_or_else(|| self.unknown(id));
                (Cost::Max(1), shape)
            }
            Kind::Select(operand, field, _) => {
                let (cost, operand) = self.node(operand);
                let shape = self.select(&operand, field, id);
                (cost.plus_n(1), shape)
            }
            // Not charged itself: the selections it wraps are.
            Kind::Qualified(q) => self.node(&q.chain),
            Kind::Has(operand, _) => {
                let (cost, _) = self.node(operand);
                (cost.plus_n(1), Shape::scalar(Type::Bool))
            }
            Kind::OptSelect(operand, field) => {
                let (cost, operand) = self.node(operand);
                let field = self.select(&operand.unwrap_optional(), field, id);
                (cost.plus_n(1), Shape::optional(field.unwrap_optional()))
            }
            Kind::Index(operand, key) | Kind::OptIndex(operand, key) => {
                let optional = matches!(node.kind, Kind::OptIndex(..));
                let (a, target) = self.node(operand);
                let (b, _) = self.node(key);
                let cost = Cost::Max(1).plus(a).plus(b);
                let in_optional = matches!(target.ty, Type::Optional(_));
                let value = self.index(&target.unwrap_optional(), key, id);
                let shape = if optional || in_optional {
                    Shape::optional(value)
                } else {
                    value
                };
                (cost, shape)
            }
            Kind::Not(a) | Kind::NotStrictlyFalse(a) => {
                let (cost, _) = self.node(a);
                (cost.plus_n(1), Shape::scalar(Type::Bool))
            }
            Kind::Neg(a) => {
                let (cost, shape) = self.node(a);
                (cost.plus_n(1), Shape::scalar(shape.ty))
            }
            Kind::And(a, b) | Kind::Or(a, b) => {
                let (a, _) = self.node(a);
                let (b, _) = self.node(b);
                (Cost::Max(1).plus(a).plus(b), Shape::scalar(Type::Bool))
            }
            Kind::Cond(parts) => {
                let (c, t, f) = &**parts;
                let (c, _) = self.node(c);
                let (t_cost, t) = self.node(t);
                let (f_cost, f) = self.node(f);
                (Cost::Max(1).plus(c).plus(t_cost.max(f_cost)), join(&t, &f))
            }
            Kind::Bin(op, a, b) => {
                let (a_cost, a) = self.node(a);
                let (b_cost, b) = self.node(b);
                let (charge, shape) = binary(*op, &a, &b);
                (Cost::Max(1).plus(a_cost).plus(b_cost).plus(charge), shape)
            }
            Kind::AddChain(chain) => self.add_chain(chain),
            Kind::Fail(_) => (Cost::Max(1), Shape::never()),
            Kind::List(items, optional) => {
                let mut cost = Cost::Max(1);
                let mut elem = Shape::never();
                for (item, optional) in items.iter().zip(optional) {
                    let (c, shape) = self.node(item);
                    cost = cost.plus(c);
                    let shape = if *optional { shape.elem() } else { shape };
                    elem = join(&elem, &shape);
                }
                (cost, Shape::list(Ok(items.len() as u64), elem))
            }
            Kind::Map(entries) => {
                let mut cost = Cost::Max(1);
                let (mut keys, mut values) = (Shape::never(), Shape::never());
                for (k, v, optional) in entries {
                    let (k_cost, k) = self.node(k);
                    let (v_cost, v) = self.node(v);
                    cost = cost.plus(k_cost).plus(v_cost);
                    keys = join(&keys, &k);
                    let v = if *optional { v.elem() } else { v };
                    values = join(&values, &v);
                }
                (cost, Shape::map(Ok(entries.len() as u64), keys, values))
            }
            Kind::Builtin(builtin, args) => self.builtin(id, builtin, args),
            Kind::Call(call) => self.call(id, call),
            Kind::Custom(call) => {
                let mut cost = Cost::Max(1);
                for arg in &call.args {
                    cost = cost.plus(self.node(arg).0);
                }
                (cost, self.unknown_result(id))
            }
            Kind::Loop(l) => self.run_loop(l),
            Kind::Fold(f) => self.fold(id, f),
            Kind::Bind(bind) => {
                let (init_cost, init) = self.node(&bind.0);
                self.scopes.push([Some(init), None, None]);
                let (body_cost, body) = self.node(&bind.1);
                self.scopes.pop();
                (Cost::Max(1).plus(init_cost).plus(body_cost), body)
            }
        }
    }

    /// `operand.field` (not optional).
    fn select(&self, operand: &Shape, field: &str, id: u64) -> Shape {
        match &operand.ty {
            Type::Optional(_) => {
                Shape::optional(self.select(&operand.elem(), field, id).unwrap_optional())
            }
            Type::Object(object) => {
                let ty = object.fields.get(field).unwrap_or(&Type::Dyn);
                let label = Label::Expr(self.text(id));
                from_type(ty, object.field_bounds(field), &label, self.start(id))
            }
            Type::Map(..) => self.named(operand.elem(), id),
            _ if operand.never => Shape::never(),
            _ => match &operand.elem {
                // A map (or a value that is one of several maps) under another type.
                Some(elem) if operand.key.is_some() => self.named((**elem).clone(), id),
                _ => self.unknown(id),
            },
        }
    }

    /// An element or a value read by node `id`: what its size lacks is said of the node's
    /// expression (`` `m['k']` has no maxLength `` rather than of the values of `m`).
    fn named(&self, mut shape: Shape, id: u64) -> Shape {
        if let Err(why) = &shape.len {
            shape.len = Err(why.of(&Label::Expr(self.text(id)), self.start(id)));
        }
        shape
    }

    /// `target[key]`.
    fn index(&self, target: &Shape, key: &Node, id: u64) -> Shape {
        match &target.ty {
            Type::List(_) | Type::Map(..) => self.named(target.elem(), id),
            Type::Object(_) => match &key.kind {
                Kind::Const(Value::String(field)) => self.select(target, field, id),
                _ => self.named(target.elem(), id),
            },
            _ if target.never => Shape::never(),
            _ => match &target.elem {
                Some(elem) => self.named((**elem).clone(), id),
                None => self.unknown(id),
            },
        }
    }

    /// A `dyn` value of node `id`, of unknown size.
    fn unknown(&self, id: u64) -> Shape {
        from_type(
            &Type::Dyn,
            None,
            &Label::Expr(self.text(id)),
            self.start(id),
        )
    }

    /// The result of a function whose size the walk does not know.
    fn unknown_result(&self, id: u64) -> Shape {
        let why = Why::new(
            format!("the size of the result of `{}` is unknown", self.text(id)),
            self.start(id),
        );
        Shape::unknown(Type::Dyn, why)
    }

    /// `a + b + c ...`: as the `+`s one after the other.
    fn add_chain(&mut self, chain: &AddChain) -> (Cost, Shape) {
        // The chain's node and one for each `+` but the first.
        let mut cost = Cost::Max(chain.ops.len().max(1) as u64);
        let mut operands = chain.operands.iter();
        let Some(first) = operands.next() else {
            return (cost, Shape::scalar(Type::Null));
        };
        let (first_cost, mut acc) = self.node(first);
        cost = cost.plus(first_cost);
        for operand in operands {
            let (c, shape) = self.node(operand);
            let (charge, sum) = binary(Op::Add, &acc, &shape);
            cost = cost.plus(c).plus(charge);
            acc = sum;
        }
        (cost, acc)
    }

    fn builtin(&mut self, id: u64, builtin: &Builtin, args: &[Node]) -> (Cost, Shape) {
        let mut cost = Cost::Max(1);
        let mut shapes = Vec::with_capacity(args.len());
        for arg in args {
            let (c, shape) = self.node(arg);
            cost = cost.plus(c);
            shapes.push(shape);
        }
        let arg = |i: usize| shapes.get(i).cloned().unwrap_or_else(Shape::never);
        let shape = match builtin {
            Builtin::Size => Shape::scalar(Type::Int),
            Builtin::Contains | Builtin::StartsWith | Builtin::EndsWith | Builtin::Matches(_) => {
                // The string searched (the receiver; the first argument of `matches(s, p)`).
                let searched = arg(0);
                if matches!(searched.ty, Type::String | Type::Dyn | Type::Error) {
                    cost = cost.plus(Cost::per_ten(&searched.charged_size()));
                }
                // `contains` reads its needle too.
                if let Builtin::Contains = builtin {
                    let needle = arg(1);
                    if matches!(needle.ty, Type::String | Type::Dyn | Type::Error) {
                        cost = cost.plus(Cost::per_ten(&needle.charged_size()));
                    }
                }
                if let Builtin::Matches(None) = builtin {
                    // A pattern compiled at evaluation time (see `limits::compile_regex`).
                    cost = cost.plus(self.pattern(args.get(1), &arg(1), crate::k8s::pattern_cost));
                }
                Shape::scalar(Type::Bool)
            }
            Builtin::ToInt => Shape::scalar(Type::Int),
            Builtin::ToUint => Shape::scalar(Type::Uint),
            Builtin::ToDouble => Shape::scalar(Type::Double),
            Builtin::ToBool | Builtin::HasValue => Shape::scalar(Type::Bool),
            Builtin::TypeOf => Shape::scalar(Type::Type),
            Builtin::ToString => {
                // A copy of bytes is charged as the string built (a `dyn` argument is not:
                // the estimate assumes it is no bytes value).
                if arg(0).ty == Type::Bytes {
                    cost = cost.plus(Cost::per_ten(&arg(0).len));
                }
                let why = Why::new(
                    format!("the size of `{}` is unknown", self.text(id)),
                    self.start(id),
                );
                string_of(&arg(0), why)
            }
            Builtin::ToBytes => {
                if arg(0).ty == Type::String {
                    cost = cost.plus(Cost::per_ten(&arg(0).len));
                }
                Shape {
                    len: arg(0).len,
                    ..Shape::scalar(Type::Bytes)
                }
            }
            Builtin::Dyn => arg(0),
            Builtin::OptionalOf | Builtin::OptionalOfNonZero => Shape::optional(arg(0)),
            Builtin::OptionalNone => Shape::optional(Shape::never()),
            Builtin::OptValue => arg(0).unwrap_optional(),
            Builtin::OptOr => join(&arg(0), &arg(1)),
            Builtin::OptOrValue => join(&arg(0).unwrap_optional(), &arg(1)),
        };
        (cost, shape)
    }

    fn call(&mut self, id: u64, call: &Call) -> (Cost, Shape) {
        let mut cost = Cost::Max(1);
        let mut shapes = Vec::with_capacity(call.args.len());
        for arg in &call.args {
            let (c, shape) = self.node(arg);
            cost = cost.plus(c);
            shapes.push(shape);
        }
        if call.overloads.iter().any(|o| o.cost == Charge::Linear) {
            for shape in &shapes {
                cost = cost.plus(Cost::per_ten(&shape.charged_size()));
            }
        }
        if call.undeclared {
            return (cost, Shape::never());
        }
        cost = cost.plus(work(&call.name, &shapes));
        if &*call.name == "flatten" {
            cost = cost.plus(self.flatten(id, &shapes, call.args.get(1)));
        }
        if let Some(i) = call.overloads.iter().find_map(|o| o.pattern) {
            let shape = shapes.get(i).cloned().unwrap_or_else(Shape::never);
            cost = cost.plus(self.pattern(call.args.get(i), &shape, crate::k8s::pattern_cost));
        }
        let shape = self
            .call_result(&call.name, &shapes, &call.args)
            .or_else(|| declared_scalar(&call.name, call.receiver, &shapes))
            .unwrap_or_else(|| self.unknown_result(id));
        if call.overloads.iter().any(|o| o.builds) {
            cost = cost.plus(Cost::creation(&shape));
        }
        (cost, shape)
    }

    /// What `flatten` costs as Kubernetes charges it (`limits::flatten_cost`): its depth
    /// (1 without one) per element of the receiver. A depth that is not a constant has no
    /// bound but its type's, as in Kubernetes' estimate.
    fn flatten(&self, id: u64, shapes: &[Shape], depth: Option<&Node>) -> Cost {
        let depth = match depth.map(|node| &node.kind) {
            None => 1,
            Some(Kind::Const(Value::Int(depth))) => *depth,
            Some(_) => {
                let at = self.start(id);
                return Cost::Unbounded(Why::new(
                    "the depth of `flatten` is not a constant".to_string(),
                    at,
                ));
            }
        };
        let list = shapes.first().cloned().unwrap_or_else(Shape::never);
        Cost::of(&list.len, |n| {
            crate::limits::flatten_cost(usize::try_from(n).unwrap_or(usize::MAX), depth)
        })
    }

    /// What compiling the pattern `node` (of shape `shape`) costs: a constant's
    /// compilation is charged once per evaluation, whatever the loops around it, so it is
    /// counted once (in `patterns`); any other pattern may be a new one at each call, in
    /// the costlier tier (see `limits::compile_regex`).
    fn pattern(&mut self, node: Option<&Node>, shape: &Shape, compile: fn(&str) -> u64) -> Cost {
        use crate::limits::{REGEX_BYTE_COST, REGEX_LARGE_COST, REGEX_SMALL_COST};
        match node.map(|n| &n.kind) {
            Some(Kind::Const(Value::String(p))) => {
                if !self.patterns.contains_key(&**p) {
                    self.patterns.insert(p.to_string(), compile(p));
                }
                Cost::Max(0)
            }
            _ => Cost::of(&shape.charged_size(), |n| {
                let n = n.min(crate::limits::MAX_PATTERN_BYTES as u64);
                REGEX_SMALL_COST + REGEX_LARGE_COST + 2 * REGEX_BYTE_COST * n
            }),
        }
    }

    /// The shape of what the library function `name` gives for arguments of these
    /// shapes (the receiver first), when the walk knows it.
    fn call_result(&self, name: &str, args: &[Shape], nodes: &[Node]) -> Option<Shape> {
        let arg = |i: usize| args.get(i).cloned().unwrap_or_else(Shape::never);
        let len = |i: usize| arg(i).len;
        let one = Ok(1);
        Some(match (name, args.len()) {
            ("lowerAscii" | "upperAscii" | "trim" | "substring", _) => Shape::string(len(0)),
            // One character.
            ("charAt", _) => Shape::string(Ok(4)),
            ("replace", 3 | 4) => {
                // Every gap of the string replaced, at worst (an empty `old`).
                let gaps = size_sum(&len(0), &one);
                let added = size_product(&gaps, &len(2));
                Shape::string(size_sum(&len(0), &added))
            }
            ("split", _) => Shape::list(size_sum(&len(0), &one), Shape::string(len(0))),
            ("join", 1 | 2) => {
                let list = arg(0);
                let each = size_sum(&list.elem().len, &len(1));
                Shape::string(size_product(&list.len, &each))
            }
            ("find", _) => Shape::string(len(0)),
            ("findAll", _) => Shape::list(size_sum(&len(0), &one), Shape::string(len(0))),
            ("sha256", _) => Shape::string(Ok(64)),
            ("dns1123Label", _) => Shape::string(Ok(63)),
            // Both maps' entries, at most.
            ("merge", 2) => {
                let (base, over) = (arg(0), arg(1));
                Shape::map(
                    size_sum(&base.len, &over.len),
                    join(&base.key(), &over.key()),
                    join(&base.elem(), &over.elem()),
                )
            }
            // No longer than the receiver (a list, or a string for `reverse`).
            ("slice" | "distinct" | "reverse" | "sort" | "@sortByAssociatedKeys", _) => arg(0),
            // 4 bytes for every 3, rounded up.
            ("base64.encode", 1) => Shape::string(len(0).map(|n| n.div_ceil(3).saturating_mul(4))),
            ("base64.decode", 1) => Shape {
                len: len(0),
                ..Shape::scalar(Type::Bytes)
            },
            (name, _) if name.starts_with("math.") => Shape::scalar(Type::Dyn),
            ("min" | "max" | "sum", 1) => arg(0).elem(),
            ("flatten", 1) => flattened(&arg(0))?,
            // A constant depth: flattened that many times.
            ("flatten", 2) => match nodes.get(1).map(|n| &n.kind) {
                Some(Kind::Const(Value::Int(depth))) if *depth >= 0 => {
                    // Past the nesting of any schema, a level changes nothing.
                    let mut list = arg(0);
                    for _ in 0..(*depth).min(64) {
                        list = flattened(&list)?;
                    }
                    list
                }
                _ => return None,
            },
            ("lists.range", 1) => match nodes.first().map(|n| &n.kind) {
                Some(Kind::Const(Value::Int(n))) => {
                    Shape::list(Ok(u64::try_from(*n).unwrap_or(0)), Shape::scalar(Type::Int))
                }
                _ => return None,
            },
            (
                "indexOf" | "lastIndexOf" | "compareTo" | "sign" | "asInteger" | "family"
                | "prefixLength",
                _,
            ) => Shape::scalar(Type::Int),
            ("asApproximateFloat", _) => Shape::scalar(Type::Double),
            (
                "sets.contains" | "sets.equivalent" | "sets.intersects" | "containsIP"
                | "containsCIDR",
                _,
            ) => Shape::scalar(Type::Bool),
            (name, _) if name.starts_with("is") || name.contains(".is") => {
                Shape::scalar(Type::Bool)
            }
            // Library values (never charged by size).
            ("quantity" | "ip" | "cidr" | "semver" | "url" | "add" | "sub" | "masked", _) => {
                Shape::scalar(Type::Dyn)
            }
            _ => return None,
        })
    }

    /// A comprehension of a macro: 1, its range, and per element 1 and its body.
    fn run_loop(&mut self, l: &Loop) -> (Cost, Shape) {
        let (range_cost, range) = self.node(&l.range);
        let n = range.charged_size();
        let (first, second) = iteration_variables(&range, l.two);
        self.scopes.push([Some(first.clone()), second, None]);
        let mut body = Cost::Max(0);
        let mut run = |walker: &mut Self, node: &Node| {
            let (cost, shape) = walker.node(node);
            body = body.clone().plus(cost);
            shape
        };
        let shape = match &l.kind {
            LoopKind::All(p) | LoopKind::Exists(p) | LoopKind::ExistsOne(p) => {
                run(self, p);
                Shape::scalar(Type::Bool)
            }
            LoopKind::List(filter, e) => {
                if let Some(filter) = filter {
                    run(self, filter);
                }
                Shape::list(n.clone(), run(self, e))
            }
            LoopKind::Map(filter, e) => {
                if let Some(filter) = filter {
                    run(self, filter);
                }
                Shape::map(n.clone(), first, run(self, e))
            }
            LoopKind::MapEntry(filter, e) => {
                if let Some(filter) = filter {
                    run(self, filter);
                }
                let entry = run(self, e);
                Shape::map(size_product(&n, &entry.len), entry.key(), entry.elem())
            }
        };
        self.scopes.pop();
        let iterations = Cost::Max(1).plus(body).times(&n);
        (Cost::Max(1).plus(range_cost).plus(iterations), shape)
    }

    /// Any other comprehension: 1, its range and initial value, per element 1, its
    /// condition and step, then its result. An accumulator that grows at each step has no
    /// bound.
    fn fold(&mut self, id: u64, f: &Fold) -> (Cost, Shape) {
        let (range_cost, range) = self.node(&f.range);
        let n = range.charged_size();
        let (init_cost, init) = self.node(&f.init);
        let (first, second) = iteration_variables(&range, f.two);
        // The accumulator keeps the bounds of its initial value when a step does not
        // exceed them (a step is walked once more to see: not below a few nested folds).
        let kept = self.folds < MAX_TRIED_FOLDS && {
            self.folds += 1;
            self.scopes
                .push([Some(first.clone()), second.clone(), Some(init.clone())]);
            let (_, stepped) = self.node(&f.step);
            self.scopes.pop();
            self.folds -= 1;
            within(&stepped, &init)
        };
        let accumulator = if kept {
            init
        } else {
            let why = Why::new(
                format!(
                    "the accumulator of the comprehension `{}` may grow at each step",
                    self.text(id)
                ),
                self.start(id),
            );
            Shape::unknown(init.ty.clone(), why)
        };
        self.scopes
            .push([Some(first), second, Some(accumulator.clone())]);
        let (cond_cost, _) = self.node(&f.cond);
        let (step_cost, _) = self.node(&f.step);
        self.scopes.pop();
        self.scopes.push([None, None, Some(accumulator)]);
        let (result_cost, result) = self.node(&f.result);
        self.scopes.pop();
        let iterations = Cost::Max(1).plus(cond_cost).plus(step_cost).times(&n);
        let cost = Cost::Max(1)
            .plus(range_cost)
            .plus(init_cost)
            .plus(iterations)
            .plus(result_cost);
        (cost, result)
    }

    // ---- the text of an expression ----------------------------------------------------------

    /// Where the expression of node `id` starts (a byte offset).
    fn start(&self, id: u64) -> usize {
        self.span(id).0
    }

    /// The expression of node `id` as written (blanks collapsed, shortened when long).
    fn text(&self, id: u64) -> String {
        let (start, end) = self.span(id);
        let text = self.source.get(start..end).unwrap_or_default();
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        const LONGEST: usize = 80;
        if text.chars().count() > LONGEST {
            let short: String = text.chars().take(LONGEST - 3).collect();
            format!("{short}...")
        } else {
            text
        }
    }

    /// The byte range of the expression of node `id`: from the first to the last token of
    /// its subtree, with the field name a selection ends with and the brackets it leaves
    /// open.
    fn span(&self, id: u64) -> (usize, usize) {
        let (mut start, mut end) = (usize::MAX, 0);
        match self.nodes.get(&id) {
            Some(e) => self.subtree_range(e, &mut start, &mut end),
            None => {
                if let Some((s, e)) = self.info.offset_for(id) {
                    start = usize::try_from(s).unwrap_or(0);
                    end = usize::try_from(e).unwrap_or(0).saturating_add(1);
                }
            }
        }
        if start == usize::MAX {
            return (0, 0);
        }
        let source = self.source;
        let mut end = end.min(source.len()).max(start);
        while !source.is_char_boundary(end) {
            end += 1;
        }
        end = field_after_dot(source, end);
        end = close_brackets(source, start, end);
        (start, end)
    }

    fn subtree_range(&self, e: &IdedExpr, start: &mut usize, end: &mut usize) {
        if let Some((s, t)) = self.info.offset_for(e.id) {
            let mut s = usize::try_from(s).unwrap_or(0);
            let t = usize::try_from(t).unwrap_or(0).saturating_add(1);
            // A global function's call is placed at its `(`: its name comes before.
            if let Expr::Call(call) = &e.expr
                && call.target.is_none()
                && call.func_name.starts_with(|c: char| c.is_alphabetic())
            {
                let before = self.source.get(..s).map_or("", str::trim_end);
                if before.ends_with(call.func_name.as_str()) {
                    s = before.len() - call.func_name.len();
                }
            }
            *start = (*start).min(s);
            *end = (*end).max(t);
        }
        for child in children(e) {
            self.subtree_range(child, start, end);
        }
    }
}

/// Whether every size of `a` is within the bounds of `b`'s.
fn within(a: &Shape, b: &Shape) -> bool {
    if a.never {
        return true;
    }
    let len = match (&a.len, &b.len) {
        (_, Err(_)) => return true,
        (Err(_), Ok(_)) => false,
        (Ok(x), Ok(y)) => x <= y,
    };
    let part = |x: &Option<Rc<Shape>>, y: &Option<Rc<Shape>>| match (x, y) {
        (None, _) => true,
        (Some(x), Some(y)) => within(x, y),
        (Some(x), None) => x.never,
    };
    len && part(&a.elem, &b.elem) && part(&a.key, &b.key)
}

/// The result of a call the checker declares a number, a bool, a timestamp or a duration
/// for (`duration(s)`, `t.getHours()`, ...): no size.
fn declared_scalar(name: &str, member: bool, args: &[Shape]) -> Option<Shape> {
    let overloads = DECLARATIONS.get(name)?;
    let args: Vec<Arg> = args
        .iter()
        .map(|shape| Arg {
            ty: shape.ty.clone(),
            weak: shape.never,
        })
        .collect();
    let ty = resolve(overloads, member, &args, true)?;
    let scalar = Shape::scalar(ty);
    (!scalar.ty.is_dyn() && scalar.is_unsized()).then_some(scalar)
}

/// The shape of `list.flatten()`: nested lists spliced in, one level.
fn flattened(list: &Shape) -> Option<Shape> {
    let inner = list.elem();
    match inner.ty {
        Type::List(_) => Some(Shape::list(
            size_product(&list.len, &inner.len),
            inner.elem(),
        )),
        _ if inner.is_unsized() => Some(Shape::list(list.len.clone(), inner)),
        _ => None,
    }
}

/// The iteration variables of a comprehension over `range`: the element of a list (or its
/// index and element), the key of a map (or its key and value).
fn iteration_variables(range: &Shape, two: bool) -> (Shape, Option<Shape>) {
    match range.ty {
        Type::List(_) if two => (Shape::scalar(Type::Int), Some(range.elem())),
        Type::List(_) => (range.elem(), None),
        Type::Map(..) | Type::Object(_) => (range.key(), two.then(|| range.elem())),
        _ if two => (
            join(&Shape::scalar(Type::Int), &range.key()),
            Some(range.elem()),
        ),
        _ => {
            let first = match (&range.elem, &range.key) {
                (Some(elem), Some(key)) => join(elem, key),
                (Some(elem), None) => (**elem).clone(),
                _ => range.elem(),
            };
            (first, None)
        }
    }
}

/// The work of the library function `name` that is not linear in its arguments (the
/// `work` of its overloads in `k8s/register.rs`; see `limits.rs`), at the largest sizes of
/// its arguments.
fn work(name: &str, args: &[Shape]) -> Cost {
    let arg = |i: usize| args.get(i).cloned().unwrap_or_else(Shape::never);
    // Whether the elements of a list hash (see `limits::HashKey`): then it is searched in
    // linear time.
    let hashes = |list: &Shape| {
        matches!(
            list.elem().ty,
            Type::Null | Type::Bool | Type::Int | Type::Uint | Type::String | Type::Bytes
        ) && !list.elem().never
            || matches!(list.len, Ok(0))
    };
    // The bytes of the string and bytes elements of a list (0 for other elements).
    let element_bytes = |list: &Shape| {
        let elem = list.elem();
        if elem.never || matches!(list.len, Ok(0)) {
            Ok(0)
        } else if matches!(
            elem.ty,
            Type::String | Type::Bytes | Type::Dyn | Type::Error
        ) {
            elem.len
        } else {
            Ok(0)
        }
    };
    // Kubernetes' charge for `distinct`, `sort` and `sortBy` (`limits::self_compare_cost`),
    // which the evaluator charges when it is more than its own.
    let self_compare = |list: &Shape| {
        let strings = matches!(
            list.elem().ty,
            Type::String | Type::Bytes | Type::Dyn | Type::Error
        );
        Cost::of(&list.len, |n| {
            crate::limits::self_compare_cost(usize::try_from(n).unwrap_or(usize::MAX), strings)
        })
    };
    match (name, args.len()) {
        ("distinct", 1) => {
            let list = arg(0);
            let kubernetes = self_compare(&list);
            if hashes(&list) {
                // Hashing: 1 per element and 1 per 10 bytes hashed.
                let bytes = size_product(&list.len, &element_bytes(&list));
                Cost::of(&list.len, |n| n)
                    .plus(Cost::per_ten(&bytes))
                    .max(kubernetes)
            } else {
                // Pairs, and what comparing them reads.
                let pairs = Cost::of(&list.len, |n| n.saturating_mul(n.saturating_sub(1)) / 2);
                let each = equality_work(&list.elem(), &list.elem());
                let work = match (&list.len, &each) {
                    (Ok(n), Ok(e)) => Ok(n.saturating_mul(n.saturating_sub(1)) / 2 * e),
                    (Err(why), _) | (_, Err(why)) => Err(why.clone()),
                };
                pairs.plus(Cost::per_ten(&work)).max(kubernetes)
            }
        }
        ("sort" | "@sortByAssociatedKeys", _) => {
            // The keys compared: the receiver of `sort()`, the second argument of `sortBy`.
            let keys = if args.len() > 1 { arg(1) } else { arg(0) };
            let per_comparison = Cost::per_ten(&element_bytes(&keys)).plus_n(1);
            Cost::of(&keys.len, |n| {
                crate::limits::sort_cost(usize::try_from(n).unwrap_or(usize::MAX))
            })
            .times_cost(per_comparison)
            .max(self_compare(&keys))
        }
        ("isSorted" | "min" | "max", 1) => {
            // `limits::scan_cost`: the bytes of the elements.
            let list = arg(0);
            if matches!(list.ty, Type::List(_) | Type::Dyn) {
                Cost::per_ten(&size_product(&list.len, &element_bytes(&list)))
            } else {
                Cost::Max(0)
            }
        }
        ("indexOf" | "lastIndexOf", 2) if matches!(arg(0).ty, Type::List(_)) => {
            // `limits::search_cost`: the needle compared with every element.
            let list = arg(0);
            Cost::per_ten(&size_product(
                &list.len,
                &equality_work(&arg(1), &list.elem()),
            ))
        }
        ("sets.contains" | "sets.equivalent" | "sets.intersects", 2) => {
            let factor = if name == "sets.equivalent" { 2 } else { 1 };
            let (a, b) = (arg(0), arg(1));
            let (work, reading) = if hashes(&a) && hashes(&b) {
                let bytes = size_sum(
                    &size_product(&a.len, &element_bytes(&a)),
                    &size_product(&b.len, &element_bytes(&b)),
                );
                (size_sum(&a.len, &b.len), Cost::per_ten(&bytes))
            } else {
                let pairs = size_product(&a.len, &b.len);
                let each = equality_work(&a.elem(), &b.elem());
                let read = Cost::per_ten(&size_product(&pairs, &each));
                (pairs, read.times(&Ok(factor)))
            };
            Cost::of(&work, |n| n.saturating_mul(factor)).plus(reading)
        }
        _ => Cost::Max(0),
    }
}

/// The charge and the shape of `a op b`.
fn binary(op: Op, a: &Shape, b: &Shape) -> (Cost, Shape) {
    match op {
        // Equality reads strings, bytes, lists and maps (`limits::equality_work`).
        Op::Eq | Op::Ne => (
            Cost::per_ten(&equality_work(a, b)),
            Shape::scalar(Type::Bool),
        ),
        // Ordering reads the shorter string or bytes (`limits::order_cost`).
        Op::Lt | Op::Le | Op::Gt | Op::Ge => {
            let charge = if a.is_unsized() || b.is_unsized() {
                Cost::Max(0)
            } else {
                Cost::per_ten(&size_min(&a.len, &b.len))
            };
            (charge, Shape::scalar(Type::Bool))
        }
        // A list is searched: 1 per 10 elements, and the needle compared with every
        // element (`limits::search_cost`); a map's key is hashed, 1 per 10 bytes.
        Op::In => {
            let map = matches!(b.ty, Type::Map(..) | Type::Object(_));
            let mut charge = Cost::Max(0);
            if !map {
                let work = size_product(&b.charged_size(), &equality_work(a, &b.elem()));
                charge = Cost::per_ten(&b.charged_size()).plus(Cost::per_ten(&work));
            }
            if (map || b.ty.is_dyn()) && matches!(a.ty, Type::String | Type::Bytes | Type::Dyn) {
                charge = charge.plus(Cost::per_ten(&a.charged_size()));
            }
            (charge, Shape::scalar(Type::Bool))
        }
        Op::Add if a.is_unsized() || b.is_unsized() => {
            // Numbers, timestamps and durations: no size.
            let ty = match (&a.ty, &b.ty) {
                (Type::Timestamp, _) | (_, Type::Timestamp) => Type::Timestamp,
                (t, other) if t.is_dyn() || a.never => other.clone(),
                (t, _) => t.clone(),
            };
            (Cost::Max(0), Shape::scalar(ty))
        }
        Op::Add => {
            let len = size_sum(&a.len, &b.len);
            // Lists (and values that may be lists) are copied: 1 per element.
            let charge = match (&a.ty, &b.ty) {
                (Type::String | Type::Bytes, _) | (_, Type::String | Type::Bytes) => {
                    Cost::per_ten(&len)
                }
                _ => Cost::of(&len, |n| n),
            };
            let sum = match (&a.ty, &b.ty) {
                (Type::List(_), _) | (_, Type::List(_)) => {
                    Shape::list(len, join(&a.elem(), &b.elem()))
                }
                (Type::String, _) | (_, Type::String) => Shape::string(len),
                (Type::Bytes, _) | (_, Type::Bytes) => Shape {
                    len,
                    ..Shape::scalar(Type::Bytes)
                },
                // Values of unknown types: lists, if anything has elements.
                _ => Shape {
                    ty: merge(&a.ty, &b.ty),
                    len,
                    elem: Some(Rc::new(join(&a.elem(), &b.elem()))),
                    key: None,
                    never: false,
                },
            };
            (charge, sum)
        }
        Op::Sub | Op::Mul | Op::Div | Op::Rem => {
            let ty = match (&a.ty, &b.ty) {
                (Type::Timestamp, Type::Timestamp) => Type::Duration,
                (t, other) if t.is_dyn() => other.clone(),
                (t, _) => t.clone(),
            };
            (Cost::Max(0), Shape::scalar(ty))
        }
    }
}

/// A selection's last token is its `.`: the end moves past the field name after it.
fn field_after_dot(source: &str, end: usize) -> usize {
    let Some(before) = source.get(..end) else {
        return end;
    };
    if !before.trim_end().ends_with('.') {
        return end;
    }
    let rest = &source[end..];
    let skipped = rest.len()
        - rest
            .trim_start_matches(|c: char| c.is_whitespace() || c == '?')
            .len();
    let field = &rest[skipped..];
    let length = if let Some(quoted) = field.strip_prefix('`') {
        quoted.find('`').map_or(0, |i| i + 2)
    } else {
        field
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(field.len())
    };
    end + skipped + length
}

/// Moves `end` past the brackets `source[start..end]` leaves open (a call's closing
/// parenthesis is no token of its subtree), skipping string literals.
fn close_brackets(source: &str, start: usize, end: usize) -> usize {
    let Some(text) = source.get(start..) else {
        return end;
    };
    let mut depth = 0usize;
    for (i, c) in outside_literals(text) {
        let at = start + i;
        if at >= end && depth == 0 {
            return at.max(end);
        }
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                if depth == 0 {
                    // Closes something the expression is inside of.
                    return at.max(end).min(source.len());
                }
                depth -= 1;
            }
            _ => {}
        }
    }
    source.len()
}
