//! The context of one trigger's evaluation: what every expression may read (`self`,
//! `cluster`, `clusters`, `now`, `tables`), the CEL cost spent against the trigger's budget, and
//! the helpers that evaluate an expression and record a failure on the outcome.

use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};
use switchyard_cel as cel;

use crate::object::{World, split_cluster};
use crate::outcome::{ErrorLocation, Outcome, ReadKey, RuleError, TraceEntry, Trigger};
use crate::pack::{Expr, Pack};

use super::bindings::Bindings;
use super::conversions::{Conversions, SharedKey};

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

pub(super) struct EvalContext<'a> {
    pub(super) pack: &'a Pack,
    pub(super) world: &'a dyn World,
    pub(super) trigger: &'a Value,
    /// The trigger's cluster id (`ROLE` or `ROLE/NAME`).
    pub(super) trigger_cluster: &'a str,
    pub(super) self_value: cel::Value,
    pub(super) cluster_json: Arc<Value>,
    pub(super) cluster_cel: cel::Value,
    /// Role -> sorted member names, bound as `clusters`.
    pub(super) clusters_json: Arc<Value>,
    pub(super) clusters_cel: cel::Value,
    /// A role with more members than its `maxMembers`: a rule reading `clusters` stops.
    pub(super) too_many_members: Option<String>,
    pub(super) now_json: Arc<Value>,
    pub(super) now_cel: cel::Value,
    pub(super) now: DateTime<Utc>,
    /// CEL cost spent so far for this trigger, and the most it may spend.
    pub(super) cost_used: u64,
    pub(super) cost_budget: u64,
    pub(super) conversions: &'a Conversions<'a>,
    pub(super) outcome: &'a mut Outcome,
    /// Patches whose target does not exist (yet).
    pub(super) missing_targets: Vec<String>,
    /// The same for the rule being evaluated, bound as `missing` in its status mapping.
    pub(super) rule_missing: Vec<Value>,
    /// Build the trace (`explain`, test failures); the broker does not read it.
    pub(super) traced: bool,
    /// The trigger's key as its outputs' ownership names it, made once.
    pub(super) owner: std::cell::OnceCell<String>,
    /// Record `Outcome.reads` (see [`Record`]).
    pub(super) record_reads: bool,
}

impl<'a> EvalContext<'a> {
    /// The context of one trigger's evaluation: what every expression may read.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        pack: &'a Pack,
        trigger: Trigger<'a>,
        world: &'a dyn World,
        now: DateTime<Utc>,
        conversions: &'a Conversions<'a>,
        outcome: &'a mut Outcome,
        reads_clusters: bool,
        record: Record,
        needed: &cel::Needed,
    ) -> Self {
        let (role, member) = split_cluster(trigger.cluster);
        let self_value = conversions.trigger(trigger.object, needed);
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
        let too_many_members = pack.spec().clusters.iter().find_map(|c| {
            let count = clusters_json.get(&c.name)?.as_array()?.len();
            too_many_members(&c.name, count, c.max_members?)
        });
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
            too_many_members,
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
    pub(super) fn read(&mut self, key: impl FnOnce() -> ReadKey) {
        if self.record_reads {
            self.outcome.reads.insert(key());
        }
    }

    /// The trigger's key as a string (its outputs' owner).
    pub(super) fn owner(&self) -> &str {
        self.owner.get_or_init(|| self.outcome.trigger.to_string())
    }

    /// Empty bindings for a rule of `vars` variables: what every expression may read
    /// besides its names.
    pub(super) fn new_bindings(&self, vars: usize, lookups: usize) -> Bindings<'a> {
        Bindings::new(
            &self.pack.env,
            [
                ("self", self.self_value.clone()),
                ("cluster", self.cluster_cel.clone()),
                ("clusters", self.clusters_cel.clone()),
                ("now", self.now_cel.clone()),
                ("tables", self.pack.tables_cel.clone()),
                ("params", self.pack.params_cel.clone()),
            ],
            vars,
            lookups,
        )
    }
}

/// Why a rule stopped.
pub(super) enum Stop {
    Skip(String),
    Block { reason: String, message: String },
}

