//! Connections to the configured clusters: one [`kube::Client`] per [`ClusterConfig`].
//!
//! Creating a client does not contact the cluster; the first request does. Two roles may use
//! the same kubeconfig (and context): each gets its own client.

use std::collections::BTreeMap;

use kube::config::{KubeConfigOptions, Kubeconfig};

use std::sync::Arc;

use crate::config::{ClusterConfig, ClusterId, ConfigError, IN_CLUSTER};
use crate::metrics::Metrics;

/// The client configuration of a cluster: its kubeconfig file with the chosen context (default
/// the file's current context), or the pod's service account.
pub async fn client_config(cluster: &ClusterConfig) -> Result<kube::Config, ConfigError> {
    let id = cluster.id();
    match &cluster.kubeconfig {
        Some(path) => {
            let shown = switchyard_files::display(path);
            let kubeconfig_error = |source| ConfigError::Kubeconfig {
                cluster: id.clone(),
                path: shown.clone(),
                source: Box::new(source),
            };
            let kubeconfig = Kubeconfig::read_from(path).map_err(kubeconfig_error)?;
            let options = KubeConfigOptions {
                context: cluster.context.clone(),
                ..KubeConfigOptions::default()
            };
            kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(kubeconfig_error)
        }
        None => kube::Config::incluster().map_err(|source| ConfigError::InCluster {
            cluster: id,
            source: Box::new(source),
        }),
    }
}

/// A client for the cluster.
pub async fn connect(cluster: &ClusterConfig) -> Result<kube::Client, ConfigError> {
    connect_with_config(cluster, &Metrics::new())
        .await
        .map(|(client, _)| client)
}

/// A client for the cluster, and its configuration.
pub async fn connect_with_config(
    cluster: &ClusterConfig,
    metrics: &Arc<Metrics>,
) -> Result<(kube::Client, kube::Config), ConfigError> {
    install_crypto_provider();
    let config = client_config(cluster).await?;
    let kept = config.clone();
    tracing::debug!(cluster = %cluster.id(), url = %config.cluster_url, "cluster client");
    let client =
        crate::instrument::client(config, metrics).map_err(|error| ConfigError::Client {
            cluster: cluster.id(),
            source_text: match &cluster.kubeconfig {
                Some(path) => format!("kubeconfig `{}`", switchyard_files::display(path)),
                None => IN_CLUSTER.to_string(),
            },
            error: Box::new(error),
        })?;
    Ok((client, kept))
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A client sharing `base`'s connection (one connection pool for every workspace behind a
/// kcp virtual workspace URL) whose every request path gets `prefix` in front
/// (`/clusters/<workspace>`, `/clusters/*`), below the base URL's own path.
pub fn prefixed_client(base: &kube::Client, prefix: &str) -> kube::Client {
    let inner = base.clone();
    let prefix: Arc<str> = Arc::from(prefix.trim_end_matches('/'));
    let service = tower::service_fn(move |mut request: http::Request<kube::client::Body>| {
        let inner = inner.clone();
        let prefix = Arc::clone(&prefix);
        async move {
            let rest = request
                .uri()
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .to_string();
            let uri: http::Uri = format!("{prefix}{rest}")
                .parse()
                .map_err(|e| Box::new(e) as BoxError)?;
            *request.uri_mut() = uri;
            inner
                .send(request)
                .await
                .map_err(|e| Box::new(e) as BoxError)
        }
    });
    kube::Client::new(service, base.default_namespace().to_string())
}

/// Clients for every configured cluster, by id; the first failure stops.
pub async fn connect_all(
    clusters: &[ClusterConfig],
) -> Result<BTreeMap<ClusterId, kube::Client>, ConfigError> {
    let mut clients = BTreeMap::new();
    for cluster in clusters {
        clients.insert(cluster.id(), connect(cluster).await?);
    }
    Ok(clients)
}

/// rustls needs a process-wide crypto provider before the first TLS client is built; kube
/// does not choose one. Installing twice is harmless (the first one stays).
fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::config::parse_cluster_flag;

    const KUBECONFIG: &str = "\
apiVersion: v1
kind: Config
current-context: one
clusters:
  - name: one
    cluster: {server: 'https://127.0.0.1:6443', insecure-skip-tls-verify: true}
  - name: two
    cluster: {server: 'https://127.0.0.2:7443', insecure-skip-tls-verify: true}
users:
  - name: admin
    user: {token: secret}
contexts:
  - name: one
    context: {cluster: one, user: admin, namespace: team-a}
  - name: kubernetes-admin@two
    context: {cluster: two, user: admin}
";

    fn kubeconfig() -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kc.yaml");
        std::fs::write(&path, KUBECONFIG).unwrap();
        let path = path.to_string_lossy().into_owned();
        (dir, path)
    }

    #[tokio::test]
    async fn kubeconfig_with_and_without_context() {
        let (_dir, path) = kubeconfig();
        let current = client_config(&parse_cluster_flag(&format!("source={path}")).unwrap())
            .await
            .unwrap();
        assert_eq!(current.cluster_url.to_string(), "https://127.0.0.1:6443/");
        assert_eq!(current.default_namespace, "team-a");
        let chosen = parse_cluster_flag(&format!("karmada={path}@kubernetes-admin@two")).unwrap();
        let config = client_config(&chosen).await.unwrap();
        assert_eq!(config.cluster_url.to_string(), "https://127.0.0.2:7443/");
        // Two roles on one kubeconfig: each its own client, no request made.
        connect(&chosen).await.unwrap();
        connect_all(&[
            parse_cluster_flag(&format!("source={path}")).unwrap(),
            chosen,
        ])
        .await
        .unwrap();
    }

    #[tokio::test]
    async fn errors_name_the_cluster_and_the_file() {
        let (_dir, path) = kubeconfig();
        let error = async |cluster: &ClusterConfig| match connect(cluster).await {
            Ok(_) => panic!("connecting to `{}` should fail", cluster.id()),
            Err(e) => e.to_string(),
        };
        let missing = parse_cluster_flag("provider/x86=/does/not/exist.yaml").unwrap();
        let e = error(&missing).await;
        assert!(
            e.starts_with("cluster `provider/x86`: kubeconfig `/does/not/exist.yaml`: "),
            "{e}"
        );
        let no_context = parse_cluster_flag(&format!("source={path}@nope")).unwrap();
        let e = error(&no_context).await;
        assert!(
            e.starts_with(&format!("cluster `source`: kubeconfig `{path}`: ")),
            "{e}"
        );
        assert!(e.contains("nope"), "{e}");
    }
}
