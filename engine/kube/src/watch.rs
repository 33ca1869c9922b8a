//! One watcher per (cluster, kind): kube-runtime's watcher (resourceVersion resume, relist on
//! 410 Gone, backoff) feeding a [`KindCache`] and telling the controller what changed.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, PartialObjectMeta};
use kube::core::GroupVersionKind;
use kube::discovery::ApiCapabilities;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, discovery};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use crate::store::{CacheKey, Cached, KindCache, KindKey};

/// How a kind is watched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchMode {
    /// Whole objects: triggers and everything rules look up.
    Full,
    /// Whole objects with a label selector: outputs the pack reads back (stage outputs).
    Labelled { labels: String },
    /// Metadata only, of objects with a label selector: outputs no rule reads.
    Metadata { labels: String },
}

impl WatchMode {
    /// How much a mode sees: a kind two packs need is watched in the stronger mode.
    pub fn strength(&self) -> u8 {
        match self {
            WatchMode::Metadata { .. } => 0,
            WatchMode::Labelled { .. } => 1,
            WatchMode::Full => 2,
        }
    }
}

/// An object that changed in a cache.
#[derive(Debug, Clone)]
pub struct Change {
    pub kind: KindKey,
    /// The object's cluster: the watch's, or `role/<workspace>` in a role of workspaces.
    pub cluster: String,
    pub namespace: Option<String>,
    pub name: String,
    /// The object as it is now (`None`: deleted) and as it was, as the cache keeps them.
    pub current: Option<Arc<Cached>>,
    pub previous: Option<Arc<Cached>>,
}

/// What watchers tell the controller.
#[derive(Debug)]
pub enum WatchEvent {
    Changed(Change),
    /// The cache holds a complete list (after the first list, and after every relist).
    Synced(KindKey),
    /// The kind cannot be watched (not served, forbidden); retried with backoff.
    Failed(KindKey, String),
}

/// The kind's API resource and scope, from discovery.
pub async fn resolve(
    client: &Client,
    api_version: &str,
    kind: &str,
) -> Result<(ApiResource, ApiCapabilities), kube::Error> {
    let (group, version) = match api_version.rsplit_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    let gvk = GroupVersionKind::gvk(group, version, kind);
    discovery::pinned_kind(client, &gvk).await
}

/// Runs one watch until the task is aborted.
pub async fn run(
    client: Client,
    key: KindKey,
    mode: WatchMode,
    cache: Arc<KindCache>,
    events: UnboundedSender<WatchEvent>,
) {
    let mut attempt = 0u32;
    let resource = loop {
        match resolve(&client, &key.api_version, &key.kind).await {
            Ok((resource, _)) => break resource,
            Err(e) => {
                attempt += 1;
                let message = format!("cannot resolve {key}: {e}");
                tracing::warn!(watch = %key, error = %e, "kind not served; retrying");
                if events
                    .send(WatchEvent::Failed(key.clone(), message))
                    .is_err()
                {
                    return;
                }
                let delay = Duration::from_millis(500 * u64::from(attempt.min(20)));
                tokio::time::sleep(delay.min(Duration::from_secs(10))).await;
            }
        }
    };
    match mode {
        WatchMode::Full => {
            let api: Api<DynamicObject> = Api::all_with(client, &resource);
            let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
            pump(stream, &key, &cache, &events, false).await;
        }
        WatchMode::Labelled { labels } => {
            let api: Api<DynamicObject> = Api::all_with(client, &resource);
            let config = watcher::Config::default().labels(&labels);
            let stream = watcher::watcher(api, config).default_backoff();
            pump(stream, &key, &cache, &events, false).await;
        }
        WatchMode::Metadata { labels } => {
            let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client, &resource);
            let config = watcher::Config::default().labels(&labels);
            let stream = watcher::watcher(api, config).default_backoff();
            pump(stream, &key, &cache, &events, true).await;
        }
    }
}

