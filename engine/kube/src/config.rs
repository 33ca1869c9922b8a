//! The broker's configuration: a `BrokerConfig` file (`--config FILE`) and the flags of
//! `switchyard run`, which override it.
//!
//! ```yaml
//! apiVersion: switchyard.dev/v1alpha1
//! kind: BrokerConfig
//! spec:
//!   packs: /etc/switchyard/packs
//!   clusters:
//!     - {role: source, kubeconfig: /etc/switchyard/kcp.kubeconfig, context: root}
//!     - {role: karmada, inCluster: true}
//! ```
//!
//! Relative paths in a file are relative to the file's folder (as in a kubeconfig); relative
//! paths in flags are relative to the working directory.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use switchyard_core::model::ApiVersion;
use switchyard_core::yaml::{self, Node, PathSegment};

/// What `--cluster karmada=in-cluster` writes instead of a kubeconfig path.
pub const IN_CLUSTER: &str = "in-cluster";

/// The configuration file: `apiVersion`, `kind: BrokerConfig` and the `spec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "Switchyard broker configuration (switchyard.dev/v1alpha1)")]
pub struct BrokerConfigDocument {
    pub api_version: ApiVersion,
    /// Always `BrokerConfig`.
    pub kind: BrokerConfigKind,
    pub spec: BrokerConfig,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum BrokerConfigKind {
    BrokerConfig,
}

/// How `switchyard run` is set up: which packs it runs and which clusters it connects to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BrokerConfig {
    /// The packs folder: a pack itself (it has a `pack.yaml`), or a folder whose immediate
    /// subfolders with a `pack.yaml` are the packs. Watched: a change reloads every pack.
    /// Required (here or with `--packs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packs: Option<PathBuf>,
    /// The shared partials folder; default the nearest `templates/` folder above each pack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partials: Option<PathBuf>,
    /// Folders or files of CustomResourceDefinitions the packs' expressions are type-checked
    /// against; default the nearest `config/crds/` folder above each pack.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub crds: Vec<PathBuf>,
    /// The clusters the broker connects to, each filling a cluster role of the packs.
    #[serde(default)]
    pub clusters: Vec<ClusterConfig>,
    /// Roles whose members are found while the broker runs rather than listed in
    /// `clusters`: each names its role and where its members come from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<MemberSource>,
    /// How often every trigger is evaluated again even when nothing changed, in seconds.
    #[serde(default = "default_resync_seconds")]
    pub resync_seconds: u64,
    /// How many triggers are evaluated and applied at once.
    #[serde(default = "default_workers")]
    pub workers: usize,
    /// Where the probes `/healthz`, `/livez` and `/readyz` are served (`host:port`).
    #[serde(default = "default_health_addr")]
    pub health_addr: String,
    /// Where `/metrics` is served (`host:port`); the same address as `healthAddr` serves
    /// both there.
    #[serde(default = "default_metrics_addr")]
    pub metrics_addr: String,
    /// Compete for a Lease so that one broker of several writes (`--leader-elect`); the
    /// others keep their caches warm and take over when the leader goes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub leader_elect: bool,
    /// The Lease's name.
    #[serde(default = "default_lease_name")]
    pub leader_elect_lease_name: String,
    /// The Lease's namespace; default the pod's (`POD_NAMESPACE`), else `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_elect_namespace: Option<String>,
    /// The cluster (`ROLE` or `ROLE/NAME`) that holds the Lease: the broker's own; default
    /// the one configured `inCluster`, else the first configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_elect_cluster: Option<String>,
    /// How long a lease lasts without renewal, in seconds: the longest a broker that died
    /// holds it.
    #[serde(default = "default_lease_seconds")]
    pub leader_elect_lease_seconds: u64,
    /// How long before the lease expires the leader renews it, in seconds.
    #[serde(default = "default_renew_before_seconds")]
    pub leader_elect_renew_before_seconds: u64,
    /// How many shards the triggers are split into (by a stable hash of their key), each
    /// held through a Lease of its own (`<lease>-shard-<i>`) by one of the replicas; 1 (the
    /// default): no sharding, one leader. More than 1 needs `leaderElect`.
    #[serde(default = "default_shards")]
    pub shards: u32,
    /// How long the packs folder must be quiet after a change before packs are reloaded, in
    /// milliseconds.
    #[serde(default = "default_reload_debounce_millis")]
    pub reload_debounce_millis: u64,
    /// The format of log lines on stderr.
    #[serde(default)]
    pub log_format: LogFormat,
    /// Values of the packs' parameters (`spec.parameters` of a pack), by pack name:
    /// `{multicluster-ingress: {ingressClass: nginx}}`. Checked against each parameter's
    /// schema when the packs load; a pack with a parameter that has neither a value here
    /// nor a default does not load.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub values: BTreeMap<String, serde_json::Map<String, serde_json::Value>>,
    /// The file and the node `values` was read from, for positions in errors.
    #[serde(skip)]
    #[schemars(skip)]
    pub values_origin: Option<(String, Node)>,
    /// The file this configuration was read from and the flags applied over it: the broker
    /// watches the file and reads it again (with the same flags) when it changes. Not part
    /// of the file.
    #[serde(skip)]
    #[schemars(skip)]
    pub origin: Option<ConfigOrigin>,
}

/// Where a running configuration came from, to read it again.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigOrigin {
    pub path: PathBuf,
    pub flags: Flags,
}

impl ConfigOrigin {
    /// The file read again with the same flags over it, and checked as at start.
    pub fn load(&self) -> Result<BrokerConfig, ConfigError> {
        let mut config = BrokerConfig::from_file(&self.path)?.with_flags(self.flags.clone())?;
        config.origin = Some(self.clone());
        Ok(config)
    }
}

/// One cluster connection: a kubeconfig (and optionally one of its contexts), or the
/// service account of the pod the broker runs in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterConfig {
    /// The cluster role the packs name (`source`, `karmada`): a DNS-1123 label.
    pub role: String,
    /// The member's name when a role has several clusters (`provider/x86`): 1-253 letters,
    /// digits and `-._#:/` (`projects/p1` names the member `source/projects/p1`). A role has
    /// either one unnamed cluster or only named ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The kubeconfig file. Exactly one of `kubeconfig` and `inCluster` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use; default its current context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// Connect with the pod's service account to the cluster the broker runs in.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_cluster: bool,
    /// For a role whose objects live in kcp workspaces: reach each workspace at
    /// `/clusters/<workspace>` under this cluster's URL, as a kcp virtual workspace serves
    /// them (the default). `false`: this cluster serves every workspace's objects itself, as
    /// one API server holding them all does in development (`--no-workspace-paths ROLE`).
    #[serde(default = "workspace_paths", skip_serializing_if = "is_true")]
    pub workspace_paths: bool,
}

