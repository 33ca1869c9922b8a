#![allow(clippy::unwrap_used, clippy::expect_used)]
use switchyard_bench::*;
use switchyard_core::plan::{self, parse_inputs, world_of};
#[test]
fn scratch() {
    let pack = load_pack().unwrap();
    let text = std::fs::read_to_string(
        repo_root().join("rules/kcp-karmada/examples/fleet-workloads.yaml"),
    )
    .unwrap()
    .replace(
        "    - clusterName: edge-fra-1\n",
        "    - clusterNam: edge-fra-1\n",
    );
    let objects = parse_inputs(&text, "x", "source").unwrap();
    let world = world_of(&objects).unwrap();
    let now = chrono::Utc::now();
    let p = plan::plan(&pack, &world, now);
    for o in &p.outcomes {
        println!(
            "{} desired={} status={}",
            o.trigger,
            o.desired.len(),
            o.status.as_ref().unwrap()["conditions"][0]
        );
    }
    println!("objects {}", p.objects.len());
    let h = handwritten(&world, now);
    println!("hand objects {}", h.objects.len());
}
