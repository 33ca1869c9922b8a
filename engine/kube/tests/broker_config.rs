//! The checked-in broker configuration schema and example must match the Rust types.
//! Regenerate the schema with
//! `SWITCHYARD_UPDATE_SCHEMAS=1 cargo test -p switchyard-kube --test broker_config`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers panic on purpose

use std::path::{Path, PathBuf};

use switchyard_kube::config::{BrokerConfig, Flags, LogFormat, schema};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn checked_in_schema_matches_the_types() {
    let path = root().join("schemas/broker-config.schema.json");
    let generated = serde_json::to_string_pretty(&schema()).unwrap() + "\n";
    if std::env::var_os("SWITCHYARD_UPDATE_SCHEMAS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let checked_in =
        std::fs::read_to_string(&path).expect("schemas/broker-config.schema.json exists");
    assert!(
        checked_in == generated,
        "schemas/broker-config.schema.json is stale: run \
         `SWITCHYARD_UPDATE_SCHEMAS=1 cargo test -p switchyard-kube --test broker_config`"
    );
}

#[test]
fn the_example_configuration_parses() {
    let path = root().join("config/broker.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.starts_with("# yaml-language-server: $schema=../schemas/broker-config.schema.json\n"),
        "the example names its schema for editors"
    );
    let config = BrokerConfig::from_file(&path).unwrap();
    let config = config.with_flags(Flags::default()).unwrap();
    let config_dir = root().join("config");
    assert_eq!(config.packs, Some(config_dir.join("../rules")));
    assert_eq!(config.partials, Some(config_dir.join("../templates")));
    assert_eq!(config.crds, [config_dir.join("crds")]);
    let ids: Vec<String> = config.clusters.iter().map(|c| c.id().to_string()).collect();
    assert_eq!(ids, ["source", "karmada"]);
    assert!(
        config
            .clusters
            .iter()
            .all(|c| c.kubeconfig.is_some() && c.context.is_some())
    );
    assert_eq!(config.log_format, LogFormat::Json);
    // The paths it names for packs and CRDs are the repository's.
    assert!(
        config
            .packs
            .unwrap()
            .join("kcp-karmada/pack.yaml")
            .is_file()
    );
    assert!(config.crds[0].is_dir());
}
