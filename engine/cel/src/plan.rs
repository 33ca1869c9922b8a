//! The evaluation plan: the `cel` AST lowered once, at compile time, into a tree the
//! evaluator ([`crate::eval`]) walks.
//!
//! Lowering resolves what can be resolved before any value is known:
//!
//! - comprehension and `cel.bind` variables become slots of a scope (`Local`), free
//!   identifiers the names of activation variables (`Global`), type names constants;
//! - operators become their own nodes (`And`, `Or`, `Cond` short-circuit; `Bin` for the
//!   strict ones); hot standard functions (`size`, `contains`, `startsWith`, `endsWith`,
//!   `matches`, conversions, optionals) become [`Builtin`]s; every other function call is
//!   resolved by name, call style and arity to its overloads in the [`Registry`], or to a
//!   custom function, with only the choice among overloads left to run time;
//! - the standard macros' comprehensions (and the two-variable ones of [`crate::macros`])
//!   are recognised and become loops ([`Loop`]) over borrowed elements; anything else is a
//!   generic fold;
//! - a node whose operands are all constants is evaluated once (constant folding), unless
//!   that fails: the error then happens at evaluation, where it has a position.
//!
//! This file and `eval.rs` import each other, the only two files of the crate that do,
//! because the interpreter recurses through both: constant folding evaluates nodes with
//! [`crate::eval::eval_constant`], and the evaluator walks the nodes defined here.
//! The other files they import are below them: none imports `eval.rs` or `plan.rs`.

use std::sync::Arc;

use cel::common::ast::{ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue, operators};

use crate::environment::CelEnvironment;
use crate::macros::{MAP_INSERT, RESULT};
use crate::registry::{Cost, CustomFunction, Overload, Registry};
use crate::value::{Hint, Type, Value};

/// A node of the plan, with the id of the AST node it comes from (for error positions).
pub(crate) struct Node {
    pub id: u64,
    pub kind: Kind,
}

pub(crate) enum Kind {
    Const(Value),
    /// An activation variable, and where it was found the last time.
    Global(Arc<str>, Hint),
    /// A comprehension or bind variable: `up` scopes out, slot `slot`.
    Local {
        up: u32,
        slot: u8,
    },
    /// `a.b`, and where the field was found the last time.
    Select(Box<Node>, Arc<str>, Hint),
    /// `a.b.c` on an activation variable (or `a` alone, in a container): evaluated as the
    /// select chain, unless the activation has variables with dotted names (`a.b`), which
    /// then win, longest first, each under the container's prefixes first.
    Qualified(Box<Qualified>),
    /// `has(a.b)`.
    Has(Box<Node>, Arc<str>),
    /// `a.?b`.
    OptSelect(Box<Node>, Arc<str>),
    Index(Box<Node>, Box<Node>),
    /// `a[?b]`.
    OptIndex(Box<Node>, Box<Node>),
    Not(Box<Node>),
    Neg(Box<Node>),
    NotStrictlyFalse(Box<Node>),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Cond(Box<(Node, Node, Node)>),
    Bin(Op, Box<Node>, Box<Node>),
    /// `a + b + c + ...` (three operands or more): concatenates strings into one buffer.
    AddChain(Box<AddChain>),
    /// A list literal; `optional[i]` marks `[?x]` elements.
    List(Vec<Node>, Vec<bool>),
    /// A map literal: key, value, whether optional (`{?k: v}`).
    Map(Vec<(Node, Node, bool)>),
    Builtin(Builtin, Vec<Node>),
    /// A library function: its overloads for this name, call style and arity.
    Call(Box<Call>),
    Custom(Box<CustomCall>),
    Loop(Box<Loop>),
    Fold(Box<Fold>),
    /// `cel.bind`: `init` in slot 0 of a new scope for `body`.
    Bind(Box<(Node, Node)>),
    /// An expression this evaluator does not support: fails with the message.
    Fail(Arc<str>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
}

impl Op {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::Add => operators::ADD,
            Op::Sub => operators::SUBSTRACT,
            Op::Mul => operators::MULTIPLY,
            Op::Div => operators::DIVIDE,
            Op::Rem => operators::MODULO,
            Op::Eq => operators::EQUALS,
            Op::Ne => operators::NOT_EQUALS,
            Op::Lt => operators::LESS,
            Op::Le => operators::LESS_EQUALS,
            Op::Gt => operators::GREATER,
            Op::Ge => operators::GREATER_EQUALS,
            Op::In => operators::IN,
        }
    }
}

/// Standard functions the evaluator implements itself, on borrowed arguments.
#[derive(Clone, Debug)]
pub(crate) enum Builtin {
    Size,
    Contains,
    StartsWith,
    EndsWith,
    /// `matches`, with the pattern compiled at compile time when it is a literal.
    Matches(Option<Arc<regex::Regex>>),
    ToInt,
    ToUint,
    ToDouble,
    ToString,
    ToBool,
    ToBytes,
    Dyn,
    TypeOf,
    OptionalOf,
    OptionalNone,
    OptionalOfNonZero,
    HasValue,
    OptValue,
    /// `a.or(b)`: `b` is evaluated only when `a` has no value.
    OptOr,
    /// `a.orValue(b)`: likewise.
    OptOrValue,
}

