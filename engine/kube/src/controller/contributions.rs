//! Each trigger's contribution to a pack's outputs, the reverse index from an output to the
//! triggers that desire it, and the merge of an output several triggers desire (as `render`
//! merges them: the trigger that claimed it first wins a conflict).

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;
use switchyard_core::DesiredObject;
use switchyard_core::ObjectKey;
use switchyard_core::evaluate::Precedence;
use switchyard_core::model::OutputMode;
use switchyard_core::names::{ANNOTATION_APPLIED, ANNOTATION_OWNERS};
use switchyard_core::plan::{Conflict, absorb, stamp_merged};

use super::state::{Kept, Key, Merged, MergedOutput, Owners, PackState};

impl PackState {
    /// Replaces a trigger's contribution; returns the outputs whose merged form changes
    /// (added, removed, or different from before).
    pub(super) fn set_contribution(
        &mut self,
        trigger: &Key,
        desired: Vec<DesiredObject>,
        precedence: Option<&Precedence>,
    ) -> BTreeSet<Key> {
        let mut touched = BTreeSet::new();
        match precedence {
            Some(p) if !desired.is_empty() => {
                self.precedence.insert(trigger.clone(), p.clone());
            }
            _ => {
                self.precedence.remove(trigger);
            }
        }
        let previous = self.contributions.remove(trigger).unwrap_or_default();
        let desired: Vec<Kept> = desired
            .into_iter()
            .map(|d| {
                let hash = hash_value(&d.object);
                // One copy of an output's key, however many maps name it.
                let key = match self.by_output.get_key_value(&d.key) {
                    Some((shared, _)) => shared.clone(),
                    None => Arc::new(d.key.clone()),
                };
                let owners = owners_hash(&d.object);
                Kept::new(d, key, hash, owners)
            })
            .collect();
        for d in &previous {
            if !desired.iter().any(|n| n.key() == d.key()) {
                if let Some(owners) = self.by_output.get_mut(d.key()) {
                    owners.remove(trigger);
                    if owners.is_empty() {
                        self.by_output.remove(d.key());
                    }
                }
                touched.insert(d.key().clone());
            }
        }
        for d in &desired {
            if previous.contains(d) {
                continue;
            }
            self.by_output
                .entry(d.key().clone())
                .or_default()
                .insert(trigger.clone());
            touched.insert(d.key().clone());
        }
        for key in &touched {
            self.merged.remove(key);
        }
        if !desired.is_empty() {
            self.contributions.insert(trigger.clone(), desired);
        }
        touched
    }

    /// The object to apply for an output: every contribution merged as `render` merges them.
    /// `None` when no trigger desires it.
    pub(super) fn merged(&mut self, key: &Key) -> Option<MergedOutput> {
        if let Some(found) = self.merged.get(key) {
            return Some(MergedOutput::Ready(found.clone()));
        }
        let owners = self.by_output.get(key)?;
        let contribution = |trigger: &ObjectKey| {
            self.contributions
                .get(trigger)
                .and_then(|c| c.iter().find(|d| d.key() == key))
        };
        if let Some(released) = owners
            .iter()
            .find(|t| contribution(t).is_some_and(|d| d.is_released()))
        {
            return Some(MergedOutput::Evaluate(released.clone()));
        }
        if owners.len() == 1 {
            // One owner: evaluate() stamped it exactly as merging would; nothing is refused,
            // and nothing is cached beside the contribution.
            let kept = contribution(owners.iter().next()?)?;
            let merged = Merged {
                desired: Arc::new(kept.desired()?),
                hash: kept.hash.clone(),
                owners: kept.owners_hash,
                conflicts: Vec::new(),
            };
            if let Some(before) = self.refused.remove(key) {
                self.restate_refused(owners.clone(), &before);
            }
            return Some(MergedOutput::Ready(Arc::new(merged)));
        }
        let mut conflicts = Vec::new();
        let mut merged: Option<DesiredObject> = None;
        // In the order the triggers claim it, as `render` merges.
        let mut ordered: Vec<&Key> = owners.iter().collect();
        ordered.sort_by_key(|t| (self.precedence.get(*t), *t));
        for trigger in ordered {
            let Some(d) = contribution(trigger).and_then(Kept::desired) else {
                continue;
            };
            match &mut merged {
                None => merged = Some(d),
                Some(m) => {
                    if let Err(conflict) = absorb(m, &d) {
                        tracing::warn!(
                            object = %key,
                            kept = ?conflict.kept,
                            refused = ?conflict.refused,
                            "triggers render different contents for one object; kept the version of the one that desired it first"
                        );
                        conflicts.push(*conflict);
                    }
                }
            }
        }
        let mut desired = merged?;
        stamp_merged(
            self.pack.name(),
            &self.pack.version().to_string(),
            &mut desired,
        );
        let refused: BTreeSet<String> = conflicts.iter().flat_map(|c| c.refused.clone()).collect();
        let before = self.refused.remove(key).unwrap_or_default();
        let changed: BTreeSet<String> = before.symmetric_difference(&refused).cloned().collect();
        self.restate_refused(owners.clone(), &changed);
        if !refused.is_empty() {
            self.refused.insert(key.clone(), refused);
        }
        let hash = hash_value(&desired.object);
        let owners = owners_hash(&desired.object);
        let merged = Arc::new(Merged {
            desired: Arc::new(desired),
            hash,
            owners,
            conflicts,
        });
        self.merged.insert(key.clone(), merged.clone());
        Some(MergedOutput::Ready(merged))
    }

