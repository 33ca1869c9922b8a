//! `switchyard run`: wires clusters, watches, the controller, hot reload and health together.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::apply::Clusters;
use crate::config::{BrokerConfig, ConfigError};
use crate::controller::{Controller, Work};
use crate::health::Health;
use crate::metrics::Metrics;
use crate::packs::{self, PackSet};
use crate::queue::{Backoff, Queue};
use crate::serve::Endpoints;
use crate::store::{KindCache, KindKey, Store};
use crate::watch::{self, WatchEvent, WatchMode};

/// Why the broker could not start.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Io(String),
}

/// A running broker: its controller (for tests and benchmarks) and its health state.
pub struct Handle {
    pub controller: Arc<Controller>,
    pub health: Health,
}

struct Watches {
    running: BTreeMap<KindKey, (WatchMode, JoinHandle<()>)>,
}

/// Runs the broker until `shutdown` resolves: then it stops taking work, lets in-flight work
/// finish, and returns.
pub async fn run(
    config: BrokerConfig,
    shutdown: impl Future<Output = ()>,
    on_start: impl FnOnce(Handle),
) -> Result<(), BrokerError> {
    config.validate()?;
    let metrics = Metrics::new();
    let mut clients = BTreeMap::new();
    let mut configs = BTreeMap::new();
    let mut shared = BTreeSet::new();
    for cluster in &config.clusters {
        let (client, client_config) =
            crate::clusters::connect_with_config(cluster, &metrics).await?;
        clients.insert(cluster.id().to_string(), client);
        configs.insert(cluster.id().to_string(), client_config);
        if !cluster.workspace_paths {
            shared.insert(cluster.id().to_string());
        }
    }
    let clusters = Clusters::with_configs(clients, configs, shared, metrics.clone());
    let names = clusters.names();
    let store = Store::with_clusters(names.iter().map(String::as_str));
    let observer: Arc<dyn crate::queue::QueueObserver> = metrics.clone();
    let queue: Arc<Queue<Work>> =
        Queue::observed(Backoff::default(), Backoff::permanent(), Some(observer));
    let controller = Controller::new(store.clone(), clusters.clone(), queue.clone());
    let health = Health::with_metrics(metrics.clone());
    on_start(Handle {
        controller: controller.clone(),
        health: health.clone(),
    });

    let (events_tx, mut events_rx) = mpsc::unbounded_channel::<WatchEvent>();
    let mut watches = Watches {
        running: BTreeMap::new(),
    };

    // The first pack set: a broken one leaves the broker running and not ready, waiting for
    // a fixed set on disk.
    let mut fingerprints: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    reload(&config, &controller, &clusters, &health, &mut fingerprints).await;
    ensure_watches(
        &controller,
        &store,
        &clusters,
        &health,
        &events_tx,
        &mut watches,
    );

    // The packs folder, and the shared partials and CRDs the packs are loaded with.
    let packs_dir = config.packs.clone().unwrap_or_default();
    let pack_dirs = packs::pack_dirs(&packs_dir).unwrap_or_default();
    let watched = crate::reload::watched_paths(&config, &pack_dirs);
    let (mut reloads, _guard) = crate::reload::watch_paths(&watched, config.reload_debounce())
        .map_err(|e| BrokerError::Io(e.to_string()))?;

    // Both ports bound before anything runs: one that is taken stops the start.
    let health_addr = config.health_socket_addr()?;
    let metrics_addr = config.metrics_socket_addr()?;
    let mut servers = Vec::new();
    let (stop_health, health_stopped) = tokio::sync::watch::channel(());
    let endpoints = if health_addr == metrics_addr {
        vec![(health_addr, Endpoints::ALL)]
    } else {
        vec![
            (health_addr, Endpoints::PROBES),
            (metrics_addr, Endpoints::METRICS),
        ]
    };
    for (addr, what) in endpoints {
        let listener = crate::serve::bind(addr, what)
            .await
            .map_err(|e| BrokerError::Io(e.to_string()))?;
        let mut stopped = health_stopped.clone();
        servers.push(tokio::spawn(crate::serve::serve(
            listener,
            health.clone(),
            what,
            async move {
                let _ = stopped.changed().await;
            },
        )));
    }
    health.set_reachability(clusters.reachability().clone());

    // Leader election: with it, the workers write only while this broker leads; without it,
    // always (the sender stays here so the channel never closes).
    let (always, mut leading) = tokio::sync::watch::channel(true);
    let elector = if config.leader_elect {
        let cluster = config.lease_cluster()?.to_string();
        let client = clusters
            .client(&cluster)
            .map_err(|e| BrokerError::Io(e.to_string()))?;
        let election = crate::leader::Election {
            lease_name: config.leader_elect_lease_name.clone(),
            namespace: config.lease_namespace(),
            identity: crate::leader::identity(),
            lease_seconds: config.leader_elect_lease_seconds,
            renew_before_seconds: config.leader_elect_renew_before_seconds,
        };
        tracing::info!(lease = %election.lease_name, namespace = %election.namespace, %cluster, identity = %election.identity, "leader election");
        let (elected, elector) = crate::leader::elect(client, election, metrics.clone());
        leading = elected;
        Some(elector)
    } else {
        None
    };
    let workers = crate::workers::start(config.workers.max(1), &queue, &controller, &leading);
    // A cluster that answers again: every item waiting out a backoff is retried now.
    let mut recoveries = clusters.reachability().recoveries();

    let mut resync = tokio::time::interval(config.resync().max(Duration::from_secs(1)));
    resync.tick().await;
    let mut metrics_tick = tokio::time::interval(Duration::from_secs(2));
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(event) = events_rx.recv() => match event {
                WatchEvent::Changed(change) => controller.changed(&change),
                WatchEvent::Synced(kind) => {
                    health.set_watch(kind.to_string(), true);
                    controller.watch_synced(kind);
                }
                WatchEvent::Failed(kind, message) => {
                    tracing::warn!(watch = %kind, %message, "watch cannot start");
                    health.set_watch_failed(kind.to_string(), message);
                }
            },
            Some(()) = reloads.recv() => {
                reload(&config, &controller, &clusters, &health, &mut fingerprints).await;
                ensure_watches(&controller, &store, &clusters, &health, &events_tx, &mut watches);
            }
            Ok(()) = recoveries.changed() => {
                let retried = queue.retry_now();
                tracing::info!(retried, "a cluster answers again: retrying the work that waited");
            }
            Ok(()) = leading.changed() => {
                if *leading.borrow_and_update() {
                    // A new leader's first round, on the caches it has kept warm: nothing is
                    // pruned before every trigger is evaluated by this broker.
                    controller.lead();
                }
            }
            _ = resync.tick() => controller.resync(),
            _ = metrics_tick.tick() => publish_metrics(&metrics, &store, &clusters, &queue),
        }
    }

    tracing::info!("shutting down: finishing work in flight");
    health.set_shutting_down();
    queue.close();
    let drain = futures::future::join_all(workers);
    if tokio::time::timeout(Duration::from_secs(30), drain)
        .await
        .is_err()
    {
        tracing::warn!("work still in flight after 30s; stopping anyway");
    }
    // Released as soon as nothing writes: a follower takes over at once.
    if let Some(elector) = elector {
        elector.release().await;
    }
    drop(always);
    for (_, (_, task)) in watches.running {
        task.abort();
    }
    let _ = stop_health.send(());
    for server in servers {
        let _ = server.await;
    }
    tracing::info!("stopped");
    Ok(())
}