fn workspace_paths() -> bool {
    true
}

fn is_true(value: &bool) -> bool {
    *value
}

/// Where the members of one role come from while the broker runs. Exactly one source is
/// set. A member joins once every watch the packs need in it has listed (packs never see a
/// member whose caches are incomplete), and leaves when its source drops it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemberSource {
    /// The cluster role (`mesh`): a DNS-1123 label no entry of `clusters` has.
    pub role: String,
    /// Kubeconfig Secrets in one namespace, labelled `switchyard.dev/cluster-role: <role>`;
    /// a Secret's member name is its annotation `switchyard.dev/cluster-name`, else its
    /// name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets: Option<SecretsSource>,
    /// Objects of any kind that name a kubeconfig Secret (a Cluster API or management
    /// plane's Cluster objects), with CEL for the member's name, the Secret and whether the
    /// member is usable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objects: Option<ObjectsSource>,
    /// ClusterProfiles of the Cluster Inventory API (`multicluster.x-k8s.io/v1alpha1`):
    /// each one whose status lists an access provider configured here is a member, reached
    /// at the server the status gives, with the provider's credentials plugin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_profiles: Option<ClusterProfilesSource>,
    /// The workspaces behind a kcp APIExportEndpointSlice's URLs: each workspace seen
    /// through a URL is a member named by its logical cluster (`kcp.io/cluster`), reached at
    /// `<url>/clusters/<name>`, every member of a URL sharing that URL's one connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kcp: Option<KcpSource>,
}

/// Members from a kcp APIExportEndpointSlice (`apis.kcp.io/v1alpha1`): its
/// `status.endpoints[].url` are virtual workspace URLs; through each one's wildcard
/// (`<url>/clusters/*`) the objects of `kind` are listed and watched, and every logical
/// cluster (`kcp.io/cluster`) that has one of them is a member, until it has none or the URL
/// leaves the slice. The URLs are reached with the credentials of the cluster holding the
/// slice, as kcp's front proxy serves both.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KcpSource {
    /// The APIExportEndpointSlice's name (the kind is cluster-scoped).
    pub endpoint_slice: String,
    /// The apiVersion of the kind whose objects reveal the workspaces.
    #[serde(default = "default_kcp_api_version")]
    pub api_version: String,
    /// The kind whose objects reveal the workspaces: by default the APIBindings the
    /// APIExport's virtual workspace shows, one per workspace that binds the export (as
    /// kcp's multicluster-runtime provider finds them).
    #[serde(default = "default_kcp_kind")]
    pub kind: String,
    /// The configured cluster holding the slice; default the broker's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
}

fn default_kcp_api_version() -> String {
    "apis.kcp.io/v1alpha1".to_string()
}

fn default_kcp_kind() -> String {
    "APIBinding".to_string()
}

/// Members from ClusterProfiles (sigs.k8s.io/cluster-inventory-api), with credentials
/// through its access-provider mechanism: `status.accessProviders[]` gives, per provider
/// name, the cluster's server and CA; the consumer (the broker) configures, per provider
/// name, the exec credentials plugin that authenticates there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterProfilesSource {
    /// The namespace of the ClusterProfiles.
    pub namespace: String,
    /// A label selector the profiles must match (`x-k8s.io/cluster-manager=ocm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<String>,
    /// The access providers the broker can use, in order of preference.
    pub providers: Vec<AccessProvider>,
    /// CEL over the profile (`self`): whether it is usable now. Default: always.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usable: Option<String>,
    /// The configured cluster holding the profiles; default the broker's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
}

/// One access provider: its name in the profiles' status, and how the broker authenticates
/// through it: a kubeconfig `exec` entry (a client-go credentials plugin), or the kubeconfig
/// Secret the profile names. Exactly one of `execConfig` and `kubeconfigSecret` is set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AccessProvider {
    pub name: String,
    /// As a kubeconfig's `users[].user.exec`: `apiVersion`, `command`, `args`, `env`,
    /// `provideClusterInfo`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec_config: Option<serde_json::Value>,
    /// Read the kubeconfig Secret the profile's entry for this provider names, as the
    /// Cluster Inventory API's `kubeconfig-secretreader` plugin does: the entry's
    /// `cluster.extensions[]` item named `client.authentication.k8s.io/exec` holds
    /// `{name, key, namespace, context}` (namespace default the profile's, context default
    /// the kubeconfig's current one); that context's user authenticates, at the server and
    /// CA the entry gives. The Secret must be in the profiles' namespace (the one watched).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kubeconfig_secret: bool,
}

/// Members from objects that name a kubeconfig Secret. Each expression reads the object as
/// `self`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectsSource {
    /// The objects' apiVersion (`cluster.x-k8s.io/v1beta1`).
    pub api_version: String,
    /// The objects' kind (`Cluster`).
    pub kind: String,
    /// The namespace of the objects, and of the Secrets they name.
    pub namespace: String,
    /// A label selector the objects must match (`team=network`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<String>,
    /// CEL: the member's name (a string).
    #[serde(default = "default_member_name")]
    pub name: String,
    /// CEL: the Secret holding the kubeconfig: a map with `name` and optionally `key`
    /// (`self.status.kubeconfigSecretRef`).
    pub secret_ref: String,
    /// CEL: whether the member is usable now (a bool); an object for which it is false is no
    /// member (one that was leaves). Default: always.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usable: Option<String>,
    /// The data key holding the kubeconfig when the reference names none.
    #[serde(default = "default_kubeconfig_key")]
    pub key: String,
    /// The configured cluster holding the objects and Secrets; default the broker's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
}

fn default_member_name() -> String {
    "self.metadata.name".to_string()
}

/// Members from kubeconfig Secrets (as Argo CD's cluster Secrets and Cluster API's
/// `<cluster>-kubeconfig` Secrets hold them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretsSource {
    /// The namespace the Secrets are in.
    pub namespace: String,
    /// The data key holding the kubeconfig (its current context is used).
    #[serde(default = "default_kubeconfig_key")]
    pub key: String,
    /// The configured cluster (`ROLE` or `ROLE/NAME`) the Secrets are in; default the
    /// broker's own: the one configured `inCluster`, else the first configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
}

fn default_kubeconfig_key() -> String {
    "kubeconfig".to_string()
}

impl MemberSource {
    /// What the source is, for messages: `Secrets in switchyard-system`.
    pub fn describe(&self) -> String {
        match (
            &self.secrets,
            &self.objects,
            &self.cluster_profiles,
            &self.kcp,
        ) {
            (Some(s), _, _, _) => format!("Secrets in namespace `{}`", s.namespace),
            (None, Some(o), _, _) => {
                format!(
                    "{} {} in namespace `{}`",
                    o.api_version, o.kind, o.namespace
                )
            }
            (None, None, Some(p), _) => {
                format!("ClusterProfiles in namespace `{}`", p.namespace)
            }
            (None, None, None, Some(k)) => {
                format!("the URLs of APIExportEndpointSlice `{}`", k.endpoint_slice)
            }
            (None, None, None, None) => "no source".to_string(),
        }
    }

