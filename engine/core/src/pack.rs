//! Loading a rule pack: parse every file, validate it, compile every expression and template
//! once, and report every problem of the pack in one pass.

mod compile;
mod order;
mod typecheck;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::de::DeserializeOwned;
use switchyard_cel as cel;

use crate::diagnostic::{Diagnostic, Severity};
use crate::model::{
    Access, CelExtension, ConditionMapping, DeletionPolicy, EmitScope, LabelSelector, PackDocument,
    PackSpec, RuleDocument, TableDocument, TestSuiteDocument,
};
use crate::table::{Table, TableLocation};
use crate::template::{Decider, TemplateSet};
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
    fn display(&self, relative: &str) -> String {
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
}

/// How many gate expressions from data a pack keeps compiled.
const GATE_CACHE: usize = 1024;

impl Pack {
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
            })
            .collect()
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

/// The apiVersion and kind a template writes, when it writes one document with both as
/// literal top-level values.
fn literal_kind(template: &str) -> Option<(String, String)> {
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
    /// Some expression or template reads `clusters`.
    pub reads_clusters: bool,
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
}

/// The scalar an expression was read from, to map a position in the expression to the file.
pub(crate) struct ExprOrigin {
    pub file: String,
    pub text: Arc<str>,
    pub node: Node,
}

