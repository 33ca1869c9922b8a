//! `evaluate()`: the one function both the dry-run CLI and the broker call.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::marker::PhantomData;
use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use serde_json::{Map, Value, json};
use switchyard_cel as cel;

use crate::model::{DeletionPolicy, OutputMode};
use crate::object::{At, ObjectKey, World, cluster_id, labels, selector_matches, split_cluster};
use crate::pack::{
    CompiledOutput, CompiledRule, CompiledStage, CompiledStages, CompiledStagesFrom,
    CompiledStatus, Expr, LookupKey, Pack, Step, in_scope,
};
use crate::template::{CelMap, Held, RenderContext};

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
/// Annotation on an input object naming its cluster, `ROLE` or `ROLE/NAME` (dry-run inputs
/// only).
pub const ANNOTATION_CLUSTER: &str = "switchyard.dev/cluster";
/// On a test input or fixture: the object is invalid on purpose (what a pack does with an
/// object an older CRD let in); the value says why. Its CRD is not checked against it.
pub const ANNOTATION_INVALID_INPUT: &str = "switchyard.dev/invalid";
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
    /// `Patch`: only the rendered fields are the pack's; the object is someone else's.
    #[serde(skip_serializing_if = "OutputMode::is_apply")]
    pub mode: OutputMode,
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
    /// Where in the pack's files the failing part of the expression is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<ErrorLocation>,
}

/// A position in a pack file, and that line of the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorLocation {
    pub file: String,
    pub line: usize,
    pub column: usize,
    /// The file's line, for a caret under the column.
    #[serde(skip)]
    pub source: String,
}

impl RuleError {
    /// The file's line with a caret under the failing part, when the error has a location.
    pub fn snippet(&self) -> Option<String> {
        let l = self.location.as_ref()?;
        let pad: String = l
            .source
            .chars()
            .take(l.column.saturating_sub(1))
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        Some(format!("  | {}\n  | {pad}^", l.source))
    }
}

impl std::fmt::Display for RuleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rule `{}`, {}", self.rule, self.path)?;
        match (&self.location, &self.expression) {
            // The position says where; a long expression would only bury the message.
            (Some(l), _) => write!(f, " at {}:{}:{}", l.file, l.line, l.column)?,
            (None, Some(e)) => write!(f, " `{e}`")?,
            (None, None) => {}
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
    /// When to evaluate again without any change: the nearest stage deadline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requeue_after: Option<std::time::Duration>,
    /// What merging needs of the trigger beyond its outputs.
    #[serde(skip)]
    pub facts: TriggerFacts,
}

/// The `Synced` reason of a trigger whose output another trigger (or another of its own
/// outputs) renders differently.
pub const REASON_CONFLICT: &str = "Conflict";

/// What merging needs of a trigger beyond its outputs: which trigger's version wins an output
/// several render differently, and how to restate `Synced` when the merge refuses this one's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TriggerFacts {
    pub precedence: Precedence,
    /// The evaluation's clock.
    pub now: DateTime<Utc>,
    /// The trigger's `Synced` condition before this evaluation.
    pub synced_before: Option<Value>,
}

/// The order in which triggers claim an output they render differently: the trigger that
/// desired it first, as far as the objects tell (the oldest `creationTimestamp`, then the
/// `uid`), so a tenant cannot win an object by picking a name. Triggers without a creation
/// time (dry-run inputs) come after those with one; the trigger's key breaks the last tie.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Precedence {
    unknown_age: bool,
    created: Option<DateTime<Utc>>,
    uid: String,
}

impl Precedence {
    pub fn of(object: &Value) -> Self {
        let created = object
            .at(&["metadata", "creationTimestamp"])
            .and_then(Value::as_str)
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc));
        Precedence {
            unknown_age: created.is_none(),
            created,
            uid: object
                .at(&["metadata", "uid"])
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        }
    }
}

impl Outcome {
    /// Restates the `Synced` condition after evaluation (the merge refused one of the
    /// trigger's outputs, an apply failed). The transition time is the evaluation's clock,
    /// unless the condition had this state before, so restating an unchanged failure writes
    /// nothing new.
    pub fn set_synced(&mut self, state: &str, reason: &str, message: &str) {
        let transition = transition_time(
            self.facts.synced_before.as_ref(),
            &Value::String(state.into()),
            self.facts.now,
        );
        let Some(conditions) = self
            .status
            .as_mut()
            .and_then(|s| s.get_mut("conditions"))
            .and_then(Value::as_array_mut)
        else {
            return;
        };
        for c in conditions.iter_mut() {
            if c.get("type").and_then(Value::as_str) == Some(CONDITION_SYNCED)
                && let Value::Object(m) = c
            {
                m.insert("status".into(), Value::String(state.into()));
                m.insert("reason".into(), Value::String(reason.into()));
                m.insert("message".into(), Value::String(message.into()));
                m.insert("lastTransitionTime".into(), transition.clone());
            }
        }
    }
}

/// The trigger and its cluster (`ROLE` or `ROLE/NAME`).
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
    /// Triggers are converted but not kept (see [`Conversions::forgetting_triggers`]).
    forget_triggers: bool,
    _objects: PhantomData<&'w Value>,
}

impl<'w> Conversions<'w> {
    /// A cache that does not keep the conversion of a trigger (objects read through
    /// lookups are kept as usual): for a round that evaluates each trigger once, where
    /// keeping them would hold a CEL copy of every watched object until the round ends. A
    /// trigger another trigger also looks up is then converted twice.
    #[must_use]
    pub fn forgetting_triggers() -> Self {
        Conversions {
            forget_triggers: true,
            ..Conversions::default()
        }
    }

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
        if self.forget_triggers {
            let key = std::ptr::from_ref(object) as usize;
            if let Some((_, value)) = self.converted.borrow().get(&key) {
                return value.clone();
            }
            return cel::Value::from_json(object);
        }
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
    evaluate_traced(pack, trigger, world, now, conversions, Record::ALL)
}

/// [`evaluate_in`] without the trace (see [`evaluate_untraced`]).
pub fn evaluate_in_untraced<'w>(
    pack: &Pack,
    trigger: Trigger<'w>,
    world: &dyn World,
    now: DateTime<Utc>,
    conversions: &Conversions<'w>,
) -> Result<Outcome, String> {
    evaluate_traced(pack, trigger, world, now, conversions, Record::READS)
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
    evaluate_traced(
        pack,
        trigger,
        world,
        now,
        &Conversions::default(),
        Record::READS,
    )
}

/// What an evaluation records besides its decisions.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Record {
    /// The trace of every guard, lookup, variable and output (`explain`).
    pub(crate) trace: bool,
    /// `Outcome.reads`, for re-evaluation when they change (the broker); a plan of one
    /// round has no use for them.
    pub(crate) reads: bool,
}

