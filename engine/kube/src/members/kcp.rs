//! Members from a kcp APIExportEndpointSlice: the workspaces behind its virtual workspace
//! URLs.
//!
//! The slice (`apis.kcp.io/v1alpha1`, cluster-scoped, in a configured cluster) lists in
//! `status.endpoints[].url` the URLs of the APIExport's virtual workspace, one per shard.
//! For each URL the source keeps one connection (one client, one connection pool) and:
//!
//! - lists and watches, through the URL's wildcard `<url>/clusters/*`, the objects of the
//!   configured kind (by default the APIBindings of the export: every workspace that binds
//!   the export has one), metadata only;
//! - reads each object's logical cluster from its `kcp.io/cluster` annotation, as kcp's
//!   virtual workspaces present it; every logical cluster with at least one such object is a
//!   workspace of the URL (an object without the annotation names none and is ignored);
//! - makes each workspace a member named by that logical cluster, whose client sends every
//!   request through the URL's connection with the path `/clusters/<name>` put in front.
//!
//! A workspace whose last object goes, or whose URL leaves the slice (or the slice goes),
//! is a member gone; a URL that appears starts its watch. A workspace seen through two URLs
//! (it should not be: each lives on one shard) is the member of the first URL in order, and a
//! problem is reported for the other. Every URL is reached with the credentials of the
//! cluster holding the slice, as kcp's front proxy serves both.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::StreamExt;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, PartialObjectMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use switchyard_core::object::{cluster_id, is_member_name};
use tokio::sync::mpsc::{self, UnboundedSender};
use tokio::task::JoinHandle;

use super::{Connection, MemberEvent, fingerprint};
use crate::clusters::prefixed_client;
use crate::config::KcpSource;
use crate::metrics::Metrics;

/// The annotation naming an object's logical cluster in kcp.
pub const CLUSTER_ANNOTATION: &str = "kcp.io/cluster";

/// The APIExportEndpointSlice kind.
fn slice_resource() -> ApiResource {
    ApiResource {
        group: "apis.kcp.io".into(),
        version: "v1alpha1".into(),
        api_version: "apis.kcp.io/v1alpha1".into(),
        kind: "APIExportEndpointSlice".into(),
        plural: "apiexportendpointslices".into(),
    }
}

/// The URLs a slice lists, in order, each once.
pub fn slice_urls(slice: &serde_json::Value) -> Vec<String> {
    let mut urls: Vec<String> = Vec::new();
    for url in slice
        .pointer("/status/endpoints")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|e| e.get("url").and_then(serde_json::Value::as_str))
    {
        if !url.is_empty() && !urls.iter().any(|u| u == url) {
            urls.push(url.to_string());
        }
    }
    urls
}

/// What a URL's watch reports to the source.
enum UrlEvent {
    /// The workspaces seen through the URL now (after each change, and once listed).
    Workspaces(String, BTreeSet<String>),
    /// The URL's watch cannot run (`None`: it runs again).
    Problem(String, Option<String>),
}

/// One URL of the slice: its connection and what was seen through it.
struct Url {
    client: kube::Client,
    task: JoinHandle<()>,
    workspaces: BTreeSet<String>,
}

