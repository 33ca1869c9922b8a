//! The CEL type checker: types an expression against the types of its variables (for
//! Switchyard, the OpenAPI schemas of the watched kind and of the lookups) and reports what
//! cannot work, with its position, before anything runs:
//!
//! ```text
//! self.spec.replicsa > 1        undefined field 'replicsa' (did you mean 'replicas'?)
//! self.spec.replicas == 'three' found no matching overload for '_==_' applied to '(int, string)'
//! ```
//!
//! It follows cel-go's checker as Kubernetes runs it on CRD validation rules (same
//! messages, placed as cel-go places them): what Kubernetes refuses at compile time is
//! refused here, even between values of no declared type:
//!
//! ```text
//! 1 == 1u            found no matching overload for '_==_' applied to '(int, uint)'
//! true ? 1 : 'x'     found no matching overload for '_?_:_' applied to '(bool, int, string)'
//! [1] + ['a']        found no matching overload for '_+_' applied to '(list(int), list(string))'
//! duration('1x')     invalid duration argument
//! '%d'.format(['a']) error during formatting: decimal clause can only be used on integers, ...
//! ```
//!
//! Numbers of different types order (`1 < 2.5`, Kubernetes' cross-type numeric comparisons)
//! but are not equal (`1 == 1.0` is refused), a type parameter takes one type per call
//! (`optional.of(1).orValue('a')` is refused), the branches of `?:` have one type. Literal
//! durations, timestamps and regexes must be valid and a literal format string must fit its
//! literal arguments (Kubernetes' validators).
//!
//! A format call has no more arguments than clauses, and `flatten()` takes a list of lists
//! (`[1, 2].flatten()` is refused), as cel-go's declarations and validators say.
//!
//! With [`TypeEnv::kubernetes`] (strict mode: [`crate::Env::strict`], `switchyard cel
//! --strict`, CRD rules, the differential test against Kubernetes) also as Kubernetes' base
//! environment: list and map literals are homogeneous (`[1, 'a']`: `expected type 'int' but
//! found 'string'`), `null` is assignable only to what cel-go makes nullable (`null == 1` is
//! refused), and a variable declared `dyn` is `dyn` for the literal check (`[x, 1]` is
//! refused), as is what cel-go derives from one: its fields and elements, the variables of
//! a comprehension over it, the lists `map` and `filter` make of it, and the results of
//! functions whose type parameters it binds (`[self.items.map(i, i.n).sum(), 1]` is
//! refused; `x[?k]` of such an `x` is a `dyn`, as cel-go types it). Rules check without
//! it: they build objects as map literals (`{'name': n, 'replicas': 3}`) and write `null`
//! to clear a field.
//!
//! One rule stays above all: **a valid expression is never reported for what the checker
//! does not know**. What it does not know is `dyn`, and that `dyn` is never an error:
//! undeclared variables, custom functions (`decide`), Kubernetes library functions with
//! types of their own (`quantity`, `url`, `ip`, ...), methods of `dyn` values, fields of
//! objects that keep unknown fields; only `dyn(x)` (and, as [`TypeEnv::kubernetes`], a
//! variable declared `dyn`) is `dyn` as Kubernetes sees it. Objects compare with objects and
//! maps (the checker does not name schema types as Kubernetes does). Where cel-go binds a
//! type not determined yet (the elements of `[]`) to the first overload that accepts it,
//! the checker leaves it open.
//!
//! Typed:
//! - literals, variables ([`TypeEnv`]), field selection on objects (undefined fields are
//!   reported, with a suggestion within two edits) and maps, `has()`, indexing of lists,
//!   maps and objects;
//! - custom functions declared with types ([`TypeEnv::with_overload`]): parameter and
//!   result types, type parameters bound by the arguments, abstract types such as
//!   `tuple(int, string)`;
//! - operators as cel-go declares them: arithmetic on `int`, `uint`, `double`, timestamps
//!   and durations (no mixing), `+` on strings, bytes and lists, ordering within a type and
//!   across numbers, `==`/`!=`/`in` between types assignable to each other, `!`, `&&`, `||`
//!   on `bool`, `?:` (a `bool` condition, branches of one type);
//! - the standard functions (`size`, `contains`, `startsWith`, `endsWith`, `matches`,
//!   conversions, timestamp and duration accessors), the strings extension, optionals
//!   (`.?f`, `[?k]`, `optional.of`, `orValue`, `hasValue`, `value`, `or`, `optMap`),
//!   Kubernetes' list and regex functions, cel-go's lists extension, `sets.*`, and the
//!   engine's functions (`sha256`, `isDNS1123Label`, ...);
//! - macros (`all`, `exists`, `exists_one`, `map`, `filter`): the iteration variable has the
//!   range's element type (a map's key type), `map` gives a list of its expression's type;
//! - empty literals: the elements of `[]` (the keys and values of `{}`) take the type of
//!   what they join, at any depth (`[[], [[[]]], [[1]]]` is a `list(list(list(int)))`),
//!   and are `dyn` if nothing determines them.
//!
//! [`estimate_cost`] gives the worst-case cost of an expression in the evaluator's units,
//! from the size bounds of its variables ([`Bounds`]: a schema's `maxItems`, `maxLength`,
//! `maxProperties`, ..., kept in the types [`type_from_openapi`] makes), or says which value
//! nothing bounds:
//!
//! ```text
//! self.spec.items.all(x, x > 0)   44 (maxItems: 10)
//! self.spec.items.all(x, x > 0)   unbounded: `self.spec.items` has no maxItems (at 1:1)
//! ```

