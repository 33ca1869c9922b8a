//! Writes to the clusters: server-side apply of outputs, status and finalizers (one field
//! manager per pack), deletes and orphaning. Every function is one API call (after a cached
//! discovery), so the controller decides what to write and this module only writes it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::discovery::Scope;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Error as KubeError};
use serde_json::{Value, json};
use switchyard_core::ObjectKey;
use switchyard_core::evaluate::{LABEL_MANAGED_BY, LABEL_PACK};

use crate::watch;

/// Why a write failed.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("no cluster `{0}` is configured")]
    UnknownCluster(String),
    #[error("{api_version} {kind} is not served by cluster `{cluster}`: {source}")]
    Discovery {
        cluster: String,
        api_version: String,
        kind: String,
        #[source]
        source: Box<KubeError>,
    },
    #[error("{action} {object}: {source}")]
    Api {
        action: &'static str,
        object: String,
        #[source]
        source: Box<KubeError>,
    },
}

impl ApplyError {
    /// A short reason for conditions and logs.
    pub fn reason(&self) -> &'static str {
        match self {
            ApplyError::UnknownCluster(_) => "UnknownCluster",
            ApplyError::Discovery { .. } => "KindNotServed",
            ApplyError::Api { .. } => "ApplyFailed",
        }
    }

    /// The API answered 409: a precondition (uid) failed.
    pub fn is_conflict(&self) -> bool {
        matches!(self, ApplyError::Api { source, .. } if matches!(**source, KubeError::Api(ref s) if s.code == 409))
    }

    /// The API answered 404.
    pub fn is_not_found(&self) -> bool {
        matches!(self, ApplyError::Api { source, .. } if matches!(**source, KubeError::Api(ref s) if s.code == 404))
    }
}

/// The field manager of a pack: `switchyard/<pack>`.
pub fn field_manager(pack: &str) -> String {
    format!("switchyard/{pack}")
}

/// Cluster, apiVersion, kind.
type ResourceKey = (String, String, String);

/// Who reports Events: `switchyard`, and the pod when it runs in one.
fn reporter() -> Reporter {
    Reporter {
        controller: "switchyard".into(),
        instance: std::env::var("POD_NAME").ok(),
    }
}

/// A kind as a cluster serves it.
#[derive(Clone)]
struct Resource {
    api: ApiResource,
    namespaced: bool,
    /// It has a status subresource (built-in kinds like ConfigMap do not).
    has_status: bool,
}

/// The API clients of the clusters, and the resources discovered in each.
pub struct Clusters {
    clients: BTreeMap<String, Client>,
    recorders: BTreeMap<String, Recorder>,
    resources: Mutex<HashMap<ResourceKey, Resource>>,
}

impl Clusters {
    /// `clients` maps the core's cluster names (`source`, `provider/x86`) to clients.
    pub fn new(clients: BTreeMap<String, Client>) -> Arc<Self> {
        let recorders = clients
            .iter()
            .map(|(name, client)| (name.clone(), Recorder::new(client.clone(), reporter())))
            .collect();
        Arc::new(Clusters {
            recorders,
            clients,
            resources: Mutex::new(HashMap::new()),
        })
    }

    pub fn client(&self, cluster: &str) -> Result<&Client, ApplyError> {
        self.clients
            .get(cluster)
            .ok_or_else(|| ApplyError::UnknownCluster(cluster.to_string()))
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.clients.keys().map(String::as_str)
    }

