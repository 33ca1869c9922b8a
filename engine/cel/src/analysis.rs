//! What a compiled expression reads ([`References`]), how deep it nests, and which of its
//! calls are outside the environment, found by walking the `cel` AST.

use std::collections::{BTreeMap, BTreeSet};

use cel::IdedExpr;
use cel::common::ast::{EntryExpr, Expr, LiteralValue, operators};

use crate::builtins::FULL_REGISTRY;
use crate::environment::{CelEnvironment, GATED_MACROS};
use crate::registry::{CustomFunction, Registry};
use crate::value::Needed;

/// What an expression reads: root variables, and `root.field` selections (such as
/// `vars.namespace`) so the engine can order variables and lookups by dependency.
///
/// `variables` are the free identifiers: comprehension variables (`c` in
/// `x.exists(c, c.y)`) are not, nor are function namespaces (`optional` in
/// `optional.of(x)`). `selections` has `(root, field)` for every field selected directly on
/// a free identifier: `vars.namespace`, `has(vars.x)`, `vars.?x`, and the index forms
/// `vars['x']` and `vars[?'x']` with a string literal. `whole` has the free identifiers
/// also read otherwise, as values of their own (`vars` in `size(vars)` or `[vars]`): an
/// identifier missing from it is read only through the fields `selections` names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct References {
    pub variables: BTreeSet<String>,
    pub selections: BTreeSet<(String, String)>,
    pub whole: BTreeSet<String>,
    /// For each free identifier, which of its fields the expression can read (see
    /// [`Needed`]): what a value bound under that name must hold for the expression to
    /// evaluate as it would with the whole value.
    pub fields: BTreeMap<String, Needed>,
}

/// What decides whether a call is in the environment.
pub(crate) struct Gate<'a> {
    pub environment: &'a CelEnvironment,
    /// The environment's overloads.
    pub registry: &'a Registry,
    pub custom: &'a [(String, CustomFunction)],
}

/// Whether a function is in the environment.
enum Status {
    Available,
    /// Not in the environment: the message says what has it.
    Missing(String),
    /// No library has it: a method of a value, an undeclared function (which fails when
    /// called, as before), a builtin of the evaluator.
    Unknown,
}

impl Gate<'_> {
    fn status(&self, name: &str, receiver: bool, arity: usize) -> Status {
        if let Some((_, _, arity_said, library)) = GATED_MACROS
            .iter()
            .find(|(n, r, a, _)| *n == name && *r == receiver && a.is_none_or(|a| a == arity))
        {
            // The parser expands the macro when the environment has it: the call is left
            // only when it does not.
            if !self.environment.has(*library) {
                return Status::Missing(self.environment.unavailable(
                    name,
                    arity_said.filter(|_| receiver),
                    &[*library].into(),
                ));
            }
        }
        if self.registry.lookup(name, receiver).is_some()
            || self.custom.iter().any(|(n, _)| n == name)
        {
            return Status::Available;
        }
        let libraries = FULL_REGISTRY.libraries(name, receiver);
        if libraries.is_empty() {
            Status::Unknown
        } else {
            Status::Missing(self.environment.unavailable(name, None, &libraries))
        }
    }
}

/// The result of walking an expression.
#[derive(Debug, Default)]
pub(crate) struct Analysis {
    pub references: References,
    /// The depth of the AST (a literal alone is 1).
    pub depth: usize,
    /// The calls of functions that are not in the environment: the call's id, the
    /// function name as written and the message.
    pub unavailable: Vec<(u64, String, String)>,
}

/// Walks `expr`. `namespaces` are the first segments of the qualified function names
/// (`optional` of `optional.of`): `optional.of(x)` reads no variable `optional`.
pub(crate) fn analyse(expr: &IdedExpr, namespaces: &BTreeSet<String>, gate: &Gate<'_>) -> Analysis {
    let mut walker = Walker {
        namespaces,
        gate,
        bound: Vec::new(),
        analysis: Analysis::default(),
    };
    walker.walk(expr, 1);
    let mut paths = Paths {
        namespaces,
        bound: Vec::new(),
        fields: BTreeMap::new(),
    };
    paths.visit(expr);
    walker.analysis.references.fields = paths.fields;
    walker.analysis
}

/// Finds the fields each free identifier is read through ([`Needed`]).
struct Paths<'a> {
    namespaces: &'a BTreeSet<String>,
    /// Comprehension variables in scope, innermost last.
    bound: Vec<&'a str>,
    fields: BTreeMap<String, Needed>,
}

impl<'a> Paths<'a> {
    fn free(&self, name: &str) -> bool {
        !self.bound.contains(&name)
    }

