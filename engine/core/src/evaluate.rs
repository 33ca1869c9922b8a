//! `evaluate()`: the one function both the dry-run CLI and the broker call.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::marker::PhantomData;
use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use serde_json::{Map, Value, json};
use switchyard_cel as cel;

use crate::model::DeletionPolicy;
use crate::object::{ObjectKey, World, labels, selector_matches};
use crate::pack::{CompiledRule, Expr, LookupKey, Pack, Step, in_scope};
use crate::template::RenderContext;

/// Label carried by every output: the pack that owns it (prune selects on it).
pub const LABEL_PACK: &str = "switchyard.dev/pack";
/// Label carried by every output.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "switchyard";
/// Annotation: the pack version that produced the output.
pub const ANNOTATION_PACK_VERSION: &str = "switchyard.dev/pack-version";
/// Annotation: `rule/output` pairs that produced the output, comma-separated.
pub const ANNOTATION_RULE: &str = "switchyard.dev/rule";
/// Annotation: the triggers that desire the output (see [`ObjectKey`]'s display), comma-separated.
pub const ANNOTATION_OWNERS: &str = "switchyard.dev/owners";
/// Annotation on an input object naming its cluster role (dry-run inputs only).
pub const ANNOTATION_CLUSTER: &str = "switchyard.dev/cluster";
/// The condition type the engine manages on every trigger.
pub const CONDITION_SYNCED: &str = "Synced";

/// An object a rule wants to exist.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DesiredObject {
    pub key: ObjectKey,
    pub object: Value,
    /// `rule/output` pairs that produced it.
    pub sources: BTreeSet<String>,
    /// Triggers that desire it.
    pub owners: BTreeSet<String>,
    pub deletion: DeletionPolicy,
}

/// Something a rule read, for re-evaluation when it changes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ReadKey {
    Object(ObjectKey),
    #[serde(rename_all = "camelCase")]
    List {
        cluster: String,
        api_version: String,
        kind: String,
        namespace: Option<String>,
    },
}

/// A rule that could not be evaluated for this trigger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleError {
    pub rule: String,
    /// Where in the rule: `spec.vars[1].expression`, `spec.outputs[0]`.
    pub path: String,
    /// The CEL expression, when the error came from one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expression: Option<String>,
    pub message: String,
}

impl std::fmt::Display for RuleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rule `{}`, {}", self.rule, self.path)?;
        if let Some(e) = &self.expression {
            write!(f, " `{e}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// One step of an evaluation, for `explain` and test failures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceEntry {
    pub rule: String,
    /// What was evaluated: `guard spec.when[0]`, `lookup fleet`, `vars.namespace`, `output deployment`.
    pub step: String,
    /// The source expression, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expression: Option<String>,
    /// What came out.
    pub result: String,
}

/// Everything an evaluation decided for one trigger.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    pub trigger: ObjectKey,
    /// The rules whose watch matched the trigger.
    pub rules: Vec<String>,
    pub desired: Vec<DesiredObject>,
    /// The status to write onto the trigger (`{conditions: [...], <fields>}`), when any rule
    /// matched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
    /// The finalizer the trigger must carry while its outputs exist.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finalizer: Option<String>,
    /// The trigger is being deleted: its outputs are to be cleaned up.
    pub deleting: bool,
    pub reads: BTreeSet<ReadKey>,
    pub errors: Vec<RuleError>,
    pub trace: Vec<TraceEntry>,
}

/// The trigger and its cluster role.
#[derive(Debug, Clone, Copy)]
pub struct Trigger<'a> {
    pub cluster: &'a str,
    pub object: &'a Value,
}

/// Evaluates every rule of `pack` that watches `trigger`. Pure: the same inputs give the
/// same outcome, byte for byte.
pub fn evaluate(
    pack: &Pack,
    trigger: Trigger<'_>,
    world: &dyn World,
    now: DateTime<Utc>,
) -> Result<Outcome, String> {
    evaluate_in(pack, trigger, world, now, &Conversions::default())
}