    /// The configured cluster holding the source's objects, when named.
    pub fn cluster(&self) -> Option<&str> {
        match (
            &self.secrets,
            &self.objects,
            &self.cluster_profiles,
            &self.kcp,
        ) {
            (Some(s), _, _, _) => s.cluster.as_deref(),
            (None, Some(o), _, _) => o.cluster.as_deref(),
            (None, None, Some(p), _) => p.cluster.as_deref(),
            (None, None, None, Some(k)) => k.cluster.as_deref(),
            (None, None, None, None) => None,
        }
    }

    /// A ClusterProfiles source as the objects source it is run as: profiles are objects,
    /// usable as `usable` says, their credentials from the access providers.
    pub fn profiles_as_objects(profiles: &ClusterProfilesSource) -> ObjectsSource {
        ObjectsSource {
            api_version: "multicluster.x-k8s.io/v1alpha1".into(),
            kind: "ClusterProfile".into(),
            namespace: profiles.namespace.clone(),
            labels: profiles.labels.clone(),
            name: default_member_name(),
            secret_ref: "null".into(),
            usable: profiles.usable.clone(),
            key: default_kubeconfig_key(),
            cluster: profiles.cluster.clone(),
        }
    }
}

/// The format of log lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

fn default_resync_seconds() -> u64 {
    300
}

fn default_workers() -> usize {
    8
}

/// controller-runtime's defaults: probes on 8081, metrics on 8080.
fn default_health_addr() -> String {
    "0.0.0.0:8081".to_string()
}

fn default_metrics_addr() -> String {
    "0.0.0.0:8080".to_string()
}

fn default_lease_name() -> String {
    "switchyard".to_string()
}

/// controller-runtime's lease duration.
fn default_lease_seconds() -> u64 {
    15
}

fn default_renew_before_seconds() -> u64 {
    5
}

fn default_shards() -> u32 {
    1
}

fn default_reload_debounce_millis() -> u64 {
    500
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            packs: None,
            partials: None,
            crds: Vec::new(),
            clusters: Vec::new(),
            members: Vec::new(),
            resync_seconds: default_resync_seconds(),
            workers: default_workers(),
            health_addr: default_health_addr(),
            metrics_addr: default_metrics_addr(),
            leader_elect: false,
            leader_elect_lease_name: default_lease_name(),
            leader_elect_namespace: None,
            leader_elect_cluster: None,
            leader_elect_lease_seconds: default_lease_seconds(),
            leader_elect_renew_before_seconds: default_renew_before_seconds(),
            shards: default_shards(),
            reload_debounce_millis: default_reload_debounce_millis(),
            log_format: LogFormat::default(),
            origin: None,
            values: BTreeMap::new(),
            values_origin: None,
        }
    }
}

/// A cluster's identity: its role, and its name within the role when the role has several.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClusterId {
    pub role: String,
    pub name: Option<String>,
}

impl ClusterId {
    pub fn new(role: impl Into<String>, name: Option<String>) -> Self {
        ClusterId {
            role: role.into(),
            name,
        }
    }
}

/// `role` or `role/name`.
impl fmt::Display for ClusterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            Some(name) => write!(f, "{}/{name}", self.role),
            None => f.write_str(&self.role),
        }
    }
}

impl ClusterConfig {
    pub fn id(&self) -> ClusterId {
        ClusterId::new(self.role.clone(), self.name.clone())
    }
}

/// The command-line flags of `switchyard run` that override the file. `None` and empty
/// lists leave the file's value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Flags {
    pub packs: Option<PathBuf>,
    pub partials: Option<PathBuf>,
    /// Replaces the file's `crds` when not empty.
    pub crds: Vec<PathBuf>,
    /// From [`parse_cluster_flag`]; each replaces the file's cluster with the same role and
    /// name, or is added.
    pub clusters: Vec<ClusterConfig>,
    pub resync_seconds: Option<u64>,
    pub workers: Option<usize>,
    pub health_addr: Option<String>,
    pub metrics_addr: Option<String>,
    /// Roles whose cluster serves every workspace's objects itself (see
    /// [`ClusterConfig::workspace_paths`]).
    pub no_workspace_paths: Vec<String>,
    pub leader_elect: bool,
    pub leader_elect_lease_name: Option<String>,
    pub leader_elect_namespace: Option<String>,
    pub leader_elect_cluster: Option<String>,
    pub leader_elect_lease_seconds: Option<u64>,
    pub leader_elect_renew_before_seconds: Option<u64>,
    pub shards: Option<u32>,
    pub reload_debounce_millis: Option<u64>,
    pub log_format: Option<LogFormat>,
}

/// Errors in the configuration and in connecting to clusters. Each names the file (with
/// line and column), the flag or the cluster it is about.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// A problem in the configuration file, at `file:line:col`.
    #[error("{location}: {message}")]
    File { location: String, message: String },
    #[error("--cluster `{flag}`: {message}")]
    ClusterFlag { flag: String, message: String },
    /// A problem in the configuration as a whole (after the flags are applied).
    #[error("{0}")]
    Invalid(String),
    #[error("cluster `{cluster}`: kubeconfig `{path}`: {source}")]
    Kubeconfig {
        cluster: ClusterId,
        path: String,
        source: Box<kube::config::KubeconfigError>,
    },
    #[error("cluster `{cluster}`: in-cluster configuration: {source}")]
    InCluster {
        cluster: ClusterId,
        source: Box<kube::config::InClusterError>,
    },
    #[error("cluster `{cluster}` ({source_text}): cannot create a client: {error}")]
    Client {
        cluster: ClusterId,
        /// The kubeconfig file, or `in-cluster`.
        source_text: String,
        error: Box<kube::Error>,
    },
}

const CLUSTER_FLAG_FORMS: &str =
    "expected ROLE=KUBECONFIG[@CONTEXT], ROLE/NAME=KUBECONFIG[@CONTEXT] or ROLE=in-cluster";

