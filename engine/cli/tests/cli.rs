//! The `switchyard` binary, run as users run it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers panic on purpose

mod support;

use std::path::{Path, PathBuf};

use support::*;

#[test]
fn check_reports_every_error_of_a_broken_pack_with_positions() {
    let out = switchyard(&["check", "tests/fixtures/packs/broken"]);
    assert_eq!(out.status.code(), Some(1), "stderr: {}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "\
tests/fixtures/packs/broken/rules/config.yaml:11:39: error[cel::syntax]: invalid CEL expression: unexpected end of input
  in rule `config`
  |     - expression: self.spec.replicas >
  |                                       ^
tests/fixtures/packs/broken/rules/config.yaml:15:7: error[pack::unknown-field]: unknown field `replicsa`, expected one of `name`, `expression`, `maxCost` at `spec.vars[0].replicsa`
tests/fixtures/packs/broken/tables/sizes.yaml:17:7: error[table::lint]: rows 1 and 2 overlap: both match replicas=3
tests/fixtures/packs/broken/templates/config.yaml.hbs:8:9: error[template::unknown-variable]: variable `vars.size` is not defined (template `config.yaml.hbs` used by output `config`)
  in rule `config`
tests/fixtures/packs/broken: 4 errors, 0 warnings
"
    );
}

#[test]
fn check_strict_fails_on_warnings_and_the_shipped_packs_have_none() {
    let pack = "tests/fixtures/packs/data-stages";
    assert_eq!(switchyard(&["check", pack]).status.code(), Some(0));
    let strict = switchyard(&["check", "--strict", pack]);
    assert_eq!(strict.status.code(), Some(1));
    assert!(
        stdout(&strict).ends_with("tests/fixtures/packs/data-stages: ok: pack data-stages 0.1.0 (1 rules, 0 tables, 1 warnings)\n"),
        "{}",
        stdout(&strict)
    );
    let shipped = switchyard(&[
        "check",
        "--strict",
        "rules/datum-federation",
        "rules/kcp-karmada",
        "rules/multicluster-ingress",
        "rules/resource-broker",
    ]);
    let text = stdout(&shipped);
    let summaries: Vec<&str> = text.lines().filter(|l| l.contains(": ok: ")).collect();
    assert_eq!(
        summaries,
        [
            "rules/datum-federation: ok: pack datum-federation 0.1.0 (6 rules, 0 tables, 0 warnings)",
            "rules/kcp-karmada: ok: pack kcp-karmada 0.1.0 (2 rules, 3 tables, 0 warnings)",
            "rules/multicluster-ingress: ok: pack multicluster-ingress 0.1.0 (4 rules, 0 tables, 0 warnings)",
            "rules/resource-broker: ok: pack resource-broker 0.1.0 (2 rules, 0 tables, 0 warnings)"
        ]
    );
    // Kinds without a schema are noted once each, not warned about.
    let notes: Vec<&str> = text.lines().filter(|l| l.contains(": note[")).collect();
    assert_eq!(
        notes,
        [
            "rules/datum-federation/rules/federation-namespace.yaml:22:13: note[cel::no-schema]: Namespace (v1) has no CRD schema: its fields other than metadata are typed as dyn, so misspelled fields and wrong types in them are not caught",
            "rules/kcp-karmada/rules/kubernetes-cluster.yaml:50:13: note[cel::no-schema]: Secret (v1) has no CRD schema: its fields other than metadata are typed as dyn, so misspelled fields and wrong types in them are not caught",
            "rules/multicluster-ingress/rules/multicluster-ingress.yaml:21:13: note[cel::no-schema]: IngressClass (networking.k8s.io/v1) has no CRD schema: its fields other than metadata are typed as dyn, so misspelled fields and wrong types in them are not caught",
            "rules/multicluster-ingress/rules/service-export.yaml:15:11: note[cel::no-schema]: Service (v1) has no CRD schema: its fields other than metadata are typed as dyn, so misspelled fields and wrong types in them are not caught",
            "rules/resource-broker/rules/consumer.yaml:62:13: note[cel::no-schema]: ConfigMap (v1) has no CRD schema: its fields other than metadata are typed as dyn, so misspelled fields and wrong types in them are not caught",
            "rules/resource-broker/rules/consumer.yaml:69:13: note[cel::no-schema]: Secret (v1) has no CRD schema: its fields other than metadata are typed as dyn, so misspelled fields and wrong types in them are not caught"
        ]
    );
    assert_eq!(shipped.status.code(), Some(0));
}