/// Objects converted to CEL values once per evaluation round, shared by every rule and
/// trigger that reads them: a Fleet read by fifty FleetWorkloads is converted once.
///
/// Entries are keyed by the object's address and hold the `Arc` that owns it, so an
/// address cannot be reused while the cache lives; a trigger borrowed for `'w` is kept
/// alive by that borrow.
#[derive(Default)]
pub struct Conversions<'w> {
    converted: RefCell<HashMap<usize, Converted>>,
    _objects: PhantomData<&'w Value>,
}

impl<'w> Conversions<'w> {
    fn convert(&self, object: &Value, owner: Option<&Arc<Value>>) -> cel::Value {
        let key = std::ptr::from_ref(object) as usize;
        if let Some((_, value)) = self.converted.borrow().get(&key) {
            return value.clone();
        }
        let value = cel::Value::from_json(object);
        self.converted
            .borrow_mut()
            .insert(key, (owner.cloned(), value.clone()));
        value
    }

    /// How many objects were converted so far.
    pub fn len(&self) -> usize {
        self.converted.borrow().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A trigger, borrowed for the whole round.
    fn trigger(&self, object: &'w Value) -> cel::Value {
        self.convert(object, None)
    }

    /// An object the world handed out.
    fn shared(&self, object: &Arc<Value>) -> cel::Value {
        self.convert(object, Some(object))
    }
}

/// The owner of a converted object (none for a borrowed trigger) and its CEL value.
type Converted = (Option<Arc<Value>>, cel::Value);

/// [`evaluate`] with a conversion cache shared across the triggers of one round.
pub fn evaluate_in<'w>(
    pack: &Pack,
    trigger: Trigger<'w>,
    world: &dyn World,
    now: DateTime<Utc>,
    conversions: &Conversions<'w>,
) -> Result<Outcome, String> {
    evaluate_traced(pack, trigger, world, now, conversions, true)
}

/// [`evaluate`] without the trace: the same decisions, outputs and status, and an empty
/// `Outcome.trace`, for callers that never show it (the broker evaluates every trigger on
/// every change and would pay for formatting every value).
pub fn evaluate_untraced(
    pack: &Pack,
    trigger: Trigger<'_>,
    world: &dyn World,
    now: DateTime<Utc>,
) -> Result<Outcome, String> {
    evaluate_traced(pack, trigger, world, now, &Conversions::default(), false)
}

