//! The watch caches, and the core's [`World`] read straight from them: an evaluation borrows
//! the cached objects (`Arc`s), nothing is copied per evaluation.
//!
//! A role whose objects live in workspaces (a kcp virtual workspace) is watched once, and
//! its cache keys each object by its workspace too: the world answers for `source/<ws>` from
//! that one cache, and never lets one workspace's object stand for another's.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use serde_json::Value;
use switchyard_core::object::{World, cluster_id, is_workspace_name, split_cluster};
use switchyard_core::{ObjectKey, Pack};

/// A kind in a cluster, as the core names clusters (`source`, `karmada`; a member of a role
/// with several clusters is `role/name`; a role of workspaces is watched as the role).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KindKey {
    pub cluster: String,
    pub api_version: String,
    pub kind: String,
}

impl std::fmt::Display for KindKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.cluster, self.api_version, self.kind)
    }
}

/// (workspace, namespace, name): the workspace only in a cache of workspaces.
pub type CacheKey = (Option<Arc<str>>, Option<String>, String);

/// A cached object in compact form: its JSON text, decoded whenever it is read. A
/// `serde_json::Value` gives every JSON object a B-tree node of eleven slots however few
/// fields it has, about five to ten times the size of the text; a broker caches every
/// trigger and every output, and reads a small share of them at a time.
///
/// In a watch cache the text is also LZ4-compressed against a dictionary: the text of
/// another object of the same kind ([`Dictionary`]). Objects of one kind share most of
/// their text (field names, labels, images, managers), which a dictionary of one of them
/// turns into a few bytes of back-references; compressing and decoding an object of a
/// kilobyte takes microseconds.
#[derive(Debug, PartialEq, Eq)]
pub struct Cached {
    /// The JSON text, or its compressed form when `dictionary` is set.
    bytes: Box<[u8]>,
    dictionary: Option<Arc<[u8]>>,
    resource_version: Option<Box<str>>,
}

impl Cached {
    /// The object as plain text.
    pub fn new(object: &Value) -> Cached {
        Cached {
            bytes: object.to_string().into_bytes().into_boxed_slice(),
            dictionary: None,
            resource_version: resource_version(object),
        }
    }

    /// The object compressed against a dictionary.
    fn compressed(object: &Value, text: &[u8], dictionary: Arc<[u8]>) -> Cached {
        Cached {
            bytes: lz4_flex::block::compress_prepend_size_with_dict(text, &dictionary)
                .into_boxed_slice(),
            dictionary: Some(dictionary),
            resource_version: resource_version(object),
        }
    }

    /// The object. (The text is serde_json's own output, compressed by this process, so it
    /// always decodes; were it not to, the object reads as `null`, which no rule mistakes
    /// for an object.)
    pub fn value(&self) -> Value {
        let decoded = match &self.dictionary {
            None => serde_json::from_slice(&self.bytes).map_err(|e| e.to_string()),
            Some(dictionary) => {
                lz4_flex::block::decompress_size_prepended_with_dict(&self.bytes, dictionary)
                    .map_err(|e| e.to_string())
                    .and_then(|text| serde_json::from_slice(&text).map_err(|e| e.to_string()))
            }
        };
        decoded.unwrap_or_else(|e| {
            tracing::error!(error = %e, "a cached object does not decode");
            Value::Null
        })
    }

    pub fn resource_version(&self) -> Option<&str> {
        self.resource_version.as_deref()
    }

    /// The bytes it holds (compressed or not), for tests and figures.
    pub fn size(&self) -> usize {
        self.bytes.len()
    }
}

fn resource_version(object: &Value) -> Option<Box<str>> {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .map(Box::from)
}

/// The dictionary a cache compresses its objects against: the text of one of its objects.
/// The first object cached becomes it; an object that compresses to more than a quarter
/// of its text (its kind's objects changed shape: a status was added, say) becomes the
/// next one, compressed against itself. Each cached object holds the dictionary it was
/// compressed with, so a new one never needs the old objects compressed again, and an old
/// one goes with its last object. (An object unlike any other costs its text and a few
/// bytes, as it would uncompressed.)
#[derive(Debug, Default)]
pub struct Dictionary(RwLock<Option<Arc<[u8]>>>);

