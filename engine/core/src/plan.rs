//! A plan: every trigger in a world evaluated, and their outputs merged into the one desired
//! state. An output desired by several triggers (a tenant's namespace) is one object, kept
//! while any trigger still desires it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::diagnostic::Diagnostic;
use crate::evaluate::{Conversions, Record, evaluate_traced};
use crate::model::OutputMode;
use crate::names::{ANNOTATION_CLUSTER, REASON_CONFLICT};
use crate::object::{MemoryWorld, ObjectKey, World, check_cluster_id};
use crate::outcome::{DesiredObject, Outcome, Trigger};
use crate::ownership::join;
use crate::pack::Pack;
use crate::yaml;

// How one object's versions join is the ownership module's; the broker's merge uses it too.
pub use crate::ownership::{
    Conflict, OWNERS_LISTED, OWNERS_MORE, absorb, owners_annotation, owners_covered, stamp_merged,
};

mod compact;

/// Whether a plan keeps each evaluation's trace: only `explain` prints it, and building it
/// formats every value a rule computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tracing {
    On,
    Off,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// Each trigger's outcome. Its `desired` entries keep the keys of what the trigger
    /// desired; the objects (with their sources and owners) are in `objects`, merged, and
    /// `object` is null here.
    pub outcomes: Vec<Outcome>,
    /// The merged desired objects: per cluster, cluster-scoped ones first, then by key.
    pub objects: Vec<DesiredObject>,
    pub conflicts: Vec<Conflict>,
}

impl Plan {
    /// Every evaluation error and conflict, as messages.
    pub fn error_messages(&self) -> Vec<String> {
        let mut messages: Vec<String> = self
            .outcomes
            .iter()
            .flat_map(|o| {
                o.errors.iter().map(move |e| match e.snippet() {
                    Some(snippet) => format!("{}: {e}\n{snippet}", o.trigger),
                    None => format!("{}: {e}", o.trigger),
                })
            })
            .collect();
        for c in &self.conflicts {
            messages.push(c.to_string());
        }
        messages
    }
}

/// One trigger's evaluation in a plan. A plan is one round: what its evaluations read is of
/// no use to it, so they do not record it.
fn evaluate_for_plan<'w>(
    pack: &Pack,
    trigger: Trigger<'w>,
    world: &MemoryWorld,
    now: DateTime<Utc>,
    conversions: &Conversions<'w>,
    tracing: Tracing,
) -> Result<Outcome, String> {
    let record = Record {
        trace: tracing == Tracing::On,
        reads: false,
    };
    evaluate_traced(pack, trigger, world as &dyn World, now, conversions, record)
}

/// Evaluates every object of `world` that a rule of `pack` watches, in key order, and
/// merges the outputs. Without traces: `explain` asks for them ([`Tracing::On`]).
pub fn plan(pack: &Pack, world: &MemoryWorld, now: DateTime<Utc>) -> Plan {
    match plan_checked(pack, world, now, Tracing::Off, &mut |_| Ok(())) {
        Ok(plan) => plan,
        // The check above never fails.
        Err(_) => merge(pack, Vec::new()),
    }
}

/// [`plan`], calling `check` with the number of triggers evaluated so far before each
/// trigger and before the merge: an `Err` from it stops the plan with its message (a
/// caller's memory budget, say).
pub fn plan_checked(
    pack: &Pack,
    world: &MemoryWorld,
    now: DateTime<Utc>,
    tracing: Tracing,
    check: &mut dyn FnMut(usize) -> Result<(), String>,
) -> Result<Plan, String> {
    // Each trigger is evaluated once: keeping its CEL copy until the round ends would only
    // hold memory (objects the rules look up are still converted once).
    let conversions = Conversions::forgetting_triggers();
    let mut outcomes = Vec::new();
    let mut triggers = 0;
    for (key, object) in watched_objects(pack, world) {
        check(triggers)?;
        triggers += 1;
        let trigger = Trigger {
            cluster: &key.cluster,
            object: &object,
        };
        let evaluated = evaluate_for_plan(pack, trigger, world, now, &conversions, tracing);
        if let Ok(outcome) = evaluated {
            outcomes.push(outcome);
        }
    }
    check(triggers)?;
    Ok(merge(pack, outcomes))
}

