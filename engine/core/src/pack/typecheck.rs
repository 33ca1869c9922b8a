//! Type-checking a rule's expressions against the CRD schemas, and estimating their cost.

use super::*;

impl Loader<'_> {
    /// Type-checks every expression of a rule against the CRD schemas, in evaluation order,
    /// so each variable's type is known where later expressions read it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn type_check(
        &mut self,
        rule: &str,
        file: &str,
        node: &Node,
        watch: &CompiledWatch,
        lookups: &[CompiledLookup],
        guards: &[CompiledGuard],
        vars: &[CompiledVar],
        steps: &[Step],
        outputs: &[CompiledOutput],
        status: Option<&CompiledStatus>,
        cost_limit: u64,
    ) {
        use cel::check::{Bounds, CostEstimate, ObjectType, Type, TypeEnv};
        let object_type = |api_version: &str, kind: &str| {
            cel::check::object_type_for_kind(self.crds, api_version, kind)
                .unwrap_or_else(|| cel::check::object_type_without_schema(kind))
        };
        let mut env = TypeEnv::new()
            .with_function("decide")
            .with_variable("self", object_type(&watch.api_version, &watch.kind))
            .with_variable(
                "cluster",
                Type::object(ObjectType::new("cluster").with_field("name", Type::String)),
            )
            .with_variable("now", Type::String)
            .with_variable("tables", Type::map(Type::String, Type::list(Type::Dyn)));
        for lookup in lookups {
            let ty = object_type(&lookup.api_version, &lookup.kind);
            let ty = match lookup.key {
                LookupKey::Name(_) => ty,
                LookupKey::Labels(_) => Type::list(ty),
            };
            env.add_variable(&lookup.name, ty);
        }
        let mut vars_type = ObjectType::new("vars");
        env.add_variable("vars", Type::object(vars_type.clone()));
        // Type errors, and warnings about cost: (code, path, message, line, column).
        let mut issues: Vec<(&'static str, String, String, usize, usize)> = Vec::new();
        let mut check = |env: &TypeEnv, expr: &Expr, want_bool: bool| -> (Type, Bounds) {
            let (ty, found) = cel::check::check(&expr.program, env);
            let mut at = |code, message: String, line: usize, column: usize| {
                issues.push((code, expr.path.clone(), message, line, column));
            };
            for issue in found {
                at("cel::type", issue.message, issue.line, issue.column);
            }
            if want_bool && !ty.is_assignable_to(&Type::Bool) {
                at(
                    "cel::type",
                    format!("expected a bool, the expression gives {ty}"),
                    1,
                    1,
                );
            }
            let estimate = cel::check::estimate(&expr.program, env);
            match &estimate.cost {
                CostEstimate::Unbounded {
                    reason,
                    line,
                    column,
                } => at(
                    "cel::cost",
                    format!("the worst-case cost cannot be bounded: {reason}"),
                    *line,
                    *column,
                ),
                CostEstimate::Bounded(cost) if *cost > cost_limit => at(
                    "cel::cost",
                    format!(
                        "the worst-case cost {cost} exceeds the limit {cost_limit} (spec.limits.celCostPerExpression)"
                    ),
                    1,
                    1,
                ),
                CostEstimate::Bounded(_) => {}
            }
            (ty, estimate.result)
        };
        for step in steps {
            match *step {
                Step::Guard(i) => {
                    check(&env, &guards[i].expr, true);
                    if let Some(m) = &guards[i].message_expr {
                        check(&env, m, false);
                    }
                }
                Step::Lookup(i) => {
                    let l = &lookups[i];
                    for e in l.namespace.iter() {
                        check(&env, e, false);
                    }
                    if let Some(e) = &l.when {
                        check(&env, e, true);
                    }
                    match &l.key {
                        LookupKey::Name(e) | LookupKey::Labels(e) => {
                            check(&env, e, false);
                        }
                    }
                }
                Step::Var(i) => {
                    let (ty, bounds) = check(&env, &vars[i].expr, false);
                    vars_type = vars_type.with_bounded_field(vars[i].name.clone(), ty, bounds);
                    env.add_variable("vars", Type::object(vars_type.clone()));
                }
            }
        }
        for output in outputs {
            if let Some(e) = &output.when {
                check(&env, e, true);
            }
            if let Some(e) = &output.for_each {
                check(&env, e, false);
            }
        }
        if let Some(status) = status {
            for (_, e) in &status.fields {
                check(&env, e, false);
            }
            for c in &status.conditions {
                check(&env, &c.status, false);
                check(&env, &c.reason, false);
                if let Some(m) = &c.message {
                    check(&env, m, false);
                }
            }
        }
        for (code, path, message, line, column) in issues {
            let mut d =
                self.expression_diagnostic(code, message, file, rule, node, &path, line, column);
            if code == "cel::cost" {
                // The runtime enforces the limits either way: an estimate only warns.
                d.severity = Severity::Warning;
            }
            self.error(d);
        }
    }
}
