//! The broker benchmark: the kcp-karmada pack run by the broker against two real API servers
//! (`source` and `karmada`, from `switchyard-testenv`), compared with a bare kube-rs client
//! making the same writes.
//!
//! ```sh
//! cargo run --release -p switchyard-bench --bin broker -- [--triggers N] [--workers N]
//!     [--concurrency N] [--timeout-minutes N] [--reload-debounce-ms N]
//! ```
//!
//! Steps, each printing its figures, then a summary table against the targets:
//! 1. a control plane with `source` and `karmada`, the seed CRDs in source and Karmada's
//!    PropagationPolicy and ResourceBinding CRDs in karmada;
//! 2. the world of `switchyard_bench::broker_world` created in source (16 in flight), after
//!    checking with the core's `plan` that every FleetWorkload renders without errors;
//! 3. the broker started, as a child process running `switchyard_kube::run` (this binary with
//!    `--broker-child`), so its peak RSS is its own; the time until every desired object
//!    exists in karmada and every FleetWorkload has `Synced=True`;
//! 4. a resync of the converged system: the writes it makes (target 0);
//! 5. two reloads, each changing the PropagationPolicies of exactly the FleetWorkloads with a
//!    PlacementPolicy (a tenth of them); the time until all of them carry the edit:
//!    - 5a: an annotation inside an `{{#if}}` of the template every trigger renders (the
//!      broker evaluates every trigger of the rule again);
//!    - 5b: after splitting the rule in two by a label (untimed), an annotation in the
//!      template only the second rule, watching the labelled tenth, renders;
//! 6. the floor: on a fresh control plane, the same writes (the plan's merged objects applied,
//!    the finalizer and status of every FleetWorkload) made by a bare client, 16 in flight;
//! 7. the summary.
//!
//! Everything runs on 127.0.0.1; every wait has a deadline and the whole run stops after
//! `--timeout-minutes` (default 15); the control planes and the broker process are killed
//! when they are dropped.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::error::Error;
use std::future::Future;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use kube::Client;
use kube::api::{
    Api, ApiResource, DynamicObject, ListParams, PartialObjectMeta, Patch, PatchParams, PostParams,
};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::{Value, json};
use switchyard_bench::broker_world::{
    self, EDIT_ANNOTATION, EDITED_TEMPLATE, PLACED_EDIT_ANNOTATION, PLACED_RULE_FILE,
    PLACED_TEMPLATE, RULE_FILE,
};
use switchyard_bench::repo_root;
use switchyard_core::evaluate::{CONDITION_SYNCED, LABEL_PACK};
use switchyard_core::plan::{self, Plan};
use switchyard_core::{DesiredObject, ObjectKey, Pack};
use switchyard_kube::apply::field_manager;
use switchyard_kube::config::{BrokerConfig, ClusterConfig};
use switchyard_kube::controller::{Writes, is_subset};
use switchyard_testenv::ControlPlane;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

type BoxError = Box<dyn Error + Send + Sync>;
type Res<T> = Result<T, BoxError>;

const PACK: &str = "kcp-karmada";
const PP_API_VERSION: &str = "policy.karmada.io/v1alpha1";
const MIB: f64 = 1024.0 * 1024.0;
/// Targets of the broker benchmark.
const TARGET_RATIO: f64 = 1.5;
const TARGET_RSS_MIB: f64 = 150.0;
const TARGET_RELOAD_OVERHEAD: Duration = Duration::from_secs(1);
/// How often convergence is checked.
const POLL: Duration = Duration::from_millis(500);
/// The broker is idle when it used at most this many clock ticks (1/100 s) of CPU in each of
/// `QUIET_SECONDS` consecutive seconds and made no write.
const QUIET_TICKS: u64 = 2;
const QUIET_SECONDS: u32 = 3;

fn main() -> Result<(), Box<dyn Error>> {
    let args = Args::parse().map_err(|e| e as Box<dyn Error>)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = match &args.child {
        Some(config) => runtime.block_on(child_main(config)),
        None => runtime.block_on(bench(&args)),
    };
    result.map_err(|e| e as Box<dyn Error>)
}

// ---------------------------------------------------------------------------------------
// Arguments

struct Args {
    triggers: usize,
    workers: usize,
    concurrency: usize,
    timeout: Duration,
    reload_debounce_ms: u64,
    /// Internal: run only the broker, with this configuration file (JSON `BrokerConfig`).
    child: Option<PathBuf>,
}

const USAGE: &str = "usage: broker [--triggers N (10000)] [--workers N (16)] \
[--concurrency N (16)] [--timeout-minutes N (15)] [--reload-debounce-ms N (500)]";

impl Args {
    fn parse() -> Res<Args> {
        let mut args = Args {
            triggers: 10_000,
            workers: 16,
            concurrency: 16,
            timeout: Duration::from_secs(15 * 60),
            reload_debounce_ms: 500,
            child: None,
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            if flag == "-h" || flag == "--help" {
                println!("{USAGE}");
                std::process::exit(0);
            }
            let value = it
                .next()
                .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
            let number = || -> Res<u64> {
                value
                    .parse::<u64>()
                    .map_err(|e| format!("{flag} {value}: {e}").into())
            };
            match flag.as_str() {
                "--triggers" => args.triggers = usize::try_from(number()?)?,
                "--workers" => args.workers = usize::try_from(number()?)?.max(1),
                "--concurrency" => args.concurrency = usize::try_from(number()?)?.max(1),
                "--timeout-minutes" => args.timeout = Duration::from_secs(number()? * 60),
                "--reload-debounce-ms" => args.reload_debounce_ms = number()?,
                "--broker-child" => args.child = Some(PathBuf::from(&value)),
                _ => return Err(format!("unknown flag {flag}\n{USAGE}").into()),
            }
        }
        if args.triggers == 0 {
            return Err("--triggers must be at least 1".into());
        }
        Ok(args)
    }
}

// ---------------------------------------------------------------------------------------
// The broker child process: `switchyard_kube::run` and a line protocol on stdin/stdout.

/// Runs the broker until stdin says `stop` or closes; answers `writes` with the controller's
/// write counters and `resync` by re-queueing every trigger.
async fn child_main(config: &Path) -> Res<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SWITCHYARD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let config: BrokerConfig = serde_json::from_str(&std::fs::read_to_string(config)?)?;
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let broker = tokio::spawn(async move {
        let shutdown = async move {
            let _ = stop_rx.await;
        };
        switchyard_kube::run(config, shutdown, move |handle| {
            let _ = started_tx.send(handle);
        })
        .await
        .map_err(|e| e.to_string())
    });
    let Ok(handle) = started_rx.await else {
        let result = broker.await?;
        return Err(format!("the broker did not start: {result:?}").into());
    };
    let mut out = tokio::io::stdout();
    out.write_all(b"started\n").await?;
    out.flush().await?;
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = lines.next_line().await? {
        let reply = match line.trim() {
            "writes" => {
                let w = handle.controller.writes();
                format!(
                    "writes {} {} {} {}\n",
                    w.applies, w.status, w.deletes, w.finalizers
                )
            }
            "resync" => {
                handle.controller.resync();
                "ok\n".to_string()
            }
            "stop" => break,
            other => format!("error: unknown command `{other}`\n"),
        };
        out.write_all(reply.as_bytes()).await?;
        out.flush().await?;
    }
    let _ = stop_tx.send(());
    broker.await??;
    Ok(())
}

