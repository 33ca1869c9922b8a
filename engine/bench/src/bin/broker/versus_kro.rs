//! Side by side with kro (kubernetes-sigs/kro, built from its Go module by `scripts/kro.sh`):
//! the same work (`engine/bench/versus-kro`: an App becomes a Deployment and a Karmada
//! PropagationPolicy, its status says whether the Deployment exists) for each controller, on a
//! fresh kube-apiserver of its own, at each size; which side goes first alternates from one
//! size to the next.
//!
//! Per side: the controller starts (kro: its CRDs, then the ResourceGraphDefinition, until
//! kro has made the App CRD; Switchyard: the App CRD, then the broker process), the Apps are
//! created (16 in flight), and the figures are taken from the first create until every App's
//! Deployment and PropagationPolicy exist and every App says it is ready: time, the
//! controller's CPU and peak RSS (VmHWM), every process's CPU, the write requests the API
//! server answered besides the creates of the Apps; then, the controller left alone for
//! `--idle-seconds`, the writes it made meanwhile.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use serde_json::{Value, json};
use switchyard_bench::repo_root;
use switchyard_kube::config::{BrokerConfig, ClusterConfig};
use switchyard_testenv::{ApiServer, ControlPlane, read_crds};

use crate::args::Args;
use crate::child::BrokerProcess;
use crate::cluster::Cluster;
use crate::error::Res;
use crate::figures::{
    MIB, cpu_secs, free_port, int, load_average, process_cpu_ticks, process_memory_kib, secs,
    tree_cpu_ticks,
};
use crate::pack::{karmada_crds, synced_true, yaml_documents};

const NAMESPACE: &str = "bench";
const APP_API_VERSION: &str = "kro.run/v1alpha1";
const POLL: Duration = Duration::from_millis(500);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Kro,
    Switchyard,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Kro => "kro",
            Side::Switchyard => "switchyard",
        }
    }
}

/// One side's figures at one size.
struct Row {
    side: Side,
    apps: usize,
    converge: Duration,
    controller_cpu: u64,
    all_cpu: u64,
    peak_rss_kib: u64,
    writes: u64,
    idle_writes: u64,
}

/// The controller under test: the broker child process or kro's.
enum Controller {
    Switchyard(BrokerProcess),
    Kro(tokio::process::Child, u32),
}

impl Controller {
    fn pid(&self) -> u32 {
        match self {
            Controller::Switchyard(broker) => broker.pid(),
            Controller::Kro(_, pid) => *pid,
        }
    }

    async fn stop(self) -> Res<()> {
        match self {
            Controller::Switchyard(broker) => broker.stop().await,
            Controller::Kro(mut child, _) => {
                child.kill().await?;
                Ok(())
            }
        }
    }
}

fn versus_dir() -> PathBuf {
    repo_root().join("engine/bench/versus-kro")
}

/// kro's folder (the binary `kro` and `crds/`): `SWITCHYARD_KRO`, else `scripts/kro.sh`
/// builds it once per machine.
fn kro_dir() -> Res<PathBuf> {
    if let Some(dir) = std::env::var_os("SWITCHYARD_KRO") {
        return Ok(PathBuf::from(dir));
    }
    let output = std::process::Command::new(repo_root().join("scripts/kro.sh"))
        .stderr(Stdio::inherit())
        .output()?;
    if !output.status.success() {
        return Err(format!("scripts/kro.sh failed with {}", output.status).into());
    }
    let text = String::from_utf8(output.stdout)?;
    let dir = text
        .lines()
        .last()
        .ok_or("scripts/kro.sh printed nothing")?;
    Ok(PathBuf::from(dir))
}

fn app(i: usize) -> Value {
    json!({
        "apiVersion": APP_API_VERSION,
        "kind": "App",
        "metadata": {"name": format!("app-{i}"), "namespace": NAMESPACE},
        "spec": {"image": "nginx", "replicas": 1, "clusters": ["member1", "member2"]},
    })
}

fn is_ready(side: Side, app: &Value) -> bool {
    let ready = app.pointer("/status/ready") == Some(&Value::Bool(true));
    ready
        && match side {
            Side::Kro => app.pointer("/status/state").and_then(Value::as_str) == Some("ACTIVE"),
            Side::Switchyard => synced_true(app),
        }
}

