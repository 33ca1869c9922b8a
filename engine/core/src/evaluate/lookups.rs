//! Lookups: the objects a rule reads besides its trigger, by name or by labels, in one cluster
//! or every cluster of a role, bound under the lookup's name (and recorded as reads).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use switchyard_cel as cel;

use crate::object::{At, ObjectKey, cluster_id, labels, split_cluster};
use crate::outcome::{ReadKey, RuleError};
use crate::pack::{CompiledRule, LookupKey};

use super::bindings::Bindings;
use super::context::{
    EvalContext, REASON_TOO_MANY_MEMBERS, Stop, compact, plural, too_many_members,
};

/// What a lookup searched for.
enum Sought {
    Name(String),
    Labels(Map<String, Value>),
}

impl<'a> EvalContext<'a> {
    pub(super) fn run_lookup(
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
            bindings.found(i, 0);
            return Ok(());
        }
        let namespace = match &lookup.namespace {
            _ if lookup.without_namespace => None,
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
            let max = self
                .pack
                .spec()
                .clusters
                .iter()
                .find(|c| c.name == lookup.cluster)
                .and_then(|c| c.max_members);
            if let Some(message) =
                max.and_then(|max| too_many_members(&lookup.cluster, members.len(), max))
            {
                return Err(Stop::Block {
                    reason: REASON_TOO_MANY_MEMBERS.into(),
                    message,
                });
            }
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
                    if let Some(o) = self.world.get(
                        cluster,
                        &lookup.api_version,
                        &lookup.kind,
                        namespace.as_deref(),
                        &object_name,
                    ) {
                        found.push((cluster, o));
                    }
                    self.read(|| {
                        ReadKey::Object(ObjectKey {
                            cluster: cluster.clone(),
                            api_version: lookup.api_version.clone(),
                            kind: lookup.kind.clone(),
                            namespace: namespace.clone(),
                            name: object_name.clone(),
                        })
                    });
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
        let in_workspaces = self.pack.workspace_annotation(&lookup.cluster).is_some();
        let searched = || {
            if lookup.all_clusters {
                format!("any cluster of role `{}`", lookup.cluster)
            } else if in_workspaces {
                // A tenant reads this: its own workspace, nothing of the role's others.
                let names: Vec<&str> = clusters
                    .iter()
                    .map(|c| crate::object::split_cluster(c).1)
                    .collect();
                format!("workspace `{}`", names.join(", "))
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
            let (binding, identity) = match found.first() {
                // The world's own copy: the templates read it where it is.
                Some((_, o)) => (
                    (self.conversions.shared(o), Arc::clone(o)),
                    Arc::as_ptr(o) as usize,
                ),
                None => ((cel::Value::null(), Arc::new(Value::Null)), 0),
            };
            bindings.found(i, identity);
            binding
        };
        bindings.bind_lookup(lookup.name.clone(), binding);
        Ok(())
    }
}
