//! Sharding across replicas (`--replicas 1,2,3`): the same world converged by 1, 2 and 3
//! broker processes started together, the triggers split into `--shards` shards (6) held
//! through Leases in `source`. Per count, on a fresh control plane: the wall time from
//! spawning the brokers until every desired object exists in karmada and every FleetWorkload
//! has `Synced=True` (as step 3 of the benchmark counts it), each broker's CPU seconds,
//! peak RSS and writes, the shards each held, and the CPU of every process of the run.

use std::time::Instant;

use switchyard_bench::broker_world;
use switchyard_core::plan;
use switchyard_kube::config::BrokerConfig;
use switchyard_testenv::ControlPlane;

use crate::args::Args;
use crate::child::BrokerProcess;
use crate::cluster::{Cluster, broker_clusters};
use crate::converge::{create_source, verify_outputs, wait_converged};
use crate::error::Res;
use crate::figures::{MIB, cpu_secs, free_port, int, load_average, secs, total, tree_cpu_ticks};
use crate::pack::{PackCopy, by_kind, check_plan, karmada_crds, source_crds};

/// One count of replicas, converged.
struct Run {
    replicas: usize,
    converge: std::time::Duration,
    brokers: Vec<Figures>,
    all_cpu: u64,
}

/// One broker's figures at convergence.
struct Figures {
    /// CPU ticks (1/100 s) since its start.
    cpu: u64,
    peak_rss_kib: u64,
    writes: u64,
    /// The shards it held, as `[0, 3]`.
    held: String,
}

pub(crate) async fn replicas(args: &Args, counts: &[usize]) -> Res<()> {
    let n = args.triggers;
    println!(
        "switchyard broker benchmark, sharding: {} FleetWorkloads, {} shards, {} workers per broker, replicas {:?}",
        int(n as u64),
        args.shards,
        args.workers,
        counts
    );
    let packs = PackCopy::new()?;
    let pack = packs.load()?;
    let mut source_objects = broker_world::fleets();
    source_objects.extend(broker_world::placement_policies());
    source_objects.extend(broker_world::fleet_workloads(n));
    let world = broker_world::memory_world(&source_objects)?;
    let plan = plan::plan(&pack, &world, chrono::Utc::now());
    check_plan(&plan, n)?;
    let kinds = by_kind(&plan.objects);
    let mut runs = Vec::new();
    for &replicas in counts {
        let run = tokio::time::timeout(
            args.timeout,
            one(args, &packs, &source_objects, &plan, &kinds, replicas),
        )
        .await
        .map_err(|_| format!("{replicas} replicas: not done within {:?}", args.timeout))??;
        runs.push(run);
    }
    println!(
        "\n| replicas | convergence | CPU per broker | CPU of the brokers | peak RSS per broker | writes per broker | shards held | CPU of all processes |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for run in &runs {
        let per = |f: &dyn Fn(&Figures) -> String| {
            run.brokers.iter().map(f).collect::<Vec<_>>().join(" / ")
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            run.replicas,
            secs(run.converge),
            per(&|b| cpu_secs(b.cpu)),
            cpu_secs(run.brokers.iter().map(|b| b.cpu).sum()),
            per(&|b| format!("{:.0} MiB", b.peak_rss_kib as f64 * 1024.0 / MIB)),
            per(&|b| int(b.writes)),
            per(&|b| b.held.clone()),
            cpu_secs(run.all_cpu),
        );
    }
    Ok(())
}

async fn one(
    args: &Args,
    packs: &PackCopy,
    source_objects: &[serde_json::Value],
    plan: &plan::Plan,
    kinds: &std::collections::BTreeMap<(String, String), usize>,
    replicas: usize,
) -> Res<Run> {
    let n = args.triggers;
    let plane = ControlPlane::start(&["source", "karmada"]).await?;
    let source_server = plane.cluster("source").ok_or("no source cluster")?;
    let karmada_server = plane.cluster("karmada").ok_or("no karmada cluster")?;
    source_server.install_crds(&source_crds()?).await?;
    karmada_server.install_crds(&karmada_crds()?).await?;
    let source = Cluster::new(source_server.client().await?);
    let karmada = Cluster::new(karmada_server.client().await?);
    let created = create_source(&source, source_objects, args.concurrency).await?;
    println!(
        "\n[{replicas} replica(s)] fresh control plane; {} objects created in source",
        int(created as u64)
    );
    let mut ports = Vec::new();
    let mut paths = Vec::new();
    for i in 0..replicas {
        let port = free_port()?;
        let config = BrokerConfig {
            packs: Some(packs.packs()),
            clusters: broker_clusters(
                source_server.kubeconfig_path(),
                karmada_server.kubeconfig_path(),
            ),
            resync_seconds: 3600,
            workers: args.workers,
            health_addr: format!("127.0.0.1:{port}"),
            metrics_addr: format!("127.0.0.1:{port}"),
            reload_debounce_millis: args.reload_debounce_ms,
            leader_elect: true,
            leader_elect_cluster: Some("source".into()),
            leader_elect_namespace: Some("default".into()),
            shards: args.shards,
            ..BrokerConfig::default()
        };
        let path = packs.dir.path().join(format!("broker-config-{i}.json"));
        std::fs::write(&path, serde_json::to_string_pretty(&config)?)?;
        ports.push(port);
        paths.push(path);
    }
    let cpu_before = tree_cpu_ticks()?;
    let started = Instant::now();
    let mut brokers = Vec::new();
    for path in &paths {
        brokers.push(BrokerProcess::start(path).await?);
    }
    let (converge, _, _) = wait_converged(
        &mut brokers,
        &source,
        &karmada,
        kinds,
        n,
        started,
        args.timeout,
    )
    .await?;
    let all_cpu = tree_cpu_ticks()? - cpu_before;
    let mut figures = Vec::new();
    for (broker, port) in brokers.iter_mut().zip(&ports) {
        let held = shards_held(*port).unwrap_or_else(|| "?".into());
        figures.push(Figures {
            cpu: broker.cpu_ticks()?,
            peak_rss_kib: broker.peak_rss_kib()?,
            writes: total(&broker.writes().await?),
            held,
        });
    }
    println!(
        "    converged in {} (load average {}); per broker: CPU {}, writes {}, shards {}",
        secs(converge),
        load_average(),
        figures
            .iter()
            .map(|f| cpu_secs(f.cpu))
            .collect::<Vec<_>>()
            .join(" / "),
        figures
            .iter()
            .map(|f| int(f.writes))
            .collect::<Vec<_>>()
            .join(" / "),
        figures
            .iter()
            .map(|f| f.held.clone())
            .collect::<Vec<_>>()
            .join(" / "),
    );
    println!("    check: {}", verify_outputs(&karmada, plan).await?);
    for broker in brokers {
        broker.stop().await?;
    }
    drop(plane);
    Ok(Run {
        replicas,
        converge,
        brokers: figures,
        all_cpu,
    })
}

/// The shards a broker holds, from its `/readyz` (`[+]shards: 2 of 6 held (0, 3)`).
fn shards_held(port: u16) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(
        stream,
        "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let line = response.lines().find(|l| l.starts_with("[+]shards: "))?;
    let held = line
        .split_once('(')
        .map_or("none", |(_, l)| l.trim_end_matches(')'));
    Some(format!("[{held}]"))
}
