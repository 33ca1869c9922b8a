//! Turning events into work and running it: packs installed or reloaded, watches synced,
//! periodic resync and changed objects become work items on the queue (a pack's first round
//! is tracked here), and [`Controller::process`] runs one.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use serde_json::Value;
use switchyard_core::evaluate::LABEL_PACK;
use switchyard_core::object::{labels, selector_matches};
use switchyard_core::{ObjectKey, Pack};

use super::index::{kind_in_role, output_kinds, watch_plan};
use super::state::{Controller, Initial, Key, PackState, ReconcileError, Scope, Work};
use super::status::{deletion_wakes, has_finalizer};
use crate::packs::PackChange;
use crate::store::{Cached, KindKey};
use crate::watch::Change;

/// With sharding, an output only this broker's shards may prune: one claimed by a shard
/// it holds, or by another layout. Without, every output of the pack.
fn claimed_here(object: &Value, shards: &super::state::Shards) -> bool {
    if shards.count <= 1 {
        return true;
    }
    let (claims, foreign) = crate::shards::claims(object, shards.count);
    foreign || claims.iter().any(|s| shards.held.contains(s))
}

impl PackState {
    /// A trigger of the first round was evaluated in `round` (the round of its shard current
    /// when its evaluation began); true when it was the last one of its shard. An evaluation
    /// that began in an earlier round, on caches that may not have listed, does not count.
    pub(super) fn mark_evaluated(&mut self, trigger: &ObjectKey, round: u64) -> bool {
        let shard = self.shard_of(trigger);
        let count = self.shard_count;
        let name = self.pack.name().to_string();
        let Some(r) = self.rounds.get_mut(&shard) else {
            return false;
        };
        if round != r.round {
            return false;
        }
        if let Initial::Pending(pending) = &mut r.initial {
            pending.remove(trigger);
            if pending.is_empty() {
                r.initial = Initial::Done;
                if count > 1 {
                    tracing::info!(
                        pack = %name,
                        shard,
                        took = ?r.started.elapsed(),
                        "first round complete: every trigger of the shard evaluated; prune may run"
                    );
                } else {
                    tracing::info!(
                        pack = %name,
                        took = ?r.started.elapsed(),
                        "first round complete: every trigger evaluated; prune may run"
                    );
                }
                return true;
            }
        }
        false
    }

    /// The triggers of [`PackState::cached_triggers`] of one shard.
    pub(super) fn shard_triggers(
        &self,
        store: &crate::store::Store,
        scope: &Scope,
        shard: u32,
    ) -> HashSet<Key> {
        let mut triggers = self.cached_triggers(store, scope);
        if self.shard_count > 1 {
            triggers.retain(|t| self.shard_of(t) == shard);
        }
        triggers
    }

    /// The triggers in scope the caches hold; for all rules, also the triggers known from
    /// before that are gone now (they must be cleaned up too).
    fn cached_triggers(&self, store: &crate::store::Store, scope: &Scope) -> HashSet<Key> {
        let mut triggers = HashSet::new();
        for rule in self.pack.rule_kinds() {
            let edit = match scope {
                Scope::All => None,
                Scope::Rules(rules) => match rules.get(&rule.name) {
                    None => continue,
                    Some(edit) => edit.as_deref(),
                },
            };
            let w = &rule.watch;
            for kind in kind_in_role(store, &w.cluster, &w.api_version, &w.kind) {
                let Some(cache) = store.cache(&kind) else {
                    continue;
                };
                // Decoded only to match a selector or ask the edit, after the scan.
                let mut deciding = Vec::new();
                cache.for_each_keyed(&kind, |key, cached| {
                    if rule.selector.is_none() && edit.is_none() {
                        triggers.insert(self.shared_trigger(key));
                    } else {
                        deciding.push(cached.clone());
                    }
                });
                let decide = |cached: &Arc<Cached>| {
                    let object = cached.value();
                    let selected = rule
                        .selector
                        .as_ref()
                        .is_none_or(|sel| selector_matches(sel, &labels(&object)));
                    if !selected {
                        return None;
                    }
                    let key = self.shared_trigger(store.key_of(&kind, &object)?);
                    edit.is_none_or(|edit| self.unsettled(&key) || edit.may_change(&object))
                        .then_some(key)
                };
                triggers.extend(in_parallel(&deciding, decide));
            }
        }
        if matches!(scope, Scope::All) {
            // Triggers known from before that are gone now must be cleaned up too.
            triggers.extend(self.contributions.keys().cloned());
        }
        // The pack's own trigger (rules without `watch`): evaluated at every start, reload
        // and member change, and once more after its last such rule goes, which drops what
        // it kept in place.
        if let Some((key, _)) = self.pack.pack_trigger() {
            triggers.insert(self.shared_trigger(key));
        }
        triggers.extend(
            self.contributions
                .keys()
                .filter(|k| self.pack.is_pack_trigger(k))
                .cloned(),
        );
        triggers
    }

