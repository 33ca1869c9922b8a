//! Helpers the test modules share: the environment with everything the engine implements,
//! and an evaluation of a source with no variables.

use crate::env::{Activation, Env};
use crate::environment::CelEnvironment;
use crate::value::Inspect;

/// Everything the engine implements: the newest Kubernetes version and every extension.
/// The environments' gating has tests of its own (`environments_*`).
pub(crate) fn full_env() -> Env {
    Env::new(CelEnvironment::all())
}

/// Compiles and evaluates `source` with no variables: the value, or the error text
/// (`compile: ...` for a compile error). Shared by the library modules' tests.
pub(crate) fn eval_source(source: &str) -> Result<Inspect, String> {
    let env = full_env();
    let program = env.compile(source).map_err(|e| format!("compile: {e}"))?;
    program
        .eval(&Activation::new(&env))
        .map(|v| v.inspect())
        .map_err(|e| e.message)
}
