//! A timed reload: the pack's file rewritten, the time until every affected output carries
//! the edit, counted through a metadata watch.

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DynamicObject, PartialObjectMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use switchyard_kube::controller::Writes;

use crate::child::BrokerProcess;
use crate::cluster::Cluster;
use crate::error::{BoxError, Res};
use crate::figures::{cpu_secs, delta, int, secs, writes_text};

pub(crate) const PP_API_VERSION: &str = "policy.karmada.io/v1alpha1";

/// What one reload did.
pub(crate) struct Reload {
    /// From writing the file until every affected output carries the edit.
    pub(crate) time: Duration,
    /// Until the first one did.
    first: Option<Duration>,
    /// Broker CPU over `time`.
    cpu_ticks: u64,
    /// Writes until the broker was idle again.
    pub(crate) writes: Writes,
    /// Outputs carrying the edit once the broker was idle.
    annotated: usize,
}

/// Writes `text` to `path` (a file of the broker's pack) and waits until `expected`
/// PropagationPolicies carry `annotation` (a metadata watch started before the write), then
/// until the broker is idle.
pub(crate) async fn measure_reload(
    broker: &mut BrokerProcess,
    karmada: &Cluster,
    path: &Path,
    text: &str,
    annotation: &'static str,
    expected: usize,
) -> Res<Reload> {
    let resource = karmada
        .resource(PP_API_VERSION, "PropagationPolicy")
        .await?
        .0;
    let api: Api<PartialObjectMeta<DynamicObject>> =
        Api::all_with(karmada.client.clone(), &resource);
    let (watch_task, mut progress) = watch_annotated(api, annotation);
    let listed = async {
        while !progress.borrow().1 {
            progress.changed().await?;
        }
        Ok::<(), BoxError>(())
    };
    tokio::time::timeout(Duration::from_secs(60), listed)
        .await
        .map_err(|_| "the PropagationPolicy watch did not list within 60 s")??;
    let before = broker.writes().await?;
    let ticks_before = broker.cpu_ticks()?;
    let started = Instant::now();
    std::fs::write(path, text)?;
    let mut first = None;
    let reached = async {
        loop {
            let count = progress.borrow().0;
            if count > 0 && first.is_none() {
                first = Some(started.elapsed());
            }
            if count >= expected {
                return Ok::<Duration, BoxError>(started.elapsed());
            }
            progress.changed().await?;
        }
    };
    let time = tokio::time::timeout(Duration::from_secs(300), reached)
        .await
        .map_err(|_| {
            format!("the edit did not reach the {expected} PropagationPolicies within 300 s")
        })??;
    let cpu_ticks = broker.cpu_ticks()? - ticks_before;
    broker.wait_quiet(Duration::from_secs(300)).await?;
    let writes = delta(&broker.writes().await?, &before);
    let annotated = progress.borrow().0;
    watch_task.abort();
    Ok(Reload {
        time,
        first,
        cpu_ticks,
        writes,
        annotated,
    })
}

pub(crate) fn print_reload(r: &Reload) {
    println!(
        "     the first edited PropagationPolicy appeared after {}; broker CPU until the last one: {}; the reload made {} ({} PropagationPolicies annotated once idle)",
        r.first.map_or_else(|| "-".to_string(), secs),
        cpu_secs(r.cpu_ticks),
        writes_text(&r.writes),
        int(r.annotated as u64)
    );
}

/// Counts the objects carrying `annotation`, from a metadata watch: (count, initial list done).
pub(crate) fn watch_annotated(
    api: Api<PartialObjectMeta<DynamicObject>>,
    annotation: &'static str,
) -> (
    tokio::task::JoinHandle<()>,
    tokio::sync::watch::Receiver<(usize, bool)>,
) {
    let (tx, rx) = tokio::sync::watch::channel((0usize, false));
    let task = tokio::spawn(async move {
        let events = watcher::watcher(api, watcher::Config::default()).default_backoff();
        let mut events = std::pin::pin!(events);
        let mut annotated: HashSet<String> = HashSet::new();
        let mut listing: HashSet<String> = HashSet::new();
        let mut listed = false;
        let id = |m: &kube::core::ObjectMeta| {
            format!(
                "{}/{}",
                m.namespace.as_deref().unwrap_or_default(),
                m.name.as_deref().unwrap_or_default()
            )
        };
        let has = |m: &kube::core::ObjectMeta| {
            m.annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(annotation))
        };
        while let Some(event) = events.next().await {
            match event {
                Ok(Event::Init) => listing.clear(),
                Ok(Event::InitApply(o)) => {
                    if has(&o.metadata) {
                        listing.insert(id(&o.metadata));
                    }
                }
                Ok(Event::InitDone) => {
                    annotated = std::mem::take(&mut listing);
                    listed = true;
                }
                Ok(Event::Apply(o)) => {
                    if has(&o.metadata) {
                        annotated.insert(id(&o.metadata));
                    } else {
                        annotated.remove(&id(&o.metadata));
                    }
                }
                Ok(Event::Delete(o)) => {
                    annotated.remove(&id(&o.metadata));
                }
                Err(_) => continue,
            }
            let _ = tx.send((annotated.len(), listed));
        }
    });
    (task, rx)
}