    /// The content hash and `owners_hash` of the merged form of an output applied whole,
    /// where they are known without merging: cached from the last merge, or those of its one
    /// owner's contribution.
    pub(super) fn known_merged_hash(&self, key: &Key) -> Option<(&str, u64)> {
        if let Some(merged) = self.merged.get(key) {
            return (merged.desired.mode == OutputMode::Apply)
                .then_some((merged.hash.as_str(), merged.owners));
        }
        let owners = self.by_output.get(key)?;
        if owners.len() != 1 {
            return None;
        }
        let owner = owners.iter().next()?;
        let kept = self
            .contributions
            .get(owner)?
            .iter()
            .find(|d| d.key() == key)?;
        kept.applies_whole()
            .then_some((kept.hash.as_str(), kept.owners_hash))
    }

    /// Releases the objects of the trigger's contribution that only it desires: they were
    /// just written (or their write failed, and its retry evaluates again). An output that
    /// becomes shared later has its owner evaluated again for the merge
    /// ([`MergedOutput::Evaluate`]). The objects of shared outputs are kept compact.
    pub(super) fn release_objects(&mut self, trigger: &ObjectKey) {
        let Some(kept) = self.contributions.get_mut(trigger) else {
            return;
        };
        for d in kept {
            if self.by_output.get(d.key()).is_some_and(|o| o.len() == 1) {
                d.release();
            } else {
                d.compact();
            }
        }
    }

    /// Triggers (by name) whose version of an output was refused before and is no more, or
    /// the other way round: evaluated again so their `Synced` says so.
    fn restate_refused(&mut self, owners: Owners, changed: &BTreeSet<String>) {
        for changed in changed {
            if let Some(t) = owners.iter().find(|t| &t.to_string() == changed) {
                self.restate.insert(t.clone());
            } else if let Some(t) = self
                .contributions
                .keys()
                .find(|t| &t.to_string() == changed)
            {
                self.restate.insert(t.clone());
            }
        }
    }

    /// The conflicts of the outputs `trigger` desires that refused its version.
    pub(super) fn refused_versions(&self, trigger: &ObjectKey) -> Vec<Conflict> {
        let name = trigger.to_string();
        let Some(contributed) = self.contributions.get(trigger) else {
            return Vec::new();
        };
        contributed
            .iter()
            .filter_map(|d| self.merged.get(d.key()))
            .flat_map(|m| m.conflicts.iter())
            .filter(|c| c.refused.contains(&name))
            .cloned()
            .collect()
    }

    /// Some of these outputs are desired by no trigger any more: prune has work.
    pub(super) fn orphans_any(&self, touched: &BTreeSet<Key>) -> bool {
        touched.iter().any(|k| !self.by_output.contains_key(k))
    }
}

/// The hash of what is applied for an output: SHA-256 of its canonical JSON (serde_json's
/// maps are ordered: the text is canonical) without the owners annotation, whose changes
/// alone do not need a write (see `owners_covered`), first 16 hex digits. Stable across
/// restarts and versions: it is written onto the object and compared after a restart.
/// The text goes straight into the digest, the two annotations skipped on the way: an
/// evaluation hashes every output it renders.
pub(super) fn hash_value(value: &Value) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    // Writing into a digest cannot fail, nor can serialising a `Value`.
    let _ = serde_json::to_writer(&mut hasher, &Comparable::Object(value));
    let digest = hasher.finalize();
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// A hash of an object's owners annotation, which `hash_value` leaves out: what tells an
/// object applied for other owners from one applied for these (kept in memory only).
pub(super) fn owners_hash(object: &Value) -> u64 {
    use std::hash::{Hash, Hasher};
    let owners = object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(ANNOTATION_OWNERS))
        .and_then(Value::as_str);
    let mut hasher = std::hash::DefaultHasher::new();
    owners.hash(&mut hasher);
    hasher.finish()
}

