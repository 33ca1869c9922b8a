//! Loading a rule pack: parse every file, validate it, compile every expression and template
//! once, and report every problem of the pack in one pass.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::de::DeserializeOwned;
use switchyard_cel as cel;

use crate::diagnostic::{Diagnostic, Severity};
use crate::model::{
    Access, ConditionMapping, DeletionPolicy, EmitScope, LabelSelector, PackDocument, PackSpec,
    RuleDocument, TableDocument, TestSuiteDocument,
};
use crate::table::{Table, TableLocation};
use crate::template::{Decider, TemplateSet};
use crate::yaml::{self, Node, NodeValue, PathSegment, Pos};

/// The engine's version, checked against a pack's `spec.engine` requirement.
pub const ENGINE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Names bound in every evaluation; lookups cannot use them.
pub const RESERVED_NAMES: &[&str] = &["self", "vars", "cluster", "item", "index", "now", "tables"];

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
    pub status: Option<CompiledStatus>,
    pub deletion: DeletionPolicy,
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
}

impl Expr {
    pub fn source(&self) -> &str {
        self.program.source()
    }
}

pub(crate) struct CompiledLookup {
    pub name: String,
    pub cluster: String,
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<Expr>,
    pub key: LookupKey,
    pub when: Option<Expr>,
    pub required: bool,
    pub reason: String,
}

pub(crate) enum LookupKey {
    Name(Expr),
    Labels(Expr),
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
    pub template: String,
    pub when: Option<Expr>,
    pub for_each: Option<Expr>,
}

