//! Sharding: the triggers split by a stable hash of their key into `--shards` shards, each
//! held through a `coordination.k8s.io` Lease of its own (the leader election of
//! [`crate::leader`], once per shard), so that several brokers share the work.
//!
//! Which shards a broker competes for: every broker announces itself with a Lease of its own
//! (`<lease>-replica-<identity>`, renewed like a shard's), so each knows which brokers are
//! alive, including those that hold nothing yet. A broker holds at most its fair share,
//! `ceil(shards / brokers)`. Free shards (no holder, or an expired lease) are dealt out to
//! the live brokers under their share in one order every broker computes alike (brokers by
//! identity, shards by number), so two brokers do not race for the same shard; each competes
//! for those the deal gives it. A broker releases the shards it holds beyond its share once
//! the count of brokers has been stable for a few seconds (a broker that joins gets work
//! without anyone dying), the least preferred first (rendezvous hashing of its identity and
//! the shard). A broker that starts waits until it has been announced and the count of
//! brokers unchanged for 3 s before competing, so brokers started together see each other
//! first. A shard free for longer than a lease is taken by
//! any broker whatever its share, so a shard is never left alone because a broker counted as
//! alive does not take it (or the brokers' views differ).
//!
//! With one shard there is no coordination: the one Lease is the leader election's, under its
//! configured name.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use switchyard_core::ObjectKey;
use switchyard_core::names::ANNOTATION_OWNERS;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use crate::leader::{Election, Elector};
use crate::metrics::Metrics;

/// The shard of a trigger: FNV-1a (64 bits) of its key as the broker names it (cluster with
/// its workspace, apiVersion, kind, namespace, name), modulo the number of shards. Stable
/// across processes, versions and restarts: every broker computes the same.
pub fn shard_of(trigger: &ObjectKey, count: u32) -> u32 {
    if count <= 1 {
        return 0;
    }
    shard_of_name(&trigger.to_string(), count)
}

/// The shard of a trigger named as `switchyard.dev/owners` lists it.
pub fn shard_of_name(trigger: &str, count: u32) -> u32 {
    if count <= 1 {
        return 0;
    }
    (fnv(trigger) % u64::from(count)) as u32
}

/// The field manager that wrote an owners annotation (`key`), for a pack.
pub fn manager_of_claim(pack: &str, key: &str) -> String {
    let manager = crate::apply::field_manager(pack);
    match key
        .strip_prefix(ANNOTATION_OWNERS)
        .and_then(|r| r.strip_prefix('-'))
    {
        Some(rest) if parse_claim(rest).is_some() => format!("{manager}/{rest}"),
        _ => manager,
    }
}

/// FNV-1a, 64 bits: a hash fixed by its definition, unlike std's.
fn fnv(text: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The annotation that records a shard's claim on an output (the triggers of the shard that
/// desire it, as `switchyard.dev/owners` lists them): `switchyard.dev/owners-<shard>-of-<count>`;
/// without sharding, `switchyard.dev/owners` itself.
pub fn owners_key(shard: u32, count: u32) -> String {
    if count <= 1 {
        ANNOTATION_OWNERS.to_string()
    } else {
        format!("{ANNOTATION_OWNERS}-{shard}-of-{count}")
    }
}

/// The field manager of a shard's writes of a pack's outputs: `switchyard/<pack>/<shard>-of-<count>`;
/// without sharding, the pack's (`switchyard/<pack>`).
pub fn shard_manager(pack: &str, shard: u32, count: u32) -> String {
    let manager = crate::apply::field_manager(pack);
    if count <= 1 {
        manager
    } else {
        format!("{manager}/{shard}-of-{count}")
    }
}

/// An annotation key that records owners: the unsharded one, or a shard's of any count.
pub fn is_owners_key(key: &str) -> bool {
    key == ANNOTATION_OWNERS
        || key
            .strip_prefix(ANNOTATION_OWNERS)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|rest| parse_claim(rest).is_some())
}

