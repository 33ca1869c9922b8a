//! Making the clusters match the merged outputs: create what is missing (never taking over
//! what exists and is not the pack's, unless the output adopts it), apply what is not up to
//! date (a patch only onto the object as it exists, and taken back when no trigger patches
//! it any more), and prune what the pack created and no trigger desires, when that is safe.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use futures::{StreamExt, stream};

use serde_json::Value;
use switchyard_core::ObjectKey;
use switchyard_core::model::{DeletionPolicy, OutputMode};
use switchyard_core::names::{
    ANNOTATION_APPLIED, ANNOTATION_CREATED, ANNOTATION_OWNERS, ANNOTATION_RULE, LABEL_PACK,
};
use switchyard_core::object::World;
use switchyard_core::plan::{OWNERS_MORE, owners_annotation, owners_covered};

use super::contributions::owners_hash;
use super::state::{
    Applied, Controller, Key, Merged, MergedOutput, PackState, ReconcileError, Work,
};
use crate::apply::{ApplyError, field_manager};
use crate::shards;
use crate::store::{KindKey, Store};

/// How many deletes (or orphanings, or claims taken back) a prune has in flight.
const PRUNE_IN_FLIGHT: usize = 16;

/// Runs a prune's writes, [`PRUNE_IN_FLIGHT`] at a time, every one to its end (a delete
/// dropped half-way would stay marked as sent); the first error, if any.
pub(super) async fn prune_writes(
    writes: impl IntoIterator<Item = impl Future<Output = Result<(), ApplyError>>>,
) -> Result<(), ReconcileError> {
    let results: Vec<Result<(), ApplyError>> = stream::iter(writes)
        .buffer_unordered(PRUNE_IN_FLIGHT)
        .collect()
        .await;
    match results.into_iter().find_map(Result::err) {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

impl PackState {
    /// Objects in the caches that this pack created and that no trigger desires: what prune
    /// may remove.
    pub(super) fn undesired(&self, store: &Store, pack_name: &str) -> Vec<(ObjectKey, Arc<Value>)> {
        let mut found = Vec::new();
        for kind in &self.output_kinds {
            let Some(cache) = store.cache(kind) else {
                continue;
            };
            // What a trigger desires is passed over undecoded: a prune after a round reads
            // only the objects nobody desires.
            let mut candidates = Vec::new();
            cache.for_each_keyed(kind, |at, cached| {
                if !self.by_output.contains_key(&at) {
                    candidates.push(cached.clone());
                }
            });
            for cached in candidates {
                let o = cached.value();
                if !created_by(&o, pack_name) {
                    continue;
                }
                if let Some(key) = store.key_of(kind, &o)
                    && !self.by_output.contains_key(&key)
                {
                    found.push((key, Arc::new(o)));
                }
            }
        }
        found
    }
}

/// One claim written on an output: the shard's field manager, and the object as that shard
/// applies it (its owners annotation its own; `None`: the merged object as it is).
pub(super) struct Writer {
    pub(super) shard: u32,
    pub(super) manager: String,
    pub(super) object: Option<Value>,
}

impl Writer {
    /// What this writer applies, given the merged object.
    fn object<'a>(&'a self, merged: &'a Merged) -> &'a Value {
        self.object.as_ref().unwrap_or(&merged.desired.object)
    }
}

impl PackState {
    /// Who writes an output the merge desires: without sharding, the pack's field manager
    /// with the object as merged; with sharding, each held shard one of whose triggers
    /// desires it, under its own field manager and owners annotation (so one shard's apply
    /// never removes another's claim).
    pub(super) fn writers(&self, key: &ObjectKey, object: &Value) -> Vec<Writer> {
        let name = self.pack.name();
        if self.shard_count <= 1 {
            return vec![Writer {
                shard: 0,
                manager: field_manager(name),
                object: None,
            }];
        }
        let mut per_shard: BTreeMap<u32, BTreeSet<String>> = BTreeMap::new();
        for trigger in self.by_output.get(key).into_iter().flatten() {
            let shard = self.shard_of(trigger);
            if self.rounds.contains_key(&shard) {
                per_shard
                    .entry(shard)
                    .or_default()
                    .insert(trigger.to_string());
            }
        }
        per_shard
            .into_iter()
            .map(|(shard, owners)| {
                let mut object = object.clone();
                if let Some(annotations) = object
                    .pointer_mut("/metadata/annotations")
                    .and_then(Value::as_object_mut)
                    && annotations.remove(ANNOTATION_OWNERS).is_some()
                {
                    annotations.insert(
                        shards::owners_key(shard, self.shard_count),
                        Value::String(owners_annotation(&owners)),
                    );
                }
                Writer {
                    shard,
                    manager: shards::shard_manager(name, shard, self.shard_count),
                    object: Some(object),
                }
            })
            .collect()
    }
}

/// What became of one output in a sync.
enum Synced {
    Done,
    /// It exists and is not the pack's: nothing was written.
    NotOurs(String),
    /// Another shard of the pack created it and has not marked it yet: looked at again soon.
    Wait(String),
}

impl Controller {
    /// Creates or applies the merged form of each output that is still desired and not up
    /// to date.
    pub(super) async fn sync_outputs(
        &self,
        pack_name: &Arc<str>,
        keys: &BTreeSet<Key>,
    ) -> Result<(), ReconcileError> {
        let mut first_error = None;
        let mut not_ours = Vec::new();
        let mut waiting = Vec::new();
        // Cluster-scoped outputs (Namespaces) first: the namespaced ones live in them.
        let ordered = keys
            .iter()
            .filter(|k| k.namespace.is_none())
            .chain(keys.iter().filter(|k| k.namespace.is_some()));
        for key in ordered {
            // A member that is gone is written to no more: what is there stays as it was.
            if !self.store.is_live(&key.cluster) {
                continue;
            }
            let merged = {
                let mut state = self.lock();
                let Some(p) = state.packs.get_mut(pack_name) else {
                    return Ok(());
                };
                p.merged(key)
            };
            let merged = match merged {
                Some(MergedOutput::Ready(merged)) => merged,
                Some(MergedOutput::Evaluate(owner)) => {
                    // Its evaluation writes the merge; until then this trigger waits.
                    self.queue
                        .add(Work::Trigger(pack_name.clone(), owner.clone()));
                    waiting.push(format!(
                        "waiting for {owner} to be evaluated again: it desires {key} too"
                    ));
                    continue;
                }
                None => {
                    // Nobody desires it: prune decides, or, for a patch, it is taken back
                    // here.
                    if let Err(e) = self.take_back_patch(pack_name, key).await {
                        first_error.get_or_insert(e);
                    }
                    continue;
                }
            };
            let writers = {
                let state = self.lock();
                match state.packs.get(pack_name) {
                    Some(p) => p.writers(key, &merged.desired.object),
                    None => return Ok(()),
                }
            };
            for writer in writers {
                // A shard lost meanwhile is written for no more.
                if !self.lock().shards.held.contains(&writer.shard) {
                    continue;
                }
                let live = self.store.get_key(key);
                let result = if merged.desired.mode == OutputMode::Patch {
                    self.patch(pack_name, key, &writer, writer.object(&merged), live)
                        .await
                        .map(|()| Synced::Done)
                } else {
                    self.sync_owned(pack_name, key, &merged, &writer, live)
                        .await
                };
                match result {
                    Ok(Synced::Done) => {}
                    Ok(Synced::NotOurs(message)) => not_ours.push(message),
                    Ok(Synced::Wait(message)) => waiting.push(message),
                    Err(e) => {
                        tracing::warn!(object = %key, error = %e, "write failed");
                        first_error.get_or_insert(e);
                    }
                }
            }
        }
        match (first_error, not_ours.first(), waiting.first()) {
            (Some(e), _, _) => Err(e.into()),
            (None, Some(message), _) => Err(ReconcileError::NotOurs(message.clone())),
            (None, None, Some(message)) => Err(ReconcileError::Pending(message.clone())),
            (None, None, None) => Ok(()),
        }
    }

    /// Of the outputs a trigger desires as its last evaluation did, those that may not be
    /// as this broker last applied them. The cache's resource version of each is compared
    /// with the one recorded when the same content was last applied (or found applied): equal,
    /// nobody has written the object since, and neither it nor the desired object need be
    /// decoded to know. Anything else (another version, a merge not known, sharding, whose
    /// writers each hold their own claim) is checked whole by `sync_outputs`.
    pub(super) fn maybe_stale(&self, pack_name: &str, unchanged: BTreeSet<Key>) -> BTreeSet<Key> {
        let recorded: Vec<(Key, Option<String>)> = {
            let state = self.lock();
            let Some(p) = state.packs.get(pack_name).filter(|p| p.shard_count <= 1) else {
                return unchanged;
            };
            unchanged
                .into_iter()
                .map(|key| {
                    let version = p
                        .known_merged_hash(&key)
                        .zip(state.applied.get(&key))
                        .filter(|((hash, owners), record)| {
                            record.hash == *hash && record.owners == *owners
                        })
                        .and_then(|(_, record)| record.resource_version.clone());
                    (key, version)
                })
                .collect()
        };
        recorded
            .into_iter()
            .filter(|(key, version)| {
                let cached = version.as_ref().and_then(|_| self.store.cached_key(key));
                cached.is_none_or(|c| c.resource_version() != version.as_deref())
            })
            .map(|(key, _)| key)
            .collect()
    }

    /// An output the pack owns (`apply` or `create`): created when absent, applied when it
    /// is the pack's and not up to date, adopted or left alone when it is someone else's.
    async fn sync_owned(
        &self,
        pack_name: &Arc<str>,
        key: &Key,
        merged: &Merged,
        writer: &Writer,
        live: Option<Arc<Value>>,
    ) -> Result<Synced, ApplyError> {
        let desired = &merged.desired;
        let manager = writer.manager.as_str();
        let Some(live) = live else {
            return self.create(pack_name, key, merged, writer).await;
        };
        let uid = live
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let record = self.lock().applied.get(key).cloned();
        let known = record.as_ref().and_then(|r| r.uid.as_deref()) == Some(uid.as_str());
        if !created_by(&live, pack_name) && !known {
            // Our own creation whose mark did not land yet: mark it now.
            let unmarked = self.lock().unmarked.get(key) == Some(&uid);
            match shard_creation(&live, pack_name, manager) {
                Some(Creation::Sibling) => return Ok(Synced::Wait(wait_message(key))),
                // This shard's creation, whose holder died before marking it.
                Some(Creation::Own) if !unmarked => {
                    if let Some(live) = self.clusters.get(key).await? {
                        self.mark(pack_name, key, &live, true, manager).await?;
                    }
                }
                _ => {}
            }
            if unmarked {
                // The create's mark failed: read the object whole and mark it now.
                if let Some(live) = self.clusters.get(key).await? {
                    self.mark(pack_name, key, &live, true, manager).await?;
                }
            } else if shard_creation(&live, pack_name, manager).is_some() {
                // Marked just now.
            } else if desired.adopt {
                return self.adopt(pack_name, key, merged, writer, &uid).await;
            } else {
                return Ok(Synced::NotOurs(not_ours_message(key, &live)));
            }
        }
        // A create-only output that exists is left as it is.
        if desired.mode == OutputMode::Create {
            return Ok(Synced::Done);
        }
        match up_to_date(
            writer.object(merged),
            &live,
            &merged.hash,
            record.as_ref(),
            self.store.is_metadata_only(key),
            manager,
        ) {
            Freshness::Recorded | Freshness::FromLive => {
                // The live object holds what would be applied (after a restart, say):
                // remember it, version included, so a later change of the object is seen as
                // one and `maybe_stale` knows it current until then.
                self.record(key, &merged.hash, writer.object(merged), &live);
                return Ok(Synced::Done);
            }
            Freshness::Stale => {}
        }
        let object = with_hash(writer.object(merged), &merged.hash);
        let stored = self.clusters.apply(manager, key, &object).await?;
        let stored = self
            .clusters
            .apply_output_status(manager, key, &object, stored)
            .await?;
        self.count_apply(pack_name, key);
        self.record_stored(key, &merged.hash, &object, &stored);
        tracing::debug!(object = %key, "applied");
        Ok(Synced::Done)
    }

    /// A create that refuses to take over an object of the same name, then the mark.
    async fn create(
        &self,
        pack_name: &Arc<str>,
        key: &Key,
        merged: &Merged,
        writer: &Writer,
    ) -> Result<Synced, ApplyError> {
        let manager = writer.manager.as_str();
        let object = with_hash(writer.object(merged), &merged.hash);
        match self.clusters.create(manager, key, &object).await {
            Ok(created) => {
                self.count_apply(pack_name, key);
                let uid = created.metadata.uid.clone().unwrap_or_default();
                self.lock().unmarked.insert(ObjectKey::clone(key), uid);
                let marked = self.mark(pack_name, key, &created, true, manager).await?;
                let marked = self
                    .clusters
                    .apply_output_status(manager, key, &object, marked)
                    .await?;
                self.record_stored(key, &merged.hash, &object, &marked);
                tracing::debug!(object = %key, "created");
                Ok(Synced::Done)
            }
            Err(e) if e.is_already_exists() => {
                // Not in the caches: someone else's object (the caches hold only the
                // pack's, for kinds watched by label), or one the watch has not shown yet.
                let Some(live) = self.clusters.get(key).await? else {
                    return Err(e);
                };
                let live = serde_json::to_value(&live).unwrap_or(Value::Null);
                let uid = live
                    .pointer("/metadata/uid")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                if !created_by(&live, pack_name)
                    && shard_creation(&live, pack_name, manager) == Some(Creation::Sibling)
                {
                    return Ok(Synced::Wait(wait_message(key)));
                }
                if created_by(&live, pack_name) {
                    let stored = self.clusters.apply(manager, key, &object).await?;
                    let stored = self
                        .clusters
                        .apply_output_status(manager, key, &object, stored)
                        .await?;
                    self.count_apply(pack_name, key);
                    self.record_stored(key, &merged.hash, &object, &stored);
                    Ok(Synced::Done)
                } else if merged.desired.adopt {
                    self.adopt(pack_name, key, merged, writer, &uid).await
                } else {
                    Ok(Synced::NotOurs(not_ours_message(key, &live)))
                }
            }
            Err(e) => Err(e),
        }
    }

    /// Takes over an existing object (`adopt: true`): the rendered fields applied over it,
    /// then the mark that makes it the pack's.
    async fn adopt(
        &self,
        pack_name: &Arc<str>,
        key: &Key,
        merged: &Merged,
        writer: &Writer,
        uid: &str,
    ) -> Result<Synced, ApplyError> {
        let manager = writer.manager.as_str();
        let mut object = with_hash(writer.object(merged), &merged.hash);
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            // Only that object: a successor of the same name is not adopted by accident.
            metadata.insert("uid".into(), Value::String(uid.to_string()));
        }
        let applied = self.clusters.apply(manager, key, &object).await?;
        self.count_apply(pack_name, key);
        let marked = self.mark(pack_name, key, &applied, false, manager).await?;
        let marked = self
            .clusters
            .apply_output_status(manager, key, &object, marked)
            .await?;
        self.record_stored(key, &merged.hash, &object, &marked);
        tracing::info!(object = %key, "adopted an existing object (adopt: true)");
        Ok(Synced::Done)
    }

    async fn mark(
        &self,
        pack_name: &Arc<str>,
        key: &Key,
        live: &kube::api::DynamicObject,
        created: bool,
        manager: &str,
    ) -> Result<kube::api::DynamicObject, ApplyError> {
        let marked = match self
            .clusters
            .mark_created(manager, key, live, created)
            .await
        {
            Ok(marked) => marked,
            Err(e) if e.is_conflict() => {
                // Two workers saw the object unmarked (its create, and another trigger
                // desiring it): the other one's mark may have landed first. Marked with
                // this uid, it is done; anything else is the conflict it is.
                let uid = live.metadata.uid.as_deref();
                match self.clusters.get(key).await? {
                    Some(now)
                        if uid.is_some()
                            && now.metadata.uid.as_deref() == uid
                            && now
                                .metadata
                                .annotations
                                .as_ref()
                                .and_then(|a| a.get(ANNOTATION_CREATED))
                                .map(String::as_str)
                                == uid =>
                    {
                        self.lock().unmarked.remove(key);
                        return Ok(now);
                    }
                    _ => return Err(e),
                }
            }
            Err(e) => return Err(e),
        };
        self.count_apply(pack_name, key);
        self.lock().unmarked.remove(key);
        Ok(marked)
    }

    /// Records an apply of `applied` (with content `hash`) that the API server answered
    /// with `stored`.
    fn record_stored(
        &self,
        key: &Key,
        hash: &str,
        applied: &Value,
        stored: &kube::api::DynamicObject,
    ) {
        let record = Applied {
            hash: hash.to_string(),
            owners: owners_hash(applied),
            uid: stored.metadata.uid.clone(),
            generation: stored.metadata.generation,
            resource_version: stored.metadata.resource_version.clone(),
        };
        self.lock().applied.insert(key.clone(), record);
    }

    /// Records that `live` holds `desired` (with content `hash`).
    fn record(&self, key: &Key, hash: &str, desired: &Value, live: &Value) {
        let record = Applied {
            hash: hash.to_string(),
            owners: owners_hash(desired),
            uid: live
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .map(str::to_string),
            generation: live.pointer("/metadata/generation").and_then(Value::as_i64),
            resource_version: live
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_string),
        };
        self.lock().applied.insert(key.clone(), record);
    }

    /// Applies a patch output: only onto the object as it exists (its uid is the apply's
    /// precondition, so a patch never creates the object nor lands on a successor of the same
    /// name), and only when some field differs.
    pub(super) async fn patch(
        &self,
        pack_name: &Arc<str>,
        key: &Key,
        writer: &Writer,
        object: &Value,
        live: Option<Arc<Value>>,
    ) -> Result<(), ApplyError> {
        // Absent: evaluation already reported TargetNotFound; its appearance re-evaluates.
        let Some(live) = live else {
            return Ok(());
        };
        let uid = live.pointer("/metadata/uid").and_then(Value::as_str);
        if let Some(p) = self.lock().packs.get_mut(pack_name) {
            p.patched
                .entry(key.clone())
                .or_default()
                .insert(writer.shard);
        }
        if is_subset(object, &live) {
            return Ok(());
        }
        self.clusters
            .apply_patch(&writer.manager, key, object, uid)
            .await?;
        self.count_apply(pack_name, key);
        tracing::debug!(object = %key, "patched");
        Ok(())
    }

    /// Removes this pack's fields from an object it patched and no trigger patches any more:
    /// an empty apply by the pack's field manager.
    pub(super) async fn take_back_patch(
        &self,
        pack_name: &Arc<str>,
        key: &Key,
    ) -> Result<(), ApplyError> {
        let shards: Vec<(u32, String)> = {
            let state = self.lock();
            let Some(p) = state.packs.get(pack_name) else {
                return Ok(());
            };
            p.patched
                .get(key)
                .into_iter()
                .flatten()
                .filter(|s| state.shards.held.contains(s))
                .map(|s| (*s, shards::shard_manager(pack_name, *s, p.shard_count)))
                .collect()
        };
        if shards.is_empty() {
            return Ok(());
        }
        if let Some(live) = self.store.get_key(key) {
            let uid = live.pointer("/metadata/uid").and_then(Value::as_str);
            for (_, manager) in &shards {
                self.clusters.take_back(manager, key, uid).await?;
                self.count_apply(pack_name, key);
            }
            tracing::info!(object = %key, "patch taken back: the pack's fields removed");
        }
        if let Some(p) = self.lock().packs.get_mut(pack_name) {
            if let Some(patched) = p.patched.get_mut(key) {
                for (shard, _) in &shards {
                    patched.remove(shard);
                }
            }
            p.patched.retain(|_, s| !s.is_empty());
        }
        Ok(())
    }

    /// Deletes (or orphans) the outputs the pack created that no trigger desires, when that
    /// is safe: every watch synced, every trigger evaluated once since start or reload (on
    /// caches that had listed), and never an object a failing trigger may own. Each object
    /// is deleted once: a prune that sees it again before the watch reports it gone (or
    /// while it terminates) leaves it.
    pub(super) async fn prune(&self, pack_name: &Arc<str>) -> Result<(), ReconcileError> {
        if self.lock().shards.count > 1 {
            return self.prune_shards(pack_name).await;
        }
        let mut doomed: Vec<(ObjectKey, String, DeletionPolicy)> = Vec::new();
        {
            let mut state = self.lock();
            let Some(p) = state.packs.get(pack_name) else {
                return Ok(());
            };
            if p.rounds.is_empty() || !p.all_done() {
                return Ok(());
            }
            let unknown: HashSet<String> = p.unknown.iter().map(ToString::to_string).collect();
            let policies: HashMap<String, DeletionPolicy> = p
                .pack
                .rule_kinds()
                .into_iter()
                .map(|r| (r.name, r.deletion))
                .collect();
            let mut candidates = Vec::new();
            for (key, o) in p.undesired(&self.store, pack_name) {
                let owners = annotation(&o, ANNOTATION_OWNERS);
                let protected = !unknown.is_empty()
                    && owners
                        .split(',')
                        .any(|x| unknown.contains(x) || x == OWNERS_MORE);
                if protected {
                    tracing::info!(object = %key, "not pruned: a trigger that may own it fails to evaluate");
                    continue;
                }
                if o.pointer("/metadata/deletionTimestamp").is_some() {
                    continue;
                }
                // The rule that made it says what happens to it; a rule that no longer
                // exists deletes.
                let orphan = annotation(&o, ANNOTATION_RULE).split(',').any(|source| {
                    let rule = source.split('/').next().unwrap_or_default();
                    policies.get(rule) == Some(&DeletionPolicy::Orphan)
                });
                let uid = annotation(&o, ANNOTATION_CREATED).to_string();
                let policy = if orphan {
                    DeletionPolicy::Orphan
                } else {
                    DeletionPolicy::Delete
                };
                candidates.push((key, uid, policy));
            }
            for (key, uid, policy) in candidates {
                if state.deleted.get(&key) == Some(&uid) {
                    continue;
                }
                state.deleted.insert(key.clone(), uid.clone());
                doomed.push((key, uid, policy));
            }
        }
        // Several deletes in flight: a prune after many triggers went has as many objects
        // to delete, and one at a time it fell behind on a loaded API server.
        prune_writes(doomed.into_iter().map(|(key, uid, policy)| async move {
            let result = match policy {
                DeletionPolicy::Delete => {
                    tracing::info!(object = %key, "pruning an output no trigger desires");
                    self.clusters.delete(&key, Some(&uid)).await
                }
                DeletionPolicy::Orphan => {
                    tracing::info!(object = %key, "orphaning an output no trigger desires");
                    self.clusters.orphan(pack_name, &key).await.map(|()| true)
                }
            };
            let result = self.removal_done(pack_name, &key, result);
            if let Err(e) = &result {
                tracing::warn!(object = %key, error = %e, "prune failed");
            }
            result
        }))
        .await
    }

    /// Records how a prune's delete or orphaning of `key` ended (`Ok(true)`: it removed
    /// something): counted and no longer remembered as applied, or, failed, no longer
    /// remembered as sent, so that the next prune tries again.
    pub(super) fn removal_done(
        &self,
        pack_name: &str,
        key: &ObjectKey,
        result: Result<bool, ApplyError>,
    ) -> Result<(), ApplyError> {
        match result {
            Ok(removed) => {
                if removed {
                    self.count_prune(pack_name, key);
                }
                self.lock().applied.remove(key);
                Ok(())
            }
            Err(e) => {
                self.lock().deleted.remove(key);
                Err(e)
            }
        }
    }

    /// The watch reports an object gone: a delete of it is done.
    pub(super) fn forget_deleted(&self, key: &ObjectKey) {
        let mut state = self.lock();
        state.deleted.remove(key);
        state.unmarked.remove(key);
        state.applied.remove(key);
    }
}

