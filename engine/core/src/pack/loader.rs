//! The loader's walk over a pack's files: parse each, decode its documents (reporting unknown
//! fields without letting them hide other errors), check the manifest, tables, templates and
//! rules, and build the [`Pack`]. Compiling a rule's expressions is in `compile`, typing them
//! in `typecheck`.

use super::*;
use crate::kinds;

/// A file's parsed YAML documents.
struct Parsed {
    file: String,
    nodes: Vec<Node>,
}

impl<'a> Loader<'a> {
    pub(super) fn error(&mut self, d: Diagnostic) {
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

    pub(super) fn load(&mut self) -> Option<Pack> {
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
        self.roles_max_members = document
            .spec
            .clusters
            .iter()
            .map(|c| (c.name.clone(), c.max_members))
            .collect();

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
                "keepTime",
                Arc::new(|args: &[serde_json::Value]| match args {
                    [time, before, value, now] => {
                        Ok(crate::functions::keep_time(time, before, value, now))
                    }
                    _ => Err(
                        "keepTime(previousTime, previousValue, value, now) takes four values"
                            .to_string(),
                    ),
                }),
            )
            .with_function(
                "setConditions",
                Arc::new(|args: &[serde_json::Value]| match args {
                    [previous, conditions, now] => {
                        crate::functions::set_conditions(previous, conditions, now)
                    }
                    _ => Err(
                        "setConditions(previous, conditions, now) takes three values".to_string(),
                    ),
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
        let parameters = self.compile_parameters(&document, &env, &parsed.file, node);

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
        // Bound to the defaults until values are given (`Pack::set_values`).
        let params_json = serde_json::Value::Object(
            parameters
                .iter()
                .filter_map(|p| Some((p.name.clone(), p.schema.defaulted(p.default.as_ref()?))))
                .collect(),
        );
        Some(Pack {
            params_cel: cel::Value::from_json(&params_json),
            params_json,
            parameters: Arc::new(parameters),
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
            generation: Pack::new_generation(),
        })
    }

    /// `spec.parameters`: names, schemas compiled, defaults checked; the type of `params`
    /// for the type checker.
    fn compile_parameters(
        &mut self,
        document: &PackDocument,
        env: &cel::Env,
        file: &str,
        node: &Node,
    ) -> Vec<crate::params::CompiledParameter> {
        let crd_env = cel::Env::new(cel::CelEnvironment::new(env.environment().kubernetes, []))
            .with_limits(env.limits());
        let mut compiled: Vec<crate::params::CompiledParameter> = Vec::new();
        let mut properties = serde_json::Map::new();
        for (i, parameter) in document.spec.parameters.iter().enumerate() {
            let at = |field: &str| {
                node.closest(&yaml::parse_path(&format!("spec.parameters[{i}]{field}")))
                    .pos
            };
            let name = &parameter.name;
            if !is_identifier(name) || RESERVED_NAMES.contains(&name.as_str()) {
                self.error(
                    Diagnostic::error(
                        "pack::invalid-name",
                        format!(
                            "parameter name `{name}` must be a CEL identifier (letters, digits and `_`, not starting with a digit)"
                        ),
                    )
                    .at(file, at(".name")),
                );
                continue;
            }
            if compiled.iter().any(|p| &p.name == name) {
                self.error(
                    Diagnostic::error(
                        "pack::duplicate-name",
                        format!("two parameters are named `{name}`"),
                    )
                    .at(file, at(".name")),
                );
                continue;
            }
            const TYPES: &[&str] = &["string", "integer", "number", "boolean", "array", "object"];
            let type_name = parameter
                .schema
                .get("type")
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default()
                .to_string();
            let open = [
                "x-kubernetes-int-or-string",
                "x-kubernetes-preserve-unknown-fields",
            ]
            .iter()
            .any(|k| parameter.schema.get(*k) == Some(&serde_json::Value::Bool(true)));
            if !TYPES.contains(&type_name.as_str()) && !open {
                self.error(
                    Diagnostic::error(
                        "pack::invalid-value",
                        format!(
                            "parameter `{name}`: the schema's `type` must be one of {}",
                            TYPES.join(", ")
                        ),
                    )
                    .at(file, at(".schema")),
                );
                continue;
            }
            let schema = crate::validate::ValueSchema::new(
                &parameter.schema,
                &format!("parameter {name}"),
                crd_env.clone(),
            );
            for problem in schema.problems() {
                self.error(
                    Diagnostic::error("pack::invalid-value", problem.to_string())
                        .at(file, at(".schema")),
                );
            }
            if let Some(default) = &parameter.default {
                for violation in schema.check(default, &format!("params.{name}")) {
                    self.error(
                        Diagnostic::error(
                            "pack::invalid-value",
                            format!("the default of parameter `{name}` is refused by its schema: {violation}"),
                        )
                        .at(file, at(".default")),
                    );
                }
            }
            properties.insert(name.clone(), parameter.schema.clone());
            compiled.push(crate::params::CompiledParameter {
                name: name.clone(),
                description: parameter.description.clone(),
                schema,
                default: parameter.default.clone(),
                type_name: if type_name.is_empty() {
                    "any".to_string()
                } else {
                    type_name
                },
            });
        }
        let required: Vec<serde_json::Value> = properties
            .keys()
            .map(|k| serde_json::Value::String(k.clone()))
            .collect();
        self.params_schema = serde_json::json!({
            "type": "object",
            "properties": properties,
            "required": required,
        });
        compiled
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
            for (j, kind) in scope.kinds.iter().enumerate() {
                let Some(known) = kinds::lookup(self.crds, &kind.api_version, &kind.kind) else {
                    continue;
                };
                if known.scope.is_cluster() != kind.cluster_scoped {
                    let pos = node
                        .closest(&yaml::parse_path(&format!("spec.scope[{i}].kinds[{j}]")))
                        .pos;
                    self.error(
                        scope_mismatch(
                            &format!("scope entry {} {}", kind.api_version, kind.kind),
                            &kind.api_version,
                            &kind.kind,
                            known.scope,
                        )
                        .at(file, pos),
                    );
                }
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
                self.broken_templates.insert(name);
            }
        }
        // A partial nobody defines fails every render: a load error where it is called.
        for e in set.missing_partials() {
            self.diagnostics.push(template_diagnostic(&e));
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
    pub(super) fn expression_diagnostic(
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
                                        crate::names::ANNOTATION_INVALID_INPUT
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
                            crate::names::ANNOTATION_INVALID_INPUT
                        )),
                    );
                }
            }
        }
    }

    pub(super) fn error_count(&self) -> usize {
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

/// A kind declared with the other scope than the one its CRD or Kubernetes gives it: its
/// objects would be looked for (and written) where they are not, and an existing object of
/// the same name elsewhere could be mistaken for an output.
pub(super) fn scope_mismatch(
    what: &str,
    api_version: &str,
    kind: &str,
    known: kinds::Scope,
) -> Diagnostic {
    let fix = match known {
        kinds::Scope::Cluster => "declare it with `clusterScoped: true`",
        kinds::Scope::Namespaced => "remove `clusterScoped: true`",
    };
    Diagnostic::error(
        "pack::scope",
        format!(
            "{what}: {api_version} {kind} is {}: {fix}",
            known.describe()
        ),
    )
}