impl Drop for Url {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Watches the slice and, through each of its URLs, the workspaces behind it, until the task
/// is aborted, reporting members found and gone. `client` and `base` reach the cluster
/// holding the slice: every URL gets `base`'s credentials.
pub async fn watch_kcp(
    client: kube::Client,
    base: kube::Config,
    metrics: Arc<Metrics>,
    role: String,
    source: KcpSource,
    events: UnboundedSender<MemberEvent>,
) {
    let api: Api<DynamicObject> = Api::all_with(client, &slice_resource());
    let config =
        watcher::Config::default().fields(&format!("metadata.name={}", source.endpoint_slice));
    let stream = watcher::watcher(api, config).default_backoff();
    let mut stream = std::pin::pin!(stream);
    let (url_tx, mut url_rx) = mpsc::unbounded_channel::<UrlEvent>();
    let mut state = KcpMembers {
        role,
        source,
        urls: BTreeMap::new(),
        order: Vec::new(),
        known: BTreeMap::new(),
        url_problems: BTreeMap::new(),
        problems: BTreeMap::new(),
    };
    let mut listed: Option<serde_json::Value> = None;
    loop {
        let sent = tokio::select! {
            Some(event) = stream.next() => match event {
                Err(e) => {
                    tracing::warn!(role = %state.role, error = %e, "APIExportEndpointSlice watch failed; resuming");
                    continue;
                }
                Ok(Event::Init) => { listed = None; continue; }
                Ok(Event::InitApply(slice)) => {
                    listed = serde_json::to_value(slice).ok();
                    continue;
                }
                Ok(Event::InitDone) => {
                    let urls = listed.take().map(|s| slice_urls(&s)).unwrap_or_default();
                    state.set_urls(urls, &base, &metrics, &url_tx, &events)
                }
                Ok(Event::Apply(slice)) => {
                    let urls = serde_json::to_value(slice).map(|s| slice_urls(&s)).unwrap_or_default();
                    state.set_urls(urls, &base, &metrics, &url_tx, &events)
                }
                Ok(Event::Delete(_)) => state.set_urls(Vec::new(), &base, &metrics, &url_tx, &events),
            },
            Some(event) = url_rx.recv() => match event {
                UrlEvent::Workspaces(url, workspaces) => {
                    match state.urls.get_mut(&url) {
                        Some(known) => known.workspaces = workspaces,
                        // A URL dropped since: its last report is stale.
                        None => continue,
                    }
                    state.reconcile(&events)
                }
                UrlEvent::Problem(url, problem) => {
                    if !state.urls.contains_key(&url) {
                        continue;
                    }
                    events.send(MemberEvent::Unusable { from: state.where_url(&url), problem }).is_ok()
                }
            },
            else => return,
        };
        if !sent {
            return;
        }
    }
}

/// The URLs of one role's slice and the members seen through them.
struct KcpMembers {
    role: String,
    source: KcpSource,
    urls: BTreeMap<String, Url>,
    /// The slice's URLs in its order: a workspace seen through two is the first one's.
    order: Vec<String>,
    /// Member name -> the URL it is reached through.
    known: BTreeMap<String, String>,
    /// URLs that cannot get a client, and why.
    url_problems: BTreeMap<String, String>,
    /// Where -> problem, as last reported (workspaces and URLs without a client).
    problems: BTreeMap<String, String>,
}

impl KcpMembers {
    fn where_url(&self, url: &str) -> String {
        format!(
            "APIExportEndpointSlice {} URL {url}",
            self.source.endpoint_slice
        )
    }

    /// The slice's URLs now: new ones get a connection and a watch, those gone take their
    /// members with them. False when nobody listens any more.
    fn set_urls(
        &mut self,
        urls: Vec<String>,
        base: &kube::Config,
        metrics: &Arc<Metrics>,
        url_tx: &UnboundedSender<UrlEvent>,
        events: &UnboundedSender<MemberEvent>,
    ) -> bool {
        let dropped: Vec<String> = self
            .urls
            .keys()
            .filter(|url| !urls.contains(url))
            .cloned()
            .collect();
        for url in dropped {
            tracing::info!(role = %self.role, %url, "kcp URL removed: its workspaces' watches stop");
            self.urls.remove(&url);
            // What its watch reported of itself goes with it.
            let cleared = MemberEvent::Unusable {
                from: self.where_url(&url),
                problem: None,
            };
            if events.send(cleared).is_err() {
                return false;
            }
        }
        self.url_problems.retain(|url, _| urls.contains(url));
        for url in &urls {
            if self.urls.contains_key(url) {
                continue;
            }
            let client = match url_client(base, url, metrics) {
                Ok(client) => client,
                Err(problem) => {
                    self.url_problems.insert(url.clone(), problem);
                    continue;
                }
            };
            self.url_problems.remove(url);
            tracing::info!(role = %self.role, %url, "kcp URL added: its workspaces are watched");
            let task = tokio::spawn(watch_url(
                url.clone(),
                prefixed_client(&client, "/clusters/*"),
                self.source.clone(),
                url_tx.clone(),
            ));
            self.urls.insert(
                url.clone(),
                Url {
                    client,
                    task,
                    workspaces: BTreeSet::new(),
                },
            );
        }
        self.order = urls;
        self.reconcile(events)
    }

