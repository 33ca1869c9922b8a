//! Status and finalizers of triggers: the status an evaluation computed written back (a new
//! failure also as an Event), and a deleting trigger's finalizer removed once its outputs
//! are gone.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use switchyard_core::evaluate::CONDITION_SYNCED;
use switchyard_core::object::World;
use switchyard_core::plan::OWNERS_MORE;
use switchyard_core::{ObjectKey, Pack};

use super::outputs::{annotation, created_by, is_subset};
use super::state::{Controller, Key, ReconcileError, SyncedState, Work};

impl Controller {
    /// Writes the status an evaluation computed, unless the live status already holds it.
    /// A new failure of `synced` (the evaluation's `Synced`, written into `status` or, for
    /// a kind whose status has no conditions, not) is also an Event.
    pub(super) async fn write_status(
        &self,
        pack_name: &str,
        trigger: &ObjectKey,
        live: &Value,
        status: &Value,
        synced: Option<&Value>,
    ) -> Result<(), ReconcileError> {
        let current = live.get("status").unwrap_or(&Value::Null);
        let unwritten = synced.is_some_and(|s| !in_conditions(status, s));
        let state = |c: &Value| {
            (
                c["status"].clone(),
                c["reason"].clone(),
                c["message"].clone(),
            )
        };
        let failed = synced.filter(|c| c["status"] == "False").map(state);
        let was = if unwritten {
            self.swap_unwritten_synced(pack_name, trigger, synced.map(state))
        } else {
            current
                .get("conditions")
                .and_then(Value::as_array)
                .and_then(|c| c.iter().find(|c| c["type"] == CONDITION_SYNCED))
                .map(state)
        };
        // A new failure is also an Event, so `kubectl describe` and event pipelines see it.
        if let Some((_, reason, message)) = &failed
            && was.as_ref() != failed.as_ref()
        {
            let uid = live.pointer("/metadata/uid").and_then(Value::as_str);
            self.clusters
                .warn(
                    trigger,
                    uid,
                    reason.as_str().unwrap_or("Failed"),
                    message.as_str().unwrap_or_default(),
                )
                .await;
        }
        if is_subset(status, current) {
            return Ok(());
        }
        if self
            .clusters
            .apply_status(pack_name, trigger, status)
            .await?
        {
            self.count_status(pack_name, trigger);
        }
        Ok(())
    }

    /// Records the `Synced` state of a trigger whose status does not hold it, answering the
    /// one recorded before.
    pub(super) fn swap_unwritten_synced(
        &self,
        pack_name: &str,
        trigger: &ObjectKey,
        now: Option<SyncedState>,
    ) -> Option<SyncedState> {
        let mut states = self
            .unwritten_synced
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (pack_name.to_string(), trigger.clone());
        match now {
            Some(state) => states.insert(key, state),
            None => states.remove(&key),
        }
    }

