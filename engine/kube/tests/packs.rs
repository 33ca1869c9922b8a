//! Loading the broker's pack set from a folder, and which rules a file change touches.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers panic on purpose

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use switchyard_kube::config::BrokerConfig;
use switchyard_kube::packs::{
    PackChange, PackSet, PackSetError, RuleFingerprint, load_pack_set, pack_dirs,
};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn config(packs: &Path) -> BrokerConfig {
    BrokerConfig {
        packs: Some(packs.to_path_buf()),
        ..BrokerConfig::default()
    }
}

/// A repository-like folder: `packs/city` (two rules, each with its own template; `b`'s
/// template includes a shared partial and decides with a table), `templates/common`.
fn repository() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let files: &[(&str, &str)] = &[
        (
            "packs/city/pack.yaml",
            "apiVersion: switchyard.dev/v1alpha1
kind: RulePack
metadata: {name: city, version: 0.1.0}
spec:
  clusters:
    - {name: source, access: [read, write, writeStatus]}
  scope:
    - cluster: source
      kinds: [{apiVersion: v1, kind: ConfigMap}]
      namespaces: ['*']
",
        ),
        (
            "packs/city/rules/a.yaml",
            "apiVersion: switchyard.dev/v1alpha1
kind: Rule
metadata: {name: a}
spec:
  watch: {apiVersion: example.com/v1, kind: App}
  outputs:
    - {name: config, cluster: source, template: a.yaml.hbs}
",
        ),
        (
            "packs/city/rules/b.yaml",
            "apiVersion: switchyard.dev/v1alpha1
kind: Rule
metadata: {name: b}
spec:
  watch: {apiVersion: example.com/v1, kind: Site}
  vars:
    - {name: size, expression: \"decide('sizes', {'replicas': 1}).size\"}
  outputs:
    - {name: config, cluster: source, template: b.yaml.hbs}
",
        ),
        (
            "packs/city/templates/a.yaml.hbs",
            "apiVersion: v1
kind: ConfigMap
metadata:
  name: {{self.metadata.name}}-a
  namespace: {{self.metadata.namespace}}
data:
  rule: a
",
        ),
        (
            "packs/city/templates/b.yaml.hbs",
            "apiVersion: v1
kind: ConfigMap
metadata:
  name: {{self.metadata.name}}-b
  namespace: {{self.metadata.namespace}}
  labels:
    {{> common/labels}}
data:
  size: {{vars.size}}
",
        ),
        (
            "packs/city/tables/sizes.yaml",
            "apiVersion: switchyard.dev/v1alpha1
kind: DecisionTable
metadata: {name: sizes}
spec:
  hitPolicy: first
  inputs: [{name: replicas, type: int}]
  outputs: [{name: size, type: string}]
  rows:
    - when: {replicas: '<= 3'}
      then: {size: small}
  default: {size: large}
",
        ),
        ("packs/city/tests/notes.txt", "not part of evaluation\n"),
        (
            "templates/common/labels.hbs",
            "app.kubernetes.io/managed-by: switchyard\n",
        ),
    ];
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

fn load(packs: &Path) -> PackSet {
    match load_pack_set(&config(packs)) {
        Ok(set) => set,
        Err(e) => panic!("{e}"),
    }
}

/// The rules of `city` whose fingerprint differs after `edit`.
fn changed_by(edit: impl FnOnce(&Path)) -> BTreeSet<String> {
    change_by(edit).rules
}

/// What differs in `city` after `edit`.
fn change_by(edit: impl FnOnce(&Path)) -> PackChange {
    let repo = repository();
    let packs = repo.path().join("packs");
    let before = load(&packs);
    edit(repo.path());
    let after = load(&packs);
    let changed = after.changed_rules(&before);
    assert!(changed.keys().all(|p| p == "city"), "{changed:?}");
    changed.get("city").cloned().unwrap_or_default()
}

#[test]
fn a_change_of_templates_alone_is_told_apart() {
    // Templates and partials alone: the edit can be narrowed to the triggers it changes.
    let change = change_by(|repo| {
        append(repo.join("packs/city/templates/a.yaml.hbs"), "  more: x\n");
        append(repo.join("templates/common/labels.hbs"), "team: x\n");
    });
    assert_eq!(change.rules, names(&["a", "b"]));
    assert_eq!(change.templates_only, names(&["a", "b"]));
    // The rule file too: not.
    let change = change_by(|repo| {
        append(repo.join("packs/city/templates/a.yaml.hbs"), "  more: x\n");
        append(repo.join("packs/city/rules/a.yaml"), "# a comment\n");
    });
    assert_eq!(change.rules, names(&["a"]));
    assert_eq!(change.templates_only, BTreeSet::new());
}

fn append(path: PathBuf, text: &str) {
    let mut current = std::fs::read_to_string(&path).unwrap();
    current.push_str(text);
    std::fs::write(path, current).unwrap();
}

fn names(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| (*s).to_string()).collect()
}