impl Dictionary {
    /// An object in compact form.
    pub fn compact(&self, object: &Value) -> Cached {
        let text = object.to_string().into_bytes();
        let current = self
            .0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(dictionary) = current {
            let cached = Cached::compressed(object, &text, dictionary);
            if cached.bytes.len() * 4 <= text.len() {
                return cached;
            }
        }
        let dictionary: Arc<[u8]> = Arc::from(text.as_slice());
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = Some(dictionary.clone());
        Cached::compressed(object, &text, dictionary)
    }
}

/// The cache of one watch: every object of a kind in a cluster, ordered by workspace,
/// namespace and name so lists come out sorted as the core expects.
#[derive(Default)]
pub struct KindCache {
    objects: RwLock<BTreeMap<CacheKey, Arc<Cached>>>,
    /// What its objects are compressed against.
    pub dictionary: Dictionary,
    synced: AtomicBool,
    /// Only metadata is cached (outputs no rule reads).
    pub metadata_only: bool,
    /// The annotation naming each object's workspace, when the role's objects live in
    /// workspaces.
    pub workspace: Option<&'static str>,
}

impl KindCache {
    pub fn new(metadata_only: bool) -> Self {
        KindCache {
            metadata_only,
            ..KindCache::default()
        }
    }

    /// A cache whose objects each live in the workspace `annotation` names.
    pub fn of_workspaces(metadata_only: bool, annotation: Option<&'static str>) -> Self {
        KindCache {
            metadata_only,
            workspace: annotation,
            ..KindCache::default()
        }
    }