/// The objects of `world` a rule of `pack` watches, in key order, then the pack's own
/// trigger when a rule has no `watch`: the triggers of a plan.
fn watched_objects(
    pack: &Pack,
    world: &MemoryWorld,
) -> impl Iterator<Item = (ObjectKey, std::sync::Arc<Value>)> {
    let watched = pack.watched_kinds();
    // Compared in place: copying three strings per object of the world showed in profiles.
    world
        .iter()
        .filter(move |(key, _)| {
            watched.iter().any(|(cluster, api_version, kind)| {
                *cluster == key.role() && *api_version == key.api_version && *kind == key.kind
            })
        })
        .map(|(key, object)| (key, object.clone()))
        .chain(pack.pack_trigger())
}

/// [`plan_checked`] for a caller that prints the merged objects and each trigger's status
/// and errors, and nothing else of the evaluations (`render`): untraced, each outcome's
/// `reads` dropped and its desired objects moved into a compact form as soon as it is
/// evaluated, so memory grows with the output rather than a multiple of it.
///
/// # Errors
/// As [`plan_checked`].
pub fn plan_compact(
    pack: &Pack,
    world: &MemoryWorld,
    now: DateTime<Utc>,
    check: &mut dyn FnMut(usize) -> Result<(), String>,
) -> Result<CompactPlan, String> {
    let conversions = Conversions::forgetting_triggers();
    let mut outcomes = Vec::new();
    let mut rendered: Vec<Vec<Compact>> = Vec::new();
    let mut statuses: Vec<Option<Vec<u8>>> = Vec::new();
    let mut triggers = 0;
    for (key, object) in watched_objects(pack, world) {
        check(triggers)?;
        triggers += 1;
        let trigger = Trigger {
            cluster: &key.cluster,
            object: &object,
        };
        if let Ok(mut outcome) =
            evaluate_for_plan(pack, trigger, world, now, &conversions, Tracing::Off)
        {
            statuses.push(outcome.status.take().map(|s| compact::encode(&s)));
            rendered.push(
                std::mem::take(&mut outcome.desired)
                    .into_iter()
                    .map(Compact::new)
                    .collect(),
            );
            outcomes.push(outcome);
        }
    }
    check(triggers)?;
    drop(conversions);
    merge_compact(pack, outcomes, rendered, statuses)
}

/// A desired object held compactly: `desired.object` is null, the object is in `bytes`.
#[derive(Debug, Clone)]
struct Compact {
    desired: DesiredObject,
    bytes: Vec<u8>,
}

impl Compact {
    fn new(mut desired: DesiredObject) -> Self {
        let bytes = compact::encode(&std::mem::take(&mut desired.object));
        Compact { desired, bytes }
    }

    /// The desired object with its object decoded.
    fn expand(&self) -> Result<DesiredObject, String> {
        let object = compact::decode(&self.bytes)
            .ok_or_else(|| format!("internal error: {} cannot be decoded", self.desired.key))?;
        Ok(DesiredObject {
            object,
            ..self.desired.clone()
        })
    }
}

/// What [`plan_compact`] returns: a [`Plan`] whose objects and trigger statuses are held
/// compactly (and whose outcomes keep neither `desired` nor `reads`).
#[derive(Debug, Clone)]
pub struct CompactPlan {
    /// The plan without its objects, its outcomes without the statuses in `statuses`.
    plan: Plan,
    objects: Vec<Compact>,
    /// Per outcome, its status while held compactly.
    statuses: Vec<Option<Vec<u8>>>,
}

impl CompactPlan {
    /// [`Plan::error_messages`].
    pub fn error_messages(&self) -> Vec<String> {
        self.plan.error_messages()
    }

    /// The plan with its objects and statuses.
    ///
    /// # Errors
    /// An internal error decoding an object.
    pub fn into_plan(self) -> Result<Plan, String> {
        let mut plan = self.plan;
        expand_statuses(&mut plan.outcomes, self.statuses, |_| true)?;
        plan.objects = self
            .objects
            .iter()
            .map(Compact::expand)
            .collect::<Result<_, String>>()?;
        Ok(plan)
    }

    /// [`write_yaml`] of the plan, decoding one object at a time.
    ///
    /// # Errors
    /// A failed write (an object that cannot be decoded is an `InvalidData` error).
    pub fn write_yaml(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        let mut text = String::new();
        for (i, c) in self.objects.iter().enumerate() {
            let desired = c
                .expand()
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
            text.clear();
            push_yaml(&mut text, i, &desired);
            out.write_all(text.as_bytes())?;
        }
        Ok(())
    }
}

