//! The types the checker reasons with.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// A CEL type as the checker sees it.
///
/// Values cross into Switchyard as JSON, so an [`Object`](Type::Object) (a Kubernetes
/// object or a nested object of its schema) is a map with string keys at run time: the
/// checker allows what a map allows on it (`in`, `size`, `[key]`, iteration over its keys)
/// besides field selection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Type {
    /// Unknown until evaluation: every operation is allowed.
    Dyn,
    /// `null_type`, the type of `null`.
    Null,
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Timestamp,
    Duration,
    List(Box<Type>),
    Map(Box<Type>, Box<Type>),
    /// An object with known fields (a schema's `type: object` with `properties`).
    Object(Arc<ObjectType>),
    /// `optional_type(T)`, as `a.?b` and `optional.of(x)` make.
    Optional(Box<Type>),
    /// An abstract type with type parameters, as a declared function takes or gives it
    /// (`tuple(int, string)`, see [`super::FunctionOverload`]): values of the same abstract
    /// type compare with `==` when their parameters do.
    Opaque(String, Vec<Type>),
    /// A type parameter (`T`) in the parameters and result of a declared function (see
    /// [`super::FunctionOverload`]): each call binds it to the type of its arguments. In the
    /// type of an expression, a type nothing has determined yet (the elements of `[]`): it
    /// behaves as [`Dyn`](Type::Dyn) and gives way to any other type where types join
    /// (`[[], [1]]` is a `list(list(int))`); [`super::check`] gives it as `dyn`.
    Param(String),
    /// The type of type values: `int`, `type(x)`.
    Type,
    /// The type of an expression that has an issue: it is reported once and behaves as
    /// [`Dyn`](Type::Dyn) afterwards, so one mistake is not reported again by every
    /// expression around it.
    Error,
}

/// An object type: the fields a schema declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectType {
    /// The name used in messages: the kind for a resource (`FleetWorkload`), then the path
    /// of the field (`FleetWorkload.spec.template`), as Kubernetes names schema types.
    pub name: String,
    pub fields: BTreeMap<String, Type>,
    /// The object keeps fields its schema does not declare
    /// (`x-kubernetes-preserve-unknown-fields`): selecting an undeclared field is `dyn`,
    /// not an error.
    pub open: bool,
    /// The size bounds of fields that have some (see [`Bounds`]); a field without an entry
    /// has none. Only the cost estimate ([`super::estimate_cost`]) reads them.
    pub bounds: BTreeMap<String, Bounds>,
}

impl ObjectType {
    /// A closed object type with no fields yet.
    pub fn new(name: impl Into<String>) -> ObjectType {
        ObjectType {
            name: name.into(),
            fields: BTreeMap::new(),
            open: false,
            bounds: BTreeMap::new(),
        }
    }

    /// Adds (or replaces) the field `name`, without size bounds.
    #[must_use]
    pub fn with_field(mut self, name: impl Into<String>, ty: Type) -> ObjectType {
        let name = name.into();
        self.bounds.remove(&name);
        self.fields.insert(name, ty);
        self
    }

    /// Adds (or replaces) the field `name`, whose values have the size bounds `bounds`
    /// (from its schema, or [`super::Estimate::result`] for a computed value).
    #[must_use]
    pub fn with_bounded_field(
        mut self,
        name: impl Into<String>,
        ty: Type,
        bounds: Bounds,
    ) -> ObjectType {
        let name = name.into();
        if bounds.is_unbounded() {
            self.bounds.remove(&name);
        } else {
            self.bounds.insert(name.clone(), bounds);
        }
        self.fields.insert(name, ty);
        self
    }

    /// The size bounds of the field `name` (unbounded when it has none).
    pub fn field_bounds(&self, name: &str) -> Option<&Bounds> {
        self.bounds.get(name)
    }

    /// Makes undeclared fields `dyn` instead of errors.
    #[must_use]
    pub fn open(mut self) -> ObjectType {
        self.open = true;
        self
    }
}

/// Upper bounds of the sizes of a value, beside its [`Type`]: what a schema declares with
/// `maxLength`, `maxItems` and `maxProperties` (or implies with `enum` or `format`, see
/// [`super::type_from_openapi`]). [`super::estimate_cost`] charges size-dependent operations
/// and comprehensions by them.
///
/// Sizes are counted as the evaluator counts them: a string's in **bytes** of UTF-8 (a
/// schema's `maxLength` counts characters, so it bounds a string to 4 bytes a character,
/// as Kubernetes' cost estimate does), bytes in bytes, a list's in elements, a map's (or
/// an object's) in entries.
///
/// `Bounds::default()` bounds nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bounds {
    /// The largest size, if bounded.
    pub max: Option<u64>,
    /// The bounds of a list's elements, or of a map's values.
    pub elements: Option<Box<Bounds>>,
    /// The bounds of a map's keys.
    pub keys: Option<Box<Bounds>>,
}

impl Bounds {
    /// At most `max` bytes, elements or entries.
    pub fn max(max: u64) -> Bounds {
        Bounds {
            max: Some(max),
            ..Bounds::default()
        }
    }

    /// With elements (of a list) or values (of a map) bounded by `elements`.
    #[must_use]
    pub fn with_elements(mut self, elements: Bounds) -> Bounds {
        self.elements = (!elements.is_unbounded()).then(|| Box::new(elements));
        self
    }

