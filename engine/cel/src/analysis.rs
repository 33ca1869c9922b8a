//! What a compiled expression reads, found by walking the `cel` AST.

use std::collections::BTreeSet;

use cel::IdedExpr;
use cel::common::ast::{EntryExpr, Expr, LiteralValue, operators};

use crate::References;
use crate::registry::Registry;

/// Functions the `cel` crate ships in a library we enable, which Kubernetes' CEL environment
/// does not have: a call is a compile error, so that rules stay portable.
///
/// `reverse()` on strings is in cel-go's strings library from version 3 only; Kubernetes
/// enables version 2.
const NOT_IN_KUBERNETES: &[(&str, &str)] = &[(
    "reverse",
    "'reverse' is not available: Kubernetes' strings library (version 2) does not have it",
)];

/// The result of walking an expression.
#[derive(Debug, Default)]
pub(crate) struct Analysis {
    pub references: References,
    /// The depth of the AST (a literal alone is 1).
    pub depth: usize,
    /// The first call of a function that is not available: the call's id, the function
    /// name and the message.
    pub unavailable: Option<(u64, String, String)>,
}

/// Walks `expr`. `namespaces` are the first segments of the qualified function names
/// (`optional` of `optional.of`): `optional.of(x)` reads no variable `optional`.
pub(crate) fn analyse(
    expr: &IdedExpr,
    namespaces: &BTreeSet<String>,
    registry: &Registry,
) -> Analysis {
    let mut walker = Walker {
        namespaces,
        registry,
        bound: Vec::new(),
        analysis: Analysis::default(),
    };
    walker.walk(expr, 1);
    walker.analysis
}

struct Walker<'a> {
    namespaces: &'a BTreeSet<String>,
    /// A function of [`NOT_IN_KUBERNETES`] that the registry has after all (a list
    /// library's `reverse`) is not refused.
    registry: &'a Registry,
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
                }
            }
            Expr::Select(select) => {
                self.select(&select.operand, &select.field);
                self.walk(&select.operand, next);
            }
            Expr::Call(call) => {
                let name = call.func_name.as_str();
                if self.analysis.unavailable.is_none()
                    && call.target.is_some()
                    && let Some((_, message)) = NOT_IN_KUBERNETES
                        .iter()
                        .find(|(f, _)| *f == name && call.args.is_empty())
                    && self.registry.lookup(name, true).is_none()
                {
                    self.analysis.unavailable =
                        Some((expr.id, name.to_string(), (*message).to_string()));
                }
                // `vars['x']`, `vars[?'x']` and `vars.?x` select `x` on `vars` too.
                if matches!(
                    name,
                    operators::INDEX | operators::OPT_INDEX | operators::OPT_SELECT
                ) && let [operand, key] = call.args.as_slice()
                    && let Expr::Literal(LiteralValue::String(field)) = &key.expr
                {
                    self.select(operand, field.inner());
                }
                if let Some(target) = &call.target
                    && !self.is_namespace(target)
                {
                    self.walk(target, next);
                }
                for arg in &call.args {
                    self.walk(arg, next);
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
