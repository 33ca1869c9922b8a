//! The controller and what it remembers: the work items it queues, per pack each trigger's
//! contribution and the first round's progress, what was last applied to each output, and
//! the counters of evaluations and writes. The behaviour lives in the sibling modules.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::Value;

use switchyard_core::evaluate::Precedence;
use switchyard_core::model::{DeletionPolicy, OutputMode};
use switchyard_core::plan::Conflict;
use switchyard_core::template::TemplateEdit;
use switchyard_core::{DesiredObject, ObjectKey, Pack};

pub(super) use super::index::Key;
use super::index::{ReadIndex, output_kinds, watch_plan};
use crate::apply::{ApplyError, Clusters};
use crate::queue::Queue;
use crate::store::{Cached, KindKey, Store};
use crate::watch::WatchMode;

/// A unit of work: evaluate one trigger for one pack, prune one pack's outputs, or release
/// the finalizer of a pack that is no longer loaded from one of its triggers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Work {
    Trigger(Arc<str>, Arc<ObjectKey>),
    Prune(Arc<str>),
    Release(Arc<str>, Arc<ObjectKey>),
}

/// Where a pack stands in its first round of evaluations after start or reload.
#[derive(Debug)]
pub(super) enum Initial {
    /// Some watch the pack needs has not synced yet; then the triggers in scope are
    /// evaluated.
    Waiting(Scope),
    /// These triggers have not been evaluated yet.
    Pending(HashSet<Key>),
    /// Every trigger has been evaluated once: prune may run.
    Done,
}

impl Initial {
    /// The scope this round takes on when `scope` is added to it: joined with what a round
    /// still waiting would evaluate; every trigger when the round is under way (the triggers
    /// it has not evaluated yet must be, before anything is pruned).
    pub(super) fn widened(&self, scope: Scope) -> Scope {
        match self {
            Initial::Done => scope,
            Initial::Waiting(waiting) => waiting.clone().join(scope),
            Initial::Pending(_) => Scope::All,
        }
    }
}

/// Which triggers a first round evaluates.
#[derive(Debug, Clone)]
pub(super) enum Scope {
    /// Every trigger of the pack, those known from before that are gone included.
    All,
    /// The triggers of these rules; of a rule with a template edit, those the edit may
    /// render differently, those not evaluated yet and those whose last evaluation failed.
    Rules(BTreeMap<String, Option<Arc<TemplateEdit>>>),
}

impl Scope {
    /// The triggers of every rule named.
    pub(super) fn rules<'a>(names: impl IntoIterator<Item = &'a String>) -> Self {
        Scope::Rules(names.into_iter().map(|r| (r.clone(), None)).collect())
    }

    /// The triggers in either scope.
    pub(super) fn join(self, other: Scope) -> Scope {
        let (Scope::Rules(mut mine), Scope::Rules(theirs)) = (self, other) else {
            return Scope::All;
        };
        for (rule, edit) in theirs {
            let joined = match (mine.remove(&rule), edit) {
                (None, edit) => edit,
                (Some(Some(a)), Some(b)) => {
                    let mut both = (*a).clone();
                    both.join((*b).clone());
                    Some(Arc::new(both))
                }
                (Some(_), _) => None,
            };
            mine.insert(rule, joined);
        }
        Scope::Rules(mine)
    }
}