    /// The workspace an object names, in a cache of workspaces: `Some(None)` when it names
    /// none (it cannot be cached), `None` in other caches.
    pub fn workspace_of(&self, object: &Value) -> Option<Option<Arc<str>>> {
        let annotation = self.workspace?;
        Some(
            object
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(annotation))
                .and_then(Value::as_str)
                .filter(|ws| is_workspace_name(ws))
                .map(Arc::from),
        )
    }

    /// The cluster an object of this cache lives in: `role/<workspace>` in a cache of
    /// workspaces, else the watch's own cluster.
    pub fn cluster_of(&self, watched: &str, object: &Value) -> Option<String> {
        match self.workspace_of(object) {
            None => Some(watched.to_string()),
            Some(Some(workspace)) => Some(cluster_id(watched, &workspace)),
            Some(None) => None,
        }
    }

    /// Where an object is kept: `None` for an object of a cache of workspaces that names no
    /// workspace (it has no place).
    pub fn key(&self, object: &Value) -> Option<CacheKey> {
        let workspace = match self.workspace_of(object) {
            None => None,
            Some(Some(ws)) => Some(ws),
            Some(None) => return None,
        };
        let (namespace, name) = name_key(object);
        Some((workspace, namespace, name))
    }

    /// The cluster an object kept under `key` lives in (see [`KindCache::cluster_of`]).
    pub fn cluster_at(watched: &str, key: &CacheKey) -> String {
        match &key.0 {
            Some(workspace) => cluster_id(watched, workspace),
            None => watched.to_string(),
        }
    }

    pub fn get(
        &self,
        workspace: Option<&str>,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Arc<Value>> {
        self.cached(workspace, namespace, name)
            .map(|c| Arc::new(c.value()))
    }

    /// An object as kept, not decoded.
    pub fn cached(
        &self,
        workspace: Option<&str>,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Arc<Cached>> {
        let objects = self.objects.read().unwrap_or_else(PoisonError::into_inner);
        objects
            .get(&(
                workspace.map(Arc::from),
                namespace.map(str::to_string),
                name.to_string(),
            ))
            .cloned()
    }

    /// The objects of one workspace (or all, in other caches) in one namespace or all.
    pub fn list(&self, workspace: Option<&str>, namespace: Option<&str>) -> Vec<Arc<Value>> {
        let objects = self.objects.read().unwrap_or_else(PoisonError::into_inner);
        let workspace: Option<Arc<str>> = workspace.map(Arc::from);
        let start: CacheKey = (
            workspace.clone(),
            namespace.map(str::to_string),
            String::new(),
        );
        let found: Vec<Arc<Cached>> = objects
            .range(start..)
            .take_while(|((w, n, _), _)| {
                *w == workspace && namespace.is_none_or(|ns| n.as_deref() == Some(ns))
            })
            .map(|(_, o)| o.clone())
            .collect();
        drop(objects);
        found.iter().map(|c| Arc::new(c.value())).collect()
    }

    /// Every object, of every workspace, as kept: decoded one at a time by the caller (a
    /// cache of ten thousand objects decoded at once would be held whole).
    pub fn all(&self) -> Vec<Arc<Cached>> {
        self.objects
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    /// Visits every object with its key in the cluster `watched`, as kept: the keys come
    /// from where each is kept, so none needs decoding, and nothing is gathered (a scan of
    /// twenty thousand outputs made all their keys at once would hold megabytes at its
    /// peak). An object whose name is no valid key is left out, as [`Store::key_of`] leaves
    /// it out. The cache is read-locked meanwhile: `visit` does little.
    pub fn for_each_keyed(&self, kind: &KindKey, mut visit: impl FnMut(ObjectKey, &Arc<Cached>)) {
        let objects = self.objects.read().unwrap_or_else(PoisonError::into_inner);
        for (at, cached) in objects.iter() {
            let (_, namespace, name) = at;
            let cluster = KindCache::cluster_at(&kind.cluster, at);
            if let Ok(key) = ObjectKey::named(
                &cluster,
                &kind.api_version,
                &kind.kind,
                namespace.as_deref(),
                name,
            ) {
                visit(key, cached);
            }
        }
    }

    /// The workspaces that have objects here.
    pub fn workspaces(&self) -> BTreeSet<Arc<str>> {
        self.objects
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .filter_map(|(w, _, _)| w.clone())
            .collect()
    }

    /// Stores an object under its key; returns the previous version.
    pub fn insert(&self, key: CacheKey, object: Arc<Cached>) -> Option<Arc<Cached>> {
        let mut objects = self.objects.write().unwrap_or_else(PoisonError::into_inner);
        objects.insert(key, object)
    }

    /// Removes the object kept under `key`.
    pub fn remove(&self, key: &CacheKey) -> Option<Arc<Cached>> {
        let mut objects = self.objects.write().unwrap_or_else(PoisonError::into_inner);
        objects.remove(key)
    }

    /// The cached version of the object kept under `key`.
    pub fn current(&self, key: &CacheKey) -> Option<Arc<Cached>> {
        let objects = self.objects.read().unwrap_or_else(PoisonError::into_inner);
        objects.get(key).cloned()
    }

    /// Replaces every object (a relist); returns the objects that were dropped.
    pub fn replace(&self, fresh: Vec<(CacheKey, Arc<Cached>)>) -> Vec<(CacheKey, Arc<Cached>)> {
        let next: BTreeMap<CacheKey, Arc<Cached>> = fresh.into_iter().collect();
        let mut objects = self.objects.write().unwrap_or_else(PoisonError::into_inner);
        let previous = std::mem::replace(&mut *objects, next);
        previous
            .into_iter()
            .filter(|(k, _)| !objects.contains_key(k))
            .collect()
    }

    pub fn len(&self) -> usize {
        self.objects
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    pub fn set_synced(&self) {
        self.synced.store(true, Ordering::Release);
    }
}

fn name_key(object: &Value) -> (Option<String>, String) {
    let meta = |field: &str| {
        object
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let namespace = meta("namespace");
    ((!namespace.is_empty()).then_some(namespace), meta("name"))
}

/// Every cache, by kind and cluster. The broker's [`World`].
#[derive(Default)]
pub struct Store {
    kinds: RwLock<HashMap<KindKey, Arc<KindCache>>>,
    /// Role -> member names (`""` for a role's unnamed cluster): the configured clusters,
    /// and the members a role's source found once their caches have listed (live members).
    members: RwLock<BTreeMap<String, Vec<String>>>,
    /// Roles whose members come from a source at run time (Secrets, objects): such a role
    /// may have no member, and then nothing of it is watched.
    dynamic: RwLock<BTreeSet<String>>,
    /// Roles whose objects live in workspaces -> the annotation naming them (from the loaded
    /// packs).
    workspace_roles: RwLock<BTreeMap<String, &'static str>>,
}

impl Store {
    pub fn new() -> Arc<Self> {
        Arc::new(Store::default())
    }

    /// A store whose roles have these clusters (`ROLE` or `ROLE/NAME`).
    pub fn with_clusters<'a>(clusters: impl IntoIterator<Item = &'a str>) -> Arc<Self> {
        let mut members: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for id in clusters {
            let (role, name) = split_cluster(id);
            members
                .entry(role.to_string())
                .or_default()
                .push(name.to_string());
        }
        for names in members.values_mut() {
            names.sort();
            names.dedup();
        }
        Arc::new(Store {
            kinds: RwLock::default(),
            members: RwLock::new(members),
            dynamic: RwLock::default(),
            workspace_roles: RwLock::default(),
        })
    }

    /// The roles whose members come from a source at run time.
    pub fn set_dynamic_roles(&self, roles: impl IntoIterator<Item = String>) {
        *self.dynamic.write().unwrap_or_else(PoisonError::into_inner) = roles.into_iter().collect();
    }

    /// Whether a role's members come from a source at run time.
    pub fn is_dynamic(&self, role: &str) -> bool {
        self.dynamic
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(role)
    }

    /// A member becomes live: packs see it in `clusters`, and it is watched as theirs.
    /// False when it already was.
    pub fn add_member(&self, cluster: &str) -> bool {
        let (role, name) = split_cluster(cluster);
        let mut members = self.members.write().unwrap_or_else(PoisonError::into_inner);
        let names = members.entry(role.to_string()).or_default();
        if names.iter().any(|n| n == name) {
            return false;
        }
        names.push(name.to_string());
        names.sort();
        true
    }

    /// A member is gone: packs no longer see it. False when it was not live.
    pub fn remove_member(&self, cluster: &str) -> bool {
        let (role, name) = split_cluster(cluster);
        let mut members = self.members.write().unwrap_or_else(PoisonError::into_inner);
        let Some(names) = members.get_mut(role) else {
            return false;
        };
        let before = names.len();
        names.retain(|n| n != name);
        names.len() != before
    }

    /// Whether a cluster (`ROLE` or `ROLE/NAME`) is a live member the broker writes to. A
    /// workspace behind a role of workspaces counts as its role.
    pub fn is_live(&self, cluster: &str) -> bool {
        let (role, name) = split_cluster(cluster);
        if self.workspace_annotation(role).is_some() || (name.is_empty() && !self.is_dynamic(role))
        {
            return true;
        }
        self.members
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(role)
            .is_some_and(|names| names.iter().any(|n| n == name))
    }

    /// Takes the roles whose objects live in workspaces from the packs loaded now.
    pub fn set_workspace_roles(&self, packs: &[Arc<Pack>]) {
        let mut roles = BTreeMap::new();
        for pack in packs {
            for cluster in &pack.spec().clusters {
                if let Some(annotation) = pack.workspace_annotation(&cluster.name) {
                    roles.insert(cluster.name.clone(), annotation);
                }
            }
        }
        *self
            .workspace_roles
            .write()
            .unwrap_or_else(PoisonError::into_inner) = roles;
    }

    /// The annotation naming the workspaces of `role`, if its objects live in workspaces.
    pub fn workspace_annotation(&self, role: &str) -> Option<&'static str> {
        self.workspace_roles
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(role)
            .copied()
    }

    /// The clusters a kind of `role` is watched in: the role itself for a role of
    /// workspaces (one watch serves them all), else each member, or the role when it has
    /// none (a watch of it then reports that no cluster is configured).
    pub fn watch_clusters(&self, role: &str) -> Vec<String> {
        if self.workspace_annotation(role).is_some() {
            return vec![role.to_string()];
        }
        let members = self.members.read().unwrap_or_else(PoisonError::into_inner);
        match members.get(role) {
            Some(names) if !names.is_empty() => names.iter().map(|m| cluster_id(role, m)).collect(),
            // A role whose members come and go may have none: nothing to watch.
            _ if self.is_dynamic(role) => Vec::new(),
            _ => vec![role.to_string()],
        }
    }

    /// Each role the broker knows and its number of member clusters (workspaces seen, for a
    /// role of workspaces).
    pub fn roles(&self) -> Vec<(String, usize)> {
        let mut roles: BTreeSet<String> = self
            .members
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect();
        roles.extend(
            self.dynamic
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .cloned(),
        );
        roles.extend(
            self.workspace_roles
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .keys()
                .cloned(),
        );
        roles
            .into_iter()
            .map(|role| {
                let members = World::members(self, &role).len();
                (role, members)
            })
            .collect()
    }

    /// The key of a cached object of the watch `kind`.
    pub fn key_of(&self, kind: &KindKey, object: &Value) -> Option<ObjectKey> {
        let cluster = match self.cache(kind) {
            Some(cache) => cache.cluster_of(&kind.cluster, object)?,
            None => kind.cluster.clone(),
        };
        ObjectKey::of(&cluster, object).ok()
    }

    /// The cached version of an object, not decoded: what its resource version alone
    /// answers needs no decoding.
    pub fn cached_key(&self, key: &ObjectKey) -> Option<Arc<Cached>> {
        let (cache, workspace) = self.find(&key.cluster, &key.api_version, &key.kind)?;
        cache.cached(workspace, key.namespace.as_deref(), &key.name)
    }

    pub fn cache(&self, key: &KindKey) -> Option<Arc<KindCache>> {
        self.kinds
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .cloned()
    }

    /// Registers a cache for a new watch.
    pub fn add(&self, key: KindKey, cache: Arc<KindCache>) {
        self.kinds
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, cache);
    }

    pub fn remove(&self, key: &KindKey) {
        self.kinds
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
    }

    /// The cache holding `cluster`'s objects of a kind, and the workspace to read there.
    fn find<'c>(
        &self,
        cluster: &'c str,
        api_version: &str,
        kind: &str,
    ) -> Option<(Arc<KindCache>, Option<&'c str>)> {
        let key = |cluster: &str| KindKey {
            cluster: cluster.to_string(),
            api_version: api_version.to_string(),
            kind: kind.to_string(),
        };
        let (role, member) = split_cluster(cluster);
        if self.workspace_annotation(role).is_some() {
            // A workspace's objects are in the role's cache, under the workspace; the
            // role itself (no workspace) has none.
            if member.is_empty() {
                return None;
            }
            return self.cache(&key(role)).map(|c| (c, Some(member)));
        }
        self.cache(&key(cluster)).map(|c| (c, None))
    }
}

