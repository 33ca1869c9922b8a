//! The broker's HTTP endpoints: probes (`/healthz`, `/livez`, `/readyz`) and metrics
//! (`/metrics`), on addresses of their own as controller-runtime serves them (probes on
//! `:8081`, metrics on `:8080` by default), or both on one address.
//!
//! Anyone who can reach the port can talk to it, so it is bounded: at most
//! [`MAX_CONNECTIONS`] connections at once (a new one past that takes the place of the oldest
//! that has not sent a whole request, or is closed, so the process never runs out of file
//! descriptors and half-sent requests cannot keep a probe out), a request's head must arrive
//! within [`HEADER_TIMEOUT`] and be at most [`MAX_HEAD_BYTES`], and a connection lives at
//! most [`CONNECTION_LIFETIME`]. Probes are answered from memory, so a slow client holds only
//! its own connection. A port that cannot be bound is a start-up error.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::task::{AbortHandle, JoinSet};

use crate::health::Health;

/// Connections served at once; more are closed at once.
pub const MAX_CONNECTIONS: usize = 64;
/// The time a client has to send a request's head.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest a connection is kept (keep-alive included).
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(30);
/// The largest request head read (hyper's smallest buffer limit); a longer one is refused.
pub const MAX_HEAD_BYTES: usize = 8 * 1024;

/// A connection being served: whether it has sent a whole request, and how to end it.
struct Slot {
    answered: Arc<AtomicBool>,
    abort: AbortHandle,
}

/// What an address serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoints {
    pub probes: bool,
    pub metrics: bool,
}

impl Endpoints {
    pub const PROBES: Endpoints = Endpoints {
        probes: true,
        metrics: false,
    };
    pub const METRICS: Endpoints = Endpoints {
        probes: false,
        metrics: true,
    };
    pub const ALL: Endpoints = Endpoints {
        probes: true,
        metrics: true,
    };

    fn paths(self) -> &'static str {
        match (self.probes, self.metrics) {
            (true, true) => "/healthz, /livez, /readyz and /metrics",
            (true, false) => "/healthz, /livez and /readyz",
            _ => "/metrics",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("serving {what} on {addr}: {source}")]
    Bind {
        what: &'static str,
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Binds `addr` now, so a port that is taken stops the start rather than a background task.
pub async fn bind(addr: SocketAddr, endpoints: Endpoints) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind {
            what: endpoints.paths(),
            addr,
            source,
        })
}

/// Serves `endpoints` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    health: Health,
    endpoints: Endpoints,
    shutdown: impl Future<Output = ()>,
) {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "serving {}", endpoints.paths());
    }
    let mut live: VecDeque<Slot> = VecDeque::new();
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(error) => {
                        // Out of file descriptors and the like: wait rather than spin.
                        tracing::warn!(%error, "accepting a connection");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                live.retain(|slot| !slot.abort.is_finished());
                if live.len() >= MAX_CONNECTIONS {
                    // Full: the oldest connection that has not sent a whole request yet
                    // makes room, so a flood of half-sent requests cannot keep a probe out;
                    // when every connection is busy with requests, the new one is closed.
                    match live.iter().position(|slot| !slot.answered.load(Ordering::Relaxed)) {
                        Some(stalled) => {
                            if let Some(slot) = live.remove(stalled) {
                                slot.abort.abort();
                            }
                        }
                        None => {
                            tracing::debug!("too many connections; closing one");
                            continue;
                        }
                    }
                }
                let health = health.clone();
                let answered = Arc::new(AtomicBool::new(false));
                let seen = Arc::clone(&answered);
                let abort = connections.spawn(async move {
                    let service = service_fn(move |request| {
                        seen.store(true, Ordering::Relaxed);
                        let health = health.clone();
                        async move { Ok::<_, Infallible>(respond(&health, endpoints, &request)) }
                    });
                    let connection = http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(HEADER_TIMEOUT)
                        .max_buf_size(MAX_HEAD_BYTES)
                        .serve_connection(TokioIo::new(stream), service);
                    if let Ok(Err(error)) = tokio::time::timeout(CONNECTION_LIFETIME, connection).await {
                        tracing::debug!(%error, "connection");
                    }
                });
                live.push_back(Slot { answered, abort });
            }
            // Reap finished connections so the set does not grow.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    // Probes are short: in-flight ones are dropped rather than waited for.
    connections.shutdown().await;
}

