//! The names the engine writes onto objects and reads back: its labels, annotations, the
//! `Synced` condition and its reasons, and the states of a stage progress. Plain strings,
//! shared by every module; this module imports nothing.

/// Label carried by every output: the pack that owns it (prune selects on it).
pub const LABEL_PACK: &str = "switchyard.dev/pack";
/// Label carried by every output.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "switchyard";
/// Annotation: the pack version that produced the output.
pub const ANNOTATION_PACK_VERSION: &str = "switchyard.dev/pack-version";
/// Annotation: `rule/output` pairs that produced the output, comma-separated.
pub const ANNOTATION_RULE: &str = "switchyard.dev/rule";
/// Annotation: the triggers that desire the output (see [`crate::object::ObjectKey`]'s display), comma-separated.
pub const ANNOTATION_OWNERS: &str = "switchyard.dev/owners";
/// Annotation the broker writes once, when it creates an output (or adopts one): the
/// object's own uid. An object is the pack's only when it carries the pack's label and this
/// annotation equals its live uid: a copy of the object elsewhere, an object re-created by
/// someone else under the same name, or one that existed before the pack wanted it is never
/// updated or deleted as an output.
pub const ANNOTATION_CREATED: &str = "switchyard.dev/created";
/// Annotation the broker applies with every output: a hash of the content it applied
/// (without the owners annotation), so after a restart it can tell from the live object
/// that nothing needs writing.
pub const ANNOTATION_APPLIED: &str = "switchyard.dev/applied";
/// The `Synced` reason of a trigger whose output exists already, not created by the pack.
pub const REASON_ALREADY_EXISTS: &str = "AlreadyExists";
/// Annotation on an input object naming its cluster, `ROLE` or `ROLE/NAME` (dry-run inputs
/// only).
pub const ANNOTATION_CLUSTER: &str = "switchyard.dev/cluster";
/// On a test input or fixture: the object is invalid on purpose (what a pack does with an
/// object an older CRD let in); the value says why. Its CRD is not checked against it.
pub const ANNOTATION_INVALID_INPUT: &str = "switchyard.dev/invalid";
/// Annotation kcp puts on every object of a workspace: the workspace's logical cluster.
pub const ANNOTATION_KCP_CLUSTER: &str = "kcp.io/cluster";
/// The apiVersion and kind of a pack's own trigger: the one every rule without `watch`
/// evaluates for, named as the pack, in its source cluster role. It is no object of any
/// cluster: it gets no status, no finalizer, and is never read from a cluster.
pub const PACK_TRIGGER_API_VERSION: &str = "switchyard.dev/v1alpha1";
pub const PACK_TRIGGER_KIND: &str = "RulePack";

/// The condition type the engine manages on every trigger.
pub const CONDITION_SYNCED: &str = "Synced";

/// The `Synced` reason of a trigger whose output another trigger (or another of its own
/// outputs) renders differently.
pub const REASON_CONFLICT: &str = "Conflict";

/// Stage progress states, as written into the trigger's status.
pub const STAGE_IN_PROGRESS: &str = "InProgress";
pub const STAGE_COMPLETED: &str = "Completed";
pub const STAGE_FAILED: &str = "Failed";
