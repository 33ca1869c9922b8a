//! Input files the dry-run commands refuse, with where and why.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn render(input: &Path) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .current_dir(root())
        .args(["render", "--pack", "rules/kcp-karmada", "--input"])
        .arg(input)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn an_input_that_is_not_utf8_is_refused_at_its_position() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    std::fs::write(
        &file,
        b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a\xff}\n",
    )
    .unwrap();
    let (code, stderr) = render(&file);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("bad.yaml:3:19: not UTF-8 (byte 0xff)"),
        "{stderr}"
    );
}

#[test]
fn an_input_of_an_unknown_cluster_role_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("other.yaml");
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: default\n  annotations: {switchyard.dev/cluster: mgmt}\n",
    )
    .unwrap();
    let (code, stderr) = render(&file);
    assert_eq!(code, Some(2));
    assert_eq!(
        stderr.trim(),
        "error: mgmt:ConfigMap:default/a: the annotation switchyard.dev/cluster names `mgmt`, which is not a cluster role of pack `kcp-karmada` (roles: source, karmada, management)"
    );
}
