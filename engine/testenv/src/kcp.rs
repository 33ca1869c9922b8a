//! A kcp virtual workspace, emulated over several real API servers: one per workspace, behind
//! one plain-HTTP URL.
//!
//! kcp itself cannot be built here (its Go modules are not served), so code written for kcp is
//! tested against the part of kcp's behaviour it relies on, over real kube-apiservers:
//!
//! - **Identity.** Every object served carries the annotation `kcp.io/cluster: <workspace>`:
//!   single objects, list items, watch event objects and the objects that writes return. kcp
//!   keeps it on each object; here it is added on the way out, and dropped from the body of a
//!   write on the way in, so each server holds its objects as it would without kcp.
//! - **Wildcard reads.** Lists and watches without a workspace (`/api/...`, `/apis/...`) or
//!   under kcp's wildcard `/clusters/*/...` span every workspace: a list merges the items of
//!   every server (in the order the workspaces were given; metadata-only lists too, whose
//!   `items` a server with none sends as `null`), a watch merges their event streams.
//!   Any other request there (a write, a get of one object) is refused with 400: a wildcard
//!   only lists and watches.
//! - **One workspace.** `/clusters/<workspace>/...` reaches that workspace's server alone:
//!   gets, lists, watches and every write (create, update, apply, merge patch, status, delete).
//!   An unknown workspace gets 404.
//! - **Resource versions** are opaque strings, as kcp's are. A list's encodes the version of
//!   every server it read; an object's encodes its own server's version and, in an event of a
//!   merged watch, the progress of every other stream of that watch. A list or watch from an
//!   encoded version starts each server at its own part (`0` for a server it does not name),
//!   so a watch resumed from its last event's version resumes every stream and misses nothing.
//!   Through `/clusters/<workspace>` an encoded version is also decoded in the query's
//!   `resourceVersion`, a JSON body's `metadata.resourceVersion` and a DeleteOptions body's
//!   `preconditions.resourceVersion`, so preconditions hold or fail as on the server. Versions
//!   not encoded here pass through unchanged.
//! - **Watch ends.** A merged watch ends cleanly as soon as one server ends its stream (say,
//!   its `timeoutSeconds` ran out), and the client watches again from its last version. A
//!   server's ERROR event (410 Gone included) reaches the client as the server sent it, and so
//!   does an error answer to the watch request; a stream cut mid-body cuts the client's, as
//!   does [`WorkspaceProxy::drop_watches`].
//! - **Discovery** (`/api`, `/apis`, `/apis/<group>[/<version>]`, `/version`, `/openapi/...`,
//!   anything not under `/api/<version>/` or `/apis/<group>/<version>/`) comes unchanged from
//!   the first workspace's server without a workspace, and from the workspace's own under
//!   `/clusters/<workspace>`: every workspace serves the same kinds, as the workspaces bound to
//!   one APIExport do.
//!
//! - **Endpoint slices and bindings.** For the broker's `kcp` member source: kcp's
//!   `apis.kcp.io/v1alpha1` kinds are served as CRDs of real API servers
//!   ([`endpoint_slice_crd`] in the cluster holding the slice, [`api_binding_crd`] in each
//!   workspace's server), both cluster-scoped with a status the test writes. A test lists its
//!   proxies' URLs in a slice's `status.endpoints[].url`, as kcp's controller does for each
//!   shard, and creates an APIBinding in a workspace's server to make the workspace bind the
//!   export: through the proxy's wildcard it is then seen with its `kcp.io/cluster`, as in
//!   kcp's APIExport virtual workspace. Nothing checks that a binding names a real export.
//!
//! Not emulated: workspace paths (`root:org:ws`; workspaces are named like clusters),
//! APIExports, permission claims and identity hashes, shards, pagination of wildcard lists
//! (`limit` and `continue` are dropped and every item comes in one page; a single workspace's
//! lists page as its server does), streaming lists (`sendInitialEvents`: every server would
//! end its initial events with its own bookmark), one snapshot across workspaces (a wildcard
//! list is one list per server), protobuf, and everything else kcp adds (its own APIs,
//! admission, authorization).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::request::Parts;
use http::{Method, Request, Response, header};
use http_body_util::BodyExt;
use hyper::body::{Frame, Incoming};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use crate::control_plane::ApiServer;
use crate::error::TestEnvError;
use crate::http_client::{BoxBody, BoxError, HttpsClient};
use crate::http_server::{
    ProxyCounts, bind, channel_body, full_body, is_watch, lock, serve, status_response,
    strip_hop_by_hop,
};
use crate::kubeconfig::{client_from_kubeconfig, write_kubeconfig};