/// The gauges read from state rather than counted as things happen: the queue's depth and
/// work in progress, each role's members, the clusters that do not answer.
fn publish_metrics(metrics: &Metrics, store: &Store, clusters: &Clusters, queue: &Queue<Work>) {
    let (unfinished, longest) = queue.in_progress();
    metrics.set_queue(queue.len(), unfinished, longest);
    for (role, members) in store.roles() {
        metrics
            .cluster_members
            .get_or_create(&crate::metrics::RoleLabels { role })
            .set(members as i64);
    }
    metrics
        .unreachable_clusters
        .set(clusters.reachability().unreachable() as i64);
}

/// Loads the pack set from disk; installs it when it loads, keeps the running one when not.
async fn reload(
    config: &BrokerConfig,
    controller: &Controller,
    clusters: &Clusters,
    health: &Health,
    fingerprints: &mut BTreeMap<String, BTreeMap<String, u64>>,
) {
    let to_load = config.clone();
    let loaded = tokio::task::spawn_blocking(move || packs::load_pack_set(&to_load)).await;
    let set: PackSet = match loaded {
        Ok(Ok(set)) => set,
        Ok(Err(e)) => {
            tracing::error!("pack set does not load; the running packs stay:\n{e}");
            health.set_reload_error(e.to_string());
            return;
        }
        Err(e) => {
            tracing::error!(error = %e, "pack loading panicked; the running packs stay");
            health.set_reload_error(e.to_string());
            return;
        }
    };
    if let Err(mismatch) = check_scopes(&set, clusters).await {
        tracing::error!(
            "pack set does not match the clusters; the running packs stay:\n{mismatch}"
        );
        health.set_reload_error(mismatch);
        return;
    }
    let mut install = Vec::new();
    let mut next = BTreeMap::new();
    for pack in &set.packs {
        let rules = packs::rule_fingerprints(pack);
        // Changed and added rules, and removed ones (what they kept must go).
        let changed: Option<BTreeSet<String>> = fingerprints.get(pack.name()).map(|before| {
            rules
                .iter()
                .filter(|(rule, print)| before.get(*rule) != Some(*print))
                .map(|(rule, _)| rule.clone())
                .chain(before.keys().filter(|r| !rules.contains_key(*r)).cloned())
                .collect()
        });
        next.insert(pack.name().to_string(), rules);
        if changed.as_ref().is_some_and(BTreeSet::is_empty)
            && fingerprints.contains_key(pack.name())
        {
            // Nothing this pack's rules depend on changed.
            install.push((pack.clone(), Some(BTreeSet::new())));
        } else {
            install.push((pack.clone(), changed));
        }
    }
    *fingerprints = next;
    let names: Vec<(String, String)> = set
        .packs
        .iter()
        .map(|p| (p.name().to_string(), p.version().to_string()))
        .collect();
    tracing::info!(packs = ?names, "pack set loaded");
    controller.install(install);
    health.set_packs(names);
}

