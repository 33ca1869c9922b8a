//! `switchyard simulate`: a staged pack stepped through time without a cluster.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers panic on purpose

mod support;

use support::*;

const PACK: &str = "tests/fixtures/packs/staged-rollout";

#[test]
fn a_rollout_runs_its_job_then_switches_and_completes() {
    let out = switchyard(&[
        "simulate",
        "--pack",
        PACK,
        "-i",
        "tests/fixtures/packs/staged-rollout/examples/rollout.yaml",
        "--steps",
        "3",
        "--clock",
        "2026-01-01T00:00:00Z",
        "--merge",
        "tests/fixtures/packs/staged-rollout/examples/job-succeeded.yaml@2",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Reviewed: step 0 creates the Job, step 1 changes nothing, step 2 (the Job succeeded)
    // removes it and applies the switch, step 3 (the switch observed) completes.
    let expected =
        std::fs::read_to_string(root().join(PACK).join("examples/simulate.txt")).unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
}

#[test]
fn a_set_outside_the_steps_is_a_usage_error() {
    let out = switchyard(&[
        "simulate",
        "--pack",
        PACK,
        "-i",
        "tests/fixtures/packs/staged-rollout/examples/rollout.yaml",
        "--steps",
        "2",
        "--merge",
        "x.yaml@5",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: --merge `x.yaml@5`: expected FILE@STEP with STEP from 1 to 2\n"
    );
}

#[test]
fn the_staged_test_packs_pass_their_step_by_step_cases() {
    for pack in [PACK, "tests/fixtures/packs/data-stages"] {
        let out = switchyard(&["test", pack]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{pack}: {stdout}");
        assert!(stdout.ends_with("2 passed, 0 failed\n"), "{pack}: {stdout}");
    }
}