/// The annotation kcp puts on every object: its logical cluster (here, its workspace).
pub const CLUSTER_ANNOTATION: &str = "kcp.io/cluster";

/// The APIExportEndpointSlice kind (`apis.kcp.io/v1alpha1`, cluster-scoped) as a CRD whose
/// spec and status keep any field: what the `kcp` member source reads its URLs from.
pub fn endpoint_slice_crd() -> Value {
    kcp_crd("APIExportEndpointSlice", "apiexportendpointslices")
}

/// The APIBinding kind (`apis.kcp.io/v1alpha1`, cluster-scoped) as a CRD whose spec and
/// status keep any field: one in a workspace's server makes it a workspace bound to the
/// export, seen through the proxy's wildcard.
pub fn api_binding_crd() -> Value {
    kcp_crd("APIBinding", "apibindings")
}

fn kcp_crd(kind: &str, plural: &str) -> Value {
    let open = serde_json::json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.apis.kcp.io")},
        "spec": {
            "group": "apis.kcp.io",
            "scope": "Cluster",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind,
                      "listKind": format!("{kind}List")},
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": open, "status": open},
                }},
            }],
        },
    })
}

/// Marks the resource versions this proxy encodes.
const VERSION_PREFIX: &str = "kcp.";

/// A plain-HTTP endpoint on 127.0.0.1 serving several API servers as the workspaces of one
/// kcp virtual workspace (the documentation of `src/kcp.rs` says what is emulated).
///
/// [`WorkspaceProxy::kubeconfig_path`] reaches every workspace at once (wildcard lists and
/// watches); [`WorkspaceProxy::workspace_kubeconfig_path`] reaches one, through
/// `<url>/clusters/<workspace>`. Neither has TLS or credentials: the proxy forwards over HTTPS
/// with the admin's client certificate. Dropping the proxy closes its listener and every
/// connection through it.
pub struct WorkspaceProxy {
    url: String,
    kubeconfig: PathBuf,
    workspace_kubeconfigs: Vec<(String, PathBuf)>,
    state: Arc<State>,
    // Dropping the sender tells the accept loop and every connection to stop.
    _shutdown: watch::Sender<()>,
}

struct State {
    /// In the order given to `start`: the first serves discovery.
    workspaces: Vec<Workspace>,
    counts: Mutex<ProxyCounts>,
    /// Bumped by `drop_watches`; every watch stream ends when it changes.
    watch_generation: watch::Sender<u64>,
}

struct Workspace {
    name: String,
    url: String,
    http: HttpsClient,
}

impl WorkspaceProxy {
    /// Serves `workspaces` (name, API server) behind one URL on a free port of 127.0.0.1.
    /// Names are lowercase letters, digits and `-`, each once.
    pub async fn start(workspaces: &[(&str, &ApiServer)]) -> Result<WorkspaceProxy, TestEnvError> {
        let Some((_, first)) = workspaces.first() else {
            return Err(TestEnvError::WorkspaceProxy("no workspace given".into()));
        };
        for (index, (name, _)) in workspaces.iter().enumerate() {
            let valid = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !workspaces[..index].iter().any(|(other, _)| other == name);
            if !valid {
                return Err(TestEnvError::WorkspaceProxy(format!(
                    "invalid workspace name `{name}`: use lowercase letters, digits and `-`, \
                     each name once"
                )));
            }
        }
        let (listener, port) = bind("workspace proxy").await?;
        let url = format!("http://127.0.0.1:{port}");
        // Kubeconfigs live with the first server's, in the control plane's folder.
        let kubeconfig = first.dir().join(format!("workspaces-{port}.kubeconfig"));
        write_kubeconfig(&kubeconfig, "workspaces", &url, None)?;
        let mut workspace_kubeconfigs = Vec::with_capacity(workspaces.len());
        for (name, _) in workspaces {
            let path = first
                .dir()
                .join(format!("workspaces-{port}-{name}.kubeconfig"));
            write_kubeconfig(&path, name, &format!("{url}/clusters/{name}"), None)?;
            workspace_kubeconfigs.push((name.to_string(), path));
        }
        let state = Arc::new(State {
            workspaces: workspaces
                .iter()
                .map(|(name, server)| Workspace {
                    name: name.to_string(),
                    url: server.url().to_string(),
                    http: server.http().clone(),
                })
                .collect(),
            counts: Mutex::new(ProxyCounts::default()),
            watch_generation: watch::Sender::new(0),
        });
        let (shutdown, shutdown_rx) = watch::channel(());
        let handler = Arc::clone(&state);
        tokio::spawn(serve(
            listener,
            "workspace proxy",
            shutdown_rx,
            move |request| handle(Arc::clone(&handler), request),
        ));
        tracing::debug!(%url, workspaces = workspaces.len(), "workspace proxy started");
        Ok(WorkspaceProxy {
            url,
            kubeconfig,
            workspace_kubeconfigs,
            state,
            _shutdown: shutdown,
        })
    }

