//! Step 6, the floor: the same writes from a bare client on a fresh control plane.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use kube::api::DynamicObject;
use serde_json::Value;
use switchyard_bench::broker_world;
use switchyard_core::plan::Plan;
use switchyard_core::{DesiredObject, ObjectKey};
use switchyard_kube::apply::field_manager;
use switchyard_testenv::ControlPlane;

use crate::args::Args;
use crate::cluster::Cluster;
use crate::error::Res;
use crate::figures::{cpu_secs, int, load_average, per_second, secs, tree_cpu_ticks};
use crate::pack::{PACK, karmada_crds, source_crds};

/// Step 6: the same writes from a bare client on a fresh control plane. Returns the floor's
/// time, its writes, the time of each reload's applies alone and the CPU of all processes.
pub(crate) async fn floor(
    args: &Args,
    plan: &Plan,
    reloads: &[&[&DesiredObject]],
    workloads: &[Value],
) -> Res<(Duration, u64, Vec<Duration>, u64)> {
    let plane = ControlPlane::start(&["source", "karmada"]).await?;
    let source_server = plane.cluster("source").ok_or("no source cluster")?;
    let karmada_server = plane.cluster("karmada").ok_or("no karmada cluster")?;
    source_server.install_crds(&source_crds()?).await?;
    karmada_server.install_crds(&karmada_crds()?).await?;
    let source = Cluster::new(source_server.client().await?);
    let karmada = Cluster::new(karmada_server.client().await?);
    // Untimed: the FleetWorkloads the status and finalizer writes go to.
    for ns in broker_world::namespaces() {
        source.apply(&ns, "switchyard-bench").await?;
    }
    let created: Vec<DynamicObject> = stream::iter(workloads.iter().map(|o| source.create(o)))
        .buffer_unordered(args.concurrency)
        .try_collect()
        .await?;
    let versions: HashMap<(Option<String>, String), Option<String>> = created
        .into_iter()
        .map(|o| {
            (
                (o.metadata.namespace, o.metadata.name.unwrap_or_default()),
                o.metadata.resource_version,
            )
        })
        .collect();

    // Timed: cluster-scoped outputs (the Namespaces) first, then per trigger its namespaced
    // outputs (each once), its finalizer and its status, `concurrency` requests in flight.
    let manager = field_manager(PACK);
    let mut cluster_scoped = Vec::new();
    let mut namespaced = Vec::new();
    for d in &plan.objects {
        if karmada
            .is_namespaced(&d.key.api_version, &d.key.kind)
            .await?
        {
            namespaced.push(d);
        } else {
            cluster_scoped.push(d);
        }
    }
    let objects: HashMap<&ObjectKey, &DesiredObject> =
        namespaced.iter().map(|d| (&d.key, *d)).collect();
    enum Op<'a> {
        Apply(&'a Value),
        Trigger(&'a ObjectKey, Option<&'a str>, Option<&'a Value>),
    }
    let mut ops: Vec<Op> = Vec::new();
    let mut seen: HashSet<&ObjectKey> = HashSet::new();
    for outcome in &plan.outcomes {
        for d in &outcome.desired {
            if let Some(merged) = objects.get(&d.key)
                && seen.insert(&merged.key)
            {
                ops.push(Op::Apply(&merged.object));
            }
        }
        ops.push(Op::Trigger(
            &outcome.trigger,
            outcome.finalizer.as_deref(),
            outcome.status.as_ref(),
        ));
    }
    let mut writes = (cluster_scoped.len() + seen.len()) as u64;
    for outcome in &plan.outcomes {
        writes += u64::from(outcome.finalizer.is_some()) + u64::from(outcome.status.is_some());
    }
    let wire_before = source.write_requests().await? + karmada.write_requests().await?;
    let cpu_before = tree_cpu_ticks()?;
    let started = Instant::now();
    stream::iter(
        cluster_scoped
            .iter()
            .map(|d| karmada.apply(&d.object, &manager)),
    )
    .buffer_unordered(args.concurrency)
    .try_for_each(|()| async { Ok(()) })
    .await?;
    let source_ref = &source;
    let karmada_ref = &karmada;
    let manager_ref = manager.as_str();
    let versions_ref = &versions;
    stream::iter(ops.into_iter().map(|op| async move {
        match op {
            Op::Apply(object) => karmada_ref.apply(object, manager_ref).await,
            Op::Trigger(key, finalizer, status) => {
                if let Some(f) = finalizer {
                    let version = versions_ref
                        .get(&(key.namespace.clone(), key.name.clone()))
                        .and_then(Option::as_deref);
                    source_ref.add_finalizer(key, f, version).await?;
                }
                if let Some(status) = status {
                    source_ref.apply_status(key, status, manager_ref).await?;
                }
                Ok(())
            }
        }
    }))
    .buffer_unordered(args.concurrency)
    .try_for_each(|()| async { Ok(()) })
    .await?;
    let floor = started.elapsed();
    let floor_cpu = tree_cpu_ticks()? - cpu_before;
    let wire = source.write_requests().await? + karmada.write_requests().await? - wire_before;
    println!(
        "[6] floor (fresh control plane, bare kube-rs client, {} in flight): {} writes ({} applies of the plan's objects, {} finalizer patches, {} status applies) in {} ({}; the API servers answered {} write requests)",
        args.concurrency,
        int(writes),
        int((cluster_scoped.len() + seen.len()) as u64),
        int(plan
            .outcomes
            .iter()
            .filter(|o| o.finalizer.is_some())
            .count() as u64),
        int(plan.outcomes.iter().filter(|o| o.status.is_some()).count() as u64),
        secs(floor),
        per_second(writes, floor),
        int(wire)
    );
    println!(
        "    CPU: {} for all processes (etcd, API servers, this client); load average {}",
        cpu_secs(floor_cpu),
        load_average()
    );

    // Each reload's share: its edited objects alone.
    let mut reload_times = Vec::new();
    for (step, changed) in ["5a", "5b"].iter().zip(reloads) {
        let started = Instant::now();
        stream::iter(changed.iter().map(|d| karmada.apply(&d.object, &manager)))
            .buffer_unordered(args.concurrency)
            .try_for_each(|()| async { Ok(()) })
            .await?;
        let time = started.elapsed();
        println!(
            "    floor of reload {step}: its {} edited PropagationPolicies applied in {}",
            int(changed.len() as u64),
            secs(time)
        );
        reload_times.push(time);
    }
    drop(plane);
    Ok((floor, writes, reload_times, floor_cpu))
}