impl Store {
    fn is_metadata_only(&self, key: &ObjectKey) -> bool {
        self.cache(&KindKey {
            cluster: key.cluster.clone(),
            api_version: key.api_version.clone(),
            kind: key.kind.clone(),
        })
        .is_some_and(|c| c.metadata_only)
    }
}

/// The object carries the pack's label and the mark the pack wrote when it created (or
/// adopted) it, for this very object: its uid.
pub(super) fn created_by(object: &Value, pack: &str) -> bool {
    let labelled = object
        .pointer("/metadata/labels")
        .and_then(|l| l.get(LABEL_PACK))
        .and_then(Value::as_str)
        == Some(pack);
    let uid = object.pointer("/metadata/uid").and_then(Value::as_str);
    labelled
        && uid.is_some_and(|uid| !uid.is_empty() && annotation(object, ANNOTATION_CREATED) == uid)
}

/// Who of the pack's shards created an object not marked yet (the create's `Update` entry
/// in its managed fields names the field manager): with sharding only.
#[derive(Debug, PartialEq, Eq)]
enum Creation {
    Own,
    Sibling,
}

fn shard_creation(live: &Value, pack: &str, manager: &str) -> Option<Creation> {
    if !manager.contains("-of-")
        || live
            .pointer("/metadata/labels")
            .and_then(|l| l.get(LABEL_PACK))
            .and_then(Value::as_str)
            != Some(pack)
    {
        return None;
    }
    let prefix = format!("{}/", field_manager(pack));
    let creators: Vec<&str> = live
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|e| e.get("operation").and_then(Value::as_str) == Some("Update"))
        .filter_map(|e| e.get("manager").and_then(Value::as_str))
        .filter(|m| m.starts_with(&prefix) && m.contains("-of-"))
        .collect();
    if creators.contains(&manager) {
        Some(Creation::Own)
    } else if creators.is_empty() {
        None
    } else {
        Some(Creation::Sibling)
    }
}