/// [`merge`] of compactly held objects: an object is decoded only where another trigger
/// desires it too.
fn merge_compact(
    pack: &Pack,
    mut outcomes: Vec<Outcome>,
    rendered: Vec<Vec<Compact>>,
    mut statuses: Vec<Option<Vec<u8>>>,
) -> Result<CompactPlan, String> {
    let (rank, entries) = claim_order(
        &outcomes,
        |i| rendered[i].len(),
        |i, j| &rendered[i][j].desired.key,
    );
    let groups: Vec<&[(usize, usize)]> = entries
        .chunk_by(|&a, &b| rendered[a.0][a.1].desired.key == rendered[b.0][b.1].desired.key)
        .collect();
    let mut rendered: Vec<Vec<Option<Compact>>> = rendered
        .into_iter()
        .map(|r| r.into_iter().map(Some).collect())
        .collect();
    let mut objects = Vec::with_capacity(groups.len());
    let mut conflicts = Vec::new();
    for group in groups {
        let mut claims = group
            .iter()
            .filter_map(|&(i, j)| rendered[i][j].take().map(|c| (rank[i], j, c)));
        let Some((_, _, first)) = claims.next() else {
            continue;
        };
        // Decoded only where another trigger desires the object too.
        let mut joined: Option<DesiredObject> = None;
        for (at, j, incoming) in claims {
            let existing = match &mut joined {
                Some(existing) => existing,
                None => joined.insert(first.expand()?),
            };
            if let Err(conflict) = absorb(existing, &incoming.expand()?) {
                conflicts.push(((at, j), *conflict));
            }
        }
        // As in `merge`, only a joined object is stamped again.
        objects.push(joined.map_or(first, |mut joined| {
            stamp_merged(pack.name(), &pack.version_text, &mut joined);
            Compact::new(joined)
        }));
    }
    let conflicts = in_claim_order(conflicts);
    // The statuses a conflict restates are expanded for it.
    let refused: BTreeSet<String> = conflicts
        .iter()
        .flat_map(|c| c.refused.iter().cloned())
        .collect();
    statuses = expand_statuses(&mut outcomes, statuses, |o| {
        refused.contains(&o.trigger.to_string())
    })?;
    restate_conflicts(&mut outcomes, &conflicts);
    Ok(CompactPlan {
        plan: Plan {
            outcomes,
            objects: Vec::new(),
            conflicts,
        },
        objects,
        statuses,
    })
}

/// Decodes the compactly held statuses of the outcomes `which` selects back into them;
/// returns the statuses still held.
fn expand_statuses(
    outcomes: &mut [Outcome],
    mut statuses: Vec<Option<Vec<u8>>>,
    which: impl Fn(&Outcome) -> bool,
) -> Result<Vec<Option<Vec<u8>>>, String> {
    for (outcome, held) in outcomes.iter_mut().zip(statuses.iter_mut()) {
        if held.is_some() && which(outcome) {
            let bytes = held.take().unwrap_or_default();
            let status = compact::decode(&bytes).ok_or_else(|| {
                format!(
                    "internal error: the status of {} cannot be decoded",
                    outcome.trigger
                )
            })?;
            outcome.status = Some(status);
        }
    }
    Ok(statuses)
}

/// Merges the outcomes of several triggers into one desired state. Where triggers render
/// one object differently, the version of the trigger that desired it first
/// ([`crate::outcome::Precedence`]) is kept, and the others' `Synced` turns False with
/// reason `Conflict`.
pub fn merge(pack: &Pack, mut outcomes: Vec<Outcome>) -> Plan {
    let (rank, entries) = claim_order(
        &outcomes,
        |i| outcomes[i].desired.len(),
        |i, j| &outcomes[i].desired[j].key,
    );
    let groups: Vec<&[(usize, usize)]> = entries
        .chunk_by(|&a, &b| outcomes[a.0].desired[a.1].key == outcomes[b.0].desired[b.1].key)
        .collect();
    let mut objects = Vec::with_capacity(groups.len());
    let mut conflicts = Vec::new();
    for group in groups {
        let Some((&(i, j), others)) = group.split_first() else {
            continue;
        };
        // The first claim's version moves into the plan whole; the outcome keeps its key.
        let claimed = &mut outcomes[i].desired[j];
        let stub = DesiredObject {
            key: claimed.key.clone(),
            object: Value::Null,
            sources: BTreeSet::new(),
            owners: BTreeSet::new(),
            deletion: claimed.deletion,
            mode: claimed.mode,
            adopt: claimed.adopt,
        };
        let mut merged = std::mem::replace(claimed, stub);
        for &(i, j) in others {
            let incoming = &mut outcomes[i].desired[j];
            if let Err(conflict) = absorb(&mut merged, incoming) {
                conflicts.push(((rank[i], j), *conflict));
            }
            incoming.object = Value::Null;
        }
        // An object one trigger desires carries the stamp of its sources and owners from the
        // render (`EvalContext::output`, restamped where one trigger rendered it twice);
        // only a join changes them.
        if !others.is_empty() {
            stamp_merged(pack.name(), &pack.version_text, &mut merged);
        }
        objects.push(merged);
    }
    let conflicts = in_claim_order(conflicts);
    restate_conflicts(&mut outcomes, &conflicts);
    Plan {
        outcomes,
        objects,
        conflicts,
    }
}

