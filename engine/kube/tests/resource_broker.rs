//! The resource-broker pack under `switchyard run`, against real API servers: a consumer, two
//! providers, and one cluster for coordination and compute. A VM is copied to the provider
//! that accepts it, its status flows back, and changing its `arch` moves it through a
//! one-stage MigrationConfiguration to the other provider, leaving nothing behind; deleting
//! it removes its copy.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;
use switchyard_testenv::ControlPlane;

const CONVERGE: Duration = Duration::from_secs(90);

fn accept_api(name: &str, arch: &str) -> Value {
    json!({"apiVersion": "broker.platform-mesh.io/v1alpha1", "kind": "AcceptAPI",
           "metadata": {"name": name, "namespace": "broker"},
           "spec": {"gvr": {"group": "example.platform-mesh.io", "version": "v1alpha1", "resource": "vms"},
                    "filters": [{"key": "arch", "valueIn": [arch]}]}})
}

fn vm(arch: &str) -> Value {
    json!({"apiVersion": "example.platform-mesh.io/v1alpha1", "kind": "VM",
           "metadata": {"name": "web", "namespace": "team-a"},
           "spec": {"arch": arch, "memory": 8}})
}

const VM: &str = "example.platform-mesh.io/v1alpha1";
/// The copy's name: the first 12 hex digits of sha256("consumer#consumer#cluster"), then the
/// VM's name (the seed's vector).
const COPY: &str = "a8b70b353e97-web";

