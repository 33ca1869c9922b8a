//! The status an evaluation writes onto its trigger: what happened to each rule, the engine's
//! `Synced` condition, each rule's status mapping (or its `onStop` when the rule stopped), and
//! the conditions' transition times.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use crate::names::CONDITION_SYNCED;
use crate::object::At;
use crate::outcome::transition_time;
use crate::pack::{CompiledRule, CompiledStatus};

use super::bindings::Bindings;
use super::context::{EvalContext, Stop, compact, plural};

/// What happened to one rule.
pub(super) enum RuleResult {
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

/// A rule's status mapping, evaluated: the fields and conditions it writes.
pub(super) struct RuleStatus {
    pub(super) fields: Vec<(String, Value)>,
    pub(super) conditions: Vec<Value>,
}

/// The engine's `Synced` condition: the first stopped rule's reason, else a patch target
/// not found, else which rules rendered (or why none applies).
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

/// The trigger's status: the rules' status fields in rule-name order, and the conditions: those
/// a rule's `fields.conditions` gives, kept verbatim (a downstream object's status copied as
/// it is), then the engine's `Synced` and the rules' `conditions` mappings, each replacing the
/// condition of its type where there is one, stamped with its transition time and the
/// trigger's generation.
pub(super) fn trigger_status(
    results: Vec<RuleResult>,
    missing_targets: &[String],
    trigger: &Value,
    now: DateTime<Utc>,
) -> Value {
    let mut status = Map::new();
    let mut kept: Vec<Value> = Vec::new();
    let mut conditions: Vec<Value> = Vec::new();
    let synced = synced_condition(&results, missing_targets);
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
                match value {
                    // Checked to be a list of conditions by `eval_status`.
                    Value::Array(list) if field == STATUS_CONDITIONS => {
                        for condition in list {
                            set_condition(&mut kept, condition);
                        }
                    }
                    value => {
                        status.insert(field, value);
                    }
                }
            }
            for condition in s.conditions {
                set_condition(&mut conditions, condition);
            }
        }
    }
    let generation = trigger.at(&["metadata", "generation"]).cloned();
    let previous: &[Value] = trigger
        .at(&["status", "conditions"])
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    for mut c in conditions {
        let before = previous.iter().find(|p| p.get("type") == c.get("type"));
        let transition = transition_time(before, &c["status"], now);
        if let Value::Object(m) = &mut c {
            m.insert("lastTransitionTime".into(), transition);
            if let Some(g) = &generation {
                m.insert("observedGeneration".into(), g.clone());
            }
        }
        set_condition(&mut kept, c);
    }
    status.insert(STATUS_CONDITIONS.into(), Value::Array(kept));
    Value::Object(status)
}

/// The status field the conditions live in.
const STATUS_CONDITIONS: &str = "conditions";

/// Takes the `Synced` condition out of a trigger status, and the `conditions` field with it
/// when nothing else is left in it (a kind whose status declares no conditions).
pub(super) fn take_synced(status: &mut Value) -> Option<Value> {
    let fields = status.as_object_mut()?;
    let conditions = fields.get_mut(STATUS_CONDITIONS)?.as_array_mut()?;
    let at = conditions
        .iter()
        .position(|c| c.get("type").and_then(Value::as_str) == Some(CONDITION_SYNCED))?;
    let synced = conditions.remove(at);
    if conditions.is_empty() {
        fields.remove(STATUS_CONDITIONS);
    }
    Some(synced)
}

/// Puts `condition` in the place of the one of its type, or after the others.
fn set_condition(conditions: &mut Vec<Value>, condition: Value) {
    match conditions
        .iter_mut()
        .find(|c| c.get("type") == condition.get("type"))
    {
        Some(slot) => *slot = condition,
        None => conditions.push(condition),
    }
}

impl<'a> EvalContext<'a> {
    /// A stopped rule's `status.onStop`, evaluated with what was bound before the stop and
    /// `stop` = `{reason, message}`. If it fails too, the error is reported and the rule
    /// writes no fields: the stop's own reason stays in `Synced`.
    pub(super) fn stopped_status(
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
    pub(super) fn eval_status(
        &mut self,
        name: &str,
        mapping: &CompiledStatus,
        bindings: &Bindings,
        mut fields: Vec<(String, Value)>,
    ) -> Result<RuleStatus, Stop> {
        for (field, expr) in &mapping.fields {
            let (_, json) = self.eval_json(name, expr, bindings, None)?;
            if field == STATUS_CONDITIONS && !json.is_null() && !is_condition_list(&json) {
                return Err(self.fail_expr(
                    name,
                    expr,
                    format!(
                        "status field `conditions` must be a list of conditions (maps with a string `type`), got {}",
                        compact(&json)
                    ),
                ));
            }
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
}

/// A list of maps, each with a string `type`.
fn is_condition_list(value: &Value) -> bool {
    value.as_array().is_some_and(|list| {
        list.iter()
            .all(|c| c.get("type").is_some_and(Value::is_string))
    })
}
