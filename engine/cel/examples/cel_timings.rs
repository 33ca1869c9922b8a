//! Prints ns per evaluation of the CEL benchmark expressions as JSON (`{"E1_and_index": 123.4, ...}`),
//! for `scripts/cel-vs-cpp.sh`, which compares them with Google's C++ runtime in the same run.
//!
//! Usage: `cargo run --release -p switchyard-cel --example cel_timings -- OBJECT.json EXPRS.json`

#![allow(clippy::unwrap_used, clippy::expect_used)] // a measuring tool: bad input may panic

use std::time::{Duration, Instant};

use switchyard_cel::{Activation, CelEnvironment, Env, Value};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let object: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&args[1]).expect("object file")).unwrap();
    let exprs: Vec<(String, String)> =
        serde_json::from_str(&std::fs::read_to_string(&args[2]).expect("exprs file")).unwrap();
    let env = Env::new(CelEnvironment::all());
    let this = Value::from_json(&object);
    let mut out = serde_json::Map::new();
    for (name, source) in &exprs {
        let program = env.compile(source).expect("compiles");
        let mut activation = Activation::new(&env);
        activation.bind("self", this.clone());
        program.eval(&activation).expect("evaluates");
        // Grow the batch until it takes 200 ms, then take the best of five batches.
        let mut n: u64 = 1000;
        loop {
            let start = Instant::now();
            for _ in 0..n {
                std::hint::black_box(program.eval(&activation).ok());
            }
            if start.elapsed() > Duration::from_millis(200) {
                break;
            }
            n *= 2;
        }
        let best = (0..5)
            .map(|_| {
                let start = Instant::now();
                for _ in 0..n {
                    std::hint::black_box(program.eval(&activation).ok());
                }
                start.elapsed().as_nanos() as f64 / n as f64
            })
            .fold(f64::INFINITY, f64::min);
        out.insert(name.clone(), serde_json::json!(best));
    }
    println!("{}", serde_json::Value::Object(out));
}
