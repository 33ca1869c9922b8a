//! Behaviour of `evaluate()` and `plan()` on a small pack built in memory.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers panic on purpose

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use switchyard_core::plan::{parse_inputs, plan, to_yaml, world_of};
use switchyard_core::{MemoryWorld, Pack, PackFiles, Trigger, evaluate, load};

const PACK: &str = r#"
apiVersion: switchyard.dev/v1alpha1
kind: RulePack
metadata: {name: demo, version: 1.2.3}
spec:
  clusters:
    - {name: source, access: [read, writeStatus]}
    - {name: edge, access: [read, write]}
  scope:
    - cluster: edge
      kinds:
        - {apiVersion: v1, kind: Namespace, clusterScoped: true}
        - {apiVersion: v1, kind: ConfigMap}
      namespaces: ["team-*"]
"#;

const RULE: &str = r#"
apiVersion: switchyard.dev/v1alpha1
kind: Rule
metadata: {name: app}
spec:
  watch: {apiVersion: example.com/v1, kind: App}
  lookups:
    - name: owner
      apiVersion: example.com/v1
      kind: Team
      objectName: self.spec.team
      required: true
      reason: TeamNotFound
  when:
    - expression: "!has(self.spec.disabled)"
    - expression: self.spec.cities.size() <= 3
      reason: TooManyCities
      messageExpression: "'at most 3 cities, got ' + string(self.spec.cities.size())"
  vars:
    - name: namespace
      expression: "'team-' + owner.metadata.name"
  outputs:
    - name: namespace
      cluster: edge
      template: namespace.yaml.hbs
    - name: city
      cluster: edge
      template: city.yaml.hbs
      forEach: self.spec.cities
  status:
    fields:
      cities: self.spec.cities.size()
    conditions:
      - type: Ready
        status: "true"
        reason: "'Rendered'"
"#;

const NAMESPACE: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {{vars.namespace}}\n";
const CITY: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{self.metadata.name}}-{{item}}\n  namespace: {{vars.namespace}}\n  labels:\n    city: {{item}}\ndata:\n  app: {{self.metadata.name}}\n  note: {{self.spec.note}}\n  index: {{index}}\n";

fn pack_with(rule: &str) -> Pack {
    pack_with_files(rule, &[])
}

/// Loads the demo pack with `rule`, plus files that replace or add to the default ones.
fn load_demo(rule: &str, extra: &[(&str, &str)]) -> switchyard_core::LoadResult {
    let mut files = BTreeMap::from([
        ("pack.yaml".to_string(), PACK.to_string()),
        ("rules/app.yaml".to_string(), rule.to_string()),
        (
            "templates/namespace.yaml.hbs".to_string(),
            NAMESPACE.to_string(),
        ),
        ("templates/city.yaml.hbs".to_string(), CITY.to_string()),
    ]);
    for (path, text) in extra {
        files.insert((*path).to_string(), (*text).to_string());
    }
    load(&PackFiles {
        root: "demo".into(),
        files,
        shared_partials: BTreeMap::new(),
    })
}

/// The errors of loading the demo pack with `rule` and `extra` files.
fn load_errors(rule: &str, extra: &[(&str, &str)]) -> Vec<String> {
    load_demo(rule, extra)
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| d.to_string())
        .collect()
}

/// The demo pack with `rule`, plus files that replace or add to the default ones.
fn pack_with_files(rule: &str, extra: &[(&str, &str)]) -> Pack {
    let result = load_demo(rule, extra);
    let messages: Vec<String> = result.diagnostics.iter().map(|d| d.to_string()).collect();
    result
        .pack
        .unwrap_or_else(|| panic!("pack loads: {messages:#?}"))
}

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

fn app(name: &str, cities: &[&str], note: &str) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "App",
           "metadata": {"name": name, "namespace": "default", "generation": 4},
           "spec": {"team": "red", "cities": cities, "note": note}})
}

fn team() -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Team", "metadata": {"name": "red", "namespace": "default"}})
}

fn world(objects: &[Value]) -> MemoryWorld {
    let mut w = MemoryWorld::new();
    for o in objects {
        w.insert("source", o.clone()).unwrap();
    }
    w
}

/// Evaluates `trigger` (in the source cluster) against `world` at the test clock.
/// [`run`] with a conversion cache shared across the triggers of a round.
fn run_in(
    pack: &Pack,
    trigger: &Value,
    world: &MemoryWorld,
    conversions: &switchyard_core::Conversions<'_>,
) -> switchyard_core::Outcome {
    switchyard_core::evaluate_in(
        pack,
        Trigger {
            cluster: "source",
            object: trigger,
        },
        world,
        now(),
        conversions,
    )
    .unwrap()
}

fn run(pack: &Pack, trigger: &Value, world: &MemoryWorld) -> switchyard_core::Outcome {
    run_in(
        pack,
        trigger,
        world,
        &switchyard_core::Conversions::default(),
    )
}

fn condition<'a>(status: &'a Value, kind: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == kind)
        .unwrap_or_else(|| panic!("condition {kind} in {status}"))
}