fn evaluate_traced<'w>(
    pack: &Pack,
    trigger: Trigger<'w>,
    world: &dyn World,
    now: DateTime<Utc>,
    conversions: &Conversions<'w>,
    traced: bool,
) -> Result<Outcome, String> {
    let key = ObjectKey::of(trigger.cluster, trigger.object)?;
    let trigger_labels = labels(trigger.object);
    let rules: Vec<&CompiledRule> = pack
        .rules
        .iter()
        .filter(|r| {
            r.watch.cluster == trigger.cluster
                && r.watch.api_version == key.api_version
                && r.watch.kind == key.kind
                && r.watch
                    .selector
                    .as_ref()
                    .is_none_or(|s| selector_matches(s, &trigger_labels))
        })
        .collect();
    let deleting = trigger
        .object
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null());
    let mut outcome = Outcome {
        trigger: key.clone(),
        rules: rules.iter().map(|r| r.name.clone()).collect(),
        desired: Vec::new(),
        status: None,
        finalizer: None,
        deleting,
        reads: BTreeSet::new(),
        errors: Vec::new(),
        trace: Vec::new(),
    };
    if rules.is_empty() {
        return Ok(outcome);
    }
    if deleting {
        for rule in rules.iter().filter(|_| traced) {
            outcome.trace.push(TraceEntry {
                rule: rule.name.clone(),
                step: "trigger".into(),
                expression: None,
                result: "being deleted: no outputs are desired".into(),
            });
        }
        return Ok(outcome);
    }

    let self_value = conversions.trigger(trigger.object);
    let now_text = now.to_rfc3339_opts(SecondsFormat::Secs, true);
    let cluster_json = json!({"name": trigger.cluster});
    let mut ctx = EvalContext {
        pack,
        world,
        trigger: trigger.object,
        self_value,
        cluster_cel: cel::Value::from_json(&cluster_json),
        cluster_json,
        now_cel: cel::Value::string(now_text.clone()),
        now_text,
        cost_used: 0,
        cost_budget: pack.document.cost_per_object(),
        conversions,
        outcome: &mut outcome,
        traced,
    };
    let mut results = Vec::new();
    for rule in &rules {
        results.push(ctx.run_rule(rule));
    }

    // The engine's own condition, then the rules' status mappings in rule-name order.
    let mut status = Map::new();
    let mut conditions: Vec<Value> = Vec::new();
    let synced = synced_condition(&results);
    conditions.push(synced);
    for result in &results {
        if let RuleResult::Fired {
            status: Some(s), ..
        } = result
        {
            for (field, value) in &s.fields {
                status.insert(field.clone(), value.clone());
            }
            for condition in &s.conditions {
                if let Some(t) = condition.get("type") {
                    conditions.retain(|c| c.get("type") != Some(t));
                }
                conditions.push(condition.clone());
            }
        }
    }
    let generation = trigger.object.pointer("/metadata/generation").cloned();
    let previous = trigger
        .object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let stamped: Vec<Value> = conditions
        .into_iter()
        .map(|mut c| {
            let before = previous.iter().find(|p| p.get("type") == c.get("type"));
            let transition = match before {
                Some(p)
                    if p.get("status") == c.get("status")
                        && p.get("lastTransitionTime").is_some() =>
                {
                    p["lastTransitionTime"].clone()
                }
                _ => Value::String(now.to_rfc3339_opts(SecondsFormat::Secs, true)),
            };
            if let Value::Object(m) = &mut c {
                m.insert("lastTransitionTime".into(), transition);
                if let Some(g) = &generation {
                    m.insert("observedGeneration".into(), g.clone());
                }
            }
            c
        })
        .collect();
    status.insert("conditions".into(), Value::Array(stamped));
    outcome.status = Some(Value::Object(status));

    let needs_finalizer = rules
        .iter()
        .any(|r| r.deletion == DeletionPolicy::Delete && !r.outputs.is_empty());
    if needs_finalizer {
        outcome.finalizer = Some(format!("switchyard.dev/{}", pack.name()));
    }
    outcome.desired.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(outcome)
}

/// What happened to one rule.
enum RuleResult {
    Fired {
        rule: String,
        outputs: usize,
        status: Option<RuleStatus>,
    },
    /// A guard without a reason was false: the rule does not apply.
    Skipped { rule: String, guard: String },
    /// The rule cannot produce outputs: a required lookup is missing, a guard with a reason
    /// is false, or an expression failed.
    Blocked { reason: String, message: String },
}

struct RuleStatus {
    fields: Vec<(String, Value)>,
    conditions: Vec<Value>,
}

fn synced_condition(results: &[RuleResult]) -> Value {
    if let Some(RuleResult::Blocked { reason, message }) = results
        .iter()
        .find(|r| matches!(r, RuleResult::Blocked { .. }))
    {
        return json!({"type": CONDITION_SYNCED, "status": "False", "reason": reason, "message": message});
    }
    let fired: Vec<String> = results
        .iter()
        .filter_map(|r| match r {
            RuleResult::Fired { rule, outputs, .. } => Some(format!("{rule} ({outputs} outputs)")),
            _ => None,
        })
        .collect();
    if fired.is_empty() {
        let skipped: Vec<String> = results
            .iter()
            .filter_map(|r| match r {
                RuleResult::Skipped { rule, guard } => Some(format!("{rule} ({guard} is false)")),
                _ => None,
            })
            .collect();
        return json!({"type": CONDITION_SYNCED, "status": "True", "reason": "NoRuleApplies",
                      "message": format!("no rule applies: {}", skipped.join(", "))});
    }
    json!({"type": CONDITION_SYNCED, "status": "True", "reason": "Synced",
           "message": format!("rendered by {}", fired.join(", "))})
}