    /// `http://127.0.0.1:PORT`: every workspace at once.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `http://127.0.0.1:PORT/clusters/<workspace>`: one workspace.
    pub fn workspace_url(&self, workspace: &str) -> String {
        format!("{}/clusters/{workspace}", self.url)
    }

    /// A kubeconfig whose server is [`WorkspaceProxy::url`] (context `workspaces`).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// A kubeconfig whose server is [`WorkspaceProxy::workspace_url`] (context named after the
    /// workspace), or `None` for a workspace the proxy does not serve.
    pub fn workspace_kubeconfig_path(&self, workspace: &str) -> Option<&Path> {
        self.workspace_kubeconfigs
            .iter()
            .find(|(name, _)| name == workspace)
            .map(|(_, path)| path.as_path())
    }

    /// A client of every workspace at once, from [`WorkspaceProxy::kubeconfig_path`].
    pub async fn client(&self) -> Result<kube::Client, TestEnvError> {
        client_from_kubeconfig(&self.kubeconfig).await
    }

    /// A client of one workspace, from [`WorkspaceProxy::workspace_kubeconfig_path`].
    pub async fn workspace_client(&self, workspace: &str) -> Result<kube::Client, TestEnvError> {
        let Some(path) = self.workspace_kubeconfig_path(workspace) else {
            return Err(TestEnvError::WorkspaceProxy(format!(
                "no workspace `{workspace}`"
            )));
        };
        client_from_kubeconfig(path).await
    }

    /// Cuts every watch stream in flight now mid-body (one workspace's or merged), as when
    /// kcp's front proxy goes away. Later watches are not affected.
    pub fn drop_watches(&self) {
        self.state
            .watch_generation
            .send_modify(|generation| *generation += 1);
    }

    /// The requests clients sent the proxy (not the ones it sent each server).
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
    // Subscribe before anything waits, so drop_watches also ends a watch still waiting for
    // its response headers.
    let generation = state.watch_generation.subscribe();
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_string();
    let query = parts.uri.query().unwrap_or("").to_string();

    let (selected, tail, wildcard) = match route(&path) {
        Route::One(name, tail) => match state.workspaces.iter().find(|ws| ws.name == name) {
            Some(workspace) => (vec![workspace], tail, false),
            None => return status_response(404, &format!("workspace `{name}` not found")),
        },
        Route::All(tail) => (state.workspaces.iter().collect(), tail, true),
    };
    let Some(&first) = selected.first() else {
        return status_response(503, "no workspace");
    };
    let target = classify(tail);
    if target == Target::Discovery {
        return forward(first, &parts, body, tail, &query, false).await;
    }
    let get = parts.method == Method::GET;
    // The wildcard watches collections only; one workspace also watches a single object.
    if get && watch && (target == Target::Collection || !wildcard) {
        return watch_streams(&selected, &parts, tail, &query, generation).await;
    }
    if get && target == Target::Collection {
        return list(&selected, &parts, tail, &query).await;
    }
    if wildcard {
        return status_response(
            400,
            "a request without a workspace (or under /clusters/*) may only list or watch; \
             send it to /clusters/<workspace>",
        );
    }
    forward(first, &parts, body, tail, &query, true).await
}

/// Which workspaces a path reaches, and the path on their servers.
#[derive(Debug, PartialEq, Eq)]
enum Route<'a> {
    /// `/clusters/<workspace>/<tail>`.
    One(&'a str, &'a str),
    /// No workspace, or `/clusters/*/<tail>`.
    All(&'a str),
}

fn route(path: &str) -> Route<'_> {
    let Some(rest) = path.strip_prefix("/clusters/") else {
        return Route::All(path);
    };
    let (workspace, tail) = match rest.find('/') {
        Some(slash) => rest.split_at(slash),
        None => (rest, "/"),
    };
    if workspace == "*" {
        Route::All(tail)
    } else {
        Route::One(workspace, tail)
    }
}

/// What a path names on an API server, the way kube-apiserver reads request paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// Not under `/api/<version>/` or `/apis/<group>/<version>/`.
    Discovery,
    /// A resource, in a namespace or not.
    Collection,
    /// One object or its subresource.
    Object,
}

