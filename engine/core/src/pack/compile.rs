//! Compiling a rule: its lookups, guards, variables, outputs and status mapping, with every
//! expression and template reference checked against what the rule defines.

use super::order::{mark_shared, order_steps};
use super::*;

/// CEL's type names are identifiers (`type(x) == int`), not variables a rule must define.
const CEL_TYPE_NAMES: &[&str] = &[
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
];

impl Loader<'_> {
    /// Compiles a CEL expression found at `path` of `node`; reports a syntax error with its
    /// position in the file and a caret under it.
    fn compile_expr(
        &mut self,
        env: &cel::Env,
        file: &str,
        rule: &str,
        node: &Node,
        path: &str,
        source: &str,
    ) -> Option<Expr> {
        match env.compile(source) {
            Ok(program) => {
                let text = self
                    .texts
                    .get(file)
                    .cloned()
                    .unwrap_or_else(|| Arc::from(""));
                let origin = ExprOrigin {
                    file: file.to_string(),
                    text,
                    node: node.closest(&yaml::parse_path(path)).clone(),
                };
                Some(Expr {
                    program,
                    path: path.to_string(),
                    max_cost: None,
                    origin: Some(Arc::new(origin)),
                    label: None,
                    shared_by: None,
                })
            }
            Err(e) => {
                let d = self.expression_diagnostic(
                    "cel::syntax",
                    format!("invalid CEL expression: {}", e.message),
                    file,
                    rule,
                    node,
                    path,
                    e.line,
                    e.column,
                );
                self.error(d);
                None
            }
        }
    }

    /// Compiles a rule's stages; `outputs` are the stages' outputs, compiled with the rule's,
    /// in the order the stages list them.
    fn compile_stages(
        &mut self,
        env: &cel::Env,
        file: &str,
        rule: &str,
        node: &Node,
        stages: &crate::model::Stages,
        outputs: Vec<CompiledOutput>,
    ) -> Option<CompiledStages> {
        let at = |path: &str| node.closest(&yaml::parse_path(path)).pos;
        let mut outputs = outputs.into_iter();
        if stages.items.is_empty() == stages.from.is_none() {
            self.error(
                Diagnostic::error(
                    "pack::invalid-value",
                    "`stages` needs exactly one of `items` (stages written here) and `from` (stages from data)",
                )
                .at(file, at("spec.stages"))
                .in_rule(rule),
            );
            return None;
        }
        let mut compiled = Vec::new();
        let mut names = BTreeSet::new();
        for (j, stage) in stages.items.iter().enumerate() {
            let base = format!("spec.stages.items[{j}]");
            if !names.insert(stage.name.clone()) {
                self.error(
                    Diagnostic::error(
                        "pack::duplicate-name",
                        format!("two stages are named `{}`", stage.name),
                    )
                    .at(file, at(&format!("{base}.name")))
                    .in_rule(rule),
                );
            }
            let timeout = match stage
                .timeout
                .as_deref()
                .map(crate::duration::parse_duration)
            {
                None => None,
                Some(Ok(t)) => Some(t),
                Some(Err(e)) => {
                    self.error(
                        Diagnostic::error("pack::invalid-value", format!("timeout: {e}"))
                            .at(file, at(&format!("{base}.timeout")))
                            .in_rule(rule),
                    );
                    None
                }
            };
            let gates = stage
                .gates
                .iter()
                .enumerate()
                .filter_map(|(g, source)| {
                    self.compile_expr(env, file, rule, node, &format!("{base}.gates[{g}]"), source)
                })
                .collect();
            compiled.push(CompiledStage {
                name: stage.name.clone(),
                outputs: outputs.by_ref().take(stage.outputs.len()).collect(),
                gates,
                timeout,
                cleanup: stage.cleanup,
                from_data: false,
            });
        }
        let from = match &stages.from {
            None => None,
            Some(from) => {
                let base = "spec.stages.from";
                let list =
                    self.compile_expr(env, file, rule, node, &format!("{base}.list"), &from.list);
                let name =
                    self.compile_expr(env, file, rule, node, &format!("{base}.name"), &from.name);
                let gates = from.gates.as_ref().and_then(|g| {
                    self.compile_expr(env, file, rule, node, &format!("{base}.gates"), g)
                });
                let timeout = from.timeout.as_ref().and_then(|t| {
                    self.compile_expr(env, file, rule, node, &format!("{base}.timeout"), t)
                });
                compiled.push(CompiledStage {
                    name: String::new(),
                    outputs: outputs.by_ref().collect(),
                    gates: Vec::new(),
                    timeout: None,
                    cleanup: from.cleanup,
                    from_data: true,
                });
                Some(CompiledStagesFrom {
                    list: list?,
                    name: name?,
                    gates,
                    timeout,
                })
            }
        };
        Some(CompiledStages {
            status_field: stages.status_field.clone(),
            stages: compiled,
            from,
        })
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn compile_rule(
        &mut self,
        pack: &PackDocument,
        env: &cel::Env,
        templates: &TemplateSet,
        file: &str,
        node: &Node,
        document: RuleDocument,
    ) -> Option<CompiledRule> {
        let errors_before = self.error_count();
        let rule = document.metadata.name.clone();
        let spec = &document.spec;
        let at = |path: &str| node.closest(&yaml::parse_path(path)).pos;
        let roles: BTreeMap<&str, &[Access]> = pack
            .spec
            .clusters
            .iter()
            .map(|c| (c.name.as_str(), c.access.as_slice()))
            .collect();
        let need_role =
            |loader: &mut Self, role: &str, access: Access, path: &str| match roles.get(role) {
                None => loader.error(
                    Diagnostic::error(
                        "pack::unknown-cluster",
                        format!("cluster `{role}` is not declared in pack.yaml"),
                    )
                    .at(file, at(path))
                    .in_rule(&rule),
                ),
                Some(access_list) if !access_list.contains(&access) => loader.error(
                    Diagnostic::error(
                        "pack::cluster-access",
                        format!(
                            "cluster `{role}` is not declared with `{}` access in pack.yaml",
                            access_name(access)
                        ),
                    )
                    .at(file, at(path))
                    .in_rule(&rule),
                ),
                Some(_) => {}
            };

        let watch_cluster = spec
            .watch
            .as_ref()
            .and_then(|w| w.cluster.clone())
            .unwrap_or_else(|| pack.spec.source_cluster.clone());
        if spec.watch.is_some() {
            need_role(self, &watch_cluster, Access::Read, "spec.watch.cluster");
        } else if spec.status.is_some() || spec.stages.is_some() {
            // Status and stage progress live in the trigger's status: a pack has none.
            let field = if spec.status.is_some() {
                "status"
            } else {
                "stages"
            };
            self.error(
                Diagnostic::error(
                    "pack::invalid-value",
                    format!(
                        "a rule without `watch` has no trigger to write `{field}` to: it keeps its outputs in place once per pack"
                    ),
                )
                .at(file, at(&format!("spec.{field}")))
                .in_rule(&rule),
            );
        }

        let mut lookups = Vec::new();
        let mut names = BTreeSet::new();
        for (i, lookup) in spec.lookups.iter().enumerate() {
            let base = format!("spec.lookups[{i}]");
            if RESERVED_NAMES.contains(&lookup.name.as_str()) || !is_identifier(&lookup.name) {
                self.error(
                    Diagnostic::error(
                        "pack::invalid-name",
                        format!(
                            "lookup name `{}` must be an identifier other than {}",
                            lookup.name,
                            RESERVED_NAMES.join(", ")
                        ),
                    )
                    .at(file, at(&format!("{base}.name")))
                    .in_rule(&rule),
                );
            }
            if !names.insert(lookup.name.clone()) {
                self.error(
                    Diagnostic::error(
                        "pack::duplicate-name",
                        format!("two lookups are named `{}`", lookup.name),
                    )
                    .at(file, at(&format!("{base}.name")))
                    .in_rule(&rule),
                );
            }
            let cluster = lookup
                .cluster
                .clone()
                .unwrap_or_else(|| watch_cluster.clone());
            need_role(self, &cluster, Access::Read, &format!("{base}.cluster"));
            if cluster == watch_cluster
                && in_workspaces(pack, &cluster)
                && (lookup.all_clusters || lookup.cluster_name.is_some())
            {
                let field = if lookup.all_clusters {
                    "allClusters"
                } else {
                    "clusterName"
                };
                self.error(
                    Diagnostic::error(
                        "pack::cluster-access",
                        format!(
                            "lookup `{}` has `{field}`, but the objects of role `{cluster}` live in workspaces: a trigger's lookups there read its own workspace only",
                            lookup.name
                        ),
                    )
                    .at(file, at(&format!("{base}.{field}")))
                    .in_rule(&rule),
                );
            }
            let namespace = lookup.namespace.as_ref().and_then(|s| {
                self.compile_expr(env, file, &rule, node, &format!("{base}.namespace"), s)
            });
            let when = lookup.when.as_ref().and_then(|s| {
                self.compile_expr(env, file, &rule, node, &format!("{base}.when"), s)
            });
            let cluster_name = lookup.cluster_name.as_ref().and_then(|s| {
                self.compile_expr(env, file, &rule, node, &format!("{base}.clusterName"), s)
            });
            if lookup.cluster_scoped && lookup.namespace.is_some() {
                self.error(
                    Diagnostic::error(
                        "pack::invalid-value",
                        format!(
                            "lookup `{}` has both `namespace` and `clusterScoped`: a cluster-scoped kind has no namespace",
                            lookup.name
                        ),
                    )
                    .at(file, at(&format!("{base}.clusterScoped")))
                    .in_rule(&rule),
                );
            }
            if lookup.all_namespaces
                && (lookup.cluster_scoped
                    || lookup.namespace.is_some()
                    || lookup.object_name.is_some())
            {
                self.error(
                    Diagnostic::error(
                        "pack::invalid-value",
                        format!(
                            "lookup `{}` has `allNamespaces` with `clusterScoped`, `namespace` or `objectName`: it lists a namespaced kind by labels in every namespace",
                            lookup.name
                        ),
                    )
                    .at(file, at(&format!("{base}.allNamespaces")))
                    .in_rule(&rule),
                );
            }
            if let Some(known) = crate::kinds::lookup(self.crds, &lookup.api_version, &lookup.kind)
                && known.scope.is_cluster() != lookup.cluster_scoped
            {
                self.error(
                    super::loader::scope_mismatch(
                        &format!("lookup `{}`", lookup.name),
                        &lookup.api_version,
                        &lookup.kind,
                        known.scope,
                    )
                    .at(file, at(&format!("{base}.kind")))
                    .in_rule(&rule),
                );
            }
            if lookup.cluster_name.is_some() && lookup.all_clusters {
                self.error(
                    Diagnostic::error(
                        "pack::invalid-value",
                        format!(
                            "lookup `{}` has both `clusterName` and `allClusters`: read one member or every member",
                            lookup.name
                        ),
                    )
                    .at(file, at(&format!("{base}.allClusters")))
                    .in_rule(&rule),
                );
            }
            let key = match (&lookup.object_name, &lookup.match_labels) {
                (Some(name), None) => self
                    .compile_expr(env, file, &rule, node, &format!("{base}.objectName"), name)
                    .map(LookupKey::Name),
                (None, Some(labels)) => self
                    .compile_expr(
                        env,
                        file,
                        &rule,
                        node,
                        &format!("{base}.matchLabels"),
                        labels,
                    )
                    .map(LookupKey::Labels),
                _ => {
                    self.error(
                        Diagnostic::error(
                            "pack::invalid-value",
                            format!(
                                "lookup `{}` needs exactly one of `objectName` and `matchLabels`",
                                lookup.name
                            ),
                        )
                        .at(file, at(&base))
                        .in_rule(&rule),
                    );
                    None
                }
            };
            if lookup.max_items.is_some() && lookup.object_name.is_some() && !lookup.all_clusters {
                self.error(
                    Diagnostic::error(
                        "pack::invalid-value",
                        format!(
                            "lookup `{}`: `maxItems` bounds a list; a lookup by `objectName` finds one object",
                            lookup.name
                        ),
                    )
                    .at(file, at(&format!("{base}.maxItems")))
                    .in_rule(&rule),
                );
            }
            if let Some(key) = key {
                let mut key = key;
                let (LookupKey::Name(e) | LookupKey::Labels(e)) = &mut key;
                e.max_cost = lookup.max_cost;
                let cap = |e: Option<Expr>| e.map(|e| e.with_max_cost(lookup.max_cost));
                let (namespace, when, cluster_name) =
                    (cap(namespace), cap(when), cap(cluster_name));
                lookups.push(CompiledLookup {
                    max_items: lookup.max_items,
                    without_namespace: lookup.cluster_scoped || lookup.all_namespaces,
                    name: lookup.name.clone(),
                    cluster,
                    cluster_name,
                    all_clusters: lookup.all_clusters,
                    api_version: lookup.api_version.clone(),
                    kind: lookup.kind.clone(),
                    namespace,
                    key,
                    when,
                    required: lookup.required,
                    reason: lookup
                        .reason
                        .clone()
                        .unwrap_or_else(|| "LookupNotFound".to_string()),
                });
            }
        }

        let mut guards = Vec::new();
        for (i, guard) in spec.when.iter().enumerate() {
            let base = format!("spec.when[{i}]");
            let expr = self.compile_expr(
                env,
                file,
                &rule,
                node,
                &format!("{base}.expression"),
                &guard.expression,
            );
            let message_expr = guard.message_expression.as_ref().and_then(|s| {
                self.compile_expr(
                    env,
                    file,
                    &rule,
                    node,
                    &format!("{base}.messageExpression"),
                    s,
                )
            });
            if let Some(expr) = expr {
                guards.push(CompiledGuard {
                    expr: expr.with_max_cost(guard.max_cost),
                    reason: guard.reason.clone(),
                    message: guard.message.clone(),
                    message_expr: message_expr.map(|e| e.with_max_cost(guard.max_cost)),
                });
            }
        }

        let mut vars = Vec::new();
        let mut var_names = BTreeSet::new();
        for (i, var) in spec.vars.iter().enumerate() {
            let base = format!("spec.vars[{i}]");
            if !is_identifier(&var.name) {
                self.error(
                    Diagnostic::error(
                        "pack::invalid-name",
                        format!("variable name `{}` is not an identifier", var.name),
                    )
                    .at(file, at(&format!("{base}.name")))
                    .in_rule(&rule),
                );
            }
            if !var_names.insert(var.name.clone()) {
                self.error(
                    Diagnostic::error(
                        "pack::duplicate-name",
                        format!("two variables are named `{}`", var.name),
                    )
                    .at(file, at(&format!("{base}.name")))
                    .in_rule(&rule),
                );
            }
            if let Some(expr) = self.compile_expr(
                env,
                file,
                &rule,
                node,
                &format!("{base}.expression"),
                &var.expression,
            ) {
                let mut expr = expr.with_max_cost(var.max_cost);
                expr.label = Some(format!("vars.{}", var.name));
                vars.push(CompiledVar {
                    name: var.name.clone(),
                    key: Arc::from(var.name.as_str()),
                    expr,
                });
            }
        }

        // The rule's outputs, then its stages' outputs: compiled alike, split after.
        let mut output_specs: Vec<(String, &crate::model::Output)> = spec
            .outputs
            .iter()
            .enumerate()
            .map(|(i, o)| (format!("spec.outputs[{i}]"), o))
            .collect();
        if let Some(stages) = &spec.stages {
            for (j, stage) in stages.items.iter().enumerate() {
                for (k, o) in stage.outputs.iter().enumerate() {
                    output_specs.push((format!("spec.stages.items[{j}].outputs[{k}]"), o));
                }
            }
            if let Some(from) = &stages.from {
                for (k, o) in from.outputs.iter().enumerate() {
                    output_specs.push((format!("spec.stages.from.outputs[{k}]"), o));
                }
            }
        }
        let mut outputs = Vec::new();
        for (base, output) in output_specs {
            need_role(
                self,
                &output.cluster,
                Access::Write,
                &format!("{base}.cluster"),
            );
            if !pack.spec.scope.iter().any(|s| s.cluster == output.cluster) {
                self.error(
                    Diagnostic::error(
                        "pack::scope",
                        format!(
                            "output `{}` writes to cluster `{}`, which no scope entry allows",
                            output.name, output.cluster
                        ),
                    )
                    .at(file, at(&format!("{base}.cluster")))
                    .in_rule(&rule),
                );
            }
            if !templates.has_template(&output.template)
                && !self.broken_templates.contains(&output.template)
            {
                self.error(
                    Diagnostic::error(
                        "template::not-found",
                        format!("template `{}` not found under templates/", output.template),
                    )
                    .at(file, at(&format!("{base}.template")))
                    .in_rule(&rule),
                );
            }
            self.check_output_status(&rule, output);
            let when = output.when.as_ref().and_then(|s| {
                self.compile_expr(env, file, &rule, node, &format!("{base}.when"), s)
            });
            let for_each = output.for_each.as_ref().and_then(|s| {
                self.compile_expr(env, file, &rule, node, &format!("{base}.forEach"), s)
            });
            if output.cluster == watch_cluster
                && in_workspaces(pack, &output.cluster)
                && output.cluster_name.is_some()
            {
                self.error(
                    Diagnostic::error(
                        "pack::cluster-access",
                        format!(
                            "output `{}` has `clusterName`, but the objects of role `{}` live in workspaces: a trigger's outputs there go to its own workspace",
                            output.name, output.cluster
                        ),
                    )
                    .at(file, at(&format!("{base}.clusterName")))
                    .in_rule(&rule),
                );
            }
            let cluster_name = output.cluster_name.as_ref().and_then(|s| {
                self.compile_expr(env, file, &rule, node, &format!("{base}.clusterName"), s)
            });
            let bind_as = output.bind_as.as_ref().and_then(|s| {
                self.compile_expr(env, file, &rule, node, &format!("{base}.bindAs"), s)
            });
            if output.bind_as.is_some() && base.starts_with("spec.outputs") {
                self.error(
                    Diagnostic::error(
                        "pack::invalid-value",
                        format!(
                            "output `{}`: `bindAs` names a stage resource; only outputs of stages have it",
                            output.name
                        ),
                    )
                    .at(file, at(&format!("{base}.bindAs")))
                    .in_rule(&rule),
                );
            }
            let cap = |e: Option<Expr>| e.map(|e| e.with_max_cost(output.max_cost));
            let (when, for_each) = (cap(when), cap(for_each));
            outputs.push(CompiledOutput {
                name: output.name.clone(),
                cluster: output.cluster.clone(),
                cluster_name: cap(cluster_name),
                bind_as: cap(bind_as),
                mode: output.mode,
                template: output.template.clone(),
                when,
                for_each,
                adopt: output.adopt,
            });
        }

        let stage_outputs = outputs.split_off(spec.outputs.len().min(outputs.len()));
        let stages = spec
            .stages
            .as_ref()
            .and_then(|stages| self.compile_stages(env, file, &rule, node, stages, stage_outputs));
        if stages.is_some() && spec.write_status {
            need_role(self, &watch_cluster, Access::WriteStatus, "spec.stages");
        }

        let status = spec.status.as_ref().map(|status| {
            let mut compiled = self.compile_status(
                env,
                file,
                &rule,
                node,
                "spec.status",
                &status.fields,
                &status.conditions,
            );
            compiled.on_stop = status.on_stop.as_ref().map(|stop| {
                Box::new(self.compile_status(
                    env,
                    file,
                    &rule,
                    node,
                    "spec.status.onStop",
                    &stop.fields,
                    &stop.conditions,
                ))
            });
            compiled
        });
        if status.is_some() && spec.write_status {
            need_role(self, &watch_cluster, Access::WriteStatus, "spec.status");
        }
        if spec.write_status
            && let Some(w) = &spec.watch
        {
            self.check_status_conditions(file, &rule, node, w, spec.status.as_ref());
        }
        if spec.write_status {
            // Every trigger gets `Synced`, mapping or not (a mapping's own error is above).
            if spec.status.is_none()
                && spec.stages.is_none()
                && roles
                    .get(watch_cluster.as_str())
                    .is_some_and(|access| !access.contains(&Access::WriteStatus))
            {
                self.error(
                    Diagnostic::error(
                        "pack::cluster-access",
                        format!(
                            "the rule writes its triggers' status (the `Synced` condition), but cluster `{watch_cluster}` is not declared with `writeStatus` access in pack.yaml"
                        ),
                    )
                    .at(file, at("spec.watch"))
                    .in_rule(&rule)
                    .with_help(
                        "add `writeStatus` to the cluster's access, or set `writeStatus: false` on the rule to leave its triggers' status alone",
                    ),
                );
            }
        } else {
            for (what, present) in [
                ("spec.status", spec.status.is_some()),
                ("spec.stages", spec.stages.is_some()),
            ] {
                if present {
                    self.error(
                        Diagnostic::error(
                            "pack::invalid-value",
                            format!(
                                "`{what}` is written into the trigger's status, but the rule says `writeStatus: false`"
                            ),
                        )
                        .at(file, at(what))
                        .in_rule(&rule),
                    );
                }
            }
        }

        // Every expression may read only what exists: the rule's names, plus, where they are
        // bound, a forEach element, a stage definition, a stage's observed resources and the
        // stages' progress.
        let lookup_names: BTreeSet<String> = lookups.iter().map(|l| l.name.clone()).collect();
        let mut all_exprs: Vec<(&Expr, &[&str])> = Vec::new();
        for l in &lookups {
            all_exprs.extend(l.namespace.iter().map(|e| (e, &[][..])));
            all_exprs.extend(l.when.iter().map(|e| (e, &[][..])));
            all_exprs.extend(l.cluster_name.iter().map(|e| (e, &[][..])));
            match &l.key {
                LookupKey::Name(e) | LookupKey::Labels(e) => all_exprs.push((e, &[])),
            }
        }
        for g in &guards {
            all_exprs.push((&g.expr, &[]));
            all_exprs.extend(g.message_expr.iter().map(|e| (e, &[][..])));
        }
        all_exprs.extend(vars.iter().map(|v| (&v.expr, &[][..])));
        const ITEM: &[&str] = &["item", "index"];
        const STAGE: &[&str] = &["stage"];
        const STAGE_ITEM: &[&str] = &["stage", "item", "index"];
        fn output_exprs(
            o: &CompiledOutput,
            in_stage: bool,
        ) -> Vec<(&Expr, &'static [&'static str])> {
            let outer: &'static [&'static str] = if in_stage { STAGE } else { &[] };
            let inner: &'static [&'static str] = match (o.for_each.is_some(), in_stage) {
                (true, true) => STAGE_ITEM,
                (true, false) => ITEM,
                (false, true) => STAGE,
                (false, false) => &[],
            };
            let mut found: Vec<(&Expr, &'static [&'static str])> = Vec::new();
            found.extend(o.when.iter().map(|e| (e, outer)));
            found.extend(o.for_each.iter().map(|e| (e, outer)));
            found.extend(o.cluster_name.iter().map(|e| (e, inner)));
            found.extend(o.bind_as.iter().map(|e| (e, inner)));
            found
        }
        for o in &outputs {
            all_exprs.extend(output_exprs(o, false));
        }
        const GATE: &[&str] = &["stage", "resources"];
        if let Some(st) = &stages {
            for stage in &st.stages {
                for o in &stage.outputs {
                    all_exprs.extend(output_exprs(o, stage.from_data));
                }
                all_exprs.extend(stage.gates.iter().map(|e| (e, GATE)));
            }
            if let Some(from) = &st.from {
                all_exprs.push((&from.list, &[]));
                all_exprs.push((&from.name, STAGE));
                all_exprs.extend(from.gates.iter().map(|e| (e, STAGE)));
                all_exprs.extend(from.timeout.iter().map(|e| (e, STAGE)));
            }
        }
        const STATUS: &[&str] = &["missing"];
        const STAGES_STATUS: &[&str] = &["stages", "missing"];
        let progress: &[&str] = if stages.is_some() {
            STAGES_STATUS
        } else {
            STATUS
        };
        const STOP_STATUS: &[&str] = &["stop", "missing"];
        const STOP_STAGES_STATUS: &[&str] = &["stop", "stages", "missing"];
        let stop_progress: &[&str] = if stages.is_some() {
            STOP_STAGES_STATUS
        } else {
            STOP_STATUS
        };
        let stop_status = status.as_ref().and_then(|s| s.on_stop.as_deref());
        for (s, extra) in status
            .iter()
            .map(|s| (s, progress))
            .chain(stop_status.map(|s| (s, stop_progress)))
        {
            all_exprs.extend(s.fields.iter().map(|(_, e)| (e, extra)));
            for c in &s.conditions {
                all_exprs.push((&c.status, extra));
                all_exprs.push((&c.reason, extra));
                all_exprs.extend(c.message.iter().map(|e| (e, extra)));
            }
        }
        // What of the trigger the rule's expressions can read: the trigger is converted to
        // CEL values only that far. Gates from data are compiled when met, and can read
        // anything.
        let data_gates = stages
            .as_ref()
            .is_some_and(|st| st.from.as_ref().is_some_and(|f| f.gates.is_some()));
        let mut self_needed = cel::Needed::default();
        if data_gates {
            self_needed = cel::Needed::Whole;
        }
        for (expr, _) in &all_exprs {
            if let Some(needed) = expr.program.references().fields.get("self") {
                self_needed.join(needed);
            }
        }
        let mut reference_errors = Vec::new();
        // Whether anything reads `clusters`: evaluation builds it only then.
        let mut reads_clusters = false;
        // Roles whose members the rule reads, and where: a test case that gives such a
        // role no members would pass on an empty list.
        let mut member_roles: BTreeMap<String, String> = BTreeMap::new();
        for l in lookups.iter().filter(|l| l.all_clusters) {
            member_roles
                .entry(l.cluster.clone())
                .or_insert_with(|| format!("lookup `{}` reads every member", l.name));
        }
        for (expr, extra) in all_exprs {
            reads_clusters |= expr
                .program
                .references()
                .variables
                .iter()
                .any(|v| v == "clusters");
            for (_, role) in expr
                .program
                .references()
                .selections
                .iter()
                .filter(|(root, _)| root == "clusters")
            {
                member_roles
                    .entry(role.clone())
                    .or_insert_with(|| format!("`{}` reads `clusters.{role}`", expr.path));
            }
            for variable in &expr.program.references().variables {
                let known = [
                    "self", "vars", "cluster", "clusters", "now", "tables", "params",
                ]
                .contains(&variable.as_str())
                    || CEL_TYPE_NAMES.contains(&variable.as_str())
                    || extra.contains(&variable.as_str())
                    || lookup_names.contains(variable);
                if !known {
                    reference_errors.push((
                        expr.path.clone(),
                        expr.source().to_string(),
                        format!("unknown variable `{variable}`"),
                        variable.clone(),
                    ));
                }
            }
            for (root, field) in &expr.program.references().selections {
                if root == "vars" && !var_names.contains(field) {
                    reference_errors.push((
                        expr.path.clone(),
                        expr.source().to_string(),
                        format!("unknown variable `vars.{field}`"),
                        format!("vars.{field}"),
                    ));
                }
            }
        }
        for (path, source, message, needle) in reference_errors {
            let (line, column) = find_in_source(&source, &needle);
            let d = self.expression_diagnostic(
                "cel::unknown-variable",
                message,
                file,
                &rule,
                node,
                &path,
                line,
                column,
            );
            self.error(d);
        }

        // Templates may read only what exists.
        let mut template_outputs: Vec<(&CompiledOutput, bool)> =
            outputs.iter().map(|o| (o, false)).collect();
        if let Some(st) = &stages {
            for stage in &st.stages {
                template_outputs.extend(stage.outputs.iter().map(|o| (o, stage.from_data)));
            }
        }
        // One diagnostic per place in a template, naming every output that uses it.
        let mut unknown: BTreeMap<(String, usize, usize, String), Vec<&str>> = BTreeMap::new();
        for (output, stage_bound) in template_outputs {
            if !templates.has_template(&output.template) {
                continue;
            }
            for reference in templates.referenced_paths(&output.template) {
                let Some(root) = reference.path.first() else {
                    continue;
                };
                reads_clusters |= root == "clusters";
                if root == "clusters"
                    && let Some(role) = reference.path.get(1)
                {
                    member_roles.entry(role.clone()).or_insert_with(|| {
                        format!("template `{}` reads `clusters.{role}`", output.template)
                    });
                }
                let suggestion = |name: &str, known: Vec<String>| match cel::check::suggest(
                    name,
                    known.iter(),
                ) {
                    Some(s) => format!(" (did you mean `{s}`?)"),
                    None => String::new(),
                };
                let problem = match root.as_str() {
                    "self" | "cluster" | "clusters" | "now" | "tables" => None,
                    "params" => match reference.path.get(1) {
                        Some(name)
                            if self
                                .params_schema
                                .pointer(&format!("/properties/{name}"))
                                .is_none() =>
                        {
                            let known: Vec<String> = self
                                .params_schema
                                .get("properties")
                                .and_then(serde_json::Value::as_object)
                                .map(|p| p.keys().cloned().collect())
                                .unwrap_or_default();
                            let hint = suggestion(name, known);
                            Some(format!(
                                "parameter `params.{name}` is not declared in `spec.parameters`{hint}"
                            ))
                        }
                        _ => None,
                    },
                    "item" | "index" if output.for_each.is_some() => None,
                    "stage" if stage_bound => None,
                    "vars" => match reference.path.get(1) {
                        Some(var) if !var_names.contains(var) => {
                            let known = var_names.iter().map(|v| format!("vars.{v}")).collect();
                            let hint = suggestion(&format!("vars.{var}"), known);
                            Some(format!("variable `vars.{var}` is not defined{hint}"))
                        }
                        _ => None,
                    },
                    name if lookup_names.contains(name) => None,
                    name => {
                        let mut known: Vec<String> = [
                            "self", "cluster", "clusters", "now", "tables", "params", "vars",
                        ]
                        .iter()
                        .map(|s| s.to_string())
                        .chain(lookup_names.iter().cloned())
                        .collect();
                        if output.for_each.is_some() {
                            known.extend(["item".to_string(), "index".to_string()]);
                        }
                        let hint = suggestion(name, known);
                        Some(format!("variable `{name}` is not defined{hint}"))
                    }
                };
                if let Some(problem) = problem {
                    unknown
                        .entry((
                            output.template.clone(),
                            reference.line,
                            reference.column,
                            problem,
                        ))
                        .or_default()
                        .push(&output.name);
                }
            }
        }
        for ((template, line, column, problem), users) in unknown {
            let template_file = self.files.display(&format!("templates/{template}"));
            let used_by = match users.as_slice() {
                [one] => format!("output `{one}`"),
                many => format!(
                    "outputs {}",
                    many.iter()
                        .map(|o| format!("`{o}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            self.error(
                Diagnostic::error(
                    "template::unknown-variable",
                    format!("{problem} (template `{template}` used by {used_by})"),
                )
                .at(&template_file, Pos { line, column })
                .in_rule(&rule),
            );
        }

        let steps = match order_steps(&lookups, &guards, &vars) {
            Ok(steps) => {
                mark_shared(&lookups, &mut guards, &mut vars, &steps, CEL_TYPE_NAMES);
                steps
            }
            Err(cycle) => {
                self.error(
                    Diagnostic::error(
                        "pack::cycle",
                        format!(
                            "lookups and variables depend on each other in a cycle: {}",
                            cycle.join(" -> ")
                        ),
                    )
                    .at(file, at("spec"))
                    .in_rule(&rule),
                );
                Vec::new()
            }
        };

        if self.error_count() > errors_before {
            return None;
        }
        let watch = match &spec.watch {
            Some(w) => CompiledWatch {
                cluster: watch_cluster,
                api_version: w.api_version.clone(),
                kind: w.kind.clone(),
                selector: w.selector.clone(),
            },
            None => CompiledWatch {
                cluster: watch_cluster,
                api_version: crate::names::PACK_TRIGGER_API_VERSION.to_string(),
                kind: crate::names::PACK_TRIGGER_KIND.to_string(),
                selector: None,
            },
        };
        self.type_check(
            &rule,
            file,
            node,
            &watch,
            &lookups,
            &guards,
            &vars,
            &steps,
            &outputs,
            stages.as_ref(),
            status.as_ref(),
            pack.cost_per_expression(),
        );
        if self.error_count() > errors_before {
            return None;
        }
        Some(CompiledRule {
            name: rule,
            file: file.to_string(),
            watch,
            lookups,
            guards,
            vars,
            steps,
            outputs,
            stages,
            status,
            deletion: spec.deletion,
            write_status: spec.write_status,
            synced_condition: spec.status.as_ref().is_none_or(|s| s.synced_condition),
            finalizer: spec.finalizer,
            reads_clusters,
            member_roles,
            triggerless: spec.watch.is_none(),
            self_needed,
        })
    }

    /// An output whose template writes `status` goes through the status subresource: its
    /// kind must have one (as Kubernetes' own kinds or the pack's CRDs say; a kind known to
    /// neither is left to the broker's discovery).
    fn check_output_status(&mut self, rule: &str, output: &crate::model::Output) {
        let path = format!("templates/{}", output.template);
        let Some(text) = self.files.files.get(&path) else {
            return;
        };
        let Some(line) = template_status_line(text) else {
            return;
        };
        let Some((api_version, kind)) = literal_kind(text) else {
            return;
        };
        match crate::kinds::lookup(self.crds, &api_version, &kind) {
            Some(known) if !known.status => {
                let display = self.files.display(&path);
                self.error(
                    Diagnostic::error(
                        "pack::invalid-value",
                        format!(
                            "output `{}` writes `status`, but {kind} ({api_version}) has no status subresource to write it through",
                            output.name
                        ),
                    )
                    .at(&display, Pos { line: line + 1, column: 1 })
                    .in_rule(rule)
                    .with_help(
                        "leave `status` out of the template, or give the kind's CRD `subresources: {status: {}}`",
                    ),
                );
            }
            _ => {}
        }
    }

    /// Conditions (the engine's `Synced`, the mapping's) written into a kind whose CRD
    /// declares no `status.conditions` would make the API server refuse every status write.
    fn check_status_conditions(
        &mut self,
        file: &str,
        rule: &str,
        node: &Node,
        watch: &crate::model::Watch,
        status: Option<&crate::model::StatusMapping>,
    ) {
        let synced = status.is_none_or(|s| s.synced_condition);
        let mapped = status.is_some_and(|s| {
            !s.conditions.is_empty() || s.on_stop.as_ref().is_some_and(|o| !o.conditions.is_empty())
        });
        if !(synced || mapped)
            || crate::kinds::status_holds_conditions(self.crds, &watch.api_version, &watch.kind)
                != Some(false)
        {
            return;
        }
        let (what, path, help) = if synced {
            (
                "the engine's `Synced` condition",
                "spec.watch",
                "set `status: {syncedCondition: false}` on the rule (its failures are then Events, logs and metrics only), or `writeStatus: false`, or declare `status.conditions` in the CRD",
            )
        } else {
            (
                "the rule's conditions",
                "spec.status.conditions",
                "leave out the condition mappings, or declare `status.conditions` in the CRD",
            )
        };
        let at = node.closest(&yaml::parse_path(path)).pos;
        self.error(
            Diagnostic::error(
                "pack::invalid-value",
                format!(
                    "{what} would be written into the triggers' `status.conditions`, but the CRD of {} ({}) declares no `status.conditions`: the API server refuses such a status",
                    watch.kind, watch.api_version
                ),
            )
            .at(file, at)
            .in_rule(rule)
            .with_help(help),
        );
    }

    /// A status mapping's fields and conditions (`spec.status` or `spec.status.onStop`).
    #[allow(clippy::too_many_arguments)]
    fn compile_status(
        &mut self,
        env: &cel::Env,
        file: &str,
        rule: &str,
        node: &Node,
        base: &str,
        fields: &BTreeMap<String, String>,
        conditions: &[ConditionMapping],
    ) -> CompiledStatus {
        let mut compiled = CompiledStatus {
            fields: Vec::new(),
            conditions: Vec::new(),
            on_stop: None,
        };
        for (field, source) in fields {
            let path = format!("{base}.fields.{field}");
            if let Some(expr) = self.compile_expr(env, file, rule, node, &path, source) {
                compiled.fields.push((field.clone(), expr));
            }
        }
        for (i, condition) in conditions.iter().enumerate() {
            let path = format!("{base}.conditions[{i}]");
            if let Some(c) = self.compile_condition(env, file, rule, node, &path, condition) {
                compiled.conditions.push(c);
            }
        }
        compiled
    }

    fn compile_condition(
        &mut self,
        env: &cel::Env,
        file: &str,
        rule: &str,
        node: &Node,
        base: &str,
        condition: &ConditionMapping,
    ) -> Option<CompiledCondition> {
        let status = self.compile_expr(
            env,
            file,
            rule,
            node,
            &format!("{base}.status"),
            &condition.status,
        );
        let reason = self.compile_expr(
            env,
            file,
            rule,
            node,
            &format!("{base}.reason"),
            &condition.reason,
        );
        let message = match &condition.message {
            Some(m) => {
                Some(self.compile_expr(env, file, rule, node, &format!("{base}.message"), m)?)
            }
            None => None,
        };
        Some(CompiledCondition {
            type_: condition.type_.clone(),
            status: status?,
            reason: reason?,
            message,
        })
    }
}

fn access_name(access: Access) -> &'static str {
    match access {
        Access::Read => "read",
        Access::Write => "write",
        Access::WriteStatus => "writeStatus",
    }
}

