//! The one error type of the test environment, shared by every module.

use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong while running a test control plane.
#[derive(Debug, thiserror::Error)]
pub enum TestEnvError {
    #[error("kube-apiserver and etcd binaries: {0}")]
    Binaries(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid cluster name `{0}`: use lowercase letters, digits and `-`, each name once")]
    InvalidClusterName(String),
    #[error("generating certificates: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error("TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    #[error("{name} exited ({status}) while starting; last lines of {log}:\n{tail}")]
    Exited {
        name: String,
        status: String,
        log: PathBuf,
        tail: String,
    },
    #[error("{name} was not ready after {waited:?} ({last}); last lines of {log}:\n{tail}")]
    NotReady {
        name: String,
        waited: Duration,
        last: String,
        log: PathBuf,
        tail: String,
    },
    #[error("kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("CustomResourceDefinition {name}: {message}")]
    Crd { name: String, message: String },
    #[error("workspace proxy: {0}")]
    WorkspaceProxy(String),
}

impl TestEnvError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        TestEnvError::Io {
            context: context.into(),
            source,
        }
    }
}