#[test]
fn a_folder_of_packs_loads_with_fingerprints() {
    let repo = repository();
    let set = load(&repo.path().join("packs"));
    assert_eq!(set.names(), [("city".to_string(), "0.1.0".to_string())]);
    assert_eq!(set.dirs, [repo.path().join("packs/city")]);
    let rules: Vec<&String> = set.fingerprints["city"].keys().collect();
    assert_eq!(rules, ["a", "b"]);
    assert!(set.get("city").is_some());
    assert_eq!(set.cluster_roles(), names(&["source"]));
    // The same files give the same fingerprints.
    assert!(
        load(&repo.path().join("packs"))
            .changed_rules(&set)
            .is_empty()
    );
}

#[test]
fn a_template_change_touches_only_the_rules_rendering_it() {
    let changed = changed_by(|repo| {
        append(repo.join("packs/city/templates/a.yaml.hbs"), "  more: x\n");
    });
    assert_eq!(changed, names(&["a"]));
}

#[test]
fn a_shared_partial_change_touches_the_rules_including_it() {
    let changed = changed_by(|repo| {
        append(repo.join("templates/common/labels.hbs"), "team: x\n");
    });
    assert_eq!(changed, names(&["b"]));
}

#[test]
fn a_table_change_touches_the_rules_that_decide() {
    let changed = changed_by(|repo| {
        let path = repo.join("packs/city/tables/sizes.yaml");
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(path, text.replace("size: large", "size: huge")).unwrap();
    });
    assert_eq!(changed, names(&["b"]));
}

#[test]
fn a_rule_file_change_touches_its_rule() {
    let changed = changed_by(|repo| {
        append(repo.join("packs/city/rules/a.yaml"), "# a comment\n");
    });
    assert_eq!(changed, names(&["a"]));
}

#[test]
fn a_pack_yaml_change_touches_every_rule() {
    let changed = changed_by(|repo| {
        let path = repo.join("packs/city/pack.yaml");
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(path, text.replace("0.1.0", "0.1.1")).unwrap();
    });
    assert_eq!(changed, names(&["a", "b"]));
}

#[test]
fn files_outside_evaluation_touch_nothing() {
    let changed = changed_by(|repo| {
        append(repo.join("packs/city/tests/notes.txt"), "more\n");
    });
    assert_eq!(changed, BTreeSet::new());
}

#[test]
fn added_and_removed_rules_are_changed() {
    let changed = changed_by(|repo| {
        let text = std::fs::read_to_string(repo.join("packs/city/rules/a.yaml")).unwrap();
        std::fs::write(
            repo.join("packs/city/rules/c.yaml"),
            text.replace("name: a}", "name: c}"),
        )
        .unwrap();
        std::fs::remove_file(repo.join("packs/city/rules/b.yaml")).unwrap();
        std::fs::remove_file(repo.join("packs/city/templates/b.yaml.hbs")).unwrap();
        std::fs::remove_file(repo.join("packs/city/tables/sizes.yaml")).unwrap();
    });
    assert_eq!(changed, names(&["b", "c"]));
}

#[test]
fn the_shipped_packs_load() {
    let set = load(&root().join("rules"));
    assert!(set.get("kcp-karmada").is_some(), "{:?}", set.names());
    let rules = &set.fingerprints["kcp-karmada"];
    assert!(rules.contains_key("fleet-workload"), "{rules:?}");
}