#[test]
fn fan_out_per_item_with_ownership_and_status() {
    let pack = pack_with(RULE);
    let trigger = app("web", &["ber", "muc"], "hello");
    let w = world(&[trigger.clone(), team()]);
    let outcome = run(&pack, &trigger, &w);
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    let names: Vec<String> = outcome.desired.iter().map(|d| d.key.to_string()).collect();
    assert_eq!(
        names,
        [
            "edge:ConfigMap:team-red/web-ber",
            "edge:ConfigMap:team-red/web-muc",
            "edge:Namespace:team-red"
        ]
    );
    let ber = &outcome.desired[0].object;
    assert_eq!(ber["data"]["index"], json!(0));
    assert_eq!(ber["metadata"]["labels"]["switchyard.dev/pack"], "demo");
    assert_eq!(
        ber["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "switchyard"
    );
    assert_eq!(
        ber["metadata"]["annotations"]["switchyard.dev/pack-version"],
        "1.2.3"
    );
    assert_eq!(
        ber["metadata"]["annotations"]["switchyard.dev/rule"],
        "app/city"
    );
    assert_eq!(
        ber["metadata"]["annotations"]["switchyard.dev/owners"],
        "source:App.example.com:default/web"
    );
    let status = outcome.status.as_ref().unwrap();
    assert_eq!(status["cities"], 2);
    let synced = condition(status, "Synced");
    assert_eq!(synced["status"], "True");
    assert_eq!(synced["message"], "rendered by app (3 outputs)");
    assert_eq!(synced["observedGeneration"], 4);
    assert_eq!(synced["lastTransitionTime"], "2026-01-01T00:00:00Z");
    assert_eq!(condition(status, "Ready")["reason"], "Rendered");
    assert_eq!(outcome.finalizer.as_deref(), Some("switchyard.dev/demo"));
}

#[test]
fn hostile_strings_stay_data() {
    let pack = pack_with(RULE);
    let hostile =
        "x\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: stolen}\n\"quoted\": {{self}} # c";
    let trigger = app("web", &["ber"], hostile);
    let w = world(&[trigger.clone(), team()]);
    let outcome = run(&pack, &trigger, &w);
    assert_eq!(outcome.desired.len(), 2);
    let cm = &outcome.desired[0].object;
    assert_eq!(cm["data"]["note"], hostile);
    assert_eq!(cm["data"].as_object().unwrap().len(), 3);
    // The YAML the CLI prints reads back as the same two objects.
    let printed = switchyard_core::plan::merge(&pack, vec![outcome]);
    let text = to_yaml(&printed);
    let back = switchyard_core::yaml::parse_documents(&text).unwrap();
    assert_eq!(back.len(), 2);
    assert_eq!(back[0].to_json()["kind"], "Namespace");
    assert_eq!(back[1].to_json()["data"]["note"], hostile);
}

#[test]
fn missing_required_lookup_blocks_with_reason() {
    let pack = pack_with(RULE);
    let trigger = app("web", &["ber"], "n");
    let w = world(std::slice::from_ref(&trigger));
    let outcome = run(&pack, &trigger, &w);
    assert!(outcome.desired.is_empty());
    let synced = condition(outcome.status.as_ref().unwrap(), "Synced");
    assert_eq!(synced["status"], "False");
    assert_eq!(synced["reason"], "TeamNotFound");
    assert_eq!(
        synced["message"],
        "Team `red` not found in namespace `default` of cluster `source` (lookup `owner` of rule `app`)"
    );
}

#[test]
fn guard_with_reason_blocks_and_quiet_guard_skips() {
    let pack = pack_with(RULE);
    let trigger = app("web", &["a", "b", "c", "d"], "n");
    let w = world(&[trigger.clone(), team()]);
    let outcome = run(&pack, &trigger, &w);
    assert!(outcome.desired.is_empty());
    let synced = condition(outcome.status.as_ref().unwrap(), "Synced");
    assert_eq!(
        (synced["reason"].as_str(), synced["message"].as_str()),
        (Some("TooManyCities"), Some("at most 3 cities, got 4"))
    );

    let mut disabled = app("web", &["a"], "n");
    disabled["spec"]["disabled"] = json!(true);
    let outcome = run(&pack, &disabled, &w);
    assert!(outcome.desired.is_empty());
    let synced = condition(outcome.status.as_ref().unwrap(), "Synced");
    assert_eq!(synced["reason"], "NoRuleApplies");
    assert_eq!(
        synced["message"],
        "no rule applies: app (guard spec.when[0] is false)"
    );
}

#[test]
fn evaluation_error_names_rule_and_expression() {
    let pack = pack_with(RULE);
    let mut trigger = app("web", &["a"], "n");
    trigger["spec"]["cities"] = json!(7);
    let w = world(&[trigger.clone(), team()]);
    let outcome = run(&pack, &trigger, &w);
    assert!(outcome.desired.is_empty());
    assert_eq!(outcome.errors.len(), 1);
    let error = &outcome.errors[0];
    assert_eq!(error.rule, "app");
    assert_eq!(error.path, "spec.when[1].expression");
    assert_eq!(
        error.expression.as_deref(),
        Some("self.spec.cities.size() <= 3")
    );
    let synced = condition(outcome.status.as_ref().unwrap(), "Synced");
    assert_eq!(synced["reason"], "EvaluationError");
    assert!(
        synced["message"].as_str().unwrap()
            == "rule `app`, spec.when[1].expression at demo/rules/app.yaml:16:40: no matching overload for 'size' applied to (int)",
        "{synced}"
    );
}

#[test]
fn one_bad_trigger_does_not_stop_the_others() {
    let pack = pack_with(RULE);
    let mut bad = app("bad", &["a"], "n");
    bad["spec"]["cities"] = json!(7);
    let w = world(&[bad, app("good", &["ber"], "n"), team()]);
    let p = plan(&pack, &w, now());
    assert_eq!(p.outcomes.len(), 2);
    let keys: Vec<String> = p.objects.iter().map(|d| d.key.to_string()).collect();
    assert_eq!(
        keys,
        [
            "edge:Namespace:team-red",
            "edge:ConfigMap:team-red/good-ber"
        ]
    );
    assert_eq!(p.error_messages().len(), 1);
}

#[test]
fn shared_output_is_one_object_owned_by_every_trigger() {
    let pack = pack_with(RULE);
    let w = world(&[app("a", &["x"], "n"), app("b", &["y"], "n"), team()]);
    let p = plan(&pack, &w, now());
    let ns = p
        .objects
        .iter()
        .find(|d| d.key.kind == "Namespace")
        .unwrap();
    assert_eq!(
        ns.object["metadata"]["annotations"]["switchyard.dev/owners"],
        "source:App.example.com:default/a,source:App.example.com:default/b"
    );
    assert_eq!(p.objects.len(), 3);
    assert!(p.conflicts.is_empty());
}

/// 5,000 triggers sharing one namespace: its ownership metadata stays far below Kubernetes'
/// 256 KiB limit on an object's annotations, naming the first owners and `+more`.
#[test]
fn ownership_metadata_of_a_widely_shared_output_is_bounded() {
    let pack = pack_with(RULE);
    let mut objects = vec![team()];
    objects.extend((0..5000).map(|i| app(&format!("app-{i:04}"), &[], "n")));
    let p = plan(&pack, &world(&objects), now());
    let ns = p
        .objects
        .iter()
        .find(|d| d.key.kind == "Namespace")
        .unwrap();
    assert_eq!(ns.owners.len(), 5000);
    let annotations = ns.object["metadata"]["annotations"].as_object().unwrap();
    let total: usize = annotations
        .iter()
        .map(|(k, v)| k.len() + v.as_str().unwrap().len())
        .sum();
    assert!(total < 2048, "annotations take {total} bytes");
    let owners: Vec<&str> = annotations["switchyard.dev/owners"]
        .as_str()
        .unwrap()
        .split(',')
        .collect();
    assert_eq!(owners.len(), 9);
    assert_eq!(owners[0], "source:App.example.com:default/app-0000");
    assert_eq!(owners[7], "source:App.example.com:default/app-0007");
    assert_eq!(owners[8], "+more");
}

#[test]
fn outputs_outside_the_scope_are_refused() {
    let rule = RULE.replace("'team-' + owner.metadata.name", "'kube-system'");
    let pack = pack_with(&rule);
    let trigger = app("web", &["ber"], "n");
    let w = world(&[trigger.clone(), team()]);
    let outcome = run(&pack, &trigger, &w);
    let synced = condition(outcome.status.as_ref().unwrap(), "Synced");
    assert_eq!(synced["reason"], "ScopeViolation");
    assert_eq!(
        synced["message"],
        "v1 ConfigMap `web-ber` in namespace `kube-system` of cluster `edge` is outside the pack's scope"
    );
    assert!(
        outcome
            .desired
            .iter()
            .all(|d| d.key.namespace.as_deref() != Some("kube-system"))
    );
}

#[test]
fn deleting_trigger_desires_nothing() {
    let pack = pack_with(RULE);
    let mut trigger = app("web", &["ber"], "n");
    trigger["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    let w = world(&[trigger.clone(), team()]);
    let outcome = run(&pack, &trigger, &w);
    assert!(outcome.deleting);
    assert!(outcome.desired.is_empty());
    assert!(outcome.finalizer.is_none());
}

#[test]
fn transition_time_is_kept_while_status_is_unchanged() {
    let pack = pack_with(RULE);
    let mut trigger = app("web", &["ber"], "n");
    trigger["status"] = json!({"conditions": [
        {"type": "Synced", "status": "True", "lastTransitionTime": "2025-05-05T00:00:00Z"},
        {"type": "Ready", "status": "False", "lastTransitionTime": "2025-05-05T00:00:00Z"}]});
    let w = world(&[trigger.clone(), team()]);
    let outcome = run(&pack, &trigger, &w);
    let status = outcome.status.unwrap();
    assert_eq!(
        condition(&status, "Synced")["lastTransitionTime"],
        "2025-05-05T00:00:00Z"
    );
    assert_eq!(
        condition(&status, "Ready")["lastTransitionTime"],
        "2026-01-01T00:00:00Z"
    );
}

#[test]
fn evaluation_is_deterministic() {
    let pack = pack_with(RULE);
    let inputs = "apiVersion: example.com/v1\nkind: Team\nmetadata: {name: red, namespace: default}\n---\n\
apiVersion: example.com/v1\nkind: App\nmetadata: {name: a, namespace: default}\nspec: {team: red, cities: [z, y, x], note: n}\n";
    let objects = parse_inputs(inputs, "inputs.yaml", "source").unwrap();
    let first = to_yaml(&plan(&pack, &world_of(&objects, &[]).unwrap(), now()));
    for _ in 0..5 {
        assert_eq!(
            to_yaml(&plan(&pack, &world_of(&objects, &[]).unwrap(), now())),
            first
        );
    }
}

#[test]
fn inputs_name_their_cluster_with_an_annotation() {
    let text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations:\n    switchyard.dev/cluster: edge\n";
    let objects = parse_inputs(text, "in.yaml", "source").unwrap();
    assert_eq!(objects[0].0, "edge");
    assert!(objects[0].1["metadata"].get("annotations").is_none());
    let err = parse_inputs("kind: ConfigMap\n", "in.yaml", "source").unwrap_err();
    assert_eq!(
        err.to_string(),
        "in.yaml:1:1: error[input::object]: object has no `apiVersion`"
    );
}

#[test]
fn tables_are_data_in_cel_and_templates_and_decide_evaluates_them() {
    let table = r#"
apiVersion: switchyard.dev/v1alpha1
kind: DecisionTable
metadata: {name: regions}
spec:
  hitPolicy: first
  inputs: [{name: city, type: string}]
  outputs: [{name: region, type: string}]
  rows:
    - when: {city: [ber, muc]}
      then: {region: eu-central}
    - when: {city: sfo}
      then: {region: us-west}
  default: {region: unknown}
"#;
    let rule = RULE.replace(
        "  outputs:\n",
        "    - name: regions\n      expression: \"self.spec.cities.map(c, decide('regions', {'city': c}).region)\"\n    - name: known\n      expression: tables.regions.map(r, r.region)\n  outputs:\n",
    );
    let city = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{self.metadata.name}}-{{item}}\n  namespace: {{vars.namespace}}\ndata:\n  regions: {{vars.regions}}\n  first: {{tables.regions.[0].region}}\n";
    let pack = pack_with_files(
        &rule,
        &[
            ("tables/regions.yaml", table),
            ("templates/city.yaml.hbs", city),
        ],
    );
    let trigger = app("web", &["ber", "sfo", "xyz"], "n");
    let w = world(&[trigger.clone(), team()]);
    let outcome = run(&pack, &trigger, &w);
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    let cm = &outcome.desired[0].object;
    assert_eq!(
        cm["data"]["regions"],
        json!(["eu-central", "us-west", "unknown"])
    );
    assert_eq!(cm["data"]["first"], "eu-central");
    let known = outcome
        .trace
        .iter()
        .find(|t| t.step == "vars.known")
        .unwrap();
    assert_eq!(known.result, r#"["eu-central","us-west"]"#);
}

#[test]
fn a_rule_stopped_after_rendering_desires_nothing() {
    // The status mapping fails after the outputs rendered: the rule desires nothing.
    let rule = RULE.replace(
        "cities: self.spec.cities.size()",
        "cities: self.spec.cities.size()\n      broken: self.spec.missing.field",
    );
    let pack = pack_with(&rule);
    let trigger = app("web", &["ber"], "n");
    let w = world(&[trigger.clone(), team()]);
    let outcome = run(&pack, &trigger, &w);
    assert!(outcome.desired.is_empty(), "{:?}", outcome.desired);
    assert_eq!(outcome.errors.len(), 1);
    assert_eq!(outcome.errors[0].path, "spec.status.fields.broken");
    assert_eq!(
        condition(outcome.status.as_ref().unwrap(), "Synced")["reason"],
        "EvaluationError"
    );
}

#[test]
fn a_quadratic_expression_is_stopped_by_the_cost_budget_and_others_go_on() {
    let rule = RULE.replace(
        "  when:\n",
        "  when:\n    - expression: self.spec.items.all(x, self.spec.items.exists(y, y == x))\n",
    );
    let pack = pack_with(&rule);
    let mut huge = app("huge", &["ber"], "n");
    huge["spec"]["items"] = json!((0..10_000).collect::<Vec<i64>>());
    let mut small = app("small", &["muc"], "n");
    small["spec"]["items"] = json!([1, 2, 3]);
    let w = world(&[huge, small, team()]);
    let p = plan(&pack, &w, now());
    let keys: Vec<String> = p.objects.iter().map(|d| d.key.to_string()).collect();
    assert_eq!(
        keys,
        [
            "edge:Namespace:team-red",
            "edge:ConfigMap:team-red/small-muc"
        ]
    );
    let huge = p
        .outcomes
        .iter()
        .find(|o| o.trigger.name == "huge")
        .unwrap();
    assert_eq!(huge.errors.len(), 1);
    let error = &huge.errors[0];
    assert_eq!(
        (error.rule.as_str(), error.path.as_str()),
        ("app", "spec.when[0].expression")
    );
    assert!(
        error.message.starts_with("cost limit exceeded: ")
            && error
                .message
                .ends_with(" > 1000000 (spec.limits.celCostPerExpression)"),
        "{}",
        error.message
    );
    let synced = condition(huge.status.as_ref().unwrap(), "Synced");
    assert_eq!(synced["reason"], "EvaluationError");
    assert!(
        synced["message"]
            .as_str()
            .unwrap()
            .starts_with("rule `app`, spec.when[0].expression at demo/rules/app.yaml:15:")
    );
}

#[test]
fn the_object_budget_bounds_all_expressions_of_a_trigger() {
    let pack_yaml = PACK.replace(
        "spec:\n  clusters:",
        "spec:\n  limits: {celCostPerExpression: 100000, celCostPerObject: 150000}\n  clusters:",
    );
    let rule = RULE.replace(
        "  when:\n",
        "  when:\n    - expression: self.spec.items.all(x, x >= 0)\n    - expression: self.spec.items.all(x, x < 100000)\n",
    );
    let pack = pack_with_files(&rule, &[("pack.yaml", &pack_yaml)]);
    let mut trigger = app("web", &["ber"], "n");
    trigger["spec"]["items"] = json!((0..20_000).collect::<Vec<i64>>());
    let w = world(&[trigger.clone(), team()]);
    let outcome = run(&pack, &trigger, &w);
    assert_eq!(outcome.errors.len(), 1);
    let error = &outcome.errors[0];
    assert_eq!(error.path, "spec.when[1].expression");
    assert!(
        error.message.ends_with(
            ": the trigger's cost budget (spec.limits.celCostPerObject = 150000) is spent"
        ),
        "{}",
        error.message
    );
}

#[test]
fn an_object_read_by_many_triggers_is_converted_once_per_round() {
    let pack = pack_with(RULE);
    let a = app("a", &["x"], "n");
    let b = app("b", &["y"], "n");
    let w = world(&[a.clone(), b.clone(), team()]);
    let conversions = switchyard_core::Conversions::default();
    for trigger in [&a, &b] {
        let outcome = run_in(&pack, trigger, &w, &conversions);
        assert_eq!(outcome.desired.len(), 2);
    }
    // The one Team both of them look up. The triggers are converted only as far as the
    // rule reads them, and such a conversion is not kept.
    assert_eq!(conversions.len(), 1);
}

#[test]
fn a_variable_of_looked_up_objects_alone_is_shared_by_the_triggers_that_find_them() {
    // `team` reads only the lookup: evaluated for the first trigger, shared with the
    // second. `mine` reads the trigger too: evaluated for each.
    let rule = RULE.replace(
        "  vars:\n",
        "  vars:\n    - name: team\n      expression: \"owner.metadata.name + '-' + string(size(owner.metadata.name))\"\n    - name: mine\n      expression: vars.team + '/' + self.metadata.name\n",
    ).replace(
        "      cities: self.spec.cities.size()\n",
        "      cities: self.spec.cities.size()\n      team: vars.team\n      mine: vars.mine\n",
    );
    let pack = pack_with(&rule);
    let a = app("a", &["x"], "n");
    let b = app("b", &["y", "z"], "n");
    let w = world(&[a.clone(), b.clone(), team()]);
    let shared = switchyard_core::Conversions::default();
    for trigger in [&a, &b] {
        let alone = run(&pack, trigger, &w);
        let sharing = run_in(&pack, trigger, &w, &shared);
        assert!(alone.errors.is_empty(), "{:?}", alone.errors);
        // The same outcome, the CEL cost spent included.
        assert_eq!(sharing.cost, alone.cost);
        assert_eq!(sharing.status, alone.status);
        assert_eq!(sharing.desired, alone.desired);
        let status = alone.status.unwrap();
        assert_eq!(
            status["mine"],
            json!(format!(
                "red-3/{}",
                trigger["metadata"]["name"].as_str().unwrap()
            ))
        );
        assert_eq!(status["team"], json!("red-3"));
        // `namespace` and `team`, kept when the first trigger evaluated them.
        assert_eq!(shared.shared_values(), 2);
    }
}

#[test]
fn check_warns_where_the_cost_of_an_expression_cannot_be_bounded() {
    let rule = RULE.replace(
        "  when:\n",
        "  when:\n    - expression: self.spec.items.all(x, x > 0)\n",
    );
    let result = load_demo(&rule, &[]);
    assert!(result.pack.is_some(), "warnings do not stop loading");
    let warnings: Vec<String> = result
        .diagnostics
        .iter()
        .filter(|d| d.code == "cel::cost")
        .map(|d| d.to_string())
        .collect();
    assert_eq!(
        warnings,
        [
            // `owner.metadata.name` is bounded: a Team is a custom resource, whose name is a
            // DNS subdomain even without its CRD.
            "demo/rules/app.yaml:15:19: warning[cel::cost]: the worst-case cost cannot be bounded: `self.spec.items` is dyn: its size is unknown\n  in rule `app`\n  |     - expression: self.spec.items.all(x, x > 0)\n  |                   ^",
        ]
    );
}

#[test]
fn type_errors_in_pack_files_speak_yaml_not_rust() {
    let messages = |rule: String| -> Vec<String> {
        let files = PackFiles {
            root: "demo".into(),
            files: BTreeMap::from([
                ("pack.yaml".to_string(), PACK.to_string()),
                ("rules/app.yaml".to_string(), rule),
            ]),
            shared_partials: BTreeMap::new(),
        };
        load(&files)
            .diagnostics
            .iter()
            .map(|d| d.to_string())
            .collect()
    };
    let watch = "  watch: {apiVersion: example.com/v1, kind: App}";
    assert_eq!(
        messages(RULE.replace(watch, "  watch: 5")),
        [
            "demo/rules/app.yaml:6:10: error[pack::invalid-value]: invalid type: integer `5`, expected a map at `spec.watch`"
        ]
    );
    assert_eq!(
        messages(RULE.replace(watch, &format!("{watch}\n  deletion: Maybe"))),
        [
            "demo/rules/app.yaml:7:13: error[pack::invalid-value]: unknown variant `Maybe`, expected `Delete` or `Orphan` at `spec.deletion`"
        ]
    );
}

/// The broker's evaluation without a trace decides exactly what the traced one decides.
#[test]
fn untraced_evaluation_decides_the_same() {
    let pack = pack_with(RULE);
    let w = world(&[
        app("a", &["x", "y"], "n"),
        app("b", &["1", "2", "3", "4"], "n"),
        team(),
    ]);
    for trigger in [
        app("a", &["x", "y"], "n"),
        app("b", &["1", "2", "3", "4"], "n"),
    ] {
        let traced = run(&pack, &trigger, &w);
        let untraced = switchyard_core::evaluate_untraced(
            &pack,
            Trigger {
                cluster: "source",
                object: &trigger,
            },
            &w,
            now(),
        )
        .unwrap();
        assert!(!traced.trace.is_empty());
        assert!(untraced.trace.is_empty());
        assert_eq!(
            switchyard_core::Outcome {
                trace: Vec::new(),
                ..traced
            },
            untraced
        );
    }
}

/// The demo rule with a `status.onStop` mapping that reports the stop as a phase.
fn rule_with_on_stop() -> String {
    RULE.replace(
        "  status:\n    fields:\n      cities: self.spec.cities.size()\n",
        "  status:\n    fields:\n      cities: self.spec.cities.size()\n      phase: \"'Ready'\"\n    onStop:\n      fields:\n        phase: \"'Error'\"\n        message: \"stop.reason + ': ' + stop.message\"\n        namespace: \"'namespace' in vars ? vars.namespace : dyn(null)\"\n      conditions:\n        - type: Ready\n          status: \"false\"\n          reason: stop.reason\n",
    )
}

#[test]
fn a_stopped_rule_writes_its_on_stop_status() {
    let pack = pack_with(&rule_with_on_stop());
    let w = world(&[team()]);

    // A guard with a reason: the variables after it are not bound.
    let trigger = app("web", &["a", "b", "c", "d"], "n");
    let status = run(&pack, &trigger, &w).status.unwrap();
    assert_eq!(status["phase"], "Error");
    assert_eq!(status["message"], "TooManyCities: at most 3 cities, got 4");
    assert!(status.get("namespace").is_none(), "{status}");
    assert!(status.get("cities").is_none(), "{status}");
    assert_eq!(condition(&status, "Synced")["reason"], "TooManyCities");
    let ready = condition(&status, "Ready");
    assert_eq!(
        (&ready["status"], &ready["reason"]),
        (&json!("False"), &json!("TooManyCities"))
    );

    // A scope violation stops the rule after its variables: they are visible.
    let pack =
        pack_with(&rule_with_on_stop().replace("'team-' + owner.metadata.name", "'kube-system'"));
    let trigger = app("web", &["ber"], "n");
    let status = run(&pack, &trigger, &w).status.unwrap();
    assert_eq!(status["phase"], "Error");
    assert_eq!(status["namespace"], "kube-system");
    assert_eq!(condition(&status, "Synced")["reason"], "ScopeViolation");

    // A missing required lookup.
    let status = run(&pack, &trigger, &world(&[])).status.unwrap();
    assert_eq!(
        status["message"],
        "TeamNotFound: Team `red` not found in namespace `default` of cluster `source` (lookup `owner` of rule `app`)"
    );

    // A rule that runs writes its own fields, not onStop's.
    let pack = pack_with(&rule_with_on_stop());
    let status = run(&pack, &app("web", &["ber"], "n"), &w).status.unwrap();
    assert_eq!(status["phase"], "Ready");
    assert!(status.get("message").is_none(), "{status}");
}

#[test]
fn an_on_stop_mapping_that_fails_reports_its_error_and_keeps_the_stop() {
    let rule = rule_with_on_stop().replace(
        "stop.reason + ': ' + stop.message",
        "string(int(stop.message))",
    );
    let pack = pack_with(&rule);
    let w = world(&[team()]);
    let outcome = run(&pack, &app("web", &["a", "b", "c", "d"], "n"), &w);
    let status = outcome.status.unwrap();
    assert_eq!(condition(&status, "Synced")["reason"], "TooManyCities");
    assert!(status.get("phase").is_none(), "{status}");
    assert_eq!(outcome.errors.len(), 1, "{:?}", outcome.errors);
    assert!(
        outcome.errors[0]
            .to_string()
            .contains("spec.status.onStop.fields.message"),
        "{}",
        outcome.errors[0]
    );
}

#[test]
fn on_stop_expressions_may_read_stop_and_nothing_unknown() {
    let rule = rule_with_on_stop().replace("stop.reason + ': ' + stop.message", "stopp.reason");
    let result = load_demo(&rule, &[]);
    let messages: Vec<String> = result.diagnostics.iter().map(|d| d.to_string()).collect();
    assert!(result.pack.is_none());
    assert!(
        messages.iter().any(|m| m.starts_with(
            "demo/rules/app.yaml:37:19: error[cel::unknown-variable]: unknown variable `stopp`"
        )),
        "{messages:#?}"
    );
    // `stop` is not bound outside onStop.
    let rule = RULE.replace("cities: self.spec.cities.size()", "cities: stop.reason");
    let result = load_demo(&rule, &[]);
    let messages: Vec<String> = result.diagnostics.iter().map(|d| d.to_string()).collect();
    assert!(
        messages
            .iter()
            .any(|m| m.contains("unknown variable `stop`")),
        "{messages:#?}"
    );
}

#[test]
fn one_trigger_rendering_an_object_twice_joins_or_reports_the_conflict() {
    // The same city twice: the ConfigMaps differ by `index`.
    let pack = pack_with(RULE);
    let trigger = app("web", &["ber", "ber"], "n");
    let w = world(&[team()]);
    let outcome = run(&pack, &trigger, &w);
    let keys: Vec<String> = outcome.desired.iter().map(|d| d.key.to_string()).collect();
    assert_eq!(
        keys,
        ["edge:ConfigMap:team-red/web-ber", "edge:Namespace:team-red"]
    );
    assert_eq!(outcome.desired[0].object["data"]["index"], 0);
    let expected = "`edge:ConfigMap:team-red/web-ber` is rendered twice with different contents, by app/city and by app/city; kept the first";
    assert_eq!(
        outcome
            .errors
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>(),
        [format!("rule `app`, spec.outputs: {expected}")]
    );
    let synced = condition(outcome.status.as_ref().unwrap(), "Synced");
    assert_eq!(
        (&synced["status"], &synced["reason"], &synced["message"]),
        (&json!("False"), &json!("Conflict"), &json!(expected))
    );

    // Two outputs that agree are one object from both.
    let rule = RULE.replace(
        "    - name: city\n",
        "    - name: again\n      cluster: edge\n      template: namespace.yaml.hbs\n    - name: city\n",
    );
    let pack = pack_with(&rule);
    let outcome = run(&pack, &app("web", &["ber"], "n"), &w);
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    let ns = outcome
        .desired
        .iter()
        .find(|d| d.key.kind == "Namespace")
        .unwrap();
    assert_eq!(
        ns.object["metadata"]["annotations"]["switchyard.dev/rule"],
        "app/again,app/namespace"
    );
    assert_eq!(outcome.desired.len(), 2);
}

#[test]
fn a_conflict_is_won_by_the_trigger_that_desired_the_object_first() {
    // Both render ConfigMap team-red/shared-ber with their own note.
    let rule = RULE.replace("{{self.metadata.name}}-{{item}}", "shared-{{item}}");
    let city = CITY.replace("{{self.metadata.name}}-{{item}}", "shared-{{item}}");
    let pack = pack_with_files(&rule, &[("templates/city.yaml.hbs", &city)]);
    let mut older = app("zz-older", &["ber"], "older");
    older["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
    older["metadata"]["uid"] = json!("b");
    let mut newer = app("aa-newer", &["ber"], "newer");
    newer["metadata"]["creationTimestamp"] = json!("2026-02-01T00:00:00Z");
    newer["metadata"]["uid"] = json!("a");
    let w = world(&[team(), older.clone(), newer.clone()]);
    let p = plan(&pack, &w, now());
    let cm = p
        .objects
        .iter()
        .find(|d| d.key.to_string() == "edge:ConfigMap:team-red/shared-ber")
        .unwrap();
    assert_eq!(cm.object["data"]["note"], "older");
    assert_eq!(
        p.error_messages(),
        [
            "edge:ConfigMap:team-red/shared-ber: source:App.example.com:default/zz-older and source:App.example.com:default/aa-newer render different contents; kept the version of source:App.example.com:default/zz-older, which desired it first"
        ]
    );
    let status_of = |name: &str| {
        p.outcomes
            .iter()
            .find(|o| o.trigger.name == name)
            .and_then(|o| o.status.clone())
            .unwrap()
    };
    let loser = status_of("aa-newer");
    let synced = condition(&loser, "Synced");
    assert_eq!(
        (&synced["status"], &synced["reason"], &synced["message"]),
        (
            &json!("False"),
            &json!("Conflict"),
            &json!(
                "`edge:ConfigMap:team-red/shared-ber` is rendered with different contents by source:App.example.com:default/zz-older, which desired it first"
            )
        )
    );
    assert_eq!(synced["lastTransitionTime"], "2026-01-01T00:00:00Z");
    assert_eq!(
        condition(&status_of("zz-older"), "Synced")["status"],
        "True"
    );

    // Same creation time: the uid decides.
    newer["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
    let w = world(&[team(), older, newer.clone()]);
    let p = plan(&pack, &w, now());
    let cm = p
        .objects
        .iter()
        .find(|d| d.key.to_string() == "edge:ConfigMap:team-red/shared-ber")
        .unwrap();
    assert_eq!(cm.object["data"]["note"], "newer");

    // A conflict that persists keeps its transition time.
    let mut failed_before = app("zz-older", &["ber"], "older");
    failed_before["metadata"]["creationTimestamp"] = json!("2026-03-01T00:00:00Z");
    failed_before["status"] = json!({"conditions": [{"type": "Synced", "status": "False",
        "reason": "Conflict", "lastTransitionTime": "2025-12-24T00:00:00Z"}]});
    let w = world(&[team(), failed_before, newer]);
    let p = plan(&pack, &w, now());
    let loser = p
        .outcomes
        .iter()
        .find(|o| o.trigger.name == "zz-older")
        .unwrap();
    let synced = condition(loser.status.as_ref().unwrap(), "Synced");
    assert_eq!(
        (&synced["reason"], &synced["lastTransitionTime"]),
        (&json!("Conflict"), &json!("2025-12-24T00:00:00Z"))
    );
}

/// The `cel::cost` diagnostics of loading the demo pack with `rule` and extra files.
fn cost_warnings(rule: String, extra: &[(&str, &str)]) -> Vec<String> {
    load_demo(&rule, extra)
        .diagnostics
        .iter()
        .filter(|d| d.code == "cel::cost")
        .map(|d| d.to_string())
        .collect()
}

#[test]
fn a_stated_max_cost_silences_check_and_is_enforced() {
    let rule = RULE
        .replace(
            "  when:\n",
            "  when:\n    - expression: self.spec.items.all(x, self.spec.items.exists(y, y == x))\n      maxCost: 5000\n",
        )
        .replace(
            "      expression: \"'team-' + owner.metadata.name\"\n",
            "      expression: \"'team-' + owner.metadata.name\"\n      maxCost: 1000\n",
        );
    assert_eq!(cost_warnings(rule.clone(), &[]), Vec::<String>::new());

    let pack = pack_with(&rule);
    let mut big = app("big", &["ber"], "n");
    big["spec"]["items"] = json!((0..200).collect::<Vec<i64>>());
    let mut small = app("small", &["ber"], "n");
    small["spec"]["items"] = json!([1, 2, 3]);
    let w = world(&[team()]);
    let outcome = run(&pack, &big, &w);
    let error = &outcome.errors[0];
    assert_eq!(error.path, "spec.when[0].expression");
    assert!(
        error.message.starts_with("cost limit exceeded: ")
            && error
                .message
                .ends_with(" > 5000 (the maxCost 5000 the rule states for it)"),
        "{}",
        error.message
    );
    assert!(run(&pack, &small, &w).errors.is_empty());
}

#[test]
fn a_stated_max_cost_silences_a_worst_case_over_the_limit_too() {
    let pack = PACK.replace(
        "spec:\n  clusters:",
        "spec:\n  limits: {celCostPerExpression: 2}\n  clusters:",
    );
    let rule = RULE.replace(
        "  when:\n",
        "  when:\n    - expression: self.spec.cities.size() + 1 > 2\n",
    );
    let warnings = |rule: String| -> Vec<String> {
        load_demo(&rule, &[("pack.yaml", &pack)])
            .diagnostics
            .iter()
            .filter(|d| d.code == "cel::cost" && d.line == Some(15))
            .map(|d| d.message.clone())
            .collect()
    };
    assert_eq!(
        warnings(rule.clone()),
        ["the worst-case cost 8 exceeds the limit 2 (spec.limits.celCostPerExpression)"]
    );
    let stated = rule.replace(
        "    - expression: self.spec.cities.size() + 1 > 2\n",
        "    - expression: self.spec.cities.size() + 1 > 2\n      maxCost: 2\n",
    );
    assert_eq!(warnings(stated), Vec::<String>::new());
}

#[test]
fn conditions_a_rule_maps_as_a_field_are_kept_beside_the_engines() {
    let rule = RULE.replace(
        "      cities: self.spec.cities.size()\n",
        "      cities: self.spec.cities.size()\n      conditions: self.spec.downstream\n",
    );
    let pack = pack_with(&rule);
    let mut trigger = app("a", &["ber"], "n");
    trigger["spec"]["downstream"] = json!([
        {"type": "Available", "status": "True", "reason": "Up", "message": "",
         "lastTransitionTime": "2025-01-01T00:00:00Z", "observedGeneration": 9},
        {"type": "Synced", "status": "False", "reason": "Downstream"},
        {"type": "Ready", "status": "False", "reason": "Downstream"}
    ]);
    let outcome = run(&pack, &trigger, &world(&[team()]));
    let status = outcome.status.unwrap();
    let conditions = status["conditions"].as_array().unwrap();
    assert_eq!(
        conditions,
        &[
            json!({"type": "Available", "status": "True", "reason": "Up", "message": "",
                   "lastTransitionTime": "2025-01-01T00:00:00Z", "observedGeneration": 9}),
            json!({"type": "Synced", "status": "True", "reason": "Synced",
                   "message": "rendered by app (2 outputs)",
                   "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 4}),
            json!({"type": "Ready", "status": "True", "reason": "Rendered", "message": "",
                   "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 4}),
        ]
    );

    trigger["spec"]["downstream"] = json!([{"status": "True"}]);
    let outcome = run(&pack, &trigger, &world(&[team()]));
    assert_eq!(
        outcome.errors[0].message,
        "status field `conditions` must be a list of conditions (maps with a string `type`), got [{\"status\":\"True\"}]"
    );
}

/// RULE without its status mapping.
fn rule_without_status() -> String {
    let at = RULE.find("  status:\n").unwrap();
    RULE[..at].to_string()
}

#[test]
fn a_rule_writing_status_to_a_role_without_write_status_is_an_error() {
    let read_only = PACK.replace(
        "{name: source, access: [read, writeStatus]}",
        "{name: source, access: [read]}",
    );
    let errors = load_errors(&rule_without_status(), &[("pack.yaml", &read_only)]);
    assert_eq!(
        errors,
        [
            "demo/rules/app.yaml:6:10: error[pack::cluster-access]: the rule writes its triggers' status (the `Synced` condition), but cluster `source` is not declared with `writeStatus` access in pack.yaml\n  in rule `app`\n  help: add `writeStatus` to the cluster's access, or set `writeStatus: false` on the rule to leave its triggers' status alone"
        ]
    );
    let opted_out = rule_without_status().replace(
        "  watch: {apiVersion: example.com/v1, kind: App}\n",
        "  watch: {apiVersion: example.com/v1, kind: App}\n  writeStatus: false\n",
    );
    assert_eq!(
        load_errors(&opted_out, &[("pack.yaml", &read_only)]),
        Vec::<String>::new()
    );
    // A mapping with `writeStatus: false` says two things at once.
    let both = RULE.replace(
        "  watch: {apiVersion: example.com/v1, kind: App}\n",
        "  watch: {apiVersion: example.com/v1, kind: App}\n  writeStatus: false\n",
    );
    assert_eq!(
        load_errors(&both, &[]),
        [
            "demo/rules/app.yaml:32:5: error[pack::invalid-value]: `spec.status` is written into the trigger's status, but the rule says `writeStatus: false`\n  in rule `app`"
        ]
    );
}

#[test]
fn rules_may_leave_status_and_finalizer_alone() {
    let rule = rule_without_status().replace(
        "  watch: {apiVersion: example.com/v1, kind: App}\n",
        "  watch: {apiVersion: example.com/v1, kind: App}\n  writeStatus: false\n  finalizer: false\n",
    );
    let pack = pack_with(&rule);
    let outcome = run(&pack, &app("a", &["ber"], "n"), &world(&[team()]));
    assert_eq!(outcome.desired.len(), 2);
    assert_eq!((outcome.status, outcome.finalizer), (None, None));

    // The defaults: status and finalizer.
    let pack = pack_with(&rule_without_status());
    let outcome = run(&pack, &app("a", &["ber"], "n"), &world(&[team()]));
    assert!(outcome.status.is_some());
    assert_eq!(outcome.finalizer.as_deref(), Some("switchyard.dev/demo"));
}

/// An App CRD whose status declares `fields` but no `conditions` (as Karmada's
/// MultiClusterIngress).
fn app_crd_without_conditions() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "apps.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"kind": "App", "plural": "apps"},
                    "versions": [{"name": "v1", "served": true, "storage": true,
                                  "subresources": {"status": {}},
                                  "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                      "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                                      "status": {"type": "object", "properties": {
                                          "cities": {"type": "integer"}}}}}}}]}})
}

fn load_with_crds(rule: &str, crds: Vec<Value>) -> switchyard_core::LoadResult {
    let files = BTreeMap::from([
        ("pack.yaml".to_string(), PACK.to_string()),
        ("rules/app.yaml".to_string(), rule.to_string()),
        (
            "templates/namespace.yaml.hbs".to_string(),
            NAMESPACE.to_string(),
        ),
        ("templates/city.yaml.hbs".to_string(), CITY.to_string()),
    ]);
    switchyard_core::load_with(
        &PackFiles {
            root: "demo".into(),
            files,
            shared_partials: BTreeMap::new(),
        },
        &switchyard_core::LoadOptions { crds },
    )
}

#[test]
fn conditions_into_a_status_without_them_are_an_error_unless_the_rule_leaves_synced_out() {
    let errors = |rule: &str| -> Vec<String> {
        load_with_crds(rule, vec![app_crd_without_conditions()])
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| d.to_string())
            .collect()
    };
    let fields_only = RULE.replace(
        "    conditions:\n      - type: Ready\n        status: \"true\"\n        reason: \"'Rendered'\"\n",
        "",
    );
    assert_eq!(
        errors(&fields_only),
        [
            "demo/rules/app.yaml:6:10: error[pack::invalid-value]: the engine's `Synced` condition would be written into the triggers' `status.conditions`, but the CRD of App (example.com/v1) declares no `status.conditions`: the API server refuses such a status\n  in rule `app`\n  help: set `status: {syncedCondition: false}` on the rule (its failures are then Events, logs and metrics only), or `writeStatus: false`, or declare `status.conditions` in the CRD"
        ]
    );
    let no_synced = RULE.replace("  status:\n", "  status:\n    syncedCondition: false\n");
    assert_eq!(
        errors(&no_synced),
        [
            "demo/rules/app.yaml:35:7: error[pack::invalid-value]: the rule's conditions would be written into the triggers' `status.conditions`, but the CRD of App (example.com/v1) declares no `status.conditions`: the API server refuses such a status\n  in rule `app`\n  help: leave out the condition mappings, or declare `status.conditions` in the CRD"
        ]
    );
    let fields_no_synced =
        fields_only.replace("  status:\n", "  status:\n    syncedCondition: false\n");
    assert_eq!(errors(&fields_no_synced), Vec::<String>::new());
    // Without a CRD nothing is known of the status: no error.
    assert_eq!(load_errors(&fields_only, &[]), Vec::<String>::new());
}