/// The broker child process, seen from the benchmark.
struct BrokerProcess {
    child: Child,
    pid: u32,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl BrokerProcess {
    async fn start(config: &Path) -> Res<BrokerProcess> {
        let mut child = tokio::process::Command::new(std::env::current_exe()?)
            .arg("--broker-child")
            .arg(config)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let pid = child.id().ok_or("the broker process exited at once")?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
        let mut process = BrokerProcess {
            child,
            pid,
            stdin,
            stdout,
        };
        let first = process.read_line(Duration::from_secs(60)).await?;
        if first != "started" {
            return Err(format!("the broker process said `{first}`").into());
        }
        Ok(process)
    }

    async fn read_line(&mut self, timeout: Duration) -> Res<String> {
        match tokio::time::timeout(timeout, self.stdout.next_line()).await {
            Ok(Ok(Some(line))) => Ok(line),
            Ok(Ok(None)) => Err("the broker process exited (see its log above)".into()),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err(format!("the broker process did not answer within {timeout:?}").into()),
        }
    }

    async fn command(&mut self, command: &str) -> Res<String> {
        self.stdin
            .write_all(format!("{command}\n").as_bytes())
            .await?;
        self.stdin.flush().await?;
        self.read_line(Duration::from_secs(30)).await
    }

    async fn writes(&mut self) -> Res<Writes> {
        let line = self.command("writes").await?;
        let numbers: Vec<u64> = line
            .strip_prefix("writes ")
            .ok_or_else(|| format!("unexpected answer `{line}`"))?
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()?;
        match numbers[..] {
            [applies, status, deletes, finalizers] => Ok(Writes {
                applies,
                status,
                deletes,
                finalizers,
            }),
            _ => Err(format!("unexpected answer `{line}`").into()),
        }
    }

    async fn resync(&mut self) -> Res<()> {
        let line = self.command("resync").await?;
        if line == "ok" {
            Ok(())
        } else {
            Err(format!("resync: `{line}`").into())
        }
    }

    /// `VmHWM` of the broker process: its peak resident set, in KiB.
    fn peak_rss_kib(&self) -> Res<u64> {
        self.memory_kib("VmHWM")
    }

    /// A `/proc/PID/status` field of the broker process in kB (`VmHWM`, `VmRSS`).
    fn memory_kib(&self, field: &str) -> Res<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))?;
        let prefix = format!("{field}:");
        let line = status
            .lines()
            .find(|l| l.starts_with(&prefix))
            .ok_or_else(|| format!("no {field} in /proc/PID/status"))?;
        let kib = line
            .trim_start_matches(&prefix)
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()?;
        Ok(kib)
    }

    /// CPU time used by the broker process (user + system), in clock ticks of 1/100 s.
    fn cpu_ticks(&self) -> Res<u64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid))?;
        let after = stat.rsplit_once(')').ok_or("malformed /proc/PID/stat")?.1;
        let fields: Vec<&str> = after.split_whitespace().collect();
        // Fields 14 and 15 of stat(5), counted from the state (field 3).
        let utime: u64 = fields.get(11).ok_or("no utime")?.parse()?;
        let stime: u64 = fields.get(12).ok_or("no stime")?.parse()?;
        Ok(utime + stime)
    }

    /// Waits until the broker is idle (see [`QUIET_TICKS`]); returns how long it was busy
    /// from the call on (the start of the quiet window) and the CPU ticks it used meanwhile.
    async fn wait_quiet(&mut self, deadline: Duration) -> Res<(Duration, u64)> {
        let start = Instant::now();
        let ticks_at_start = self.cpu_ticks()?;
        let mut last_ticks = ticks_at_start;
        let mut last_writes = self.writes().await?;
        let mut quiet = 0;
        let mut busy_until = Duration::ZERO;
        let mut ticks_busy = 0;
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let ticks = self.cpu_ticks()?;
            let writes = self.writes().await?;
            if ticks.saturating_sub(last_ticks) <= QUIET_TICKS && writes == last_writes {
                quiet += 1;
                if quiet >= QUIET_SECONDS {
                    return Ok((busy_until, ticks_busy));
                }
            } else {
                quiet = 0;
                busy_until = start.elapsed();
                ticks_busy = ticks - ticks_at_start;
            }
            last_ticks = ticks;
            last_writes = writes;
            if start.elapsed() > deadline {
                return Err(format!("the broker was still busy after {deadline:?}").into());
            }
        }
    }

    /// Asks the broker to stop (SIGTERM's path: finish in-flight work) and waits, killing it
    /// after 40 s.
    async fn stop(mut self) -> Res<()> {
        let _ = self.stdin.write_all(b"stop\n").await;
        let _ = self.stdin.flush().await;
        match tokio::time::timeout(Duration::from_secs(40), self.child.wait()).await {
            Ok(status) => {
                let status = status?;
                if status.success() {
                    Ok(())
                } else {
                    Err(format!("the broker process exited with {status}").into())
                }
            }
            Err(_) => {
                self.child.kill().await?;
                Err("the broker process did not stop within 40 s; killed".into())
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Kubernetes access for the benchmark itself

/// Discovered resources by (apiVersion, kind): the resource and whether it is namespaced.
type Resources = HashMap<(String, String), (ApiResource, bool)>;

/// A client of one API server with its resources discovered once per kind.
#[derive(Clone)]
struct Cluster {
    client: Client,
    resources: Arc<Mutex<Resources>>,
}

fn is_transient(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => status.code == 429 || status.code >= 500,
        _ => true,
    }
}

/// Runs `f` again (up to 5 times) while it fails with something that may pass: 429, 5xx,
/// a connection error.
async fn retry<T, F, Fut>(what: &str, mut f: F) -> Res<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut attempt = 0u32;
    loop {
        match f().await {
            Ok(value) => return Ok(value),
            Err(e) if attempt < 4 && is_transient(&e) => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
            }
            Err(e) => return Err(format!("{what}: {e}").into()),
        }
    }
}

fn object_identity(object: &Value) -> Res<(&str, &str, Option<&str>, &str)> {
    let api_version = object["apiVersion"].as_str().ok_or("no apiVersion")?;
    let kind = object["kind"].as_str().ok_or("no kind")?;
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str);
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .ok_or("no metadata.name")?;
    Ok((api_version, kind, namespace, name))
}

impl Cluster {
    fn new(client: Client) -> Cluster {
        Cluster {
            client,
            resources: Arc::default(),
        }
    }

