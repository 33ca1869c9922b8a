//! The functions the checker knows, declared as cel-go declares them (its standard
//! library, the strings extension, optionals, Kubernetes' list and regex libraries, cel-go's
//! lists extension, the engine's functions), and overload resolution.
//!
//! A function not declared here is `dyn` and never an error: custom functions, Kubernetes
//! libraries with types of their own (`quantity`, `url`, `ip`, `cidr`, `semver`, `format`,
//! `authz`), namespaced functions other than `optional.*`, `strings.*`, `lists.range`,
//! `sets.*`. The operators `==`, `!=`, `in`, `&&`, `||`, `?:`, indexing and `.?` are typed
//! by the checker itself.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use super::types::Type;

/// A parameter or result of a declaration: a type, or one containing type parameters.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Pattern {
    Is(Type),
    /// A type parameter (`A`, `B`).
    Param(usize),
    List(Box<Pattern>),
    Map(Box<Pattern>, Box<Pattern>),
    Optional(Box<Pattern>),
    /// An abstract type with parameters (`tuple(A, B)`).
    Opaque(String, Vec<Pattern>),
}

impl Pattern {
    /// The pattern of a declared type: its [`Type::Param`]s are type parameters, numbered
    /// in `names` (in the order they appear, across the parameters and result of an
    /// overload).
    pub(super) fn declared(ty: &Type, names: &mut Vec<String>) -> Pattern {
        match ty {
            Type::Param(name) => {
                let index = names.iter().position(|n| n == name).unwrap_or_else(|| {
                    names.push(name.clone());
                    names.len() - 1
                });
                Pattern::Param(index)
            }
            Type::List(e) => Pattern::List(Box::new(Pattern::declared(e, names))),
            Type::Map(k, v) => Pattern::Map(
                Box::new(Pattern::declared(k, names)),
                Box::new(Pattern::declared(v, names)),
            ),
            Type::Optional(t) => Pattern::Optional(Box::new(Pattern::declared(t, names))),
            Type::Opaque(name, params) => Pattern::Opaque(
                name.clone(),
                params.iter().map(|p| Pattern::declared(p, names)).collect(),
            ),
            other => Pattern::Is(other.clone()),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Overload {
    /// Called as `receiver.f(args)`: the receiver is the first parameter.
    pub member: bool,
    pub params: Vec<Pattern>,
    pub result: Pattern,
}

const COMPARABLE: [&str; 8] = [
    "bool",
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "timestamp",
    "duration",
];

/// `receiver.name(params) -> result` or `name(params) -> result`, one a line. `A` and `B`
/// are type parameters.
const SIGNATURES: &str = "
!_(bool) -> bool
-_(int) -> int
-_(double) -> double
_+_(int, int) -> int
_+_(uint, uint) -> uint
_+_(double, double) -> double
_+_(string, string) -> string
_+_(bytes, bytes) -> bytes
_+_(list(A), list(A)) -> list(A)
_+_(timestamp, duration) -> timestamp
_+_(duration, timestamp) -> timestamp
_+_(duration, duration) -> duration
_-_(int, int) -> int
_-_(uint, uint) -> uint
_-_(double, double) -> double
_-_(timestamp, timestamp) -> duration
_-_(timestamp, duration) -> timestamp
_-_(duration, duration) -> duration
_*_(int, int) -> int
_*_(uint, uint) -> uint
_*_(double, double) -> double
_/_(int, int) -> int
_/_(uint, uint) -> uint
_/_(double, double) -> double
_%_(int, int) -> int
_%_(uint, uint) -> uint
@not_strictly_false(bool) -> bool
dyn(A) -> dyn
type(A) -> type
int(int) -> int
int(uint) -> int
int(double) -> int
int(string) -> int
int(timestamp) -> int
int(duration) -> int
uint(uint) -> uint
uint(int) -> uint
uint(double) -> uint
uint(string) -> uint
double(double) -> double
double(int) -> double
double(uint) -> double
double(string) -> double
string(string) -> string
string(bool) -> string
string(int) -> string
string(uint) -> string
string(double) -> string
string(bytes) -> string
string(timestamp) -> string
string(duration) -> string
bytes(bytes) -> bytes
bytes(string) -> bytes
bool(bool) -> bool
bool(string) -> bool
timestamp(timestamp) -> timestamp
timestamp(string) -> timestamp
timestamp(int) -> timestamp
duration(duration) -> duration
duration(string) -> duration
size(string) -> int
size(bytes) -> int
size(list(A)) -> int
size(map(A, B)) -> int
string.size() -> int
bytes.size() -> int
list(A).size() -> int
map(A, B).size() -> int
string.contains(string) -> bool
string.startsWith(string) -> bool
string.endsWith(string) -> bool
string.matches(string) -> bool
matches(string, string) -> bool
timestamp.getFullYear() -> int
timestamp.getFullYear(string) -> int
timestamp.getMonth() -> int
timestamp.getMonth(string) -> int
timestamp.getDayOfYear() -> int
timestamp.getDayOfYear(string) -> int
timestamp.getDayOfMonth() -> int
timestamp.getDayOfMonth(string) -> int
timestamp.getDate() -> int
timestamp.getDate(string) -> int
timestamp.getDayOfWeek() -> int
timestamp.getDayOfWeek(string) -> int
timestamp.getHours() -> int
timestamp.getHours(string) -> int
timestamp.getMinutes() -> int
timestamp.getMinutes(string) -> int
timestamp.getSeconds() -> int
timestamp.getSeconds(string) -> int
timestamp.getMilliseconds() -> int
timestamp.getMilliseconds(string) -> int
duration.getHours() -> int
duration.getMinutes() -> int
duration.getSeconds() -> int
duration.getMilliseconds() -> int
string.charAt(int) -> string
string.indexOf(string) -> int
string.indexOf(string, int) -> int
string.lastIndexOf(string) -> int
string.lastIndexOf(string, int) -> int
string.lowerAscii() -> string
string.upperAscii() -> string
string.replace(string, string) -> string
string.replace(string, string, int) -> string
string.split(string) -> list(string)
string.split(string, int) -> list(string)
string.substring(int) -> string
string.substring(int, int) -> string
string.trim() -> string
string.reverse() -> string
string.format(list(dyn)) -> string
list(string).join() -> string
list(string).join(string) -> string
strings.quote(string) -> string
string.find(string) -> string
string.findAll(string) -> list(string)
string.findAll(string, int) -> list(string)
list(A).isSorted() -> bool
list(A).sum() -> A
list(A).min() -> A
list(A).max() -> A
list(A).indexOf(A) -> int
list(A).lastIndexOf(A) -> int
list(A).slice(int, int) -> list(A)
list(list(A)).flatten() -> list(A)
list(dyn).flatten(int) -> list(dyn)
list(A).distinct() -> list(A)
list(A).reverse() -> list(A)
list(A).sort() -> list(A)
list(A).@sortByAssociatedKeys(list(B)) -> list(A)
lists.range(int) -> list(int)
cel.@mapInsert(map(A, B), A, B) -> map(A, B)
cel.@mapInsert(map(A, B), map(A, B)) -> map(A, B)
sets.contains(list(A), list(A)) -> bool
sets.equivalent(list(A), list(A)) -> bool
sets.intersects(list(A), list(A)) -> bool
optional.of(A) -> optional(A)
optional.ofNonZeroValue(A) -> optional(A)
optional.none() -> optional(dyn)
optional(A).hasValue() -> bool
optional(A).value() -> A
optional(A).or(optional(A)) -> optional(A)
optional(A).orValue(A) -> A
list(A).first() -> optional(A)
list(A).last() -> optional(A)
sha256(string) -> string
sha256(bytes) -> string
isDNS1123Label(string) -> bool
isDNS1123Subdomain(string) -> bool
dns1123Label(string) -> string
map(A, B).merge(map(A, B)) -> map(A, B)
@utc(timestamp) -> timestamp
";

/// The functions whose name (with its namespace, `optional.of`) has declarations.
pub(super) static DECLARATIONS: LazyLock<BTreeMap<String, Vec<Overload>>> = LazyLock::new(|| {
    let mut table: BTreeMap<String, Vec<Overload>> = BTreeMap::new();
    for (name, overload) in SIGNATURES.lines().filter_map(parse_signature) {
        table.entry(name).or_default().push(overload);
    }
    // Ordering: every comparable type with itself, and numbers across types.
    for op in ["_<_", "_<=_", "_>_", "_>=_"] {
        let overloads = table.entry(op.to_string()).or_default();
        let numbers = ["int", "uint", "double"];
        let pairs = COMPARABLE.iter().map(|t| (*t, *t)).chain(
            numbers
                .iter()
                .flat_map(|a| numbers.iter().map(move |b| (*a, *b)))
                .filter(|(a, b)| a != b),
        );
        for (a, b) in pairs {
            if let (Some(a), Some(b)) = (parse_pattern(a), parse_pattern(b)) {
                overloads.push(Overload {
                    member: false,
                    params: vec![a, b],
                    result: Pattern::Is(Type::Bool),
                });
            }
        }
    }
    table
});

/// `(name, overload)` of a line of [`SIGNATURES`]; `None` for a blank or malformed line.
fn parse_signature(line: &str) -> Option<(String, Overload)> {
    let (call, result) = line.trim().split_once(" -> ")?;
    let call = call.strip_suffix(')')?;
    // The parameter list starts at the last `(` whose parentheses balance to the end.
    let mut depth = 0usize;
    let mut open = None;
    for (i, c) in call.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' if depth == 0 => {
                open = Some(i);
                break;
            }
            '(' => depth -= 1,
            _ => {}
        }
    }
    let open = open?;
    let (head, params) = (&call[..open], &call[open + 1..]);
    let mut patterns = Vec::new();
    let (name, member) = match head.rsplit_once('.') {
        Some((receiver, name)) if parse_pattern(receiver).is_some() => {
            patterns.push(parse_pattern(receiver)?);
            (name, true)
        }
        _ => (head, false),
    };
    for param in split_top(params) {
        patterns.push(parse_pattern(param)?);
    }
    Some((
        name.to_string(),
        Overload {
            member,
            params: patterns,
            result: parse_pattern(result)?,
        },
    ))
}