/// The order a merge takes desired objects in: every (trigger, object) pair, `len(i)`
/// objects for trigger `i`, sorted by the plan's order of `key(i, j)` (per cluster,
/// cluster-scoped objects first, so the printed stream applies in order with `kubectl apply
/// -f -`), the pairs of one object in the order their triggers claim it; with each trigger's
/// rank in that claim order.
fn claim_order<'k>(
    outcomes: &[Outcome],
    len: impl Fn(usize) -> usize,
    key: impl Fn(usize, usize) -> &'k ObjectKey,
) -> (Vec<usize>, Vec<(usize, usize)>) {
    let mut rank = vec![0; outcomes.len()];
    for (position, i) in precedence_order(outcomes).into_iter().enumerate() {
        rank[i] = position;
    }
    let pairs = || (0..outcomes.len()).flat_map(|i| (0..len(i)).map(move |j| (i, j)));
    // A plan has few clusters and kinds but many objects: each pair's cluster, scope and
    // kind are ranked once into a number, so most comparisons of the sort compare numbers
    // rather than strings held apart in memory. Same order as `plan_order`.
    let prefixes = KindRanks::of(pairs().map(|(i, j)| key(i, j)));
    let mut sorted: Vec<ClaimPlace> = pairs()
        .map(|(i, j)| {
            let k = key(i, j);
            (
                prefixes.prefix(k),
                k.namespace.as_deref(),
                k.name.as_str(),
                rank[i],
                j,
                i,
            )
        })
        .collect();
    // Unstable is enough: no two entries are equal (each (i, j) once).
    sorted.sort_unstable();
    let entries = sorted.into_iter().map(|(.., j, i)| (i, j)).collect();
    (rank, entries)
}

/// A (trigger, object) pair's place in the claim order: its key's `KindRanks::prefix`,
/// namespace and name, its trigger's claim rank, then the pair itself (object, trigger).
type ClaimPlace<'k> = (u64, Option<&'k str>, &'k str, usize, usize, usize);

/// The ranks of the clusters and of the (apiVersion, kind) pairs of some keys, in their
/// order.
struct KindRanks<'k> {
    clusters: foldhash::HashMap<&'k str, u64>,
    kinds: foldhash::HashMap<(&'k str, &'k str), u64>,
}

impl<'k> KindRanks<'k> {
    fn of(keys: impl Iterator<Item = &'k ObjectKey>) -> Self {
        let mut clusters: foldhash::HashMap<&str, u64> = foldhash::HashMap::default();
        let mut kinds: foldhash::HashMap<(&str, &str), u64> = foldhash::HashMap::default();
        for k in keys {
            clusters.entry(k.cluster.as_str()).or_default();
            kinds
                .entry((k.api_version.as_str(), k.kind.as_str()))
                .or_default();
        }
        fn rank<K: Ord + Copy + std::hash::Hash>(map: &mut foldhash::HashMap<K, u64>) {
            let mut distinct: Vec<K> = map.keys().copied().collect();
            distinct.sort_unstable();
            for (position, k) in (0u64..).zip(distinct) {
                map.insert(k, position);
            }
        }
        rank(&mut clusters);
        rank(&mut kinds);
        KindRanks { clusters, kinds }
    }

    /// `plan_order` up to the namespace: the cluster's rank, then whether the object is
    /// namespaced, then its kind's rank (within 2^31 of each).
    fn prefix(&self, k: &ObjectKey) -> u64 {
        let cluster = self.clusters.get(k.cluster.as_str()).copied().unwrap_or(0);
        let kind = self
            .kinds
            .get(&(k.api_version.as_str(), k.kind.as_str()))
            .copied()
            .unwrap_or(0);
        (cluster << 32) | (u64::from(k.namespace.is_some()) << 31) | kind
    }
}