pub(crate) struct CompiledStatus {
    pub fields: Vec<(String, Expr)>,
    pub conditions: Vec<CompiledCondition>,
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
    texts: BTreeMap<String, &'a str>,
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
        self.texts.insert(file.clone(), text.as_str());
        match yaml::parse_documents(text) {
            Ok(nodes) => Some(Parsed {
                file,
                nodes: nodes
                    .into_iter()
                    .filter(|n| !matches!(n.value, NodeValue::Scalar(serde_json::Value::Null, _)))
                    .collect(),
            }),
            Err(e) => {
                self.error(
                    Diagnostic::error("yaml::syntax", format!("invalid YAML: {}", e.message))
                        .at(&file, e.pos),
                );
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
            let message = error.inner().to_string();
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

        let tables = self.load_tables();
        let tables = Arc::new(tables);
        let decide_tables = tables.clone();
        let decider: Decider = Arc::new(move |name, inputs| decide(&decide_tables, name, inputs));
        let cel_tables = tables.clone();
        let env = cel::Env::kubernetes()
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
        Some(Pack {
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

    fn check_manifest(&mut self, document: &PackDocument, file: &str, node: &Node) {
        let name = &document.metadata.name;
        if !is_dns1123_label(name) {
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
                                    Diagnostic::error("table::lint", lint.message)
                                }
                                crate::table::Severity::Warning => {
                                    Diagnostic::warning("table::lint", lint.message)
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
        let text = self.texts.get(file).copied().unwrap_or("");
        let pos = yaml::value_position(text, at, line, column);
        let source_line = text.lines().nth(pos.line.saturating_sub(1)).unwrap_or("");
        Diagnostic::error(code, message)
            .at(file, pos)
            .in_rule(rule)
            .with_snippet(source_line, pos.column)
    }

    /// Compiles a CEL expression found at `path` of `node`; reports a syntax error with its
    /// position in the file and a caret under it.
    fn compile_expr(
        &mut self,
        env: &cel::Env,
        file: &str,
        rule: &str,
        node: &Node,
        path: &str,
        source: &str,
    ) -> Option<Expr> {
        match env.compile(source) {
            Ok(program) => Some(Expr {
                program,
                path: path.to_string(),
            }),
            Err(e) => {
                let d = self.expression_diagnostic(
                    "cel::syntax",
                    format!("invalid CEL expression: {}", e.message),
                    file,
                    rule,
                    node,
                    path,
                    e.line,
                    e.column,
                );
                self.error(d);
                None
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn compile_rule(
        &mut self,
        pack: &PackDocument,
        env: &cel::Env,
        templates: &TemplateSet,
        file: &str,
        node: &Node,
        document: RuleDocument,
    ) -> Option<CompiledRule> {
        let errors_before = self.error_count();
        let rule = document.metadata.name.clone();
        let spec = &document.spec;
        let at = |path: &str| node.closest(&yaml::parse_path(path)).pos;
        let roles: BTreeMap<&str, &[Access]> = pack
            .spec
            .clusters
            .iter()
            .map(|c| (c.name.as_str(), c.access.as_slice()))
            .collect();
        let need_role =
            |loader: &mut Self, role: &str, access: Access, path: &str| match roles.get(role) {
                None => loader.error(
                    Diagnostic::error(
                        "pack::unknown-cluster",
                        format!("cluster `{role}` is not declared in pack.yaml"),
                    )
                    .at(file, at(path))
                    .in_rule(&rule),
                ),
                Some(access_list) if !access_list.contains(&access) => loader.error(
                    Diagnostic::error(
                        "pack::cluster-access",
                        format!(
                            "cluster `{role}` is not declared with `{}` access in pack.yaml",
                            access_name(access)
                        ),
                    )
                    .at(file, at(path))
                    .in_rule(&rule),
                ),
                Some(_) => {}
            };

        let watch_cluster = spec
            .watch
            .cluster
            .clone()
            .unwrap_or_else(|| pack.spec.source_cluster.clone());
        need_role(self, &watch_cluster, Access::Read, "spec.watch.cluster");

        let mut lookups = Vec::new();
        let mut names = BTreeSet::new();
        for (i, lookup) in spec.lookups.iter().enumerate() {
            let base = format!("spec.lookups[{i}]");
            if RESERVED_NAMES.contains(&lookup.name.as_str()) || !is_identifier(&lookup.name) {
                self.error(
                    Diagnostic::error(
                        "pack::invalid-name",
                        format!(
                            "lookup name `{}` must be an identifier other than {}",
                            lookup.name,
                            RESERVED_NAMES.join(", ")
                        ),
                    )
                    .at(file, at(&format!("{base}.name")))
                    .in_rule(&rule),
                );
            }
            if !names.insert(lookup.name.clone()) {
                self.error(
                    Diagnostic::error(
                        "pack::duplicate-name",
                        format!("two lookups are named `{}`", lookup.name),
                    )
                    .at(file, at(&format!("{base}.name")))
                    .in_rule(&rule),
                );
            }
            let cluster = lookup
                .cluster
                .clone()
                .unwrap_or_else(|| watch_cluster.clone());
            need_role(self, &cluster, Access::Read, &format!("{base}.cluster"));
            let namespace = lookup.namespace.as_ref().and_then(|s| {
                self.compile_expr(env, file, &rule, node, &format!("{base}.namespace"), s)
            });
            let when = lookup.when.as_ref().and_then(|s| {
                self.compile_expr(env, file, &rule, node, &format!("{base}.when"), s)
            });
            let key = match (&lookup.object_name, &lookup.match_labels) {
                (Some(name), None) => self
                    .compile_expr(env, file, &rule, node, &format!("{base}.objectName"), name)
                    .map(LookupKey::Name),
                (None, Some(labels)) => self
                    .compile_expr(
                        env,
                        file,
                        &rule,
                        node,
                        &format!("{base}.matchLabels"),
                        labels,
                    )
                    .map(LookupKey::Labels),
                _ => {
                    self.error(
                        Diagnostic::error(
                            "pack::invalid-value",
                            format!(
                                "lookup `{}` needs exactly one of `objectName` and `matchLabels`",
                                lookup.name
                            ),
                        )
                        .at(file, at(&base))
                        .in_rule(&rule),
                    );
                    None
                }
            };
            if let Some(key) = key {
                lookups.push(CompiledLookup {
                    name: lookup.name.clone(),
                    cluster,
                    api_version: lookup.api_version.clone(),
                    kind: lookup.kind.clone(),
                    namespace,
                    key,
                    when,
                    required: lookup.required,
                    reason: lookup
                        .reason
                        .clone()
                        .unwrap_or_else(|| "LookupNotFound".to_string()),
                });
            }
        }

        let mut guards = Vec::new();
        for (i, guard) in spec.when.iter().enumerate() {
            let base = format!("spec.when[{i}]");
            let expr = self.compile_expr(
                env,
                file,
                &rule,
                node,
                &format!("{base}.expression"),
                &guard.expression,
            );
            let message_expr = guard.message_expression.as_ref().and_then(|s| {
                self.compile_expr(
                    env,
                    file,
                    &rule,
                    node,
                    &format!("{base}.messageExpression"),
                    s,
                )
            });
            if let Some(expr) = expr {
                guards.push(CompiledGuard {
                    expr,
                    reason: guard.reason.clone(),
                    message: guard.message.clone(),
                    message_expr,
                });
            }
        }

        let mut vars = Vec::new();
        let mut var_names = BTreeSet::new();
        for (i, var) in spec.vars.iter().enumerate() {
            let base = format!("spec.vars[{i}]");
            if !is_identifier(&var.name) {
                self.error(
                    Diagnostic::error(
                        "pack::invalid-name",
                        format!("variable name `{}` is not an identifier", var.name),
                    )
                    .at(file, at(&format!("{base}.name")))
                    .in_rule(&rule),
                );
            }
            if !var_names.insert(var.name.clone()) {
                self.error(
                    Diagnostic::error(
                        "pack::duplicate-name",
                        format!("two variables are named `{}`", var.name),
                    )
                    .at(file, at(&format!("{base}.name")))
                    .in_rule(&rule),
                );
            }
            if let Some(expr) = self.compile_expr(
                env,
                file,
                &rule,
                node,
                &format!("{base}.expression"),
                &var.expression,
            ) {
                vars.push(CompiledVar {
                    name: var.name.clone(),
                    key: Arc::from(var.name.as_str()),
                    expr,
                });
            }
        }

        let mut outputs = Vec::new();
        for (i, output) in spec.outputs.iter().enumerate() {
            let base = format!("spec.outputs[{i}]");
            need_role(
                self,
                &output.cluster,
                Access::Write,
                &format!("{base}.cluster"),
            );
            if !pack.spec.scope.iter().any(|s| s.cluster == output.cluster) {
                self.error(
                    Diagnostic::error(
                        "pack::scope",
                        format!(
                            "output `{}` writes to cluster `{}`, which no scope entry allows",
                            output.name, output.cluster
                        ),
                    )
                    .at(file, at(&format!("{base}.cluster")))
                    .in_rule(&rule),
                );
            }
            if !templates.has_template(&output.template) {
                self.error(
                    Diagnostic::error(
                        "template::not-found",
                        format!("template `{}` not found under templates/", output.template),
                    )
                    .at(file, at(&format!("{base}.template")))
                    .in_rule(&rule),
                );
            }
            let when = output.when.as_ref().and_then(|s| {
                self.compile_expr(env, file, &rule, node, &format!("{base}.when"), s)
            });
            let for_each = output.for_each.as_ref().and_then(|s| {
                self.compile_expr(env, file, &rule, node, &format!("{base}.forEach"), s)
            });
            outputs.push(CompiledOutput {
                name: output.name.clone(),
                cluster: output.cluster.clone(),
                template: output.template.clone(),
                when,
                for_each,
            });
        }

        let status = spec.status.as_ref().map(|status| {
            let mut fields = Vec::new();
            for (field, source) in &status.fields {
                if let Some(expr) = self.compile_expr(
                    env,
                    file,
                    &rule,
                    node,
                    &format!("spec.status.fields.{field}"),
                    source,
                ) {
                    fields.push((field.clone(), expr));
                }
            }
            let mut conditions = Vec::new();
            for (i, condition) in status.conditions.iter().enumerate() {
                if let Some(c) = self.compile_condition(env, file, &rule, node, i, condition) {
                    conditions.push(c);
                }
            }
            CompiledStatus { fields, conditions }
        });
        if status.is_some() {
            need_role(self, &watch_cluster, Access::WriteStatus, "spec.status");
        }

        // Every expression may read only what exists.
        let lookup_names: BTreeSet<String> = lookups.iter().map(|l| l.name.clone()).collect();
        let mut all_exprs: Vec<&Expr> = Vec::new();
        for l in &lookups {
            all_exprs.extend(l.namespace.iter());
            all_exprs.extend(l.when.iter());
            match &l.key {
                LookupKey::Name(e) | LookupKey::Labels(e) => all_exprs.push(e),
            }
        }
        for g in &guards {
            all_exprs.push(&g.expr);
            all_exprs.extend(g.message_expr.iter());
        }
        all_exprs.extend(vars.iter().map(|v| &v.expr));
        for o in &outputs {
            all_exprs.extend(o.when.iter());
            all_exprs.extend(o.for_each.iter());
        }
        if let Some(s) = &status {
            all_exprs.extend(s.fields.iter().map(|(_, e)| e));
            for c in &s.conditions {
                all_exprs.push(&c.status);
                all_exprs.push(&c.reason);
                all_exprs.extend(c.message.iter());
            }
        }
        let mut reference_errors = Vec::new();
        for expr in &all_exprs {
            for variable in &expr.program.references().variables {
                let known = ["self", "vars", "cluster", "now", "tables"]
                    .contains(&variable.as_str())
                    || lookup_names.contains(variable);
                if !known {
                    reference_errors.push((
                        expr.path.clone(),
                        expr.source().to_string(),
                        format!("unknown variable `{variable}`"),
                        variable.clone(),
                    ));
                }
            }
            for (root, field) in &expr.program.references().selections {
                if root == "vars" && !var_names.contains(field) {
                    reference_errors.push((
                        expr.path.clone(),
                        expr.source().to_string(),
                        format!("unknown variable `vars.{field}`"),
                        format!("vars.{field}"),
                    ));
                }
            }
        }
        for (path, source, message, needle) in reference_errors {
            let (line, column) = find_in_source(&source, &needle);
            let d = self.expression_diagnostic(
                "cel::unknown-variable",
                message,
                file,
                &rule,
                node,
                &path,
                line,
                column,
            );
            self.error(d);
        }

        // Templates may read only what exists.
        for output in &outputs {
            if !templates.has_template(&output.template) {
                continue;
            }
            for reference in templates.referenced_paths(&output.template) {
                let Some(root) = reference.path.first() else {
                    continue;
                };
                let problem = match root.as_str() {
                    "self" | "cluster" | "now" | "tables" => None,
                    "item" | "index" if output.for_each.is_some() => None,
                    "vars" => match reference.path.get(1) {
                        Some(var) if !var_names.contains(var) => {
                            Some(format!("variable `vars.{var}` is not defined"))
                        }
                        _ => None,
                    },
                    name if lookup_names.contains(name) => None,
                    name => Some(format!("variable `{name}` is not defined")),
                };
                if let Some(problem) = problem {
                    let template_file = self
                        .files
                        .display(&format!("templates/{}", output.template));
                    self.error(
                        Diagnostic::error(
                            "template::unknown-variable",
                            format!(
                                "{problem} (template `{}` used by output `{}`)",
                                output.template, output.name
                            ),
                        )
                        .at(
                            &template_file,
                            Pos {
                                line: reference.line,
                                column: reference.column,
                            },
                        )
                        .in_rule(&rule),
                    );
                }
            }
        }

        let steps = match order_steps(&lookups, &guards, &vars) {
            Ok(steps) => steps,
            Err(cycle) => {
                self.error(
                    Diagnostic::error(
                        "pack::cycle",
                        format!(
                            "lookups and variables depend on each other in a cycle: {}",
                            cycle.join(" -> ")
                        ),
                    )
                    .at(file, at("spec"))
                    .in_rule(&rule),
                );
                Vec::new()
            }
        };

        if self.error_count() > errors_before {
            return None;
        }
        let watch = CompiledWatch {
            cluster: watch_cluster,
            api_version: spec.watch.api_version.clone(),
            kind: spec.watch.kind.clone(),
            selector: spec.watch.selector.clone(),
        };
        self.type_check(
            &rule,
            file,
            node,
            &watch,
            &lookups,
            &guards,
            &vars,
            &steps,
            &outputs,
            status.as_ref(),
            pack.cost_per_expression(),
        );
        if self.error_count() > errors_before {
            return None;
        }
        Some(CompiledRule {
            name: rule,
            file: file.to_string(),
            watch,
            lookups,
            guards,
            vars,
            steps,
            outputs,
            status,
            deletion: spec.deletion,
        })
    }

    /// Type-checks every expression of a rule against the CRD schemas, in evaluation order,
    /// so each variable's type is known where later expressions read it.
    #[allow(clippy::too_many_arguments)]
    fn type_check(
        &mut self,
        rule: &str,
        file: &str,
        node: &Node,
        watch: &CompiledWatch,
        lookups: &[CompiledLookup],
        guards: &[CompiledGuard],
        vars: &[CompiledVar],
        steps: &[Step],
        outputs: &[CompiledOutput],
        status: Option<&CompiledStatus>,
        cost_limit: u64,
    ) {
        use cel::check::{Bounds, CostEstimate, ObjectType, Type, TypeEnv};
        let object_type = |api_version: &str, kind: &str| {
            cel::check::object_type_for_kind(self.crds, api_version, kind)
                .unwrap_or_else(|| cel::check::object_type_without_schema(kind))
        };
        let mut env = TypeEnv::new()
            .with_function("decide")
            .with_variable("self", object_type(&watch.api_version, &watch.kind))
            .with_variable(
                "cluster",
                Type::object(ObjectType::new("cluster").with_field("name", Type::String)),
            )
            .with_variable("now", Type::String)
            .with_variable("tables", Type::map(Type::String, Type::list(Type::Dyn)));
        for lookup in lookups {
            let ty = object_type(&lookup.api_version, &lookup.kind);
            let ty = match lookup.key {
                LookupKey::Name(_) => ty,
                LookupKey::Labels(_) => Type::list(ty),
            };
            env.add_variable(&lookup.name, ty);
        }
        let mut vars_type = ObjectType::new("vars");
        env.add_variable("vars", Type::object(vars_type.clone()));
        // Type errors, and warnings about cost: (code, path, message, line, column).
        let mut issues: Vec<(&'static str, String, String, usize, usize)> = Vec::new();
        let mut check = |env: &TypeEnv, expr: &Expr, want_bool: bool| -> (Type, Bounds) {
            let (ty, found) = cel::check::check(&expr.program, env);
            let mut at = |code, message: String, line: usize, column: usize| {
                issues.push((code, expr.path.clone(), message, line, column));
            };
            for issue in found {
                at("cel::type", issue.message, issue.line, issue.column);
            }
            if want_bool && !ty.is_assignable_to(&Type::Bool) {
                at(
                    "cel::type",
                    format!("expected a bool, the expression gives {ty}"),
                    1,
                    1,
                );
            }
            let estimate = cel::check::estimate(&expr.program, env);
            match &estimate.cost {
                CostEstimate::Unbounded {
                    reason,
                    line,
                    column,
                } => at(
                    "cel::cost",
                    format!("the worst-case cost cannot be bounded: {reason}"),
                    *line,
                    *column,
                ),
                CostEstimate::Bounded(cost) if *cost > cost_limit => at(
                    "cel::cost",
                    format!(
                        "the worst-case cost {cost} exceeds the limit {cost_limit} (spec.limits.celCostPerExpression)"
                    ),
                    1,
                    1,
                ),
                CostEstimate::Bounded(_) => {}
            }
            (ty, estimate.result)
        };
        for step in steps {
            match *step {
                Step::Guard(i) => {
                    check(&env, &guards[i].expr, true);
                    if let Some(m) = &guards[i].message_expr {
                        check(&env, m, false);
                    }
                }
                Step::Lookup(i) => {
                    let l = &lookups[i];
                    for e in l.namespace.iter() {
                        check(&env, e, false);
                    }
                    if let Some(e) = &l.when {
                        check(&env, e, true);
                    }
                    match &l.key {
                        LookupKey::Name(e) | LookupKey::Labels(e) => {
                            check(&env, e, false);
                        }
                    }
                }
                Step::Var(i) => {
                    let (ty, bounds) = check(&env, &vars[i].expr, false);
                    vars_type = vars_type.with_bounded_field(vars[i].name.clone(), ty, bounds);
                    env.add_variable("vars", Type::object(vars_type.clone()));
                }
            }
        }
        for output in outputs {
            if let Some(e) = &output.when {
                check(&env, e, true);
            }
            if let Some(e) = &output.for_each {
                check(&env, e, false);
            }
        }
        if let Some(status) = status {
            for (_, e) in &status.fields {
                check(&env, e, false);
            }
            for c in &status.conditions {
                check(&env, &c.status, false);
                check(&env, &c.reason, false);
                if let Some(m) = &c.message {
                    check(&env, m, false);
                }
            }
        }
        for (code, path, message, line, column) in issues {
            let mut d =
                self.expression_diagnostic(code, message, file, rule, node, &path, line, column);
            if code == "cel::cost" {
                // The runtime enforces the limits either way: an estimate only warns.
                d.severity = Severity::Warning;
            }
            self.error(d);
        }
    }

    fn compile_condition(
        &mut self,
        env: &cel::Env,
        file: &str,
        rule: &str,
        node: &Node,
        i: usize,
        condition: &ConditionMapping,
    ) -> Option<CompiledCondition> {
        let base = format!("spec.status.conditions[{i}]");
        let status = self.compile_expr(
            env,
            file,
            rule,
            node,
            &format!("{base}.status"),
            &condition.status,
        );
        let reason = self.compile_expr(
            env,
            file,
            rule,
            node,
            &format!("{base}.reason"),
            &condition.reason,
        );
        let message = match &condition.message {
            Some(m) => {
                Some(self.compile_expr(env, file, rule, node, &format!("{base}.message"), m)?)
            }
            None => None,
        };
        Some(CompiledCondition {
            type_: condition.type_.clone(),
            status: status?,
            reason: reason?,
            message,
        })
    }

    fn error_count(&self) -> usize {
        self.diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count()
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
    let d = Diagnostic::error("template::syntax", e.message.clone());
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

fn access_name(access: Access) -> &'static str {
    match access {
        Access::Read => "read",
        Access::Write => "write",
        Access::WriteStatus => "writeStatus",
    }
}

/// 1-based (line, column) of the first occurrence of `needle` as a whole identifier path in
/// `source`, or (1, 1).
fn find_in_source(source: &str, needle: &str) -> (usize, usize) {
    let bytes = source.as_bytes();
    let mut start = 0;
    while let Some(found) = source[start..].find(needle) {
        let at = start + found;
        let before_ok = at == 0 || !is_ident_byte(bytes[at - 1]) && bytes[at - 1] != b'.';
        let end = at + needle.len();
        let after_ok = end >= bytes.len() || !is_ident_byte(bytes[end]);
        if before_ok && after_ok {
            let line = source[..at].matches('\n').count() + 1;
            let line_start = source[..at].rfind('\n').map(|i| i + 1).unwrap_or(0);
            let column = source[line_start..at].chars().count() + 1;
            return (line, column);
        }
        start = at + needle.len().max(1);
    }
    (1, 1)
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

pub(crate) fn is_dns1123_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// Orders lookups, guards and variables so each runs after what it reads. Among the steps
/// that are ready, guards go first (so they can protect what follows), then lookups, then
/// variables, each in declaration order.
fn order_steps(
    lookups: &[CompiledLookup],
    guards: &[CompiledGuard],
    vars: &[CompiledVar],
) -> Result<Vec<Step>, Vec<String>> {
    let lookup_index: BTreeMap<&str, usize> = lookups
        .iter()
        .enumerate()
        .map(|(i, l)| (l.name.as_str(), i))
        .collect();
    let var_index: BTreeMap<&str, usize> = vars
        .iter()
        .enumerate()
        .map(|(i, v)| (v.name.as_str(), i))
        .collect();
    let deps_of = |exprs: Vec<&Expr>| -> BTreeSet<Step> {
        let mut deps = BTreeSet::new();
        for expr in exprs {
            let refs = expr.program.references();
            for variable in &refs.variables {
                if let Some(i) = lookup_index.get(variable.as_str()) {
                    deps.insert(Step::Lookup(*i));
                }
            }
            for (root, field) in &refs.selections {
                if root == "vars"
                    && let Some(i) = var_index.get(field.as_str())
                {
                    deps.insert(Step::Var(*i));
                }
            }
        }
        deps
    };
    let mut pending: Vec<(Step, BTreeSet<Step>, String)> = Vec::new();
    for (i, g) in guards.iter().enumerate() {
        let mut exprs = vec![&g.expr];
        exprs.extend(g.message_expr.iter());
        pending.push((Step::Guard(i), deps_of(exprs), format!("guard {}", i + 1)));
    }
    for (i, l) in lookups.iter().enumerate() {
        let mut exprs: Vec<&Expr> = l.namespace.iter().chain(l.when.iter()).collect();
        match &l.key {
            LookupKey::Name(e) | LookupKey::Labels(e) => exprs.push(e),
        }
        pending.push((Step::Lookup(i), deps_of(exprs), l.name.clone()));
    }
    for (i, v) in vars.iter().enumerate() {
        pending.push((
            Step::Var(i),
            deps_of(vec![&v.expr]),
            format!("vars.{}", v.name),
        ));
    }
    let mut done: BTreeSet<Step> = BTreeSet::new();
    let mut order = Vec::new();
    while !pending.is_empty() {
        let ready = pending
            .iter()
            .position(|(step, deps, _)| deps.iter().all(|d| done.contains(d) || d == step));
        match ready {
            Some(i) => {
                let (step, _, _) = pending.remove(i);
                done.insert(step);
                order.push(step);
            }
            None => return Err(pending.iter().map(|(_, _, name)| name.clone()).collect()),
        }
    }
    Ok(order)
}

impl PartialOrd for Step {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Step {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let key = |s: &Step| match s {
            Step::Guard(i) => (0, *i),
            Step::Lookup(i) => (1, *i),
            Step::Var(i) => (2, *i),
        };
        key(self).cmp(&key(other))
    }
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

    #[test]
    fn find_identifier_in_source() {
        assert_eq!(find_in_source("a.vars.x + vars.x", "vars.x"), (1, 12));
        assert_eq!(find_in_source("1 +\n  fleet.x", "fleet"), (2, 3));
    }
}
