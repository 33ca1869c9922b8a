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
//! `plan.rs` and `eval.rs` import each other, as the interpreter recurses: the evaluator
//! walks the plan's nodes, and lowering evaluates each node whose operands are constants
//! (constant folding). They are the only two files of the crate that do; every other
//! import goes one way (see the module map below).
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
//!   `dns1123Label(string) -> string` (see [`dns1123_label`] for the algorithm) and
//!   `map(K, V).merge(map(K, V)) -> map(K, V)` (kro's: shallow, the argument's values win);
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
//!   `` m.`content-type` `` (but in strict mode), `` has(m.`foo.txt`) ``;
//! - a container to resolve variable names in, as cel-go's `cel.Container`
//!   ([`Env::with_container`]; [`Env::kubernetes`] has none, as Kubernetes).
//!
//! # Kubernetes settings
//!
//! As in Kubernetes: timestamps are in UTC (`cel.DefaultUTCTimeZone`: `getHours()` and the
//! other accessors answer in UTC unless given a time zone) and keep the offset they were
//! written with for `string()` (a Go `time.Time` does), numbers of different types compare
//! (`1 < 2.5`), and JSON integers are `int`. Strings convert as Go parses them (`uint('+1')`
//! fails, `double('0x1p-2')` and `double('1_000')` do not, timestamps as `time.Parse`
//! reads RFC 3339), `%f` and `%e` print through cel-go's locale printer (`1,234.50`,
//! `1.230000×10⁻⁰⁴`), a map literal keeps the last value of a repeated key, ordering NaN
//! is an error, and
//! `distinct`, `sort`, `sortBy` and `flatten` cost what Kubernetes charges (`sort` and
//! `sortBy` also order equal keys as Go's `sort.Slice` does).
//!
//! Kubernetes' type checker is not run by [`Env::compile`] (see [`check`] for one):
//! heterogeneous list and map literals are accepted, and a type error surfaces when the
//! expression is evaluated. In strict mode ([`Env::strict`], [`Strictness::Kubernetes`]),
//! for expressions meant for the API server (CRD validation rules, admission policies), it
//! is: [`Env::compile`] refuses what the API server refuses (Kubernetes' checker and its
//! validators, homogeneous literals, no quoted field names, no engine functions).
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
//!
//! # Module map
//!
//! From the public API down; a file imports only files below it, but `plan.rs` and
//! `eval.rs`, which import each other.
//!
//! - `lib.rs`: the public API (re-exports of the modules below) and this documentation.
//! - `strict.rs`: [`Env::compile`] and [`Strictness`]'s type check: above the checker,
//!   which compiles with an [`Env`] itself.
//! - `env.rs`: [`Env`], [`Program`], [`Activation`], [`Limits`], [`Strictness`]: parsing,
//!   analysing and planning, evaluating on a stack of the right size, the source limits,
//!   custom functions.
//! - `analysis.rs`: [`References`] (what an expression reads), its depth, and the calls
//!   outside the environment, from the parsed AST.
//! - `plan.rs`: the plan's nodes and the lowering of the AST into them (scopes, overload
//!   resolution, macros to loops, constant folding).
//! - `eval.rs`: the evaluator: walks a plan with the activation's variables, meters the cost.
//! - `builtins.rs`: every built-in library registered into one registry (`FULL_REGISTRY`).
//! - `stdlib.rs`: the standard library's registered functions: timestamps and durations,
//!   strings (v2, and `reverse` of v3), optional `first`/`last`, the engine's functions.
//! - `conversions.rs`: `int`, `uint`, `double`, `string`, `bool`, `bytes`, and how a double
//!   is written.
//! - `format.rs`: `string.format` (its clauses, and their check for the type checker);
//!   `format/locale.rs` how cel-go's locale printer writes `%f` and `%e`.
//! - `math.rs`: cel-go's math extension; `encoders.rs`: its base64 encoders.
//! - `macros.rs`: the macros the `cel` parser lacks (two-variable comprehensions,
//!   `cel.bind`, `math.greatest` and `math.least`).
//! - `k8s/`: Kubernetes' libraries as plain Rust (`quantity`, `url`, `ip`, `cidr`, `semver`,
//!   `format`, `lists`, `regex`, `sets`, with `decimal` and `go` beneath them); `register.rs`
//!   adapts them to the registry, `mod.rs` exposes their overloads and types.
//! - `registry.rs`: the function-registration API ([`CustomFunction`], overloads, params,
//!   cost kinds) and the registry of an environment, filtered by library.
//! - `limits.rs`: the bounds on what an evaluation builds and the charges for building and
//!   for regular expressions.
//! - `environment.rs`: [`CelEnvironment`]: Kubernetes versions, extensions and the libraries
//!   they bring.
//! - `value.rs`: [`Value`] and its parts (maps, keys, types, library values, timestamps
//!   with their offsets), equality, ordering, JSON, and how timestamps and durations are
//!   written and bounded.
//! - `golang.rs`: Go's parsing of the strings cel-go converts (`strconv`, `time`) and its
//!   writing of times and durations.
//! - `functions.rs`: the engine's own functions as plain Rust (`sha256`, DNS-1123).
//! - `error.rs`: [`CompileError`], [`EvalError`] and their positions.
//! - `check/`: the type checker and the cost estimator ([`check`]): `mod.rs` the API and
//!   [`check::check`], `type_env.rs` the declared variables and functions, `checker.rs` the
//!   typing walk, `cost.rs` the estimate, `decls.rs` the declared functions, `types.rs` the
//!   types, `openapi.rs` schemas to types, `parse.rs` the parser they share.
//! - Tests: `tests.rs` (the API), `test_support.rs` (the helpers the test modules share),
//!   `*/tests.rs` beside the modules they test, `check/tests/`; `tests/` the conformance
//!   suite, the differential test against Kubernetes and the limits; `benches/cel.rs`
//!   evaluation speed; `examples/` timings for scripts.

mod analysis;
mod builtins;
pub mod check;
mod conversions;
mod encoders;
mod env;
mod environment;
mod error;
mod eval;
mod format;
mod functions;
mod golang;
mod k8s;
mod limits;
mod macros;
mod math;
mod plan;
pub(crate) mod registry;
mod stdlib;
mod strict;
mod value;

#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;

pub use analysis::References;
pub use env::{
    Activation, Env, Limits, MAX_OPERATORS, MAX_SOURCE_BYTES, MAX_SOURCE_ELEMENTS, Program,
    Strictness,
};
pub use environment::{
    CelEnvironment, EnvironmentError, Extension, KubernetesVersion, SettingNames,
};
pub use error::{CompileError, EvalError};
pub use functions::{dns1123_label, is_dns1123_label, is_dns1123_subdomain, sha256_hex};
pub use registry::CustomFunction;
#[doc(hidden)]
pub use value::Inspect;
pub use value::same_str;
pub use value::{Duration, Key, Map, Needed, Opaque, Timestamp, Type, Value};
