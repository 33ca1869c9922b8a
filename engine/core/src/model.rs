//! The rule-pack format `switchyard.dev/v1alpha1`, as Rust types.
//!
//! These types are the source of truth for the JSON Schema in `schemas/` (generated with
//! schemars; a test fails when the checked-in file drifts). Doc comments become the editor's
//! help text. Every struct rejects unknown fields.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::table::TableSpec;

/// The API version every pack document carries.
pub const API_VERSION: &str = "switchyard.dev/v1alpha1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ApiVersion {
    #[serde(rename = "switchyard.dev/v1alpha1")]
    V1Alpha1,
}

/// `pack.yaml`: what the pack is, which clusters it reads and writes, what it may emit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PackDocument {
    pub api_version: ApiVersion,
    /// Always `RulePack`.
    pub kind: RulePackKind,
    pub metadata: PackMetadata,
    pub spec: PackSpec,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RulePackKind {
    RulePack,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PackMetadata {
    /// The pack's name: a DNS-1123 label. Outputs carry it in the `switchyard.dev/pack` label.
    pub name: String,
    /// The pack's version (semver). Outputs carry it in `switchyard.dev/pack-version`.
    #[schemars(with = "String")]
    pub version: semver::Version,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PackSpec {
    /// The engine versions this pack works with, as a semver requirement (`>=0.1, <0.2`).
    /// Loading fails on an engine outside the range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub engine: Option<semver::VersionReq>,
    /// The cluster role input objects belong to unless they say otherwise (in `render`, with
    /// the annotation `switchyard.dev/cluster`). Default `source`.
    #[serde(default = "default_source_cluster")]
    pub source_cluster: String,
    /// The cluster roles the pack reads and writes. The broker maps each role to a
    /// kubeconfig context.
    pub clusters: Vec<ClusterRole>,
    /// What the pack may emit: an output outside every entry is refused.
    pub scope: Vec<EmitScope>,
    /// CEL evaluation limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    /// The CEL environment expressions compile in. Default: Kubernetes' base environment
    /// of the newest version the engine implements, without extensions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel: Option<CelSpec>,
    /// Values the pack is configured with, read as `params.<name>` in CEL and templates:
    /// given per pack in the broker's configuration, and with `--values FILE` and `--set
    /// NAME=VALUE` in the dry run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<Parameter>,
}

/// `spec.parameters[]`: one value the pack is configured with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Parameter {
    /// `params.<name>`: a CEL identifier.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its OpenAPI v3 schema, as a CRD field's (`type`, `enum`, `pattern`, bounds, `items`,
    /// `properties`, `x-kubernetes-validations`, ...): values are checked against it as the
    /// API server checks a field, and expressions are type-checked with its type.
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub schema: serde_json::Value,
    /// The value when none is given. A parameter without a default must be given one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<serde_json::Value>,
}

/// `spec.cel`: the functions the pack's expressions may call. An expression calling one
/// outside the environment does not load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CelSpec {
    /// The Kubernetes version whose base CEL environment expressions get (`"1.34"`, quoted:
    /// `1.30` unquoted is a number), from 1.28 to 1.34; default 1.34. A guard that loads
    /// here then compiles in a CRD rule or an admission policy of that version, unless it
    /// uses an extension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^v?1\.(2[89]|3[0-4])$"))]
    pub kubernetes: Option<String>,
    /// Libraries beyond Kubernetes' base environment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<CelExtension>,
}

/// A CEL library beyond Kubernetes' base environment.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum CelExtension {
    /// `cel.bind(name, init, expr)` (cel-go `ext.Bindings`).
    #[serde(rename = "bindings")]
    Bindings,
    /// `base64.encode`, `base64.decode` (cel-go `ext.Encoders`).
    #[serde(rename = "encoders")]
    Encoders,
    /// `math.greatest`, `math.least`, `math.abs`, `math.ceil`, ... (cel-go `ext.Math`,
    /// version 2).
    #[serde(rename = "math")]
    Math,
    /// `string.reverse()` (cel-go `ext.Strings`, version 3).
    #[serde(rename = "strings-v3")]
    StringsV3,
}

