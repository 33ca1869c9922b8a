//! The function-registration API of the evaluator: how a library (the standard library,
//! the engine's functions, the Kubernetes libraries of `k8s/`) adds functions, and the type
//! of the functions the engine adds to an environment ([`CustomFunction`]).
//!
//! # For library authors
//!
//! A library function is a pure Rust function over [`Value`]s:
//!
//! ```ignore
//! use crate::registry::{Overload, Param, Value};
//! use crate::EvalError;
//!
//! fn is_quantity(args: &[Value]) -> Result<Value, EvalError> {
//!     let Value::String(s) = &args[0] else { unreachable_types() };  // see below
//!     Ok(Value::Bool(parse_quantity(s).is_ok()))
//! }
//!
//! pub(crate) fn overloads() -> Vec<Overload> {
//!     vec![
//!         Overload::global("isQuantity", &[Param::String], is_quantity),
//!         // `q.add(r)`: a method; the receiver is args[0]
//!         Overload::method("add", &[Param::Opaque("kubernetes.Quantity"), Param::Int], add_int),
//!         // size-dependent work: cost grows with the arguments' sizes
//!         Overload::method("find", &[Param::String, Param::String], find).linear_cost(),
//!     ]
//! }
//! ```
//!
//! The rules:
//!
//! - `name` is the function name as written: `isQuantity`, `add`, or a qualified name
//!   `ip.isCanonical` for a namespaced global function (written `ip.isCanonical(s)`). A
//!   name with an `@` (`math.@max`) cannot be written: only a macro's expansion calls it
//!   (`math.greatest(a, b)`, see `macros.rs`).
//! - [`Overload::global`] is called as `name(a, b)`; [`Overload::method`] as `a.name(b)`,
//!   with the receiver `a` as `args[0]`. A function callable both ways is registered twice.
//! - `params` has one [`Param`] per argument, the receiver included: the arity is
//!   `params.len()`. The evaluator calls the first overload of the name, call style and
//!   arity whose params all match the arguments' runtime types, so a function may assume
//!   the types its params say (and match on them without a fallback that can be reached;
//!   return [`no_such_overload`] from such an arm rather than panicking). When no overload
//!   matches, the call fails with CEL's `no matching overload for 'name' applied to (...)`.
//! - Errors are `EvalError::new("message")`; the evaluator adds the position of the call.
//!   Functions must not panic on any input.
//! - Library types (quantity, IP, CIDR, semver, URL, ...) are [`Value::Opaque`] values of a
//!   type implementing [`Opaque`] (type name, equality, order, string form); match them with
//!   [`Param::Opaque`] and read them with [`Value::downcast_opaque`].
//! - Type names a library adds (for `type(x) == net.IP`) are registered with
//!   [`Registry::add_type`], each with its library (`k8s::types()` below).
//! - Cost: each call costs 1 unless the overload says [`Overload::linear_cost`]: then
//!   1 + (sum of the sizes of its string, bytes, list and map arguments) / 10. Work that is
//!   not linear in the arguments (comparing pairs, sorting, comparing elements deeply) is
//!   charged before the call by [`Overload::work`], which is told what is left of the
//!   budget so that counting stops there; a function that builds a value says [`Overload::builds`], and is
//!   charged for the value it returns (see `limits.rs`). A function that builds must check
//!   the size of what it builds against `limits::MAX_STRING_BYTES` and
//!   `limits::MAX_ELEMENTS` before it allocates it.
//!
//! The Kubernetes libraries' entry point, `k8s/mod.rs`, exposes
//! `pub(crate) fn overloads() -> Vec<Overload>` and
//! `pub(crate) fn types() -> Vec<(Type, Library)>`; [`crate::builtins`] registers them with
//! the other libraries, each overload tagged with its library ([`Overload::in_library`]),
//! and each environment keeps those of its libraries.
//!
//! The registry knows no library: the libraries register into it, and it keeps what each
//! overload and type says of its library.

use std::collections::HashMap;
use std::sync::Arc;

use crate::environment::Library;
use crate::error::EvalError;
#[allow(unused_imports)]
pub(crate) use crate::value::{Key, Map, Opaque, Type, Value, compare, equals};

