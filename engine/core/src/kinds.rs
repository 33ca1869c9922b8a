//! What the engine knows of a kind without asking an API server: whether its objects live in
//! namespaces, and its resource name (the plural in URLs and RBAC rules).
//!
//! Built-in kinds come from a table of Kubernetes 1.34's served kinds; custom kinds from the
//! CRDs a pack loads with. The broker asks the API server (discovery) and refuses a pack whose
//! declaration disagrees; `check` uses what is here, so a pack that declares `v1 Namespace`
//! namespaced fails before it reaches a cluster.

use serde_json::Value;

/// Where a kind's objects live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Namespaced,
    Cluster,
}

impl Scope {
    pub fn is_cluster(self) -> bool {
        self == Scope::Cluster
    }

    /// `namespaced` or `cluster-scoped`, as messages say it.
    pub fn describe(self) -> &'static str {
        match self {
            Scope::Namespaced => "namespaced",
            Scope::Cluster => "cluster-scoped",
        }
    }
}

/// A kind's resource name and scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindInfo {
    /// The group (`""` for the core group).
    pub group: String,
    /// The plural resource name (`deployments`).
    pub resource: String,
    pub scope: Scope,
    /// Whether it has a `status` subresource.
    pub status: bool,
}

use Scope::{Cluster, Namespaced};

/// Built-in kinds of Kubernetes 1.34: (group, kind, resource, scope, has a status
/// subresource). A kind is matched by group and kind: each is served at one stable version
/// (older versions of the same kind share name and scope).
const BUILT_IN: &[(&str, &str, &str, Scope, bool)] = &[
    ("", "Binding", "bindings", Namespaced, false),
    ("", "ComponentStatus", "componentstatuses", Cluster, false),
    ("", "ConfigMap", "configmaps", Namespaced, false),
    ("", "Endpoints", "endpoints", Namespaced, false),
    ("", "Event", "events", Namespaced, false),
    ("", "LimitRange", "limitranges", Namespaced, false),
    ("", "Namespace", "namespaces", Cluster, true),
    ("", "Node", "nodes", Cluster, true),
    ("", "PersistentVolume", "persistentvolumes", Cluster, true),
    (
        "",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        Namespaced,
        true,
    ),
    ("", "Pod", "pods", Namespaced, true),
    ("", "PodTemplate", "podtemplates", Namespaced, false),
    (
        "",
        "ReplicationController",
        "replicationcontrollers",
        Namespaced,
        true,
    ),
    ("", "ResourceQuota", "resourcequotas", Namespaced, true),
    ("", "Secret", "secrets", Namespaced, false),
    ("", "Service", "services", Namespaced, true),
    ("", "ServiceAccount", "serviceaccounts", Namespaced, false),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        Cluster,
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        Cluster,
        true,
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        Cluster,
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        Cluster,
        false,
    ),
    (
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        Cluster,
        true,
    ),
    (
        "apiregistration.k8s.io",
        "APIService",
        "apiservices",
        Cluster,
        true,
    ),
    (
        "apps",
        "ControllerRevision",
        "controllerrevisions",
        Namespaced,
        false,
    ),
    ("apps", "DaemonSet", "daemonsets", Namespaced, true),
    ("apps", "Deployment", "deployments", Namespaced, true),
    ("apps", "ReplicaSet", "replicasets", Namespaced, true),
    ("apps", "StatefulSet", "statefulsets", Namespaced, true),
    (
        "autoscaling",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        Namespaced,
        true,
    ),
    ("batch", "CronJob", "cronjobs", Namespaced, true),
    ("batch", "Job", "jobs", Namespaced, true),
    (
        "certificates.k8s.io",
        "CertificateSigningRequest",
        "certificatesigningrequests",
        Cluster,
        true,
    ),
    ("coordination.k8s.io", "Lease", "leases", Namespaced, false),
    (
        "discovery.k8s.io",
        "EndpointSlice",
        "endpointslices",
        Namespaced,
        false,
    ),
    ("events.k8s.io", "Event", "events", Namespaced, false),
    (
        "flowcontrol.apiserver.k8s.io",
        "FlowSchema",
        "flowschemas",
        Cluster,
        true,
    ),
    (
        "flowcontrol.apiserver.k8s.io",
        "PriorityLevelConfiguration",
        "prioritylevelconfigurations",
        Cluster,
        true,
    ),
    (
        "networking.k8s.io",
        "IPAddress",
        "ipaddresses",
        Cluster,
        false,
    ),
    (
        "networking.k8s.io",
        "Ingress",
        "ingresses",
        Namespaced,
        true,
    ),
    (
        "networking.k8s.io",
        "IngressClass",
        "ingressclasses",
        Cluster,
        false,
    ),
    (
        "networking.k8s.io",
        "NetworkPolicy",
        "networkpolicies",
        Namespaced,
        false,
    ),
    (
        "networking.k8s.io",
        "ServiceCIDR",
        "servicecidrs",
        Cluster,
        true,
    ),
    (
        "node.k8s.io",
        "RuntimeClass",
        "runtimeclasses",
        Cluster,
        false,
    ),
    (
        "policy",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        Namespaced,
        true,
    ),
    (
        "rbac.authorization.k8s.io",
        "ClusterRole",
        "clusterroles",
        Cluster,
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "ClusterRoleBinding",
        "clusterrolebindings",
        Cluster,
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "Role",
        "roles",
        Namespaced,
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "RoleBinding",
        "rolebindings",
        Namespaced,
        false,
    ),
    (
        "resource.k8s.io",
        "DeviceClass",
        "deviceclasses",
        Cluster,
        false,
    ),
    (
        "resource.k8s.io",
        "ResourceClaim",
        "resourceclaims",
        Namespaced,
        true,
    ),
    (
        "resource.k8s.io",
        "ResourceClaimTemplate",
        "resourceclaimtemplates",
        Namespaced,
        false,
    ),
    (
        "resource.k8s.io",
        "ResourceSlice",
        "resourceslices",
        Cluster,
        false,
    ),
    (
        "scheduling.k8s.io",
        "PriorityClass",
        "priorityclasses",
        Cluster,
        false,
    ),
    ("storage.k8s.io", "CSIDriver", "csidrivers", Cluster, false),
    ("storage.k8s.io", "CSINode", "csinodes", Cluster, false),
    (
        "storage.k8s.io",
        "CSIStorageCapacity",
        "csistoragecapacities",
        Namespaced,
        false,
    ),
    (
        "storage.k8s.io",
        "StorageClass",
        "storageclasses",
        Cluster,
        false,
    ),
    (
        "storage.k8s.io",
        "VolumeAttachment",
        "volumeattachments",
        Cluster,
        true,
    ),
    (
        "storage.k8s.io",
        "VolumeAttributesClass",
        "volumeattributesclasses",
        Cluster,
        false,
    ),
];