/// The resource-broker pack's watches, with two providers: whole objects where rules read or
/// patch them, whole objects by label where stage gates read the pack's own outputs, and
/// metadata by label for the rest: the Secrets of consumer clusters are never cached whole.
#[test]
fn watches_are_as_narrow_as_the_rules_allow() {
    use switchyard_kube::controller::watch_plan;
    use switchyard_kube::store::Store;
    use switchyard_kube::watch::WatchMode;
    let set = load(&root().join("rules"));
    let pack = set.get("resource-broker").unwrap();
    let store = Store::with_clusters([
        "consumer/tenant-a",
        "provider/x86",
        "provider/arm",
        "coordination",
        "compute",
    ]);
    let plan = watch_plan(pack, &store);
    let mode = |cluster: &str, api_version: &str, kind: &str| -> String {
        let key = switchyard_kube::store::KindKey {
            cluster: cluster.into(),
            api_version: api_version.into(),
            kind: kind.into(),
        };
        match plan.get(&key) {
            Some(WatchMode::Full) => "full".into(),
            Some(WatchMode::Labelled { .. }) => "labelled".into(),
            Some(WatchMode::Metadata { .. }) => "metadata".into(),
            None => "none".into(),
        }
    };
    let vm = "example.platform-mesh.io/v1alpha1";
    let broker = "broker.platform-mesh.io/v1alpha1";
    assert_eq!(mode("consumer/tenant-a", vm, "VM"), "full");
    assert_eq!(mode("consumer/tenant-a", "v1", "Secret"), "metadata");
    assert_eq!(mode("consumer/tenant-a", "v1", "ConfigMap"), "metadata");
    for provider in ["provider/x86", "provider/arm"] {
        assert_eq!(mode(provider, broker, "AcceptAPI"), "full");
        assert_eq!(mode(provider, vm, "VM"), "full");
        assert_eq!(mode(provider, "v1", "Secret"), "full");
    }
    assert_eq!(mode("coordination", broker, "Migration"), "full");
    assert_eq!(
        mode("coordination", broker, "MigrationConfiguration"),
        "full"
    );
    assert_eq!(mode("compute", "v1", "ConfigMap"), "labelled");
    assert_eq!(mode("compute", "v1", "Secret"), "labelled");
    assert_eq!(plan.len(), 15, "{plan:?}");
}

#[test]
fn a_single_pack_folder_is_one_pack() {
    let repo = repository();
    let dir = repo.path().join("packs/city");
    assert_eq!(pack_dirs(&dir).unwrap(), std::slice::from_ref(&dir));
    assert_eq!(load(&dir).names()[0].0, "city");
}

/// A pack with errors fails the set with `switchyard check`'s output for it.
#[test]
fn errors_list_every_diagnostic_as_check_prints_them() {
    let repo = repository();
    let packs = repo.path().join("packs");
    let broken = root().join("tests/fixtures/packs/broken");
    for file in switchyard_files::walk(&broken).unwrap() {
        let target = packs
            .join("broken")
            .join(file.strip_prefix(&broken).unwrap());
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(&file, target).unwrap();
    }
    let error = load_pack_set(&config(&packs)).unwrap_err();
    assert!(matches!(error, PackSetError::Diagnostics(_)));
    let shown = switchyard_files::display(&packs.join("broken"));
    let expected = [
        "rules/config.yaml:11:39: error[cel::syntax]: invalid CEL expression: unexpected end of input",
        "  in rule `config`",
        "  |     - expression: self.spec.replicas >",
        "  |                                       ^",
        "rules/config.yaml:15:7: error[pack::unknown-field]: unknown field `replicsa`, expected one of `name`, `expression`, `maxCost` at `spec.vars[0].replicsa`",
        "tables/sizes.yaml:17:7: error[table::lint]: rows 1 and 2 overlap: both match replicas=3",
        "templates/config.yaml.hbs:8:9: error[template::unknown-variable]: variable `vars.size` is not defined (template `config.yaml.hbs` used by output `config`)",
        "  in rule `config`",
    ];
    let expected: Vec<String> = expected
        .iter()
        .map(|line| {
            if line.starts_with(' ') {
                (*line).to_string()
            } else {
                format!("{shown}/{line}")
            }
        })
        .chain([format!("{shown}: 4 errors, 0 warnings")])
        .collect();
    assert_eq!(error.to_string(), expected.join("\n"));
}

