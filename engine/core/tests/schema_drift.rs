//! The checked-in JSON Schema must be what the Rust types generate.
//! Regenerate with `cargo run -p switchyard-cli -- schema > schemas/rulepack.schema.json`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers panic on purpose

#[test]
fn checked_in_schema_matches_the_types() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../schemas/rulepack.schema.json"
    );
    let checked_in = std::fs::read_to_string(path).expect("schemas/rulepack.schema.json exists");
    let generated = serde_json::to_string_pretty(&switchyard_core::model::json_schema()).unwrap();
    assert!(
        checked_in.trim_end() == generated.trim_end(),
        "schemas/rulepack.schema.json is stale: run `cargo run -p switchyard-cli -- schema > schemas/rulepack.schema.json`"
    );
}
