//! Switchyard's pure evaluation core.
//!
//! A rule pack is data; [`evaluate()`] is the one function that turns a pack, a trigger
//! object, a snapshot of the world and a clock into an [`Outcome`]. The CLI's dry-run
//! commands and the in-cluster broker both call it, so what `render` prints is what `run`
//! applies.
//!
//! This crate does no I/O: packs are loaded from in-memory file sets ([`PackFiles`]), the
//! world is a trait the caller implements ([`World`]), and time is passed in.

pub mod diagnostic;
pub mod diff;
pub mod duration;
pub mod evaluate;
pub mod functions;
pub mod glob;
pub mod kinds;
pub mod markdown;
pub mod model;
pub mod names;
pub mod object;
pub mod outcome;
pub mod ownership;
pub mod pack;
pub mod params;
pub mod plan;
pub mod rbac;
pub mod simulate;
pub mod table;
pub mod template;
pub mod testing;
pub mod text;
pub mod validate;
pub mod yaml;

pub use diagnostic::{Diagnostic, Severity};
pub use evaluate::{Conversions, evaluate, evaluate_in, evaluate_untraced};
pub use object::{MemoryWorld, ObjectKey, World};
pub use outcome::{DesiredObject, Outcome, ReadKey, RuleError, TraceEntry, Trigger};
pub use pack::{LoadOptions, LoadResult, Pack, PackFiles, load, load_with};
pub use plan::{Plan, plan};
