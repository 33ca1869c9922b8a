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
        stages: Option<&CompiledStages>,
        status: Option<&CompiledStatus>,
        cost_limit: u64,
    ) {
        use cel::check::{Bounds, CostEstimate, ObjectType, Type, TypeEnv};
        let kinds = std::iter::once((
            &watch.api_version,
            &watch.kind,
            "spec.watch.kind".to_string(),
        ))
        .chain(
            lookups
                .iter()
                .enumerate()
                .map(|(i, l)| (&l.api_version, &l.kind, format!("spec.lookups[{i}].kind"))),
        );
        // Each kind's type, built once from its CRD; a kind without one is noted once per
        // pack and typed loosely.
        let mut types: BTreeMap<(String, String), Type> = BTreeMap::new();
        for (api_version, kind, path) in kinds {
            let key = (api_version.clone(), kind.clone());
            if types.contains_key(&key) {
                continue;
            }
            // The pack's own trigger (a rule without `watch`): nothing to note.
            if api_version == crate::names::PACK_TRIGGER_API_VERSION
                && kind == crate::names::PACK_TRIGGER_KIND
            {
                types.insert(key, cel::check::object_type_without_schema(kind));
                continue;
            }
            let ty = match cel::check::object_type_for_kind(self.crds, api_version, kind) {
                Some(ty) => ty,
                None => {
                    if self.loosely_typed.insert(key.clone()) {
                        let d = Diagnostic::note(
                            "cel::no-schema",
                            format!(
                                "{kind} ({api_version}) has no CRD schema: its fields other than metadata are typed as dyn, so misspelled fields and wrong types in them are not caught"
                            ),
                        )
                        .at(file, node.closest(&yaml::parse_path(&path)).pos)
                        .in_rule(rule)
                        .with_help(
                            "give its schema as a CRD in a `config/crds/` folder above the pack or with `--crds DIR` (for a built-in kind, a CRD-shaped file holding its OpenAPI schema)",
                        );
                        self.error(d);
                    }
                    // A kind Kubernetes does not serve itself is a custom resource: its name
                    // is bounded even without its CRD.
                    if crate::kinds::built_in(api_version, kind).is_none() {
                        cel::check::custom_object_without_schema(kind)
                    } else {
                        cel::check::object_type_without_schema(kind)
                    }
                }
            };
            types.insert(key, ty);
        }
        let object_type = |api_version: &str, kind: &str| {
            types
                .get(&(api_version.to_string(), kind.to_string()))
                .cloned()
                .unwrap_or_else(|| cel::check::object_type_without_schema(kind))
        };
        // A role is a DNS label; a member name at most 253 bytes (`check_cluster_id`).
        let cluster_type = Type::object(
            ObjectType::new("cluster")
                .with_bounded_field("role", Type::String, Bounds::max(63))
                .with_bounded_field("name", Type::String, Bounds::max(253)),
        );
        // `clusters.<role>`: the sorted member names of each role of the pack, as many as
        // its `maxMembers` says.
        let clusters_type =
            self.roles_max_members
                .iter()
                .fold(ObjectType::new("clusters"), |t, (role, max)| {
                    let names = Bounds::default().with_elements(Bounds::max(253));
                    let bounds = match max {
                        Some(max) => Bounds {
                            max: Some(*max),
                            ..names
                        },
                        None => names,
                    };
                    t.with_bounded_field(role.clone(), Type::list(Type::String), bounds)
                });
        // `tables.<name>` is the list of a table's rows: its size is known.
        let tables_type = Type::object(self.table_rows.iter().fold(
            ObjectType::new("tables"),
            |t, (name, rows)| {
                t.with_bounded_field(name.clone(), Type::list(Type::Dyn), Bounds::max(*rows))
            },
        ));
        let mut env = TypeEnv::new()
            .with_function("decide")
            .with_function("stripClusterMetadata")
            .with_function("nestedField")
            .with_function("goFormat")
            .with_function("keepTime")
            .with_function("setConditions")
            .with_variable("self", object_type(&watch.api_version, &watch.kind))
            .with_variable("cluster", cluster_type.clone())
            .with_variable("clusters", Type::object(clusters_type.clone()))
            .with_variable("now", Type::String)
            .with_variable("tables", tables_type)
            .with_variable(
                "params",
                cel::check::type_from_openapi(&self.params_schema, "params"),
            );
        for lookup in lookups {
            let ty = object_type(&lookup.api_version, &lookup.kind);
            let ty = match (&lookup.key, lookup.all_clusters) {
                (LookupKey::Name(_), false) => ty,
                (LookupKey::Labels(_), false) => Type::list(ty),
                // `{cluster: {role, name}, object}` per member that has a match.
                (_, true) => Type::list(Type::object(
                    ObjectType::new("clusterObject")
                        .with_field("cluster", cluster_type.clone())
                        .with_field("object", ty),
                )),
            };
            // By name in every member: at most one object per member.
            let per_member = match (&lookup.key, lookup.all_clusters) {
                (LookupKey::Name(_), true) => self
                    .roles_max_members
                    .get(&lookup.cluster)
                    .copied()
                    .flatten(),
                _ => None,
            };
            match lookup.max_items.or(per_member) {
                // The pack states the most it finds; evaluation enforces it.
                Some(max) if lookup.finds_list() => {
                    env.add_bounded_variable(&lookup.name, ty, Bounds::max(max));
                }
                _ => env.add_variable(&lookup.name, ty),
            }
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
                // The rule states the most it may cost (at most the pack's limit): evaluation
                // enforces it, so neither an unknown nor a high worst case is worth a warning.
                _ if expr.max_cost.is_some() => {}
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
                    for e in l.namespace.iter().chain(l.cluster_name.iter()) {
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
            if let Some(e) = &output.cluster_name {
                // `item` is the forEach element, typed loosely.
                let mut item_env = env.clone();
                item_env.add_variable("item", Type::Dyn);
                item_env.add_variable("index", Type::Int);
                check(&item_env, e, false);
            }
        }
        if let Some(st) = stages {
            // Stage expressions see `stage` (a definition from data) and, in gates, the
            // observed outputs as `resources`.
            let mut stage_env = env.clone();
            stage_env.add_variable("stage", Type::Dyn);
            if let Some(from) = &st.from {
                check(&env, &from.list, false);
                check(&stage_env, &from.name, false);
                for e in from.gates.iter().chain(from.timeout.iter()) {
                    check(&stage_env, e, false);
                }
            }
            let mut gate_env = stage_env.clone();
            gate_env.add_variable("resources", Type::map(Type::String, Type::Dyn));
            for stage in &st.stages {
                for output in &stage.outputs {
                    for e in output.when.iter().chain(output.for_each.iter()) {
                        check(
                            &stage_env,
                            e,
                            output.when.as_ref().is_some_and(|w| std::ptr::eq(w, e)),
                        );
                    }
                    let mut item_env = stage_env.clone();
                    item_env.add_variable("item", Type::Dyn);
                    item_env.add_variable("index", Type::Int);
                    for e in output.cluster_name.iter().chain(output.bind_as.iter()) {
                        check(&item_env, e, false);
                    }
                }
                for gate in &stage.gates {
                    check(&gate_env, gate, true);
                }
            }
            env.add_variable("stages", Type::map(Type::String, Type::Dyn));
        }
        env.add_variable("missing", Type::list(Type::map(Type::String, Type::Dyn)));
        let mut stop_env = env.clone();
        stop_env.add_variable(
            "stop",
            Type::object(
                ObjectType::new("stop")
                    .with_field("reason", Type::String)
                    .with_field("message", Type::String),
            ),
        );
        let stop_status = status.and_then(|s| s.on_stop.as_deref());
        for (status, env) in status
            .into_iter()
            .map(|s| (s, &env))
            .chain(stop_status.map(|s| (s, &stop_env)))
        {
            for (_, e) in &status.fields {
                check(env, e, false);
            }
            for c in &status.conditions {
                check(env, &c.status, false);
                check(env, &c.reason, false);
                if let Some(m) = &c.message {
                    check(env, m, false);
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
