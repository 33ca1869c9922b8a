//! Writes to the clusters: creation and server-side apply of outputs, status and finalizers
//! (one field manager per pack), deletes and orphaning. Every function is one API call (after
//! a cached discovery), so the controller decides what to write and this module only writes
//! it; every answer, or its absence, is reported to [`Reachability`].

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions,
};
use kube::discovery::Scope;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Error as KubeError};
use serde_json::{Value, json};
use switchyard_core::ObjectKey;
use switchyard_core::names::{ANNOTATION_CREATED, LABEL_MANAGED_BY, LABEL_PACK};

pub use crate::failure::ApplyError;
use crate::failure::{MESSAGE_LIMIT, truncate};
use crate::metrics::Metrics;
use crate::reachability::Reachability;
use crate::watch;

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
    clients: RwLock<BTreeMap<String, Client>>,
    /// The configurations of the configured clusters, for the clients of workspaces made
    /// on first use (`source/<workspace>` from `source`'s).
    configs: BTreeMap<String, kube::Config>,
    /// Clusters that serve every workspace's objects themselves (`workspacePaths: false`):
    /// a workspace's client is the cluster's own.
    shared: std::collections::BTreeSet<String>,
    metrics: Arc<Metrics>,
    /// Members found at run time (a role's source), by `ROLE/NAME`.
    members: RwLock<std::collections::BTreeSet<String>>,
    recorders: RwLock<BTreeMap<String, Recorder>>,
    resources: Mutex<HashMap<ResourceKey, Resource>>,
    reachability: Arc<Reachability>,
}

impl Clusters {
    /// `clients` maps the core's cluster names (`source`, `provider/x86`) to clients.
    pub fn new(clients: BTreeMap<String, Client>) -> Arc<Self> {
        Clusters::with_configs(clients, BTreeMap::new(), Default::default(), Metrics::new())
    }

    /// As [`Clusters::new`], with each cluster's configuration, so that the workspaces of a
    /// role whose cluster is a kcp virtual workspace get clients of their own.
    pub fn with_configs(
        clients: BTreeMap<String, Client>,
        configs: BTreeMap<String, kube::Config>,
        shared: std::collections::BTreeSet<String>,
        metrics: Arc<Metrics>,
    ) -> Arc<Self> {
        let recorders = clients
            .iter()
            .map(|(name, client)| (name.clone(), Recorder::new(client.clone(), reporter())))
            .collect();
        Arc::new(Clusters {
            configs,
            shared,
            metrics,
            members: RwLock::default(),
            recorders: RwLock::new(recorders),
            clients: RwLock::new(clients),
            resources: Mutex::new(HashMap::new()),
            reachability: Arc::new(Reachability::default()),
        })
    }

    pub fn client(&self, cluster: &str) -> Result<Client, ApplyError> {
        if let Some(client) = self
            .clients
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(cluster)
        {
            return Ok(client.clone());
        }
        self.workspace_client(cluster)
            .ok_or_else(|| ApplyError::UnknownCluster(cluster.to_string()))
    }

    /// The client of `role/<workspace>` when `role`'s cluster is configured (a kcp virtual
    /// workspace): made once, then kept with its Event recorder.
    fn workspace_client(&self, cluster: &str) -> Option<Client> {
        let (role, workspace) = switchyard_core::object::split_cluster(cluster);
        if workspace.is_empty() {
            return None;
        }
        self.configs.get(role)?;
        let client = if self.shared.contains(role) {
            self.client(role).ok()?
        } else {
            // Through the role's own connection, at `/clusters/<workspace>`.
            crate::clusters::prefixed_client(
                &self.client(role).ok()?,
                &format!("/clusters/{workspace}"),
            )
        };
        self.keep(cluster, &client);
        Some(client)
    }

