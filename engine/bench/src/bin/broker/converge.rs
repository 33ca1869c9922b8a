//! The world created in source, and the wait until the broker converged: every desired object
//! in karmada with the plan's content, every FleetWorkload `Synced=True`.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use serde_json::Value;
use switchyard_bench::broker_world;
use switchyard_core::evaluate::LABEL_PACK;
use switchyard_core::plan::Plan;
use switchyard_kube::controller::is_subset;

use crate::child::BrokerProcess;
use crate::cluster::Cluster;
use crate::error::Res;
use crate::figures::{int, writes_text};
use crate::pack::{PACK, by_kind, synced_true};

/// How often convergence is checked.
pub(crate) const POLL: Duration = Duration::from_millis(500);

/// Creates the namespaces, then Fleets and PlacementPolicies, then the FleetWorkloads.
pub(crate) async fn create_source(
    source: &Cluster,
    objects: &[Value],
    concurrency: usize,
) -> Res<usize> {
    let namespaces = broker_world::namespaces();
    for ns in &namespaces {
        source.apply(ns, "switchyard-bench").await?;
    }
    stream::iter(objects.iter().map(|o| source.create(o)))
        .buffer_unordered(concurrency)
        .try_for_each(|_| async { Ok(()) })
        .await?;
    Ok(namespaces.len() + objects.len())
}

/// Polls every [`POLL`] until karmada holds as many objects of each kind as the plan
/// desires and every FleetWorkload has `Synced=True`. Counting is cheap (a list of one object
/// and the server's remaining count); the FleetWorkloads are listed once the counts are
/// complete and either the broker has written as many statuses as there are FleetWorkloads
/// or 2 s have passed since the last such list. A paged list is one snapshot, taken when its
/// first page is served: convergence is the time that list started. Returns that time, the
/// number of polls and the time the polls took.
pub(crate) async fn wait_converged(
    brokers: &mut [BrokerProcess],
    source: &Cluster,
    karmada: &Cluster,
    kinds: &BTreeMap<(String, String), usize>,
    n: usize,
    started: Instant,
    deadline: Duration,
) -> Res<(Duration, u64, Duration)> {
    let mut interval = tokio::time::interval(POLL);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut polls = 0u64;
    let mut last_print = Instant::now();
    let mut last_full: Option<Instant> = None;
    let mut synced = 0usize;
    let mut polling = Duration::ZERO;
    loop {
        interval.tick().await;
        polls += 1;
        let poll_started = Instant::now();
        let mut complete = true;
        let mut counts = Vec::new();
        for ((api_version, kind), want) in kinds {
            let namespaced = karmada.is_namespaced(api_version, kind).await?;
            let selector = format!("{LABEL_PACK}={PACK}");
            let have = if namespaced {
                karmada.count(api_version, kind, None).await?
            } else {
                karmada.count(api_version, kind, Some(&selector)).await?
            };
            complete &= have >= *want;
            counts.push(format!("{kind} {}/{}", int(have as u64), int(*want as u64)));
        }
        // Every broker's writes together (several replicas share the work).
        let mut writes = switchyard_kube::controller::Writes::default();
        for broker in brokers.iter_mut() {
            let w = broker.writes().await?;
            writes.applies += w.applies;
            writes.status += w.status;
            writes.deletes += w.deletes;
            writes.finalizers += w.finalizers;
        }
        if complete
            && (writes.status >= n as u64
                || last_full.is_none_or(|t| t.elapsed() >= Duration::from_secs(2)))
        {
            last_full = Some(Instant::now());
            let at = started.elapsed();
            let workloads = source
                .list("platform.edge-portal.eu/v1alpha1", "FleetWorkload")
                .await?;
            synced = workloads.iter().filter(|w| synced_true(w)).count();
            polling += poll_started.elapsed();
            if synced >= n {
                return Ok((at, polls, polling));
            }
        } else {
            polling += poll_started.elapsed();
        }
        if last_print.elapsed() >= Duration::from_secs(10) {
            last_print = Instant::now();
            println!(
                "    {:>6.1} s: {}; broker {}{}",
                started.elapsed().as_secs_f64(),
                counts.join(", "),
                writes_text(&writes),
                if last_full.is_some() {
                    format!("; Synced=True {}/{}", int(synced as u64), int(n as u64))
                } else {
                    String::new()
                }
            );
        }
        if started.elapsed() > deadline {
            return Err(format!("not converged after {deadline:?}").into());
        }
    }
}