/// Splits `a, list(b), map(c, d)` at its top-level commas; nothing for an empty list.
fn split_top(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    let last = text[start..].trim();
    if !last.is_empty() || !parts.is_empty() {
        parts.push(last);
    }
    parts
}

fn parse_pattern(text: &str) -> Option<Pattern> {
    let text = text.trim();
    if let Some(inner) = text.strip_suffix(')') {
        let (name, args) = inner.split_once('(')?;
        let args: Vec<Pattern> = split_top(args)
            .into_iter()
            .map(parse_pattern)
            .collect::<Option<_>>()?;
        return match (name, args.as_slice()) {
            ("list", [e]) => Some(Pattern::List(Box::new(e.clone()))),
            ("optional", [e]) => Some(Pattern::Optional(Box::new(e.clone()))),
            ("map", [k, v]) => Some(Pattern::Map(Box::new(k.clone()), Box::new(v.clone()))),
            _ => None,
        };
    }
    Some(match text {
        "A" => Pattern::Param(0),
        "B" => Pattern::Param(1),
        "dyn" => Pattern::Is(Type::Dyn),
        "null_type" => Pattern::Is(Type::Null),
        "bool" => Pattern::Is(Type::Bool),
        "int" => Pattern::Is(Type::Int),
        "uint" => Pattern::Is(Type::Uint),
        "double" => Pattern::Is(Type::Double),
        "string" => Pattern::Is(Type::String),
        "bytes" => Pattern::Is(Type::Bytes),
        "timestamp" => Pattern::Is(Type::Timestamp),
        "duration" => Pattern::Is(Type::Duration),
        "type" => Pattern::Is(Type::Type),
        _ => return None,
    })
}