/// Conflicts, each with the claim rank and place of its refused version, as the triggers
/// claim their objects.
fn in_claim_order(mut conflicts: Vec<((usize, usize), Conflict)>) -> Vec<Conflict> {
    conflicts.sort_by_key(|(at, _)| *at);
    conflicts.into_iter().map(|(_, c)| c).collect()
}

/// Turns `Synced` False on every trigger whose version of an object the merge refused,
/// naming the first such object.
fn restate_conflicts(outcomes: &mut [Outcome], conflicts: &[Conflict]) {
    if conflicts.is_empty() {
        return;
    }
    let mut first: BTreeMap<&str, &Conflict> = BTreeMap::new();
    for conflict in conflicts {
        for name in &conflict.refused {
            first.entry(name.as_str()).or_insert(conflict);
        }
    }
    // Each trigger's name written into one buffer, rather than a string per trigger.
    let mut name = String::new();
    for outcome in outcomes.iter_mut() {
        name.clear();
        let _ = write!(name, "{}", outcome.trigger);
        if let Some(conflict) = first.get(name.as_str()) {
            outcome.set_synced("False", REASON_CONFLICT, &conflict.refused_message());
        }
    }
}

/// The indexes of `outcomes` in the order their triggers claim contested outputs.
fn precedence_order(outcomes: &[Outcome]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..outcomes.len()).collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (&outcomes[a], &outcomes[b]);
        (&a.facts.precedence, &a.trigger).cmp(&(&b.facts.precedence, &b.trigger))
    });
    order
}

/// The order of a plan's objects: per cluster, cluster-scoped objects (namespaces) first,
/// then by key.
pub fn plan_order(key: &ObjectKey) -> (&str, bool, &ObjectKey) {
    (&key.cluster, key.namespace.is_some(), key)
}

/// Reads input objects from a YAML stream: every document is an object (or a `kind: List`
/// of them). An object lives in `default_cluster` unless its annotation
/// `switchyard.dev/cluster` names another role; that annotation is removed.
pub fn parse_inputs(
    text: &str,
    file: &str,
    default_cluster: &str,
) -> Result<Vec<(String, Value)>, Box<Diagnostic>> {
    let documents = yaml::parse_documents(text).map_err(|e| {
        Box::new(
            Diagnostic::error("input::yaml", format!("invalid YAML: {}", e.message))
                .at(file, e.pos),
        )
    })?;
    let error = |pos: yaml::Pos, message: String| {
        Box::new(Diagnostic::error("input::object", message).at(file, pos))
    };
    let mut objects = Vec::new();
    for document in &documents {
        let value = document.to_json();
        if value.is_null() {
            continue;
        }
        // Each object with the node it was read from, for positions.
        let items: Vec<(Value, &yaml::Node)> =
            if value.get("kind").and_then(Value::as_str) == Some("List") {
                match document.get(&[yaml::PathSegment::Key("items".into())]) {
                    None => Vec::new(),
                    Some(yaml::Node {
                        value: yaml::NodeValue::Seq(items),
                        ..
                    }) => items.iter().map(|n| (n.to_json(), n)).collect(),
                    Some(node) if node.to_json().is_null() => Vec::new(),
                    Some(node) => {
                        return Err(error(
                            node.pos,
                            "`items` of a `kind: List` must be a list of objects".to_string(),
                        ));
                    }
                }
            } else {
                vec![(value, document)]
            };
        for (mut item, node) in items {
            let cluster = match take_cluster_annotation(&mut item) {
                Ok(cluster) => cluster.unwrap_or_else(|| default_cluster.to_string()),
                Err(message) => {
                    let path = [
                        yaml::PathSegment::Key("metadata".into()),
                        yaml::PathSegment::Key("annotations".into()),
                        yaml::PathSegment::Key(ANNOTATION_CLUSTER.into()),
                    ];
                    return Err(error(node.closest(&path).pos, message));
                }
            };
            if let Err(e) = ObjectKey::of(&cluster, &item) {
                return Err(error(node.pos, e));
            }
            objects.push((cluster, item));
        }
    }
    Ok(objects)
}

