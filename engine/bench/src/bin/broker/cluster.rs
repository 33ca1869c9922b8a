//! Kubernetes access for the benchmark itself: discovered resources, retried requests, and
//! the creates, applies, lists and status writes of a bare client; the clusters its broker
//! connects to.

use std::collections::HashMap;
use std::future::Future;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use switchyard_core::ObjectKey;
use switchyard_kube::config::ClusterConfig;

use crate::error::Res;

/// Discovered resources by (apiVersion, kind): the resource and whether it is namespaced.
pub(crate) type Resources = HashMap<(String, String), (ApiResource, bool)>;

/// A client of one API server with its resources discovered once per kind.
#[derive(Clone)]
pub(crate) struct Cluster {
    pub(crate) client: Client,
    resources: Arc<Mutex<Resources>>,
}

pub(crate) fn is_transient(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => status.code == 429 || status.code >= 500,
        _ => true,
    }
}

/// Runs `f` again (up to 5 times) while it fails with something that may pass: 429, 5xx,
/// a connection error.
pub(crate) async fn retry<T, F, Fut>(what: &str, mut f: F) -> Res<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut attempt = 0u32;
    loop {
        match f().await {
            Ok(value) => return Ok(value),
            Err(e) if attempt < 4 && is_transient(&e) => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
            }
            Err(e) => return Err(format!("{what}: {e}").into()),
        }
    }
}

pub(crate) fn object_identity(object: &Value) -> Res<(&str, &str, Option<&str>, &str)> {
    let api_version = object["apiVersion"].as_str().ok_or("no apiVersion")?;
    let kind = object["kind"].as_str().ok_or("no kind")?;
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str);
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .ok_or("no metadata.name")?;
    Ok((api_version, kind, namespace, name))
}

impl Cluster {
    pub(crate) fn new(client: Client) -> Cluster {
        Cluster {
            client,
            resources: Arc::default(),
        }
    }