fn wait_message(key: &ObjectKey) -> String {
    format!("{key}: another shard of the pack created it and has not marked it yet")
}

fn not_ours_message(key: &ObjectKey, live: &Value) -> String {
    let whose = match live
        .pointer("/metadata/labels")
        .and_then(|l| l.get(LABEL_PACK))
        .and_then(Value::as_str)
    {
        Some(other) if !other.is_empty() => format!(" (it is labelled as pack `{other}`'s)"),
        _ => String::new(),
    };
    format!(
        "{} {} `{}` exists in cluster `{}` and was not created by this pack{whose}: nothing was written to it; delete it, or set `adopt: true` on the output to take it over",
        key.api_version,
        key.kind,
        key.namespaced_name(),
        key.cluster,
    )
}

/// An annotation's value, or "".
pub(super) fn annotation<'v>(object: &'v Value, name: &str) -> &'v str {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(name))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The object as applied: with the hash of its content.
fn with_hash(object: &Value, hash: &str) -> Value {
    let mut object = object.clone();
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = metadata
            .entry("annotations")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if let Some(map) = annotations.as_object_mut() {
            map.insert(ANNOTATION_APPLIED.into(), Value::String(hash.to_string()));
        }
    }
    object
}

/// How the live object compares with what would be applied.
#[derive(Debug, PartialEq, Eq)]
enum Freshness {
    /// Up to date by what this broker applied and saw since.
    Recorded,
    /// Up to date by the live object alone (after a restart).
    FromLive,
    Stale,
}

