//! OpenAPI v3 schemas (of CustomResourceDefinitions) to checker types, after Kubernetes'
//! `SchemaDeclType` (`k8s.io/apiserver/pkg/cel/common/schemas.go`), with the departures
//! Switchyard's JSON values need (see [`type_from_openapi`]).

use serde_json::Value as Json;

use super::types::{ObjectType, Type};

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
pub fn type_from_openapi(schema: &Json, type_name: &str) -> Type {
    convert(schema, type_name, false)
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
    Some(match schema {
        Some(schema) => convert(schema, kind, true),
        None => object_type_without_schema(kind),
    })
}

/// The type of a kind without a schema (a built-in kind, or one whose CRD is not given):
/// `apiVersion`, `kind` and `metadata` ([`object_meta`]) are typed, any other field is
/// `dyn`.
pub fn object_type_without_schema(kind: &str) -> Type {
    resource_object(ObjectType::new(kind).open())
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
pub fn object_meta() -> Type {
    let owner_reference = ObjectType::new("OwnerReference")
        .with_field("apiVersion", Type::String)
        .with_field("kind", Type::String)
        .with_field("name", Type::String)
        .with_field("uid", Type::String)
        .with_field("controller", Type::Bool)
        .with_field("blockOwnerDeletion", Type::Bool);
    let string_map = || Type::map(Type::String, Type::String);
    Type::object(
        ObjectType::new("ObjectMeta")
            .with_field("name", Type::String)
            .with_field("generateName", Type::String)
            .with_field("namespace", Type::String)
            .with_field("selfLink", Type::String)
            .with_field("uid", Type::String)
            .with_field("resourceVersion", Type::String)
            .with_field("generation", Type::Int)
            .with_field("creationTimestamp", Type::String)
            .with_field("deletionTimestamp", Type::String)
            .with_field("deletionGracePeriodSeconds", Type::Int)
            .with_field("labels", string_map())
            .with_field("annotations", string_map())
            .with_field("finalizers", Type::list(Type::String))
            .with_field("ownerReferences", Type::list(Type::object(owner_reference)))
            .with_field("managedFields", Type::list(Type::Dyn)),
    )
}

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
    if !schema.is_object() || flag(schema, "x-kubernetes-int-or-string") {
        return Type::Dyn;
    }
    let resource = resource || flag(schema, "x-kubernetes-embedded-resource");
    let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
    let properties = schema.get("properties").and_then(Json::as_object);
    let additional = schema.get("additionalProperties");
    match schema.get("type").and_then(Json::as_str) {
        Some("array") => match schema.get("items") {
            Some(items) if items.is_object() => {
                Type::list(convert(items, &format!("{name}.@idx"), false))
            }
            _ => Type::list(Type::Dyn),
        },
        Some("string") => Type::String,
        Some("integer") => Type::Int,
        Some("boolean") => Type::Bool,
        Some("object") | None => {
            if properties.is_none() && !resource {
                match additional {
                    Some(values @ Json::Object(_)) => {
                        return Type::map(
                            Type::String,
                            convert(values, &format!("{name}.@elem"), false),
                        );
                    }
                    Some(Json::Bool(true)) => return Type::map(Type::String, Type::Dyn),
                    _ => {}
                }
            }
            if schema.get("type").is_none() && properties.is_none() && !resource {
                // No type: Kubernetes hides the field; its value is any JSON.
                return Type::Dyn;
            }
            let mut object = ObjectType::new(name);
            for (field, property) in properties.into_iter().flatten() {
                object = object.with_field(
                    field.clone(),
                    convert(property, &format!("{name}.{field}"), false),
                );
            }
            if preserve || matches!(additional, Some(Json::Object(_) | Json::Bool(true))) {
                object = object.open();
            }
            if resource {
                resource_object(object)
            } else {
                Type::object(object)
            }
        }
        // `number` (an int or a double in JSON) and anything unknown.
        _ => Type::Dyn,
    }
}
