//! The benchmark's steps in order, each printing its figures, then the summary.

use std::time::{Duration, Instant};

use switchyard_bench::broker_world::{
    self, EDIT_ANNOTATION, EDITED_TEMPLATE, PLACED_EDIT_ANNOTATION, PLACED_RULE_FILE,
    PLACED_TEMPLATE, RULE_FILE,
};
use switchyard_core::plan::{self, Plan};
use switchyard_kube::config::BrokerConfig;
use switchyard_testenv::ControlPlane;

use crate::args::Args;
use crate::child::BrokerProcess;
use crate::cluster::{Cluster, broker_clusters};
use crate::converge::{POLL, create_source, verify_outputs, wait_converged};
use crate::error::Res;
use crate::figures::{
    MIB, cpu_secs, delta, free_port, int, load_average, per_second, secs, total, tree_cpu_ticks,
    writes_text,
};
use crate::floor::floor;
use crate::pack::{
    PackCopy, by_kind, changed_objects, check_plan, karmada_crds, kinds_text, source_crds,
};
use crate::reload::{measure_reload, print_reload};
use crate::report::{Report, print_summary};

pub(crate) async fn bench(args: &Args) -> Res<()> {
    let mut report = Report {
        triggers: args.triggers,
        ..Report::default()
    };
    println!(
        "switchyard broker benchmark: {} FleetWorkloads, {} broker workers, {} requests in flight for the client side, timeout {} min",
        int(args.triggers as u64),
        args.workers,
        args.concurrency,
        args.timeout.as_secs() / 60
    );
    let result = match tokio::time::timeout(args.timeout, steps(args, &mut report)).await {
        Ok(result) => result,
        Err(_) => Err(format!(
            "the benchmark did not finish within {} min",
            args.timeout.as_secs() / 60
        )
        .into()),
    };
    if let Err(e) = &result {
        println!("\nstopped: {e}");
    }
    print_summary(&report);
    result
}

