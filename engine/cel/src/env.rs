//! The environment ([`Env`]) and its programs: compiling an expression (parse, check that its
//! calls are in the environment, plan) into a [`Program`], and evaluating a program with the
//! variables of an [`Activation`] under the cost limits.
//!
//! [`Env::compile`] itself is in `strict.rs`, above the type checker: in strict mode
//! ([`Strictness::Kubernetes`]) it type-checks what this file parses and plans, and the
//! checker compiles with an [`Env`] too, so the two cannot be in one file without a circle.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use cel::common::ast::SourceInfo;

use crate::analysis::{Gate, References, analyse};
use crate::builtins::FULL_REGISTRY;
use crate::environment::CelEnvironment;
use crate::environment::Library;
use crate::error::{CompileError, EvalError, compile_error, position_of_byte};
use crate::eval::{Cx, Scope, eval, to_eval_error};
use crate::plan::{Lowering, Plan};
use crate::registry::{CustomFunction, Registry};
use crate::value::Value;

/// Expressions longer than this many operators are refused (see [`Env::compile`]).
pub const MAX_OPERATORS: usize = 1000;

/// Expressions longer than this many bytes are refused before they are parsed: the
/// parser's work and memory grow with the source (string escapes decode in worse than
/// linear time in the `cel` crate, which this crate does not patch). 100 KB is far above any
/// rule's expression (Kubernetes' CRD validation rules are a few hundred bytes).
pub const MAX_SOURCE_BYTES: usize = 100_000;

/// Expressions with more list, map or argument separators (`,`) than this are refused:
/// the parser's operator count does not see list elements, and each costs about 5 KB to
/// compile, so this bounds what compiling a literal allocates.
pub const MAX_SOURCE_ELEMENTS: usize = 10_000;

/// The stack the parser and the planner run on: the `cel` parser recurses deeply (about
/// 64 KiB per level of nesting in debug builds), so it never runs on the caller's stack.
const PARSE_STACK: usize = 256 * 1024 * 1024;

/// Stack an evaluation needs at least, and per level of AST depth, before it starts: when
/// the caller's stack has less left, the evaluation runs on a new stack segment.
const EVAL_STACK_BASE: usize = 256 * 1024;
const EVAL_STACK_PER_LEVEL: usize = 64 * 1024;

/// Names the evaluator implements itself: a custom function cannot take them.
const BUILTIN_NAMES: &[&str] = &[
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "int",
    "uint",
    "double",
    "string",
    "bool",
    "bytes",
    "dyn",
    "type",
    "hasValue",
    "value",
    "or",
    "orValue",
    "optional.of",
    "optional.none",
    "optional.ofNonZeroValue",
    "has",
    "all",
    "exists",
    "exists_one",
    "existsOne",
    "map",
    "filter",
    "optMap",
    "optFlatMap",
    "transformList",
    "transformMap",
    "transformMapEntry",
    "cel.bind",
];

/// Cost limits of evaluations (see [`Program::eval_with_cost`] for the units).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most one evaluation of one expression may cost; default 1,000,000.
    pub per_expression: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            per_expression: 1_000_000,
        }
    }
}

/// How closely an environment checks expressions against Kubernetes' CEL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strictness {
    /// As the engine compiles pack expressions. Kubernetes' checks that packs relax are
    /// off: list and map literals may mix types (`{'name': n, 'replicas': 3}`), `null` goes
    /// wherever a value does, field names may be quoted (`` m.`content-type` ``), and the
    /// engine's own functions (`sha256`, ...) are there. [`Env::compile`] does not run the
    /// type checker ([`crate::check::check`] does).
    #[default]
    Relaxed,
    /// As the API server compiles CRD validation rules and admission policies:
    /// [`Env::compile`] also runs the type checker with every check of Kubernetes' base
    /// environment on ([`crate::check::TypeEnv::kubernetes`]: homogeneous literals, `null`
    /// only where cel-go takes it) and fails on the first issue; quoted field names do not
    /// parse (`unsupported syntax: '`'`), and the engine's own functions are not in the
    /// environment.
    Kubernetes,
}

