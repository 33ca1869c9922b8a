//! A fault-injecting HTTP proxy in front of one API server.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use crate::control_plane::ApiServer;
use crate::error::TestEnvError;
use crate::http_client::{BoxBody, BoxError, HttpsClient};
use crate::kubeconfig::{client_from_kubeconfig, write_kubeconfig};

/// Requests seen by a [`FaultProxy`] since it started or since [`FaultProxy::reset_counts`],
/// failed ones included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProxyCounts {
    pub total: usize,
    /// GETs that are not watches.
    pub get: usize,
    pub post: usize,
    pub put: usize,
    pub patch: usize,
    pub delete: usize,
    /// Requests with `watch=true` or `watch=1`.
    pub watches: usize,
}

impl ProxyCounts {
    /// POST, PUT, PATCH and DELETE requests.
    pub fn writes(&self) -> usize {
        self.post + self.put + self.patch + self.delete
    }
}

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
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|err| TestEnvError::io("binding the fault proxy", err))?;
        let port = listener
            .local_addr()
            .map_err(|err| TestEnvError::io("binding the fault proxy", err))?
            .port();
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
        tokio::spawn(accept_loop(listener, Arc::clone(&state), shutdown_rx));
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

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn accept_loop(listener: TcpListener, state: Arc<State>, mut shutdown: watch::Receiver<()>) {
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(err) => {
                    tracing::warn!(%err, "fault proxy accept");
                    continue;
                }
            },
            _ = shutdown.changed() => return,
        };
        let state = Arc::clone(&state);
        let mut shutdown = shutdown.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| handle(Arc::clone(&state), request));
            let connection = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                result = connection => if let Err(err) = result {
                    tracing::debug!(%err, "fault proxy connection");
                },
                _ = shutdown.changed() => {}
            }
        });
    }
}

async fn handle(
    state: Arc<State>,
    request: Request<Incoming>,
) -> Result<Response<BoxBody>, Infallible> {
    let watch = is_watch(request.uri().query());
    state.count(request.method(), watch);
    // Subscribe before anything waits, so drop_watches also ends a watch still stalled or
    // waiting for its response headers.
    let mut generation = state.watch_generation.subscribe();

    let stall = state.stall_millis.load(Ordering::SeqCst);
    if stall > 0 {
        tokio::time::sleep(Duration::from_millis(stall)).await;
    }
    if let Some(status) = state.take_failure() {
        return Ok(status_response(
            status,
            "fault injected by switchyard-testenv",
        ));
    }

    let (mut parts, body) = request.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
    parts.uri = match format!("{}{path}", state.upstream).parse() {
        Ok(uri) => uri,
        Err(err) => return Ok(status_response(400, &format!("bad request URI: {err}"))),
    };
    // The client sets Host from the upstream URI.
    parts.headers.remove(header::HOST);
    strip_hop_by_hop(&mut parts.headers);
    let upstream_request = Request::from_parts(parts, body.map_err(BoxError::from).boxed());

    let response = tokio::select! {
        response = state.http.request(upstream_request) => response,
        _ = generation.changed(), if watch => {
            return Ok(status_response(503, "watch dropped by switchyard-testenv"));
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
            Ok(Response::from_parts(parts, body))
        }
        Err(err) => Ok(status_response(
            502,
            &format!(
                "switchyard-testenv proxy: upstream {}: {err}",
                state.upstream
            ),
        )),
    }
}

impl State {
    fn count(&self, method: &Method, watch: bool) {
        let mut counts = lock(&self.counts);
        counts.total += 1;
        match *method {
            Method::GET if watch => counts.watches += 1,
            Method::GET => counts.get += 1,
            Method::POST => counts.post += 1,
            Method::PUT => counts.put += 1,
            Method::PATCH => counts.patch += 1,
            Method::DELETE => counts.delete += 1,
            _ => {}
        }
    }

    fn take_failure(&self) -> Option<u16> {
        let mut failures = lock(&self.failures);
        if failures.0 == 0 {
            return None;
        }
        failures.0 -= 1;
        Some(failures.1)
    }
}

fn is_watch(query: Option<&str>) -> bool {
    query.is_some_and(|query| {
        query
            .split('&')
            .any(|pair| pair == "watch=true" || pair == "watch=1")
    })
}

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    for name in [
        header::CONNECTION,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
        header::TE,
        header::TRAILER,
        header::PROXY_AUTHORIZATION,
        header::PROXY_AUTHENTICATE,
    ] {
        headers.remove(name);
    }
    headers.remove("keep-alive");
}

/// A Kubernetes `Status` response, as an API server would send it.
fn status_response(status: u16, message: &str) -> Response<BoxBody> {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let reason = match code.as_u16() {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        409 => "Conflict",
        410 => "Expired",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "InternalError",
    };
    let mut body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code.as_u16(),
    });
    if code == StatusCode::TOO_MANY_REQUESTS {
        body["details"] = json!({ "retryAfterSeconds": 1 });
    }
    let mut response = Response::new(
        Full::new(Bytes::from(body.to_string()))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = code;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if code == StatusCode::TOO_MANY_REQUESTS {
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

/// Streams `body` frame by frame until `generation` changes, then fails it, which makes
/// hyper cut the connection mid-stream.
fn abortable(mut body: Incoming, mut generation: watch::Receiver<u64>) -> BoxBody {
    let (sender, receiver) = mpsc::channel::<Result<Frame<Bytes>, BoxError>>(16);
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
    ChannelBody { receiver }.boxed()
}

struct ChannelBody {
    receiver: mpsc::Receiver<Result<Frame<Bytes>, BoxError>>,
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.receiver.poll_recv(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognizes_watches() {
        assert!(is_watch(Some("watch=true&resourceVersion=1")));
        assert!(is_watch(Some("labelSelector=a&watch=1")));
        assert!(!is_watch(Some("watch=false")));
        assert!(!is_watch(Some("allowWatchBookmarks=true")));
        assert!(!is_watch(None));
    }

    #[tokio::test]
    async fn fault_responses_are_kubernetes_statuses() {
        let response = status_response(429, "slow down");
        assert_eq!(response.status(), 429);
        assert_eq!(response.headers()[header::RETRY_AFTER], "1");
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["reason"], "TooManyRequests");
        assert_eq!(status["code"], 429);

        let response = status_response(500, "boom");
        assert!(!response.headers().contains_key(header::RETRY_AFTER));
        assert_eq!(response.status(), 500);
    }

    #[test]
    fn writes_add_up() {
        let counts = ProxyCounts {
            total: 9,
            get: 3,
            post: 1,
            put: 1,
            patch: 1,
            delete: 1,
            watches: 2,
        };
        assert_eq!(counts.writes(), 4);
    }
}
