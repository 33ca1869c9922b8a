//! A small binary to profile one side of the benchmark (perf, valgrind):
//!
//! ```sh
//! cargo run --release -p switchyard-bench --example profile -- pack 2000 3
//! valgrind --tool=callgrind target/release/examples/profile pack 500 1
//! ```
//!
//! Arguments: `pack | handwritten | phases`, the number of FleetWorkloads (default 2000),
//! the number of runs (default 3). `phases` times the pack's two phases separately:
//! `evaluate` for every trigger, then `merge`.
// Bench code: a failed setup aborts the run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use switchyard_bench::{generate, handwritten, load_pack};
use switchyard_core::evaluate::{Conversions, evaluate_in_untraced};
use switchyard_core::plan::{merge, plan};
use switchyard_core::{Trigger, World};

// The allocator of the benchmark and the CLI.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let side = args.get(1).map_or("pack", String::as_str);
    let n: usize = args.get(2).map_or(2000, |a| a.parse().unwrap());
    let runs: u32 = args.get(3).map_or(3, |a| a.parse().unwrap());
    let pack = load_pack().unwrap();
    let world = generate(n);
    let now: DateTime<Utc> = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .unwrap()
        .with_timezone(&Utc);
    let start = Instant::now();
    let (mut evaluating, mut merging, mut dropping) =
        (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    for _ in 0..runs {
        match side {
            "pack" => {
                black_box(plan(&pack, &world, now));
            }
            "handwritten" => {
                black_box(handwritten(&world, now));
            }
            "phases" => {
                let t = Instant::now();
                // As `plan` evaluates: untraced, objects converted once per round.
                let conversions = Conversions::forgetting_triggers();
                let outcomes: Vec<_> = world
                    .iter()
                    .filter(|(k, _)| k.cluster == "source" && k.kind == "FleetWorkload")
                    .map(|(k, object)| {
                        let trigger = Trigger {
                            cluster: &k.cluster,
                            object,
                        };
                        evaluate_in_untraced(
                            &pack,
                            trigger,
                            &world as &dyn World,
                            now,
                            &conversions,
                        )
                        .unwrap()
                    })
                    .collect();
                drop(conversions);
                evaluating += t.elapsed();
                let t = Instant::now();
                let plan = black_box(merge(&pack, outcomes));
                merging += t.elapsed();
                let t = Instant::now();
                drop(plan);
                dropping += t.elapsed();
            }
            other => panic!("unknown side `{other}`: pack, handwritten or phases"),
        }
    }
    let each = start.elapsed().as_secs_f64() / f64::from(runs);
    println!(
        "{side}: {n} FleetWorkloads in {:.1} ms per run, {:.0} FleetWorkloads/s",
        each * 1e3,
        n as f64 / each
    );
    if side == "phases" {
        println!(
            "evaluate: {:.1} ms per run, merge: {:.1} ms per run, dropping the plan: {:.1} ms per run",
            evaluating.as_secs_f64() * 1e3 / f64::from(runs),
            merging.as_secs_f64() * 1e3 / f64::from(runs),
            dropping.as_secs_f64() * 1e3 / f64::from(runs)
        );
    }
}