#[test]
fn a_rule_leaving_synced_out_writes_its_fields_and_keeps_synced_aside() {
    let rule = RULE
        .replace(
            "    conditions:\n      - type: Ready\n        status: \"true\"\n        reason: \"'Rendered'\"\n",
            "",
        )
        .replace("  status:\n", "  status:\n    syncedCondition: false\n");
    let pack = pack_with(&rule);
    let outcome = run(&pack, &app("a", &["ber"], "n"), &world(&[team()]));
    // No `conditions` at all: the kind's status has none.
    assert_eq!(outcome.status, Some(json!({"cities": 1})));
    let synced = outcome.synced().unwrap();
    assert_eq!(
        (&synced["type"], &synced["status"]),
        (&json!("Synced"), &json!("True"))
    );
    // A stop: still no condition written, the failure kept for Events.
    let mut outcome = run(&pack, &app("a", &["ber"], "n"), &world(&[]));
    assert_eq!(outcome.status, Some(json!({})));
    assert_eq!(outcome.synced().unwrap()["reason"], "TeamNotFound");
    // The broker restates it (an apply failed): the status is left as it was.
    outcome.set_synced("False", "ApplyFailed", "refused");
    assert_eq!(outcome.status, Some(json!({})));
    assert_eq!(outcome.synced().unwrap()["reason"], "ApplyFailed");
}