/// Whether the live object already holds what would be applied:
/// - the labels and annotations are intact, and the owners annotation names every trigger
///   that desires the object (or ends in `+more`): an owner that left needs no write;
/// - and either this broker applied the same content and nobody changed the object since
///   (generation, or resourceVersion where there is none); or the object carries the hash of
///   the same content and no other manager wrote it after the pack's last apply (a cache of
///   whole objects compares every field instead).
fn up_to_date(
    desired: &Value,
    live: &Value,
    hash: &str,
    record: Option<&Applied>,
    metadata_only: bool,
    manager: &str,
) -> Freshness {
    let labels_intact = desired.pointer("/metadata/labels").is_none_or(|want| {
        is_subset(
            want,
            live.pointer("/metadata/labels").unwrap_or(&Value::Null),
        )
    });
    let annotations_intact = desired
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .is_none_or(|want| {
            want.iter().all(|(k, v)| {
                let have = live.pointer("/metadata/annotations").and_then(|a| a.get(k));
                if shards::is_owners_key(k) {
                    owners_covered(v.as_str().unwrap_or_default(), have.and_then(Value::as_str))
                } else {
                    have.is_some_and(|h| is_subset(v, h))
                }
            })
        });
    if !labels_intact || !annotations_intact {
        return Freshness::Stale;
    }
    if let Some(record) = record
        && record.hash == hash
    {
        let generation = live.pointer("/metadata/generation").and_then(Value::as_i64);
        let unchanged = match (record.generation, generation) {
            (Some(a), Some(b)) => a == b,
            _ => {
                record.resource_version.as_deref()
                    == live
                        .pointer("/metadata/resourceVersion")
                        .and_then(Value::as_str)
            }
        };
        if unchanged {
            return Freshness::Recorded;
        }
    }
    if annotation(live, ANNOTATION_APPLIED) != hash {
        return Freshness::Stale;
    }
    let unchanged = if metadata_only {
        untouched_since_applied(live, manager)
    } else {
        is_subset(&without_owners(desired), live)
    };
    if unchanged {
        Freshness::FromLive
    } else {
        Freshness::Stale
    }
}

