//! The memory budget of the dry-run commands: an input too large for it ends in a clear
//! error (exit code 2), never in an allocator abort; inputs within it render as before.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers panic on purpose

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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
    let dir = std::env::temp_dir().join(format!("switchyard-memory-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

fn switchyard(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_switchyard"));
    command.args(args).current_dir(root());
    command.env_remove("SWITCHYARD_MAX_MEMORY");
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("switchyard runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `n` FleetWorkloads for the kcp-karmada pack, 50 per workspace with their Fleet, as YAML.
fn fleet_workloads(n: usize) -> String {
    let mut text = String::with_capacity(n * 420);
    for i in 0..n {
        let workspace = format!("w{:015}", i / 50);
        if i % 50 == 0 {
            text.push_str(&format!(
                "apiVersion: platform.edge-portal.eu/v1alpha1\nkind: Fleet\nmetadata:\n  \
                 name: edge-{workspace}\n  namespace: default\n  annotations:\n    \
                 kcp.io/cluster: {workspace}\nspec:\n  clusterRefs:\n    - name: edge-fra-1\n---\n"
            ));
        }
        text.push_str(&format!(
            "apiVersion: platform.edge-portal.eu/v1alpha1\nkind: FleetWorkload\nmetadata:\n  \
             name: app-{i}\n  namespace: default\n  generation: 1\n  annotations:\n    \
             kcp.io/cluster: {workspace}\nspec:\n  fleetRef:\n    name: edge-{workspace}\n  \
             replicas: 2\n  template:\n    spec:\n      containers:\n        - name: app\n          \
             image: ghcr.io/edge-connect/app:1.0.{}\n---\n",
            i % 100
        ));
    }
    text
}

/// Checks the budget's message: what happened (the budget, how far the command got, the
/// memory in use) and what to do.
fn assert_over_budget(out: &Output, budget: &str) {
    let e = stderr(out);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(
        out.stdout.is_empty(),
        "nothing is printed of a plan cut short"
    );
    let head = format!(" needs more memory than the {budget} budget (stopped ");
    let tail = " in use); render fewer objects at a time or raise --max-memory\n";
    let (what, rest) = e
        .strip_prefix("error: ")
        .and_then(|m| m.split_once(&head))
        .unwrap_or_else(|| panic!("unexpected message: {e}"));
    assert!(
        what == "the input" || (what.starts_with("input of ") && what.ends_with(" objects")),
        "{e}"
    );
    let progress = rest
        .strip_suffix(tail)
        .unwrap_or_else(|| panic!("unexpected message: {e}"));
    // `with 201 MiB`, `after reading them, 201 MiB` or `after 41234 triggers, 201 MiB`.
    let in_use = progress.rsplit([' ', ',']).nth(1).unwrap();
    let number: f64 = in_use.parse().unwrap_or_else(|_| panic!("{e}"));
    assert!(number > 0.0, "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
}

#[test]
fn a_hundred_thousand_objects_over_the_budget_end_in_a_clear_error() {
    let dir = scratch("100k");
    let input = dir.0.join("fleet-workloads.yaml");
    std::fs::write(&input, fleet_workloads(100_000)).unwrap();
    let input = input.to_str().unwrap();
    let out = switchyard(
        &[
            "render",
            "--pack",
            "rules/kcp-karmada",
            "-i",
            input,
            "--clock",
            "2026-01-01T00:00:00Z",
            "--max-memory",
            "200MiB",
        ],
        &[],
    );
    assert_over_budget(&out, "200 MiB");
    // The same budget from the environment.
    let out = switchyard(
        &[
            "render",
            "--pack",
            "rules/kcp-karmada",
            "-i",
            input,
            "--clock",
            "2026-01-01T00:00:00Z",
        ],
        &[("SWITCHYARD_MAX_MEMORY", "200Mi")],
    );
    assert_over_budget(&out, "200 MiB");
}

#[test]
fn inputs_within_the_budget_render_as_before() {
    let render = |extra: &[&str], env: &[(&str, &str)]| {
        let mut args = vec![
            "render",
            "--pack",
            "rules/kcp-karmada",
            "-i",
            "rules/kcp-karmada/examples",
            "--clock",
            "2026-01-01T00:00:00Z",
        ];
        args.extend_from_slice(extra);
        switchyard(&args, env)
    };
    // The default budget (80% of the machine's or the container's memory).
    let default = render(&[], &[]);
    assert_eq!(default.status.code(), Some(0), "{}", stderr(&default));
    assert!(!default.stdout.is_empty());
    for (extra, env) in [
        (&["--max-memory", "200MiB"][..], &[][..]),
        (&["--max-memory", "unlimited"][..], &[][..]),
        (&[][..], &[("SWITCHYARD_MAX_MEMORY", "1GiB")][..]),
    ] {
        let out = render(extra, env);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{extra:?} {env:?}: {}",
            stderr(&out)
        );
        assert_eq!(out.stdout, default.stdout, "{extra:?} {env:?}");
    }
    // 1,000 FleetWorkloads fit 200 MiB.
    let dir = scratch("1k");
    let input = dir.0.join("fleet-workloads.yaml");
    std::fs::write(&input, fleet_workloads(1000)).unwrap();
    let out = switchyard(
        &[
            "render",
            "--pack",
            "rules/kcp-karmada",
            "-i",
            input.to_str().unwrap(),
            "--clock",
            "2026-01-01T00:00:00Z",
            "--max-memory",
            "200MiB",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let rendered = String::from_utf8_lossy(&out.stdout);
    assert_eq!(rendered.matches("\nkind: Deployment\n").count(), 1000);
}

#[test]
fn a_budget_that_is_not_a_size_is_a_usage_error() {
    let out = switchyard(
        &[
            "render",
            "--pack",
            "rules/kcp-karmada",
            "-i",
            "rules/kcp-karmada/examples",
            "--max-memory",
            "lots",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "error: --max-memory: `lots` is not a size: write bytes or a number with a unit (200MiB, 1.5GiB, 2G), or `unlimited`\n"
    );
    let out = switchyard(
        &[
            "render",
            "--pack",
            "rules/kcp-karmada",
            "-i",
            "rules/kcp-karmada/examples",
        ],
        &[("SWITCHYARD_MAX_MEMORY", "0")],
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "error: SWITCHYARD_MAX_MEMORY: `0` is not a size: write bytes or a number with a unit (200MiB, 1.5GiB, 2G), or `unlimited`\n"
    );
    let out = switchyard(&["check", "rules/kcp-karmada", "--max-memory", "1GiB"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "error: --max-memory applies to render, test, diff and explain\n"
    );
    // A budget below what the process holds at its start.
    let out = switchyard(
        &[
            "render",
            "--pack",
            "rules/kcp-karmada",
            "-i",
            "rules/kcp-karmada/examples",
            "--max-memory",
            "1KiB",
        ],
        &[],
    );
    assert_over_budget(&out, "1 KiB");
}
