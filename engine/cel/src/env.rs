use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use cel::FunctionContext;
use cel::common::value::CowVal;

use crate::analysis::analyse;
use crate::error::{compile_error, eval_error, position_of_byte};
use crate::legacy_value::val_to_json;
use crate::{CompileError, EvalError, Value};

/// A function the engine adds to the environment (for example `decide`, which reads the
/// pack's decision tables). Arguments and result cross as JSON (see [`Value::to_json`]).
///
/// It is called with the arguments the expression passes, however many: `f()`, `f(a)` and
/// `f(a, b)` all call it, as does `a.f(b)`, with `a` as the first argument. An `Err` fails
/// the evaluation with the message `name: error`.
pub type CustomFunction =
    Arc<dyn Fn(&[serde_json::Value]) -> Result<serde_json::Value, String> + Send + Sync>;

/// Expressions longer than this many operators are refused (see [`Env::compile`]).
pub const MAX_OPERATORS: usize = 1000;

/// The stack the parser runs on: the `cel` parser recurses deeply (about 64 KiB per level of
/// nesting in debug builds), so it never runs on the caller's stack.
const PARSE_STACK: usize = 256 * 1024 * 1024;

/// Stack an evaluation needs at least, and per level of AST depth, before it starts: when
/// the caller's stack has less left, the evaluation runs on a new stack segment.
const EVAL_STACK_BASE: usize = 256 * 1024;
const EVAL_STACK_PER_LEVEL: usize = 64 * 1024;

/// The functions expressions may call. Build once per pack; cheap to clone.
///
/// The `cel` context holding the standard library, the extensions and the custom
/// functions is built once here; every evaluation only adds a scope with its variables.
#[derive(Clone)]
pub struct Env {
    inner: Arc<EnvInner>,
}

struct EnvInner {
    custom: Vec<(String, CustomFunction)>,
    /// The environment, or why it could not be built (a custom function whose name is
    /// taken by a built-in one): every compile reports it.
    built: Result<Built, String>,
}

struct Built {
    cel: Arc<cel::Env>,
    root: cel::Context<'static, 'static>,
    /// First segments of qualified function names (`optional`, `strings`).
    namespaces: BTreeSet<String>,
}

impl Env {
    /// The standard environment: CEL's standard library with optional values, the
    /// Kubernetes libraries the `cel` crate implements (see the crate documentation) and the
    /// engine's own functions.
    pub fn kubernetes() -> Env {
        Env::build(Vec::new())
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
        Env::build(custom)
    }

    fn build(custom: Vec<(String, CustomFunction)>) -> Env {
        let built = build(&custom);
        Env {
            inner: Arc::new(EnvInner { custom, built }),
        }
    }

    fn built(&self) -> Result<&Built, CompileError> {
        self.inner
            .built
            .as_ref()
            .map_err(|e| CompileError::new(e.clone(), 1, 1))
    }

    /// Parses `source` once; the program is evaluated many times.
    ///
    /// Besides syntax errors, refuses an expression with more than [`MAX_OPERATORS`]
    /// operators, nested more than 96 levels deep, or calling a function of the `cel`
    /// crate's libraries that Kubernetes does not have (`'abc'.reverse()`).
    pub fn compile(&self, source: &str) -> Result<Program, CompileError> {
        let built = self.built()?;
        let operators = count_operators(source);
        if operators > MAX_OPERATORS {
            return Err(CompileError::new(
                format!(
                    "the expression is too long: {operators} operators, at most {MAX_OPERATORS}"
                ),
                1,
                1,
            ));
        }
        let parse = || {
            stacker::grow(PARSE_STACK, || {
                let (mut expression, source_info) = built
                    .cel
                    .parser()
                    .parse_with_source_info(source)
                    .map_err(|errors| compile_error(source, &errors))?;
                let analysis = analyse(&expression, &built.namespaces);
                crate::functions::normalize_timestamps(&mut expression);
                Ok::<_, CompileError>((expression, source_info, analysis))
            })
        };
        let (expression, source_info, analysis) =
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
        if let Some((id, name, message)) = analysis.unavailable {
            let (line, column) = source_info.offset_for(id).map_or((1, 1), |(start, _)| {
                let start = usize::try_from(start).unwrap_or(0);
                position_of_byte(source, name_start(source, start, &name))
            });
            return Err(CompileError::new(message, line, column));
        }
        Ok(Program {
            source: source.into(),
            expression: Arc::new(expression),
            references: analysis.references,
            env: self.clone(),
            red_zone: EVAL_STACK_BASE
                .saturating_add(analysis.depth.saturating_mul(EVAL_STACK_PER_LEVEL)),
        })
    }
}

