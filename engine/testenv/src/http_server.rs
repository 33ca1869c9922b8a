//! What the fault proxy and the workspace proxy share as plain-HTTP servers in front of API
//! servers: the listener and its connections, the requests they count, and the plumbing of a
//! proxy (hop-by-hop headers, Kubernetes `Status` answers, bodies streamed from a task).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

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

use crate::error::TestEnvError;
use crate::http_client::{BoxBody, BoxError};

/// Requests seen by a proxy since it started or since its counts were reset, failed ones
/// included.
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

    pub(crate) fn record(&mut self, method: &Method, watch: bool) {
        self.total += 1;
        match *method {
            Method::GET if watch => self.watches += 1,
            Method::GET => self.get += 1,
            Method::POST => self.post += 1,
            Method::PUT => self.put += 1,
            Method::PATCH => self.patch += 1,
            Method::DELETE => self.delete += 1,
            _ => {}
        }
    }
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A listener on a free port of 127.0.0.1, and the port.
pub(crate) async fn bind(what: &str) -> Result<(TcpListener, u16), TestEnvError> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|err| TestEnvError::io(format!("binding the {what}"), err))?;
    let port = listener
        .local_addr()
        .map_err(|err| TestEnvError::io(format!("binding the {what}"), err))?
        .port();
    Ok((listener, port))
}

/// Serves HTTP/1 connections with `handle` until `shutdown`'s sender is dropped, which also
/// closes every open connection.
pub(crate) async fn serve<H, F>(
    listener: TcpListener,
    what: &'static str,
    mut shutdown: watch::Receiver<()>,
    handle: H,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<BoxBody>> + Send + 'static,
{
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(err) => {
                    tracing::warn!(%err, "{what} accept");
                    continue;
                }
            },
            _ = shutdown.changed() => return,
        };
        let handle = handle.clone();
        let mut shutdown = shutdown.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let response = handle(request);
                async move { Ok::<_, std::convert::Infallible>(response.await) }
            });
            let connection = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                result = connection => if let Err(err) = result {
                    tracing::debug!(%err, "{what} connection");
                },
                _ = shutdown.changed() => {}
            }
        });
    }
}

pub(crate) fn is_watch(query: Option<&str>) -> bool {
    query.is_some_and(|query| {
        query
            .split('&')
            .any(|pair| pair == "watch=true" || pair == "watch=1")
    })
}

/// Removes the headers that belong to one connection, not to the message a proxy forwards.
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap) {
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

pub(crate) fn full_body(bytes: impl Into<Bytes>) -> BoxBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

/// A Kubernetes `Status` response, as an API server would send it.
pub(crate) fn status_response(status: u16, message: &str) -> Response<BoxBody> {
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
    let mut response = Response::new(full_body(body.to_string()));
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

/// A body fed frame by frame through the returned sender. It ends when the sender is dropped;
/// sending an error makes hyper cut the connection mid-stream.
pub(crate) fn channel_body() -> (mpsc::Sender<Result<Frame<Bytes>, BoxError>>, BoxBody) {
    let (sender, receiver) = mpsc::channel(16);
    (sender, ChannelBody { receiver }.boxed())
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
    fn counts_by_method_and_writes_add_up() {
        let mut counts = ProxyCounts::default();
        counts.record(&Method::GET, true);
        counts.record(&Method::GET, false);
        counts.record(&Method::PATCH, false);
        counts.record(&Method::HEAD, false);
        assert_eq!(
            counts,
            ProxyCounts {
                total: 4,
                get: 1,
                patch: 1,
                watches: 1,
                ..ProxyCounts::default()
            }
        );
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