/// `<shard>-of-<count>`.
fn parse_claim(rest: &str) -> Option<(u32, u32)> {
    let (shard, count) = rest.split_once("-of-")?;
    Some((shard.parse().ok()?, count.parse().ok()?))
}

/// The claims on an output: the shards of `count` that claim it, and whether a claim of another
/// layout (no sharding, or another count) is on it too.
pub fn claims(object: &serde_json::Value, count: u32) -> (BTreeSet<u32>, bool) {
    let mut shards = BTreeSet::new();
    let mut foreign = false;
    let Some(annotations) = object
        .pointer("/metadata/annotations")
        .and_then(serde_json::Value::as_object)
    else {
        return (shards, foreign);
    };
    for key in annotations.keys() {
        if key == ANNOTATION_OWNERS {
            foreign = true;
            continue;
        }
        let Some(rest) = key
            .strip_prefix(ANNOTATION_OWNERS)
            .and_then(|r| r.strip_prefix('-'))
        else {
            continue;
        };
        match parse_claim(rest) {
            Some((shard, of)) if of == count && shard < count => {
                shards.insert(shard);
            }
            Some(_) => foreign = true,
            None => {}
        }
    }
    (shards, foreign)
}

/// How long a broker that starts waits, announced and with the count of brokers unchanged,
/// before it competes for shards: brokers started together (a rollout, a scale-up) see each
/// other first and take their fair share rather than whatever they reach first.
const STARTUP_GRACE: Duration = Duration::from_secs(3);

/// How the shards are held: their number and the Lease settings (the leader election's; the
/// shards' Leases are named `<lease>-shard-<i>`).
#[derive(Debug, Clone)]
pub struct Sharding {
    pub count: u32,
    pub election: Election,
}

impl Sharding {
    fn shard_lease(&self, shard: u32) -> String {
        format!("{}-shard-{shard}", self.election.lease_name)
    }

    fn replica_prefix(&self) -> String {
        format!("{}-replica-", self.election.lease_name)
    }

    /// This broker's own Lease: its identity made a valid name.
    fn replica_lease(&self) -> String {
        let id: String = self
            .election
            .identity
            .to_lowercase()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let mut name = format!("{}{}", self.replica_prefix(), id.trim_matches('-'));
        name.truncate(253);
        name
    }

    /// This broker's order of preference over the shards: rendezvous hashing.
    fn preference(&self) -> Vec<u32> {
        let mut order: Vec<(u64, u32)> = (0..self.count)
            .map(|shard| (fnv(&format!("{}/{shard}", self.election.identity)), shard))
            .collect();
        order.sort_unstable();
        order.into_iter().map(|(_, s)| s).collect()
    }
}

/// The running coordination: the way to stop it (releasing every shard).
pub struct Coordinator {
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator").finish_non_exhaustive()
    }
}

impl Coordinator {
    /// Releases every shard held (another broker takes each at once) and the broker's own
    /// Lease.
    pub async fn release(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
        }
    }
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Starts competing for shards; the channel holds the shards this broker holds now (a shard
/// lost leaves it at once).
pub fn start(
    client: kube::Client,
    sharding: Sharding,
    metrics: Arc<Metrics>,
) -> (watch::Receiver<BTreeSet<u32>>, Coordinator) {
    let (held, receiver) = watch::channel(BTreeSet::new());
    let (stop, stopped) = oneshot::channel();
    metrics.set_shards(sharding.count, 0);
    let task = tokio::spawn(run(client, sharding, metrics, held, stopped));
    (
        receiver,
        Coordinator {
            stop: Some(stop),
            task: Some(task),
        },
    )
}

/// A shard this broker competes for.
struct Competing {
    elector: Elector,
    forward: JoinHandle<()>,
}

/// Who holds a Lease and keeps it: a holder that renewed it within `fresh` (or its duration,
/// when shorter). A holder renews well before the lease ends; one that missed its renewal
/// by half the time left is counted as gone already, so that the broker the deal gives its
/// shards to starts competing then, and takes each the moment it expires (the Lease
/// itself still decides: a late renewal keeps it).
fn holder(lease: &Lease, now: Timestamp, fresh: Duration) -> Option<String> {
    let spec = lease.spec.as_ref()?;
    let holder = spec.holder_identity.clone().filter(|h| !h.is_empty())?;
    let renewed = spec.renew_time.as_ref().or(spec.acquire_time.as_ref())?.0;
    let duration = u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0);
    let window = Duration::from_secs(duration).min(fresh);
    let window = SignedDuration::try_from(window).unwrap_or(SignedDuration::ZERO);
    (renewed + window > now).then_some(holder)
}

