//! The broker with a small pack of two rules over ConfigMaps, both roles on one API server:
//! a reload re-evaluates only the triggers of the rule whose files changed, and `deletion:
//! Orphan` leaves outputs in place without the pack's labels; a reload rewrites an output
//! several triggers share only when its merge changes (its content, the pack's version).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use support::*;
use switchyard_testenv::ControlPlane;

const CONVERGE: Duration = Duration::from_secs(60);

const PACK: &str = r#"apiVersion: switchyard.dev/v1alpha1
kind: RulePack
metadata: {name: mirror, version: 0.1.0}
spec:
  clusters:
    - {name: source, access: [read, writeStatus]}
    - {name: target, access: [read, write]}
  scope:
    - cluster: target
      kinds: [{apiVersion: v1, kind: ConfigMap}]
      namespaces: ["mirror-*"]
"#;

fn rule(name: &str, deletion: &str) -> String {
    format!(
        r#"apiVersion: switchyard.dev/v1alpha1
kind: Rule
metadata: {{name: {name}}}
spec:
  watch:
    apiVersion: v1
    kind: ConfigMap
    selector: {{matchLabels: {{mirror: {name}}}}}
  outputs:
    - {{name: copy, cluster: target, template: {name}.yaml.hbs}}
  deletion: {deletion}
"#
    )
}

fn template(name: &str, note: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}-{{{{self.metadata.name}}}}\n  namespace: mirror-out\ndata:\n  from: {{{{self.metadata.name}}}}\n  note: {note}\n"
    )
}

fn write_pack(dir: &Path, note_a: &str) {
    let pack = dir.join("mirror");
    for sub in ["rules", "templates"] {
        std::fs::create_dir_all(pack.join(sub)).unwrap();
    }
    std::fs::write(pack.join("pack.yaml"), PACK).unwrap();
    std::fs::write(pack.join("rules/a.yaml"), rule("a", "Delete")).unwrap();
    std::fs::write(pack.join("rules/b.yaml"), rule("b", "Orphan")).unwrap();
    std::fs::write(pack.join("templates/a.yaml.hbs"), template("a", note_a)).unwrap();
    std::fs::write(pack.join("templates/b.yaml.hbs"), template("b", "one")).unwrap();
}

fn source_map(name: &str, rule: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "mirror-in", "labels": {"mirror": rule}},
           "data": {"k": "v"}})
}

