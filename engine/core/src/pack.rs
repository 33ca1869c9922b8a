//! Loading a rule pack: parse every file, validate it, compile every expression and template
//! once, and report every problem of the pack in one pass.
//!
//! The loaded [`Pack`] and its compiled rules are here; `loader` walks the pack's files,
//! `compile` compiles a rule, `typecheck` types its expressions, `order` orders its steps.

mod compile;
mod loader;
mod order;
mod typecheck;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::de::DeserializeOwned;
use switchyard_cel as cel;

use crate::diagnostic::{Diagnostic, Severity};
use crate::glob::glob_matches;
use crate::model::{
    Access, CelExtension, ConditionMapping, DeletionPolicy, EmitScope, LabelSelector, PackDocument,
    PackSpec, RuleDocument, TableDocument, TestSuiteDocument,
};
use crate::object::ObjectKey;
use crate::table::{Table, TableLocation};
use crate::template::{Decider, TemplateEdit, TemplateSet};
use crate::validate::InputCheck;
use crate::yaml::{self, Node, NodeValue, PathSegment, Pos};

/// The engine's version, checked against a pack's `spec.engine` requirement.
pub const ENGINE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Names bound in every evaluation; lookups cannot use them.
pub const RESERVED_NAMES: &[&str] = &[
    "self",
    "vars",
    "cluster",
    "clusters",
    "item",
    "index",
    "now",
    "tables",
    "params",
    "stage",
    "stages",
    "resources",
    "missing",
];

/// A pack's files, read by the caller (the core does no I/O).
#[derive(Debug, Clone, Default)]
pub struct PackFiles {
    /// How the pack's folder is shown in diagnostics (`rules/kcp-karmada`).
    pub root: String,
    /// Path relative to the pack folder (`rules/main.yaml`) -> contents.
    pub files: BTreeMap<String, String>,
    /// Shared partials from the top-level `templates/` folder: partial name
    /// (`common/labels`) -> (displayed path, contents).
    pub shared_partials: BTreeMap<String, (String, String)>,
}

impl PackFiles {
    /// How a file of the pack is named in messages: under the pack's root.
    pub fn display(&self, relative: &str) -> String {
        if self.root.is_empty() {
            relative.to_string()
        } else {
            format!("{}/{relative}", self.root.trim_end_matches('/'))
        }
    }
}

/// A loaded, validated pack: every expression and template compiled.
pub struct Pack {
    pub(crate) document: PackDocument,
    pub(crate) rules: Vec<CompiledRule>,
    pub(crate) tables: Arc<BTreeMap<String, Table>>,
    pub(crate) templates: TemplateSet,
    pub(crate) env: cel::Env,
    /// `tables` as bound in CEL and templates: table name -> list of row outputs.
    pub(crate) tables_json: serde_json::Value,
    pub(crate) tables_cel: cel::Value,
    pub(crate) tests: Vec<(String, TestSuiteDocument)>,
    pub(crate) files: PackFiles,
    /// Checks outputs against the CRDs the pack was loaded with.
    pub(crate) validator: Arc<crate::validate::Validator>,
    /// The version as every output's annotation writes it.
    pub(crate) version_text: String,
    /// Stage gates that come from data, compiled when first met.
    pub(crate) gates: std::sync::Mutex<BTreeMap<String, Result<cel::Program, String>>>,
    /// `spec.parameters`, compiled.
    pub(crate) parameters: Arc<Vec<crate::params::CompiledParameter>>,
    /// `params` as bound in templates and CEL: the defaults, or the values given.
    pub(crate) params_json: serde_json::Value,
    pub(crate) params_cel: cel::Value,
    /// Tells this pack (with these parameters) from every other one the process loaded:
    /// values shared between triggers are kept per pack (see [`Pack::new_generation`]).
    pub(crate) generation: u64,
}

/// The generation of the next pack loaded or given parameters.
static GENERATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// How many gate expressions from data a pack keeps compiled.
const GATE_CACHE: usize = 1024;

