//! OpenAPI v3 schemas (of CustomResourceDefinitions) to checker types, after Kubernetes'
//! `SchemaDeclType` (`k8s.io/apiserver/pkg/cel/common/schemas.go`), with the departures
//! Switchyard's JSON values need (see [`type_from_openapi`]).

use serde_json::Value as Json;

use super::types::{Bounds, ObjectType, Type};

/// Converts an OpenAPI v3 schema (a CRD version's `schema.openAPIV3Schema`, as JSON) into a
/// [`Type`]; `type_name` names its object types in messages (nested ones get the path:
/// `Name.spec.template`, `Name.spec.ports.@idx` for list items, `Name.spec.labels.@elem`
/// for map values).
///
/// As in Kubernetes:
/// - `type: object` with `properties` is an [`Object`](Type::Object) whose fields are the
///   properties: selecting any other field is an error;
/// - `type: object` with an `additionalProperties` schema is `map(string, T)`;
/// - `type: array` is `list(T)`; `integer` is `int`, `boolean` is `bool`, `string` is
///   `string`;
/// - `x-kubernetes-int-or-string` is `dyn`;
/// - an `x-kubernetes-embedded-resource` object has `apiVersion`, `kind` and `metadata`
///   (the full `ObjectMeta` here, see below).
///
/// Unlike Kubernetes, whose rules validate the object as the API server decoded it,
/// Switchyard's values are the object's JSON:
/// - `x-kubernetes-preserve-unknown-fields` makes the object [`open`](ObjectType::open):
///   undeclared fields are `dyn` (Kubernetes hides them from rules);
/// - `additionalProperties: true`, or a schema without a type (other than an object with
///   properties), is `map(string, dyn)` or `dyn` (Kubernetes hides such fields);
/// - strings are `string` whatever their `format`: `date-time`, `date`, `duration` and
///   `byte` values stay strings (Kubernetes makes them `timestamp`, `duration`, `bytes`);
/// - `number` is `dyn`: a JSON number without a fraction is an `int` (Kubernetes: `double`);
/// - `type: object` without properties, additional properties or preserved fields is a
///   closed object without fields, as Kubernetes prunes every field of it.
///
/// `nullable` does not change the type: comparing any value with `null` is allowed.
///
/// Object types keep the size bounds of their fields ([`ObjectType::bounds`], see
/// [`bounded_type_from_openapi`]); [`bounded_type_from_openapi`] also gives the bounds of
/// the schema itself.
pub fn type_from_openapi(schema: &Json, type_name: &str) -> Type {
    convert(schema, type_name, false)
}

/// [`type_from_openapi`], with the size bounds the schema declares, which
/// [`super::estimate_cost`] reads:
/// - `maxItems` bounds a list, `maxProperties` a map or an object (a closed object has at
///   most its declared fields);
/// - a string is bounded, in bytes, by the smallest of: `maxLength` × 4 (`maxLength` counts
///   characters, of up to 4 bytes each in UTF-8; × 1 for `format: byte`, whose values are
///   base64), the longest `enum` value, its `format` (`date`: 10 bytes, `date-time`: 35,
///   `uuid`: 36), and an anchored `pattern` that repeats nothing without bound
///   (`^[a-z]{1,63}$`: 63 characters, × 4);
/// - the same for the string form of an `x-kubernetes-int-or-string` value.
///
/// The bounds of nested fields are in their object types ([`ObjectType::bounds`]); those
/// of list elements and map values in [`Bounds::elements`].
pub fn bounded_type_from_openapi(schema: &Json, type_name: &str) -> (Type, Bounds) {
    convert_bounded(schema, type_name, false)
}

