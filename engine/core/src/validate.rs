//! Output validation: checks the objects a pack renders as the API server would check them
//! on create, before anything is applied.
//!
//! [`Validator::new`] takes CustomResourceDefinitions (as JSON) and compiles each version's
//! OpenAPI v3 schema once: patterns, `x-kubernetes-validations` rules (with the engine's
//! CEL), field paths. [`Validator::validate`] then checks one object:
//!
//! - every object: `metadata.labels` and `metadata.annotations` are maps of strings, label
//!   keys and annotation keys are qualified names, label values valid label values, and the
//!   annotations at most 256 KiB together (Kubernetes' `ValidateObjectMeta`);
//! - an object whose group and kind have a CRD: its apiVersion names one of the CRD's
//!   versions, and the object matches that version's schema (after the API server's
//!   defaulting: absent fields with a `default` get it, and a `null` in a field that is not
//!   `nullable` counts as absent, as the API server drops it), then the version's CEL rules.
//!
//! Messages follow Kubernetes' `field.ErrorList` wording (`Required value`, `Unsupported
//! value: "x": supported values: ...`, `Invalid value: ...: spec.x in body should match
//! '...'`), so what a pack author reads here is what `kubectl apply` would have said.
//!
//! Departures from the API server, and why:
//! - **Unknown fields are errors** (`field not declared in schema`). The API server prunes
//!   them silently, so a misspelt field in a template would be applied as if it were not
//!   there; the author wants to know.
//! - **Every type error is reported**, including for a zero value (`""`, `0`, `false`)
//!   where kube-openapi lets zero values of any type pass.
//! - `maxLength` counts characters and says so (`may not be more than 3 characters`), where
//!   Kubernetes counts characters but prints `bytes`.
//! - Label and annotation value errors name the key (`metadata.labels[app]`); Kubernetes
//!   reports them at `metadata.labels`.
//! - `format: int32` and `int64` range-check integers (kube-openapi does not; a controller
//!   decoding the field into an `int32` would fail).
//! - `uniqueItems` duplicates are reported at the duplicate's index with `Duplicate value`,
//!   like `x-kubernetes-list-type: set`.
//!
//! As in Kubernetes, CEL rules are not evaluated when the schema check found a type or enum
//! error (one violation says so instead); transition rules (reading `oldSelf`) are skipped,
//! as on create, unless `optionalOldSelf` is set, in which case `oldSelf` is
//! `optional.none()`. A rule is evaluated only where its node is present and not null. Each
//! rule evaluation is bounded by the engine's per-expression cost limit (as Kubernetes'
//! per-call limit) and all the rules of one object by [`CEL_COST_BUDGET`] (Kubernetes'
//! per-object runtime budget); walking the object is bounded by [`MAX_DEPTH`].
//!
//! A rule, `messageExpression` or `pattern` that does not compile, or a `fieldPath` that
//! does not parse, is listed once by [`Validator::diagnostics`]; and a rule or pattern that
//! does not compile is also a violation of every object that reaches its node, so an
//! object is never called valid when part of its schema could not be checked. (The API
//! server refuses such a CRD; the object could not be created at all.)
//!
//! `self` is the node's JSON as the engine's CEL sees every object ([`CelValue::from_json`]):
//! unlike in Kubernetes, `date-time`, `duration` and `byte` strings stay strings (a rule
//! comparing such a field with a `timestamp` fails with `no such overload`), and fields the
//! schema does not declare are visible.
//!
//! Not checked: `x-kubernetes-list-map-keys` entries missing a key (the schema's `required`
//! usually covers it); `metadata` fields other than labels, annotations and what the CRD
//! says of `name` and `generateName` (namespaces, owner references: the engine builds
//! them); formats other than `date-time`, `date`, `byte`, `int32`, `int64`, `uuid`, `ipv4`,
//! `ipv6` and `cidr` (unknown formats are ignored, as Kubernetes ignores them); ratcheting
//! (objects are checked as on create); whether the version is served.

mod label_rules;

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::Arc;

use regex::{Regex, RegexBuilder};
use serde_json::{Map, Value};
use switchyard_cel::{Activation, Env, Program, Value as CelValue};

use label_rules::{label_value_errors, qualified_name_errors};

/// How deep an object (or a schema) is walked; deeper values are one violation.
pub const MAX_DEPTH: usize = 128;

/// The total cost the CEL rules of one object may have, in the evaluator's units
/// (Kubernetes' `RuntimeCELCostBudget`).
pub const CEL_COST_BUDGET: u64 = 10_000_000;

/// Kubernetes' limit on the annotations of one object, keys and values together.
const TOTAL_ANNOTATION_SIZE: usize = 256 * 1024;

/// The most a `messageExpression` result may have, in characters (Kubernetes' limit).
const MAX_MESSAGE_EXPRESSION_CHARS: usize = 5_000;

/// Patterns are compiled with a bound, so one CRD cannot make the validator huge.
const PATTERN_SIZE_LIMIT: usize = 1 << 20;

/// One reason an object would be refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The field, as Kubernetes names it: `spec.placement.clusterAffinity`,
    /// `spec.ingress[0].toPorts[0]`, `metadata.labels[app]`; empty for the object itself.
    pub path: String,
    /// What is wrong, in Kubernetes' wording (`Required value`, `Invalid value: ...`).
    pub message: String,
    /// The `x-kubernetes-validations` rule that failed (its source), or the schema keyword
    /// (`enum`, `type`, `required`, ...) or check (`label value`) that did.
    pub rule: Option<String>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)?;
        } else {
            write!(f, "{}: {}", self.path, self.message)?;
        }
        if let Some(rule) = &self.rule {
            // Rules are often folded YAML over several lines: one line reads better.
            let rule = rule.split_whitespace().collect::<Vec<_>>().join(" ");
            write!(f, " ({rule})")?;
        }
        Ok(())
    }
}

/// What [`Validator::check_input`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputCheck {
    /// No CRD for the object's kind (or no kind): nothing to check against.
    NoCrd,
    /// Marked `switchyard.dev/invalid`: left unchecked.
    InvalidOnPurpose,
    /// Every violation; none when the object is valid.
    Checked(Vec<Violation>),
}

/// A part of a CRD that could not be compiled (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrdProblem {
    /// The CRD's `metadata.name` (or its group and kind when it has none).
    pub crd: String,
    /// The version whose schema has the problem; empty for the CRD itself.
    pub version: String,
    /// The schema node, as the path of the fields it validates (`spec.strategy`).
    pub path: String,
    pub message: String,
    /// The rule source, when the problem is a rule's.
    pub rule: Option<String>,
}

impl fmt::Display for CrdProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CRD {}", self.crd)?;
        if !self.version.is_empty() {
            write!(f, " version {}", self.version)?;
        }
        if !self.path.is_empty() {
            write!(f, " at {}", self.path)?;
        }
        write!(f, ": {}", self.message)?;
        if let Some(rule) = &self.rule {
            let rule = rule.split_whitespace().collect::<Vec<_>>().join(" ");
            write!(f, " (rule: {rule})")?;
        }
        Ok(())
    }
}