/// Every desired object exists in karmada with the plan's content (the broker may add
/// nothing the plan does not have, the API server adds defaults): lists every kind once.
pub(crate) async fn verify_outputs(karmada: &Cluster, plan: &Plan) -> Res<String> {
    let mut live: HashMap<(String, String, Option<String>, String), Value> = HashMap::new();
    for (api_version, kind) in by_kind(&plan.objects).keys() {
        for object in karmada.list(api_version, kind).await? {
            let namespace = object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .map(str::to_string);
            let name = object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .ok_or("a listed object without a name")?
                .to_string();
            let key = (api_version.clone(), kind.clone(), namespace, name);
            live.insert(key, object);
        }
    }
    let mut missing = 0;
    let mut different = Vec::new();
    for desired in &plan.objects {
        let key = &desired.key;
        let id = (
            key.api_version.clone(),
            key.kind.clone(),
            key.namespace.clone(),
            key.name.clone(),
        );
        match live.get(&id) {
            None => missing += 1,
            Some(object) => {
                let want = comparable_owners(&desired.object, object);
                if !is_subset(&want, object) {
                    different.push(format!("{key}: {}", first_difference(&want, object, "")));
                }
            }
        }
    }
    if missing == 0 && different.is_empty() {
        Ok(format!(
            "all {} desired objects are in karmada with the rendered content",
            int(plan.objects.len() as u64)
        ))
    } else {
        Ok(format!(
            "MISMATCH: {missing} desired objects missing, {} differ from the render (first: {})",
            different.len(),
            different.first().map_or("-", String::as_str)
        ))
    }
}

/// The render's owners annotation is left out of the comparison where the broker, by design,
/// does not write it: with sharding (an output carries each shard's owners annotation,
/// `switchyard.dev/owners-<i>-of-<n>`, instead), and where the live annotation already covers
/// it (names every owner, or says there are more than it lists: a change of owners alone is
/// not written, see `switchyard_core::plan::owners_covered`).
fn comparable_owners(want: &Value, have: &Value) -> Value {
    let owners = switchyard_core::names::ANNOTATION_OWNERS;
    let annotation = |object: &Value| {
        object
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .and_then(|a| a.get(owners))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let sharded = have
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .is_some_and(|a| a.keys().any(|k| k.starts_with(&format!("{owners}-"))));
    let covered = annotation(want)
        .is_some_and(|w| switchyard_core::plan::owners_covered(&w, annotation(have).as_deref()));
    let mut want = want.clone();
    if (sharded || covered)
        && let Some(annotations) = want
            .pointer_mut("/metadata/annotations")
            .and_then(Value::as_object_mut)
    {
        annotations.remove(owners);
    }
    want
}

/// Where `want` is not contained in `have`: a path and both values.
pub(crate) fn first_difference(want: &Value, have: &Value, path: &str) -> String {
    match (want, have) {
        (Value::Object(w), Value::Object(h)) => {
            for (k, v) in w {
                let inner = format!("{path}/{k}");
                match h.get(k) {
                    Some(hv) if is_subset(v, hv) => {}
                    Some(hv) => return first_difference(v, hv, &inner),
                    None => return format!("{inner} missing (want {v})"),
                }
            }
            format!("{path}: ?")
        }
        (Value::Array(w), Value::Array(h)) if w.len() == h.len() => {
            for (i, (wv, hv)) in w.iter().zip(h).enumerate() {
                if !is_subset(wv, hv) {
                    return first_difference(wv, hv, &format!("{path}/{i}"));
                }
            }
            format!("{path}: ?")
        }
        _ => format!("{path}: want {want}, have {have}"),
    }
}
