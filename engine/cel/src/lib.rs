//! Switchyard's CEL environment.
//!
//! Every guard, variable and key expression of a rule pack is compiled and evaluated through
//! this crate, so the interpreter behind it can change without touching rules or the engine.
//! Values cross the boundary as JSON ([`Value::from_json`], [`Value::to_json`]) with
//! Kubernetes conventions: JSON integers are CEL `int`, never `uint`.
//!
//! The API (stable for the engine):
//! - [`Env`]: the functions available to expressions (standard library, Kubernetes
//!   libraries, engine functions such as `sha256`), plus custom functions the engine adds.
//! - [`Env::compile`] -> [`Program`]: parse once at load; errors carry line and column.
//! - [`Activation`]: the variables of one evaluation.
//! - [`Program::eval`] -> [`Value`] or [`EvalError`].
//!
//! # Functions
//!
//! [`Env::kubernetes`] has:
//!
//! - CEL's standard library (operators, `size`, `contains`, `startsWith`, `endsWith`,
//!   `matches`, conversions, `duration`/`timestamp` and their accessors, the macros `has`,
//!   `all`, `exists`, `exists_one`, `map`, `filter`);
//! - optional values, as Kubernetes enables them (`cel.OptionalTypes`): `optional.of`,
//!   `optional.none`, `optional.ofNonZeroValue`, `hasValue`, `value`, `or`, `orValue`,
//!   `optMap`, `optFlatMap`, and the syntax `a.?b`, `a[?b]`, `[?a]`, `{?k: v}`;
//! - the strings library, as Kubernetes enables it (cel-go `ext.Strings` version 2):
//!   `charAt`, `indexOf`, `lastIndexOf`, `lowerAscii`, `upperAscii`, `replace`, `split`,
//!   `substring`, `trim`, `join`, `format`, `strings.quote`. Its `reverse` (version 3) is
//!   refused at compile time, as Kubernetes does not have it;
//! - the engine's functions: `sha256(string|bytes) -> string` (lowercase hex),
//!   `isDNS1123Label(string) -> bool`, `isDNS1123Subdomain(string) -> bool` and
//!   `dns1123Label(string) -> string` (see [`dns1123_label`] for the algorithm);
//! - the custom functions added with [`Env::with_function`].
//!
//! The `cel` crate's lists, math and encoders libraries are not enabled: Kubernetes' base
//! environment has none of them (its `lists` library is its own: `isSorted`, `sum`, `min`,
//! `max`, `indexOf`, `lastIndexOf`). Kubernetes' own libraries (`quantity`, `url`, `ip`,
//! `cidr`, `semver`, `format`, `authz`, `sets`, regex `find`/`findAll`) are not implemented
//! by the `cel` crate and not available yet.
//!
//! # Kubernetes settings
//!
//! As in Kubernetes: timestamps are in UTC (`cel.DefaultUTCTimeZone`: `getHours()` and the
//! other accessors answer in UTC unless given a time zone), numbers of different types
//! compare (`1 < 2.5`), and JSON integers are `int`. Kubernetes' type checker is not run:
//! heterogeneous list and map literals are accepted, and a type error surfaces when the
//! expression is evaluated.
//!
//! # Limits
//!
//! The parser runs on a stack of its own; an expression with more than
//! [`MAX_OPERATORS`] operators or nested more than 96 levels deep does not compile. An
//! evaluation that needs more stack than its thread has left runs on a new stack segment.

mod analysis;
mod env;
mod error;
mod functions;
#[cfg_attr(not(test), allow(dead_code))]
mod k8s;
mod legacy_value;
// The evaluator's value model and function registry (being switched over to).
#[allow(dead_code, unused_imports)]
mod registry;
#[allow(dead_code)]
mod value;

#[cfg(test)]
mod tests;

pub use env::{Activation, CustomFunction, Env, MAX_OPERATORS, Program, References};
pub use error::{CompileError, EvalError};
pub use functions::{dns1123_label, is_dns1123_label, is_dns1123_subdomain, sha256_hex};
#[doc(hidden)]
pub use legacy_value::Inspect;
pub use legacy_value::Value;
