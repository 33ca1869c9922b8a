//! Hostile YAML through the binary: alias bombs and deep nesting in inputs, bindings and
//! pack files end in a positioned error, quickly, never in an abort or a stack overflow.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers panic on purpose

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A fresh folder for one test's files, removed when the test ends.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!(
        "switchyard-hardening-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

/// Runs the binary from the workspace root; prints and returns how long it took.
fn switchyard(args: &[&str]) -> (Output, Duration) {
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("switchyard runs");
    let took = start.elapsed();
    println!("switchyard {}: {took:?}", args.join(" "));
    (out, took)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The 421-byte "billion laughs" (9^10 nodes expanded).
fn alias_bomb() -> String {
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"];
    let mut text = String::from("a: &a [x, x, x, x, x, x, x, x, x]\n");
    for level in names.windows(2) {
        let refs = vec![format!("*{}", level[0]); 9].join(", ");
        text.push_str(&format!("{}: &{} [{refs}]\n", level[1], level[1]));
    }
    text
}

fn render(input: &Path) -> (Output, Duration) {
    switchyard(&[
        "render",
        "--pack",
        "rules/kcp-karmada",
        "--input",
        input.to_str().unwrap(),
        "--clock",
        "2026-01-01T00:00:00Z",
    ])
}

#[test]
fn an_alias_bomb_input_is_a_positioned_error() {
    let guard = scratch("bomb");
    let dir = &guard.0;
    let input = dir.join("bomb.yaml");
    std::fs::write(&input, alias_bomb()).unwrap();
    let (out, took) = render(&input);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        format!(
            "error: {}:6:8: error[input::yaml]: invalid YAML: aliases expand to more than 100000 nodes\n",
            input.display()
        )
    );
    assert!(took < Duration::from_secs(20), "{took:?}");
}

#[test]
fn a_deeply_nested_input_is_a_positioned_error() {
    let guard = scratch("deep");
    let dir = &guard.0;
    let input = dir.join("deep.yaml");
    std::fs::write(&input, format!("{}x\n", "- ".repeat(30_000))).unwrap();
    let (out, took) = render(&input);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        format!(
            "error: {}:1:201: error[input::yaml]: invalid YAML: nesting deeper than 100\n",
            input.display()
        )
    );
    assert!(took < Duration::from_secs(20), "{took:?}");
}

#[test]
fn an_alias_bomb_in_bindings_is_a_positioned_error() {
    let guard = scratch("bindings");
    let dir = &guard.0;
    let bindings = dir.join("bindings.yaml");
    std::fs::write(&bindings, alias_bomb()).unwrap();
    let (out, _) = switchyard(&["cel", "--bindings", bindings.to_str().unwrap(), "a"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        format!(
            "error: {}:6:8: invalid YAML: aliases expand to more than 100000 nodes\n",
            bindings.display()
        )
    );
}

#[test]
fn an_alias_bomb_in_a_pack_file_is_a_positioned_error() {
    let guard = scratch("pack");
    let dir = &guard.0;
    std::fs::write(dir.join("pack.yaml"), alias_bomb()).unwrap();
    let (out, _) = switchyard(&["check", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!(
            "{}/pack.yaml:6:8: error[yaml::syntax]: invalid YAML: aliases expand to more than 100000 nodes",
            dir.display()
        )),
        "{}",
        stdout(&out)
    );
}

#[test]
fn inputs_with_a_byte_order_mark_render() {
    let guard = scratch("bom");
    let dir = &guard.0;
    for entry in std::fs::read_dir(root().join("rules/kcp-karmada/examples")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(
            dir.join(path.file_name().unwrap()),
            format!("\u{feff}{text}"),
        )
        .unwrap();
    }
    let (out, _) = render(dir);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let golden =
        std::fs::read_to_string(root().join("rules/kcp-karmada/tests/golden/examples.yaml.golden"))
            .unwrap();
    assert_eq!(stdout(&out), golden);
}

#[test]
fn an_input_name_that_would_forge_an_owner_is_refused() {
    let guard = scratch("forge");
    let dir = &guard.0;
    let input = dir.join("forge.yaml");
    std::fs::write(
        &input,
        "apiVersion: platform.edge-portal.eu/v1alpha1\nkind: FleetWorkload\nmetadata:\n  namespace: default\n  name: web,source:FleetWorkload.platform.edge-portal.eu:default/api\n",
    )
    .unwrap();
    let (out, _) = render(&input);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        format!(
            "error: {}:1:1: error[input::object]: metadata.name `web,source:FleetWorkload.platform.edge-portal.eu:default/api` is not a valid Kubernetes name\n",
            input.display()
        )
    );
}
