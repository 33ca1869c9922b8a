//! The watch caches, and the core's [`World`] read straight from them: an evaluation borrows
//! the cached objects (`Arc`s), nothing is copied per evaluation.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use serde_json::Value;
use switchyard_core::World;

/// A kind in a cluster, as the core names clusters (`source`, `karmada`; a member of a role
/// with several clusters is `role/name`).
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

type NameKey = (Option<String>, String);

/// The cache of one watch: every object of a kind in a cluster, ordered by namespace and name
/// so lists come out sorted as the core expects.
#[derive(Default)]
pub struct KindCache {
    objects: RwLock<BTreeMap<NameKey, Arc<Value>>>,
    synced: AtomicBool,
    /// Only metadata is cached (outputs no rule reads).
    pub metadata_only: bool,
}

impl KindCache {
    pub fn new(metadata_only: bool) -> Self {
        KindCache {
            metadata_only,
            ..KindCache::default()
        }
    }

    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<Value>> {
        let objects = self.objects.read().unwrap_or_else(PoisonError::into_inner);
        objects
            .get(&(namespace.map(str::to_string), name.to_string()))
            .cloned()
    }

    pub fn list(&self, namespace: Option<&str>) -> Vec<Arc<Value>> {
        let objects = self.objects.read().unwrap_or_else(PoisonError::into_inner);
        match namespace {
            None => objects.values().cloned().collect(),
            Some(ns) => objects
                .range((Some(ns.to_string()), String::new())..)
                .take_while(|((n, _), _)| n.as_deref() == Some(ns))
                .map(|(_, o)| o.clone())
                .collect(),
        }
    }

    /// Stores an object; returns the previous version.
    pub fn insert(&self, object: Arc<Value>) -> Option<Arc<Value>> {
        let key = name_key(&object);
        let mut objects = self.objects.write().unwrap_or_else(PoisonError::into_inner);
        objects.insert(key, object)
    }

    pub fn remove(&self, namespace: Option<&str>, name: &str) -> Option<Arc<Value>> {
        let mut objects = self.objects.write().unwrap_or_else(PoisonError::into_inner);
        objects.remove(&(namespace.map(str::to_string), name.to_string()))
    }

    /// Replaces every object (a relist); returns the objects that were dropped.
    pub fn replace(&self, fresh: Vec<Arc<Value>>) -> Vec<Arc<Value>> {
        let mut next: BTreeMap<NameKey, Arc<Value>> = BTreeMap::new();
        for object in fresh {
            next.insert(name_key(&object), object);
        }
        let mut objects = self.objects.write().unwrap_or_else(PoisonError::into_inner);
        let previous = std::mem::replace(&mut *objects, next);
        previous
            .into_iter()
            .filter(|(k, _)| !objects.contains_key(k))
            .map(|(_, o)| o)
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

fn name_key(object: &Value) -> NameKey {
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
    /// Role -> member names (`""` for a role's unnamed cluster), from the broker's clusters.
    members: BTreeMap<String, Vec<String>>,
}

impl Store {
    pub fn new() -> Arc<Self> {
        Arc::new(Store::default())
    }

    /// A store whose roles have these clusters (`ROLE` or `ROLE/NAME`).
    pub fn with_clusters<'a>(clusters: impl IntoIterator<Item = &'a str>) -> Arc<Self> {
        let mut members: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for id in clusters {
            let (role, name) = switchyard_core::object::split_cluster(id);
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
            members,
        })
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

    fn find(&self, cluster: &str, api_version: &str, kind: &str) -> Option<Arc<KindCache>> {
        self.cache(&KindKey {
            cluster: cluster.to_string(),
            api_version: api_version.to_string(),
            kind: kind.to_string(),
        })
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
        self.find(cluster, api_version, kind)?.get(namespace, name)
    }

    fn list(
        &self,
        cluster: &str,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Vec<Arc<Value>> {
        self.find(cluster, api_version, kind)
            .map(|c| c.list(namespace))
            .unwrap_or_default()
    }

    fn members(&self, role: &str) -> Vec<String> {
        self.members.get(role).cloned().unwrap_or_default()
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

    #[test]
    fn lists_one_namespace_or_all_in_order() {
        let store = Store::new();
        let cache = Arc::new(KindCache::new(false));
        for (ns, name) in [("b", "x"), ("a", "y"), ("ab", "z"), ("a", "x")] {
            cache.insert(cm(ns, name));
        }
        let key = KindKey {
            cluster: "source".into(),
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
        };
        store.add(key, cache.clone());
        let world: &dyn World = &*store;
        let names = |list: Vec<Arc<Value>>| -> Vec<String> {
            list.iter()
                .map(|o| {
                    format!(
                        "{}/{}",
                        o["metadata"]["namespace"].as_str().unwrap(),
                        o["metadata"]["name"].as_str().unwrap()
                    )
                })
                .collect()
        };
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
        let dropped = cache.replace(vec![cm("a", "x")]);
        assert_eq!(dropped.len(), 3);
        assert_eq!(cache.len(), 1);
    }
}