impl Record {
    pub(crate) const ALL: Record = Record {
        trace: true,
        reads: true,
    };
    pub(crate) const READS: Record = Record {
        trace: false,
        reads: true,
    };
}

pub(crate) fn evaluate_traced<'w>(
    pack: &Pack,
    trigger: Trigger<'w>,
    world: &dyn World,
    now: DateTime<Utc>,
    conversions: &Conversions<'w>,
    record: Record,
) -> Result<Outcome, String> {
    let traced = record.trace;
    let key = ObjectKey::of(trigger.cluster, trigger.object)?;
    let (role, _) = split_cluster(trigger.cluster);
    // The labels only when a rule selects on them.
    let mut trigger_labels = None;
    let rules: Vec<&CompiledRule> = pack
        .rules
        .iter()
        .filter(|r| {
            r.watch.cluster == role
                && r.watch.api_version == key.api_version
                && r.watch.kind == key.kind
                && r.watch.selector.as_ref().is_none_or(|s| {
                    selector_matches(
                        s,
                        trigger_labels.get_or_insert_with(|| labels(trigger.object)),
                    )
                })
        })
        .collect();
    let deleting = trigger
        .object
        .at(&["metadata", "deletionTimestamp"])
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
        requeue_after: None,
        facts: TriggerFacts {
            precedence: Precedence::of(trigger.object),
            now,
            synced_before: trigger
                .object
                .at(&["status", "conditions"])
                .and_then(Value::as_array)
                .and_then(|c| c.iter().find(|c| c["type"] == CONDITION_SYNCED))
                .cloned(),
        },
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

    let reads_clusters = rules.iter().any(|r| r.reads_clusters);
    let mut ctx = EvalContext::new(
        pack,
        trigger,
        world,
        now,
        conversions,
        &mut outcome,
        reads_clusters,
        record,
    );
    let mut results = Vec::new();
    for rule in &rules {
        results.push(ctx.run_rule(rule));
    }
    if let Some(conflict) = ctx.join_duplicate_outputs() {
        results.insert(0, conflict);
    }

    // The engine's own condition, then the rules' status mappings in rule-name order.
    let mut status = Map::new();
    let mut conditions: Vec<Value> = Vec::new();
    let synced = synced_condition(&results, &ctx.missing_targets);
    conditions.push(synced);
    // The results are not needed after this: their fields and conditions are moved.
    for result in results {
        if let RuleResult::Fired {
            status: Some(s), ..
        }
        | RuleResult::Blocked {
            status: Some(s), ..
        } = result
        {
            for (field, value) in s.fields {
                status.insert(field, value);
            }
            for condition in s.conditions {
                if let Some(t) = condition.get("type") {
                    conditions.retain(|c| c.get("type") != Some(t));
                }
                conditions.push(condition);
            }
        }
    }
    let generation = trigger.object.at(&["metadata", "generation"]).cloned();
    let previous: &[Value] = trigger
        .object
        .at(&["status", "conditions"])
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let stamped: Vec<Value> = conditions
        .into_iter()
        .map(|mut c| {
            let before = previous.iter().find(|p| p.get("type") == c.get("type"));
            let transition = transition_time(before, &c["status"], now);
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

/// What [`probe_rule`] found: the expression's value, and what binding the rule's names
/// said on the way (a false guard, a lookup that found nothing, a variable that failed).
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    pub value: Result<Value, String>,
    pub notes: Vec<String>,
}

/// Evaluates `expression` as if it were written in rule `rule_name`, for the first object of
/// `world` the rule watches (in key order): `self`,
/// the rule's lookups, `vars`, `tables`, `cluster`, `clusters` and `now` are bound as
/// evaluation binds them, so a guard can be debugged where it lives. Every lookup and
/// variable the rule can compute is bound, whatever its guards say (a false guard is a
/// note); one that fails is left out, with a note.
pub fn probe_rule(
    pack: &Pack,
    rule_name: &str,
    world: &crate::object::MemoryWorld,
    now: DateTime<Utc>,
    expression: &str,
) -> Result<Probe, String> {
    let rule = pack
        .rules
        .iter()
        .find(|r| r.name == rule_name)
        .ok_or_else(|| {
            let names: Vec<&str> = pack.rules.iter().map(|r| r.name.as_str()).collect();
            format!(
                "the pack has no rule `{rule_name}` (its rules: {})",
                names.join(", ")
            )
        })?;
    let program = pack
        .env
        .compile(expression)
        .map_err(|e| format!("{}:{}: {}", e.line, e.column, e.message))?;
    let (key, object) = world
        .iter()
        .find(|(k, o)| {
            k.role() == rule.watch.cluster
                && k.api_version == rule.watch.api_version
                && k.kind == rule.watch.kind
                && rule
                    .watch
                    .selector
                    .as_ref()
                    .is_none_or(|s| selector_matches(s, &labels(o)))
        })
        .ok_or_else(|| {
            format!(
                "no input object is watched by rule `{rule_name}`: it watches {} {} in cluster `{}`",
                rule.watch.api_version, rule.watch.kind, rule.watch.cluster
            )
        })?;
    let trigger = Trigger {
        cluster: &key.cluster,
        object,
    };
    let world: &dyn World = world;
    let key = key.clone();
    let mut outcome = Outcome {
        trigger: key,
        rules: vec![rule.name.clone()],
        desired: Vec::new(),
        status: None,
        finalizer: None,
        deleting: false,
        reads: BTreeSet::new(),
        errors: Vec::new(),
        trace: Vec::new(),
        requeue_after: None,
        facts: TriggerFacts::default(),
    };
    let conversions = Conversions::default();
    let mut ctx = EvalContext::new(
        pack,
        trigger,
        world,
        now,
        &conversions,
        &mut outcome,
        true,
        Record::READS,
    );
    let mut bindings = ctx.new_bindings();
    let mut notes = Vec::new();
    for step in &rule.steps {
        match *step {
            Step::Guard(i) => {
                let guard = &rule.guards[i];
                let label = guard.expr.path.trim_end_matches(".expression");
                match ctx.eval_bool(&rule.name, &guard.expr, &bindings, None) {
                    Ok(true) => {}
                    Ok(false) => notes.push(format!("guard {label} is false")),
                    Err(_) => notes.push(format!("guard {label} fails")),
                }
            }
            Step::Lookup(i) => {
                let lookup = &rule.lookups[i];
                if let Err(Stop::Block { message, .. }) = ctx.run_lookup(rule, i, &mut bindings) {
                    notes.push(format!("lookup `{}`: {message}", lookup.name));
                    // Bound as evaluation binds what it does not find.
                    if !bindings.lookups.contains_key(&lookup.name) {
                        let empty = lookup.empty_binding();
                        bindings.bind_lookup(
                            lookup.name.clone(),
                            (cel::Value::from_json(&empty), Arc::new(empty)),
                        );
                    }
                }
            }
            Step::Var(i) => {
                let var = &rule.vars[i];
                match ctx.eval_checked(&rule.name, &var.expr, &bindings) {
                    Ok(value) => bindings.add_var(var.key.clone(), value),
                    Err(_) => notes.push(format!("vars.{} fails: it is left out", var.name)),
                }
            }
        }
    }
    // The errors the notes above summarise.
    for error in &ctx.outcome.errors {
        notes.push(error.to_string());
    }
    let value = program
        .eval(&bindings.activation)
        .map_err(|e| match e.line.zip(e.column) {
            Some((line, column)) => format!("{line}:{column}: {}", e.message),
            None => e.message,
        })
        .and_then(|v| v.to_json().map_err(|e| e.message));
    Ok(Probe { value, notes })
}

/// A condition's `lastTransitionTime`: the one it had while its status stays `status`,
/// else the clock.
fn transition_time(before: Option<&Value>, status: &Value, now: DateTime<Utc>) -> Value {
    match before {
        Some(b) if b.get("status") == Some(status) && b.get("lastTransitionTime").is_some() => {
            b["lastTransitionTime"].clone()
        }
        _ => Value::String(now.to_rfc3339_opts(SecondsFormat::Secs, true)),
    }
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
    /// is false, or an expression failed. `status` is its `status.onStop` mapping's.
    Blocked {
        reason: String,
        message: String,
        status: Option<RuleStatus>,
    },
}

struct RuleStatus {
    fields: Vec<(String, Value)>,
    conditions: Vec<Value>,
}

fn synced_condition(results: &[RuleResult], missing_targets: &[String]) -> Value {
    if let Some(RuleResult::Blocked {
        reason, message, ..
    }) = results
        .iter()
        .find(|r| matches!(r, RuleResult::Blocked { .. }))
    {
        return json!({"type": CONDITION_SYNCED, "status": "False", "reason": reason, "message": message});
    }
    if !missing_targets.is_empty() {
        return json!({"type": CONDITION_SYNCED, "status": "False", "reason": "TargetNotFound",
                      "message": missing_targets.join("; ")});
    }
    let fired: Vec<String> = results
        .iter()
        .filter_map(|r| match r {
            RuleResult::Fired { rule, outputs, .. } => {
                Some(format!("{rule} ({})", plural(*outputs, "output")))
            }
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

impl<'a> EvalContext<'a> {
    /// The context of one trigger's evaluation: what every expression may read.
    #[allow(clippy::too_many_arguments)]
    fn new(
        pack: &'a Pack,
        trigger: Trigger<'a>,
        world: &'a dyn World,
        now: DateTime<Utc>,
        conversions: &'a Conversions<'a>,
        outcome: &'a mut Outcome,
        reads_clusters: bool,
        record: Record,
    ) -> Self {
        let (role, member) = split_cluster(trigger.cluster);
        let self_value = conversions.trigger(trigger.object);
        let now_text = now.to_rfc3339_opts(SecondsFormat::Secs, true);
        let cluster_json = Arc::new(json!({"role": role, "name": member}));
        // Built only for rules that read it: it asks the world for every role's members.
        let clusters_json: Map<String, Value> = if reads_clusters {
            pack.spec()
                .clusters
                .iter()
                .map(|c| (c.name.clone(), json!(world.members(&c.name))))
                .collect()
        } else {
            Map::new()
        };
        let clusters_json = Arc::new(Value::Object(clusters_json));
        EvalContext {
            pack,
            world,
            trigger: trigger.object,
            trigger_cluster: trigger.cluster,
            self_value,
            cluster_cel: cel::Value::from_json(&cluster_json),
            cluster_json,
            clusters_cel: cel::Value::from_json(&clusters_json),
            clusters_json,
            now_cel: cel::Value::string(now_text.clone()),
            now_json: Arc::new(Value::String(now_text)),
            now,
            cost_used: 0,
            cost_budget: pack.document.cost_per_object(),
            conversions,
            outcome,
            missing_targets: Vec::new(),
            rule_missing: Vec::new(),
            traced: record.trace,
            owner: std::cell::OnceCell::new(),
            record_reads: record.reads,
        }
    }

    /// Records a read, when this evaluation records them (the key is made only then).
    fn read(&mut self, key: impl FnOnce() -> ReadKey) {
        if self.record_reads {
            self.outcome.reads.insert(key());
        }
    }

    /// The trigger's key as a string (its outputs' owner).
    fn owner(&self) -> &str {
        self.owner.get_or_init(|| self.outcome.trigger.to_string())
    }

    /// Empty bindings for a rule: what every expression may read besides its names.
    fn new_bindings(&self) -> Bindings<'a> {
        Bindings::new(
            &self.pack.env,
            [
                ("self", self.self_value.clone()),
                ("cluster", self.cluster_cel.clone()),
                ("clusters", self.clusters_cel.clone()),
                ("now", self.now_cel.clone()),
                ("tables", self.pack.tables_cel.clone()),
            ],
        )
    }
}

struct EvalContext<'a> {
    pack: &'a Pack,
    world: &'a dyn World,
    trigger: &'a Value,
    /// The trigger's cluster id (`ROLE` or `ROLE/NAME`).
    trigger_cluster: &'a str,
    self_value: cel::Value,
    cluster_json: Arc<Value>,
    cluster_cel: cel::Value,
    /// Role -> sorted member names, bound as `clusters`.
    clusters_json: Arc<Value>,
    clusters_cel: cel::Value,
    now_json: Arc<Value>,
    now_cel: cel::Value,
    now: DateTime<Utc>,
    /// CEL cost spent so far for this trigger, and the most it may spend.
    cost_used: u64,
    cost_budget: u64,
    conversions: &'a Conversions<'a>,
    outcome: &'a mut Outcome,
    /// Patches whose target does not exist (yet).
    missing_targets: Vec<String>,
    /// The same for the rule being evaluated, bound as `missing` in its status mapping.
    rule_missing: Vec<Value>,
    /// Build the trace (`explain`, test failures); the broker does not read it.
    traced: bool,
    /// The trigger's key as its outputs' ownership names it, made once.
    owner: std::cell::OnceCell<String>,
    /// Record `Outcome.reads` (see [`Record`]).
    record_reads: bool,
}

/// The bindings of one rule evaluation, as CEL values and as JSON for templates.
///
/// The CEL side lives in one activation, kept up to date as names are bound, rather than
/// an activation built for every expression.
struct Bindings<'e> {
    /// Each lookup's CEL value and JSON (shared with the templates' context).
    lookups: BTreeMap<String, (cel::Value, Arc<Value>)>,
    /// The variables in order; their JSON is made when templates need it.
    vars: Vec<(Arc<str>, cel::Value)>,
    activation: cel::Activation<'e>,
    /// What the activation binds besides the rule's names (`self`, `vars`, ...), to restore
    /// one that an extra binding of the same name hid.
    fixed: [(&'static str, cel::Value); 5],
}

impl<'e> Bindings<'e> {
    fn new(env: &'e cel::Env, fixed: [(&'static str, cel::Value); 5]) -> Self {
        let mut activation = cel::Activation::with_capacity(env, 12);
        for (name, value) in &fixed {
            activation.bind_borrowed(name, value.clone());
        }
        activation.bind_borrowed("vars", cel::Value::map(Vec::new()));
        Bindings {
            lookups: BTreeMap::new(),
            vars: Vec::new(),
            activation,
            fixed,
        }
    }

    fn add_var(&mut self, name: Arc<str>, value: cel::Value) {
        // In place: nothing else holds the map between expressions, so this does not copy
        // it (rebuilding it per variable made a rule's variables quadratic).
        if let Some(vars) = self.activation.get_mut("vars") {
            vars.insert_string_key(name.clone(), value.clone());
        }
        self.vars.push((name, value));
    }

    /// Binds a lookup's result (or a name bound for a while) under `name`.
    fn bind_lookup(&mut self, name: String, binding: (cel::Value, Arc<Value>)) {
        self.activation.bind(&name, binding.0.clone());
        self.lookups.insert(name, binding);
    }

    /// Binds a name for a while (`stage`, `resources`): it reads like a lookup.
    fn bind_extra(&mut self, name: &str, value: &Value) {
        self.bind_lookup(
            name.to_string(),
            (cel::Value::from_json(value), Arc::new(value.clone())),
        );
    }

    fn unbind_extra(&mut self, name: &str) {
        self.lookups.remove(name);
        // A name the evaluation binds itself reads as it did before.
        match self.fixed.iter().find(|(n, _)| *n == name) {
            Some((n, value)) => self.activation.bind_borrowed(n, value.clone()),
            None if name == "vars" => self
                .activation
                .bind_borrowed("vars", cel::Value::string_map(&self.vars)),
            None => self.activation.unbind(name),
        }
    }
}

/// What a lookup searched for.
enum Sought {
    Name(String),
    Labels(Map<String, Value>),
}

/// A stage as one evaluation sees it.
struct StageDefinition<'s> {
    name: String,
    stage: &'s CompiledStage,
    /// The definition from data, bound as `stage`.
    definition: Option<Value>,
    gates: Vec<Expr>,
    timeout: Option<chrono::TimeDelta>,
}

/// Stage progress states, as written into the trigger's status.
pub const STAGE_IN_PROGRESS: &str = "InProgress";
pub const STAGE_COMPLETED: &str = "Completed";
pub const STAGE_FAILED: &str = "Failed";

fn is_identifier(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Why a rule stopped.
enum Stop {
    Skip(String),
    Block { reason: String, message: String },
}

impl<'a> EvalContext<'a> {
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

    /// Evaluates an expression; an error is recorded on the outcome and stops the rule.
    fn eval(
        &mut self,
        rule: &str,
        expr: &Expr,
        bindings: &Bindings,
        item: Option<(&cel::Value, usize)>,
    ) -> Result<cel::Value, Stop> {
        // Each expression may spend up to its own limit, and all of them together up to
        // the object's budget: one tenant's huge object cannot starve the others.
        let remaining = self.cost_budget.saturating_sub(self.cost_used);
        let pack_limit = self.pack.document.cost_per_expression();
        let per_expression = expr.max_cost.map_or(pack_limit, |m| m.min(pack_limit));
        let object_bound = remaining < per_expression;
        let limit = remaining.min(per_expression);
        let result = match item {
            None => expr.program.eval_within(&bindings.activation, limit),
            Some((value, index)) => {
                // A `forEach` element: bound over a copy, the rule's bindings stay as they are.
                let mut activation = bindings.activation.clone();
                activation.bind_borrowed("item", value.clone());
                activation.bind_borrowed("index", cel::Value::from_json(&json!(index)));
                expr.program.eval_within(&activation, limit)
            }
        };
        match result {
            Ok((v, cost)) => {
                self.cost_used += cost;
                Ok(v)
            }
            Err(e) => {
                let at = e.line.zip(e.column);
                let message = if e.message.starts_with("cost limit exceeded") {
                    if object_bound {
                        format!(
                            "{}: the trigger's cost budget (spec.limits.celCostPerObject = {}) is spent",
                            e.message, self.cost_budget
                        )
                    } else if per_expression < pack_limit {
                        format!(
                            "{} (the maxCost {per_expression} the rule states for it)",
                            e.message
                        )
                    } else {
                        format!("{} (spec.limits.celCostPerExpression)", e.message)
                    }
                } else {
                    e.message
                };
                Err(self.fail_at(rule, expr, message, at))
            }
        }
    }

    fn fail(&mut self, rule: &str, path: &str, expression: Option<&str>, message: String) -> Stop {
        self.fail_located(rule, path, expression, message, None)
    }

    /// An expression failed: the error names where it is written.
    fn fail_expr(&mut self, rule: &str, expr: &Expr, message: String) -> Stop {
        self.fail_at(rule, expr, message, None)
    }

    /// [`Self::fail_expr`] at `at` (line, column) of the expression, its start otherwise.
    fn fail_at(
        &mut self,
        rule: &str,
        expr: &Expr,
        message: String,
        at: Option<(usize, usize)>,
    ) -> Stop {
        let (line, column) = at.unwrap_or((1, 1));
        let location = expr.origin.as_ref().map(|o| o.locate(line, column));
        let path = expr.label.as_deref().unwrap_or(&expr.path);
        self.fail_located(rule, path, Some(expr.source()), message, location)
    }

    fn fail_located(
        &mut self,
        rule: &str,
        path: &str,
        expression: Option<&str>,
        message: String,
        location: Option<ErrorLocation>,
    ) -> Stop {
        let error = RuleError {
            rule: rule.to_string(),
            path: path.to_string(),
            expression: expression.map(str::to_string),
            message,
            location,
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
            None => Err(self.fail_expr(
                rule,
                expr,
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
            Err(e) => Err(self.fail_expr(rule, expr, e.message)),
        }
    }

    /// [`Self::eval_json`] for a value whose JSON is needed later if at all (a variable):
    /// it fails as `eval_json` does, without making the JSON.
    fn eval_checked(
        &mut self,
        rule: &str,
        expr: &Expr,
        bindings: &Bindings<'_>,
    ) -> Result<cel::Value, Stop> {
        let value = self.eval(rule, expr, bindings, None)?;
        match value.check_json() {
            Ok(()) => Ok(value),
            Err(e) => Err(self.fail_expr(rule, expr, e.message)),
        }
    }

    fn eval_string(
        &mut self,
        rule: &str,
        expr: &Expr,
        bindings: &Bindings,
    ) -> Result<String, Stop> {
        self.eval_string_with(rule, expr, bindings, None)
    }

    /// [`Self::eval_string`] with a `forEach` element bound.
    fn eval_string_with(
        &mut self,
        rule: &str,
        expr: &Expr,
        bindings: &Bindings,
        item: Option<(&cel::Value, usize)>,
    ) -> Result<String, Stop> {
        let (value, json) = self.eval_json(rule, expr, bindings, item)?;
        match json {
            Value::String(s) => Ok(s),
            _ => Err(self.fail_expr(
                rule,
                expr,
                format!("expected a string, got {}", value.type_name()),
            )),
        }
    }

    /// One object rendered twice by this trigger (a `forEach` with a repeated item, two
    /// outputs naming the same object) is one output when both agree; when they differ the
    /// first stays, and the trigger reports the conflict as an error of the later output.
    fn join_duplicate_outputs(&mut self) -> Option<RuleResult> {
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
            if crate::plan::absorb(first, &d).is_ok() {
                crate::plan::stamp_merged(self.pack.name(), &self.pack.version_text, first);
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

    fn run_rule(&mut self, rule: &CompiledRule) -> RuleResult {
        let mut bindings = self.new_bindings();
        match self.try_rule(rule, &mut bindings) {
            Ok(result) => result,
            Err(Stop::Skip(guard)) => RuleResult::Skipped {
                rule: rule.name.clone(),
                guard,
            },
            Err(Stop::Block { reason, message }) => {
                let status = self.stopped_status(rule, &mut bindings, &reason, &message);
                RuleResult::Blocked {
                    reason,
                    message,
                    status,
                }
            }
        }
    }

    /// A stopped rule's `status.onStop`, evaluated with what was bound before the stop and
    /// `stop` = `{reason, message}`. If it fails too, the error is reported and the rule
    /// writes no fields: the stop's own reason stays in `Synced`.
    fn stopped_status(
        &mut self,
        rule: &CompiledRule,
        bindings: &mut Bindings,
        reason: &str,
        message: &str,
    ) -> Option<RuleStatus> {
        let mapping = rule.status.as_ref()?.on_stop.as_deref()?;
        bindings.bind_extra("stop", &json!({"reason": reason, "message": message}));
        let missing = Value::Array(std::mem::take(&mut self.rule_missing));
        bindings.bind_extra("missing", &missing);
        self.eval_status(&rule.name, mapping, bindings, Vec::new())
            .ok()
    }

    /// The fields and conditions of a status mapping, after `fields` (a stage progress).
    fn eval_status(
        &mut self,
        name: &str,
        mapping: &CompiledStatus,
        bindings: &Bindings,
        mut fields: Vec<(String, Value)>,
    ) -> Result<RuleStatus, Stop> {
        for (field, expr) in &mapping.fields {
            let (_, json) = self.eval_json(name, expr, bindings, None)?;
            if !json.is_null() {
                fields.push((field.clone(), json));
            }
        }
        let mut conditions = Vec::new();
        for c in &mapping.conditions {
            let (_, status) = self.eval_json(name, &c.status, bindings, None)?;
            let status = match status {
                Value::Bool(true) => "True".to_string(),
                Value::Bool(false) => "False".to_string(),
                Value::String(s) if ["True", "False", "Unknown"].contains(&s.as_str()) => s,
                other => {
                    return Err(self.fail_expr(
                        name,
                        &c.status,
                        format!(
                            "condition status must be True, False or Unknown, got {}",
                            compact(&other)
                        ),
                    ));
                }
            };
            let reason = self.eval_string(name, &c.reason, bindings)?;
            let message = match &c.message {
                Some(m) => self.eval_string(name, m, bindings)?,
                None => String::new(),
            };
            conditions.push(
                json!({"type": c.type_, "status": status, "reason": reason, "message": message}),
            );
        }
        Ok(RuleStatus { fields, conditions })
    }

    fn try_rule(
        &mut self,
        rule: &CompiledRule,
        bindings: &mut Bindings,
    ) -> Result<RuleResult, Stop> {
        let name = rule.name.as_str();
        self.rule_missing.clear();
        for step in &rule.steps {
            match *step {
                Step::Guard(i) => {
                    let guard = &rule.guards[i];
                    let passed = self.eval_bool(name, &guard.expr, bindings, None)?;
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
                            Some(e) => self.eval_string(name, e, bindings)?,
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
                Step::Lookup(i) => self.run_lookup(rule, i, bindings)?,
                Step::Var(i) => {
                    let var = &rule.vars[i];
                    let value = self.eval_checked(name, &var.expr, bindings)?;
                    if self.traced {
                        let json = value.to_json().unwrap_or(Value::Null);
                        self.trace(
                            name,
                            format!("vars.{}", var.name),
                            Some(var.expr.source()),
                            compact(&json),
                        );
                    }
                    bindings.add_var(var.key.clone(), value);
                }
            }
        }

        // Outputs join the outcome only when the whole rule succeeds: a rule stopped by a
        // later output or its status mapping desires nothing.
        let mut rendered: Vec<DesiredObject> = Vec::new();
        let mut context = self.template_context(bindings);
        for output in &rule.outputs {
            self.render_output(
                rule,
                output,
                bindings,
                &mut context,
                &mut rendered,
                &mut Vec::new(),
            )?;
        }
        let progress = match &rule.stages {
            None => None,
            Some(stages) => {
                Some(self.run_stages(rule, stages, bindings, &mut context, &mut rendered)?)
            }
        };

        if let Some(progress) = &progress {
            // The status mapping reads the progress as `stages`.
            bindings.bind_extra("stages", progress);
        }
        // ... and the patch targets that do not exist as `missing`.
        let missing = Value::Array(std::mem::take(&mut self.rule_missing));
        bindings.bind_extra("missing", &missing);
        let status = match &rule.status {
            None => progress
                .as_ref()
                .zip(rule.stages.as_ref())
                .map(|(progress, stages)| RuleStatus {
                    fields: vec![(stages.status_field.clone(), progress.clone())],
                    conditions: Vec::new(),
                }),
            Some(mapping) => {
                let mut fields = Vec::new();
                if let (Some(progress), Some(stages)) = (&progress, &rule.stages) {
                    fields.push((stages.status_field.clone(), progress.clone()));
                }
                Some(self.eval_status(name, mapping, bindings, fields)?)
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

    /// Runs a rule's stages: renders what the current stage applies (and what earlier stages
    /// without `cleanup` keep), checks the current stage's gates against the objects as
    /// observed, moves on while gates pass, and returns the progress to write into the
    /// trigger's status. Pure: the progress read comes from the trigger's status, the time
    /// from the clock; a stage waiting for its timeout sets `Outcome.requeue_after`.
    fn run_stages(
        &mut self,
        rule: &CompiledRule,
        stages: &CompiledStages,
        bindings: &mut Bindings,
        context: &mut RenderContext<'_>,
        rendered: &mut Vec<DesiredObject>,
    ) -> Result<Value, Stop> {
        let name = rule.name.as_str();
        let defs = self.stage_definitions(rule, stages, bindings)?;
        let previous = self
            .trigger
            .get("status")
            .and_then(|s| s.get(&stages.status_field))
            .filter(|p| p.is_object());
        let field = |p: &Value, f: &str| p.get(f).and_then(Value::as_str).map(str::to_string);
        let mut state = previous
            .and_then(|p| field(p, "state"))
            .unwrap_or_else(|| STAGE_IN_PROGRESS.to_string());
        let mut message = previous.and_then(|p| field(p, "message"));
        let mut start = previous
            .and_then(|p| field(p, "stageStartTime"))
            .and_then(|t| DateTime::parse_from_rfc3339(&t).ok())
            .map_or(self.now, |t| t.with_timezone(&Utc));
        let mut index = match previous.and_then(|p| field(p, "stage")) {
            None => 0,
            Some(stage) => match defs.iter().position(|d| d.name == stage) {
                Some(i) => i,
                None if state == STAGE_IN_PROGRESS => {
                    state = STAGE_FAILED.to_string();
                    message = Some(format!("stage `{stage}` is no longer defined"));
                    0
                }
                None => defs.len(),
            },
        };
        if defs.is_empty() {
            state = STAGE_COMPLETED.to_string();
        }
        match state.as_str() {
            STAGE_COMPLETED => {
                for j in (0..defs.len()).filter(|j| !defs[*j].stage.cleanup) {
                    self.render_stage(rule, &defs[j], bindings, context, rendered)?;
                }
            }
            STAGE_FAILED => {
                // The failed stage's objects stay for inspection.
                for j in (0..defs.len())
                    .filter(|j| *j == index || (*j < index && !defs[*j].stage.cleanup))
                {
                    self.render_stage(rule, &defs[j], bindings, context, rendered)?;
                }
            }
            _ => {
                for j in (0..index.min(defs.len())).filter(|j| !defs[*j].stage.cleanup) {
                    self.render_stage(rule, &defs[j], bindings, context, rendered)?;
                }
                loop {
                    let Some(def) = defs.get(index) else {
                        state = STAGE_COMPLETED.to_string();
                        break;
                    };
                    let mark = rendered.len();
                    let bound = self.render_stage(rule, def, bindings, context, rendered)?;
                    let passed = self.stage_gates_pass(rule, def, &bound, bindings)?;
                    if passed {
                        if def.stage.cleanup {
                            rendered.truncate(mark);
                        }
                        index += 1;
                        start = self.now;
                        continue;
                    }
                    if let Some(timeout) = def.timeout {
                        let deadline = start + timeout;
                        if self.now >= deadline {
                            state = STAGE_FAILED.to_string();
                            message = Some(format!(
                                "stage `{}` did not pass within {}",
                                def.name,
                                crate::duration::format_duration(timeout)
                            ));
                        } else if let Ok(wait) = (deadline - self.now).to_std() {
                            let nearest = self.outcome.requeue_after.map_or(wait, |r| r.min(wait));
                            self.outcome.requeue_after = Some(nearest);
                        }
                    }
                    break;
                }
            }
        }
        let mut progress = Map::new();
        progress.insert("state".into(), Value::String(state.clone()));
        let current = defs.get(index).or(defs.last());
        if let Some(def) = current {
            progress.insert("stage".into(), Value::String(def.name.clone()));
        }
        progress.insert("index".into(), json!(index.min(defs.len())));
        progress.insert(
            "stageStartTime".into(),
            Value::String(start.to_rfc3339_opts(SecondsFormat::Secs, true)),
        );
        if state == STAGE_FAILED
            && let Some(m) = message
        {
            progress.insert("message".into(), Value::String(m));
        }
        let progress = Value::Object(progress);
        if self.traced {
            self.trace(name, "stages", None, compact(&progress));
        }
        Ok(progress)
    }

    /// The stages as this evaluation sees them: written in the pack, or one per element of
    /// `from.list`, with their names, gates and timeouts evaluated.
    fn stage_definitions<'s>(
        &mut self,
        rule: &CompiledRule,
        stages: &'s CompiledStages,
        bindings: &mut Bindings,
    ) -> Result<Vec<StageDefinition<'s>>, Stop> {
        let name = rule.name.as_str();
        let Some(from) = &stages.from else {
            return Ok(stages
                .stages
                .iter()
                .map(|stage| StageDefinition {
                    name: stage.name.clone(),
                    stage,
                    definition: None,
                    gates: stage.gates.clone(),
                    timeout: stage.timeout,
                })
                .collect());
        };
        let Some(pattern) = stages.stages.first() else {
            return Ok(Vec::new());
        };
        let (value, list) = self.eval_json(name, &from.list, bindings, None)?;
        let Value::Array(elements) = list else {
            return Err(self.fail_expr(
                name,
                &from.list,
                format!("expected a list of stages, got {}", value.type_name()),
            ));
        };
        let mut defs = Vec::new();
        for element in elements {
            bindings.bind_extra("stage", &element);
            let result = self.stage_from(rule, from, pattern, &element, bindings);
            bindings.unbind_extra("stage");
            defs.push(result?);
        }
        Ok(defs)
    }

    fn stage_from<'s>(
        &mut self,
        rule: &CompiledRule,
        from: &CompiledStagesFrom,
        pattern: &'s CompiledStage,
        element: &Value,
        bindings: &Bindings,
    ) -> Result<StageDefinition<'s>, Stop> {
        let name = rule.name.as_str();
        let stage_name = self.eval_string(name, &from.name, bindings)?;
        let mut gates = Vec::new();
        if let Some(expr) = &from.gates {
            let (value, sources) = self.eval_json(name, expr, bindings, None)?;
            let sources = match sources {
                Value::Null => Vec::new(),
                Value::Array(items) => items,
                _ => {
                    return Err(self.fail_expr(
                        name,
                        expr,
                        format!(
                            "expected a list of CEL expressions, got {}",
                            value.type_name()
                        ),
                    ));
                }
            };
            for (i, source) in sources.iter().enumerate() {
                let path = format!("stage `{stage_name}`, gate {i}");
                let Some(source) = source.as_str() else {
                    return Err(self.fail(
                        name,
                        &path,
                        None,
                        format!(
                            "a gate must be a CEL expression (a string), got {}",
                            compact(source)
                        ),
                    ));
                };
                match self.pack.gate(source) {
                    Ok(program) => gates.push(Expr {
                        program,
                        path,
                        max_cost: None,
                        origin: None,
                        label: None,
                    }),
                    Err(e) => {
                        return Err(self.fail(
                            name,
                            &path,
                            Some(source),
                            format!("invalid CEL expression: {e}"),
                        ));
                    }
                }
            }
        }
        let timeout = match &from.timeout {
            None => None,
            Some(expr) => match self.eval_json(name, expr, bindings, None)? {
                (_, Value::Null) => None,
                (_, Value::String(text)) => match crate::duration::parse_duration(&text) {
                    Ok(t) => Some(t),
                    Err(e) => {
                        return Err(self.fail_expr(name, expr, e));
                    }
                },
                (value, _) => {
                    return Err(self.fail_expr(
                        name,
                        expr,
                        format!(
                            "expected a duration string or null, got {}",
                            value.type_name()
                        ),
                    ));
                }
            },
        };
        Ok(StageDefinition {
            name: stage_name,
            stage: pattern,
            definition: Some(element.clone()),
            gates,
            timeout,
        })
    }

    /// Renders a stage's outputs; returns each object's key under its `bindAs` name.
    fn render_stage(
        &mut self,
        rule: &CompiledRule,
        def: &StageDefinition<'_>,
        bindings: &mut Bindings,
        context: &mut RenderContext<'_>,
        rendered: &mut Vec<DesiredObject>,
    ) -> Result<Vec<(String, ObjectKey)>, Stop> {
        let mut bound = Vec::new();
        if let Some(definition) = &def.definition {
            bindings.bind_extra("stage", definition);
            context.set("stage", Held::Owned(definition.clone()));
        }
        let mut result = Ok(());
        for output in &def.stage.outputs {
            result = self.render_output(rule, output, bindings, context, rendered, &mut bound);
            if result.is_err() {
                break;
            }
        }
        bindings.unbind_extra("stage");
        context.unset("stage");
        result.map(|()| bound)
    }

    /// Whether a stage's gates all hold over its objects as the world has them. Until every
    /// object exists the gates are not evaluated: the stage waits.
    fn stage_gates_pass(
        &mut self,
        rule: &CompiledRule,
        def: &StageDefinition<'_>,
        bound: &[(String, ObjectKey)],
        bindings: &mut Bindings,
    ) -> Result<bool, Stop> {
        let name = rule.name.as_str();
        let mut resources = Map::new();
        let mut missing = Vec::new();
        for (bind, key) in bound {
            self.read(|| ReadKey::Object(key.clone()));
            let observed = self.world.get_key(key);
            match observed {
                Some(o) => {
                    resources.insert(bind.clone(), Value::clone(&o));
                }
                None => {
                    missing.push(key.to_string());
                    resources.insert(bind.clone(), Value::Null);
                }
            }
        }
        if !missing.is_empty() {
            if self.traced {
                self.trace(
                    name,
                    format!("stage {}", def.name),
                    None,
                    format!("waiting for {}", missing.join(", ")),
                );
            }
            return Ok(false);
        }
        // Gates from data read each resource by its name too, as the seed binds them.
        let mut extra: Vec<String> = vec!["resources".into()];
        bindings.bind_extra("resources", &Value::Object(resources.clone()));
        if let Some(definition) = &def.definition {
            bindings.bind_extra("stage", definition);
            extra.push("stage".into());
            for (bind, object) in &resources {
                if !bindings.lookups.contains_key(bind) && is_identifier(bind) {
                    bindings.bind_extra(bind, object);
                    extra.push(bind.clone());
                }
            }
        }
        let mut outcome = Ok(true);
        for gate in &def.gates {
            match self.eval_bool(name, gate, bindings, None) {
                Ok(true) => {}
                Ok(false) => {
                    if self.traced {
                        self.trace(name, &gate.path, Some(gate.source()), "false: waiting");
                    }
                    outcome = Ok(false);
                    break;
                }
                Err(stop) => {
                    outcome = Err(stop);
                    break;
                }
            }
        }
        for bind in &extra {
            bindings.unbind_extra(bind);
        }
        outcome
    }

    /// Whether a lookup's or output's `when` holds (no `when`: it does); a false one is
    /// traced as a skip of `step`.
    fn when_holds(
        &mut self,
        rule: &str,
        when: Option<&Expr>,
        bindings: &Bindings,
        step: impl FnOnce() -> String,
    ) -> Result<bool, Stop> {
        let Some(when) = when else {
            return Ok(true);
        };
        let holds = self.eval_bool(rule, when, bindings, None)?;
        if !holds && self.traced {
            self.trace(
                rule,
                step(),
                Some(when.source()),
                "skipped: `when` is false",
            );
        }
        Ok(holds)
    }

    /// Renders one output (once, or once per `forEach` element) into `rendered`; `bound`
    /// gets each object's key under its `bindAs` name, for stage gates.
    fn render_output(
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

    fn run_lookup(
        &mut self,
        rule: &CompiledRule,
        i: usize,
        bindings: &mut Bindings,
    ) -> Result<(), Stop> {
        let name = rule.name.as_str();
        let lookup = &rule.lookups[i];
        let by_labels = matches!(lookup.key, LookupKey::Labels(_));
        let empty = lookup.empty_binding();
        if !self.when_holds(name, lookup.when.as_ref(), bindings, || {
            format!("lookup {}", lookup.name)
        })? {
            bindings.bind_lookup(
                lookup.name.clone(),
                (cel::Value::from_json(&empty), Arc::new(empty)),
            );
            return Ok(());
        }
        let namespace = match &lookup.namespace {
            _ if lookup.cluster_scoped => None,
            Some(expr) => Some(self.eval_string(name, expr, bindings)?).filter(|s| !s.is_empty()),
            None => self
                .trigger
                .at(&["metadata", "namespace"])
                .and_then(Value::as_str)
                .map(str::to_string),
        };
        let path = || format!("lookup `{}`", lookup.name);
        let clusters: Vec<String> = if lookup.all_clusters {
            let members = self.world.members(&lookup.cluster);
            if members.is_empty() {
                vec![lookup.cluster.clone()]
            } else {
                members
                    .iter()
                    .map(|m| cluster_id(&lookup.cluster, m))
                    .collect()
            }
        } else {
            let member = match &lookup.cluster_name {
                Some(expr) => Some(self.eval_string(name, expr, bindings)?),
                None => None,
            };
            vec![self.target_cluster(name, &path, &lookup.cluster, member)?]
        };
        let mut found: Vec<(&str, Arc<Value>)> = Vec::new();
        // What was searched for: the trace and a required lookup's message say it, formatted
        // only then (every trigger of every round does lookups).
        let (sought, expression) = match &lookup.key {
            LookupKey::Name(expr) => {
                let object_name = self.eval_string(name, expr, bindings)?;
                for cluster in &clusters {
                    let key = ObjectKey {
                        cluster: cluster.clone(),
                        api_version: lookup.api_version.clone(),
                        kind: lookup.kind.clone(),
                        namespace: namespace.clone(),
                        name: object_name.clone(),
                    };
                    if let Some(o) = self.world.get(
                        cluster,
                        &key.api_version,
                        &key.kind,
                        namespace.as_deref(),
                        &object_name,
                    ) {
                        found.push((cluster, o));
                    }
                    self.read(|| ReadKey::Object(key));
                }
                (Sought::Name(object_name), expr)
            }
            LookupKey::Labels(expr) => {
                let (value, selector) = self.eval_json(name, expr, bindings, None)?;
                let Value::Object(selector) = selector else {
                    return Err(self.fail_expr(
                        name,
                        expr,
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
                for cluster in &clusters {
                    let matching = self
                        .world
                        .list(
                            cluster,
                            &lookup.api_version,
                            &lookup.kind,
                            namespace.as_deref(),
                        )
                        .into_iter()
                        .filter(|o| {
                            let have = labels(o);
                            wanted.iter().all(|(k, v)| have.get(k) == Some(v))
                        });
                    found.extend(matching.map(|o| (cluster.as_str(), o)));
                    self.read(|| ReadKey::List {
                        cluster: cluster.clone(),
                        api_version: lookup.api_version.clone(),
                        kind: lookup.kind.clone(),
                        namespace: namespace.clone(),
                    });
                }
                (Sought::Labels(selector), expr)
            }
        };
        if let Some(max) = lookup.max_items
            && found.len() as u64 > max
        {
            let message = format!(
                "lookup `{}` found {} {} objects, more than its maxItems {max}",
                lookup.name,
                found.len(),
                lookup.kind
            );
            self.outcome.errors.push(RuleError {
                rule: name.to_string(),
                path: path(),
                expression: None,
                message: message.clone(),
                location: None,
            });
            return Err(Stop::Block {
                reason: "LookupTooLarge".into(),
                message,
            });
        }
        let searched = || {
            if lookup.all_clusters {
                format!("any cluster of role `{}`", lookup.cluster)
            } else {
                format!("cluster `{}`", clusters.join(", "))
            }
        };
        let ns = namespace.as_deref().unwrap_or("");
        let not_found = || match &sought {
            Sought::Name(object_name) => format!(
                "{} `{object_name}` not found in namespace `{ns}` of {}",
                lookup.kind,
                searched()
            ),
            Sought::Labels(selector) => format!(
                "no {} matches labels {} in namespace `{ns}` of {}",
                lookup.kind,
                compact(&Value::Object(selector.clone())),
                searched()
            ),
        };
        if self.traced {
            let described = || match (&sought, &namespace) {
                (Sought::Name(n), Some(ns)) => {
                    format!("{} {} {ns}/{n}", lookup.api_version, lookup.kind)
                }
                (Sought::Name(n), None) => format!("{} {} {n}", lookup.api_version, lookup.kind),
                (Sought::Labels(_), _) => String::new(),
            };
            let result = match (&lookup.key, lookup.all_clusters) {
                (LookupKey::Name(_), false) if found.is_empty() => {
                    format!("{} not found", described())
                }
                (LookupKey::Name(_), false) => format!("{} found", described()),
                _ => format!("{} matched", plural(found.len(), "object")),
            };
            self.trace(
                name,
                format!("lookup {}", lookup.name),
                Some(expression.source()),
                result,
            );
        }
        if found.is_empty() && lookup.required {
            return Err(Stop::Block {
                reason: lookup.reason.clone(),
                message: format!(
                    "{} (lookup `{}` of rule `{}`)",
                    not_found(),
                    lookup.name,
                    rule.name
                ),
            });
        }
        let binding: (cel::Value, Arc<Value>) = if lookup.all_clusters {
            // Each object with the cluster it came from.
            let entries: Vec<(cel::Value, Value)> = found
                .iter()
                .map(|(cluster, o)| {
                    let (role, member) = split_cluster(cluster);
                    let cluster_json = json!({"role": role, "name": member});
                    let cel_entry = cel::Value::string_map(&[
                        (Arc::from("cluster"), cel::Value::from_json(&cluster_json)),
                        (Arc::from("object"), self.conversions.shared(o)),
                    ]);
                    (
                        cel_entry,
                        json!({"cluster": cluster_json, "object": Value::clone(o)}),
                    )
                })
                .collect();
            let (cel_entries, json_entries): (Vec<_>, Vec<_>) = entries.into_iter().unzip();
            (
                cel::Value::list(cel_entries),
                Arc::new(Value::Array(json_entries)),
            )
        } else if by_labels {
            (
                cel::Value::list(found.iter().map(|(_, o)| self.conversions.shared(o))),
                Arc::new(Value::Array(
                    found.iter().map(|(_, o)| Value::clone(o)).collect(),
                )),
            )
        } else {
            match found.first() {
                // The world's own copy: the templates read it where it is.
                Some((_, o)) => (self.conversions.shared(o), Arc::clone(o)),
                None => (cel::Value::null(), Arc::new(Value::Null)),
            }
        };
        bindings.bind_lookup(lookup.name.clone(), binding);
        Ok(())
    }

    /// The cluster a lookup reads or an output goes to: the member `name` of `role` when
    /// given; otherwise the trigger's own cluster when `role` is its role, or the role's only
    /// cluster.
    fn target_cluster(
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
    fn template_context(&self, bindings: &Bindings) -> RenderContext<'a> {
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
            // A namespaced kind without a namespace is a mistake of the template, not a
            // tenant reaching outside the scope: say so.
            let namespaced = key.namespace.is_none()
                && self.pack.spec().scope.iter().any(|entry| {
                    entry.cluster == key.role()
                        && entry.kinds.iter().any(|k| {
                            k.api_version == key.api_version
                                && k.kind == key.kind
                                && !k.cluster_scoped
                        })
                });
            let message = match &key.namespace {
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
        }))
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
        set_string(labels, LABEL_MANAGED_BY, MANAGED_BY);
        set_string(labels, LABEL_PACK, pack);
    }
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(annotations) = annotations {
        set_string(annotations, ANNOTATION_PACK_VERSION, version);
        set_string(annotations, ANNOTATION_RULE, sources);
        set_string(annotations, ANNOTATION_OWNERS, owners);
    }
}

/// Sets `key` to the string `value`, leaving an equal entry as it is: a merge restamps
/// every object, most with what they already carry, and this saves copying both strings.
fn set_string(map: &mut Map<String, Value>, key: &str, value: &str) {
    match map.get_mut(key) {
        Some(Value::String(s)) if s == value => {}
        Some(slot) => *slot = Value::String(value.to_string()),
        None => {
            map.insert(key.to_string(), Value::String(value.to_string()));
        }
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