/// An argument of a call: its type, and whether it is weak (`null`, `[]`, `{}`,
/// `optional.none()`): its type does not constrain a type parameter another argument
/// binds (`x.orValue([])` has the type of `x`'s value).
#[derive(Debug, Clone)]
pub(super) struct Arg {
    pub ty: Type,
    pub weak: bool,
}

/// Type parameter bindings while an overload is matched.
///
/// As in cel-go, a parameter bound twice must be bound to types assignable to each other
/// ([`assignable`]: `int` and `double` are not, `dyn` is assignable to anything), and is
/// then bound to the more general of the two; a type not determined yet ([`Type::Param`])
/// gives way to the other.
#[derive(Default)]
struct Bindings {
    params: Vec<Option<(Type, bool)>>,
    /// `null` is assignable to every type (rules: see [`super::TypeEnv::kubernetes`]).
    lenient_null: bool,
}

impl Bindings {
    /// Binds `param` to `ty`; `false` when it is bound to a type `ty` is not assignable to.
    fn bind(&mut self, param: usize, ty: &Type, weak: bool) -> bool {
        if self.params.len() <= param {
            self.params.resize(param + 1, None);
        }
        let slot = &mut self.params[param];
        if let Some((bound, _)) = slot.as_ref()
            && !assignable(bound, ty, self.lenient_null)
        {
            return false;
        }
        *slot = Some(match slot.take() {
            None => (ty.clone(), weak),
            // A strong binding replaces a weak one, a weak one leaves a strong one be; two
            // bindings of the same strength merge.
            Some((_, true)) if !weak => (ty.clone(), false),
            Some((bound, false)) if weak => (bound, false),
            Some((bound, bound_weak)) => (merge(&bound, ty), bound_weak),
        });
        true
    }