async fn run(
    client: kube::Client,
    sharding: Sharding,
    metrics: Arc<Metrics>,
    held: watch::Sender<BTreeSet<u32>>,
    mut stopped: oneshot::Receiver<()>,
) {
    let election = &sharding.election;
    let leases: Api<Lease> = Api::namespaced(client.clone(), &election.namespace);
    let (reader, writer) = reflector::store();
    let mut lease_events = std::pin::pin!(
        reflector(writer, watcher(leases.clone(), watcher::Config::default()))
            .default_backoff()
            .touched_objects()
    );
    let me = sharding.replica_lease();
    let prefix = sharding.replica_prefix();
    let preference = sharding.preference();
    let lease_seconds = election.lease_seconds;
    let renew_every = Duration::from_secs(
        lease_seconds
            .saturating_sub(election.renew_before_seconds)
            .max(1),
    );
    let fresh = renew_every + Duration::from_secs(lease_seconds).saturating_sub(renew_every) / 2;
    let mut competing: BTreeMap<u32, Competing> = BTreeMap::new();
    let mut free_since: BTreeMap<u32, Instant> = BTreeMap::new();
    let mut announced: Option<Instant> = None;
    // When this broker first announced itself: it competes for nothing before the others
    // starting with it have had the time to announce themselves too.
    let mut first_announced: Option<Instant> = None;
    let mut replicas_seen = (0usize, Instant::now());
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tracing::info!(shards = sharding.count, identity = %election.identity, lease = %me, "sharding: competing for shards");
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            _ = tick.tick() => {}
            Some(event) = lease_events.next() => {
                if let Err(error) = event {
                    tracing::warn!(%error, "watching the shards' leases");
                }
                continue;
            }
        }
        // This broker's own Lease, renewed like a shard's.
        if announced.is_none_or(|at| at.elapsed() >= renew_every) {
            match announce(&leases, &me, election).await {
                Ok(()) => {
                    announced = Some(Instant::now());
                    first_announced.get_or_insert_with(Instant::now);
                }
                Err(error) => tracing::warn!(%error, lease = %me, "announcing this broker"),
            }
        }
        let now = Timestamp::now();
        let all = reader.state();
        let mut live: BTreeSet<String> = BTreeSet::from([election.identity.clone()]);
        let mut holders: BTreeMap<u32, String> = BTreeMap::new();
        for lease in &all {
            let name = lease.metadata.name.as_deref().unwrap_or_default();
            if name.starts_with(&prefix) {
                if let Some(id) = holder(lease, now, fresh) {
                    live.insert(id);
                } else if expired_long_ago(lease, now, lease_seconds) {
                    forget(&leases, lease);
                }
                continue;
            }
            for shard in 0..sharding.count {
                if name == sharding.shard_lease(shard)
                    && let Some(h) = holder(lease, now, fresh)
                {
                    holders.insert(shard, h);
                }
            }
        }
        let replicas = live.len();
        if replicas != replicas_seen.0 {
            replicas_seen = (replicas, Instant::now());
        }
        let fair = (sharding.count as usize).div_ceil(replicas.max(1));
        let holding: BTreeSet<u32> = held.borrow().clone();
        for shard in 0..sharding.count {
            if holders.contains_key(&shard) {
                free_since.remove(&shard);
            } else {
                free_since.entry(shard).or_insert_with(Instant::now);
            }
        }
        // Shards another broker holds now: no use waiting for them.
        let taken: Vec<u32> = competing
            .keys()
            .filter(|s| !holding.contains(s))
            .filter(|s| holders.get(s).is_some_and(|h| *h != election.identity))
            .copied()
            .collect();
        for shard in taken {
            if let Some(c) = competing.remove(&shard) {
                stop_competing(c).await;
            }
        }
        // Beyond the fair share, once the count of brokers is stable: the least preferred go.
        let stable = replicas_seen.1.elapsed() >= Duration::from_secs(3);
        if stable && competing.len() > fair {
            let extra = competing.len() - fair;
            let release: Vec<u32> = preference
                .iter()
                .rev()
                .filter(|s| competing.contains_key(s))
                .take(extra)
                .copied()
                .collect();
            for shard in release {
                tracing::info!(
                    shard,
                    fair,
                    replicas,
                    "releasing a shard beyond this broker's fair share"
                );
                if let Some(c) = competing.remove(&shard) {
                    stop_competing(c).await;
                }
            }
        }
        // Free shards: each live broker under its fair share gets some, in one order every
        // broker computes alike (brokers by identity, free shards by number), so brokers do
        // not race for the same one; and any broker takes a shard free for too long.
        // At start, the count of brokers must also have stayed the same for the grace:
        // brokers whose processes came up a few seconds apart all see each other first.
        let settled = first_announced.is_some_and(|at| at.elapsed() >= STARTUP_GRACE)
            && (!competing.is_empty() || replicas_seen.1.elapsed() >= STARTUP_GRACE);
        let free: Vec<u32> = (0..sharding.count)
            .filter(|s| !holders.contains_key(s))
            .collect();
        let mut assigned: Vec<u32> = Vec::new();
        {
            let mut free = free.iter();
            for id in &live {
                let holds = holders.values().filter(|h| *h == id).count();
                let mut deficit = fair.saturating_sub(holds);
                if *id == election.identity {
                    deficit = fair.saturating_sub(competing.len().max(holds));
                }
                for shard in free.by_ref().take(deficit) {
                    if *id == election.identity {
                        assigned.push(*shard);
                    }
                }
            }
        }
        for shard in preference.iter().filter(|_| settled) {
            if competing.contains_key(shard) || holders.contains_key(shard) {
                continue;
            }
            let abandoned = free_since
                .get(shard)
                .is_some_and(|since| since.elapsed() >= Duration::from_secs(lease_seconds));
            if assigned.contains(shard) || abandoned {
                competing.insert(*shard, compete(&client, &sharding, *shard, &metrics, &held));
            }
        }
        metrics.set_shards(sharding.count, holding.len());
    }
    // Stopping: every shard released together, then this broker's own Lease.
    futures::future::join_all(competing.into_values().map(stop_competing)).await;
    held.send_replace(BTreeSet::new());
    metrics.set_shards(sharding.count, 0);
    let _ = leases.delete(&me, &DeleteParams::default()).await;
}