    async fn resource(&self, api_version: &str, kind: &str) -> Res<(ApiResource, bool)> {
        let key = (api_version.to_string(), kind.to_string());
        let cached = self
            .resources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .cloned();
        if let Some(found) = cached {
            return Ok(found);
        }
        let (resource, caps) =
            switchyard_kube::watch::resolve(&self.client, api_version, kind).await?;
        let found = (resource, caps.scope == kube::discovery::Scope::Namespaced);
        self.resources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, found.clone());
        Ok(found)
    }

    async fn api(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Res<Api<DynamicObject>> {
        let (resource, namespaced) = self.resource(api_version, kind).await?;
        Ok(match (namespace, namespaced) {
            (Some(ns), true) => Api::namespaced_with(self.client.clone(), ns, &resource),
            _ => Api::all_with(self.client.clone(), &resource),
        })
    }

    async fn is_namespaced(&self, api_version: &str, kind: &str) -> Res<bool> {
        Ok(self.resource(api_version, kind).await?.1)
    }

    /// POST: creates the object; returns what the server stored.
    async fn create(&self, object: &Value) -> Res<DynamicObject> {
        let (api_version, kind, namespace, name) = object_identity(object)?;
        let api = self.api(api_version, kind, namespace).await?;
        let body: DynamicObject = serde_json::from_value(object.clone())?;
        let params = PostParams::default();
        retry(&format!("create {kind} {name}"), || {
            api.create(&params, &body)
        })
        .await
    }

    /// Server-side apply (forced) as `manager`.
    async fn apply(&self, object: &Value, manager: &str) -> Res<()> {
        let (api_version, kind, namespace, name) = object_identity(object)?;
        let api = self.api(api_version, kind, namespace).await?;
        let params = PatchParams::apply(manager).force();
        let patch = Patch::Apply(object);
        retry(&format!("apply {kind} {name}"), || {
            api.patch(name, &params, &patch)
        })
        .await?;
        Ok(())
    }

    /// What the broker does for a trigger's status: a forced server-side apply of
    /// `{apiVersion, kind, metadata: {name, namespace}, status}` to the status subresource.
    async fn apply_status(&self, key: &ObjectKey, status: &Value, manager: &str) -> Res<()> {
        let api = self
            .api(&key.api_version, &key.kind, key.namespace.as_deref())
            .await?;
        let body = json!({
            "apiVersion": key.api_version,
            "kind": key.kind,
            "metadata": {"name": key.name, "namespace": key.namespace},
            "status": status,
        });
        let params = PatchParams::apply(manager).force();
        let patch = Patch::Apply(&body);
        retry(&format!("status of {key}"), || {
            api.patch_status(&key.name, &params, &patch)
        })
        .await?;
        Ok(())
    }

    /// What the broker does to add its finalizer: a merge patch of the list with the
    /// resourceVersion it saw as precondition.
    async fn add_finalizer(
        &self,
        key: &ObjectKey,
        finalizer: &str,
        resource_version: Option<&str>,
    ) -> Res<()> {
        let api = self
            .api(&key.api_version, &key.kind, key.namespace.as_deref())
            .await?;
        let patch =
            json!({"metadata": {"finalizers": [finalizer], "resourceVersion": resource_version}});
        let params = PatchParams::default();
        let patch = Patch::Merge(&patch);
        retry(&format!("finalizer of {key}"), || {
            api.patch(&key.name, &params, &patch)
        })
        .await?;
        Ok(())
    }

    /// Every object of a kind, in pages of 500, each with its apiVersion and kind.
    async fn list(&self, api_version: &str, kind: &str) -> Res<Vec<Value>> {
        let api = self.api(api_version, kind, None).await?;
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut params = ListParams::default().limit(500);
            if let Some(t) = &token {
                params = params.continue_token(t);
            }
            let page = retry(&format!("list {kind}"), || api.list(&params)).await?;
            for item in page.items {
                let mut object = serde_json::to_value(item)?;
                // Built-in kinds' list items carry no apiVersion and kind.
                object["apiVersion"] = json!(api_version);
                object["kind"] = json!(kind);
                out.push(object);
            }
            token = page.metadata.continue_.filter(|t| !t.is_empty());
            if token.is_none() {
                return Ok(out);
            }
        }
    }

    /// How many objects of a kind exist: a list of one item and the server's
    /// `remainingItemCount` (metadata only, every page, when the server gives no count).
    /// `selector` (a label selector) is only used for small kinds, as the server does not
    /// count selected lists.
    async fn count(&self, api_version: &str, kind: &str, selector: Option<&str>) -> Res<usize> {
        let api = self.api(api_version, kind, None).await?;
        let mut total = 0usize;
        let mut token: Option<String> = None;
        let mut limit = 1;
        loop {
            let mut params = ListParams::default().limit(limit);
            if let Some(s) = selector {
                params = params.labels(s);
            }
            if let Some(t) = &token {
                params = params.continue_token(t);
            }
            let page = retry(&format!("count {kind}"), || api.list_metadata(&params)).await?;
            total += page.items.len();
            if let Some(remaining) = page.metadata.remaining_item_count {
                return Ok(total + usize::try_from(remaining).unwrap_or(0));
            }
            token = page.metadata.continue_.filter(|t| !t.is_empty());
            if token.is_none() {
                return Ok(total);
            }
            limit = 500;
        }
    }

    /// Write requests the API server has answered (POST, PUT, PATCH, APPLY, DELETE), from its
    /// own `apiserver_request_total`, without its lease renewals.
    async fn write_requests(&self) -> Res<u64> {
        let request = http::Request::get("/metrics").body(Vec::new())?;
        let text = self.client.request_text(request).await?;
        let mut total = 0.0;
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
                continue;
            };
            let Some((labels, value)) = rest.rsplit_once("} ") else {
                continue;
            };
            let write = [
                "POST",
                "PUT",
                "PATCH",
                "APPLY",
                "DELETE",
                "DELETECOLLECTION",
            ]
            .iter()
            .any(|verb| labels.contains(&format!("verb=\"{verb}\"")));
            if write && !labels.contains("resource=\"leases\"") {
                total += value.trim().parse::<f64>()?;
            }
        }
        // Counter values are whole numbers.
        Ok(total.round().max(0.0) as u64)
    }
}

// ---------------------------------------------------------------------------------------
// The pack

/// A scratch copy of the repository's pack layout (`packs/kcp-karmada`, `templates/`,
/// `config/crds/`), which the broker watches and the benchmark edits.
struct PackCopy {
    dir: tempfile::TempDir,
}

fn copy_dir(from: &Path, to: &Path) -> Res<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

impl PackCopy {
    fn new() -> Res<PackCopy> {
        let dir = tempfile::Builder::new()
            .prefix("switchyard-bench-pack-")
            .tempdir()?;
        let root = repo_root();
        copy_dir(
            &root.join("rules").join(PACK),
            &dir.path().join("packs").join(PACK),
        )?;
        copy_dir(&root.join("templates"), &dir.path().join("templates"))?;
        copy_dir(&root.join("config/crds"), &dir.path().join("config/crds"))?;
        Ok(PackCopy { dir })
    }

    fn packs(&self) -> PathBuf {
        self.dir.path().join("packs")
    }

    fn file(&self, relative: &str) -> PathBuf {
        self.packs().join(PACK).join(relative)
    }

    /// A copy with these files (relative to the pack folder) written over it, in order.
    fn with(files: &[(&str, &str)]) -> Res<PackCopy> {
        let copy = PackCopy::new()?;
        for (relative, text) in files {
            std::fs::write(copy.file(relative), text)?;
        }
        Ok(copy)
    }

    /// The edited template's text.
    fn edited_template(&self) -> Res<String> {
        let text = std::fs::read_to_string(self.file(EDITED_TEMPLATE))?;
        Ok(broker_world::edit_propagation_policy_template(&text)?)
    }

    fn load(&self) -> Res<Pack> {
        let (_, result) = switchyard_files::load_pack_dir(&self.packs().join(PACK), None, &[])?;
        let errors: Vec<String> = result
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(ToString::to_string)
            .collect();
        match result.pack {
            Some(pack) if errors.is_empty() => Ok(pack),
            _ => Err(format!("the pack does not load:\n{}", errors.join("\n")).into()),
        }
    }
}

fn source_crds() -> Res<Vec<Value>> {
    Ok(switchyard_testenv::read_crds(
        &repo_root().join("config/crds"),
    )?)
}

fn karmada_crds() -> Res<Vec<Value>> {
    let dir = repo_root().join("../shared/crds/karmada");
    let mut crds = Vec::new();
    for file in [
        "policy.karmada.io_propagationpolicies.yaml",
        "work.karmada.io_resourcebindings.yaml",
    ] {
        let path = dir.join(file);
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let documents = switchyard_core::yaml::parse_documents(&text)
            .map_err(|e| format!("{}: {}", path.display(), e.message))?;
        crds.extend(documents.iter().map(|d| d.to_json()));
    }
    Ok(crds)
}

fn synced_true(object: &Value) -> bool {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c["type"] == CONDITION_SYNCED && c["status"] == "True")
        })
}

/// Every FleetWorkload renders outputs, no errors, no conflicts, `Synced=True`.
fn check_plan(plan: &Plan, n: usize) -> Res<()> {
    let errors = plan.error_messages();
    if !errors.is_empty() {
        return Err(format!("the plan has {} errors, first: {}", errors.len(), errors[0]).into());
    }
    if plan.outcomes.len() != n {
        return Err(format!("{} outcomes for {n} FleetWorkloads", plan.outcomes.len()).into());
    }
    for outcome in &plan.outcomes {
        let synced = outcome
            .status
            .as_ref()
            .is_some_and(|s| synced_true(&json!({"status": s})));
        if outcome.desired.is_empty() || !synced {
            return Err(format!(
                "{} renders {} objects, status {:?}",
                outcome.trigger,
                outcome.desired.len(),
                outcome.status
            )
            .into());
        }
    }
    Ok(())
}