    pub(crate) async fn resource(&self, api_version: &str, kind: &str) -> Res<(ApiResource, bool)> {
        let key = (api_version.to_string(), kind.to_string());
        let cached = self
            .resources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .cloned();
        if let Some(found) = cached {
            return Ok(found);
        }
        let (resource, caps) =
            switchyard_kube::watch::resolve(&self.client, api_version, kind).await?;
        let found = (resource, caps.scope == kube::discovery::Scope::Namespaced);
        self.resources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, found.clone());
        Ok(found)
    }

    async fn api(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Res<Api<DynamicObject>> {
        let (resource, namespaced) = self.resource(api_version, kind).await?;
        Ok(match (namespace, namespaced) {
            (Some(ns), true) => Api::namespaced_with(self.client.clone(), ns, &resource),
            _ => Api::all_with(self.client.clone(), &resource),
        })
    }

    pub(crate) async fn is_namespaced(&self, api_version: &str, kind: &str) -> Res<bool> {
        Ok(self.resource(api_version, kind).await?.1)
    }

    /// POST: creates the object; returns what the server stored.
    pub(crate) async fn create(&self, object: &Value) -> Res<DynamicObject> {
        let (api_version, kind, namespace, name) = object_identity(object)?;
        let api = self.api(api_version, kind, namespace).await?;
        let body: DynamicObject = serde_json::from_value(object.clone())?;
        let params = PostParams::default();
        retry(&format!("create {kind} {name}"), || {
            api.create(&params, &body)
        })
        .await
    }

    /// Server-side apply (forced) as `manager`.
    pub(crate) async fn apply(&self, object: &Value, manager: &str) -> Res<()> {
        let (api_version, kind, namespace, name) = object_identity(object)?;
        let api = self.api(api_version, kind, namespace).await?;
        let params = PatchParams::apply(manager).force();
        let patch = Patch::Apply(object);
        retry(&format!("apply {kind} {name}"), || {
            api.patch(name, &params, &patch)
        })
        .await?;
        Ok(())
    }

    /// What the broker does for a trigger's status: a forced server-side apply of
    /// `{apiVersion, kind, metadata: {name, namespace}, status}` to the status subresource.
    pub(crate) async fn apply_status(
        &self,
        key: &ObjectKey,
        status: &Value,
        manager: &str,
    ) -> Res<()> {
        let api = self
            .api(&key.api_version, &key.kind, key.namespace.as_deref())
            .await?;
        let body = json!({
            "apiVersion": key.api_version,
            "kind": key.kind,
            "metadata": {"name": key.name, "namespace": key.namespace},
            "status": status,
        });
        let params = PatchParams::apply(manager).force();
        let patch = Patch::Apply(&body);
        retry(&format!("status of {key}"), || {
            api.patch_status(&key.name, &params, &patch)
        })
        .await?;
        Ok(())
    }

    /// What the broker does to add its finalizer: a merge patch of the list with the
    /// resourceVersion it saw as precondition.
    pub(crate) async fn add_finalizer(
        &self,
        key: &ObjectKey,
        finalizer: &str,
        resource_version: Option<&str>,
    ) -> Res<()> {
        let api = self
            .api(&key.api_version, &key.kind, key.namespace.as_deref())
            .await?;
        let patch =
            json!({"metadata": {"finalizers": [finalizer], "resourceVersion": resource_version}});
        let params = PatchParams::default();
        let patch = Patch::Merge(&patch);
        retry(&format!("finalizer of {key}"), || {
            api.patch(&key.name, &params, &patch)
        })
        .await?;
        Ok(())
    }

    /// Every object of a kind, in pages of 500, each with its apiVersion and kind.
    pub(crate) async fn list(&self, api_version: &str, kind: &str) -> Res<Vec<Value>> {
        let api = self.api(api_version, kind, None).await?;
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut params = ListParams::default().limit(500);
            if let Some(t) = &token {
                params = params.continue_token(t);
            }
            let page = retry(&format!("list {kind}"), || api.list(&params)).await?;
            for item in page.items {
                let mut object = serde_json::to_value(item)?;
                // Built-in kinds' list items carry no apiVersion and kind.
                object["apiVersion"] = json!(api_version);
                object["kind"] = json!(kind);
                out.push(object);
            }
            token = page.metadata.continue_.filter(|t| !t.is_empty());
            if token.is_none() {
                return Ok(out);
            }
        }
    }

    /// How many objects of a kind exist: a list of one item and the server's
    /// `remainingItemCount` (metadata only, every page, when the server gives no count).
    /// `selector` (a label selector) is only used for small kinds, as the server does not
    /// count selected lists.
    pub(crate) async fn count(
        &self,
        api_version: &str,
        kind: &str,
        selector: Option<&str>,
    ) -> Res<usize> {
        let api = self.api(api_version, kind, None).await?;
        let mut total = 0usize;
        let mut token: Option<String> = None;
        let mut limit = 1;
        loop {
            let mut params = ListParams::default().limit(limit);
            if let Some(s) = selector {
                params = params.labels(s);
            }
            if let Some(t) = &token {
                params = params.continue_token(t);
            }
            let page = retry(&format!("count {kind}"), || api.list_metadata(&params)).await?;
            total += page.items.len();
            if let Some(remaining) = page.metadata.remaining_item_count {
                return Ok(total + usize::try_from(remaining).unwrap_or(0));
            }
            token = page.metadata.continue_.filter(|t| !t.is_empty());
            if token.is_none() {
                return Ok(total);
            }
            limit = 500;
        }
    }

    /// Write requests the API server has answered (POST, PUT, PATCH, APPLY, DELETE), from its
    /// own `apiserver_request_total`, without its lease renewals.
    pub(crate) async fn write_requests(&self) -> Res<u64> {
        let request = http::Request::get("/metrics").body(Vec::new())?;
        let text = self.client.request_text(request).await?;
        let mut total = 0.0;
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
                continue;
            };
            let Some((labels, value)) = rest.rsplit_once("} ") else {
                continue;
            };
            let write = [
                "POST",
                "PUT",
                "PATCH",
                "APPLY",
                "DELETE",
                "DELETECOLLECTION",
            ]
            .iter()
            .any(|verb| labels.contains(&format!("verb=\"{verb}\"")));
            if write && !labels.contains("resource=\"leases\"") {
                total += value.trim().parse::<f64>()?;
            }
        }
        // Counter values are whole numbers.
        Ok(total.round().max(0.0) as u64)
    }
}

/// The clusters of the benchmark's broker: the source API server, and the Karmada one also
/// standing in for the pack's management plane (KubernetesClusters, none here). One API
/// server holds every workspace's objects (no kcp in front).
pub fn broker_clusters(source: &Path, karmada: &Path) -> Vec<ClusterConfig> {
    [
        ("source", source),
        ("karmada", karmada),
        ("management", karmada),
    ]
    .iter()
    .map(|(role, kubeconfig)| ClusterConfig {
        role: (*role).to_string(),
        name: None,
        kubeconfig: Some(kubeconfig.to_path_buf()),
        context: None,
        in_cluster: false,
        workspace_paths: false,
    })
    .collect()
}