/// Starts competing for a shard: its elector, and the task that adds the shard to `held`
/// while the elector leads and removes it the moment it does not.
fn compete(
    client: &kube::Client,
    sharding: &Sharding,
    shard: u32,
    metrics: &Arc<Metrics>,
    held: &watch::Sender<BTreeSet<u32>>,
) -> Competing {
    let election = Election {
        lease_name: sharding.shard_lease(shard),
        ..sharding.election.clone()
    };
    let (mut leading, elector) = crate::leader::elect(client.clone(), election, metrics.clone());
    let held = held.clone();
    let forward = tokio::spawn(async move {
        loop {
            let now = *leading.borrow_and_update();
            held.send_if_modified(|h| {
                if now {
                    h.insert(shard)
                } else {
                    h.remove(&shard)
                }
            });
            if leading.changed().await.is_err() {
                break;
            }
        }
        held.send_if_modified(|h| h.remove(&shard));
    });
    Competing { elector, forward }
}

async fn stop_competing(c: Competing) {
    c.elector.release().await;
    let _ = tokio::time::timeout(Duration::from_secs(1), c.forward).await;
}

/// Writes this broker's own Lease: held by it, renewed now.
async fn announce(leases: &Api<Lease>, name: &str, election: &Election) -> Result<(), kube::Error> {
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(Timestamp::now());
    let lease = serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": election.namespace},
        "spec": {
            "holderIdentity": election.identity,
            "leaseDurationSeconds": election.lease_seconds,
            "renewTime": now,
        },
    });
    leases
        .patch(
            name,
            &PatchParams::apply("switchyard-shards").force(),
            &Patch::Apply(&lease),
        )
        .await
        .map(|_| ())
}

