use switchyard_cel::*;
fn main() {
    let env = Env::kubernetes();
    let srcs: Vec<String> = std::fs::read_to_string("/tmp/srcs.txt")
        .unwrap()
        .split("\n---\n")
        .map(|s| s.to_string())
        .collect();
    for src in &srcs {
        match env.compile(src) {
            Ok(p) => {
                let mut act = Activation::new(&env);
                act.bind(
                    "self",
                    Value::from_json(&serde_json::json!({"spec": {"replicas": 3}, "s": "abc"})),
                );
                println!(
                    "{src:?}: ok refs={:?} eval={:?}",
                    p.references(),
                    p.eval(&act).map(|v| v.to_json())
                );
            }
            Err(e) => println!(
                "{src:?}: {}:{} {}\n{}",
                e.line,
                e.column,
                e.message,
                e.caret(src)
            ),
        }
    }
}