/// Parses a `--cluster` value: `source=/path/kc`, `provider/x86=/path/kc@ctx` or
/// `karmada=in-cluster`. The context follows the first `@` (context names such as
/// `kubernetes-admin@kubernetes` keep theirs); a kubeconfig path containing `@` is written in
/// the configuration file instead.
pub fn parse_cluster_flag(s: &str) -> Result<ClusterConfig, ConfigError> {
    let fail = |message: String| ConfigError::ClusterFlag {
        flag: s.to_string(),
        message,
    };
    let Some((id, target)) = s.split_once('=') else {
        return Err(fail(format!("no `=`: {CLUSTER_FLAG_FORMS}")));
    };
    let (role, name) = match id.split_once('/') {
        Some((role, name)) => (role, Some(name)),
        None => (id, None),
    };
    if role.is_empty() {
        return Err(fail(format!("no role before `=`: {CLUSTER_FLAG_FORMS}")));
    }
    check_label("role", role).map_err(fail)?;
    if let Some(name) = name {
        check_member("cluster name", name).map_err(fail)?;
    }
    let name = name.map(str::to_string);
    if target == IN_CLUSTER {
        return Ok(ClusterConfig {
            role: role.to_string(),
            name,
            kubeconfig: None,
            context: None,
            in_cluster: true,
            workspace_paths: true,
        });
    }
    let (path, context) = match target.split_once('@') {
        Some((path, context)) => (path, Some(context)),
        None => (target, None),
    };
    if path == IN_CLUSTER {
        return Err(fail(
            "`in-cluster` takes no context: the pod's service account has one cluster".into(),
        ));
    }
    if path.is_empty() {
        return Err(fail(format!(
            "no kubeconfig path after `=`: {CLUSTER_FLAG_FORMS}"
        )));
    }
    if context == Some("") {
        return Err(fail(
            "no context after `@` (leave out `@` for the kubeconfig's current context)".into(),
        ));
    }
    Ok(ClusterConfig {
        role: role.to_string(),
        name,
        kubeconfig: Some(PathBuf::from(path)),
        context: context.map(str::to_string),
        in_cluster: false,
        workspace_paths: true,
    })
}

/// `Err(message)` when `value` is not a DNS-1123 label.
fn check_label(what: &str, value: &str) -> Result<(), String> {
    if switchyard_core::object::is_dns1123_label(value) {
        Ok(())
    } else {
        Err(format!(
            "{what} `{value}` is not a DNS-1123 label (lowercase letters, digits and `-`, \
             starting and ending with a letter or digit, at most 63 characters)"
        ))
    }
}

/// `Err(message)` when `value` cannot name a member cluster (the core's rule: packs see these
/// names, and multicluster-runtime names such as `consumer#cluster` must fit).
fn check_member(what: &str, value: &str) -> Result<(), String> {
    if switchyard_core::object::is_member_name(value) {
        Ok(())
    } else {
        Err(format!(
            "{what} `{value}` is not a member cluster name (1-253 letters, digits and `-._#:/`)"
        ))
    }
}