    fn resolve(&self, pattern: &Pattern) -> Type {
        match pattern {
            Pattern::Is(t) => t.clone(),
            Pattern::Param(i) => self
                .params
                .get(*i)
                .and_then(Option::as_ref)
                .map_or(Type::Dyn, |(t, _)| t.clone()),
            Pattern::List(e) => Type::list(self.resolve(e)),
            Pattern::Map(k, v) => Type::map(self.resolve(k), self.resolve(v)),
            Pattern::Optional(t) => Type::optional(self.resolve(t)),
            Pattern::Opaque(name, params) => Type::Opaque(
                name.clone(),
                params.iter().map(|p| self.resolve(p)).collect(),
            ),
        }
    }
}

/// The type of a value that is of type `a` or of type `b`: the type itself when they are
/// the same, `dyn` where they differ (a type not determined yet, [`Type::Param`], gives way
/// to the other type, and so does `null`). Types nest as deep as they do: `[[], [[[]]]]`
/// is a `list(list(list(list(dyn))))`.
pub(super) fn merge(a: &Type, b: &Type) -> Type {
    match (a, b) {
        (a, b) if a == b => a.clone(),
        (Type::Error, _) | (_, Type::Error) | (Type::Dyn, _) | (_, Type::Dyn) => Type::Dyn,
        (Type::Param(_), t) | (t, Type::Param(_)) => t.clone(),
        (Type::Null, t) | (t, Type::Null) => t.clone(),
        (Type::List(a), Type::List(b)) => Type::list(merge(a, b)),
        (Type::Optional(a), Type::Optional(b)) => Type::optional(merge(a, b)),
        (Type::Map(ka, va), Type::Map(kb, vb)) => Type::map(merge(ka, kb), merge(va, vb)),
        (Type::Opaque(a, pa), Type::Opaque(b, pb)) if a == b && pa.len() == pb.len() => {
            Type::Opaque(
                a.clone(),
                pa.iter().zip(pb).map(|(a, b)| merge(a, b)).collect(),
            )
        }
        _ => Type::Dyn,
    }
}

/// Joins the types of two values a result may be (the branches of `?:`, the elements of a
/// literal): a weak one gives way to the other.
pub(super) fn join(a: &Arg, b: &Arg) -> Type {
    match (a.weak, b.weak) {
        (true, false) => b.ty.clone(),
        (false, true) => a.ty.clone(),
        _ => merge(&a.ty, &b.ty),
    }
}

/// [`join`] as cel-go joins the branches of `?:` (the type parameter of
/// `_?_:_(bool, A, A)`): `None` when neither type is assignable to the other.
pub(super) fn join_assignable(a: &Arg, b: &Arg, lenient_null: bool) -> Option<Type> {
    assignable(&a.ty, &b.ty, lenient_null).then(|| join(a, b))
}