impl Pack {
    /// A generation no pack had: what a pack is given when loaded and when its parameters
    /// change.
    pub(crate) fn new_generation() -> u64 {
        GENERATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// A stage gate from data (a MigrationConfiguration's success condition), compiled with
    /// the pack's environment and limits, once.
    pub(crate) fn gate(&self, source: &str) -> Result<cel::Program, String> {
        let mut cache = self
            .gates
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(found) = cache.get(source) {
            return found.clone();
        }
        let compiled = self.env.compile(source).map_err(|e| e.message);
        if cache.len() >= GATE_CACHE {
            cache.clear();
        }
        cache.insert(source.to_string(), compiled.clone());
        compiled
    }
}

impl std::fmt::Debug for Pack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pack")
            .field("name", &self.name())
            .field("version", &self.version().to_string())
            .field("rules", &self.rules.len())
            .finish()
    }
}

/// Kubernetes' per-call CEL cost limit, the default for one expression.
pub const DEFAULT_COST_PER_EXPRESSION: u64 = 1_000_000;
/// The default cost budget of all expressions evaluated for one trigger.
pub const DEFAULT_COST_PER_OBJECT: u64 = 10_000_000;

impl PackDocument {
    pub(crate) fn cost_per_expression(&self) -> u64 {
        self.spec
            .limits
            .and_then(|l| l.cel_cost_per_expression)
            .unwrap_or(DEFAULT_COST_PER_EXPRESSION)
    }

    pub(crate) fn cost_per_object(&self) -> u64 {
        self.spec
            .limits
            .and_then(|l| l.cel_cost_per_object)
            .unwrap_or(DEFAULT_COST_PER_OBJECT)
    }
}

impl Pack {
    pub fn name(&self) -> &str {
        &self.document.metadata.name
    }

    pub fn version(&self) -> &semver::Version {
        &self.document.metadata.version
    }

    pub fn spec(&self) -> &PackSpec {
        &self.document.spec
    }

    pub fn source_cluster(&self) -> &str {
        &self.document.spec.source_cluster
    }