    fn need(&mut self, root: &str, path: &[String], leaf: Needed) {
        self.fields
            .entry(root.to_string())
            .or_default()
            .add(path, leaf);
    }

    /// `expr` as a free identifier and the literal fields selected on it, if it is one.
    fn chain(&self, expr: &'a IdedExpr) -> Option<(&'a str, Vec<String>)> {
        match &expr.expr {
            Expr::Ident(name) if self.free(name) => {
                Some((name.trim_start_matches('.'), Vec::new()))
            }
            Expr::Select(select) if !select.test => {
                let (root, mut path) = self.chain(&select.operand)?;
                path.push(select.field.clone());
                Some((root, path))
            }
            Expr::Call(call)
                if call.target.is_none()
                    && matches!(
                        call.func_name.as_str(),
                        operators::INDEX | operators::OPT_INDEX | operators::OPT_SELECT
                    ) =>
            {
                let [operand, key] = call.args.as_slice() else {
                    return None;
                };
                let Expr::Literal(LiteralValue::String(field)) = &key.expr else {
                    return None;
                };
                let (root, mut path) = self.chain(operand)?;
                path.push(field.inner().to_string());
                Some((root, path))
            }
            _ => None,
        }
    }

    /// Whether `target`, the target of a call, is the namespace of a qualified function
    /// name (`optional` in `optional.of(x)`), as [`Walker::is_namespace`] tells.
    fn is_namespace(&self, target: &IdedExpr) -> bool {
        let mut expr = target;
        loop {
            match &expr.expr {
                Expr::Ident(name) => {
                    return self.free(name)
                        && self.namespaces.contains(name.trim_start_matches('.'));
                }
                Expr::Select(select) if !select.test => expr = &select.operand,
                _ => return false,
            }
        }
    }

    fn visit(&mut self, expr: &'a IdedExpr) {
        if let Some((root, path)) = self.chain(expr) {
            self.need(root, &path, Needed::Whole);
            return;
        }
        match &expr.expr {
            Expr::Unspecified | Expr::Literal(_) | Expr::Ident(_) => {}
            Expr::Select(select) => {
                // `has(a.b)`: whether `b` is there; any other select is on a value made.
                if select.test
                    && let Some((root, mut path)) = self.chain(&select.operand)
                {
                    path.push(select.field.clone());
                    self.need(root, &path, Needed::Present);
                } else {
                    self.visit(&select.operand);
                }
            }
            Expr::Call(call) => {
                if let Some(target) = &call.target
                    && !self.is_namespace(target)
                {
                    self.visit(target);
                }
                for arg in &call.args {
                    self.visit(arg);
                }
            }
            Expr::Comprehension(c) => {
                self.visit(&c.iter_range);
                self.visit(&c.accu_init);
                let outer = self.bound.len();
                self.bound.push(&c.accu_var);
                self.bound.push(&c.iter_var);
                if let Some(var2) = &c.iter_var2 {
                    self.bound.push(var2);
                }
                self.visit(&c.loop_cond);
                self.visit(&c.loop_step);
                self.bound.truncate(outer + 1);
                self.visit(&c.result);
                self.bound.truncate(outer);
            }
            Expr::List(list) => {
                for element in &list.elements {
                    self.visit(element);
                }
            }
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(entry) = &entry.expr {
                        self.visit(&entry.key);
                        self.visit(&entry.value);
                    }
                }
            }
            Expr::Struct(s) => {
                for entry in &s.entries {
                    if let EntryExpr::StructField(field) = &entry.expr {
                        self.visit(&field.value);
                    }
                }
            }
        }
    }
}

struct Walker<'a> {
    namespaces: &'a BTreeSet<String>,
    gate: &'a Gate<'a>,
    /// Comprehension variables in scope, innermost last.
    bound: Vec<&'a str>,
    analysis: Analysis,
}

impl<'a> Walker<'a> {
    fn is_free(&self, name: &str) -> bool {
        !self.bound.contains(&name)
    }

