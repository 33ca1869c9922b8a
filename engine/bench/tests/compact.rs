//! `plan_compact` (what `switchyard render` uses) gives the plan `plan` gives: the same YAML
//! byte for byte, the same JSON (statuses, conflicts, errors), on the generated worlds (with
//! their conflicts, invalid triggers and deletions) and the pack's examples and fixtures.
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use chrono::{DateTime, Utc};
use switchyard_bench::{example_inputs, generate, load_pack};
use switchyard_core::MemoryWorld;
use switchyard_core::plan::{self, world_of};

fn clock() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

fn same(pack: &switchyard_core::Pack, world: &MemoryWorld, what: &str) {
    let full = plan::plan(pack, world, clock());
    let compact = plan::plan_compact(pack, world, clock(), &mut |_| Ok(())).unwrap();
    assert_eq!(compact.error_messages(), full.error_messages(), "{what}");
    let mut yaml = Vec::new();
    compact.write_yaml(&mut yaml).unwrap();
    assert!(
        String::from_utf8(yaml).unwrap() == plan::to_yaml(&full),
        "{what}: YAML differs"
    );
    let expanded = compact.into_plan().unwrap();
    assert_eq!(expanded.objects, full.objects, "{what}");
    assert_eq!(expanded.conflicts, full.conflicts, "{what}");
    assert_eq!(plan::to_json(&expanded), plan::to_json(&full), "{what}");
}

#[test]
fn compact_plans_render_what_plans_render() {
    let pack = load_pack().unwrap();
    for n in [1, 60, 700] {
        same(&pack, &generate(n), &format!("generated world of {n}"));
    }
    for (path, objects) in example_inputs().unwrap() {
        same(&pack, &world_of(&objects, &[]).unwrap(), &path);
    }
}