    /// Compares the members the URLs show now with those reported, and reports the
    /// difference. False when nobody listens any more.
    fn reconcile(&mut self, events: &UnboundedSender<MemberEvent>) -> bool {
        let mut desired: BTreeMap<String, String> = BTreeMap::new();
        let mut problems: BTreeMap<String, String> = BTreeMap::new();
        for url in &self.order {
            let Some(known) = self.urls.get(url) else {
                continue;
            };
            for workspace in &known.workspaces {
                let from = format!("{} workspace {workspace}", self.where_url(url));
                if !is_member_name(workspace) {
                    problems.insert(
                        from,
                        format!(
                            "logical cluster `{workspace}` is not a member cluster name (1-253 letters, digits and `-._#:`)"
                        ),
                    );
                } else if let Some(first) = desired.get(workspace) {
                    problems.insert(
                        from,
                        format!("the workspace is seen through {first} too, whose member it is"),
                    );
                } else {
                    desired.insert(workspace.clone(), url.clone());
                }
            }
        }
        for (url, problem) in &self.url_problems {
            problems.insert(self.where_url(url), problem.clone());
        }
        let gone: Vec<(String, String)> = self
            .known
            .iter()
            .filter(|(member, url)| desired.get(*member) != Some(*url))
            .map(|(m, u)| (m.clone(), u.clone()))
            .collect();
        for (member, url) in gone {
            self.known.remove(&member);
            let why = if !self.urls.contains_key(&url) {
                format!(
                    "its URL {url} left APIExportEndpointSlice {}",
                    self.source.endpoint_slice
                )
            } else if desired.contains_key(&member) {
                format!("it moved from URL {url}")
            } else {
                format!(
                    "no {} of its workspace is seen through {url} any more",
                    self.source.kind
                )
            };
            let gone = MemberEvent::Gone {
                cluster: cluster_id(&self.role, &member),
                why,
            };
            if events.send(gone).is_err() {
                return false;
            }
        }
        for (member, url) in desired {
            if self.known.contains_key(&member) {
                continue;
            }
            let Some(known) = self.urls.get(&url) else {
                continue;
            };
            let client = prefixed_client(&known.client, &format!("/clusters/{member}"));
            let found = MemberEvent::Found {
                cluster: cluster_id(&self.role, &member),
                connection: Connection::Client(client),
                fingerprint: fingerprint(&member, &url),
                from: format!("{} workspace {member}", self.where_url(&url)),
            };
            if events.send(found).is_err() {
                return false;
            }
            self.known.insert(member, url);
        }
        let sent = super::report_problems(&self.problems, &problems, events);
        self.problems = problems;
        sent
    }
}

/// The one client of a URL: the holding cluster's configuration and credentials, at the
/// URL.
fn url_client(
    base: &kube::Config,
    url: &str,
    metrics: &Arc<Metrics>,
) -> Result<kube::Client, String> {
    let mut config = base.clone();
    config.cluster_url = url
        .parse()
        .map_err(|e| format!("the URL does not parse: {e}"))?;
    crate::instrument::client(config, metrics).map_err(|e| format!("cannot create a client: {e}"))
}

/// Watches the objects of the source's kind through one URL's wildcard until the task is
/// aborted, reporting the logical clusters they live in after every change.
async fn watch_url(
    url: String,
    wildcard: kube::Client,
    source: KcpSource,
    events: UnboundedSender<UrlEvent>,
) {
    let resource = loop {
        match crate::watch::resolve(&wildcard, &source.api_version, &source.kind).await {
            Ok((resource, _)) => break resource,
            Err(e) => {
                let problem = format!(
                    "cannot resolve {} {} through it: {e}",
                    source.api_version, source.kind
                );
                if events
                    .send(UrlEvent::Problem(url.clone(), Some(problem)))
                    .is_err()
                {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            }
        }
    };
    if events.send(UrlEvent::Problem(url.clone(), None)).is_err() {
        return;
    }
    // Metadata only: the annotation is all that is read.
    let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(wildcard, &resource);
    let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
    let mut stream = std::pin::pin!(stream);
    // Logical cluster -> its objects (namespace/name).
    let mut objects: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut relist: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut reported: Option<BTreeSet<String>> = None;
    while let Some(event) = stream.next().await {
        match event {
            Err(e) => {
                tracing::warn!(%url, error = %e, "kcp workspaces watch failed; resuming");
                continue;
            }
            Ok(Event::Init) => relist.clear(),
            Ok(Event::InitApply(object)) => {
                if let Some((workspace, key)) = located(&object.metadata) {
                    relist.entry(workspace).or_default().insert(key);
                }
                continue;
            }
            Ok(Event::InitDone) => objects = std::mem::take(&mut relist),
            Ok(Event::Apply(object)) => {
                if let Some((workspace, key)) = located(&object.metadata) {
                    objects.entry(workspace).or_default().insert(key);
                }
            }
            Ok(Event::Delete(object)) => {
                if let Some((workspace, key)) = located(&object.metadata)
                    && let Some(keys) = objects.get_mut(&workspace)
                {
                    keys.remove(&key);
                    if keys.is_empty() {
                        objects.remove(&workspace);
                    }
                }
            }
        }
        let workspaces: BTreeSet<String> = objects.keys().cloned().collect();
        if reported.as_ref() != Some(&workspaces) {
            if events
                .send(UrlEvent::Workspaces(url.clone(), workspaces.clone()))
                .is_err()
            {
                return;
            }
            reported = Some(workspaces);
        }
    }
}

/// An object's logical cluster and its `namespace/name`, if it names one.
fn located(metadata: &kube::api::ObjectMeta) -> Option<(String, String)> {
    let workspace = metadata
        .annotations
        .as_ref()?
        .get(CLUSTER_ANNOTATION)
        .filter(|w| !w.is_empty())?
        .clone();
    let key = format!(
        "{}/{}",
        metadata.namespace.as_deref().unwrap_or_default(),
        metadata.name.as_deref().unwrap_or_default()
    );
    Some((workspace, key))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn a_slice_lists_each_url_once_in_order() {
        let slice = json!({"status": {"endpoints": [
            {"url": "https://shard-2/services/apiexport/root/x"},
            {"url": "https://shard-1/services/apiexport/root/x"},
            {"url": "https://shard-2/services/apiexport/root/x"},
            {"url": ""},
            {"other": 1},
        ]}});
        assert_eq!(
            slice_urls(&slice),
            [
                "https://shard-2/services/apiexport/root/x",
                "https://shard-1/services/apiexport/root/x"
            ]
        );
        assert!(slice_urls(&json!({"spec": {}})).is_empty());
    }

    #[test]
    fn objects_name_their_logical_cluster() {
        let meta = |annotations: Option<serde_json::Value>| -> kube::api::ObjectMeta {
            serde_json::from_value(json!({
                "name": "b", "namespace": "ns", "annotations": annotations,
            }))
            .unwrap()
        };
        assert_eq!(
            located(&meta(Some(json!({"kcp.io/cluster": "2x7ugr"})))),
            Some(("2x7ugr".to_string(), "ns/b".to_string()))
        );
        assert_eq!(located(&meta(Some(json!({"kcp.io/cluster": ""})))), None);
        assert_eq!(located(&meta(None)), None);
    }
}