/// The functions expressions may call. Build once per pack; cheap to clone.
///
/// The parser (with its macros) and the function registry are built once here; every
/// compile lowers an expression against them, and every evaluation only reads its plan.
#[derive(Clone)]
pub struct Env {
    inner: Arc<EnvInner>,
}

struct EnvInner {
    custom: Vec<(String, CustomFunction)>,
    limits: Limits,
    strictness: Strictness,
    /// The Kubernetes version and extensions whose functions expressions may call.
    environment: CelEnvironment,
    /// The container's prefixes, most specific first (`com.example`, `com`); see
    /// [`Env::with_container`].
    container: Arc<[Arc<str>]>,
    /// The environment, or why it could not be built (a custom function whose name is
    /// taken by a built-in one): every compile reports it.
    built: Result<Built, String>,
}

struct Built {
    /// The `cel` environment, for its parser and macros only.
    parser: cel::Env,
    registry: Registry,
    /// First segments of qualified function names (`optional`, `strings`).
    namespaces: BTreeSet<String>,
}

impl Env {
    /// The default environment: Kubernetes' base environment of the newest version the
    /// engine implements, without extensions, and the engine's own functions (see
    /// [`CelEnvironment`]).
    pub fn kubernetes() -> Env {
        Env::new(CelEnvironment::default())
    }

    /// The functions and macros of `environment` (and the engine's own functions): an
    /// expression calling one outside it does not compile.
    pub fn new(environment: CelEnvironment) -> Env {
        Env::build(
            Vec::new(),
            Limits::default(),
            Strictness::default(),
            Arc::from([]),
            environment,
        )
    }

    /// This environment's custom functions, limits and container, in `environment`.
    #[must_use]
    pub fn with_environment(self, environment: CelEnvironment) -> Env {
        Env::build(
            self.inner.custom.clone(),
            self.inner.limits,
            self.inner.strictness,
            Arc::clone(&self.inner.container),
            environment,
        )
    }

    /// This environment, checking expressions as `strictness` says (see [`Strictness`]).
    #[must_use]
    pub fn with_strictness(self, strictness: Strictness) -> Env {
        Env::build(
            self.inner.custom.clone(),
            self.inner.limits,
            strictness,
            Arc::clone(&self.inner.container),
            self.inner.environment.clone(),
        )
    }

    /// This environment in strict mode ([`Strictness::Kubernetes`]): expressions compile
    /// only if the API server would compile them in a CRD validation rule or an admission
    /// policy.
    #[must_use]
    pub fn strict(self) -> Env {
        self.with_strictness(Strictness::Kubernetes)
    }

    /// How this environment checks expressions.
    pub fn strictness(&self) -> Strictness {
        self.inner.strictness
    }

    /// The Kubernetes version and extensions expressions compile in.
    pub fn environment(&self) -> &CelEnvironment {
        &self.inner.environment
    }

    /// Adds a function callable as `name(args...)`, replacing a custom function of the
    /// same name.
    ///
    /// A name that a built-in function already has (`size`, `sha256`, ...) cannot be
    /// used: every [`Env::compile`] of the returned environment then fails, saying so.
    #[must_use]
    pub fn with_function(self, name: &str, function: CustomFunction) -> Env {
        let mut custom = self.inner.custom.clone();
        custom.retain(|(n, _)| n != name);
        custom.push((name.to_string(), function));
        Env::build(
            custom,
            self.inner.limits,
            self.inner.strictness,
            Arc::clone(&self.inner.container),
            self.inner.environment.clone(),
        )
    }

    /// The cost limits of the programs this environment compiles.
    #[must_use]
    pub fn with_limits(self, limits: Limits) -> Env {
        Env::build(
            self.inner.custom.clone(),
            limits,
            self.inner.strictness,
            Arc::clone(&self.inner.container),
            self.inner.environment.clone(),
        )
    }

