//! Output validation against real CRDs (Karmada, Cilium, the platform's own) and against
//! small inline schemas for the keywords the real ones do not use.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers panic on purpose

use serde_json::{Value, json};
use switchyard_core::validate::{Validator, Violation};
use switchyard_core::yaml::parse_documents;

fn repo_file(path: &str) -> String {
    let full = format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

fn documents(text: &str) -> Vec<Value> {
    parse_documents(text)
        .unwrap()
        .iter()
        .map(|node| node.to_json())
        .filter(|doc| !doc.is_null())
        .collect()
}

fn yaml(text: &str) -> Value {
    documents(text).into_iter().next().unwrap()
}

fn karmada() -> Validator {
    Validator::new(&documents(&repo_file(
        "tests/fixtures/crds/karmada/policy.karmada.io_propagationpolicies.yaml",
    )))
}

fn cilium() -> Validator {
    Validator::new(&documents(&repo_file(
        "tests/fixtures/crds/cilium/ciliumnetworkpolicies.yaml",
    )))
}

fn placement() -> Validator {
    Validator::new(&documents(&repo_file(
        "config/crds/platform.edge-portal.eu_placementpolicies.yaml",
    )))
}

fn shown(violations: &[Violation]) -> Vec<String> {
    violations.iter().map(ToString::to_string).collect()
}

const POLICY: &str = r#"
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: api
  namespace: kcp-50bdde6c6b56
  labels:
    app.kubernetes.io/managed-by: switchyard
  annotations:
    switchyard.dev/pack-version: "0.1.0"
spec:
  placement:
    clusterAffinity:
      clusterNames: [edge-fra-1, edge-ams-1]
    replicaScheduling:
      replicaDivisionPreference: Weighted
      replicaSchedulingType: Divided
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      name: api
"#;

#[test]
fn a_valid_propagation_policy_passes() {
    let validator = karmada();
    assert!(
        validator.diagnostics().is_empty(),
        "{:?}",
        validator.diagnostics()
    );
    assert_eq!(
        shown(&validator.validate(&yaml(POLICY))),
        Vec::<String>::new()
    );
}

#[test]
fn an_unsupported_replica_scheduling_type_is_rejected_at_its_path() {
    let mut policy = yaml(POLICY);
    policy["spec"]["placement"]["replicaScheduling"]["replicaSchedulingType"] = json!("Spread");
    let violations = karmada().validate(&policy);
    assert_eq!(
        violations,
        vec![Violation {
            path: "spec.placement.replicaScheduling.replicaSchedulingType".to_string(),
            message: r#"Unsupported value: "Spread": supported values: "Duplicated", "Divided""#
                .to_string(),
            rule: Some("enum".to_string()),
        }]
    );
    assert_eq!(
        violations[0].to_string(),
        r#"spec.placement.replicaScheduling.replicaSchedulingType: Unsupported value: "Spread": supported values: "Duplicated", "Divided" (enum)"#
    );
}

#[test]
fn unknown_and_missing_fields_and_wrong_types_are_reported() {
    let mut policy = yaml(POLICY);
    policy["spec"]["placement"]["replicaSchedulign"] = json!({});
    policy["spec"]["resourceSelectors"][0]
        .as_object_mut()
        .unwrap()
        .remove("kind");
    policy["spec"]["priority"] = json!("high");
    assert_eq!(
        shown(&karmada().validate(&policy)),
        vec![
            "spec.placement.replicaSchedulign: field not declared in schema (properties)",
            r#"spec.priority: Invalid value: "string": spec.priority in body must be of type integer: "string" (type)"#,
            "spec.resourceSelectors[0].kind: Required value (required)",
        ]
    );
}

#[test]
fn a_defaulted_field_is_not_missing_and_a_null_one_is_dropped() {
    // replicaSchedulingType has a default; a null in a field that is not nullable is
    // dropped by the API server before validation.
    let mut policy = yaml(POLICY);
    policy["spec"]["placement"]["replicaScheduling"]["replicaSchedulingType"] = Value::Null;
    policy["spec"]["placement"]["spreadConstraints"] = Value::Null;
    assert_eq!(shown(&karmada().validate(&policy)), Vec::<String>::new());
}

#[test]
fn another_api_version_of_a_crd_kind_is_rejected() {
    let mut policy = yaml(POLICY);
    policy["apiVersion"] = json!("policy.karmada.io/v1beta1");
    assert_eq!(
        shown(&karmada().validate(&policy)),
        vec![
            r#"apiVersion: Unsupported value: "policy.karmada.io/v1beta1": supported values: "policy.karmada.io/v1alpha1" (apiVersion)"#
        ]
    );
}

const NETWORK_POLICY: &str = r#"
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: allow-dns
  namespace: default
spec:
  endpointSelector:
    matchLabels:
      app: api
  egress:
    - toEndpoints:
        - matchLabels:
            k8s:io.kubernetes.pod.namespace: kube-system
      toPorts:
        - ports:
            - port: "53"
              protocol: UDP
"#;

#[test]
fn a_cilium_port_must_be_a_string() {
    let validator = cilium();
    assert!(
        validator.diagnostics().is_empty(),
        "{:?}",
        validator.diagnostics()
    );
    assert_eq!(
        shown(&validator.validate(&yaml(NETWORK_POLICY))),
        Vec::<String>::new()
    );
    let mut policy = yaml(NETWORK_POLICY);
    policy["spec"]["egress"][0]["toPorts"][0]["ports"][0]["port"] = json!(53);
    assert_eq!(
        shown(&validator.validate(&policy)),
        vec![
            r#"spec.egress[0].toPorts[0].ports[0].port: Invalid value: "integer": spec.egress[0].toPorts[0].ports[0].port in body must be of type string: "integer" (type)"#
        ]
    );
}

#[test]
fn cilium_patterns_and_enums_are_checked() {
    let mut policy = yaml(NETWORK_POLICY);
    let port = &mut policy["spec"]["egress"][0]["toPorts"][0]["ports"][0];
    port["port"] = json!("-");
    port["protocol"] = json!("ICMP");
    let violations = cilium().validate(&policy);
    assert_eq!(
        violations
            .iter()
            .map(|v| v.rule.clone().unwrap())
            .collect::<Vec<_>>(),
        vec!["pattern", "enum"]
    );
    assert!(
        violations[0].message.starts_with(
            r#"Invalid value: "-": spec.egress[0].toPorts[0].ports[0].port in body should match '^(6553[0-5]"#
        ),
        "{}",
        violations[0]
    );
}

#[test]
fn label_and_annotation_values_must_be_strings() {
    let deployment = yaml(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  labels:
    replicas: 3
  annotations:
    prometheus.io/scrape: true
spec: {}
"#,
    );
    assert_eq!(
        shown(&karmada().validate(&deployment)),
        vec![
            r#"metadata.labels[replicas]: Invalid value: "integer": metadata.labels[replicas] in body must be of type string: "integer" (type)"#,
            r#"metadata.annotations[prometheus.io/scrape]: Invalid value: "boolean": metadata.annotations[prometheus.io/scrape] in body must be of type string: "boolean" (type)"#,
        ]
    );
}

#[test]
fn label_keys_and_values_must_be_valid() {
    let long = "a".repeat(64);
    let namespace = json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": "kcp-1",
            "labels": { "Bad_Prefix/x": "ok", "ok": "-bad", "long": long, "empty": "" },
            "annotations": { "a/b/c": "x" }
        }
    });
    assert_eq!(
        shown(&Validator::new(&[]).validate(&namespace)),
        vec![
            r#"metadata.labels: Invalid value: "Bad_Prefix/x": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*') (label key)"#,
            format!(
                r#"metadata.labels[long]: Invalid value: "{long}": must be no more than 63 characters (label value)"#
            )
            .as_str(),
            r#"metadata.labels[ok]: Invalid value: "-bad": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?') (label value)"#,
            r#"metadata.annotations: Invalid value: "a/b/c": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName') (annotation key)"#,
        ]
    );
}

