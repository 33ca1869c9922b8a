//! Leader election: one broker of several writes, through a `coordination.k8s.io` Lease in the
//! broker's own cluster, with `kube-lease-manager` (the protocol: acquire, renew before expiry,
//! take over an expired lease, release).
//!
//! What this module adds around it: a broker that cannot renew (its cluster does not answer,
//! the lease was taken) stops leading at once rather than when it notices the loss later; a
//! follower watches the Lease, so a lease released by a leader that shuts down is taken within
//! a second, not when the follower's timer would look again; and the state is published as
//! `leader_election_master_status`.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use crate::metrics::Metrics;

/// Where and how the lease is held.
#[derive(Debug, Clone)]
pub struct Election {
    pub lease_name: String,
    pub namespace: String,
    /// This broker's name in the lease (`holderIdentity`).
    pub identity: String,
    /// How long a lease lasts without renewal: the longest a dead leader holds it.
    pub lease_seconds: u64,
    /// How long before expiry the leader renews.
    pub renew_before_seconds: u64,
}

/// A running election: its state as a channel, and the way to give the lease up.
pub struct Elector {
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Elector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Elector").finish_non_exhaustive()
    }
}

impl Elector {
    /// Stops leading and releases the lease (a follower takes it at once).
    pub async fn release(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
    }
}

impl Drop for Elector {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Starts competing for the lease; the channel says whether this broker leads now.
pub fn elect(
    client: kube::Client,
    election: Election,
    metrics: Arc<Metrics>,
) -> (watch::Receiver<bool>, Elector) {
    let (leading, receiver) = watch::channel(false);
    let (stop, stopped) = oneshot::channel();
    metrics.set_leader(&election.lease_name, false);
    let task = tokio::spawn(run(client, election, metrics, leading, stopped));
    (
        receiver,
        Elector {
            stop: Some(stop),
            task: Some(task),
        },
    )
}

async fn build(client: &kube::Client, election: &Election) -> Option<LeaseManager> {
    let built = LeaseManagerBuilder::new(client.clone(), &election.lease_name)
        .with_namespace(&election.namespace)
        .with_identity(&election.identity)
        .with_duration(election.lease_seconds)
        .with_grace(election.renew_before_seconds)
        .with_field_manager("switchyard-leader-election")
        .build()
        .await;
    match built {
        Ok(manager) => Some(manager),
        Err(error) => {
            tracing::warn!(%error, lease = %election.lease_name, "lease not reachable; retrying");
            None
        }
    }
}

async fn run(
    client: kube::Client,
    election: Election,
    metrics: Arc<Metrics>,
    leading: watch::Sender<bool>,
    mut stopped: oneshot::Receiver<()>,
) {
    let set = |now: bool| {
        if *leading.borrow() != now {
            if now {
                tracing::info!(lease = %election.lease_name, identity = %election.identity, "leading");
            } else {
                tracing::warn!(lease = %election.lease_name, identity = %election.identity, "not leading");
            }
        }
        leading.send_replace(now);
        metrics.set_leader(&election.lease_name, now);
    };
    // A follower looks at the lease again whenever it changes (its holder released it).
    let leases: Api<Lease> = Api::namespaced(client.clone(), &election.namespace);
    let config =
        watcher::Config::default().fields(&format!("metadata.name={}", election.lease_name));
    let mut lease_changes = std::pin::pin!(
        watcher::watcher(leases, config)
            .default_backoff()
            .applied_objects()
    );
    let mut manager: Option<LeaseManager> = None;
    loop {
        let Some(current) = &manager else {
            tokio::select! {
                _ = &mut stopped => return,
                built = build(&client, &election) => {
                    if built.is_none() {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                    manager = built;
                }
            }
            continue;
        };
        let is_leading = *leading.borrow();
        tokio::select! {
            _ = &mut stopped => {
                if is_leading {
                    set(false);
                    if let Err(error) = current.release().await {
                        tracing::warn!(%error, "releasing the lease");
                    } else {
                        tracing::info!(lease = %election.lease_name, "lease released");
                    }
                }
                return;
            }
            changed = current.changed() => match changed {
                Ok(now) => set(now),
                Err(error) => {
                    // Cannot renew or read the lease: stop writing now (another broker may
                    // hold it by the time this one would notice), and start over.
                    tracing::warn!(%error, "lease not renewed");
                    set(false);
                    manager = None;
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            },
            // Only a follower looks: the leader's own renewals change the lease. The manager
            // re-reads a lease only once its cached copy has expired, so a released lease is
            // taken by a fresh manager, which reads it at once.
            Some(change) = lease_changes.next(), if !is_leading => match change {
                Ok(lease) if released(&lease) => manager = None,
                Ok(_) => {}
                // The manager's own reads still find a released lease, only later.
                Err(error) => tracing::warn!(%error, "watching the lease"),
            },
        }
    }
}

/// Whether no one holds the lease (its holder released it, or it was never taken).
fn released(lease: &Lease) -> bool {
    lease
        .spec
        .as_ref()
        .and_then(|spec| spec.holder_identity.as_deref())
        .is_none_or(str::is_empty)
}

/// This broker's identity in the lease: the pod's name when it runs in one, else the host's,
/// with a random suffix so two processes on one host differ.
pub fn identity() -> String {
    let base = std::env::var("POD_NAME")
        .ok()
        .filter(|n| !n.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|n| !n.is_empty()))
        .unwrap_or_else(|| "switchyard".to_string());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{base}_{:08x}", nanos ^ std::process::id())
}