impl BrokerConfig {
    /// Reads a `BrokerConfig` file. Syntax errors, unknown fields, wrong types and invalid
    /// clusters are reported at their `file:line:col`. Relative paths are made relative to the
    /// file's folder. Whether the configuration is complete (packs, clusters) is checked by
    /// [`BrokerConfig::with_flags`], since flags may complete it.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let shown = switchyard_files::display(path);
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: shown.clone(),
            source,
        })?;
        let mut config = Self::from_yaml(&text, &shown)?;
        let base = path.parent().unwrap_or(Path::new(""));
        config.resolve_paths(base);
        Ok(config)
    }

    /// Parses the text of a `BrokerConfig` file; `file` is how it is named in errors. Paths
    /// are left as written.
    pub fn from_yaml(text: &str, file: &str) -> Result<Self, ConfigError> {
        let at = |pos: yaml::Pos, message: String| ConfigError::File {
            location: format!("{file}:{}:{}", pos.line, pos.column),
            message,
        };
        let documents = yaml::parse_documents(text)
            .map_err(|e| at(e.pos, format!("invalid YAML: {}", e.message)))?;
        let documents: Vec<&Node> = documents
            .iter()
            .filter(|n| !matches!(n.value, yaml::NodeValue::Scalar(serde_json::Value::Null, _)))
            .collect();
        let [node] = documents.as_slice() else {
            return Err(ConfigError::File {
                location: file.to_string(),
                message: format!(
                    "expected one BrokerConfig document, found {}",
                    documents.len()
                ),
            });
        };
        let document: BrokerConfigDocument = serde_path_to_error::deserialize(node.to_json())
            .map_err(|error| {
                let message = without_type_names(&error.inner().to_string());
                let mut path = yaml::parse_path(&error.path().to_string());
                let pos = match message.split('`').nth(1) {
                    // Point at the unknown key itself, whether or not the path ends with it.
                    Some(field) if message.starts_with("unknown field") => {
                        if path.last() != Some(&PathSegment::Key(field.to_string())) {
                            path.push(PathSegment::Key(field.to_string()));
                        }
                        let (parent, last) = path.split_at(path.len() - 1);
                        let parent = node.closest(parent);
                        match last {
                            [PathSegment::Key(k)] => parent.key_pos(k).unwrap_or(parent.pos),
                            _ => parent.pos,
                        }
                    }
                    _ => node.closest(&path).pos,
                };
                let shown = yaml::path_to_string(&path);
                if shown.is_empty() || shown == "." {
                    at(pos, message)
                } else {
                    at(pos, format!("{message} at `{shown}`"))
                }
            })?;
        let mut config = document.spec;
        if let Some(values) = node.get(&yaml::parse_path("spec.values")) {
            config.values_origin = Some((file.to_string(), values.clone()));
        }
        if let Some((i, problem)) = cluster_problems(&config.clusters).into_iter().next() {
            let path = match i {
                Some(i) => format!("spec.clusters[{i}]"),
                None => "spec.clusters".to_string(),
            };
            return Err(at(node.closest(&yaml::parse_path(&path)).pos, problem));
        }
        if let Some((i, problem)) = config.member_problems().into_iter().next() {
            let path = format!("spec.members[{i}]");
            return Err(at(node.closest(&yaml::parse_path(&path)).pos, problem));
        }
        Ok(config)
    }

    /// Makes relative paths relative to `base`.
    fn resolve_paths(&mut self, base: &Path) {
        let resolve = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        if let Some(p) = &mut self.packs {
            resolve(p);
        }
        if let Some(p) = &mut self.partials {
            resolve(p);
        }
        self.crds.iter_mut().for_each(resolve);
        for cluster in &mut self.clusters {
            if let Some(p) = &mut cluster.kubeconfig {
                resolve(p);
            }
        }
    }

    /// Applies the flags over this configuration (from a file, or the default) and checks the
    /// result is complete and valid.
    pub fn with_flags(mut self, flags: Flags) -> Result<Self, ConfigError> {
        let Flags {
            packs,
            partials,
            crds,
            clusters,
            resync_seconds,
            workers,
            health_addr,
            metrics_addr,
            no_workspace_paths,
            leader_elect,
            leader_elect_lease_name,
            leader_elect_namespace,
            leader_elect_cluster,
            leader_elect_lease_seconds,
            leader_elect_renew_before_seconds,
            shards,
            reload_debounce_millis,
            log_format,
        } = flags;
        if let Some(v) = leader_elect_renew_before_seconds {
            self.leader_elect_renew_before_seconds = v;
        }
        if let Some(v) = shards {
            self.shards = v;
        }
        self.leader_elect |= leader_elect;
        if let Some(v) = leader_elect_lease_name {
            self.leader_elect_lease_name = v;
        }
        if leader_elect_namespace.is_some() {
            self.leader_elect_namespace = leader_elect_namespace;
        }
        if leader_elect_cluster.is_some() {
            self.leader_elect_cluster = leader_elect_cluster;
        }
        if let Some(v) = leader_elect_lease_seconds {
            self.leader_elect_lease_seconds = v;
        }
        if packs.is_some() {
            self.packs = packs;
        }
        if partials.is_some() {
            self.partials = partials;
        }
        if !crds.is_empty() {
            self.crds = crds;
        }
        for cluster in clusters {
            let id = cluster.id();
            match self.clusters.iter_mut().find(|c| c.id() == id) {
                Some(existing) => *existing = cluster,
                None => self.clusters.push(cluster),
            }
        }
        if let Some(v) = resync_seconds {
            self.resync_seconds = v;
        }
        if let Some(v) = workers {
            self.workers = v;
        }
        if let Some(v) = health_addr {
            self.health_addr = v;
        }
        if let Some(v) = metrics_addr {
            self.metrics_addr = v;
        }
        for role in no_workspace_paths {
            let mut found = false;
            for cluster in self.clusters.iter_mut().filter(|c| c.role == role) {
                cluster.workspace_paths = false;
                found = true;
            }
            if !found {
                return Err(ConfigError::Invalid(format!(
                    "--no-workspace-paths `{role}`: no cluster of that role is configured"
                )));
            }
        }
        if let Some(v) = reload_debounce_millis {
            self.reload_debounce_millis = v;
        }
        if let Some(v) = log_format {
            self.log_format = v;
        }
        self.validate()?;
        Ok(self)
    }

    /// Checks the configuration is complete and consistent.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.packs.is_none() {
            return Err(ConfigError::Invalid(
                "no packs folder: give `--packs DIR` or `spec.packs` in the configuration file"
                    .into(),
            ));
        }
        if self.clusters.is_empty() {
            return Err(ConfigError::Invalid(
                "no clusters: give `--cluster ROLE=KUBECONFIG[@CONTEXT]` (repeatable) or \
                 `spec.clusters` in the configuration file"
                    .into(),
            ));
        }
        if let Some((_, problem)) = cluster_problems(&self.clusters).into_iter().next() {
            return Err(ConfigError::Invalid(problem));
        }
        if let Some((_, problem)) = self.member_problems().into_iter().next() {
            return Err(ConfigError::Invalid(problem));
        }
        if self.workers == 0 {
            return Err(ConfigError::Invalid("workers must be at least 1".into()));
        }
        if self.resync_seconds == 0 {
            return Err(ConfigError::Invalid(
                "resyncSeconds must be at least 1".into(),
            ));
        }
        self.health_socket_addr()?;
        self.metrics_socket_addr()?;
        if self.shards == 0 {
            return Err(ConfigError::Invalid("shards must be at least 1".into()));
        }
        if self.shards > 1 && !self.leader_elect {
            return Err(ConfigError::Invalid(format!(
                "shards ({}) needs leaderElect (--leader-elect): each shard is held through a Lease",
                self.shards
            )));
        }
        if self.leader_elect {
            if self.leader_elect_renew_before_seconds == 0
                || self.leader_elect_lease_seconds <= self.leader_elect_renew_before_seconds
            {
                return Err(ConfigError::Invalid(format!(
                    "leaderElectLeaseSeconds ({}) must be more than leaderElectRenewBeforeSeconds ({}), which must be at least 1",
                    self.leader_elect_lease_seconds, self.leader_elect_renew_before_seconds
                )));
            }
            self.lease_cluster()?;
        }
        Ok(())
    }

    /// The cluster that holds the leader-election Lease.
    pub fn lease_cluster(&self) -> Result<ClusterId, ConfigError> {
        let chosen = match &self.leader_elect_cluster {
            Some(id) => self.clusters.iter().find(|c| c.id().to_string() == *id),
            None => self
                .clusters
                .iter()
                .find(|c| c.in_cluster)
                .or_else(|| self.clusters.first()),
        };
        chosen.map(ClusterConfig::id).ok_or_else(|| {
            ConfigError::Invalid(match &self.leader_elect_cluster {
                Some(id) => format!("leaderElectCluster `{id}` is not a configured cluster"),
                None => "leader election needs a cluster to hold its Lease: configure one".into(),
            })
        })
    }

    /// The broker's own cluster: `explicit` when given, else the one configured
    /// `inCluster`, else the first configured.
    pub fn own_cluster(&self, explicit: Option<&str>) -> Option<ClusterId> {
        match explicit {
            Some(id) => self.clusters.iter().find(|c| c.id().to_string() == id),
            None => self
                .clusters
                .iter()
                .find(|c| c.in_cluster)
                .or_else(|| self.clusters.first()),
        }
        .map(ClusterConfig::id)
    }

    /// Problems of the member sources, with the index of the entry they are about.
    fn member_problems(&self) -> Vec<(usize, String)> {
        let mut problems = Vec::new();
        let mut seen = BTreeSet::new();
        for (i, source) in self.members.iter().enumerate() {
            let role = &source.role;
            if let Err(message) = check_label("member role", role) {
                problems.push((i, message));
                continue;
            }
            if !seen.insert(role.as_str()) {
                problems.push((i, format!("members of role `{role}` have two sources")));
            }
            if self.clusters.iter().any(|c| c.role == *role) {
                problems.push((
                    i,
                    format!(
                        "role `{role}` is in `clusters` and in `members`: its members come from \
                         one place (remove its `clusters` entries to find them at run time)"
                    ),
                ));
            }
            let profiles = source
                .cluster_profiles
                .as_ref()
                .map(MemberSource::profiles_as_objects);
            let sources = [
                source.secrets.is_some(),
                source.objects.is_some(),
                profiles.is_some(),
                source.kcp.is_some(),
            ];
            if sources.iter().filter(|s| **s).count() != 1 {
                problems.push((
                    i,
                    format!(
                        "members of role `{role}` need exactly one source: `secrets`, `objects`, `clusterProfiles` or `kcp`"
                    ),
                ));
                continue;
            }
            if let Some(kcp) = &source.kcp {
                if kcp.endpoint_slice.is_empty() || kcp.kind.is_empty() {
                    problems.push((
                        i,
                        format!(
                            "members of role `{role}`: `kcp.endpointSlice` and `kcp.kind` may not be empty"
                        ),
                    ));
                }
                if !self.clusters.is_empty() && self.own_cluster(source.cluster()).is_none() {
                    problems.push((
                        i,
                        format!(
                            "members of role `{role}`: cluster `{}` is not a configured cluster",
                            source.cluster().unwrap_or_default()
                        ),
                    ));
                }
                continue;
            }
            if let Some(p) = &source.cluster_profiles {
                if p.providers.is_empty() {
                    problems.push((
                        i,
                        format!("members of role `{role}`: `clusterProfiles.providers` is empty"),
                    ));
                }
                for provider in &p.providers {
                    if provider.exec_config.is_some() == provider.kubeconfig_secret {
                        problems.push((
                            i,
                            format!(
                                "members of role `{role}`: provider `{}` needs exactly one of `execConfig` and `kubeconfigSecret: true`",
                                provider.name
                            ),
                        ));
                    }
                }
            }
            let (namespace, key) = match (
                &source.secrets,
                source.objects.as_ref().or(profiles.as_ref()),
            ) {
                (Some(secrets), _) => (&secrets.namespace, &secrets.key),
                (None, None) => continue,
                (None, Some(objects)) => {
                    for (field, source) in [
                        ("name", Some(&objects.name)),
                        ("secretRef", Some(&objects.secret_ref)),
                        ("usable", objects.usable.as_ref()),
                    ] {
                        if let Some(source) = source
                            && let Err(e) = switchyard_cel::Env::kubernetes().compile(source)
                        {
                            problems.push((
                                i,
                                format!("members of role `{role}`: `objects.{field}`: {e}"),
                            ));
                        }
                    }
                    (&objects.namespace, &objects.key)
                }
            };
            if let Err(message) = check_label("namespace", namespace) {
                problems.push((i, format!("members of role `{role}`: {message}")));
            }
            if key.is_empty() {
                problems.push((i, format!("members of role `{role}`: `key` is empty")));
            }
            if !self.clusters.is_empty() && self.own_cluster(source.cluster()).is_none() {
                problems.push((
                    i,
                    format!(
                        "members of role `{role}`: cluster `{}` is not a configured cluster",
                        source.cluster().unwrap_or_default()
                    ),
                ));
            }
        }
        problems
    }

    /// The Lease's namespace: configured, else the pod's, else `default`.
    pub fn lease_namespace(&self) -> String {
        self.leader_elect_namespace
            .clone()
            .or_else(|| {
                std::env::var("POD_NAMESPACE")
                    .ok()
                    .filter(|n| !n.is_empty())
            })
            .unwrap_or_else(|| "default".to_string())
    }

    /// `healthAddr` as a socket address.
    pub fn health_socket_addr(&self) -> Result<SocketAddr, ConfigError> {
        socket_addr("healthAddr", &self.health_addr)
    }

    /// `metricsAddr` as a socket address.
    pub fn metrics_socket_addr(&self) -> Result<SocketAddr, ConfigError> {
        socket_addr("metricsAddr", &self.metrics_addr)
    }

    pub fn resync(&self) -> Duration {
        Duration::from_secs(self.resync_seconds)
    }

    pub fn reload_debounce(&self) -> Duration {
        Duration::from_millis(self.reload_debounce_millis)
    }

    /// The configured clusters by id.
    pub fn cluster_ids(&self) -> BTreeSet<ClusterId> {
        self.clusters.iter().map(ClusterConfig::id).collect()
    }
}

