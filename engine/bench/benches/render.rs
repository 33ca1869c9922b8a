//! Renders 10,000 FleetWorkloads through the `kcp-karmada` pack (`plan`: evaluate every
//! trigger and merge) and through the hand-written equivalent, in the same run, and prints
//! both throughputs and their ratio, then the ratio measured side by side (the two in turn);
//! then times `switchyard render` (the release binary) of 10,000 generated FleetWorkloads and
//! prints its wall time and peak RSS.
//!
//! `cargo bench -p switchyard-bench` (about two minutes on 2 cores).
// Bench code: a failed setup aborts the run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::cell::{Cell, RefCell};
use std::hint::black_box;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use criterion::{Criterion, SamplingMode, Throughput};
use sha2::{Digest, Sha256};
use switchyard_bench::{generate, handwritten, load_pack, measure_render, release_cli};
use switchyard_core::plan::plan;

// Both sides run in this process, so both use it; mimalloc as in the CLI.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const FLEET_WORKLOADS: usize = 10_000;

fn clock() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

/// Instant-measured time and iteration count of one side, over every iteration criterion
/// ran (warm-up included), and the last result for the agreement check.
struct Timed<T> {
    total: Cell<Duration>,
    iterations: Cell<u64>,
    last: RefCell<Option<T>>,
}

impl<T> Timed<T> {
    fn new() -> Self {
        Timed {
            total: Cell::new(Duration::ZERO),
            iterations: Cell::new(0),
            last: RefCell::new(None),
        }
    }

    /// Runs `f` `iterations` times. As with `b.iter`, each result is dropped inside the
    /// timed region, except the last one, kept for the agreement check; the one kept from
    /// the previous sample is dropped before the clock starts, so only one result is alive
    /// at a time.
    fn run(&self, iterations: u64, f: impl Fn() -> T) -> Duration {
        let mut last = self.last.borrow_mut();
        *last = None;
        let start = Instant::now();
        for i in 0..iterations {
            let result = black_box(f());
            if i + 1 == iterations {
                *last = Some(result);
            }
        }
        let elapsed = start.elapsed();
        self.total.set(self.total.get() + elapsed);
        self.iterations.set(self.iterations.get() + iterations);
        elapsed
    }

    /// The SHA-256 of the last result's desired objects (then dropped, so the other side
    /// runs on a clean heap).
    fn digest(&self, objects: impl Fn(&T) -> Vec<(&str, &serde_json::Value)>) -> Option<String> {
        let last = self.last.borrow_mut().take()?;
        let mut hash = Sha256::new();
        let list = objects(&last);
        for (cluster, object) in &list {
            hash.update(cluster.as_bytes());
            hash.update(serde_json::to_vec(object).unwrap());
        }
        Some(format!(
            "{} objects, sha256 {:x}",
            list.len(),
            hash.finalize()
        ))
    }

    fn per_second(&self, n: usize) -> f64 {
        let seconds = self.total.get().as_secs_f64() / self.iterations.get().max(1) as f64;
        n as f64 / seconds
    }
}