/// Checks objects against CRD schemas and Kubernetes' metadata rules. Build once, share
/// (it is `Send + Sync`); [`Validator::validate`] does not mutate it.
pub struct Validator {
    env: Env,
    /// By (group, kind).
    kinds: BTreeMap<(String, String), CrdKind>,
    problems: Vec<CrdProblem>,
}

impl fmt::Debug for Validator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Validator")
            .field("kinds", &self.kinds.keys().collect::<Vec<_>>())
            .field("problems", &self.problems)
            .finish_non_exhaustive()
    }
}

struct CrdKind {
    group: String,
    /// Versions in the CRD's order; `None`: a version without a schema (anything goes).
    versions: Vec<(String, Option<Arc<Schema>>)>,
}

/// One compiled schema node.
#[derive(Default)]
struct Schema {
    /// `object`, `array`, `string`, `integer`, `number`, `boolean`; `None`: any type.
    kind: Option<String>,
    int_or_string: bool,
    nullable: bool,
    format: Option<String>,
    enumeration: Option<Vec<Value>>,
    pattern: Option<(String, Result<Regex, String>)>,
    minimum: Option<f64>,
    maximum: Option<f64>,
    exclusive_minimum: bool,
    exclusive_maximum: bool,
    multiple_of: Option<f64>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    min_properties: Option<u64>,
    max_properties: Option<u64>,
    unique_items: bool,
    required: Vec<String>,
    properties: BTreeMap<String, Schema>,
    additional: Additional,
    items: Option<Box<Schema>>,
    preserve_unknown: bool,
    embedded: bool,
    list_type: ListType,
    all_of: Vec<Schema>,
    any_of: Vec<Schema>,
    one_of: Vec<Schema>,
    not: Option<Box<Schema>>,
    default: Option<Value>,
    rules: Vec<Rule>,
}

#[derive(Default)]
enum Additional {
    /// No `additionalProperties`: only declared properties.
    #[default]
    Closed,
    /// `additionalProperties: true`.
    Open,
    Schema(Box<Schema>),
}

#[derive(Default)]
enum ListType {
    #[default]
    Atomic,
    Set,
    Map(Vec<String>),
}

struct Rule {
    source: String,
    program: Result<Program, String>,
    message: Option<String>,
    message_expression: Option<Program>,
    field_path: Option<Vec<PathPart>>,
    reason: Reason,
    /// Reads `oldSelf`: a transition rule, not evaluated on create.
    transition: bool,
    optional_old_self: bool,
}

#[derive(Clone, Copy)]
enum Reason {
    Invalid,
    Forbidden,
    Required,
    Duplicate,
}

enum PathPart {
    Field(String),
    Key(String),
    Index(usize),
}

/// What compiling one CRD version's schema needs, and collects.
struct Compiler<'a> {
    env: &'a Env,
    crd: &'a str,
    version: &'a str,
    problems: &'a mut Vec<CrdProblem>,
}

impl Validator {
    /// Compiles the schemas of `crds` (CustomResourceDefinition objects, `v1` or
    /// `v1beta1`, as JSON). Documents that are not CRDs are ignored; what cannot be
    /// compiled is in [`Validator::diagnostics`].
    pub fn new(crds: &[Value]) -> Validator {
        Validator::with_env(crds, Env::kubernetes())
    }

    /// [`Validator::new`] with the CEL environment (and cost limits) rules compile in, in
    /// strict mode: a rule compiles only if the API server would compile it.
    pub fn with_env(crds: &[Value], env: Env) -> Validator {
        let env = env.strict();
        let mut kinds = BTreeMap::new();
        let mut problems = Vec::new();
        for crd in crds {
            if crd.get("kind").and_then(Value::as_str) != Some("CustomResourceDefinition") {
                continue;
            }
            let spec = crd.get("spec");
            let group = spec
                .and_then(|s| s.get("group"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            let kind = spec
                .and_then(|s| s.get("names"))
                .and_then(|n| n.get("kind"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            let name = crd
                .get("metadata")
                .and_then(|m| m.get("name"))
                .and_then(Value::as_str)
                .map_or_else(|| format!("{kind}.{group}"), str::to_string);
            if group.is_empty() || kind.is_empty() {
                problems.push(CrdProblem {
                    crd: name,
                    version: String::new(),
                    path: String::new(),
                    message: "the CRD has no spec.group or spec.names.kind".to_string(),
                    rule: None,
                });
                continue;
            }
            let mut versions = Vec::new();
            for (version, schema) in crd_versions(crd) {
                let compiled = schema.map(|schema| {
                    let mut compiler = Compiler {
                        env: &env,
                        crd: &name,
                        version: &version,
                        problems: &mut problems,
                    };
                    Arc::new(compiler.compile(schema, "", 0))
                });
                versions.push((version, compiled));
            }
            let key = (group.to_string(), kind.to_string());
            if kinds.contains_key(&key) {
                problems.push(CrdProblem {
                    crd: name.clone(),
                    version: String::new(),
                    path: String::new(),
                    message: format!(
                        "another CRD also defines {kind}.{group}: this one, the later, is used"
                    ),
                    rule: None,
                });
            }
            kinds.insert(
                key,
                CrdKind {
                    group: group.to_string(),
                    versions,
                },
            );
        }
        Validator {
            env,
            kinds,
            problems,
        }
    }

    /// The parts of the CRDs that could not be compiled: rules, message expressions and
    /// patterns that do not compile, field paths that do not parse.
    pub fn diagnostics(&self) -> &[CrdProblem] {
        &self.problems
    }

    /// Whether a CRD for the object's group and kind was given.
    pub fn has_crd(&self, api_version: &str, kind: &str) -> bool {
        self.kinds
            .contains_key(&(group_of(api_version).to_string(), kind.to_string()))
    }

    /// An input object (a test input, an example) as the API server would take it: not
    /// checked when its kind has no CRD or it is marked invalid on purpose
    /// (`switchyard.dev/invalid`), else every violation.
    pub fn check_input(&self, object: &Value) -> InputCheck {
        let (Some(api_version), Some(kind)) = (
            object.get("apiVersion").and_then(Value::as_str),
            object.get("kind").and_then(Value::as_str),
        ) else {
            return InputCheck::NoCrd;
        };
        if !self.has_crd(api_version, kind) {
            return InputCheck::NoCrd;
        }
        let on_purpose = object
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(crate::names::ANNOTATION_INVALID_INPUT))
            .is_some();
        if on_purpose {
            return InputCheck::InvalidOnPurpose;
        }
        InputCheck::Checked(self.validate(object))
    }

    /// The labels and annotations check alone: what applies to a partial object (a patch).
    pub fn validate_metadata(&self, object: &Value) -> Vec<Violation> {
        let mut out = Vec::new();
        check_metadata(object, "", &mut out);
        out
    }

    /// Every reason the API server would refuse `object` on create (see the module
    /// documentation), in the order the object is walked; empty when it is valid.
    pub fn validate(&self, object: &Value) -> Vec<Violation> {
        let mut out = Vec::new();
        check_metadata(object, "", &mut out);
        let api_version = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let kind = object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(crd) = self
            .kinds
            .get(&(group_of(api_version).to_string(), kind.to_string()))
        else {
            return out;
        };
        let version = api_version.rsplit_once('/').map_or(api_version, |(_, v)| v);
        let Some((_, schema)) = crd.versions.iter().find(|(v, _)| v == version) else {
            let supported: Vec<String> = crd
                .versions
                .iter()
                .map(|(v, _)| quote(&format!("{}/{v}", crd.group)))
                .collect();
            out.push(Violation {
                path: "apiVersion".to_string(),
                message: format!(
                    "Unsupported value: {}: supported values: {}",
                    quote(api_version),
                    supported.join(", ")
                ),
                rule: Some("apiVersion".to_string()),
            });
            return out;
        };
        let Some(schema) = schema else {
            return out;
        };
        // The API server defaults before it validates: required fields with a default and
        // rules reading defaulted fields see the defaults.
        let mut defaulted = object.clone();
        apply_defaults(schema, &mut defaulted, 0);
        let mut walk = Walk {
            env: &self.env,
            out,
            blocking: false,
            pending: Vec::new(),
        };
        let mut found = Vec::new();
        walk.node(schema, &defaulted, "", 0, Mode::Root, &mut found);
        walk.out.append(&mut found);
        walk.run_rules();
        walk.out
    }
}

/// One OpenAPI v3 schema compiled on its own (a pack parameter's): a value is checked as the
/// API server checks a field of a CRD with that schema (defaults applied first).
pub struct ValueSchema {
    env: Env,
    schema: Schema,
    problems: Vec<CrdProblem>,
}

impl fmt::Debug for ValueSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ValueSchema")
            .field("problems", &self.problems)
            .finish_non_exhaustive()
    }
}

impl ValueSchema {
    /// Compiles `schema`; `name` names it in [`ValueSchema::problems`]. Rules compile in
    /// `env`, strictly.
    pub fn new(schema: &Value, name: &str, env: Env) -> ValueSchema {
        let env = env.strict();
        let mut problems = Vec::new();
        let mut compiler = Compiler {
            env: &env,
            crd: name,
            version: "",
            problems: &mut problems,
        };
        let schema = compiler.compile(schema, "", 0);
        ValueSchema {
            env,
            schema,
            problems,
        }
    }