/// One loaded pack: its watches, its triggers' contributions and merged outputs, and where
/// its first round stands.
pub(super) struct PackState {
    pub(super) pack: Arc<Pack>,
    pub(super) kinds: BTreeMap<KindKey, WatchMode>,
    /// The kinds, per cluster role, the pack's scope lets it emit: the only places prune
    /// looks. (Two roles may be one cluster: the source role's cache of a kind then holds the
    /// outputs too, under the wrong role.)
    pub(super) output_kinds: BTreeSet<KindKey>,
    /// Each trigger's desired objects, as its last successful evaluation left them.
    pub(super) contributions: HashMap<Key, Vec<Kept>>,
    /// Output -> the triggers that desire it.
    pub(super) by_output: HashMap<Key, Owners>,
    /// Each contributing trigger's claim on contested outputs: the one that desired an output
    /// first wins it, as `render` decides.
    pub(super) precedence: HashMap<Key, Precedence>,
    /// Output -> the triggers whose different version of it the merge refused.
    pub(super) refused: HashMap<Key, BTreeSet<String>>,
    /// Triggers whose `Synced` a merge changed (they won or lost an output): evaluated again
    /// so their status says so.
    pub(super) restate: BTreeSet<Key>,
    /// The merged object and its hash of each output several triggers desire, until a
    /// contribution to it changes: a Namespace shared by a hundred triggers is merged once,
    /// not once per evaluation. (An output of one trigger is its contribution, read from
    /// there.)
    pub(super) merged: HashMap<Key, Arc<Merged>>,
    /// What the rules watch, look up and write (the pack's, computed once).
    pub(super) rules: Vec<switchyard_core::pack::RuleKinds>,
    /// Triggers whose evaluation failed before any succeeded: what they own is unknown.
    pub(super) unknown: HashSet<Key>,
    /// Triggers whose last evaluation failed (or stopped short of its outputs): a template
    /// edit evaluates them again whatever it changes, their status may quote the template.
    pub(super) failing: HashSet<Key>,
    /// Triggers being deleted that wait for their outputs to be gone, with the outputs they
    /// had when their deletion was first seen (`None`: unknown, after a restart).
    pub(super) deleting: HashMap<Key, Option<Arc<[Key]>>>,
    /// Triggers that had outputs in members that are gone, and those members.
    pub(super) gone: HashMap<Key, BTreeSet<String>>,
    /// Objects this pack patched since start, with the shards that patched them: a patch no
    /// trigger desires any more is taken back (its fields removed), since patched objects
    /// carry no label prune could find.
    pub(super) patched: HashMap<Key, BTreeSet<u32>>,
    /// Per shard this broker holds, where its first round stands (one shard, `0`, without
    /// sharding).
    pub(super) rounds: BTreeMap<u32, Round>,
    /// The number of the next first round: an evaluation that began in an earlier round
    /// counts for none (it may have read caches that had not listed yet). One counter for
    /// every shard, so a shard lost and held again never matches an old round.
    pub(super) next_round: u64,
    /// How many shards the triggers are split into.
    pub(super) shard_count: u32,
}

/// A shard's first round of evaluations, of one pack.
#[derive(Debug)]
pub(super) struct Round {
    pub(super) initial: Initial,
    pub(super) round: u64,
    /// When the round began (the log says how long it took).
    pub(super) started: std::time::Instant,
}

impl Round {
    pub(super) fn waiting(scope: Scope) -> Self {
        Round {
            initial: Initial::Waiting(scope),
            round: 0,
            started: std::time::Instant::now(),
        }
    }
}

impl PackState {
    pub(super) fn new(pack: Arc<Pack>, world: &Store, shards: &Shards) -> Self {
        PackState {
            kinds: watch_plan(&pack, world),
            output_kinds: output_kinds(&pack, world),
            patched: HashMap::new(),
            gone: HashMap::new(),
            merged: HashMap::new(),
            rules: pack.rule_kinds(),
            pack,
            contributions: HashMap::new(),
            by_output: HashMap::new(),
            precedence: HashMap::new(),
            refused: HashMap::new(),
            restate: BTreeSet::new(),
            unknown: HashSet::new(),
            failing: HashSet::new(),
            deleting: HashMap::new(),
            rounds: shards
                .held
                .iter()
                .map(|s| (*s, Round::waiting(Scope::All)))
                .collect(),
            next_round: 1,
            shard_count: shards.count,
        }
    }

    /// The key of a trigger, shared with the maps that already name it.
    pub(super) fn shared_trigger(&self, key: ObjectKey) -> Key {
        match self.contributions.get_key_value(&key) {
            Some((shared, _)) => shared.clone(),
            None => Arc::new(key),
        }
    }

    /// The shard of a trigger.
    pub(super) fn shard_of(&self, trigger: &ObjectKey) -> u32 {
        crate::shards::shard_of(trigger, self.shard_count)
    }

    /// The round of the trigger's shard, when this broker holds it.
    pub(super) fn round_of(&self, trigger: &ObjectKey) -> Option<&Round> {
        self.rounds.get(&self.shard_of(trigger))
    }

    /// Every held shard's first round is complete.
    pub(super) fn all_done(&self) -> bool {
        self.rounds
            .values()
            .all(|r| matches!(r.initial, Initial::Done))
    }
}

