//! Prune with sharding: an output several shards may want carries one claim per shard (its
//! owners annotation, written by the shard's own field manager). A shard whose first round is
//! complete and none of whose triggers desire an output takes its claim back; the output is
//! deleted only when no claim of any shard remains (and, in the same request, only if nobody
//! wrote it since: its resourceVersion is the delete's precondition, so a claim added
//! meanwhile saves it).
//!
//! Claims of another layout (no sharding, or another number of shards) name their triggers:
//! such a claim is dead when every trigger it lists falls, under the current layout, in a
//! shard of this broker that is done and does not desire the output; a claim that lists only
//! some (`+more`) is kept.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use serde_json::Value;
use switchyard_core::ObjectKey;
use switchyard_core::model::DeletionPolicy;
use switchyard_core::names::{ANNOTATION_CREATED, ANNOTATION_RULE};
use switchyard_core::object::World;
use switchyard_core::plan::OWNERS_MORE;

use super::outputs::{annotation, created_by, prune_writes};
use super::state::{Controller, Initial, ReconcileError};
use crate::apply::ApplyError;
use crate::shards;

/// What a prune does to one output.
enum Act {
    /// No claim remains: delete (or orphan) that version of it.
    Remove {
        uid: String,
        version: String,
        policy: DeletionPolicy,
    },
    /// Other claims remain: these field managers take theirs back.
    Release(Vec<String>),
}

impl Controller {
    /// Prune with sharding (see the module's notes).
    pub(super) async fn prune_shards(&self, pack_name: &Arc<str>) -> Result<(), ReconcileError> {
        let mut acts: Vec<(ObjectKey, Act)> = Vec::new();
        {
            let mut state = self.lock();
            let Some(p) = state.packs.get(pack_name) else {
                return Ok(());
            };
            let count = p.shard_count;
            let done: BTreeSet<u32> = p
                .rounds
                .iter()
                .filter(|(_, r)| matches!(r.initial, Initial::Done))
                .map(|(s, _)| *s)
                .collect();
            if done.is_empty() {
                return Ok(());
            }
            let unknown: HashSet<String> = p.unknown.iter().map(ToString::to_string).collect();
            let policies: HashMap<String, DeletionPolicy> = p
                .rules
                .iter()
                .map(|r| (r.name.clone(), r.deletion))
                .collect();
            for kind in &p.output_kinds {
                let Some(cache) = self.store.cache(kind) else {
                    continue;
                };
                for cached in cache.all() {
                    let o = cached.value();
                    if !created_by(&o, pack_name)
                        || o.pointer("/metadata/deletionTimestamp").is_some()
                    {
                        continue;
                    }
                    let Some(key) = self.store.key_of(kind, &o) else {
                        continue;
                    };
                    let wanted: Vec<String> = p
                        .by_output
                        .get(&key)
                        .into_iter()
                        .flatten()
                        .map(ToString::to_string)
                        .collect();
                    let wanted_by: BTreeSet<u32> = wanted
                        .iter()
                        .map(|t| shards::shard_of_name(t, count))
                        .collect();
                    // A trigger that cannot want it any more: of a shard done here, and not
                    // among those that desire it.
                    let dead = |trigger: &str| {
                        trigger != OWNERS_MORE
                            && !trigger.is_empty()
                            && done.contains(&shards::shard_of_name(trigger, count))
                            && !wanted.iter().any(|w| w == trigger)
                    };
                    let (claims, _) = shards::claims(&o, count);
                    let mut released = Vec::new();
                    let mut kept = !wanted_by.is_empty();
                    let mut protected = false;
                    for (name, value) in o
                        .pointer("/metadata/annotations")
                        .and_then(Value::as_object)
                        .into_iter()
                        .flatten()
                    {
                        if !shards::is_owners_key(name) {
                            continue;
                        }
                        let owners = value.as_str().unwrap_or_default();
                        let ours = claims
                            .iter()
                            .any(|s| shards::owners_key(*s, count) == *name);
                        let stale = if ours {
                            claims
                                .iter()
                                .find(|s| shards::owners_key(**s, count) == *name)
                                .is_some_and(|s| done.contains(s) && !wanted_by.contains(s))
                        } else {
                            owners.split(',').all(dead)
                        };
                        if !stale {
                            kept = true;
                            continue;
                        }
                        if !unknown.is_empty()
                            && owners
                                .split(',')
                                .any(|x| unknown.contains(x) || x == OWNERS_MORE)
                        {
                            protected = true;
                        }
                        released.push(shards::manager_of_claim(pack_name, name));
                    }
                    if protected {
                        tracing::info!(object = %key, "not pruned: a trigger that may own it fails to evaluate");
                        continue;
                    }
                    if released.is_empty() {
                        continue;
                    }
                    if kept {
                        acts.push((key, Act::Release(released)));
                        continue;
                    }
                    let orphan = annotation(&o, ANNOTATION_RULE).split(',').any(|source| {
                        let rule = source.split('/').next().unwrap_or_default();
                        policies.get(rule) == Some(&DeletionPolicy::Orphan)
                    });
                    let uid = annotation(&o, ANNOTATION_CREATED).to_string();
                    let version = o
                        .pointer("/metadata/resourceVersion")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    let policy = if orphan {
                        DeletionPolicy::Orphan
                    } else {
                        DeletionPolicy::Delete
                    };
                    acts.push((
                        key,
                        Act::Remove {
                            uid,
                            version,
                            policy,
                        },
                    ));
                }
            }
            acts.retain(|(key, act)| match act {
                Act::Remove { uid, .. } => {
                    if state.deleted.get(key) == Some(uid) {
                        return false;
                    }
                    state.deleted.insert(key.clone(), uid.clone());
                    true
                }
                Act::Release(_) => true,
            });
        }
        prune_writes(
            acts.into_iter()
                .map(|(key, act)| self.prune_act(pack_name, key, act)),
        )
        .await
    }

    /// One write of a sharded prune: a claim taken back, or an output deleted or orphaned.
    async fn prune_act(
        &self,
        pack_name: &Arc<str>,
        key: ObjectKey,
        act: Act,
    ) -> Result<(), ApplyError> {
        let result = match act {
            Act::Release(managers) => {
                let uid = self.store.get_key(&key).and_then(|o| {
                    o.pointer("/metadata/uid")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                });
                let mut result = Ok(());
                for manager in managers {
                    tracing::info!(object = %key, %manager, "claim taken back: no trigger of the shard desires it, another claim remains");
                    if let Err(e) = self
                        .clusters
                        .take_back(&manager, &key, uid.as_deref())
                        .await
                    {
                        result = Err(e);
                        break;
                    }
                    self.count_apply(pack_name, &key);
                }
                result
            }
            Act::Remove {
                uid,
                version,
                policy: DeletionPolicy::Delete,
            } => {
                tracing::info!(object = %key, "pruning an output no shard claims");
                let deleted = self.clusters.delete_version(&key, &uid, &version).await;
                self.removal_done(pack_name, &key, deleted)
            }
            Act::Remove { .. } => {
                tracing::info!(object = %key, "orphaning an output no shard claims");
                let orphaned = self.clusters.orphan(pack_name, &key).await;
                self.removal_done(pack_name, &key, orphaned.map(|()| true))
            }
        };
        if let Err(e) = &result {
            // A claim written meanwhile (the version changed), or no answer: the next
            // prune looks again.
            tracing::info!(object = %key, error = %e, "prune not done; tried again later");
        }
        result
    }
}