    /// What of the schema could not be compiled.
    pub fn problems(&self) -> &[CrdProblem] {
        &self.problems
    }

    /// `value` with the schema's defaults applied.
    pub fn defaulted(&self, value: &Value) -> Value {
        let mut defaulted = value.clone();
        apply_defaults(&self.schema, &mut defaulted, 0);
        defaulted
    }

    /// Every reason the value is refused; `path` names the value (`params.replicas`).
    pub fn check(&self, value: &Value, path: &str) -> Vec<Violation> {
        let defaulted = self.defaulted(value);
        let mut walk = Walk {
            env: &self.env,
            out: Vec::new(),
            blocking: false,
            pending: Vec::new(),
        };
        let mut found = Vec::new();
        walk.node(&self.schema, &defaulted, path, 0, Mode::Normal, &mut found);
        walk.out.append(&mut found);
        walk.run_rules();
        walk.out
    }
}

/// The group of an apiVersion (`apps/v1` -> `apps`, `v1` -> ``).
fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

/// (version name, its schema) of a CRD: `spec.versions[].schema.openAPIV3Schema`, or the
/// top-level `spec.validation.openAPIV3Schema` of a `v1beta1` CRD.
fn crd_versions(crd: &Value) -> Vec<(String, Option<&Value>)> {
    let Some(spec) = crd.get("spec") else {
        return Vec::new();
    };
    let shared = spec
        .get("validation")
        .and_then(|v| v.get("openAPIV3Schema"));
    let mut versions: Vec<(String, Option<&Value>)> = spec
        .get("versions")
        .and_then(Value::as_array)
        .map(|versions| {
            versions
                .iter()
                .filter_map(|v| {
                    let name = v.get("name")?.as_str()?.to_string();
                    let schema = v
                        .get("schema")
                        .and_then(|s| s.get("openAPIV3Schema"))
                        .or(shared);
                    Some((name, schema))
                })
                .collect()
        })
        .unwrap_or_default();
    if versions.is_empty()
        && let Some(version) = spec.get("version").and_then(Value::as_str)
    {
        versions.push((version.to_string(), shared));
    }
    versions
}

impl Compiler<'_> {
    fn problem(&mut self, path: &str, message: String, rule: Option<&str>) {
        self.problems.push(CrdProblem {
            crd: self.crd.to_string(),
            version: self.version.to_string(),
            path: path.to_string(),
            message,
            rule: rule.map(str::to_string),
        });
    }

