//! The workspace's layout: no file of a crate imports, directly or through others, a file that
//! imports it, except the CEL interpreter's pair (`eval` and `plan` call each other because the
//! interpreter does: a plan node evaluates, and evaluating a call runs the callee's plan).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn circles_of(dir: &str) -> Vec<switchyard_layout::Circle> {
    let graph = match switchyard_layout::graph(&workspace().join(dir)) {
        Ok(graph) => graph,
        Err(error) => panic!("{dir}: {error}"),
    };
    switchyard_layout::circles(&graph)
}

fn assert_no_circles(dir: &str, allowed: &[&[&str]]) {
    let allowed: Vec<BTreeSet<PathBuf>> = allowed
        .iter()
        .map(|files| files.iter().map(PathBuf::from).collect())
        .collect();
    let unexpected: Vec<String> = circles_of(dir)
        .into_iter()
        .filter(|circle| !allowed.contains(&circle.files))
        .map(|circle| circle.to_string())
        .collect();
    assert!(
        unexpected.is_empty(),
        "{dir} has import circles between files:\n{}",
        unexpected.join("")
    );
}

#[test]
fn the_core_has_no_import_circles() {
    assert_no_circles("engine/core", &[]);
}

#[test]
fn the_broker_has_no_import_circles() {
    assert_no_circles("engine/kube", &[]);
}

#[test]
fn the_test_environment_has_no_import_circles() {
    assert_no_circles("engine/testenv", &[]);
}

#[test]
fn the_cli_files_and_bench_have_no_import_circles() {
    for dir in ["engine/cli", "engine/files", "engine/bench"] {
        assert_no_circles(dir, &[]);
    }
}

#[test]
fn cel_has_only_the_interpreters_pair() {
    assert_no_circles("engine/cel", &[&["src/eval.rs", "src/plan.rs"]]);
}