    /// Names variables are resolved in, as cel-go's `cel.Container` (Kubernetes sets none):
    /// in the container `com.example`, an identifier `y` reads the variable `com.example.y`
    /// if the activation has one, else `com.y`, else `y`. A qualified name `y.z` is looked
    /// up as a variable with a dotted name (see [`Activation::bind`]), longest first and,
    /// for each length, under each prefix of the container before as written. A leading
    /// dot (`.y`) names the variable `y` itself, whatever the container, and never a
    /// comprehension variable. An empty name is no container.
    #[must_use]
    pub fn with_container(self, container: &str) -> Env {
        let mut prefixes: Vec<Arc<str>> = Vec::new();
        let mut name = container.trim_matches('.');
        while !name.is_empty() {
            prefixes.push(Arc::from(name));
            name = name.rsplit_once('.').map_or("", |(parent, _)| parent);
        }
        Env::build(
            self.inner.custom.clone(),
            self.inner.limits,
            self.inner.strictness,
            Arc::from(prefixes),
            self.inner.environment.clone(),
        )
    }

    /// The cost limits in force.
    pub fn limits(&self) -> Limits {
        self.inner.limits
    }

    fn build(
        custom: Vec<(String, CustomFunction)>,
        limits: Limits,
        strictness: Strictness,
        container: Arc<[Arc<str>]>,
        environment: CelEnvironment,
    ) -> Env {
        let built = build(&custom, &environment, strictness);
        Env {
            inner: Arc::new(EnvInner {
                custom,
                limits,
                strictness,
                environment,
                container,
                built,
            }),
        }
    }

    fn built(&self) -> Result<&Built, CompileError> {
        self.inner
            .built
            .as_ref()
            .map_err(|e| CompileError::new(e.clone(), 1, 1))
    }

    /// [`Env::compile`] but the type checker: parses `source` once and plans its
    /// evaluation.
    pub(crate) fn parse_and_plan(&self, source: &str) -> Result<Program, CompileError> {
        let built = self.built()?;
        if source.len() > MAX_SOURCE_BYTES {
            return Err(CompileError::new(
                format!(
                    "the expression is too long: {} bytes, at most {MAX_SOURCE_BYTES}",
                    source.len()
                ),
                1,
                1,
            ));
        }
        let (operators, separators) = count_operators(source);
        if separators > MAX_SOURCE_ELEMENTS {
            return Err(CompileError::new(
                format!(
                    "the expression has too many elements: {separators} separators (','), \
                     at most {MAX_SOURCE_ELEMENTS}"
                ),
                1,
                1,
            ));
        }
        if operators > MAX_OPERATORS {
            return Err(CompileError::new(
                format!(
                    "the expression is too long: {operators} operators, at most {MAX_OPERATORS}"
                ),
                1,
                1,
            ));
        }
        let custom = &self.inner.custom;
        let parse = || {
            stacker::grow(PARSE_STACK, || {
                // Quoted field names are cel-go's `EnableIdentEscapeSyntax`, which Kubernetes
                // leaves off.
                let (expression, source_info) = built
                    .parser
                    .parser()
                    .enable_ident_escape_syntax(self.inner.strictness == Strictness::Relaxed)
                    .parse_with_source_info(source)
                    .map_err(|errors| compile_error(source, &errors))?;
                let gate = Gate {
                    environment: &self.inner.environment,
                    registry: &built.registry,
                    custom,
                };
                let analysis = analyse(&expression, &built.namespaces, &gate);
                let plan = Lowering::new(&built.registry, custom)
                    .with_environment(&self.inner.environment)
                    .with_container(Arc::clone(&self.inner.container))
                    .plan(&expression);
                // The AST is dropped here, on the big stack.
                drop(expression);
                Ok::<_, CompileError>((plan, source_info, analysis))
            })
        };
        let (plan, source_info, analysis) =
            catch_unwind(AssertUnwindSafe(parse)).map_err(|panic| {
                CompileError::new(
                    format!(
                        "internal error in the CEL parser: {}",
                        panic_message(&*panic)
                    ),
                    1,
                    1,
                )
            })??;
        // The first of the calls outside the environment, in the source.
        let first = analysis
            .unavailable
            .into_iter()
            .map(|(id, name, message)| {
                let start = source_info.offset_for(id).map_or(0, |(start, _)| {
                    name_start(source, usize::try_from(start).unwrap_or(0), &name)
                });
                (start, message)
            })
            .min_by_key(|(start, _)| *start);
        if let Some((start, message)) = first {
            let (line, column) = position_of_byte(source, start);
            return Err(CompileError::new(message, line, column));
        }
        Ok(Program {
            source: source.into(),
            plan: Arc::new(plan),
            source_info: Arc::new(source_info),
            references: analysis.references,
            limit: self.inner.limits.per_expression,
            red_zone: EVAL_STACK_BASE
                .saturating_add(analysis.depth.saturating_mul(EVAL_STACK_PER_LEVEL)),
        })
    }
}

