//! Real Kubernetes API servers on loopback for the broker's tests, like controller-runtime's
//! envtest, plus a proxy that injects faults between a client and one of them and one that
//! serves several of them as the workspaces of a kcp virtual workspace.
//!
//! [`ControlPlane::start`] runs one etcd and one kube-apiserver per simulated cluster (for
//! example `source` and `karmada`), each API server under its own etcd prefix so they share
//! nothing but the etcd process. Every API server serves HTTPS on `127.0.0.1` with certificates
//! generated per control plane and an admin client certificate in `system:masters`; its
//! [`ApiServer::kubeconfig_path`] works with `kube` and with `kubectl`. No controllers, scheduler
//! or kubelets run: objects are stored and served, nothing reconciles them (no garbage
//! collection, no namespace finalization, no default service accounts).
//!
//! [`FaultProxy`] sits in front of an [`ApiServer`], serves plain HTTP to the code under test
//! and can fail requests, stall them or cut open watch streams, and counts what passes.
//!
//! [`WorkspaceProxy`] emulates a kcp virtual workspace over several API servers, one per
//! workspace, behind one plain-HTTP URL: every object carries the [`CLUSTER_ANNOTATION`]
//! `kcp.io/cluster: <workspace>`, lists and watches without a workspace (or under
//! `/clusters/*`) merge every server with resource versions that resume each of them, and
//! `/clusters/<workspace>/...` reaches one server for reads and writes. The documentation of
//! `src/kcp.rs` says exactly what is emulated and what is not.
//!
//! The binaries come from `scripts/test-apiserver.sh` (kube-apiserver and etcd built from their
//! Go modules once per machine), or from the folder named by `SWITCHYARD_TEST_BIN`. Every
//! process listens on 127.0.0.1 only, logs to a file in the control plane's temporary folder
//! (quoted in start-up errors) and is killed when the [`ControlPlane`] is dropped, panics
//! included; a small watchdog process also kills them if the test binary itself is killed.
//!
//! Tests that should also run against a real cluster read [`external_kubeconfig`]: when
//! `SWITCHYARD_E2E_KUBECONFIG` names a kubeconfig file, use it instead of starting a control
//! plane.
//!
//! Starting etcd and one kube-apiserver takes about 3-5 s; restarting one about 3 s.
//!
//! ```no_run
//! # async fn example() -> Result<(), switchyard_testenv::TestEnvError> {
//! use switchyard_testenv::{ControlPlane, FaultProxy};
//!
//! let control_plane = ControlPlane::start(&["source", "karmada"]).await?;
//! let source = control_plane.cluster("source").expect("started above");
//! let client = source.client().await?;
//! // The code under test talks to `source` through the proxy.
//! let proxy = FaultProxy::start(source).await?;
//! let flaky = proxy.client().await?;
//! proxy.fail_next(2, 500);
//! # let _ = (client, flaky);
//! # Ok(())
//! # }
//! ```
//!
//! kube's client retries 429, 503 and 504 answers by itself (honouring `Retry-After`), so
//! [`FaultProxy::fail_next`] with those codes is only visible to the caller once the retries
//! run out; 500 reaches it at once.

mod binaries;
mod certs;
mod control_plane;
mod crds;
mod error;
mod http_client;
mod http_server;
mod kcp;
mod kubeconfig;
mod process;
mod proxy;

pub use binaries::TEST_BIN_ENV;
pub use control_plane::{ApiServer, ControlPlane};
pub use crds::{install_crds, read_crds};
pub use error::TestEnvError;
pub use http_server::ProxyCounts;
pub use kcp::{CLUSTER_ANNOTATION, WorkspaceProxy, api_binding_crd, endpoint_slice_crd};
pub use kubeconfig::{E2E_KUBECONFIG_ENV, client_from_kubeconfig, external_kubeconfig};
pub use proxy::FaultProxy;