const PLACEMENT: &str = r#"
apiVersion: platform.edge-portal.eu/v1alpha1
kind: PlacementPolicy
metadata:
  name: by-region
  namespace: default
spec:
  strategy: Spread
  spread:
    spreadByField: region
    minGroups: 2
    maxGroups: 2
"#;

#[test]
fn a_failing_x_kubernetes_validations_rule_is_reported_with_its_message() {
    let validator = placement();
    assert!(
        validator.diagnostics().is_empty(),
        "{:?}",
        validator.diagnostics()
    );
    assert_eq!(
        shown(&validator.validate(&yaml(PLACEMENT))),
        Vec::<String>::new()
    );
    let mut policy = yaml(PLACEMENT);
    policy["spec"]["spread"]["spreadByLabel"] = json!("topology.kubernetes.io/zone");
    policy["spec"]["spread"]["minGroups"] = json!(3);
    let violations = validator.validate(&policy);
    assert_eq!(
        violations,
        vec![
            Violation {
                path: "spec.spread".to_string(),
                message:
                    r#"Invalid value: "object": set exactly one of spreadByField and spreadByLabel"#
                        .to_string(),
                rule: Some("has(self.spreadByField) != has(self.spreadByLabel)".to_string()),
            },
            Violation {
                path: "spec.spread".to_string(),
                message: r#"Invalid value: "object": maxGroups must be at least minGroups"#
                    .to_string(),
                rule: Some(
                    "self.maxGroups >= (has(self.minGroups) ? self.minGroups : 1)".to_string()
                ),
            },
        ]
    );
}