impl ExprOrigin {
    /// The file position of `line`:`column` of the expression, and the file's line there.
    pub fn locate(&self, line: usize, column: usize) -> crate::evaluate::ErrorLocation {
        let pos = yaml::value_position(&self.text, &self.node, line, column);
        let source = self
            .text
            .strip_prefix('\u{feff}')
            .unwrap_or(&self.text)
            .lines()
            .nth(pos.line.saturating_sub(1))
            .unwrap_or("")
            .to_string();
        crate::evaluate::ErrorLocation {
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
    /// Read without a namespace (`clusterScoped: true`).
    pub cluster_scoped: bool,
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
        loosely_typed: BTreeSet::new(),
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
    /// Kinds read without a schema, noted once per pack.
    loosely_typed: BTreeSet<(String, String)>,
}

/// A file's parsed YAML documents.
struct Parsed {
    file: String,
    nodes: Vec<Node>,
}

impl<'a> Loader<'a> {
    fn error(&mut self, d: Diagnostic) {
        self.diagnostics.push(d);
    }

    fn parse_file(&mut self, relative: &str) -> Option<Parsed> {
        let file = self.files.display(relative);
        let files: &'a PackFiles = self.files;
        let text = files.files.get(relative)?;
        self.texts.insert(file.clone(), Arc::from(text.as_str()));
        match yaml::parse_documents(text) {
            Ok(nodes) => Some(Parsed {
                file,
                nodes: nodes
                    .into_iter()
                    .filter(|n| !matches!(n.value, NodeValue::Scalar(serde_json::Value::Null, _)))
                    .collect(),
            }),
            Err(e) => {
                let mut d =
                    Diagnostic::error("yaml::syntax", format!("invalid YAML: {}", e.message))
                        .at(&file, e.pos);
                if let Some(help) = expression_yaml_help(text, &e.message, e.pos.line) {
                    d = d.with_help(help);
                }
                self.error(d);
                None
            }
        }
    }

    /// Deserialises one document, reporting type errors and unknown fields at their position.
    /// An unknown field is reported, removed and decoding retried, so one typo does not hide
    /// the other problems of the same document.
    fn decode<T: DeserializeOwned>(&mut self, file: &str, node: &Node) -> Option<T> {
        let mut json = node.to_json();
        for _ in 0..64 {
            let error = match serde_path_to_error::deserialize::<_, T>(json.clone()) {
                Ok(value) => return Some(value),
                Err(error) => error,
            };
            let mut path_text = error.path().to_string();
            let mut path = yaml::parse_path(&path_text);
            let message = without_type_names(&error.inner().to_string());
            let unknown = message.starts_with("unknown field");
            if unknown
                && let Some(field) = message.split('`').nth(1)
                && path.last() != Some(&PathSegment::Key(field.to_string()))
            {
                path.push(PathSegment::Key(field.to_string()));
                path_text = yaml::path_to_string(&path);
            }
            let pos = if unknown {
                position_of_key(node, &path)
            } else {
                node.closest(&path).pos
            };
            let code = if unknown {
                "pack::unknown-field"
            } else if message.starts_with("missing field") {
                "pack::missing-field"
            } else {
                "pack::invalid-value"
            };
            let shown_path = if path_text == "." || path_text.is_empty() {
                String::new()
            } else {
                format!(" at `{path_text}`")
            };
            self.error(Diagnostic::error(code, format!("{message}{shown_path}")).at(file, pos));
            if !(unknown && remove_path(&mut json, &path)) {
                return None;
            }
        }
        None
    }

    fn files_under(&self, folder: &str, extensions: &[&str]) -> Vec<&'a str> {
        let prefix = format!("{folder}/");
        let files: &'a PackFiles = self.files;
        files
            .files
            .keys()
            .filter(|p| p.starts_with(&prefix) && extensions.iter().any(|e| p.ends_with(e)))
            .map(String::as_str)
            .collect()
    }

    fn load(&mut self) -> Option<Pack> {
        let manifest_file = self.files.display("pack.yaml");
        if !self.files.files.contains_key("pack.yaml") {
            self.error(
                Diagnostic::error("pack::missing-manifest", "the pack has no `pack.yaml`")
                    .in_file(&manifest_file),
            );
            return None;
        }
        let parsed = self.parse_file("pack.yaml")?;
        let [node] = parsed.nodes.as_slice() else {
            self.error(
                Diagnostic::error(
                    "pack::invalid-value",
                    "`pack.yaml` must hold exactly one document",
                )
                .in_file(&manifest_file),
            );
            return None;
        };
        let document: PackDocument = self.decode(&parsed.file, node)?;
        self.check_manifest(&document, &parsed.file, node);
        let environment = self.cel_environment(&document, &parsed.file, node);

        let tables = self.load_tables();
        self.table_rows = tables
            .iter()
            .map(|(name, t)| (name.clone(), t.row_count() as u64))
            .collect();
        let tables = Arc::new(tables);
        let decide_tables = tables.clone();
        let decider: Decider = Arc::new(move |name, inputs| decide(&decide_tables, name, inputs));
        let cel_tables = tables.clone();
        let env = cel::Env::new(environment)
            .with_limits(cel::Limits {
                per_expression: document.cost_per_expression(),
            })
            .with_function(
                "decide",
                Arc::new(move |args: &[serde_json::Value]| {
                    let (Some(serde_json::Value::String(name)), Some(inputs)) =
                        (args.first(), args.get(1))
                    else {
                        return Err(
                            "decide(table, inputs) takes a table name and a map".to_string()
                        );
                    };
                    let serde_json::Value::Object(inputs) = inputs else {
                        return Err("decide(table, inputs): inputs must be a map".to_string());
                    };
                    decide(&cel_tables, name, inputs)
                }),
            )
            .with_function(
                "nestedField",
                Arc::new(|args: &[serde_json::Value]| match args {
                    [object, serde_json::Value::String(path)] => {
                        Ok(crate::functions::nested_field(object, path))
                    }
                    _ => {
                        Err("nestedField(object, path) takes a value and a dotted path".to_string())
                    }
                }),
            )
            .with_function(
                "goFormat",
                Arc::new(|args: &[serde_json::Value]| match args {
                    [value] => Ok(serde_json::Value::String(crate::functions::go_format(
                        value,
                    ))),
                    _ => Err("goFormat(value) takes one value".to_string()),
                }),
            )
            .with_function(
                "stripClusterMetadata",
                Arc::new(|args: &[serde_json::Value]| match args {
                    [object @ serde_json::Value::Object(_)] => {
                        Ok(crate::object::strip_cluster_metadata(object))
                    }
                    _ => Err("stripClusterMetadata(object) takes one object".to_string()),
                }),
            );
        let templates = self.load_templates(decider);

        let mut rules = Vec::new();
        for relative in self.files_under("rules", &[".yaml", ".yml"]) {
            let Some(parsed) = self.parse_file(relative) else {
                continue;
            };
            for node in &parsed.nodes {
                if let Some(rule) = self.decode::<RuleDocument>(&parsed.file, node)
                    && let Some(compiled) =
                        self.compile_rule(&document, &env, &templates, &parsed.file, node, rule)
                {
                    rules.push(compiled);
                }
            }
        }
        let mut seen = BTreeSet::new();
        for rule in &rules {
            if !seen.insert(rule.name.clone()) {
                self.error(
                    Diagnostic::error(
                        "pack::duplicate-name",
                        format!("two rules are named `{}`", rule.name),
                    )
                    .in_file(&rule.file),
                );
            }
        }
        rules.sort_by(|a, b| a.name.cmp(&b.name));

        let mut tests = Vec::new();
        // Suites sit directly in tests/; subfolders hold their data (golden files, inputs).
        for relative in self
            .files_under("tests", &[".yaml", ".yml"])
            .into_iter()
            .filter(|p| !p["tests/".len()..].contains('/'))
        {
            let Some(parsed) = self.parse_file(relative) else {
                continue;
            };
            for node in &parsed.nodes {
                if let Some(suite) = self.decode::<TestSuiteDocument>(&parsed.file, node) {
                    tests.push((relative.to_string(), suite));
                }
            }
        }

        let tables_json = serde_json::Value::Object(
            tables
                .iter()
                .map(|(name, t)| (name.clone(), serde_json::Value::Array(t.row_outputs())))
                .collect(),
        );
        let tables_cel = cel::Value::from_json(&tables_json);
        // Outputs are validated as the API server would on create: against the CRDs given,
        // and labels and annotations of every kind.
        // CRD rules are Kubernetes': its environment at the pack's version, without the
        // pack's extensions or functions.
        let crd_env = cel::Env::new(cel::CelEnvironment::new(env.environment().kubernetes, []))
            .with_limits(env.limits());
        let validator = crate::validate::Validator::with_env(self.crds, crd_env);
        for problem in validator.diagnostics() {
            self.error(Diagnostic::warning(
                "crd::schema",
                format!("{problem}: outputs of this kind are reported invalid where it applies"),
            ));
        }
        self.validate_examples(&validator);
        Some(Pack {
            version_text: document.metadata.version.to_string(),
            gates: std::sync::Mutex::new(BTreeMap::new()),
            validator: Arc::new(validator),
            document,
            tables_json,
            tables_cel,
            rules,
            tables,
            templates,
            env,
            tests,
            files: self.files.clone(),
        })
    }

    /// The CEL environment of `spec.cel`; an unsupported version is an error, and the
    /// default version stands in for it so that the expressions still get checked.
    fn cel_environment(
        &mut self,
        document: &PackDocument,
        file: &str,
        node: &Node,
    ) -> cel::CelEnvironment {
        let mut environment = cel::CelEnvironment::default()
            .with_setting_names("spec.cel.kubernetes", "spec.cel.extensions");
        let Some(spec) = &document.spec.cel else {
            return environment;
        };
        if let Some(version) = &spec.kubernetes {
            match version.parse() {
                Ok(version) => environment.kubernetes = version,
                Err(e) => {
                    let pos = node.closest(&yaml::parse_path("spec.cel.kubernetes")).pos;
                    self.error(
                        Diagnostic::error(
                            "pack::invalid-value",
                            format!("spec.cel.kubernetes: {e}"),
                        )
                        .at(file, pos),
                    );
                }
            }
        }
        environment.extensions = spec
            .extensions
            .iter()
            .map(|e| match e {
                CelExtension::Bindings => cel::Extension::Bindings,
                CelExtension::Encoders => cel::Extension::Encoders,
                CelExtension::Math => cel::Extension::Math,
                CelExtension::StringsV3 => cel::Extension::StringsV3,
            })
            .collect();
        environment
    }

    fn check_manifest(&mut self, document: &PackDocument, file: &str, node: &Node) {
        let name = &document.metadata.name;
        if !cel::is_dns1123_label(name) {
            let pos = node.closest(&yaml::parse_path("metadata.name")).pos;
            self.error(
                Diagnostic::error(
                    "pack::invalid-name",
                    format!("pack name `{name}` is not a DNS-1123 label"),
                )
                .at(file, pos),
            );
        }
        if let Some(requirement) = &document.spec.engine
            && let Ok(engine) = semver::Version::parse(ENGINE_VERSION)
            && !requirement.matches(&engine)
        {
            let pos = node.closest(&yaml::parse_path("spec.engine")).pos;
            self.error(
                Diagnostic::error(
                    "pack::engine-version",
                    format!(
                        "the pack needs engine `{requirement}`, this is engine {ENGINE_VERSION}"
                    ),
                )
                .at(file, pos),
            );
        }
        let roles: BTreeSet<&str> = document
            .spec
            .clusters
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        if !roles.contains(document.spec.source_cluster.as_str()) {
            let pos = node.closest(&yaml::parse_path("spec.sourceCluster")).pos;
            self.error(
                Diagnostic::error(
                    "pack::unknown-cluster",
                    format!(
                        "source cluster `{}` is not among the pack's clusters",
                        document.spec.source_cluster
                    ),
                )
                .at(file, pos),
            );
        }
        for (i, scope) in document.spec.scope.iter().enumerate() {
            if !roles.contains(scope.cluster.as_str()) {
                let pos = node
                    .closest(&yaml::parse_path(&format!("spec.scope[{i}].cluster")))
                    .pos;
                self.error(
                    Diagnostic::error(
                        "pack::unknown-cluster",
                        format!(
                            "scope names cluster `{}`, which the pack does not declare",
                            scope.cluster
                        ),
                    )
                    .at(file, pos),
                );
            }
        }
    }

    fn load_tables(&mut self) -> BTreeMap<String, Table> {
        let mut tables = BTreeMap::new();
        for relative in self.files_under("tables", &[".yaml", ".yml"]) {
            let Some(parsed) = self.parse_file(relative) else {
                continue;
            };
            let folder = relative.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
            for node in &parsed.nodes {
                let Some(doc) = self.decode::<TableDocument>(&parsed.file, node) else {
                    continue;
                };
                let name = doc.metadata.name.clone();
                let csv_relative = doc.spec.rows_from.as_ref().map(|f| format!("{folder}/{f}"));
                let csv_text = csv_relative.as_ref().and_then(|p| self.files.files.get(p));
                if let (Some(path), None) = (&csv_relative, csv_text) {
                    let pos = node.closest(&yaml::parse_path("spec.rowsFrom")).pos;
                    self.error(
                        Diagnostic::error(
                            "table::missing-file",
                            format!("rows file `{path}` not found"),
                        )
                        .at(&parsed.file, pos),
                    );
                    continue;
                }
                let csv_file = csv_relative.as_deref().map(|p| self.files.display(p));
                match Table::compile(&name, &doc.spec, csv_text.map(String::as_str)) {
                    Ok(table) => {
                        for lint in table.lint() {
                            let diag = match lint.severity {
                                crate::table::Severity::Error => {
                                    Diagnostic::error(lint.code, lint.message)
                                }
                                crate::table::Severity::Warning => {
                                    Diagnostic::warning(lint.code, lint.message)
                                }
                            };
                            let diag = self.locate_table(
                                diag,
                                &parsed.file,
                                node,
                                csv_file.as_deref(),
                                &lint.location,
                            );
                            self.error(diag);
                        }
                        if tables.insert(name.clone(), table).is_some() {
                            self.error(
                                Diagnostic::error(
                                    "pack::duplicate-name",
                                    format!("two tables are named `{name}`"),
                                )
                                .in_file(&parsed.file),
                            );
                        }
                    }
                    Err(errors) => {
                        for error in errors {
                            let diag = Diagnostic::error("table::invalid", error.message.clone());
                            let diag = self.locate_table(
                                diag,
                                &parsed.file,
                                node,
                                csv_file.as_deref(),
                                &error.location,
                            );
                            self.error(diag);
                        }
                    }
                }
            }
        }
        tables
    }

    fn locate_table(
        &self,
        diag: Diagnostic,
        file: &str,
        node: &Node,
        csv_file: Option<&str>,
        location: &TableLocation,
    ) -> Diagnostic {
        match location {
            TableLocation::Spec(path) => diag.at(file, node.closest(&yaml::parse_path(path)).pos),
            TableLocation::CsvLine { line, column } => {
                let file = csv_file.unwrap_or(file);
                diag.at(
                    file,
                    Pos {
                        line: *line,
                        column: column.unwrap_or(1),
                    },
                )
            }
            TableLocation::Evaluation => diag.in_file(file),
        }
    }

    fn load_templates(&mut self, decider: Decider) -> TemplateSet {
        let mut set = TemplateSet::new(Some(decider));
        for (name, (path, source)) in &self.files.shared_partials {
            if let Err(e) = set.add_partial(name, path, source) {
                self.diagnostics.push(template_diagnostic(&e));
            }
        }
        let relatives: Vec<String> = self
            .files_under("templates", &[".hbs"])
            .into_iter()
            .map(str::to_string)
            .collect();
        for relative in relatives {
            let name = relative.trim_start_matches("templates/").to_string();
            let file = self.files.display(&relative);
            let source = self.files.files.get(&relative).cloned().unwrap_or_default();
            if let Err(e) = set.add_template(&name, &file, &source) {
                self.diagnostics.push(template_diagnostic(&e));
            }
        }
        // Compiled into structure now, once; what cannot be is noted.
        for e in set.text_rendered() {
            let note = template_diagnostic(&e);
            self.diagnostics.push(
                Diagnostic {
                    severity: Severity::Note,
                    ..note
                }
                .with_help(
                    "it renders the same, as text: handlebars writes it and the YAML is parsed \
                 each time its shape changes; blocks and partials that stand on lines of their \
                 own and wrap whole YAML entries compile into structure",
                ),
            );
        }
        set
    }

    /// A diagnostic about position (`line`, `column`) of the expression at `path` of `node`:
    /// located in the file, with the file's line and a caret as the snippet.
    #[allow(clippy::too_many_arguments)]
    fn expression_diagnostic(
        &self,
        code: &'static str,
        message: String,
        file: &str,
        rule: &str,
        node: &Node,
        path: &str,
        line: usize,
        column: usize,
    ) -> Diagnostic {
        let at = node.closest(&yaml::parse_path(path));
        let text = self.texts.get(file).map_or("", |t| &**t);
        let pos = yaml::value_position(text, at, line, column);
        let source_line = text.lines().nth(pos.line.saturating_sub(1)).unwrap_or("");
        Diagnostic::error(code, message)
            .at(file, pos)
            .in_rule(rule)
            .with_snippet(source_line, pos.column)
    }

    /// The pack's example and fixture objects of kinds with a CRD must be valid (what a
    /// tenant could create); those marked `switchyard.dev/invalid` must be invalid. Warnings
    /// here, since examples are not what a running pack needs; `check` makes them errors.
    fn validate_examples(&mut self, validator: &crate::validate::Validator) {
        let files: &'a PackFiles = self.files;
        for (relative, text) in &files.files {
            let example = (relative.starts_with("examples/") || relative.starts_with("fixtures/"))
                && (relative.ends_with(".yaml") || relative.ends_with(".yml"));
            if !example {
                continue;
            }
            let file = files.display(relative);
            // A file that does not parse is `render`'s and `test`'s to report.
            let Ok(documents) = yaml::parse_documents(text) else {
                continue;
            };
            for node in documents {
                let object = node.to_json();
                let check = validator.check_input(&object);
                let kind = object.get("kind").and_then(serde_json::Value::as_str);
                let name = object
                    .pointer("/metadata/name")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default();
                let violations = match check {
                    InputCheck::NoCrd => continue,
                    // The mark must not go stale: its CRD has to refuse the object.
                    InputCheck::InvalidOnPurpose => {
                        if validator.validate(&object).is_empty() {
                            self.error(
                                Diagnostic::warning(
                                    "input::invalid",
                                    format!(
                                        "{} `{name}` is marked `{}` but its CRD accepts it",
                                        kind.unwrap_or_default(),
                                        crate::evaluate::ANNOTATION_INVALID_INPUT
                                    ),
                                )
                                .at(&file, node.pos),
                            );
                        }
                        continue;
                    }
                    InputCheck::Checked(violations) => violations,
                };
                for violation in violations {
                    let at = node.closest(&yaml::parse_path(&violation.path)).pos;
                    self.error(
                        Diagnostic::warning(
                            "input::invalid",
                            format!(
                                "{} `{name}` would be refused by the API server: {violation}",
                                kind.unwrap_or_default()
                            ),
                        )
                        .at(&file, at)
                        .with_help(format!(
                            "fix the object, or mark an object that is invalid on purpose with the annotation `{}: <why>`",
                            crate::evaluate::ANNOTATION_INVALID_INPUT
                        )),
                    );
                }
            }
        }
    }

    fn error_count(&self) -> usize {
        self.diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count()
    }
}

/// Keys whose values are CEL expressions.
const EXPRESSION_KEYS: &[&str] = &[
    "expression",
    "messageExpression",
    "when",
    "forEach",
    "clusterName",
    "objectName",
    "matchLabels",
    "namespace",
    "bindAs",
    "status",
    "reason",
    "message",
    "list",
    "name",
    "gates",
    "timeout",
];

/// A hint for a YAML error inside a CEL expression written as a plain scalar: `: ` (a map
/// literal, a ternary) or ` #` ends or splits a plain scalar in YAML.
fn expression_yaml_help(text: &str, message: &str, line: usize) -> Option<String> {
    if !message.contains("mapping values are not allowed") {
        return None;
    }
    let source = text.lines().nth(line.checked_sub(1)?)?.trim_start();
    let source = source.strip_prefix("- ").unwrap_or(source);
    let key = source.split(':').next()?.trim();
    let in_status_fields = !EXPRESSION_KEYS.contains(&key);
    if in_status_fields && !text.lines().take(line).any(|l| l.trim() == "fields:") {
        return None;
    }
    Some(format!(
        "`{key}` holds a CEL expression containing `: `, which YAML reads as a new key: quote it (`{key}: \"...\"`) or write it as a block (`{key}: >-` with the expression on the next lines)"
    ))
}

/// serde's message without the Rust type names it mentions (`expected struct Watch` ->
/// `expected a map`): users write YAML, not Rust.
fn without_type_names(message: &str) -> String {
    static TYPE_NAME: std::sync::LazyLock<Option<regex::Regex>> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"expected (struct|enum|tuple struct) [A-Za-z0-9_]+").ok()
    });
    match TYPE_NAME.as_ref() {
        Some(re) => re
            .replace_all(message, |c: &regex::Captures<'_>| {
                if &c[1] == "enum" {
                    "expected one of the allowed values"
                } else {
                    "expected a map"
                }
                .to_string()
            })
            .into_owned(),
        None => message.to_string(),
    }
}