    /// The API resource of a kind, discovered once per cluster.
    async fn resource(
        &self,
        cluster: &str,
        api_version: &str,
        kind: &str,
    ) -> Result<Resource, ApplyError> {
        let key = (
            cluster.to_string(),
            api_version.to_string(),
            kind.to_string(),
        );
        if let Some(found) = self
            .resources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
        {
            return Ok(found.clone());
        }
        let client = self.client(cluster)?;
        let (api, capabilities) =
            watch::resolve(client, api_version, kind)
                .await
                .map_err(|source| ApplyError::Discovery {
                    cluster: cluster.to_string(),
                    api_version: api_version.to_string(),
                    kind: kind.to_string(),
                    source: Box::new(source),
                })?;
        let resource = Resource {
            api,
            namespaced: capabilities.scope == Scope::Namespaced,
            has_status: capabilities
                .subresources
                .iter()
                .any(|(sub, _)| sub.plural == "status"),
        };
        self.resources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, resource.clone());
        Ok(resource)
    }

    async fn api(&self, key: &ObjectKey) -> Result<Api<DynamicObject>, ApplyError> {
        let resource = self
            .resource(&key.cluster, &key.api_version, &key.kind)
            .await?;
        let client = self.client(&key.cluster)?.clone();
        Ok(match (&key.namespace, resource.namespaced) {
            (Some(ns), true) => Api::namespaced_with(client, ns, &resource.api),
            _ => Api::all_with(client, &resource.api),
        })
    }

    /// Server-side applies an output; returns what the API server stored.
    pub async fn apply(
        &self,
        pack: &str,
        key: &ObjectKey,
        object: &Value,
    ) -> Result<DynamicObject, ApplyError> {
        let api = self.api(key).await?;
        let params = PatchParams::apply(&field_manager(pack)).force();
        api.patch(&key.name, &params, &Patch::Apply(object))
            .await
            .map_err(|source| ApplyError::Api {
                action: "apply",
                object: key.to_string(),
                source: Box::new(source),
            })
    }

    /// Deletes an output, only the incarnation the cache saw (`uid`).
    /// Server-side apply of a patch output: the pack's field manager owns exactly the
    /// rendered fields. The live object's uid goes into the body as a precondition: the
    /// API server refuses to create the object or to patch a new one of the same name.
    pub async fn apply_patch(
        &self,
        pack: &str,
        key: &ObjectKey,
        object: &Value,
        uid: Option<&str>,
    ) -> Result<DynamicObject, ApplyError> {
        let mut body = object.clone();
        if let (Some(uid), Some(metadata)) =
            (uid, body.get_mut("metadata").and_then(Value::as_object_mut))
        {
            metadata.insert("uid".into(), Value::String(uid.to_string()));
        }
        self.apply(pack, key, &body).await
    }

    /// Takes a patch back: an apply of no fields by the pack's field manager removes every
    /// field it owned and nothing else. An object already gone needs nothing.
    pub async fn take_back(
        &self,
        pack: &str,
        key: &ObjectKey,
        uid: Option<&str>,
    ) -> Result<(), ApplyError> {
        let mut metadata = serde_json::Map::new();
        metadata.insert("name".into(), Value::String(key.name.clone()));
        if let Some(ns) = &key.namespace {
            metadata.insert("namespace".into(), Value::String(ns.clone()));
        }
        if let Some(uid) = uid {
            metadata.insert("uid".into(), Value::String(uid.to_string()));
        }
        let body = serde_json::json!({
            "apiVersion": key.api_version,
            "kind": key.kind,
            "metadata": metadata,
        });
        match self.apply(pack, key, &body).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() || e.is_conflict() => Ok(()),
            Err(e) => Err(e),
        }
    }

    pub async fn delete(&self, key: &ObjectKey, uid: Option<&str>) -> Result<(), ApplyError> {
        let api = self.api(key).await?;
        let params = DeleteParams {
            preconditions: uid.map(|uid| Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            propagation_policy: Some(kube::api::PropagationPolicy::Background),
            ..DeleteParams::default()
        };
        match api.delete(&key.name, &params).await {
            Ok(_) => Ok(()),
            Err(KubeError::Api(s)) if s.code == 404 => Ok(()),
            Err(source) => Err(ApplyError::Api {
                source: Box::new(source),
                action: "delete",
                object: key.to_string(),
            }),
        }
    }

    /// Leaves an output in place, no longer managed: removes the pack's labels so prune never
    /// finds it again.
    pub async fn orphan(&self, pack: &str, key: &ObjectKey) -> Result<(), ApplyError> {
        let api = self.api(key).await?;
        let patch = json!({"metadata": {"labels": {LABEL_PACK: null, LABEL_MANAGED_BY: null}}});
        let params = PatchParams {
            field_manager: Some(field_manager(pack)),
            ..PatchParams::default()
        };
        match api.patch(&key.name, &params, &Patch::Merge(&patch)).await {
            Ok(_) => Ok(()),
            Err(KubeError::Api(s)) if s.code == 404 => Ok(()),
            Err(source) => Err(ApplyError::Api {
                source: Box::new(source),
                action: "orphan",
                object: key.to_string(),
            }),
        }
    }

    /// Applies the trigger's status through the status subresource (the spec is never
    /// written). A kind without one (a ConfigMap) has no status to write: returns `false`.
    pub async fn apply_status(
        &self,
        pack: &str,
        trigger: &ObjectKey,
        status: &Value,
    ) -> Result<bool, ApplyError> {
        let resource = self
            .resource(&trigger.cluster, &trigger.api_version, &trigger.kind)
            .await?;
        if !resource.has_status {
            return Ok(false);
        }
        let api = self.api(trigger).await?;
        let body = json!({
            "apiVersion": trigger.api_version,
            "kind": trigger.kind,
            "metadata": identity_metadata(trigger),
            "status": status,
        });
        let params = PatchParams::apply(&field_manager(pack)).force();
        api.patch_status(&trigger.name, &params, &Patch::Apply(&body))
            .await
            .map(|_| true)
            .map_err(|source| ApplyError::Api {
                action: "write status of",
                object: trigger.to_string(),
                source: Box::new(source),
            })
    }

    /// Adds the pack's finalizer to the trigger or removes it. A merge patch of the whole
    /// list with the cached resourceVersion as precondition: other controllers' finalizers
    /// are kept (a concurrent change fails with a conflict and is retried with the newer
    /// list), and a trigger that is gone is never created again, as an apply would.
    pub async fn set_finalizer(
        &self,
        trigger: &ObjectKey,
        cached: &Value,
        finalizer: &str,
        present: bool,
    ) -> Result<(), ApplyError> {
        let api = self.api(trigger).await?;
        let mut finalizers: Vec<Value> = cached
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        finalizers.retain(|f| f.as_str() != Some(finalizer));
        if present {
            finalizers.push(Value::String(finalizer.to_string()));
        }
        let patch = json!({"metadata": {
            "finalizers": finalizers,
            "resourceVersion": cached.pointer("/metadata/resourceVersion"),
        }});
        match api
            .patch(
                &trigger.name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => Ok(()),
            // Gone already: nothing holds it any more.
            Err(KubeError::Api(s)) if s.code == 404 && !present => Ok(()),
            Err(source) => Err(ApplyError::Api {
                source: Box::new(source),
                action: if present {
                    "add finalizer to"
                } else {
                    "remove finalizer from"
                },
                object: trigger.to_string(),
            }),
        }
    }
}

