//! `evaluate()`: the one function both the dry-run CLI and the broker call.
//!
//! Read it in this order: `pipeline` (which rules run, each rule's steps), `context` (what an
//! expression may read, how a failure is recorded), `lookups`, `outputs`, `stages`, `status`.
//! The types an evaluation returns are in [`crate::outcome`], the names it writes onto objects
//! in [`crate::names`]; both are re-exported here.

mod bindings;
mod context;
mod conversions;
mod lookups;
mod outputs;
mod pipeline;
mod probe;
mod stages;
mod status;

pub(crate) use context::Record;
pub use conversions::Conversions;
pub(crate) use pipeline::evaluate_traced;
pub use pipeline::{evaluate, evaluate_in, evaluate_in_untraced, evaluate_untraced};
pub use probe::{Probe, probe_rule};

pub use crate::names::{
    ANNOTATION_CLUSTER, ANNOTATION_INVALID_INPUT, ANNOTATION_OWNERS, ANNOTATION_PACK_VERSION,
    ANNOTATION_RULE, CONDITION_SYNCED, LABEL_MANAGED_BY, LABEL_PACK, MANAGED_BY, REASON_CONFLICT,
    STAGE_COMPLETED, STAGE_FAILED, STAGE_IN_PROGRESS,
};
pub use crate::outcome::{
    DesiredObject, ErrorLocation, Outcome, Precedence, ReadKey, RuleError, TraceEntry, Trigger,
    TriggerFacts,
};