/// The objects of `after` that differ from `before`, which must be exactly `expected`
/// PropagationPolicies carrying `annotation`, with no object added or removed.
fn changed_objects<'a>(
    before: &Plan,
    after: &'a Plan,
    annotation: &str,
    expected: usize,
) -> Res<Vec<&'a DesiredObject>> {
    let old: HashMap<&ObjectKey, &Value> =
        before.objects.iter().map(|d| (&d.key, &d.object)).collect();
    let changed: Vec<&DesiredObject> = after
        .objects
        .iter()
        .filter(|d| old.get(&d.key) != Some(&&d.object))
        .collect();
    let annotated = changed
        .iter()
        .filter(|d| {
            d.key.kind == "PropagationPolicy"
                && d.object
                    .pointer("/metadata/annotations")
                    .and_then(|a| a.get(annotation))
                    .is_some()
        })
        .count();
    if changed.len() != expected
        || annotated != expected
        || before.objects.len() != after.objects.len()
    {
        return Err(format!(
            "an edit changes {} objects ({annotated} PropagationPolicies annotated {annotation}), expected the {expected} PropagationPolicies of the FleetWorkloads with a PlacementPolicy",
            changed.len()
        )
        .into());
    }
    Ok(changed)
}

fn by_kind(objects: &[DesiredObject]) -> BTreeMap<(String, String), usize> {
    let mut counts = BTreeMap::new();
    for d in objects {
        *counts
            .entry((d.key.api_version.clone(), d.key.kind.clone()))
            .or_insert(0) += 1;
    }
    counts
}

fn kinds_text(counts: &BTreeMap<(String, String), usize>) -> String {
    counts
        .iter()
        .map(|((_, kind), n)| format!("{} {kind}", int(*n as u64)))
        .collect::<Vec<_>>()
        .join(", ")
}

// ---------------------------------------------------------------------------------------
// Formatting

fn int(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn per_second(count: u64, d: Duration) -> String {
    format!("{:.0}/s", count as f64 / d.as_secs_f64().max(1e-9))
}

fn writes_text(w: &Writes) -> String {
    format!(
        "{} applies, {} status, {} finalizers, {} deletes",
        int(w.applies),
        int(w.status),
        int(w.finalizers),
        int(w.deletes)
    )
}

fn delta(after: &Writes, before: &Writes) -> Writes {
    Writes {
        applies: after.applies - before.applies,
        status: after.status - before.status,
        deletes: after.deletes - before.deletes,
        finalizers: after.finalizers - before.finalizers,
    }
}

fn total(w: &Writes) -> u64 {
    w.applies + w.status + w.deletes + w.finalizers
}

/// The 1-minute load average of the machine (it is shared: other work slows every figure).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".to_string())
}

/// CPU time (clock ticks of 1/100 s, user + system) used so far by this process and its live
/// children: etcd, the API servers and the broker process.
fn tree_cpu_ticks() -> Res<u64> {
    let me = std::process::id().to_string();
    let mut ticks = 0;
    for entry in std::fs::read_dir("/proc")? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        // A process may exit between the listing and the read.
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some((_, after)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = after.split_whitespace().collect();
        if pid == me || fields.get(1) == Some(&me.as_str()) {
            let utime: u64 = fields.get(11).ok_or("no utime")?.parse()?;
            let stime: u64 = fields.get(12).ok_or("no stime")?.parse()?;
            ticks += utime + stime;
        }
    }
    Ok(ticks)
}

fn cpu_secs(ticks: u64) -> String {
    format!("{:.1} s", ticks as f64 / 100.0)
}

fn free_port() -> Res<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

// ---------------------------------------------------------------------------------------
// The benchmark

/// The figures, filled in as the steps run (a step that did not run leaves `None`).
#[derive(Default)]
struct Report {
    triggers: usize,
    desired: usize,
    edited: usize,
    converge: Option<Duration>,
    converge_writes: Option<Writes>,
    verified: Option<String>,
    peak_rss_kib: Option<u64>,
    resync: Option<(Writes, u64)>,
    reload: Option<Duration>,
    reload_writes: Option<Writes>,
    floor: Option<Duration>,
    floor_writes: u64,
    floor_reload: Option<Duration>,
    reload_placed: Option<Duration>,
    reload_placed_writes: Option<Writes>,
    floor_reload_placed: Option<Duration>,
    /// CPU ticks of every process (etcd, API servers, broker, this benchmark) while
    /// converging and during the floor.
    converge_cpu: Option<u64>,
    floor_cpu: Option<u64>,
}

async fn bench(args: &Args) -> Res<()> {
    let mut report = Report {
        triggers: args.triggers,
        ..Report::default()
    };
    println!(
        "switchyard broker benchmark: {} FleetWorkloads, {} broker workers, {} requests in flight for the client side, timeout {} min",
        int(args.triggers as u64),
        args.workers,
        args.concurrency,
        args.timeout.as_secs() / 60
    );
    let result = match tokio::time::timeout(args.timeout, steps(args, &mut report)).await {
        Ok(result) => result,
        Err(_) => Err(format!(
            "the benchmark did not finish within {} min",
            args.timeout.as_secs() / 60
        )
        .into()),
    };
    if let Err(e) = &result {
        println!("\nstopped: {e}");
    }
    print_summary(&report);
    result
}

