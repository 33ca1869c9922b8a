//! Evaluation speed on a Kubernetes object: `cargo bench -p switchyard-cel`.
//!
//! Reads `shared/bench/cel/object.json` (the object, bound as `self`) and `exprs.json`
//! (`[[name, expression], ...]`) beside the workspace, at run time; without them it says so
//! and measures nothing. Each expression is compiled once and `self` converted and bound
//! once; what is measured is one evaluation.
//!
//! Besides criterion's report, prints a plain table: nanoseconds per evaluation, and the
//! same minus the baseline expression `E0` (`true`), i.e. the cost of the expression itself
//! rather than of calling the evaluator.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::Criterion;
use switchyard_cel::{Activation, CelEnvironment, Env, Value};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/bench/cel")
}

fn load() -> Option<(serde_json::Value, Vec<(String, String)>)> {
    let dir = data_dir();
    let object = std::fs::read_to_string(dir.join("object.json")).ok()?;
    let exprs = std::fs::read_to_string(dir.join("exprs.json")).ok()?;
    let object: serde_json::Value = serde_json::from_str(&object).ok()?;
    let exprs: Vec<(String, String)> = serde_json::from_str(&exprs).ok()?;
    Some((object, exprs))
}

/// Nanoseconds per call of `f`, the median of a few timed batches.
fn ns_per_call(mut f: impl FnMut()) -> f64 {
    // warm up, and size a batch to about 20 ms
    let start = Instant::now();
    let mut calls: u64 = 0;
    while start.elapsed() < Duration::from_millis(200) {
        f();
        calls += 1;
    }
    let batch = (calls / 10).max(1);
    let mut samples: Vec<f64> = (0..15)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..batch {
                f();
            }
            t.elapsed().as_nanos() as f64 / batch as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn main() {
    let Some((object, exprs)) = load() else {
        println!(
            "the benchmark data is not at {}: nothing to measure",
            data_dir().display()
        );
        return;
    };
    let env = Env::new(CelEnvironment::all());
    let self_value = Value::from_json(&object);
    let mut activation = Activation::new(&env);
    activation.bind("self", self_value);
    let mut programs = Vec::new();
    for (name, source) in &exprs {
        let program = match env.compile(source) {
            Ok(p) => p,
            Err(e) => {
                println!("{name}: does not compile: {e}");
                continue;
            }
        };
        if let Err(e) = program.eval(&activation) {
            println!("{name}: does not evaluate: {e}");
            continue;
        }
        programs.push((name.clone(), program));
    }
    programs.sort_by(|a, b| a.0.cmp(&b.0));

    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    for (name, program) in &programs {
        criterion.bench_function(name, |b| {
            b.iter(|| black_box(program.eval(black_box(&activation))));
        });
    }
    criterion.final_summary();

    let figures: Vec<(String, f64)> = programs
        .iter()
        .map(|(name, program)| {
            let ns = ns_per_call(|| {
                let _ = black_box(program.eval(black_box(&activation)));
            });
            (name.clone(), ns)
        })
        .collect();
    let baseline = figures
        .iter()
        .find(|(name, _)| name.starts_with("E0"))
        .map_or(0.0, |(_, ns)| *ns);
    println!("\n{:<20} {:>10} {:>14}", "expr", "ns/eval", "minus E0");
    for (name, ns) in &figures {
        println!("{name:<20} {ns:>10.0} {:>14.0}", ns - baseline);
    }
}