    /// The trigger is being deleted: its outputs go (or are orphaned), and its finalizer is
    /// removed once they are confirmed gone.
    pub(super) async fn finish_deletion(
        &self,
        pack_name: &Arc<str>,
        pack: &Pack,
        trigger: &Key,
        object: &Value,
        round: u64,
    ) -> Result<(), ReconcileError> {
        let finalizer = format!("switchyard.dev/{}", pack.name());
        let (touched, newly_deleting) = {
            let mut state = self.lock();
            let Some(p) = state.packs.get_mut(pack_name) else {
                return Ok(());
            };
            // What it had, kept while it waits: its contribution is dropped now.
            let previous: Option<Arc<[Key]>> = p
                .contributions
                .get(trigger)
                .map(|c| c.iter().map(|d| d.key().clone()).collect());
            let touched = p.set_contribution(trigger, Vec::new(), None);
            let newly_deleting = !p.deleting.contains_key(trigger);
            if newly_deleting {
                p.deleting.insert(trigger.clone(), previous);
            }
            p.mark_evaluated(trigger, round);
            (touched, newly_deleting)
        };
        self.sync_outputs(pack_name, &touched).await?;
        self.restate_merged(pack_name, trigger);
        // The prune is queued, not run here: triggers deleted together share one (each
        // prune reads every output the pack has in the caches). Its deletions wake this
        // trigger (`Controller::changed`), else the cleanup poll does.
        if newly_deleting || !touched.is_empty() {
            self.queue.add(Work::Prune(pack_name.clone()));
        }
        if !has_finalizer(object, &finalizer) {
            self.lock()
                .packs
                .get_mut(pack_name)
                .map(|p| p.deleting.remove(trigger));
            return Ok(());
        }
        // Still there: outputs this trigger had that nobody else desires, or, when its
        // outputs are unknown (after a restart), anything prune could not remove yet.
        let remaining = self.cleanup_remaining(pack_name, trigger);
        if let Some(what) = remaining {
            return Err(ReconcileError::Pending(format!(
                "waiting for {what} to be deleted before removing the finalizer of {trigger}"
            )));
        }
        self.clusters
            .set_finalizer(pack_name, trigger, object, &finalizer, false)
            .await?;
        self.count_finalizer(pack_name);
        if let Some(p) = self.lock().packs.get_mut(pack_name) {
            p.deleting.remove(trigger);
        }
        tracing::info!(trigger = %trigger, "outputs cleaned up; finalizer removed");
        Ok(())
    }

    /// An output of this trigger that still exists, is not being deleted, and is not desired
    /// by another trigger: one of those it had when its deletion was first seen, or, when
    /// those are unknown (after a restart), one whose owners annotation names it.
    pub(super) fn cleanup_remaining(&self, pack_name: &Arc<str>, trigger: &Key) -> Option<String> {
        let state = self.lock();
        let p = state.packs.get(pack_name)?;
        // With sharding: the claim of the trigger's shard (other shards' claims keep an
        // output, and this trigger does not wait for it).
        let shard = p.shard_of(trigger);
        let waits_for = |o: &Value| {
            // Terminating: its deletion is the API server's now (and other controllers'
            // finalizers may hold it long after this trigger has any say).
            o.pointer("/metadata/deletionTimestamp").is_none()
                && (p.shard_count <= 1
                    || crate::shards::claims(o, p.shard_count).0.contains(&shard))
        };
        if let Some(Some(previous)) = p.deleting.get(trigger) {
            // Its outputs are known: only they are read (a scan of every output for each
            // deleting trigger, each time it looks, was what made mass deletions slow).
            return previous
                .iter()
                .filter(|key| !p.by_output.contains_key(*key))
                .find(|key| {
                    self.store
                        .get_key(key)
                        .is_some_and(|o| created_by(&o, pack_name) && waits_for(&o))
                })
                .map(ToString::to_string);
        }
        let owner = trigger.to_string();
        let claim = crate::shards::owners_key(shard, p.shard_count);
        p.undesired(&self.store, pack_name)
            .into_iter()
            .filter(|(_, o)| waits_for(o))
            .find(|(_, o)| annotation(o, &claim).split(',').any(|x| names(x, &owner)))
            .map(|(key, _)| key.to_string())
    }
}

/// Whether the deletion of `object` (at `key`) may be what a deleting `trigger` waits for:
/// when the outputs it had as its deletion was first seen are known (`outputs`), whether it is
/// one of them, the very list it waits on; otherwise (a deletion first seen after a restart),
/// what the object's owners annotations say ([`may_wait_for`]).
pub(super) fn deletion_wakes(
    outputs: Option<&[Key]>,
    key: &ObjectKey,
    object: Option<&Value>,
    trigger: &ObjectKey,
) -> bool {
    match outputs {
        Some(outputs) => outputs.iter().any(|o| **o == *key),
        None => object.is_none_or(|o| may_wait_for(o, trigger)),
    }
}

