//! Comparing two plans (`switchyard diff`): the same inputs rendered by two versions of a
//! pack, object by object.
//!
//! The `switchyard.dev/pack-version` annotation is left out of the comparison: a version
//! bump alone would otherwise show every object as changed and hide the changes that matter.

use serde::Serialize;
use serde_json::Value;

use crate::markdown;
use crate::model::OutputMode;
use crate::names::ANNOTATION_PACK_VERSION;
use crate::object::ObjectKey;
use crate::outcome::DesiredObject;
use crate::plan::{Plan, plan_order};
use crate::testing::unified_diff;
use crate::yaml;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    Added,
    Removed,
    Changed,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub kind: ChangeKind,
    /// What changed: an output, or `status of <trigger>`.
    pub subject: String,
    pub cluster: String,
    /// A unified diff, base to head.
    pub diff: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanDiff {
    pub changes: Vec<Change>,
}

impl PlanDiff {
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for change in &self.changes {
            out.push_str(&format!(
                "{} {} (cluster {})\n",
                match change.kind {
                    ChangeKind::Added => "added",
                    ChangeKind::Removed => "removed",
                    ChangeKind::Changed => "changed",
                },
                change.subject,
                change.cluster
            ));
            out.push_str(&change.diff);
            if !change.diff.ends_with('\n') {
                out.push('\n');
            }
        }
        out
    }

    /// A pull-request comment. Everything a pack or a tenant wrote (names, kinds, clusters,
    /// the diffs) is quoted as code ([`crate::markdown`]), so it renders as written and
    /// nothing else.
    pub fn to_markdown(&self, base: &str, head: &str) -> String {
        let count = |k: ChangeKind| self.changes.iter().filter(|c| c.kind == k).count();
        let mut out = format!(
            "### switchyard diff: {} → {}\n\n",
            markdown::code_span(base),
            markdown::code_span(head)
        );
        if self.changes.is_empty() {
            out.push_str("No changes: both versions render the same objects and status.\n");
            return out;
        }
        out.push_str(&format!(
            "{} added, {} removed, {} changed.\n\n| change | object | cluster |\n|---|---|---|\n",
            count(ChangeKind::Added),
            count(ChangeKind::Removed),
            count(ChangeKind::Changed)
        ));
        for c in &self.changes {
            out.push_str(&format!(
                "| {:?} | {} | {} |\n",
                c.kind,
                markdown::code_span(&c.subject),
                markdown::code_span(&c.cluster)
            ));
        }
        out.push('\n');
        for c in &self.changes {
            out.push_str(&format!(
                "<details><summary>{:?} <code>{}</code></summary>\n\n{}</details>\n\n",
                c.kind,
                markdown::html_text(&c.subject),
                markdown::code_block(&c.diff, "diff")
            ));
        }
        out
    }
}

fn subject(key: &ObjectKey) -> String {
    format!("{} {} {}", key.api_version, key.kind, key.namespaced_name())
}

/// An output as the diff names it: a patch says so, since removing it removes only the
/// pack's fields, never the object.
fn output_subject(desired: &DesiredObject) -> String {
    match desired.mode {
        OutputMode::Apply | OutputMode::Create => subject(&desired.key),
        OutputMode::Patch => format!("patch of {}", subject(&desired.key)),
    }
}

fn comparable(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(a) = copy
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        a.remove(ANNOTATION_PACK_VERSION);
    }
    copy
}

fn comparable_status(status: Option<&Value>) -> Value {
    let mut copy = status.cloned().unwrap_or(Value::Null);
    if let Some(conditions) = copy.get_mut("conditions").and_then(Value::as_array_mut) {
        for c in conditions {
            if let Some(m) = c.as_object_mut() {
                m.remove("lastTransitionTime");
            }
        }
    }
    copy
}

/// Object-by-object and status-by-status differences from `base` to `head`.
pub fn diff_plans(base: &Plan, head: &Plan) -> PlanDiff {
    let mut changes = Vec::new();
    let mut b = base.objects.iter().peekable();
    let mut h = head.objects.iter().peekable();
    loop {
        let order = match (b.peek(), h.peek()) {
            (None, None) => break,
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (Some(x), Some(y)) => plan_order(&x.key).cmp(&plan_order(&y.key)),
        };
        match order {
            std::cmp::Ordering::Less => {
                if let Some(x) = b.next() {
                    changes.push(Change {
                        kind: ChangeKind::Removed,
                        subject: output_subject(x),
                        cluster: x.key.cluster.clone(),
                        diff: unified_diff(
                            &yaml::to_yaml(&comparable(&x.object)),
                            "",
                            "base",
                            "head",
                        ),
                    });
                }
            }
            std::cmp::Ordering::Greater => {
                if let Some(y) = h.next() {
                    changes.push(Change {
                        kind: ChangeKind::Added,
                        subject: output_subject(y),
                        cluster: y.key.cluster.clone(),
                        diff: unified_diff(
                            "",
                            &yaml::to_yaml(&comparable(&y.object)),
                            "base",
                            "head",
                        ),
                    });
                }
            }
            std::cmp::Ordering::Equal => {
                if let (Some(x), Some(y)) = (b.next(), h.next()) {
                    let (old, new) = (comparable(&x.object), comparable(&y.object));
                    if old != new {
                        changes.push(Change {
                            kind: ChangeKind::Changed,
                            subject: output_subject(x),
                            cluster: x.key.cluster.clone(),
                            diff: unified_diff(
                                &yaml::to_yaml(&old),
                                &yaml::to_yaml(&new),
                                "base",
                                "head",
                            ),
                        });
                    }
                }
            }
        }
    }
    for outcome in &head.outcomes {
        let before = base.outcomes.iter().find(|o| o.trigger == outcome.trigger);
        let old = comparable_status(before.and_then(|o| o.status.as_ref()));
        let new = comparable_status(outcome.status.as_ref());
        if old != new {
            changes.push(Change {
                kind: ChangeKind::Changed,
                subject: format!("status of {}", subject(&outcome.trigger)),
                cluster: outcome.trigger.cluster.clone(),
                diff: unified_diff(&yaml::to_yaml(&old), &yaml::to_yaml(&new), "base", "head"),
            });
        }
    }
    PlanDiff { changes }
}
