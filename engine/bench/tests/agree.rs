//! The hand-written renderer agrees with the pack: same desired objects (byte for byte,
//! ownership included), same status patches and finalizers, same conflicts.
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use chrono::{DateTime, Utc};
use serde_json::Value;
use switchyard_bench::{Rendered, example_inputs, generate, handwritten, load_pack};
use switchyard_core::plan::{self, Plan, parse_inputs, world_of};
use switchyard_core::{MemoryWorld, Pack, yaml};

fn clock() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

/// Compares the plan and the hand-written rendering; returns every difference.
fn differences(plan: &Plan, hand: &Rendered) -> Vec<String> {
    let mut out = Vec::new();
    let text = |v: &Value| serde_json::to_string(v).unwrap();
    let mut engine: Vec<(String, String)> = plan
        .objects
        .iter()
        .map(|d| (d.key.cluster.clone(), text(&d.object)))
        .collect();
    let mut mine: Vec<(String, String)> = hand
        .objects
        .iter()
        .map(|(c, o)| (c.clone(), text(o)))
        .collect();
    if engine != mine {
        out.push("objects are not in the same order".to_string());
    }
    engine.sort();
    mine.sort();
    for e in &engine {
        if !mine.contains(e) {
            out.push(format!("only the pack renders {} {}", e.0, e.1));
        }
    }
    for m in &mine {
        if !engine.contains(m) {
            out.push(format!("only handwritten renders {} {}", m.0, m.1));
        }
    }
    if plan.outcomes.len() != hand.triggers.len() {
        out.push(format!(
            "{} outcomes, {} hand-written triggers",
            plan.outcomes.len(),
            hand.triggers.len()
        ));
    }
    for (o, t) in plan.outcomes.iter().zip(&hand.triggers) {
        if o.trigger != t.trigger {
            out.push(format!("trigger {} vs {}", o.trigger, t.trigger));
            continue;
        }
        if o.status != t.status {
            out.push(format!(
                "{}: status\n  pack:        {}\n  handwritten: {}",
                o.trigger,
                o.status.as_ref().map(text).unwrap_or_default(),
                t.status.as_ref().map(text).unwrap_or_default()
            ));
        }
        if o.finalizer != t.finalizer {
            out.push(format!(
                "{}: finalizer {:?} vs {:?}",
                o.trigger, o.finalizer, t.finalizer
            ));
        }
    }
    if plan.conflicts != hand.conflicts {
        out.push(format!(
            "conflicts\n  pack:        {:?}\n  handwritten: {:?}",
            plan.conflicts, hand.conflicts
        ));
    }
    out
}

/// The hand-written renderer is the FleetWorkload rule's twin: the pack's other rule
/// (`kubernetes-cluster`) is left out by leaving out its trigger kind.
fn fleet_path(objects: &[(String, Value)]) -> Vec<(String, Value)> {
    objects
        .iter()
        .filter(|(_, o)| o["kind"] != "KubernetesCluster")
        .cloned()
        .collect()
}

fn check(pack: &Pack, name: &str, world: &MemoryWorld) -> usize {
    let plan = plan::plan(pack, world, clock());
    let hand = handwritten(world, clock());
    let diffs = differences(&plan, &hand);
    assert!(
        diffs.is_empty(),
        "{name}: the pack and handwritten disagree:\n{}",
        diffs.join("\n")
    );
    plan.objects.len()
}

#[test]
fn examples_and_fixtures_agree() {
    let pack = load_pack().unwrap();
    let inputs = example_inputs().unwrap();
    assert!(
        inputs.iter().any(|(f, _)| f.starts_with("examples/"))
            && inputs.iter().any(|(f, _)| f.starts_with("fixtures/")),
        "no examples or fixtures found: {:?}",
        inputs.iter().map(|(f, _)| f).collect::<Vec<_>>()
    );
    let mut all = Vec::new();
    for (file, objects) in &inputs {
        let objects = fleet_path(objects);
        check(&pack, file, &world_of(&objects, &[]).unwrap());
        all.extend(objects);
    }
    // Together: the examples' FleetWorkloads see the fixtures' Fleets and policies too.
    let rendered = check(&pack, "examples + fixtures", &world_of(&all, &[]).unwrap());
    assert!(rendered >= 8, "only {rendered} objects rendered");
}

/// Every case of the pack's test suites (`rules/kcp-karmada/tests/*.yaml`): errors, hostile
/// strings, workspaces, status, shared namespaces.
#[test]
fn test_suite_inputs_agree() {
    let pack = load_pack().unwrap();
    let mut cases = 0;
    for (file, suite) in pack.test_suites() {
        for case in &suite.spec.cases {
            let mut objects = Vec::new();
            for input in &case.input_files {
                let text = &pack.files().files[input];
                objects.extend(parse_inputs(text, input, "source").unwrap());
            }
            for inline in &case.inputs {
                objects.extend(parse_inputs(&yaml::to_yaml(inline), file, "source").unwrap());
            }
            if pack.place_all(&mut objects).is_err() {
                // Inputs the engine refuses (no workspace): nothing to compare.
                continue;
            }
            let world = world_of(&fleet_path(&objects), &[]).unwrap();
            check(&pack, &format!("{file}, case `{}`", case.name), &world);
            cases += 1;
        }
    }
    assert!(cases > 20, "only {cases} test cases found");
}

#[test]
fn generated_world_agrees() {
    let pack = load_pack().unwrap();
    let world = generate(500);
    let plan = plan::plan(&pack, &world, clock());
    // The generated world exercises every path.
    assert_eq!(plan.outcomes.len(), 500);
    let reasons: std::collections::BTreeSet<String> = plan
        .outcomes
        .iter()
        .filter_map(|o| o.status.as_ref())
        .flat_map(|s| s["conditions"].as_array().unwrap().clone())
        .map(|c| {
            format!(
                "{}={}",
                c["type"].as_str().unwrap(),
                c["reason"].as_str().unwrap()
            )
        })
        .collect();
    for expected in [
        "Synced=Synced",
        "Synced=FleetNotFound",
        "Synced=InvalidFleet",
        "Synced=PlacementPolicyNotFound",
        "Synced=InvalidPlacementPolicy",
        "Synced=InvalidWorkspace",
        "Synced=InvalidFleetWorkload",
        "Synced=InvalidName",
        "Ready=FullyApplied",
        "Ready=NotScheduled",
        "Ready=NotFullyApplied",
        "Ready=BindingPending",
    ] {
        assert!(
            reasons.contains(expected),
            "{expected} missing: {reasons:?}"
        );
    }
    assert!(plan.outcomes.iter().any(|o| o.deleting));
    assert!(!plan.conflicts.is_empty(), "no conflict generated");
    check(&pack, "generate(500)", &world);
}

#[test]
fn generate_is_deterministic() {
    let a: Vec<String> = generate(120)
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    let b: Vec<String> = generate(120)
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    assert_eq!(a, b);
}
