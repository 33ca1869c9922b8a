//! What the controller watches and who read what: the kinds and clusters a pack needs
//! watched (its watch plan), and the reverse index from everything an evaluation read to the
//! triggers that read it, so a change re-evaluates exactly those triggers.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use switchyard_core::evaluate::LABEL_PACK;
use switchyard_core::{ObjectKey, Pack, ReadKey};

use crate::store::{KindKey, Store};
use crate::watch::WatchMode;

/// The clusters a kind of `role` is watched in (see [`Store::watch_clusters`]).
pub fn role_clusters(store: &Store, role: &str) -> Vec<String> {
    store.watch_clusters(role)
}

/// A kind in every cluster of a role it is watched in.
pub(super) fn kind_in_role(
    store: &Store,
    role: &str,
    api_version: &str,
    kind: &str,
) -> Vec<KindKey> {
    role_clusters(store, role)
        .into_iter()
        .map(|cluster| KindKey {
            cluster,
            api_version: api_version.to_string(),
            kind: kind.to_string(),
        })
        .collect()
}

/// A kind in a role: (role, apiVersion, kind).
pub type RoleKind = (String, String, String);

/// What a loaded pack needs watched, by kind and cluster: rules watch and look up kinds in
/// roles, and a role may have many member clusters.
pub fn watch_plan(pack: &Pack, world: &Store) -> BTreeMap<KindKey, WatchMode> {
    let mut plan: BTreeMap<KindKey, WatchMode> = BTreeMap::new();
    for ((role, api_version, kind), mode) in role_plan(pack) {
        for key in kind_in_role(world, &role, &api_version, &kind) {
            plan.insert(key, mode.clone());
        }
    }
    plan
}

/// What a pack needs watched in each member of a role, whichever members the role has: a
/// member that joins is watched this way before packs see it.
pub fn role_plan(pack: &Pack) -> BTreeMap<RoleKind, WatchMode> {
    let mut plan: BTreeMap<RoleKind, WatchMode> = BTreeMap::new();
    let mut strongest = |key: RoleKind, mode: WatchMode| {
        let stronger = plan
            .get(&key)
            .is_none_or(|m| m.strength() < mode.strength());
        if stronger {
            plan.insert(key, mode);
        }
    };
    for rule in pack.rule_kinds() {
        // A rule without `watch` has the pack's own trigger, which no cluster holds.
        let trigger = (!rule.triggerless).then_some(&rule.watch);
        let watched = trigger.into_iter().chain(&rule.lookups);
        for k in watched {
            strongest(
                (k.cluster.clone(), k.api_version.clone(), k.kind.clone()),
                WatchMode::Full,
            );
        }
        // Outputs read back whole: a patch's target carries no label of the pack (watched
        // in full); a stage's outputs do (whole objects, selected by the label). The kind is
        // the template's when it writes one literally, else every kind of the role's scope.
        for observed in &rule.observed_outputs {
            let kinds: Vec<(String, String)> = match &observed.kind {
                Some(kind) => vec![kind.clone()],
                None => pack
                    .spec()
                    .scope
                    .iter()
                    .filter(|s| s.cluster == observed.cluster)
                    .flat_map(|s| s.kinds.iter())
                    .map(|k| (k.api_version.clone(), k.kind.clone()))
                    .collect(),
            };
            let mode = if observed.owned {
                WatchMode::Labelled {
                    labels: LABEL_PACK.to_string(),
                }
            } else {
                WatchMode::Full
            };
            for (api_version, kind) in kinds {
                strongest((observed.cluster.clone(), api_version, kind), mode.clone());
            }
        }
    }
    // Outputs: every kind the scope allows, metadata only unless a rule reads it; the label
    // selector keeps the cache to objects some pack manages.
    for scope in &pack.spec().scope {
        for k in &scope.kinds {
            plan.entry((scope.cluster.clone(), k.api_version.clone(), k.kind.clone()))
                .or_insert_with(|| WatchMode::Metadata {
                    labels: LABEL_PACK.to_string(),
                });
        }
    }
    plan
}

/// The kinds a pack may emit, in every cluster of the roles its scope names.
pub(super) fn output_kinds(pack: &Pack, world: &Store) -> BTreeSet<KindKey> {
    pack.spec()
        .scope
        .iter()
        .flat_map(|scope| {
            scope
                .kinds
                .iter()
                .flat_map(|k| kind_in_role(world, &scope.cluster, &k.api_version, &k.kind))
        })
        .collect()
}

/// What each evaluation read, and the reverse: who read it.
#[derive(Default)]
pub(super) struct ReadIndex {
    reads: HashMap<(Arc<str>, ObjectKey), BTreeSet<ReadKey>>,
    readers: HashMap<ReadKey, HashSet<(Arc<str>, ObjectKey)>>,
}

impl ReadIndex {
    /// Replaces what a trigger's evaluation read (nothing, when the trigger is gone or no
    /// rule watches it any more).
    pub(super) fn record(
        &mut self,
        pack: &Arc<str>,
        trigger: &ObjectKey,
        reads: BTreeSet<ReadKey>,
    ) {
        let id = (pack.clone(), trigger.clone());
        if self
            .reads
            .get(&id)
            .map_or(reads.is_empty(), |old| *old == reads)
        {
            // The same reads as the last evaluation (the common case): nothing to re-index.
            return;
        }
        if let Some(old) = self.reads.remove(&id) {
            for r in old {
                if let Some(readers) = self.readers.get_mut(&r) {
                    readers.remove(&id);
                    if readers.is_empty() {
                        self.readers.remove(&r);
                    }
                }
            }
        }
        if reads.is_empty() {
            return;
        }
        for r in &reads {
            self.readers
                .entry(r.clone())
                .or_default()
                .insert(id.clone());
        }
        self.reads.insert(id, reads);
    }

    /// Forgets what an unloaded pack's evaluations read.
    pub(super) fn forget_pack(&mut self, name: &Arc<str>) {
        self.reads.retain(|(p, _), _| p != name);
        for readers in self.readers.values_mut() {
            readers.retain(|(p, _)| p != name);
        }
    }

    /// The triggers that read this object: by key, or by a list it is in (of its namespace
    /// or of every namespace).
    pub(super) fn readers_of(
        &self,
        key: &ObjectKey,
    ) -> impl Iterator<Item = &(Arc<str>, ObjectKey)> {
        let reads = [
            ReadKey::Object(key.clone()),
            ReadKey::List {
                cluster: key.cluster.clone(),
                api_version: key.api_version.clone(),
                kind: key.kind.clone(),
                namespace: key.namespace.clone(),
            },
            ReadKey::List {
                cluster: key.cluster.clone(),
                api_version: key.api_version.clone(),
                kind: key.kind.clone(),
                namespace: None,
            },
        ];
        reads
            .into_iter()
            .filter_map(|read| self.readers.get(&read))
            .flatten()
    }
}