#[test]
fn an_output_writing_status_needs_a_kind_with_a_status_subresource() {
    let city = format!("{CITY}status:\n  ready: true\n");
    assert_eq!(
        load_errors(RULE, &[("templates/city.yaml.hbs", &city)]),
        [
            "demo/templates/city.yaml.hbs:12:1: error[pack::invalid-value]: output `city` writes `status`, but ConfigMap (v1) has no status subresource to write it through\n  in rule `app`\n  help: leave `status` out of the template, or give the kind's CRD `subresources: {status: {}}`"
        ]
    );
    // A Namespace has one: its rendered status is kept.
    let namespace = format!("{NAMESPACE}status:\n  phase: Active\n");
    let pack = pack_with_files(RULE, &[("templates/namespace.yaml.hbs", &namespace)]);
    let outcome = run(&pack, &app("a", &["ber"], "n"), &world(&[team()]));
    let ns = outcome
        .desired
        .iter()
        .find(|d| d.key.kind == "Namespace")
        .unwrap();
    assert_eq!(ns.object["status"], json!({"phase": "Active"}));
}

#[test]
fn timestamps_are_kept_while_what_they_stamp_is_unchanged() {
    let rule = RULE.replace(
        "      cities: self.spec.cities.size()\n",
        "      cities: self.spec.cities.size()\n      lastSyncTime: keepTime(self.?status.?lastSyncTime, self.?status.?cities, self.spec.cities.size(), now)\n      nested: \"setConditions(self.?status.?nested.orValue(null), [{'type': 'Ready', 'status': self.spec.note == 'ok' ? 'True' : 'False', 'reason': 'R'}, {'type': 'Given', 'status': 'True', 'lastTransitionTime': '2020-01-01T00:00:00Z'}], now)\"\n",
    );
    let warnings = cost_warnings(rule.clone(), &[]);
    assert!(
        warnings
            .iter()
            .all(|w| !w.contains("keepTime") && !w.contains("setConditions")),
        "{warnings:#?}"
    );
    let pack = pack_with(&rule);
    let w = world(&[team()]);
    let at = |clock: &str| {
        DateTime::parse_from_rfc3339(clock)
            .unwrap()
            .with_timezone(&Utc)
    };
    let eval = |trigger: &Value, clock: &str| {
        let outcome = evaluate(
            &pack,
            Trigger {
                cluster: "source",
                object: trigger,
            },
            &w,
            at(clock),
        )
        .unwrap();
        assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
        outcome.status.unwrap()
    };
    let times = |status: &Value| {
        (
            status["lastSyncTime"].as_str().unwrap().to_string(),
            status["nested"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["lastTransitionTime"].as_str().unwrap().to_string())
                .collect::<Vec<_>>(),
        )
    };
    let mut trigger = app("a", &["ber"], "ok");
    let first = eval(&trigger, "2026-01-01T00:00:00Z");
    assert_eq!(
        times(&first),
        (
            "2026-01-01T00:00:00Z".to_string(),
            vec![
                "2026-01-01T00:00:00Z".to_string(),
                "2020-01-01T00:00:00Z".to_string()
            ]
        )
    );
    // Nothing stamped changed: an hour later, the same times (a resync writes nothing).
    trigger["status"] = first.clone();
    let second = eval(&trigger, "2026-01-01T01:00:00Z");
    assert_eq!(second, first);
    // The nested condition's status changes: its time moves, the sync time stays.
    trigger["status"] = second;
    trigger["spec"]["note"] = json!("down");
    let third = eval(&trigger, "2026-01-01T02:00:00Z");
    assert_eq!(
        times(&third),
        (
            "2026-01-01T00:00:00Z".to_string(),
            vec![
                "2026-01-01T02:00:00Z".to_string(),
                "2020-01-01T00:00:00Z".to_string()
            ]
        )
    );
    // What the sync time stamps changes: it moves.
    trigger["status"] = third;
    trigger["spec"]["cities"] = json!(["ber", "muc"]);
    let fourth = eval(&trigger, "2026-01-01T03:00:00Z");
    assert_eq!(times(&fourth).0, "2026-01-01T03:00:00Z");
}