impl Builtin {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Builtin::Size => "size",
            Builtin::Contains => "contains",
            Builtin::StartsWith => "startsWith",
            Builtin::EndsWith => "endsWith",
            Builtin::Matches(_) => "matches",
            Builtin::ToInt => "int",
            Builtin::ToUint => "uint",
            Builtin::ToDouble => "double",
            Builtin::ToString => "string",
            Builtin::ToBool => "bool",
            Builtin::ToBytes => "bytes",
            Builtin::Dyn => "dyn",
            Builtin::TypeOf => "type",
            Builtin::OptionalOf => "optional.of",
            Builtin::OptionalNone => "optional.none",
            Builtin::OptionalOfNonZero => "optional.ofNonZeroValue",
            Builtin::HasValue => "hasValue",
            Builtin::OptValue => "value",
            Builtin::OptOr => "or",
            Builtin::OptOrValue => "orValue",
        }
    }

    /// Whether the builtin is called as a method (for messages).
    pub(crate) fn is_method(&self) -> bool {
        matches!(
            self,
            Builtin::Contains
                | Builtin::StartsWith
                | Builtin::EndsWith
                | Builtin::HasValue
                | Builtin::OptValue
                | Builtin::OptOr
                | Builtin::OptOrValue
        )
    }

    /// Whether the cost of a call grows with its arguments' sizes.
    pub(crate) fn size_dependent(&self) -> bool {
        matches!(
            self,
            Builtin::Contains
                | Builtin::StartsWith
                | Builtin::EndsWith
                | Builtin::Matches(_)
                | Builtin::ToBytes
                | Builtin::ToString
        )
    }
}

pub(crate) struct Qualified {
    pub chain: Node,
    /// The name's segments: `a`, `b`, `c`.
    pub segments: Vec<Arc<str>>,
    /// The container's prefixes, most specific first (`com.example`, `com`); none for a
    /// name with a leading dot.
    pub prefixes: Arc<[Arc<str>]>,
}

pub(crate) struct AddChain {
    pub operands: Vec<Node>,
    /// The id of the `+` joining the operands before `i + 1` with operand `i + 1`.
    pub ops: Vec<u64>,
}

pub(crate) struct Call {
    pub name: Arc<str>,
    pub receiver: bool,
    pub overloads: Vec<Overload>,
    pub args: Vec<Node>,
    /// No function of that name exists at all (an error once the arguments evaluated).
    pub undeclared: bool,
    /// Overloads of the name outside the environment (`reverse` of a string when only the
    /// lists library's is in), each with what would bring it in: said when no overload of
    /// the environment applies and one of these would.
    pub outside: Vec<(Overload, Arc<str>)>,
}

pub(crate) struct CustomCall {
    pub name: Arc<str>,
    pub function: CustomFunction,
    pub args: Vec<Node>,
}

pub(crate) struct Loop {
    pub range: Node,
    /// Two iteration variables (index or key, then value) rather than one.
    pub two: bool,
    pub kind: LoopKind,
}

pub(crate) enum LoopKind {
    All(Node),
    Exists(Node),
    ExistsOne(Node),
    /// `map`, `filter`, `transformList`: the optional filter, then the element.
    List(Option<Node>, Node),
    /// `transformMap`: the optional filter, then the value under the first variable.
    Map(Option<Node>, Node),
    /// `transformMapEntry`: the optional filter, then the entry map.
    MapEntry(Option<Node>, Node),
}

pub(crate) struct Fold {
    pub range: Node,
    pub two: bool,
    pub init: Node,
    pub cond: Node,
    pub step: Node,
    pub result: Node,
}

/// A compiled expression.
pub(crate) struct Plan {
    pub root: Node,
    /// The number of nodes when no node can run more than once or costs by size.
    pub static_cost: Option<u64>,
}

/// Names of the types an identifier can denote.
fn builtin_type(name: &str) -> Option<Type> {
    Some(match name {
        "bool" => Type::BOOL,
        "int" => Type::INT,
        "uint" => Type::UINT,
        "double" => Type::DOUBLE,
        "string" => Type::STRING,
        "bytes" => Type::BYTES,
        "list" => Type::LIST,
        "map" => Type::MAP,
        "null_type" => Type::NULL,
        "type" => Type::TYPE,
        "optional_type" => Type::OPTIONAL,
        "google.protobuf.Timestamp" => Type::TIMESTAMP,
        "google.protobuf.Duration" => Type::DURATION,
        _ => return None,
    })
}

