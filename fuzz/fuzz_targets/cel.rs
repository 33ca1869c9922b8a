//! Any expression either fails to compile with an error or evaluates, within the cost limit,
//! to a value or an error: never a panic, never unbounded time or memory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::json;
use switchyard_cel::{Activation, Env, Value};

fuzz_target!(|data: &[u8]| {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    let env = Env::kubernetes();
    let Ok(program) = env.compile(source) else {
        return;
    };
    let object = json!({"metadata": {"name": "a", "labels": {"x": "y"}},
                        "spec": {"items": [1, 2, 3], "note": "n", "ratio": 0.5}});
    let mut activation = Activation::new(&env);
    activation.bind("self", Value::from_json(&object));
    activation.bind("vars", Value::from_json(&json!({"n": 3, "s": "text"})));
    activation.with_budget(1_000_000);
    let _ = program.eval(&activation);
});