#[test]
fn rules_on_list_items_name_the_item() {
    let mut policy = yaml(PLACEMENT);
    policy["spec"]["requirements"] = json!([
        { "key": "region", "operator": "In", "values": ["eu"] },
        { "key": "provider", "operator": "Exists" },
    ]);
    assert_eq!(
        shown(&placement().validate(&policy)),
        vec![
            r#"spec.requirements[1]: Invalid value: "object": provider, region and zone take only In and NotIn (!(self.key in ['provider', 'region', 'zone']) || self.operator in ['In', 'NotIn'])"#
        ]
    );
}

#[test]
fn a_type_error_stops_the_rules_as_in_kubernetes() {
    let mut policy = yaml(PLACEMENT);
    policy["spec"]["spread"]["spreadByLabel"] = json!("zone");
    policy["spec"]["spread"]["maxGroups"] = json!("two");
    assert_eq!(
        shown(&placement().validate(&policy)),
        vec![
            r#"spec.spread.maxGroups: Invalid value: "string": spec.spread.maxGroups in body must be of type integer: "string" (type)"#,
            "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
        ]
    );
}

#[test]
fn every_golden_output_of_kcp_karmada_is_valid() {
    let validator = karmada();
    let dir = format!(
        "{}/../../rules/kcp-karmada/tests/golden",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut policies = 0;
    let mut objects = 0;
    for file in files {
        for object in documents(&std::fs::read_to_string(&file).unwrap()) {
            objects += 1;
            if object["kind"] == "PropagationPolicy" {
                policies += 1;
            }
            let violations = validator.validate(&object);
            assert!(
                violations.is_empty(),
                "{}: {} {}: {:?}",
                file.display(),
                object["kind"],
                object["metadata"]["name"],
                shown(&violations)
            );
        }
    }
    assert!(
        policies >= 10 && objects >= 40,
        "{policies} policies, {objects} objects"
    );
}

/// A CRD with one version whose `spec` schema is `spec`.
fn crd(spec: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": "widgets.example.com" },
        "spec": {
            "group": "example.com",
            "names": { "kind": "Widget", "plural": "widgets" },
            "scope": "Namespaced",
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "apiVersion": { "type": "string" },
                        "kind": { "type": "string" },
                        "metadata": { "type": "object" },
                        "spec": spec,
                    }
                }}
            }]
        }
    })
}

fn widget(spec: Value) -> Value {
    json!({
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": { "name": "w", "labels": { "a": "b" } },
        "spec": spec,
    })
}

