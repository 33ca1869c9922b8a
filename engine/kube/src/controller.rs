//! The controller: turns watch events into work, evaluates triggers with the core's
//! `evaluate()`, and makes the clusters match the outcomes.
//!
//! State kept in memory, rebuilt from the clusters after a restart (level-triggered):
//! - per pack, each trigger's contribution (the objects it desires) and the reverse map from
//!   an output to the triggers that desire it;
//! - the dependency index: from everything an evaluation read (`Outcome.reads`) to the
//!   triggers that read it, so a change re-evaluates exactly those triggers;
//! - what was last applied to each output, so a converged system writes nothing.
//!
//! Prune safety: an output is deleted only when every watch its pack needs has synced, every
//! trigger of the pack has been evaluated once since start or reload, and no trigger whose
//! evaluation failed could still own it (see [`Controller::prune`]).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use chrono::Utc;
use serde_json::Value;
use switchyard_core::evaluate::{
    ANNOTATION_OWNERS, ANNOTATION_RULE, CONDITION_SYNCED, LABEL_PACK, Precedence, REASON_CONFLICT,
};
use switchyard_core::model::{DeletionPolicy, OutputMode};
use switchyard_core::object::{World, cluster_id, labels, selector_matches};
use switchyard_core::plan::{Conflict, OWNERS_MORE, absorb, stamp_merged};
use switchyard_core::{
    DesiredObject, ObjectKey, Outcome, Pack, ReadKey, Trigger, evaluate_untraced,
};

use crate::apply::{ApplyError, Clusters};
use crate::queue::Queue;
use crate::store::{KindKey, Store};
use crate::watch::{Change, WatchMode};

/// A unit of work: evaluate one trigger for one pack, or prune one pack's outputs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Work {
    Trigger(Arc<str>, ObjectKey),
    Prune(Arc<str>),
}

/// The clusters of a role: `ROLE/NAME` for each member the world knows, or the role itself
/// when it has none (a watch of it then reports that no cluster is configured).
pub fn role_clusters(world: &dyn World, role: &str) -> Vec<String> {
    let members = world.members(role);
    if members.is_empty() {
        return vec![role.to_string()];
    }
    members.iter().map(|m| cluster_id(role, m)).collect()
}

/// A kind in every cluster of a role.
fn kind_in_role(world: &dyn World, role: &str, api_version: &str, kind: &str) -> Vec<KindKey> {
    role_clusters(world, role)
        .into_iter()
        .map(|cluster| KindKey {
            cluster,
            api_version: api_version.to_string(),
            kind: kind.to_string(),
        })
        .collect()
}

/// What a loaded pack needs watched, by kind and cluster: rules watch and look up kinds in
/// roles, and a role may have many member clusters.
pub fn watch_plan(pack: &Pack, world: &dyn World) -> BTreeMap<KindKey, WatchMode> {
    let mut plan: BTreeMap<KindKey, WatchMode> = BTreeMap::new();
    for rule in pack.rule_kinds() {
        let watched = std::iter::once(&rule.watch).chain(&rule.lookups);
        for k in watched {
            for key in kind_in_role(world, &k.cluster, &k.api_version, &k.kind) {
                plan.insert(key, WatchMode::Full);
            }
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
                for key in kind_in_role(world, &observed.cluster, &api_version, &kind) {
                    let stronger = plan
                        .get(&key)
                        .is_none_or(|m| m.strength() < mode.strength());
                    if stronger {
                        plan.insert(key, mode.clone());
                    }
                }
            }
        }
    }
    // Outputs: every kind the scope allows, metadata only unless a rule reads it; the label
    // selector keeps the cache to objects some pack manages.
    for key in output_kinds(pack, world) {
        plan.entry(key).or_insert_with(|| WatchMode::Metadata {
            labels: LABEL_PACK.to_string(),
        });
    }
    plan
}

