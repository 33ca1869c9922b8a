//! The pack's names: the pack and its rule, the cluster roles, the portal's API version, and
//! the labels and annotations the rule reads or writes.

pub(super) const PACK: &str = "kcp-karmada";
pub(super) const PACK_VERSION: &str = "0.1.0";
pub(super) const RULE: &str = "fleet-workload";
pub(super) const FINALIZER: &str = "switchyard.dev/kcp-karmada";
pub(super) const SOURCE: &str = "source";
pub(super) const KARMADA: &str = "karmada";
pub(super) const PORTAL: &str = "platform.edge-portal.eu/v1alpha1";
pub(super) const ANNOTATION_WORKSPACE: &str = "kcp.io/cluster";
pub(super) const LABEL_WORKSPACE: &str = "edge-connect.eu/source-workspace";
pub(super) const LABEL_NAME: &str = "edge-connect.eu/source-name";
