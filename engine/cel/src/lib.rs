//! Switchyard's CEL environment.
//!
//! Every guard, variable and key expression of a rule pack is compiled and evaluated through
//! this crate. The `cel` crate is its parser only (grammar, macro expansion, source
//! positions, optional syntax); the evaluator is the crate's own.
//! Values cross the boundary as JSON ([`Value::from_json`], [`Value::to_json`]) with
//! Kubernetes conventions: JSON integers are CEL `int`, never `uint`.
//!
//! The API (stable for the engine):
//! - [`Env`]: the functions available to expressions (standard library, Kubernetes
//!   libraries, engine functions such as `sha256`), plus custom functions the engine adds,
//!   and the cost [`Limits`], in a [`CelEnvironment`]: a [`KubernetesVersion`] and
//!   [`Extension`]s.
//! - [`Env::compile`] -> [`Program`]: parse and plan once at load; errors carry line and
//!   column.
//! - [`Activation`]: the variables of one evaluation (and optionally its cost budget).
//! - [`Program::eval`] -> [`Value`] or [`EvalError`] (with the position of the failing
//!   node); [`Program::eval_with_cost`] also says what the evaluation cost.
//!
//! # Evaluation
//!
//! [`Env::compile`] lowers the parsed expression into a plan (`plan.rs`): variables resolved
//! to scope slots, function calls to their overloads, literals and constant operations
//! folded, macros to loops; [`Program::eval`] walks it (`eval.rs`). Values ([`Value`]) are
//! cheap to clone (strings, lists, maps and library values are shared), and an evaluation
//! borrows what it reads: a Kubernetes object converted once with [`Value::from_json`] is
//! bound into every evaluation by cloning an `Arc`, and comprehensions iterate over
//! borrowed elements. Maps iterate in key order.
//!
//! # Functions
//!
//! [`Env::new`] with [`CelEnvironment::all`] has what follows; an environment has the
//! libraries of its Kubernetes version and extensions only (the table is in
//! `environment.rs`), and [`Env::kubernetes`] is Kubernetes 1.34's base environment. A call
//! of a built-in function or macro outside the environment does not compile, and the message
//! names the version or extension that has it.
//!
//! - CEL's standard library (operators, `size`, `contains`, `startsWith`, `endsWith`,
//!   `matches` (Go's RE2 syntax, translated for the `regex` crate as `find` is: ASCII
//!   `\w \d \s \b`, counted repetitions up to 1000), conversions, `duration`/`timestamp`
//!   and their accessors, the macros `has`, `all`, `exists`, `exists_one`, `map`,
//!   `filter`);
//! - optional values, as Kubernetes enables them (`cel.OptionalTypes`): `optional.of`,
//!   `optional.none`, `optional.ofNonZeroValue`, `hasValue`, `value`, `or`, `orValue`,
//!   `optMap`, `optFlatMap`, `list.first()`, `list.last()` (version 2, Kubernetes 1.34),
//!   and the syntax `a.?b`, `a[?b]`, `[?a]`, `{?k: v}`;
//! - two-variable comprehensions (cel-go `ext.TwoVarComprehensions`, Kubernetes 1.32):
//!   `all(k, v, p)`, `exists(k, v, p)`, `existsOne(k, v, p)`, `transformList`,
//!   `transformMap`, `transformMapEntry`; and `cel.bind(name, init, expr)` (the extension
//!   `bindings`);
//! - the strings library, as Kubernetes enables it (cel-go `ext.Strings` version 2):
//!   `charAt`, `indexOf`, `lastIndexOf`, `lowerAscii`, `upperAscii`, `replace`, `split`,
//!   `substring`, `trim`, `join`, `format`, `strings.quote` (and `reverse`: see below);
//! - Kubernetes' libraries (`k8s/`): quantity, URL, IP, CIDR, semver, format, sets, the
//!   lists library and regex `find`/`findAll` (see its documentation for the list);
//! - the engine's functions: `sha256(string|bytes) -> string` (lowercase hex),
//!   `isDNS1123Label(string) -> bool`, `isDNS1123Subdomain(string) -> bool` and
//!   `dns1123Label(string) -> string` (see [`dns1123_label`] for the algorithm);
//! - the custom functions added with [`Env::with_function`].
//!
//! ## Beyond Kubernetes' base environment
//!
//! These are not in Kubernetes' CEL environment: an expression that uses them does not
//! compile (or fails) there. They only add names and syntax Kubernetes refuses, so an
//! expression Kubernetes accepts means the same here. The libraries are [`Extension`]s, in
//! an environment only when it names them.
//!
//! - cel-go's math extension (`ext.Math` version 2), in the `math` namespace:
//!   `math.greatest` and `math.least` (macros: one or more numbers of any numeric types,
//!   or a list of numbers), `math.ceil`, `math.floor`, `math.round`, `math.trunc`,
//!   `math.abs`, `math.sign`, `math.isInf`, `math.isNaN`, `math.isFinite`, `math.bitAnd`,
//!   `math.bitOr`, `math.bitXor`, `math.bitNot`, `math.bitShiftLeft`,
//!   `math.bitShiftRight`, `math.sqrt` (see `math.rs` for their results and errors);
//! - cel-go's encoders extension (`ext.Encoders`): `base64.encode(bytes) -> string` and
//!   `base64.decode(string) -> bytes` (padded or not);
//! - `reverse()` of a string, from version 3 of cel-go's strings library (Kubernetes
//!   enables version 2): the extension `strings-v3`;
//! - quoted field names, as cel-go's `EnableIdentEscapeSyntax` allows them:
//!   `` m.`content-type` ``, `` has(m.`foo.txt`) ``;
//! - a container to resolve variable names in, as cel-go's `cel.Container`
//!   ([`Env::with_container`]; [`Env::kubernetes`] has none, as Kubernetes).
//!
//! # Kubernetes settings
//!
//! As in Kubernetes: timestamps are in UTC (`cel.DefaultUTCTimeZone`: `getHours()` and the
//! other accessors answer in UTC unless given a time zone), numbers of different types
//! compare (`1 < 2.5`), and JSON integers are `int`. Kubernetes' type checker is not run
//! at compile time (see [`check`] for one): heterogeneous list and map literals are
//! accepted, and a type error surfaces when the expression is evaluated.
//!
//! # Limits
//!
//! The parser runs on a stack of its own; an expression longer than [`MAX_SOURCE_BYTES`],
//! with more than [`MAX_SOURCE_ELEMENTS`] separators (`,`), more than [`MAX_OPERATORS`]
//! operators or nested more than 96 levels deep does not compile; constant folding and the
//! compilation of constant patterns at compile time have a budget of their own. An
//! evaluation that needs more stack than its thread has left runs on a new stack segment.
//! Each evaluation is metered as Kubernetes' runtime cost is (see
//! [`Program::eval_with_cost`] for the units) and stops at [`Limits::per_expression`]
//! (1,000,000 by default) or the activation's budget. The units bound time (about a
//! microsecond each) and memory: no value an evaluation builds may pass 10 MB or 1,000,000
//! elements.

mod analysis;
pub mod check;
mod encoders;
mod env;
mod environment;
mod error;
mod eval;
mod format;
mod functions;
mod k8s;
mod limits;
mod macros;
mod math;
mod plan;
pub(crate) mod registry;
mod stdlib;
mod value;

#[cfg(test)]
mod tests;

pub use env::{
    Activation, CustomFunction, Env, Limits, MAX_OPERATORS, MAX_SOURCE_BYTES, MAX_SOURCE_ELEMENTS,
    Program, References,
};
pub use environment::{
    CelEnvironment, EnvironmentError, Extension, KubernetesVersion, SettingNames,
};
pub use error::{CompileError, EvalError};
pub use functions::{dns1123_label, is_dns1123_label, is_dns1123_subdomain, sha256_hex};
#[doc(hidden)]
pub use value::Inspect;
pub use value::{Duration, Key, Map, Opaque, Timestamp, Type, Value};
