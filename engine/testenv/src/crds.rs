//! CustomResourceDefinitions for tests: read from a folder, installed through any client,
//! and waited for until they are servable.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::Value;

use crate::error::TestEnvError;

/// How long a CustomResourceDefinition may take to become servable.
const CRD_TIMEOUT: Duration = Duration::from_secs(30);

/// Reads every CustomResourceDefinition in the `*.yaml`, `*.yml` and `*.json` files of a
/// folder (not recursive, in name order; multi-document files allowed; other kinds skipped),
/// for [`ApiServer::install_crds`](crate::ApiServer::install_crds).
pub fn read_crds(dir: &Path) -> Result<Vec<Value>, TestEnvError> {
    let entries = std::fs::read_dir(dir)
        .map_err(|err| TestEnvError::io(format!("reading {}", dir.display()), err))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|err| TestEnvError::io(format!("reading {}", dir.display()), err))?
            .path();
        let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if matches!(extension, "yaml" | "yml" | "json") && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    let mut crds = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path)
            .map_err(|err| TestEnvError::io(format!("reading {}", path.display()), err))?;
        let documents: Vec<Value> =
            serde_saphyr::from_multiple(&text).map_err(|err| TestEnvError::Crd {
                name: path.display().to_string(),
                message: err.to_string(),
            })?;
        crds.extend(
            documents
                .into_iter()
                .filter(|doc| doc["kind"] == "CustomResourceDefinition"),
        );
    }
    Ok(crds)
}

/// Waits until the CRD is Established and its resource lists; returns when it became
/// Established (Unix seconds).
async fn wait_crd_servable(
    api: &Api<CustomResourceDefinition>,
    client: &kube::Client,
    name: &str,
    deadline: Instant,
) -> Result<i64, TestEnvError> {
    let mut last = String::from("not established");
    loop {
        let crd = api.get(name).await?;
        let established = crd
            .status
            .as_ref()
            .and_then(|status| status.conditions.as_ref())
            .and_then(|conditions| {
                conditions
                    .iter()
                    .find(|c| c.type_ == "Established" && c.status == "True")
            })
            .map(|c| {
                c.last_transition_time
                    .as_ref()
                    .map_or_else(|| Timestamp::now().as_second(), |t| t.0.as_second())
            });
        if let Some(established_at) = established {
            let version = crd
                .spec
                .versions
                .iter()
                .find(|v| v.storage)
                .or_else(|| crd.spec.versions.iter().find(|v| v.served));
            let Some(version) = version else {
                return Err(TestEnvError::Crd {
                    name: name.to_string(),
                    message: "no served version".to_string(),
                });
            };
            let group = &crd.spec.group;
            let resource = ApiResource {
                group: group.clone(),
                version: version.name.clone(),
                api_version: format!("{group}/{}", version.name),
                kind: crd.spec.names.kind.clone(),
                plural: crd.spec.names.plural.clone(),
            };
            let objects: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
            match objects.list(&ListParams::default().limit(1)).await {
                Ok(_) => return Ok(established_at),
                Err(err) => last = format!("list failed: {err}"),
            }
        }
        if Instant::now() > deadline {
            return Err(TestEnvError::Crd {
                name: name.to_string(),
                message: format!("not servable after {CRD_TIMEOUT:?}: {last}"),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Applies CustomResourceDefinitions through any client (a test control plane's or a real
/// cluster's) and waits until each is Established and servable: see
/// [`ApiServer::install_crds`](crate::ApiServer::install_crds).
pub async fn install_crds(client: &kube::Client, crds: &[Value]) -> Result<(), TestEnvError> {
    let client = client.clone();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply("switchyard-testenv").force();
    let mut names = Vec::with_capacity(crds.len());
    for crd in crds {
        let name = crd
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .ok_or_else(|| TestEnvError::Crd {
                name: "(unnamed)".to_string(),
                message: "metadata.name is missing".to_string(),
            })?;
        api.patch(name, &params, &Patch::Apply(crd)).await?;
        names.push(name);
    }
    let deadline = Instant::now() + CRD_TIMEOUT;
    let mut established_at = i64::MIN;
    for name in names {
        let at = wait_crd_servable(&api, &client, name, deadline).await?;
        established_at = established_at.max(at);
    }
    // The condition's time has whole seconds; the server compares against that.
    let window_ends = established_at.saturating_add(2).saturating_mul(1000);
    let now = Timestamp::now().as_millisecond();
    if let Ok(wait) = u64::try_from(window_ends.saturating_sub(now)) {
        tokio::time::sleep(Duration::from_millis(wait + 50)).await;
    }
    Ok(())
}