    /// Compiles the schema at `path` (the fields it validates, for messages).
    fn compile(&mut self, json: &Value, path: &str, depth: usize) -> Schema {
        let mut schema = Schema::default();
        if depth > MAX_DEPTH {
            self.problem(
                path,
                format!("the schema is nested more than {MAX_DEPTH} levels deep: the rest is not checked"),
                None,
            );
            schema.preserve_unknown = true;
            return schema;
        }
        let Some(map) = json.as_object() else {
            return schema;
        };
        let str_of = |key: &str| map.get(key).and_then(Value::as_str).map(str::to_string);
        let bool_of = |key: &str| map.get(key).and_then(Value::as_bool).unwrap_or(false);
        let u64_of = |key: &str| map.get(key).and_then(Value::as_u64);
        let f64_of = |key: &str| map.get(key).and_then(Value::as_f64);
        schema.kind = str_of("type");
        schema.int_or_string = bool_of("x-kubernetes-int-or-string");
        schema.nullable = bool_of("nullable");
        schema.format = str_of("format");
        schema.enumeration = map.get("enum").and_then(Value::as_array).cloned();
        if let Some(pattern) = str_of("pattern") {
            let compiled = RegexBuilder::new(&pattern)
                .size_limit(PATTERN_SIZE_LIMIT)
                .build()
                .map_err(|e| format!("pattern {pattern:?} does not compile: {e}"));
            if let Err(message) = &compiled {
                self.problem(path, message.clone(), Some("pattern"));
            }
            schema.pattern = Some((pattern, compiled));
        }
        schema.minimum = f64_of("minimum");
        schema.maximum = f64_of("maximum");
        schema.exclusive_minimum = bool_of("exclusiveMinimum");
        schema.exclusive_maximum = bool_of("exclusiveMaximum");
        schema.multiple_of = f64_of("multipleOf").filter(|m| *m > 0.0);
        schema.min_length = u64_of("minLength");
        schema.max_length = u64_of("maxLength");
        schema.min_items = u64_of("minItems");
        schema.max_items = u64_of("maxItems");
        schema.min_properties = u64_of("minProperties");
        schema.max_properties = u64_of("maxProperties");
        schema.unique_items = bool_of("uniqueItems");
        schema.required = map
            .get("required")
            .and_then(Value::as_array)
            .map(|r| {
                r.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        if let Some(properties) = map.get("properties").and_then(Value::as_object) {
            for (name, property) in properties {
                let child = self.compile(property, &child_path(path, name), depth + 1);
                schema.properties.insert(name.clone(), child);
            }
        }
        schema.additional = match map.get("additionalProperties") {
            Some(Value::Bool(true)) => Additional::Open,
            Some(sub @ Value::Object(_)) => Additional::Schema(Box::new(self.compile(
                sub,
                &format!("{path}[*]"),
                depth + 1,
            ))),
            _ => Additional::Closed,
        };
        if let Some(items) = map.get("items").filter(|i| i.is_object()) {
            schema.items = Some(Box::new(self.compile(
                items,
                &format!("{path}[*]"),
                depth + 1,
            )));
        }
        schema.preserve_unknown = bool_of("x-kubernetes-preserve-unknown-fields");
        schema.embedded = bool_of("x-kubernetes-embedded-resource");
        schema.list_type = match str_of("x-kubernetes-list-type").as_deref() {
            Some("set") => ListType::Set,
            Some("map") => ListType::Map(
                map.get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|k| {
                        k.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            _ => ListType::Atomic,
        };
        for (key, target) in [
            ("allOf", &mut schema.all_of),
            ("anyOf", &mut schema.any_of),
            ("oneOf", &mut schema.one_of),
        ] {
            if let Some(list) = map.get(key).and_then(Value::as_array) {
                *target = list
                    .iter()
                    .map(|s| self.compile(s, path, depth + 1))
                    .collect();
            }
        }
        if let Some(not) = map.get("not") {
            schema.not = Some(Box::new(self.compile(not, path, depth + 1)));
        }
        schema.default = map.get("default").cloned();
        if let Some(rules) = map
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
        {
            schema.rules = rules
                .iter()
                .filter_map(|rule| self.compile_rule(rule, path))
                .collect();
        }
        schema
    }

    fn compile_rule(&mut self, json: &Value, path: &str) -> Option<Rule> {
        let source = json.get("rule").and_then(Value::as_str)?.to_string();
        let text = |key: &str| {
            json.get(key)
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        let program = self.env.compile(&source).map_err(|e| {
            format!(
                "the rule does not compile: {} (at {}:{})",
                e.message, e.line, e.column
            )
        });
        let transition = match &program {
            Ok(p) => p.references().variables.contains("oldSelf"),
            // Unknown: a rule that mentions oldSelf is taken for a transition rule.
            Err(_) => source.contains("oldSelf"),
        };
        if let Err(message) = &program {
            self.problem(path, message.clone(), Some(&source));
        }
        let message_expression = match text("messageExpression") {
            Some(expression) => match self.env.compile(&expression) {
                Ok(p) => Some(p),
                Err(e) => {
                    self.problem(
                        path,
                        format!(
                            "the messageExpression {expression:?} does not compile: {} (at {}:{}); the message is used instead",
                            e.message, e.line, e.column
                        ),
                        Some(&source),
                    );
                    None
                }
            },
            None => None,
        };
        let field_path = match text("fieldPath") {
            Some(fp) => match parse_field_path(&fp) {
                Some(parts) => Some(parts),
                None => {
                    self.problem(
                        path,
                        format!("the fieldPath {fp:?} does not parse; violations are reported at the rule's node"),
                        Some(&source),
                    );
                    None
                }
            },
            None => None,
        };
        let reason = match json.get("reason").and_then(Value::as_str) {
            Some("FieldValueForbidden") => Reason::Forbidden,
            Some("FieldValueRequired") => Reason::Required,
            Some("FieldValueDuplicate") => Reason::Duplicate,
            _ => Reason::Invalid,
        };
        Some(Rule {
            source,
            program,
            message: text("message"),
            message_expression,
            field_path,
            reason,
            transition,
            optional_old_self: json
                .get("optionalOldSelf")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        })
    }
}

/// Parses a rule's `fieldPath`: `.a.b`, `.a['b.c']`, `.a[0]`, relative to the rule's node.
fn parse_field_path(text: &str) -> Option<Vec<PathPart>> {
    let mut parts = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let name = &after[..end];
            if name.is_empty() {
                return None;
            }
            parts.push(PathPart::Field(name.to_string()));
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let close = after.find(']')?;
            let inner = after[..close].trim();
            let quoted = inner
                .strip_prefix('\'')
                .and_then(|s| s.strip_suffix('\''))
                .or_else(|| inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')));
            match quoted {
                Some(key) => parts.push(PathPart::Key(key.to_string())),
                None => parts.push(PathPart::Index(inner.parse().ok()?)),
            }
            rest = &after[close + 1..];
        } else {
            return None;
        }
    }
    Some(parts)
}

/// Inserts the schema's defaults where a property is absent (or null and not nullable),
/// as the API server does before validating.
fn apply_defaults(schema: &Schema, value: &mut Value, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match value {
        Value::Object(map) => {
            for (name, property) in &schema.properties {
                if let Some(default) = &property.default {
                    let absent = match map.get(name) {
                        None => true,
                        Some(Value::Null) => !property.nullable,
                        Some(_) => false,
                    };
                    if absent {
                        map.insert(name.clone(), default.clone());
                    }
                }
            }
            for (name, child) in map.iter_mut() {
                if let Some(property) = schema.properties.get(name) {
                    apply_defaults(property, child, depth + 1);
                } else if let Additional::Schema(additional) = &schema.additional {
                    apply_defaults(additional, child, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = &schema.items {
                for item in items {
                    apply_defaults(item_schema, item, depth + 1);
                }
            }
        }
        _ => {}
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The object itself: `apiVersion`, `kind` and `metadata` are always allowed, and
    /// `metadata` is checked by [`check_metadata`], not by the schema.
    Root,
    Normal,
    /// Inside `anyOf`, `oneOf`, `not`: value validations only (no unknown fields, no
    /// rules), counted rather than reported one by one.
    Probe,
}

/// A rule to evaluate once the schema walk is done.
struct Pending<'a> {
    rule: &'a Rule,
    path: String,
    value: &'a Value,
    type_name: &'static str,
}

struct Walk<'a> {
    env: &'a Env,
    out: Vec<Violation>,
    /// A type or enum error was found: rules are not evaluated (as Kubernetes).
    blocking: bool,
    pending: Vec<Pending<'a>>,
}

fn violation(path: &str, message: String, rule: &str) -> Violation {
    Violation {
        path: path.to_string(),
        message,
        rule: Some(rule.to_string()),
    }
}

impl<'a> Walk<'a> {
    /// Checks `value` against `schema`, appending to `out`.
    fn node(
        &mut self,
        schema: &'a Schema,
        value: &'a Value,
        path: &str,
        depth: usize,
        mode: Mode,
        out: &mut Vec<Violation>,
    ) {
        if depth > MAX_DEPTH {
            out.push(violation(
                path,
                format!("Invalid value: nested more than {MAX_DEPTH} levels deep"),
                "depth",
            ));
            return;
        }
        let expected = expected_type(schema);
        if value.is_null() {
            if !schema.nullable
                && let Some(expected) = expected
            {
                self.type_error(path, expected, "null", mode, out);
            }
            return;
        }
        let actual = json_type(value);
        if let Some(expected) = expected
            && !type_matches(schema, value)
        {
            self.type_error(path, expected, actual, mode, out);
            return;
        }
        if let Some(allowed) = &schema.enumeration
            && !allowed.iter().any(|a| json_equal(a, value))
        {
            let supported: Vec<String> = allowed
                .iter()
                .map(|a| match a {
                    Value::String(s) => quote(s),
                    other => quote(&other.to_string()),
                })
                .collect();
            out.push(violation(
                path,
                format!(
                    "Unsupported value: {}: supported values: {}",
                    show(value),
                    supported.join(", ")
                ),
                "enum",
            ));
            if mode != Mode::Probe {
                self.blocking = true;
            }
        }
        match value {
            Value::String(s) => string_checks(schema, s, value, path, out),
            Value::Number(_) => number_checks(schema, value, path, out),
            Value::Array(items) => self.array(schema, items, path, depth, mode, out),
            Value::Object(map) => self.object(schema, map, path, depth, mode, out),
            _ => {}
        }
        for sub in &schema.all_of {
            self.node(sub, value, path, depth + 1, Mode::Probe, out);
        }
        if !schema.any_of.is_empty()
            && !schema
                .any_of
                .iter()
                .any(|sub| self.passes(sub, value, path, depth))
        {
            out.push(violation(
                path,
                format!(
                    "Invalid value: {}: {} in body must validate at least one schema (anyOf)",
                    show(value),
                    body_name(path)
                ),
                "anyOf",
            ));
        }
        if !schema.one_of.is_empty() {
            let passing = schema
                .one_of
                .iter()
                .filter(|sub| self.passes(sub, value, path, depth))
                .count();
            if passing != 1 {
                out.push(violation(
                    path,
                    format!(
                        "Invalid value: {}: {} in body must validate one and only one schema (oneOf)",
                        show(value),
                        body_name(path)
                    ),
                    "oneOf",
                ));
            }
        }
        if let Some(not) = &schema.not
            && self.passes(not, value, path, depth)
        {
            out.push(violation(
                path,
                format!(
                    "Invalid value: {}: {} in body must not validate the schema (not)",
                    show(value),
                    body_name(path)
                ),
                "not",
            ));
        }
        if mode != Mode::Probe {
            for rule in &schema.rules {
                self.pending.push(Pending {
                    rule,
                    path: path.to_string(),
                    value,
                    type_name: schema_type_name(schema),
                });
            }
        }
    }

    /// Whether `value` passes the value validations of `schema` (`anyOf` and friends).
    fn passes(&mut self, schema: &'a Schema, value: &'a Value, path: &str, depth: usize) -> bool {
        let mut probe = Vec::new();
        self.node(schema, value, path, depth + 1, Mode::Probe, &mut probe);
        probe.is_empty()
    }

    fn type_error(
        &mut self,
        path: &str,
        expected: &str,
        actual: &str,
        mode: Mode,
        out: &mut Vec<Violation>,
    ) {
        out.push(type_violation(path, expected, actual));
        if mode != Mode::Probe {
            self.blocking = true;
        }
    }

    fn array(
        &mut self,
        schema: &'a Schema,
        items: &'a [Value],
        path: &str,
        depth: usize,
        mode: Mode,
        out: &mut Vec<Violation>,
    ) {
        let len = items.len() as u64;
        if let Some(min) = schema.min_items
            && len < min
        {
            out.push(violation(
                path,
                format!(
                    "Invalid value: {len}: {} in body should have at least {min} items",
                    body_name(path)
                ),
                "minItems",
            ));
        }
        if let Some(max) = schema.max_items
            && len > max
        {
            out.push(violation(
                path,
                format!(
                    "Too many: {len}: must have at most {max} {}",
                    plural(max, "item")
                ),
                "maxItems",
            ));
        }
        let keyword = match (&schema.list_type, schema.unique_items) {
            (ListType::Set, _) => Some("x-kubernetes-list-type"),
            (_, true) => Some("uniqueItems"),
            _ => None,
        };
        if let Some(keyword) = keyword {
            let mut seen = HashSet::new();
            for (i, item) in items.iter().enumerate() {
                if !seen.insert(canonical(item)) {
                    out.push(violation(
                        &format!("{path}[{i}]"),
                        format!("Duplicate value: {}", show(item)),
                        keyword,
                    ));
                }
            }
        }
        if let ListType::Map(keys) = &schema.list_type
            && !keys.is_empty()
        {
            let mut seen = HashSet::new();
            for (i, item) in items.iter().enumerate() {
                let Some(entry) = item.as_object() else {
                    continue;
                };
                let key: Map<String, Value> = keys
                    .iter()
                    .filter_map(|k| entry.get(k).map(|v| (k.clone(), v.clone())))
                    .collect();
                let key = Value::Object(key);
                if !seen.insert(canonical(&key)) {
                    out.push(violation(
                        &format!("{path}[{i}]"),
                        format!("Duplicate value: {}", show(&key)),
                        "x-kubernetes-list-map-keys",
                    ));
                }
            }
        }
        if let Some(item_schema) = &schema.items {
            let child_mode = if mode == Mode::Probe {
                Mode::Probe
            } else {
                Mode::Normal
            };
            for (i, item) in items.iter().enumerate() {
                self.node(
                    item_schema,
                    item,
                    &format!("{path}[{i}]"),
                    depth + 1,
                    child_mode,
                    out,
                );
            }
        }
    }

    fn object(
        &mut self,
        schema: &'a Schema,
        map: &'a Map<String, Value>,
        path: &str,
        depth: usize,
        mode: Mode,
        out: &mut Vec<Violation>,
    ) {
        // The API server drops a null in a field that is not nullable before validating.
        let present = |name: &str, property: Option<&Schema>| match map.get(name) {
            None => false,
            Some(Value::Null) => property.is_some_and(|p| p.nullable),
            Some(_) => true,
        };
        let count = map
            .iter()
            .filter(|(k, _)| present(k, schema.properties.get(k.as_str())))
            .count() as u64;
        if let Some(min) = schema.min_properties
            && count < min
        {
            out.push(violation(
                path,
                format!(
                    "Invalid value: {count}: {} in body should have at least {min} properties",
                    body_name(path)
                ),
                "minProperties",
            ));
        }
        if let Some(max) = schema.max_properties
            && count > max
        {
            out.push(violation(
                path,
                format!(
                    "Too many: {count}: must have at most {max} {}",
                    plural(max, "item")
                ),
                "maxProperties",
            ));
        }
        for name in &schema.required {
            if !present(name, schema.properties.get(name)) {
                out.push(violation(
                    &child_path(path, name),
                    "Required value".to_string(),
                    "required",
                ));
            }
        }
        let envelope = mode == Mode::Root || schema.embedded;
        if schema.embedded && mode != Mode::Probe {
            for field in ["apiVersion", "kind"] {
                let empty = map
                    .get(field)
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty);
                if empty {
                    out.push(violation(
                        &child_path(path, field),
                        "Required value: must not be empty".to_string(),
                        "x-kubernetes-embedded-resource",
                    ));
                }
            }
            if let Some(metadata) = map.get("metadata") {
                let mut wrapper = Map::new();
                wrapper.insert("metadata".to_string(), metadata.clone());
                check_metadata(&Value::Object(wrapper), path, out);
            }
        }
        let child_mode = if mode == Mode::Probe {
            Mode::Probe
        } else {
            Mode::Normal
        };
        for (name, child) in map {
            let child_path = if schema.properties.contains_key(name) {
                child_path(path, name)
            } else {
                format!("{path}[{name}]")
            };
            if envelope && name == "metadata" {
                // ObjectMeta is the API server's, not the schema's: checked by
                // check_metadata (labels, annotations). A CRD may only restrict `name`
                // and `generateName`, which are checked here.
                if let (Some(meta_schema), Some(meta)) =
                    (schema.properties.get(name), child.as_object())
                {
                    for field in ["name", "generateName"] {
                        if let (Some(field_schema), Some(value)) =
                            (meta_schema.properties.get(field), meta.get(field))
                        {
                            self.node(
                                field_schema,
                                value,
                                &self::child_path(&child_path, field),
                                depth + 2,
                                child_mode,
                                out,
                            );
                        }
                    }
                }
                continue;
            }
            if let Some(property) = schema.properties.get(name) {
                if child.is_null() && !property.nullable {
                    continue;
                }
                self.node(property, child, &child_path, depth + 1, child_mode, out);
                continue;
            }
            match &schema.additional {
                Additional::Schema(additional) => {
                    if child.is_null() && !additional.nullable {
                        continue;
                    }
                    self.node(additional, child, &child_path, depth + 1, child_mode, out);
                }
                Additional::Open => {}
                Additional::Closed => {
                    // An untyped node is a value validation (or not structural): it
                    // declares no fields of its own.
                    let allowed = schema.preserve_unknown
                        || (envelope && (name == "apiVersion" || name == "kind"))
                        || mode == Mode::Probe
                        || schema.kind.is_none();
                    if !allowed {
                        out.push(violation(
                            &self::child_path(path, name),
                            "field not declared in schema".to_string(),
                            "properties",
                        ));
                    }
                }
            }
        }
    }

    /// Evaluates the rules the walk found, unless a type or enum error blocks them.
    fn run_rules(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        if self.blocking {
            self.out.push(Violation {
                path: String::new(),
                message: "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".to_string(),
                rule: None,
            });
            return;
        }
        let mut remaining = CEL_COST_BUDGET;
        let per_call = self.env.limits().per_expression;
        let pending = std::mem::take(&mut self.pending);
        for p in pending {
            let rule = p.rule;
            if rule.transition && !rule.optional_old_self {
                continue;
            }
            let path = match &rule.field_path {
                Some(parts) => extend_path(&p.path, parts),
                None => p.path.clone(),
            };
            let program = match &rule.program {
                Ok(program) => program,
                Err(message) => {
                    self.out.push(rule_violation(
                        &path,
                        p.type_name,
                        message.clone(),
                        Reason::Invalid,
                        rule,
                    ));
                    continue;
                }
            };
            let mut activation = Activation::new(self.env);
            activation.bind("self", CelValue::from_json(p.value));
            if rule.optional_old_self {
                activation.bind("oldSelf", CelValue::Optional(None));
            }
            let budget = per_call.min(remaining);
            activation.with_budget(budget);
            match program.eval_with_cost(&activation) {
                Ok((value, cost)) => {
                    remaining = remaining.saturating_sub(cost);
                    match value {
                        CelValue::Bool(true) => {}
                        CelValue::Bool(false) => {
                            let message = self.failure_message(rule, &activation, &mut remaining);
                            self.out.push(rule_violation(
                                &path,
                                p.type_name,
                                message,
                                rule.reason,
                                rule,
                            ));
                        }
                        other => self.out.push(rule_violation(
                            &path,
                            p.type_name,
                            format!(
                                "rule did not evaluate to a bool but to a {}: {}",
                                other.type_name(),
                                rule_error_string(rule)
                            ),
                            Reason::Invalid,
                            rule,
                        )),
                    }
                }
                Err(error) if error.message.starts_with("cost limit exceeded") => {
                    if budget < per_call {
                        self.out.push(rule_violation(
                            &path,
                            p.type_name,
                            "validation failed due to running out of cost budget, no further validation rules will be run".to_string(),
                            Reason::Invalid,
                            rule,
                        ));
                        return;
                    }
                    remaining = remaining.saturating_sub(budget);
                    self.out.push(rule_violation(
                        &path,
                        p.type_name,
                        format!(
                            "call cost exceeds limit for rule: {}",
                            rule_error_string(rule)
                        ),
                        Reason::Invalid,
                        rule,
                    ));
                }
                Err(error) => self.out.push(rule_violation(
                    &path,
                    p.type_name,
                    format!(
                        "{} evaluating rule: {}",
                        error.message,
                        rule_error_string(rule)
                    ),
                    Reason::Invalid,
                    rule,
                )),
            }
        }
    }

    /// The message of a failed rule: its `messageExpression` when that gives a usable
    /// string, else its `message`, else `failed rule: <rule>` (as Kubernetes).
    fn failure_message(&self, rule: &Rule, activation: &Activation, remaining: &mut u64) -> String {
        if let Some(expression) = &rule.message_expression
            && *remaining > 0
            && let Ok((value, cost)) = expression.eval_with_cost(activation)
        {
            *remaining = remaining.saturating_sub(cost);
            if let CelValue::String(text) = value {
                let text = text.trim();
                if !text.is_empty()
                    && !text.contains(['\n', '\r'])
                    && text.chars().count() <= MAX_MESSAGE_EXPRESSION_CHARS
                {
                    return text.to_string();
                }
            }
        }
        match &rule.message {
            Some(message) => message.clone(),
            None => format!("failed rule: {}", rule.source.trim()),
        }
    }
}

fn rule_violation(
    path: &str,
    type_name: &str,
    message: String,
    reason: Reason,
    rule: &Rule,
) -> Violation {
    let message = match reason {
        Reason::Invalid => format!("Invalid value: {}: {message}", quote(type_name)),
        Reason::Forbidden => format!("Forbidden: {message}"),
        Reason::Required => format!("Required value: {message}"),
        // Kubernetes prints only the type here; the message says which rule.
        Reason::Duplicate => format!("Duplicate value: {}: {message}", quote(type_name)),
    };
    Violation {
        path: path.to_string(),
        message,
        rule: Some(rule.source.clone()),
    }
}

/// How Kubernetes names a rule in evaluation errors: its message, else its source.
fn rule_error_string(rule: &Rule) -> String {
    rule.message
        .clone()
        .unwrap_or_else(|| rule.source.trim().to_string())
}

fn extend_path(base: &str, parts: &[PathPart]) -> String {
    let mut path = base.to_string();
    for part in parts {
        path = match part {
            PathPart::Field(name) => child_path(&path, name),
            PathPart::Key(key) => format!("{path}[{key}]"),
            PathPart::Index(i) => format!("{path}[{i}]"),
        };
    }
    path
}

fn child_path(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

/// The field as kube-openapi names it in `... in body ...` messages.
fn body_name(path: &str) -> &str {
    if path.is_empty() { "." } else { path }
}

fn plural(n: u64, word: &str) -> String {
    if n == 1 {
        word.to_string()
    } else {
        format!("{word}s")
    }
}

/// The type the schema requires, as kube-openapi names it, if any.
fn expected_type(schema: &Schema) -> Option<&str> {
    if schema.int_or_string {
        Some("integer,string")
    } else {
        schema.kind.as_deref().filter(|k| !k.is_empty())
    }
}

/// The schema type Kubernetes shows as the value of a failed rule (`Invalid value:
/// "object"`).
fn schema_type_name(schema: &Schema) -> &'static str {
    match schema.kind.as_deref() {
        Some("object") => "object",
        Some("array") => "array",
        Some("string") => "string",
        Some("integer") => "integer",
        Some("number") => "number",
        Some("boolean") => "boolean",
        _ => "",
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_integer(value: &Value) -> bool {
    match value {
        Value::Number(n) => {
            n.is_i64()
                || n.is_u64()
                || n.as_f64()
                    .is_some_and(|f| f.fract() == 0.0 && f.is_finite())
        }
        _ => false,
    }
}

fn type_matches(schema: &Schema, value: &Value) -> bool {
    if schema.int_or_string {
        return value.is_string() || is_integer(value);
    }
    match schema.kind.as_deref() {
        Some("object") => value.is_object(),
        Some("array") => value.is_array(),
        Some("string") => value.is_string(),
        // A float without a fraction is an integer, as for kube-openapi.
        Some("integer") => is_integer(value),
        Some("number") => value.is_number(),
        Some("boolean") => value.is_boolean(),
        _ => true,
    }
}

fn type_violation(path: &str, expected: &str, actual: &str) -> Violation {
    violation(
        path,
        format!(
            "Invalid value: {}: {} in body must be of type {expected}: {}",
            quote(actual),
            body_name(path),
            quote(actual)
        ),
        "type",
    )
}

fn string_checks(schema: &Schema, s: &str, value: &Value, path: &str, out: &mut Vec<Violation>) {
    let chars = s.chars().count() as u64;
    if let Some(min) = schema.min_length
        && chars < min
    {
        out.push(violation(
            path,
            format!(
                "Invalid value: {}: {} in body should be at least {min} chars long",
                show(value),
                body_name(path)
            ),
            "minLength",
        ));
    }
    if let Some(max) = schema.max_length
        && chars > max
    {
        out.push(violation(
            path,
            format!(
                "Too long: may not be more than {max} {}",
                plural(max, "character")
            ),
            "maxLength",
        ));
    }
    if let Some((pattern, compiled)) = &schema.pattern {
        match compiled {
            Ok(regex) if !regex.is_match(s) => out.push(violation(
                path,
                format!(
                    "Invalid value: {}: {} in body should match '{pattern}'",
                    show(value),
                    body_name(path)
                ),
                "pattern",
            )),
            Ok(_) => {}
            Err(message) => out.push(violation(
                path,
                format!("Invalid value: {}: {message}", show(value)),
                "pattern",
            )),
        }
    }
    if let Some(format) = &schema.format
        && !format_ok(format, s)
    {
        out.push(violation(
            path,
            format!(
                "Invalid value: {}: {} in body must be of type {format}: {}",
                show(value),
                body_name(path),
                quote(s)
            ),
            "format",
        ));
    }
}

/// The string formats checked (Kubernetes' strfmt names); others pass.
fn format_ok(format: &str, s: &str) -> bool {
    match format {
        "date-time" | "datetime" => {
            chrono::DateTime::parse_from_rfc3339(s).is_ok()
                || chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f").is_ok()
        }
        "date" => chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok(),
        "byte" => is_base64(s),
        "uuid" => is_uuid(s),
        "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => is_cidr(s),
        _ => true,
    }
}

/// Standard base64 with padding, as Go's `base64.StdEncoding` decodes it.
fn is_base64(s: &str) -> bool {
    let bytes = s.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return false;
    }
    let padding = bytes.iter().rev().take_while(|b| **b == b'=').count();
    padding <= 2
        && bytes[..bytes.len() - padding]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/')
}

fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn is_cidr(s: &str) -> bool {
    let Some((addr, prefix)) = s.split_once('/') else {
        return false;
    };
    let Ok(prefix) = prefix.parse::<u8>() else {
        return false;
    };
    match addr.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => prefix <= 32,
        Ok(std::net::IpAddr::V6(_)) => prefix <= 128,
        Err(_) => false,
    }
}

fn number_checks(schema: &Schema, value: &Value, path: &str, out: &mut Vec<Violation>) {
    let Some(n) = value.as_f64() else {
        return;
    };
    let name = body_name(path);
    if let Some(min) = schema.minimum {
        let (fails, keyword, relation) = if schema.exclusive_minimum {
            (n <= min, "exclusiveMinimum", "greater than")
        } else {
            (n < min, "minimum", "greater than or equal to")
        };
        if fails {
            out.push(violation(
                path,
                format!(
                    "Invalid value: {}: {name} in body should be {relation} {}",
                    show(value),
                    show_f64(min)
                ),
                keyword,
            ));
        }
    }
    if let Some(max) = schema.maximum {
        let (fails, keyword, relation) = if schema.exclusive_maximum {
            (n >= max, "exclusiveMaximum", "less than")
        } else {
            (n > max, "maximum", "less than or equal to")
        };
        if fails {
            out.push(violation(
                path,
                format!(
                    "Invalid value: {}: {name} in body should be {relation} {}",
                    show(value),
                    show_f64(max)
                ),
                keyword,
            ));
        }
    }
    if let Some(factor) = schema.multiple_of {
        let quotient = n / factor;
        if (quotient - quotient.round()).abs() > 1e-9 {
            out.push(violation(
                path,
                format!(
                    "Invalid value: {}: {name} in body should be a multiple of {}",
                    show(value),
                    show_f64(factor)
                ),
                "multipleOf",
            ));
        }
    }
    let in_range = match (schema.format.as_deref(), value) {
        (Some("int32"), Value::Number(num)) if is_integer(value) => match num.as_i64() {
            Some(i) => i32::try_from(i).is_ok(),
            None => num
                .as_f64()
                .is_some_and(|f| f >= f64::from(i32::MIN) && f <= f64::from(i32::MAX)),
        },
        (Some("int64"), Value::Number(num)) if is_integer(value) => {
            num.is_i64() || (!num.is_u64() && num.as_f64().is_some_and(|f| f.abs() < 9.2e18))
        }
        _ => true,
    };
    if !in_range {
        let format = schema.format.as_deref().unwrap_or_default();
        out.push(violation(
            path,
            format!(
                "Invalid value: {}: {name} in body must be of type {format}: {}",
                show(value),
                quote(&value.to_string())
            ),
            "format",
        ));
    }
}

/// A number as Go's `%v` prints a float64 that holds an integer: without a fraction.
fn show_f64(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        n.to_string()
    }
}

/// A value in a message: strings quoted, numbers and booleans as they are, lists and maps
/// as (shortened) JSON.
fn show(value: &Value) -> String {
    match value {
        Value::String(s) => quote(s),
        Value::Array(_) | Value::Object(_) => {
            let text = value.to_string();
            if text.chars().count() > 200 {
                let short: String = text.chars().take(200).collect();
                format!("{short}...")
            } else {
                text
            }
        }
        other => other.to_string(),
    }
}

/// A string quoted as Go's `%q` does for printable text.
fn quote(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

/// Equality as JSON values, numbers by value (`1` equals `1.0`).
fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_equal(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

/// A string equal for equal values (map keys sorted, integral floats as integers), to
/// find duplicates with a hash set.
fn canonical(value: &Value) -> String {
    match value {
        Value::Number(n) => match n.as_f64() {
            Some(f) if !n.is_i64() && !n.is_u64() && f.fract() == 0.0 && f.abs() < 9.0e15 => {
                format!("{}", f as i64)
            }
            _ => n.to_string(),
        },
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(canonical).collect();
            format!("[{}]", parts.join(","))
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let parts: Vec<String> = entries
                .iter()
                .map(|(k, v)| format!("{}:{}", quote(k), canonical(v)))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        other => other.to_string(),
    }
}

/// Kubernetes' checks of `metadata.labels` and `metadata.annotations` (`ValidateLabels`,
/// `ValidateAnnotations`) on the object at `base` (empty: the object itself).
fn check_metadata(object: &Value, base: &str, out: &mut Vec<Violation>) {
    let Some(metadata) = object.get("metadata") else {
        return;
    };
    let metadata_path = child_path(base, "metadata");
    if metadata.is_null() {
        return;
    }
    let Some(metadata) = metadata.as_object() else {
        out.push(type_violation(
            &metadata_path,
            "object",
            json_type(metadata),
        ));
        return;
    };
    if let Some(labels) = metadata.get("labels").filter(|l| !l.is_null()) {
        let path = child_path(&metadata_path, "labels");
        match labels.as_object() {
            None => out.push(type_violation(&path, "object", json_type(labels))),
            Some(labels) => {
                for (key, value) in labels {
                    for message in qualified_name_errors(key) {
                        out.push(violation(
                            &path,
                            format!("Invalid value: {}: {message}", quote(key)),
                            "label key",
                        ));
                    }
                    // Formatted only for a violation: every output passes through here.
                    let value_path = || format!("{path}[{key}]");
                    match value {
                        Value::String(v) => {
                            for message in label_value_errors(v) {
                                out.push(violation(
                                    &value_path(),
                                    format!("Invalid value: {}: {message}", quote(v)),
                                    "label value",
                                ));
                            }
                        }
                        other => {
                            out.push(type_violation(&value_path(), "string", json_type(other)))
                        }
                    }
                }
            }
        }
    }
    if let Some(annotations) = metadata.get("annotations").filter(|a| !a.is_null()) {
        let path = child_path(&metadata_path, "annotations");
        match annotations.as_object() {
            None => out.push(type_violation(&path, "object", json_type(annotations))),
            Some(annotations) => {
                let mut total = 0usize;
                for (key, value) in annotations {
                    total = total.saturating_add(key.len());
                    let lowered;
                    let key_checked = if key.chars().any(|c| c.is_ascii_uppercase()) {
                        lowered = key.to_lowercase();
                        lowered.as_str()
                    } else {
                        key.as_str()
                    };
                    for message in qualified_name_errors(key_checked) {
                        out.push(violation(
                            &path,
                            format!("Invalid value: {}: {message}", quote(key)),
                            "annotation key",
                        ));
                    }
                    match value {
                        Value::String(v) => total = total.saturating_add(v.len()),
                        other => out.push(type_violation(
                            &format!("{path}[{key}]"),
                            "string",
                            json_type(other),
                        )),
                    }
                }
                if total > TOTAL_ANNOTATION_SIZE {
                    out.push(violation(
                        &path,
                        format!("Too long: may not be more than {TOTAL_ANNOTATION_SIZE} bytes"),
                        "annotations size",
                    ));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_formats() {
        assert!(format_ok("byte", "aGk="));
        assert!(format_ok("byte", ""));
        assert!(!format_ok("byte", "aGk"));
        assert!(!format_ok("byte", "a=Gk"));
        assert!(format_ok("date-time", "2026-01-01T00:00:00.5+01:00"));
        assert!(!format_ok("date-time", "2026-01-01"));
        assert!(format_ok("date", "2026-02-28"));
        assert!(!format_ok("date", "2026-02-30"));
        assert!(format_ok("uuid", "123e4567-e89b-12d3-a456-426614174000"));
        assert!(!format_ok("uuid", "123e4567e89b12d3a456426614174000"));
        assert!(format_ok("cidr", "10.0.0.0/8"));
        assert!(format_ok("cidr", "fd00::/64"));
        assert!(!format_ok("cidr", "10.0.0.0/33"));
        assert!(!format_ok("cidr", "10.0.0.0"));
        assert!(format_ok("ipv4", "10.1.2.3"));
        assert!(!format_ok("ipv6", "10.1.2.3"));
        assert!(format_ok("idn-hostname", "anything at all"));
    }

    #[test]
    fn field_paths() {
        let shown = |text: &str| parse_field_path(text).map(|parts| extend_path("spec", &parts));
        assert_eq!(shown(".a.b").as_deref(), Some("spec.a.b"));
        assert_eq!(shown(".a['x.y'][2]").as_deref(), Some("spec.a[x.y][2]"));
        assert_eq!(shown("[\"k\"]").as_deref(), Some("spec[k]"));
        assert_eq!(shown("a.b"), None);
        assert_eq!(shown(".a["), None);
        assert_eq!(shown(".a[x]"), None);
    }

    #[test]
    fn duplicates_compare_numbers_by_value_and_maps_by_content() {
        assert_eq!(
            canonical(&serde_json::json!(1.0)),
            canonical(&serde_json::json!(1))
        );
        assert_eq!(
            canonical(&serde_json::json!({"b": 1, "a": [2.0]})),
            canonical(&serde_json::json!({"a": [2], "b": 1}))
        );
        assert!(json_equal(&serde_json::json!(1), &serde_json::json!(1.0)));
        assert!(!json_equal(&serde_json::json!("1"), &serde_json::json!(1)));
    }
}