/// The parser with every macro the engine expands: the standard ones, the lists
/// extension's `sortBy` (its functions are the registry's), the two-variable
/// comprehensions, `cel.bind`, `math.greatest` and `math.least`. The type checker parses
/// compiled expressions with it.
pub(crate) fn parser() -> Result<cel::Env, cel::DeclarationError> {
    parser_for(&CelEnvironment::all())
}

/// The parser with the macros of `environment` only.
fn parser_for(environment: &CelEnvironment) -> Result<cel::Env, cel::DeclarationError> {
    let mut parser = cel::Env::stdlib();
    if environment.has(Library::Lists) {
        parser.add_extension(cel::extensions::lists)?;
    }
    crate::macros::register(&mut parser, |library| environment.has(library))?;
    Ok(parser)
}

fn build(
    custom: &[(String, CustomFunction)],
    environment: &CelEnvironment,
    strictness: Strictness,
) -> Result<Built, String> {
    let parser =
        parser_for(environment).map_err(|e| format!("the CEL environment cannot be built: {e}"))?;
    let full = &*FULL_REGISTRY;
    // Strict: the engine's own functions are not Kubernetes'.
    let registry = full.filtered(|library| {
        environment.has(library)
            && !(strictness == Strictness::Kubernetes && library == Library::Switchyard)
    });
    // The namespaces of every library, available or not: `math.abs(x)` calls a function
    // (that the environment may refuse), it does not read a variable `math`.
    let mut namespaces: BTreeSet<String> = ["optional", "strings", "cel", "math"]
        .map(String::from)
        .into();
    namespaces.extend(full.namespaces().map(String::from));
    for (name, _) in custom {
        if full.has_name(name) || BUILTIN_NAMES.contains(&name.as_str()) {
            return Err(format!(
                "the function '{name}' cannot be added: a built-in function has that name"
            ));
        }
        if let Some((namespace, _)) = name.split_once('.') {
            namespaces.insert(namespace.to_string());
        }
    }
    Ok(Built {
        parser,
        registry,
        namespaces,
    })
}

/// The message of a caught panic.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

/// The call's position is its `(`: moves it back to the function name before it (the
/// whole of a qualified name such as `cel.bind` when it is written so, else its last
/// segment).
fn name_start(source: &str, paren: usize, name: &str) -> usize {
    let last = name.rsplit('.').next().unwrap_or(name);
    let prefix = source.get(..paren).map(str::trim_end);
    [name, last]
        .into_iter()
        .find_map(|n| prefix.filter(|p| p.ends_with(n)).map(|p| p.len() - n.len()))
        .unwrap_or(paren)
}

/// Counts operator characters outside string literals: a bound on how deep the parser
/// recurses, which a long chain such as `a + a + ... + a` drives as much as nesting does;
/// and the separators (`,`) of list elements, map entries and arguments.
fn count_operators(source: &str) -> (usize, usize) {
    let mut count = 0;
    let mut separators = 0;
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                // Skip the literal (triple-quoted ones too; an escape skips a character).
                let triple = chars.peek() == Some(&c) && {
                    let mut ahead = chars.clone();
                    ahead.next();
                    ahead.peek() == Some(&c)
                };
                if triple {
                    chars.next();
                    chars.next();
                }
                let mut run = 0;
                while let Some(d) = chars.next() {
                    if d == '\\' {
                        chars.next();
                        run = 0;
                    } else if d == c {
                        run += 1;
                        if !triple || run == 3 {
                            break;
                        }
                    } else {
                        run = 0;
                    }
                }
            }
            '+' | '-' | '*' | '/' | '%' | '<' | '>' | '=' | '!' | '&' | '|' | '?' | '.' | '['
            | '(' | '{' => count += 1,
            ',' => separators += 1,
            _ => {}
        }
    }
    (count, separators)
}

