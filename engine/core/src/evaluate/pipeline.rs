//! The rule pipeline: `evaluate()` and its variants pick the rules that watch a trigger, run
//! each rule's steps (guards, lookups, variables) in dependency order, render its outputs and
//! stages, and assemble the outcome.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::model::DeletionPolicy;
use crate::names::CONDITION_SYNCED;
use crate::object::{At, ObjectKey, World, labels, selector_matches, split_cluster};
use crate::outcome::{DesiredObject, Outcome, Precedence, TraceEntry, Trigger, TriggerFacts};
use crate::pack::{CompiledRule, Pack, Step};

use super::bindings::Bindings;
use super::context::{EvalContext, REASON_TOO_MANY_MEMBERS, Record, Stop, compact};
use super::conversions::Conversions;
use super::status::{RuleResult, RuleStatus, take_synced, trigger_status};

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
        cost: 0,
        facts: TriggerFacts {
            precedence: Precedence::of(trigger.object),
            now,
            synced_before: trigger
                .object
                .at(&["status", "conditions"])
                .and_then(Value::as_array)
                .and_then(|c| c.iter().find(|c| c["type"] == CONDITION_SYNCED))
                .cloned(),
            stopped: false,
            unwritten_synced: None,
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
    // What of the trigger the rules' expressions can read.
    let needed = match rules.as_slice() {
        [rule] => std::borrow::Cow::Borrowed(&rule.self_needed),
        _ => {
            let mut needed = switchyard_cel::Needed::default();
            for rule in &rules {
                needed.join(&rule.self_needed);
            }
            std::borrow::Cow::Owned(needed)
        }
    };
    let mut ctx = EvalContext::new(
        pack,
        trigger,
        world,
        now,
        conversions,
        &mut outcome,
        reads_clusters,
        record,
        &needed,
    );
    // Only the rules that write status have their say in it (`writeStatus: false`).
    let mut results = Vec::new();
    let mut stopped = false;
    for rule in &rules {
        let result = ctx.run_rule(rule);
        stopped |= matches!(result, RuleResult::Blocked { .. });
        if rule.write_status {
            results.push(result);
        }
    }
    let writes_status = rules.iter().any(|r| r.write_status);
    if let Some(conflict) = ctx.join_duplicate_outputs() {
        stopped = true;
        results.insert(0, conflict);
    }

    let missing_targets = std::mem::take(&mut ctx.missing_targets);
    ctx.outcome.facts.stopped = stopped || !missing_targets.is_empty();
    let cost = ctx.cost_used;
    // The pack's own trigger is no object: nothing to write a status or a finalizer onto.
    let pack_trigger = pack.is_pack_trigger(&outcome.trigger);
    if writes_status && !pack_trigger {
        let mut status = trigger_status(results, &missing_targets, trigger.object, now);
        // `status.syncedCondition: false` on every rule that writes status: the condition is
        // kept aside for Events and metrics, not written.
        if !rules.iter().any(|r| r.write_status && r.synced_condition) {
            outcome.facts.unwritten_synced = take_synced(&mut status);
        }
        outcome.status = Some(status);
    }
    outcome.cost = cost;

    let needs_finalizer = rules
        .iter()
        .any(|r| r.finalizer && r.deletion == DeletionPolicy::Delete && !r.outputs.is_empty());
    if needs_finalizer && !pack_trigger {
        outcome.finalizer = Some(format!("switchyard.dev/{}", pack.name()));
    }
    outcome.desired.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(outcome)
}

impl<'a> EvalContext<'a> {
    fn run_rule(&mut self, rule: &CompiledRule) -> RuleResult {
        let mut bindings = self.new_bindings(rule.vars.len(), rule.lookups.len());
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

    fn try_rule(
        &mut self,
        rule: &CompiledRule,
        bindings: &mut Bindings,
    ) -> Result<RuleResult, Stop> {
        let name = rule.name.as_str();
        self.rule_missing.clear();
        if rule.reads_clusters
            && let Some(message) = &self.too_many_members
        {
            return Err(Stop::Block {
                reason: REASON_TOO_MANY_MEMBERS.into(),
                message: message.clone(),
            });
        }
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
}