async fn steps(args: &Args, report: &mut Report) -> Res<()> {
    let n = args.triggers;
    let deadline = args.timeout;

    // The pack, the world and what the core makes of it: as shipped; with the first edit
    // (step 5a); split in two rules (step 5b set-up); and with the second edit (step 5b).
    let packs = PackCopy::new()?;
    let pack = packs.load()?;
    let edited_text = packs.edited_template()?;
    let (general_rule, placed_rule) =
        broker_world::split_rule(&std::fs::read_to_string(packs.file(RULE_FILE))?)?;
    let placed_edited = broker_world::edit_placed_template(&edited_text)?;
    let split_files = [
        (EDITED_TEMPLATE, edited_text.as_str()),
        (RULE_FILE, general_rule.as_str()),
        (PLACED_RULE_FILE, placed_rule.as_str()),
        (PLACED_TEMPLATE, edited_text.as_str()),
    ];
    let edited_pack = PackCopy::with(&split_files[..1])?.load()?;
    let split_pack = PackCopy::with(&split_files)?.load()?;
    let mut split_edited_files = split_files.to_vec();
    split_edited_files.push((PLACED_TEMPLATE, placed_edited.as_str()));
    let split_edited_pack = PackCopy::with(&split_edited_files)?.load()?;

    let mut source_objects = broker_world::fleets();
    source_objects.extend(broker_world::placement_policies());
    let workloads = broker_world::fleet_workloads(n);
    source_objects.extend(workloads.iter().cloned());
    let world = broker_world::memory_world(&source_objects)?;
    let started = Instant::now();
    let plan = plan::plan(&pack, &world, chrono::Utc::now());
    let plan_time = started.elapsed();
    check_plan(&plan, n)?;
    let mut plans = Vec::new();
    for p in [&edited_pack, &split_pack, &split_edited_pack] {
        let other = plan::plan(p, &world, chrono::Utc::now());
        check_plan(&other, n)?;
        plans.push(other);
    }
    let [edited_plan, split_plan, split_edited_plan] =
        <[Plan; 3]>::try_from(plans).map_err(|_| "three plans")?;
    let placed = (0..n).filter(|i| broker_world::is_placed(*i)).count();
    let changed = changed_objects(&plan, &edited_plan, EDIT_ANNOTATION, placed)?;
    let changed_placed = changed_objects(
        &split_plan,
        &split_edited_plan,
        PLACED_EDIT_ANNOTATION,
        placed,
    )?;
    let kinds = by_kind(&plan.objects);
    report.desired = plan.objects.len();
    report.edited = changed.len();
    println!(
        "[plan] the core renders every FleetWorkload without errors: {} desired objects ({}) in {}; each reload edit changes {} of them",
        int(plan.objects.len() as u64),
        kinds_text(&kinds),
        secs(plan_time),
        int(changed.len() as u64)
    );

    // 1. The control plane.
    let started = Instant::now();
    let plane = ControlPlane::start(&["source", "karmada"]).await?;
    let source_server = plane.cluster("source").ok_or("no source cluster")?;
    let karmada_server = plane.cluster("karmada").ok_or("no karmada cluster")?;
    source_server.install_crds(&source_crds()?).await?;
    karmada_server.install_crds(&karmada_crds()?).await?;
    let source = Cluster::new(source_server.client().await?);
    let karmada = Cluster::new(karmada_server.client().await?);
    println!(
        "[1] control plane (etcd, kube-apiserver source and karmada) started and CRDs installed in {}",
        secs(started.elapsed())
    );

    // 2. The source objects.
    let started = Instant::now();
    let created = create_source(&source, &source_objects, args.concurrency).await?;
    let create_time = started.elapsed();
    println!(
        "[2] created {} objects in source ({} namespaces, {} Fleets, {} PlacementPolicies, {} FleetWorkloads) in {} ({}, {} in flight)",
        int(created as u64),
        broker_world::NAMESPACES,
        broker_world::NAMESPACES,
        broker_world::PLACED_NAMESPACES,
        int(n as u64),
        secs(create_time),
        per_second(created as u64, create_time),
        args.concurrency
    );

    // 3. The broker: convergence.
    let health_port = free_port()?;
    let config = BrokerConfig {
        packs: Some(packs.packs()),
        clusters: [
            ("source", source_server.kubeconfig_path()),
            ("karmada", karmada_server.kubeconfig_path()),
        ]
        .iter()
        .map(|(role, kubeconfig)| ClusterConfig {
            role: (*role).to_string(),
            name: None,
            kubeconfig: Some(kubeconfig.to_path_buf()),
            context: None,
            in_cluster: false,
        })
        .collect(),
        // No periodic resync during the run: step 4 triggers one.
        resync_seconds: 3600,
        workers: args.workers,
        health_addr: format!("127.0.0.1:{health_port}"),
        reload_debounce_millis: args.reload_debounce_ms,
        ..BrokerConfig::default()
    };
    let config_path = packs.dir.path().join("broker-config.json");
    std::fs::write(&config_path, serde_json::to_string_pretty(&config)?)?;
    let wire_before = source.write_requests().await? + karmada.write_requests().await?;

    let started = Instant::now();
    let cpu_before = tree_cpu_ticks()?;
    let mut broker = BrokerProcess::start(&config_path).await?;
    let (converge, polls, polling) =
        wait_converged(&mut broker, &source, &karmada, &kinds, n, started, deadline).await?;
    let converge_cpu = tree_cpu_ticks()? - cpu_before;
    let broker_cpu = broker.cpu_ticks()?;
    report.converge_cpu = Some(converge_cpu);
    let writes = broker.writes().await?;
    let wire = source.write_requests().await? + karmada.write_requests().await? - wire_before;
    let rss = broker.peak_rss_kib()?;
    report.converge = Some(converge);
    report.converge_writes = Some(writes);
    report.peak_rss_kib = Some(rss);
    println!(
        "[3] converged in {}: every one of the {} desired objects exists in karmada and all {} FleetWorkloads have Synced=True ({polls} polls every {} ms, {} ms each on average)",
        secs(converge),
        int(plan.objects.len() as u64),
        int(n as u64),
        POLL.as_millis(),
        polling.as_millis() / u128::from(polls.max(1))
    );
    println!(
        "    broker writes: {} ({} in all; the API servers answered {} write requests)",
        writes_text(&writes),
        int(total(&writes)),
        int(wire)
    );
    println!(
        "    applies/s: {} ({} applies / {}); writes/s: {}",
        per_second(writes.applies, converge),
        int(writes.applies),
        secs(converge),
        per_second(total(&writes), converge)
    );
    println!(
        "    CPU: {} for all processes (broker {} = {:.2} ms per FleetWorkload; etcd, API servers and these polls the rest); load average {}",
        cpu_secs(converge_cpu),
        cpu_secs(broker_cpu),
        broker_cpu as f64 * 10.0 / n as f64,
        load_average()
    );
    println!(
        "    broker peak RSS (VmHWM of the broker process): {:.1} MiB",
        rss as f64 * 1024.0 / MIB
    );
    let verified = verify_outputs(&karmada, &plan).await?;
    println!("    check: {verified}");
    report.verified = Some(verified);

    // 4. Resync of a converged system.
    let (settle, _) = broker.wait_quiet(Duration::from_secs(120)).await?;
    if settle > Duration::ZERO {
        println!(
            "[4] (the broker was busy for another {} after convergence; now idle)",
            secs(settle)
        );
    }
    let before = broker.writes().await?;
    let wire_before = source.write_requests().await? + karmada.write_requests().await?;
    broker.resync().await?;
    let (busy, ticks) = broker.wait_quiet(Duration::from_secs(300)).await?;
    let after = broker.writes().await?;
    let wire = source.write_requests().await? + karmada.write_requests().await? - wire_before;
    let resync_writes = delta(&after, &before);
    report.resync = Some((resync_writes, wire));
    println!(
        "[4] resync: every trigger evaluated again; broker busy for about {} ({:.2} s of CPU); writes made: {} ({}); write requests at the API servers: {}",
        secs(busy),
        ticks as f64 / 100.0,
        int(total(&resync_writes)),
        writes_text(&resync_writes),
        int(wire)
    );

    // 5a. Reload: a branch of the template every trigger renders, taken by a tenth of them.
    let a = measure_reload(
        &mut broker,
        &karmada,
        &packs.file(EDITED_TEMPLATE),
        &edited_text,
        EDIT_ANNOTATION,
        changed.len(),
    )
    .await?;
    report.reload = Some(a.time);
    report.reload_writes = Some(a.writes);
    println!(
        "[5a] reload of a template every trigger renders ({EDITED_TEMPLATE}, an annotation inside `{{{{#if self.spec.placementPolicyRef}}}}`): all {} affected PropagationPolicies carry the edit {} after the file was written (reload debounce {} ms)",
        int(changed.len() as u64),
        secs(a.time),
        args.reload_debounce_ms,
    );
    print_reload(&a);
    let verified = verify_outputs(&karmada, &edited_plan).await?;
    println!("     check: {verified}");

    // 5b. Reload: a template only the FleetWorkloads with a PlacementPolicy use. Set-up
    //     (untimed): the rule split in two by the label PLACED_LABEL, the files moved into
    //     place within one reload debounce, so the broker loads them as one change.
    let stage = packs.dir.path().join("stage");
    std::fs::create_dir_all(&stage)?;
    for (relative, text) in &split_files[1..] {
        let staged = stage.join(relative.replace('/', "_"));
        std::fs::write(&staged, text)?;
    }
    let before = broker.writes().await?;
    for (relative, _) in &split_files[1..] {
        std::fs::rename(stage.join(relative.replace('/', "_")), packs.file(relative))?;
    }
    tokio::time::sleep(Duration::from_millis(args.reload_debounce_ms) + Duration::from_secs(1))
        .await;
    broker.wait_quiet(Duration::from_secs(300)).await?;
    let split_writes = delta(&broker.writes().await?, &before);
    let verified = verify_outputs(&karmada, &split_plan).await?;
    println!(
        "[5b] set-up: the rule split in two by the label {} ({PLACED_RULE_FILE} renders its PropagationPolicy from {PLACED_TEMPLATE}); the broker reloaded with {}; check: {verified}",
        broker_world::PLACED_LABEL,
        writes_text(&split_writes)
    );
    let b = measure_reload(
        &mut broker,
        &karmada,
        &packs.file(PLACED_TEMPLATE),
        &placed_edited,
        PLACED_EDIT_ANNOTATION,
        changed_placed.len(),
    )
    .await?;
    report.reload_placed = Some(b.time);
    report.reload_placed_writes = Some(b.writes);
    println!(
        "[5b] reload of a template only the {} FleetWorkloads with a PlacementPolicy render ({PLACED_TEMPLATE}): all {} affected PropagationPolicies carry the edit {} after the file was written",
        int(changed_placed.len() as u64),
        int(changed_placed.len() as u64),
        secs(b.time),
    );
    print_reload(&b);
    let verified = verify_outputs(&karmada, &split_edited_plan).await?;
    println!("     check: {verified}");

    let rss = broker.peak_rss_kib()?;
    report.peak_rss_kib = Some(rss);
    println!(
        "     broker peak RSS over the whole run: {:.1} MiB (resident now: {:.1} MiB)",
        rss as f64 * 1024.0 / MIB,
        broker.memory_kib("VmRSS")? as f64 * 1024.0 / MIB
    );
    broker.stop().await?;
    drop(plane);

    // 6. The floor.
    let (floor, floor_writes, floor_reloads, floor_cpu) =
        floor(args, &plan, &[&changed, &changed_placed], &workloads).await?;
    report.floor_cpu = Some(floor_cpu);
    report.floor = Some(floor);
    report.floor_writes = floor_writes;
    report.floor_reload = floor_reloads.first().copied();
    report.floor_reload_placed = floor_reloads.get(1).copied();
    println!(
        "    broker/floor: {:.2} (convergence {} / floor {})",
        converge.as_secs_f64() / floor.as_secs_f64(),
        secs(converge),
        secs(floor)
    );
    Ok(())
}