impl World for Store {
    fn get(
        &self,
        cluster: &str,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Arc<Value>> {
        let (cache, workspace) = self.find(cluster, api_version, kind)?;
        cache.get(workspace, namespace, name)
    }

    fn list(
        &self,
        cluster: &str,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Vec<Arc<Value>> {
        self.find(cluster, api_version, kind)
            .map(|(cache, workspace)| cache.list(workspace, namespace))
            .unwrap_or_default()
    }

    fn members(&self, role: &str) -> Vec<String> {
        if self.workspace_annotation(role).is_some() {
            let caches: Vec<Arc<KindCache>> = self
                .kinds
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .filter(|(k, _)| k.cluster == role)
                .map(|(_, c)| c.clone())
                .collect();
            let names: BTreeSet<Arc<str>> = caches.iter().flat_map(|c| c.workspaces()).collect();
            return names.iter().map(|n| n.to_string()).collect();
        }
        self.members
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(role)
            .cloned()
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cm(ns: &str, name: &str) -> Arc<Value> {
        Arc::new(json!({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"namespace": ns, "name": name}}))
    }

    /// Caches an object as the watch does; `None` when it has no place.
    fn put(cache: &KindCache, object: Arc<Value>) -> Option<()> {
        let key = cache.key(&object)?;
        cache.insert(key, Arc::new(cache.dictionary.compact(&object)));
        Some(())
    }

    fn workload(name: &str, status: bool) -> Value {
        let mut object = json!({"apiVersion": "example.com/v1", "kind": "Workload",
            "metadata": {"namespace": "team-a", "name": name, "resourceVersion": "7",
                         "labels": {"app.kubernetes.io/part-of": "storefront"}},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [
                {"name": "app", "image": "registry.example.com/storefront/app:1.0.0",
                 "ports": [{"name": "http", "containerPort": 8080}]}]}}}});
        if status {
            object["status"] = json!({"conditions": [
                {"type": "Synced", "status": "True", "reason": "Applied",
                 "message": "every output is applied", "observedGeneration": 1,
                 "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "Ready", "status": "True", "reason": "Ready",
                 "message": "every output is ready", "observedGeneration": 1,
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
        }
        object
    }

    #[test]
    fn objects_are_compressed_against_a_sibling_and_decode_as_they_were() {
        let dictionary = Dictionary::default();
        let first = dictionary.compact(&workload("web-0", false));
        let second = dictionary.compact(&workload("web-1", false));
        // A sibling costs a fraction of its text: mostly references into the dictionary.
        let text = workload("web-1", false).to_string().len();
        assert!(second.size() * 5 < text, "{} of {text}", second.size());
        assert_eq!(first.value(), workload("web-0", false));
        assert_eq!(second.value(), workload("web-1", false));
        assert_eq!(second.resource_version(), Some("7"));
        // A new shape (a status) compresses badly against the old dictionary: it becomes
        // the next one, and objects compressed against the old one still decode.
        let with_status = dictionary.compact(&workload("web-2", true));
        let next = dictionary.compact(&workload("web-3", true));
        let text = workload("web-3", true).to_string().len();
        assert!(next.size() * 5 < text, "{} of {text}", next.size());
        assert_eq!(with_status.value(), workload("web-2", true));
        assert_eq!(next.value(), workload("web-3", true));
        assert_eq!(second.value(), workload("web-1", false));
    }

    fn names(list: Vec<Arc<Value>>) -> Vec<String> {
        list.iter()
            .map(|o| {
                format!(
                    "{}/{}",
                    o["metadata"]["namespace"].as_str().unwrap(),
                    o["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect()
    }

    #[test]
    fn cached_objects_read_back_as_they_were() {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": "a", "name": "x", "resourceVersion": "17",
                         "labels": {"z": "1", "a": "2"}},
            "data": {"big": 18446744073709551615u64, "neg": -3, "float": 0.1, "text": "é\n\"q\""}});
        let cached = Cached::new(&object);
        assert_eq!(cached.value(), object);
        assert_eq!(cached.resource_version(), Some("17"));
    }

    #[test]
    fn lists_one_namespace_or_all_in_order() {
        let store = Store::new();
        let cache = Arc::new(KindCache::new(false));
        for (ns, name) in [("b", "x"), ("a", "y"), ("ab", "z"), ("a", "x")] {
            put(&cache, cm(ns, name)).unwrap();
        }
        let key = KindKey {
            cluster: "source".into(),
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
        };
        store.add(key, cache.clone());
        let world: &dyn World = &*store;
        assert_eq!(
            names(world.list("source", "v1", "ConfigMap", None)),
            ["a/x", "a/y", "ab/z", "b/x"]
        );
        assert_eq!(
            names(world.list("source", "v1", "ConfigMap", Some("a"))),
            ["a/x", "a/y"]
        );
        assert!(
            world
                .get("source", "v1", "ConfigMap", Some("b"), "x")
                .is_some()
        );
        assert!(
            world
                .get("other", "v1", "ConfigMap", Some("b"), "x")
                .is_none()
        );
        let kept = cm("a", "x");
        let dropped = cache.replace(vec![(
            cache.key(&kept).unwrap(),
            Arc::new(Cached::new(&kept)),
        )]);
        assert_eq!(dropped.len(), 3);
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn workspaces_keep_their_objects_apart() {
        let store = Store::new();
        store
            .workspace_roles
            .write()
            .unwrap()
            .insert("source".into(), "kcp.io/cluster");
        let cache = Arc::new(KindCache::of_workspaces(false, Some("kcp.io/cluster")));
        let object = |ws: Option<&str>, name: &str| {
            let annotations = match ws {
                Some(ws) => json!({"kcp.io/cluster": ws}),
                None => json!({}),
            };
            Arc::new(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"namespace": "default", "name": name, "annotations": annotations}}))
        };
        put(&cache, object(Some("ws-a"), "shop")).unwrap();
        put(&cache, object(Some("ws-b"), "shop")).unwrap();
        put(&cache, object(Some("ws-b"), "edge")).unwrap();
        assert!(put(&cache, object(None, "lost")).is_none());
        assert!(put(&cache, object(Some("a b"), "lost")).is_none());
        let key = KindKey {
            cluster: "source".into(),
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
        };
        store.add(key.clone(), cache.clone());
        let world: &dyn World = &*store;
        assert_eq!(world.members("source"), ["ws-a", "ws-b"]);
        assert_eq!(
            names(world.list("source/ws-a", "v1", "ConfigMap", None)),
            ["default/shop"]
        );
        assert_eq!(
            names(world.list("source/ws-b", "v1", "ConfigMap", Some("default"))),
            ["default/edge", "default/shop"]
        );
        assert!(
            world
                .get("source/ws-a", "v1", "ConfigMap", Some("default"), "edge")
                .is_none()
        );
        assert!(world.list("source", "v1", "ConfigMap", None).is_empty());
        let shop_b = store.key_of(&key, &object(Some("ws-b"), "shop")).unwrap();
        assert_eq!(shop_b.cluster, "source/ws-b");
        assert_eq!(store.watch_clusters("source"), ["source"]);
        // Keys read from where objects are kept are the keys of the objects themselves.
        let mut keyed = Vec::new();
        cache.for_each_keyed(&key, |k, _| keyed.push(k));
        let of_objects: Vec<ObjectKey> = cache
            .all()
            .iter()
            .filter_map(|c| store.key_of(&key, &c.value()))
            .collect();
        assert_eq!(keyed, of_objects);
        assert_eq!(keyed.len(), 3);
        assert!(keyed.contains(&shop_b));
        assert_eq!(
            store.cached_key(&shop_b).map(|c| c.value()),
            Some(Value::clone(&object(Some("ws-b"), "shop")))
        );
    }

    #[test]
    fn an_object_whose_name_is_no_key_has_none_where_it_is_kept_either() {
        let cache = KindCache::new(false);
        put(&cache, cm("default", "shop")).unwrap();
        put(&cache, cm("default", "Not_A_Name")).unwrap();
        let key = KindKey {
            cluster: "source".into(),
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
        };
        let mut keyed = Vec::new();
        cache.for_each_keyed(&key, |k, _| keyed.push(k.to_string()));
        assert_eq!(keyed, ["source:ConfigMap:default/shop"]);
    }
}
