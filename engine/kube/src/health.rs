//! `/healthz`, `/readyz` and `/metrics`: a small HTTP/1.1 server over shared broker state.
//!
//! Readiness means "the broker is doing its job": a pack set is loaded, every watch the
//! controller registered has synced, and it is not shutting down. A failed reload while an
//! older pack set keeps running does not make the broker unready (it still reconciles with
//! the set it has, and taking it out of service would not fix the packs); the `packs` line
//! says so and `switchyard_pack_reload_success` is 0, which is what to alert on.
//!
//! `/readyz` prints one line per check, kube-apiserver style, then `readyz check passed` or
//! `readyz check failed`:
//!
//! ```text
//! [+]packs ok (2 packs: city-config 0.1.0, kcp-karmada 0.3.0)
//! [-]watch source/platform.edge-portal.eu/v1alpha1/FleetWorkload not synced
//! [+]shutdown ok
//! readyz check failed
//! ```
//!
//! Synced watches are summed up in one `[+]watches ok (N synced)` line unless every line is
//! asked for with `/readyz?verbose`, which also prints a failed reload's error in full.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{DateTime, SecondsFormat, Utc};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::packs::PackSet;

/// How many lines of a failed reload's error `/readyz?verbose` prints.
const ERROR_LINES: usize = 40;

/// The broker's health, shared by the controller (which updates it) and the server (which
/// reports it). Cheap to clone.
#[derive(Clone, Default)]
pub struct Health {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    state: Mutex<State>,
    metrics: Metrics,
}

#[derive(Default)]
struct State {
    /// (name, version) of the running packs; `None` until a pack set has loaded.
    packs: Option<Vec<(String, String)>>,
    /// The last reload, when it failed: when, and the error.
    reload_error: Option<(DateTime<Utc>, String)>,
    /// Watch key -> synced.
    watches: BTreeMap<String, bool>,
    shutting_down: bool,
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Health")
            .field("ready", &self.is_ready())
            .finish_non_exhaustive()
    }
}