impl<'a> EvalContext<'a> {
    pub(super) fn trace(
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
    pub(super) fn eval(
        &mut self,
        rule: &str,
        expr: &Expr,
        bindings: &Bindings,
        item: Option<(&cel::Value, usize)>,
    ) -> Result<cel::Value, Stop> {
        self.eval_sharing(rule, expr, bindings, item)
            .map(|(value, _)| value)
    }

    /// [`Self::eval`], and whether the value is one shared between triggers (see
    /// `Expr::shared_by`): those are kept only when they have a JSON form.
    fn eval_sharing(
        &mut self,
        rule: &str,
        expr: &Expr,
        bindings: &Bindings,
        item: Option<(&cel::Value, usize)>,
    ) -> Result<(cel::Value, bool), Stop> {
        // Each expression may spend up to its own limit, and all of them together up to
        // the object's budget: one tenant's huge object cannot starve the others.
        let remaining = self.cost_budget.saturating_sub(self.cost_used);
        let pack_limit = self.pack.document.cost_per_expression();
        let per_expression = expr.max_cost.map_or(pack_limit, |m| m.min(pack_limit));
        let object_bound = remaining < per_expression;
        let limit = remaining.min(per_expression);
        // A value that depends only on looked-up objects: the first trigger that found them
        // evaluated it. Evaluation is deterministic: it would cost the same again, and fails
        // only when that cost is past the limit (then it runs, for its error).
        let shared = match (item, &expr.shared_by) {
            (None, Some(deps)) => bindings.found_by(deps).map(|found| SharedKey {
                pack: self.pack.generation,
                expr: std::ptr::from_ref(expr) as usize,
                found,
            }),
            _ => None,
        };
        if let Some(key) = &shared
            && let Some((value, cost)) = self.conversions.shared_value(key)
            && cost <= limit
        {
            self.cost_used += cost;
            return Ok((value, true));
        }
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
                if let Some(key) = shared
                    && v.check_json().is_ok()
                {
                    self.conversions.share_value(key, &v, cost);
                }
                Ok((v, false))
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

    pub(super) fn fail(
        &mut self,
        rule: &str,
        path: &str,
        expression: Option<&str>,
        message: String,
    ) -> Stop {
        self.fail_located(rule, path, expression, message, None)
    }

    /// An expression failed: the error names where it is written.
    pub(super) fn fail_expr(&mut self, rule: &str, expr: &Expr, message: String) -> Stop {
        self.fail_at(rule, expr, message, None)
    }

    /// [`Self::fail_expr`] at `at` (line, column) of the expression, its start otherwise.
    pub(super) fn fail_at(
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

    pub(super) fn fail_located(
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

    pub(super) fn eval_bool(
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

    pub(super) fn eval_json(
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
    pub(super) fn eval_checked(
        &mut self,
        rule: &str,
        expr: &Expr,
        bindings: &Bindings<'_>,
    ) -> Result<cel::Value, Stop> {
        let (value, shared) = self.eval_sharing(rule, expr, bindings, None)?;
        if shared {
            return Ok(value);
        }
        match value.check_json() {
            Ok(()) => Ok(value),
            Err(e) => Err(self.fail_expr(rule, expr, e.message)),
        }
    }

    pub(super) fn eval_string(
        &mut self,
        rule: &str,
        expr: &Expr,
        bindings: &Bindings,
    ) -> Result<String, Stop> {
        self.eval_string_with(rule, expr, bindings, None)
    }

    /// [`Self::eval_string`] with a `forEach` element bound.
    pub(super) fn eval_string_with(
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

    /// Whether a lookup's or output's `when` holds (no `when`: it does); a false one is
    /// traced as a skip of `step`.
    pub(super) fn when_holds(
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
}

pub(super) fn compact(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

pub(super) fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// Why a rule stops when a role has more members than its `maxMembers`.
pub(super) const REASON_TOO_MANY_MEMBERS: &str = "TooManyMembers";

/// The stop message of a role with `count` members past its `maxMembers`, if it is past.
pub(super) fn too_many_members(role: &str, count: usize, max: u64) -> Option<String> {
    (count as u64 > max).then(|| {
        format!(
            "cluster role `{role}` has {count} members, more than its maxMembers {max} (pack.yaml)"
        )
    })
}
