//! Pack parameters in the dry run: values from `--values` files and `--set`, checked against
//! the parameters' schemas with errors naming where each value was written.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers panic on purpose

mod support;

use support::*;

const PACK: &str = "tests/fixtures/packs/params";
const APP: &str = "tests/fixtures/packs/params/examples/app.yaml";

fn render(extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "render",
        "--pack",
        PACK,
        "-i",
        APP,
        "--clock",
        "2026-01-01T00:00:00Z",
    ];
    args.extend_from_slice(extra);
    switchyard(&args)
}

#[test]
fn values_files_and_sets_reach_cel_and_templates() {
    let out = render(&[
        "--values",
        "tests/fixtures/packs/params/values/traefik.yaml",
        "--set",
        "replicas=4",
        "--set",
        "labels.tier=front",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("  class: traefik\n  replicas: \"4\"\n"),
        "{text}"
    );
    assert!(text.contains("    team: web\n    tier: front\n"), "{text}");
}

#[test]
fn a_required_parameter_without_a_value_is_an_error_naming_it() {
    let out = render(&[]);
    assert_eq!(
        (out.status.code(), stderr(&out).as_str()),
        (
            Some(2),
            "error: pack `params`: parameter `ingressClass` (string) has no default, and no value was given for it\n"
        )
    );
}

#[test]
fn values_files_are_checked_with_file_line_and_column() {
    let out = render(&[
        "--values",
        "tests/fixtures/packs/params/values/invalid.yaml",
    ]);
    assert_eq!(
        (out.status.code(), stderr(&out).as_str()),
        (
            Some(2),
            "\
error: tests/fixtures/packs/params/values/invalid.yaml:5:1: `ingresClass` is not a parameter of pack `params` (did you mean `ingressClass`?)
error: tests/fixtures/packs/params/values/invalid.yaml:1:15: params.ingressClass: Unsupported value: \"haproxy\": supported values: \"nginx\", \"traefik\" (enum)
error: tests/fixtures/packs/params/values/invalid.yaml:2:11: params.replicas: Invalid value: \"string\": params.replicas in body must be of type integer: \"string\" (type)
error: tests/fixtures/packs/params/values/invalid.yaml:4:9: params.labels[team]: Invalid value: \"integer\": params.labels[team] in body must be of type string: \"integer\" (type)
"
        )
    );
}

#[test]
fn sets_are_checked_naming_the_flag_the_parameter_and_the_type() {
    let out = render(&[
        "--set",
        "ingressClass=nginx",
        "--set",
        "replicas=abc",
        "--set",
        "replicas2=1",
    ]);
    assert_eq!(
        (out.status.code(), stderr(&out).as_str()),
        (
            Some(2),
            "\
error: --set replicas2=1: `replicas2` is not a parameter of pack `params` (did you mean `replicas`?)
error: --set replicas=abc: params.replicas: Invalid value: \"string\": params.replicas in body must be of type integer: \"string\" (type)
"
        )
    );
    let out = render(&["--set", "ingressClass"]);
    assert_eq!(
        (out.status.code(), stderr(&out).as_str()),
        (
            Some(2),
            "error: --set ingressClass: expected NAME=VALUE (or PATH=VALUE, PATH as `a.b`)\n"
        )
    );
    // A later value wins; `labels={}` merges into the file's labels, whose `team` stays the
    // file's.
    let out = render(&[
        "--values",
        "tests/fixtures/packs/params/values/invalid.yaml",
        "--set",
        "ingressClass=nginx",
        "--set",
        "replicas=11",
        "--set",
        "labels={}",
        "--set",
        "ingresClass=null",
    ]);
    assert_eq!(
        stderr(&out),
        "\
error: --set ingresClass=null: `ingresClass` is not a parameter of pack `params` (did you mean `ingressClass`?)
error: --set replicas=11: params.replicas: Invalid value: 11: params.replicas in body should be less than or equal to 10 (maximum)
error: tests/fixtures/packs/params/values/invalid.yaml:4:9: params.labels[team]: Invalid value: \"integer\": params.labels[team] in body must be of type string: \"integer\" (type)
"
    );
}

#[test]
fn test_suites_set_their_own_values() {
    let out = switchyard(&["test", PACK]);
    assert_eq!(
        (out.status.code(), stdout(&out).as_str()),
        (
            Some(0),
            "\
PASS params nginx: the class and replicas come from the values
PASS params traefik: a guard reads the parameters
2 passed, 0 failed
"
        ),
        "{}",
        stderr(&out)
    );
    // `--set` under the suites' values: the suite's class stays, the replicas are the flag's.
    let out = switchyard(&["test", PACK, "--set", "replicas=9"]);
    assert!(
        stdout(&out).contains("FAIL params nginx: the class and replicas come from the values\n"),
        "{}",
        stdout(&out)
    );
}