/// How the triggers are split, and which shards this broker holds.
#[derive(Debug, Clone)]
pub(super) struct Shards {
    pub(super) count: u32,
    pub(super) held: BTreeSet<u32>,
}

impl Default for Shards {
    /// No sharding: the one shard, always held (leader election gates the workers).
    fn default() -> Self {
        Shards {
            count: 1,
            held: BTreeSet::from([0]),
        }
    }
}

/// The triggers that desire one output, in order. Most outputs have one: a `BTreeSet` would
/// give each a node of eleven keys.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct Owners(Vec<Key>);

impl Owners {
    pub(super) fn insert(&mut self, trigger: Key) {
        if let Err(at) = self.0.binary_search(&trigger) {
            self.0.insert(at, trigger);
        }
    }

    pub(super) fn remove(&mut self, trigger: &ObjectKey) {
        if let Ok(at) = self.0.binary_search_by(|k| k.as_ref().cmp(trigger)) {
            self.0.remove(at);
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    pub(super) fn iter(&self) -> std::slice::Iter<'_, Key> {
        self.0.iter()
    }
}

impl<'a> IntoIterator for &'a Owners {
    type Item = &'a Key;
    type IntoIter = std::slice::Iter<'a, Key>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// One trigger's desired object, kept until its next evaluation: the hash of its content
/// (so an unchanged evaluation is seen as such) and, while a merge may need it, the object.
#[derive(Debug)]
pub(super) struct Kept {
    key: Key,
    object: KeptObject,
    /// `hash_value` of the object: the merged hash when the trigger is its only owner.
    pub(super) hash: String,
    /// `owners_hash` of the object.
    pub(super) owners_hash: u64,
    // The rest of the `DesiredObject`, its sets as slices (a `BTreeSet` node has eleven
    // slots; these hold one or two names).
    sources: Box<[String]>,
    owners: Box<[String]>,
    deletion: DeletionPolicy,
    mode: OutputMode,
    adopt: bool,
}

/// What a contribution holds of its object.
#[derive(Debug)]
enum KeptObject {
    /// As evaluated, until the outputs are written.
    Whole(Value),
    /// Compact as the caches keep theirs (its JSON text, see `store::Cached`): an output
    /// several triggers desire, for the next merge.
    Compact(Cached),
    /// Released (see [`PackState::release_objects`]): an output only its own trigger
    /// desires is written right after that trigger's evaluation, and any later write of it
    /// comes from a new evaluation, so keeping it would only hold its text in memory.
    Released,
}

impl Kept {
    /// `key`: the desired object's key, shared with the maps that name the output; `hash`
    /// and `owners_hash`: `hash_value` and `owners_hash` of the desired object.
    pub(super) fn new(desired: DesiredObject, key: Key, hash: String, owners_hash: u64) -> Kept {
        let DesiredObject {
            key: _,
            object,
            sources,
            owners,
            deletion,
            mode,
            adopt,
        } = desired;
        Kept {
            key,
            owners_hash,
            object: KeptObject::Whole(object),
            hash,
            sources: sources.into_iter().collect(),
            owners: owners.into_iter().collect(),
            deletion,
            mode,
            adopt,
        }
    }

    pub(super) fn key(&self) -> &Key {
        &self.key
    }

    /// The desired object whole, unless its object was released.
    pub(super) fn desired(&self) -> Option<DesiredObject> {
        Some(DesiredObject {
            key: ObjectKey::clone(&self.key),
            object: match &self.object {
                KeptObject::Whole(object) => object.clone(),
                KeptObject::Compact(cached) => cached.value(),
                KeptObject::Released => return None,
            },
            sources: self.sources.iter().cloned().collect(),
            owners: self.owners.iter().cloned().collect(),
            deletion: self.deletion,
            mode: self.mode,
            adopt: self.adopt,
        })
    }

    /// Forgets the object, keeping its hash.
    pub(super) fn release(&mut self) {
        self.object = KeptObject::Released;
    }

    /// Keeps the object in compact form only.
    pub(super) fn compact(&mut self) {
        if let KeptObject::Whole(object) = &self.object {
            self.object = KeptObject::Compact(Cached::new(object));
        }
    }

    /// The output is applied whole (not created once, not patched onto another's object).
    pub(super) fn applies_whole(&self) -> bool {
        self.mode == OutputMode::Apply
    }