fn respond(
    health: &Health,
    endpoints: Endpoints,
    request: &Request<Incoming>,
) -> Response<Full<Bytes>> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n".into());
    }
    let verbose = request
        .uri()
        .query()
        .unwrap_or("")
        .split('&')
        .any(|pair| pair.split('=').next() == Some("verbose"));
    match request.uri().path() {
        "/healthz" | "/livez" if endpoints.probes => text(StatusCode::OK, "ok".into()),
        "/readyz" if endpoints.probes => {
            let (ready, body) = health.readiness(verbose);
            let status = if ready {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            text(status, body)
        }
        "/metrics" if endpoints.metrics => {
            let mut response = text(StatusCode::OK, health.metrics().render());
            response.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static(crate::metrics::CONTENT_TYPE),
            );
            response
        }
        _ => text(
            StatusCode::NOT_FOUND,
            format!("not found: the paths here are {}\n", endpoints.paths()),
        ),
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Starts a server on a free port; returns its address and the shutdown trigger.
    async fn start(health: Health) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
        start_serving(health, Endpoints::ALL).await
    }

    async fn start_serving(
        health: Health,
        endpoints: Endpoints,
    ) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
        let listener = bind("127.0.0.1:0".parse().unwrap(), endpoints)
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(serve(listener, health, endpoints, async {
            let _ = stopped.await;
        }));
        (addr, stop)
    }

    /// A minimal HTTP/1.1 GET: (status, content type, body).
    async fn get(addr: SocketAddr, path: &str) -> (u16, String, String) {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(
                format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            )
            .await
            .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        let content_type = head
            .lines()
            .find_map(|l| l.strip_prefix("content-type: "))
            .unwrap_or("")
            .to_string();
        (status, content_type, body.to_string())
    }

    fn packs() -> Vec<(String, String)> {
        vec![
            ("city-config".into(), "0.1.0".into()),
            ("kcp-karmada".into(), "0.3.0".into()),
        ]
    }

    #[tokio::test]
    async fn healthz_is_always_ok() {
        let (addr, _stop) = start(Health::new()).await;
        let (status, content_type, body) = get(addr, "/healthz").await;
        assert_eq!((status, body.as_str()), (200, "ok"));
        assert_eq!(content_type, "text/plain; charset=utf-8");
        assert_eq!(get(addr, "/nope").await.0, 404);
    }

    #[tokio::test]
    async fn readyz_waits_for_packs_and_watches() {
        let health = Health::new();
        let (addr, _stop) = start(health.clone()).await;
        let (status, _, body) = get(addr, "/readyz").await;
        assert_eq!(status, 503);
        assert_eq!(
            body,
            "[-]packs not loaded yet\n[+]watches ok (0 synced)\n[+]shutdown ok\n\
             readyz check failed\n"
        );

        health.set_packs(packs());
        let fleet = "source/platform.edge-portal.eu/v1alpha1/FleetWorkload";
        health.set_watch(fleet.into(), false);
        health.set_watch("source/v1/Namespace".into(), true);
        let (status, _, body) = get(addr, "/readyz").await;
        assert_eq!(status, 503);
        assert_eq!(
            body,
            "[+]packs ok (2 packs: city-config 0.1.0, kcp-karmada 0.3.0)\n\
             [-]watch source/platform.edge-portal.eu/v1alpha1/FleetWorkload not synced\n\
             [+]shutdown ok\nreadyz check failed\n"
        );

        health.set_watch(fleet.into(), true);
        let (status, _, body) = get(addr, "/readyz").await;
        assert_eq!(status, 200);
        assert_eq!(
            body,
            "[+]packs ok (2 packs: city-config 0.1.0, kcp-karmada 0.3.0)\n\
             [+]watches ok (2 synced)\n[+]shutdown ok\nreadyz check passed\n"
        );
        let (status, _, body) = get(addr, "/readyz?verbose").await;
        assert_eq!(status, 200);
        assert_eq!(
            body,
            "[+]packs ok (2 packs: city-config 0.1.0, kcp-karmada 0.3.0)\n\
             [+]watch source/platform.edge-portal.eu/v1alpha1/FleetWorkload synced\n\
             [+]watch source/v1/Namespace synced\n[+]shutdown ok\nreadyz check passed\n"
        );

        health.remove_watch(fleet);
        health.set_shutting_down();
        let (status, _, body) = get(addr, "/readyz").await;
        assert_eq!(status, 503);
        assert!(
            body.ends_with(
                "[+]watches ok (1 synced)\n[-]shutdown: the broker is shutting down\n\
                 readyz check failed\n"
            ),
            "{body}"
        );
    }

    #[tokio::test]
    async fn a_failed_reload_keeps_the_previous_packs_ready() {
        let health = Health::new();
        let (addr, _stop) = start(health.clone()).await;
        health.set_reload_error(
            "rules/a/pack.yaml:3:1: error[yaml::syntax]: bad\nrules/a: 1 errors, 0 warnings",
        );
        let (status, _, body) = get(addr, "/readyz").await;
        assert_eq!(status, 503);
        let first = body.lines().next().unwrap();
        assert!(
            first.starts_with("[-]packs not loaded: reload failed at "),
            "{first}"
        );
        assert!(
            first.ends_with(
                ": rules/a/pack.yaml:3:1: error[yaml::syntax]: bad (+1 lines: /readyz?verbose)"
            ),
            "{first}"
        );

        health.set_packs(packs());
        assert_eq!(get(addr, "/readyz").await.0, 200);
        health.set_reload_error(
            "rules/a/pack.yaml:3:1: error[yaml::syntax]: bad\nrules/a: 1 errors, 0 warnings",
        );
        let (status, _, body) = get(addr, "/readyz?verbose").await;
        assert_eq!(status, 200);
        let mut lines = body.lines();
        let first = lines.next().unwrap();
        assert!(
            first.starts_with(
                "[+]packs ok (2 packs: city-config 0.1.0, kcp-karmada 0.3.0; reload failed at "
            ),
            "{first}"
        );
        assert!(
            first.ends_with("(+1 lines below); still running the previous packs)"),
            "{first}"
        );
        assert_eq!(lines.next(), Some("    rules/a: 1 errors, 0 warnings"));

        let (_, content_type, metrics) = get(addr, "/metrics").await;
        assert_eq!(content_type, crate::metrics::CONTENT_TYPE);
        let scrape = parse(&metrics);
        assert_eq!(
            value(&scrape, "switchyard_pack_reload_success", &[]),
            Some(0.0)
        );
        assert_eq!(value(&scrape, "switchyard_packs_loaded", &[]), Some(2.0));
        assert_eq!(
            value(
                &scrape,
                "switchyard_pack_reloads_total",
                &[("result", "failure")]
            ),
            Some(2.0)
        );
    }

    /// The exposition, parsed by a Prometheus text parser.
    fn parse(text: &str) -> prometheus_parse::Scrape {
        let lines = text.lines().map(|l| Ok(l.to_string()));
        prometheus_parse::Scrape::parse(lines).unwrap()
    }

    /// The value of the sample `name` with exactly these labels.
    fn value(
        scrape: &prometheus_parse::Scrape,
        name: &str,
        labels: &[(&str, &str)],
    ) -> Option<f64> {
        scrape
            .samples
            .iter()
            .find(|s| {
                s.metric == name
                    && s.labels.len() == labels.len()
                    && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v))
            })
            .and_then(|s| match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => Some(v),
                _ => None,
            })
    }

    /// controller-runtime's families (so its dashboards work) and Switchyard's own, as a
    /// Prometheus parser reads them.
    #[tokio::test]
    async fn metrics_in_controller_runtimes_families() {
        let health = Health::new();
        health.set_packs(packs());
        let metrics = health.metrics();
        metrics.reconciled(
            "kcp-karmada",
            "success",
            std::time::Duration::from_millis(3),
        );
        metrics.reconciled("kcp-karmada", "error", std::time::Duration::from_millis(40));
        metrics.wrote(
            &metrics.applies_total,
            "kcp-karmada",
            "karmada",
            "Deployment",
        );
        metrics.set_leader("switchyard", true);
        metrics.set_queue(
            3,
            std::time::Duration::from_secs(2),
            std::time::Duration::from_secs(1),
        );
        use crate::queue::QueueObserver;
        metrics.added();
        metrics.started(std::time::Duration::from_millis(5));
        metrics.finished(std::time::Duration::from_millis(7));
        metrics.retried();
        metrics
            .rest_client_requests_total
            .get_or_create(&crate::metrics::RestLabels {
                code: "200".into(),
                method: "PATCH".into(),
                host: "127.0.0.1:6443".into(),
            })
            .inc();
        let (addr, _stop) = start(health.clone()).await;
        let (status, _, body) = get(addr, "/metrics").await;
        assert_eq!(status, 200);
        assert!(body.ends_with("# EOF\n"), "{body}");
        let scrape = parse(&body);
        let reconcile = |result| {
            value(
                &scrape,
                "controller_runtime_reconcile_total",
                &[("controller", "kcp-karmada"), ("result", result)],
            )
        };
        assert_eq!(reconcile("success"), Some(1.0));
        assert_eq!(reconcile("error"), Some(1.0));
        assert_eq!(
            value(
                &scrape,
                "controller_runtime_reconcile_errors_total",
                &[("controller", "kcp-karmada")]
            ),
            Some(1.0)
        );
        let queue = [("name", "switchyard")];
        assert_eq!(value(&scrape, "workqueue_depth", &queue), Some(3.0));
        assert_eq!(value(&scrape, "workqueue_adds_total", &queue), Some(1.0));
        assert_eq!(value(&scrape, "workqueue_retries_total", &queue), Some(1.0));
        assert_eq!(
            value(&scrape, "workqueue_unfinished_work_seconds", &queue),
            Some(2.0)
        );
        assert_eq!(
            value(
                &scrape,
                "workqueue_longest_running_processor_seconds",
                &queue
            ),
            Some(1.0)
        );
        for histogram in [
            "controller_runtime_reconcile_time_seconds",
            "workqueue_queue_duration_seconds",
            "workqueue_work_duration_seconds",
        ] {
            assert!(
                scrape.samples.iter().any(|s| s.metric == histogram
                    && matches!(s.value, prometheus_parse::Value::Histogram(_))),
                "{histogram} missing:\n{body}"
            );
        }
        assert_eq!(
            value(
                &scrape,
                "rest_client_requests_total",
                &[
                    ("code", "200"),
                    ("method", "PATCH"),
                    ("host", "127.0.0.1:6443")
                ]
            ),
            Some(1.0)
        );
        assert_eq!(
            value(
                &scrape,
                "leader_election_master_status",
                &[("name", "switchyard")]
            ),
            Some(1.0)
        );
        assert_eq!(
            value(
                &scrape,
                "switchyard_applies_total",
                &[
                    ("pack", "kcp-karmada"),
                    ("cluster", "karmada"),
                    ("kind", "Deployment")
                ]
            ),
            Some(1.0)
        );
        assert_eq!(
            value(
                &scrape,
                "switchyard_pack_info",
                &[("pack", "city-config"), ("version", "0.1.0")]
            ),
            Some(1.0)
        );
        assert_eq!(
            value(&scrape, "switchyard_pack_reload_success", &[]),
            Some(1.0)
        );
    }

    #[tokio::test]
    async fn serve_ends_on_shutdown_and_a_taken_port_is_an_error() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, Health::new(), Endpoints::ALL, async {
            let _ = stopped.await;
        }));
        stop.send(()).unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(5), server)
            .await
            .unwrap()
            .unwrap();
        let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = taken.local_addr().unwrap();
        let e = bind(addr, Endpoints::PROBES).await.unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("serving /healthz, /livez and /readyz on {addr}: ")),
            "{e}"
        );
    }

    #[tokio::test]
    async fn probes_and_metrics_on_addresses_of_their_own() {
        let (probes, _a) = start_serving(Health::new(), Endpoints::PROBES).await;
        let (metrics, _b) = start_serving(Health::new(), Endpoints::METRICS).await;
        assert_eq!(get(probes, "/healthz").await.0, 200);
        assert_eq!(get(probes, "/metrics").await.0, 404);
        assert_eq!(get(metrics, "/metrics").await.0, 200);
        let (status, _, body) = get(metrics, "/readyz").await;
        assert_eq!(
            (status, body.as_str()),
            (404, "not found: the paths here are /metrics\n")
        );
    }

    /// Many clients that send half a request and wait: the probes keep answering, connections
    /// over the limit are closed as they arrive, and the stalled ones are closed after the
    /// header timeout.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn half_sent_requests_cannot_starve_the_probes() {
        let (addr, _stop) = start(Health::new()).await;
        let mut stalled = Vec::new();
        for _ in 0..1_100 {
            let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await else {
                break;
            };
            let _ = stream
                .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
                .await;
            stalled.push(stream);
        }
        let started = std::time::Instant::now();
        let answered = tokio::time::timeout(std::time::Duration::from_secs(15), async {
            loop {
                // A probe that lands while every slot is held is closed: try again.
                let probe = async {
                    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
                    stream
                        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                        .await
                        .ok()?;
                    let mut response = String::new();
                    stream.read_to_string(&mut response).await.ok()?;
                    response.starts_with("HTTP/1.1 200").then_some(())
                };
                if probe.await.is_some() {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        })
        .await;
        assert!(answered.is_ok(), "/healthz did not answer within 15 s");
        eprintln!(
            "1,100 half-sent requests: /healthz answered after {:?}",
            started.elapsed()
        );
        // The first connections (which got slots) are closed by the header timeout.
        let mut first = stalled.swap_remove(0);
        let mut rest = Vec::new();
        let closed = tokio::time::timeout(
            HEADER_TIMEOUT + std::time::Duration::from_secs(5),
            first.read_to_end(&mut rest),
        )
        .await;
        assert!(
            closed.is_ok(),
            "a stalled connection outlived the header timeout"
        );
    }

    #[tokio::test]
    async fn oversized_request_heads_are_refused() {
        let (addr, _stop) = start(Health::new()).await;
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let huge = format!(
            "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
            "a".repeat(64 * 1024)
        );
        let _ = stream.write_all(huge.as_bytes()).await;
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response).await;
        assert!(
            response.is_empty() || response.starts_with("HTTP/1.1 431"),
            "{response}"
        );
    }
}
