//! Times the cost and size bombs of the CEL limits (the examples of the hardening issue) and
//! prints, for each, the outcome, the time taken and the peak RSS so far.
//!
//! Usage: `cargo run --release -p switchyard-cel --example limits_timings`

#![allow(clippy::unwrap_used, clippy::expect_used)] // a measuring tool

use std::time::Instant;

use switchyard_cel::{Activation, CelEnvironment, Env, Value};

fn peak_rss_mb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / 1024)
}

fn main() {
    let env = Env::new(CelEnvironment::all());
    let items = Value::from_json(&serde_json::json!({
        "spec": {"items": (0..1_000_000).collect::<Vec<i64>>()}
    }));
    let cases: Vec<(&str, String)> = vec![
        ("distinct 100k", "size(lists.range(100000).distinct())".into()),
        (
            "distinct 100k lists",
            "size(lists.range(100000).map(i, [i]).distinct())".into(),
        ),
        (
            "sets.contains 100k",
            "sets.contains(lists.range(100000), lists.range(100000))".into(),
        ),
        (
            "sets.contains 30k doubles",
            "sets.contains(lists.range(30000).map(i, double(i)), lists.range(30000))".into(),
        ),
        (
            "1000 regex compiles",
            "lists.range(1000).all(i, !'x'.matches('(\\\\w{10}){10}' + string(i)))".into(),
        ),
        (
            "nested replace",
            "'aaaaaaaaaa'.replace('a', 'aaaaaaaaaa').replace('a', 'aaaaaaaaaa')\
             .replace('a', 'aaaaaaaaaa').replace('a', 'aaaaaaaaaa').replace('a', 'aaaaaaaaaa')\
             .replace('a', 'aaaaaaaaaa').replace('a', 'aaaaaaaaaa').replace('a', 'aaaaaaaaaa')"
                .into(),
        ),
        (
            "join 100 MB",
            "size(lists.range(1000).map(i, 'aaaaaaaaaa'.replace('a', 'aaaaaaaaaa')\
             .replace('a', 'aaaaaaaaaa').replace('a', 'aaaaaaaaaa').replace('a', 'aaaaaaaaaa')).join(''))"
                .into(),
        ),
        (
            "lists.range(10000000) x20",
            format!(
                "size([{}])",
                vec!["lists.range(10000000)"; 20].join(", ")
            ),
        ),
        (
            "lists.range(1000000) x20",
            format!("size([{}])", vec!["lists.range(1000000)"; 20].join(", ")),
        ),
        (
            "size(self.spec.items.distinct()), 1M ints",
            "size(self.spec.items.distinct())".into(),
        ),
    ];
    for (name, source) in &cases {
        let start = Instant::now();
        let program = env.compile(source).expect("compiles");
        let mut activation = Activation::new(&env);
        activation.bind("self", items.clone());
        let outcome = match program.eval_with_cost(&activation) {
            Ok((v, cost)) => format!("ok {v:?} (cost {cost})"),
            Err(e) => e.to_string(),
        };
        println!(
            "{name:45} {:>9.3?}  peak RSS {:>5} MB  {outcome}",
            start.elapsed(),
            peak_rss_mb()
        );
    }
    // Compilation bombs.
    let elements = format!("[{}]", vec!["1"; 1_000_000].join(","));
    let escapes = format!("'{}'", "\\U0001F600".repeat(400_000));
    let elements_at_limit = format!("[{}]", vec!["1"; 10_000].join(","));
    let nested_at_limit = format!("[{}]", vec!["[1]"; 10_000].join(","));
    let escapes_at_limit = format!("'{}'", "\\U0001F600".repeat(9_999));
    let patterns = format!(
        "[{}].size()",
        vec![format!("'x'.matches('{}')", "(?i)\\\\pL".repeat(580)); 20].join(", ")
    );
    for (name, source) in [
        ("2 MB list literal", elements),
        ("4 MB of \\U escapes", escapes),
        ("10,000-element list literal", elements_at_limit),
        ("10,000 nested lists", nested_at_limit),
        ("100 KB of \\U escapes", escapes_at_limit),
        ("20 constant 4 KB case-folded patterns", patterns),
    ] {
        let start = Instant::now();
        let outcome = match env.compile(&source) {
            Ok(_) => "compiled".to_string(),
            Err(e) => e.to_string(),
        };
        println!(
            "{name:45} {:>9.3?}  peak RSS {:>5} MB  {outcome}",
            start.elapsed(),
            peak_rss_mb()
        );
    }
}
