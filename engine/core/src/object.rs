//! Object identity and the world snapshot rules read from.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

/// Kubernetes' name rules, as the CEL library checks them.
pub use switchyard_cel::{is_dns1123_label, is_dns1123_subdomain};

use crate::model::{LabelSelector, SelectorOperator};

/// The cluster an object lives in: `ROLE` for a role's one unnamed cluster, `ROLE/NAME` for a
/// named member of a role (the broker's `--cluster ROLE/NAME=...`, the inputs'
/// `switchyard.dev/cluster` annotation).
pub fn cluster_id(role: &str, name: &str) -> String {
    if name.is_empty() {
        role.to_string()
    } else {
        format!("{role}/{name}")
    }
}

/// The role and member name of a cluster id (`""` for a role's unnamed cluster).
pub fn split_cluster(id: &str) -> (&str, &str) {
    id.split_once('/').unwrap_or((id, ""))
}

/// Checks a cluster id's parts: a role is a DNS-1123 label; a member name is at most 253
/// letters, digits and `-._#:/` (multicluster-runtime names such as `consumer#cluster`, and
/// the path-like names of providers that name a cluster by its kubeconfig or project, e.g.
/// `projects/p1`). A role never holds `/`, so `ROLE/NAME` splits at its first `/`; a name never
/// holds `,` (which separates owners) or `=` (which ends it in `--cluster ROLE/NAME=...`).
pub fn check_cluster_id(id: &str) -> Result<(), String> {
    let (role, name) = split_cluster(id);
    if !is_dns1123_label(role) {
        return Err(format!(
            "cluster `{id}`: the role `{role}` is not a DNS-1123 label"
        ));
    }
    if id.contains('/') && !is_member_name(name) {
        return Err(format!(
            "cluster `{id}`: the member name `{name}` must be 1-253 letters, digits and `-._#:/`"
        ));
    }
    Ok(())
}

/// A member cluster's name ([`check_cluster_id`]).
pub fn is_member_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._#:/".contains(c))
}

/// A kcp workspace's name as a member name: a member name without `/`, since the workspace
/// becomes a segment of the URL its writes go to (`/clusters/<workspace>`).
pub fn is_workspace_name(name: &str) -> bool {
    is_member_name(name) && !name.contains('/')
}

/// Where an object lives and what it is: cluster (`ROLE` or `ROLE/NAME`, see [`cluster_id`]),
/// apiVersion, kind, namespace, name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ObjectKey {
    pub cluster: String,
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectKey {
    /// The key of `object` in `cluster`, or why it has none.
    pub fn of(cluster: &str, object: &Value) -> Result<ObjectKey, String> {
        let field = |path: &[&str]| -> Option<&str> {
            let mut v = object;
            for p in path {
                v = v.get(p)?;
            }
            v.as_str()
        };
        let api_version = field(&["apiVersion"]).ok_or("object has no `apiVersion`")?;
        let kind = field(&["kind"]).ok_or("object has no `kind`")?;
        let name = field(&["metadata", "name"]).ok_or("object has no `metadata.name`")?;
        let namespace = field(&["metadata", "namespace"]);
        ObjectKey::named(cluster, api_version, kind, namespace, name)
    }

    /// The key of the object of that kind, namespace (none when empty) and name, or why
    /// it has none.
    pub fn named(
        cluster: &str,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<ObjectKey, String> {
        let namespace = namespace.filter(|ns| !ns.is_empty()).map(str::to_string);
        // Names become identities (`switchyard.dev/owners` joins them with `,`): hold them
        // to Kubernetes' own rules before they do.
        if let Some(ns) = &namespace
            && !is_dns1123_label(ns)
        {
            return Err(format!(
                "metadata.namespace `{ns}` is not a valid Kubernetes namespace name"
            ));
        }
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let valid = if kind == "Namespace" && group.is_empty() {
            is_dns1123_label(name)
        } else if PATH_SEGMENT_NAMED_GROUPS.contains(&group) {
            is_path_segment_name(name)
        } else {
            is_dns1123_subdomain(name)
        };
        if !valid {
            return Err(format!(
                "metadata.name `{name}` is not a valid Kubernetes name"
            ));
        }
        Ok(ObjectKey {
            cluster: cluster.to_string(),
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            namespace,
            name: name.to_string(),
        })
    }

    /// The role of the object's cluster.
    pub fn role(&self) -> &str {
        split_cluster(&self.cluster).0
    }

    /// The API group (empty for the core group).
    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map(|(g, _)| g)
            .unwrap_or("")
    }

    /// `namespace/name`, or `name` for cluster-scoped objects.
    pub fn namespaced_name(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.clone(),
        }
    }
}