/// The group of an `apiVersion` (`apps/v1` -> `apps`, `v1` -> `""`).
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

/// What Kubernetes 1.34 itself serves under this group and kind, if anything.
pub fn built_in(api_version: &str, kind: &str) -> Option<KindInfo> {
    let group = group_of(api_version);
    BUILT_IN
        .iter()
        .find(|(g, k, ..)| *g == group && *k == kind)
        .map(|(g, _, resource, scope, status)| KindInfo {
            group: (*g).to_string(),
            resource: (*resource).to_string(),
            scope: *scope,
            status: *status,
        })
}

/// What a CRD among `crds` says of this kind at this version: its plural, scope and whether
/// that version has a status subresource.
pub fn from_crds(crds: &[Value], api_version: &str, kind: &str) -> Option<KindInfo> {
    let (group, version) = api_version.rsplit_once('/')?;
    crds.iter().find_map(|crd| {
        let spec = crd.get("spec")?;
        if spec.get("group")?.as_str()? != group || spec.pointer("/names/kind")?.as_str()? != kind {
            return None;
        }
        let served = spec
            .get("versions")?
            .as_array()?
            .iter()
            .find(|v| v.get("name").and_then(Value::as_str) == Some(version))?;
        let scope = match spec.get("scope").and_then(Value::as_str) {
            Some("Cluster") => Cluster,
            _ => Namespaced,
        };
        Some(KindInfo {
            group: group.to_string(),
            resource: spec.pointer("/names/plural")?.as_str()?.to_string(),
            scope,
            status: served.pointer("/subresources/status").is_some(),
        })
    })
}

/// Whether a CRD among `crds` lets this kind's status hold `conditions`: `Some(false)` when
/// its schema at this version declares a `status` without a `conditions` field (and keeps no
/// unknown fields there), which makes the API server refuse a status carrying them; `None`
/// when no CRD describes the kind or its status is not described.
pub fn status_holds_conditions(crds: &[Value], api_version: &str, kind: &str) -> Option<bool> {
    let (group, version) = api_version.rsplit_once('/')?;
    let crd = crds.iter().find(|crd| {
        crd.pointer("/spec/group").and_then(Value::as_str) == Some(group)
            && crd.pointer("/spec/names/kind").and_then(Value::as_str) == Some(kind)
    })?;
    let served = crd
        .pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(version))?;
    let root = served.pointer("/schema/openAPIV3Schema")?;
    let preserves = |schema: &Value| {
        schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
    };
    let Some(status) = root.pointer("/properties/status") else {
        return Some(preserves(root));
    };
    Some(preserves(status) || status.pointer("/properties/conditions").is_some())
}

/// A kind as the CRDs or Kubernetes' own table describe it (the CRDs first: a pack may
/// bring its own definition of a group Kubernetes does not serve).
pub fn lookup(crds: &[Value], api_version: &str, kind: &str) -> Option<KindInfo> {
    from_crds(crds, api_version, kind).or_else(|| built_in(api_version, kind))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn built_in_kinds_have_their_scope() {
        let ns = built_in("v1", "Namespace").map(|k| k.scope);
        assert_eq!(ns, Some(Scope::Cluster));
        let deployment = built_in("apps/v1", "Deployment");
        assert_eq!(
            deployment,
            Some(KindInfo {
                group: "apps".into(),
                resource: "deployments".into(),
                scope: Scope::Namespaced,
                status: true,
            })
        );
        assert_eq!(
            built_in("rbac.authorization.k8s.io/v1", "ClusterRole").map(|k| k.scope),
            Some(Scope::Cluster)
        );
        assert!(built_in("apps/v1", "Namespace").is_none());
        assert!(built_in("example.com/v1", "Widget").is_none());
    }

    #[test]
    fn crds_say_their_scope_per_version() {
        let crd = json!({"spec": {
            "group": "cluster.karmada.io",
            "names": {"kind": "Cluster", "plural": "clusters"},
            "scope": "Cluster",
            "versions": [{"name": "v1alpha1", "subresources": {"status": {}}}],
        }});
        let found = lookup(
            std::slice::from_ref(&crd),
            "cluster.karmada.io/v1alpha1",
            "Cluster",
        );
        assert_eq!(found.as_ref().map(|k| k.scope), Some(Scope::Cluster));
        assert_eq!(found.map(|k| k.status), Some(true));
        assert!(lookup(&[crd], "cluster.karmada.io/v1", "Cluster").is_none());
    }
}
