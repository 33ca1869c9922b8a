//! What an evaluation is given and what it decides: the trigger, the [`Outcome`] with its
//! desired objects, reads, errors and trace, and the facts a merge needs of each trigger.
//! Every module that evaluates, merges, prints or tests speaks these types; this module
//! imports only object identity and the pack model's output modes.

use std::collections::BTreeSet;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::model::{DeletionPolicy, OutputMode};
use crate::names::CONDITION_SYNCED;
use crate::object::{At, ObjectKey};

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
    /// The output takes over an existing object of the same name (`adopt: true`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub adopt: bool,
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
    /// The CEL cost the evaluation spent (Kubernetes' cost units), for metrics.
    #[serde(skip)]
    pub cost: u64,
}

/// What merging needs of a trigger beyond its outputs: which trigger's version wins an output
/// several render differently, and how to restate `Synced` when the merge refuses this one's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TriggerFacts {
    pub precedence: Precedence,
    /// The evaluation's clock.
    pub now: DateTime<Utc>,
    /// The trigger's `Synced` condition before this evaluation.
    pub synced_before: Option<Value>,
    /// A rule stopped (a guard with a reason, a required lookup missing, a scope violation,
    /// a patch target missing, a conflict): what `Synced=False` says, known even when no rule
    /// writes status. The broker keeps such a trigger's previous outputs.
    pub stopped: bool,
    /// The `Synced` condition when no rule writes it (`status.syncedCondition: false`): kept
    /// for Events and metrics, left out of the status.
    pub unwritten_synced: Option<Value>,
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
        if let Some(Value::Object(m)) = self.synced_mut() {
            m.insert("status".into(), Value::String(state.into()));
            m.insert("reason".into(), Value::String(reason.into()));
            m.insert("message".into(), Value::String(message.into()));
            m.insert("lastTransitionTime".into(), transition);
        }
    }

    /// The trigger's `Synced` condition as this evaluation states it, written into the
    /// status or not.
    pub fn synced(&self) -> Option<&Value> {
        self.status
            .as_ref()
            .and_then(|s| s.get("conditions"))
            .and_then(Value::as_array)
            .and_then(|c| {
                c.iter()
                    .find(|c| c.get("type").and_then(Value::as_str) == Some(CONDITION_SYNCED))
            })
            .or(self.facts.unwritten_synced.as_ref())
    }

    fn synced_mut(&mut self) -> Option<&mut Value> {
        if self.facts.unwritten_synced.is_some() {
            return self.facts.unwritten_synced.as_mut();
        }
        self.status
            .as_mut()
            .and_then(|s| s.get_mut("conditions"))
            .and_then(Value::as_array_mut)
            .and_then(|c| {
                c.iter_mut()
                    .find(|c| c.get("type").and_then(Value::as_str) == Some(CONDITION_SYNCED))
            })
    }
}

/// The trigger and its cluster (`ROLE` or `ROLE/NAME`).
#[derive(Debug, Clone, Copy)]
pub struct Trigger<'a> {
    pub cluster: &'a str,
    pub object: &'a Value,
}

/// A condition's `lastTransitionTime`: the one it had while its status stays `status`,
/// else the clock.
pub(crate) fn transition_time(before: Option<&Value>, status: &Value, now: DateTime<Utc>) -> Value {
    match before {
        Some(b) if b.get("status") == Some(status) && b.get("lastTransitionTime").is_some() => {
            b["lastTransitionTime"].clone()
        }
        _ => Value::String(now.to_rfc3339_opts(SecondsFormat::Secs, true)),
    }
}