#[test]
fn scalar_keywords_use_kubernetes_wording() {
    let validator = Validator::new(&[crd(json!({
        "type": "object",
        "properties": {
            "name": { "type": "string", "minLength": 2, "maxLength": 3 },
            "count": { "type": "integer", "format": "int32", "minimum": 1, "maximum": 10 },
            "ratio": { "type": "number", "exclusiveMaximum": true, "maximum": 1, "multipleOf": 0.25 },
            "big": { "type": "integer", "format": "int32" },
            "when": { "type": "string", "format": "date-time" },
            "data": { "type": "string", "format": "byte" },
            "tags": { "type": "array", "maxItems": 2, "minItems": 1, "items": { "type": "string" },
                      "x-kubernetes-list-type": "set" },
            "labels": { "type": "object", "maxProperties": 1,
                        "additionalProperties": { "type": "string" } },
            "port": { "x-kubernetes-int-or-string": true },
            "note": { "type": "string", "nullable": true },
        }
    }))]);
    assert!(
        validator.diagnostics().is_empty(),
        "{:?}",
        validator.diagnostics()
    );
    let ok = widget(json!({
        "name": "ab", "count": 10, "ratio": 0.75, "big": 2147483647,
        "when": "2026-01-01T00:00:00Z", "data": "aGk=", "tags": ["a"],
        "labels": { "x": "y" }, "port": "http", "note": null,
    }));
    assert_eq!(shown(&validator.validate(&ok)), Vec::<String>::new());
    let bad = widget(json!({
        "name": "abcd", "count": 0, "ratio": 1.0, "big": 2147483648_i64,
        "when": "yesterday", "data": "a=b", "tags": ["a", "b", "a"],
        "labels": { "x": "y", "z": 1 }, "port": 1.5,
    }));
    assert_eq!(
        shown(&validator.validate(&bad)),
        vec![
            r#"spec.big: Invalid value: 2147483648: spec.big in body must be of type int32: "2147483648" (format)"#,
            "spec.count: Invalid value: 0: spec.count in body should be greater than or equal to 1 (minimum)",
            r#"spec.data: Invalid value: "a=b": spec.data in body must be of type byte: "a=b" (format)"#,
            "spec.labels: Too many: 2: must have at most 1 item (maxProperties)",
            r#"spec.labels[z]: Invalid value: "integer": spec.labels[z] in body must be of type string: "integer" (type)"#,
            "spec.name: Too long: may not be more than 3 characters (maxLength)",
            r#"spec.port: Invalid value: "number": spec.port in body must be of type integer,string: "number" (type)"#,
            "spec.ratio: Invalid value: 1.0: spec.ratio in body should be less than 1 (exclusiveMaximum)",
            "spec.tags: Too many: 3: must have at most 2 items (maxItems)",
            r#"spec.tags[2]: Duplicate value: "a" (x-kubernetes-list-type)"#,
            r#"spec.when: Invalid value: "yesterday": spec.when in body must be of type date-time: "yesterday" (format)"#,
        ]
    );
}

#[test]
fn preserved_and_embedded_objects() {
    let validator = Validator::new(&[crd(json!({
        "type": "object",
        "properties": {
            "free": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
            "template": {
                "type": "object",
                "x-kubernetes-embedded-resource": true,
                "x-kubernetes-preserve-unknown-fields": true,
            },
        }
    }))]);
    let object = widget(json!({
        "free": { "anything": [1, "two"] },
        "template": { "kind": "ConfigMap", "metadata": { "labels": { "x": false } } },
    }));
    assert_eq!(
        shown(&validator.validate(&object)),
        vec![
            "spec.template.apiVersion: Required value: must not be empty (x-kubernetes-embedded-resource)",
            r#"spec.template.metadata.labels[x]: Invalid value: "boolean": spec.template.metadata.labels[x] in body must be of type string: "boolean" (type)"#,
        ]
    );
}

#[test]
fn one_of_and_any_of() {
    let validator = Validator::new(&[crd(json!({
        "type": "object",
        "properties": {
            "peer": {
                "type": "object",
                "properties": { "cidr": { "type": "string" }, "group": { "type": "string" } },
                "oneOf": [ { "required": ["cidr"] }, { "required": ["group"] } ],
            },
        }
    }))]);
    assert!(
        validator
            .validate(&widget(json!({ "peer": { "cidr": "10.0.0.0/8" } })))
            .is_empty()
    );
    assert_eq!(
        shown(&validator.validate(&widget(json!({ "peer": { "cidr": "a", "group": "b" } })))),
        vec![
            r#"spec.peer: Invalid value: {"cidr":"a","group":"b"}: spec.peer in body must validate one and only one schema (oneOf) (oneOf)"#
        ]
    );
}