async fn pump<K: serde::Serialize>(
    stream: impl futures::Stream<Item = Result<Event<K>, watcher::Error>>,
    key: &KindKey,
    cache: &KindCache,
    events: &UnboundedSender<WatchEvent>,
    managers: bool,
) {
    let mut stream = std::pin::pin!(stream);
    // A relist in compact form: a first list of ten thousand objects is held at once.
    let mut relist: Vec<(CacheKey, Arc<Cached>)> = Vec::new();
    while let Some(event) = stream.next().await {
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                tracing::warn!(watch = %key, error = %e, "watch failed; resuming");
                continue;
            }
        };
        let sent = match event {
            Event::Init => {
                relist.clear();
                true
            }
            Event::InitApply(object) => {
                if let Some(object) = to_value(key, &object, managers) {
                    match cache.key(&object) {
                        Some(at) => relist.push((at, Arc::new(cache.dictionary.compact(&object)))),
                        None => unplaced(key, &object),
                    }
                }
                true
            }
            Event::InitDone => {
                let fresh = std::mem::take(&mut relist);
                let mut changes = Vec::new();
                for (at, object) in &fresh {
                    let previous = cache.current(at);
                    if !same_version(previous.as_deref(), object) {
                        changes.push(change(key, at, Some(object.clone()), previous));
                    }
                }
                for (at, gone) in cache.replace(fresh) {
                    changes.push(change(key, &at, None, Some(gone)));
                }
                cache.set_synced();
                changes
                    .into_iter()
                    .all(|c| events.send(WatchEvent::Changed(c)).is_ok())
                    && events.send(WatchEvent::Synced(key.clone())).is_ok()
            }
            Event::Apply(object) => match to_value(key, &object, managers) {
                Some(object) => match cache.key(&object) {
                    Some(at) => {
                        let object = Arc::new(cache.dictionary.compact(&object));
                        match cache.insert(at.clone(), object.clone()) {
                            previous if same_version(previous.as_deref(), &object) => true,
                            previous => events
                                .send(WatchEvent::Changed(change(
                                    key,
                                    &at,
                                    Some(object),
                                    previous,
                                )))
                                .is_ok(),
                        }
                    }
                    None => {
                        unplaced(key, &object);
                        true
                    }
                },
                None => true,
            },
            Event::Delete(object) => match to_value(key, &object, managers) {
                Some(object) => match cache.key(&object) {
                    Some(at) => {
                        let previous = cache
                            .remove(&at)
                            .or_else(|| Some(Arc::new(cache.dictionary.compact(&object))));
                        events
                            .send(WatchEvent::Changed(change(key, &at, None, previous)))
                            .is_ok()
                    }
                    None => true,
                },
                None => true,
            },
        };
        if !sent {
            // The controller is gone: the broker is shutting down.
            return;
        }
    }
}

/// What changed about the object kept under `at`: where it lives (its workspace, in a role
/// of workspaces) and its versions.
fn change(
    key: &KindKey,
    at: &CacheKey,
    current: Option<Arc<Cached>>,
    previous: Option<Arc<Cached>>,
) -> Change {
    Change {
        kind: key.clone(),
        cluster: KindCache::cluster_at(&key.cluster, at),
        namespace: at.1.clone(),
        name: at.2.clone(),
        current,
        previous,
    }
}

/// An object of a role of workspaces that names no workspace: it cannot be told apart from
/// another workspace's, so it is left out (a virtual workspace never serves one).
fn unplaced(key: &KindKey, object: &Value) {
    let (namespace, name) = identity(object);
    tracing::warn!(
        watch = %key,
        namespace = namespace.as_deref().unwrap_or(""),
        %name,
        "object names no workspace; ignored"
    );
}

fn same_version(previous: Option<&Cached>, current: &Cached) -> bool {
    previous.is_some_and(|p| {
        p.resource_version().is_some() && p.resource_version() == current.resource_version()
    })
}

/// The namespace and name of a cached object.
pub fn identity(object: &Value) -> (Option<String>, String) {
    let field = |f: &str| {
        object
            .pointer(&format!("/metadata/{f}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let namespace = field("namespace");
    ((!namespace.is_empty()).then_some(namespace), field("name"))
}

/// The cached form of a watched object: JSON with its apiVersion and kind (list items of
/// built-in kinds may come without them) and without the field sets of `managedFields`,
/// which nothing reads and which are often the largest part of an object. Caches of
/// metadata (`managers`) keep each entry's manager, operation, subresource and time: after a
/// restart they tell whether anyone else wrote an output since the pack applied it.
fn to_value<K: serde::Serialize>(key: &KindKey, object: &K, managers: bool) -> Option<Arc<Value>> {
    let mut value = match serde_json::to_value(object) {
        Ok(value) => value,
        Err(e) => {
            tracing::warn!(watch = %key, error = %e, "object cannot be cached");
            return None;
        }
    };
    let map = value.as_object_mut()?;
    map.insert("apiVersion".into(), Value::String(key.api_version.clone()));
    map.insert("kind".into(), Value::String(key.kind.clone()));
    if let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut) {
        let entries = metadata.remove("managedFields");
        if managers && let Some(Value::Array(entries)) = entries {
            let summary: Vec<Value> = entries
                .into_iter()
                .map(|mut entry| {
                    if let Some(e) = entry.as_object_mut() {
                        e.retain(|k, _| {
                            matches!(k.as_str(), "manager" | "operation" | "subresource" | "time")
                        });
                    }
                    entry
                })
                .collect();
            metadata.insert("managedFields".into(), Value::Array(summary));
        }
    }
    Some(Arc::new(value))
}