pub(crate) struct Lowering<'e> {
    pub registry: &'e Registry,
    /// See [`Lowering::with_environment`].
    environment: Option<&'e CelEnvironment>,
    pub custom: &'e [(String, CustomFunction)],
    /// Variables of the scopes in force, innermost last.
    scopes: Vec<[Option<String>; 3]>,
    unbounded: bool,
    /// The container's prefixes (see [`crate::Env::with_container`]).
    prefixes: Arc<[Arc<str>]>,
    /// What constant folding may still spend, in cost units: folding runs the operations
    /// at compile time, where no evaluation's limit meters them (`lists.range(1000000)`
    /// would allocate at every compile).
    fold_budget: u64,
}

/// The cost constant folding may spend on one expression: about 0.1 s of work. An
/// operation that would pass it is left to evaluation, which charges it.
const FOLD_BUDGET: u64 = 100_000;

impl<'e> Lowering<'e> {
    pub(crate) fn new(registry: &'e Registry, custom: &'e [(String, CustomFunction)]) -> Self {
        Lowering {
            registry,
            environment: None,
            custom,
            scopes: Vec::new(),
            unbounded: false,
            prefixes: Arc::from([]),
            fold_budget: FOLD_BUDGET,
        }
    }

    /// The environment `registry` is filtered for: calls keep the overloads outside it, to
    /// say so when one of them is what the arguments needed.
    pub(crate) fn with_environment(mut self, environment: &'e CelEnvironment) -> Self {
        self.environment = Some(environment);
        self
    }

    /// The overloads of `name` outside the environment, with what would bring each in.
    fn outside(&self, name: &str, receiver: bool, arity: usize) -> Vec<(Overload, Arc<str>)> {
        let Some(environment) = self.environment else {
            return Vec::new();
        };
        crate::builtins::FULL_REGISTRY
            .lookup(name, receiver)
            .unwrap_or_default()
            .iter()
            .filter(|o| o.params.len() == arity && !environment.has(o.library))
            .map(|o| {
                let needs = environment.needs(&[o.library].into());
                (o.clone(), Arc::from(needs))
            })
            .collect()
    }

    /// Resolves free identifiers in a container: `prefixes`, most specific first.
    pub(crate) fn with_container(mut self, prefixes: Arc<[Arc<str>]>) -> Self {
        self.prefixes = prefixes;
        self
    }

    pub(crate) fn plan(mut self, expr: &IdedExpr) -> Plan {
        let root = self.lower(expr);
        let count = count_nodes(&root);
        Plan {
            root,
            static_cost: (!self.unbounded).then_some(count),
        }
    }

    fn node(&mut self, id: u64, kind: Kind) -> Node {
        fold(Node { id, kind }, &mut self.fold_budget)
    }

    fn resolve_local(&self, name: &str) -> Option<Kind> {
        for (up, scope) in self.scopes.iter().rev().enumerate() {
            if let Some(slot) = scope.iter().position(|v| v.as_deref() == Some(name)) {
                return Some(Kind::Local {
                    up: u32::try_from(up).unwrap_or(u32::MAX),
                    slot: u8::try_from(slot).unwrap_or(0),
                });
            }
        }
        None
    }

    /// The qualified name an expression spells (`a.b.c`, or `.a.b.c` with a leading dot),
    /// when its root is not a local and no field is quoted as no identifier could be
    /// (`` a.`b.c` ``).
    fn qualified_name(&self, expr: &IdedExpr) -> Option<String> {
        match &expr.expr {
            Expr::Ident(name) if self.resolve_local(name).is_none() => Some(name.clone()),
            Expr::Select(s) if !s.test && is_identifier(&s.field) => self
                .qualified_name(&s.operand)
                .map(|q| format!("{q}.{}", s.field)),
            _ => None,
        }
    }

    /// A type a (qualified) name denotes.
    fn type_named(&self, name: &str) -> Option<Type> {
        let name = name.strip_prefix('.').unwrap_or(name);
        builtin_type(name).or_else(|| self.registry.type_named(name))
    }

    /// A node reading the name `segments` (a qualified name, its leading dot removed)
    /// through `chain`, or the variables with dotted names and the container's.
    fn qualified(&mut self, id: u64, chain: Node, segments: Vec<Arc<str>>, absolute: bool) -> Node {
        let prefixes = if absolute {
            Arc::from([])
        } else {
            Arc::clone(&self.prefixes)
        };
        self.node(
            id,
            Kind::Qualified(Box::new(Qualified {
                chain,
                segments,
                prefixes,
            })),
        )
    }

    fn lower_all(&mut self, exprs: &[IdedExpr]) -> Vec<Node> {
        exprs.iter().map(|e| self.lower(e)).collect()
    }

