//! The world of the broker benchmark (`src/bin/broker/`).
//!
//! `n` FleetWorkloads in [`NAMESPACES`] kcp namespaces `ns0..ns99`; namespace `nsK` is the
//! workspace `wsK` (every object in it carries the annotation `kcp.io/cluster: wsK`) and holds
//! one Fleet `f` with two clusterRefs. FleetWorkload `app-<i>` lives in `ns<i % 100>`; the
//! ones of the first [`PLACED_NAMESPACES`] namespaces name the PlacementPolicy `p<k>` of
//! their namespace (Weighted with weights for even `k`, FixedReplicas for odd `k`), the others
//! name none. Every FleetWorkload is valid: each renders a PropagationPolicy and a Deployment
//! into its workspace's Karmada namespace, which the 100 workspaces' triggers share.
//!
//! The FleetWorkloads with a PlacementPolicy also carry the label [`PLACED_LABEL`].
//!
//! The benchmark's pack edits:
//! - [`edit_propagation_policy_template`]: an annotation on the PropagationPolicy of exactly
//!   the FleetWorkloads that name a PlacementPolicy, in the template every trigger renders;
//! - [`split_rule`]: the rule as two, one per side of [`PLACED_LABEL`] (watch selectors), the
//!   labelled side rendering its PropagationPolicy from its own copy of the template,
//!   [`PLACED_TEMPLATE`], which [`edit_placed_template`] then edits: a template only the
//!   FleetWorkloads with a PlacementPolicy use.

use serde_json::{Value, json};
use switchyard_core::MemoryWorld;

/// kcp namespaces (= workspaces) the FleetWorkloads are spread over.
pub const NAMESPACES: usize = 100;
/// The first namespaces, whose FleetWorkloads name a PlacementPolicy.
pub const PLACED_NAMESPACES: usize = 10;
/// The annotation the template edit adds.
pub const EDIT_ANNOTATION: &str = "bench.switchyard.dev/edited";
/// The template the edit changes, relative to the pack folder.
pub const EDITED_TEMPLATE: &str = "templates/propagation-policy.yaml.hbs";
/// The label of the FleetWorkloads that name a PlacementPolicy.
pub const PLACED_LABEL: &str = "bench.switchyard.dev/placed";
/// The rule file [`split_rule`] splits, relative to the pack folder.
pub const RULE_FILE: &str = "rules/fleet-workload.yaml";
/// The second rule's file.
pub const PLACED_RULE_FILE: &str = "rules/fleet-workload-placed.yaml";
/// The second rule's copy of [`EDITED_TEMPLATE`].
pub const PLACED_TEMPLATE: &str = "templates/propagation-policy-placed.yaml.hbs";
/// The annotation [`edit_placed_template`] adds.
pub const PLACED_EDIT_ANNOTATION: &str = "bench.switchyard.dev/edited-placed";

const PORTAL: &str = "platform.edge-portal.eu/v1alpha1";

/// The kcp namespace of FleetWorkload `i`.
pub fn namespace_of(i: usize) -> String {
    format!("ns{}", i % NAMESPACES)
}

/// Whether FleetWorkload `i` names a PlacementPolicy.
pub fn is_placed(i: usize) -> bool {
    i % NAMESPACES < PLACED_NAMESPACES
}

fn meta(name: &str, k: usize) -> Value {
    json!({"name": name, "namespace": format!("ns{k}"),
           "annotations": {"kcp.io/cluster": format!("ws{k}")}})
}

/// The kcp namespaces `ns0..ns99` (core/v1 Namespaces of the source cluster).
pub fn namespaces() -> Vec<Value> {
    (0..NAMESPACES)
        .map(|k| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("ns{k}")}}))
        .collect()
}

/// One Fleet `f` per namespace, with two clusterRefs.
pub fn fleets() -> Vec<Value> {
    (0..NAMESPACES)
        .map(|k| {
            json!({"apiVersion": PORTAL, "kind": "Fleet", "metadata": meta("f", k),
                   "spec": {"clusterRefs": [{"name": "member-fra-1"}, {"name": "member-ams-1"}]}})
        })
        .collect()
}