fn classify(path: &str) -> Target {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let prefix = match segments.first() {
        Some(&"api") => 2,
        Some(&"apis") => 3,
        _ => return Target::Discovery,
    };
    let Some(mut rest) = segments.get(prefix..).filter(|rest| !rest.is_empty()) else {
        return Target::Discovery;
    };
    // `namespaces/<ns>/<resource>...` is in a namespace, but `namespaces/<ns>/status` and
    // `.../finalize` are subresources of the namespace itself.
    if rest.first() == Some(&"namespaces")
        && rest
            .get(2)
            .is_some_and(|third| *third != "status" && *third != "finalize")
    {
        rest = rest.get(2..).unwrap_or_default();
    }
    if rest.len() == 1 {
        Target::Collection
    } else {
        Target::Object
    }
}

/// Sends the client's request, with `query` and `body`, to one workspace's server.
async fn send(
    workspace: &Workspace,
    parts: &Parts,
    tail: &str,
    query: &str,
    body: Bytes,
) -> Result<Response<Incoming>, Response<BoxBody>> {
    let uri = if query.is_empty() {
        format!("{}{tail}", workspace.url)
    } else {
        format!("{}{tail}?{query}", workspace.url)
    };
    let mut request = Request::new(full_body(body));
    *request.method_mut() = parts.method.clone();
    *request.uri_mut() = uri
        .parse()
        .map_err(|err| status_response(400, &format!("bad request URI: {err}")))?;
    let headers = request.headers_mut();
    // Accept (full objects, PartialObjectMetadata, ...) and Content-Type go upstream as sent.
    // The client sets Host from the URI and Content-Length from the body, which may have been
    // rewritten; responses are rewritten too, so they must come uncompressed.
    *headers = parts.headers.clone();
    headers.remove(header::HOST);
    headers.remove(header::CONTENT_LENGTH);
    headers.remove(header::ACCEPT_ENCODING);
    strip_hop_by_hop(headers);
    workspace
        .http
        .request(request)
        .await
        .map_err(|err| status_response(502, &format!("workspace `{}`: {err}", workspace.name)))
}

/// An upstream response passed on as it is, streamed.
fn pass_on(response: Response<Incoming>) -> Response<BoxBody> {
    let (mut parts, body) = response.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    Response::from_parts(parts, body.map_err(BoxError::from).boxed())
}

/// A request to one workspace's server. With `rewrite`, encoded resource versions in the
/// query and body are decoded and the body loses the cluster annotation on the way in, and
/// the objects of the answer are annotated and their resource versions encoded on the way out.
async fn forward(
    workspace: &Workspace,
    parts: &Parts,
    body: Incoming,
    tail: &str,
    query: &str,
    rewrite: bool,
) -> Response<BoxBody> {
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(err) => return status_response(400, &format!("reading the request: {err}")),
    };
    let (query, body) = if rewrite {
        (
            upstream_query(query, &workspace.name, true),
            rewrite_request_body(body, &workspace.name),
        )
    } else {
        (query.to_string(), body)
    };
    let response = match send(workspace, parts, tail, &query, body).await {
        Ok(response) => response,
        Err(response) => return response,
    };
    if !rewrite {
        return pass_on(response);
    }
    let (mut parts, body) = response.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    let bytes = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(err) => {
            return status_response(502, &format!("workspace `{}`: {err}", workspace.name));
        }
    };
    // Not JSON (protobuf, say): passed on as it is.
    let bytes = match serde_json::from_slice::<Value>(&bytes) {
        Ok(mut value) => {
            if value.get("kind").and_then(Value::as_str) != Some("Status") {
                if is_list(&value) {
                    rewrite_list(&mut value, &workspace.name);
                } else {
                    rewrite_object(&mut value, &workspace.name);
                }
            }
            parts.headers.remove(header::CONTENT_LENGTH);
            Bytes::from(value.to_string())
        }
        Err(_) => bytes,
    };
    Response::from_parts(parts, full_body(bytes))
}