impl Health {
    pub fn new() -> Self {
        Health::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data; keep serving it.
        self.inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A pack set loaded: it is now the one running, and the last reload succeeded.
    pub fn set_packs(&self, packs: Vec<(String, String)>) {
        let metrics = self.metrics();
        metrics.set("switchyard_pack_reload_success", &[], 1.0);
        metrics.set("switchyard_packs_loaded", &[], packs.len() as f64);
        metrics.clear("switchyard_pack_info");
        for (name, version) in &packs {
            metrics.set(
                "switchyard_pack_info",
                &[("pack", name), ("version", version)],
                1.0,
            );
        }
        metrics.inc("switchyard_pack_reloads_total", &[("result", "success")]);
        let mut state = self.state();
        state.packs = Some(packs);
        state.reload_error = None;
    }

    /// As [`Health::set_packs`], from the set itself.
    pub fn set_pack_set(&self, set: &PackSet) {
        self.set_packs(set.names());
    }

    /// A reload failed: the previous set (if any) keeps running.
    pub fn set_reload_error(&self, error: impl std::fmt::Display) {
        let metrics = self.metrics();
        metrics.set("switchyard_pack_reload_success", &[], 0.0);
        metrics.inc("switchyard_pack_reloads_total", &[("result", "failure")]);
        self.state().reload_error = Some((Utc::now(), error.to_string()));
    }

    /// Registers a watch (or updates it): readiness waits until every registered watch has
    /// synced. `key` names it in `/readyz` (`source/platform.edge-portal.eu/v1alpha1/FleetWorkload`).
    pub fn set_watch(&self, key: String, synced: bool) {
        let mut state = self.state();
        state.watches.insert(key, synced);
        self.update_watch_metrics(&state);
    }

    /// Forgets a watch (its pack was unloaded).
    pub fn remove_watch(&self, key: &str) {
        let mut state = self.state();
        state.watches.remove(key);
        self.update_watch_metrics(&state);
    }

    fn update_watch_metrics(&self, state: &State) {
        let synced = state.watches.values().filter(|s| **s).count();
        let metrics = self.metrics();
        metrics.set("switchyard_watches", &[("state", "synced")], synced as f64);
        metrics.set(
            "switchyard_watches",
            &[("state", "not-synced")],
            (state.watches.len() - synced) as f64,
        );
    }

    /// The broker is stopping: it reports unready so traffic and leadership move on.
    pub fn set_shutting_down(&self) {
        self.state().shutting_down = true;
    }

    pub fn is_ready(&self) -> bool {
        self.readiness(false).0
    }

    /// Whether the broker is ready, and the `/readyz` body.
    pub fn readiness(&self, verbose: bool) -> (bool, String) {
        let state = self.state();
        let mut ready = true;
        let mut body = String::new();
        let failure = state.reload_error.as_ref().map(|(at, error)| {
            let first = error.lines().next().unwrap_or("");
            let more = error.lines().count().saturating_sub(1);
            let more = match (more, verbose) {
                (0, _) => String::new(),
                (n, false) => format!(" (+{n} lines: /readyz?verbose)"),
                (n, true) => format!(" (+{n} lines below)"),
            };
            (
                format!(
                    "reload failed at {}: {first}{more}",
                    at.to_rfc3339_opts(SecondsFormat::Secs, true)
                ),
                error,
            )
        });
        match (&state.packs, &failure) {
            (Some(packs), None) => {
                let _ = writeln!(body, "[+]packs ok ({})", pack_list(packs));
            }
            (Some(packs), Some((failure, _))) => {
                let _ = writeln!(
                    body,
                    "[+]packs ok ({}; {failure}; still running the previous packs)",
                    pack_list(packs)
                );
            }
            (None, None) => {
                ready = false;
                body.push_str("[-]packs not loaded yet\n");
            }
            (None, Some((failure, _))) => {
                ready = false;
                let _ = writeln!(body, "[-]packs not loaded: {failure}");
            }
        }
        if verbose && let Some((_, error)) = &failure {
            for line in error.lines().skip(1).take(ERROR_LINES) {
                let _ = writeln!(body, "    {line}");
            }
        }
        let synced = state.watches.values().filter(|s| **s).count();
        if verbose {
            for (key, is_synced) in &state.watches {
                if *is_synced {
                    let _ = writeln!(body, "[+]watch {key} synced");
                } else {
                    let _ = writeln!(body, "[-]watch {key} not synced");
                }
            }
        } else if synced == state.watches.len() {
            let _ = writeln!(body, "[+]watches ok ({synced} synced)");
        } else {
            for (key, _) in state.watches.iter().filter(|(_, s)| !**s) {
                let _ = writeln!(body, "[-]watch {key} not synced");
            }
        }
        if synced < state.watches.len() {
            ready = false;
        }
        if state.shutting_down {
            ready = false;
            body.push_str("[-]shutdown: the broker is shutting down\n");
        } else {
            body.push_str("[+]shutdown ok\n");
        }
        body.push_str(if ready {
            "readyz check passed\n"
        } else {
            "readyz check failed\n"
        });
        (ready, body)
    }

    /// The metrics served at `/metrics`; the controller adds its own.
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }
}

fn pack_list(packs: &[(String, String)]) -> String {
    let names: Vec<String> = packs.iter().map(|(n, v)| format!("{n} {v}")).collect();
    match packs.len() {
        0 => "0 packs".to_string(),
        1 => format!("1 pack: {}", names.join(", ")),
        n => format!("{n} packs: {}", names.join(", ")),
    }
}

/// Prometheus metrics: counters and gauges with labels, rendered in the text exposition
/// format. A metric's type is fixed by its first use (`inc`/`add`: counter, `set`: gauge).
#[derive(Default)]
pub struct Metrics {
    families: Mutex<BTreeMap<String, Family>>,
}

struct Family {
    kind: MetricKind,
    help: Option<String>,
    /// Sorted label pairs -> value.
    series: BTreeMap<Vec<(String, String)>, f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    Counter,
    Gauge,
}

impl MetricKind {
    fn as_str(self) -> &'static str {
        match self {
            MetricKind::Counter => "counter",
            MetricKind::Gauge => "gauge",
        }
    }
}