    /// Whether a trigger's last evaluation is not known to have succeeded with the pack as
    /// it was: never evaluated, or failed.
    fn unsettled(&self, trigger: &Key) -> bool {
        !self.contributions.contains_key(trigger) || self.failing.contains(trigger)
    }

    /// A shard's first round begins: these triggers are evaluated, and prune waits for each.
    pub(super) fn begin_round(
        &mut self,
        name: &Arc<str>,
        shard: u32,
        triggers: HashSet<Key>,
        work: &mut Vec<Work>,
    ) {
        work.extend(
            triggers
                .iter()
                .map(|t| Work::Trigger(name.clone(), t.clone())),
        );
        let round = self.next_round;
        self.next_round += 1;
        let initial = if triggers.is_empty() {
            work.push(Work::Prune(name.clone()));
            Initial::Done
        } else {
            Initial::Pending(triggers)
        };
        self.rounds.insert(
            shard,
            super::state::Round {
                initial,
                round,
                started: std::time::Instant::now(),
            },
        );
    }

    /// Every held shard starts its first round again (members changed): the triggers in
    /// `scope` are evaluated, now, or once the pack's watches synced when they have not.
    pub(super) fn begin_rounds(
        &mut self,
        name: &Arc<str>,
        store: &crate::store::Store,
        scope: &Scope,
        work: &mut Vec<Work>,
    ) -> usize {
        let mut starting = Vec::new();
        for (shard, round) in &mut self.rounds {
            let widened = round.initial.widened(scope.clone());
            match round.initial {
                Initial::Waiting(_) => round.initial = Initial::Waiting(widened),
                _ => starting.push((*shard, widened)),
            }
        }
        let mut count = 0;
        for (shard, scope) in starting {
            let triggers = self.shard_triggers(store, &scope, shard);
            count += triggers.len();
            self.begin_round(name, shard, triggers, work);
        }
        count
    }