/// cel-go's assignability of two types, both ways (`internalIsAssignable` without type
/// substitutions): the same type, `dyn` (or a type with an issue, or one not determined
/// yet) with anything, `null` with the nullable types (`null`, timestamps, durations,
/// objects, abstract types), lists, maps and optionals whose parameters are, abstract types
/// of the same name whose parameters are. Numbers of different types are not (`1 == 1.0`
/// does not type-check). Two object types are (the checker names a schema's objects as it
/// can, not as Kubernetes does), and so are an object and a map with string keys (an
/// object is one at run time). With `lenient_null`, `null` is assignable to every type.
pub(super) fn assignable(a: &Type, b: &Type, lenient_null: bool) -> bool {
    use Type as T;
    let nested = |a: &Type, b: &Type| assignable(a, b, lenient_null);
    match (a, b) {
        (a, b) if a.is_dyn() || b.is_dyn() => true,
        (T::Null, t) | (t, T::Null) => lenient_null || nullable(t),
        (T::List(a), T::List(b)) | (T::Optional(a), T::Optional(b)) => nested(a, b),
        (T::Map(ka, va), T::Map(kb, vb)) => nested(ka, kb) && nested(va, vb),
        (T::Object(_), T::Object(_)) => true,
        (T::Object(_), T::Map(k, _)) | (T::Map(k, _), T::Object(_)) => nested(k, &T::String),
        (T::Opaque(a, pa), T::Opaque(b, pb)) => {
            a == b && pa.len() == pb.len() && pa.iter().zip(pb).all(|(a, b)| nested(a, b))
        }
        (a, b) => a == b,
    }
}

/// Whether `null` is assignable to `ty` (cel-go's legacy nullable kinds).
fn nullable(ty: &Type) -> bool {
    matches!(
        ty,
        Type::Null
            | Type::Timestamp
            | Type::Duration
            | Type::Object(_)
            | Type::Opaque(..)
            | Type::Dyn
            | Type::Error
            | Type::Param(_)
    )
}

/// Whether `arg` can be passed as `pattern`, binding its type parameters.
fn unify(pattern: &Pattern, arg: &Type, weak: bool, bindings: &mut Bindings) -> bool {
    if arg.is_dyn() {
        // Anything may be passed as `dyn`: its parameters are `dyn` (or not determined yet,
        // for an argument whose type is not).
        let any = match arg {
            Type::Param(_) => arg.clone(),
            _ => Type::Dyn,
        };
        bind_any(pattern, &any, weak, bindings);
        return true;
    }
    match (pattern, arg) {
        (Pattern::Param(i), t) => bindings.bind(*i, t, weak),
        (Pattern::Is(Type::Dyn), _) => true,
        (Pattern::Is(t), a) => concrete(t, a),
        (Pattern::List(e), Type::List(a)) => unify(e, a, weak, bindings),
        (Pattern::Optional(e), Type::Optional(a)) => unify(e, a, weak, bindings),
        (Pattern::Map(k, v), Type::Map(ka, va)) => {
            unify(k, ka, weak, bindings) && unify(v, va, weak, bindings)
        }
        // An object is a map with string keys at run time.
        (Pattern::Map(k, v), Type::Object(_)) => {
            unify(k, &Type::String, weak, bindings) && unify(v, &Type::Dyn, weak, bindings)
        }
        (Pattern::Opaque(name, params), Type::Opaque(n, args)) => {
            name == n
                && params.len() == args.len()
                && params
                    .iter()
                    .zip(args)
                    .all(|(p, a)| unify(p, a, weak, bindings))
        }
        _ => false,
    }
}

/// Binds every type parameter of `pattern` to `any` (`dyn`, or a type not determined yet).
fn bind_any(pattern: &Pattern, any: &Type, weak: bool, bindings: &mut Bindings) {
    match pattern {
        Pattern::Is(_) => {}
        Pattern::Param(i) => {
            // `dyn` (or a type not determined yet) is assignable to any binding.
            bindings.bind(*i, any, weak);
        }
        Pattern::List(e) | Pattern::Optional(e) => bind_any(e, any, weak, bindings),
        Pattern::Map(k, v) => {
            bind_any(k, any, weak, bindings);
            bind_any(v, any, weak, bindings);
        }
        Pattern::Opaque(_, params) => {
            for p in params {
                bind_any(p, any, weak, bindings);
            }
        }
    }
}