    fn lower(&mut self, expr: &IdedExpr) -> Node {
        let id = expr.id;
        match &expr.expr {
            Expr::Unspecified => self.fail(id, "unspecified expression"),
            Expr::Literal(lit) => self.node(id, Kind::Const(literal(lit))),
            Expr::Ident(name) => {
                // `.y`: the variable `y`, never a local, whatever the container.
                if let Some(root) = name.strip_prefix('.') {
                    if let Some(t) = self.type_named(root) {
                        return self.node(id, Kind::Const(Value::Type(t)));
                    }
                    return self.node(id, Kind::Global(Arc::from(root), Hint::default()));
                }
                if let Some(local) = self.resolve_local(name) {
                    return self.node(id, local);
                }
                if let Some(t) = self.type_named(name) {
                    return self.node(id, Kind::Const(Value::Type(t)));
                }
                let global = self.node(id, Kind::Global(Arc::from(name.as_str()), Hint::default()));
                if self.prefixes.is_empty() {
                    return global;
                }
                self.qualified(id, global, vec![Arc::from(name.as_str())], false)
            }
            Expr::Select(select) => {
                if !select.test
                    && let Some(q) = self.qualified_name(expr)
                    && let Some(t) = self.type_named(&q)
                {
                    return self.node(id, Kind::Const(Value::Type(t)));
                }
                if select.test {
                    let operand = Box::new(self.lower(&select.operand));
                    let field: Arc<str> = Arc::from(select.field.as_str());
                    return self.node(id, Kind::Has(operand, field));
                }
                let chain = self.select_chain(expr);
                match self.qualified_name(expr) {
                    Some(q) if !matches!(chain.kind, Kind::Const(_)) => {
                        let (absolute, q) = match q.strip_prefix('.') {
                            Some(q) => (true, q),
                            None => (false, q.as_str()),
                        };
                        let segments = q.split('.').map(Arc::from).collect();
                        self.qualified(id, chain, segments, absolute)
                    }
                    _ => chain,
                }
            }
            Expr::Call(call) => self.call(id, call),
            Expr::List(list) => {
                let items = self.lower_all(&list.elements);
                let mut optional = vec![false; items.len()];
                for &i in &list.optional_indices {
                    if let Some(o) = optional.get_mut(i) {
                        *o = true;
                    }
                }
                self.node(id, Kind::List(items, optional))
            }
            Expr::Map(map) => {
                let mut entries = Vec::with_capacity(map.entries.len());
                for entry in &map.entries {
                    match &entry.expr {
                        EntryExpr::MapEntry(e) => {
                            let k = self.lower(&e.key);
                            let v = self.lower(&e.value);
                            entries.push((k, v, e.optional));
                        }
                        EntryExpr::StructField(_) => {
                            return self.fail(id, "struct fields in a map literal");
                        }
                    }
                }
                self.node(id, Kind::Map(entries))
            }
            Expr::Struct(s) => self.fail(
                id,
                &format!(
                    "unknown type '{}': message types are not supported",
                    s.type_name
                ),
            ),
            Expr::Comprehension(c) => self.comprehension(id, c),
        }
    }

    /// `((a + b) + c) + ...`, `args` those of the last `+`.
    fn add_chain(&mut self, id: u64, args: &[IdedExpr]) -> Node {
        let mut operands = Vec::new();
        let mut ops = vec![id];
        let (mut left, right) = (&args[0], &args[1]);
        operands.push(right);
        while let Some([l, r]) = call_of(left, operators::ADD) {
            ops.push(left.id);
            operands.push(r);
            left = l;
        }
        operands.push(left);
        operands.reverse();
        ops.reverse();
        let operands = operands.into_iter().map(|e| self.lower(e)).collect();
        self.node(id, Kind::AddChain(Box::new(AddChain { operands, ops })))
    }

    /// A select chain `a.b.c`, its inner selects not wrapped in `Qualified`.
    fn select_chain(&mut self, expr: &IdedExpr) -> Node {
        match &expr.expr {
            Expr::Select(select) if !select.test => {
                let operand = Box::new(self.select_chain(&select.operand));
                let field: Arc<str> = Arc::from(select.field.as_str());
                self.node(expr.id, Kind::Select(operand, field, Hint::default()))
            }
            _ => self.lower(expr),
        }
    }

    fn fail(&mut self, id: u64, message: &str) -> Node {
        Node {
            id,
            kind: Kind::Fail(Arc::from(message)),
        }
    }