/// The object type of a CRD kind at `version`: `apiVersion`, `kind`, `metadata` (the
/// standard `ObjectMeta`: [`object_meta`]) and the fields of the version's schema (`spec`,
/// `status`, ...). `None` when the document is not a CRD with that version.
///
/// Reads `spec.versions[].schema.openAPIV3Schema` (`apiextensions.k8s.io/v1`), or the
/// top-level `spec.validation.openAPIV3Schema` of a `v1beta1` CRD. A version without a
/// schema is an open object (its fields are `dyn`).
pub fn object_type_from_crd(crd: &Json, version: &str) -> Option<Type> {
    let spec = crd.get("spec")?;
    let kind = spec.get("names")?.get("kind")?.as_str()?;
    let versions = spec.get("versions").and_then(Json::as_array);
    let entry = match versions {
        Some(versions) => Some(
            versions
                .iter()
                .find(|v| v.get("name").and_then(Json::as_str) == Some(version))?,
        ),
        None if spec.get("version").and_then(Json::as_str) == Some(version) => None,
        None => return None,
    };
    let schema = entry
        .and_then(|v| v.get("schema"))
        .and_then(|s| s.get("openAPIV3Schema"))
        .or_else(|| spec.get("validation")?.get("openAPIV3Schema"));
    let object = match schema {
        Some(schema) => convert(schema, kind, true),
        None => object_type_without_schema(kind),
    };
    Some(match object {
        Type::Object(o) => {
            Type::object(ObjectType::clone(&o).with_field("metadata", custom_resource_meta()))
        }
        other => other,
    })
}

/// The type of a kind without a schema (a built-in kind, or one whose CRD is not given):
/// `apiVersion`, `kind` and `metadata` ([`object_meta`]) are typed, any other field is
/// `dyn`.
pub fn object_type_without_schema(kind: &str) -> Type {
    resource_object(ObjectType::new(kind).open())
}

/// [`object_type_without_schema`] of a custom resource whose CRD is not given (a kind
/// Kubernetes does not serve itself): its `name` is a DNS subdomain, at most 253 bytes, as the
/// API server requires of every custom resource ([`custom_resource_meta`]).
pub fn custom_object_without_schema(kind: &str) -> Type {
    Type::object(
        ObjectType::new(kind)
            .open()
            .with_field("apiVersion", Type::String)
            .with_field("kind", Type::String)
            .with_field("metadata", custom_resource_meta()),
    )
}

/// A kind a CRD serves: `apiVersion` is `group/version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrdKind {
    pub group: String,
    pub version: String,
    pub kind: String,
}