/// What one reload did.
struct Reload {
    /// From writing the file until every affected output carries the edit.
    time: Duration,
    /// Until the first one did.
    first: Option<Duration>,
    /// Broker CPU over `time`.
    cpu_ticks: u64,
    /// Writes until the broker was idle again.
    writes: Writes,
    /// Outputs carrying the edit once the broker was idle.
    annotated: usize,
}

/// Writes `text` to `path` (a file of the broker's pack) and waits until `expected`
/// PropagationPolicies carry `annotation` (a metadata watch started before the write), then
/// until the broker is idle.
async fn measure_reload(
    broker: &mut BrokerProcess,
    karmada: &Cluster,
    path: &Path,
    text: &str,
    annotation: &'static str,
    expected: usize,
) -> Res<Reload> {
    let resource = karmada
        .resource(PP_API_VERSION, "PropagationPolicy")
        .await?
        .0;
    let api: Api<PartialObjectMeta<DynamicObject>> =
        Api::all_with(karmada.client.clone(), &resource);
    let (watch_task, mut progress) = watch_annotated(api, annotation);
    let listed = async {
        while !progress.borrow().1 {
            progress.changed().await?;
        }
        Ok::<(), BoxError>(())
    };
    tokio::time::timeout(Duration::from_secs(60), listed)
        .await
        .map_err(|_| "the PropagationPolicy watch did not list within 60 s")??;
    let before = broker.writes().await?;
    let ticks_before = broker.cpu_ticks()?;
    let started = Instant::now();
    std::fs::write(path, text)?;
    let mut first = None;
    let reached = async {
        loop {
            let count = progress.borrow().0;
            if count > 0 && first.is_none() {
                first = Some(started.elapsed());
            }
            if count >= expected {
                return Ok::<Duration, BoxError>(started.elapsed());
            }
            progress.changed().await?;
        }
    };
    let time = tokio::time::timeout(Duration::from_secs(300), reached)
        .await
        .map_err(|_| {
            format!("the edit did not reach the {expected} PropagationPolicies within 300 s")
        })??;
    let cpu_ticks = broker.cpu_ticks()? - ticks_before;
    broker.wait_quiet(Duration::from_secs(300)).await?;
    let writes = delta(&broker.writes().await?, &before);
    let annotated = progress.borrow().0;
    watch_task.abort();
    Ok(Reload {
        time,
        first,
        cpu_ticks,
        writes,
        annotated,
    })
}

fn print_reload(r: &Reload) {
    println!(
        "     the first edited PropagationPolicy appeared after {}; broker CPU until the last one: {}; the reload made {} ({} PropagationPolicies annotated once idle)",
        r.first.map_or_else(|| "-".to_string(), secs),
        cpu_secs(r.cpu_ticks),
        writes_text(&r.writes),
        int(r.annotated as u64)
    );
}

/// Creates the namespaces, then Fleets and PlacementPolicies, then the FleetWorkloads.
async fn create_source(source: &Cluster, objects: &[Value], concurrency: usize) -> Res<usize> {
    let namespaces = broker_world::namespaces();
    for ns in &namespaces {
        source.apply(ns, "switchyard-bench").await?;
    }
    stream::iter(objects.iter().map(|o| source.create(o)))
        .buffer_unordered(concurrency)
        .try_for_each(|_| async { Ok(()) })
        .await?;
    Ok(namespaces.len() + objects.len())
}

/// Polls every [`POLL`] until karmada holds as many objects of each kind as the plan
/// desires and every FleetWorkload has `Synced=True`. Counting is cheap (a list of one object
/// and the server's remaining count); the FleetWorkloads are listed once the counts are
/// complete and either the broker has written as many statuses as there are FleetWorkloads
/// or 2 s have passed since the last such list. A paged list is one snapshot, taken when its
/// first page is served: convergence is the time that list started. Returns that time, the
/// number of polls and the time the polls took.
async fn wait_converged(
    broker: &mut BrokerProcess,
    source: &Cluster,
    karmada: &Cluster,
    kinds: &BTreeMap<(String, String), usize>,
    n: usize,
    started: Instant,
    deadline: Duration,
) -> Res<(Duration, u64, Duration)> {
    let mut interval = tokio::time::interval(POLL);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut polls = 0u64;
    let mut last_print = Instant::now();
    let mut last_full: Option<Instant> = None;
    let mut synced = 0usize;
    let mut polling = Duration::ZERO;
    loop {
        interval.tick().await;
        polls += 1;
        let poll_started = Instant::now();
        let mut complete = true;
        let mut counts = Vec::new();
        for ((api_version, kind), want) in kinds {
            let namespaced = karmada.is_namespaced(api_version, kind).await?;
            let selector = format!("{LABEL_PACK}={PACK}");
            let have = if namespaced {
                karmada.count(api_version, kind, None).await?
            } else {
                karmada.count(api_version, kind, Some(&selector)).await?
            };
            complete &= have >= *want;
            counts.push(format!("{kind} {}/{}", int(have as u64), int(*want as u64)));
        }
        let writes = broker.writes().await?;
        if complete
            && (writes.status >= n as u64
                || last_full.is_none_or(|t| t.elapsed() >= Duration::from_secs(2)))
        {
            last_full = Some(Instant::now());
            let at = started.elapsed();
            let workloads = source
                .list("platform.edge-portal.eu/v1alpha1", "FleetWorkload")
                .await?;
            synced = workloads.iter().filter(|w| synced_true(w)).count();
            polling += poll_started.elapsed();
            if synced >= n {
                return Ok((at, polls, polling));
            }
        } else {
            polling += poll_started.elapsed();
        }
        if last_print.elapsed() >= Duration::from_secs(10) {
            last_print = Instant::now();
            println!(
                "    {:>6.1} s: {}; broker {}{}",
                started.elapsed().as_secs_f64(),
                counts.join(", "),
                writes_text(&writes),
                if last_full.is_some() {
                    format!("; Synced=True {}/{}", int(synced as u64), int(n as u64))
                } else {
                    String::new()
                }
            );
        }
        if started.elapsed() > deadline {
            return Err(format!("not converged after {deadline:?}").into());
        }
    }
}

