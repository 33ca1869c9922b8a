use std::collections::BTreeSet;
use std::sync::Arc;

use crate::{CompileError, EvalError, Value};

/// A function the engine adds to the environment (for example `decide`, which reads the
/// pack's decision tables). Arguments and result cross as JSON.
pub type CustomFunction =
    Arc<dyn Fn(&[serde_json::Value]) -> Result<serde_json::Value, String> + Send + Sync>;

/// The functions expressions may call. Build once per pack; cheap to clone.
#[derive(Clone)]
pub struct Env {
    inner: Arc<EnvInner>,
}

struct EnvInner {
    custom: Vec<(String, CustomFunction)>,
}

impl Env {
    /// The standard environment: CEL's standard library, the Kubernetes libraries and the
    /// engine's own functions.
    pub fn kubernetes() -> Env {
        Env {
            inner: Arc::new(EnvInner { custom: Vec::new() }),
        }
    }

    /// Adds a function callable as `name(args...)`.
    #[must_use]
    pub fn with_function(self, name: &str, function: CustomFunction) -> Env {
        let mut custom = self.inner.custom.clone();
        custom.push((name.to_string(), function));
        Env {
            inner: Arc::new(EnvInner { custom }),
        }
    }

    /// Parses `source` once; the program is evaluated many times.
    pub fn compile(&self, source: &str) -> Result<Program, CompileError> {
        let program = cel::Program::compile(source).map_err(|errors| {
            let first = errors.errors.first();
            CompileError {
                message: first.map(|e| e.msg.clone()).unwrap_or_else(|| "syntax error".into()),
                line: first.map(|e| e.pos.0.max(1) as usize).unwrap_or(1),
                column: first.map(|e| e.pos.1.max(0) as usize + 1).unwrap_or(1),
            }
        })?;
        let refs = program.references();
        let references = References {
            variables: refs.variables().into_iter().map(str::to_string).collect(),
            selections: BTreeSet::new(),
        };
        Ok(Program {
            source: source.into(),
            program: Arc::new(program),
            references,
        })
    }
}

/// A compiled expression.
#[derive(Clone)]
pub struct Program {
    source: Arc<str>,
    program: Arc<cel::Program>,
    references: References,
}

/// What an expression reads: root variables, and `root.field` selections (such as
/// `vars.namespace`) so the engine can order variables and lookups by dependency.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct References {
    pub variables: BTreeSet<String>,
    pub selections: BTreeSet<(String, String)>,
}

impl Program {
    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn references(&self) -> &References {
        &self.references
    }

    pub fn eval(&self, activation: &Activation) -> Result<Value, EvalError> {
        let mut ctx = cel::Context::default();
        for (name, f) in &activation.env.inner.custom {
            let f = f.clone();
            let fname = name.clone();
            let _ = ctx.add_function(name, move |args: cel::extractors::Arguments| {
                let json: Vec<serde_json::Value> = args
                    .0
                    .iter()
                    .map(|v| v.json().unwrap_or(serde_json::Value::Null))
                    .collect();
                f(&json)
                    .map(|v| Value::from_json(&v).0)
                    .map_err(|e| cel::ExecutionError::function_error(&fname, e))
            });
        }
        for (name, value) in &activation.variables {
            ctx.add_variable_from_value(name.as_str(), value.0.clone());
        }
        self.program
            .execute(&ctx)
            .map(Value)
            .map_err(|e| EvalError::new(e.to_string()))
    }
}

/// The variables of one evaluation.
pub struct Activation<'e> {
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

    pub fn bind(&mut self, name: &str, value: Value) {
        self.variables.retain(|(n, _)| n != name);
        self.variables.push((name.to_string(), value));
    }
}