async fn annotation(cluster: &Cluster, key: &str) -> Option<String> {
    cluster
        .get(VM, "VM", Some("team-a"), "web")
        .await?
        .pointer(&format!("/metadata/annotations/{}", key.replace('/', "~1")))
        .and_then(Value::as_str)
        .map(str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_is_copied_reports_back_and_migrates_to_another_provider() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return;
    }
    let plane = ControlPlane::start(&["consumer", "x86", "arm", "coord"])
        .await
        .unwrap();
    let server = |name: &str| plane.cluster(name).unwrap();
    let vm_crd = config_crds(&["example.platform-mesh.io_vms.yaml"]);
    let mut provider_crds = vm_crd.clone();
    provider_crds.extend(config_crds(&["broker.platform-mesh.io_acceptapis.yaml"]));
    server("consumer").install_crds(&vm_crd).await.unwrap();
    server("x86").install_crds(&provider_crds).await.unwrap();
    server("arm").install_crds(&provider_crds).await.unwrap();
    server("coord")
        .install_crds(&config_crds(&[
            "broker.platform-mesh.io_migrations.yaml",
            "broker.platform-mesh.io_migrationconfigurations.yaml",
        ]))
        .await
        .unwrap();
    let consumer = Cluster::new(server("consumer").client().await.unwrap());
    let x86 = Cluster::new(server("x86").client().await.unwrap());
    let arm = Cluster::new(server("arm").client().await.unwrap());
    let coord = Cluster::new(server("coord").client().await.unwrap());
    // Providers hold copies, and the coordination cluster Migrations, in the consumer's
    // namespace, which they must have (as in the seed).
    for provider in [&x86, &arm, &coord] {
        provider
            .put(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}))
            .await;
    }
    x86.put(&accept_api("vms-x86", "x86_64")).await;
    arm.put(&accept_api("vms-arm", "arm64")).await;
    let config = switchyard_core::yaml::parse_documents(
        &std::fs::read_to_string(
            repo().join("rules/resource-broker/examples/migration-configuration.yaml"),
        )
        .unwrap(),
    )
    .unwrap()[0]
        .to_json();
    let mut config = config;
    config["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("annotations");
    coord.put(&config).await;

    let dir = tempfile::tempdir().unwrap();
    copy_tree(
        &repo().join("rules/resource-broker"),
        &dir.path().join("packs/resource-broker"),
    );
    copy_tree(&repo().join("config/crds"), &dir.path().join("config/crds"));
    let broker = Broker::start(
        &dir.path().join("packs"),
        &[
            (
                "consumer/consumer#cluster",
                server("consumer").kubeconfig_path(),
            ),
            ("provider/x86", server("x86").kubeconfig_path()),
            ("provider/arm", server("arm").kubeconfig_path()),
            ("coordination", server("coord").kubeconfig_path()),
            ("compute", server("coord").kubeconfig_path()),
        ],
    )
    .await;
    consumer.put(&vm("x86_64")).await;

    // Copied to the provider that accepts x86_64, and the consumer's VM says where.
    wait_for("the copy in provider x86", CONVERGE, || async {
        let copy = x86
            .get(VM, "VM", Some("team-a"), COPY)
            .await
            .ok_or("no copy")?;
        if copy["spec"]["arch"] == "x86_64"
            && copy["metadata"]["annotations"]["broker.platform-mesh.io/consumer-cluster"]
                == "consumer#consumer#cluster"
        {
            Ok(())
        } else {
            Err(format!("{}", copy))
        }
    })
    .await;
    wait_for("the provider annotation", CONVERGE, || async {
        match annotation(&consumer, "broker.platform-mesh.io/provider-cluster").await {
            Some(p) if p == "x86" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert!(arm.get(VM, "VM", Some("team-a"), COPY).await.is_none());

    // The provider's status flows back.
    x86.put(&json!({"apiVersion": VM, "kind": "VM",
                    "metadata": {"name": COPY, "namespace": "team-a"},
                    "status": {"status": "Available"}}))
        .await;
    wait_for("the status back on the consumer's VM", CONVERGE, || async {
        let vm = consumer
            .get(VM, "VM", Some("team-a"), "web")
            .await
            .ok_or("gone")?;
        if vm["status"]["status"] == "Available" {
            Ok(())
        } else {
            Err(format!("{}", vm["status"]))
        }
    })
    .await;

    // arm64: x86 no longer accepts it; a Migration runs the configuration's one stage.
    consumer.put(&vm("arm64")).await;
    let id = "68f4cc5329cc2a5e36d48641e4";
    wait_for(
        "the stage's resource in the compute cluster",
        CONVERGE,
        || async {
            coord
                .get("v1", "ConfigMap", Some("default"), &format!("{id}-job"))
                .await
                .map(|_| ())
                .ok_or_else(|| "not yet".to_string())
        },
    )
    .await;
    assert!(arm.get(VM, "VM", Some("team-a"), COPY).await.is_some());
    assert_eq!(
        annotation(&consumer, "broker.platform-mesh.io/new-provider-cluster")
            .await
            .as_deref(),
        Some("arm")
    );
    // The migration job reports done.
    coord
        .put(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": format!("{id}-job"), "namespace": "default"},
                     "data": {"state": "done"}}))
        .await;

    wait_for("the move to arm, with nothing left behind", CONVERGE, || async {
        let provider = annotation(&consumer, "broker.platform-mesh.io/provider-cluster").await;
        let next = annotation(&consumer, "broker.platform-mesh.io/new-provider-cluster").await;
        let old = x86.get(VM, "VM", Some("team-a"), COPY).await;
        let migration = coord
            .get("broker.platform-mesh.io/v1alpha1", "Migration", Some("team-a"), COPY)
            .await;
        let stage = coord
            .get("v1", "ConfigMap", Some("default"), &format!("{id}-job"))
            .await;
        if provider.as_deref() == Some("arm")
            && next.is_none()
            && old.is_none()
            && migration.is_none()
            && stage.is_none()
        {
            Ok(())
        } else {
            Err(format!(
                "provider {provider:?}, next {next:?}, old copy {}, migration {}, stage resource {}",
                old.is_some(),
                migration.is_some(),
                stage.is_some()
            ))
        }
    })
    .await;
    assert_eq!(
        arm.get(VM, "VM", Some("team-a"), COPY).await.unwrap()["spec"]["arch"],
        "arm64"
    );

    // Deleting the VM removes its copy, then the VM itself (every finalizer released).
    consumer.delete(VM, "VM", Some("team-a"), "web").await;
    wait_for("the copy and the VM gone", CONVERGE, || async {
        let copy = arm.get(VM, "VM", Some("team-a"), COPY).await;
        let vm = consumer.get(VM, "VM", Some("team-a"), "web").await;
        match (copy, vm) {
            (None, None) => Ok(()),
            (copy, vm) => Err(format!(
                "copy {}, vm {}",
                copy.is_some(),
                vm.map(|v| v["metadata"].to_string()).unwrap_or_default()
            )),
        }
    })
    .await;
    broker.stop().await;
}