/// A function the engine adds to the environment (for example `decide`, which reads the
/// pack's decision tables). Arguments and result cross as JSON (see [`Value::to_json`]).
///
/// It is called with the arguments the expression passes, however many: `f()`, `f(a)` and
/// `f(a, b)` all call it, as does `a.f(b)`, with `a` as the first argument. An `Err` fails
/// the evaluation with the message `name: error`.
pub type CustomFunction =
    Arc<dyn Fn(&[serde_json::Value]) -> Result<serde_json::Value, String> + Send + Sync>;

/// A library function's implementation: the arguments (receiver first) to a result.
pub(crate) type Function = Arc<dyn Fn(&[Value]) -> Result<Value, EvalError> + Send + Sync>;

/// The work of a call that is not linear in its arguments, from the arguments, in units of
/// cost. The second argument is what is left of the budget: past it the exact figure does
/// not matter, and a function may stop counting once its answer is over it.
pub(crate) type Work = fn(&[Value], u64) -> u64;

/// The runtime type an argument must have for an overload to apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(dead_code)]
pub(crate) enum Param {
    /// Any value.
    Any,
    Null,
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    List,
    Map,
    Timestamp,
    Duration,
    Type,
    Optional,
    /// A library value whose [`Opaque::type_name`] is this.
    Opaque(&'static str),
}

impl Param {
    pub(crate) fn matches(self, value: &Value) -> bool {
        match (self, value) {
            (Param::Any, _)
            | (Param::Null, Value::Null)
            | (Param::Bool, Value::Bool(_))
            | (Param::Int, Value::Int(_))
            | (Param::Uint, Value::Uint(_))
            | (Param::Double, Value::Double(_))
            | (Param::String, Value::String(_))
            | (Param::Bytes, Value::Bytes(_))
            | (Param::List, Value::List(_))
            | (Param::Map, Value::Map(_))
            | (Param::Timestamp, Value::Timestamp(_))
            | (Param::Duration, Value::Duration(_))
            | (Param::Type, Value::Type(_))
            | (Param::Optional, Value::Optional(_)) => true,
            (Param::Opaque(name), Value::Opaque(o)) => o.type_name() == name,
            _ => false,
        }
    }
}

/// How a call's cost is counted (see [`crate::Limits`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cost {
    /// 1 per call.
    Unit,
    /// 1 + (sum of the sizes of the string, bytes, list and map arguments) / 10.
    Linear,
}

/// One overload of a library function.
#[derive(Clone)]
pub(crate) struct Overload {
    /// The function name as written (`isQuantity`, `add`, `ip.isCanonical`).
    pub name: String,
    /// Called as a method (`a.name(b)`, `a` being `args[0]`) rather than as `name(a, b)`.
    pub receiver: bool,
    /// The arguments' types, the receiver first; the arity is their number.
    pub params: Vec<Param>,
    pub function: Function,
    pub cost: Cost,
    /// Work charged before the call, from the arguments (see [`Overload::work`]).
    pub work: Option<Work>,
    /// Charged after the call for the value it returns (see [`Overload::builds`]).
    pub builds: bool,
    /// The argument that is a regular expression, whose compilation is charged (once per
    /// pattern and evaluation; see [`Overload::pattern`]).
    pub pattern: Option<usize>,
    /// The library the overload belongs to: an environment without it does not have it.
    pub library: Library,
}

impl Overload {
    /// A global function `name(args...)`.
    pub(crate) fn global(
        name: &str,
        params: &[Param],
        function: impl Fn(&[Value]) -> Result<Value, EvalError> + Send + Sync + 'static,
    ) -> Overload {
        Overload {
            name: name.to_string(),
            receiver: false,
            params: params.to_vec(),
            function: Arc::new(function),
            cost: Cost::Unit,
            work: None,
            builds: false,
            pattern: None,
            library: Library::Base,
        }
    }

    /// A method `receiver.name(args...)`: `params[0]` is the receiver's.
    pub(crate) fn method(
        name: &str,
        params: &[Param],
        function: impl Fn(&[Value]) -> Result<Value, EvalError> + Send + Sync + 'static,
    ) -> Overload {
        Overload {
            receiver: true,
            ..Overload::global(name, params, function)
        }
    }

    /// The call's cost grows with its arguments' sizes (see [`Cost::Linear`]).
    #[must_use]
    pub(crate) fn linear_cost(mut self) -> Overload {
        self.cost = Cost::Linear;
        self
    }

    /// The call does work that is not linear in its arguments' sizes: `work` says how much,
    /// from the arguments, and is charged before the call so that the work never starts
    /// past the limit.
    #[must_use]
    pub(crate) fn work(mut self, work: Work) -> Overload {
        self.work = Some(work);
        self
    }

