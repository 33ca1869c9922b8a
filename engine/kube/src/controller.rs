//! The controller: turns watch events into work, evaluates triggers with the core's
//! `evaluate()`, and makes the clusters match the outcomes.
//!
//! State kept in memory, rebuilt from the clusters after a restart (level-triggered):
//! - per pack, each trigger's contribution (the objects it desires) and the reverse map from
//!   an output to the triggers that desire it;
//! - the dependency index: from everything an evaluation read (`Outcome.reads`) to the
//!   triggers that read it, so a change re-evaluates exactly those triggers;
//! - what was last applied to each output, so a converged system writes nothing.
//!
//! Prune safety: an output is deleted only when every watch its pack needs has synced, every
//! trigger of the pack has been evaluated once since start or reload, and no trigger whose
//! evaluation failed could still own it (see `Controller::prune`).
//!
//! The rooms: `state` (the controller and what it remembers), `index` (what to watch, who
//! read what), `work` (events into work items, and running one), `members` (members joining and leaving), `reconcile` (one trigger's
//! evaluation and its consequences), `contributions` (each trigger's desired objects and the
//! merge of shared outputs), `outputs` (apply and prune), `claims` (prune with sharding: each shard's claim on an
//! output), `status` (status and finalizers).

mod claims;
mod contributions;
mod index;
mod members;
mod outputs;
mod reconcile;
mod state;
mod status;
mod work;

pub use index::{RoleKind, role_clusters, role_plan, watch_plan};
pub use members::REASON_MEMBER_GONE;
pub use outputs::is_subset;
pub use state::{Controller, Counters, ReconcileError, Work, Writes};
pub use status::CLEANUP_POLL;
