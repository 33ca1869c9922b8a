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

/// An object's key shared by the maps that name it (a trigger is named by its
/// contribution, its outputs' owners, its precedence, its reads and its readers): one copy
/// of its strings, and eight bytes in each map.
pub(super) type Key = Arc<ObjectKey>;

/// What each evaluation read, and the reverse: who read it.
#[derive(Default)]
pub(super) struct ReadIndex {
    /// In order; a `Vec` rather than a `BTreeSet`, whose node holds eleven keys however few
    /// an evaluation read.
    reads: HashMap<Reader, Vec<Arc<ReadKey>>>,
    /// Keyed by the one copy of each thing read, which `reads` shares.
    readers: HashMap<Arc<ReadKey>, Readers>,
}

/// A pack's trigger.
type Reader = (Arc<str>, Key);

/// The triggers that read one thing: most things (a trigger's own object) have one reader,
/// which needs no hash set of its own.
enum Readers {
    One(Reader),
    Many(HashSet<Reader>),
}

impl Readers {
    fn insert(&mut self, reader: Reader) {
        match self {
            Readers::One(one) if *one == reader => {}
            Readers::One(one) => {
                let first = one.clone();
                *self = Readers::Many(HashSet::from([first, reader]));
            }
            Readers::Many(many) => {
                many.insert(reader);
            }
        }
    }

    /// Removes a reader; true when none is left.
    fn remove(&mut self, reader: &Reader) -> bool {
        match self {
            Readers::One(one) => one == reader,
            Readers::Many(many) => {
                many.remove(reader);
                many.is_empty()
            }
        }
    }

    /// Keeps the readers `keep` says; true when none is left.
    fn retain(&mut self, keep: impl Fn(&Reader) -> bool) -> bool {
        match self {
            Readers::One(one) => !keep(one),
            Readers::Many(many) => {
                many.retain(|r| keep(r));
                many.is_empty()
            }
        }
    }

    fn iter(&self) -> impl Iterator<Item = &Reader> {
        let (one, many) = match self {
            Readers::One(one) => (Some(one), None),
            Readers::Many(many) => (None, Some(many)),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }
}

impl ReadIndex {
    /// Replaces what a trigger's evaluation read (nothing, when the trigger is gone or no
    /// rule watches it any more).
    pub(super) fn record(&mut self, pack: &Arc<str>, trigger: &Key, reads: BTreeSet<ReadKey>) {
        let id = (pack.clone(), trigger.clone());
        if self.reads.get(&id).map_or(reads.is_empty(), |old| {
            old.iter().map(AsRef::as_ref).eq(reads.iter())
        }) {
            // The same reads as the last evaluation (the common case): nothing to re-index.
            return;
        }
        if let Some(old) = self.reads.remove(&id) {
            for r in old {
                if let Some(readers) = self.readers.get_mut(&r)
                    && readers.remove(&id)
                {
                    self.readers.remove(&r);
                }
            }
        }
        if reads.is_empty() {
            return;
        }
        let mut shared = Vec::with_capacity(reads.len());
        for r in reads {
            match self.readers.get_key_value(&r) {
                Some((key, _)) => {
                    let key = key.clone();
                    if let Some(readers) = self.readers.get_mut(&key) {
                        readers.insert(id.clone());
                    }
                    shared.push(key);
                }
                None => {
                    let key = Arc::new(r);
                    self.readers.insert(key.clone(), Readers::One(id.clone()));
                    shared.push(key);
                }
            }
        }
        self.reads.insert(id, shared);
    }

    /// Forgets what an unloaded pack's evaluations read.
    pub(super) fn forget_pack(&mut self, name: &Arc<str>) {
        self.reads.retain(|(p, _), _| p != name);
        self.readers
            .retain(|_, readers| !readers.retain(|(p, _)| p != name));
    }

    /// The triggers that read this object: by key, or by a list it is in (of its namespace
    /// or of every namespace).
    pub(super) fn readers_of(&self, key: &ObjectKey) -> impl Iterator<Item = &Reader> {
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
            .flat_map(Readers::iter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey {
            cluster: "source".into(),
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("ns".into()),
            name: name.into(),
        }
    }

    fn trigger(name: &str) -> Key {
        Arc::new(key(name))
    }

    fn readers(index: &ReadIndex, of: &str) -> Vec<String> {
        let mut found: Vec<String> = index
            .readers_of(&key(of))
            .map(|(p, t)| format!("{p}:{}", t.name))
            .collect();
        found.sort();
        found
    }

    #[test]
    fn readers_are_recorded_replaced_and_forgotten() {
        let mut index = ReadIndex::default();
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("a"), Arc::from("b"));
        index.record(
            &a,
            &trigger("t1"),
            BTreeSet::from([ReadKey::Object(key("shared"))]),
        );
        assert_eq!(readers(&index, "shared"), ["a:t1"]);
        // A second reader, then the same one again.
        index.record(
            &b,
            &trigger("t2"),
            BTreeSet::from([ReadKey::Object(key("shared"))]),
        );
        index.record(
            &b,
            &trigger("t2"),
            BTreeSet::from([ReadKey::Object(key("shared"))]),
        );
        assert_eq!(readers(&index, "shared"), ["a:t1", "b:t2"]);
        // A list read finds every object of its namespace.
        let list = ReadKey::List {
            cluster: "source".into(),
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("ns".into()),
        };
        index.record(&a, &trigger("t3"), BTreeSet::from([list]));
        assert_eq!(readers(&index, "other"), ["a:t3"]);
        // t1 reads something else now: it no longer reads `shared` (t3 still does, by list).
        index.record(
            &a,
            &trigger("t1"),
            BTreeSet::from([ReadKey::Object(key("x"))]),
        );
        assert_eq!(readers(&index, "shared"), ["a:t3", "b:t2"]);
        index.forget_pack(&b);
        assert_eq!(readers(&index, "shared"), ["a:t3"]);
        assert!(!index.readers.contains_key(&ReadKey::Object(key("shared"))));
        assert_eq!(readers(&index, "x"), ["a:t1", "a:t3"]);
        index.record(&a, &trigger("t1"), BTreeSet::new());
        assert_eq!(readers(&index, "x"), ["a:t3"]);
    }
}