struct EvalContext<'a> {
    pack: &'a Pack,
    world: &'a dyn World,
    trigger: &'a Value,
    self_value: cel::Value,
    cluster_json: Value,
    cluster_cel: cel::Value,
    now_text: String,
    now_cel: cel::Value,
    /// CEL cost spent so far for this trigger, and the most it may spend.
    cost_used: u64,
    cost_budget: u64,
    conversions: &'a Conversions<'a>,
    outcome: &'a mut Outcome,
    /// Build the trace (`explain`, test failures); the broker does not read it.
    traced: bool,
}

/// The bindings of one rule evaluation, as CEL values and as JSON for templates.
struct Bindings {
    lookups: BTreeMap<String, (cel::Value, Value)>,
    vars: Vec<(Arc<str>, cel::Value, Value)>,
    /// `vars` as one CEL map, rebuilt when a variable is added rather than per expression.
    vars_cel: cel::Value,
}

impl Bindings {
    fn new() -> Self {
        Bindings {
            lookups: BTreeMap::new(),
            vars: Vec::new(),
            vars_cel: cel::Value::map(Vec::new()),
        }
    }

    fn add_var(&mut self, name: Arc<str>, value: cel::Value, json: Value) {
        self.vars.push((name, value, json));
        let entries: Vec<(Arc<str>, cel::Value)> = self
            .vars
            .iter()
            .map(|(n, v, _)| (n.clone(), v.clone()))
            .collect();
        self.vars_cel = cel::Value::string_map(&entries);
    }

    fn vars_json(&self) -> Value {
        Value::Object(
            self.vars
                .iter()
                .map(|(n, _, j)| (n.to_string(), j.clone()))
                .collect(),
        )
    }
}

/// Why a rule stopped.
enum Stop {
    Skip(String),
    Block { reason: String, message: String },
}