/// Problems of the cluster list, with the index of the entry they are about (none: the list).
fn cluster_problems(clusters: &[ClusterConfig]) -> Vec<(Option<usize>, String)> {
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    // role -> (index of its unnamed cluster, names of its members)
    let mut roles: BTreeMap<&str, (Option<usize>, Vec<&str>)> = BTreeMap::new();
    for (i, cluster) in clusters.iter().enumerate() {
        let id = cluster.id();
        if let Err(message) = check_label("cluster role", &cluster.role) {
            problems.push((Some(i), message));
            continue;
        }
        if let Some(name) = &cluster.name
            && let Err(message) = check_member(&format!("cluster `{id}`: name"), name)
        {
            problems.push((Some(i), message));
            continue;
        }
        match (&cluster.kubeconfig, cluster.in_cluster) {
            (Some(_), true) | (None, false) => problems.push((
                Some(i),
                format!("cluster `{id}` needs exactly one of `kubeconfig` and `inCluster: true`"),
            )),
            (None, true) if cluster.context.is_some() => problems.push((
                Some(i),
                format!("cluster `{id}`: `context` needs a `kubeconfig`, not `inCluster`"),
            )),
            _ => {}
        }
        if !seen.insert(id.clone()) {
            problems.push((Some(i), format!("cluster `{id}` is configured twice")));
        }
        let entry = roles.entry(cluster.role.as_str()).or_default();
        match &cluster.name {
            None => entry.0 = Some(i),
            Some(name) => entry.1.push(name.as_str()),
        }
    }
    for (role, (unnamed, named)) in roles {
        if let (Some(i), Some(first)) = (unnamed, named.first()) {
            problems.push((
                Some(i),
                format!(
                    "cluster role `{role}` has both an unnamed cluster and named members \
                     (`{role}/{first}`): name every cluster of the role"
                ),
            ));
        }
    }
    problems.sort_by_key(|(i, _)| *i);
    problems
}