impl Metrics {
    fn families(&self) -> MutexGuard<'_, BTreeMap<String, Family>> {
        self.families
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn update(&self, name: &str, kind: MetricKind, labels: &[(&str, &str)], f: impl Fn(&mut f64)) {
        let mut families = self.families();
        let family = families.entry(sanitize(name)).or_insert_with(|| Family {
            kind,
            help: None,
            series: BTreeMap::new(),
        });
        let mut key: Vec<(String, String)> = labels
            .iter()
            .map(|(k, v)| (sanitize(k), (*v).to_string()))
            .collect();
        key.sort();
        f(family.series.entry(key).or_insert(0.0));
    }

    /// Sets the help text shown for a metric (and its type, when it has no value yet).
    pub fn describe(&self, name: &str, kind: MetricKind, help: &str) {
        let mut families = self.families();
        let family = families.entry(sanitize(name)).or_insert_with(|| Family {
            kind,
            help: None,
            series: BTreeMap::new(),
        });
        family.help = Some(help.replace('\\', "\\\\").replace('\n', "\\n"));
    }

    /// Adds 1 to a counter (`switchyard_applies_total`, `[("cluster", "karmada")]`).
    pub fn inc(&self, name: &str, labels: &[(&str, &str)]) {
        self.add(name, labels, 1.0);
    }

    /// Adds `value` to a counter.
    pub fn add(&self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.update(name, MetricKind::Counter, labels, |v| *v += value);
    }

    /// Sets a gauge.
    pub fn set(&self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.update(name, MetricKind::Gauge, labels, |v| *v = value);
    }

    /// The current value of a series, if it was ever set.
    pub fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let mut key: Vec<(String, String)> = labels
            .iter()
            .map(|(k, v)| (sanitize(k), (*v).to_string()))
            .collect();
        key.sort();
        self.families()
            .get(&sanitize(name))
            .and_then(|f| f.series.get(&key).copied())
    }

    /// Removes every series of a metric (a gauge over a set that changed).
    pub fn clear(&self, name: &str) {
        if let Some(family) = self.families().get_mut(&sanitize(name)) {
            family.series.clear();
        }
    }

    /// The Prometheus text exposition format (version 0.0.4).
    pub fn render(&self) -> String {
        let families = self.families();
        let mut out = String::new();
        for (name, family) in families.iter() {
            let help = family.help.clone().unwrap_or_else(|| default_help(name));
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {}", family.kind.as_str());
            for (labels, value) in &family.series {
                out.push_str(name);
                if !labels.is_empty() {
                    let pairs: Vec<String> = labels
                        .iter()
                        .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
                        .collect();
                    let _ = write!(out, "{{{}}}", pairs.join(","));
                }
                let _ = writeln!(out, " {}", format_value(*value));
            }
        }
        out
    }
}

fn default_help(name: &str) -> String {
    match name {
        "switchyard_pack_reload_success" => {
            "Whether the last pack (re)load succeeded (1) or failed (0).".into()
        }
        "switchyard_packs_loaded" => "The number of packs running.".into(),
        "switchyard_pack_info" => "The running packs, with their versions (always 1).".into(),
        "switchyard_pack_reloads_total" => "Pack (re)loads, by result.".into(),
        "switchyard_watches" => "Registered watches, by sync state.".into(),
        _ => name.replace('_', " "),
    }
}

