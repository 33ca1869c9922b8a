//! The broker deletes and takes only what it owns, against real API servers: restarts that
//! never prune what an optional lookup feeds and write nothing to a converged set, objects
//! that existed before the pack wanted them (kept, reported, adopted only when asked), a
//! pack's scope checked against the clusters' discovery, reloads that refuse broken
//! templates and survive the packs folder being re-created, an unloaded pack that lets its
//! triggers go, and prompt recovery after an outage without Events to tenants.
//!
//! The pack `copier` copies a `Copy`'s companion ConfigMap (`<name>-extra`, an optional
//! lookup) into the namespace the Copy names on the target cluster, and creates that
//! namespace. Figures: `SWITCHYARD_SAFETY_TRIGGERS` (default 20) triggers and
//! `SWITCHYARD_SAFETY_RESTARTS` (default 4) restarts; `SWITCHYARD_SAFETY_OUTAGE` seconds of
//! outage (default 8).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::*;
use switchyard_testenv::{ControlPlane, FaultProxy};

const CONVERGE: Duration = Duration::from_secs(90);

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn copy_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "copies.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Copy", "plural": "copies", "singular": "copy", "listKind": "CopyList"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    })
}

fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
            "scope": "Cluster",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    })
}

const PACK: &str = r#"apiVersion: switchyard.dev/v1alpha1
kind: RulePack
metadata: {name: copier, version: 0.1.0}
spec:
  clusters:
    - {name: source, access: [read, writeStatus]}
    - {name: target, access: [read, write]}
  scope:
    - cluster: target
      kinds:
        - {apiVersion: v1, kind: ConfigMap}
        - {apiVersion: v1, kind: Namespace, clusterScoped: true}
      namespaces: ["copy-*"]
"#;

const RULES: &str = r#"apiVersion: switchyard.dev/v1alpha1
kind: Rule
metadata: {name: copy}
spec:
  watch:
    apiVersion: example.com/v1
    kind: Copy
    selector: {matchLabels: {adopt: "no"}}
  lookups:
    # Optional: without it the copy is not desired; a restart that evaluated before the
    # ConfigMaps listed would prune every copy.
    - {name: extra, apiVersion: v1, kind: ConfigMap, objectName: "self.metadata.name + '-extra'"}
  outputs:
    - {name: namespace, cluster: target, template: namespace.yaml.hbs}
    - {name: copy, cluster: target, template: copy.yaml.hbs, when: "extra != null"}
---
apiVersion: switchyard.dev/v1alpha1
kind: Rule
metadata: {name: adopt}
spec:
  watch:
    apiVersion: example.com/v1
    kind: Copy
    selector: {matchLabels: {adopt: "yes"}}
  outputs:
    - {name: namespace, cluster: target, template: namespace.yaml.hbs, adopt: true}
"#;

const NAMESPACE: &str =
    "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {{self.spec.namespace}}\n";

fn copy_template(note: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{{{self.metadata.name}}}}\n  namespace: {{{{self.spec.namespace}}}}\ndata:\n  value: {{{{extra.data.value}}}}\n  note: {note}\n"
    )
}

fn write_copier(packs: &Path, note: &str) {
    let pack = packs.join("copier");
    for sub in ["rules", "templates"] {
        std::fs::create_dir_all(pack.join(sub)).unwrap();
    }
    std::fs::write(pack.join("pack.yaml"), PACK).unwrap();
    std::fs::write(pack.join("rules/copy.yaml"), RULES).unwrap();
    std::fs::write(pack.join("templates/namespace.yaml.hbs"), NAMESPACE).unwrap();
    std::fs::write(pack.join("templates/copy.yaml.hbs"), copy_template(note)).unwrap();
}

/// A second pack that watches nothing the tests create: the folder never becomes empty.
fn write_idle(packs: &Path) {
    let pack = packs.join("idle");
    std::fs::create_dir_all(pack.join("rules")).unwrap();
    std::fs::write(
        pack.join("pack.yaml"),
        "apiVersion: switchyard.dev/v1alpha1\nkind: RulePack\nmetadata: {name: idle, version: 0.1.0}\nspec:\n  clusters: [{name: source, access: [read, writeStatus]}]\n  scope: []\n",
    )
    .unwrap();
    std::fs::write(
        pack.join("rules/idle.yaml"),
        "apiVersion: switchyard.dev/v1alpha1\nkind: Rule\nmetadata: {name: idle}\nspec:\n  watch: {apiVersion: example.com/v1, kind: Copy, selector: {matchLabels: {idle: \"yes\"}}}\n",
    )
    .unwrap();
}