/// How long discovery of one kind may take when packs load; a cluster that does not answer
/// in time is checked when the broker first writes there.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(5);

/// Every kind a pack's scope lets it write, declared namespaced or cluster-scoped as the
/// clusters serving its role have it (their discovery): a mismatch refuses the whole set.
/// A cluster that does not answer is not a mismatch: every write is checked again against
/// discovery before it is sent.
async fn check_scopes(set: &PackSet, clusters: &Clusters) -> Result<(), String> {
    let mut problems = Vec::new();
    for pack in &set.packs {
        for entry in &pack.spec().scope {
            for kind in &entry.kinds {
                for cluster in clusters
                    .names()
                    .into_iter()
                    .filter(|c| switchyard_core::object::split_cluster(c).0 == entry.cluster)
                {
                    let discovered = tokio::time::timeout(
                        DISCOVERY_TIMEOUT,
                        clusters.namespaced(&cluster, &kind.api_version, &kind.kind),
                    )
                    .await;
                    match discovered {
                        Ok(Ok(namespaced)) if namespaced == kind.cluster_scoped => {
                            problems.push(format!(
                                "pack `{}`: scope entry {} {} is declared {}, but cluster `{cluster}` serves it {}",
                                pack.name(),
                                kind.api_version,
                                kind.kind,
                                if kind.cluster_scoped { "cluster-scoped (clusterScoped: true)" } else { "namespaced" },
                                if namespaced { "namespaced" } else { "cluster-scoped" },
                            ));
                        }
                        Ok(Ok(_)) => {}
                        Ok(Err(e)) => {
                            tracing::debug!(%cluster, error = %e, "scope not checked");
                        }
                        Err(_) => {
                            tracing::debug!(%cluster, kind = %kind.kind, "scope not checked: discovery timed out");
                        }
                    }
                }
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

/// Starts the watches the loaded packs need and stops the ones they no longer need.
fn ensure_watches(
    controller: &Arc<Controller>,
    store: &Arc<Store>,
    clusters: &Arc<Clusters>,
    health: &Health,
    events: &mpsc::UnboundedSender<WatchEvent>,
    watches: &mut Watches,
) {
    let needed = controller.needed_watches();
    let stale: Vec<KindKey> = watches
        .running
        .iter()
        .filter(|(k, (mode, _))| needed.get(*k) != Some(mode))
        .map(|(k, _)| k.clone())
        .collect();
    for kind in stale {
        if let Some((_, task)) = watches.running.remove(&kind) {
            task.abort();
        }
        store.remove(&kind);
        controller.watch_stopped(&kind);
        health.remove_watch(&kind.to_string());
    }
    for (kind, mode) in needed {
        if watches.running.contains_key(&kind) {
            continue;
        }
        let client = match clusters.client(&kind.cluster) {
            Ok(client) => client.clone(),
            Err(_) => {
                tracing::error!(watch = %kind, "no --cluster {} is configured for this pack's role", kind.cluster);
                health.set_watch(kind.to_string(), false);
                continue;
            }
        };
        let cache = Arc::new(KindCache::of_workspaces(
            matches!(mode, WatchMode::Metadata { .. }),
            store.workspace_annotation(&kind.cluster),
        ));
        store.add(kind.clone(), cache.clone());
        health.set_watch(kind.to_string(), false);
        let task = tokio::spawn(watch::run(
            client,
            kind.clone(),
            mode.clone(),
            cache,
            events.clone(),
        ));
        watches.running.insert(kind, (mode, task));
    }
}
