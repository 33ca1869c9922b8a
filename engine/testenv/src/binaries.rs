//! Finding `etcd` and `kube-apiserver`.

use std::path::{Path, PathBuf};

use crate::error::TestEnvError;

/// Environment variable naming the folder holding `etcd` and `kube-apiserver`.
pub const TEST_BIN_ENV: &str = "SWITCHYARD_TEST_BIN";

pub(crate) struct Binaries {
    pub(crate) etcd: PathBuf,
    pub(crate) kube_apiserver: PathBuf,
}

/// The folder from `SWITCHYARD_TEST_BIN`, else the one `scripts/test-apiserver.sh` prints
/// (it builds what is missing first, taking a machine-wide lock, so concurrent test binaries
/// wait for one build).
pub(crate) async fn locate() -> Result<Binaries, TestEnvError> {
    let folder = match std::env::var_os(TEST_BIN_ENV).filter(|value| !value.is_empty()) {
        Some(folder) => PathBuf::from(folder),
        None => run_script().await?,
    };
    let binaries = Binaries {
        etcd: folder.join("etcd"),
        kube_apiserver: folder.join("kube-apiserver"),
    };
    for path in [&binaries.etcd, &binaries.kube_apiserver] {
        if !path.is_file() {
            return Err(TestEnvError::Binaries(format!(
                "{} does not exist (set {TEST_BIN_ENV} or run scripts/test-apiserver.sh)",
                path.display()
            )));
        }
    }
    Ok(binaries)
}

async fn run_script() -> Result<PathBuf, TestEnvError> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/test-apiserver.sh");
    tracing::info!(script = %script.display(), "locating kube-apiserver and etcd (may build them once)");
    let output = tokio::process::Command::new("bash")
        .arg(&script)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(|err| TestEnvError::io(format!("running {}", script.display()), err))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(TestEnvError::Binaries(format!(
            "{} failed ({}):\n{}",
            script.display(),
            output.status,
            tail.join("\n")
        )));
    }
    match stdout.lines().map(str::trim).rfind(|line| !line.is_empty()) {
        Some(folder) => Ok(PathBuf::from(folder)),
        None => Err(TestEnvError::Binaries(format!(
            "{} printed no folder",
            script.display()
        ))),
    }
}