#[test]
fn two_packs_with_one_name_are_an_error() {
    let repo = repository();
    let packs = repo.path().join("packs");
    let copy = packs.join("copy");
    for file in switchyard_files::walk(&packs.join("city")).unwrap() {
        let target = copy.join(file.strip_prefix(packs.join("city")).unwrap());
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(&file, target).unwrap();
    }
    let e = load_pack_set(&config(&packs)).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "packs `{}` and `{}` are both named `city`",
            switchyard_files::display(&packs.join("city")),
            switchyard_files::display(&copy)
        )
    );
}

#[test]
fn folders_without_packs_are_errors() {
    let repo = repository();
    let empty = repo.path().join("templates");
    assert_eq!(
        load_pack_set(&config(&empty)).unwrap_err().to_string(),
        format!(
            "no pack in `{}`: neither it nor any folder directly inside it has a `pack.yaml`",
            switchyard_files::display(&empty)
        )
    );
    let missing = repo.path().join("nope");
    assert_eq!(
        load_pack_set(&config(&missing)).unwrap_err().to_string(),
        format!(
            "packs folder `{}` does not exist",
            switchyard_files::display(&missing)
        )
    );
}

/// A ConfigMap volume: the packs behind `..data`, visible through symlinks; the hidden
/// folders are not packs of their own.
#[cfg(unix)]
#[test]
fn a_configmap_volume_loads_its_visible_packs_once() {
    use std::os::unix::fs::symlink;
    let repo = repository();
    let volume = repo.path().join("volume");
    let data = volume.join("..2026_01_01_00_00_00.000000001");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::rename(repo.path().join("packs/city"), data.join("city")).unwrap();
    symlink("..2026_01_01_00_00_00.000000001", volume.join("..data")).unwrap();
    symlink("..data/city", volume.join("city")).unwrap();
    let set = load(&volume);
    assert_eq!(set.dirs, [volume.join("city")]);
    let fingerprints: BTreeMap<String, BTreeMap<String, RuleFingerprint>> = set.fingerprints;
    assert_eq!(fingerprints["city"].len(), 2);
}

/// The configuration's `values` bind each pack's parameters; what they refuse or lack keeps
/// the set from loading, with the configuration's file, line and column.
#[test]
fn configured_values_bind_pack_parameters() {
    let packs = root().join("tests/fixtures/packs/params");
    let text = |values: &str| {
        format!(
            "apiVersion: switchyard.dev/v1alpha1\nkind: BrokerConfig\nspec:\n  packs: {}\n{values}",
            packs.display()
        )
    };
    let load = |values: &str| {
        let config = BrokerConfig::from_yaml(&text(values), "broker.yaml").unwrap();
        load_pack_set(&config)
    };
    let set = load("  values:\n    params: {ingressClass: traefik, replicas: 3}\n").unwrap();
    assert_eq!(
        set.get("params").unwrap().params(),
        &serde_json::json!({"ingressClass": "traefik", "replicas": 3, "labels": {}})
    );
    // Other values change what every rule reads: each rule counts as changed, as a whole.
    let other = load("  values:\n    params: {ingressClass: nginx, replicas: 3}\n").unwrap();
    let changed = other.changed_rules(&set);
    let change = &changed["params"];
    assert!(!change.rules.is_empty());
    assert_eq!(change.rules.len(), other.fingerprints["params"].len());
    assert!(change.templates_only.is_empty());
    assert!(
        load("  values:\n    params: {ingressClass: traefik, replicas: 3}\n")
            .unwrap()
            .changed_rules(&set)
            .is_empty()
    );
    assert_eq!(
        load("").unwrap_err().to_string(),
        "pack `params`: parameter `ingressClass` (string) has no default, and no value was given for it"
    );
    assert_eq!(
        load("  values:\n    params:\n      ingressClass: haproxy\n")
            .unwrap_err()
            .to_string(),
        "broker.yaml:7:21: params.ingressClass: Unsupported value: \"haproxy\": supported values: \"nginx\", \"traefik\" (enum)"
    );
}
