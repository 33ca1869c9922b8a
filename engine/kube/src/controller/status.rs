//! Status and finalizers of triggers: the status an evaluation computed written back (a new
//! failure also as an Event), and a deleting trigger's finalizer removed once its outputs
//! are gone.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use switchyard_core::evaluate::CONDITION_SYNCED;
use switchyard_core::plan::OWNERS_MORE;
use switchyard_core::{ObjectKey, Pack};

use super::outputs::{annotation, is_subset};
use super::state::{Controller, Key, ReconcileError, SyncedState};

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
        let (touched, previous_keys) = {
            let mut state = self.lock();
            let Some(p) = state.packs.get_mut(pack_name) else {
                return Ok(());
            };
            let previous: Vec<Key> = p
                .contributions
                .get(trigger)
                .map(|c| c.iter().map(|d| d.key().clone()).collect())
                .unwrap_or_default();
            let touched = p.set_contribution(trigger, Vec::new(), None);
            p.deleting.insert(trigger.clone());
            p.mark_evaluated(trigger, round);
            (touched, previous)
        };
        self.sync_outputs(pack_name, &touched).await?;
        self.restate_merged(pack_name, trigger);
        self.prune(pack_name).await?;
        if !has_finalizer(object, &finalizer) {
            self.lock()
                .packs
                .get_mut(pack_name)
                .map(|p| p.deleting.remove(trigger));
            return Ok(());
        }
        // Still there: outputs this trigger had that nobody else desires, or, when its
        // outputs are unknown (after a restart), anything prune could not remove yet.
        let remaining = self.cleanup_remaining(pack_name, trigger, &previous_keys);
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
    /// by another trigger.
    pub(super) fn cleanup_remaining(
        &self,
        pack_name: &Arc<str>,
        trigger: &ObjectKey,
        previous: &[Key],
    ) -> Option<String> {
        let state = self.lock();
        let p = state.packs.get(pack_name)?;
        let owner = trigger.to_string();
        // With sharding: the claim of the trigger's shard (other shards' claims keep an
        // output, and this trigger does not wait for it).
        let shard = p.shard_of(trigger);
        let claim = crate::shards::owners_key(shard, p.shard_count);
        p.undesired(&self.store, pack_name)
            .into_iter()
            // Terminating: its deletion is the API server's now (and other controllers'
            // finalizers may hold it long after this trigger has any say).
            .filter(|(_, o)| o.pointer("/metadata/deletionTimestamp").is_none())
            .filter(|(_, o)| {
                p.shard_count <= 1 || crate::shards::claims(o, p.shard_count).0.contains(&shard)
            })
            .find(|(key, o)| {
                let owners = annotation(o, &claim);
                previous.iter().any(|p| **p == *key)
                    || owners.split(',').any(|x| x == owner || x == OWNERS_MORE)
            })
            .map(|(key, _)| key.to_string())
    }
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