pub(crate) async fn versus_kro(args: &Args, sizes: &[usize]) -> Res<()> {
    let kro = kro_dir()?;
    println!(
        "switchyard against kro ({}): the same work (engine/bench/versus-kro), {} workers each, sizes {}, idle window {} s",
        kro.display(),
        args.workers,
        sizes
            .iter()
            .map(|n| int(*n as u64))
            .collect::<Vec<_>>()
            .join(", "),
        args.idle.as_secs()
    );
    let mut rows = Vec::new();
    for (i, &n) in sizes.iter().enumerate() {
        let order = if i % 2 == 0 {
            [Side::Kro, Side::Switchyard]
        } else {
            [Side::Switchyard, Side::Kro]
        };
        for side in order {
            let row = match tokio::time::timeout(args.timeout, run_side(side, n, args, &kro)).await
            {
                Ok(row) => row?,
                Err(_) => {
                    return Err(format!(
                        "{} did not converge {n} Apps within {} min",
                        side.name(),
                        args.timeout.as_secs() / 60
                    )
                    .into());
                }
            };
            rows.push(row);
        }
    }
    print_table(&rows);
    Ok(())
}

async fn start_kro(
    server: &ApiServer,
    cluster: &Cluster,
    kro: &Path,
    args: &Args,
) -> Res<Controller> {
    server.install_crds(&read_crds(&kro.join("crds"))?).await?;
    let metrics = free_port()?;
    let probes = free_port()?;
    let mut child = tokio::process::Command::new(kro.join("kro"))
        .env("KUBECONFIG", server.kubeconfig_path())
        .arg(format!("--metrics-bind-address=127.0.0.1:{metrics}"))
        .arg(format!("--health-probe-bind-address=127.0.0.1:{probes}"))
        .arg(format!(
            "--dynamic-controller-concurrent-reconciles={}",
            args.workers
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let pid = child.id().ok_or("kro exited at once")?;
    for rgd in yaml_documents(&versus_dir().join("kro/rgd.yaml"))? {
        cluster.create(&rgd).await?;
    }
    // kro makes the App CRD and starts its controller once the RGD is Active.
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            return Err(format!("kro exited with {status}").into());
        }
        let rgds = cluster
            .list("kro.run/v1alpha1", "ResourceGraphDefinition")
            .await?;
        let active = rgds
            .iter()
            .any(|r| r.pointer("/status/state").and_then(Value::as_str) == Some("Active"));
        if active && cluster.resource(APP_API_VERSION, "App").await.is_ok() {
            break;
        }
        if started.elapsed() > Duration::from_secs(120) {
            return Err("kro did not make the App CRD within 120 s".into());
        }
        tokio::time::sleep(POLL).await;
    }
    Ok(Controller::Kro(child, pid))
}

async fn start_switchyard(server: &ApiServer, args: &Args, scratch: &Path) -> Res<Controller> {
    let dir = versus_dir();
    server
        .install_crds(&read_crds(&dir.join("config/crds"))?)
        .await?;
    let health = free_port()?;
    let config = BrokerConfig {
        packs: Some(dir.join("packs")),
        clusters: vec![ClusterConfig {
            role: "main".to_string(),
            name: None,
            kubeconfig: Some(server.kubeconfig_path().to_path_buf()),
            context: None,
            in_cluster: false,
            workspace_paths: true,
        }],
        resync_seconds: 3600,
        workers: args.workers,
        health_addr: format!("127.0.0.1:{health}"),
        metrics_addr: format!("127.0.0.1:{health}"),
        ..BrokerConfig::default()
    };
    let path = scratch.join("broker-config.json");
    std::fs::write(&path, serde_json::to_string_pretty(&config)?)?;
    Ok(Controller::Switchyard(BrokerProcess::start(&path).await?))
}