fn copy(name: &str, namespace: &str, adopt: bool) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Copy",
        "metadata": {"name": name, "namespace": "default",
                     "labels": {"adopt": if adopt { "yes" } else { "no" }}},
        "spec": {"namespace": namespace}})
}

fn extra(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("{name}-extra"), "namespace": "default"},
        "data": {"value": format!("v-{name}")}})
}

/// Two API servers (source and target) behind fault proxies that count requests.
struct World {
    plane: ControlPlane,
    source: Cluster,
    target: Cluster,
    source_proxy: FaultProxy,
    target_proxy: FaultProxy,
}

impl World {
    async fn start() -> World {
        let plane = ControlPlane::start(&["source", "target"]).await.unwrap();
        let source = Cluster::new(plane.cluster("source").unwrap().client().await.unwrap());
        let target = Cluster::new(plane.cluster("target").unwrap().client().await.unwrap());
        switchyard_testenv::install_crds(&source.client, &[copy_crd()])
            .await
            .unwrap();
        switchyard_testenv::install_crds(&target.client, &[widget_crd()])
            .await
            .unwrap();
        let source_proxy = FaultProxy::start(plane.cluster("source").unwrap())
            .await
            .unwrap();
        let target_proxy = FaultProxy::start(plane.cluster("target").unwrap())
            .await
            .unwrap();
        World {
            plane,
            source,
            target,
            source_proxy,
            target_proxy,
        }
    }

    async fn broker(&self, packs: &Path) -> Broker {
        Broker::start(
            packs,
            &[
                ("source", self.source_proxy.kubeconfig_path()),
                ("target", self.target_proxy.kubeconfig_path()),
            ],
        )
        .await
    }

    fn reset_counts(&self) {
        self.source_proxy.reset_counts();
        self.target_proxy.reset_counts();
    }

    async fn copy_of(&self, name: &str, namespace: &str) -> Option<Value> {
        self.target
            .get("v1", "ConfigMap", Some(namespace), name)
            .await
    }

    async fn synced(&self, name: &str) -> Option<Value> {
        let live = self
            .source
            .get("example.com/v1", "Copy", Some("default"), name)
            .await?;
        condition(&live, "Synced")
    }

    async fn warning_events(&self) -> usize {
        self.source
            .list("events.k8s.io/v1", "Event")
            .await
            .iter()
            .filter(|e| e["type"] == "Warning")
            .count()
    }
}