/// Whether a deleting `trigger` may wait for `object` to go: the object's owners
/// annotations (one per shard's claim with sharding) name it, say there are more than they
/// list, or there are none.
pub(super) fn may_wait_for(object: &Value, trigger: &ObjectKey) -> bool {
    let Some(annotations) = object
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
    else {
        return true;
    };
    let mut owners = annotations
        .iter()
        .filter(|(name, _)| crate::shards::is_owners_key(name))
        .flat_map(|(_, value)| value.as_str().unwrap_or_default().split(','))
        .peekable();
    if owners.peek().is_none() {
        return true;
    }
    let trigger = trigger.to_string();
    owners.any(|x| names(x, &trigger))
}

/// Whether an entry of an owners list may stand for `owner`: it names it, or it says the
/// list is cut short.
fn names(entry: &str, owner: &str) -> bool {
    entry == owner || entry == OWNERS_MORE
}

pub(super) fn has_finalizer(object: &Value, finalizer: &str) -> bool {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| f.iter().any(|x| x.as_str() == Some(finalizer)))
}

/// How long to wait before a deleting trigger is looked at again when nothing else wakes it.
pub const CLEANUP_POLL: Duration = Duration::from_secs(2);

/// Whether `status` holds this `Synced` condition.
fn in_conditions(status: &Value, synced: &Value) -> bool {
    status
        .get("conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| c.iter().any(|c| c == synced))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn trigger(name: &str) -> ObjectKey {
        ObjectKey {
            cluster: "source".into(),
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("default".into()),
            name: name.into(),
        }
    }

    fn output(annotations: Value) -> Value {
        json!({"metadata": {"name": "out", "annotations": annotations}})
    }

    #[test]
    fn a_deleted_output_wakes_the_deleting_triggers_its_owners_name() {
        let (a, b) = (trigger("a"), trigger("b"));
        let named = output(json!({"switchyard.dev/owners": a.to_string()}));
        assert!(may_wait_for(&named, &a));
        assert!(!may_wait_for(&named, &b));
        // With sharding, each shard's claim lists its own triggers.
        let claimed = output(json!({
            "switchyard.dev/owners-0-of-6": a.to_string(),
            "switchyard.dev/owners-3-of-6": b.to_string(),
            "unrelated": trigger("c").to_string(),
        }));
        assert!(may_wait_for(&claimed, &a));
        assert!(may_wait_for(&claimed, &b));
        assert!(!may_wait_for(&claimed, &trigger("c")));
        // More owners than listed, or none: any deleting trigger may wait for it.
        let more = output(json!({"switchyard.dev/owners": format!("{a},{OWNERS_MORE}")}));
        assert!(may_wait_for(&more, &b));
        assert!(may_wait_for(&output(json!({})), &b));
        assert!(may_wait_for(&json!({"metadata": {"name": "out"}}), &b));
    }

    #[test]
    fn a_deletion_wakes_by_the_outputs_recorded_when_they_are_known() {
        let (a, b) = (trigger("a"), trigger("b"));
        let (out, other) = (trigger("out"), trigger("other"));
        let recorded: Vec<Key> = vec![Arc::new(out.clone())];
        // Annotated with `more`: the annotations would wake every deleting trigger; the
        // record wakes only the one that had it.
        let more = output(json!({"switchyard.dev/owners": OWNERS_MORE}));
        assert!(deletion_wakes(Some(&recorded), &out, Some(&more), &a));
        assert!(!deletion_wakes(Some(&recorded), &other, Some(&more), &a));
        assert!(!deletion_wakes(Some(&[]), &out, Some(&more), &a));
        // Unknown (first seen deleting after a restart): the annotations decide.
        let named = output(json!({"switchyard.dev/owners": a.to_string()}));
        assert!(deletion_wakes(None, &out, Some(&named), &a));
        assert!(!deletion_wakes(None, &out, Some(&named), &b));
        assert!(deletion_wakes(None, &out, None, &b));
    }
}