/// The PlacementPolicy `p<k>` of each of the first [`PLACED_NAMESPACES`] namespaces.
pub fn placement_policies() -> Vec<Value> {
    (0..PLACED_NAMESPACES)
        .map(|k| {
            let spec = if k % 2 == 0 {
                json!({"strategy": "Weighted", "weights": [
                    {"cluster": "member-fra-1", "weight": k + 2},
                    {"cluster": "member-ams-1", "weight": 1}]})
            } else {
                json!({"strategy": "FixedReplicas"})
            };
            json!({"apiVersion": PORTAL, "kind": "PlacementPolicy",
                   "metadata": meta(&format!("p{k}"), k), "spec": spec})
        })
        .collect()
}

/// FleetWorkload number `i`.
pub fn fleet_workload(i: usize) -> Value {
    let k = i % NAMESPACES;
    let name = format!("app-{i}");
    let mut metadata = meta(&name, k);
    if is_placed(i) {
        metadata["labels"] = json!({PLACED_LABEL: "true"});
    }
    let mut spec = json!({
        "fleetRef": {"name": "f"},
        "replicas": 2,
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{
                "name": "app",
                "image": "registry.example.com/bench/app:1.0.0",
                "ports": [{"name": "http", "containerPort": 8080}],
            }]},
        },
    });
    if is_placed(i) {
        spec["placementPolicyRef"] = json!({"name": format!("p{}", i % 10)});
    }
    json!({"apiVersion": PORTAL, "kind": "FleetWorkload", "metadata": metadata, "spec": spec})
}

/// FleetWorkloads `0..n`.
pub fn fleet_workloads(n: usize) -> Vec<Value> {
    (0..n).map(fleet_workload).collect()
}

/// The source objects the pack reads (Fleets, PlacementPolicies, FleetWorkloads) as the API
/// server stores them for the pack's purposes: with `metadata.generation: 1`, which a create
/// sets and the status's `observedGeneration` reports; each in the workspace its
/// `kcp.io/cluster` annotation names (`source/wsK`), as the broker sees them.
///
/// # Errors
/// An object without apiVersion, kind or name (not expected).
pub fn memory_world(objects: &[Value]) -> Result<MemoryWorld, String> {
    let mut world = MemoryWorld::new();
    for object in objects {
        let mut stored = object.clone();
        stored["metadata"]["generation"] = json!(1);
        let cluster = match stored["metadata"]["annotations"]["kcp.io/cluster"].as_str() {
            Some(workspace) => format!("source/{workspace}"),
            None => "source".to_string(),
        };
        world.insert(&cluster, stored)?;
    }
    Ok(world)
}

/// The reload step's edit of [`EDITED_TEMPLATE`]: the PropagationPolicy of every
/// FleetWorkload with a `placementPolicyRef` gets the annotation [`EDIT_ANNOTATION`]; the
/// others render as before.
///
/// # Errors
/// The template no longer has the line the edit goes after.
pub fn edit_propagation_policy_template(text: &str) -> Result<String, String> {
    let anchor = "  namespace: {{vars.namespace}}\n";
    if !text.contains(anchor) {
        return Err(format!(
            "{EDITED_TEMPLATE} has no line `{}`",
            anchor.trim_end()
        ));
    }
    let block = format!(
        "{anchor}{{{{#if self.spec.placementPolicyRef}}}}\n  annotations:\n    {EDIT_ANNOTATION}: \"true\"\n{{{{/if}}}}\n"
    );
    Ok(text.replacen(anchor, &block, 1))
}

fn insert_after(text: &str, anchor: &str, addition: &str, what: &str) -> Result<String, String> {
    if !text.contains(anchor) {
        return Err(format!("{what} has no line `{}`", anchor.trim_end()));
    }
    Ok(text.replacen(anchor, &format!("{anchor}{addition}"), 1))
}

/// The rule file's text as two rules: (the rule for FleetWorkloads without
/// [`PLACED_LABEL`], the rule `fleet-workload-placed` for those with it, which renders its
/// PropagationPolicy from [`PLACED_TEMPLATE`]). Everything else is the same.
///
/// # Errors
/// The rule file no longer has the lines the edit goes after.
pub fn split_rule(text: &str) -> Result<(String, String), String> {
    let watch = "    kind: FleetWorkload\n";
    let general = insert_after(
        text,
        watch,
        &format!(
            "    selector:\n      matchExpressions:\n        - {{key: {PLACED_LABEL}, operator: DoesNotExist}}\n"
        ),
        RULE_FILE,
    )?;
    let placed = insert_after(
        text,
        watch,
        &format!("    selector:\n      matchLabels: {{{PLACED_LABEL}: \"true\"}}\n"),
        RULE_FILE,
    )?;
    let name = "metadata:\n  name: fleet-workload\n";
    let template = "template: propagation-policy.yaml.hbs\n";
    if !placed.contains(name) || !placed.contains(template) {
        return Err(format!(
            "{RULE_FILE} has no `{}` or no `{}`",
            name.trim_end(),
            template.trim_end()
        ));
    }
    let placed = placed
        .replacen(name, "metadata:\n  name: fleet-workload-placed\n", 1)
        .replacen(
            template,
            "template: propagation-policy-placed.yaml.hbs\n",
            1,
        );
    Ok((general, placed))
}

