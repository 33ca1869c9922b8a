//! One etcd and N kube-apiservers.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use serde_json::Value;

use crate::binaries::{self, Binaries};
use crate::certs::Pki;
use crate::crds::install_crds;
use crate::error::TestEnvError;
use crate::http_client::{BoxBody, HttpsClient};
use crate::kubeconfig::{client_from_kubeconfig, write_kubeconfig};
use crate::process::{Proc, Watchdog, log_tail};

/// How long a process may take to become ready.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Log lines quoted in start-up errors.
const TAIL_LINES: usize = 30;

/// One etcd and one kube-apiserver per simulated cluster, in a temporary folder that goes away
/// with it. Dropping it kills every process.
pub struct ControlPlane {
    // Declaration order is drop order: API servers, then etcd, then the watchdog, then the
    // folder their files live in.
    servers: Vec<ApiServer>,
    etcd: Proc,
    etcd_url: String,
    _watchdog: Arc<Watchdog>,
    dir: tempfile::TempDir,
}

impl ControlPlane {
    /// Starts one etcd and one kube-apiserver per name (e.g. `["source", "karmada"]`), and
    /// returns when all are ready. Names are lowercase letters, digits and `-`.
    pub async fn start(clusters: &[&str]) -> Result<ControlPlane, TestEnvError> {
        // Ports are picked free and released before the processes bind them; another process
        // (or an outgoing connection's ephemeral port) can take one in between. Try again
        // with new ports.
        let mut attempt = 1;
        loop {
            match Self::start_once(clusters).await {
                Err(TestEnvError::Exited { tail, .. })
                    if attempt < 3 && tail.contains("address already in use") =>
                {
                    tracing::warn!(
                        attempt,
                        "a port was taken before its process bound it; retrying"
                    );
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    async fn start_once(clusters: &[&str]) -> Result<ControlPlane, TestEnvError> {
        let started = Instant::now();
        for (index, name) in clusters.iter().enumerate() {
            let valid = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !clusters[..index].contains(name);
            if !valid {
                return Err(TestEnvError::InvalidClusterName((*name).to_string()));
            }
        }
        let Binaries {
            etcd: etcd_bin,
            kube_apiserver,
        } = binaries::locate().await?;
        let dir = tempfile::Builder::new()
            .prefix("switchyard-testenv-")
            .tempdir()
            .map_err(|err| TestEnvError::io("creating a temporary folder", err))?;
        let pki = Pki::generate(&dir.path().join("pki"))?;
        let http = pki.admin_client()?;
        let watchdog = Watchdog::start()?;

        let mut ports = free_ports(2 + clusters.len())?.into_iter();
        let (Some(client_port), Some(peer_port)) = (ports.next(), ports.next()) else {
            return Err(TestEnvError::io(
                "finding free ports",
                std::io::ErrorKind::AddrNotAvailable.into(),
            ));
        };
        let etcd_url = format!("http://127.0.0.1:{client_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let etcd_args = vec![
            "--name=testenv".to_string(),
            format!("--data-dir={}", dir.path().join("etcd").display()),
            format!("--listen-client-urls={etcd_url}"),
            format!("--advertise-client-urls={etcd_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=testenv={peer_url}"),
            // Tests do not need durability; fsync dominates etcd's latency on slow disks.
            "--unsafe-no-fsync=true".to_string(),
        ];
        let mut etcd = Proc::spawn(
            "etcd",
            &etcd_bin,
            &etcd_args,
            &dir.path().join("etcd.log"),
            &watchdog,
        )?;
        wait_ready(&mut etcd, &http, &format!("{etcd_url}/health")).await?;
        tracing::info!(elapsed = ?started.elapsed(), "etcd ready");

        let mut servers = Vec::with_capacity(clusters.len());
        for (name, port) in clusters.iter().zip(ports) {
            servers.push(ApiServer::new(
                name,
                port,
                &kube_apiserver,
                &etcd_url,
                dir.path(),
                &pki,
                http.clone(),
                &watchdog,
            )?);
        }
        let mut control_plane = ControlPlane {
            servers,
            etcd,
            etcd_url,
            _watchdog: watchdog,
            dir,
        };
        // Spawn every API server before waiting for any: they start in parallel.
        for server in &mut control_plane.servers {
            server.spawn()?;
        }
        for server in &mut control_plane.servers {
            server.wait_ready().await?;
        }
        tracing::info!(elapsed = ?started.elapsed(), clusters = ?clusters, "control plane ready");
        Ok(control_plane)
    }

    /// The API server of a cluster by name.
    pub fn cluster(&self, name: &str) -> Option<&ApiServer> {
        self.servers.iter().find(|server| server.name == name)
    }

    /// The API server of a cluster by name, to stop or restart it.
    pub fn cluster_mut(&mut self, name: &str) -> Option<&mut ApiServer> {
        self.servers.iter_mut().find(|server| server.name == name)
    }

    /// Every API server, in the order given to [`ControlPlane::start`].
    pub fn clusters(&self) -> impl Iterator<Item = &ApiServer> {
        self.servers.iter()
    }

    /// The shared etcd's client URL.
    pub fn etcd_url(&self) -> &str {
        &self.etcd_url
    }

    /// The temporary folder holding certificates, kubeconfigs, data and logs.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        // Signal everything first so the processes die in parallel; each Proc's Drop then
        // reaps its own.
        for server in &mut self.servers {
            if let Some(process) = server.process.as_mut() {
                process.start_kill();
            }
        }
        self.etcd.start_kill();
    }
}

/// One kube-apiserver: a simulated cluster.
pub struct ApiServer {
    name: String,
    url: String,
    dir: PathBuf,
    kubeconfig: PathBuf,
    program: PathBuf,
    args: Vec<String>,
    log: PathBuf,
    http: HttpsClient,
    watchdog: Arc<Watchdog>,
    process: Option<Proc>,
}

impl ApiServer {
    #[allow(clippy::too_many_arguments)]
    fn new(
        name: &str,
        port: u16,
        program: &Path,
        etcd_url: &str,
        root: &Path,
        pki: &Pki,
        http: HttpsClient,
        watchdog: &Arc<Watchdog>,
    ) -> Result<ApiServer, TestEnvError> {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir)
            .map_err(|err| TestEnvError::io(format!("creating {}", dir.display()), err))?;
        let url = format!("https://127.0.0.1:{port}");
        let path = |p: &Path| p.display().to_string();
        let args = vec![
            format!("--etcd-servers={etcd_url}"),
            // One prefix per cluster: the API servers share etcd and nothing else.
            format!("--etcd-prefix=/switchyard-testenv/{name}"),
            format!("--cert-dir={}", dir.join("certs").display()),
            format!("--tls-cert-file={}", path(&pki.serving_cert)),
            format!("--tls-private-key-file={}", path(&pki.serving_key)),
            format!("--client-ca-file={}", path(&pki.ca)),
            format!("--secure-port={port}"),
            "--bind-address=127.0.0.1".to_string(),
            "--advertise-address=127.0.0.1".to_string(),
            "--service-cluster-ip-range=10.0.0.0/24".to_string(),
            "--allow-privileged=true".to_string(),
            "--authorization-mode=RBAC".to_string(),
            format!("--service-account-issuer={url}"),
            format!(
                "--service-account-key-file={}",
                path(&pki.service_account_public)
            ),
            format!(
                "--service-account-signing-key-file={}",
                path(&pki.service_account_key)
            ),
            // No controller creates default service accounts, so pods would be rejected.
            "--disable-admission-plugins=ServiceAccount".to_string(),
            // Less start-up work; tests inject 429s through FaultProxy instead.
            "--enable-priority-and-fairness=false".to_string(),
            // The `kubernetes` Endpoints would point at 127.0.0.1 anyway; skip the lease loop.
            "--endpoint-reconciler-type=none".to_string(),
        ];
        let kubeconfig = dir.join("kubeconfig");
        write_kubeconfig(&kubeconfig, name, &url, Some(pki))?;
        Ok(ApiServer {
            name: name.to_string(),
            log: dir.join("kube-apiserver.log"),
            url,
            dir,
            kubeconfig,
            program: program.to_path_buf(),
            args,
            http,
            watchdog: Arc::clone(watchdog),
            process: None,
        })
    }

    /// The cluster's name, also its kubeconfig context.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `https://127.0.0.1:PORT`; the port stays the same across restarts.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A kubeconfig whose current context (named after the cluster) is the admin, a member
    /// of `system:masters`.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The admin kubeconfig as text with its certificate files embedded: what a kubeconfig
    /// Secret holds.
    pub fn embedded_kubeconfig(&self) -> Result<String, TestEnvError> {
        crate::kubeconfig::embedded_kubeconfig(&self.kubeconfig)
    }

    /// The kube-apiserver's log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Whether the process is running (not stopped, not exited).
    pub fn is_running(&mut self) -> bool {
        self.process
            .as_mut()
            .is_some_and(|process| process.exited().is_none())
    }

    /// A client with the admin's credentials, built from [`ApiServer::kubeconfig_path`].
    pub async fn client(&self) -> Result<kube::Client, TestEnvError> {
        client_from_kubeconfig(&self.kubeconfig).await
    }

    /// Stops the kube-apiserver: SIGTERM, then SIGKILL after a grace period. Stopping a
    /// stopped server does nothing.
    pub async fn stop(&mut self) -> Result<(), TestEnvError> {
        match self.process.take() {
            Some(process) => process.stop().await,
            None => Ok(()),
        }
    }

    /// Stops the kube-apiserver if it runs and starts it again on the same port, etcd prefix
    /// and certificates, so clients and kubeconfigs keep working and the data survives.
    pub async fn restart(&mut self) -> Result<(), TestEnvError> {
        let started = Instant::now();
        self.stop().await?;
        self.spawn()?;
        self.wait_ready().await?;
        tracing::info!(name = self.name, elapsed = ?started.elapsed(), "kube-apiserver restarted");
        Ok(())
    }

    /// Applies CustomResourceDefinitions (server-side apply, so applying again updates them)
    /// and waits until each is Established and a list of its resource succeeds.
    ///
    /// kube-apiserver holds every create of a custom resource for 2 s while its CRD has been
    /// Established for less than 2 s (for HA consistency); this waits that window out too, so
    /// the first create after it is not mysteriously slow.
    pub async fn install_crds(&self, crds: &[Value]) -> Result<(), TestEnvError> {
        install_crds(&self.client().await?, crds).await
    }

    fn spawn(&mut self) -> Result<(), TestEnvError> {
        if self.process.is_none() {
            let name = format!("kube-apiserver {}", self.name);
            self.process = Some(Proc::spawn(
                &name,
                &self.program,
                &self.args,
                &self.log,
                &self.watchdog,
            )?);
        }
        Ok(())
    }

    async fn wait_ready(&mut self) -> Result<(), TestEnvError> {
        let started = Instant::now();
        let url = format!("{}/readyz", self.url);
        match self.process.as_mut() {
            Some(process) => wait_ready(process, &self.http, &url).await?,
            None => {
                return Err(TestEnvError::Exited {
                    name: self.name.clone(),
                    status: "not started".to_string(),
                    log: self.log.clone(),
                    tail: String::new(),
                });
            }
        }
        tracing::info!(name = self.name, elapsed = ?started.elapsed(), "kube-apiserver ready");
        Ok(())
    }

    pub(crate) fn http(&self) -> &HttpsClient {
        &self.http
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

/// `n` distinct ports free right now on 127.0.0.1: the OS picks them, and we hold them all
/// until every one is picked, then release them for the processes.
fn free_ports(n: usize) -> Result<Vec<u16>, TestEnvError> {
    let listeners = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| TestEnvError::io("finding free ports", err))?;
    listeners
        .iter()
        .map(|listener| listener.local_addr().map(|addr| addr.port()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| TestEnvError::io("finding free ports", err))
}

/// Polls `url` until it answers 200, failing early if the process exits.
async fn wait_ready(process: &mut Proc, http: &HttpsClient, url: &str) -> Result<(), TestEnvError> {
    let started = Instant::now();
    let mut last = String::from("no answer yet");
    loop {
        if let Some(status) = process.exited() {
            return Err(TestEnvError::Exited {
                name: process.name().to_string(),
                status,
                log: process.log().to_path_buf(),
                tail: log_tail(process.log(), TAIL_LINES),
            });
        }
        if started.elapsed() > START_TIMEOUT {
            return Err(TestEnvError::NotReady {
                name: process.name().to_string(),
                waited: started.elapsed(),
                last,
                log: process.log().to_path_buf(),
                tail: log_tail(process.log(), TAIL_LINES),
            });
        }
        match probe(http, url).await {
            Ok(200) => return Ok(()),
            Ok(status) => last = format!("last answer: HTTP {status}"),
            Err(err) => last = format!("last error: {err}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn probe(http: &HttpsClient, url: &str) -> Result<u16, String> {
    let body: BoxBody = Empty::new().map_err(|never| match never {}).boxed();
    let request = http::Request::get(url)
        .body(body)
        .map_err(|err| err.to_string())?;
    match tokio::time::timeout(Duration::from_secs(2), http.request(request)).await {
        Ok(Ok(response)) => Ok(response.status().as_u16()),
        Ok(Err(err)) => Err(err.to_string()),
        Err(_) => Err("timed out".to_string()),
    }
}