/// An object serialised without the annotations that do not count as its content.
enum Comparable<'v> {
    Object(&'v Value),
    Metadata(&'v Value),
    Annotations(&'v Value),
}

impl serde::Serialize for Comparable<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let (Comparable::Object(value)
        | Comparable::Metadata(value)
        | Comparable::Annotations(value)) = *self;
        let Value::Object(map) = value else {
            return value.serialize(serializer);
        };
        let mut out = serializer.serialize_map(None)?;
        for (k, v) in map {
            match (self, k.as_str()) {
                (Comparable::Object(_), "metadata") => {
                    out.serialize_entry(k, &Comparable::Metadata(v))?
                }
                (Comparable::Metadata(_), "annotations") => {
                    out.serialize_entry(k, &Comparable::Annotations(v))?
                }
                (Comparable::Annotations(_), ANNOTATION_OWNERS | ANNOTATION_APPLIED) => {}
                _ => out.serialize_entry(k, v)?,
            }
        }
        out.end()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;
    use switchyard_core::model::{DeletionPolicy, OutputMode};
    use switchyard_core::pack::{LoadOptions, PackFiles, load_with};

    use super::*;
    use crate::controller::state::Shards;
    use crate::store::Store;

    fn pack_state() -> PackState {
        let files = PackFiles {
            root: "shared".into(),
            files: BTreeMap::from([(
                "pack.yaml".to_string(),
                "apiVersion: switchyard.dev/v1alpha1\nkind: RulePack\nmetadata: {name: shared, version: 0.1.0}\nspec:\n  clusters: [{name: source, access: [read]}]\n  scope: []\n".to_string(),
            )]),
            shared_partials: BTreeMap::new(),
        };
        let loaded = load_with(&files, &LoadOptions::default());
        let pack = loaded.pack.expect("the pack loads");
        PackState::new(Arc::new(pack), &Store::new(), &Shards::default())
    }

    fn key(kind: &str, name: &str) -> ObjectKey {
        ObjectKey {
            cluster: "source".into(),
            api_version: "v1".into(),
            kind: kind.into(),
            namespace: None,
            name: name.into(),
        }
    }

    #[test]
    fn the_hash_leaves_out_the_owners_and_applied_annotations_and_nothing_else() {
        let object = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "a",
                "annotations": {
                    ANNOTATION_OWNERS: "source:a",
                    ANNOTATION_APPLIED: "0123456789abcdef",
                    "keep": "this",
                },
                "labels": {"annotations": "stay"},
            },
            "data": {"metadata": {"annotations": {ANNOTATION_OWNERS: "data, kept"}}},
        });
        let without = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "a",
                "annotations": {"keep": "this"},
                "labels": {"annotations": "stay"},
            },
            "data": {"metadata": {"annotations": {ANNOTATION_OWNERS: "data, kept"}}},
        });
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(without.to_string().as_bytes());
        let expected: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hash_value(&object), expected);
        assert_eq!(hash_value(&without), expected);
        assert_ne!(hash_value(&object["data"]), expected);
    }

    fn trigger(name: &str) -> Key {
        Arc::new(key("ConfigMap", name))
    }

    /// Trigger `by`'s version of the Namespace `x`.
    fn namespace(by: &str) -> DesiredObject {
        DesiredObject {
            key: key("Namespace", "x"),
            object: json!({
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "x", "labels": {"team": "t"}},
            }),
            sources: BTreeSet::from(["r/o".to_string()]),
            owners: BTreeSet::from([by.to_string()]),
            deletion: DeletionPolicy::Delete,
            mode: OutputMode::Apply,
            adopt: false,
        }
    }

    /// The triggers the merged object is of, or the one to evaluate first.
    fn owners(merged: Option<MergedOutput>) -> Value {
        match merged {
            Some(MergedOutput::Ready(m)) => json!(m.desired.owners),
            Some(MergedOutput::Evaluate(t)) => json!({"evaluate": t.name}),
            None => Value::Null,
        }
    }

    #[test]
    fn a_released_owner_is_evaluated_again_before_its_output_is_merged() {
        let mut p = pack_state();
        let (a, b) = (trigger("a"), trigger("b"));
        let output = Arc::new(key("Namespace", "x"));
        p.set_contribution(&a, vec![namespace("a")], None);
        assert_eq!(owners(p.merged(&output)), json!(["a"]));
        // Written: only `a` desires it, so its text goes; its hash stays.
        p.release_objects(&a);
        assert!(p.contributions[&a][0].is_released());
        assert_eq!(owners(p.merged(&output)), json!({"evaluate": "a"}));
        // `b` wants it too: the merge waits for `a`'s object rather than go without it.
        let touched = p.set_contribution(&b, vec![namespace("b")], None);
        assert_eq!(touched, BTreeSet::from([output.clone()]));
        assert_eq!(owners(p.merged(&output)), json!({"evaluate": "a"}));
        // `a` evaluated again, the same as before: nothing changed, and the merge has both.
        let touched = p.set_contribution(&a, vec![namespace("a")], None);
        assert!(touched.is_empty());
        assert_eq!(owners(p.merged(&output)), json!(["a", "b"]));
        // Shared now: neither object is released.
        p.release_objects(&a);
        p.release_objects(&b);
        assert!(!p.contributions[&a][0].is_released());
        assert!(!p.contributions[&b][0].is_released());
    }
}