/// Removes the value at `path` from `json`; false when there is nothing to remove.
fn remove_path(json: &mut serde_json::Value, path: &[PathSegment]) -> bool {
    let Some((PathSegment::Key(last), parent)) = path.split_last() else {
        return false;
    };
    let mut current = json;
    for segment in parent {
        let next = match segment {
            PathSegment::Key(k) => current.get_mut(k.as_str()),
            PathSegment::Index(i) => current.get_mut(*i),
        };
        match next {
            Some(n) => current = n,
            None => return false,
        }
    }
    current
        .as_object_mut()
        .is_some_and(|m| m.remove(last.as_str()).is_some())
}

/// Where an unknown-field error points: at the offending key itself.
fn position_of_key(node: &Node, path: &[PathSegment]) -> Pos {
    match path.split_last() {
        Some((PathSegment::Key(key), parent)) => {
            let parent = node.closest(parent);
            parent.key_pos(key).unwrap_or(parent.pos)
        }
        _ => node.closest(path).pos,
    }
}

fn template_diagnostic(e: &crate::template::TemplateError) -> Diagnostic {
    let d = Diagnostic::error(e.code, e.message.clone());
    match (e.line, e.column) {
        (Some(line), column) => d.at(
            &e.file,
            Pos {
                line,
                column: column.unwrap_or(1),
            },
        ),
        _ => d.in_file(&e.file),
    }
}

pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Evaluates a decision table for CEL's `decide()` and the templates' `decide` helper.
fn decide(
    tables: &BTreeMap<String, Table>,
    name: &str,
    inputs: &serde_json::Map<String, serde_json::Value>,
) -> Result<serde_json::Value, String> {
    let table = tables
        .get(name)
        .ok_or_else(|| format!("no decision table named `{name}`"))?;
    table
        .decide(inputs)
        .map(|d| d.value)
        .map_err(|e| format!("table `{name}`: {}", e.message))
}

/// Does `namespace` match a scope pattern (`*` matches any run of characters)?
pub(crate) fn glob_match(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((prefix, rest)) => {
            let Some(remaining) = text.strip_prefix(prefix) else {
                return false;
            };
            if rest.is_empty() {
                return true;
            }
            (0..=remaining.len())
                .filter(|i| remaining.is_char_boundary(*i))
                .any(|i| glob_match(rest, &remaining[i..]))
        }
    }
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
                            !k.cluster_scoped && entry.namespaces.iter().any(|p| glob_match(p, ns))
                        }
                    }
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob() {
        assert!(glob_match("kcp-*", "kcp-abc"));
        assert!(glob_match("*", ""));
        assert!(glob_match("a*b*c", "axxbyyc"));
        assert!(!glob_match("kcp-*", "kube-system"));
        assert!(!glob_match("default", "default2"));
    }
}