    fn call(&mut self, id: u64, call: &cel::common::ast::CallExpr) -> Node {
        let name = call.func_name.as_str();
        let args = &call.args;
        if call.target.is_none() {
            let op = match name {
                operators::ADD => Some(Op::Add),
                operators::SUBSTRACT => Some(Op::Sub),
                operators::MULTIPLY => Some(Op::Mul),
                operators::DIVIDE => Some(Op::Div),
                operators::MODULO => Some(Op::Rem),
                operators::EQUALS => Some(Op::Eq),
                operators::NOT_EQUALS => Some(Op::Ne),
                operators::LESS => Some(Op::Lt),
                operators::LESS_EQUALS => Some(Op::Le),
                operators::GREATER => Some(Op::Gt),
                operators::GREATER_EQUALS => Some(Op::Ge),
                operators::IN => Some(Op::In),
                _ => None,
            };
            if op == Some(Op::Add)
                && let [left, _] = args.as_slice()
                && call_of(left, operators::ADD).is_some_and(|a| a.len() == 2)
            {
                return self.add_chain(id, args);
            }
            if let (Some(op), [a, b]) = (op, args.as_slice()) {
                let a = Box::new(self.lower(a));
                let b = Box::new(self.lower(b));
                return self.node(id, Kind::Bin(op, a, b));
            }
            match (name, args.as_slice()) {
                (operators::LOGICAL_AND, [a, b]) => {
                    let (a, b) = (Box::new(self.lower(a)), Box::new(self.lower(b)));
                    return self.node(id, Kind::And(a, b));
                }
                (operators::LOGICAL_OR, [a, b]) => {
                    let (a, b) = (Box::new(self.lower(a)), Box::new(self.lower(b)));
                    return self.node(id, Kind::Or(a, b));
                }
                (operators::LOGICAL_NOT, [a]) => {
                    let a = Box::new(self.lower(a));
                    return self.node(id, Kind::Not(a));
                }
                (operators::NEGATE, [a]) => {
                    let a = Box::new(self.lower(a));
                    return self.node(id, Kind::Neg(a));
                }
                (operators::NOT_STRICTLY_FALSE, [a]) => {
                    let a = Box::new(self.lower(a));
                    return self.node(id, Kind::NotStrictlyFalse(a));
                }
                (operators::CONDITIONAL, [c, t, f]) => {
                    let parts = (self.lower(c), self.lower(t), self.lower(f));
                    return self.node(id, Kind::Cond(Box::new(parts)));
                }
                (operators::INDEX, [a, b]) => {
                    let (a, b) = (Box::new(self.lower(a)), Box::new(self.lower(b)));
                    return self.node(id, Kind::Index(a, b));
                }
                (operators::OPT_INDEX, [a, b]) => {
                    let (a, b) = (Box::new(self.lower(a)), Box::new(self.lower(b)));
                    return self.node(id, Kind::OptIndex(a, b));
                }
                (operators::OPT_SELECT, [a, field]) => {
                    if let Expr::Literal(LiteralValue::String(f)) = &field.expr {
                        let a = Box::new(self.lower(a));
                        return self.node(id, Kind::OptSelect(a, Arc::from(f.inner())));
                    }
                }
                _ => {}
            }
            if let Some(builtin) = global_builtin(name, args) {
                let args = self.lower_all(args);
                return self.builtin(id, builtin, args);
            }
            return self.function(id, name, None, args);
        }
        let Some(target) = call.target.as_deref() else {
            return self.fail(id, "missing target");
        };
        // `ns.f(x)`: a namespaced global function.
        if let Some(ns) = self.qualified_name(target) {
            let ns = ns.strip_prefix('.').unwrap_or(&ns);
            let qualified = format!("{ns}.{name}");
            if qualified == "optional.of"
                || qualified == "optional.none"
                || qualified == "optional.ofNonZeroValue"
            {
                let builtin = match qualified.as_str() {
                    "optional.of" => Builtin::OptionalOf,
                    "optional.none" => Builtin::OptionalNone,
                    _ => Builtin::OptionalOfNonZero,
                };
                let args = self.lower_all(args);
                return self.builtin(id, builtin, args);
            }
            if self.registry.lookup(&qualified, false).is_some()
                || self.custom.iter().any(|(n, _)| *n == qualified)
            {
                return self.function(id, &qualified, None, args);
            }
        }
        if let Some(builtin) = method_builtin(name, args) {
            let mut all = vec![self.lower(target)];
            all.extend(self.lower_all(args));
            return self.builtin(id, builtin, all);
        }
        self.function(id, name, Some(target), args)
    }

    fn builtin(&mut self, id: u64, builtin: Builtin, args: Vec<Node>) -> Node {
        let builtin = match (builtin, args.get(1)) {
            (
                Builtin::Matches(_),
                Some(Node {
                    kind: Kind::Const(Value::String(p)),
                    ..
                }),
            ) => {
                // Compiling is work of the compile: from the folding budget, at its worst
                // (see `limits::compile_regex`); a pattern past it compiles when evaluated,
                // charged there.
                use crate::limits::{REGEX_BYTE_COST, REGEX_LARGE_COST, REGEX_SMALL_COST};
                let worst =
                    REGEX_SMALL_COST + REGEX_LARGE_COST + 2 * REGEX_BYTE_COST * (p.len() as u64);
                if worst <= self.fold_budget {
                    let (re, cost) = crate::k8s::regex::compile_with_cost(p);
                    self.fold_budget -= cost.min(self.fold_budget);
                    Builtin::Matches(re.ok())
                } else {
                    Builtin::Matches(None)
                }
            }
            (b, _) => b,
        };
        if builtin.size_dependent() {
            self.unbounded = true;
        }
        self.node(id, Kind::Builtin(builtin, args))
    }