/// One API server with the namespaces `mirror-in` and `mirror-out` and the source ConfigMaps
/// `a0..` (`a` of them, for rule a) and `b0..` (`b`, for rule b); the broker started on the
/// packs `write` puts in a fresh folder, both roles on that one server.
async fn start(
    a: usize,
    b: usize,
    write: impl FnOnce(&Path),
) -> (ControlPlane, Cluster, tempfile::TempDir, Broker) {
    let plane = ControlPlane::start(&["one"]).await.unwrap();
    let server = plane.cluster("one").unwrap();
    let cluster = Cluster::new(server.client().await.unwrap());
    for ns in ["mirror-in", "mirror-out"] {
        cluster
            .put(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
            .await;
    }
    for i in 0..a {
        cluster.put(&source_map(&format!("a{i}"), "a")).await;
    }
    for i in 0..b {
        cluster.put(&source_map(&format!("b{i}"), "b")).await;
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path());
    let kubeconfig = server.kubeconfig_path();
    let broker = Broker::start(
        dir.path(),
        &[("source", kubeconfig), ("target", kubeconfig)],
    )
    .await;
    (plane, cluster, dir, broker)
}

/// Waits until the broker's first round has finished, and a second more for what it queued.
async fn first_round_done(broker: &Broker) {
    wait_for("the first round to finish", CONVERGE, || async {
        let (code, body) = broker.readyz().await;
        if code == 200 { Ok(()) } else { Err(body) }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// The key of source ConfigMap `name`.
fn source_key(name: &str) -> switchyard_core::ObjectKey {
    switchyard_core::ObjectKey {
        cluster: "source".into(),
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: Some("mirror-in".into()),
        name: name.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_reevaluates_only_changed_rules_and_orphan_keeps_outputs() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return;
    }
    let (_plane, cluster, dir, broker) = start(6, 3, |d| write_pack(d, "one")).await;

    let copy = |name: String| {
        let cluster = cluster.clone();
        async move {
            cluster
                .get("v1", "ConfigMap", Some("mirror-out"), &name)
                .await
        }
    };
    wait_for("9 copies", CONVERGE, || async {
        let copies = cluster
            .list("v1", "ConfigMap")
            .await
            .into_iter()
            .filter(|c| {
                c["metadata"]["namespace"] == "mirror-out"
                    && c["metadata"]["labels"]["switchyard.dev/pack"] == "mirror"
            })
            .count();
        if copies == 9 {
            Ok(())
        } else {
            Err(format!("{copies} copies"))
        }
    })
    .await;
    first_round_done(&broker).await;
    let count = |name: &str| broker.controller.evaluations_of(&source_key(name));
    let before: Vec<u64> = (0..6).map(|i| count(&format!("a{i}"))).collect();
    let before_b: Vec<u64> = (0..3).map(|i| count(&format!("b{i}"))).collect();

    // Rule a's template changes: its 6 triggers are evaluated again, rule b's 3 are not.
    write_pack(dir.path(), "two");
    wait_for("a's copies to carry the edit", CONVERGE, || async {
        for i in 0..6 {
            let c = copy(format!("a-a{i}")).await.ok_or("missing")?;
            if c["data"]["note"] != "two" {
                return Err(format!("a-a{i}: {}", c["data"]));
            }
        }
        Ok(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    for (i, before) in before.iter().enumerate() {
        assert!(
            count(&format!("a{i}")) > *before,
            "a{i} was not evaluated again"
        );
    }
    let after_b: Vec<u64> = (0..3).map(|i| count(&format!("b{i}"))).collect();
    assert_eq!(
        after_b, before_b,
        "rule b's triggers were evaluated again although b did not change"
    );

    // deletion: Orphan (rule b): the copy stays, without the pack's labels; Delete (rule a):
    // the copy goes.
    cluster
        .delete("v1", "ConfigMap", Some("mirror-in"), "b0")
        .await;
    cluster
        .delete("v1", "ConfigMap", Some("mirror-in"), "a0")
        .await;
    wait_for("a's copy deleted and b's orphaned", CONVERGE, || async {
        if copy("a-a0".into()).await.is_some() {
            return Err("a-a0 still exists".into());
        }
        let b = copy("b-b0".into()).await.ok_or("b-b0 was deleted")?;
        if b.pointer("/metadata/labels/switchyard.dev~1pack").is_some() {
            return Err(format!("b-b0 still managed: {}", b["metadata"]["labels"]));
        }
        Ok(())
    })
    .await;
    assert_eq!(copy("b-b0".into()).await.unwrap()["data"]["from"], "b0");
    broker.stop().await;
}

/// A pack whose rule writes each trigger's copy and one ConfigMap every trigger desires
/// (merged from all of them), at `version`, the shared one with `note`.
fn write_shared_pack(dir: &Path, version: &str, copy_note: &str, note: &str) {
    let pack = dir.join("mirror");
    for sub in ["rules", "templates"] {
        std::fs::create_dir_all(pack.join(sub)).unwrap();
    }
    std::fs::write(
        pack.join("pack.yaml"),
        PACK.replace("version: 0.1.0", &format!("version: {version}")),
    )
    .unwrap();
    std::fs::write(
        pack.join("rules/a.yaml"),
        rule("a", "Delete").replace(
            "  outputs:\n",
            "  outputs:\n    - {name: shared, cluster: target, template: shared.yaml.hbs}\n",
        ),
    )
    .unwrap();
    std::fs::write(pack.join("templates/a.yaml.hbs"), template("a", copy_note)).unwrap();
    std::fs::write(
        pack.join("templates/shared.yaml.hbs"),
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\n  namespace: mirror-out\ndata:\n  note: {note}\n"
        ),
    )
    .unwrap();
}

/// A reload keeps the merged form of outputs whose contributions did not change: an edit of
/// another template leaves the shared output unwritten; a new pack version (stamped on every
/// output) and a new content of the shared output both reach it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_rewrites_a_shared_output_only_when_its_merge_changes() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return;
    }
    let (_plane, cluster, dir, broker) =
        start(4, 0, |d| write_shared_pack(d, "0.1.0", "one", "first")).await;
    let get = |name: &'static str| {
        let cluster = cluster.clone();
        async move {
            cluster
                .get("v1", "ConfigMap", Some("mirror-out"), name)
                .await
        }
    };
    let copies_say = |note: &'static str| {
        let cluster = cluster.clone();
        async move {
            for i in 0..4 {
                let c = cluster
                    .get("v1", "ConfigMap", Some("mirror-out"), &format!("a-a{i}"))
                    .await
                    .ok_or(format!("a-a{i} missing"))?;
                if c["data"]["note"] != note {
                    return Err(format!("a-a{i}: {}", c["data"]));
                }
            }
            Ok(())
        }
    };
    let version = |c: &Value| c["metadata"]["annotations"]["switchyard.dev/pack-version"].clone();
    wait_for("the copies and the shared output", CONVERGE, || async {
        copies_say("one").await?;
        let shared = get("shared").await.ok_or("shared missing")?;
        let owners = shared["metadata"]["annotations"]["switchyard.dev/owners"]
            .as_str()
            .unwrap_or_default()
            .split(',')
            .count();
        if owners == 4 {
            Ok(())
        } else {
            Err(format!("shared has {owners} owners"))
        }
    })
    .await;
    first_round_done(&broker).await;
    let shared = get("shared").await.unwrap();
    assert_eq!(version(&shared), "0.1.0");
    assert_eq!(shared["data"]["note"], "first");

    // The copies' template changes: every trigger is evaluated again, the shared output's
    // merge is kept and it is not written.
    write_shared_pack(dir.path(), "0.1.0", "two", "first");
    wait_for("the copies to carry the edit", CONVERGE, || {
        copies_say("two")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = get("shared").await.unwrap();
    assert_eq!(
        after["metadata"]["resourceVersion"], shared["metadata"]["resourceVersion"],
        "the shared output was written although its merge did not change"
    );

    // A new version only: stamped on the shared output too.
    write_shared_pack(dir.path(), "0.2.0", "two", "first");
    wait_for(
        "the shared output to carry the new version",
        CONVERGE,
        || async {
            let shared = get("shared").await.ok_or("shared missing")?;
            if version(&shared) == "0.2.0" {
                Ok(())
            } else {
                Err(format!("version {}", version(&shared)))
            }
        },
    )
    .await;

    // A new content of the shared output reaches it, still owned by every trigger.
    write_shared_pack(dir.path(), "0.2.0", "two", "second");
    wait_for(
        "the shared output to carry the new note",
        CONVERGE,
        || async {
            let shared = get("shared").await.ok_or("shared missing")?;
            if shared["data"]["note"] == "second" {
                Ok(())
            } else {
                Err(format!("{}", shared["data"]))
            }
        },
    )
    .await;
    let shared = get("shared").await.unwrap();
    assert_eq!(
        shared["metadata"]["annotations"]["switchyard.dev/owners"]
            .as_str()
            .unwrap()
            .split(',')
            .count(),
        4
    );
    broker.stop().await;
}

/// An edit of a template inside `{{#if}}` on the trigger's fields is evaluated again only for
/// the triggers it holds for (and those whose last evaluation failed): the others render as
/// before and are left alone. An edit outside any block reaches every trigger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_edit_under_a_condition_reevaluates_only_the_triggers_it_holds_for() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return;
    }
    // Rule a's template fails for a trigger with `data.bad` (it reads a field nobody has).
    let failing = |text: String| {
        format!("{text}{{{{#if self.data.bad}}}}\n  bad: {{{{self.data.nothing}}}}\n{{{{/if}}}}\n")
    };
    let (_plane, cluster, dir, broker) = start(4, 0, |d| {
        write_pack(d, "one");
        std::fs::write(
            d.join("mirror/templates/a.yaml.hbs"),
            failing(template("a", "one")),
        )
        .unwrap();
    })
    .await;
    // Two more triggers of rule a, flagged; one whose evaluation fails.
    for name in ["f0", "f1"] {
        let mut map = source_map(name, "a");
        map["data"]["flag"] = json!("yes");
        cluster.put(&map).await;
    }
    let mut broken = source_map("x", "a");
    broken["data"]["bad"] = json!("yes");
    cluster.put(&broken).await;
    let copies = ["a0", "a1", "a2", "a3", "f0", "f1"];
    let notes = |expected: &'static [(&'static str, Option<&'static str>)]| {
        let cluster = cluster.clone();
        async move {
            for (name, edited) in expected {
                let c = cluster
                    .get("v1", "ConfigMap", Some("mirror-out"), &format!("a-{name}"))
                    .await
                    .ok_or(format!("a-{name} missing"))?;
                if c["data"].get("edited").and_then(Value::as_str) != *edited {
                    return Err(format!("a-{name}: {}", c["data"]));
                }
            }
            Ok(())
        }
    };
    wait_for("6 copies", CONVERGE, || {
        notes(&[
            ("a0", None),
            ("a1", None),
            ("a2", None),
            ("a3", None),
            ("f0", None),
            ("f1", None),
        ])
    })
    .await;
    first_round_done(&broker).await;
    let count = |name: &str| broker.controller.evaluations_of(&source_key(name));
    let before: Vec<u64> = copies.iter().map(|n| count(n)).collect();
    let broken_before = count("x");
    assert!(broken_before > 0, "the failing trigger was never evaluated");

    // Inside `{{#if self.data.flag}}`: f0 and f1 change, and x (it failed) is tried again.
    let guarded = template("a", "one").replace(
        "  note: one\n",
        "  note: one\n{{#if self.data.flag}}\n  edited: \"yes\"\n{{/if}}\n",
    );
    std::fs::write(
        dir.path().join("mirror/templates/a.yaml.hbs"),
        failing(guarded.clone()),
    )
    .unwrap();
    wait_for("the flagged copies to carry the edit", CONVERGE, || {
        notes(&[("f0", Some("yes")), ("f1", Some("yes")), ("a0", None)])
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after: Vec<u64> = copies.iter().map(|n| count(n)).collect();
    for ((name, before), after) in copies.iter().zip(&before).zip(&after) {
        let flagged = name.starts_with('f');
        assert_eq!(
            after > before,
            flagged,
            "{name}: evaluated {before} times before the edit, {after} after"
        );
    }
    assert!(
        count("x") > broken_before,
        "the failing trigger was not evaluated again"
    );

    // Outside any block: every trigger.
    std::fs::write(
        dir.path().join("mirror/templates/a.yaml.hbs"),
        failing(guarded.replace("note: one", "note: two")),
    )
    .unwrap();
    wait_for("every copy to carry the second edit", CONVERGE, || async {
        for name in copies {
            let c = cluster
                .get("v1", "ConfigMap", Some("mirror-out"), &format!("a-{name}"))
                .await
                .ok_or(format!("a-{name} missing"))?;
            if c["data"]["note"] != "two" {
                return Err(format!("a-{name}: {}", c["data"]));
            }
        }
        Ok(())
    })
    .await;
    broker.stop().await;
}