impl CrdKind {
    /// `group/version` (`version` alone for the core group).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// The kinds a CRD document defines: one per version. Empty when it is not a CRD.
pub fn crd_kinds(crd: &Json) -> Vec<CrdKind> {
    let Some(spec) = crd.get("spec") else {
        return Vec::new();
    };
    let group = spec.get("group").and_then(Json::as_str).unwrap_or_default();
    let Some(kind) = spec
        .get("names")
        .and_then(|n| n.get("kind"))
        .and_then(Json::as_str)
    else {
        return Vec::new();
    };
    let names: Vec<&str> = match spec.get("versions").and_then(Json::as_array) {
        Some(versions) => versions
            .iter()
            .filter_map(|v| v.get("name").and_then(Json::as_str))
            .collect(),
        None => spec
            .get("version")
            .and_then(Json::as_str)
            .into_iter()
            .collect(),
    };
    names
        .into_iter()
        .map(|version| CrdKind {
            group: group.to_string(),
            version: version.to_string(),
            kind: kind.to_string(),
        })
        .collect()
}

/// The object type of `kind` at `api_version` (`group/version`) among `crds`, if one of
/// them defines it.
pub fn object_type_for_kind(crds: &[Json], api_version: &str, kind: &str) -> Option<Type> {
    crds.iter().find_map(|crd| {
        let found = crd_kinds(crd)
            .into_iter()
            .find(|k| k.kind == kind && k.api_version() == api_version)?;
        object_type_from_crd(crd, &found.version)
    })
}

/// The standard `metadata` of a Kubernetes object (`ObjectMeta`), closed: `name`,
/// `generateName`, `namespace`, `selfLink`, `uid`, `resourceVersion`, `creationTimestamp`,
/// `deletionTimestamp` (strings, as in JSON), `generation`, `deletionGracePeriodSeconds`
/// (`int`), `labels`, `annotations` (`map(string, string)`), `finalizers`
/// (`list(string)`), `ownerReferences` (a list of `OwnerReference`: `apiVersion`, `kind`,
/// `name`, `uid`, `controller`, `blockOwnerDeletion`) and `managedFields` (`list(dyn)`).
///
/// With the size bounds the API server enforces on every object (see [`Bounds`]):
/// `namespace` is a DNS label (63 bytes), label keys and annotation keys and finalizers
/// are qualified names (317 bytes: a 253-byte DNS subdomain prefix, `/`, a 63-byte name),
/// label values at most 63 bytes, `uid` a UUID (36 bytes), the timestamps RFC 3339 in
/// seconds (20 bytes), annotations 256 KiB in all (so each value, and their number).
/// `name` is not bounded: most kinds require a DNS subdomain (253 bytes), but not every
/// kind does. The number of labels and finalizers is not bounded.
pub fn object_meta() -> Type {
    meta(None)
}

/// [`object_meta`] of a custom resource: the API server requires its `name` (and
/// `generateName`) to be a DNS subdomain, at most 253 bytes, as Kubernetes' CEL cost
/// estimator for CRDs assumes.
pub fn custom_resource_meta() -> Type {
    meta(Some(253))
}

fn meta(name_bytes: Option<u64>) -> Type {
    let name_bounds = || name_bytes.map(Bounds::max).unwrap_or_default();
    let owner_reference = ObjectType::new("OwnerReference")
        .with_field("apiVersion", Type::String)
        .with_field("kind", Type::String)
        .with_field("name", Type::String)
        .with_field("uid", Type::String)
        .with_field("controller", Type::Bool)
        .with_field("blockOwnerDeletion", Type::Bool);
    let string_map = || Type::map(Type::String, Type::String);
    let qualified_name = || Bounds::max(QUALIFIED_NAME_BYTES);
    let timestamp = || Bounds::max(20);
    Type::object(
        ObjectType::new("ObjectMeta")
            .with_bounded_field("name", Type::String, name_bounds())
            .with_bounded_field("generateName", Type::String, name_bounds())
            .with_bounded_field("namespace", Type::String, Bounds::max(63))
            .with_field("selfLink", Type::String)
            .with_bounded_field("uid", Type::String, Bounds::max(36))
            .with_field("resourceVersion", Type::String)
            .with_field("generation", Type::Int)
            .with_bounded_field("creationTimestamp", Type::String, timestamp())
            .with_bounded_field("deletionTimestamp", Type::String, timestamp())
            .with_field("deletionGracePeriodSeconds", Type::Int)
            .with_bounded_field(
                "labels",
                string_map(),
                Bounds::default()
                    .with_keys(qualified_name())
                    .with_elements(Bounds::max(63)),
            )
            .with_bounded_field(
                "annotations",
                string_map(),
                // Keys and values together are at most 256 KiB.
                Bounds::max(ANNOTATIONS_BYTES)
                    .with_keys(qualified_name())
                    .with_elements(Bounds::max(ANNOTATIONS_BYTES)),
            )
            .with_bounded_field(
                "finalizers",
                Type::list(Type::String),
                Bounds::default().with_elements(qualified_name()),
            )
            .with_field("ownerReferences", Type::list(Type::object(owner_reference)))
            .with_field("managedFields", Type::list(Type::Dyn)),
    )
}

/// The most the annotations of one object may hold, keys and values together (the API
/// server's `TotalAnnotationSizeLimitB`): the bound of each value and of their number.
const ANNOTATIONS_BYTES: u64 = 256 * 1024;

/// A qualified name (a label or annotation key, a finalizer), in bytes: an optional DNS
/// subdomain prefix (253) and `/`, then a name of 63.
const QUALIFIED_NAME_BYTES: u64 = 253 + 1 + 63;

/// `object` with the fields every resource has: `apiVersion`, `kind`, `metadata`.
fn resource_object(object: ObjectType) -> Type {
    Type::object(
        object
            .with_field("apiVersion", Type::String)
            .with_field("kind", Type::String)
            .with_field("metadata", object_meta()),
    )
}

fn flag(schema: &Json, name: &str) -> bool {
    schema.get(name).and_then(Json::as_bool) == Some(true)
}

/// `resource`: the schema is the root of a resource (a CRD's, or an embedded one).
fn convert(schema: &Json, name: &str, resource: bool) -> Type {
    convert_bounded(schema, name, resource).0
}

/// The type of `schema` and the size bounds it declares (see [`bounded_type_from_openapi`]).
fn convert_bounded(schema: &Json, name: &str, resource: bool) -> (Type, Bounds) {
    if !schema.is_object() {
        return (Type::Dyn, Bounds::default());
    }
    if flag(schema, "x-kubernetes-int-or-string") {
        // An int has no size; the string's is bounded as a string's.
        return (Type::Dyn, string_bounds(schema));
    }
    let resource = resource || flag(schema, "x-kubernetes-embedded-resource");
    let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
    let properties = schema.get("properties").and_then(Json::as_object);
    let additional = schema.get("additionalProperties");
    let max = |key: &str| schema.get(key).and_then(Json::as_i64).map(non_negative);
    let sized = |bound: Option<u64>| Bounds {
        max: bound,
        ..Bounds::default()
    };
    match schema.get("type").and_then(Json::as_str) {
        Some("array") => match schema.get("items") {
            Some(items) if items.is_object() => {
                let (element, bounds) = convert_bounded(items, &format!("{name}.@idx"), false);
                (
                    Type::list(element),
                    sized(max("maxItems")).with_elements(bounds),
                )
            }
            _ => (Type::list(Type::Dyn), sized(max("maxItems"))),
        },
        Some("string") => (Type::String, string_bounds(schema)),
        Some("integer") => (Type::Int, Bounds::default()),
        Some("boolean") => (Type::Bool, Bounds::default()),
        Some("object") | None => {
            if properties.is_none() && !resource {
                match additional {
                    Some(values @ Json::Object(_)) => {
                        let (value, bounds) =
                            convert_bounded(values, &format!("{name}.@elem"), false);
                        return (
                            Type::map(Type::String, value),
                            sized(max("maxProperties")).with_elements(bounds),
                        );
                    }
                    Some(Json::Bool(true)) => {
                        return (
                            Type::map(Type::String, Type::Dyn),
                            sized(max("maxProperties")),
                        );
                    }
                    _ => {}
                }
            }
            if schema.get("type").is_none() && properties.is_none() && !resource {
                // No type: Kubernetes hides the field; its value is any JSON.
                return (Type::Dyn, Bounds::default());
            }
            let mut object = ObjectType::new(name);
            for (field, property) in properties.into_iter().flatten() {
                let (ty, bounds) = convert_bounded(property, &format!("{name}.{field}"), false);
                object = object.with_bounded_field(field.clone(), ty, bounds);
            }
            if preserve || matches!(additional, Some(Json::Object(_) | Json::Bool(true))) {
                object = object.open();
            }
            let ty = if resource {
                resource_object(object)
            } else {
                Type::object(object)
            };
            (ty, sized(max("maxProperties")))
        }
        // `number` (an int or a double in JSON) and anything unknown.
        _ => (Type::Dyn, Bounds::default()),
    }
}

fn non_negative(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// The longest (in bytes) a string of the `date-time` format is: RFC 3339 with nine
/// fractional digits and an offset, `9999-12-31T23:59:59.999999999+14:00`. The format
/// allows more fractional digits; like Kubernetes' cost estimate, the bound assumes
/// nanoseconds at most.
const DATE_TIME_BYTES: u64 = 35;

/// The size bound of a string schema: the smallest of
/// - `maxLength` (characters) × 4 bytes (1 byte a character for `format: byte`, whose
///   values are base64);
/// - the longest `enum` value, in bytes;
/// - what the `format` allows: `date` 10 bytes, `date-time` 35 (see [`DATE_TIME_BYTES`]),
///   `uuid`, `uuid3`, `uuid4`, `uuid5` 36;
/// - what an anchored `pattern` allows, × 4 bytes (see [`pattern_max_chars`]).
fn string_bounds(schema: &Json) -> Bounds {
    let format = schema.get("format").and_then(Json::as_str);
    let mut candidates: Vec<u64> = Vec::new();
    if let Some(chars) = schema.get("maxLength").and_then(Json::as_i64) {
        let per_char = if format == Some("byte") { 1 } else { 4 };
        candidates.push(non_negative(chars).saturating_mul(per_char));
    }
    if let Some(values) = schema.get("enum").and_then(Json::as_array)
        && !values.is_empty()
        && values.iter().all(|v| v.is_string() || v.is_null())
    {
        let longest = values
            .iter()
            .filter_map(Json::as_str)
            .map(|v| v.len() as u64)
            .max()
            .unwrap_or(0);
        candidates.push(longest);
    }
    match format {
        Some("date") => candidates.push(10),
        Some("date-time") => candidates.push(DATE_TIME_BYTES),
        Some("uuid" | "uuid3" | "uuid4" | "uuid5") => candidates.push(36),
        _ => {}
    }
    if let Some(chars) = schema
        .get("pattern")
        .and_then(Json::as_str)
        .and_then(pattern_max_chars)
    {
        candidates.push(chars.saturating_mul(4));
    }
    Bounds {
        max: candidates.into_iter().min(),
        ..Bounds::default()
    }
}

/// The most characters a string matching the RE2 `pattern` has, when the pattern says: it
/// must be anchored at both ends (`^...$`, no top-level `|`) and repeat nothing without
/// bound (no `*`, `+`, `{n,}`). Literal characters, escapes, `.` and character classes
/// count one character, groups and alternatives their longest, `?` and `{n,m}` their most.
/// `None` for anything else (flags, lookarounds, a pattern that does not parse here).
pub(super) fn pattern_max_chars(pattern: &str) -> Option<u64> {
    let inner = pattern.strip_prefix('^')?;
    let inner = inner.strip_suffix('$')?;
    // `\$` ends with an escaped dollar, not an anchor.
    let trailing_backslashes = inner.chars().rev().take_while(|c| *c == '\\').count();
    if trailing_backslashes % 2 == 1 {
        return None;
    }
    let chars: Vec<char> = inner.chars().collect();
    let mut parser = PatternParser { chars, at: 0 };
    let alternatives = parser.alternatives()?;
    // A top-level `|` leaves each alternative anchored at one end only.
    if alternatives.len() != 1 || parser.at != parser.chars.len() {
        return None;
    }
    alternatives.first().copied()
}

struct PatternParser {
    chars: Vec<char>,
    at: usize,
}

impl PatternParser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.at += 1;
        Some(c)
    }