#[test]
fn rule_options_message_expression_field_path_reason_and_transitions() {
    let validator = Validator::new(&[crd(json!({
        "type": "object",
        "properties": { "min": { "type": "integer" }, "max": { "type": "integer" } },
        "x-kubernetes-validations": [
            {
                "rule": "self.min <= self.max",
                "messageExpression": "'min ' + string(self.min) + ' is above max ' + string(self.max)",
                "fieldPath": ".max",
                "reason": "FieldValueForbidden",
            },
            { "rule": "self.max < 100" },
            { "rule": "self.min == oldSelf.min", "message": "min is immutable" },
            { "rule": "!has(oldSelf.max) || self.max == oldSelf.max", "optionalOldSelf": true },
            { "rule": "self.min.size() > ", "message": "broken" },
            { "rule": "self.min / 0 == 1" },
        ]
    }))]);
    assert_eq!(
        validator
            .diagnostics()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        vec![
            "CRD widgets.example.com version v1 at spec: the rule does not compile: unexpected end of input (at 1:19) (rule: self.min.size() >)"
        ]
    );
    assert_eq!(
        shown(&validator.validate(&widget(json!({ "min": 200, "max": 150 })))),
        vec![
            "spec.max: Forbidden: min 200 is above max 150 (self.min <= self.max)",
            r#"spec: Invalid value: "object": failed rule: self.max < 100 (self.max < 100)"#,
            r#"spec: Invalid value: "object": the rule does not compile: unexpected end of input (at 1:19) (self.min.size() >)"#,
            r#"spec: Invalid value: "object": division by zero evaluating rule: self.min / 0 == 1 (self.min / 0 == 1)"#,
        ]
    );
}

#[test]
fn a_costly_rule_stops_at_the_per_call_limit() {
    let validator = Validator::new(&[crd(json!({
        "type": "object",
        "properties": { "items": { "type": "array", "items": { "type": "integer" } } },
        "x-kubernetes-validations": [
            { "rule": "self.items.all(x, self.items.all(y, x + y >= 0))" },
        ]
    }))]);
    let items: Vec<i64> = (0..2_000).collect();
    let violations = validator.validate(&widget(json!({ "items": items })));
    assert_eq!(
        shown(&violations),
        vec![
            r#"spec: Invalid value: "object": call cost exceeds limit for rule: self.items.all(x, self.items.all(y, x + y >= 0)) (self.items.all(x, self.items.all(y, x + y >= 0)))"#
        ]
    );
}