/// A list of one workspace or several: the items of every server in one list whose resource
/// version encodes each server's.
async fn list(
    selected: &[&Workspace],
    parts: &Parts,
    tail: &str,
    query: &str,
) -> Response<BoxBody> {
    let single = selected.len() == 1;
    let mut merged: Option<(http::response::Parts, Value)> = None;
    let mut versions = BTreeMap::new();
    for workspace in selected {
        let upstream = upstream_query(query, &workspace.name, single);
        let response = match send(workspace, parts, tail, &upstream, Bytes::new()).await {
            Ok(response) => response,
            Err(response) => return response,
        };
        if !response.status().is_success() {
            return pass_on(response);
        }
        let (mut head, body) = response.into_parts();
        let bytes = match body.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(err) => {
                return status_response(502, &format!("workspace `{}`: {err}", workspace.name));
            }
        };
        let mut list = match serde_json::from_slice::<Value>(&bytes) {
            Ok(list) if is_list(&list) => list,
            _ if single => {
                strip_hop_by_hop(&mut head.headers);
                return Response::from_parts(head, full_body(bytes));
            }
            _ => {
                return status_response(
                    502,
                    &format!(
                        "workspace `{}` answered a list that is not JSON; only JSON lists merge",
                        workspace.name
                    ),
                );
            }
        };
        if let Some(version) = list
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
        {
            versions.insert(workspace.name.clone(), version.to_string());
        }
        rewrite_list(&mut list, &workspace.name);
        match merged.as_mut() {
            None => merged = Some((head, list)),
            Some((_, into)) => {
                for key in ["items", "rows"] {
                    let more = list
                        .get_mut(key)
                        .and_then(Value::as_array_mut)
                        .map(std::mem::take)
                        .unwrap_or_default();
                    if let Some(all) = into.get_mut(key).and_then(Value::as_array_mut) {
                        all.extend(more);
                    }
                }
            }
        }
    }
    let Some((mut head, mut list)) = merged else {
        return status_response(503, "no workspace");
    };
    if let Some(metadata) = list.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert("resourceVersion".into(), Value::String(encode(&versions)));
        if !single {
            // Every item came in this one page.
            metadata.remove("continue");
            metadata.remove("remainingItemCount");
        }
    }
    strip_hop_by_hop(&mut head.headers);
    head.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(head, full_body(list.to_string()))
}

/// A watch of one workspace or several: one upstream watch per server, each from its part of
/// the requested resource version, merged into one stream of events.
async fn watch_streams(
    selected: &[&Workspace],
    parts: &Parts,
    tail: &str,
    query: &str,
    mut generation: watch::Receiver<u64>,
) -> Response<BoxBody> {
    let single = selected.len() == 1;
    // The progress of every stream starts where the client asked.
    let progress: BTreeMap<String, String> = requested_versions(query)
        .into_iter()
        .filter(|(name, _)| selected.iter().any(|ws| ws.name == *name))
        .collect();
    let mut head = None;
    let mut streams = Vec::with_capacity(selected.len());
    for workspace in selected {
        let upstream = upstream_query(query, &workspace.name, single);
        let response = tokio::select! {
            response = send(workspace, parts, tail, &upstream, Bytes::new()) => match response {
                Ok(response) => response,
                Err(response) => return response,
            },
            _ = generation.changed() => {
                return status_response(503, "watch dropped by switchyard-testenv");
            }
        };
        // An error answer (400, 404, 410, ...) reaches the client as the server sent it.
        if !response.status().is_success() {
            return pass_on(response);
        }
        let (parts, body) = response.into_parts();
        head.get_or_insert(parts);
        streams.push((workspace.name.clone(), body));
    }
    let Some(mut head) = head else {
        return status_response(503, "no workspace");
    };
    strip_hop_by_hop(&mut head.headers);
    head.headers.remove(header::CONTENT_LENGTH);
    let (sender, body) = channel_body();
    tokio::spawn(merge(streams, progress, sender, generation));
    Response::from_parts(head, body)
}

/// A line of a watch body, or how the body ended.
enum Line {
    Data(Bytes),
    End,
    Failed(BoxError),
}

