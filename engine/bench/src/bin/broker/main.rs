//! The broker benchmark: the kcp-karmada pack run by the broker against two real API servers
//! (`source` and `karmada`, from `switchyard-testenv`), compared with a bare kube-rs client
//! making the same writes.
//!
//! ```sh
//! cargo run --release -p switchyard-bench --bin broker -- [--triggers N] [--workers N]
//!     [--concurrency N] [--timeout-minutes N] [--reload-debounce-ms N] [--skip resync,floor]
//! ```
//!
//! Steps, each printing its figures, then a summary table against the targets:
//! 1. a control plane with `source` and `karmada`, the seed CRDs in source and Karmada's
//!    PropagationPolicy and ResourceBinding CRDs in karmada;
//! 2. the world of `switchyard_bench::broker_world` created in source (16 in flight), after
//!    checking with the core's `plan` that every FleetWorkload renders without errors;
//! 3. the broker started, as a child process running `switchyard_kube::run` (this binary with
//!    `--broker-child`), so its peak RSS is its own; the time until every desired object
//!    exists in karmada and every FleetWorkload has `Synced=True`;
//! 4. a resync of the converged system: the writes it makes (target 0);
//! 5. two reloads, each changing the PropagationPolicies of exactly the FleetWorkloads with a
//!    PlacementPolicy (a tenth of them); the time until all of them carry the edit:
//!    - 5a: an annotation inside an `{{#if}}` of the template every trigger renders (the
//!      broker evaluates every trigger of the rule again);
//!    - 5b: after splitting the rule in two by a label (untimed), an annotation in the
//!      template only the second rule, watching the labelled tenth, renders;
//! 6. the floor: on a fresh control plane, the same writes (the plan's merged objects applied,
//!    the finalizer and status of every FleetWorkload) made by a bare client, 16 in flight;
//! 7. the summary.
//!
//! With `--versus-kro 1000,5000` it runs instead the side-by-side comparison with kro
//! (`versus_kro.rs`, the work in `engine/bench/versus-kro`); with `--replicas 1,2,3`, the
//! world converged by that many sharded broker replicas in turn (`replicas.rs`).
//!
//! Everything runs on 127.0.0.1; every wait has a deadline and the whole run stops after
//! `--timeout-minutes` (default 15); the control planes and the broker process are killed
//! when they are dropped.

mod args;
mod bench;
mod child;
mod cluster;
mod converge;
mod error;
mod figures;
mod floor;
mod pack;
mod reload;
mod replicas;
mod report;
mod versus_kro;

use std::error::Error;

/// The allocator of the `switchyard` binary (engine/cli), so the broker child holds memory
/// as the shipped broker does. The feature `system-allocator` leaves it out, for heap
/// profilers that watch the system allocator (see the README).
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use args::Args;
use bench::bench;
use child::child_main;

fn main() -> Result<(), Box<dyn Error>> {
    let args = Args::parse().map_err(|e| e as Box<dyn Error>)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = match &args.child {
        Some(config) => runtime.block_on(child_main(config)),
        None => match (&args.versus_kro, &args.replicas) {
            (Some(sizes), _) => runtime.block_on(versus_kro::versus_kro(&args, sizes)),
            (None, Some(counts)) => runtime.block_on(replicas::replicas(&args, counts)),
            (None, None) => runtime.block_on(bench(&args)),
        },
    };
    result.map_err(|e| e as Box<dyn Error>)
}