#[test]
fn check_notes_templates_that_render_as_text() {
    let pack = "tests/fixtures/packs/text-template";
    let out = switchyard(&["check", "--strict", pack]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let text = stdout(&out);
    let notes: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(": note[template::"))
        .collect();
    assert_eq!(
        notes,
        [
            "tests/fixtures/packs/text-template/templates/config.yaml.hbs:7:10: note[template::text-render]: template `config.yaml.hbs` renders as text, not from compiled structure: the block here does not stand on lines of its own"
        ]
    );
    // It renders all the same.
    let test = switchyard(&["test", pack]);
    assert_eq!(test.status.code(), Some(0), "{}", stdout(&test));
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

const EXAMPLES: &[&str] = &[
    "--input",
    "rules/kcp-karmada/examples",
    "--clock",
    "2026-01-01T00:00:00Z",
];

fn args<'a>(head: &[&'a str]) -> Vec<&'a str> {
    let mut all = head.to_vec();
    all.extend_from_slice(EXAMPLES);
    all
}

/// `render` prints exactly the reviewed golden file of the examples.
#[test]
fn render_examples_matches_golden() {
    let out = switchyard(&args(&["render", "--pack", "rules/kcp-karmada"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let golden =
        std::fs::read_to_string(root().join("rules/kcp-karmada/tests/golden/examples.yaml.golden"))
            .unwrap();
    assert_eq!(stdout(&out), golden);
}

/// The multicluster-ingress pack's outputs are valid Karmada objects: its PropagationPolicies
/// against Karmada's own CRD (kept beside the repository), its ServiceExports against
/// config/crds.
#[test]
fn multicluster_ingress_outputs_are_valid_karmada_objects() {
    let out = switchyard(&[
        "render",
        "--pack",
        "rules/multicluster-ingress",
        "--input",
        "rules/multicluster-ingress/examples",
        "--clock",
        "2026-01-01T00:00:00Z",
        "--validate-against",
        "../shared/crds/karmada",
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let kinds: Vec<&str> = plan["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["object"]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "ClusterPropagationPolicy",
            "ServiceExport",
            "ServiceExport",
            "PropagationPolicy",
            "PropagationPolicy"
        ]
    );

    // A policy Karmada's CRD refuses is an error, so the CRD is really consulted.
    let dir = temp_dir("mci-invalid-policy");
    let pack = dir.join("multicluster-ingress");
    copy_pack("rules/multicluster-ingress", &pack);
    let template = pack.join("templates/propagation-policy.yaml.hbs");
    let text = std::fs::read_to_string(&template).unwrap();
    std::fs::write(
        &template,
        text.replace("      clusterNames:", "      clusterNamez:"),
    )
    .unwrap();
    let out = switchyard(&[
        "render",
        "--pack",
        &pack.to_string_lossy(),
        "--partials",
        &root().join("templates").to_string_lossy(),
        "--crds",
        &root().join("config/crds").to_string_lossy(),
        "--input",
        "rules/multicluster-ingress/examples",
        "--validate-against",
        "../shared/crds/karmada",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("PropagationPolicy `default/propagate-service-api` in cluster `karmada` is invalid: spec.placement.clusterAffinity.clusterNamez"),
        "{}",
        stderr(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The datum-federation pack's outputs are valid Karmada objects: its PropagationPolicies and
/// its ResourceInterpreterCustomization against Karmada's own CRDs (kept beside the
/// repository), its WorkloadDeployments and Instances against config/crds.
#[test]
fn datum_federation_outputs_are_valid_karmada_objects() {
    let render = |pack: &str| {
        switchyard(&[
            "render",
            "--pack",
            pack,
            "--partials",
            &root().join("templates").to_string_lossy(),
            "--crds",
            &root().join("config/crds").to_string_lossy(),
            "--input",
            "rules/datum-federation/examples",
            "--clock",
            "2026-01-01T00:00:00Z",
            "--validate-against",
            "../shared/crds/karmada",
            "-o",
            "json",
        ])
    };
    let out = render("rules/datum-federation");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut kinds: Vec<&str> = plan["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["object"]["kind"].as_str().unwrap())
        .collect();
    kinds.sort_unstable();
    assert_eq!(
        kinds,
        [
            "Instance",
            "Instance",
            "Namespace",
            "PropagationPolicy",
            "ResourceInterpreterCustomization",
            "WorkloadDeployment",
            "WorkloadDeployment",
            "WorkloadDeployment",
            "WorkloadDeployment"
        ]
    );

    // Karmada's CRDs are really consulted: a misspelled field of each is refused.
    for (template, from, to, error) in [
        (
            "templates/propagation-policy.yaml.hbs",
            "    clusterAffinity:",
            "    clusterAffinitee:",
            "PropagationPolicy `ns-6f1d1e0c-5c43-4d0e-9d55-2f1c3f0a7b11/city-dfw` in cluster `karmada` is invalid: spec.placement.clusterAffinitee",
        ),
        (
            "templates/resource-interpreter.yaml.hbs",
            "    statusReflection:",
            "    statusReflexion:",
            "ResourceInterpreterCustomization `workloaddeployment` in cluster `karmada` is invalid: spec.customizations.statusReflexion",
        ),
    ] {
        let dir = temp_dir("datum-invalid-output");
        let pack = dir.join("datum-federation");
        copy_pack("rules/datum-federation", &pack);
        let path = pack.join(template);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{template}");
        std::fs::write(&path, text.replace(from, to)).unwrap();
        let out = render(&pack.to_string_lossy());
        assert_eq!(out.status.code(), Some(1), "{template}: {}", stdout(&out));
        assert!(stderr(&out).contains(error), "{}", stderr(&out));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn render_json_lists_outputs_with_clusters_and_status() {
    let out = switchyard(&args(&[
        "render",
        "--pack",
        "rules/kcp-karmada",
        "-o",
        "json",
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let outputs = plan["outputs"].as_array().unwrap();
    assert!(!outputs.is_empty());
    // FleetWorkloads render to Karmada; KubernetesClusters to the management plane too.
    assert!(
        outputs
            .iter()
            .all(|o| o["cluster"] == "karmada" || o["cluster"] == "management")
    );
    assert!(outputs.iter().any(|o| o["cluster"] == "management"));
    let triggers = plan["triggers"].as_array().unwrap();
    assert!(
        triggers
            .iter()
            .all(|t| t["status"]["conditions"][0]["type"] == "Synced")
    );
    assert!(
        triggers
            .iter()
            .all(|t| t["finalizer"] == "switchyard.dev/kcp-karmada")
    );
}

#[test]
fn explain_traces_guards_lookups_and_outputs() {
    let out = switchyard(&args(&["explain", "--pack", "rules/kcp-karmada"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    // Each expression once, the triggers' results grouped below it.
    assert!(text.starts_with("rule fleet-workload\n"), "{text}");
    assert!(
        text.contains(
            "  vars.workspace: self.metadata.annotations['kcp.io/cluster']\n    => \"1x9k3m7p2q5w8z0a\"  (source/1x9k3m7p2q5w8z0a plant-a/batch, source/1x9k3m7p2q5w8z0a plant-a/cache)\n    => \"2vmzxwqzc9k1ajk0\"  (source/2vmzxwqzc9k1ajk0 default/api, source/2vmzxwqzc9k1ajk0 default/web)\n"
        ),
        "{text}"
    );
    assert_eq!(
        text.matches("  lookup fleet: self.spec.fleetRef.name\n")
            .count(),
        1
    );
    // Then each trigger's status: fields and conditions.
    assert!(
        text.contains("source/2vmzxwqzc9k1ajk0:FleetWorkload.platform.edge-portal.eu:default/web\n  status.clusters: [{\"applied\":true,\"cluster\":\"edge-fra-1\",\"health\":\"Healthy\"},{\"applied\":true,\"cluster\":\"edge-ams-1\",\"health\":\"Healthy\"}]\n  status.observedGeneration: 3\n"),
        "{text}"
    );
    assert!(
        text.contains("  condition Synced=True (Synced): rendered by fleet-workload (4 outputs)"),
        "{text}"
    );

    let out = switchyard(&args(&[
        "explain",
        "-o",
        "json",
        "--pack",
        "rules/kcp-karmada",
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let web = json["triggers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["trigger"]["name"] == "web" && t["trigger"]["namespace"] == "default")
        .unwrap();
    assert_eq!(web["status"]["observedGeneration"], 3);
    assert!(
        web["trace"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["step"] == "vars.workspace" && e["result"] == "\"2vmzxwqzc9k1ajk0\"")
    );
    assert_eq!(web["outputs"].as_array().unwrap().len(), 4);
}

/// Copies a pack into a fresh temporary folder.
fn copy_pack(from: &str, to: &Path) {
    for entry in walk(&root().join(from)) {
        let relative = entry.strip_prefix(root().join(from)).unwrap();
        let target = to.join(relative);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(&entry, &target).unwrap();
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

fn temp_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("switchyard-cli-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn diff_reports_changed_objects_and_exit_codes() {
    let same = switchyard(&args(&[
        "diff",
        "--base",
        "rules/kcp-karmada",
        "--head",
        "rules/kcp-karmada",
    ]));
    assert_eq!(same.status.code(), Some(0), "{}", stderr(&same));
    assert_eq!(stdout(&same), "");

    let dir = temp_dir("diff");
    let head = dir.join("kcp-karmada");
    copy_pack("rules/kcp-karmada", &head);
    let template = head.join("templates/service.yaml.hbs");
    let text = std::fs::read_to_string(&template).unwrap();
    std::fs::write(
        &template,
        text.replace("spec:\n", "spec:\n  sessionAffinity: ClientIP\n"),
    )
    .unwrap();
    let partials = root().join("templates");
    let head_arg = head.to_string_lossy().into_owned();
    let partials_arg = partials.to_string_lossy().into_owned();
    let mut cmd = args(&[
        "diff",
        "--base",
        "rules/kcp-karmada",
        "--head",
        &head_arg,
        "--partials",
        &partials_arg,
    ]);
    let changed = switchyard(&cmd);
    assert_eq!(changed.status.code(), Some(1), "{}", stderr(&changed));
    let text = stdout(&changed);
    assert!(
        text.starts_with("changed v1 Service kcp-50bdde6c6b56/web (cluster karmada)\n"),
        "{text}"
    );
    assert!(text.contains("+  sessionAffinity: ClientIP\n"), "{text}");
    assert_eq!(
        text.matches("changed ").count(),
        2,
        "two Services change: {text}"
    );

    cmd.extend(["-o", "markdown"]);
    let markdown = stdout(&switchyard(&cmd));
    assert!(markdown.starts_with("### switchyard diff: `kcp-karmada 0.1.0` → `kcp-karmada 0.1.0`\n\n0 added, 0 removed, 2 changed.\n"), "{markdown}");
    assert!(markdown.contains("```diff\n"), "{markdown}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A version bump alone fails no test of a shipped pack: golden files and expected outputs
/// are compared without the engine's ownership metadata and version.
#[test]
fn a_version_bump_changes_no_expectation() {
    for name in [
        "datum-federation",
        "kcp-karmada",
        "multicluster-ingress",
        "resource-broker",
    ] {
        let dir = temp_dir(&format!("bump-{name}"));
        let pack = dir.join(name);
        copy_pack(&format!("rules/{name}"), &pack);
        let manifest = pack.join("pack.yaml");
        let text = std::fs::read_to_string(&manifest).unwrap();
        assert!(text.contains("  version: 0.1.0\n"), "{name}");
        std::fs::write(
            &manifest,
            text.replace("  version: 0.1.0\n", "  version: 0.2.0\n"),
        )
        .unwrap();
        let out = switchyard(&[
            "test",
            &pack.to_string_lossy(),
            "--partials",
            &root().join("templates").to_string_lossy(),
            "--crds",
            &root().join("config/crds").to_string_lossy(),
        ]);
        let text = stdout(&out);
        assert_eq!(out.status.code(), Some(0), "{name}: {text}{}", stderr(&out));
        assert!(text.contains(" passed, 0 failed\n"), "{name}: {text}");
        // ... and `--update` would write nothing.
        let golden_before: Vec<String> = walk(&pack.join("tests"))
            .iter()
            .map(|p| std::fs::read_to_string(p).unwrap())
            .collect();
        let _ = switchyard(&[
            "test",
            &pack.to_string_lossy(),
            "--update",
            "--partials",
            &root().join("templates").to_string_lossy(),
            "--crds",
            &root().join("config/crds").to_string_lossy(),
        ]);
        let golden_after: Vec<String> = walk(&pack.join("tests"))
            .iter()
            .map(|p| std::fs::read_to_string(p).unwrap())
            .collect();
        assert_eq!(golden_before, golden_after, "{name}");
    }
}

#[test]
fn test_writes_junit_and_fails_on_a_wrong_golden() {
    let dir = temp_dir("junit");
    let pack = dir.join("kcp-karmada");
    copy_pack("rules/kcp-karmada", &pack);
    let golden = pack.join("tests/golden/service.yaml.golden");
    let text = std::fs::read_to_string(&golden).unwrap();
    std::fs::write(
        &golden,
        text.replacen("    port: 80\n", "    port: 81\n", 1),
    )
    .unwrap();
    let junit = dir.join("junit.xml");
    let out = switchyard(&[
        "test",
        &pack.to_string_lossy(),
        "--partials",
        &root().join("templates").to_string_lossy(),
        "--junit",
        &junit.to_string_lossy(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("FAIL kcp-karmada service: "), "{text}");
    assert!(
        text.contains("-    port: 81\n") && text.contains("+    port: 80\n"),
        "{text}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("<testsuite name=\"kcp-karmada\""), "{xml}");
    assert!(
        xml.contains("<failure message=\"rendered output differs from golden file"),
        "{xml}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cel_prints_results_as_json() {
    let out = switchyard(&[
        "cel",
        "self.spec.replicas * 2 > 5",
        "--var",
        r#"self={"spec":{"replicas":3}}"#,
    ]);
    assert_eq!(
        (out.status.code(), stdout(&out).as_str()),
        (Some(0), "true\n")
    );
    let out = switchyard(&[
        "cel",
        "{'b': b'hi', 't': timestamp('2026-01-01T00:00:00Z'), 'd': duration('90m'), 'o': optional.of(1), 'n': optional.none()}",
    ]);
    assert_eq!(
        stdout(&out),
        "{\n  \"b\": \"aGk=\",\n  \"d\": \"5400s\",\n  \"n\": null,\n  \"o\": 1,\n  \"t\": \"2026-01-01T00:00:00Z\"\n}\n"
    );
}

#[test]
fn cel_reports_syntax_errors_with_a_caret() {
    let out = switchyard(&["cel", "self.spec.replicas >"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "error: 1:21: unexpected end of input\n  | self.spec.replicas >\n  |                     ^\n"
    );
}

#[test]
fn cel_compiles_in_the_environment_of_its_options() {
    // Default: Kubernetes' newest base environment, without extensions.
    let out = switchyard(&["cel", "cel.bind(a, 2, a * a)"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "error: 1:1: function 'cel.bind' is not in this environment: it needs the extension \
         'bindings' (--extension)\n  | cel.bind(a, 2, a * a)\n  | ^\n"
    );
    let out = switchyard(&[
        "cel",
        "--extension",
        "bindings",
        "--extension",
        "math",
        "cel.bind(a, -2, math.abs(a) * a)",
    ]);
    assert_eq!(
        (out.status.code(), stdout(&out).as_str()),
        (Some(0), "-4\n"),
        "{}",
        stderr(&out)
    );
    let out = switchyard(&["cel", "--kubernetes", "1.29", "isIP('1.2.3.4')"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out).lines().next(),
        Some(
            "error: 1:1: function 'isIP' is not in this environment: it was introduced in \
             Kubernetes 1.30 (--kubernetes is 1.29)"
        )
    );
    let out = switchyard(&["cel", "--kubernetes", "1.30", "isIP('1.2.3.4')"]);
    assert_eq!(stdout(&out), "true\n", "{}", stderr(&out));
    let out = switchyard(&["cel", "--extension", "maths", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with(
            "error: invalid value 'maths' for '--extension <NAME>': unknown CEL extension \
             'maths': the extensions are bindings, encoders, math, strings-v3\n"
        ),
        "{}",
        stderr(&out)
    );
}

#[test]
fn cel_reads_bindings_from_a_file() {
    let dir = temp_dir("cel");
    let file = dir.join("bindings.yaml");
    std::fs::write(
        &file,
        "self:\n  metadata:\n    labels: {tier: edge}\nlimit: 2\n",
    )
    .unwrap();
    let out = switchyard(&[
        "cel",
        "self.metadata.labels.tier == 'edge' && limit == 2",
        "--bindings",
        &file.to_string_lossy(),
    ]);
    assert_eq!(
        (out.status.code(), stdout(&out).as_str()),
        (Some(0), "true\n"),
        "{}",
        stderr(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A misspelled field and a type mismatch in a kcp-karmada guard are reported at their
/// positions in the file, inside a folded (`>-`) YAML block, before anything runs.
#[test]
fn check_type_checks_guards_against_the_crds() {
    let dir = temp_dir("typecheck");
    let pack = dir.join("kcp-karmada");
    copy_pack("rules/kcp-karmada", &pack);
    let rule = pack.join("rules/fleet-workload.yaml");
    let text = std::fs::read_to_string(&rule).unwrap();
    let text = text
        .replacen(
            "        && (size(self.spec.?service.?ports.orValue([])) == 0",
            "        && self.spec.replicas == 'three' && (size(self.spec.?service.?ports.orValue([])) == 0",
            1,
        )
        .replacen("            || self.metadata.name.matches(", "            || self.metadata.nmae.matches(", 1);
    std::fs::write(&rule, text).unwrap();
    let out = switchyard(&[
        "check",
        &pack.to_string_lossy(),
        "--partials",
        &root().join("templates").to_string_lossy(),
        "--crds",
        &root().join("config/crds").to_string_lossy(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let shown = rule.to_string_lossy().into_owned();
    assert_eq!(
        errors_only(&stdout(&out)),
        format!(
            "\
{shown}:42:31: error[cel::type]: found no matching overload for '_==_' applied to '(int, string)'
  in rule `fleet-workload`
  |         && self.spec.replicas == 'three' && (size(self.spec.?service.?ports.orValue([])) == 0
  |                               ^
{shown}:43:30: error[cel::type]: undefined field 'nmae' (did you mean 'name'?)
  in rule `fleet-workload`
  |             || self.metadata.nmae.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$'))
  |                              ^
",
        )
    );
    let summary = format!("{}: 2 errors, ", pack.to_string_lossy());
    assert!(stdout(&out).contains(&summary), "{}", stdout(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The error diagnostics of `check` output (each with its indented lines), warnings and
/// summary lines left out.
fn errors_only(output: &str) -> String {
    let mut out = String::new();
    let mut keep = false;
    for line in output.lines() {
        if !line.starts_with("  ") {
            keep = line.contains(": error[");
        }
        if keep {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[test]
fn cel_reports_evaluation_errors_at_the_failing_node() {
    let out = switchyard(&[
        "cel",
        "self.spec.x + 1",
        "--var",
        r#"self={"spec":{"x":"a"}}"#,
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "error: 1:13: no matching overload for '_+_' applied to (string, int)\n  | self.spec.x + 1\n  |             ^\n"
    );
}

#[test]
fn cel_takes_expressions_that_start_with_a_minus_and_prints_types_by_name() {
    let out = switchyard(&["cel", "-7 % 3"]);
    assert_eq!(
        (out.status.code(), stdout(&out).as_str()),
        (Some(0), "-1\n")
    );
    // `--` still ends the options.
    let out = switchyard(&["cel", "--", "-7 / 2"]);
    assert_eq!(
        (out.status.code(), stdout(&out).as_str()),
        (Some(0), "-3\n")
    );
    let out = switchyard(&["cel", "type(1u)"]);
    assert_eq!(
        (out.status.code(), stdout(&out).as_str()),
        (Some(0), "\"uint\"\n")
    );
    let out = switchyard(&["cel", "[type(1), type({})]"]);
    assert_eq!(stdout(&out), "[\n  \"int\",\n  \"map\"\n]\n");
}

#[test]
fn cel_reports_type_errors_with_a_caret_before_evaluating() {
    let out = switchyard(&["cel", "[1, 2].map(v, v + 'a')"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "error: 1:17: found no matching overload for '_+_' applied to '(int, string)'\n  \
         | [1, 2].map(v, v + 'a')\n  |                 ^\n"
    );
    let out = switchyard(&["cel", "1 == 1.0"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "error: 1:3: found no matching overload for '_==_' applied to '(int, double)'\n  \
         | 1 == 1.0\n  |   ^\n"
    );
}

/// `cel --strict` compiles as the API server compiles a CRD rule or an admission policy:
/// what packs may write (heterogeneous literals, quoted field names) is refused.
#[test]
fn cel_strict_checks_as_the_api_server() {
    let out = switchyard(&["cel", "--strict", "[1, 'a']"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "error: 1:5: expected type 'int' but found 'string'\n  | [1, 'a']\n  |     ^\n"
    );
    let object = r#"self={"x": {"kubernetes.io/os": "linux"}, "n": 3}"#;
    let out = switchyard(&[
        "cel",
        "--strict",
        "self.x.`kubernetes.io/os`",
        "--var",
        object,
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "error: 1:8: unsupported syntax: '`'\n  | self.x.`kubernetes.io/os`\n  |        ^\n"
    );
    // A bound variable is the `dyn` Kubernetes declares.
    let out = switchyard(&["cel", "--strict", "[self.n, 'three']", "--var", object]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "error: 1:10: expected type 'dyn' but found 'string'\n  | [self.n, 'three']\n  |          ^\n"
    );
    // Without `--strict`, as packs write them.
    let out = switchyard(&["cel", "self.x.`kubernetes.io/os`", "--var", object]);
    assert_eq!(stdout(&out), "\"linux\"\n");
    let out = switchyard(&["cel", "[1, 'a']"]);
    assert_eq!(out.status.code(), Some(0));
}

/// Example and fixture objects of kinds with a CRD are checked as the API server would:
/// `check` refuses an invalid one unless it is marked invalid on purpose, and refuses a mark
/// on a valid one; `test` warns about invalid inputs of its cases.
#[test]
fn check_and_test_validate_inputs_against_their_crds() {
    let dir = temp_dir("inputs-crds");
    let pack = dir.join("kcp-karmada");
    copy_pack("rules/kcp-karmada", &pack);
    let fixtures = pack.join("fixtures/placement.yaml");
    let text = std::fs::read_to_string(&fixtures).unwrap();
    let mark = "    switchyard.dev/invalid: \"refused by the CRD; the pack stops on it (InvalidPlacementPolicy)\"\n";
    let text = text.replacen(
        &format!("  name: bad-weight\n  namespace: default\n  annotations:\n    kcp.io/cluster: 2vmzxwqzc9k1ajk0\n{mark}"),
        "  name: bad-weight\n  namespace: default\n  annotations:\n    kcp.io/cluster: 2vmzxwqzc9k1ajk0\n",
        1,
    );
    let text = text.replacen(
        "  name: weighted\n  namespace: default\n  annotations:\n    kcp.io/cluster: 2vmzxwqzc9k1ajk0\n",
        &format!("  name: weighted\n  namespace: default\n  annotations:\n    kcp.io/cluster: 2vmzxwqzc9k1ajk0\n{mark}"),
        1,
    );
    std::fs::write(&fixtures, text).unwrap();
    let sources = [
        "--partials",
        &root().join("templates").to_string_lossy(),
        "--crds",
        &root().join("config/crds").to_string_lossy(),
    ]
    .map(|s| s.to_string());
    let mut args = vec!["check".to_string(), pack.to_string_lossy().into_owned()];
    args.extend(sources.iter().cloned());
    let out = switchyard(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.status.code(), Some(1));
    let shown = fixtures.to_string_lossy().into_owned();
    assert_eq!(
        errors_only(&stdout(&out)),
        format!(
            "\
{shown}:61:1: error[input::invalid]: PlacementPolicy `weighted` is marked `switchyard.dev/invalid` but its CRD accepts it
{shown}:332:15: error[input::invalid]: PlacementPolicy `bad-weight` would be refused by the API server: spec.weights[0].weight: Invalid value: 0: spec.weights[0].weight in body should be greater than or equal to 1 (minimum)
  help: fix the object, or mark an object that is invalid on purpose with the annotation `switchyard.dev/invalid: <why>`
"
        )
    );

    // The shipped pack's test of a weighted policy warns about the unmarked invalid fixture.
    let mut args = vec!["test".to_string(), pack.to_string_lossy().into_owned()];
    args.extend(sources.iter().cloned());
    let out = switchyard(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let text = stdout(&out);
    // Once, though every case that reads the fixture file has it.
    assert_eq!(
        text.matches("WARN kcp-karmada ").collect::<Vec<_>>().len(),
        1,
        "{text}"
    );
    assert!(
        text.contains("WARN kcp-karmada errors: missing Fleet: input PlacementPolicy `default/bad-weight` is invalid: spec.weights[0].weight: Invalid value: 0: spec.weights[0].weight in body should be greater than or equal to 1 (minimum)\n"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `cel --pack --rule --input` evaluates in the rule's context: `self`, lookups and `vars`
/// as evaluation binds them; what could not be bound is a note.
#[test]
fn cel_evaluates_in_a_rule_of_a_pack() {
    let dir = temp_dir("cel-pack");
    let input = dir.join("web.yaml");
    std::fs::write(
        &input,
        "apiVersion: platform.edge-portal.eu/v1alpha1
kind: FleetWorkload
metadata: {name: web, namespace: default, annotations: {kcp.io/cluster: 2vmzxwqzc9k1ajk0}}
spec:
  fleetRef: {name: edge-eu}
  template: {spec: {containers: [{name: web, image: \"nginx:1.27\"}]}}
---
apiVersion: platform.edge-portal.eu/v1alpha1
kind: Fleet
metadata: {name: edge-eu, namespace: default, annotations: {kcp.io/cluster: 2vmzxwqzc9k1ajk0}}
spec: {clusterRefs: [{name: edge-fra-1}, {name: edge-ams-1}]}
",
    )
    .unwrap();
    let input = input.to_string_lossy().into_owned();
    let cel = |expression: &str| {
        switchyard(&[
            "cel",
            "--pack",
            "rules/kcp-karmada",
            "--rule",
            "fleet-workload",
            "--input",
            &input,
            expression,
        ])
    };
    let out = cel(
        "[vars.namespace, self.metadata.name, fleet.spec.clusterRefs.size(), vars.clusterNames]",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "[\n  \"kcp-50bdde6c6b56\",\n  \"web\",\n  2,\n  [\n    \"edge-fra-1\",\n    \"edge-ams-1\"\n  ]\n]\n"
    );
    // Every guard passes and every required lookup finds its object: nothing to note.
    assert_eq!(stderr(&out), "");
    // The binding lookup (not required) finds nothing: null, as in evaluation.
    let out = cel("binding == null && tables.readiness.size() > 0");
    assert_eq!(stdout(&out), "true\n", "{}", stderr(&out));

    let out = cel("vars.nope");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out), "error: 1:5: no such key: nope\n");

    // A false guard does not stop the binding: it is noted.
    let text = std::fs::read_to_string(&input).unwrap();
    let spoofed = text.replacen(
        "template: {spec:",
        "template: {metadata: {labels: {edge-connect.eu/source-name: x}}, spec:",
        1,
    );
    std::fs::write(&input, spoofed).unwrap();
    let out = cel("vars.namespace");
    assert_eq!(stdout(&out), "\"kcp-50bdde6c6b56\"\n");
    assert_eq!(stderr(&out), "note: guard spec.when[3] is false\n");

    let out = switchyard(&[
        "cel",
        "--pack",
        "rules/kcp-karmada",
        "--rule",
        "nope",
        "--input",
        &input,
        "1",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "error: the pack has no rule `nope` (its rules: fleet-workload, kubernetes-cluster)\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