#[test]
fn a_role_states_its_most_members_and_more_stop_the_rules_reading_them() {
    let bounded = PACK.replace(
        "{name: edge, access: [read, write]}",
        "{name: edge, access: [read, write], maxMembers: 2}",
    );
    let rule = RULE
        .replace(
            "      reason: TeamNotFound\n",
            "      reason: TeamNotFound\n    - name: copies\n      cluster: edge\n      allClusters: true\n      apiVersion: v1\n      kind: ConfigMap\n      objectName: self.metadata.name\n",
        )
        .replace(
            "  vars:\n",
            "  vars:\n    - name: members\n      expression: clusters.edge.map(m, m + '-' + self.metadata.name)\n    - name: copied\n      expression: copies.map(c, c.cluster.name)\n",
        )
        .replace(
            "      template: namespace.yaml.hbs\n",
            "      template: namespace.yaml.hbs\n      clusterName: \"'a'\"\n",
        );
    let unbounded = cost_warnings(rule.clone(), &[]);
    assert!(
        unbounded
            .iter()
            .any(|w| w.contains("`clusters.edge` has no maxItems"))
            && unbounded
                .iter()
                .any(|w| w.contains("`copies` has no maxItems")),
        "{unbounded:#?}"
    );
    let warnings = cost_warnings(rule.clone(), &[("pack.yaml", &bounded)]);
    assert!(
        warnings
            .iter()
            .all(|w| !w.contains("clusters.edge") && !w.contains("copies")),
        "{warnings:#?}"
    );

    let pack = pack_with_files(&rule, &[("pack.yaml", &bounded)]);
    let mut w = world(&[team()]);
    for member in ["edge/a", "edge/b"] {
        w.add_cluster(member).unwrap();
    }
    let a = app("a", &[], "n");
    let outcome = run(&pack, &a, &w);
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    assert_eq!(
        condition(outcome.status.as_ref().unwrap(), "Synced")["reason"],
        "Synced"
    );
    w.add_cluster("edge/c").unwrap();
    let outcome = run(&pack, &a, &w);
    let synced = condition(outcome.status.as_ref().unwrap(), "Synced");
    assert_eq!(
        (&synced["status"], &synced["reason"], &synced["message"]),
        (
            &json!("False"),
            &json!("TooManyMembers"),
            &json!("cluster role `edge` has 3 members, more than its maxMembers 2 (pack.yaml)")
        )
    );
}

