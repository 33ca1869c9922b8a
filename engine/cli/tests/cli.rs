//! The `switchyard` binary, run as users run it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers panic on purpose

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn switchyard(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("switchyard runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn check_reports_every_error_of_a_broken_pack_with_positions() {
    let out = switchyard(&["check", "tests/fixtures/packs/broken"]);
    assert_eq!(out.status.code(), Some(1), "stderr: {}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "\
tests/fixtures/packs/broken/rules/config.yaml:11:39: error[cel::syntax]: invalid CEL expression: unexpected end of input
  in rule `config`
  | self.spec.replicas >
  |                     ^
tests/fixtures/packs/broken/rules/config.yaml:15:7: error[pack::unknown-field]: unknown field `replicsa`, expected `name` or `expression` at `spec.vars[0].replicsa`
tests/fixtures/packs/broken/tables/sizes.yaml:17:7: error[table::lint]: rows 1 and 2 overlap: both match replicas=3
tests/fixtures/packs/broken/templates/config.yaml.hbs:8:9: error[template::unknown-variable]: variable `vars.size` is not defined (template `config.yaml.hbs` used by output `config`)
  in rule `config`
tests/fixtures/packs/broken: 4 errors, 0 warnings
"
    );
}

#[test]
fn check_json_lists_diagnostics() {
    let out = switchyard(&["check", "--json", "tests/fixtures/packs/broken"]);
    assert_eq!(out.status.code(), Some(1));
    let diagnostics: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let codes: Vec<&str> = diagnostics
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        [
            "cel::syntax",
            "pack::unknown-field",
            "table::lint",
            "template::unknown-variable"
        ]
    );
    assert_eq!(diagnostics[0]["line"], 11);
    assert_eq!(diagnostics[0]["column"], 39);
    assert_eq!(diagnostics[0]["rule"], "config");
}

#[test]
fn missing_pack_folder_is_a_usage_error() {
    let out = switchyard(&["check", "tests/fixtures/packs/does-not-exist"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "error: pack folder `tests/fixtures/packs/does-not-exist` does not exist\n"
    );
}

#[test]
fn schema_command_prints_the_checked_in_schema() {
    let out = switchyard(&["schema"]);
    assert_eq!(out.status.code(), Some(0));
    let checked_in = std::fs::read_to_string(root().join("schemas/rulepack.schema.json")).unwrap();
    assert_eq!(stdout(&out), checked_in);
}

/// Every shipped pack's own test cases pass (`switchyard test` over rules/).
#[test]
fn shipped_packs_pass_their_tests() {
    let out = switchyard(&["test"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(!text.contains("FAIL"), "{text}");
    let last = text.lines().last().unwrap_or("");
    assert!(
        last.ends_with(" 0 failed") && !last.starts_with("0 passed"),
        "{last}"
    );
}

/// Every shipped pack passes `switchyard check` without errors.
#[test]
fn shipped_packs_check_clean() {
    let packs: Vec<String> = std::fs::read_dir(root().join("rules"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("pack.yaml").is_file())
        .map(|p| format!("rules/{}", p.file_name().unwrap().to_string_lossy()))
        .collect();
    assert!(!packs.is_empty());
    let mut args = vec!["check"];
    args.extend(packs.iter().map(String::as_str));
    let out = switchyard(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}
