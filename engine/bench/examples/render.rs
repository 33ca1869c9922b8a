//! The render figure on its own: generates the input (FleetWorkload `app-<i>`
//! in namespace `ns<i % 100>` of workspace `ws<i % 100>`, one Fleet `f` per namespace),
//! builds the release `switchyard` binary and runs `switchyard render` on it under
//! `/usr/bin/time -v`, printing wall time, peak RSS and the output's SHA-256.
//!
//! ```sh
//! cargo run --release -p switchyard-bench --example render -- 10000 3
//! cargo run --release -p switchyard-bench --example render -- 10000 1 /tmp/fw10k.yaml
//! ```
//!
//! Arguments: the number of FleetWorkloads (default 10000), the number of runs (default 1),
//! and optionally a path to write the generated input to (nothing is rendered then).
// Bench code: a failed setup aborts the run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use switchyard_bench::{fleet_workloads_yaml, measure_render, release_cli};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).map_or(10_000, |a| a.parse().unwrap());
    let runs: usize = args.get(2).map_or(1, |a| a.parse().unwrap());
    if let Some(path) = args.get(3) {
        std::fs::write(path, fleet_workloads_yaml(n)).unwrap();
        println!("wrote {n} FleetWorkloads to {path}");
        return;
    }
    let cli = release_cli().unwrap();
    for _ in 0..runs {
        let figures = measure_render(&cli, n).unwrap();
        println!("{figures}");
        assert_eq!(figures.exit_code, Some(0), "switchyard render failed");
    }
}
