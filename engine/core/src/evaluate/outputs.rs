//! A rule's outputs: each rendered (once or per `forEach` element) into the cluster it targets,
//! checked against the pack's scope and the kinds' schemas, stamped with its ownership, and
//! joined with another rendering of the same object by this trigger.

use std::collections::{BTreeSet, HashMap};

use serde_json::{Value, json};
use switchyard_cel as cel;

use crate::model::OutputMode;
use crate::names::REASON_CONFLICT;
use crate::object::{ObjectKey, cluster_id, split_cluster};
use crate::outcome::{DesiredObject, ReadKey, RuleError};
use crate::ownership::{absorb, stamp_merged, stamp_ownership};
use crate::pack::{CompiledOutput, CompiledRule, Pack, in_scope};
use crate::template::{CelMap, Held, RenderContext};

use super::bindings::Bindings;
use super::context::{EvalContext, Stop, plural};
use super::status::RuleResult;

impl<'a> EvalContext<'a> {
    /// One object rendered twice by this trigger (a `forEach` with a repeated item, two
    /// outputs naming the same object) is one output when both agree; when they differ the
    /// first stays, and the trigger reports the conflict as an error of the later output.
    pub(super) fn join_duplicate_outputs(&mut self) -> Option<RuleResult> {
        let desired = std::mem::take(&mut self.outcome.desired);
        let mut joined: Vec<DesiredObject> = Vec::with_capacity(desired.len());
        let mut conflict = None;
        // Most triggers render a handful of objects: a scan beats hashing every key. A long
        // `forEach` gets an index.
        let mut index: Option<HashMap<ObjectKey, usize>> =
            (desired.len() > 16).then(|| HashMap::with_capacity(desired.len()));
        for d in desired {
            let found = match &index {
                Some(index) => index.get(&d.key).copied(),
                None => joined.iter().position(|j| j.key == d.key),
            };
            let Some(i) = found else {
                if let Some(index) = &mut index {
                    index.insert(d.key.clone(), joined.len());
                }
                joined.push(d);
                continue;
            };
            let first = &mut joined[i];
            let first_sources = first.sources.iter().cloned().collect::<Vec<_>>().join(", ");
            if absorb(first, &d).is_ok() {
                stamp_merged(self.pack.name(), &self.pack.version_text, first);
                continue;
            }
            let later = d.sources.iter().cloned().collect::<Vec<_>>().join(", ");
            let message = format!(
                "`{}` is rendered twice with different contents, by {first_sources} and by {later}; kept the first",
                d.key
            );
            let rule = later.split('/').next().unwrap_or_default().to_string();
            self.outcome.errors.push(RuleError {
                rule,
                path: "spec.outputs".into(),
                expression: None,
                message: message.clone(),
                location: None,
            });
            conflict.get_or_insert(RuleResult::Blocked {
                reason: REASON_CONFLICT.into(),
                message,
                status: None,
            });
        }
        self.outcome.desired = joined;
        conflict
    }

    /// Renders one output (once, or once per `forEach` element) into `rendered`; `bound`
    /// gets each object's key under its `bindAs` name, for stage gates.
    pub(super) fn render_output(
        &mut self,
        rule: &CompiledRule,
        output: &CompiledOutput,
        bindings: &Bindings,
        context: &mut RenderContext<'_>,
        rendered: &mut Vec<DesiredObject>,
        bound: &mut Vec<(String, ObjectKey)>,
    ) -> Result<(), Stop> {
        let name = rule.name.as_str();
        if !self.when_holds(name, output.when.as_ref(), bindings, || {
            format!("output {}", output.name)
        })? {
            return Ok(());
        }
        let items: Vec<Option<Value>> = match &output.for_each {
            None => vec![None],
            Some(expr) => {
                let (value, json) = self.eval_json(name, expr, bindings, None)?;
                let Value::Array(elements) = json else {
                    return Err(self.fail_expr(
                        name,
                        expr,
                        format!("forEach must return a list, got {}", value.type_name()),
                    ));
                };
                elements.into_iter().map(Some).collect()
            }
        };
        let count = items.len();
        for (index, item) in items.into_iter().enumerate() {
            // `clusterName` and `bindAs` may read the element.
            let item_cel = item.as_ref().map(cel::Value::from_json);
            let element = item_cel.as_ref().map(|v| (v, index));
            let member = match &output.cluster_name {
                None => None,
                Some(expr) => Some(self.eval_string_with(name, expr, bindings, element)?),
            };
            let bind_name = match &output.bind_as {
                None => output.name.clone(),
                Some(expr) => self.eval_string_with(name, expr, bindings, element)?,
            };
            let cluster = self.target_cluster(
                name,
                &|| format!("output `{}`", output.name),
                &output.cluster,
                member,
            )?;
            if let Some(item) = item {
                context.set("item", Held::Owned(item));
                context.set("index", Held::Owned(json!(index)));
            }
            let documents = self
                .pack
                .templates
                .render_in(&output.template, context)
                .map_err(|e| {
                    self.fail(
                        name,
                        &format!("output `{}`", output.name),
                        None,
                        e.to_string(),
                    )
                })?;
            for document in documents {
                if let Some(desired) = self.output(rule, output, &cluster, document)? {
                    bound.push((bind_name.clone(), desired.key.clone()));
                    rendered.push(desired);
                }
            }
        }
        context.unset("item");
        context.unset("index");
        if self.traced {
            self.trace(
                name,
                format!("output {}", output.name),
                None,
                format!(
                    "rendered {} with {}",
                    output.template,
                    plural(count, "item")
                ),
            );
        }
        Ok(())
    }