async fn run_side(side: Side, n: usize, args: &Args, kro: &Path) -> Res<Row> {
    let scratch = tempfile::Builder::new()
        .prefix("switchyard-versus-kro-")
        .tempdir()?;
    let plane = ControlPlane::start(&["main"]).await?;
    let server = plane.cluster("main").ok_or("no main cluster")?;
    server.install_crds(&karmada_crds()?).await?;
    let cluster = Cluster::new(server.client().await?);
    cluster
        .apply(
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
            "switchyard-bench",
        )
        .await?;
    let controller = match side {
        Side::Kro => start_kro(server, &cluster, kro, args).await?,
        Side::Switchyard => start_switchyard(server, args, scratch.path()).await?,
    };
    let pid = controller.pid();

    let wire_before = cluster.write_requests().await?;
    let cpu_before = tree_cpu_ticks()?;
    let controller_before = process_cpu_ticks(pid)?;
    let started = Instant::now();
    stream::iter((0..n).map(|i| {
        let object = app(i);
        let cluster = cluster.clone();
        async move { cluster.create(&object).await.map(|_| ()) }
    }))
    .buffer_unordered(args.concurrency)
    .try_for_each(|()| async { Ok(()) })
    .await?;
    let created = started.elapsed();
    let mut last_print = Instant::now();
    let converge = loop {
        tokio::time::sleep(POLL).await;
        let deployments = cluster.count("apps/v1", "Deployment", None).await?;
        let policies = cluster
            .count("policy.karmada.io/v1alpha1", "PropagationPolicy", None)
            .await?;
        let at = started.elapsed();
        let mut ready = 0;
        if deployments >= n && policies >= n {
            let apps = cluster.list(APP_API_VERSION, "App").await?;
            ready = apps.iter().filter(|a| is_ready(side, a)).count();
            if ready >= n {
                break at;
            }
        }
        if last_print.elapsed() >= Duration::from_secs(10) {
            last_print = Instant::now();
            println!(
                "    {} {:>6.1} s: Deployments {}/{n}, PropagationPolicies {}/{n}, ready {}",
                side.name(),
                at.as_secs_f64(),
                int(deployments as u64),
                int(policies as u64),
                int(ready as u64)
            );
        }
    };
    let controller_cpu = process_cpu_ticks(pid)? - controller_before;
    let all_cpu = tree_cpu_ticks()? - cpu_before;
    let peak_rss_kib = process_memory_kib(pid, "VmHWM")?;
    // The Apps' creates are the benchmark's own.
    let writes = (cluster.write_requests().await? - wire_before).saturating_sub(n as u64);
    println!(
        "[{} {}] converged in {} (Apps created in {}): controller CPU {}, all processes {}, peak RSS {:.1} MiB, {} write requests; load average {}",
        side.name(),
        int(n as u64),
        secs(converge),
        secs(created),
        cpu_secs(controller_cpu),
        cpu_secs(all_cpu),
        peak_rss_kib as f64 * 1024.0 / MIB,
        int(writes),
        load_average()
    );
    let idle_before = cluster.write_requests().await?;
    tokio::time::sleep(args.idle).await;
    let idle_writes = cluster.write_requests().await? - idle_before;
    println!(
        "[{} {}] idle for {} s: {} write requests",
        side.name(),
        int(n as u64),
        args.idle.as_secs(),
        int(idle_writes)
    );
    controller.stop().await?;
    drop(plane);
    Ok(Row {
        side,
        apps: n,
        converge,
        controller_cpu,
        all_cpu,
        peak_rss_kib,
        writes,
        idle_writes,
    })
}

fn print_table(rows: &[Row]) {
    println!();
    println!(
        "| Apps | controller | convergence | controller CPU | all processes' CPU | peak RSS | writes | idle writes |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for row in rows {
        println!(
            "| {} | {} | {} | {} | {} | {:.1} MiB | {} | {} |",
            int(row.apps as u64),
            row.side.name(),
            secs(row.converge),
            cpu_secs(row.controller_cpu),
            cpu_secs(row.all_cpu),
            row.peak_rss_kib as f64 * 1024.0 / MIB,
            int(row.writes),
            int(row.idle_writes)
        );
    }
    let sizes: std::collections::BTreeSet<usize> = rows.iter().map(|r| r.apps).collect();
    for n in sizes {
        let rss = |side: Side| {
            rows.iter()
                .find(|r| r.apps == n && r.side == side)
                .map(|r| r.peak_rss_kib)
        };
        if let (Some(sy), Some(kro)) = (rss(Side::Switchyard), rss(Side::Kro)) {
            println!(
                "{} Apps: Switchyard's peak RSS is {:.2} x kro's ({})",
                int(n as u64),
                sy as f64 / kro as f64,
                if sy < kro {
                    "lower: met"
                } else {
                    "not lower: not met"
                }
            );
        }
    }
}