/// A broker's Lease not renewed for three lease durations: the broker is gone for good.
fn expired_long_ago(lease: &Lease, now: Timestamp, lease_seconds: u64) -> bool {
    let renewed = lease
        .spec
        .as_ref()
        .and_then(|s| s.renew_time.as_ref())
        .map(|t| t.0);
    let long = SignedDuration::from_secs(3 * i64::try_from(lease_seconds).unwrap_or(i64::MAX / 4));
    renewed.is_some_and(|r| r + long < now)
}

/// Deletes a gone broker's Lease (only that version of it).
fn forget(leases: &Api<Lease>, lease: &Lease) {
    let (Some(name), uid, version) = (
        lease.metadata.name.clone(),
        lease.metadata.uid.clone(),
        lease.metadata.resource_version.clone(),
    ) else {
        return;
    };
    let leases = leases.clone();
    tokio::spawn(async move {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid,
                resource_version: version,
            }),
            ..DeleteParams::default()
        };
        let _ = leases.delete(&name, &params).await;
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey {
            cluster: "source/ws-a".into(),
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("default".into()),
            name: name.into(),
        }
    }

    #[test]
    fn shards_are_stable_and_spread() {
        assert_eq!(shard_of(&key("a"), 1), 0);
        // The same key, the same shard: a fixed figure, so a change of the hash is seen.
        assert_eq!(shard_of(&key("t0"), 3), shard_of(&key("t0"), 3));
        let mut counts = [0usize; 4];
        for i in 0..4000 {
            counts[shard_of(&key(&format!("t{i}")), 4) as usize] += 1;
        }
        assert!(counts.iter().all(|c| (800..1200).contains(c)), "{counts:?}");
        // The workspace is part of the key.
        let elsewhere = ObjectKey {
            cluster: "source/ws-b".into(),
            ..key("t0")
        };
        let differ = (0..50).any(|i| {
            let a = key(&format!("t{i}"));
            let b = ObjectKey {
                name: a.name.clone(),
                ..elsewhere.clone()
            };
            shard_of(&a, 7) != shard_of(&b, 7)
        });
        assert!(differ);
    }

    #[test]
    fn claims_tell_this_layout_from_others() {
        let object = serde_json::json!({"metadata": {"annotations": {
            "switchyard.dev/owners-0-of-3": "a",
            "switchyard.dev/owners-2-of-3": "b",
            "switchyard.dev/owners-pack": "not a claim",
        }}});
        assert_eq!(claims(&object, 3), (BTreeSet::from([0, 2]), false));
        assert_eq!(claims(&object, 4), (BTreeSet::new(), true));
        let legacy = serde_json::json!({"metadata": {"annotations": {ANNOTATION_OWNERS: "a"}}});
        assert_eq!(claims(&legacy, 3), (BTreeSet::new(), true));
        assert!(is_owners_key("switchyard.dev/owners-1-of-2"));
        assert!(is_owners_key(ANNOTATION_OWNERS));
        assert!(!is_owners_key("switchyard.dev/owners-x"));
        assert_eq!(owners_key(1, 2), "switchyard.dev/owners-1-of-2");
        assert_eq!(shard_manager("p", 1, 2), "switchyard/p/1-of-2");
        assert_eq!(shard_manager("p", 0, 1), "switchyard/p");
    }
}
