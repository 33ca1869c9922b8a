//! Member clusters, patch outputs and output validation through the `switchyard` binary.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers panic on purpose

mod support;

use support::*;

const MESH: &str = "tests/fixtures/packs/mesh-fanout";
const INVALID: &str = "tests/fixtures/packs/invalid-outputs";

#[test]
fn the_mesh_pack_tests_pass() {
    let out = switchyard(&["test", MESH]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stdout(&out).ends_with("5 passed, 0 failed\n"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn render_fans_out_to_the_members_a_clusters_file_names() {
    let dir = tempfile::tempdir().unwrap();
    let clusters = dir.path().join("clusters.yaml");
    std::fs::write(&clusters, "- mesh/east\n- mesh/west\n").unwrap();
    let input = dir.path().join("in.yaml");
    std::fs::write(
        &input,
        "apiVersion: mesh.example.dev/v1alpha1\nkind: GlobalService\nmetadata: {name: dns, namespace: kube-system}\nspec: {}\n",
    )
    .unwrap();
    let out = switchyard(&[
        "render",
        "--pack",
        MESH,
        "-i",
        input.to_str().unwrap(),
        "--clusters",
        clusters.to_str().unwrap(),
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let plan: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let targets: Vec<(&str, &str)> = plan["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["cluster"].as_str().unwrap(),
                o["object"]["data"]["cluster"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(targets, [("mesh/east", "east"), ("mesh/west", "west")]);
}

#[test]
fn a_clusters_file_with_an_unknown_role_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clusters = dir.path().join("clusters.yaml");
    std::fs::write(&clusters, "- provider/x86\n").unwrap();
    let out = switchyard(&[
        "render",
        "--pack",
        MESH,
        "-i",
        "tests/fixtures/packs/invalid-outputs/input.yaml",
        "--clusters",
        clusters.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "error: --clusters names `provider/x86`, whose role `provider` is not a cluster role of pack `mesh-fanout` (roles: source, mesh)\n"
    );
}

#[test]
fn outputs_the_api_server_would_refuse_are_errors_naming_output_and_field() {
    let out = switchyard(&[
        "render",
        "--pack",
        INVALID,
        "-i",
        "tests/fixtures/packs/invalid-outputs/input.yaml",
        "--validate-against",
        "tests/fixtures/crds",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        concat!(
            "error: source:ConfigMap:team/api: rule `policy`, output `marker`: ConfigMap `team/marker-api` in cluster `karmada` is invalid: metadata.annotations[example.com/enabled]: Invalid value: \"boolean\": metadata.annotations[example.com/enabled] in body must be of type string: \"boolean\" (type)\n",
            "error: source:ConfigMap:team/web: rule `policy`, output `policy`: PropagationPolicy `team/web` in cluster `karmada` is invalid: spec.placement.replicaScheduling.replicaSchedulingType: Unsupported value: \"Spread\": supported values: \"Duplicated\", \"Divided\" (enum)\n",
        )
    );
    // Neither invalid object is printed; the valid ones are.
    let printed = stdout(&out);
    assert!(!printed.contains("Spread"), "{printed}");
    assert!(!printed.contains("marker-api"), "{printed}");
}

#[test]
fn without_the_crds_only_labels_and_annotations_are_checked() {
    let out = switchyard(&[
        "render",
        "--pack",
        INVALID,
        "-i",
        "tests/fixtures/packs/invalid-outputs/input.yaml",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let errors = stderr(&out);
    assert!(errors.contains("output `marker`"), "{errors}");
    assert!(!errors.contains("Spread"), "{errors}");
}