/// serde's message without the Rust type names it mentions: users write YAML, not Rust.
fn without_type_names(message: &str) -> String {
    let mut out = message.to_string();
    for (prefix, replacement) in [
        ("expected struct ", "expected a map"),
        ("expected enum ", "expected one of the allowed values"),
    ] {
        while let Some(start) = out.find(prefix) {
            let rest = &out[start + prefix.len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            out.replace_range(start..start + prefix.len() + end, replacement);
        }
    }
    out
}

/// The JSON Schema of the configuration file, as checked in at
/// `schemas/broker-config.schema.json`.
pub fn schema() -> serde_json::Value {
    let schema = schemars::schema_for!(BrokerConfigDocument);
    serde_json::to_value(schema).unwrap_or(serde_json::Value::Null)
}

fn socket_addr(field: &str, value: &str) -> Result<SocketAddr, ConfigError> {
    value.parse().map_err(|e| {
        ConfigError::Invalid(format!(
            "{field} `{value}` is not HOST:PORT with an IP address: {e}"
        ))
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn parse(text: &str) -> Result<BrokerConfig, String> {
        BrokerConfig::from_yaml(text, "broker.yaml").map_err(|e| e.to_string())
    }

    fn flag(s: &str) -> ClusterConfig {
        parse_cluster_flag(s).unwrap()
    }

    #[test]
    fn cluster_flags() {
        assert_eq!(
            flag("source=/path/kc"),
            ClusterConfig {
                role: "source".into(),
                name: None,
                kubeconfig: Some("/path/kc".into()),
                context: None,
                in_cluster: false,
                workspace_paths: true,
            }
        );
        let c = flag("provider/x86=/path/kc@kubernetes-admin@kubernetes");
        assert_eq!(c.id().to_string(), "provider/x86");
        assert_eq!(c.kubeconfig, Some("/path/kc".into()));
        assert_eq!(c.context.as_deref(), Some("kubernetes-admin@kubernetes"));
        let c = flag("karmada=in-cluster");
        assert!(c.in_cluster && c.kubeconfig.is_none());
        // A name may be a path: the role ends at the first `/`, the name at the first `=`.
        let c = flag("source/projects/p1=/path/kc@ctx");
        assert_eq!(
            (c.role.as_str(), c.name.as_deref()),
            ("source", Some("projects/p1"))
        );
        assert_eq!(c.id().to_string(), "source/projects/p1");
        assert_eq!(c.kubeconfig, Some("/path/kc".into()));
        assert_eq!(c.context.as_deref(), Some("ctx"));
    }

    #[test]
    fn cluster_flag_errors_name_the_value() {
        let error = |s: &str| parse_cluster_flag(s).unwrap_err().to_string();
        assert_eq!(
            error("source"),
            "--cluster `source`: no `=`: expected ROLE=KUBECONFIG[@CONTEXT], \
             ROLE/NAME=KUBECONFIG[@CONTEXT] or ROLE=in-cluster"
        );
        assert!(
            error("Source=/kc")
                .starts_with("--cluster `Source=/kc`: role `Source` is not a DNS-1123 label"),
            "{}",
            error("Source=/kc")
        );
        assert!(
            error("p/x,1=/kc").contains(
                "cluster name `x,1` is not a member cluster name (1-253 letters, digits and `-._#:/`)"
            ),
            "{}",
            error("p/x,1=/kc")
        );
        assert_eq!(
            error("source="),
            "--cluster `source=`: no kubeconfig path after `=`: expected \
             ROLE=KUBECONFIG[@CONTEXT], ROLE/NAME=KUBECONFIG[@CONTEXT] or ROLE=in-cluster"
        );
        assert!(error("source=/kc@").contains("no context after `@`"));
        assert!(error("source=in-cluster@ctx").contains("`in-cluster` takes no context"));
        assert!(error("=/kc").contains("no role before `=`"));
    }

    #[test]
    fn cluster_id_display_and_order() {
        let a = ClusterId::new("provider", Some("x86".into()));
        let b = ClusterId::new("provider", None);
        assert_eq!(a.to_string(), "provider/x86");
        assert_eq!(b.to_string(), "provider");
        assert!(b < a);
    }

    const FILE: &str = "\
apiVersion: switchyard.dev/v1alpha1
kind: BrokerConfig
spec:
  packs: packs
  clusters:
    - role: source
      kubeconfig: kc/kcp.yaml
      context: root
    - role: karmada
      inCluster: true
  workers: 4
";

    #[test]
    fn file_with_defaults() {
        let config = parse(FILE).unwrap();
        assert_eq!(config.packs, Some(PathBuf::from("packs")));
        assert_eq!(config.workers, 4);
        assert_eq!(config.resync_seconds, 300);
        assert_eq!(config.health_addr, "0.0.0.0:8081");
        assert_eq!(config.metrics_addr, "0.0.0.0:8080");
        assert_eq!(config.reload_debounce_millis, 500);
        assert_eq!(config.log_format, LogFormat::Text);
        assert_eq!(config.clusters.len(), 2);
        config.validate().unwrap();
    }

    #[test]
    fn member_sources() {
        let with =
            |members: &str| FILE.replace("  workers: 4\n", &format!("  workers: 4\n{members}"));
        let config = parse(&with(
            "  members:\n    - role: mesh\n      secrets: {namespace: switchyard-system}\n",
        ))
        .unwrap();
        let secrets = config.members[0].secrets.as_ref().unwrap();
        assert_eq!(secrets.key, "kubeconfig");
        assert_eq!(secrets.cluster, None);
        // The Secrets are in the broker's own cluster: the in-cluster one.
        assert_eq!(config.own_cluster(None).unwrap().to_string(), "karmada");
        config.validate().unwrap();
        assert_eq!(
            parse(&with(
                "  members:\n    - role: source\n      secrets: {namespace: x}\n"
            ))
            .unwrap_err(),
            "broker.yaml:13:7: role `source` is in `clusters` and in `members`: its members come \
             from one place (remove its `clusters` entries to find them at run time)"
        );
        assert_eq!(
            parse(&with("  members:\n    - role: mesh\n")).unwrap_err(),
            "broker.yaml:13:7: members of role `mesh` need exactly one source: `secrets`, `objects`, \
             `clusterProfiles` or `kcp`"
        );
        // A kcp source: the slice's name; the kind revealing workspaces defaults to the
        // export's APIBindings.
        let config = parse(&with(
            "  members:\n    - role: tenants\n      kcp: {endpointSlice: shop}\n",
        ))
        .unwrap();
        let kcp = config.members[0].kcp.as_ref().unwrap();
        assert_eq!(
            (
                kcp.endpoint_slice.as_str(),
                kcp.api_version.as_str(),
                kcp.kind.as_str()
            ),
            ("shop", "apis.kcp.io/v1alpha1", "APIBinding")
        );
        assert_eq!(
            config.members[0].describe(),
            "the URLs of APIExportEndpointSlice `shop`"
        );
        assert_eq!(
            parse(&with(
                "  members:\n    - role: tenants\n      kcp: {endpointSlice: shop, cluster: nope}\n"
            ))
            .unwrap_err(),
            "broker.yaml:13:7: members of role `tenants`: cluster `nope` is not a configured cluster"
        );
        // An access provider authenticates one way.
        assert_eq!(
            parse(&with(
                "  members:\n    - role: mesh\n      clusterProfiles:\n        namespace: fleet\n        \
                 providers: [{name: p, kubeconfigSecret: true, execConfig: {command: x}}]\n"
            ))
            .unwrap_err(),
            "broker.yaml:13:7: members of role `mesh`: provider `p` needs exactly one of \
             `execConfig` and `kubeconfigSecret: true`"
        );
        parse(&with(
            "  members:\n    - role: mesh\n      clusterProfiles:\n        namespace: fleet\n        \
             providers: [{name: p, kubeconfigSecret: true}]\n",
        ))
        .unwrap();
        assert_eq!(
            parse(&with(
                "  members:\n    - role: mesh\n      secrets: {namespace: x, cluster: nope}\n"
            ))
            .unwrap_err(),
            "broker.yaml:13:7: members of role `mesh`: cluster `nope` is not a configured cluster"
        );
        assert_eq!(
            parse(&with(
                "  members:\n    - role: mesh\n      secrets: {namespace: x}\n    - role: mesh\n      secrets: {namespace: y}\n"
            ))
            .unwrap_err(),
            "broker.yaml:15:7: members of role `mesh` have two sources"
        );
    }

    #[test]
    fn from_file_resolves_relative_paths_against_its_folder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broker.yaml");
        std::fs::write(&path, FILE).unwrap();
        let config = BrokerConfig::from_file(&path).unwrap();
        assert_eq!(config.packs, Some(dir.path().join("packs")));
        assert_eq!(
            config.clusters[0].kubeconfig,
            Some(dir.path().join("kc/kcp.yaml"))
        );
    }

    #[test]
    fn file_errors_name_file_line_and_column() {
        let unknown = FILE.replace("  workers: 4", "  workerz: 4");
        assert_eq!(
            parse(&unknown).unwrap_err(),
            "broker.yaml:11:3: unknown field `workerz`, expected one of `packs`, `partials`, \
             `crds`, `clusters`, `members`, `resyncSeconds`, `workers`, `healthAddr`, `metricsAddr`, \
             `leaderElect`, `leaderElectLeaseName`, `leaderElectNamespace`, `leaderElectCluster`, \
             `leaderElectLeaseSeconds`, `leaderElectRenewBeforeSeconds`, `shards`, `reloadDebounceMillis`, \
             `logFormat`, `values` at `spec.workerz`"
        );
        let wrong_type = FILE.replace("workers: 4", "workers: many");
        let e = parse(&wrong_type).unwrap_err();
        assert!(e.starts_with("broker.yaml:11:12: invalid type"), "{e}");
        assert!(e.ends_with("at `spec.workers`"), "{e}");
        let bad_cluster = FILE.replace("      inCluster: true\n", "");
        assert_eq!(
            parse(&bad_cluster).unwrap_err(),
            "broker.yaml:9:7: cluster `karmada` needs exactly one of `kubeconfig` and \
             `inCluster: true`"
        );
        let bad_kind = FILE.replace("kind: BrokerConfig", "kind: Broker");
        let e = parse(&bad_kind).unwrap_err();
        assert!(
            e.starts_with("broker.yaml:2:7: unknown variant `Broker`"),
            "{e}"
        );
        assert!(
            parse("spec: [").unwrap_err().starts_with("broker.yaml:"),
            "syntax errors have a position"
        );
        assert_eq!(
            parse("").unwrap_err(),
            "broker.yaml: expected one BrokerConfig document, found 0"
        );
    }

    #[test]
    fn flags_override_the_file() {
        let config = parse(FILE)
            .unwrap()
            .with_flags(Flags {
                packs: Some("other".into()),
                clusters: vec![flag("source=/k2@ctx"), flag("edge=/k3")],
                workers: Some(2),
                log_format: Some(LogFormat::Json),
                ..Flags::default()
            })
            .unwrap();
        assert_eq!(config.packs, Some(PathBuf::from("other")));
        assert_eq!(config.workers, 2);
        assert_eq!(config.log_format, LogFormat::Json);
        let ids: Vec<String> = config.clusters.iter().map(|c| c.id().to_string()).collect();
        assert_eq!(ids, ["source", "karmada", "edge"]);
        assert_eq!(config.clusters[0].kubeconfig, Some("/k2".into()));
        assert_eq!(config.clusters[0].context.as_deref(), Some("ctx"));
    }

    #[test]
    fn flags_alone_are_a_configuration() {
        let config = BrokerConfig::default()
            .with_flags(Flags {
                packs: Some("rules".into()),
                clusters: vec![flag("source=/kc"), flag("karmada=/kc@karmada")],
                ..Flags::default()
            })
            .unwrap();
        assert_eq!(config.clusters.len(), 2);
        assert_eq!(
            config.health_socket_addr().unwrap(),
            "0.0.0.0:8081".parse().unwrap()
        );
        assert_eq!(
            config.metrics_socket_addr().unwrap(),
            "0.0.0.0:8080".parse().unwrap()
        );
    }

    #[test]
    fn validation() {
        let error = |flags: Flags| {
            BrokerConfig::default()
                .with_flags(flags)
                .unwrap_err()
                .to_string()
        };
        let with = |clusters: &[&str]| Flags {
            packs: Some("rules".into()),
            clusters: clusters.iter().map(|c| flag(c)).collect(),
            ..Flags::default()
        };
        assert_eq!(
            error(Flags {
                clusters: vec![flag("source=/kc")],
                ..Flags::default()
            }),
            "no packs folder: give `--packs DIR` or `spec.packs` in the configuration file"
        );
        assert!(error(with(&[])).starts_with("no clusters"));
        assert_eq!(
            error(with(&["provider=/kc", "provider/x86=/kc"])),
            "cluster role `provider` has both an unnamed cluster and named members \
             (`provider/x86`): name every cluster of the role"
        );
        assert!(
            error(Flags {
                health_addr: Some("localhost".into()),
                ..with(&["source=/kc"])
            })
            .starts_with("healthAddr `localhost` is not HOST:PORT")
        );
        assert_eq!(
            error(Flags {
                workers: Some(0),
                ..with(&["source=/kc"])
            }),
            "workers must be at least 1"
        );
        assert_eq!(
            error(Flags {
                shards: Some(3),
                ..with(&["source=/kc"])
            }),
            "shards (3) needs leaderElect (--leader-elect): each shard is held through a Lease"
        );
        assert_eq!(
            error(Flags {
                shards: Some(0),
                leader_elect: true,
                ..with(&["source=/kc"])
            }),
            "shards must be at least 1"
        );
        let twice = "apiVersion: switchyard.dev/v1alpha1\nkind: BrokerConfig\nspec:\n  \
                     clusters:\n    - {role: a, inCluster: true}\n    - {role: a, inCluster: true}\n";
        assert_eq!(
            parse(twice).unwrap_err(),
            "broker.yaml:6:7: cluster `a` is configured twice"
        );
        let bad_role = "apiVersion: switchyard.dev/v1alpha1\nkind: BrokerConfig\nspec:\n  \
                        clusters:\n    - {role: A, inCluster: true}\n";
        assert!(
            parse(bad_role)
                .unwrap_err()
                .starts_with("broker.yaml:5:7: cluster role `A` is not a DNS-1123 label")
        );
    }
}