/// Whether a value of type `arg` is a `declared` (a declared type without parameters, or
/// `list(dyn)` and the like).
fn concrete(declared: &Type, arg: &Type) -> bool {
    match (declared, arg) {
        (d, a) if d.is_dyn() || a.is_dyn() => true,
        (Type::List(d), Type::List(a)) | (Type::Optional(d), Type::Optional(a)) => concrete(d, a),
        (Type::Map(dk, dv), Type::Map(ak, av)) => concrete(dk, ak) && concrete(dv, av),
        (Type::Opaque(d, dp), Type::Opaque(a, ap)) => {
            d == a && dp.len() == ap.len() && dp.iter().zip(ap).all(|(d, a)| concrete(d, a))
        }
        (d, a) => d == a,
    }
}

/// The result type of the call of `name` with `args` (the receiver first for a member
/// call), or `None` when no overload accepts them. Several overloads may accept `dyn`
/// arguments: the result is then the merge of theirs.
pub(super) fn resolve(
    overloads: &[Overload],
    member: bool,
    args: &[Arg],
    lenient_null: bool,
) -> Option<Type> {
    let mut result: Option<Type> = None;
    for overload in overloads {
        if overload.member != member || overload.params.len() != args.len() {
            continue;
        }
        let mut bindings = Bindings {
            lenient_null,
            ..Bindings::default()
        };
        let accepted = overload
            .params
            .iter()
            .zip(args)
            .all(|(pattern, arg)| unify(pattern, &arg.ty, arg.weak, &mut bindings));
        if accepted {
            let ty = bindings.resolve(&overload.result);
            result = Some(match result {
                None => ty,
                Some(previous) => merge(&previous, &ty),
            });
        }
    }
    result
}