    /// A call of a registered or custom function `name`: on `target` when a method.
    fn function(
        &mut self,
        id: u64,
        name: &str,
        target: Option<&IdedExpr>,
        args: &[IdedExpr],
    ) -> Node {
        let receiver = target.is_some();
        let mut lowered = Vec::with_capacity(args.len() + 1);
        if let Some(t) = target {
            lowered.push(self.lower(t));
        }
        lowered.extend(self.lower_all(args));
        if let Some(overloads) = self.registry.lookup(name, receiver) {
            let overloads: Vec<Overload> = overloads
                .iter()
                .filter(|o| o.params.len() == lowered.len())
                .cloned()
                .collect();
            if overloads.iter().any(|o| {
                o.cost == Cost::Linear || o.work.is_some() || o.builds || o.pattern.is_some()
            }) {
                self.unbounded = true;
            }
            let outside = self.outside(name, receiver, lowered.len());
            return self.node(
                id,
                Kind::Call(Box::new(Call {
                    name: Arc::from(name),
                    receiver,
                    overloads,
                    args: lowered,
                    undeclared: false,
                    outside,
                })),
            );
        }
        if let Some((_, f)) = self.custom.iter().find(|(n, _)| n == name) {
            return self.node(
                id,
                Kind::Custom(Box::new(CustomCall {
                    name: Arc::from(name),
                    function: Arc::clone(f),
                    args: lowered,
                })),
            );
        }
        let undeclared = !self.registry.has_name(name);
        self.node(
            id,
            Kind::Call(Box::new(Call {
                name: Arc::from(name),
                receiver,
                overloads: Vec::new(),
                args: lowered,
                undeclared,
                outside: Vec::new(),
            })),
        )
    }

    fn comprehension(&mut self, id: u64, c: &ComprehensionExpr) -> Node {
        // `cel.bind` and the optionals' bind: a fold over no elements that never steps.
        if matches!(&c.iter_range.expr, Expr::List(l) if l.elements.is_empty())
            && matches!(&c.loop_cond.expr, Expr::Literal(LiteralValue::Boolean(b)) if !*b.inner())
        {
            let init = self.lower(&c.accu_init);
            self.scopes.push([Some(c.accu_var.clone()), None, None]);
            let body = self.lower(&c.result);
            self.scopes.pop();
            return self.node(id, Kind::Bind(Box::new((init, body))));
        }
        self.unbounded = true;
        let range = self.lower(&c.iter_range);
        let two = c.iter_var2.is_some();
        if c.accu_var == RESULT
            && let Some(kind) = self.recognise(c)
        {
            return self.node(id, Kind::Loop(Box::new(Loop { range, two, kind })));
        }
        let init = self.lower(&c.accu_init);
        self.scopes.push([
            Some(c.iter_var.clone()),
            c.iter_var2.clone(),
            Some(c.accu_var.clone()),
        ]);
        let cond = self.lower(&c.loop_cond);
        let step = self.lower(&c.loop_step);
        self.scopes.pop();
        self.scopes.push([None, None, Some(c.accu_var.clone())]);
        let result = self.lower(&c.result);
        self.scopes.pop();
        self.node(
            id,
            Kind::Fold(Box::new(Fold {
                range,
                two,
                init,
                cond,
                step,
                result,
            })),
        )
    }

    /// The loop a macro's comprehension is, lowered in the loop's scope.
    fn recognise(&mut self, c: &ComprehensionExpr) -> Option<LoopKind> {
        let shape = shape(c)?;
        self.scopes
            .push([Some(c.iter_var.clone()), c.iter_var2.clone(), None]);
        let lower_opt = |this: &mut Self, e: Option<&IdedExpr>| e.map(|e| this.lower(e));
        let kind = match shape {
            Shape::All(p) => LoopKind::All(self.lower(p)),
            Shape::Exists(p) => LoopKind::Exists(self.lower(p)),
            Shape::ExistsOne(p) => LoopKind::ExistsOne(self.lower(p)),
            Shape::List(f, e) => {
                let f = lower_opt(self, f);
                LoopKind::List(f, self.lower(e))
            }
            Shape::Map(f, e) => {
                let f = lower_opt(self, f);
                LoopKind::Map(f, self.lower(e))
            }
            Shape::MapEntry(f, e) => {
                let f = lower_opt(self, f);
                LoopKind::MapEntry(f, self.lower(e))
            }
        };
        self.scopes.pop();
        Some(kind)
    }
}