    /// The cluster a lookup reads or an output goes to: the member `name` of `role` when
    /// given; otherwise the trigger's own cluster when `role` is its role, or the role's only
    /// cluster.
    pub(super) fn target_cluster(
        &mut self,
        rule: &str,
        path: &dyn Fn() -> String,
        role: &str,
        name: Option<String>,
    ) -> Result<String, Stop> {
        // The common case first, without asking the world: the trigger's own role.
        let (trigger_role, _) = split_cluster(self.trigger_cluster);
        if name.is_none() && trigger_role == role {
            return Ok(self.trigger_cluster.to_string());
        }
        let members = self.world.members(role);
        let listed = || {
            if members.is_empty() {
                "the role has no known clusters; in `render` and `test` an input's `switchyard.dev/cluster` annotation, a test case's `clusters` or `--clusters FILE` name them".to_string()
            } else {
                format!(
                    "its clusters: {}",
                    members
                        .iter()
                        .map(|m| format!("`{}`", cluster_id(role, m)))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        };
        let problem = match name {
            Some(name) => {
                let unnamed_ok = name.is_empty() && members.iter().all(String::is_empty);
                if unnamed_ok || members.contains(&name) {
                    return Ok(cluster_id(role, &name));
                }
                format!(
                    "cluster `{}` is not a member of role `{role}` ({})",
                    cluster_id(role, &name),
                    listed()
                )
            }
            None => match members.as_slice() {
                [] => return Ok(role.to_string()),
                [only] => return Ok(cluster_id(role, only)),
                _ => format!(
                    "role `{role}` has {} clusters: name one with `clusterName` ({})",
                    members.len(),
                    listed()
                ),
            },
        };
        Err(self.fail(rule, &path(), None, problem))
    }

    /// The template context of a rule: built once, outputs add `item` and `index`. Nothing
    /// large is copied: the trigger and the tables are borrowed, lookups shared.
    pub(super) fn template_context(&self, bindings: &Bindings) -> RenderContext<'a> {
        let (trigger, pack): (&'a Value, &'a Pack) = (self.trigger, self.pack);
        let mut context = RenderContext::default();
        context.set("self", Held::Borrowed(trigger));
        context.set("cluster", Held::Shared(self.cluster_json.clone()));
        context.set("clusters", Held::Shared(self.clusters_json.clone()));
        context.set("now", Held::Shared(self.now_json.clone()));
        context.set(
            "vars",
            Held::Cel(CelMap::new(bindings.vars.iter().cloned())),
        );
        context.set("tables", Held::Borrowed(&pack.tables_json));
        context.set("params", Held::Borrowed(&pack.params_json));
        for (name, (_, json)) in &bindings.lookups {
            context.set(name, Held::Shared(json.clone()));
        }
        context
    }

    /// Checks a rendered object against the pack's scope and stamps ownership on it; a
    /// patch of an object that does not exist is no output (the trigger's `Synced` says so).
    fn output(
        &mut self,
        rule: &CompiledRule,
        output: &CompiledOutput,
        cluster: &str,
        mut object: Value,
    ) -> Result<Option<DesiredObject>, Stop> {
        let name = rule.name.as_str();
        let path = format!("output `{}`", output.name);
        let key = match ObjectKey::of(cluster, &object) {
            Ok(key) => key,
            Err(e) => {
                return Err(self.fail(
                    name,
                    &path,
                    None,
                    format!("rendered object is invalid: {e}"),
                ));
            }
        };
        if !in_scope(
            &self.pack.spec().scope,
            key.role(),
            &key.api_version,
            &key.kind,
            key.namespace.as_deref(),
        ) {
            // A namespaced kind without a namespace, or a cluster-scoped one with one, is a
            // mistake of the template, not a tenant reaching outside the scope: say so.
            let declared = |cluster_scoped: bool| {
                self.pack.spec().scope.iter().any(|entry| {
                    entry.cluster == key.role()
                        && entry.kinds.iter().any(|k| {
                            k.api_version == key.api_version
                                && k.kind == key.kind
                                && k.cluster_scoped == cluster_scoped
                        })
                })
            };
            let namespaced = key.namespace.is_none() && declared(false);
            let cluster_scoped = key.namespace.is_some() && declared(true);
            let message = match &key.namespace {
                Some(ns) if cluster_scoped => format!(
                    "{} {} `{}` has namespace `{ns}`, but {} is cluster-scoped in cluster `{cluster}`: remove metadata.namespace from the template",
                    key.api_version, key.kind, key.name, key.kind
                ),
                None if namespaced => format!(
                    "{} {} `{}` has no namespace, but the pack's scope has {} as namespaced in cluster `{cluster}`: set metadata.namespace in the template",
                    key.api_version, key.kind, key.name, key.kind
                ),
                Some(ns) => format!(
                    "{} {} `{}` in namespace `{ns}` of cluster `{cluster}` is outside the pack's scope",
                    key.api_version, key.kind, key.name
                ),
                None => format!(
                    "{} {} `{}` in cluster scope of cluster `{cluster}` is outside the pack's scope",
                    key.api_version, key.kind, key.name
                ),
            };
            if self.traced {
                self.trace(name, &path, None, format!("refused: {message}"));
            }
            self.outcome.errors.push(RuleError {
                rule: name.to_string(),
                path: path.clone(),
                expression: None,
                message: message.clone(),
                location: None,
            });
            return Err(Stop::Block {
                reason: "ScopeViolation".into(),
                message,
            });
        }
        // What the API server would refuse is an error here, naming the output and the field.
        let violations = match output.mode {
            OutputMode::Apply | OutputMode::Create => self.pack.validator.validate(&object),
            // A patch holds only some fields: its labels and annotations are checked.
            OutputMode::Patch => self.pack.validator.validate_metadata(&object),
        };
        if !violations.is_empty() {
            let listed: Vec<String> = violations.iter().map(ToString::to_string).collect();
            return Err(self.fail(
                name,
                &path,
                None,
                format!(
                    "{} `{}` in cluster `{}` is invalid: {}",
                    key.kind,
                    key.namespaced_name(),
                    key.cluster,
                    listed.join("; ")
                ),
            ));
        }
        let source = format!("{}/{}", rule.name, output.name);
        let owner = self.owner().to_owned();
        match output.mode {
            OutputMode::Apply | OutputMode::Create => stamp_ownership(
                &mut object,
                self.pack.name(),
                &self.pack.version_text,
                &source,
                &owner,
            ),
            OutputMode::Patch => {
                // Never created: the patch waits for its target, and its appearance
                // re-evaluates the trigger.
                self.read(|| ReadKey::Object(key.clone()));
                let exists = self.world.get_key(&key).is_some();
                if !exists {
                    let message = format!(
                        "{} `{}` in cluster `{}` does not exist: output `{}` patches it once it does",
                        key.kind,
                        key.namespaced_name(),
                        key.cluster,
                        output.name
                    );
                    if self.traced {
                        self.trace(name, &path, None, message.clone());
                    }
                    self.missing_targets.push(message);
                    self.rule_missing.push(json!({
                        "output": output.name,
                        "cluster": key.cluster,
                        "apiVersion": key.api_version,
                        "kind": key.kind,
                        "namespace": key.namespace,
                        "name": key.name,
                    }));
                    return Ok(None);
                }
            }
        }
        Ok(Some(DesiredObject {
            key,
            object,
            sources: BTreeSet::from([source]),
            owners: BTreeSet::from([owner]),
            deletion: rule.deletion,
            mode: output.mode,
            adopt: output.adopt,
        }))
    }
}