/// Waits until the broker's first round is done (every pack's triggers evaluated since it
/// started) and its work is idle.
async fn settled(broker: &Broker) {
    wait_for("the broker to settle", CONVERGE, || async {
        let (code, body) = broker.readyz().await;
        let pending = broker.controller.not_ready();
        if code == 200 && pending.is_empty() {
            Ok(())
        } else {
            Err(format!("{code} {body} {pending:?}"))
        }
    })
    .await;
    // Work queued by the last events: a short quiet time.
    tokio::time::sleep(Duration::from_millis(1500)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_prune_nothing_and_write_nothing_to_a_converged_set() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return;
    }
    let triggers = env("SWITCHYARD_SAFETY_TRIGGERS", 20) as usize;
    let restarts = env("SWITCHYARD_SAFETY_RESTARTS", 4) as usize;
    let world = World::start().await;
    for i in 0..triggers {
        let name = format!("c{i}");
        world.source.put(&extra(&name)).await;
        // Ten triggers share each namespace: the owners annotation of a shared object.
        world
            .source
            .put(&copy(&name, &format!("copy-{}", i / 10), false))
            .await;
    }
    let dir = tempfile::tempdir().unwrap();
    write_copier(dir.path(), "one");
    let broker = world.broker(dir.path()).await;
    wait_for("every copy", CONVERGE, || async {
        for i in 0..triggers {
            let name = format!("c{i}");
            world
                .copy_of(&name, &format!("copy-{}", i / 10))
                .await
                .ok_or(format!("{name} missing"))?;
        }
        Ok(())
    })
    .await;
    settled(&broker).await;
    let outputs = triggers + triggers.div_ceil(10);
    drop(broker);

    let mut deletes = 0;
    let mut target_writes = 0;
    let mut source_writes = 0;
    for round in 0..restarts {
        world.reset_counts();
        let broker = world.broker(dir.path()).await;
        settled(&broker).await;
        let (target, source) = (world.target_proxy.requests(), world.source_proxy.requests());
        deletes += target.delete;
        target_writes += target.writes();
        source_writes += source.writes();
        // Half the restarts end as SIGTERM does, half as a kill would.
        if round % 2 == 0 {
            broker.stop().await;
        } else {
            drop(broker);
        }
    }
    eprintln!(
        "{restarts} restarts of {triggers} converged triggers ({outputs} outputs): {deletes} DELETEs, {target_writes} writes to the target, {source_writes} writes to the source"
    );
    assert_eq!(deletes, 0, "a restart deleted outputs");
    assert_eq!(target_writes, 0, "a restart rewrote converged outputs");
    assert_eq!(source_writes, 0, "a restart rewrote status or finalizers");
    for i in 0..triggers {
        let synced = world.synced(&format!("c{i}")).await.unwrap();
        assert_eq!(synced["status"], "True", "c{i}: {synced}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_that_existed_before_are_never_taken_over_unless_adopted() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return;
    }
    let world = World::start().await;
    // Someone's namespace, and a ConfigMap that carries the pack's label without having
    // been created by it.
    world
        .target
        .put(&json!({"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": "copy-prod", "labels": {"owner": "team"}}}))
        .await;
    world
        .target
        .put(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "forged", "namespace": "copy-prod",
                                  "labels": {"switchyard.dev/pack": "copier"}},
                     "data": {"k": "v"}}))
        .await;
    let before = world
        .target
        .get("v1", "Namespace", None, "copy-prod")
        .await
        .unwrap();
    let forged = world
        .target
        .get("v1", "ConfigMap", Some("copy-prod"), "forged")
        .await
        .unwrap();
    world.source.put(&copy("prod", "copy-prod", false)).await;
    let dir = tempfile::tempdir().unwrap();
    write_copier(dir.path(), "one");
    let broker = world.broker(dir.path()).await;
    let synced = wait_for("prod to report AlreadyExists", CONVERGE, || async {
        match world.synced("prod").await {
            Some(c) if c["reason"] == "AlreadyExists" => Ok(c),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(synced["status"], "False");
    assert_eq!(
        synced["message"],
        "v1 Namespace `copy-prod` exists in cluster `target` and was not created by this pack: nothing was written to it; delete it, or set `adopt: true` on the output to take it over"
    );
    let after = world
        .target
        .get("v1", "Namespace", None, "copy-prod")
        .await
        .unwrap();
    assert_eq!(
        after["metadata"]["resourceVersion"],
        before["metadata"]["resourceVersion"]
    );

    // The trigger goes: nothing it did not create goes with it.
    world
        .source
        .delete("example.com/v1", "Copy", Some("default"), "prod")
        .await;
    wait_for("prod to be deleted", CONVERGE, || async {
        match world.synced("prod").await {
            None if world
                .source
                .get("example.com/v1", "Copy", Some("default"), "prod")
                .await
                .is_none() =>
            {
                Ok(())
            }
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let kept = world
        .target
        .get("v1", "Namespace", None, "copy-prod")
        .await
        .unwrap();
    assert_eq!(kept["metadata"]["uid"], before["metadata"]["uid"]);
    assert!(kept["metadata"]["deletionTimestamp"].is_null());
    let still = world
        .target
        .get("v1", "ConfigMap", Some("copy-prod"), "forged")
        .await
        .unwrap();
    assert_eq!(
        still["metadata"]["resourceVersion"],
        forged["metadata"]["resourceVersion"]
    );
    assert_eq!(broker.controller.writes().deletes, 0);

    // An output that adopts: the existing namespace becomes the pack's, and goes with its
    // trigger.
    world.source.put(&copy("taker", "copy-prod", true)).await;
    wait_for("the namespace to be adopted", CONVERGE, || async {
        let ns = world
            .target
            .get("v1", "Namespace", None, "copy-prod")
            .await
            .ok_or("gone".to_string())?;
        let mark = ns["metadata"]["annotations"]["switchyard.dev/created"].clone();
        if mark == ns["metadata"]["uid"] {
            Ok(())
        } else {
            Err(format!("not marked: {}", ns["metadata"]))
        }
    })
    .await;
    world
        .source
        .delete("example.com/v1", "Copy", Some("default"), "taker")
        .await;
    wait_for("the adopted namespace to be deleted", CONVERGE, || async {
        match world.target.get("v1", "Namespace", None, "copy-prod").await {
            // No namespace controller runs here: deleted means terminating.
            Some(ns) if ns["metadata"]["deletionTimestamp"].is_null() => {
                Err("still there".to_string())
            }
            _ => Ok(()),
        }
    })
    .await;
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scope_that_disagrees_with_discovery_does_not_load() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return;
    }
    let world = World::start().await;
    // Widget is cluster-scoped on the target; the pack says namespaced (no CRD tells the
    // loader otherwise).
    let dir = tempfile::tempdir().unwrap();
    let pack = dir.path().join("widgets");
    std::fs::create_dir_all(pack.join("rules")).unwrap();
    std::fs::create_dir_all(pack.join("templates")).unwrap();
    std::fs::write(
        pack.join("pack.yaml"),
        "apiVersion: switchyard.dev/v1alpha1\nkind: RulePack\nmetadata: {name: widgets, version: 0.1.0}\nspec:\n  clusters: [{name: source, access: [read, writeStatus]}, {name: target, access: [read, write]}]\n  scope: [{cluster: target, kinds: [{apiVersion: example.com/v1, kind: Widget}], namespaces: ['*']}]\n",
    )
    .unwrap();
    std::fs::write(
        pack.join("rules/w.yaml"),
        "apiVersion: switchyard.dev/v1alpha1\nkind: Rule\nmetadata: {name: w}\nspec:\n  watch: {apiVersion: example.com/v1, kind: Copy}\n  outputs: [{name: w, cluster: target, template: w.yaml.hbs}]\n",
    )
    .unwrap();
    std::fs::write(
        pack.join("templates/w.yaml.hbs"),
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: {{self.metadata.name}}\n  namespace: default\n",
    )
    .unwrap();
    world.source.put(&copy("w1", "copy-w", false)).await;
    let broker = world.broker(dir.path()).await;
    let body = wait_for("the refusal in /readyz", CONVERGE, || async {
        let (code, body) = broker.readyz().await;
        if body.contains("scope entry") {
            Ok((code, body))
        } else {
            Err(body)
        }
    })
    .await;
    assert_eq!(body.0, 503, "{}", body.1);
    assert!(
        body.1.contains("pack `widgets`: scope entry example.com/v1 Widget is declared namespaced, but cluster `target` serves it cluster-scoped"),
        "{}",
        body.1
    );
    assert!(
        world
            .target
            .list("example.com/v1", "Widget")
            .await
            .is_empty()
    );
    assert_eq!(world.target_proxy.requests().writes(), 0);
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reloads_refuse_broken_templates_survive_a_recreated_folder_and_release_removed_packs() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return;
    }
    let world = World::start().await;
    world.source.put(&extra("r1")).await;
    world.source.put(&copy("r1", "copy-r", false)).await;
    let dir = tempfile::tempdir().unwrap();
    let packs = dir.path().join("packs");
    write_copier(&packs, "one");
    write_idle(&packs);
    let broker = world.broker(&packs).await;
    wait_for("the copy", CONVERGE, || async {
        world
            .copy_of("r1", "copy-r")
            .await
            .ok_or("missing".to_string())
    })
    .await;

    // A template that calls a partial nobody defines: the reload is refused, with the
    // place and the name; the running pack goes on.
    let template = packs.join("copier/templates/copy.yaml.hbs");
    std::fs::write(&template, copy_template("two") + "  more: {{> nothere}}\n").unwrap();
    let (code, body) = wait_for("the refused reload", CONVERGE, || async {
        let (code, body) = broker.readyz().await;
        if body.contains("reload failed") {
            Ok((code, body))
        } else {
            Err(body)
        }
    })
    .await;
    assert_eq!(code, 200, "{body}");
    assert!(
        body.contains("error[template::not-found]: partial `nothere` not found"),
        "{body}"
    );
    world.source.put(&extra("r2")).await;
    world.source.put(&copy("r2", "copy-r", false)).await;
    let r2 = wait_for("a new trigger, by the running pack", CONVERGE, || async {
        world
            .copy_of("r2", "copy-r")
            .await
            .ok_or("missing".to_string())
    })
    .await;
    assert_eq!(r2["data"]["note"], "one");

    // The folder deleted and created again (a deploy that replaces it): the new pack runs.
    std::fs::remove_dir_all(&packs).unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    write_copier(&packs, "three");
    write_idle(&packs);
    wait_for("the re-created folder's pack", CONVERGE, || async {
        let copy = world.copy_of("r1", "copy-r").await.ok_or("missing")?;
        if copy["data"]["note"] == "three" {
            Ok(())
        } else {
            Err(format!("note {}", copy["data"]["note"]))
        }
    })
    .await;

    // The pack removed: its triggers lose its finalizer, its outputs stay, and deleting a
    // trigger is not held up.
    std::fs::remove_dir_all(packs.join("copier")).unwrap();
    wait_for("the finalizers released", CONVERGE, || async {
        for name in ["r1", "r2"] {
            let live = world
                .source
                .get("example.com/v1", "Copy", Some("default"), name)
                .await
                .ok_or("gone".to_string())?;
            if live["metadata"]["finalizers"]
                .as_array()
                .is_some_and(|f| !f.is_empty())
            {
                return Err(format!("{name}: {}", live["metadata"]["finalizers"]));
            }
        }
        Ok(())
    })
    .await;
    world
        .source
        .delete("example.com/v1", "Copy", Some("default"), "r1")
        .await;
    wait_for("r1 gone at once", Duration::from_secs(10), || async {
        match world
            .source
            .get("example.com/v1", "Copy", Some("default"), "r1")
            .await
        {
            None => Ok(()),
            Some(o) => Err(format!("{}", o["metadata"])),
        }
    })
    .await;
    assert!(
        world.copy_of("r1", "copy-r").await.is_some(),
        "an output of the unloaded pack was removed"
    );
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_sends_no_events_and_recovery_is_prompt() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return;
    }
    let outage = Duration::from_secs(env("SWITCHYARD_SAFETY_OUTAGE", 8));
    let mut world = World::start().await;
    world.source.put(&extra("o1")).await;
    world.source.put(&copy("o1", "copy-o", false)).await;
    let dir = tempfile::tempdir().unwrap();
    write_copier(dir.path(), "one");
    let broker = world.broker(dir.path()).await;
    wait_for("the copy", CONVERGE, || async {
        world
            .copy_of("o1", "copy-o")
            .await
            .ok_or("missing".to_string())
    })
    .await;
    settled(&broker).await;
    let events_before = world.warning_events().await;

    // The target goes away; meanwhile two tenants change what they want.
    world
        .plane
        .cluster_mut("target")
        .unwrap()
        .stop()
        .await
        .unwrap();
    world.source.put(&extra("o2")).await;
    world.source.put(&copy("o2", "copy-o", false)).await;
    world.source.put(&extra("o3")).await;
    world.source.put(&copy("o3", "copy-o", false)).await;
    let unknown = wait_for("Synced=Unknown during the outage", CONVERGE, || async {
        match world.synced("o2").await {
            Some(c) if c["status"] == "Unknown" => Ok(c),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    tokio::time::sleep(outage).await;
    assert_eq!(
        world.warning_events().await,
        events_before,
        "an outage sent Events to tenants"
    );
    let (_, readyz) = broker.readyz().await;
    assert!(
        readyz.contains("[!]cluster target unreachable since "),
        "{readyz}"
    );

    world
        .plane
        .cluster_mut("target")
        .unwrap()
        .restart()
        .await
        .unwrap();
    let back = Instant::now();
    wait_for("the changes made during the outage", CONVERGE, || async {
        for name in ["o2", "o3"] {
            world
                .copy_of(name, "copy-o")
                .await
                .ok_or(format!("{name} missing"))?;
        }
        Ok(())
    })
    .await;
    let converged = back.elapsed();
    wait_for("Synced=True again", CONVERGE, || async {
        match world.synced("o2").await {
            Some(c) if c["status"] == "True" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    eprintln!(
        "outage of {outage:?}: converged {converged:?} after the target came back (Synced during the outage: {}/{})",
        unknown["reason"], unknown["message"]
    );
    assert_eq!(unknown["reason"], "ClusterUnavailable");
    assert_eq!(world.warning_events().await, events_before);
    broker.stop().await;
}