#[test]
fn the_platform_crds_compile_and_the_pack_inputs_satisfy_them() {
    let dir = format!("{}/../../config/crds", env!("CARGO_MANIFEST_DIR"));
    let mut crds = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        crds.extend(documents(
            &std::fs::read_to_string(entry.unwrap().path()).unwrap(),
        ));
    }
    let validator = Validator::new(&crds);
    assert_eq!(
        validator
            .diagnostics()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        Vec::<String>::new()
    );
    let mut checked = 0;
    let mut refused = Vec::new();
    for path in [
        "rules/kcp-karmada/fixtures/placement.yaml",
        "rules/kcp-karmada/examples/fleet-workloads.yaml",
        "rules/multicluster-ingress/examples/karmada.yaml",
        "rules/multicluster-ingress/fixtures/members.yaml",
    ] {
        for object in documents(&repo_file(path)) {
            if !validator.has_crd(
                object["apiVersion"].as_str().unwrap_or_default(),
                object["kind"].as_str().unwrap_or_default(),
            ) {
                continue;
            }
            checked += 1;
            let violations = shown(&validator.validate(&object));
            if !violations.is_empty() {
                refused.push(format!(
                    "{}: {}",
                    object["metadata"]["name"],
                    violations.join("; ")
                ));
            }
        }
    }
    // The fixtures the pack's guards refuse are what the CRDs' rules refuse too.
    assert_eq!(
        refused,
        vec![
            r#""empty": spec: Invalid value: "object": set clusterRefs or a non-empty selector (an empty one would select every cluster) ((has(self.clusterRefs) && size(self.clusterRefs) > 0) || (has(self.selector) && ((has(self.selector.matchLabels) && size(self.selector.matchLabels) > 0) || (has(self.selector.matchExpressions) && size(self.selector.matchExpressions) > 0))))"#,
            r#""bad-strategy": spec.strategy: Unsupported value: "Balanced": supported values: "Weighted", "Spread", "FixedReplicas" (enum); some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"#,
            r#""bad-strategy-none": spec.strategy: Unsupported value: "None": supported values: "Weighted", "Spread", "FixedReplicas" (enum); some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"#,
            r#""no-strategy": spec.strategy: Required value (required); spec: Invalid value: "object": no such key: strategy evaluating rule: strategy Spread needs spread (self.strategy != 'Spread' || has(self.spread))"#,
            r#""bad-field-operator": spec.requirements[0]: Invalid value: "object": provider, region and zone take only In and NotIn (!(self.key in ['provider', 'region', 'zone']) || self.operator in ['In', 'NotIn'])"#,
            r#""bad-label-operator": spec.requirements[0].operator: Unsupported value: "Gt": supported values: "In", "NotIn", "Exists", "DoesNotExist" (enum); some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"#,
            r#""bad-in-without-values": spec.requirements[0]: Invalid value: "object": In and NotIn need values; Exists and DoesNotExist take none ((self.operator in ['In', 'NotIn']) == (has(self.values) && size(self.values) > 0))"#,
            r#""bad-spread-missing": spec: Invalid value: "object": strategy Spread needs spread (self.strategy != 'Spread' || has(self.spread))"#,
            r#""bad-spread-both": spec.spread.maxGroups: Required value (required); spec.spread: Invalid value: "object": set exactly one of spreadByField and spreadByLabel (has(self.spreadByField) != has(self.spreadByLabel)); spec.spread: Invalid value: "object": no such key: maxGroups evaluating rule: maxGroups must be at least minGroups (self.maxGroups >= (has(self.minGroups) ? self.minGroups : 1))"#,
            r#""bad-spread-bounds": spec.spread: Invalid value: "object": maxGroups must be at least minGroups (self.maxGroups >= (has(self.minGroups) ? self.minGroups : 1))"#,
            r#""bad-spread-no-max": spec.spread.maxGroups: Required value (required); spec.spread: Invalid value: "object": no such key: maxGroups evaluating rule: maxGroups must be at least minGroups (self.maxGroups >= (has(self.minGroups) ? self.minGroups : 1))"#,
            r#""bad-spread-field": spec.spread.maxGroups: Required value (required); spec.spread.spreadByField: Unsupported value: "country": supported values: "cluster", "region", "zone", "provider" (enum); some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"#,
            r#""bad-weight": spec.weights[0].weight: Invalid value: 0: spec.weights[0].weight in body should be greater than or equal to 1 (minimum)"#,
        ]
    );

    assert!(checked >= 10, "{checked}");
}

#[test]
fn a_validator_can_be_shared_between_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<Validator>();
    shared::<std::sync::Arc<Validator>>();
}

#[test]
fn the_per_object_cost_budget_stops_the_remaining_rules() {
    // A per-call limit above the per-object budget: the first costly rule spends it all.
    let env = switchyard_cel::Env::kubernetes().with_limits(switchyard_cel::Limits {
        per_expression: 50_000_000,
    });
    let validator = Validator::with_env(
        &[crd(json!({
            "type": "object",
            "properties": { "items": { "type": "array", "items": { "type": "integer" } } },
            "x-kubernetes-validations": [
                { "rule": "self.items.all(x, self.items.all(y, x + y >= 0))" },
                { "rule": "size(self.items) == 0", "message": "never evaluated" },
            ]
        }))],
        env,
    );
    let items: Vec<i64> = (0..2_000).collect();
    assert_eq!(
        shown(&validator.validate(&widget(json!({ "items": items })))),
        vec![
            r#"spec: Invalid value: "object": validation failed due to running out of cost budget, no further validation rules will be run (self.items.all(x, self.items.all(y, x + y >= 0)))"#
        ]
    );
}

#[test]
fn a_crd_may_restrict_the_object_name() {
    let mut definition = crd(json!({ "type": "object" }));
    definition["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["metadata"] = json!({
        "type": "object",
        "properties": { "name": { "type": "string", "maxLength": 5 } },
    });
    let validator = Validator::new(&[definition]);
    let mut object = widget(json!({}));
    object["metadata"]["name"] = json!("too-long");
    object["metadata"]["namespace"] = json!("default");
    assert_eq!(
        shown(&validator.validate(&object)),
        vec!["metadata.name: Too long: may not be more than 5 characters (maxLength)"]
    );
}