/// The edit of [`PLACED_TEMPLATE`]: the annotation [`PLACED_EDIT_ANNOTATION`] on every
/// PropagationPolicy it renders.
///
/// # Errors
/// The template no longer has the line the edit goes after.
pub fn edit_placed_template(text: &str) -> Result<String, String> {
    let line = format!("    {PLACED_EDIT_ANNOTATION}: \"true\"\n");
    // One annotation map per object: the line joins the one the first edit opened, if any.
    let opened = format!("  annotations:\n    {EDIT_ANNOTATION}: \"true\"\n");
    if text.contains(&opened) {
        return Ok(text.replacen(&opened, &format!("{opened}{line}"), 1));
    }
    insert_after(
        text,
        "  namespace: {{vars.namespace}}\n",
        &format!("  annotations:\n{line}"),
        PLACED_TEMPLATE,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenth_of_the_workloads_name_a_policy_of_their_namespace() {
        let placed: Vec<Value> = fleet_workloads(1000)
            .into_iter()
            .filter(|w| w["spec"].get("placementPolicyRef").is_some())
            .collect();
        assert_eq!(placed.len(), 100);
        for w in &placed {
            let ns = w["metadata"]["namespace"].as_str().unwrap_or_default();
            let policy = w["spec"]["placementPolicyRef"]["name"]
                .as_str()
                .unwrap_or_default();
            assert_eq!(ns.trim_start_matches("ns"), policy.trim_start_matches('p'));
        }
    }

    #[test]
    fn the_split_rules_select_the_two_sides_of_the_label() {
        let text = "metadata:\n  name: fleet-workload\nspec:\n  watch:\n    apiVersion: v\n    kind: FleetWorkload\n  outputs:\n    - template: propagation-policy.yaml.hbs\n";
        let (general, placed) = split_rule(text).unwrap();
        assert!(general.contains("kind: FleetWorkload\n    selector:\n      matchExpressions:\n        - {key: bench.switchyard.dev/placed, operator: DoesNotExist}\n"));
        assert!(general.contains("name: fleet-workload\n"));
        assert!(placed.contains("kind: FleetWorkload\n    selector:\n      matchLabels: {bench.switchyard.dev/placed: \"true\"}\n"));
        assert!(placed.contains("name: fleet-workload-placed\n"));
        assert!(placed.contains("template: propagation-policy-placed.yaml.hbs\n"));
    }

    #[test]
    fn the_placed_edit_joins_the_first_edits_annotations() {
        let text = "metadata:\n  namespace: {{vars.namespace}}\n  labels:\n";
        let once = edit_placed_template(text).unwrap();
        assert_eq!(
            once,
            "metadata:\n  namespace: {{vars.namespace}}\n  annotations:\n    bench.switchyard.dev/edited-placed: \"true\"\n  labels:\n"
        );
        let first = edit_propagation_policy_template(text).unwrap();
        let both = edit_placed_template(&first).unwrap();
        assert!(both.contains("  annotations:\n    bench.switchyard.dev/edited: \"true\"\n    bench.switchyard.dev/edited-placed: \"true\"\n{{/if}}\n"));
    }

    #[test]
    fn the_edit_adds_a_conditional_annotation() {
        let text = "metadata:\n  name: x\n  namespace: {{vars.namespace}}\n  labels:\n";
        let edited = edit_propagation_policy_template(text).unwrap_or_default();
        assert_eq!(
            edited,
            "metadata:\n  name: x\n  namespace: {{vars.namespace}}\n{{#if self.spec.placementPolicyRef}}\n  annotations:\n    bench.switchyard.dev/edited: \"true\"\n{{/if}}\n  labels:\n"
        );
    }
}