/// The result type of the call of `name` with `args` as cel-go's checker gives it when some
/// arguments are `dyn` as Kubernetes declares them (`marker`, see the checker's
/// `kubernetes_type`): such a `dyn` binds a bare type parameter (`A` of `orValue(A)`) but
/// leaves one inside a type free (`optional(A)`, `list(list(A))`), as cel-go's
/// unification does. `None` when the result is not known: an argument of a type not known
/// (`dyn` the checker could not type), no overload, or a type parameter left free (cel-go
/// binds it later to whatever it meets). Overloads of different results give `marker`
/// (cel-go's `dyn`).
pub(super) fn resolve_as_kubernetes(
    overloads: &[Overload],
    member: bool,
    args: &[Type],
    marker: &Type,
) -> Option<Type> {
    fn unify(pattern: &Pattern, arg: &Type, marker: &Type, bound: &mut Vec<Option<Type>>) -> bool {
        // A free type (`optional.none()`'s) goes anywhere and binds nothing.
        if matches!(arg, Type::Param(_)) {
            return true;
        }
        if arg == marker {
            if let Pattern::Param(i) = pattern {
                if bound.len() <= *i {
                    bound.resize(*i + 1, None);
                }
                // cel-go keeps the more general type: `dyn`.
                bound[*i] = Some(marker.clone());
            }
            return true;
        }
        match (pattern, arg) {
            (Pattern::Param(i), t) => {
                if bound.len() <= *i {
                    bound.resize(*i + 1, None);
                }
                match bound[*i].take() {
                    None => {
                        bound[*i] = Some(t.clone());
                        true
                    }
                    // cel-go keeps the more general of two types that agree.
                    Some(b) => {
                        let general = more_general(&b, t, marker);
                        let agree = general.is_some();
                        bound[*i] = Some(general.unwrap_or(b));
                        agree
                    }
                }
            }
            (Pattern::Is(t), a) if has_dyn_type(t) => accepts(t, a, marker),
            (Pattern::Is(t), a) => t == a,
            (Pattern::List(e), Type::List(a)) | (Pattern::Optional(e), Type::Optional(a)) => {
                unify(e, a, marker, bound)
            }
            (Pattern::Map(k, v), Type::Map(ka, va)) => {
                unify(k, ka, marker, bound) && unify(v, va, marker, bound)
            }
            _ => false,
        }
    }
    /// The more general of two types that agree (`list(dyn)` of `list(int)` and
    /// `list(dyn)`), `None` when they do not.
    fn more_general(a: &Type, b: &Type, marker: &Type) -> Option<Type> {
        match (a, b) {
            (a, b) if a == b => Some(a.clone()),
            (a, _) | (_, a) if a == marker => Some(marker.clone()),
            (Type::List(a), Type::List(b)) => Some(Type::list(more_general(a, b, marker)?)),
            (Type::Optional(a), Type::Optional(b)) => {
                Some(Type::optional(more_general(a, b, marker)?))
            }
            (Type::Map(ka, va), Type::Map(kb, vb)) => Some(Type::map(
                more_general(ka, kb, marker)?,
                more_general(va, vb, marker)?,
            )),
            _ => None,
        }
    }
    /// Whether a value of type `arg` is a `declared` that holds `dyn`.
    fn accepts(declared: &Type, arg: &Type, marker: &Type) -> bool {
        match (declared, arg) {
            (Type::Dyn, _) => true,
            (_, a) if a == marker || matches!(a, Type::Param(_)) => true,
            (Type::List(d), Type::List(a)) | (Type::Optional(d), Type::Optional(a)) => {
                accepts(d, a, marker)
            }
            (Type::Map(dk, dv), Type::Map(ak, av)) => {
                accepts(dk, ak, marker) && accepts(dv, av, marker)
            }
            (d, a) => d == a,
        }
    }
    fn has_dyn_type(ty: &Type) -> bool {
        match ty {
            Type::Dyn => true,
            Type::List(t) | Type::Optional(t) => has_dyn_type(t),
            Type::Map(k, v) => has_dyn_type(k) || has_dyn_type(v),
            _ => false,
        }
    }
    /// A declared `dyn` is cel-go's: the marker.
    fn marked(ty: &Type, marker: &Type) -> Type {
        match ty {
            Type::Dyn => marker.clone(),
            Type::List(t) => Type::list(marked(t, marker)),
            Type::Optional(t) => Type::optional(marked(t, marker)),
            Type::Map(k, v) => Type::map(marked(k, marker), marked(v, marker)),
            other => other.clone(),
        }
    }
    fn substitute(pattern: &Pattern, bound: &[Option<Type>], marker: &Type) -> Option<Type> {
        Some(match pattern {
            Pattern::Is(t) => marked(t, marker),
            // A parameter nothing bound is free: cel-go binds it to what it meets later.
            Pattern::Param(i) => bound
                .get(*i)
                .cloned()
                .flatten()
                .unwrap_or_else(|| Type::param("_")),
            Pattern::List(e) => Type::list(substitute(e, bound, marker)?),
            Pattern::Optional(e) => Type::optional(substitute(e, bound, marker)?),
            Pattern::Map(k, v) => {
                Type::map(substitute(k, bound, marker)?, substitute(v, bound, marker)?)
            }
            Pattern::Opaque(..) => return None,
        })
    }
    let mut result: Option<Option<Type>> = None;
    for overload in overloads {
        if overload.member != member || overload.params.len() != args.len() {
            continue;
        }
        let mut bound = Vec::new();
        if overload
            .params
            .iter()
            .zip(args)
            .all(|(pattern, arg)| unify(pattern, arg, marker, &mut bound))
        {
            let ty = substitute(&overload.result, &bound, marker);
            result = Some(match result {
                None => ty,
                Some(previous) if previous == ty => previous,
                Some(_) => Some(marker.clone()),
            });
        }
    }
    result.flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_signature_parses() {
        let lines: Vec<&str> = SIGNATURES
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect();
        for line in &lines {
            assert!(parse_signature(line).is_some(), "{line}");
        }
        let declared: usize = DECLARATIONS.values().map(Vec::len).sum();
        // The ordering operators: 8 types with themselves and 6 pairs of numbers, each.
        assert_eq!(declared, lines.len() + 4 * (8 + 6));
    }

    #[test]
    fn signatures_are_read_as_written() {
        let (name, overload) = parse_signature("list(A).join(string) -> string").unwrap();
        assert_eq!(name, "join");
        assert!(overload.member);
        assert_eq!(
            overload.params,
            vec![
                Pattern::List(Box::new(Pattern::Param(0))),
                Pattern::Is(Type::String)
            ]
        );
        let (name, overload) = parse_signature("optional.of(A) -> optional(A)").unwrap();
        assert_eq!(name, "optional.of");
        assert!(!overload.member);
        let (name, overload) = parse_signature("optional.none() -> optional(dyn)").unwrap();
        assert_eq!(name, "optional.none");
        assert!(overload.params.is_empty());
    }
}