#[test]
fn optional_selection_on_null_is_none_at_run_time_and_on_a_null_type_a_check_error() {
    // As Kubernetes' CEL does: `.?` on a value that is null at run time (a lookup that found
    // nothing, a null field, a `dyn` null) gives `optional.none()`.
    let rule = rule_without_status()
        .replace(
            "      reason: TeamNotFound\n",
            "      reason: TeamNotFound\n    - name: other\n      apiVersion: example.com/v1\n      kind: Team\n      objectName: \"'nope'\"\n",
        )
        .replace(
            "  vars:\n",
            "  vars:\n    - name: missing\n      expression: other.?spec.?x.orValue('none')\n    - name: nullField\n      expression: self.spec.?gone.orValue(null).?x.orValue('none')\n    - name: dynNull\n      expression: dyn(null).?x.orValue('none')\n",
        )
        + "  status:\n    fields:\n      seen: \"[vars.missing, vars.nullField, vars.dynNull]\"\n";
    let pack = pack_with(&rule);
    let mut trigger = app("a", &["ber"], "n");
    trigger["spec"]["gone"] = Value::Null;
    let outcome = run(&pack, &trigger, &world(&[team()]));
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    assert_eq!(
        outcome.status.unwrap()["seen"],
        json!(["none", "none", "none"])
    );
    // A receiver the checker knows to be null is refused before anything runs, as
    // Kubernetes' checker refuses it (`type 'null' does not support field selection`).
    let typed_null = rule_without_status().replace(
        "  vars:\n",
        "  vars:\n    - name: nothing\n      expression: \"null\"\n    - name: field\n      expression: vars.nothing.?x.orValue(1)\n",
    );
    assert_eq!(
        load_errors(&typed_null, &[]),
        [
            "demo/rules/app.yaml:23:33: error[cel::type]: type 'null' does not support field selection\n  in rule `app`\n  |       expression: vars.nothing.?x.orValue(1)\n  |                                 ^"
        ]
    );
}