impl Clusters {
    /// Records a Warning Event on a trigger (`kubectl describe` shows it). Best effort: a
    /// failure to record is logged and never fails the work.
    pub async fn warn(&self, trigger: &ObjectKey, uid: Option<&str>, reason: &str, note: &str) {
        let Some(recorder) = self.recorders.get(&trigger.cluster) else {
            return;
        };
        let reference = ObjectReference {
            api_version: Some(trigger.api_version.clone()),
            kind: Some(trigger.kind.clone()),
            name: Some(trigger.name.clone()),
            namespace: trigger.namespace.clone(),
            uid: uid.map(str::to_string),
            ..ObjectReference::default()
        };
        // Kubernetes caps an Event's note at 1 KiB.
        let mut note = note.to_string();
        if note.len() > 1024 {
            let mut end = 1021;
            while !note.is_char_boundary(end) {
                end -= 1;
            }
            note.truncate(end);
            note.push_str("...");
        }
        let event = Event {
            type_: EventType::Warning,
            reason: reason.to_string(),
            note: Some(note),
            action: "Reconcile".into(),
            secondary: None,
        };
        if let Err(e) = recorder.publish(&event, &reference).await {
            tracing::debug!(trigger = %trigger, error = %e, "event not recorded");
        }
    }
}

fn identity_metadata(key: &ObjectKey) -> Value {
    match &key.namespace {
        Some(ns) => json!({"name": key.name, "namespace": ns}),
        None => json!({"name": key.name}),
    }
}