mod checker;
mod cost;
mod decls;
mod openapi;
mod parse;
mod type_env;
mod types;

#[cfg(test)]
mod tests;

use std::panic::{AssertUnwindSafe, catch_unwind};

pub use checker::suggest;
pub use cost::{CostEstimate, Estimate, estimate, estimate_cost};
pub use openapi::{
    CrdKind, bounded_type_from_openapi, crd_kinds, custom_object_without_schema,
    custom_resource_meta, object_meta, object_type_for_kind, object_type_from_crd,
    object_type_without_schema, type_from_openapi,
};
pub use type_env::{FunctionOverload, TypeEnv};
pub use types::{Bounds, ObjectType, Type};

use crate::error::{CompileError, position_of_byte};
use parse::{PARSE_STACK, PARSER};

/// What does not type-check in an expression, and where. Positions are 1-based and count
/// characters of the expression source, as [`CompileError`]'s do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeIssue {
    pub message: String,
    /// 1-based line within the expression.
    pub line: usize,
    /// 1-based column (in characters) within that line.
    pub column: usize,
}

impl TypeIssue {
    /// The offending line of `source` with a caret under the issue (see
    /// [`CompileError::caret`]).
    pub fn caret(&self, source: &str) -> String {
        CompileError::new(self.message.clone(), self.line, self.column).caret(source)
    }
}

impl std::fmt::Display for TypeIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Checks a compiled program against the variable types of `env`: its result type
/// ([`Type::Dyn`] when unknown, [`Type::Error`] when the issues leave it undetermined; it
/// has no [`Type::Param`]) and its issues, in source order. A valid expression has none.
pub fn check(program: &crate::env::Program, env: &TypeEnv) -> (Type, Vec<TypeIssue>) {
    check_source(program.source(), env)
}

/// Parses `source` again, with the positions of its nodes (a [`crate::Program`] keeps
/// neither), and checks it. A source that does not parse has no issues here: compiling it
/// reports the error.
fn check_source(source: &str, env: &TypeEnv) -> (Type, Vec<TypeIssue>) {
    let run = || {
        stacker::grow(PARSE_STACK, || {
            let parser = PARSER.as_ref()?;
            let (expression, info) = parser
                .parser()
                .enable_ident_escape_syntax(true)
                .parse_with_source_info(source)
                .ok()?;
            let mut checker = checker::Checker::new(source, &info, env);
            let ty = checker.check(&expression).without_params();
            Some((ty, checker.issues))
        })
    };
    let Ok(Some((ty, mut issues))) = catch_unwind(AssertUnwindSafe(run)) else {
        return (Type::Dyn, Vec::new());
    };
    issues.sort_by_key(|(at, _)| *at);
    issues.dedup();
    let issues = issues
        .into_iter()
        .map(|(at, message)| {
            let (line, column) = position_of_byte(source, at);
            TypeIssue {
                message,
                line,
                column,
            }
        })
        .collect();
    (ty, issues)
}