/// API groups whose object names Kubernetes checks only as path segments (RBAC roles such as
/// `system:controller:x`, flow control, certificate requests), not as DNS subdomains.
const PATH_SEGMENT_NAMED_GROUPS: &[&str] = &[
    "rbac.authorization.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "certificates.k8s.io",
];

/// A path segment name (Kubernetes' rule for RBAC names): not empty, `.` or `..`, without
/// `/` or `%`. A `,` is refused too, though Kubernetes allows it, because it separates
/// identities in `switchyard.dev/owners`.
fn is_path_segment_name(s: &str) -> bool {
    !s.is_empty() && s != "." && s != ".." && !s.contains(['/', '%', ','])
}

impl fmt::Display for ObjectKey {
    /// `cluster:Kind.group:namespace/name`, the identity written into ownership annotations.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let group = self.group();
        if group.is_empty() {
            write!(
                f,
                "{}:{}:{}",
                self.cluster,
                self.kind,
                self.namespaced_name()
            )
        } else {
            write!(
                f,
                "{}:{}.{}:{}",
                self.cluster,
                self.kind,
                group,
                self.namespaced_name()
            )
        }
    }
}

/// The objects rules can read. The CLI fills one from YAML files; the broker backs it with
/// its watch caches. Implementations must be cheap to call: every lookup goes through it.
pub trait World {
    /// One object by name (`namespace` is `None` for cluster-scoped kinds).
    fn get(
        &self,
        cluster: &str,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Arc<Value>>;

    /// Every object of a kind, in one namespace or all; sorted by namespace and name.
    fn list(
        &self,
        cluster: &str,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Vec<Arc<Value>>;

    /// The member clusters of a role, sorted by name; `""` stands for the role's unnamed
    /// cluster. Empty when nothing is known of the role.
    fn members(&self, role: &str) -> Vec<String>;

    /// The object behind a key.
    fn get_key(&self, key: &ObjectKey) -> Option<Arc<Value>> {
        self.get(
            &key.cluster,
            &key.api_version,
            &key.kind,
            key.namespace.as_deref(),
            &key.name,
        )
    }
}

type KindKey = (String, String, String);
type NameKey = (Option<String>, String);

/// A world held in memory, ordered for deterministic listing.
#[derive(Debug, Clone, Default)]
pub struct MemoryWorld {
    objects: BTreeMap<KindKey, BTreeMap<NameKey, Arc<Value>>>,
    /// Role -> member names: those of inserted objects and those added by name.
    members: BTreeMap<String, BTreeSet<String>>,
}

impl MemoryWorld {
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes a cluster (`ROLE` or `ROLE/NAME`) a known member of its role, with or without
    /// objects in it.
    pub fn add_cluster(&mut self, cluster: &str) -> Result<(), String> {
        check_cluster_id(cluster)?;
        let (role, name) = split_cluster(cluster);
        self.members
            .entry(role.to_string())
            .or_default()
            .insert(name.to_string());
        Ok(())
    }

    /// Adds or replaces an object; returns its key.
    pub fn insert(&mut self, cluster: &str, object: Value) -> Result<ObjectKey, String> {
        self.add_cluster(cluster)?;
        let key = ObjectKey::of(cluster, &object)?;
        self.objects
            .entry((
                key.cluster.clone(),
                key.api_version.clone(),
                key.kind.clone(),
            ))
            .or_default()
            .insert((key.namespace.clone(), key.name.clone()), Arc::new(object));
        Ok(key)
    }

    pub fn remove(&mut self, key: &ObjectKey) -> Option<Arc<Value>> {
        self.objects
            .get_mut(&(
                key.cluster.clone(),
                key.api_version.clone(),
                key.kind.clone(),
            ))?
            .remove(&(key.namespace.clone(), key.name.clone()))
    }

    /// Every object with its key, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (ObjectKey, &Arc<Value>)> {
        self.objects.iter().flat_map(|((cluster, av, kind), objs)| {
            objs.iter().map(move |((ns, name), obj)| {
                (
                    ObjectKey {
                        cluster: cluster.clone(),
                        api_version: av.clone(),
                        kind: kind.clone(),
                        namespace: ns.clone(),
                        name: name.clone(),
                    },
                    obj,
                )
            })
        })
    }

    pub fn len(&self) -> usize {
        self.objects.values().map(BTreeMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl World for MemoryWorld {
    fn get(
        &self,
        cluster: &str,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Arc<Value>> {
        self.objects
            .get(&(
                cluster.to_string(),
                api_version.to_string(),
                kind.to_string(),
            ))?
            .get(&(namespace.map(str::to_string), name.to_string()))
            .cloned()
    }

    fn list(
        &self,
        cluster: &str,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Vec<Arc<Value>> {
        let Some(objects) = self.objects.get(&(
            cluster.to_string(),
            api_version.to_string(),
            kind.to_string(),
        )) else {
            return Vec::new();
        };
        objects
            .iter()
            .filter(|((ns, _), _)| namespace.is_none() || ns.as_deref() == namespace)
            .map(|(_, o)| o.clone())
            .collect()
    }

    fn members(&self, role: &str) -> Vec<String> {
        self.members
            .get(role)
            .map(|names| names.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// What one cluster wrote into an object, which a copy in another cluster must not carry
/// (the resource-broker's `StripClusterMetadata`): status, and every metadata field but the
/// name, namespace and generateName.
pub fn strip_cluster_metadata(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Value::Object(fields) = &mut copy {
        fields.remove("status");
        if let Some(Value::Object(metadata)) = fields.get_mut("metadata") {
            metadata.retain(|k, _| matches!(k.as_str(), "name" | "namespace" | "generateName"));
        }
    }
    copy
}

/// The object's labels.
pub fn labels(object: &Value) -> BTreeMap<String, String> {
    object
        .at(&["metadata", "labels"])
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// Kubernetes label-selector semantics.
pub fn selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    selector
        .match_labels
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v))
        && selector.match_expressions.iter().all(|req| {
            let value = labels.get(&req.key);
            match req.operator {
                SelectorOperator::In => value.is_some_and(|v| req.values.contains(v)),
                SelectorOperator::NotIn => value.is_none_or(|v| !req.values.contains(v)),
                SelectorOperator::Exists => value.is_some(),
                SelectorOperator::DoesNotExist => value.is_none(),
            }
        })
}

/// A member of a JSON value by path (`value.at(&["metadata", "uid"])`): what
/// `Value::pointer` reads, without parsing and unescaping a pointer string each time.
pub trait At {
    fn at(&self, path: &[&str]) -> Option<&Value>;
}

impl At for Value {
    fn at(&self, path: &[&str]) -> Option<&Value> {
        path.iter().try_fold(self, |value, key| match value {
            Value::Object(map) => map.get(*key),
            Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LabelSelectorRequirement;
    use serde_json::json;

    #[test]
    fn identity_strings() {
        let key = ObjectKey::of(
            "source",
            &json!({"apiVersion": "platform.edge-portal.eu/v1alpha1", "kind": "FleetWorkload",
                    "metadata": {"name": "web", "namespace": "team-a"}}),
        )
        .unwrap();
        assert_eq!(
            key.to_string(),
            "source:FleetWorkload.platform.edge-portal.eu:team-a/web"
        );
        let ns = ObjectKey::of(
            "karmada",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kcp-1"}}),
        )
        .unwrap();
        assert_eq!(ns.to_string(), "karmada:Namespace:kcp-1");
    }

    #[test]
    fn missing_identity_fields() {
        assert_eq!(
            ObjectKey::of("c", &json!({"kind": "X"})).unwrap_err(),
            "object has no `apiVersion`"
        );
    }

    #[test]
    fn selectors() {
        let labels: BTreeMap<String, String> = [("app".to_string(), "web".to_string())]
            .into_iter()
            .collect();
        let sel = LabelSelector {
            match_labels: labels.clone(),
            match_expressions: vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator: SelectorOperator::DoesNotExist,
                values: vec![],
            }],
        };
        assert!(selector_matches(&sel, &labels));
        let sel = LabelSelector {
            match_labels: BTreeMap::new(),
            match_expressions: vec![LabelSelectorRequirement {
                key: "app".into(),
                operator: SelectorOperator::NotIn,
                values: vec!["web".into()],
            }],
        };
        assert!(!selector_matches(&sel, &labels));
    }

    #[test]
    fn memory_world_lists_in_order() {
        let mut world = MemoryWorld::new();
        for (ns, name) in [("b", "x"), ("a", "y"), ("a", "x")] {
            world
                .insert(
                    "c",
                    json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": name, "namespace": ns}}),
                )
                .unwrap();
        }
        let names: Vec<String> = world
            .list("c", "v1", "ConfigMap", None)
            .iter()
            .map(|o| format!("{}/{}", o["metadata"]["namespace"], o["metadata"]["name"]))
            .collect();
        assert_eq!(names, ["\"a\"/\"x\"", "\"a\"/\"y\"", "\"b\"/\"x\""]);
        assert_eq!(world.list("c", "v1", "ConfigMap", Some("a")).len(), 2);
    }
}