/// 1-based (line, column) of the first occurrence of `needle` as a whole identifier path in
/// `source`, or (1, 1).
fn find_in_source(source: &str, needle: &str) -> (usize, usize) {
    let bytes = source.as_bytes();
    let mut start = 0;
    while let Some(found) = source[start..].find(needle) {
        let at = start + found;
        let before_ok = at == 0 || !is_ident_byte(bytes[at - 1]) && bytes[at - 1] != b'.';
        let end = at + needle.len();
        let after_ok = end >= bytes.len() || !is_ident_byte(bytes[end]);
        if before_ok && after_ok {
            let line = source[..at].matches('\n').count() + 1;
            let line_start = source[..at].rfind('\n').map(|i| i + 1).unwrap_or(0);
            let column = source[line_start..at].chars().count() + 1;
            return (line, column);
        }
        start = at + needle.len().max(1);
    }
    (1, 1)
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The pack declares that the objects of `role` live in workspaces.
fn in_workspaces(pack: &PackDocument, role: &str) -> bool {
    pack.spec
        .clusters
        .iter()
        .any(|c| c.name == role && c.workspaces.is_some())
}

#[cfg(test)]
mod tests {
    use super::find_in_source;

    #[test]
    fn find_identifier_in_source() {
        assert_eq!(find_in_source("a.vars.x + vars.x", "vars.x"), (1, 12));
        assert_eq!(find_in_source("1 +\n  fleet.x", "fleet"), (2, 3));
    }
}
