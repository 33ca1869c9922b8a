//! The rule `fleet-workload` for one FleetWorkload: every guard, lookup and variable of
//! `rules/kcp-karmada/rules/fleet-workload.yaml` in the order the engine runs them.

use serde_json::{Map, Value, json};
use switchyard_core::{MemoryWorld, ObjectKey, World};

use super::access::{
    Stop, as_str, contains, is_dns1035_label, is_dns1123_subdomain, is_label_value, namespace_of,
    non_empty, number, obj, opt, req, size, stop, truthy, type_error,
};
use super::binding::binding_status;
use super::names::{ANNOTATION_WORKSPACE, KARMADA, LABEL_NAME, LABEL_WORKSPACE, PORTAL, RULE};
use super::tables::{requirement_target, strategies};

/// What a FleetWorkload renders when no guard stops it.
pub(super) struct Fired {
    /// (key, output name, object without ownership), in key order.
    pub(super) outputs: Vec<(ObjectKey, &'static str, Value)>,
    pub(super) fields: Map<String, Value>,
    pub(super) ready: Value,
}

/// One requirement: its key (for messages), target and Karmada form.
pub(super) struct Requirement {
    key: Value,
    target: Result<bool, &'static str>,
    expression: Value,
}

/// The rule `fleet-workload` for one FleetWorkload.
/// `cluster` is the FleetWorkload's own (`source/<workspace>`): its lookups read there.
pub(super) fn fleet_workload(
    world: &MemoryWorld,
    cluster: &str,
    fw: &Value,
) -> Result<Fired, Stop> {
    let metadata = req(fw, "metadata")?;
    let name = as_str(req(metadata, "name")?, "metadata.name")?;

    // Guard InvalidWorkspace.
    let workspace = match opt(metadata, "annotations")? {
        Some(annotations) if contains(annotations, ANNOTATION_WORKSPACE)? => {
            match req(annotations, ANNOTATION_WORKSPACE)? {
                Value::String(ws) if is_label_value(ws) && !ws.is_empty() && ws.len() <= 63 => {
                    Some(ws.as_str())
                }
                Value::String(_) => None,
                _ => return Err(type_error("kcp.io/cluster is not a string")),
            }
        }
        _ => None,
    };
    let Some(workspace) = workspace else {
        return Err(stop(
            "InvalidWorkspace",
            "the annotation kcp.io/cluster must name the workspace's logical cluster: a \
             non-empty label value (at most 63 characters of [A-Za-z0-9-_.], starting and \
             ending with a letter or digit)",
        ));
    };

    // Guard InvalidFleetWorkload: fleetRef.name and template.spec.
    let spec = opt(fw, "spec")?;
    let fleet_ref = match spec {
        Some(spec) => opt(spec, "fleetRef")?,
        None => None,
    };
    let fleet_name = match fleet_ref {
        Some(r) => opt(r, "name")?.filter(|n| non_empty(n)),
        None => None,
    };
    let template = match (spec, fleet_name) {
        (Some(spec), Some(_)) => opt(spec, "template")?,
        _ => None,
    };
    let pod_spec = match template {
        Some(t) => opt(t, "spec")?,
        None => None,
    };
    let (Some(spec), Some(fleet_name), Some(template), Some(pod_spec)) =
        (spec, fleet_name, template, pod_spec)
    else {
        return Err(stop(
            "InvalidFleetWorkload",
            "spec.fleetRef.name and spec.template.spec are required",
        ));
    };

    // Guard InvalidName.
    let service = opt(spec, "service")?;
    let ports = match service {
        Some(s) => opt(s, "ports")?,
        None => None,
    };
    let emit_service = match ports {
        Some(p) => size(p)? > 0,
        None => false,
    };
    if !(is_dns1123_subdomain(name)
        && name.chars().count() <= 63
        && (!emit_service || is_dns1035_label(name)))
    {
        return Err(stop(
            "InvalidName",
            "the FleetWorkload's name must be at most 63 characters of [a-z0-9-.] (a label \
             value and a DNS subdomain), and a DNS-1035 label (starting with a letter, no dots) \
             when spec.service.ports is set",
        ));
    }

    // Guard InvalidFleetWorkload: spoofed source labels.
    let pod_metadata = opt(template, "metadata")?;
    let pod_labels = match pod_metadata {
        Some(m) => opt(m, "labels")?,
        None => None,
    };
    let pod_annotations = match pod_metadata {
        Some(m) => opt(m, "annotations")?,
        None => None,
    };
    if let Some(labels) = pod_labels
        && (contains(labels, LABEL_WORKSPACE)? || contains(labels, LABEL_NAME)?)
    {
        return Err(stop(
            "InvalidFleetWorkload",
            "spec.template.metadata.labels may not set edge-connect.eu/source-workspace or \
             edge-connect.eu/source-name: the platform sets them",
        ));
    }

    // Lookup fleet (required), in the FleetWorkload's own workspace.
    let kcp_namespace = metadata.get("namespace").and_then(Value::as_str);
    let fleet_name = as_str(fleet_name, "spec.fleetRef.name")?;
    let member = switchyard_core::object::split_cluster(cluster).1;
    let Some(fleet) = world.get(cluster, PORTAL, "Fleet", kcp_namespace, fleet_name) else {
        return Err(stop(
            "FleetNotFound",
            format!(
                "Fleet `{fleet_name}` not found in namespace `{}` of workspace `{member}` \
                 (lookup `fleet` of rule `{RULE}`)",
                kcp_namespace.unwrap_or("")
            ),
        ));
    };

    // vars.namespace, vars.bindingName, lookup binding (not required).
    let namespace = namespace_of(workspace);
    let binding_name = format!("{name}-deployment").to_ascii_lowercase();
    let binding = world.get(
        KARMADA,
        "work.karmada.io/v1alpha2",
        "ResourceBinding",
        Some(namespace.as_str()),
        &binding_name,
    );

    // vars.policyName, lookup policy (required when named).
    let policy_name = match opt(spec, "placementPolicyRef")? {
        Some(r) => opt(r, "name")?.cloned().unwrap_or(Value::from("")),
        None => Value::from(""),
    };
    let policy = if non_empty(&policy_name) {
        let policy_name = as_str(&policy_name, "spec.placementPolicyRef.name")?;
        let Some(policy) = world.get(
            cluster,
            PORTAL,
            "PlacementPolicy",
            kcp_namespace,
            policy_name,
        ) else {
            return Err(stop(
                "PlacementPolicyNotFound",
                format!(
                    "PlacementPolicy `{policy_name}` not found in namespace `{}` of workspace \
                     `{member}` (lookup `policy` of rule `{RULE}`)",
                    kcp_namespace.unwrap_or("")
                ),
            ));
        };
        Some(policy)
    } else {
        None
    };

    // Guards on the policy: InvalidPlacementPolicy (strategy, weights, spread).
    let mut strategy = "None";
    let mut weights: &[Value] = &[];
    let mut policy_spec: Option<&Value> = None;
    if let Some(policy) = &policy {
        let policy = policy.as_ref();
        let policy_metadata_name = || -> Result<&str, Stop> {
            as_str(
                req(req(policy, "metadata")?, "name")?,
                "PlacementPolicy metadata.name",
            )
        };
        let spec = opt(policy, "spec")?;
        let strategy_value = match spec {
            Some(s) => opt(s, "strategy")?,
            None => None,
        };
        strategy = match strategy_value.and_then(Value::as_str) {
            Some(s @ ("Weighted" | "Spread" | "FixedReplicas")) => s,
            _ => {
                return Err(stop(
                    "InvalidPlacementPolicy",
                    format!(
                        "PlacementPolicy `{}`: spec.strategy must be Weighted, Spread or \
                         FixedReplicas",
                        policy_metadata_name()?
                    ),
                ));
            }
        };
        let spec = req(policy, "spec")?;
        policy_spec = Some(spec);
        weights = match opt(spec, "weights")? {
            None => &[],
            Some(Value::Array(w)) => w,
            Some(_) => return Err(type_error("spec.weights is not a list")),
        };
        if strategy == "Weighted" {
            let mut valid = true;
            for w in weights {
                let cluster_ok = opt(w, "cluster")?.is_some_and(non_empty);
                let weight_ok = match opt(w, "weight")? {
                    Some(v) => number(v, "a weight")? > 0.0,
                    None => false,
                };
                valid &= cluster_ok && weight_ok;
            }
            if !valid {
                return Err(stop(
                    "InvalidPlacementPolicy",
                    format!(
                        "PlacementPolicy `{}`: every spec.weights entry needs a cluster and a \
                         weight of at least 1",
                        policy_metadata_name()?
                    ),
                ));
            }
        }
        if strategy == "Spread" && !valid_spread(spec)? {
            return Err(stop(
                "InvalidPlacementPolicy",
                format!(
                    "PlacementPolicy `{}`: strategy Spread needs spec.spread with exactly one of \
                     spreadByField (cluster, region, zone or provider) and spreadByLabel, \
                     maxGroups, and minGroups (default 1) between 1 and maxGroups",
                    policy_metadata_name()?
                ),
            ));
        }
    }

    // vars.replicas, vars.podLabels, vars.podAnnotations.
    let replicas = opt(spec, "replicas")?.cloned().unwrap_or(json!(1));
    let pod_labels = pod_labels.cloned().unwrap_or_else(|| json!({}));
    let pod_annotations = pod_annotations.cloned().unwrap_or_else(|| json!({}));

    // vars.clusterNames, vars.fleetSelector, guard InvalidFleet.
    let fleet_spec = req(&fleet, "spec")?;
    let cluster_names: Vec<Value> = match opt(fleet_spec, "clusterRefs")? {
        None => Vec::new(),
        Some(Value::Array(refs)) => refs
            .iter()
            .map(|r| req(r, "name").cloned())
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(type_error("spec.clusterRefs is not a list")),
    };
    let empty = Map::new();
    let fleet_selector = match opt(fleet_spec, "selector")? {
        None => &empty,
        Some(Value::Object(s)) => s,
        Some(_) => return Err(type_error("spec.selector is not a map")),
    };
    let match_labels = fleet_selector.get("matchLabels");
    let fleet_expressions: &[Value] = match fleet_selector.get("matchExpressions") {
        None => &[],
        Some(Value::Array(e)) => e,
        Some(_) => return Err(type_error("matchExpressions is not a list")),
    };
    let match_labels_size = match match_labels {
        Some(m) => size(m)?,
        None => 0,
    };
    if cluster_names.is_empty() && match_labels_size == 0 && fleet_expressions.is_empty() {
        let fleet_metadata_name = as_str(
            req(req(&fleet, "metadata")?, "name")?,
            "Fleet metadata.name",
        )?;
        return Err(stop(
            "InvalidFleet",
            format!(
                "Fleet `{fleet_metadata_name}` selects no cluster: set spec.clusterRefs or a \
                 non-empty spec.selector (an empty one would select every Karmada cluster)"
            ),
        ));
    }

    // vars.scheduling (table strategies), vars.requirements (table requirement-targets),
    // guard InvalidPlacementPolicy (requirements).
    let scheduling = strategies(strategy, !weights.is_empty())?;
    let mut requirements = Vec::new();
    if let Some(spec) = policy_spec {
        match opt(spec, "requirements")? {
            None => {}
            Some(Value::Array(list)) => {
                for r in list {
                    let key = req(r, "key")?;
                    let operator = req(r, "operator")?;
                    let values = opt(r, "values")?;
                    let has_values = match values {
                        Some(v) => size(v)? > 0,
                        None => false,
                    };
                    let target = requirement_target(
                        as_str(key, "a requirement key")?,
                        as_str(operator, "a requirement operator")?,
                        has_values,
                    );
                    let mut expression = Map::new();
                    expression.insert("key".into(), key.clone());
                    expression.insert("operator".into(), operator.clone());
                    if has_values && let Some(v) = values {
                        expression.insert("values".into(), v.clone());
                    }
                    requirements.push(Requirement {
                        key: key.clone(),
                        target,
                        expression: Value::Object(expression),
                    });
                }
            }
            Some(_) => return Err(type_error("spec.requirements is not a list")),
        }
    }
    if let Some(invalid) = requirements.iter().find(|r| r.target.is_err())
        && let (Err(problem), Some(policy)) = (&invalid.target, &policy)
    {
        let policy_metadata_name = as_str(
            req(req(policy, "metadata")?, "name")?,
            "PlacementPolicy metadata.name",
        )?;
        let key = as_str(&invalid.key, "a requirement key")?;
        return Err(stop(
            "InvalidPlacementPolicy",
            format!("PlacementPolicy `{policy_metadata_name}`: requirement `{key}`: {problem}"),
        ));
    }

    // vars.fieldExpressions, vars.labelExpressions, vars.labelSelector.
    let field_expressions: Vec<Value> = requirements
        .iter()
        .filter(|r| r.target == Ok(true))
        .map(|r| r.expression.clone())
        .collect();
    let label_expressions: Vec<Value> = fleet_expressions
        .iter()
        .cloned()
        .chain(
            requirements
                .iter()
                .filter(|r| r.target == Ok(false))
                .map(|r| r.expression.clone()),
        )
        .collect();
    let mut label_selector = Map::new();
    if match_labels_size > 0
        && let Some(m) = match_labels
    {
        label_selector.insert("matchLabels".into(), m.clone());
    }
    if !label_expressions.is_empty() {
        label_selector.insert("matchExpressions".into(), Value::Array(label_expressions));
    }

    // vars.weightPreference.
    let mut weight_preference = Map::new();
    if scheduling.static_weights {
        let list = weights
            .iter()
            .map(|w| {
                Ok(
                    json!({"targetCluster": {"clusterNames": [req(w, "cluster")?]},
                          "weight": req(w, "weight")?}),
                )
            })
            .collect::<Result<Vec<Value>, Stop>>()?;
        weight_preference.insert("staticWeightList".into(), Value::Array(list));
    }
    if let Some(dynamic) = scheduling.dynamic_weight {
        weight_preference.insert("dynamicWeight".into(), dynamic.into());
    }

    // vars.spreadConstraints.
    let mut spread_constraints = Vec::new();
    if scheduling.spread_constraints
        && let Some(spec) = policy_spec
    {
        let spread = req(spec, "spread")?;
        let by_field = opt(spread, "spreadByField")?;
        let by_label = opt(spread, "spreadByLabel")?;
        let max_groups = req(spread, "maxGroups")?;
        let min_groups = opt(spread, "minGroups")?.cloned().unwrap_or(json!(1));
        let mut constraint = Map::new();
        if let Some(f) = by_field {
            constraint.insert("spreadByField".into(), f.clone());
        }
        if let Some(l) = by_label {
            constraint.insert("spreadByLabel".into(), l.clone());
        }
        constraint.insert("maxGroups".into(), max_groups.clone());
        constraint.insert("minGroups".into(), min_groups.clone());
        spread_constraints.push(Value::Object(constraint));
        if by_field.is_some_and(|f| f.as_str() != Some("cluster")) {
            spread_constraints.push(json!({"spreadByField": "cluster",
                "maxGroups": max_groups, "minGroups": min_groups}));
        }
    }

    // Status: vars.placements, the binding's conditions, vars.readiness (table readiness),
    // vars.readyMessage, status.clusters.
    let (placements, clusters, ready) = binding_status(binding.as_deref())?;

    // Outputs, in key order: Deployment, PropagationPolicy, Namespace, Service. Built from
    // maps directly: `json!` would copy embedded values through serde.
    let source_labels = obj([
        (LABEL_WORKSPACE, workspace.into()),
        (LABEL_NAME, name.into()),
    ]);
    let metadata_of = |labels: Value| {
        obj([
            ("name", name.into()),
            ("namespace", namespace.as_str().into()),
            ("labels", labels),
        ])
    };
    let mut outputs = Vec::with_capacity(4);
    let key = |api_version: &str, kind: &str, namespace: Option<&str>, name: &str| ObjectKey {
        cluster: KARMADA.to_string(),
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        namespace: namespace.map(str::to_string),
        name: name.to_string(),
    };

    let mut template_labels = match pod_labels {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    template_labels.insert(LABEL_WORKSPACE.into(), workspace.into());
    template_labels.insert(LABEL_NAME.into(), name.into());
    let mut template_metadata = Map::new();
    template_metadata.insert("labels".into(), Value::Object(template_labels));
    if truthy(&pod_annotations) {
        template_metadata.insert("annotations".into(), pod_annotations);
    }
    outputs.push((
        key("apps/v1", "Deployment", Some(&namespace), name),
        "deployment",
        obj([
            ("apiVersion", "apps/v1".into()),
            ("kind", "Deployment".into()),
            ("metadata", metadata_of(source_labels.clone())),
            (
                "spec",
                obj([
                    ("replicas", replicas),
                    ("selector", obj([("matchLabels", source_labels.clone())])),
                    (
                        "template",
                        obj([
                            ("metadata", Value::Object(template_metadata)),
                            ("spec", pod_spec.clone()),
                        ]),
                    ),
                ]),
            ),
        ]),
    ));

    let selector = |api_version: &str, kind: &str| {
        obj([
            ("apiVersion", api_version.into()),
            ("kind", kind.into()),
            ("name", name.into()),
        ])
    };
    let mut resource_selectors = vec![selector("apps/v1", "Deployment")];
    if emit_service {
        resource_selectors.push(selector("v1", "Service"));
    }
    let mut cluster_affinity = Map::new();
    if !cluster_names.is_empty() {
        cluster_affinity.insert("clusterNames".into(), Value::Array(cluster_names));
    }
    if !label_selector.is_empty() {
        cluster_affinity.insert("labelSelector".into(), Value::Object(label_selector));
    }
    if !field_expressions.is_empty() {
        cluster_affinity.insert(
            "fieldSelector".into(),
            obj([("matchExpressions", Value::Array(field_expressions))]),
        );
    }
    let mut replica_scheduling = Map::new();
    replica_scheduling.insert(
        "replicaSchedulingType".into(),
        scheduling.replica_scheduling_type.into(),
    );
    if let Some(preference) = scheduling.replica_division_preference {
        replica_scheduling.insert("replicaDivisionPreference".into(), preference.into());
    }
    if !weight_preference.is_empty() {
        replica_scheduling.insert("weightPreference".into(), Value::Object(weight_preference));
    }
    let mut placement = Map::new();
    placement.insert(
        "clusterAffinity".into(),
        if cluster_affinity.is_empty() {
            Value::Null
        } else {
            Value::Object(cluster_affinity)
        },
    );
    placement.insert(
        "replicaScheduling".into(),
        Value::Object(replica_scheduling),
    );
    if !spread_constraints.is_empty() {
        placement.insert("spreadConstraints".into(), Value::Array(spread_constraints));
    }
    outputs.push((
        key(
            "policy.karmada.io/v1alpha1",
            "PropagationPolicy",
            Some(&namespace),
            name,
        ),
        "propagation-policy",
        obj([
            ("apiVersion", "policy.karmada.io/v1alpha1".into()),
            ("kind", "PropagationPolicy".into()),
            ("metadata", metadata_of(source_labels.clone())),
            (
                "spec",
                obj([
                    ("resourceSelectors", Value::Array(resource_selectors)),
                    ("placement", Value::Object(placement)),
                ]),
            ),
        ]),
    ));

    outputs.push((
        key("v1", "Namespace", None, &namespace),
        "namespace",
        obj([
            ("apiVersion", "v1".into()),
            ("kind", "Namespace".into()),
            (
                "metadata",
                obj([
                    ("name", namespace.as_str().into()),
                    ("labels", obj([(LABEL_WORKSPACE, workspace.into())])),
                ]),
            ),
        ]),
    ));

    if emit_service && let Some(ports) = ports {
        outputs.push((
            key("v1", "Service", Some(&namespace), name),
            "service",
            obj([
                ("apiVersion", "v1".into()),
                ("kind", "Service".into()),
                ("metadata", metadata_of(source_labels.clone())),
                (
                    "spec",
                    obj([("selector", source_labels), ("ports", ports.clone())]),
                ),
            ]),
        ));
    }

    let mut fields = Map::new();
    if let Some(generation) = metadata.get("generation")
        && !generation.is_null()
    {
        fields.insert("observedGeneration".into(), generation.clone());
    }
    fields.insert("placements".into(), placements);
    fields.insert("clusters".into(), clusters);
    Ok(Fired {
        outputs,
        fields,
        ready,
    })
}

/// The spread guard of InvalidPlacementPolicy.
pub(super) fn valid_spread(spec: &Value) -> Result<bool, Stop> {
    let Some(spread) = opt(spec, "spread")? else {
        return Ok(false);
    };
    let by_field = opt(spread, "spreadByField")?;
    let by_label = opt(spread, "spreadByLabel")?;
    if by_field.is_some() == by_label.is_some() {
        return Ok(false);
    }
    let field_ok = by_field
        .is_none_or(|f| matches!(f.as_str(), Some("cluster" | "region" | "zone" | "provider")));
    let label_ok = by_label.is_none_or(non_empty);
    if !field_ok || !label_ok {
        return Ok(false);
    }
    let min_groups = match opt(spread, "minGroups")? {
        Some(v) => number(v, "minGroups")?,
        None => 1.0,
    };
    let Some(max_groups) = opt(spread, "maxGroups")? else {
        return Ok(false);
    };
    Ok(min_groups >= 1.0 && number(max_groups, "maxGroups")? >= min_groups)
}