    /// The free root identifier `expr` is, if it is one (`y` of `.y`, which is never a
    /// comprehension variable).
    fn free_root(&self, expr: &'a IdedExpr) -> Option<&'a str> {
        match &expr.expr {
            Expr::Ident(name) if self.is_free(name) => Some(name.trim_start_matches('.')),
            _ => None,
        }
    }

    fn select(&mut self, operand: &'a IdedExpr, field: &str) {
        if let Some(root) = self.free_root(operand) {
            self.analysis
                .references
                .selections
                .insert((root.to_string(), field.to_string()));
        }
    }

    fn walk(&mut self, expr: &'a IdedExpr, depth: usize) {
        self.analysis.depth = self.analysis.depth.max(depth);
        let next = depth + 1;
        match &expr.expr {
            Expr::Unspecified | Expr::Literal(_) => {}
            Expr::Ident(_) => {
                if let Some(name) = self.free_root(expr) {
                    self.analysis.references.variables.insert(name.to_string());
                    self.analysis.references.whole.insert(name.to_string());
                }
            }
            Expr::Select(select) => {
                self.select(&select.operand, &select.field);
                self.walk_selected(&select.operand, next);
            }
            Expr::Call(call) => {
                let name = call.func_name.as_str();
                self.gate_call(expr.id, name, call.target.as_deref(), call.args.len());
                // `vars['x']`, `vars[?'x']` and `vars.?x` select `x` on `vars` too.
                let mut selected = None;
                if matches!(
                    name,
                    operators::INDEX | operators::OPT_INDEX | operators::OPT_SELECT
                ) && let [operand, key] = call.args.as_slice()
                    && let Expr::Literal(LiteralValue::String(field)) = &key.expr
                {
                    self.select(operand, field.inner());
                    selected = Some(operand);
                }
                if let Some(target) = &call.target
                    && !self.is_namespace(target)
                {
                    self.walk(target, next);
                }
                for arg in &call.args {
                    if selected.is_some_and(|s| std::ptr::eq(s, arg)) {
                        self.walk_selected(arg, next);
                    } else {
                        self.walk(arg, next);
                    }
                }
            }
            Expr::Comprehension(c) => {
                self.walk(&c.iter_range, next);
                self.walk(&c.accu_init, next);
                let outer = self.bound.len();
                self.bound.push(&c.accu_var);
                self.bound.push(&c.iter_var);
                if let Some(var2) = &c.iter_var2 {
                    self.bound.push(var2);
                }
                self.walk(&c.loop_cond, next);
                self.walk(&c.loop_step, next);
                self.bound.truncate(outer + 1);
                self.walk(&c.result, next);
                self.bound.truncate(outer);
            }
            Expr::List(list) => {
                for element in &list.elements {
                    self.walk(element, next);
                }
            }
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(entry) = &entry.expr {
                        self.walk(&entry.key, next);
                        self.walk(&entry.value, next);
                    }
                }
            }
            Expr::Struct(s) => {
                for entry in &s.entries {
                    if let EntryExpr::StructField(field) = &entry.expr {
                        self.walk(&field.value, next);
                    }
                }
            }
        }
    }

    /// Walks the operand of a field selection: a free identifier there is read through the
    /// selection, not whole.
    fn walk_selected(&mut self, operand: &'a IdedExpr, depth: usize) {
        match self.free_root(operand) {
            Some(name) => {
                self.analysis.depth = self.analysis.depth.max(depth);
                self.analysis.references.variables.insert(name.to_string());
            }
            None => self.walk(operand, depth),
        }
    }

    /// Refuses the call when it is not in the environment: as a qualified name
    /// (`math.abs`) when the target is a namespace that has it, else as a method or a
    /// global function.
    fn gate_call(&mut self, id: u64, name: &str, target: Option<&IdedExpr>, arity: usize) {
        let mut candidates = Vec::with_capacity(2);
        if let Some(target) = target {
            if let Some(namespace) = self.namespace_name(target) {
                candidates.push((format!("{namespace}.{name}"), false));
            }
            candidates.push((name.to_string(), true));
        } else {
            candidates.push((name.to_string(), false));
        }
        for (name, receiver) in candidates {
            match self.gate.status(&name, receiver, arity) {
                Status::Available => return,
                Status::Missing(message) => {
                    self.analysis.unavailable.push((id, name, message));
                    return;
                }
                Status::Unknown => {}
            }
        }
    }

    /// The dotted name of `target` when it is a namespace (`math`, `format`).
    fn namespace_name(&self, target: &IdedExpr) -> Option<String> {
        if !self.is_namespace(target) {
            return None;
        }
        let mut segments = Vec::new();
        let mut expr = target;
        loop {
            match &expr.expr {
                Expr::Ident(name) => {
                    segments.push(name.trim_start_matches('.'));
                    break;
                }
                Expr::Select(select) => {
                    segments.push(select.field.as_str());
                    expr = &select.operand;
                }
                _ => return None,
            }
        }
        segments.reverse();
        Some(segments.join("."))
    }

    /// Whether `target`, the target of a call, is the namespace of a qualified function
    /// name (`optional` in `optional.of(x)`) rather than a value.
    fn is_namespace(&self, target: &IdedExpr) -> bool {
        let mut expr = target;
        loop {
            match &expr.expr {
                Expr::Ident(name) => {
                    return self.is_free(name)
                        && self.namespaces.contains(name.trim_start_matches('.'));
                }
                Expr::Select(select) if !select.test => expr = &select.operand,
                _ => return false,
            }
        }
    }
}
