//! A fault-injecting HTTP proxy in front of one API server.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::sync::watch;

use crate::control_plane::ApiServer;
use crate::error::TestEnvError;
use crate::http_client::{BoxBody, BoxError, HttpsClient};
use crate::http_server::{
    ProxyCounts, bind, channel_body, is_watch, lock, serve, status_response, strip_hop_by_hop,
};
use crate::kubeconfig::{client_from_kubeconfig, write_kubeconfig};

/// A plain-HTTP proxy on 127.0.0.1 in front of an [`ApiServer`]: clients use
/// [`FaultProxy::kubeconfig_path`] (no TLS, no credentials) and the proxy forwards over HTTPS
/// with the admin's client certificate. Response bodies stream frame by frame, so watches work.
/// Dropping the proxy closes its listener and every connection through it.
pub struct FaultProxy {
    url: String,
    kubeconfig: PathBuf,
    state: Arc<State>,
    // Dropping the sender tells the accept loop and every connection to stop.
    _shutdown: watch::Sender<()>,
}

struct State {
    upstream: String,
    http: HttpsClient,
    counts: Mutex<ProxyCounts>,
    /// Requests left to fail, and the status to fail them with.
    failures: Mutex<(usize, u16)>,
    stall_millis: AtomicU64,
    /// Bumped by `drop_watches`; every watch stream ends when it changes.
    watch_generation: watch::Sender<u64>,
}

impl FaultProxy {
    /// Starts a proxy on a free port of 127.0.0.1 in front of `upstream`.
    pub async fn start(upstream: &ApiServer) -> Result<FaultProxy, TestEnvError> {
        let (listener, port) = bind("fault proxy").await?;
        let url = format!("http://127.0.0.1:{port}");
        let kubeconfig = upstream.dir().join(format!("proxy-{port}.kubeconfig"));
        write_kubeconfig(&kubeconfig, upstream.name(), &url, None)?;
        let state = Arc::new(State {
            upstream: upstream.url().to_string(),
            http: upstream.http().clone(),
            counts: Mutex::new(ProxyCounts::default()),
            failures: Mutex::new((0, 500)),
            stall_millis: AtomicU64::new(0),
            watch_generation: watch::Sender::new(0),
        });
        let (shutdown, shutdown_rx) = watch::channel(());
        let handler = Arc::clone(&state);
        tokio::spawn(serve(
            listener,
            "fault proxy",
            shutdown_rx,
            move |request| handle(Arc::clone(&handler), request),
        ));
        tracing::debug!(%url, upstream = upstream.url(), "fault proxy started");
        Ok(FaultProxy {
            url,
            kubeconfig,
            state,
            _shutdown: shutdown,
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A kubeconfig pointing at the proxy; its context is named after the upstream cluster.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// A client through the proxy.
    pub async fn client(&self) -> Result<kube::Client, TestEnvError> {
        client_from_kubeconfig(&self.kubeconfig).await
    }

    /// Aborts every watch stream in flight now (the connection is cut mid-body, as when an
    /// API server or load balancer goes away). Later watches are not affected.
    pub fn drop_watches(&self) {
        self.state
            .watch_generation
            .send_modify(|generation| *generation += 1);
    }

    /// Answers the next `n` requests (watches included) with `status` and a Kubernetes
    /// `Status` body, without forwarding them; 429 also carries `Retry-After: 1`.
    pub fn fail_next(&self, n: usize, status: u16) {
        *lock(&self.state.failures) = (n, status);
    }

    /// Holds every new request for `d` before handling it, until called again
    /// (`Duration::ZERO` turns it off).
    pub fn stall(&self, d: Duration) {
        let millis = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        self.state.stall_millis.store(millis, Ordering::SeqCst);
    }

    /// What the proxy has seen.
    pub fn requests(&self) -> ProxyCounts {
        *lock(&self.state.counts)
    }

    pub fn reset_counts(&self) {
        *lock(&self.state.counts) = ProxyCounts::default();
    }
}

async fn handle(state: Arc<State>, request: Request<Incoming>) -> Response<BoxBody> {
    let watch = is_watch(request.uri().query());
    lock(&state.counts).record(request.method(), watch);
    // Subscribe before anything waits, so drop_watches also ends a watch still stalled or
    // waiting for its response headers.
    let mut generation = state.watch_generation.subscribe();

    let stall = state.stall_millis.load(Ordering::SeqCst);
    if stall > 0 {
        tokio::time::sleep(Duration::from_millis(stall)).await;
    }
    if let Some(status) = state.take_failure() {
        return status_response(status, "fault injected by switchyard-testenv");
    }

    let (mut parts, body) = request.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
    parts.uri = match format!("{}{path}", state.upstream).parse() {
        Ok(uri) => uri,
        Err(err) => return status_response(400, &format!("bad request URI: {err}")),
    };
    // The client sets Host from the upstream URI.
    parts.headers.remove(header::HOST);
    strip_hop_by_hop(&mut parts.headers);
    let upstream_request = Request::from_parts(parts, body.map_err(BoxError::from).boxed());

    let response = tokio::select! {
        response = state.http.request(upstream_request) => response,
        _ = generation.changed(), if watch => {
            return status_response(503, "watch dropped by switchyard-testenv");
        }
    };
    match response {
        Ok(response) => {
            let (mut parts, body) = response.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            let body = if watch {
                abortable(body, generation)
            } else {
                body.map_err(BoxError::from).boxed()
            };
            Response::from_parts(parts, body)
        }
        Err(err) => status_response(
            502,
            &format!(
                "switchyard-testenv proxy: upstream {}: {err}",
                state.upstream
            ),
        ),
    }
}

impl State {
    fn take_failure(&self) -> Option<u16> {
        let mut failures = lock(&self.failures);
        if failures.0 == 0 {
            return None;
        }
        failures.0 -= 1;
        Some(failures.1)
    }
}

/// Streams `body` frame by frame until `generation` changes, then fails it, which makes
/// hyper cut the connection mid-stream.
fn abortable(mut body: Incoming, mut generation: watch::Receiver<u64>) -> BoxBody {
    let (sender, streamed) = channel_body();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = generation.changed() => {
                    let _ = sender.send(Err("watch dropped by switchyard-testenv".into())).await;
                    return;
                }
                frame = body.frame() => match frame {
                    Some(Ok(frame)) => {
                        if sender.send(Ok(frame)).await.is_err() {
                            return;
                        }
                    }
                    Some(Err(err)) => {
                        let _ = sender.send(Err(err.into())).await;
                        return;
                    }
                    None => return,
                },
                // The client went away: drop the upstream stream too.
                _ = sender.closed() => return,
            }
        }
    });
    streamed
}