    /// With keys (of a map) bounded by `keys`.
    #[must_use]
    pub fn with_keys(mut self, keys: Bounds) -> Bounds {
        self.keys = (!keys.is_unbounded()).then(|| Box::new(keys));
        self
    }

    /// Whether nothing is bounded.
    pub fn is_unbounded(&self) -> bool {
        self.max.is_none() && self.elements.is_none() && self.keys.is_none()
    }
}

impl Type {
    pub fn list(element: Type) -> Type {
        Type::List(Box::new(element))
    }

    pub fn map(key: Type, value: Type) -> Type {
        Type::Map(Box::new(key), Box::new(value))
    }

    pub fn optional(value: Type) -> Type {
        Type::Optional(Box::new(value))
    }

    pub fn object(object: ObjectType) -> Type {
        Type::Object(Arc::new(object))
    }

    pub fn opaque(name: impl Into<String>, params: Vec<Type>) -> Type {
        Type::Opaque(name.into(), params)
    }

    pub fn param(name: impl Into<String>) -> Type {
        Type::Param(name.into())
    }

    /// `dyn`, the type of an expression with an issue, or a type not determined yet
    /// ([`Type::Param`]): anything goes.
    pub fn is_dyn(&self) -> bool {
        matches!(self, Type::Dyn | Type::Error | Type::Param(_))
    }

    /// The type with `dyn` for every type parameter (what nothing has determined): the type
    /// an expression is given as.
    pub fn without_params(&self) -> Type {
        match self {
            Type::Param(_) => Type::Dyn,
            Type::List(e) => Type::list(e.without_params()),
            Type::Map(k, v) => Type::map(k.without_params(), v.without_params()),
            Type::Optional(t) => Type::optional(t.without_params()),
            Type::Opaque(name, params) => Type::Opaque(
                name.clone(),
                params.iter().map(Type::without_params).collect(),
            ),
            other => other.clone(),
        }
    }

    /// Whether a value of this type may be used where `target` is expected: `dyn` (either
    /// side) and `null` always may, numbers only as the same number type, lists, maps and
    /// optionals when their parameters may, an object where an object or a map with
    /// string keys is expected. For example, a guard's type must be assignable to
    /// [`Type::Bool`].
    pub fn is_assignable_to(&self, target: &Type) -> bool {
        use Type as T;
        match (self, target) {
            (a, b) if a.is_dyn() || b.is_dyn() => true,
            (T::Null, _) => true,
            (T::List(a), T::List(b)) | (T::Optional(a), T::Optional(b)) => a.is_assignable_to(b),
            (T::Map(ka, va), T::Map(kb, vb)) => ka.is_assignable_to(kb) && va.is_assignable_to(vb),
            (T::Object(a), T::Object(b)) => a.name == b.name || Arc::ptr_eq(a, b),
            (T::Object(_), T::Map(k, _)) => T::String.is_assignable_to(k),
            (T::Opaque(a, pa), T::Opaque(b, pb)) => {
                a == b
                    && pa.len() == pb.len()
                    && pa.iter().zip(pb).all(|(a, b)| a.is_assignable_to(b))
            }
            (a, b) => a == b,
        }
    }
}

/// cel-go's names: `int`, `list(string)`, `map(string, int)`, `optional_type(int)`,
/// `google.protobuf.Timestamp`, an object type's name; `null_type` for `null`'s (see
/// [`Type::in_message`] for the name in cel-go's messages).
impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, "null_type")
    }
}

/// A type as cel-go's messages name it: see [`Type::in_message`].
pub struct InMessage<'a>(&'a Type);

impl fmt::Display for InMessage<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.write(f, "null")
    }
}

impl Type {
    /// The type as cel-go's error messages name it (`FormatCELType`): as [`Display`](fmt::Display)
    /// but `null` for `null`'s type (`applied to '(null, int)'`).
    pub fn in_message(&self) -> InMessage<'_> {
        InMessage(self)
    }

    fn write(&self, f: &mut fmt::Formatter<'_>, null: &str) -> fmt::Result {
        match self {
            Type::Dyn => f.write_str("dyn"),
            Type::Null => f.write_str(null),
            Type::Bool => f.write_str("bool"),
            Type::Int => f.write_str("int"),
            Type::Uint => f.write_str("uint"),
            Type::Double => f.write_str("double"),
            Type::String => f.write_str("string"),
            Type::Bytes => f.write_str("bytes"),
            Type::Timestamp => f.write_str("google.protobuf.Timestamp"),
            Type::Duration => f.write_str("google.protobuf.Duration"),
            Type::List(e) => {
                f.write_str("list(")?;
                e.write(f, null)?;
                f.write_str(")")
            }
            Type::Map(k, v) => {
                f.write_str("map(")?;
                k.write(f, null)?;
                f.write_str(", ")?;
                v.write(f, null)?;
                f.write_str(")")
            }
            Type::Object(o) => f.write_str(&o.name),
            Type::Optional(t) => {
                f.write_str("optional_type(")?;
                t.write(f, null)?;
                f.write_str(")")
            }
            Type::Opaque(name, params) if params.is_empty() => f.write_str(name),
            Type::Opaque(name, params) => {
                write!(f, "{name}(")?;
                for (i, p) in params.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    p.write(f, null)?;
                }
                f.write_str(")")
            }
            Type::Param(name) => f.write_str(name),
            Type::Type => f.write_str("type"),
            Type::Error => f.write_str("*error*"),
        }
    }
}