/// The kinds a pack may emit, in every cluster of the roles its scope names.
fn output_kinds(pack: &Pack, world: &dyn World) -> BTreeSet<KindKey> {
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

/// Where a pack stands in its first round of evaluations after start or reload.
#[derive(Debug)]
enum Initial {
    /// Some watch the pack needs has not synced yet; then the triggers of these rules (all
    /// rules: `None`) are evaluated.
    Waiting(Option<BTreeSet<String>>),
    /// These triggers have not been evaluated yet.
    Pending(HashSet<ObjectKey>),
    /// Every trigger has been evaluated once: prune may run.
    Done,
}

struct PackState {
    pack: Arc<Pack>,
    kinds: BTreeMap<KindKey, WatchMode>,
    /// The kinds, per cluster role, the pack's scope lets it emit: the only places prune
    /// looks. (Two roles may be one cluster: the source role's cache of a kind then holds the
    /// outputs too, under the wrong role.)
    output_kinds: BTreeSet<KindKey>,
    /// Each trigger's desired objects, as its last successful evaluation left them.
    contributions: HashMap<ObjectKey, Vec<Arc<DesiredObject>>>,
    /// Output -> the triggers that desire it.
    by_output: HashMap<ObjectKey, BTreeSet<ObjectKey>>,
    /// Each contributing trigger's claim on contested outputs: the one that desired an output
    /// first wins it, as `render` decides.
    precedence: HashMap<ObjectKey, Precedence>,
    /// Output -> the triggers whose different version of it the merge refused.
    refused: HashMap<ObjectKey, BTreeSet<String>>,
    /// Triggers whose `Synced` a merge changed (they won or lost an output): evaluated again
    /// so their status says so.
    restate: BTreeSet<ObjectKey>,
    /// Each output's merged object and its hash, until a contribution to it changes: a
    /// Namespace shared by a hundred triggers is merged once, not once per evaluation.
    merged: HashMap<ObjectKey, Arc<Merged>>,
    /// What the rules watch, look up and write (the pack's, computed once).
    rules: Vec<switchyard_core::pack::RuleKinds>,
    /// Triggers whose evaluation failed before any succeeded: what they own is unknown.
    unknown: HashSet<ObjectKey>,
    /// Triggers being deleted that wait for their outputs to be gone.
    deleting: HashSet<ObjectKey>,
    /// Objects this pack patched since start: a patch no trigger desires any more is taken
    /// back (its fields removed), since patched objects carry no label prune could find.
    patched: HashSet<ObjectKey>,
    initial: Initial,
}

impl PackState {
    fn new(pack: Arc<Pack>, world: &dyn World) -> Self {
        PackState {
            kinds: watch_plan(&pack, world),
            output_kinds: output_kinds(&pack, world),
            patched: HashSet::new(),
            merged: HashMap::new(),
            rules: pack.rule_kinds(),
            pack,
            contributions: HashMap::new(),
            by_output: HashMap::new(),
            precedence: HashMap::new(),
            refused: HashMap::new(),
            restate: BTreeSet::new(),
            unknown: HashSet::new(),
            deleting: HashSet::new(),
            initial: Initial::Waiting(None),
        }
    }

    /// Replaces a trigger's contribution; returns the outputs whose merged form changes
    /// (added, removed, or different from before).
    fn set_contribution(
        &mut self,
        trigger: &ObjectKey,
        desired: Vec<DesiredObject>,
        precedence: Option<&Precedence>,
    ) -> BTreeSet<ObjectKey> {
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
        for d in &previous {
            if !desired.iter().any(|n| n.key == d.key) {
                if let Some(owners) = self.by_output.get_mut(&d.key) {
                    owners.remove(trigger);
                    if owners.is_empty() {
                        self.by_output.remove(&d.key);
                    }
                }
                touched.insert(d.key.clone());
            }
        }
        for d in &desired {
            if previous.iter().any(|p| **p == *d) {
                continue;
            }
            self.by_output
                .entry(d.key.clone())
                .or_default()
                .insert(trigger.clone());
            touched.insert(d.key.clone());
        }
        for key in &touched {
            self.merged.remove(key);
        }
        if !desired.is_empty() {
            // An unchanged object keeps the allocation the merged cache may share.
            let kept: Vec<Arc<DesiredObject>> = desired
                .into_iter()
                .map(|d| match previous.iter().find(|p| ***p == d) {
                    Some(p) => p.clone(),
                    None => Arc::new(d),
                })
                .collect();
            self.contributions.insert(trigger.clone(), kept);
        }
        touched
    }

    /// The object to apply for an output: every contribution merged as `render` merges them.
    fn merged(&mut self, key: &ObjectKey) -> Option<Arc<Merged>> {
        if let Some(found) = self.merged.get(key) {
            return Some(found.clone());
        }
        let owners = self.by_output.get(key)?;
        let contribution = |trigger: &ObjectKey| {
            self.contributions
                .get(trigger)
                .and_then(|c| c.iter().find(|d| &d.key == key))
        };
        let mut conflicts = Vec::new();
        let desired = if owners.len() == 1 {
            // One owner: evaluate() stamped it exactly as merging would; share it.
            contribution(owners.iter().next()?)?.clone()
        } else {
            let mut merged: Option<DesiredObject> = None;
            // In the order the triggers claim it, as `render` merges.
            let mut ordered: Vec<&ObjectKey> = owners.iter().collect();
            ordered.sort_by_key(|t| (self.precedence.get(*t), *t));
            for trigger in ordered {
                let Some(d) = contribution(trigger) else {
                    continue;
                };
                match &mut merged {
                    None => merged = Some(DesiredObject::clone(d)),
                    Some(m) => {
                        if let Err(conflict) = absorb(m, d) {
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
            let mut merged = merged?;
            stamp_merged(
                self.pack.name(),
                &self.pack.version().to_string(),
                &mut merged,
            );
            Arc::new(merged)
        };
        let refused: BTreeSet<String> = conflicts.iter().flat_map(|c| c.refused.clone()).collect();
        let before = self.refused.remove(key).unwrap_or_default();
        for changed in before.symmetric_difference(&refused) {
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
        if !refused.is_empty() {
            self.refused.insert(key.clone(), refused);
        }
        let hash = hash_value(&desired.object);
        let merged = Arc::new(Merged {
            desired,
            hash,
            conflicts,
        });
        self.merged.insert(key.clone(), merged.clone());
        Some(merged)
    }

    /// The conflicts of the outputs `trigger` desires that refused its version.
    fn refused_versions(&self, trigger: &ObjectKey) -> Vec<Conflict> {
        let name = trigger.to_string();
        let Some(contributed) = self.contributions.get(trigger) else {
            return Vec::new();
        };
        contributed
            .iter()
            .filter_map(|d| self.merged.get(&d.key))
            .flat_map(|m| m.conflicts.iter())
            .filter(|c| c.refused.contains(&name))
            .cloned()
            .collect()
    }

    /// Objects in the caches that carry this pack's label and that no trigger desires: what
    /// prune may remove.
    fn undesired(&self, store: &Store, pack_name: &str) -> Vec<(ObjectKey, Arc<Value>)> {
        let mut found = Vec::new();
        for kind in &self.output_kinds {
            let Some(cache) = store.cache(kind) else {
                continue;
            };
            for o in cache.list(None) {
                if !managed_by(&o, pack_name) {
                    continue;
                }
                if let Ok(key) = ObjectKey::of(&kind.cluster, &o)
                    && !self.by_output.contains_key(&key)
                {
                    found.push((key, o));
                }
            }
        }
        found
    }

    /// Some of these outputs are desired by no trigger any more: prune has work.
    fn orphans_any(&self, touched: &BTreeSet<ObjectKey>) -> bool {
        touched.iter().any(|k| !self.by_output.contains_key(k))
    }

    fn mark_evaluated(&mut self, trigger: &ObjectKey) -> bool {
        if let Initial::Pending(pending) = &mut self.initial {
            pending.remove(trigger);
            if pending.is_empty() {
                self.initial = Initial::Done;
                return true;
            }
        }
        false
    }

    /// Rules of this pack watch objects of this kind, and the object matches one's selector.
    fn watches(&self, key: &ObjectKey, object: Option<&Value>) -> bool {
        self.rules.iter().any(|r| {
            r.watch.cluster == key.role()
                && r.watch.api_version == key.api_version
                && r.watch.kind == key.kind
                && match (&r.selector, object) {
                    (Some(s), Some(o)) => selector_matches(s, &labels(o)),
                    _ => true,
                }
        })
    }
}

/// An output's merged object and the hash of its content.
struct Merged {
    desired: Arc<DesiredObject>,
    hash: u64,
    /// Triggers whose different version was refused.
    conflicts: Vec<Conflict>,
}

/// What was last applied to an output, to skip writes that would change nothing.
#[derive(Debug, Clone, PartialEq)]
struct Applied {
    hash: u64,
    generation: Option<i64>,
    resource_version: Option<String>,
}

#[derive(Default)]
struct State {
    packs: BTreeMap<Arc<str>, PackState>,
    /// What each evaluation read, and the reverse: who read it.
    reads: HashMap<(Arc<str>, ObjectKey), BTreeSet<ReadKey>>,
    readers: HashMap<ReadKey, HashSet<(Arc<str>, ObjectKey)>>,
    applied: HashMap<ObjectKey, Applied>,
    synced: HashSet<KindKey>,
}

/// Counters of the writes made, for metrics and tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Writes {
    pub applies: u64,
    pub status: u64,
    pub deletes: u64,
    pub finalizers: u64,
}

/// Counters of work done, for metrics.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    pub evaluations: u64,
    pub failures: u64,
}

#[derive(Default)]
struct CounterState {
    totals: Counters,
    /// Evaluations per trigger, so tests can tell which triggers a change re-evaluated.
    per_trigger: HashMap<ObjectKey, u64>,
}

/// The broker's controller. Cheap to share: every method takes `&self`.
pub struct Controller {
    store: Arc<Store>,
    clusters: Arc<Clusters>,
    queue: Arc<Queue<Work>>,
    state: Mutex<State>,
    writes: Mutex<Writes>,
    counters: Mutex<CounterState>,
}

/// A failure that retries the work item with backoff.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error("{0}")]
    Pending(String),
}

impl Controller {
    pub fn new(store: Arc<Store>, clusters: Arc<Clusters>, queue: Arc<Queue<Work>>) -> Arc<Self> {
        Arc::new(Controller {
            store,
            clusters,
            queue,
            state: Mutex::new(State::default()),
            writes: Mutex::new(Writes::default()),
            counters: Mutex::new(CounterState::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn writes(&self) -> Writes {
        *self.writes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn counters(&self) -> Counters {
        self.counters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .totals
    }

    /// How often a trigger was evaluated.
    pub fn evaluations_of(&self, trigger: &ObjectKey) -> u64 {
        self.counters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .per_trigger
            .get(trigger)
            .copied()
            .unwrap_or(0)
    }

    /// A work item failed and is retried.
    pub fn count_failure(&self) {
        self.counters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .totals
            .failures += 1;
    }

    fn count(&self, f: impl FnOnce(&mut Writes)) {
        f(&mut self.writes.lock().unwrap_or_else(PoisonError::into_inner));
    }

    /// The loaded packs' names and versions.
    pub fn packs(&self) -> Vec<(String, String)> {
        self.lock()
            .packs
            .values()
            .map(|p| (p.pack.name().to_string(), p.pack.version().to_string()))
            .collect()
    }

    /// Every kind some loaded pack needs, with the mode to watch it in.
    pub fn needed_watches(&self) -> BTreeMap<KindKey, WatchMode> {
        let state = self.lock();
        let mut needed: BTreeMap<KindKey, WatchMode> = BTreeMap::new();
        for p in state.packs.values() {
            for (kind, mode) in &p.kinds {
                let stronger = needed
                    .get(kind)
                    .is_none_or(|m| m.strength() < mode.strength());
                if stronger {
                    needed.insert(kind.clone(), mode.clone());
                }
            }
        }
        needed
    }

    /// Installs a new set of packs. `changed_rules` names, per pack, the rules whose
    /// definition changed (`None`: the pack is new or changed as a whole). Only triggers of
    /// changed rules are evaluated again; the pack's prune waits until they all were.
    pub fn install(&self, packs: Vec<(Arc<Pack>, Option<BTreeSet<String>>)>) {
        let mut state = self.lock();
        let names: BTreeSet<Arc<str>> = packs.iter().map(|(p, _)| Arc::from(p.name())).collect();
        let removed: Vec<Arc<str>> = state
            .packs
            .keys()
            .filter(|n| !names.contains(*n))
            .cloned()
            .collect();
        for name in removed {
            // Outputs of a pack that is no longer loaded stay where they are: removing a
            // folder by mistake must not delete a fleet's infrastructure.
            tracing::warn!(pack = %name, "pack unloaded; its outputs are left in place");
            state.packs.remove(&name);
            state.reads.retain(|(p, _), _| p != &name);
            for readers in state.readers.values_mut() {
                readers.retain(|(p, _)| p != &name);
            }
        }
        for (pack, changed) in packs {
            let name: Arc<str> = Arc::from(pack.name());
            match state.packs.get_mut(&name) {
                Some(existing) => {
                    existing.kinds = watch_plan(&pack, &*self.store);
                    existing.output_kinds = output_kinds(&pack, &*self.store);
                    existing.rules = pack.rule_kinds();
                    // The pack's version is stamped on every output.
                    existing.merged.clear();
                    existing.pack = pack;
                    match changed {
                        // Nothing the rules depend on changed: nothing to evaluate again.
                        Some(rules) if rules.is_empty() => {}
                        changed => {
                            tracing::info!(pack = %name, rules = ?changed, "pack reloaded");
                            existing.initial = Initial::Waiting(changed);
                        }
                    }
                }
                None => {
                    state
                        .packs
                        .insert(name.clone(), PackState::new(pack, &*self.store));
                }
            }
        }
        drop(state);
        self.start_ready_packs();
    }

    /// A watch delivered a complete list.
    pub fn watch_synced(&self, kind: KindKey) {
        self.lock().synced.insert(kind);
        self.start_ready_packs();
    }

    /// A watch stopped (its kind is no longer needed).
    pub fn watch_stopped(&self, kind: &KindKey) {
        self.lock().synced.remove(kind);
    }

    /// Every watch synced, per pack: packs waiting for theirs start their first round.
    fn start_ready_packs(&self) {
        let mut work = Vec::new();
        {
            let mut state = self.lock();
            let synced = state.synced.clone();
            for (name, p) in state.packs.iter_mut() {
                let Initial::Waiting(rules) = &p.initial else {
                    continue;
                };
                let rules = rules.clone();
                if !p.kinds.keys().all(|k| synced.contains(k)) {
                    continue;
                }
                let mut triggers = HashSet::new();
                for rule in p.pack.rule_kinds() {
                    if rules.as_ref().is_some_and(|r| !r.contains(&rule.name)) {
                        continue;
                    }
                    let w = &rule.watch;
                    for kind in kind_in_role(&*self.store, &w.cluster, &w.api_version, &w.kind) {
                        let Some(cache) = self.store.cache(&kind) else {
                            continue;
                        };
                        for object in cache.list(None) {
                            let selected = rule
                                .selector
                                .as_ref()
                                .is_none_or(|sel| selector_matches(sel, &labels(&object)));
                            if selected && let Ok(key) = ObjectKey::of(&kind.cluster, &object) {
                                triggers.insert(key);
                            }
                        }
                    }
                }
                if rules.is_none() {
                    // Triggers known from before that are gone now must be cleaned up too.
                    triggers.extend(p.contributions.keys().cloned());
                }
                tracing::info!(pack = %name, triggers = triggers.len(), "watches synced; evaluating every trigger");
                for t in &triggers {
                    work.push(Work::Trigger(name.clone(), t.clone()));
                }
                p.initial = if triggers.is_empty() {
                    work.push(Work::Prune(name.clone()));
                    Initial::Done
                } else {
                    Initial::Pending(triggers)
                };
            }
        }
        for w in work {
            self.queue.add(w);
        }
    }

    /// Packs whose first round is not complete, with what they wait for.
    pub fn not_ready(&self) -> Vec<String> {
        let state = self.lock();
        let mut out = Vec::new();
        for (name, p) in &state.packs {
            match &p.initial {
                Initial::Waiting(_) => {
                    for k in p.kinds.keys().filter(|k| !state.synced.contains(*k)) {
                        out.push(format!("pack {name}: watch {k} not synced"));
                    }
                }
                Initial::Pending(t) => out.push(format!(
                    "pack {name}: {} triggers not evaluated yet",
                    t.len()
                )),
                Initial::Done => {}
            }
        }
        out
    }

    /// Every trigger of every pack, evaluated again (periodic resync) and a prune pass.
    pub fn resync(&self) {
        let mut work = Vec::new();
        {
            let state = self.lock();
            for (name, p) in &state.packs {
                for rule in p.pack.rule_kinds() {
                    let w = &rule.watch;
                    for kind in kind_in_role(&*self.store, &w.cluster, &w.api_version, &w.kind) {
                        let Some(cache) = self.store.cache(&kind) else {
                            continue;
                        };
                        for object in cache.list(None) {
                            if let Ok(key) = ObjectKey::of(&kind.cluster, &object) {
                                work.push(Work::Trigger(name.clone(), key));
                            }
                        }
                    }
                }
                work.push(Work::Prune(name.clone()));
            }
        }
        for w in work {
            self.queue.add(w);
        }
    }

    /// Maps a changed object to the work it causes: the trigger itself, the triggers that
    /// read it (by key or by list), the triggers that desire it (drift), and a prune pass
    /// when it is an output nobody desires.
    pub fn changed(&self, change: &Change) {
        let key = ObjectKey {
            cluster: change.kind.cluster.clone(),
            api_version: change.kind.api_version.clone(),
            kind: change.kind.kind.clone(),
            namespace: change.namespace.clone(),
            name: change.name.clone(),
        };
        let mut work: Vec<Work> = Vec::new();
        {
            let state = self.lock();
            let object = change.current.as_deref().or(change.previous.as_deref());
            for (name, p) in &state.packs {
                if p.watches(&key, object) {
                    work.push(Work::Trigger(name.clone(), key.clone()));
                }
                if let Some(triggers) = p.by_output.get(&key) {
                    // The echo of our own apply (the version the apply returned) changes
                    // nothing the owners do not know already.
                    let current_version = change
                        .current
                        .as_deref()
                        .and_then(|c| c.pointer("/metadata/resourceVersion"))
                        .and_then(Value::as_str);
                    let echo = current_version.is_some()
                        && state
                            .applied
                            .get(&key)
                            .and_then(|a| a.resource_version.as_deref())
                            == current_version;
                    if !echo {
                        work.extend(
                            triggers
                                .iter()
                                .map(|t| Work::Trigger(name.clone(), t.clone())),
                        );
                    }
                } else if object.is_some_and(|o| {
                    o.pointer("/metadata/labels")
                        .and_then(|l| l.get(LABEL_PACK))
                        .and_then(Value::as_str)
                        == Some(name)
                }) {
                    work.push(Work::Prune(name.clone()));
                }
                if change.current.is_none() {
                    // A deleted object may be the last output a deleting trigger waits for.
                    work.extend(
                        p.deleting
                            .iter()
                            .map(|t| Work::Trigger(name.clone(), t.clone())),
                    );
                }
            }
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
            for read in &reads {
                if let Some(readers) = state.readers.get(read) {
                    work.extend(
                        readers
                            .iter()
                            .map(|(p, t)| Work::Trigger(p.clone(), t.clone())),
                    );
                }
            }
        }
        for w in work {
            self.queue.add(w);
        }
    }

    /// Runs one work item.
    pub async fn process(&self, work: &Work) -> Result<(), ReconcileError> {
        match work {
            Work::Trigger(pack, trigger) => self.reconcile(pack, trigger).await,
            Work::Prune(pack) => self.prune(pack).await,
        }
    }

    fn record_reads(
        &self,
        state: &mut State,
        pack: &Arc<str>,
        trigger: &ObjectKey,
        reads: BTreeSet<ReadKey>,
    ) {
        let id = (pack.clone(), trigger.clone());
        if let Some(old) = state.reads.remove(&id) {
            for r in old {
                if let Some(readers) = state.readers.get_mut(&r) {
                    readers.remove(&id);
                    if readers.is_empty() {
                        state.readers.remove(&r);
                    }
                }
            }
        }
        if reads.is_empty() {
            return;
        }
        for r in &reads {
            state
                .readers
                .entry(r.clone())
                .or_default()
                .insert(id.clone());
        }
        state.reads.insert(id, reads);
    }

    async fn reconcile(
        &self,
        pack_name: &Arc<str>,
        trigger: &ObjectKey,
    ) -> Result<(), ReconcileError> {
        let Some(pack) = self.lock().packs.get(pack_name).map(|p| p.pack.clone()) else {
            return Ok(());
        };
        let object = self.store.get_key(trigger);
        let Some(object) = object else {
            // The trigger is gone: it desires nothing any more.
            let touched = {
                let mut state = self.lock();
                self.record_reads(&mut state, pack_name, trigger, BTreeSet::new());
                let Some(p) = state.packs.get_mut(pack_name) else {
                    return Ok(());
                };
                p.unknown.remove(trigger);
                p.deleting.remove(trigger);
                let touched = p.set_contribution(trigger, Vec::new(), None);
                if p.mark_evaluated(trigger) || p.orphans_any(&touched) {
                    self.queue.add(Work::Prune(pack_name.clone()));
                }
                touched
            };
            let synced = self.sync_outputs(pack_name, &touched).await;
            self.restate_merged(pack_name, trigger);
            return synced;
        };

        {
            let mut counters = self.counters.lock().unwrap_or_else(PoisonError::into_inner);
            counters.totals.evaluations += 1;
            *counters.per_trigger.entry(trigger.clone()).or_default() += 1;
        }
        tracing::debug!(pack = %pack_name, trigger = %trigger, "evaluating");
        let mut outcome = match evaluate_untraced(
            &pack,
            Trigger {
                cluster: &trigger.cluster,
                object: &object,
            },
            &*self.store,
            Utc::now(),
        ) {
            Ok(outcome) => outcome,
            Err(e) => {
                tracing::warn!(trigger = %trigger, error = %e, "object cannot be evaluated");
                return Ok(());
            }
        };
        if outcome.rules.is_empty() {
            // No rule of this pack watches it (any more): like a trigger that is gone.
            let touched = {
                let mut state = self.lock();
                self.record_reads(&mut state, pack_name, trigger, BTreeSet::new());
                match state.packs.get_mut(pack_name) {
                    Some(p) => {
                        let touched = p.set_contribution(trigger, Vec::new(), None);
                        if p.mark_evaluated(trigger) || p.orphans_any(&touched) {
                            self.queue.add(Work::Prune(pack_name.clone()));
                        }
                        touched
                    }
                    None => BTreeSet::new(),
                }
            };
            let synced = self.sync_outputs(pack_name, &touched).await;
            self.restate_merged(pack_name, trigger);
            return synced;
        }
        {
            let mut state = self.lock();
            self.record_reads(&mut state, pack_name, trigger, outcome.reads.clone());
        }
        if outcome.deleting {
            return self
                .finish_deletion(pack_name, &pack, trigger, &object)
                .await;
        }

        let failed = !outcome.errors.is_empty() || synced_false(&outcome);
        let finalizer = outcome.finalizer.clone();
        // A stage waiting for its timeout: evaluate again at the deadline, with or without
        // any change (a second after, so the clock has passed it).
        if let Some(wait) = outcome.requeue_after {
            self.queue.add_after(
                Work::Trigger(pack_name.clone(), trigger.clone()),
                wait + Duration::from_secs(1),
            );
        }
        let touched = {
            let mut state = self.lock();
            let Some(p) = state.packs.get_mut(pack_name) else {
                return Ok(());
            };
            if failed {
                // A failing trigger keeps what it had: never prune because evaluation failed.
                if !p.contributions.contains_key(trigger) {
                    p.unknown.insert(trigger.clone());
                }
                BTreeSet::new()
            } else {
                p.unknown.remove(trigger);
                let desired_keys: Vec<ObjectKey> =
                    outcome.desired.iter().map(|d| d.key.clone()).collect();
                let mut touched = p.set_contribution(
                    trigger,
                    std::mem::take(&mut outcome.desired),
                    Some(&outcome.facts.precedence),
                );
                if p.orphans_any(&touched) {
                    self.queue.add(Work::Prune(pack_name.clone()));
                }
                // Outputs desired before: checked again so drift is corrected.
                touched.extend(desired_keys);
                touched
            }
        };

        // The finalizer goes on before any output exists, so a delete can never skip cleanup.
        if let Some(f) = &finalizer
            && !has_finalizer(&object, f)
            && !touched.is_empty()
        {
            self.clusters
                .set_finalizer(trigger, &object, f, true)
                .await?;
            self.count(|w| w.finalizers += 1);
        }
        let applied = self.sync_outputs(pack_name, &touched).await;
        // The merge refused this trigger's version of an output: its status says so.
        let refused = {
            let state = self.lock();
            state
                .packs
                .get(pack_name)
                .map(|p| p.refused_versions(trigger))
                .unwrap_or_default()
        };
        if let Some(conflict) = refused.first() {
            outcome.set_synced("False", REASON_CONFLICT, &conflict.refused_message());
        }
        if let Err(ReconcileError::Apply(e)) = &applied {
            outcome.set_synced("False", e.reason(), &format!("{e}"));
        }
        self.restate_merged(pack_name, trigger);
        if let Some(status) = &outcome.status {
            self.write_status(pack_name, trigger, &object, status)
                .await?;
        }
        {
            let mut state = self.lock();
            if let Some(p) = state.packs.get_mut(pack_name)
                && p.mark_evaluated(trigger)
            {
                self.queue.add(Work::Prune(pack_name.clone()));
            }
        }
        applied
    }

    /// Queues the triggers (other than `current`) that a merge made win or lose an output,
    /// so their `Synced` condition follows.
    fn restate_merged(&self, pack_name: &Arc<str>, current: &ObjectKey) {
        let restate = {
            let mut state = self.lock();
            match state.packs.get_mut(pack_name) {
                Some(p) => std::mem::take(&mut p.restate),
                None => BTreeSet::new(),
            }
        };
        for trigger in restate.into_iter().filter(|t| t != current) {
            self.queue.add(Work::Trigger(pack_name.clone(), trigger));
        }
    }

    /// The trigger is being deleted: its outputs go (or are orphaned), and its finalizer is
    /// removed once they are confirmed gone.
    async fn finish_deletion(
        &self,
        pack_name: &Arc<str>,
        pack: &Pack,
        trigger: &ObjectKey,
        object: &Value,
    ) -> Result<(), ReconcileError> {
        let finalizer = format!("switchyard.dev/{}", pack.name());
        let (touched, previous_keys) = {
            let mut state = self.lock();
            let Some(p) = state.packs.get_mut(pack_name) else {
                return Ok(());
            };
            let previous: Vec<ObjectKey> = p
                .contributions
                .get(trigger)
                .map(|c| c.iter().map(|d| d.key.clone()).collect())
                .unwrap_or_default();
            let touched = p.set_contribution(trigger, Vec::new(), None);
            p.deleting.insert(trigger.clone());
            p.mark_evaluated(trigger);
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
            .set_finalizer(trigger, object, &finalizer, false)
            .await?;
        self.count(|w| w.finalizers += 1);
        if let Some(p) = self.lock().packs.get_mut(pack_name) {
            p.deleting.remove(trigger);
        }
        tracing::info!(trigger = %trigger, "outputs cleaned up; finalizer removed");
        Ok(())
    }

    /// An output of this trigger that still exists and is not desired by another trigger.
    fn cleanup_remaining(
        &self,
        pack_name: &Arc<str>,
        trigger: &ObjectKey,
        previous: &[ObjectKey],
    ) -> Option<String> {
        let state = self.lock();
        let p = state.packs.get(pack_name)?;
        let owner = trigger.to_string();
        p.undesired(&self.store, pack_name)
            .into_iter()
            .find(|(key, o)| {
                let owners = annotation(o, ANNOTATION_OWNERS);
                previous.contains(key) || owners.split(',').any(|x| x == owner || x == OWNERS_MORE)
            })
            .map(|(key, _)| key.to_string())
    }

    /// Applies the merged form of each output that is still desired and not up to date.
    async fn sync_outputs(
        &self,
        pack_name: &Arc<str>,
        keys: &BTreeSet<ObjectKey>,
    ) -> Result<(), ReconcileError> {
        let mut first_error = None;
        // Cluster-scoped outputs (Namespaces) first: the namespaced ones live in them.
        let ordered = keys
            .iter()
            .filter(|k| k.namespace.is_none())
            .chain(keys.iter().filter(|k| k.namespace.is_some()));
        for key in ordered {
            let (merged, record) = {
                let mut state = self.lock();
                let record = state.applied.get(key).cloned();
                let Some(p) = state.packs.get_mut(pack_name) else {
                    return Ok(());
                };
                (p.merged(key), record)
            };
            let Some(merged) = merged else {
                // Nobody desires it: prune decides, or, for a patch, it is taken back here.
                if let Err(e) = self.take_back_patch(pack_name, key).await {
                    first_error.get_or_insert(e);
                }
                continue;
            };
            let hash = merged.hash;
            let live = self.store.get_key(key);
            // A create-only output that exists is left as it is.
            if merged.desired.mode == OutputMode::Create && live.is_some() {
                continue;
            }
            if merged.desired.mode == OutputMode::Patch {
                if let Err(e) = self
                    .patch(pack_name, key, &merged.desired.object, live)
                    .await
                {
                    first_error.get_or_insert(e);
                }
                continue;
            }
            if let Some(live) = &live
                && up_to_date(
                    &merged.desired.object,
                    live,
                    hash,
                    record.as_ref(),
                    self.store.is_metadata_only(key),
                )
            {
                continue;
            }
            match self
                .clusters
                .apply(pack_name, key, &merged.desired.object)
                .await
            {
                Ok(stored) => {
                    self.count(|w| w.applies += 1);
                    let record = Applied {
                        hash,
                        generation: stored.metadata.generation,
                        resource_version: stored.metadata.resource_version.clone(),
                    };
                    self.lock().applied.insert(key.clone(), record);
                    tracing::debug!(object = %key, "applied");
                }
                Err(e) => {
                    tracing::warn!(object = %key, error = %e, "apply failed");
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    /// Applies a patch output: only onto the object as it exists (its uid is the apply's
    /// precondition, so a patch never creates the object nor lands on a successor of the same
    /// name), and only when some field differs.
    async fn patch(
        &self,
        pack_name: &Arc<str>,
        key: &ObjectKey,
        object: &Value,
        live: Option<Arc<Value>>,
    ) -> Result<(), ApplyError> {
        // Absent: evaluation already reported TargetNotFound; its appearance re-evaluates.
        let Some(live) = live else {
            return Ok(());
        };
        let uid = live.pointer("/metadata/uid").and_then(Value::as_str);
        if let Some(p) = self.lock().packs.get_mut(pack_name) {
            p.patched.insert(key.clone());
        }
        if is_subset(object, &live) {
            return Ok(());
        }
        self.clusters
            .apply_patch(pack_name, key, object, uid)
            .await?;
        self.count(|w| w.applies += 1);
        tracing::debug!(object = %key, "patched");
        Ok(())
    }

    /// Removes this pack's fields from an object it patched and no trigger patches any more:
    /// an empty apply by the pack's field manager.
    async fn take_back_patch(
        &self,
        pack_name: &Arc<str>,
        key: &ObjectKey,
    ) -> Result<(), ApplyError> {
        let patched = self
            .lock()
            .packs
            .get(pack_name)
            .is_some_and(|p| p.patched.contains(key));
        if !patched {
            return Ok(());
        }
        if let Some(live) = self.store.get_key(key) {
            let uid = live.pointer("/metadata/uid").and_then(Value::as_str);
            self.clusters.take_back(pack_name, key, uid).await?;
            self.count(|w| w.applies += 1);
            tracing::info!(object = %key, "patch taken back: the pack's fields removed");
        }
        if let Some(p) = self.lock().packs.get_mut(pack_name) {
            p.patched.remove(key);
        }
        Ok(())
    }

    async fn write_status(
        &self,
        pack_name: &str,
        trigger: &ObjectKey,
        live: &Value,
        status: &Value,
    ) -> Result<(), ReconcileError> {
        let current = live.get("status").cloned().unwrap_or(Value::Null);
        if is_subset(status, &current) {
            return Ok(());
        }
        // A new failure is also an Event, so `kubectl describe` and event pipelines see it.
        let synced = |s: &Value| {
            s.get("conditions")
                .and_then(Value::as_array)
                .and_then(|c| c.iter().find(|c| c["type"] == CONDITION_SYNCED))
                .map(|c| {
                    (
                        c["status"].clone(),
                        c["reason"].clone(),
                        c["message"].clone(),
                    )
                })
        };
        if let Some((state, reason, message)) = synced(status)
            && state == "False"
            && synced(&current) != Some((state.clone(), reason.clone(), message.clone()))
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
        if self
            .clusters
            .apply_status(pack_name, trigger, status)
            .await?
        {
            self.count(|w| w.status += 1);
        }
        Ok(())
    }

    /// Deletes (or orphans) the pack's outputs that no trigger desires, when that is safe:
    /// every watch synced, every trigger evaluated once since start or reload, and never an
    /// object a failing trigger may own.
    async fn prune(&self, pack_name: &Arc<str>) -> Result<(), ReconcileError> {
        let mut doomed: Vec<(ObjectKey, Option<String>, DeletionPolicy)> = Vec::new();
        {
            let state = self.lock();
            let Some(p) = state.packs.get(pack_name) else {
                return Ok(());
            };
            if !matches!(p.initial, Initial::Done) {
                return Ok(());
            }
            let unknown: HashSet<String> = p.unknown.iter().map(ToString::to_string).collect();
            let policies: HashMap<String, DeletionPolicy> = p
                .pack
                .rule_kinds()
                .into_iter()
                .map(|r| (r.name, r.deletion))
                .collect();
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
                // The rule that made it says what happens to it; a rule that no longer
                // exists deletes.
                let orphan = annotation(&o, ANNOTATION_RULE).split(',').any(|source| {
                    let rule = source.split('/').next().unwrap_or_default();
                    policies.get(rule) == Some(&DeletionPolicy::Orphan)
                });
                let uid = o
                    .pointer("/metadata/uid")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                let policy = if orphan {
                    DeletionPolicy::Orphan
                } else {
                    DeletionPolicy::Delete
                };
                doomed.push((key, uid, policy));
            }
        }
        let mut first_error = None;
        for (key, uid, policy) in doomed {
            let result = match policy {
                DeletionPolicy::Delete => {
                    tracing::info!(object = %key, "pruning an output no trigger desires");
                    self.clusters.delete(&key, uid.as_deref()).await
                }
                DeletionPolicy::Orphan => {
                    tracing::info!(object = %key, "orphaning an output no trigger desires");
                    self.clusters.orphan(pack_name, &key).await
                }
            };
            match result {
                Ok(()) => {
                    self.count(|w| w.deletes += 1);
                    self.lock().applied.remove(&key);
                }
                Err(e) => {
                    tracing::warn!(object = %key, error = %e, "prune failed");
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
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

fn managed_by(object: &Value, pack: &str) -> bool {
    object
        .pointer("/metadata/labels")
        .and_then(|l| l.get(LABEL_PACK))
        .and_then(Value::as_str)
        == Some(pack)
}

/// An annotation's value, or "".
fn annotation<'v>(object: &'v Value, name: &str) -> &'v str {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(name))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn has_finalizer(object: &Value, finalizer: &str) -> bool {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| f.iter().any(|x| x.as_str() == Some(finalizer)))
}

fn synced_false(outcome: &Outcome) -> bool {
    outcome
        .status
        .as_ref()
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .is_some_and(|conditions| {
            conditions.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some(CONDITION_SYNCED)
                    && c.get("status").and_then(Value::as_str) == Some("False")
            })
        })
}

fn hash_value(value: &Value) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    // serde_json's map is ordered (BTreeMap without `preserve_order`): the text is canonical.
    value.to_string().hash(&mut hasher);
    hasher.finish()
}

/// The live object already holds what would be applied: the same content was applied
/// (hash) and nobody changed the object since (generation, or resourceVersion where there is
/// none), and the ownership metadata is intact; or, when the whole object is cached, every
/// field of the desired object has the same value live.
fn up_to_date(
    desired: &Value,
    live: &Value,
    hash: u64,
    record: Option<&Applied>,
    metadata_only: bool,
) -> bool {
    let metadata_intact = ["labels", "annotations"].iter().all(|field| {
        let want = desired
            .pointer(&format!("/metadata/{field}"))
            .unwrap_or(&Value::Null);
        let have = live
            .pointer(&format!("/metadata/{field}"))
            .unwrap_or(&Value::Null);
        want.is_null() || is_subset(want, have)
    });
    if !metadata_intact {
        return false;
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
            return true;
        }
    }
    !metadata_only && is_subset(desired, live)
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

/// How long to wait before a deleting trigger is looked at again when nothing else wakes it.
pub const CLEANUP_POLL: Duration = Duration::from_secs(2);

#[cfg(test)]
mod tests {
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
        let desired =
            json!({"metadata": {"labels": {"switchyard.dev/pack": "p"}}, "spec": {"x": 1}});
        let hash = hash_value(&desired);
        let record = Applied {
            hash,
            generation: Some(3),
            resource_version: Some("10".into()),
        };
        let live = json!({"metadata": {"generation": 3, "resourceVersion": "11", "labels": {"switchyard.dev/pack": "p"}}});
        assert!(up_to_date(&desired, &live, hash, Some(&record), true));
        let edited = json!({"metadata": {"generation": 4, "labels": {"switchyard.dev/pack": "p"}}});
        assert!(!up_to_date(&desired, &edited, hash, Some(&record), true));
        let relabelled = json!({"metadata": {"generation": 3, "labels": {}}});
        assert!(!up_to_date(
            &desired,
            &relabelled,
            hash,
            Some(&record),
            true
        ));
        // After a restart nothing is recorded: a full cache decides by content.
        let full = json!({"metadata": {"generation": 9, "labels": {"switchyard.dev/pack": "p"}}, "spec": {"x": 1, "y": 2}});
        assert!(up_to_date(&desired, &full, hash, None, false));
        assert!(!up_to_date(&desired, &full, hash, None, true));
    }
}