/// Every desired object exists in karmada with the plan's content (the broker may add
/// nothing the plan does not have, the API server adds defaults): lists every kind once.
async fn verify_outputs(karmada: &Cluster, plan: &Plan) -> Res<String> {
    let mut live: HashMap<(String, String, Option<String>, String), Value> = HashMap::new();
    for (api_version, kind) in by_kind(&plan.objects).keys() {
        for object in karmada.list(api_version, kind).await? {
            let namespace = object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .map(str::to_string);
            let name = object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .ok_or("a listed object without a name")?
                .to_string();
            let key = (api_version.clone(), kind.clone(), namespace, name);
            live.insert(key, object);
        }
    }
    let mut missing = 0;
    let mut different = Vec::new();
    for desired in &plan.objects {
        let key = &desired.key;
        let id = (
            key.api_version.clone(),
            key.kind.clone(),
            key.namespace.clone(),
            key.name.clone(),
        );
        match live.get(&id) {
            None => missing += 1,
            Some(object) if !is_subset(&desired.object, object) => different.push(format!(
                "{key}: {}",
                first_difference(&desired.object, object, "")
            )),
            Some(_) => {}
        }
    }
    if missing == 0 && different.is_empty() {
        Ok(format!(
            "all {} desired objects are in karmada with the rendered content",
            int(plan.objects.len() as u64)
        ))
    } else {
        Ok(format!(
            "MISMATCH: {missing} desired objects missing, {} differ from the render (first: {})",
            different.len(),
            different.first().map_or("-", String::as_str)
        ))
    }
}

/// Where `want` is not contained in `have`: a path and both values.
fn first_difference(want: &Value, have: &Value, path: &str) -> String {
    match (want, have) {
        (Value::Object(w), Value::Object(h)) => {
            for (k, v) in w {
                let inner = format!("{path}/{k}");
                match h.get(k) {
                    Some(hv) if is_subset(v, hv) => {}
                    Some(hv) => return first_difference(v, hv, &inner),
                    None => return format!("{inner} missing (want {v})"),
                }
            }
            format!("{path}: ?")
        }
        (Value::Array(w), Value::Array(h)) if w.len() == h.len() => {
            for (i, (wv, hv)) in w.iter().zip(h).enumerate() {
                if !is_subset(wv, hv) {
                    return first_difference(wv, hv, &format!("{path}/{i}"));
                }
            }
            format!("{path}: ?")
        }
        _ => format!("{path}: want {want}, have {have}"),
    }
}

/// Counts the objects carrying `annotation`, from a metadata watch: (count, initial list done).
fn watch_annotated(
    api: Api<PartialObjectMeta<DynamicObject>>,
    annotation: &'static str,
) -> (
    tokio::task::JoinHandle<()>,
    tokio::sync::watch::Receiver<(usize, bool)>,
) {
    let (tx, rx) = tokio::sync::watch::channel((0usize, false));
    let task = tokio::spawn(async move {
        let events = watcher::watcher(api, watcher::Config::default()).default_backoff();
        let mut events = std::pin::pin!(events);
        let mut annotated: HashSet<String> = HashSet::new();
        let mut listing: HashSet<String> = HashSet::new();
        let mut listed = false;
        let id = |m: &kube::core::ObjectMeta| {
            format!(
                "{}/{}",
                m.namespace.as_deref().unwrap_or_default(),
                m.name.as_deref().unwrap_or_default()
            )
        };
        let has = |m: &kube::core::ObjectMeta| {
            m.annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(annotation))
        };
        while let Some(event) = events.next().await {
            match event {
                Ok(Event::Init) => listing.clear(),
                Ok(Event::InitApply(o)) => {
                    if has(&o.metadata) {
                        listing.insert(id(&o.metadata));
                    }
                }
                Ok(Event::InitDone) => {
                    annotated = std::mem::take(&mut listing);
                    listed = true;
                }
                Ok(Event::Apply(o)) => {
                    if has(&o.metadata) {
                        annotated.insert(id(&o.metadata));
                    } else {
                        annotated.remove(&id(&o.metadata));
                    }
                }
                Ok(Event::Delete(o)) => {
                    annotated.remove(&id(&o.metadata));
                }
                Err(_) => continue,
            }
            let _ = tx.send((annotated.len(), listed));
        }
    });
    (task, rx)
}