    /// Keeps a cluster's client, and an Event recorder of it.
    fn keep(&self, cluster: &str, client: &Client) {
        self.recorders
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                cluster.to_string(),
                Recorder::new(client.clone(), reporter()),
            );
        self.clients
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(cluster.to_string(), client.clone());
    }

    /// The configured clusters and the members found at run time (not the workspaces found
    /// behind them).
    pub fn names(&self) -> Vec<String> {
        if !self.configs.is_empty() {
            let mut names: Vec<String> = self.configs.keys().cloned().collect();
            names.extend(
                self.members
                    .read()
                    .unwrap_or_else(PoisonError::into_inner)
                    .iter()
                    .cloned(),
            );
            names.sort();
            names.dedup();
            return names;
        }
        self.clients
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect()
    }

    /// A member found at run time, or its new credentials: a client of its own (counted
    /// like every other) replaces any it had, with its Event recorder and what was
    /// discovered there (a new kubeconfig may point elsewhere).
    pub fn set_member(&self, cluster: &str, config: kube::Config) -> Result<Client, KubeError> {
        let client = crate::instrument::client(config, &self.metrics)?;
        Ok(self.set_member_client(cluster, client))
    }

    /// As [`Clusters::set_member`], with a client made already (one sharing a connection).
    pub fn set_member_client(&self, cluster: &str, client: Client) -> Client {
        self.members
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(cluster.to_string());
        self.keep(cluster, &client);
        self.resources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(c, _, _), _| c != cluster);
        self.reachability.forget(cluster);
        client
    }

    /// The client configuration of a configured cluster (`ROLE` or `ROLE/NAME`).
    pub fn config(&self, cluster: &str) -> Option<kube::Config> {
        self.configs.get(cluster).cloned()
    }

    /// A member that is gone: its client is dropped, so nothing more is sent there.
    pub fn remove_member(&self, cluster: &str) {
        self.members
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(cluster);
        self.recorders
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(cluster);
        self.clients
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(cluster);
        self.resources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(c, _, _), _| c != cluster);
        self.reachability.forget(cluster);
    }

    /// The broker's metrics, which every client counts its requests in.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Which clusters answer and what they refuse.
    pub fn reachability(&self) -> &Arc<Reachability> {
        &self.reachability
    }

    /// Reports a call's outcome to [`Reachability`] and turns its error into ours.
    fn answered<T>(
        &self,
        key: &ObjectKey,
        action: &'static str,
        result: Result<T, KubeError>,
    ) -> Result<T, ApplyError> {
        let what = format!("{action} {} {}", key.api_version, key.kind);
        match result {
            Ok(value) => {
                self.reachability.succeeded(&key.cluster, &what);
                Ok(value)
            }
            Err(source) => {
                let error = ApplyError::Api {
                    action,
                    object: key.to_string(),
                    cluster: key.cluster.clone(),
                    source: Box::new(source),
                };
                self.reachability
                    .failed(&what, &error, self.client(&key.cluster).ok());
                Err(error)
            }
        }
    }

    /// The API resource of a kind, discovered once per cluster.
    async fn resource(
        &self,
        cluster: &str,
        api_version: &str,
        kind: &str,
    ) -> Result<Resource, ApplyError> {
        // Every workspace behind one virtual workspace serves the same kinds: discovered once,
        // for the role.
        let (role, member) = switchyard_core::object::split_cluster(cluster);
        let cluster = if !member.is_empty() && self.configs.contains_key(role) {
            role
        } else {
            cluster
        };
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
        let (api, capabilities) = match watch::resolve(&client, api_version, kind).await {
            Ok(found) => found,
            Err(source) => {
                let error = ApplyError::Discovery {
                    cluster: cluster.to_string(),
                    api_version: api_version.to_string(),
                    kind: kind.to_string(),
                    source: Box::new(source),
                };
                self.reachability.failed(
                    &format!("discover {api_version} {kind}"),
                    &error,
                    Some(client),
                );
                return Err(error);
            }
        };
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

    /// The API of an object's kind in its cluster. An object whose namespace disagrees with
    /// the kind's scope as the cluster serves it is refused here, before any request: a
    /// namespace given to a cluster-scoped kind would otherwise be dropped, and the write
    /// would land on another object of the same name.
    async fn api(&self, key: &ObjectKey) -> Result<Api<DynamicObject>, ApplyError> {
        let resource = self
            .resource(&key.cluster, &key.api_version, &key.kind)
            .await?;
        if key.namespace.is_some() != resource.namespaced {
            return Err(ApplyError::ScopeMismatch {
                object: key.to_string(),
                cluster: key.cluster.clone(),
                api_version: key.api_version.clone(),
                kind: key.kind.clone(),
                namespaced: resource.namespaced,
            });
        }
        let client = self.client(&key.cluster)?;
        Ok(match &key.namespace {
            Some(ns) => Api::namespaced_with(client, ns, &resource.api),
            None => Api::all_with(client, &resource.api),
        })
    }

    /// Whether a kind is namespaced in a cluster, as its discovery says.
    pub async fn namespaced(
        &self,
        cluster: &str,
        api_version: &str,
        kind: &str,
    ) -> Result<bool, ApplyError> {
        Ok(self.resource(cluster, api_version, kind).await?.namespaced)
    }

    /// The object as the cluster has it now (not as a cache saw it), or `None`.
    pub async fn get(&self, key: &ObjectKey) -> Result<Option<DynamicObject>, ApplyError> {
        let api = self.api(key).await?;
        let found = api.get_opt(&key.name).await;
        self.answered(key, "get", found)
    }

    /// Creates an output that does not exist: a create (not an apply) so that an object of
    /// the same name that exists already is refused (`AlreadyExists`) and never taken over.
    /// [`Clusters::mark_created`] then hands its fields to the pack's applies.
    pub async fn create(
        &self,
        manager: &str,
        key: &ObjectKey,
        object: &Value,
    ) -> Result<DynamicObject, ApplyError> {
        let api = self.api(key).await?;
        let body: DynamicObject = match serde_json::from_value(object.clone()) {
            Ok(body) => body,
            Err(e) => {
                return Err(ApplyError::Api {
                    action: "create",
                    object: key.to_string(),
                    cluster: key.cluster.clone(),
                    source: Box::new(KubeError::SerdeError(e)),
                });
            }
        };
        let params = PostParams {
            field_manager: Some(manager.to_string()),
            ..PostParams::default()
        };
        let created = api.create(&params, &body).await;
        self.answered(key, "create", created)
    }

    /// Marks an object as the pack's: the annotation [`ANNOTATION_CREATED`] set to its uid,
    /// once, with the uid and resourceVersion of `live` as preconditions (a merge patch, so
    /// the pack's applies, which never carry it, leave it alone).
    ///
    /// After a create (`created`), the fields the create set are handed to the pack's apply:
    /// the create's field ownership (an `Update` entry) becomes an `Apply` entry of the same
    /// manager, as `kubectl` upgrades client-side applied objects, so a field a template
    /// stops writing is removed by the next apply rather than kept by the create.
    pub async fn mark_created(
        &self,
        manager: &str,
        key: &ObjectKey,
        live: &DynamicObject,
        created: bool,
    ) -> Result<DynamicObject, ApplyError> {
        let api = self.api(key).await?;
        let manager = manager.to_string();
        let uid = live.metadata.uid.clone().unwrap_or_default();
        let mut metadata = serde_json::Map::new();
        metadata.insert("uid".into(), Value::String(uid.clone()));
        metadata.insert(
            "resourceVersion".into(),
            json!(live.metadata.resource_version),
        );
        metadata.insert("annotations".into(), json!({ANNOTATION_CREATED: uid}));
        if created && let Some(entries) = handed_to_apply(live, &manager) {
            metadata.insert("managedFields".into(), entries);
        }
        let params = PatchParams {
            field_manager: Some(manager),
            ..PatchParams::default()
        };
        let patch = Value::Object(
            [("metadata".to_string(), Value::Object(metadata))]
                .into_iter()
                .collect(),
        );
        let marked = api.patch(&key.name, &params, &Patch::Merge(&patch)).await;
        self.answered(key, "mark", marked)
    }

    /// Server-side applies an output by a field manager (the pack's, or one of its shards');
    /// returns what the API server stored.
    pub async fn apply(
        &self,
        manager: &str,
        key: &ObjectKey,
        object: &Value,
    ) -> Result<DynamicObject, ApplyError> {
        let api = self.api(key).await?;
        let params = PatchParams::apply(manager).force();
        let applied = api.patch(&key.name, &params, &Patch::Apply(object)).await;
        self.answered(key, "apply", applied)
    }

    /// The `status` of an output applied through the status subresource, by the same field
    /// manager, after the object itself (whose apply the API server strips of `status` when
    /// the kind has the subresource). Returns what the API server stored last: `stored`
    /// when there is no status to write, or the kind has no subresource (its status then
    /// went with the object, as part of it).
    pub async fn apply_output_status(
        &self,
        manager: &str,
        key: &ObjectKey,
        object: &Value,
        stored: DynamicObject,
    ) -> Result<DynamicObject, ApplyError> {
        let Some(status) = object.get("status").filter(|s| !s.is_null()) else {
            return Ok(stored);
        };
        Ok(self
            .status_subresource_apply(manager, key, status)
            .await?
            .unwrap_or(stored))
    }

    /// `status` applied to the object's status subresource by the pack's field manager,
    /// forced; `None` when its kind has no such subresource (as discovery says).
    async fn status_subresource_apply(
        &self,
        manager: &str,
        key: &ObjectKey,
        status: &Value,
    ) -> Result<Option<DynamicObject>, ApplyError> {
        let resource = self
            .resource(&key.cluster, &key.api_version, &key.kind)
            .await?;
        if !resource.has_status {
            return Ok(None);
        }
        let api = self.api(key).await?;
        let body = json!({
            "apiVersion": key.api_version,
            "kind": key.kind,
            "metadata": identity_metadata(key),
            "status": status,
        });
        let params = PatchParams::apply(manager).force();
        let written = api
            .patch_status(&key.name, &params, &Patch::Apply(&body))
            .await;
        self.answered(key, "write status of", written).map(Some)
    }

    /// Server-side apply of a patch output: the pack's field manager owns exactly the
    /// rendered fields. The live object's uid goes into the body as a precondition: the
    /// API server refuses to create the object or to patch a new one of the same name.
    pub async fn apply_patch(
        &self,
        manager: &str,
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
        self.apply(manager, key, &body).await
    }

    /// Takes a patch back: an apply of no fields by the pack's field manager removes every
    /// field it owned and nothing else. An object already gone needs nothing.
    pub async fn take_back(
        &self,
        manager: &str,
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
        match self.apply(manager, key, &body).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() || e.is_conflict() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Deletes an output, only the incarnation the cache saw (`uid`). `Ok(true)` when this
    /// call deleted it, `Ok(false)` when it was gone already.
    pub async fn delete(&self, key: &ObjectKey, uid: Option<&str>) -> Result<bool, ApplyError> {
        let preconditions = uid.map(|uid| Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        });
        self.delete_if(key, preconditions).await
    }

    /// Deletes an output only as the cache saw it: that incarnation (`uid`) at that
    /// `resourceVersion`, so a claim written on it meanwhile keeps it (the API server refuses
    /// with a conflict). `Ok(false)` when it was gone already.
    pub async fn delete_version(
        &self,
        key: &ObjectKey,
        uid: &str,
        version: &str,
    ) -> Result<bool, ApplyError> {
        let preconditions = Preconditions {
            uid: Some(uid.to_string()),
            resource_version: Some(version.to_string()).filter(|v| !v.is_empty()),
        };
        self.delete_if(key, Some(preconditions)).await
    }

    /// One DELETE (background propagation) under these preconditions; `Ok(false)` when the
    /// object was gone already.
    async fn delete_if(
        &self,
        key: &ObjectKey,
        preconditions: Option<Preconditions>,
    ) -> Result<bool, ApplyError> {
        let api = self.api(key).await?;
        let params = DeleteParams {
            preconditions,
            propagation_policy: Some(kube::api::PropagationPolicy::Background),
            ..DeleteParams::default()
        };
        match api.delete(&key.name, &params).await {
            Ok(_) => self.answered(key, "delete", Ok(true)),
            Err(KubeError::Api(s)) if s.code == 404 => Ok(false),
            Err(source) => self.answered(key, "delete", Err(source)),
        }
    }

    /// Leaves an output in place, no longer managed: removes the pack's labels and its
    /// creation mark so prune never finds it again.
    pub async fn orphan(&self, pack: &str, key: &ObjectKey) -> Result<(), ApplyError> {
        let api = self.api(key).await?;
        let patch = json!({"metadata": {
            "labels": {LABEL_PACK: null, LABEL_MANAGED_BY: null},
            "annotations": {ANNOTATION_CREATED: null},
        }});
        let params = PatchParams {
            field_manager: Some(field_manager(pack)),
            ..PatchParams::default()
        };
        match api.patch(&key.name, &params, &Patch::Merge(&patch)).await {
            Ok(_) => self.answered(key, "orphan", Ok(())),
            Err(KubeError::Api(s)) if s.code == 404 => Ok(()),
            Err(source) => self.answered(key, "orphan", Err(source)),
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
        Ok(self
            .status_subresource_apply(pack, trigger, status)
            .await?
            .is_some())
    }

    /// Adds the pack's finalizer to the trigger or removes it. A merge patch of the whole
    /// list with the cached resourceVersion as precondition, by the pack's field manager:
    /// other controllers' finalizers are kept (a concurrent change fails with a conflict and
    /// is retried with the newer list), and a trigger that is gone is never created again,
    /// as an apply would.
    pub async fn set_finalizer(
        &self,
        pack: &str,
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
        let params = PatchParams {
            field_manager: Some(field_manager(pack)),
            ..PatchParams::default()
        };
        let action = if present {
            "add finalizer to"
        } else {
            "remove finalizer from"
        };
        match api
            .patch(&trigger.name, &params, &Patch::Merge(&patch))
            .await
        {
            Ok(_) => self.answered(trigger, action, Ok(())),
            // Gone already: nothing holds it any more.
            Err(KubeError::Api(s)) if s.code == 404 && !present => Ok(()),
            Err(source) => self.answered(trigger, action, Err(source)),
        }
    }

    /// Removes a finalizer from the object as the cluster has it now (a pack that is no
    /// longer loaded lets its triggers go): read, then patched with that read's
    /// resourceVersion, read again on a conflict.
    pub async fn release_finalizer(
        &self,
        pack: &str,
        trigger: &ObjectKey,
        finalizer: &str,
    ) -> Result<bool, ApplyError> {
        for _ in 0..3 {
            let Some(live) = self.get(trigger).await? else {
                return Ok(false);
            };
            let live = serde_json::to_value(&live).unwrap_or(Value::Null);
            let holds = live
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| f.iter().any(|x| x.as_str() == Some(finalizer)));
            if !holds {
                return Ok(false);
            }
            match self
                .set_finalizer(pack, trigger, &live, finalizer, false)
                .await
            {
                Ok(()) => return Ok(true),
                Err(e) if e.is_conflict() => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(false)
    }

    /// Records a Warning Event on a trigger (`kubectl describe` shows it). Best effort: a
    /// failure to record is logged and never fails the work.
    pub async fn warn(&self, trigger: &ObjectKey, uid: Option<&str>, reason: &str, note: &str) {
        let recorder = self
            .recorders
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&trigger.cluster)
            .cloned();
        let Some(recorder) = recorder else {
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
        let event = Event {
            type_: EventType::Warning,
            reason: reason.to_string(),
            note: Some(truncate(note, MESSAGE_LIMIT)),
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

/// The managed fields of a just-created object with the creating manager's `Update` entry
/// turned into its `Apply` entry, plus an `Update` entry of the same manager owning the
/// creation mark alone; `None` when the manager has no such entry (nothing to hand over).
fn handed_to_apply(live: &DynamicObject, manager: &str) -> Option<Value> {
    let entries = live.metadata.managed_fields.as_ref()?;
    let mut out = Vec::with_capacity(entries.len() + 1);
    let mut handed = false;
    for entry in entries {
        let mut entry = serde_json::to_value(entry).ok()?;
        let ours = entry.get("manager").and_then(Value::as_str) == Some(manager)
            && entry.get("operation").and_then(Value::as_str) == Some("Update")
            && entry.get("subresource").is_none();
        if ours {
            entry["operation"] = Value::String("Apply".into());
            handed = true;
        }
        out.push(entry);
    }
    if !handed {
        return None;
    }
    let api_version = out
        .first()
        .and_then(|e| e.get("apiVersion").cloned())
        .unwrap_or(Value::Null);
    out.push(json!({
        "manager": manager,
        "operation": "Update",
        "apiVersion": api_version,
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:annotations": {format!("f:{ANNOTATION_CREATED}"): {}}}},
        "time": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    }));
    Some(Value::Array(out))
}