    /// The annotation naming an object's workspace in `role`, when the pack declares the
    /// role's objects live in workspaces (`workspaces: kcp`).
    pub fn workspace_annotation(&self, role: &str) -> Option<&'static str> {
        self.document
            .spec
            .clusters
            .iter()
            .find(|c| c.name == role)
            .and_then(|c| c.workspaces)
            .map(|w| match w {
                crate::model::Workspaces::Kcp => crate::names::ANNOTATION_KCP_CLUSTER,
            })
    }

    /// The cluster of an object read in `cluster`: in a role whose objects live in
    /// workspaces, the workspace its annotation names is its member (`source/<workspace>`).
    /// An object of such a role without a workspace has no place: an error naming it.
    pub fn place(&self, cluster: &str, object: &serde_json::Value) -> Result<String, String> {
        let (role, member) = crate::object::split_cluster(cluster);
        let Some(annotation) = self.workspace_annotation(role) else {
            return Ok(cluster.to_string());
        };
        let named = object
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(annotation))
            .and_then(serde_json::Value::as_str);
        let what = || {
            crate::object::ObjectKey::of(cluster, object)
                .map(|k| format!("{} {} `{}`", k.api_version, k.kind, k.namespaced_name()))
                .unwrap_or_else(|_| "an object".to_string())
        };
        match named {
            Some(workspace) if crate::object::is_workspace_name(workspace) => {
                if cluster.contains('/') && member != workspace {
                    return Err(format!(
                        "{} is in cluster `{cluster}` but its annotation `{annotation}` names workspace `{workspace}`",
                        what()
                    ));
                }
                Ok(crate::object::cluster_id(role, workspace))
            }
            Some(workspace) => Err(format!(
                "{}: the annotation `{annotation}` (`{workspace}`) does not name a workspace (1-253 letters, digits and `-._#:`)",
                what()
            )),
            None if cluster.contains('/') => Ok(cluster.to_string()),
            None => Err(format!(
                "{}: the objects of role `{role}` live in workspaces, and it has no `{annotation}` annotation naming one",
                what()
            )),
        }
    }

    /// [`Pack::place`] for every object read.
    ///
    /// # Errors
    /// The first object that has no place.
    pub fn place_all(&self, objects: &mut [(String, serde_json::Value)]) -> Result<(), String> {
        for (cluster, object) in objects.iter_mut() {
            *cluster = self.place(cluster, object)?;
        }
        Ok(())
    }

    pub fn rule_names(&self) -> impl Iterator<Item = &str> {
        self.rules.iter().map(|r| r.name.as_str())
    }

    /// The kinds watched by the pack's rules: (cluster role, apiVersion, kind).
    pub fn watched_kinds(&self) -> BTreeSet<(String, String, String)> {
        self.rules
            .iter()
            .map(|r| {
                (
                    r.watch.cluster.clone(),
                    r.watch.api_version.clone(),
                    r.watch.kind.clone(),
                )
            })
            .collect()
    }

    /// What each rule watches, looks up and writes to: what a runtime must watch for it.
    pub fn rule_kinds(&self) -> Vec<RuleKinds> {
        self.rules
            .iter()
            .map(|r| RuleKinds {
                name: r.name.clone(),
                watch: KindIn {
                    cluster: r.watch.cluster.clone(),
                    api_version: r.watch.api_version.clone(),
                    kind: r.watch.kind.clone(),
                },
                selector: r.watch.selector.clone(),
                lookups: r
                    .lookups
                    .iter()
                    .map(|l| KindIn {
                        cluster: l.cluster.clone(),
                        api_version: l.api_version.clone(),
                        kind: l.kind.clone(),
                    })
                    .collect(),
                output_clusters: r.outputs.iter().map(|o| o.cluster.clone()).collect(),
                observed_outputs: r
                    .outputs
                    .iter()
                    .filter(|o| o.mode == crate::model::OutputMode::Patch)
                    .map(|o| (o, false))
                    .chain(
                        r.stages
                            .iter()
                            .flat_map(|s| s.stages.iter().flat_map(|stage| &stage.outputs))
                            .map(|o| (o, o.mode != crate::model::OutputMode::Patch)),
                    )
                    .map(|(o, owned)| ObservedOutput {
                        cluster: o.cluster.clone(),
                        kind: self
                            .files
                            .files
                            .get(&format!("templates/{}", o.template))
                            .and_then(|text| literal_kind(text)),
                        owned,
                    })
                    .collect(),
                deletion: r.deletion,
                write_status: r.write_status,
                finalizer: r.finalizer,
                triggerless: r.triggerless,
            })
            .collect()
    }

    /// Which triggers of rule `rule` may render differently than with `previous` (this pack
    /// before a reload) through an edit of the templates the rule's outputs render (see
    /// [`TemplateEdit`]). For a rule whose other files did not change; a rule that is new,
    /// gone, or renders other templates than before changes every trigger.
    #[must_use]
    pub fn template_edit(&self, previous: &Pack, rule: &str) -> TemplateEdit {
        let templates = |pack: &'_ Pack| -> Option<Vec<String>> {
            let r = pack.rules.iter().find(|r| r.name == rule)?;
            Some(r.every_output().map(|o| o.template.clone()).collect())
        };
        match (templates(previous), templates(self)) {
            (Some(before), Some(after)) if before == after => {
                let names: Vec<&str> = after.iter().map(String::as_str).collect();
                self.templates.edit_since(&previous.templates, &names)
            }
            _ => TemplateEdit::everywhere(),
        }
    }

    /// The rules whose evaluation may change when the members of `role` change: those that
    /// watch, look up or write in the role, and those whose rule file or templates name
    /// `clusters` (the members of every role). A rule whose file cannot be read back, whose
    /// templates include partials, or whose pack's tables name `clusters` counts too: what
    /// is not known to be unaffected is affected.
    pub fn rules_reading_members(&self, role: &str) -> BTreeSet<String> {
        let text = |key: &str| self.files.files.get(key).map(String::as_str);
        let tables_read = self
            .files
            .files
            .iter()
            .any(|(key, text)| key.starts_with("tables/") && names_clusters(text));
        self.rules
            .iter()
            .filter(|r| {
                let outputs = r.every_output();
                let mut templates = outputs
                    .clone()
                    .map(|o| text(&format!("templates/{}", o.template)));
                tables_read
                    || r.stages.is_some()
                    || r.watch.cluster == role
                    || r.lookups.iter().any(|l| l.cluster == role)
                    || outputs.clone().any(|o| o.cluster == role)
                    || self
                        .files
                        .files
                        .iter()
                        .find(|(key, _)| self.files.display(key) == r.file)
                        .is_none_or(|(_, text)| names_clusters(text))
                    || templates.any(|t| t.is_none_or(|t| names_clusters(t) || t.contains("{{>")))
            })
            .map(|r| r.name.clone())
            .collect()
    }

    /// The pack's own trigger, when a rule has no `watch`: its cluster (the source role) and
    /// the object `self` is in those rules. It lives in no cluster.
    pub fn pack_trigger(&self) -> Option<(ObjectKey, Arc<serde_json::Value>)> {
        if !self.rules.iter().any(|r| r.triggerless) {
            return None;
        }
        let object = serde_json::json!({
            "apiVersion": crate::names::PACK_TRIGGER_API_VERSION,
            "kind": crate::names::PACK_TRIGGER_KIND,
            "metadata": {"name": self.name()},
        });
        let key = ObjectKey::of(self.source_cluster(), &object).ok()?;
        Some((key, Arc::new(object)))
    }

    /// Whether `key` names the pack's own trigger.
    pub fn is_pack_trigger(&self, key: &ObjectKey) -> bool {
        key.api_version == crate::names::PACK_TRIGGER_API_VERSION
            && key.kind == crate::names::PACK_TRIGGER_KIND
            && key.name == self.name()
            && key.namespace.is_none()
    }

    /// The pack's parameters.
    pub fn parameters(&self) -> &[crate::params::CompiledParameter] {
        &self.parameters
    }

    /// `params` as rules read it.
    pub fn params(&self) -> &serde_json::Value {
        &self.params_json
    }

    /// Binds `values` to the pack's parameters (over their defaults): what rules read as
    /// `params` from now on.
    ///
    /// # Errors
    /// Every problem, each naming where the value was written (see [`crate::params::bind`]);
    /// the values bound before stay.
    pub fn set_values(&mut self, values: &crate::params::Values) -> Result<(), Vec<String>> {
        let bound = crate::params::bind(self.name(), &self.parameters, values)?;
        self.params_json = serde_json::Value::Object(bound);
        self.params_cel = cel::Value::from_json(&self.params_json);
        self.generation = Pack::new_generation();
        Ok(())
    }

    /// The roles whose members rule `rule` reads, each with the first place that reads them.
    pub fn member_roles(&self, rule: &str) -> Option<&BTreeMap<String, String>> {
        self.rules
            .iter()
            .find(|r| r.name == rule)
            .map(|r| &r.member_roles)
    }

    /// The test suites found under `tests/`, with their file names.
    pub fn test_suites(&self) -> &[(String, TestSuiteDocument)] {
        &self.tests
    }

    /// The pack's files as loaded (for resolving test input files).
    pub fn files(&self) -> &PackFiles {
        &self.files
    }

    pub fn tables(&self) -> &BTreeMap<String, Table> {
        &self.tables
    }
}