fn build(custom: &[(String, CustomFunction)]) -> Result<Built, String> {
    let mut env = cel::Env::stdlib();
    env.add_extension(cel::extensions::strings)
        .and_then(|()| crate::functions::register(&mut env))
        .map_err(|e| format!("the CEL environment cannot be built: {e}"))?;
    let env = Arc::new(env);
    let mut root = cel::Context::with_env(Arc::clone(&env));
    let mut namespaces: BTreeSet<String> = ["optional", "strings"].map(String::from).into();
    for (name, function) in custom {
        root.add_function(name, custom_function(name, Arc::clone(function)))
            .map_err(|_| {
                format!("the function '{name}' cannot be added: a built-in function has that name")
            })?;
        if let Some((namespace, _)) = name.split_once('.') {
            namespaces.insert(namespace.to_string());
        }
    }
    Ok(Built {
        cel: env,
        root,
        namespaces,
    })
}

/// The boxed function `cel` calls: it passes the receiver (`a` of `a.f(b)`) and the
/// arguments as JSON and takes the result back from JSON.
type CelFunction = Box<
    dyn for<'c, 'k> Fn(&mut FunctionContext<'c, 'k>) -> Result<CowVal<'c, 'k>, cel::ExecutionError>
        + Send
        + Sync,
>;

fn custom_function(name: &str, function: CustomFunction) -> CelFunction {
    let name = name.to_string();
    Box::new(move |ftx: &mut FunctionContext<'_, '_>| {
        let mut args = Vec::with_capacity(ftx.args.len() + 1);
        for (i, arg) in ftx.this.iter().chain(ftx.args.iter()).enumerate() {
            let json = val_to_json(arg.as_ref()).map_err(|reason| {
                cel::ExecutionError::function_error(
                    &name,
                    format!("argument {} cannot be passed as JSON: {reason}", i + 1),
                )
            })?;
            args.push(json);
        }
        let result = function(&args).map_err(|e| cel::ExecutionError::function_error(&name, e))?;
        Ok(CowVal::Owned(Value::from_json(&result).0))
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

/// The call's position is its `(`: moves it back to the function name before it.
fn name_start(source: &str, paren: usize, name: &str) -> usize {
    source
        .get(..paren)
        .map(str::trim_end)
        .filter(|prefix| prefix.ends_with(name))
        .map_or(paren, |prefix| prefix.len() - name.len())
}

/// Counts operator characters outside string literals: a bound on how deep the parser
/// recurses, which a long chain such as `a + a + ... + a` drives as much as nesting does.
fn count_operators(source: &str) -> usize {
    let mut count = 0;
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
            _ => {}
        }
    }
    count
}

/// A compiled expression.
#[derive(Clone)]
pub struct Program {
    source: Arc<str>,
    expression: Arc<cel::IdedExpr>,
    references: References,
    env: Env,
    /// The stack an evaluation wants left before it starts.
    red_zone: usize,
}

/// What an expression reads: root variables, and `root.field` selections (such as
/// `vars.namespace`) so the engine can order variables and lookups by dependency.
///
/// `variables` are the free identifiers: comprehension variables (`c` in
/// `x.exists(c, c.y)`) are not, nor are function namespaces (`optional` in
/// `optional.of(x)`). `selections` has `(root, field)` for every field selected directly on
/// a free identifier: `vars.namespace`, `has(vars.x)`, `vars.?x`, and the index forms
/// `vars['x']` and `vars[?'x']` with a string literal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct References {
    pub variables: BTreeSet<String>,
    pub selections: BTreeSet<(String, String)>,
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
            .field("custom_functions", &custom)
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
        let built = self.env.built().map_err(|e| EvalError::new(e.message))?;
        let mut scope = built.root.new_inner_scope();
        for (name, value) in &activation.variables {
            scope.add_variable_as_val(name.as_str(), value.to_boxed());
        }
        let expression = &*self.expression;
        let run = || {
            stacker::maybe_grow(self.red_zone, self.red_zone.saturating_mul(2), || {
                cel::Value::resolve_val(expression, &scope).map(CowVal::into_owned)
            })
        };
        // The interpreter has `expect`s of its own: a panic fails this evaluation only.
        match catch_unwind(AssertUnwindSafe(run)) {
            Ok(result) => result.map(Value::from_boxed).map_err(|e| eval_error(&e)),
            Err(panic) => Err(EvalError::new(format!(
                "internal error in the CEL interpreter: {}",
                panic_message(&*panic)
            ))),
        }
    }
}

/// The variables of one evaluation.
pub struct Activation<'e> {
    /// The environment the activation is for. A program evaluates with the functions of the
    /// environment that compiled it.
    #[allow(dead_code)]
    env: &'e Env,
    variables: Vec<(String, Value)>,
}

impl<'e> Activation<'e> {
    pub fn new(env: &'e Env) -> Self {
        Activation {
            env,
            variables: Vec::new(),
        }
    }

    /// Binds `name` to `value`, replacing an earlier binding of `name`.
    pub fn bind(&mut self, name: &str, value: Value) {
        if let Some(slot) = self.variables.iter_mut().find(|(n, _)| n == name) {
            slot.1 = value;
        } else {
            self.variables.push((name.to_string(), value));
        }
    }
}