enum Shape<'a> {
    All(&'a IdedExpr),
    Exists(&'a IdedExpr),
    ExistsOne(&'a IdedExpr),
    List(Option<&'a IdedExpr>, &'a IdedExpr),
    Map(Option<&'a IdedExpr>, &'a IdedExpr),
    MapEntry(Option<&'a IdedExpr>, &'a IdedExpr),
}

fn is_accu(e: &IdedExpr) -> bool {
    matches!(&e.expr, Expr::Ident(n) if n == RESULT)
}

fn call_of<'a>(e: &'a IdedExpr, name: &str) -> Option<&'a [IdedExpr]> {
    match &e.expr {
        Expr::Call(c) if c.target.is_none() && c.func_name == name => Some(&c.args),
        _ => None,
    }
}

fn is_bool(e: &IdedExpr, value: bool) -> bool {
    matches!(&e.expr, Expr::Literal(LiteralValue::Boolean(b)) if *b.inner() == value)
}

fn is_int(e: &IdedExpr, value: i64) -> bool {
    matches!(&e.expr, Expr::Literal(LiteralValue::Int(i)) if *i.inner() == value)
}

/// Which macro a comprehension with the accumulator `@result` is the expansion of.
fn shape(c: &ComprehensionExpr) -> Option<Shape<'_>> {
    let result_is_accu = is_accu(&c.result);
    // all: init true, cond @not_strictly_false(@result), step @result && p
    if is_bool(&c.accu_init, true) && result_is_accu {
        if let Some([a]) = call_of(&c.loop_cond, operators::NOT_STRICTLY_FALSE)
            && is_accu(a)
            && let Some([acc, p]) = call_of(&c.loop_step, operators::LOGICAL_AND)
            && is_accu(acc)
        {
            return Some(Shape::All(p));
        }
        return None;
    }
    // exists: init false, cond @not_strictly_false(!@result), step @result || p
    if is_bool(&c.accu_init, false) && result_is_accu {
        if let Some([n]) = call_of(&c.loop_cond, operators::NOT_STRICTLY_FALSE)
            && let Some([a]) = call_of(n, operators::LOGICAL_NOT)
            && is_accu(a)
            && let Some([acc, p]) = call_of(&c.loop_step, operators::LOGICAL_OR)
            && is_accu(acc)
        {
            return Some(Shape::Exists(p));
        }
        return None;
    }
    if !is_bool(&c.loop_cond, true) {
        return None;
    }
    // exists_one: init 0, step p ? @result + 1 : @result, result @result == 1
    if is_int(&c.accu_init, 0) {
        if let Some([p, plus, same]) = call_of(&c.loop_step, operators::CONDITIONAL)
            && let Some([acc, one]) = call_of(plus, operators::ADD)
            && is_accu(acc)
            && is_int(one, 1)
            && is_accu(same)
            && let Some([acc, one]) = call_of(&c.result, operators::EQUALS)
            && is_accu(acc)
            && is_int(one, 1)
        {
            return Some(Shape::ExistsOne(p));
        }
        return None;
    }
    if !result_is_accu {
        return None;
    }
    // the step, and its filter when it is `f ? step : @result`
    let (filter, step) = match call_of(&c.loop_step, operators::CONDITIONAL) {
        Some([f, step, same]) if is_accu(same) => (Some(f), step),
        _ => (None, &c.loop_step),
    };
    match &c.accu_init.expr {
        Expr::List(l) if l.elements.is_empty() => {
            // map / filter / transformList: @result + [e]
            if let Some([acc, item]) = call_of(step, operators::ADD)
                && is_accu(acc)
                && let Expr::List(item) = &item.expr
                && let [e] = item.elements.as_slice()
                && item.optional_indices.is_empty()
            {
                return Some(Shape::List(filter, e));
            }
            None
        }
        Expr::Map(m) if m.entries.is_empty() => match call_of(step, MAP_INSERT) {
            Some([acc, key, e])
                if is_accu(acc) && matches!(&key.expr, Expr::Ident(k) if *k == c.iter_var) =>
            {
                Some(Shape::Map(filter, e))
            }
            Some([acc, e]) if is_accu(acc) => Some(Shape::MapEntry(filter, e)),
            _ => None,
        },
        _ => None,
    }
}

/// The builtin a global call is, if it is one.
fn global_builtin(name: &str, args: &[IdedExpr]) -> Option<Builtin> {
    Some(match (name, args.len()) {
        ("size", 1) => Builtin::Size,
        ("matches", 2) => Builtin::Matches(None),
        ("int", 1) => Builtin::ToInt,
        ("uint", 1) => Builtin::ToUint,
        ("double", 1) => Builtin::ToDouble,
        ("string", 1) => Builtin::ToString,
        ("bool", 1) => Builtin::ToBool,
        ("bytes", 1) => Builtin::ToBytes,
        ("dyn", 1) => Builtin::Dyn,
        ("type", 1) => Builtin::TypeOf,
        _ => return None,
    })
}

