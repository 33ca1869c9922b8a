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

mod env;
mod error;
mod value;

pub use env::{Activation, CustomFunction, Env, Program, References};
pub use error::{CompileError, EvalError};
pub use value::Value;