/// Removes the `switchyard.dev/cluster` annotation and returns its cluster (`ROLE` or
/// `ROLE/NAME`); an annotation that is not a valid cluster is an error, not a silent default.
fn take_cluster_annotation(object: &mut Value) -> Result<Option<String>, String> {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return Ok(None);
    };
    let Some(annotations) = metadata
        .get_mut("annotations")
        .and_then(Value::as_object_mut)
    else {
        return Ok(None);
    };
    let Some(cluster) = annotations.remove(ANNOTATION_CLUSTER) else {
        return Ok(None);
    };
    if annotations.is_empty() {
        metadata.remove("annotations");
    }
    match cluster {
        Value::String(id) => {
            check_cluster_id(&id).map_err(|e| format!("annotation `{ANNOTATION_CLUSTER}`: {e}"))?;
            Ok(Some(id))
        }
        other => Err(format!(
            "annotation `{ANNOTATION_CLUSTER}` must be a string naming a cluster (`ROLE` or `ROLE/NAME`), not `{other}`"
        )),
    }
}

/// The world made of input objects, with `clusters` (`ROLE/NAME`) known as members besides
/// the clusters of the objects.
pub fn world_of(objects: &[(String, Value)], clusters: &[String]) -> Result<MemoryWorld, String> {
    let mut world = MemoryWorld::new();
    for cluster in clusters {
        world.add_cluster(cluster)?;
    }
    for (cluster, object) in objects {
        world.insert(cluster, object.clone())?;
    }
    Ok(world)
}

/// [`world_of`], taking the objects rather than copying them.
///
/// # Errors
/// As [`world_of`].
pub fn world_from(
    objects: Vec<(String, Value)>,
    clusters: &[String],
) -> Result<MemoryWorld, String> {
    let mut world = MemoryWorld::new();
    for cluster in clusters {
        world.add_cluster(cluster)?;
    }
    for (cluster, object) in objects {
        world.insert(&cluster, object)?;
    }
    Ok(world)
}

/// The plan as `switchyard render` prints it: every desired object as a YAML document,
/// preceded by comments naming its target cluster, the rule outputs and triggers behind it.
/// The documents themselves are exactly what the broker applies.
pub fn to_yaml(plan: &Plan) -> String {
    let mut out = String::new();
    for (i, desired) in plan.objects.iter().enumerate() {
        push_yaml(&mut out, i, desired);
    }
    out
}

/// [`to_yaml`] written object by object to `out`, the same bytes without holding them all.
///
/// # Errors
/// A failed write.
pub fn write_yaml(plan: &Plan, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let mut text = String::new();
    for (i, desired) in plan.objects.iter().enumerate() {
        text.clear();
        push_yaml(&mut text, i, desired);
        out.write_all(text.as_bytes())?;
    }
    Ok(())
}

/// The `i`th object of [`to_yaml`]: its separator, comments and document.
fn push_yaml(out: &mut String, i: usize, desired: &DesiredObject) {
    if i > 0 {
        out.push_str("---\n");
    }
    out.push_str(&format!("# cluster: {}\n", desired.key.cluster));
    match desired.mode {
        OutputMode::Apply => {}
        OutputMode::Patch => {
            out.push_str("# patch: the pack owns only these fields of an existing object\n");
        }
        OutputMode::Create => {
            out.push_str("# create: applied while absent; later changes are left alone\n");
        }
    }
    out.push_str(&format!("# from: {}\n", join(&desired.sources)));
    out.push_str(&yaml::to_yaml(&desired.object));
}

/// The plan as one JSON document: each output with its cluster, each trigger's status
/// patch, finalizer and errors.
pub fn to_json(plan: &Plan) -> Value {
    let outputs: Vec<Value> = plan
        .objects
        .iter()
        .map(|d| match d.mode {
            OutputMode::Apply => json!({"cluster": d.key.cluster, "object": d.object}),
            OutputMode::Patch => {
                json!({"cluster": d.key.cluster, "mode": "patch", "object": d.object})
            }
            OutputMode::Create => {
                json!({"cluster": d.key.cluster, "mode": "create", "object": d.object})
            }
        })
        .collect();
    let triggers: Vec<Value> = plan
        .outcomes
        .iter()
        .map(|o| {
            let mut m = Map::new();
            m.insert("trigger".into(), json!(o.trigger));
            m.insert("rules".into(), json!(o.rules));
            if let Some(status) = &o.status {
                m.insert("status".into(), status.clone());
            }
            if let Some(f) = &o.finalizer {
                m.insert("finalizer".into(), json!(f));
            }
            if !o.errors.is_empty() {
                m.insert("errors".into(), json!(o.errors));
            }
            Value::Object(m)
        })
        .collect();
    let conflicts: Vec<Value> = plan.conflicts.iter().map(|c| json!(c)).collect();
    json!({"outputs": outputs, "triggers": triggers, "conflicts": conflicts})
}