/// A compiled expression: its evaluation plan. Cheap to clone.
#[derive(Clone)]
pub struct Program {
    source: Arc<str>,
    plan: Arc<Plan>,
    source_info: Arc<SourceInfo>,
    references: References,
    /// The cost limit when the activation sets none.
    limit: u64,
    /// The stack an evaluation wants left before it starts.
    red_zone: usize,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program")
            .field("source", &self.source)
            .field("references", &self.references)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let custom: Vec<&str> = self.inner.custom.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Env")
            .field("environment", &self.inner.environment)
            .field("custom_functions", &custom)
            .field("limits", &self.inner.limits)
            .finish_non_exhaustive()
    }
}

impl Program {
    /// The expression as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// What the expression reads.
    pub fn references(&self) -> &References {
        &self.references
    }

    /// Evaluates the expression with the variables of `activation`, and the functions of
    /// the environment that compiled it.
    pub fn eval(&self, activation: &Activation) -> Result<Value, EvalError> {
        self.eval_with_cost(activation).map(|(value, _)| value)
    }

    /// Evaluates the expression, and says what the evaluation cost.
    ///
    /// Cost units, as Kubernetes' runtime cost counts them: 1 per expression node evaluated
    /// (a literal, a variable, a field selection, an operator, a call), 1 per iteration of
    /// a comprehension (`all`, `exists`, `map`, ...), and for the operations whose work
    /// grows with their operands (string and bytes concatenation, `contains`,
    /// `startsWith`, `endsWith`, `matches`, `in` on a list, the strings library) 1 more per
    /// 10 bytes or elements of the operands. Beyond Kubernetes' units, so that the limit
    /// bounds time and memory (about 1 unit per microsecond of work):
    ///
    /// - a value built (a list concatenation, `replace`, `join`, `split`, `format`,
    ///   `lists.range`, `distinct`, `sort`, `flatten`, ...) costs 1 per 10 bytes of a string
    ///   or bytes, 1 per element of a list;
    /// - `distinct()` 1 per element when its elements hash (null, bool, int, uint, string,
    ///   bytes), else 1 per pair of elements; `sets.contains` and `sets.intersects` the
    ///   product of the sizes (cel-go's `trackSetsCost`; the sum when both lists hash),
    ///   `sets.equivalent` twice that; `sort` and `sortBy` `n * ceil(log2 n)`; all charged
    ///   before the work starts;
    /// - compiling a pattern at evaluation time (`matches` with a pattern that is not a
    ///   constant, `find`, `findAll`) 1,000 and 40 per byte of the pattern, 5,000 more and
    ///   twice the bytes when it compiles past 64 KB, once per pattern and evaluation.
    ///
    /// No value an evaluation builds may pass 10 MB (strings, bytes) or 1,000,000 elements
    /// (lists, maps), whatever the budget: the evaluation fails with `... exceeds the size
    /// limit ...`. Patterns are at most 4 KB and compile to at most 256 KB.
    ///
    /// The limit is the activation's budget ([`Activation::with_budget`]), else the
    /// environment's [`Limits::per_expression`]. When the cost passes it the evaluation
    /// stops at once with the error `cost limit exceeded: <cost> > <limit>`.
    pub fn eval_with_cost(&self, activation: &Activation) -> Result<(Value, u64), EvalError> {
        self.eval_within(activation, activation.budget.unwrap_or(self.limit))
    }