    pub(super) fn is_released(&self) -> bool {
        matches!(self.object, KeptObject::Released)
    }
}

/// Two contributions are the same when everything but the object's text is: the hash
/// stands for the text, which may have been released.
impl PartialEq for Kept {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
            && self.hash == other.hash
            && self.sources == other.sources
            && self.owners == other.owners
            && self.deletion == other.deletion
            && self.mode == other.mode
            && self.adopt == other.adopt
    }
}

/// The object to write for an output, or why there is none yet.
pub(super) enum MergedOutput {
    Ready(Arc<Merged>),
    /// This owner's object was released: it is evaluated again before the output is
    /// merged (it has become shared since).
    Evaluate(Key),
}

/// An output's merged object and the hash of its content.
pub(super) struct Merged {
    pub(super) desired: Arc<DesiredObject>,
    /// The hash of the content without the owners annotation (see
    /// `switchyard_core::names::ANNOTATION_APPLIED`).
    pub(super) hash: String,
    /// `owners_hash` of the merged object.
    pub(super) owners: u64,
    /// Triggers whose different version was refused.
    pub(super) conflicts: Vec<Conflict>,
}

/// What was last applied to an output, to skip writes that would change nothing.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Applied {
    pub(super) hash: String,
    /// The object applied to: an object of this uid is the pack's even before the cache
    /// shows the mark written when it was created.
    pub(super) uid: Option<String>,
    pub(super) generation: Option<i64>,
    pub(super) resource_version: Option<String>,
    /// `owners_hash` of the object applied: the owners annotation the live object was
    /// known to cover at `resource_version` (the content hash leaves it out).
    pub(super) owners: u64,
}

/// Everything the controller remembers, behind one lock.
#[derive(Default)]
pub(super) struct State {
    pub(super) packs: BTreeMap<Arc<str>, PackState>,
    pub(super) reads: ReadIndex,
    pub(super) applied: HashMap<Key, Applied>,
    pub(super) synced: HashSet<KindKey>,
    /// Outputs this broker deleted (by uid) that the caches still show: deleted once, not
    /// again by every prune that sees them before the watch does.
    pub(super) deleted: HashMap<ObjectKey, String>,
    /// Outputs this broker created (by uid) whose creation mark has not been written yet.
    pub(super) unmarked: HashMap<ObjectKey, String>,
    /// Members that are gone (`ROLE/NAME`), and why.
    pub(super) gone: BTreeMap<String, String>,
    pub(super) shards: Shards,
}