#[test]
fn field_paths_and_broken_patterns_are_diagnosed() {
    let validator = Validator::new(&[crd(json!({
        "type": "object",
        "properties": { "name": { "type": "string", "pattern": "^(a" } },
        "x-kubernetes-validations": [
            { "rule": "true", "fieldPath": "spec..x" },
            { "rule": "false", "fieldPath": ".labels['a.b'][0]", "message": "nested" },
        ]
    }))]);
    let diagnostics: Vec<String> = validator
        .diagnostics()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(diagnostics.len(), 2, "{diagnostics:?}");
    assert!(
        diagnostics[0].starts_with(
            r#"CRD widgets.example.com version v1 at spec.name: pattern "^(a" does not compile: "#
        ),
        "{}",
        diagnostics[0]
    );
    assert_eq!(
        diagnostics[1],
        r#"CRD widgets.example.com version v1 at spec: the fieldPath "spec..x" does not parse; violations are reported at the rule's node (rule: true)"#
    );
    let violations = validator.validate(&widget(json!({ "name": "a" })));
    assert_eq!(violations.len(), 2, "{:?}", shown(&violations));
    assert!(
        violations[0]
            .to_string()
            .starts_with(r#"spec.name: Invalid value: "a": pattern "^(a" does not compile"#),
        "{}",
        violations[0]
    );
    assert_eq!(
        violations[1].to_string(),
        r#"spec.labels[a.b][0]: Invalid value: "object": nested (false)"#
    );
}

#[test]
fn objects_without_a_crd_get_only_the_metadata_checks() {
    let validator = karmada();
    let service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": { "name": "api", "labels": { "app": "api" } },
        "spec": { "anything": { "goes": true } },
    });
    assert!(!validator.has_crd("v1", "Service"));
    assert!(validator.has_crd("policy.karmada.io/v1alpha1", "PropagationPolicy"));
    assert_eq!(shown(&validator.validate(&service)), Vec::<String>::new());
}

#[test]
fn a_second_crd_for_a_kind_is_diagnosed_and_wins() {
    let first = crd(json!({ "type": "object", "properties": { "a": { "type": "string" } } }));
    let second = crd(json!({ "type": "object", "properties": { "b": { "type": "string" } } }));
    let not_a_crd = json!({ "apiVersion": "v1", "kind": "ConfigMap" });
    let validator = Validator::new(&[first, not_a_crd, second]);
    assert_eq!(
        validator
            .diagnostics()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        vec![
            "CRD widgets.example.com: another CRD also defines Widget.example.com: this one, the later, is used"
        ]
    );
    assert_eq!(
        shown(&validator.validate(&widget(json!({ "a": "x" })))),
        vec!["spec.a: field not declared in schema (properties)"]
    );
}

/// CRD rules compile as the API server compiles them (strict mode): what rule packs may
/// write (heterogeneous literals, quoted field names, the engine's functions) does not.
#[test]
fn rules_compile_as_the_api_server_compiles_them() {
    let validator = Validator::new(&[crd(json!({
        "type": "object",
        "properties": { "min": { "type": "integer" }, "labels": { "type": "object" } },
        "x-kubernetes-validations": [
            { "rule": "[1, 'two'].size() == 2" },
            { "rule": "self.labels.`kubernetes.io/os` == 'linux'" },
            { "rule": "sha256('a') != ''" },
            { "rule": "self.min <= 3" },
        ]
    }))]);
    assert_eq!(
        validator
            .diagnostics()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        vec![
            "CRD widgets.example.com version v1 at spec: the rule does not compile: expected type 'int' but found 'string' (at 1:5) (rule: [1, 'two'].size() == 2)",
            "CRD widgets.example.com version v1 at spec: the rule does not compile: unsupported syntax: '`' (at 1:13) (rule: self.labels.`kubernetes.io/os` == 'linux')",
            "CRD widgets.example.com version v1 at spec: the rule does not compile: function 'sha256' is not in this environment: it is the engine's own, which Kubernetes does not have (the environment is strict) (at 1:1) (rule: sha256('a') != '')",
        ]
    );
    assert_eq!(
        shown(&validator.validate(&widget(json!({ "min": 2, "labels": {} })))).len(),
        3
    );
}