/// Step 6: the same writes from a bare client on a fresh control plane. Returns the floor's
/// time, its writes, the time of each reload's applies alone and the CPU of all processes.
async fn floor(
    args: &Args,
    plan: &Plan,
    reloads: &[&[&DesiredObject]],
    workloads: &[Value],
) -> Res<(Duration, u64, Vec<Duration>, u64)> {
    let plane = ControlPlane::start(&["source", "karmada"]).await?;
    let source_server = plane.cluster("source").ok_or("no source cluster")?;
    let karmada_server = plane.cluster("karmada").ok_or("no karmada cluster")?;
    source_server.install_crds(&source_crds()?).await?;
    karmada_server.install_crds(&karmada_crds()?).await?;
    let source = Cluster::new(source_server.client().await?);
    let karmada = Cluster::new(karmada_server.client().await?);
    // Untimed: the FleetWorkloads the status and finalizer writes go to.
    for ns in broker_world::namespaces() {
        source.apply(&ns, "switchyard-bench").await?;
    }
    let created: Vec<DynamicObject> = stream::iter(workloads.iter().map(|o| source.create(o)))
        .buffer_unordered(args.concurrency)
        .try_collect()
        .await?;
    let versions: HashMap<(Option<String>, String), Option<String>> = created
        .into_iter()
        .map(|o| {
            (
                (o.metadata.namespace, o.metadata.name.unwrap_or_default()),
                o.metadata.resource_version,
            )
        })
        .collect();

    // Timed: cluster-scoped outputs (the Namespaces) first, then per trigger its namespaced
    // outputs (each once), its finalizer and its status, `concurrency` requests in flight.
    let manager = field_manager(PACK);
    let mut cluster_scoped = Vec::new();
    let mut namespaced = Vec::new();
    for d in &plan.objects {
        if karmada
            .is_namespaced(&d.key.api_version, &d.key.kind)
            .await?
        {
            namespaced.push(d);
        } else {
            cluster_scoped.push(d);
        }
    }
    let objects: HashMap<&ObjectKey, &DesiredObject> =
        namespaced.iter().map(|d| (&d.key, *d)).collect();
    enum Op<'a> {
        Apply(&'a Value),
        Trigger(&'a ObjectKey, Option<&'a str>, Option<&'a Value>),
    }
    let mut ops: Vec<Op> = Vec::new();
    let mut seen: HashSet<&ObjectKey> = HashSet::new();
    for outcome in &plan.outcomes {
        for d in &outcome.desired {
            if let Some(merged) = objects.get(&d.key)
                && seen.insert(&merged.key)
            {
                ops.push(Op::Apply(&merged.object));
            }
        }
        ops.push(Op::Trigger(
            &outcome.trigger,
            outcome.finalizer.as_deref(),
            outcome.status.as_ref(),
        ));
    }
    let mut writes = (cluster_scoped.len() + seen.len()) as u64;
    for outcome in &plan.outcomes {
        writes += u64::from(outcome.finalizer.is_some()) + u64::from(outcome.status.is_some());
    }
    let wire_before = source.write_requests().await? + karmada.write_requests().await?;
    let cpu_before = tree_cpu_ticks()?;
    let started = Instant::now();
    stream::iter(
        cluster_scoped
            .iter()
            .map(|d| karmada.apply(&d.object, &manager)),
    )
    .buffer_unordered(args.concurrency)
    .try_for_each(|()| async { Ok(()) })
    .await?;
    let source_ref = &source;
    let karmada_ref = &karmada;
    let manager_ref = manager.as_str();
    let versions_ref = &versions;
    stream::iter(ops.into_iter().map(|op| async move {
        match op {
            Op::Apply(object) => karmada_ref.apply(object, manager_ref).await,
            Op::Trigger(key, finalizer, status) => {
                if let Some(f) = finalizer {
                    let version = versions_ref
                        .get(&(key.namespace.clone(), key.name.clone()))
                        .and_then(Option::as_deref);
                    source_ref.add_finalizer(key, f, version).await?;
                }
                if let Some(status) = status {
                    source_ref.apply_status(key, status, manager_ref).await?;
                }
                Ok(())
            }
        }
    }))
    .buffer_unordered(args.concurrency)
    .try_for_each(|()| async { Ok(()) })
    .await?;
    let floor = started.elapsed();
    let floor_cpu = tree_cpu_ticks()? - cpu_before;
    let wire = source.write_requests().await? + karmada.write_requests().await? - wire_before;
    println!(
        "[6] floor (fresh control plane, bare kube-rs client, {} in flight): {} writes ({} applies of the plan's objects, {} finalizer patches, {} status applies) in {} ({}; the API servers answered {} write requests)",
        args.concurrency,
        int(writes),
        int((cluster_scoped.len() + seen.len()) as u64),
        int(plan
            .outcomes
            .iter()
            .filter(|o| o.finalizer.is_some())
            .count() as u64),
        int(plan.outcomes.iter().filter(|o| o.status.is_some()).count() as u64),
        secs(floor),
        per_second(writes, floor),
        int(wire)
    );
    println!(
        "    CPU: {} for all processes (etcd, API servers, this client); load average {}",
        cpu_secs(floor_cpu),
        load_average()
    );

    // Each reload's share: its edited objects alone.
    let mut reload_times = Vec::new();
    for (step, changed) in ["5a", "5b"].iter().zip(reloads) {
        let started = Instant::now();
        stream::iter(changed.iter().map(|d| karmada.apply(&d.object, &manager)))
            .buffer_unordered(args.concurrency)
            .try_for_each(|()| async { Ok(()) })
            .await?;
        let time = started.elapsed();
        println!(
            "    floor of reload {step}: its {} edited PropagationPolicies applied in {}",
            int(changed.len() as u64),
            secs(time)
        );
        reload_times.push(time);
    }
    drop(plane);
    Ok((floor, writes, reload_times, floor_cpu))
}

fn print_summary(report: &Report) {
    let na = || "not measured".to_string();
    let met = |ok: Option<bool>| match ok {
        Some(true) => "met",
        Some(false) => "NOT MET",
        None => "-",
    };
    let mut rows: Vec<[String; 4]> = Vec::new();
    let ratio = match (report.converge, report.floor) {
        (Some(c), Some(f)) => Some(c.as_secs_f64() / f.as_secs_f64()),
        _ => None,
    };
    rows.push([
        format!(
            "convergence ({} FleetWorkloads, {} objects)",
            int(report.triggers as u64),
            int(report.desired as u64)
        ),
        match (report.converge, report.floor, ratio) {
            (Some(c), Some(f), Some(r)) => format!("{} = {r:.2} x floor {}", secs(c), secs(f)),
            (Some(c), _, _) => secs(c),
            _ => na(),
        },
        format!("<= {TARGET_RATIO} x floor"),
        met(ratio.map(|r| r <= TARGET_RATIO)).to_string(),
    ]);
    rows.push([
        "CPU of all processes, converging / floor".to_string(),
        match (report.converge_cpu, report.floor_cpu) {
            (Some(c), Some(f)) => format!(
                "{} / {} = {:.2}",
                cpu_secs(c),
                cpu_secs(f),
                c as f64 / (f as f64).max(1.0)
            ),
            _ => na(),
        },
        "-".to_string(),
        "-".to_string(),
    ]);
    rows.push([
        "convergence check (content = render)".to_string(),
        report.verified.clone().map_or_else(na, |v| {
            if v.starts_with("MISMATCH") {
                "mismatch".to_string()
            } else {
                "equal".to_string()
            }
        }),
        "equal".to_string(),
        met(report.verified.as_ref().map(|v| !v.starts_with("MISMATCH"))).to_string(),
    ]);
    rows.push([
        "applies/s while converging".to_string(),
        match (report.converge, report.converge_writes) {
            (Some(c), Some(w)) => {
                format!("{} ({} applies)", per_second(w.applies, c), int(w.applies))
            }
            _ => na(),
        },
        "-".to_string(),
        "-".to_string(),
    ]);
    rows.push([
        "status writes while converging".to_string(),
        report.converge_writes.map_or_else(na, |w| int(w.status)),
        "-".to_string(),
        "-".to_string(),
    ]);
    rows.push([
        "floor writes/s".to_string(),
        report.floor.map_or_else(na, |f| {
            format!(
                "{} ({} writes)",
                per_second(report.floor_writes, f),
                int(report.floor_writes)
            )
        }),
        "-".to_string(),
        "-".to_string(),
    ]);
    let rss = report.peak_rss_kib.map(|k| k as f64 * 1024.0 / MIB);
    rows.push([
        "broker peak RSS (VmHWM)".to_string(),
        rss.map_or_else(na, |m| format!("{m:.1} MiB")),
        format!("< {TARGET_RSS_MIB} MiB"),
        met(rss.map(|m| m < TARGET_RSS_MIB)).to_string(),
    ]);
    rows.push([
        "writes on resync (broker / wire)".to_string(),
        report.resync.map_or_else(na, |(w, wire)| {
            format!("{} / {}", int(total(&w)), int(wire))
        }),
        "0".to_string(),
        met(report.resync.map(|(w, wire)| total(&w) == 0 && wire == 0)).to_string(),
    ]);
    let reloads = [
        (
            "reload 5a: shared template",
            report.reload,
            report.reload_writes,
            report.floor_reload,
        ),
        (
            "reload 5b: template of the placed rule",
            report.reload_placed,
            report.reload_placed_writes,
            report.floor_reload_placed,
        ),
    ];
    for (what, time, writes, floor) in reloads {
        let target = floor.map(|f| TARGET_RELOAD_OVERHEAD + f);
        rows.push([
            format!(
                "{what}, to reapplied ({} objects)",
                int(report.edited as u64)
            ),
            time.map_or_else(na, secs),
            target.map_or_else(
                || "< 1 s + floor of those applies".to_string(),
                |t| {
                    format!(
                        "< 1 s + floor {} = {}",
                        secs(t - TARGET_RELOAD_OVERHEAD),
                        secs(t)
                    )
                },
            ),
            met(match (time, target) {
                (Some(r), Some(t)) => Some(r < t),
                _ => None,
            })
            .to_string(),
        ]);
        rows.push([
            format!("{what}, applies made"),
            writes.map_or_else(na, |w| {
                format!(
                    "{} (other writes {})",
                    int(w.applies),
                    int(total(&w) - w.applies)
                )
            }),
            int(report.edited as u64),
            met(writes.map(|w| w.applies == report.edited as u64)).to_string(),
        ]);
    }
    let widths: Vec<usize> = (0..4)
        .map(|c| {
            rows.iter()
                .map(|r| r[c].chars().count())
                .chain([["figure", "value", "target", "result"][c].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: [&str; 4]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("| {} |", padded.join(" | "));
    };
    println!("\nsummary");
    line(["figure", "value", "target", "result"]);
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    println!("|-{}-|", rule.join("-|-"));
    for r in &rows {
        line([&r[0], &r[1], &r[2], &r[3]]);
    }
}