    /// The longest of each `|`-separated alternative, up to a `)` or the end.
    fn alternatives(&mut self) -> Option<Vec<u64>> {
        let mut found = vec![self.sequence()?];
        while self.peek() == Some('|') {
            self.at += 1;
            found.push(self.sequence()?);
        }
        Some(found)
    }

    /// The longest a sequence of atoms is, up to a `|`, a `)` or the end.
    fn sequence(&mut self) -> Option<u64> {
        let mut total: u64 = 0;
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let atom = self.atom()?;
            let times = self.quantifier()?;
            total = total.saturating_add(atom.saturating_mul(times));
        }
        Some(total)
    }

    fn atom(&mut self) -> Option<u64> {
        match self.next()? {
            '(' => {
                if self.peek() == Some('?') {
                    // Only non-capturing groups `(?:...)`; flags and names are refused.
                    self.at += 1;
                    if self.next()? != ':' {
                        return None;
                    }
                }
                let longest = self.alternatives()?.into_iter().max()?;
                (self.next()? == ')').then_some(longest)
            }
            '[' => {
                // A class is one character: skip to its closing `]` (a `]` first is
                // literal, escapes skip the next character).
                if self.peek() == Some('^') {
                    self.at += 1;
                }
                if self.peek() == Some(']') {
                    self.at += 1;
                }
                loop {
                    match self.next()? {
                        ']' => return Some(1),
                        '\\' => {
                            self.next()?;
                        }
                        '[' if self.peek() == Some(':') => {
                            // `[:alpha:]`
                            while self.next()? != ']' {}
                        }
                        _ => {}
                    }
                }
            }
            '\\' => match self.next()? {
                // Anchors and word boundaries match no character.
                'A' | 'z' | 'b' | 'B' => Some(0),
                // `\pL`, `\p{Greek}`: one character.
                'p' | 'P' => {
                    if self.next()? == '{' {
                        while self.next()? != '}' {}
                    }
                    Some(1)
                }
                'Q' | 'x' => None,
                _ => Some(1),
            },
            '^' | '$' => None,
            '*' | '+' | '?' | '{' => None,
            _ => Some(1),
        }
    }

    /// The most times the atom before repeats: 1, or what `?` or `{n}` / `{n,m}` allow;
    /// `None` when unbounded. A lazy `?` after the quantifier changes nothing.
    fn quantifier(&mut self) -> Option<u64> {
        let times = match self.peek() {
            Some('?') => {
                self.at += 1;
                1
            }
            Some('*' | '+') => return None,
            Some('{') => {
                self.at += 1;
                let mut text = String::new();
                loop {
                    match self.next()? {
                        '}' => break,
                        c => text.push(c),
                    }
                }
                let most = match text.split_once(',') {
                    Some((_, "")) => return None,
                    Some((_, most)) => most.trim(),
                    None => text.trim(),
                };
                most.parse::<u64>().ok()?
            }
            _ => return Some(1),
        };
        if self.peek() == Some('?') {
            self.at += 1;
        }
        Some(times)
    }
}