/// Passes each upstream's events on, rewritten, in the order they arrive, until one upstream
/// ends, the client goes away or `drop_watches` is called.
async fn merge(
    streams: Vec<(String, Incoming)>,
    mut progress: BTreeMap<String, String>,
    sender: mpsc::Sender<Result<Frame<Bytes>, BoxError>>,
    mut generation: watch::Receiver<u64>,
) {
    let (lines, mut received) = mpsc::channel(64);
    // Dropped when the merged watch ends, which aborts the readers and closes their streams.
    let mut readers = JoinSet::new();
    for (workspace, body) in streams {
        readers.spawn(read_lines(workspace, body, lines.clone()));
    }
    drop(lines);
    loop {
        let (workspace, line) = tokio::select! {
            // A dropped watch passes on no event that arrived after the drop.
            biased;
            _ = generation.changed() => {
                let _ = sender.send(Err("watch dropped by switchyard-testenv".into())).await;
                return;
            }
            // The client went away.
            _ = sender.closed() => return,
            next = received.recv() => match next {
                Some(next) => next,
                None => return,
            },
        };
        match line {
            Line::Data(line) => {
                // Blank lines carry nothing.
                let Ok(mut event) = serde_json::from_slice::<Value>(&line) else {
                    continue;
                };
                rewrite_event(&mut event, &workspace, &mut progress);
                let mut text = event.to_string();
                text.push('\n');
                if sender
                    .send(Ok(Frame::data(Bytes::from(text))))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            // The merged watch ends cleanly with its first stream: the client watches again
            // from the last version it got, which resumes every stream where it was.
            Line::End => return,
            Line::Failed(err) => {
                let _ = sender.send(Err(err)).await;
                return;
            }
        }
    }
}

/// Sends the lines of one upstream watch body (one JSON event each), then how it ended.
async fn read_lines(workspace: String, mut body: Incoming, lines: mpsc::Sender<(String, Line)>) {
    let mut buffer = Vec::new();
    loop {
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            if lines
                .send((workspace.clone(), Line::Data(line.into())))
                .await
                .is_err()
            {
                return;
            }
        }
        let last = match body.frame().await {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    buffer.extend_from_slice(&data);
                }
                continue;
            }
            Some(Err(err)) => Line::Failed(err.into()),
            None => Line::End,
        };
        if !buffer.is_empty() {
            let rest = Bytes::from(std::mem::take(&mut buffer));
            if lines
                .send((workspace.clone(), Line::Data(rest)))
                .await
                .is_err()
            {
                return;
            }
        }
        let _ = lines.send((workspace, last)).await;
        return;
    }
}

/// A watch event on its way out: the object annotated (not a bookmark's, which only carries a
/// version) and its resource version the progress of every stream, this one's included. An
/// ERROR event's Status goes out as the server sent it.
fn rewrite_event(event: &mut Value, workspace: &str, progress: &mut BTreeMap<String, String>) {
    let kind = event
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if kind == "ERROR" {
        return;
    }
    let Some(object) = event.get_mut("object") else {
        return;
    };
    if let Some(version) = resource_version(object) {
        progress.insert(workspace.to_string(), version);
        set_resource_version(object, encode(progress));
    }
    if kind != "BOOKMARK" {
        annotate(object, workspace);
    }
}

/// A list, a Table, or a list of object metadata (whose `items` an API server writes as
/// `null` when there are none).
fn is_list(value: &Value) -> bool {
    value
        .get("items")
        .is_some_and(|items| items.is_array() || items.is_null())
        || value.get("rows").is_some_and(Value::is_array)
}

/// A list of one workspace's server on its way out: every item (or Table row's object)
/// rewritten, the list's version encoded.
fn rewrite_list(list: &mut Value, workspace: &str) {
    if let Some(items) = list.get_mut("items").filter(|items| items.is_null()) {
        *items = Value::Array(Vec::new());
    }
    if let Some(items) = list.get_mut("items").and_then(Value::as_array_mut) {
        for item in items {
            rewrite_object(item, workspace);
        }
    }
    if let Some(rows) = list.get_mut("rows").and_then(Value::as_array_mut) {
        for row in rows {
            if let Some(object) = row.get_mut("object") {
                rewrite_object(object, workspace);
            }
        }
    }
    if let Some(version) = resource_version(list) {
        let versions = BTreeMap::from([(workspace.to_string(), version)]);
        set_resource_version(list, encode(&versions));
    }
}

/// An object of one workspace's server on its way out: annotated, its version encoded.
fn rewrite_object(object: &mut Value, workspace: &str) {
    if object.get("metadata").is_none() {
        return;
    }
    annotate(object, workspace);
    if let Some(version) = resource_version(object) {
        let versions = BTreeMap::from([(workspace.to_string(), version)]);
        set_resource_version(object, encode(&versions));
    }
}

fn annotate(object: &mut Value, workspace: &str) {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if !annotations.is_object() {
        *annotations = Value::Object(Map::new());
    }
    if let Some(annotations) = annotations.as_object_mut() {
        annotations.insert(
            CLUSTER_ANNOTATION.to_string(),
            Value::String(workspace.to_string()),
        );
    }
}

/// A write's JSON body on its way in: encoded resource versions (the object's, a
/// DeleteOptions' precondition) decoded for `workspace`, the cluster annotation dropped.
/// Anything else (YAML, say) goes as it came.
fn rewrite_request_body(body: Bytes, workspace: &str) -> Bytes {
    let Ok(mut value) = serde_json::from_slice::<Value>(&body) else {
        return body;
    };
    let mut changed = false;
    for pointer in [
        "/metadata/resourceVersion",
        "/preconditions/resourceVersion",
    ] {
        let own = value
            .pointer(pointer)
            .and_then(Value::as_str)
            .and_then(decode)
            .and_then(|versions| versions.get(workspace).cloned());
        if let (Some(own), Some(slot)) = (own, value.pointer_mut(pointer)) {
            *slot = Value::String(own);
            changed = true;
        }
    }
    if let Some(annotations) = value
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        changed |= annotations.remove(CLUSTER_ANNOTATION).is_some();
    }
    if changed {
        Bytes::from(value.to_string())
    } else {
        body
    }
}