fn without_owners(desired: &Value) -> Value {
    let mut copy = desired.clone();
    if let Some(annotations) = copy
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.retain(|k, _| !shards::is_owners_key(k));
    }
    copy
}

/// No manager other than the pack's wrote the object (status aside) after the pack's last
/// apply, as its managed fields record it (the caches keep each entry's manager, operation,
/// subresource and time).
fn untouched_since_applied(live: &Value, manager: &str) -> bool {
    let Some(entries) = live
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
    else {
        return false;
    };
    let field = |e: &Value, f: &str| {
        e.get(f)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let ours = entries
        .iter()
        .filter(|e| field(e, "manager") == manager && field(e, "operation") == "Apply")
        .map(|e| field(e, "time"))
        .max();
    let Some(ours) = ours else {
        return false;
    };
    // The other shards of the pack apply the same content: their writes are no drift.
    let pack = manager.rsplit_once('/').map_or(manager, |(pack, shard)| {
        if shard.contains("-of-") {
            pack
        } else {
            manager
        }
    });
    let sibling = |m: &str| {
        m.strip_prefix(pack)
            .and_then(|rest| rest.strip_prefix('/'))
            .is_some_and(|rest| rest.contains("-of-"))
    };
    entries
        .iter()
        .filter(|e| {
            let m = field(e, "manager");
            m != manager && !sibling(&m) && field(e, "subresource") != "status"
        })
        .all(|e| field(e, "time") < ours)
}

/// Every field of `want` has the same value in `have` (lists element by element); fields
/// only `have` has (defaults, other managers' fields) do not matter.
pub fn is_subset(want: &Value, have: &Value) -> bool {
    match (want, have) {
        (Value::Object(w), Value::Object(h)) => w.iter().all(|(k, v)| {
            h.get(k).is_some_and(|hv| is_subset(v, hv)) || (v.is_null() && !h.contains_key(k))
        }),
        (Value::Array(w), Value::Array(h)) => {
            w.len() == h.len() && w.iter().zip(h).all(|(a, b)| is_subset(a, b))
        }
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        _ => want == have,
    }
}

#[cfg(test)]
mod tests {
    use super::super::contributions::{hash_value, owners_hash};
    use super::*;
    use serde_json::json;

    #[test]
    fn subset_ignores_defaults_and_compares_lists_elementwise() {
        let want =
            json!({"spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "a"}]}}}});
        let have = json!({"spec": {"replicas": 2, "progressDeadlineSeconds": 600,
                          "template": {"spec": {"containers": [{"name": "a", "imagePullPolicy": "Always"}]}}}});
        assert!(is_subset(&want, &have));
        let drifted =
            json!({"spec": {"replicas": 5, "template": {"spec": {"containers": [{"name": "a"}]}}}});
        assert!(!is_subset(&want, &drifted));
        let extra = json!({"spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}}});
        assert!(!is_subset(&want, &extra));
        assert!(is_subset(&json!(1.0), &json!(1)));
    }

    #[test]
    fn up_to_date_needs_unchanged_generation_and_intact_ownership() {
        let manager = "switchyard/p";
        let desired =
            json!({"metadata": {"labels": {"switchyard.dev/pack": "p"}}, "spec": {"x": 1}});
        let hash = hash_value(&desired);
        let record = Applied {
            hash: hash.clone(),
            uid: None,
            generation: Some(3),
            resource_version: Some("10".into()),
            owners: owners_hash(&desired),
        };
        let live = json!({"metadata": {"generation": 3, "resourceVersion": "11", "labels": {"switchyard.dev/pack": "p"}}});
        let check = |live: &Value, record: Option<&Applied>, metadata_only: bool| {
            up_to_date(&desired, live, &hash, record, metadata_only, manager)
        };
        assert_eq!(check(&live, Some(&record), true), Freshness::Recorded);
        let edited = json!({"metadata": {"generation": 4, "labels": {"switchyard.dev/pack": "p"}}});
        assert_eq!(check(&edited, Some(&record), true), Freshness::Stale);
        let relabelled = json!({"metadata": {"generation": 3, "labels": {}}});
        assert_eq!(check(&relabelled, Some(&record), true), Freshness::Stale);
        // After a restart nothing is recorded: the hash on the object and, for a full cache,
        // its content decide.
        let full = json!({"metadata": {"generation": 9, "labels": {"switchyard.dev/pack": "p"},
                          "annotations": {ANNOTATION_APPLIED: hash}}, "spec": {"x": 1, "y": 2}});
        assert_eq!(check(&full, None, false), Freshness::FromLive);
        let drifted = json!({"metadata": {"labels": {"switchyard.dev/pack": "p"},
                             "annotations": {ANNOTATION_APPLIED: hash}}, "spec": {"x": 2}});
        assert_eq!(check(&drifted, None, false), Freshness::Stale);
        let older_hash = json!({"metadata": {"labels": {"switchyard.dev/pack": "p"},
                                "annotations": {ANNOTATION_APPLIED: "0123"}}, "spec": {"x": 1}});
        assert_eq!(check(&older_hash, None, false), Freshness::Stale);
    }

    #[test]
    fn metadata_caches_tell_drift_by_the_managed_fields() {
        let manager = "switchyard/p";
        let desired = json!({"metadata": {"labels": {"switchyard.dev/pack": "p"}}});
        let hash = hash_value(&desired);
        let live = |others: &str| {
            json!({"metadata": {"labels": {"switchyard.dev/pack": "p"},
            "annotations": {ANNOTATION_APPLIED: hash},
            "managedFields": [
                {"manager": manager, "operation": "Update", "time": "2026-01-01T00:00:00Z"},
                {"manager": manager, "operation": "Apply", "time": "2026-01-01T00:00:05Z"},
                {"manager": "kubectl-edit", "operation": "Update", "time": others},
                {"manager": "controller", "operation": "Update", "subresource": "status",
                 "time": "2026-01-02T00:00:00Z"},
            ]}})
        };
        let check = |live: &Value| up_to_date(&desired, live, &hash, None, true, manager);
        assert_eq!(check(&live("2026-01-01T00:00:01Z")), Freshness::FromLive);
        assert_eq!(check(&live("2026-01-01T00:00:09Z")), Freshness::Stale);
    }

    #[test]
    fn owners_that_left_need_no_write() {
        assert!(owners_covered("a", Some("a,b")));
        assert!(owners_covered("a,c", Some("a,b,+more")));
        assert!(!owners_covered("a,c", Some("a,b")));
        assert!(!owners_covered("a", None));
    }

    #[test]
    fn only_what_the_pack_created_is_its() {
        let object = |labels: Value, created: &str, uid: &str| {
            json!({"metadata": {"uid": uid, "labels": labels,
                                "annotations": {ANNOTATION_CREATED: created}}})
        };
        let ours = json!({LABEL_PACK: "p"});
        assert!(created_by(&object(ours.clone(), "u1", "u1"), "p"));
        // A copy elsewhere, or a successor of the same name: another uid.
        assert!(!created_by(&object(ours.clone(), "u1", "u2"), "p"));
        assert!(!created_by(&object(ours, "", ""), "p"));
        assert!(!created_by(
            &object(json!({LABEL_PACK: "q"}), "u1", "u1"),
            "p"
        ));
        assert!(!created_by(
            &json!({"metadata": {"uid": "u1", "labels": {LABEL_PACK: "p"}}}),
            "p"
        ));
    }
}