impl EvalContext<'_> {
    fn trace(
        &mut self,
        rule: &str,
        step: impl Into<String>,
        expression: Option<&str>,
        result: impl Into<String>,
    ) {
        self.outcome.trace.push(TraceEntry {
            rule: rule.to_string(),
            step: step.into(),
            expression: expression.map(str::to_string),
            result: result.into(),
        });
    }

    fn activation<'e>(
        &self,
        env: &'e cel::Env,
        bindings: &Bindings,
        item: Option<(&cel::Value, usize)>,
    ) -> cel::Activation<'e> {
        let mut a = cel::Activation::new(env);
        a.bind("self", self.self_value.clone());
        a.bind("cluster", self.cluster_cel.clone());
        a.bind("now", self.now_cel.clone());
        a.bind("vars", bindings.vars_cel.clone());
        a.bind("tables", self.pack.tables_cel.clone());
        for (name, (value, _)) in &bindings.lookups {
            a.bind(name, value.clone());
        }
        if let Some((value, index)) = item {
            a.bind("item", value.clone());
            a.bind("index", cel::Value::from_json(&json!(index)));
        }
        a
    }

    /// Evaluates an expression; an error is recorded on the outcome and stops the rule.
    fn eval(
        &mut self,
        rule: &str,
        expr: &Expr,
        bindings: &Bindings,
        item: Option<(&cel::Value, usize)>,
    ) -> Result<cel::Value, Stop> {
        let mut activation = self.activation(&self.pack.env, bindings, item);
        // Each expression may spend up to its own limit, and all of them together up to
        // the object's budget: one tenant's huge object cannot starve the others.
        let remaining = self.cost_budget.saturating_sub(self.cost_used);
        let per_expression = self.pack.document.cost_per_expression();
        let object_bound = remaining < per_expression;
        activation.with_budget(remaining.min(per_expression));
        match expr.program.eval_with_cost(&activation) {
            Ok((v, cost)) => {
                self.cost_used += cost;
                Ok(v)
            }
            Err(e) => {
                let message = if e.message.starts_with("cost limit exceeded") {
                    if object_bound {
                        format!(
                            "{}: the trigger's cost budget (spec.limits.celCostPerObject = {}) is spent",
                            e.message, self.cost_budget
                        )
                    } else {
                        format!("{} (spec.limits.celCostPerExpression)", e.message)
                    }
                } else {
                    e.message
                };
                Err(self.fail(rule, &expr.path, Some(expr.source()), message))
            }
        }
    }

    fn fail(&mut self, rule: &str, path: &str, expression: Option<&str>, message: String) -> Stop {
        let error = RuleError {
            rule: rule.to_string(),
            path: path.to_string(),
            expression: expression.map(str::to_string),
            message,
        };
        let text = error.to_string();
        if self.traced {
            self.trace(rule, path, expression, format!("error: {}", error.message));
        }
        self.outcome.errors.push(error);
        Stop::Block {
            reason: "EvaluationError".into(),
            message: text,
        }
    }

    fn eval_bool(
        &mut self,
        rule: &str,
        expr: &Expr,
        bindings: &Bindings,
        item: Option<(&cel::Value, usize)>,
    ) -> Result<bool, Stop> {
        let value = self.eval(rule, expr, bindings, item)?;
        match value.as_bool() {
            Some(b) => Ok(b),
            None => Err(self.fail(
                rule,
                &expr.path,
                Some(expr.source()),
                format!("expected a bool, got {}", value.type_name()),
            )),
        }
    }

    fn eval_json(
        &mut self,
        rule: &str,
        expr: &Expr,
        bindings: &Bindings,
        item: Option<(&cel::Value, usize)>,
    ) -> Result<(cel::Value, Value), Stop> {
        let value = self.eval(rule, expr, bindings, item)?;
        match value.to_json() {
            Ok(json) => Ok((value, json)),
            Err(e) => Err(self.fail(rule, &expr.path, Some(expr.source()), e.message)),
        }
    }

    fn eval_string(
        &mut self,
        rule: &str,
        expr: &Expr,
        bindings: &Bindings,
    ) -> Result<String, Stop> {
        let (value, json) = self.eval_json(rule, expr, bindings, None)?;
        match json {
            Value::String(s) => Ok(s),
            _ => Err(self.fail(
                rule,
                &expr.path,
                Some(expr.source()),
                format!("expected a string, got {}", value.type_name()),
            )),
        }
    }

    fn run_rule(&mut self, rule: &CompiledRule) -> RuleResult {
        match self.try_rule(rule) {
            Ok(result) => result,
            Err(Stop::Skip(guard)) => RuleResult::Skipped {
                rule: rule.name.clone(),
                guard,
            },
            Err(Stop::Block { reason, message }) => RuleResult::Blocked { reason, message },
        }
    }

    fn try_rule(&mut self, rule: &CompiledRule) -> Result<RuleResult, Stop> {
        let name = rule.name.as_str();
        let mut bindings = Bindings::new();
        for step in &rule.steps {
            match *step {
                Step::Guard(i) => {
                    let guard = &rule.guards[i];
                    let passed = self.eval_bool(name, &guard.expr, &bindings, None)?;
                    if self.traced {
                        self.trace(
                            name,
                            guard.expr.path.trim_end_matches(".expression"),
                            Some(guard.expr.source()),
                            passed.to_string(),
                        );
                    }
                    if !passed {
                        let label =
                            format!("guard {}", guard.expr.path.trim_end_matches(".expression"));
                        let Some(reason) = &guard.reason else {
                            return Err(Stop::Skip(label));
                        };
                        let message = match &guard.message_expr {
                            Some(e) => self.eval_string(name, e, &bindings)?,
                            None => guard
                                .message
                                .clone()
                                .unwrap_or_else(|| format!("`{}` is false", guard.expr.source())),
                        };
                        return Err(Stop::Block {
                            reason: reason.clone(),
                            message,
                        });
                    }
                }
                Step::Lookup(i) => self.run_lookup(rule, i, &mut bindings)?,
                Step::Var(i) => {
                    let var = &rule.vars[i];
                    let (value, json) = self.eval_json(name, &var.expr, &bindings, None)?;
                    if self.traced {
                        self.trace(
                            name,
                            format!("vars.{}", var.name),
                            Some(var.expr.source()),
                            compact(&json),
                        );
                    }
                    bindings.add_var(var.key.clone(), value, json);
                }
            }
        }

        // Outputs join the outcome only when the whole rule succeeds: a rule stopped by a
        // later output or its status mapping desires nothing.
        let mut rendered: Vec<DesiredObject> = Vec::new();
        let mut context = RenderContext::new(Value::Object(self.template_context(&bindings)));
        for output in &rule.outputs {
            if let Some(when) = &output.when
                && !self.eval_bool(name, when, &bindings, None)?
            {
                if self.traced {
                    self.trace(
                        name,
                        format!("output {}", output.name),
                        Some(when.source()),
                        "skipped: `when` is false",
                    );
                }
                continue;
            }
            let items: Vec<Option<Value>> = match &output.for_each {
                None => vec![None],
                Some(expr) => {
                    let (value, json) = self.eval_json(name, expr, &bindings, None)?;
                    let Value::Array(elements) = json else {
                        return Err(self.fail(
                            name,
                            &expr.path,
                            Some(expr.source()),
                            format!("forEach must return a list, got {}", value.type_name()),
                        ));
                    };
                    elements.into_iter().map(Some).collect()
                }
            };
            let count = items.len();
            for (index, item) in items.into_iter().enumerate() {
                if let Some(item) = item {
                    context.set("item", item);
                    context.set("index", json!(index));
                }
                let documents = self
                    .pack
                    .templates
                    .render_in(&output.template, &context)
                    .map_err(|e| {
                        self.fail(
                            name,
                            &format!("output `{}`", output.name),
                            None,
                            e.to_string(),
                        )
                    })?;
                for document in documents {
                    rendered.push(self.output(rule, &output.name, &output.cluster, document)?);
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
        }

        let status = match &rule.status {
            None => None,
            Some(mapping) => {
                let mut fields = Vec::new();
                for (field, expr) in &mapping.fields {
                    let (_, json) = self.eval_json(name, expr, &bindings, None)?;
                    if !json.is_null() {
                        fields.push((field.clone(), json));
                    }
                }
                let mut conditions = Vec::new();
                for c in &mapping.conditions {
                    let (_, status) = self.eval_json(name, &c.status, &bindings, None)?;
                    let status = match status {
                        Value::Bool(true) => "True".to_string(),
                        Value::Bool(false) => "False".to_string(),
                        Value::String(s) if ["True", "False", "Unknown"].contains(&s.as_str()) => s,
                        other => {
                            return Err(self.fail(
                                name,
                                &c.status.path,
                                Some(c.status.source()),
                                format!(
                                    "condition status must be True, False or Unknown, got {}",
                                    compact(&other)
                                ),
                            ));
                        }
                    };
                    let reason = self.eval_string(name, &c.reason, &bindings)?;
                    let message = match &c.message {
                        Some(m) => self.eval_string(name, m, &bindings)?,
                        None => String::new(),
                    };
                    conditions.push(json!({"type": c.type_, "status": status, "reason": reason, "message": message}));
                }
                Some(RuleStatus { fields, conditions })
            }
        };
        let outputs = rendered.len();
        self.outcome.desired.extend(rendered);
        Ok(RuleResult::Fired {
            rule: rule.name.clone(),
            outputs,
            status,
        })
    }

    fn run_lookup(
        &mut self,
        rule: &CompiledRule,
        i: usize,
        bindings: &mut Bindings,
    ) -> Result<(), Stop> {
        let name = rule.name.as_str();
        let lookup = &rule.lookups[i];
        let by_labels = matches!(lookup.key, LookupKey::Labels(_));
        let empty = if by_labels { json!([]) } else { Value::Null };
        if let Some(when) = &lookup.when
            && !self.eval_bool(name, when, bindings, None)?
        {
            if self.traced {
                self.trace(
                    name,
                    format!("lookup {}", lookup.name),
                    Some(when.source()),
                    "skipped: `when` is false",
                );
            }
            bindings
                .lookups
                .insert(lookup.name.clone(), (cel::Value::from_json(&empty), empty));
            return Ok(());
        }
        let namespace = match &lookup.namespace {
            Some(expr) => Some(self.eval_string(name, expr, bindings)?).filter(|s| !s.is_empty()),
            None => self
                .trigger
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .map(str::to_string),
        };
        let found: (cel::Value, Value) = match &lookup.key {
            LookupKey::Name(expr) => {
                let object_name = self.eval_string(name, expr, bindings)?;
                let key = ObjectKey {
                    cluster: lookup.cluster.clone(),
                    api_version: lookup.api_version.clone(),
                    kind: lookup.kind.clone(),
                    namespace: namespace.clone(),
                    name: object_name.clone(),
                };
                let object = self.world.get(
                    &key.cluster,
                    &key.api_version,
                    &key.kind,
                    namespace.as_deref(),
                    &object_name,
                );
                let found = match &object {
                    Some(o) => (self.conversions.shared(o), Value::clone(o)),
                    None => (cel::Value::null(), Value::Null),
                };
                let described = format!(
                    "{} {} {}",
                    lookup.api_version,
                    lookup.kind,
                    key.namespaced_name()
                );
                if self.traced {
                    self.trace(
                        name,
                        format!("lookup {}", lookup.name),
                        Some(expr.source()),
                        if found.1.is_null() {
                            format!("{described} not found")
                        } else {
                            format!("{described} found")
                        },
                    );
                }
                self.outcome.reads.insert(ReadKey::Object(key));
                if found.1.is_null() && lookup.required {
                    return Err(Stop::Block {
                        reason: lookup.reason.clone(),
                        message: format!(
                            "{} `{}` not found in namespace `{}` of cluster `{}` (lookup `{}` of rule `{}`)",
                            lookup.kind,
                            object_name,
                            namespace.as_deref().unwrap_or(""),
                            lookup.cluster,
                            lookup.name,
                            rule.name
                        ),
                    });
                }
                found
            }
            LookupKey::Labels(expr) => {
                let (value, selector) = self.eval_json(name, expr, bindings, None)?;
                let Value::Object(selector) = selector else {
                    return Err(self.fail(
                        name,
                        &expr.path,
                        Some(expr.source()),
                        format!("matchLabels must return a map, got {}", value.type_name()),
                    ));
                };
                let wanted: BTreeMap<String, String> = selector
                    .iter()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            v.as_str().map(str::to_string).unwrap_or_else(|| compact(v)),
                        )
                    })
                    .collect();
                let matches: Vec<Arc<Value>> = self
                    .world
                    .list(
                        &lookup.cluster,
                        &lookup.api_version,
                        &lookup.kind,
                        namespace.as_deref(),
                    )
                    .into_iter()
                    .filter(|o| {
                        let have = labels(o);
                        wanted.iter().all(|(k, v)| have.get(k) == Some(v))
                    })
                    .collect();
                if self.traced {
                    self.trace(
                        name,
                        format!("lookup {}", lookup.name),
                        Some(expr.source()),
                        format!("{} matched", plural(matches.len(), "object")),
                    );
                }
                self.outcome.reads.insert(ReadKey::List {
                    cluster: lookup.cluster.clone(),
                    api_version: lookup.api_version.clone(),
                    kind: lookup.kind.clone(),
                    namespace: namespace.clone(),
                });
                if matches.is_empty() && lookup.required {
                    return Err(Stop::Block {
                        reason: lookup.reason.clone(),
                        message: format!(
                            "no {} matches labels {} in namespace `{}` of cluster `{}` (lookup `{}` of rule `{}`)",
                            lookup.kind,
                            compact(&Value::Object(selector)),
                            namespace.as_deref().unwrap_or(""),
                            lookup.cluster,
                            lookup.name,
                            rule.name
                        ),
                    });
                }
                (
                    cel::Value::list(matches.iter().map(|o| self.conversions.shared(o))),
                    Value::Array(matches.iter().map(|o| Value::clone(o)).collect()),
                )
            }
        };
        bindings.lookups.insert(lookup.name.clone(), found);
        Ok(())
    }

    /// The template context of a rule: built once, outputs add `item` and `index`.
    fn template_context(&self, bindings: &Bindings) -> Map<String, Value> {
        let mut context = Map::new();
        context.insert("self".into(), self.trigger.clone());
        context.insert("cluster".into(), self.cluster_json.clone());
        context.insert("now".into(), Value::String(self.now_text.clone()));
        context.insert("vars".into(), bindings.vars_json());
        context.insert("tables".into(), self.pack.tables_json.clone());
        for (name, (_, json)) in &bindings.lookups {
            context.insert(name.clone(), json.clone());
        }
        context
    }

    /// Checks a rendered object against the pack's scope and stamps ownership on it.
    fn output(
        &mut self,
        rule: &CompiledRule,
        output: &str,
        cluster: &str,
        mut object: Value,
    ) -> Result<DesiredObject, Stop> {
        let name = rule.name.as_str();
        let path = format!("output `{output}`");
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
            cluster,
            &key.api_version,
            &key.kind,
            key.namespace.as_deref(),
        ) {
            let where_ = match &key.namespace {
                Some(ns) => format!("namespace `{ns}`"),
                None => "cluster scope".to_string(),
            };
            let message = format!(
                "{} {} `{}` in {where_} of cluster `{cluster}` is outside the pack's scope",
                key.api_version, key.kind, key.name
            );
            if self.traced {
                self.trace(name, &path, None, format!("refused: {message}"));
            }
            self.outcome.errors.push(RuleError {
                rule: name.to_string(),
                path: path.clone(),
                expression: None,
                message: message.clone(),
            });
            return Err(Stop::Block {
                reason: "ScopeViolation".into(),
                message,
            });
        }
        let source = format!("{}/{output}", rule.name);
        let owner = self.outcome.trigger.to_string();
        stamp_ownership(
            &mut object,
            self.pack.name(),
            &self.pack.version().to_string(),
            &source,
            &owner,
        );
        Ok(DesiredObject {
            key,
            object,
            sources: BTreeSet::from([source]),
            owners: BTreeSet::from([owner]),
            deletion: rule.deletion,
        })
    }
}

/// Writes the ownership labels and annotations onto an output.
pub(crate) fn stamp_ownership(
    object: &mut Value,
    pack: &str,
    version: &str,
    sources: &str,
    owners: &str,
) {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let labels = metadata
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(labels) = labels {
        labels.insert(LABEL_MANAGED_BY.into(), MANAGED_BY.into());
        labels.insert(LABEL_PACK.into(), pack.into());
    }
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(annotations) = annotations {
        annotations.insert(ANNOTATION_PACK_VERSION.into(), version.into());
        annotations.insert(ANNOTATION_RULE.into(), sources.into());
        annotations.insert(ANNOTATION_OWNERS.into(), owners.into());
    }
}

pub(crate) fn compact(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}
