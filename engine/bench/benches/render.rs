//! Renders 10,000 FleetWorkloads through the `kcp-karmada` pack (`plan`: evaluate every
//! trigger and merge) and through the hand-written equivalent, in the same run, and prints
//! both throughputs and their ratio.
//!
//! `cargo bench -p switchyard-bench` (about a minute on 2 cores).
// Bench code: a failed setup aborts the run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use criterion::{Criterion, SamplingMode, Throughput};
use switchyard_bench::{generate, handwritten, load_pack};
use switchyard_core::plan::plan;

const FLEET_WORKLOADS: usize = 10_000;
/// Timed runs of each side for the summary line (after one warm-up run).
const SUMMARY_RUNS: u32 = 3;

fn clock() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

fn main() {
    let pack = load_pack().unwrap();
    let world = generate(FLEET_WORKLOADS);
    let now = clock();

    // The two sides render the same objects for this world (tests/agree.rs checks the details
    // on smaller worlds).
    let by_pack = plan(&pack, &world, now);
    let by_hand = handwritten(&world, now);
    assert_eq!(by_pack.outcomes.len(), FLEET_WORKLOADS);
    let pack_objects: Vec<(&str, &serde_json::Value)> = by_pack
        .objects
        .iter()
        .map(|d| (d.key.cluster.as_str(), &d.object))
        .collect();
    let hand_objects: Vec<(&str, &serde_json::Value)> = by_hand
        .objects
        .iter()
        .map(|(c, o)| (c.as_str(), o))
        .collect();
    assert!(
        pack_objects == hand_objects,
        "the pack and handwritten disagree"
    );
    println!(
        "world: {FLEET_WORKLOADS} FleetWorkloads, {} objects in all; {} desired objects, {} conflicts",
        world.len(),
        by_pack.objects.len(),
        by_pack.conflicts.len()
    );
    drop((by_pack, by_hand));

    let mut criterion = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(15))
        .configure_from_args();
    {
        let mut group = criterion.benchmark_group("render_10000_fleetworkloads");
        group.sampling_mode(SamplingMode::Flat);
        group.throughput(Throughput::Elements(FLEET_WORKLOADS as u64));
        group.bench_function("pack", |b| {
            b.iter(|| black_box(plan(&pack, black_box(&world), now)));
        });
        group.bench_function("handwritten", |b| {
            b.iter(|| black_box(handwritten(black_box(&world), now)));
        });
        group.finish();
    }
    criterion.final_summary();

    // `cargo test --benches` runs each benchmark once; the summary is for `cargo bench`.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let time = |f: &dyn Fn()| {
        f();
        let start = Instant::now();
        for _ in 0..SUMMARY_RUNS {
            f();
        }
        start.elapsed().as_secs_f64() / f64::from(SUMMARY_RUNS)
    };
    let pack_seconds = time(&|| {
        black_box(plan(&pack, &world, now));
    });
    let hand_seconds = time(&|| {
        black_box(handwritten(&world, now));
    });
    let n = FLEET_WORKLOADS as f64;
    println!(
        "pack: {:.0} FleetWorkloads/s, handwritten: {:.0} FleetWorkloads/s, ratio handwritten/pack: {:.1}",
        n / pack_seconds,
        n / hand_seconds,
        pack_seconds / hand_seconds
    );
    println!(
        "(mean of {SUMMARY_RUNS} runs over {FLEET_WORKLOADS} FleetWorkloads: pack {:.1} ms, handwritten {:.1} ms)",
        pack_seconds * 1e3,
        hand_seconds * 1e3
    );
}
