//! One object as the triggers that desire it share it: the ownership labels and annotations
//! stamped on an output, the versions of one object absorbed into one (sources and owners
//! joined, patches joined field by field), and the [`Conflict`] when versions differ. Both an
//! evaluation (one trigger rendering an object twice) and a plan's merge use it.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::model::OutputMode;
use crate::names::{
    ANNOTATION_OWNERS, ANNOTATION_PACK_VERSION, ANNOTATION_RULE, LABEL_MANAGED_BY, LABEL_PACK,
    MANAGED_BY,
};
use crate::object::ObjectKey;
use crate::outcome::DesiredObject;

/// Two triggers that want different contents for the same object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Conflict {
    pub key: ObjectKey,
    /// The owners whose version was kept.
    pub kept: BTreeSet<String>,
    /// The owner whose different version was refused.
    pub refused: BTreeSet<String>,
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} and {} render different contents; kept the version of {}, which desired it first",
            self.key,
            join(&self.kept),
            join(&self.refused),
            join(&self.kept)
        )
    }
}

impl Conflict {
    /// The `Synced` message of a trigger whose version was refused.
    pub fn refused_message(&self) -> String {
        format!(
            "`{}` is rendered with different contents by {}, which desired it first",
            self.key,
            join(&self.kept)
        )
    }
}

/// The entries of a set, comma-separated.
pub(crate) fn join(set: &BTreeSet<String>) -> String {
    set.iter().cloned().collect::<Vec<_>>().join(", ")
}

/// How many triggers the `switchyard.dev/owners` annotation names. Kubernetes refuses an
/// object whose annotations exceed 256 KiB together, and an output shared by thousands of
/// triggers (a tenant's namespace) must still apply; past this many, the annotation names the
/// first ones in key order and ends with [`OWNERS_MORE`].
pub const OWNERS_LISTED: usize = 8;
/// The last entry of a `switchyard.dev/owners` annotation that names only some owners.
pub const OWNERS_MORE: &str = "+more";

/// The `switchyard.dev/owners` annotation for a set of owners: bounded whatever its size.
pub fn owners_annotation(owners: &BTreeSet<String>) -> String {
    let mut listed: Vec<&str> = owners
        .iter()
        .take(OWNERS_LISTED)
        .map(String::as_str)
        .collect();
    if owners.len() > OWNERS_LISTED {
        listed.push(OWNERS_MORE);
    }
    listed.join(",")
}

/// Whether an output's `switchyard.dev/owners` annotation `have` (`None`: absent) says what
/// `want` says: it names every trigger of `want`, or says there are more than it lists. A
/// change of owners alone is then no reason to write the object again.
pub fn owners_covered(want: &str, have: Option<&str>) -> bool {
    let Some(have) = have else {
        return want.is_empty();
    };
    let listed: BTreeSet<&str> = have.split(',').collect();
    listed.contains(OWNERS_MORE) || want.split(',').all(|o| o.is_empty() || listed.contains(o))
}

/// Adds another trigger's version of an object to the merged one: the same contents (ownership
/// aside) join its sources and owners; different contents are a conflict and leave it as it
/// was.
///
/// Patches of one object join into one patch when they agree on every field both set.
pub fn absorb(existing: &mut DesiredObject, incoming: &DesiredObject) -> Result<(), Box<Conflict>> {
    let joined = match (existing.mode, incoming.mode) {
        (OutputMode::Apply, OutputMode::Apply) | (OutputMode::Create, OutputMode::Create) => {
            same_without_ownership(&existing.object, &incoming.object)
        }
        (OutputMode::Patch, OutputMode::Patch) => {
            match join_patches(&existing.object, &incoming.object) {
                Some(object) => {
                    existing.object = object;
                    true
                }
                None => false,
            }
        }
        // One trigger owns the object, another patches it: the pack contradicts itself.
        _ => false,
    };
    match joined {
        true => {
            existing.sources.extend(incoming.sources.iter().cloned());
            existing.owners.extend(incoming.owners.iter().cloned());
            existing.adopt |= incoming.adopt;
            Ok(())
        }
        false => Err(Box::new(Conflict {
            key: incoming.key.clone(),
            kept: existing.owners.clone(),
            refused: incoming.owners.clone(),
        })),
    }
}

/// Two patches of one object as one: maps join key by key, anything else must be equal.
fn join_patches(a: &Value, b: &Value) -> Option<Value> {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            let mut joined = a.clone();
            for (key, value) in b {
                let merged = match a.get(key) {
                    Some(existing) => join_patches(existing, value)?,
                    None => value.clone(),
                };
                joined.insert(key.clone(), merged);
            }
            Some(Value::Object(joined))
        }
        _ => (a == b).then(|| a.clone()),
    }
}

/// Writes a merged object's ownership metadata: every source, and its owners as
/// [`owners_annotation`] bounds them.
pub fn stamp_merged(pack: &str, version: &str, desired: &mut DesiredObject) {
    if desired.mode == OutputMode::Patch {
        // A patch carries only the pack's fields, never its metadata.
        return;
    }
    let sources = desired
        .sources
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(",");
    let owners = owners_annotation(&desired.owners);
    stamp_ownership(&mut desired.object, pack, version, &sources, &owners);
}

/// Whether two objects are equal once the ownership annotations (`switchyard.dev/owners` and
/// `switchyard.dev/rule` in `metadata.annotations`) are left out of both, without copying
/// either.
fn same_without_ownership(a: &Value, b: &Value) -> bool {
    // Lookups by key, not zipped iteration: equal whatever the maps' iteration order.
    fn same_entries<'a>(
        a: &'a Map<String, Value>,
        b: &'a Map<String, Value>,
        special: &str,
        same: impl Fn(&'a Value, &'a Value) -> bool,
    ) -> bool {
        a.len() == b.len()
            && a.iter().all(|(key, va)| {
                b.get(key).is_some_and(|vb| {
                    if key == special {
                        same(va, vb)
                    } else {
                        va == vb
                    }
                })
            })
    }
    fn ownership(key: &str) -> bool {
        key == ANNOTATION_OWNERS || key == ANNOTATION_RULE
    }
    let annotations = |a: &Value, b: &Value| match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            let others = |m: &Map<String, Value>| m.keys().filter(|k| !ownership(k)).count();
            others(a) == others(b)
                && a.iter()
                    .filter(|(k, _)| !ownership(k))
                    .all(|(k, va)| b.get(k) == Some(va))
        }
        _ => a == b,
    };
    let metadata = |a: &Value, b: &Value| match (a, b) {
        (Value::Object(a), Value::Object(b)) => same_entries(a, b, "annotations", annotations),
        _ => a == b,
    };
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => same_entries(a, b, "metadata", metadata),
        _ => a == b,
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
