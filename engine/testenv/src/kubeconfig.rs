//! Kubeconfig files: the ones written for each API server and fault proxy, the clients read
//! from them, and the kubeconfig of a real cluster tests may run against instead.

use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;

use crate::certs::Pki;
use crate::error::TestEnvError;

/// Environment variable naming a kubeconfig of a real cluster for end-to-end tests.
pub const E2E_KUBECONFIG_ENV: &str = "SWITCHYARD_E2E_KUBECONFIG";

/// The kubeconfig of a real cluster to test against, from `SWITCHYARD_E2E_KUBECONFIG`, if set
/// and not empty.
pub fn external_kubeconfig() -> Option<PathBuf> {
    std::env::var_os(E2E_KUBECONFIG_ENV)
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
}

pub async fn client_from_kubeconfig(path: &Path) -> Result<kube::Client, TestEnvError> {
    // kube's rustls client uses the process-wide crypto provider; pick ring if none is set
    // (an error only means one is installed already).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kubeconfig = Kubeconfig::read_from(path)?;
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

/// Writes a kubeconfig (JSON, which is YAML) with one cluster, user and context named `name`.
/// Without `pki` the user has no credentials: the fault proxy adds them.
pub(crate) fn write_kubeconfig(
    path: &Path,
    name: &str,
    server: &str,
    pki: Option<&Pki>,
) -> Result<(), TestEnvError> {
    let mut cluster = json!({ "server": server });
    let mut user = json!({});
    if let Some(pki) = pki {
        cluster["certificate-authority"] = json!(pki.ca);
        user["client-certificate"] = json!(pki.admin_cert);
        user["client-key"] = json!(pki.admin_key);
    }
    let kubeconfig = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": name, "cluster": cluster }],
        "users": [{ "name": name, "user": user }],
        "contexts": [{ "name": name, "context": { "cluster": name, "user": name } }],
        "current-context": name,
    });
    let text = serde_json::to_string_pretty(&kubeconfig)
        .map_err(|err| TestEnvError::io("serializing a kubeconfig", err.into()))?;
    std::fs::write(path, text)
        .map_err(|err| TestEnvError::io(format!("writing {}", path.display()), err))
}

/// The kubeconfig at `path` with the files it names (CA, client certificate and key)
/// embedded as `*-data`: what a kubeconfig Secret holds, since paths there point nowhere.
pub(crate) fn embedded_kubeconfig(path: &Path) -> Result<String, TestEnvError> {
    use base64::Engine as _;
    let read = |file: &Path| {
        std::fs::read(file)
            .map_err(|err| TestEnvError::io(format!("reading {}", file.display()), err))
    };
    let mut config: serde_json::Value = serde_json::from_slice(&read(path)?)
        .map_err(|err| TestEnvError::io("parsing a kubeconfig", err.into()))?;
    let sections = [("clusters", "cluster"), ("users", "user")];
    for (list, entry) in sections {
        let Some(items) = config
            .get_mut(list)
            .and_then(serde_json::Value::as_array_mut)
        else {
            continue;
        };
        for item in items {
            let Some(fields) = item
                .get_mut(entry)
                .and_then(serde_json::Value::as_object_mut)
            else {
                continue;
            };
            for field in ["certificate-authority", "client-certificate", "client-key"] {
                if let Some(file) = fields.remove(field) {
                    let file = file.as_str().unwrap_or_default();
                    let data =
                        base64::engine::general_purpose::STANDARD.encode(read(Path::new(file))?);
                    fields.insert(format!("{field}-data"), json!(data));
                }
            }
        }
    }
    serde_json::to_string_pretty(&config)
        .map_err(|err| TestEnvError::io("serializing a kubeconfig", err.into()))
}
