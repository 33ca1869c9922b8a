//! `switchyard run`: flags and the configuration file into a broker configuration, then the
//! broker until SIGTERM or SIGINT.

use std::path::PathBuf;

use switchyard_cli::CliError;
use switchyard_kube::config::{BrokerConfig, Flags, LogFormat, parse_cluster_flag};

use crate::output::init_logs;

#[derive(clap::Args)]
pub struct RunArgs {
    /// The packs folder: a pack (with pack.yaml), or a folder of packs. Watched for changes.
    #[arg(long)]
    packs: Option<PathBuf>,
    /// A cluster of a role: `ROLE=KUBECONFIG[@CONTEXT]`, `ROLE/NAME=KUBECONFIG[@CONTEXT]`
    /// for a member of a role with several clusters, or `ROLE=in-cluster`. Repeatable.
    #[arg(long = "cluster", value_name = "ROLE[/NAME]=KUBECONFIG[@CONTEXT]")]
    clusters: Vec<String>,
    /// A broker configuration file (kind BrokerConfig); flags override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// The shared partials folder; default the nearest `templates/` above each pack.
    #[arg(long)]
    partials: Option<PathBuf>,
    /// CRDs packs are type-checked against (repeatable); default the nearest `config/crds/`.
    #[arg(long = "crds")]
    crds: Vec<PathBuf>,
    /// Seconds between full re-evaluations of every trigger (default 300).
    #[arg(long)]
    resync_seconds: Option<u64>,
    /// Triggers evaluated and applied at once (default 8).
    #[arg(long)]
    workers: Option<usize>,
    /// Address of the probes /healthz, /livez and /readyz (default 0.0.0.0:8081).
    #[arg(long)]
    health_addr: Option<String>,
    /// Address of /metrics (default 0.0.0.0:8080); the probes' address serves both.
    #[arg(long)]
    metrics_addr: Option<String>,
    /// A role whose objects live in kcp workspaces but whose cluster serves them all itself
    /// (one API server in development): writes go to its URL rather than
    /// /clusters/<workspace> under it. Repeatable.
    #[arg(long = "no-workspace-paths", value_name = "ROLE")]
    no_workspace_paths: Vec<String>,
    /// Compete for a Lease so that one broker of several writes; the others keep warm
    /// caches and take over when the leader goes.
    #[arg(long)]
    leader_elect: bool,
    /// The Lease's name (default switchyard).
    #[arg(long)]
    leader_elect_lease_name: Option<String>,
    /// The Lease's namespace (default the pod's, POD_NAMESPACE, else default).
    #[arg(long)]
    leader_elect_namespace: Option<String>,
    /// The cluster holding the Lease, ROLE or ROLE/NAME (default the in-cluster one, else the
    /// first configured).
    #[arg(long)]
    leader_elect_cluster: Option<String>,
    /// Seconds a lease lasts without renewal (default 15): the longest a dead leader holds it.
    #[arg(long)]
    leader_elect_lease_seconds: Option<u64>,
    /// Seconds before the lease ends that its holder renews it (default 5): the slack a
    /// holder has for a slow API server before it loses the lease.
    #[arg(long)]
    leader_elect_renew_before_seconds: Option<u64>,
    /// Split the triggers by a stable hash of their key into this many shards, each held
    /// through a Lease of its own (<lease>-shard-<i>) by one replica (default 1: no
    /// sharding, one leader). More than 1 needs --leader-elect.
    #[arg(long)]
    shards: Option<u32>,
    /// Quiet time after a change under --packs before the packs are reloaded (default 500).
    #[arg(long)]
    reload_debounce_millis: Option<u64>,
    /// Log lines as text or JSON (default text).
    #[arg(long, value_enum)]
    log_format: Option<LogFormatArg>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormatArg {
    Text,
    Json,
}

pub fn run(args: RunArgs) -> Result<u8, CliError> {
    let mut clusters = Vec::new();
    for flag in &args.clusters {
        clusters.push(parse_cluster_flag(flag).map_err(|e| CliError::Usage(e.to_string()))?);
    }
    let base = match &args.config {
        Some(path) => BrokerConfig::from_file(path).map_err(|e| CliError::Usage(e.to_string()))?,
        None => BrokerConfig::default(),
    };
    let flags = Flags {
        packs: args.packs,
        partials: args.partials,
        crds: args.crds,
        clusters,
        resync_seconds: args.resync_seconds,
        workers: args.workers,
        health_addr: args.health_addr,
        metrics_addr: args.metrics_addr,
        no_workspace_paths: args.no_workspace_paths,
        leader_elect: args.leader_elect,
        leader_elect_lease_name: args.leader_elect_lease_name,
        leader_elect_namespace: args.leader_elect_namespace,
        leader_elect_cluster: args.leader_elect_cluster,
        leader_elect_lease_seconds: args.leader_elect_lease_seconds,
        leader_elect_renew_before_seconds: args.leader_elect_renew_before_seconds,
        shards: args.shards,
        reload_debounce_millis: args.reload_debounce_millis,
        log_format: args.log_format.map(|f| match f {
            LogFormatArg::Text => LogFormat::Text,
            LogFormatArg::Json => LogFormat::Json,
        }),
    };
    let mut config = base
        .with_flags(flags.clone())
        .map_err(|e| CliError::Usage(e.to_string()))?;
    // The file is watched: a change is read again with the same flags over it.
    config.origin = args
        .config
        .map(|path| switchyard_kube::config::ConfigOrigin { path, flags });
    init_logs(config.log_format == LogFormat::Json, "info");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Input(format!("cannot start the runtime: {e}")))?;
    runtime
        .block_on(switchyard_kube::run(config, shutdown_signal(), |_| {}))
        .map_err(|e| CliError::Input(e.to_string()))?;
    Ok(0)
}

/// SIGTERM (what Kubernetes sends) or SIGINT.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM"),
                _ = int.recv() => tracing::info!("SIGINT"),
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
