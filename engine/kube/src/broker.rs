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
use crate::members::{MemberEvent, Membership};
use crate::metrics::Metrics;
use crate::packs::{self, PackSet};
use crate::queue::{Backoff, Queue};
use crate::reload::Change;
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

/// What the broker's loop hands to the functions keeping watches and members in step.
struct Wiring {
    controller: Arc<Controller>,
    store: Arc<Store>,
    clusters: Arc<Clusters>,
    health: Health,
    events: mpsc::UnboundedSender<WatchEvent>,
}

/// The watches running, and the members found at run time.
struct Watches {
    running: BTreeMap<KindKey, (WatchMode, JoinHandle<()>)>,
    /// Watches needed in a cluster nobody configured (reported on `/readyz` until one is).
    missing: BTreeSet<KindKey>,
    members: Membership,
}

/// Runs the broker until `shutdown` resolves: then it stops taking work, lets in-flight work
/// finish, and returns.
pub async fn run(
    mut config: BrokerConfig,
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
    store.set_dynamic_roles(config.members.iter().map(|m| m.role.clone()));
    let observer: Arc<dyn crate::queue::QueueObserver> = metrics.clone();
    let queue: Arc<Queue<Work>> =
        Queue::observed(Backoff::default(), Backoff::permanent(), Some(observer));
    let controller = Controller::new(store.clone(), clusters.clone(), queue.clone());
    controller.set_shard_count(config.shards.max(1));
    let health = Health::with_metrics(metrics.clone());
    on_start(Handle {
        controller: controller.clone(),
        health: health.clone(),
    });

    let (events_tx, mut events_rx) = mpsc::unbounded_channel::<WatchEvent>();
    let wiring = Wiring {
        controller: controller.clone(),
        store: store.clone(),
        clusters: clusters.clone(),
        health: health.clone(),
        events: events_tx.clone(),
    };
    let mut watches = Watches {
        running: BTreeMap::new(),
        missing: BTreeSet::new(),
        members: Membership::default(),
    };

    // The first pack set: a broken one leaves the broker running and not ready, waiting for
    // a fixed set on disk.
    let mut fingerprints: BTreeMap<String, BTreeMap<String, packs::RuleFingerprint>> =
        BTreeMap::new();
    reload(&config, &controller, &clusters, &health, &mut fingerprints).await;
    ensure_watches(&wiring, &mut watches);

    // The configured clusters, as members the configuration holds (so that a changed
    // configuration file can add, change and remove them).
    for cluster in &config.clusters {
        let id = cluster.id().to_string();
        watches.members.found.insert(
            id.clone(),
            (cluster_fingerprint(cluster), FROM_CONFIGURATION.into()),
        );
        if cluster.name.is_some() {
            watches.members.live.insert(id);
        }
    }
    // The roles whose members are found at run time: each source reports what it finds.
    let (members_tx, mut members_rx) = mpsc::unbounded_channel::<MemberEvent>();
    let mut sources = BTreeMap::new();
    start_member_sources(&config, &clusters, &members_tx, &mut sources)?;
    publish_inventory(&wiring, &watches);
    // The configuration file, when there is one: read again when it changes.
    let mut config_changes = match &config.origin {
        Some(origin) => Some(
            crate::reload::watch_paths(
                std::slice::from_ref(&origin.path),
                config.reload_debounce(),
            )
            .map_err(|e| BrokerError::Io(e.to_string()))?,
        ),
        None => None,
    };

    // The packs folder, and the shared partials and CRDs the packs are loaded with.
    let packs_dir = config.packs.clone().unwrap_or_default();
    let pack_dirs = packs::pack_dirs(&packs_dir).unwrap_or_default();
    let watched = crate::reload::watched_paths(&config, &pack_dirs);
    let (mut reloads, mut reloads_guard) =
        crate::reload::watch_paths(&watched, config.reload_debounce())
            .map_err(|e| BrokerError::Io(e.to_string()))?;
    let mut prefetch: Option<Prefetch> = None;

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
    // always (the sender stays here so the channel never closes). With shards, each is
    // held through a Lease of its own, and the workers write for the shards held.
    let (held_sender, mut held) = tokio::sync::watch::channel(BTreeSet::from([0u32]));
    let mut always = None;
    let mut elector = None;
    let mut coordinator = None;
    if config.leader_elect {
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
        if config.shards > 1 {
            tracing::info!(shards = config.shards, lease = %election.lease_name, namespace = %election.namespace, %cluster, identity = %election.identity, "sharding");
            let sharding = crate::shards::Sharding {
                count: config.shards,
                election,
            };
            let (shards_held, started) = crate::shards::start(client, sharding, metrics.clone());
            held = shards_held;
            coordinator = Some(started);
            always = Some(held_sender);
        } else {
            tracing::info!(lease = %election.lease_name, namespace = %election.namespace, %cluster, identity = %election.identity, "leader election");
            let (elected, started) = crate::leader::elect(client, election, metrics.clone());
            held_sender.send_replace(BTreeSet::new());
            tokio::spawn(forward_leading(elected, held_sender));
            elector = Some(started);
        }
    } else {
        always = Some(held_sender);
    }
    let mut holding = held.borrow().clone();
    health.set_shards(config.shards, &holding);
    let workers = crate::workers::start(config.workers.max(1), &queue, &controller, &held);
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
                    // A watch stopped since (a member gone) or started again (one back)
                    // may have sent this: only the cache itself says it holds a list.
                    if store.cache(&kind).is_some_and(|c| c.is_synced()) {
                        if watches.members.joining.contains_key(&kind.cluster) {
                            watches.members.failures.remove(&kind.to_string());
                        } else {
                            health.set_watch(kind.to_string(), true);
                        }
                        controller.watch_synced(kind);
                        promote_members(&wiring, &mut watches);
                    }
                }
                WatchEvent::Failed(kind, message) => {
                    tracing::warn!(watch = %kind, %message, "watch cannot start");
                    if watches.members.joining.contains_key(&kind.cluster) {
                        watches.members.failures.insert(kind.to_string(), message);
                        publish_inventory(&wiring, &watches);
                    } else if watches.running.contains_key(&kind) {
                        health.set_watch_failed(kind.to_string(), message);
                    }
                }
            },
            Some(event) = members_rx.recv() => on_member_event(&wiring, &mut watches, event),
            Some(()) = async {
                match &mut config_changes {
                    Some((changes, _)) => changes.quiet().await.map(drop),
                    None => std::future::pending().await,
                }
            } => {
                let Some(origin) = config.origin.clone() else { continue };
                let next = match origin.load() {
                    Ok(next) => next,
                    Err(e) => {
                        tracing::error!(file = %switchyard_files::display(&origin.path), error = %e, "configuration does not load; the running one stays");
                        health.set_config_error(Some(e.to_string()));
                        continue;
                    }
                };
                health.set_config_error(None);
                if next == config {
                    continue;
                }
                let packs_changed = apply_config(&wiring, &mut watches, &config, &next, &members_tx, &mut sources).await;
                config = next;
                if packs_changed {
                    let pack_dirs = packs::pack_dirs(&config.packs.clone().unwrap_or_default()).unwrap_or_default();
                    let watched = crate::reload::watched_paths(&config, &pack_dirs);
                    match crate::reload::watch_paths(&watched, config.reload_debounce()) {
                        Ok((next_reloads, guard)) => {
                            reloads = next_reloads;
                            reloads_guard = guard;
                            prefetch = None;
                        }
                        Err(e) => tracing::error!(error = %e, "the new packs folder cannot be watched"),
                    }
                    reload(&config, &controller, &clusters, &health, &mut fingerprints).await;
                    ensure_watches(&wiring, &mut watches);
                    promote_members(&wiring, &mut watches);
                }
                tracing::info!(file = %switchyard_files::display(&origin.path), "configuration reloaded");
            }
            Some(change) = reloads.next() => match change {
                // Loading begins at a pause, while the debounce runs, one load at a time (a
                // long burst with many pauses does not pile loads up); the quiet installs it
                // only if nothing changed after it began, and loads again otherwise.
                Change::Paused(n) => {
                    if prefetch.as_ref().is_none_or(|p| p.loading.task.is_finished()) {
                        prefetch = Some(Prefetch { change: n, loading: Loading::start(&config) });
                    }
                }
                Change::Quiet(n) => {
                    let loading = loading_for(prefetch.take(), n, &config);
                    install_loaded(loading, &controller, &clusters, &health, &mut fingerprints).await;
                    ensure_watches(&wiring, &mut watches);
                    promote_members(&wiring, &mut watches);
                }
            },
            Ok(()) = recoveries.changed() => {
                let retried = queue.retry_now();
                tracing::info!(retried, "a cluster answers again: retrying the work that waited");
            }
            Ok(()) = held.changed() => {
                let now = held.borrow_and_update().clone();
                // Lost first (their writes stop), then gained: a new holder's first round,
                // on the caches it has kept warm: nothing of a shard is pruned before every
                // trigger of it is evaluated by this broker.
                for shard in holding.difference(&now) {
                    tracing::info!(shard, "shard lost: its triggers are left to its next holder");
                    controller.lose(*shard);
                }
                for shard in now.difference(&holding) {
                    if config.shards > 1 {
                        tracing::info!(shard, "shard held: evaluating every trigger of it");
                    }
                    controller.gain(*shard);
                }
                holding = now;
                health.set_shards(config.shards, &holding);
                metrics.set_shards(config.shards, holding.len());
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
    if let Some(coordinator) = coordinator {
        coordinator.release().await;
    }
    drop(always);
    for (_, (_, task)) in sources {
        task.abort();
    }
    drop(reloads_guard);
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

/// Whether this broker leads, as the set of shards it holds (the one shard, or none).
async fn forward_leading(
    mut leading: tokio::sync::watch::Receiver<bool>,
    held: tokio::sync::watch::Sender<BTreeSet<u32>>,
) {
    loop {
        let now = *leading.borrow_and_update();
        held.send_if_modified(|h| {
            let changed = h.contains(&0) != now;
            *h = if now {
                BTreeSet::from([0])
            } else {
                BTreeSet::new()
            };
            changed
        });
        if leading.changed().await.is_err() {
            held.send_replace(BTreeSet::new());
            return;
        }
    }
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

/// A load of the pack set begun on a blocking thread: with what it took, and the
/// configuration it was begun with.
struct Loading {
    config: BrokerConfig,
    task: JoinHandle<(Result<PackSet, packs::PackSetError>, Duration)>,
}

impl Loading {
    fn start(config: &BrokerConfig) -> Loading {
        let to_load = config.clone();
        let task = tokio::task::spawn_blocking(move || {
            let started = std::time::Instant::now();
            (packs::load_pack_set(&to_load), started.elapsed())
        });
        Loading {
            config: config.clone(),
            task,
        }
    }
}

/// A load begun when the packs folder paused after change `n` (see [`crate::reload::Change`]).
struct Prefetch {
    change: u64,
    loading: Loading,
}

/// The load to install at the quiet after change `n`: the one begun at the pause after the
/// same change with the same configuration (nothing changed since it began reading), else a
/// new one.
fn loading_for(prefetch: Option<Prefetch>, n: u64, config: &BrokerConfig) -> Loading {
    match prefetch {
        Some(p) if p.change == n && p.loading.config == *config => p.loading,
        _ => Loading::start(config),
    }
}

/// Loads the pack set from disk; installs it when it loads, keeps the running one when not.
async fn reload(
    config: &BrokerConfig,
    controller: &Controller,
    clusters: &Clusters,
    health: &Health,
    fingerprints: &mut BTreeMap<String, BTreeMap<String, packs::RuleFingerprint>>,
) {
    install_loaded(
        Loading::start(config),
        controller,
        clusters,
        health,
        fingerprints,
    )
    .await;
}

/// Installs the pack set `loading` loads when it loads, keeps the running one when not.
async fn install_loaded(
    loading: Loading,
    controller: &Controller,
    clusters: &Clusters,
    health: &Health,
    fingerprints: &mut BTreeMap<String, BTreeMap<String, packs::RuleFingerprint>>,
) {
    let (set, took): (PackSet, Duration) = match loading.task.await {
        Ok((Ok(set), took)) => (set, took),
        Ok((Err(e), _)) => {
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
    // Each pack loaded before with what changed in it; a new pack as a whole (`None`).
    let install = set
        .packs
        .iter()
        .map(|pack| {
            let change = fingerprints.get(pack.name()).map(|before| {
                let after = set
                    .fingerprints
                    .get(pack.name())
                    .cloned()
                    .unwrap_or_default();
                packs::PackChange::between(before, &after)
            });
            (pack.clone(), change)
        })
        .collect();
    fingerprints.clone_from(&set.fingerprints);
    let names: Vec<(String, String)> = set
        .packs
        .iter()
        .map(|p| (p.name().to_string(), p.version().to_string()))
        .collect();
    tracing::info!(packs = ?names, ?took, "pack set loaded");
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

/// Starts the watches the loaded packs need (in live members, and in members joining) and
/// stops the ones they no longer need.
fn ensure_watches(wiring: &Wiring, watches: &mut Watches) {
    let Wiring {
        controller,
        store,
        clusters,
        health,
        events,
    } = wiring;
    let mut needed = controller.needed_watches();
    for cluster in watches.members.joining.keys() {
        for (kind, mode) in controller.member_watches(cluster) {
            if needed
                .get(&kind)
                .is_none_or(|m| m.strength() < mode.strength())
            {
                needed.insert(kind, mode);
            }
        }
    }
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
        watches.members.failures.remove(&kind.to_string());
    }
    let resolved: Vec<KindKey> = watches
        .missing
        .iter()
        .filter(|k| !needed.contains_key(*k))
        .cloned()
        .collect();
    for kind in resolved {
        watches.missing.remove(&kind);
        health.remove_watch(&kind.to_string());
    }
    for (kind, mode) in needed {
        if watches.running.contains_key(&kind) {
            continue;
        }
        let client = match clusters.client(&kind.cluster) {
            Ok(client) => client.clone(),
            Err(_) => {
                if watches.missing.insert(kind.clone()) {
                    tracing::error!(watch = %kind, "no --cluster {} is configured for this pack's role", kind.cluster);
                }
                health.set_watch(kind.to_string(), false);
                continue;
            }
        };
        if watches.missing.remove(&kind) {
            health.remove_watch(&kind.to_string());
        }
        let cache = Arc::new(KindCache::of_workspaces(
            matches!(mode, WatchMode::Metadata { .. }),
            store.workspace_annotation(&kind.cluster),
        ));
        store.add(kind.clone(), cache.clone());
        // A joining member's watches are reported with the inventory: a member that cannot
        // be listed does not make the broker unready.
        if !watches.members.joining.contains_key(&kind.cluster) {
            health.set_watch(kind.to_string(), false);
        }
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

/// What a member's `from` says of the members the configuration file lists.
const FROM_CONFIGURATION: &str = "the configuration";

/// The running member sources, by role.
type Sources = BTreeMap<String, (crate::config::MemberSource, JoinHandle<()>)>;

/// Starts the source of each role whose members are found at run time (that is not running
/// already with the same settings).
fn start_member_sources(
    config: &BrokerConfig,
    clusters: &Clusters,
    events: &mpsc::UnboundedSender<MemberEvent>,
    sources: &mut Sources,
) -> Result<(), BrokerError> {
    for source in &config.members {
        if sources.get(&source.role).is_some_and(|(s, _)| s == source) {
            continue;
        }
        let own = config
            .own_cluster(source.cluster())
            .ok_or_else(|| {
                BrokerError::Io(format!(
                    "members of role `{}`: no configured cluster holds their source",
                    source.role
                ))
            })?
            .to_string();
        let client = clusters
            .client(&own)
            .map_err(|e| BrokerError::Io(e.to_string()))?;
        let role = source.role.clone();
        let events = events.clone();
        let task = match (&source.secrets, &source.objects, &source.cluster_profiles) {
            (None, None, None) if source.kcp.is_some() => {
                let (Some(kcp), Some(base)) = (&source.kcp, clusters.config(&own)) else {
                    continue;
                };
                tokio::spawn(crate::members::kcp::watch_kcp(
                    client,
                    base,
                    clusters.metrics().clone(),
                    role,
                    kcp.clone(),
                    events,
                ))
            }
            (Some(secrets), _, _) => tokio::spawn(crate::members::watch_secrets(
                client,
                role,
                secrets.clone(),
                events,
            )),
            (None, Some(objects), _) => tokio::spawn(crate::members::watch_objects(
                client,
                role,
                objects.clone(),
                None,
                events,
            )),
            (None, None, Some(profiles)) => tokio::spawn(crate::members::watch_objects(
                client,
                role,
                crate::config::MemberSource::profiles_as_objects(profiles),
                Some(profiles.providers.clone()),
                events,
            )),
            (None, None, None) => continue,
        };
        tracing::info!(role = %source.role, from = %source.describe(), cluster = %own, "members found at run time");
        if let Some((_, old)) = sources.insert(source.role.clone(), (source.clone(), task)) {
            old.abort();
        }
    }
    Ok(())
}

/// What a configured cluster's credentials are made of: a change is a rotation.
fn cluster_fingerprint(cluster: &crate::config::ClusterConfig) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    cluster.hash(&mut hasher);
    if let Some(path) = &cluster.kubeconfig {
        std::fs::read(path).unwrap_or_default().hash(&mut hasher);
    }
    hasher.finish()
}

/// A changed configuration file, applied to the running broker: clusters added, removed or
/// with new credentials become members joining, gone or rotated; member sources start and
/// stop (a source that changes drops its members, and the new one finds them again).
/// Returns whether the packs folder, partials or CRDs moved, or the values bound to the packs'
/// parameters changed (the caller reloads the packs).
/// What only a start can change is logged.
async fn apply_config(
    wiring: &Wiring,
    watches: &mut Watches,
    old: &BrokerConfig,
    new: &BrokerConfig,
    members: &mpsc::UnboundedSender<MemberEvent>,
    sources: &mut Sources,
) -> bool {
    // Member sources that stop or change: their members go first.
    let changed_roles: Vec<String> = sources
        .iter()
        .filter(|(role, (source, _))| !new.members.iter().any(|m| m.role == **role && m == source))
        .map(|(role, _)| role.clone())
        .collect();
    for role in &changed_roles {
        if let Some((_, task)) = sources.remove(role) {
            task.abort();
        }
        let dropped: Vec<String> = watches
            .members
            .found
            .keys()
            .filter(|c| switchyard_core::object::split_cluster(c).0 == role)
            .cloned()
            .collect();
        for cluster in dropped {
            on_member_event(
                wiring,
                watches,
                MemberEvent::Gone {
                    cluster,
                    why: "its role's source changed in the configuration".into(),
                },
            );
        }
        watches
            .members
            .unusable
            // The source's own entries (`Secret ns/name`, `Kind ns/name`); configured
            // clusters are keyed by their id, which has no space.
            .retain(|from, _| !from.contains(' '));
    }
    wiring
        .store
        .set_dynamic_roles(new.members.iter().map(|m| m.role.clone()));
    if let Err(e) = start_member_sources(new, &wiring.clusters, members, sources) {
        tracing::error!(error = %e, "member source cannot start");
    }
    // Configured clusters.
    for cluster in &new.clusters {
        let id = cluster.id().to_string();
        let (role, _) = switchyard_core::object::split_cluster(&id);
        let print = cluster_fingerprint(cluster);
        if watches.members.found.get(&id).map(|(f, _)| *f) == Some(print) {
            continue;
        }
        if wiring.store.workspace_annotation(role).is_some() {
            tracing::warn!(cluster = %id, "a role of workspaces changes at the next start");
            continue;
        }
        match crate::clusters::client_config(cluster).await {
            Ok(config) => {
                watches.members.unusable.remove(&id);
                on_member_event(
                    wiring,
                    watches,
                    MemberEvent::Found {
                        cluster: id,
                        connection: crate::members::Connection::Config(Box::new(config)),
                        fingerprint: print,
                        from: FROM_CONFIGURATION.into(),
                    },
                )
            }
            Err(e) => {
                tracing::error!(cluster = %id, error = %e, "configured cluster cannot be used");
                watches.members.unusable.insert(id, e.to_string());
            }
        }
    }
    let kept = new.cluster_ids();
    for cluster in &old.clusters {
        if kept.contains(&cluster.id()) {
            continue;
        }
        let id = cluster.id().to_string();
        if cluster.name.is_none() {
            tracing::warn!(cluster = %id, "a role's only cluster is removed at the next start");
            continue;
        }
        on_member_event(
            wiring,
            watches,
            MemberEvent::Gone {
                cluster: id,
                why: "it was removed from the configuration".into(),
            },
        );
    }
    let restart_only = old.resync_seconds != new.resync_seconds
        || old.workers != new.workers
        || old.health_addr != new.health_addr
        || old.metrics_addr != new.metrics_addr
        || old.leader_elect != new.leader_elect
        || old.leader_elect_lease_name != new.leader_elect_lease_name
        || old.leader_elect_namespace != new.leader_elect_namespace
        || old.leader_elect_cluster != new.leader_elect_cluster
        || old.leader_elect_lease_seconds != new.leader_elect_lease_seconds
        || old.leader_elect_renew_before_seconds != new.leader_elect_renew_before_seconds
        || old.shards != new.shards
        || old.log_format != new.log_format;
    if restart_only {
        tracing::warn!(
            "the configuration changed settings that take effect at the next start (resync, workers, addresses, leader election, shards, log format)"
        );
    }
    publish_inventory(wiring, watches);
    old.packs != new.packs
        || old.partials != new.partials
        || old.crds != new.crds
        || old.reload_debounce_millis != new.reload_debounce_millis
        || old.values != new.values
}

/// A member found, changed or gone.
fn on_member_event(wiring: &Wiring, watches: &mut Watches, event: MemberEvent) {
    match event {
        MemberEvent::Found {
            cluster,
            connection,
            fingerprint,
            from,
        } => {
            if watches.members.found.get(&cluster).map(|(f, _)| *f) == Some(fingerprint) {
                return;
            }
            let set = match connection {
                crate::members::Connection::Config(config) => {
                    wiring.clusters.set_member(&cluster, *config)
                }
                crate::members::Connection::Client(client) => {
                    Ok(wiring.clusters.set_member_client(&cluster, client))
                }
            };
            let client = match set {
                Ok(client) => client,
                Err(e) => {
                    tracing::warn!(%cluster, %from, error = %e, "member cannot be used");
                    watches.members.unusable.insert(from, e.to_string());
                    publish_inventory(wiring, watches);
                    return;
                }
            };
            let known = watches
                .members
                .found
                .insert(cluster.clone(), (fingerprint, from.clone()))
                .is_some();
            if known {
                // New credentials: the member's watches reconnect with them, their caches
                // kept (each relists and reports only what changed).
                for (kind, (mode, task)) in watches
                    .running
                    .iter_mut()
                    .filter(|(k, _)| k.cluster == cluster)
                {
                    let Some(cache) = wiring.store.cache(kind) else {
                        continue;
                    };
                    task.abort();
                    *task = tokio::spawn(watch::run(
                        client.clone(),
                        kind.clone(),
                        mode.clone(),
                        cache,
                        wiring.events.clone(),
                    ));
                }
                tracing::info!(%cluster, %from, "member credentials changed: its watches reconnect");
            } else {
                tracing::info!(%cluster, %from, "member found: its watches start");
                watches
                    .members
                    .joining
                    .insert(cluster, std::time::Instant::now());
                ensure_watches(wiring, watches);
                promote_members(wiring, watches);
            }
        }
        MemberEvent::Unusable { from, problem } => match problem {
            Some(problem) => {
                tracing::warn!(%from, %problem, "member source entry cannot be used");
                watches.members.unusable.insert(from, problem);
            }
            None => {
                watches.members.unusable.remove(&from);
            }
        },
        MemberEvent::Gone { cluster, why } => {
            let started = std::time::Instant::now();
            watches.members.found.remove(&cluster);
            watches.members.joining.remove(&cluster);
            let was_live = watches.members.live.remove(&cluster);
            if was_live && wiring.store.remove_member(&cluster) {
                let (role, _) = switchyard_core::object::split_cluster(&cluster);
                wiring
                    .controller
                    .members_changed(role, None, Some((&cluster, &why)));
            }
            ensure_watches(wiring, watches);
            wiring.clusters.remove_member(&cluster);
            tracing::info!(%cluster, %why, took = ?started.elapsed(), "member gone: its watches stopped; what the packs made there is left in place");
        }
    }
    publish_inventory(wiring, watches);
}

/// Joining members whose every watch has listed become live: the packs naming their role
/// see them and evaluate every trigger again.
fn promote_members(wiring: &Wiring, watches: &mut Watches) {
    let ready: Vec<String> = watches
        .members
        .joining
        .keys()
        .filter(|cluster| {
            wiring
                .controller
                .member_watches(cluster)
                .keys()
                .all(|k| wiring.store.cache(k).is_some_and(|c| c.is_synced()))
        })
        .cloned()
        .collect();
    if ready.is_empty() {
        return;
    }
    for cluster in ready {
        let since = watches.members.joining.remove(&cluster);
        watches.members.live.insert(cluster.clone());
        wiring.store.add_member(&cluster);
        for kind in wiring.controller.member_watches(&cluster).keys() {
            wiring.health.set_watch(kind.to_string(), true);
        }
        let (role, _) = switchyard_core::object::split_cluster(&cluster);
        wiring
            .controller
            .members_changed(role, Some(&cluster), None);
        tracing::info!(%cluster, took = ?since.map(|s| s.elapsed()), "member live: its watches listed; packs naming its role evaluate every trigger again");
    }
    ensure_watches(wiring, watches);
    publish_inventory(wiring, watches);
}

/// The live inventory of every role, for `/readyz` and the per-role gauges (set at once, not
/// only at the next scrape tick).
fn publish_inventory(wiring: &Wiring, watches: &Watches) {
    let roles: Vec<(String, Vec<String>)> = wiring
        .store
        .roles()
        .into_iter()
        .map(|(role, _)| {
            let members = switchyard_core::object::World::members(&*wiring.store, &role);
            (role, members)
        })
        .collect();
    let metrics = wiring.clusters.metrics();
    for (role, members) in &roles {
        let labels = crate::metrics::RoleLabels { role: role.clone() };
        metrics
            .cluster_members
            .get_or_create(&labels)
            .set(members.len() as i64);
        let joining = watches
            .members
            .joining
            .keys()
            .filter(|c| switchyard_core::object::split_cluster(c).0 == role)
            .count();
        metrics
            .cluster_members_joining
            .get_or_create(&labels)
            .set(joining as i64);
    }
    let (lines, problems) = watches.members.report(&roles);
    wiring.health.set_inventory(lines, problems);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn prefetch(change: u64, config: &BrokerConfig) -> (Prefetch, tokio::task::Id) {
        let loading = Loading::start(config);
        let id = loading.task.id();
        (Prefetch { change, loading }, id)
    }

    /// A load begun at a pause is installed only at the quiet of the same change and with the
    /// same configuration: anything else may have read files or settings that changed since.
    #[tokio::test]
    async fn a_load_begun_at_the_pause_is_used_only_for_its_change() {
        let config = BrokerConfig::default();
        let (same, id) = prefetch(3, &config);
        assert_eq!(loading_for(Some(same), 3, &config).task.id(), id);

        let (older, id) = prefetch(3, &config);
        assert_ne!(loading_for(Some(older), 4, &config).task.id(), id);

        let (other_config, id) = prefetch(3, &config);
        let changed = BrokerConfig {
            workers: config.workers + 1,
            ..config.clone()
        };
        assert_ne!(loading_for(Some(other_config), 3, &changed).task.id(), id);
    }
}