    /// [`Program::eval_with_cost`] with the cost limit `limit`, whatever the activation's
    /// budget: one activation can serve expressions with different limits.
    pub fn eval_within(
        &self,
        activation: &Activation,
        limit: u64,
    ) -> Result<(Value, u64), EvalError> {
        let plan = &*self.plan;
        let run = || {
            stacker::maybe_grow(self.red_zone, self.red_zone.saturating_mul(2), || {
                let mut cx = Cx::new(limit);
                let scope = Scope::root(&activation.variables, activation.dotted);
                eval(&plan.root, &scope, &mut cx).map(|v| (v.into_owned(), cx.cost))
            })
        };
        // A custom function may panic: that fails this evaluation only.
        match catch_unwind(AssertUnwindSafe(run)) {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(fault)) => Err(to_eval_error(&fault, |id| self.position(id))),
            Err(panic) => Err(EvalError::new(format!(
                "internal error in the CEL interpreter: {}",
                panic_message(&*panic)
            ))),
        }
    }

    /// An upper bound of the cost of any evaluation, known without evaluating: `Some` only
    /// when no node can run more than once and none costs by the size of its operands (no
    /// comprehension, no string concatenation, ...). For a static cost estimator to build
    /// on.
    pub fn static_cost_bound(&self) -> Option<u64> {
        self.plan.static_cost
    }

    /// The 1-based line and column (in characters) of the AST node `id`.
    fn position(&self, id: u64) -> Option<(usize, usize)> {
        let (start, _) = self.source_info.offset_for(id)?;
        Some(position_of_byte(
            &self.source,
            usize::try_from(start).unwrap_or(0),
        ))
    }
}

/// The variables of one evaluation.
#[derive(Clone)]
pub struct Activation<'e> {
    /// The environment the activation is for. A program evaluates with the functions of the
    /// environment that compiled it.
    #[allow(dead_code)]
    env: &'e Env,
    /// Names are borrowed where the caller can lend them for `'e`: an activation is built
    /// per evaluation, and copying every name each time showed up in profiles.
    variables: Vec<(Cow<'e, str>, Value)>,
    /// Whether some name is dotted (`a.b`), kept as names are bound rather than looked for
    /// at every evaluation.
    dotted: bool,
    budget: Option<u64>,
}

impl<'e> Activation<'e> {
    pub fn new(env: &'e Env) -> Self {
        Self::with_capacity(env, 0)
    }

    /// An activation with room for `n` variables.
    pub fn with_capacity(env: &'e Env, n: usize) -> Self {
        Activation {
            env,
            variables: Vec::with_capacity(n),
            dotted: false,
            budget: None,
        }
    }

    /// Binds `name` to `value`, replacing an earlier binding of `name`.
    ///
    /// A dotted name (`a.b`) is read by the expression `a.b`, before the field `b` of a
    /// variable `a`: the longest dotted name bound wins (`a.b.c` reads `a.b` then selects
    /// `c`, when `a.b.c` is not bound).
    pub fn bind(&mut self, name: &str, value: Value) {
        self.bind_name(Cow::Owned(name.to_string()), value);
    }

    /// [`Activation::bind`] without copying the name.
    pub fn bind_borrowed(&mut self, name: &'e str, value: Value) {
        self.bind_name(Cow::Borrowed(name), value);
    }

    /// The value bound to `name`, to change in place.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut Value> {
        self.variables
            .iter_mut()
            .find(|(n, _)| crate::value::same_str(n, name))
            .map(|(_, v)| v)
    }

    /// Removes the binding of `name`, if any.
    pub fn unbind(&mut self, name: &str) {
        self.variables.retain(|(n, _)| n != name);
        self.dotted = self.variables.iter().any(|(n, _)| n.contains('.'));
    }

    fn bind_name(&mut self, name: Cow<'e, str>, value: Value) {
        self.dotted |= name.contains('.');
        if let Some(slot) = self
            .variables
            .iter_mut()
            .find(|(n, _)| crate::value::same_str(n, &name))
        {
            slot.1 = value;
        } else {
            self.variables.push((name, value));
        }
    }

    /// Limits the cost of each evaluation with this activation to `limit` (see
    /// [`Program::eval_with_cost`]), instead of the environment's [`Limits`].
    pub fn with_budget(&mut self, limit: u64) -> &mut Self {
        self.budget = Some(limit);
        self
    }
}