pub(crate) async fn steps(args: &Args, report: &mut Report) -> Res<()> {
    let n = args.triggers;
    let deadline = args.timeout;

    // The pack, the world and what the core makes of it: as shipped; with the first edit
    // (step 5a); split in two rules (step 5b set-up); and with the second edit (step 5b).
    let packs = PackCopy::new()?;
    let pack = packs.load()?;
    let edited_text = packs.edited_template()?;
    let (general_rule, placed_rule) =
        broker_world::split_rule(&std::fs::read_to_string(packs.file(RULE_FILE))?)?;
    let placed_edited = broker_world::edit_placed_template(&edited_text)?;
    let split_files = [
        (EDITED_TEMPLATE, edited_text.as_str()),
        (RULE_FILE, general_rule.as_str()),
        (PLACED_RULE_FILE, placed_rule.as_str()),
        (PLACED_TEMPLATE, edited_text.as_str()),
    ];
    let edited_pack = PackCopy::with(&split_files[..1])?.load()?;
    let split_pack = PackCopy::with(&split_files)?.load()?;
    let mut split_edited_files = split_files.to_vec();
    split_edited_files.push((PLACED_TEMPLATE, placed_edited.as_str()));
    let split_edited_pack = PackCopy::with(&split_edited_files)?.load()?;

    let mut source_objects = broker_world::fleets();
    source_objects.extend(broker_world::placement_policies());
    let workloads = broker_world::fleet_workloads(n);
    source_objects.extend(workloads.iter().cloned());
    let world = broker_world::memory_world(&source_objects)?;
    let started = Instant::now();
    let plan = plan::plan(&pack, &world, chrono::Utc::now());
    let plan_time = started.elapsed();
    check_plan(&plan, n)?;
    let mut plans = Vec::new();
    for p in [&edited_pack, &split_pack, &split_edited_pack] {
        let other = plan::plan(p, &world, chrono::Utc::now());
        check_plan(&other, n)?;
        plans.push(other);
    }
    let [edited_plan, split_plan, split_edited_plan] =
        <[Plan; 3]>::try_from(plans).map_err(|_| "three plans")?;
    let placed = (0..n).filter(|i| broker_world::is_placed(*i)).count();
    let changed = changed_objects(&plan, &edited_plan, EDIT_ANNOTATION, placed)?;
    let changed_placed = changed_objects(
        &split_plan,
        &split_edited_plan,
        PLACED_EDIT_ANNOTATION,
        placed,
    )?;
    let kinds = by_kind(&plan.objects);
    report.desired = plan.objects.len();
    report.edited = changed.len();
    println!(
        "[plan] the core renders every FleetWorkload without errors: {} desired objects ({}) in {}; each reload edit changes {} of them",
        int(plan.objects.len() as u64),
        kinds_text(&kinds),
        secs(plan_time),
        int(changed.len() as u64)
    );

    // 1. The control plane.
    let started = Instant::now();
    let plane = ControlPlane::start(&["source", "karmada"]).await?;
    let source_server = plane.cluster("source").ok_or("no source cluster")?;
    let karmada_server = plane.cluster("karmada").ok_or("no karmada cluster")?;
    source_server.install_crds(&source_crds()?).await?;
    karmada_server.install_crds(&karmada_crds()?).await?;
    let source = Cluster::new(source_server.client().await?);
    let karmada = Cluster::new(karmada_server.client().await?);
    println!(
        "[1] control plane (etcd, kube-apiserver source and karmada) started and CRDs installed in {}",
        secs(started.elapsed())
    );

    // 2. The source objects.
    let started = Instant::now();
    let created = create_source(&source, &source_objects, args.concurrency).await?;
    let create_time = started.elapsed();
    println!(
        "[2] created {} objects in source ({} namespaces, {} Fleets, {} PlacementPolicies, {} FleetWorkloads) in {} ({}, {} in flight)",
        int(created as u64),
        broker_world::NAMESPACES,
        broker_world::NAMESPACES,
        broker_world::PLACED_NAMESPACES,
        int(n as u64),
        secs(create_time),
        per_second(created as u64, create_time),
        args.concurrency
    );

    // 3. The broker: convergence.
    let health_port = free_port()?;
    let config = BrokerConfig {
        packs: Some(packs.packs()),
        clusters: broker_clusters(
            source_server.kubeconfig_path(),
            karmada_server.kubeconfig_path(),
        ),
        // No periodic resync during the run: step 4 triggers one.
        resync_seconds: 3600,
        workers: args.workers,
        health_addr: format!("127.0.0.1:{health_port}"),
        metrics_addr: format!("127.0.0.1:{health_port}"),
        reload_debounce_millis: args.reload_debounce_ms,
        ..BrokerConfig::default()
    };
    let config_path = packs.dir.path().join("broker-config.json");
    std::fs::write(&config_path, serde_json::to_string_pretty(&config)?)?;
    let wire_before = source.write_requests().await? + karmada.write_requests().await?;

    let started = Instant::now();
    let cpu_before = tree_cpu_ticks()?;
    let mut broker = BrokerProcess::start(&config_path).await?;
    let (converge, polls, polling) = wait_converged(
        std::slice::from_mut(&mut broker),
        &source,
        &karmada,
        &kinds,
        n,
        started,
        deadline,
    )
    .await?;
    let converge_cpu = tree_cpu_ticks()? - cpu_before;
    let broker_cpu = broker.cpu_ticks()?;
    report.converge_cpu = Some(converge_cpu);
    let writes = broker.writes().await?;
    let wire = source.write_requests().await? + karmada.write_requests().await? - wire_before;
    let rss = broker.peak_rss_kib()?;
    report.converge = Some(converge);
    report.converge_writes = Some(writes);
    report.peak_rss_kib = Some(rss);
    println!(
        "[3] converged in {}: every one of the {} desired objects exists in karmada and all {} FleetWorkloads have Synced=True ({polls} polls every {} ms, {} ms each on average)",
        secs(converge),
        int(plan.objects.len() as u64),
        int(n as u64),
        POLL.as_millis(),
        polling.as_millis() / u128::from(polls.max(1))
    );
    println!(
        "    broker writes: {} ({} in all; the API servers answered {} write requests)",
        writes_text(&writes),
        int(total(&writes)),
        int(wire)
    );
    println!(
        "    applies/s: {} ({} applies / {}); writes/s: {}",
        per_second(writes.applies, converge),
        int(writes.applies),
        secs(converge),
        per_second(total(&writes), converge)
    );
    println!(
        "    CPU: {} for all processes (broker {} = {:.2} ms per FleetWorkload; etcd, API servers and these polls the rest); load average {}",
        cpu_secs(converge_cpu),
        cpu_secs(broker_cpu),
        broker_cpu as f64 * 10.0 / n as f64,
        load_average()
    );
    println!(
        "    broker peak RSS (VmHWM of the broker process): {:.1} MiB",
        rss as f64 * 1024.0 / MIB
    );
    let verified = verify_outputs(&karmada, &plan).await?;
    println!("    check: {verified}");
    report.verified = Some(verified);

    // 4. Resync of a converged system.
    if args.skip_resync {
        let (settle, _) = broker.wait_quiet(Duration::from_secs(120)).await?;
        println!(
            "[4] resync: left out (--skip resync); the broker was idle {} after convergence",
            secs(settle)
        );
    } else {
        resync(&mut broker, &source, &karmada, report).await?;
    }

    // 5a. Reload: a branch of the template every trigger renders, taken by a tenth of them.
    let a = measure_reload(
        &mut broker,
        &karmada,
        &packs.file(EDITED_TEMPLATE),
        &edited_text,
        EDIT_ANNOTATION,
        changed.len(),
    )
    .await?;
    report.reload = Some(a.time);
    report.reload_writes = Some(a.writes);
    println!(
        "[5a] reload of a template every trigger renders ({EDITED_TEMPLATE}, an annotation inside `{{{{#if self.spec.placementPolicyRef}}}}`): all {} affected PropagationPolicies carry the edit {} after the file was written (reload debounce {} ms)",
        int(changed.len() as u64),
        secs(a.time),
        args.reload_debounce_ms,
    );
    print_reload(&a);
    let verified = verify_outputs(&karmada, &edited_plan).await?;
    println!("     check: {verified}");

    // 5b. Reload: a template only the FleetWorkloads with a PlacementPolicy use. Set-up
    //     (untimed): the rule split in two by the label PLACED_LABEL, the files moved into
    //     place within one reload debounce, so the broker loads them as one change.
    let stage = packs.dir.path().join("stage");
    std::fs::create_dir_all(&stage)?;
    for (relative, text) in &split_files[1..] {
        let staged = stage.join(relative.replace('/', "_"));
        std::fs::write(&staged, text)?;
    }
    let before = broker.writes().await?;
    for (relative, _) in &split_files[1..] {
        std::fs::rename(stage.join(relative.replace('/', "_")), packs.file(relative))?;
    }
    tokio::time::sleep(Duration::from_millis(args.reload_debounce_ms) + Duration::from_secs(1))
        .await;
    broker.wait_quiet(Duration::from_secs(300)).await?;
    let split_writes = delta(&broker.writes().await?, &before);
    let verified = verify_outputs(&karmada, &split_plan).await?;
    println!(
        "[5b] set-up: the rule split in two by the label {} ({PLACED_RULE_FILE} renders its PropagationPolicy from {PLACED_TEMPLATE}); the broker reloaded with {}; check: {verified}",
        broker_world::PLACED_LABEL,
        writes_text(&split_writes)
    );
    let b = measure_reload(
        &mut broker,
        &karmada,
        &packs.file(PLACED_TEMPLATE),
        &placed_edited,
        PLACED_EDIT_ANNOTATION,
        changed_placed.len(),
    )
    .await?;
    report.reload_placed = Some(b.time);
    report.reload_placed_writes = Some(b.writes);
    println!(
        "[5b] reload of a template only the {} FleetWorkloads with a PlacementPolicy render ({PLACED_TEMPLATE}): all {} affected PropagationPolicies carry the edit {} after the file was written",
        int(changed_placed.len() as u64),
        int(changed_placed.len() as u64),
        secs(b.time),
    );
    print_reload(&b);
    let verified = verify_outputs(&karmada, &split_edited_plan).await?;
    println!("     check: {verified}");

    let rss = broker.peak_rss_kib()?;
    report.peak_rss_kib = Some(rss);
    println!(
        "     broker peak RSS over the whole run: {:.1} MiB (resident now: {:.1} MiB)",
        rss as f64 * 1024.0 / MIB,
        broker.memory_kib("VmRSS")? as f64 * 1024.0 / MIB
    );
    broker.stop().await?;
    drop(plane);

    // 6. The floor.
    if args.skip_floor {
        println!("[6] floor: left out (--skip floor)");
        return Ok(());
    }
    let (floor, floor_writes, floor_reloads, floor_cpu) =
        floor(args, &plan, &[&changed, &changed_placed], &workloads).await?;
    report.floor_cpu = Some(floor_cpu);
    report.floor = Some(floor);
    report.floor_writes = floor_writes;
    report.floor_reload = floor_reloads.first().copied();
    report.floor_reload_placed = floor_reloads.get(1).copied();
    println!(
        "    broker/floor: {:.2} (convergence {} / floor {})",
        converge.as_secs_f64() / floor.as_secs_f64(),
        secs(converge),
        secs(floor)
    );
    Ok(())
}

/// Step 4: every trigger evaluated again on the converged system, and the writes that makes
/// (target 0).
async fn resync(
    broker: &mut BrokerProcess,
    source: &Cluster,
    karmada: &Cluster,
    report: &mut Report,
) -> Res<()> {
    let (settle, _) = broker.wait_quiet(Duration::from_secs(120)).await?;
    if settle > Duration::ZERO {
        println!(
            "[4] (the broker was busy for another {} after convergence; now idle)",
            secs(settle)
        );
    }
    let before = broker.writes().await?;
    let wire_before = source.write_requests().await? + karmada.write_requests().await?;
    broker.resync().await?;
    let (busy, ticks) = broker.wait_quiet(Duration::from_secs(300)).await?;
    let after = broker.writes().await?;
    let wire = source.write_requests().await? + karmada.write_requests().await? - wire_before;
    let resync_writes = delta(&after, &before);
    report.resync = Some((resync_writes, wire));
    println!(
        "[4] resync: every trigger evaluated again; broker busy for about {} ({:.2} s of CPU); writes made: {} ({}); write requests at the API servers: {}",
        secs(busy),
        ticks as f64 / 100.0,
        int(total(&resync_writes)),
        writes_text(&resync_writes),
        int(wire)
    );
    Ok(())
}