fn resource_version(object: &Value) -> Option<String> {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|version| !version.is_empty())
        .map(str::to_string)
}

fn set_resource_version(object: &mut Value, version: String) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert("resourceVersion".to_string(), Value::String(version));
    }
}

/// The query for one workspace's server: an encoded `resourceVersion` becomes that server's
/// own part (`0` if it has none); without `paginate` (a list over several servers), `limit`
/// and `continue` are dropped.
fn upstream_query(query: &str, workspace: &str, paginate: bool) -> String {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .filter_map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match key {
                "limit" | "continue" if !paginate => None,
                "resourceVersion" => Some(match decode(&percent_decode(value)) {
                    Some(versions) => format!(
                        "resourceVersion={}",
                        versions.get(workspace).map_or("0", String::as_str)
                    ),
                    None => pair.to_string(),
                }),
                _ => Some(pair.to_string()),
            }
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// The versions the query's `resourceVersion` encodes, if it is one of ours.
fn requested_versions(query: &str) -> BTreeMap<String, String> {
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix("resourceVersion="))
        .and_then(|version| decode(&percent_decode(version)))
        .unwrap_or_default()
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while let Some(&byte) = bytes.get(index) {
        if byte == b'%'
            && let Some(hex) = text.get(index + 1..index + 3)
            && let Ok(decoded) = u8::from_str_radix(hex, 16)
        {
            out.push(decoded);
            index += 3;
            continue;
        }
        out.push(byte);
        index += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `kcp.` and the hex of `ws=rv,ws=rv`: opaque to clients, as kcp's versions are, and safe
/// in a query without escaping.
fn encode(versions: &BTreeMap<String, String>) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let text = versions
        .iter()
        .map(|(workspace, version)| format!("{workspace}={version}"))
        .collect::<Vec<_>>()
        .join(",");
    let mut encoded = String::from(VERSION_PREFIX);
    for byte in text.bytes() {
        encoded.push(char::from(HEX[usize::from(byte >> 4)]));
        encoded.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    encoded
}

/// The versions an encoded resource version holds; `None` for one not encoded here (such as
/// `0` or a server's own), which keeps its meaning.
fn decode(version: &str) -> Option<BTreeMap<String, String>> {
    let hex = version.strip_prefix(VERSION_PREFIX)?;
    let bytes = hex
        .as_bytes()
        .chunks(2)
        .map(|pair| {
            let pair = std::str::from_utf8(pair)
                .ok()
                .filter(|pair| pair.len() == 2)?;
            u8::from_str_radix(pair, 16).ok()
        })
        .collect::<Option<Vec<u8>>>()?;
    let text = String::from_utf8(bytes).ok()?;
    text.split(',')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            pair.split_once('=')
                .map(|(workspace, version)| (workspace.to_string(), version.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn versions_round_trip_and_others_decode_to_nothing() {
        let versions = BTreeMap::from([
            ("ws-a".to_string(), "12".to_string()),
            ("ws-b".to_string(), "7".to_string()),
        ]);
        let encoded = encode(&versions);
        assert!(encoded.starts_with("kcp."));
        assert!(
            encoded
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.')
        );
        assert_eq!(decode(&encoded), Some(versions));
        assert_eq!(decode(&encode(&BTreeMap::new())), Some(BTreeMap::new()));
        for other in ["0", "", "12345", "kcp.zz", "kcp.6", "kcp.61"] {
            assert_eq!(decode(other), None, "{other}");
        }
    }

    #[test]
    fn routes_and_targets() {
        assert_eq!(
            route("/clusters/ws-a/api/v1/namespaces"),
            Route::One("ws-a", "/api/v1/namespaces")
        );
        assert_eq!(route("/clusters/ws-a"), Route::One("ws-a", "/"));
        assert_eq!(route("/clusters/*/api/v1/pods"), Route::All("/api/v1/pods"));
        assert_eq!(
            route("/apis/apps/v1/deployments"),
            Route::All("/apis/apps/v1/deployments")
        );

        for discovery in [
            "/",
            "/api",
            "/api/v1",
            "/apis",
            "/apis/apps",
            "/apis/apps/v1",
        ] {
            assert_eq!(classify(discovery), Target::Discovery, "{discovery}");
        }
        for other in ["/version", "/openapi/v2", "/openapi/v3/apis/apps/v1"] {
            assert_eq!(classify(other), Target::Discovery, "{other}");
        }
        for collection in [
            "/api/v1/pods",
            "/api/v1/namespaces",
            "/api/v1/namespaces/default/configmaps",
            "/apis/apps/v1/deployments",
            "/apis/apps/v1/namespaces/default/deployments",
        ] {
            assert_eq!(classify(collection), Target::Collection, "{collection}");
        }
        for object in [
            "/api/v1/namespaces/default",
            "/api/v1/namespaces/default/status",
            "/api/v1/namespaces/default/finalize",
            "/api/v1/nodes/n1",
            "/api/v1/namespaces/default/configmaps/c1",
            "/apis/g/v1/namespaces/default/things/t1/status",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x.g",
        ] {
            assert_eq!(classify(object), Target::Object, "{object}");
        }
    }

    #[test]
    fn upstream_queries_carry_their_own_version() {
        let encoded = encode(&BTreeMap::from([("ws-a".to_string(), "12".to_string())]));
        let query =
            format!("watch=true&resourceVersion={encoded}&limit=500&allowWatchBookmarks=true");
        assert_eq!(
            upstream_query(&query, "ws-a", false),
            "watch=true&resourceVersion=12&allowWatchBookmarks=true"
        );
        assert_eq!(
            upstream_query(&query, "ws-b", true),
            "watch=true&resourceVersion=0&limit=500&allowWatchBookmarks=true"
        );
        // Versions not encoded here keep their meaning.
        assert_eq!(
            upstream_query(
                "resourceVersion=0&resourceVersionMatch=NotOlderThan",
                "ws-a",
                false
            ),
            "resourceVersion=0&resourceVersionMatch=NotOlderThan"
        );
        assert_eq!(
            requested_versions(&query.replace('.', "%2E")),
            BTreeMap::from([("ws-a".to_string(), "12".to_string())])
        );
    }

    #[test]
    fn watch_events_carry_the_progress_of_every_stream() {
        let mut progress = BTreeMap::from([("ws-b".to_string(), "40".to_string())]);
        let mut event = json!({
            "type": "ADDED",
            "object": { "metadata": { "name": "x", "resourceVersion": "7" } },
        });
        rewrite_event(&mut event, "ws-a", &mut progress);
        let version = event["object"]["metadata"]["resourceVersion"]
            .as_str()
            .unwrap();
        assert_eq!(
            decode(version),
            Some(BTreeMap::from([
                ("ws-a".to_string(), "7".to_string()),
                ("ws-b".to_string(), "40".to_string()),
            ]))
        );
        assert_eq!(
            event["object"]["metadata"]["annotations"][CLUSTER_ANNOTATION],
            "ws-a"
        );

        let mut bookmark = json!({
            "type": "BOOKMARK",
            "object": { "kind": "ConfigMap", "metadata": { "resourceVersion": "41" } },
        });
        rewrite_event(&mut bookmark, "ws-b", &mut progress);
        assert_eq!(progress["ws-b"], "41");
        assert!(bookmark["object"]["metadata"].get("annotations").is_none());

        let gone = json!({
            "type": "ERROR",
            "object": { "kind": "Status", "code": 410, "metadata": {} },
        });
        let mut error = gone.clone();
        rewrite_event(&mut error, "ws-b", &mut progress);
        assert_eq!(error, gone);
        assert_eq!(progress["ws-b"], "41");
    }

    #[test]
    fn request_bodies_get_their_own_versions_and_lose_the_annotation() {
        let encoded = encode(&BTreeMap::from([
            ("ws-a".to_string(), "12".to_string()),
            ("ws-b".to_string(), "9".to_string()),
        ]));
        let body = json!({
            "metadata": {
                "resourceVersion": encoded,
                "annotations": { CLUSTER_ANNOTATION: "ws-a", "keep": "1" },
            },
            "preconditions": { "resourceVersion": encoded },
        });
        let rewritten = rewrite_request_body(Bytes::from(body.to_string()), "ws-b");
        let rewritten: Value = serde_json::from_slice(&rewritten).unwrap();
        assert_eq!(
            rewritten,
            json!({
                "metadata": { "resourceVersion": "9", "annotations": { "keep": "1" } },
                "preconditions": { "resourceVersion": "9" },
            })
        );
        let yaml = Bytes::from_static(b"metadata:\n  name: x\n");
        assert_eq!(rewrite_request_body(yaml.clone(), "ws-a"), yaml);
    }
}