/// Metric and label names allow `[a-zA-Z_:][a-zA-Z0-9_:]*`; anything else becomes `_`.
fn sanitize(name: &str) -> String {
    name.chars()
        .enumerate()
        .map(|(i, c)| {
            if c.is_ascii_alphabetic() || c == '_' || c == ':' || (i > 0 && c.is_ascii_digit()) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn format_value(value: f64) -> String {
    if value.is_nan() {
        "NaN".into()
    } else if value.is_infinite() {
        if value > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        value.to_string()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    #[error("serving health checks on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Serves `/healthz`, `/readyz` and `/metrics` on `addr` until `shutdown` resolves.
pub async fn serve(
    addr: SocketAddr,
    health: Health,
    shutdown: impl Future<Output = ()>,
) -> Result<(), HealthError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| HealthError::Bind { addr, source })?;
    tracing::info!(%addr, "serving /healthz, /readyz and /metrics");
    serve_listener(listener, health, shutdown).await;
    Ok(())
}

/// As [`serve`], on a bound listener (bind port 0 and read its address to find the port).
pub async fn serve_listener(
    listener: TcpListener,
    health: Health,
    shutdown: impl Future<Output = ()>,
) {
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
                        tracing::warn!(%error, "accepting a health check connection");
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let health = health.clone();
                connections.spawn(async move {
                    let service = service_fn(move |request| {
                        let health = health.clone();
                        async move { Ok::<_, Infallible>(respond(&health, &request)) }
                    });
                    if let Err(error) = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await
                    {
                        tracing::debug!(%error, "health check connection");
                    }
                });
            }
            // Reap finished connections so the set does not grow.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    // Probes are short: in-flight ones are dropped rather than waited for.
    connections.shutdown().await;
}

fn respond(health: &Health, request: &Request<Incoming>) -> Response<Full<Bytes>> {
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
        "/healthz" | "/livez" => text(StatusCode::OK, "ok".into()),
        "/readyz" => {
            let (ready, body) = health.readiness(verbose);
            let status = if ready {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            text(status, body)
        }
        "/metrics" => {
            let mut response = text(StatusCode::OK, health.metrics().render());
            response.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            response
        }
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: the paths are /healthz, /readyz and /metrics\n".into(),
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
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(serve_listener(listener, health, async {
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
        assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
        assert!(
            metrics.contains("\nswitchyard_pack_reload_success 0\n"),
            "{metrics}"
        );
        assert!(
            metrics.contains("\nswitchyard_packs_loaded 2\n"),
            "{metrics}"
        );
        assert!(
            metrics.contains("switchyard_pack_reloads_total{result=\"failure\"} 2\n"),
            "{metrics}"
        );
    }

    #[tokio::test]
    async fn metrics_in_prometheus_text_format() {
        let health = Health::new();
        health.set_packs(packs());
        let metrics = health.metrics();
        metrics.describe(
            "switchyard_applies_total",
            MetricKind::Counter,
            "Objects applied.",
        );
        metrics.inc("switchyard_applies_total", &[("cluster", "karmada")]);
        metrics.inc("switchyard_applies_total", &[("cluster", "karmada")]);
        metrics.add(
            "switchyard_applies_total",
            &[("cluster", "say \"hi\"\n")],
            3.0,
        );
        metrics.set("switchyard_queue_depth", &[], 1.5);
        assert_eq!(
            metrics.get("switchyard_applies_total", &[("cluster", "karmada")]),
            Some(2.0)
        );
        let (addr, _stop) = start(health.clone()).await;
        let (status, _, body) = get(addr, "/metrics").await;
        assert_eq!(status, 200);
        let expected = "\
# HELP switchyard_applies_total Objects applied.
# TYPE switchyard_applies_total counter
switchyard_applies_total{cluster=\"karmada\"} 2
switchyard_applies_total{cluster=\"say \\\"hi\\\"\\n\"} 3
# HELP switchyard_pack_info The running packs, with their versions (always 1).
# TYPE switchyard_pack_info gauge
switchyard_pack_info{pack=\"city-config\",version=\"0.1.0\"} 1
switchyard_pack_info{pack=\"kcp-karmada\",version=\"0.3.0\"} 1
# HELP switchyard_pack_reload_success Whether the last pack (re)load succeeded (1) or failed (0).
# TYPE switchyard_pack_reload_success gauge
switchyard_pack_reload_success 1
# HELP switchyard_pack_reloads_total Pack (re)loads, by result.
# TYPE switchyard_pack_reloads_total counter
switchyard_pack_reloads_total{result=\"success\"} 1
# HELP switchyard_packs_loaded The number of packs running.
# TYPE switchyard_packs_loaded gauge
switchyard_packs_loaded 2
# HELP switchyard_queue_depth switchyard queue depth
# TYPE switchyard_queue_depth gauge
switchyard_queue_depth 1.5
";
        assert_eq!(body, expected);
    }

    #[tokio::test]
    async fn serve_ends_on_shutdown() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve_listener(listener, Health::new(), async {
            let _ = stopped.await;
        }));
        stop.send(()).unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(5), server)
            .await
            .unwrap()
            .unwrap();
        let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = taken.local_addr().unwrap();
        let e = serve(addr, Health::new(), async {}).await.unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("serving health checks on {addr}: "))
        );
    }
}