    /// Rules of this pack watch objects of this kind, and the object matches one's selector.
    pub(super) fn watches(&self, key: &ObjectKey, object: Option<&Value>) -> bool {
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

impl Controller {
    /// Installs a new set of packs, each with what changed in it since it was installed
    /// (`None`: new, or changed as a whole). Only the triggers of changed rules are evaluated
    /// again, and of a rule whose templates alone changed, only those the edit may render
    /// differently (see [`switchyard_core::template::TemplateEdit`]); the pack's prune waits until they all were.
    pub fn install(&self, packs: Vec<(Arc<Pack>, Option<PackChange>)>) {
        let loaded: Vec<Arc<Pack>> = packs.iter().map(|(p, _)| p.clone()).collect();
        self.store.set_workspace_roles(&loaded);
        let mut state = self.lock();
        let names: BTreeSet<Arc<str>> = packs.iter().map(|(p, _)| Arc::from(p.name())).collect();
        let removed: Vec<Arc<str>> = state
            .packs
            .keys()
            .filter(|n| !names.contains(*n))
            .cloned()
            .collect();
        let mut releases = Vec::new();
        for name in removed {
            // Outputs of a pack that is no longer loaded stay where they are: removing a
            // folder by mistake must not delete a fleet's infrastructure. Its triggers are
            // let go (their finalizer removed), so deleting one does not hang until the
            // pack comes back; a pack that comes back adds it again.
            tracing::warn!(pack = %name, "pack unloaded; its outputs are left in place and its finalizer is removed from its triggers");
            if let Some(p) = state.packs.remove(&name) {
                releases.extend(
                    self.holding_finalizer(&name, &p)
                        .into_iter()
                        .map(|t| Work::Release(name.clone(), t)),
                );
            }
            state.reads.forget_pack(&name);
        }
        for (pack, changed) in packs {
            let name: Arc<str> = Arc::from(pack.name());
            match state.packs.get_mut(&name) {
                Some(existing) => {
                    let scope =
                        changed.map_or(Scope::All, |c| reload_scope(&existing.pack, &pack, &c));
                    existing.kinds = watch_plan(&pack, &self.store);
                    existing.output_kinds = output_kinds(&pack, &self.store);
                    existing.rules = pack.rule_kinds();
                    // The pack's version is stamped on every output: a new version changes
                    // every merged object. Otherwise a merged object changes only with a
                    // contribution to it, which drops it from the cache; what stays is still
                    // the merge of the contributions it holds, so thousands of unchanged
                    // outputs are not merged and hashed again by a reload.
                    if existing.pack.version() != pack.version() {
                        existing.merged.clear();
                    }
                    existing.pack = pack;
                    match scope {
                        // Nothing the rules depend on changed: nothing to evaluate again.
                        Scope::Rules(rules) if rules.is_empty() => {}
                        scope => {
                            match &scope {
                                Scope::All => tracing::info!(pack = %name, "pack reloaded"),
                                Scope::Rules(rules) => tracing::info!(
                                    pack = %name,
                                    rules = ?rules.keys().collect::<Vec<_>>(),
                                    narrowed = ?rules.iter().filter(|(_, e)| e.is_some()).map(|(r, _)| r).collect::<Vec<_>>(),
                                    "pack reloaded"
                                ),
                            }
                            for round in existing.rounds.values_mut() {
                                round.initial =
                                    Initial::Waiting(round.initial.widened(scope.clone()));
                            }
                        }
                    }
                }
                None => {
                    let p = PackState::new(pack, &self.store, &state.shards);
                    state.packs.insert(name.clone(), p);
                }
            }
        }
        drop(state);
        self.queue.add_all(releases);
        self.start_ready_packs();
    }

    /// The triggers of a pack (as the caches have them) that carry its finalizer.
    fn holding_finalizer(&self, name: &str, p: &PackState) -> Vec<Key> {
        let finalizer = format!("switchyard.dev/{name}");
        let mut found = Vec::new();
        for rule in &p.rules {
            let w = &rule.watch;
            for kind in kind_in_role(&self.store, &w.cluster, &w.api_version, &w.kind) {
                let Some(cache) = self.store.cache(&kind) else {
                    continue;
                };
                for cached in cache.all() {
                    let object = cached.value();
                    if has_finalizer(&object, &finalizer)
                        && let Some(key) = self.store.key_of(&kind, &object)
                    {
                        found.push(p.shared_trigger(key));
                    }
                }
            }
        }
        found
    }

    /// Removes the finalizer of a pack that is no longer loaded from one of its triggers
    /// (unless the pack was loaded again since).
    async fn release(&self, pack: &Arc<str>, trigger: &ObjectKey) -> Result<(), ReconcileError> {
        if self.lock().packs.contains_key(pack) {
            return Ok(());
        }
        let finalizer = format!("switchyard.dev/{pack}");
        if self
            .clusters
            .release_finalizer(pack, trigger, &finalizer)
            .await?
        {
            self.count_finalizer(pack);
            tracing::info!(trigger = %trigger, pack = %pack, "finalizer of an unloaded pack removed");
        }
        Ok(())
    }

    /// This broker has become the leader: every pack starts a first round (on the caches it
    /// kept while following), so nothing is pruned before it has evaluated every trigger.
    pub fn lead(&self) {
        self.gain(0);
    }

    /// How many shards the triggers are split into (before any pack is installed): with
    /// more than one, this broker holds none until [`Controller::gain`].
    pub fn set_shard_count(&self, count: u32) {
        let mut state = self.lock();
        state.shards.count = count.max(1);
        if count > 1 {
            state.shards.held.clear();
        }
        let held = state.shards.held.clone();
        for p in state.packs.values_mut() {
            p.shard_count = count.max(1);
            p.rounds.retain(|s, _| held.contains(s));
        }
    }

    /// The shard of a trigger.
    pub fn shard_of(&self, trigger: &ObjectKey) -> u32 {
        crate::shards::shard_of(trigger, self.lock().shards.count)
    }

    /// How many shards the triggers are split into.
    pub fn shard_count(&self) -> u32 {
        self.lock().shards.count
    }

    /// The shards this broker holds.
    pub fn held_shards(&self) -> BTreeSet<u32> {
        self.lock().shards.held.clone()
    }

    /// This broker holds a shard (again): every pack starts a first round of the shard's
    /// triggers (on the caches it kept), and nothing of the shard is pruned before it ends.
    pub fn gain(&self, shard: u32) {
        {
            let mut state = self.lock();
            state.shards.held.insert(shard);
            for p in state.packs.values_mut() {
                p.rounds
                    .insert(shard, super::state::Round::waiting(Scope::All));
            }
        }
        self.start_ready_packs();
    }

    /// This broker lost a shard: what its triggers contributed is forgotten (the shard's
    /// next holder evaluates them again), so no apply names them and no merge holds them.
    /// Without sharding, nothing is forgotten: the next `lead` starts a round anyway.
    pub fn lose(&self, shard: u32) {
        let mut state = self.lock();
        if state.shards.count <= 1 {
            return;
        }
        state.shards.held.remove(&shard);
        let mut forgotten = Vec::new();
        for (name, p) in state.packs.iter_mut() {
            p.rounds.remove(&shard);
            let triggers: Vec<Key> = p
                .contributions
                .keys()
                .chain(p.unknown.iter())
                .chain(p.deleting.keys())
                .filter(|t| p.shard_of(t) == shard)
                .cloned()
                .collect();
            for trigger in &triggers {
                p.set_contribution(trigger, Vec::new(), None);
                p.unknown.remove(trigger);
                p.failing.remove(trigger);
                p.deleting.remove(trigger);
                p.gone.remove(trigger);
                forgotten.push((name.clone(), trigger.clone()));
            }
            let count = p.shard_count;
            p.restate
                .retain(|t| crate::shards::shard_of(t, count) != shard);
            for shards in p.patched.values_mut() {
                shards.remove(&shard);
            }
            p.patched.retain(|_, shards| !shards.is_empty());
        }
        for (name, trigger) in forgotten {
            state.reads.record(&name, &trigger, BTreeSet::new());
        }
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

    /// Every watch synced, per pack: the shards of packs waiting for theirs start their first
    /// round.
    pub(super) fn start_ready_packs(&self) {
        let mut work = Vec::new();
        {
            let mut state = self.lock();
            let synced = state.synced.clone();
            for (name, p) in state.packs.iter_mut() {
                if !p.kinds.keys().all(|k| synced.contains(k)) {
                    continue;
                }
                let waiting: Vec<(u32, Scope)> = p
                    .rounds
                    .iter()
                    .filter_map(|(s, r)| match &r.initial {
                        Initial::Waiting(scope) => Some((*s, scope.clone())),
                        _ => None,
                    })
                    .collect();
                for (shard, scope) in waiting {
                    let triggers = p.shard_triggers(&self.store, &scope, shard);
                    if p.shard_count > 1 {
                        tracing::info!(pack = %name, shard, triggers = triggers.len(), "watches synced; evaluating every trigger of the shard");
                    } else {
                        tracing::info!(pack = %name, triggers = triggers.len(), "watches synced; evaluating every trigger");
                    }
                    p.begin_round(name, shard, triggers, &mut work);
                }
            }
        }
        self.queue.add_all(work);
    }

    /// Packs whose first round is not complete, with what they wait for.
    pub fn not_ready(&self) -> Vec<String> {
        let state = self.lock();
        let mut out = Vec::new();
        for (name, p) in &state.packs {
            let mut waits = false;
            for (shard, round) in &p.rounds {
                let of = if p.shard_count > 1 {
                    format!("shard {shard}: ")
                } else {
                    String::new()
                };
                match &round.initial {
                    Initial::Waiting(_) => waits = true,
                    Initial::Pending(t) => out.push(format!(
                        "pack {name}: {of}{} triggers not evaluated yet",
                        t.len()
                    )),
                    Initial::Done => {}
                }
            }
            if waits {
                for k in p.kinds.keys().filter(|k| !state.synced.contains(*k)) {
                    out.push(format!("pack {name}: watch {k} not synced"));
                }
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
                    for kind in kind_in_role(&self.store, &w.cluster, &w.api_version, &w.kind) {
                        let Some(cache) = self.store.cache(&kind) else {
                            continue;
                        };
                        cache.for_each_keyed(&kind, |key, _| {
                            if state.holds(&key) {
                                work.push(Work::Trigger(name.clone(), p.shared_trigger(key)));
                            }
                        });
                    }
                }
                if let Some((key, _)) = p.pack.pack_trigger()
                    && state.holds(&key)
                {
                    work.push(Work::Trigger(name.clone(), p.shared_trigger(key)));
                }
                work.push(Work::Prune(name.clone()));
            }
        }
        self.queue.add_all(work);
    }

    /// Maps a changed object to the work it causes: the trigger itself, the triggers that
    /// read it (by key or by list), the triggers that desire it (drift), and a prune pass
    /// when it is an output nobody desires.
    pub fn changed(&self, change: &Change) {
        let key = ObjectKey {
            cluster: change.cluster.clone(),
            api_version: change.kind.api_version.clone(),
            kind: change.kind.kind.clone(),
            namespace: change.namespace.clone(),
            name: change.name.clone(),
        };
        if change.current.is_none() {
            self.forget_deleted(&key);
        }
        let mut work: Vec<Work> = Vec::new();
        {
            let state = self.lock();
            let object = change
                .current
                .as_deref()
                .or(change.previous.as_deref())
                .map(Cached::value);
            let object = object.as_ref();
            for (name, p) in &state.packs {
                if p.watches(&key, object) && state.holds(&key) {
                    work.push(Work::Trigger(name.clone(), p.shared_trigger(key.clone())));
                }
                if let Some(triggers) = p.by_output.get(&key) {
                    // The echo of our own apply (the version the apply returned) changes
                    // nothing the owners do not know already.
                    let current_version =
                        change.current.as_deref().and_then(Cached::resource_version);
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
                        && claimed_here(o, &state.shards)
                }) {
                    work.push(Work::Prune(name.clone()));
                }
                if change.current.is_none() {
                    // A deleted object may be the last output a deleting trigger waits for:
                    // the deleting triggers that may wait for it (by the outputs each had,
                    // the list it waits on) look again, not every deleting trigger at each
                    // deletion: many deleting at once would each look once per output.
                    work.extend(
                        p.deleting
                            .iter()
                            .filter(|(t, outputs)| {
                                state.holds(t)
                                    && deletion_wakes(outputs.as_deref(), &key, object, t)
                            })
                            .map(|(t, _)| Work::Trigger(name.clone(), t.clone())),
                    );
                }
            }
            work.extend(
                state
                    .reads
                    .readers_of(&key)
                    .filter(|(_, t)| state.holds(t))
                    .map(|(p, t)| Work::Trigger(p.clone(), t.clone())),
            );
        }
        self.queue.add_all(work);
    }

    /// Runs one work item.
    pub async fn process(&self, work: &Work) -> Result<(), ReconcileError> {
        match work {
            Work::Trigger(pack, trigger) => self.reconcile(pack, trigger).await,
            Work::Prune(pack) => self.prune(pack).await,
            Work::Release(pack, trigger) => self.release(pack, trigger).await,
        }
    }
}

/// Below this many items a decision runs on the calling thread: threads cost more than
/// they save.
const PARALLEL_FROM: usize = 2048;

/// The items `decide` keeps, decided on the cores there are (a reload decodes every cached
/// trigger to ask the edit, while the broker holds the controller's lock and the API servers
/// wait for its first writes).
fn in_parallel<T: Sync, K: Send>(items: &[T], decide: impl Fn(&T) -> Option<K> + Sync) -> Vec<K> {
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    if threads < 2 || items.len() < PARALLEL_FROM {
        return items.iter().filter_map(&decide).collect();
    }
    let chunk = items.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let decide = &decide;
        let parts: Vec<_> = items
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().filter_map(decide).collect::<Vec<K>>()))
            .collect();
        parts
            .into_iter()
            // A panic in a decision is the caller's panic, as on one thread.
            .flat_map(|part| part.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

/// The triggers a reload from `old` to `new` evaluates again: those of the rules `change`
/// names; of a rule whose templates alone changed, those the edit may render differently
/// (none when it renders every trigger as before).
fn reload_scope(old: &Pack, new: &Pack, change: &PackChange) -> Scope {
    let mut rules = BTreeMap::new();
    for rule in &change.rules {
        if !change.templates_only.contains(rule) {
            rules.insert(rule.clone(), None);
            continue;
        }
        let edit = new.template_edit(old, rule);
        if edit.changes_nothing() {
            continue;
        }
        rules.insert(
            rule.clone(),
            (!edit.is_everywhere()).then(|| Arc::new(edit)),
        );
    }
    Scope::Rules(rules)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parallel_decision_keeps_what_one_thread_keeps_in_order() {
        for n in [
            0,
            10,
            PARALLEL_FROM - 1,
            PARALLEL_FROM,
            3 * PARALLEL_FROM + 7,
        ] {
            let items: Vec<usize> = (0..n).collect();
            let decide = |i: &usize| i.is_multiple_of(3).then(|| format!("item-{i}"));
            let one: Vec<String> = items.iter().filter_map(decide).collect();
            assert_eq!(in_parallel(&items, decide), one, "{n} items");
        }
    }
}
