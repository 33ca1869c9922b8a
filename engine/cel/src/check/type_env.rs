//! What a checked expression may read and call: the declared variables with their types
//! and size bounds, and the custom functions with their overloads ([`TypeEnv`]).

use std::collections::{BTreeMap, BTreeSet};

use super::decls;
use super::types::{Bounds, Type};

/// The types of the variables an expression may read, and the custom functions it may
/// call. Undeclared variables are `dyn`: the engine reports unknown variables itself.
#[derive(Debug, Clone, Default)]
pub struct TypeEnv {
    pub(super) variables: BTreeMap<String, Type>,
    /// Size bounds of variables that have some (see [`Bounds`]).
    pub(super) bounds: BTreeMap<String, Bounds>,
    pub(super) functions: BTreeSet<String>,
    /// The overloads of the custom functions declared with types.
    pub(super) overloads: BTreeMap<String, Vec<decls::Overload>>,
    /// Checked as Kubernetes checks: see [`TypeEnv::kubernetes`].
    pub(super) kubernetes: bool,
}

/// An overload of a custom function declared with types ([`TypeEnv::with_overload`]): the
/// types of its parameters and of its result, which may contain type parameters
/// ([`Type::Param`]). A call binds each type parameter to the types of the arguments passed
/// for it (`fn(T, T) -> list(T)` called with two `int`s gives a `list(int)`; with an `int`
/// and a `dyn`, a `list(dyn)`), as cel-go does; a type parameter the arguments leave
/// unbound is `dyn`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionOverload {
    /// Declared as a method (`receiver.f(args)`): the receiver is the first parameter.
    pub member: bool,
    pub params: Vec<Type>,
    pub result: Type,
}

impl FunctionOverload {
    /// `f(params) -> result`.
    pub fn global(params: Vec<Type>, result: Type) -> FunctionOverload {
        FunctionOverload {
            member: false,
            params,
            result,
        }
    }

    /// `receiver.f(params) -> result`.
    pub fn member(receiver: Type, params: Vec<Type>, result: Type) -> FunctionOverload {
        FunctionOverload {
            member: true,
            params: std::iter::once(receiver).chain(params).collect(),
            result,
        }
    }

    /// The overload as the checker resolves it: type parameters numbered.
    fn pattern(&self) -> decls::Overload {
        let mut names = Vec::new();
        let params = self
            .params
            .iter()
            .map(|p| decls::Pattern::declared(p, &mut names))
            .collect();
        decls::Overload {
            member: self.member,
            params,
            result: decls::Pattern::declared(&self.result, &mut names),
        }
    }
}

impl TypeEnv {
    pub fn new() -> TypeEnv {
        TypeEnv::default()
    }

    /// Declares (or redeclares) the variable `name`.
    #[must_use]
    pub fn with_variable(mut self, name: &str, ty: Type) -> TypeEnv {
        self.add_variable(name, ty);
        self
    }

    /// Declares (or redeclares) the variable `name`, without size bounds (those of the
    /// fields of an object type are in the type: see [`ObjectType::bounds`](super::ObjectType::bounds)).
    pub fn add_variable(&mut self, name: &str, ty: Type) {
        self.bounds.remove(name);
        self.variables.insert(name.to_string(), ty);
    }

    /// Declares (or redeclares) the variable `name`, whose values have the size bounds
    /// `bounds` (a list of at most so many elements, ...), which [`estimate_cost`](super::estimate_cost) reads.
    #[must_use]
    pub fn with_bounded_variable(mut self, name: &str, ty: Type, bounds: Bounds) -> TypeEnv {
        self.add_bounded_variable(name, ty, bounds);
        self
    }

    /// Declares (or redeclares) the variable `name` with size bounds: see
    /// [`TypeEnv::with_bounded_variable`].
    pub fn add_bounded_variable(&mut self, name: &str, ty: Type, bounds: Bounds) {
        self.add_variable(name, ty);
        if !bounds.is_unbounded() {
            self.bounds.insert(name.to_string(), bounds);
        }
    }

    /// Checks as Kubernetes' CEL environment does (strict mode: `switchyard cel --strict`,
    /// an expression meant for a CRD rule or an admission policy), beyond cel-go's checker:
    /// - list and map literals are homogeneous (Kubernetes'
    ///   `cel.ValidateHomogeneousAggregateLiterals`): `[1, 'a']` and `{'a': 1, 'b': 'x'}`
    ///   are refused with `expected type 'int' but found 'string'`, but inside a call of
    ///   `format`;
    /// - `null` is assignable only to the types cel-go makes nullable (`null == 1` is
    ///   refused);
    /// - variables declared [`Type::Dyn`] are what Kubernetes makes of a variable declared
    ///   `cel.DynType`, not values the checker cannot type: `[x, 1]` is refused (and so is
    ///   what cel-go types from one: see the module documentation).
    ///
    /// Without it (rules), a literal may mix types (rules build objects as map literals:
    /// `{'name': n, 'replicas': 3}`), `null` goes anywhere a value does (a rule writes
    /// `null` to clear a field), and only `dyn(x)` is `dyn` for sure.
    #[must_use]
    pub fn kubernetes(mut self) -> TypeEnv {
        self.kubernetes = true;
        self
    }

    /// The type of `name`, if declared.
    pub fn variable(&self, name: &str) -> Option<&Type> {
        self.variables.get(name)
    }

    /// The size bounds of `name`, if it has some.
    pub fn variable_bounds(&self, name: &str) -> Option<&Bounds> {
        self.bounds.get(name)
    }

    /// Declares a custom function (one added with [`crate::Env::with_function`]): its
    /// calls, in either style (`f(a)`, `a.f()`), are `dyn`, whatever their arguments
    /// (unless it has overloads declared with types: [`TypeEnv::with_overload`]).
    /// Functions the checker does not know are `dyn` anyway: this matters for a custom
    /// function named as a library function the checker knows but the evaluator does not
    /// provide (Kubernetes' `sort`, `sum`, `find`, ...).
    #[must_use]
    pub fn with_function(mut self, name: &str) -> TypeEnv {
        self.add_function(name);
        self
    }

    /// Declares a custom function: see [`TypeEnv::with_function`].
    pub fn add_function(&mut self, name: &str) {
        self.functions.insert(name.to_string());
    }

    /// Declares a custom function with types, or adds an overload to one: its calls have
    /// the result type of the overloads their arguments match (merged when several do, as
    /// with `dyn` arguments), and a call that matches none is reported as cel-go reports it
    /// (`found no matching overload for 'f' applied to '(int)'`). A call in the other style
    /// than declared (`a.f()` for `f(a)`) matches too, as the evaluator runs it.
    #[must_use]
    pub fn with_overload(mut self, name: &str, overload: FunctionOverload) -> TypeEnv {
        self.add_overload(name, overload);
        self
    }

    /// Declares an overload of a custom function: see [`TypeEnv::with_overload`].
    pub fn add_overload(&mut self, name: &str, overload: FunctionOverload) {
        self.add_function(name);
        self.overloads
            .entry(name.to_string())
            .or_default()
            .push(overload.pattern());
    }
}