fn main() {
    let pack = load_pack().unwrap();
    let world = generate(FLEET_WORKLOADS);
    let now = clock();
    println!(
        "world: {FLEET_WORKLOADS} FleetWorkloads, {} objects in all",
        world.len()
    );

    let by_pack = Timed::new();
    let by_hand = Timed::new();
    let mut criterion = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(10))
        .configure_from_args();
    let (pack_digest, hand_digest);
    {
        let mut group = criterion.benchmark_group("render_10000_fleetworkloads");
        group.sampling_mode(SamplingMode::Flat);
        group.throughput(Throughput::Elements(FLEET_WORKLOADS as u64));
        group.bench_function("pack", |b| {
            b.iter_custom(|iterations| {
                by_pack.run(iterations, || plan(&pack, black_box(&world), now))
            });
        });
        pack_digest = by_pack.digest(|p| {
            assert_eq!(p.outcomes.len(), FLEET_WORKLOADS);
            p.objects
                .iter()
                .map(|d| (d.key.cluster.as_str(), &d.object))
                .collect()
        });
        group.bench_function("handwritten", |b| {
            b.iter_custom(|iterations| {
                by_hand.run(iterations, || handwritten(black_box(&world), now))
            });
        });
        hand_digest = by_hand.digest(|h| {
            h.objects
                .iter()
                .map(|(cluster, object)| (cluster.as_str(), object))
                .collect()
        });
        group.finish();
    }
    criterion.final_summary();

    // The two sides rendered the same objects (tests/agree.rs compares everything, status
    // included, on smaller worlds).
    if let (Some(p), Some(h)) = (&pack_digest, &hand_digest) {
        assert_eq!(p, h, "the pack and handwritten rendered different objects");
        println!("both rendered the same desired objects: {p}");
    }
    let (pack_rate, hand_rate) = (
        by_pack.per_second(FLEET_WORKLOADS),
        by_hand.per_second(FLEET_WORKLOADS),
    );
    println!(
        "pack: {pack_rate:.0} FleetWorkloads/s, handwritten: {hand_rate:.0} FleetWorkloads/s, \
         ratio handwritten/pack: {:.2}",
        hand_rate / pack_rate
    );
    println!(
        "(std::time::Instant over every run criterion made: pack {} runs, handwritten {} runs \
         of {FLEET_WORKLOADS} FleetWorkloads)",
        by_pack.iterations.get(),
        by_hand.iterations.get()
    );
    alternating(&pack, &world, now);

    // The CLI at scale: the release binary renders 10,000 FleetWorkloads of 100 workspaces
    // (`fleet_workloads_yaml`), its wall time and peak RSS as `/usr/bin/time -v` reports them.
    match release_cli().and_then(|cli| measure_render(&cli, FLEET_WORKLOADS)) {
        Ok(figures) => {
            assert_eq!(figures.exit_code, Some(0), "switchyard render failed");
            println!("{figures}");
        }
        Err(e) => println!("switchyard render not measured: {e}"),
    }
}

/// Rounds of the side-by-side measurement.
const ROUNDS: usize = 20;

/// The two sides in turn, one run of each per round, which goes first alternating: criterion
/// measures one side for ten seconds and then the other, so a change in the load of this
/// shared machine between the two weighs on one side only; here it weighs on both alike. The
/// figure is the median of the rounds' ratios. Each result is dropped inside its timing, as
/// criterion's `iter` drops it.
fn alternating(
    pack: &switchyard_core::Pack,
    world: &switchyard_core::MemoryWorld,
    now: DateTime<Utc>,
) {
    let time_pack = || {
        let start = Instant::now();
        drop(black_box(plan(pack, black_box(world), now)));
        start.elapsed()
    };
    let time_hand = || {
        let start = Instant::now();
        drop(black_box(handwritten(black_box(world), now)));
        start.elapsed()
    };
    // Warm-up: one of each.
    time_pack();
    time_hand();
    let mut ratios = Vec::with_capacity(ROUNDS);
    let (mut pack_total, mut hand_total) = (Duration::ZERO, Duration::ZERO);
    for round in 0..ROUNDS {
        let (pack_time, hand_time) = if round % 2 == 0 {
            let p = time_pack();
            (p, time_hand())
        } else {
            let h = time_hand();
            (time_pack(), h)
        };
        pack_total += pack_time;
        hand_total += hand_time;
        ratios.push(pack_time.as_secs_f64() / hand_time.as_secs_f64());
    }
    ratios.sort_by(f64::total_cmp);
    let median = (ratios[ROUNDS / 2 - 1] + ratios[ROUNDS / 2]) / 2.0;
    println!(
        "side by side ({ROUNDS} rounds, one run of each per round, in turn): pack {:.0} ms, \
         handwritten {:.0} ms per {FLEET_WORKLOADS} FleetWorkloads (means); \
         ratio handwritten/pack: {median:.2} (median of the rounds; {:.2} to {:.2})",
        pack_total.as_secs_f64() * 1000.0 / ROUNDS as f64,
        hand_total.as_secs_f64() * 1000.0 / ROUNDS as f64,
        ratios[0],
        ratios[ROUNDS - 1]
    );
}