    /// The call builds a string, bytes, list or map: it is charged for the result
    /// (`limits::creation_cost`), whose size is also checked against the limits.
    #[must_use]
    pub(crate) fn builds(mut self) -> Overload {
        self.builds = true;
        self
    }

    /// Argument `index` is a regular expression the call compiles (see `limits.rs` for
    /// the charge).
    #[must_use]
    pub(crate) fn pattern(mut self, index: usize) -> Overload {
        self.pattern = Some(index);
        self
    }

    /// The overload belongs to `library` (see [`crate::CelEnvironment`]).
    #[must_use]
    pub(crate) fn in_library(mut self, library: Library) -> Overload {
        self.library = library;
        self
    }

    pub(crate) fn applies_to(&self, args: &[Value]) -> bool {
        self.params.len() == args.len() && self.params.iter().zip(args).all(|(p, a)| p.matches(a))
    }
}

/// The error a function returns for arguments its params admit but it cannot handle.
#[allow(dead_code)]
pub(crate) fn no_such_overload(function: &str, args: &[Value]) -> EvalError {
    let types: Vec<String> = args.iter().map(Value::type_name).collect();
    EvalError::new(format!(
        "no matching overload for '{function}' applied to ({})",
        types.join(", ")
    ))
}

/// The overloads of an environment, by name, call style and arity.
#[derive(Clone, Default)]
pub(crate) struct Registry {
    functions: HashMap<(String, bool), Vec<Overload>>,
    /// Type names usable as values, each with its library.
    types: HashMap<&'static str, (Type, Library)>,
}

impl Registry {
    pub(crate) fn add(&mut self, overload: Overload) {
        self.functions
            .entry((overload.name.clone(), overload.receiver))
            .or_default()
            .push(overload);
    }

    pub(crate) fn add_all(&mut self, overloads: impl IntoIterator<Item = Overload>) {
        for o in overloads {
            self.add(o);
        }
    }

    /// Adds a type name usable as a type value in expressions (`net.IP`), of `library`.
    #[allow(dead_code)]
    pub(crate) fn add_type(&mut self, t: Type, library: Library) {
        self.types.insert(t.name(), (t, library));
    }

    pub(crate) fn type_named(&self, name: &str) -> Option<Type> {
        self.types.get(name).map(|(t, _)| *t)
    }

    /// The overloads of `name` called as a method (`receiver`) or globally.
    pub(crate) fn lookup(&self, name: &str, receiver: bool) -> Option<&[Overload]> {
        // A `(String, bool)` key needs an owned string to look up: the maps are small and
        // this runs at compile time only.
        self.functions
            .get(&(name.to_string(), receiver))
            .map(Vec::as_slice)
    }

    /// Whether any overload has this name.
    pub(crate) fn has_name(&self, name: &str) -> bool {
        self.lookup(name, false).is_some() || self.lookup(name, true).is_some()
    }

    /// The overloads and types of the libraries `keep` accepts.
    pub(crate) fn filtered(&self, keep: impl Fn(Library) -> bool) -> Registry {
        let functions = self
            .functions
            .iter()
            .filter_map(|(key, overloads)| {
                let kept: Vec<Overload> = overloads
                    .iter()
                    .filter(|o| keep(o.library))
                    .cloned()
                    .collect();
                (!kept.is_empty()).then(|| (key.clone(), kept))
            })
            .collect();
        let types = self
            .types
            .iter()
            .filter(|(_, (_, library))| keep(*library))
            .map(|(name, entry)| (*name, *entry))
            .collect();
        Registry { functions, types }
    }

    /// The libraries of the overloads of `name` called as a method (`receiver`) or
    /// globally.
    pub(crate) fn libraries(
        &self,
        name: &str,
        receiver: bool,
    ) -> std::collections::BTreeSet<Library> {
        self.lookup(name, receiver)
            .unwrap_or_default()
            .iter()
            .map(|o| o.library)
            .collect()
    }

    /// The first segments of qualified function names (`ip` of `ip.isCanonical`).
    pub(crate) fn namespaces(&self) -> impl Iterator<Item = &str> {
        self.functions
            .keys()
            .filter_map(|(name, _)| name.split_once('.').map(|(ns, _)| ns))
            .chain(
                self.types
                    .keys()
                    .filter_map(|n| n.split_once('.').map(|(ns, _)| ns)),
            )
    }
}
