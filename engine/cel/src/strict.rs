//! [`Env::compile`]: parse and plan (`env.rs`), and in strict mode
//! ([`Strictness::Kubernetes`]) type-check as the API server checks CRD validation rules and
//! admission policies ([`TypeEnv::kubernetes`]).
//!
//! Packs relax some of Kubernetes' checks, for reasons of their own: they build objects as
//! map literals of mixed values (`{'name': n, 'replicas': 3}`) and write `null` to clear a
//! field, quote field names that are not identifiers (`` m.`content-type` ``), and call the
//! engine's functions (`sha256`). An expression meant for the API server (a CRD's
//! `x-kubernetes-validations` rule, an admission policy, `switchyard cel --strict`) gets
//! none of that, so what compiles here compiles there.

use crate::check::{TypeEnv, check};
use crate::env::{Env, Program, Strictness};
use crate::error::CompileError;

impl Env {
    /// Parses `source` once and plans its evaluation; the program is evaluated many times.
    ///
    /// Besides syntax errors, refuses an expression with more than
    /// [`MAX_OPERATORS`](crate::MAX_OPERATORS) operators, nested more than 96 levels deep, or
    /// calling a built-in function or macro outside the environment (`cel.bind` without the
    /// extension `bindings`): the message names the Kubernetes version or the extension that
    /// has it. In strict mode, also what Kubernetes' type checker refuses (its first issue),
    /// every variable being of a type the checker does not know: see
    /// [`Env::compile_with_types`] to declare them.
    pub fn compile(&self, source: &str) -> Result<Program, CompileError> {
        self.compile_with_types(source, &TypeEnv::new())
    }

    /// [`Env::compile`], with the types of the variables for the type checker in strict
    /// mode (`self` of a CRD rule, the variables of `switchyard cel`, declared
    /// [`Type::Dyn`](crate::check::Type::Dyn) when their values are what Kubernetes makes
    /// `dyn`). Without strict mode the types are not read: [`crate::check::check`] checks.
    pub fn compile_with_types(
        &self,
        source: &str,
        types: &TypeEnv,
    ) -> Result<Program, CompileError> {
        let program = self.parse_and_plan(source)?;
        if self.strictness() == Strictness::Kubernetes
            && let Some(issue) = check(&program, &self.type_env_from(types.clone()))
                .1
                .into_iter()
                .next()
        {
            return Err(CompileError::new(issue.message, issue.line, issue.column));
        }
        Ok(program)
    }

    /// A [`TypeEnv`] that checks as this environment does: as Kubernetes'
    /// ([`TypeEnv::kubernetes`]) in strict mode, as packs' otherwise. Declare the variables
    /// in it for [`crate::check::check`].
    pub fn type_env(&self) -> TypeEnv {
        self.type_env_from(TypeEnv::new())
    }

    fn type_env_from(&self, types: TypeEnv) -> TypeEnv {
        match self.strictness() {
            Strictness::Kubernetes => types.kubernetes(),
            Strictness::Relaxed => types,
        }
    }
}
