//! Which clusters answer and what they forbid, from the broker's own calls.
//!
//! A call that gets no answer (or a 429 or 5xx) marks its cluster unreachable and starts a
//! probe (`GET /version`, once a second) that notices when it answers again; then
//! [`Reachability::recoveries`] changes, and the broker retries at once the work that waits
//! out its backoff, instead of up to a minute later. A 403 records the call it refused until
//! the same call succeeds. `/readyz` lists both.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use tokio::sync::watch;

use crate::failure::{ApplyError, FailureKind};

/// How often an unreachable cluster is probed.
const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// A cluster that did not answer.
#[derive(Debug, Clone)]
struct Down {
    since: DateTime<Utc>,
    message: String,
    probing: bool,
}

#[derive(Default)]
struct Inner {
    down: BTreeMap<String, Down>,
    /// (cluster, what was refused: `create apps/v1 Deployment`) -> when, and the message.
    forbidden: BTreeMap<(String, String), (DateTime<Utc>, String)>,
}

/// Shared by the clusters' writers (which report) and the broker (which reacts).
pub struct Reachability {
    inner: Mutex<Inner>,
    recovered: watch::Sender<u64>,
}

impl Default for Reachability {
    fn default() -> Self {
        Reachability {
            inner: Mutex::default(),
            recovered: watch::Sender::new(0),
        }
    }
}

impl std::fmt::Debug for Reachability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reachability").finish_non_exhaustive()
    }
}

impl Reachability {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes each time an unreachable cluster answers again.
    pub fn recoveries(&self) -> watch::Receiver<u64> {
        self.recovered.subscribe()
    }

    /// A call to `cluster` (`what`: `create apps/v1 Deployment`) failed.
    pub fn failed(self: &Arc<Self>, what: &str, error: &ApplyError, client: Option<kube::Client>) {
        let cluster = error.cluster().to_string();
        match error.kind() {
            FailureKind::Infrastructure => {
                let start_probe = {
                    let mut inner = self.lock();
                    let entry = inner.down.entry(cluster.clone()).or_insert_with(|| {
                        tracing::warn!(%cluster, error = %error, "cluster unreachable");
                        Down {
                            since: Utc::now(),
                            message: String::new(),
                            probing: false,
                        }
                    });
                    entry.message = error.cause();
                    let start = !entry.probing && client.is_some();
                    entry.probing |= start;
                    start
                };
                if start_probe && let Some(client) = client {
                    self.probe(cluster, client);
                }
            }
            _ if error.is_forbidden() => {
                self.lock()
                    .forbidden
                    .insert((cluster, what.to_string()), (Utc::now(), error.message()));
            }
            _ => {}
        }
    }

    /// A call to `cluster` (`what`) got an answer.
    pub fn succeeded(&self, cluster: &str, what: &str) {
        let mut inner = self.lock();
        if !inner.forbidden.is_empty() {
            inner
                .forbidden
                .remove(&(cluster.to_string(), what.to_string()));
        }
        if inner.down.remove(cluster).is_some() {
            drop(inner);
            tracing::info!(%cluster, "cluster reachable again");
            self.recovered.send_modify(|n| *n += 1);
        }
    }

    fn probe(self: &Arc<Self>, cluster: String, client: kube::Client) {
        let reachability = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(PROBE_INTERVAL).await;
                if !reachability.lock().down.contains_key(&cluster) {
                    return;
                }
                match client.apiserver_version().await {
                    Ok(_) => {
                        reachability.succeeded(&cluster, "probe");
                        return;
                    }
                    Err(e) => {
                        tracing::debug!(%cluster, error = %e, "cluster still unreachable");
                    }
                }
            }
        });
    }

    /// A member that is gone: nothing is said of it any more (a probe stops at its next
    /// tick).
    pub fn forget(&self, cluster: &str) {
        let mut inner = self.lock();
        inner.down.remove(cluster);
        inner.forbidden.retain(|(c, _), _| c != cluster);
    }

    /// How many clusters are marked unreachable.
    pub fn unreachable(&self) -> usize {
        self.lock().down.len()
    }

    /// Lines for `/readyz`: each unreachable cluster and each forbidden call.
    pub fn report(&self) -> Vec<String> {
        let inner = self.lock();
        let when = |t: &DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
        let mut lines: Vec<String> = inner
            .down
            .iter()
            .map(|(cluster, down)| {
                format!(
                    "cluster {cluster} unreachable since {}: {}",
                    when(&down.since),
                    down.message
                )
            })
            .collect();
        lines.extend(inner.forbidden.iter().map(|((cluster, what), (at, _))| {
            format!(
                "forbidden in cluster {cluster}: {what} (last at {})",
                when(at)
            )
        }));
        lines
    }
}