fn default_source_cluster() -> String {
    "source".to_string()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterRole {
    /// The role's name, as rules refer to it (`source`, `karmada`, `provider`).
    pub name: String,
    /// What the pack does there.
    pub access: Vec<Access>,
    /// `kcp`: the role is a kcp virtual workspace, serving the objects of many tenants'
    /// workspaces. Each object's workspace (its `kcp.io/cluster` annotation) is part of its
    /// identity, as a member cluster's name is (`source/<workspace>`): lookups of a trigger
    /// of this role stay in its workspace, outputs and status go back to it, and objects of
    /// two workspaces never meet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspaces: Option<Workspaces>,
    /// The most member clusters the role may have. It bounds the cost of expressions over
    /// `clusters.<role>` and over `allClusters` lookups by name in `check`, and evaluation
    /// holds the world to it: a rule that reads the role's members while it has more stops
    /// with `Synced=False/TooManyMembers`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_members: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// Where a role's objects name their workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Workspaces {
    /// kcp: the annotation `kcp.io/cluster`; writes go to `/clusters/<workspace>` of the
    /// virtual workspace's URL.
    Kcp,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum Access {
    /// Watch and look up objects.
    Read,
    /// Apply and delete outputs.
    Write,
    /// Write the status of triggers.
    WriteStatus,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EmitScope {
    /// The cluster role the entry is about.
    pub cluster: String,
    /// The kinds allowed there.
    pub kinds: Vec<KindRef>,
    /// Namespaces namespaced outputs may land in; `*` matches any run of characters
    /// (`kcp-*`). Empty means none.
    #[serde(default)]
    pub namespaces: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KindRef {
    pub api_version: String,
    pub kind: String,
    /// The kind is cluster-scoped: its objects have no namespace.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cluster_scoped: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Limits {
    /// Cost limit of one expression evaluation (default 1,000,000, as Kubernetes' per-call limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel_cost_per_expression: Option<u64>,
    /// Cost limit of all expressions evaluated for one trigger (default 10,000,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel_cost_per_object: Option<u64>,
}

/// `rules/*.yaml`: one rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleDocument {
    pub api_version: ApiVersion,
    /// Always `Rule`.
    pub kind: RuleKind,
    pub metadata: NamedMetadata,
    pub spec: RuleSpec,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RuleKind {
    Rule,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NamedMetadata {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A rule: when an object it watches changes, look up related objects, check guards, compute
/// variables, render outputs and map status back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleSpec {
    /// The objects whose changes evaluate the rule. Without it the rule has no trigger: it
    /// keeps its outputs in place once per pack (a CRD's propagation policy, an interpreter
    /// customization), evaluated with `clusters` and `params`, and `self` the pack's own
    /// identity (`{apiVersion: switchyard.dev/v1alpha1, kind: RulePack, metadata: {name}}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<Watch>,
    /// Related objects the rule reads. Each is bound in CEL and templates under its name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lookups: Vec<Lookup>,
    /// Guards (CEL, all must be true). A false guard without `reason` skips the rule quietly;
    /// with a `reason` it also sets the trigger's `Synced` condition to False.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub when: Vec<Guard>,
    /// Named CEL values, bound as `vars.<name>`. Evaluated in dependency order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vars: Vec<Variable>,
    /// The objects the rule produces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<Output>,
    /// Ordered stages: each applies its outputs, then waits until its gates over the
    /// observed objects are true (or its timeout passes). Progress lives in the trigger's
    /// status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stages: Option<Stages>,
    /// What is written into the trigger's status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<StatusMapping>,
    /// What happens to the outputs when the trigger is deleted.
    #[serde(default)]
    pub deletion: DeletionPolicy,
    /// `false`: the rule writes nothing into its triggers' status (neither `Synced` nor a
    /// mapping), for objects the pack only reads (another controller's, or in a role without
    /// `writeStatus` access). A trigger gets a status only from rules that write it.
    #[serde(default = "default_true", skip_serializing_if = "is_true")]
    pub write_status: bool,
    /// `false`: the rule puts no finalizer on its triggers (outputs are then deleted when the
    /// trigger is gone, not before it goes).
    #[serde(default = "default_true", skip_serializing_if = "is_true")]
    pub finalizer: bool,
}

fn default_true() -> bool {
    true
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if takes a reference
fn is_true(value: &bool) -> bool {
    *value
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Watch {
    /// The cluster role watched; default the pack's `sourceCluster`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    pub api_version: String,
    pub kind: String,
    /// Only objects whose labels match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

/// A Kubernetes label selector.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelector {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelectorRequirement {
    pub key: String,
    pub operator: SelectorOperator,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum SelectorOperator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// A related object (by name) or objects (by label selector) the rule reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Lookup {
    /// The binding name in CEL and templates.
    pub name: String,
    /// The cluster role to read; default the watched cluster's role. Which of the role's
    /// clusters: the trigger's own when the role is the trigger's, the role's only cluster
    /// otherwise; `clusterName` or `allClusters` say otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// CEL: the name of the member cluster of the role to read (`vars.provider`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
    /// Read every member cluster of the role. The binding is then a list of
    /// `{cluster: {role, name}, object}` entries sorted by cluster name, namespace and name.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all_clusters: bool,
    pub api_version: String,
    pub kind: String,
    /// CEL: the namespace to read in; default the trigger's namespace. `''` reads without
    /// a namespace (every namespace: see `allNamespaces`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The kind is cluster-scoped: read without a namespace. Must agree with the kind (its
    /// CRD, or Kubernetes for built-in kinds).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cluster_scoped: bool,
    /// List a namespaced kind in every namespace (with `matchLabels`), instead of the
    /// trigger's or `namespace`'s.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all_namespaces: bool,
    /// CEL: the object's name. The binding is the object, or null when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_name: Option<String>,
    /// CEL: a map of labels; the binding is the list of matching objects sorted by
    /// namespace and name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_labels: Option<String>,
    /// CEL: look up only when true; otherwise the binding is null (or an empty list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    /// A required lookup that finds nothing stops the rule: no outputs, and the trigger's
    /// `Synced` condition is False with `reason`.
    #[serde(default)]
    pub required: bool,
    /// The condition reason when a required lookup finds nothing (default `LookupNotFound`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The most objects a lookup by labels or of `allClusters` may find: `check` bounds
    /// the cost of what reads the list with it, and a lookup that finds more stops the
    /// rule (`Synced=False`, reason `LookupTooLarge`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_items: Option<u64>,
    /// The most each CEL expression here may cost at run time (in CEL cost units), stated
    /// where `check` cannot bound it from the schemas (a field of a kind without
    /// `maxItems`, a value of type `dyn`): enforced as the expression's cost limit, and
    /// `check` then does not warn that the cost is unbounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Guard {
    /// CEL returning bool.
    pub expression: String,
    /// The condition reason when the guard is false. Without it a false guard skips the
    /// rule quietly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The condition message when the guard is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// CEL returning the condition message (wins over `message`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_expression: Option<String>,
    /// The most each CEL expression here may cost at run time (in CEL cost units), stated
    /// where `check` cannot bound it from the schemas (a field of a kind without
    /// `maxItems`, a value of type `dyn`): enforced as the expression's cost limit, and
    /// `check` then does not warn that the cost is unbounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Variable {
    pub name: String,
    /// CEL; may read `self`, lookups, `tables`, `cluster`, `now` and other variables.
    pub expression: String,
    /// The most each CEL expression here may cost at run time (in CEL cost units), stated
    /// where `check` cannot bound it from the schemas (a field of a kind without
    /// `maxItems`, a value of type `dyn`): enforced as the expression's cost limit, and
    /// `check` then does not warn that the cost is unbounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Output {
    /// The output's name within the rule (for traces and ownership).
    pub name: String,
    /// The cluster role the objects are applied to.
    pub cluster: String,
    /// CEL: the member cluster of the role (`vars.provider`, or `item` in a `forEach` over
    /// `clusters.mesh`). Without it: the trigger's own cluster when the role is the
    /// trigger's, the role's only cluster otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
    /// `apply` (default): the pack owns the whole object, creates and deletes it.
    /// `patch`: the pack owns only the fields it renders on an object someone else
    /// creates; it is never created or deleted and carries no engine metadata.
    /// `create`: as `apply`, but only created, never updated.
    #[serde(default, skip_serializing_if = "OutputMode::is_apply")]
    pub mode: OutputMode,
    /// A template under the pack's `templates/` folder (handlebars producing YAML; one or
    /// more documents).
    pub template: String,
    /// Take over an object of the same name that exists already and was not created by the
    /// pack (`apply` and `create` outputs): the broker applies the rendered fields over it,
    /// marks it as the pack's, and deletes it when no trigger desires it any more. Without
    /// it such an object is left untouched and the trigger reports `AlreadyExists`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub adopt: bool,
    /// CEL (stage outputs only): the name the observed object is bound under in the stage's
    /// gates (`resources.<name>`); default the output's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bind_as: Option<String>,
    /// CEL: render only when true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    /// CEL returning a list: the template renders once per element, bound as `item` (and
    /// its position as `index`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_each: Option<String>,
    /// The most each CEL expression here may cost at run time (in CEL cost units), stated
    /// where `check` cannot bound it from the schemas (a field of a kind without
    /// `maxItems`, a value of type `dyn`): enforced as the expression's cost limit, and
    /// `check` then does not warn that the cost is unbounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<u64>,
}

/// A rule's stages: written in the pack (`items`) or computed from data (`from`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Stages {
    /// `status.<statusField>` of the trigger holds the progress: `{state (InProgress,
    /// Completed, Failed), stage, index, stageStartTime, message}`. Default `stages`.
    #[serde(default = "default_stages_field")]
    pub status_field: String,
    /// The stages, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<Stage>,
    /// Stages defined by data (a MigrationConfiguration's), instead of `items`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<StagesFrom>,
}

fn default_stages_field() -> String {
    "stages".to_string()
}

/// One stage written in the pack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Stage {
    pub name: String,
    /// Applied while the stage runs (and after, unless `cleanup`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<Output>,
    /// CEL bools over `resources` (the stage's outputs as observed, by `bindAs` name; null
    /// until they exist): the stage passes when all are true.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gates: Vec<String>,
    /// How long the stage may wait for its gates (`30s`, `10m`, `1h30m`); past it the
    /// stages fail. None: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Delete the stage's outputs once it passes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cleanup: bool,
}

/// Stages computed from data: `list` gives one definition per stage, bound as `stage` in
/// every other field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StagesFrom {
    /// CEL: the list of stage definitions.
    pub list: String,
    /// CEL: a stage's name.
    pub name: String,
    /// Rendered for each stage, with `stage` bound.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<Output>,
    /// CEL: a list of CEL sources (strings), the stage's gates, compiled when first met
    /// (with the pack's cost limits) and evaluated with `resources`, `stage` and each
    /// resource's name bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gates: Option<String>,
    /// CEL: the stage's timeout as a duration string (`10m`), or null for none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cleanup: bool,
}

/// How an output is written.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum OutputMode {
    /// The pack owns the object: it is created, stamped with ownership metadata, and deleted
    /// when no longer desired.
    #[default]
    Apply,
    /// The pack owns only the rendered fields of an object that someone else owns.
    Patch,
    /// Like `apply`, but applied only while the object does not exist: later changes to it
    /// (by a job, by a person) are left alone, never corrected. It is still the pack's,
    /// deleted when no longer desired (a migration stage's resources).
    Create,
}

impl OutputMode {
    pub fn is_apply(&self) -> bool {
        *self == OutputMode::Apply
    }
}

/// The status written onto the trigger. The engine itself manages the `Synced` condition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StatusMapping {
    /// `status.<field>` = CEL value. A null result leaves the field out.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fields: BTreeMap<String, String>,
    /// Conditions computed by CEL.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ConditionMapping>,
    /// What the status says when the rule stops (a guard with a reason is false, a required
    /// lookup is missing, an expression fails, an output leaves the pack's scope): evaluated
    /// instead of `fields` and `conditions`, with `stop` bound to `{reason, message}` and the
    /// variables and lookups bound before the stop. Without it a stopped rule writes no
    /// fields; the engine's `Synced` condition reports the stop either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_stop: Option<StopStatusMapping>,
    /// `false`: the engine's `Synced` condition is not written into the triggers' status
    /// (for a kind whose status declares no `conditions`, which the API server would refuse);
    /// failures are then reported as Events, in logs and in metrics only. Default `true`.
    #[serde(default = "default_true", skip_serializing_if = "is_true")]
    pub synced_condition: bool,
}

/// The status fields and conditions of a stopped rule (`status.onStop`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StopStatusMapping {
    /// `status.<field>` = CEL value. A null result leaves the field out.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fields: BTreeMap<String, String>,
    /// Conditions computed by CEL.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ConditionMapping>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConditionMapping {
    /// The condition type (literal).
    #[serde(rename = "type")]
    pub type_: String,
    /// CEL: `'True'`, `'False'` or `'Unknown'` (a bool is accepted too).
    pub status: String,
    /// CEL: the reason (CamelCase).
    pub reason: String,
    /// CEL: the message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DeletionPolicy {
    /// Delete the outputs when the trigger is deleted.
    #[default]
    Delete,
    /// Leave the outputs in place.
    Orphan,
}

/// `tables/*.yaml`: a decision table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TableDocument {
    pub api_version: ApiVersion,
    /// Always `DecisionTable`.
    pub kind: DecisionTableKind,
    pub metadata: NamedMetadata,
    pub spec: TableSpec,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DecisionTableKind {
    DecisionTable,
}

/// `tests/*.yaml`: test cases run by `switchyard test`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestSuiteDocument {
    pub api_version: ApiVersion,
    /// Always `TestSuite`.
    pub kind: TestSuiteKind,
    pub metadata: NamedMetadata,
    pub spec: TestSuiteSpec,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TestSuiteKind {
    TestSuite,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestSuiteSpec {
    /// The clock for every case (RFC 3339); default 2000-01-01T00:00:00Z.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<String>,
    /// Member clusters (`ROLE/NAME`) of every case that gives no `clusters` of its own,
    /// besides those the inputs name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<String>,
    /// Values of the pack's parameters for every case, over those `switchyard test` is
    /// given (`--values`, `--set`) and the parameters' defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub values: Option<serde_json::Value>,
    /// The rules every case's `outputs`, `outputCount` and `absent` are about: only objects
    /// these rules render are compared (a rule without a trigger renders in every case).
    /// Default: every rule. Golden files keep the whole render.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<String>,
    pub cases: Vec<TestCase>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestCase {
    pub name: String,
    /// YAML files (relative to the pack folder) holding input objects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub input_files: Vec<String>,
    /// Input objects written inline. An object lives in the pack's source cluster unless
    /// its annotation `switchyard.dev/cluster` names another (`ROLE` or `ROLE/NAME`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<serde_json::Value>,
    /// Member clusters (`ROLE/NAME`) besides those the inputs name: a role with no input
    /// objects still has members to fan out to. Replaces the suite's `clusters`; `[]` says
    /// the case has no members on purpose (a rule reading a role's members is otherwise an
    /// error of a case that gives the role none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clusters: Option<Vec<String>>,
    /// The rules this case's expectations are about, instead of the suite's `rules`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<String>>,
    /// The clock for this case (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<String>,
    /// What the inputs render to (with `steps`: before the first step).
    #[serde(default)]
    pub expect: Expectation,
    /// A simulation: before each step, what the previous evaluation desired is applied to
    /// the world as the broker would (outputs created or replaced, patches merged, the
    /// pack's objects no longer desired removed, status written onto triggers); then the
    /// step changes the world, advances the clock, evaluates again and checks `expect`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<TestStep>,
}

/// One step of a simulated test case.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestStep {
    /// Shown in reports (default `step N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// How far the clock moves before this step (`30s`, `10m`); default not at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advance: Option<String>,
    /// Objects created or replaced (in the source cluster unless their
    /// `switchyard.dev/cluster` annotation says otherwise).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub apply: Vec<serde_json::Value>,
    /// Objects merged into existing ones, as a controller writes a status.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merge: Vec<serde_json::Value>,
    /// Objects removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delete: Vec<ObjectSelector>,
    #[serde(default)]
    pub expect: Expectation,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expectation {
    /// A file (relative to the pack folder) holding exactly what `switchyard render` prints
    /// for the inputs. `switchyard test --update` rewrites it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub golden: Option<String>,
    /// Outputs that must be present, compared in full except for the engine's ownership
    /// labels and annotations (unless `ownership`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<ExpectedOutput>,
    /// Compare `outputs` with the engine's ownership labels and annotations too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ownership: bool,
    /// Outputs that must not be present, by identity.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub absent: Vec<ObjectSelector>,
    /// The exact number of outputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_count: Option<usize>,
    /// Status patches of triggers: each given field must be equal (conditions are compared
    /// by type, ignoring `lastTransitionTime`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub status: Vec<ExpectedStatus>,
    /// Evaluation errors expected, as substrings of their messages.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// The world once the broker has acted on this evaluation (outputs applied, patches
    /// merged, status written, undesired outputs removed): objects present, with the fields
    /// given, and objects absent. Inputs and outputs alike.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<WorldExpectation>,
}

/// What the world holds after an evaluation is acted on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorldExpectation {
    /// Objects that must exist, found by apiVersion, kind, namespace and name (in `cluster`
    /// when given, else in any cluster); every field given must have the value given (maps
    /// compared field by field, lists and scalars whole), other fields are not compared.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub present: Vec<WorldObject>,
    /// Objects that must not exist.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub absent: Vec<ObjectSelector>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorldObject {
    /// `ROLE` or `ROLE/NAME`; default any cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    pub object: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExpectedOutput {
    pub cluster: String,
    pub object: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectSelector {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExpectedStatus {
    pub trigger: ObjectSelector,
    pub status: serde_json::Value,
}

/// Any document of a pack, for the JSON Schema: editors pick the branch by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
#[schemars(title = "Switchyard rule-pack document (switchyard.dev/v1alpha1)")]
pub enum AnyDocument {
    RulePack(PackDocument),
    Rule(Box<RuleDocument>),
    DecisionTable(TableDocument),
    TestSuite(TestSuiteDocument),
}

/// The JSON Schema of every pack document, as checked in at `schemas/rulepack.schema.json`.
pub fn json_schema() -> serde_json::Value {
    let schema = schemars::schema_for!(AnyDocument);
    serde_json::to_value(schema).unwrap_or(serde_json::Value::Null)
}
