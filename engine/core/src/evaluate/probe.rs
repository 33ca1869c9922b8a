//! `probe_rule`: one expression evaluated as if written in a rule, with the rule's names bound
//! as evaluation binds them (`switchyard cel --pack`).

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::Value;
use switchyard_cel as cel;

use crate::object::{World, labels, selector_matches};
use crate::outcome::{Outcome, Trigger, TriggerFacts};
use crate::pack::{Pack, Step};

use super::context::{EvalContext, Record, Stop};
use super::conversions::Conversions;

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
        cost: 0,
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
        // A probe may go on to evaluate what the rule does not.
        &switchyard_cel::Needed::Whole,
    );
    let mut bindings = ctx.new_bindings(rule.vars.len(), rule.lookups.len());
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