/// A kind in a cluster role.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KindIn {
    pub cluster: String,
    pub api_version: String,
    pub kind: String,
}

/// An output a runtime must see whole ([`RuleKinds::observed_outputs`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ObservedOutput {
    /// Its role.
    pub cluster: String,
    /// Its apiVersion and kind when the template writes them literally; otherwise any kind of
    /// the role's scope.
    pub kind: Option<(String, String)>,
    /// The pack owns it (it carries the pack's label): a stage's output, not a patch.
    pub owned: bool,
}

/// The line (from 0) of a template's top-level `status:`: the output renders a status,
/// applied through the status subresource.
pub(crate) fn template_status_line(template: &str) -> Option<usize> {
    template.lines().position(|l| {
        l.strip_prefix("status")
            .is_some_and(|r| r.trim_start().starts_with(':'))
    })
}

/// The apiVersion and kind a template writes, when it writes one document with both as
/// literal top-level values.
pub(crate) fn literal_kind(template: &str) -> Option<(String, String)> {
    if template.lines().any(|l| l.trim_end() == "---") {
        return None;
    }
    let literal = |key: &str| -> Option<String> {
        let mut found = template
            .lines()
            .filter_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .map(|v| v.trim().trim_matches(|c| c == '"' || c == '\'').to_string());
        let value = found.next()?;
        (found.next().is_none() && !value.is_empty() && !value.contains("{{")).then_some(value)
    };
    Some((literal("apiVersion")?, literal("kind")?))
}