#[test]
fn a_list_lookup_states_its_max_items_and_more_stop_the_rule() {
    let rule = RULE
        .replace(
            "      reason: TeamNotFound\n",
            "      reason: TeamNotFound\n    - name: peers\n      apiVersion: example.com/v1\n      kind: App\n      matchLabels: \"{}\"\n      maxItems: 2\n",
        )
        .replace(
            "  vars:\n",
            "  vars:\n    - name: peerNames\n      expression: peers.map(p, p.metadata.name)\n",
        );
    let warnings = cost_warnings(rule.clone(), &[]);
    assert!(
        warnings.iter().all(|w| !w.contains("peers")),
        "{warnings:#?}"
    );
    let unbounded = cost_warnings(rule.replace("      maxItems: 2\n", ""), &[]);
    assert!(
        unbounded
            .iter()
            .any(|w| w.contains("`peers` has no maxItems")),
        "{unbounded:#?}"
    );

    let pack = pack_with(&rule);
    let a = app("a", &["ber"], "n");
    let w = world(&[team(), a.clone(), app("b", &["ber"], "n")]);
    assert!(run(&pack, &a, &w).errors.is_empty());
    let w = world(&[
        team(),
        a.clone(),
        app("b", &["x"], "n"),
        app("c", &["y"], "n"),
    ]);
    let outcome = run(&pack, &a, &w);
    let synced = condition(outcome.status.as_ref().unwrap(), "Synced");
    assert_eq!(
        (&synced["status"], &synced["reason"], &synced["message"]),
        (
            &json!("False"),
            &json!("LookupTooLarge"),
            &json!("lookup `peers` found 3 App objects, more than its maxItems 2")
        )
    );
    assert!(outcome.desired.is_empty());
}