/// The builtin a method call is, if it is one (`args` without the receiver).
fn method_builtin(name: &str, args: &[IdedExpr]) -> Option<Builtin> {
    Some(match (name, args.len()) {
        ("size", 0) => Builtin::Size,
        ("contains", 1) => Builtin::Contains,
        ("startsWith", 1) => Builtin::StartsWith,
        ("endsWith", 1) => Builtin::EndsWith,
        ("matches", 1) => Builtin::Matches(None),
        ("hasValue", 0) => Builtin::HasValue,
        ("value", 0) => Builtin::OptValue,
        ("or", 1) => Builtin::OptOr,
        ("orValue", 1) => Builtin::OptOrValue,
        _ => return None,
    })
}

/// Whether a field name is an identifier, rather than one only quoting makes a field
/// (`` a.`b-c` ``).
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn literal(lit: &LiteralValue) -> Value {
    match lit {
        LiteralValue::Boolean(b) => Value::Bool(*b.inner()),
        LiteralValue::Bytes(b) => Value::Bytes(Arc::from(b.inner())),
        LiteralValue::Double(d) => Value::Double(*d.inner()),
        LiteralValue::Int(i) => Value::Int(*i.inner()),
        LiteralValue::Null => Value::Null,
        LiteralValue::String(s) => Value::String(Arc::from(s.inner())),
        LiteralValue::UInt(u) => Value::Uint(*u.inner()),
    }
}

fn is_const(n: &Node) -> bool {
    matches!(n.kind, Kind::Const(_))
}

/// Folds a node whose operands are constants into a constant, when evaluating it succeeds
/// within what is left of `budget` (which it spends).
fn fold(node: Node, budget: &mut u64) -> Node {
    let foldable = match &node.kind {
        Kind::Select(a, ..) | Kind::Has(a, _) | Kind::OptSelect(a, _) => is_const(a),
        Kind::Index(a, b) | Kind::OptIndex(a, b) | Kind::Bin(_, a, b) => is_const(a) && is_const(b),
        Kind::Not(a) | Kind::Neg(a) => is_const(a),
        Kind::And(a, b) | Kind::Or(a, b) => is_const(a) && is_const(b),
        Kind::List(items, _) => items.iter().all(is_const),
        Kind::AddChain(c) => c.operands.iter().all(is_const),
        Kind::Map(entries) => entries.iter().all(|(k, v, _)| is_const(k) && is_const(v)),
        Kind::Builtin(_, args) => args.iter().all(is_const),
        Kind::Call(call) => !call.overloads.is_empty() && call.args.iter().all(is_const),
        Kind::Cond(parts) => is_const(&parts.0),
        _ => false,
    };
    if !foldable {
        return node;
    }
    // A conditional on a constant is its branch, whatever the branch is.
    if let Kind::Cond(parts) = node.kind {
        let (c, t, f) = *parts;
        return match &c.kind {
            Kind::Const(Value::Bool(true)) => t,
            Kind::Const(Value::Bool(false)) => f,
            _ => Node {
                id: node.id,
                kind: Kind::Cond(Box::new((c, t, f))),
            },
        };
    }
    let (value, spent) = crate::eval::eval_constant(&node, *budget);
    *budget = budget.saturating_sub(spent);
    match value {
        Some(value) => Node {
            id: node.id,
            kind: Kind::Const(value),
        },
        None => node,
    }
}

/// The number of nodes of a plan: a bound on the cost of evaluating it once when no node
/// runs more than once.
fn count_nodes(node: &Node) -> u64 {
    let children: u64 = match &node.kind {
        Kind::Const(_) | Kind::Global(..) | Kind::Local { .. } | Kind::Fail(_) => 0,
        Kind::Qualified(q) => count_nodes(&q.chain),
        Kind::Select(a, ..)
        | Kind::Has(a, _)
        | Kind::OptSelect(a, _)
        | Kind::Not(a)
        | Kind::Neg(a)
        | Kind::NotStrictlyFalse(a) => count_nodes(a),
        Kind::Index(a, b)
        | Kind::OptIndex(a, b)
        | Kind::And(a, b)
        | Kind::Or(a, b)
        | Kind::Bin(_, a, b) => count_nodes(a) + count_nodes(b),
        Kind::Cond(p) => count_nodes(&p.0) + count_nodes(&p.1) + count_nodes(&p.2),
        Kind::AddChain(c) => {
            c.operands.iter().map(count_nodes).sum::<u64>() + c.ops.len() as u64 - 1
        }
        Kind::List(items, _) | Kind::Builtin(_, items) => items.iter().map(count_nodes).sum(),
        Kind::Map(entries) => entries
            .iter()
            .map(|(k, v, _)| count_nodes(k) + count_nodes(v))
            .sum(),
        Kind::Call(c) => c.args.iter().map(count_nodes).sum(),
        Kind::Custom(c) => c.args.iter().map(count_nodes).sum(),
        Kind::Bind(b) => count_nodes(&b.0) + count_nodes(&b.1),
        Kind::Loop(_) | Kind::Fold(_) => 0,
    };
    children + 1
}