impl State {
    /// This broker holds the trigger's shard.
    pub(super) fn holds(&self, trigger: &ObjectKey) -> bool {
        self.shards.count <= 1
            || self
                .shards
                .held
                .contains(&crate::shards::shard_of(trigger, self.shards.count))
    }
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
pub(super) struct CounterState {
    pub(super) totals: Counters,
    /// Evaluations per trigger, so tests can tell which triggers a change re-evaluated.
    pub(super) per_trigger: HashMap<Key, u64>,
}

/// The broker's controller. Cheap to share: every method takes `&self`.
pub struct Controller {
    pub(super) store: Arc<Store>,
    pub(super) clusters: Arc<Clusters>,
    pub(super) queue: Arc<Queue<Work>>,
    pub(super) state: Mutex<State>,
    pub(super) writes: Mutex<Writes>,
    pub(super) counters: Mutex<CounterState>,
    /// The last `Synced` state of triggers whose pack does not write it into their status
    /// (`status.syncedCondition: false`), per pack: what tells a new failure (an Event)
    /// from a repeated one.
    pub(super) unwritten_synced: Mutex<HashMap<(String, ObjectKey), SyncedState>>,
    /// Evaluations at once, at most one per core: evaluation is CPU work on blocking
    /// threads; more threads than cores evaluate no faster, and each holds an allocator heap
    /// of its own.
    pub(super) evaluations: tokio::sync::Semaphore,
}

/// A `Synced` condition's status, reason and message.
pub(super) type SyncedState = (Value, Value, Value);

/// A failure that retries the work item with backoff.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error("{0}")]
    Pending(String),
    /// Outputs exist that the pack did not create: nothing was written to them; looked at
    /// again after [`super::NOT_OURS_POLL`].
    #[error("{0}")]
    NotOurs(String),
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
            unwritten_synced: Mutex::new(HashMap::new()),
            evaluations: tokio::sync::Semaphore::new(
                std::thread::available_parallelism().map_or(2, std::num::NonZero::get),
            ),
        })
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
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

    pub(super) fn count(&self, f: impl FnOnce(&mut Writes)) {
        f(&mut self.writes.lock().unwrap_or_else(PoisonError::into_inner));
    }

    /// The broker's metrics.
    pub fn metrics(&self) -> &Arc<crate::metrics::Metrics> {
        self.clusters.metrics()
    }

    /// One evaluation: per rule that matched, its time and CEL cost per pack.
    pub(super) fn count_evaluation(
        &self,
        pack: &str,
        outcome: &switchyard_core::Outcome,
        took: std::time::Duration,
    ) {
        use crate::metrics::{PackLabels, RuleLabels};
        let metrics = self.metrics();
        for rule in &outcome.rules {
            metrics
                .evaluations_total
                .get_or_create(&RuleLabels {
                    pack: pack.to_string(),
                    rule: rule.clone(),
                })
                .inc();
        }
        let labels = PackLabels {
            pack: pack.to_string(),
        };
        metrics
            .evaluation_seconds
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        metrics
            .cel_cost_total
            .get_or_create(&labels)
            .inc_by(outcome.cost);
    }

    /// An output written (created, applied, marked, patched or taken back).
    pub(super) fn count_apply(&self, pack: &str, key: &ObjectKey) {
        self.count(|w| w.applies += 1);
        let metrics = self.metrics();
        metrics.wrote(&metrics.applies_total, pack, &key.cluster, &key.kind);
    }

    /// An output deleted or orphaned by prune.
    pub(super) fn count_prune(&self, pack: &str, key: &ObjectKey) {
        self.count(|w| w.deletes += 1);
        let metrics = self.metrics();
        metrics.wrote(&metrics.prunes_total, pack, &key.cluster, &key.kind);
    }

    /// A trigger's status written.
    pub(super) fn count_status(&self, pack: &str, trigger: &ObjectKey) {
        self.count(|w| w.status += 1);
        let metrics = self.metrics();
        metrics.wrote(
            &metrics.status_writes_total,
            pack,
            &trigger.cluster,
            &trigger.kind,
        );
    }

    /// A finalizer added to or removed from a trigger.
    pub(super) fn count_finalizer(&self, pack: &str) {
        self.count(|w| w.finalizers += 1);
        self.metrics()
            .finalizer_writes_total
            .get_or_create(&crate::metrics::PackLabels {
                pack: pack.to_string(),
            })
            .inc();
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(scope: &Scope) -> Option<Vec<(&str, bool)>> {
        match scope {
            Scope::All => None,
            Scope::Rules(rules) => Some(
                rules
                    .iter()
                    .map(|(r, edit)| (r.as_str(), edit.is_some()))
                    .collect(),
            ),
        }
    }

    fn narrowed(names: &[&str]) -> Scope {
        Scope::Rules(
            names
                .iter()
                .map(|n| ((*n).to_string(), Some(Arc::new(TemplateEdit::default()))))
                .collect(),
        )
    }

    #[test]
    fn scopes_join_to_the_triggers_of_either() {
        let a = Scope::rules(&["a".to_string()]);
        assert_eq!(rules(&a.clone().join(Scope::All)), None);
        assert_eq!(rules(&Scope::All.join(a.clone())), None);
        // A rule narrowed in one and whole in the other is whole; narrowed in both, narrowed.
        let joined = a.join(narrowed(&["a", "b"])).join(narrowed(&["b", "c"]));
        assert_eq!(
            rules(&joined),
            Some(vec![("a", false), ("b", true), ("c", true)])
        );
    }

    #[test]
    fn a_round_under_way_widens_to_every_trigger() {
        // Its triggers not evaluated yet must be before prune: a reload or a member change
        // that names some rules may not narrow it.
        let pending = Initial::Pending(HashSet::new());
        let b = Scope::rules(&["b".to_string()]);
        assert_eq!(rules(&pending.widened(b.clone())), None);
        let waiting = Initial::Waiting(Scope::rules(&["a".to_string()]));
        assert_eq!(
            rules(&waiting.widened(b.clone())),
            Some(vec![("a", false), ("b", false)])
        );
        assert_eq!(rules(&Initial::Done.widened(b)), Some(vec![("b", false)]));
    }
}