#[test]
fn a_tables_size_is_known_to_the_cost_estimate() {
    let table = "apiVersion: switchyard.dev/v1alpha1\nkind: DecisionTable\nmetadata: {name: members}\nspec:\n  hitPolicy: collect\n  inputs: []\n  outputs: [{name: city, type: string}]\n  rows:\n    - then: {city: ber}\n    - then: {city: muc}\n    - then: {city: par}\n";
    let rule = RULE.replace(
        "  when:\n",
        "  when:\n    - expression: tables.members.all(m, m.city != 'x')\n",
    );
    let warnings = cost_warnings(rule, &[("tables/members.yaml", table)]);
    assert!(
        warnings.iter().all(|w| !w.contains("tables.members")),
        "{warnings:#?}"
    );
}

#[test]
fn a_runtime_error_names_the_variable_and_points_at_the_failing_node() {
    // A folded block with more-indented lines: they keep their indentation and newlines.
    let rule = RULE.replace(
        "  vars:\n",
        "  vars:\n    - name: problems\n      expression: >-\n        [\n          dyn(self.spec.note) >= 3,\n          true\n        ]\n",
    );
    let pack = pack_with(&rule);
    let w = world(&[team()]);
    let outcome = run(&pack, &app("web", &["ber"], "n"), &w);
    let error = &outcome.errors[0];
    assert_eq!(
        error.to_string(),
        "rule `app`, vars.problems at demo/rules/app.yaml:23:31: no matching overload for '_>=_' applied to (string, int)"
    );
    assert_eq!(
        error.snippet().unwrap(),
        "  |           dyn(self.spec.note) >= 3,\n  |                               ^"
    );
    // The Synced message is the same single line.
    let synced = condition(outcome.status.as_ref().unwrap(), "Synced");
    assert_eq!(synced["message"], error.to_string());
}

#[test]
fn a_load_error_after_more_indented_lines_of_a_folded_block_points_at_its_line() {
    let rule = RULE.replace(
        "  vars:\n",
        "  vars:\n    - name: problems\n      expression: >-\n        [\n          1,\n          2\n        ] + [vars.nope]\n",
    );
    let errors: Vec<String> = load_errors(&rule, &[]);
    assert_eq!(
        errors,
        [
            "demo/rules/app.yaml:25:14: error[cel::unknown-variable]: unknown variable `vars.nope`\n  in rule `app`\n  |         ] + [vars.nope]\n  |              ^"
        ]
    );
}

#[test]
fn a_cluster_scoped_lookup_has_a_plain_form() {
    let rule = RULE.replace(
        "      reason: TeamNotFound\n",
        "      reason: TeamNotFound\n    - name: node\n      apiVersion: v1\n      kind: Node\n      clusterScoped: true\n      objectName: \"'n1'\"\n      required: true\n",
    );
    let pack = pack_with(&rule);
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}});
    let outcome = run(&pack, &app("web", &["ber"], "n"), &world(&[team(), node]));
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    assert_eq!(outcome.desired.len(), 2);

    let both = rule.replace(
        "      clusterScoped: true\n",
        "      clusterScoped: true\n      namespace: \"'x'\"\n",
    );
    let errors: Vec<String> = load_errors(&both, &[]);
    assert_eq!(
        errors,
        [
            "demo/rules/app.yaml:17:22: error[pack::invalid-value]: lookup `node` has both `namespace` and `clusterScoped`: a cluster-scoped kind has no namespace\n  in rule `app`"
        ]
    );
}

/// Every diagnostic of loading the demo pack with `rule`.
fn diagnostics_of(rule: String) -> Vec<String> {
    load_demo(&rule, &[])
        .diagnostics
        .iter()
        .map(|d| d.to_string())
        .collect()
}

#[test]
fn a_plain_expression_with_a_colon_gets_a_yaml_hint() {
    let rule = RULE.replace(
        "      expression: \"'team-' + owner.metadata.name\"\n",
        "      expression: self.spec.note == 'x' ? 'a' : 'b'\n",
    );
    assert_eq!(
        diagnostics_of(rule),
        [
            "demo/rules/app.yaml:21:47: error[yaml::syntax]: invalid YAML: mapping values are not allowed in this context\n  help: `expression` holds a CEL expression containing `: `, which YAML reads as a new key: quote it (`expression: \"...\"`) or write it as a block (`expression: >-` with the expression on the next lines)"
        ]
    );
}

#[test]
fn kinds_without_a_schema_are_noted_once_each() {
    let notes: Vec<String> = diagnostics_of(RULE.to_string())
        .into_iter()
        .filter(|d| d.contains("note["))
        .collect();
    assert_eq!(
        notes,
        [
            "demo/rules/app.yaml:6:45: note[cel::no-schema]: App (example.com/v1) has no CRD schema: its fields other than metadata are typed as dyn, so misspelled fields and wrong types in them are not caught\n  in rule `app`\n  help: give its schema as a CRD in a `config/crds/` folder above the pack or with `--crds DIR` (for a built-in kind, a CRD-shaped file holding its OpenAPI schema)",
            "demo/rules/app.yaml:10:13: note[cel::no-schema]: Team (example.com/v1) has no CRD schema: its fields other than metadata are typed as dyn, so misspelled fields and wrong types in them are not caught\n  in rule `app`\n  help: give its schema as a CRD in a `config/crds/` folder above the pack or with `--crds DIR` (for a built-in kind, a CRD-shaped file holding its OpenAPI schema)",
        ]
    );
}

#[test]
fn a_template_error_is_reported_once_with_a_suggestion() {
    let rule = RULE.replace(
        "    - name: city\n",
        "    - name: again\n      cluster: edge\n      template: namespace.yaml.hbs\n      when: \"false\"\n    - name: more\n      cluster: edge\n      template: namespace.yaml.hbs\n      when: \"false\"\n    - name: city\n",
    );
    let namespace = NAMESPACE.replace("vars.namespace", "vars.namespce");
    let errors: Vec<String> = load_errors(&rule, &[("templates/namespace.yaml.hbs", &namespace)]);
    assert_eq!(
        errors,
        [
            "demo/templates/namespace.yaml.hbs:4:9: error[template::unknown-variable]: variable `vars.namespce` is not defined (did you mean `vars.namespace`?) (template `namespace.yaml.hbs` used by outputs `namespace`, `again`, `more`)\n  in rule `app`",
        ]
    );
}

#[test]
fn a_namespaced_kind_without_a_namespace_is_an_error_naming_the_output() {
    let city = CITY.replace("  namespace: {{vars.namespace}}\n", "");
    let pack = pack_with_files(RULE, &[("templates/city.yaml.hbs", &city)]);
    let outcome = run(&pack, &app("web", &["ber"], "n"), &world(&[team()]));
    assert_eq!(
        outcome
            .errors
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>(),
        [
            "rule `app`, output `city`: v1 ConfigMap `web-ber` has no namespace, but the pack's scope has ConfigMap as namespaced in cluster `edge`: set metadata.namespace in the template"
        ]
    );
    let synced = condition(outcome.status.as_ref().unwrap(), "Synced");
    assert_eq!(synced["reason"], "ScopeViolation");
    assert!(outcome.desired.is_empty());
}