/// Whether a text names `clusters` as a word of its own (not `allClusters`, `clustersX`).
fn names_clusters(text: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices("clusters").any(|(at, found)| {
        let before = text[..at].chars().next_back();
        let after = text[at + found.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

/// The kinds one rule reads and the clusters it writes to ([`Pack::rule_kinds`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RuleKinds {
    pub name: String,
    pub watch: KindIn,
    pub selector: Option<LabelSelector>,
    pub lookups: Vec<KindIn>,
    pub output_clusters: BTreeSet<String>,
    /// Outputs read back whole: patched objects (which carry no label of the pack) and the
    /// outputs of stages (whose gates read them).
    pub observed_outputs: Vec<ObservedOutput>,
    pub deletion: DeletionPolicy,
    /// The rule writes its triggers' status (`spec.writeStatus`).
    pub write_status: bool,
    /// The rule puts the pack's finalizer on its triggers (`spec.finalizer`).
    pub finalizer: bool,
    /// No `watch`: `watch` is the pack's own trigger, which no cluster holds (nothing to
    /// watch, read or patch there).
    pub triggerless: bool,
}

pub(crate) struct CompiledRule {
    pub name: String,
    pub file: String,
    pub watch: CompiledWatch,
    pub lookups: Vec<CompiledLookup>,
    pub guards: Vec<CompiledGuard>,
    pub vars: Vec<CompiledVar>,
    /// Lookups, guards and variables in evaluation order.
    pub steps: Vec<Step>,
    pub outputs: Vec<CompiledOutput>,
    pub stages: Option<CompiledStages>,
    pub status: Option<CompiledStatus>,
    pub deletion: DeletionPolicy,
    /// `spec.writeStatus`: the rule's results go into the trigger's status.
    pub write_status: bool,
    /// `spec.status.syncedCondition`: the engine's `Synced` goes into that status.
    pub synced_condition: bool,
    /// `spec.finalizer`: the rule's outputs hold the trigger's deletion.
    pub finalizer: bool,
    /// Some expression or template reads `clusters`.
    pub reads_clusters: bool,
    /// Roles whose members the rule reads (`clusters.<role>`, `allClusters` lookups), each
    /// with the first place that reads them.
    pub member_roles: BTreeMap<String, String>,
    /// No `watch`: evaluated for the pack's own trigger ([`Pack::pack_trigger`]).
    pub triggerless: bool,
    /// What of `self` the rule's expressions can read (its trigger is converted that far).
    pub self_needed: cel::Needed,
}

impl CompiledRule {
    /// The rule's outputs, those of its stages included.
    pub(crate) fn every_output(&self) -> impl Iterator<Item = &CompiledOutput> + Clone {
        self.outputs.iter().chain(
            self.stages
                .iter()
                .flat_map(|s| s.stages.iter().flat_map(|stage| &stage.outputs)),
        )
    }
}

/// A rule's stages, compiled.
pub(crate) struct CompiledStages {
    /// `status.<field>` holds the progress.
    pub status_field: String,
    /// The stages written in the pack; for stages from data, the one pattern every stage
    /// follows (outputs, cleanup), with its name, gates and timeout in `from`.
    pub stages: Vec<CompiledStage>,
    pub from: Option<CompiledStagesFrom>,
}

pub(crate) struct CompiledStage {
    pub name: String,
    pub outputs: Vec<CompiledOutput>,
    pub gates: Vec<Expr>,
    pub timeout: Option<chrono::TimeDelta>,
    pub cleanup: bool,
    /// The outputs read `stage`, a definition from data.
    pub from_data: bool,
}

pub(crate) struct CompiledStagesFrom {
    pub list: Expr,
    pub name: Expr,
    /// A list of CEL sources, compiled when met.
    pub gates: Option<Expr>,
    pub timeout: Option<Expr>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    Guard(usize),
    Lookup(usize),
    Var(usize),
}

pub(crate) struct CompiledWatch {
    pub cluster: String,
    pub api_version: String,
    pub kind: String,
    pub selector: Option<LabelSelector>,
}

/// A CEL expression with where it was written.
#[derive(Clone)]
pub(crate) struct Expr {
    pub program: cel::Program,
    /// `spec.vars[2].expression`
    pub path: String,
    /// The cost limit the pack states for it (`maxCost`), below the pack's own.
    pub max_cost: Option<u64>,
    /// Where it is written: a failure at run time names the file, line and column.
    pub origin: Option<Arc<ExprOrigin>>,
    /// How errors name it when the path does not say enough (`vars.replicas`).
    pub label: Option<String>,
    /// The lookups (indices into the rule's) whose objects, with the pack's tables and
    /// parameters, are all its value depends on, when that is so (see
    /// `order::mark_shared`): triggers that look up the same objects share the value.
    pub shared_by: Option<Box<[usize]>>,
}

/// The scalar an expression was read from, to map a position in the expression to the file.
pub(crate) struct ExprOrigin {
    pub file: String,
    pub text: Arc<str>,
    pub node: Node,
}

impl ExprOrigin {
    /// The file position of `line`:`column` of the expression, and the file's line there.
    pub fn locate(&self, line: usize, column: usize) -> crate::outcome::ErrorLocation {
        let pos = yaml::value_position(&self.text, &self.node, line, column);
        let source = self
            .text
            .strip_prefix('\u{feff}')
            .unwrap_or(&self.text)
            .lines()
            .nth(pos.line.saturating_sub(1))
            .unwrap_or("")
            .to_string();
        crate::outcome::ErrorLocation {
            file: self.file.clone(),
            line: pos.line,
            column: pos.column,
            source,
        }
    }
}

impl Expr {
    pub fn with_max_cost(mut self, max_cost: Option<u64>) -> Expr {
        self.max_cost = max_cost;
        self
    }

    pub fn source(&self) -> &str {
        self.program.source()
    }
}

pub(crate) struct CompiledLookup {
    pub name: String,
    pub cluster: String,
    pub cluster_name: Option<Expr>,
    pub all_clusters: bool,
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<Expr>,
    pub key: LookupKey,
    pub when: Option<Expr>,
    pub required: bool,
    pub reason: String,
    /// The most objects a list lookup may find (`maxItems`).
    pub max_items: Option<u64>,
    /// Read without a namespace (`clusterScoped: true`, or `allNamespaces: true`: every
    /// namespace of a namespaced kind).
    pub without_namespace: bool,
}

pub(crate) enum LookupKey {
    Name(Expr),
    Labels(Expr),
}

impl CompiledLookup {
    /// Whether the binding is a list (by labels, or of every member) rather than one object.
    pub fn finds_list(&self) -> bool {
        matches!(self.key, LookupKey::Labels(_)) || self.all_clusters
    }

    /// The binding when the lookup does not run or finds nothing: `[]` or `null`.
    pub fn empty_binding(&self) -> serde_json::Value {
        if self.finds_list() {
            serde_json::json!([])
        } else {
            serde_json::Value::Null
        }
    }
}

pub(crate) struct CompiledGuard {
    pub expr: Expr,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub message_expr: Option<Expr>,
}

pub(crate) struct CompiledVar {
    pub name: String,
    /// The name as a shared key of the `vars` map.
    pub key: Arc<str>,
    pub expr: Expr,
}

pub(crate) struct CompiledOutput {
    pub name: String,
    pub cluster: String,
    pub cluster_name: Option<Expr>,
    /// Stage outputs: the name the observed object is bound under in gates.
    pub bind_as: Option<Expr>,
    pub mode: crate::model::OutputMode,
    pub template: String,
    pub when: Option<Expr>,
    pub for_each: Option<Expr>,
    pub adopt: bool,
}

pub(crate) struct CompiledStatus {
    pub fields: Vec<(String, Expr)>,
    pub conditions: Vec<CompiledCondition>,
    /// `spec.status.onStop`: the mapping of a stopped rule.
    pub on_stop: Option<Box<CompiledStatus>>,
}

pub(crate) struct CompiledCondition {
    pub type_: String,
    pub status: Expr,
    pub reason: Expr,
    pub message: Option<Expr>,
}

/// The result of loading: the pack when it has no errors, and every diagnostic (errors and
/// warnings) either way.
pub struct LoadResult {
    pub pack: Option<Pack>,
    pub diagnostics: Vec<Diagnostic>,
}

impl LoadResult {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// What a pack is checked against besides its own files.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// CustomResourceDefinitions (as JSON) of the kinds rules watch and look up: expressions
    /// are type-checked against their OpenAPI schemas. Kinds without one are typed loosely
    /// (metadata typed, everything else `dyn`).
    pub crds: Vec<serde_json::Value>,
}

/// Loads and validates a pack.
pub fn load(files: &PackFiles) -> LoadResult {
    load_with(files, &LoadOptions::default())
}

/// Loads and validates a pack, type-checking its expressions against `options.crds`.
pub fn load_with(files: &PackFiles, options: &LoadOptions) -> LoadResult {
    let mut loader = Loader {
        files,
        crds: &options.crds,
        diagnostics: Vec::new(),
        texts: BTreeMap::new(),
        table_rows: BTreeMap::new(),
        roles_max_members: BTreeMap::new(),
        loosely_typed: BTreeSet::new(),
        broken_templates: BTreeSet::new(),
        params_schema: serde_json::json!({"type": "object"}),
    };
    let pack = loader.load();
    let mut diagnostics = loader.diagnostics;
    crate::diagnostic::sort(&mut diagnostics);
    let failed = diagnostics.iter().any(Diagnostic::is_error);
    LoadResult {
        pack: if failed { None } else { pack },
        diagnostics,
    }
}

struct Loader<'a> {
    files: &'a PackFiles,
    crds: &'a [serde_json::Value],
    diagnostics: Vec<Diagnostic>,
    /// Displayed file name -> text, for mapping positions inside scalars back to the file.
    /// Shared with the expressions compiled from them (their origins).
    texts: BTreeMap<String, Arc<str>>,
    /// Each table's number of rows: the size of `tables.<name>`, known to the cost estimate.
    table_rows: BTreeMap<String, u64>,
    /// Each role's `maxMembers`: the size of `clusters.<role>`, known to the cost estimate.
    roles_max_members: BTreeMap<String, Option<u64>>,
    /// Kinds read without a schema, noted once per pack.
    loosely_typed: BTreeSet<(String, String)>,
    /// Templates whose file is there but does not compile (reported once, where it fails,
    /// not again as "not found" where an output names it).
    broken_templates: BTreeSet<String>,
    /// The OpenAPI schema of `params` (an object of every parameter), for the type checker.
    params_schema: serde_json::Value,
}

pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Is an object of this kind and namespace allowed in `cluster` by the pack's scope?
pub(crate) fn in_scope(
    scope: &[EmitScope],
    cluster: &str,
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
) -> bool {
    scope.iter().any(|entry| {
        entry.cluster == cluster
            && entry.kinds.iter().any(|k| {
                k.api_version == api_version
                    && k.kind == kind
                    && match namespace {
                        None => k.cluster_scoped,
                        Some(ns) => {
                            !k.cluster_scoped
                                && entry.namespaces.iter().any(|p| glob_matches(p, ns))
                        }
                    }
            })
    })
}

#[cfg(test)]
mod tests {
    use super::names_clusters;

    #[test]
    fn clusters_is_named_only_as_a_word() {
        for named in [
            "forEach: clusters.mesh",
            "size(clusters)",
            "{{#each clusters.mesh}}",
            "clusters",
        ] {
            assert!(names_clusters(named), "{named}");
        }
        for not in [
            "allClusters: true",
            "my_clusters",
            "clustersOf",
            "cluster: mesh",
        ] {
            assert!(!names_clusters(not), "{not}");
        }
    }
}
