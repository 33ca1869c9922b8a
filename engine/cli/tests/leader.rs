//! Several `switchyard run` processes with `--leader-elect`, against real API servers: only
//! the leader writes (each broker's requests are counted by a proxy of its own), a
//! follower takes over when the leader is killed (within the lease plus 5 s, without writing
//! again what is unchanged) or stopped (at once: the lease is released).
//!
//! The Lease lives in a cluster of its own (`home`) so that the counted requests are the
//! broker's work alone. Figures are printed; `SWITCHYARD_LEADER_TRIGGERS` sets the number of
//! triggers (default 12).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use switchyard_testenv::{ControlPlane, FaultProxy};

const LEASE_SECONDS: u64 = 6;

fn config_maps() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("", "v1", "ConfigMap"),
        "configmaps",
    )
}

fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let code = response.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, response.split_once("\r\n\r\n")?.1.to_string()))
}

const PACK: &str = r#"apiVersion: switchyard.dev/v1alpha1
kind: RulePack
metadata: {name: mirror, version: 0.1.0}
spec:
  clusters:
    - {name: source, access: [read, writeStatus]}
    - {name: target, access: [read, write]}
  scope:
    - cluster: target
      kinds: [{apiVersion: v1, kind: ConfigMap}]
      namespaces: ["mirror-*"]
"#;

const RULE: &str = r#"apiVersion: switchyard.dev/v1alpha1
kind: Rule
metadata: {name: mirror}
spec:
  watch:
    apiVersion: v1
    kind: ConfigMap
    selector: {matchLabels: {mirror: "yes"}}
  outputs:
    - {name: copy, cluster: target, template: copy.yaml.hbs}
"#;

fn write_pack(dir: &Path) {
    let pack = dir.join("mirror");
    for sub in ["rules", "templates"] {
        std::fs::create_dir_all(pack.join(sub)).unwrap();
    }
    std::fs::write(pack.join("pack.yaml"), PACK).unwrap();
    std::fs::write(pack.join("rules/mirror.yaml"), RULE).unwrap();
    std::fs::write(
        pack.join("templates/copy.yaml.hbs"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: copy-{{self.metadata.name}}\n  namespace: mirror-out\ndata:\n  value: {{self.data.value}}\n",
    )
    .unwrap();
}

/// Three API servers (source, target, home for the Lease) and the pack.
struct Setup {
    plane: ControlPlane,
    source: kube::Client,
    target: kube::Client,
    home: PathBuf,
    packs: tempfile::TempDir,
}

impl Setup {
    async fn start() -> Setup {
        let plane = ControlPlane::start(&["source", "target", "home"])
            .await
            .unwrap();
        let source = plane.cluster("source").unwrap().client().await.unwrap();
        let target = plane.cluster("target").unwrap().client().await.unwrap();
        let home = plane
            .cluster("home")
            .unwrap()
            .kubeconfig_path()
            .to_path_buf();
        // The copies' namespace exists: no output is shared, so the writes of a set of
        // changes are one count, whatever order the triggers are evaluated in.
        let namespaces: Api<DynamicObject> = Api::all_with(
            target.clone(),
            &ApiResource::from_gvk_with_plural(
                &kube::core::GroupVersionKind::gvk("", "v1", "Namespace"),
                "namespaces",
            ),
        );
        let namespace =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "mirror-out"}});
        namespaces
            .patch(
                "mirror-out",
                &PatchParams::apply("e2e-user"),
                &Patch::Apply(&namespace),
            )
            .await
            .unwrap();
        let packs = tempfile::tempdir().unwrap();
        write_pack(packs.path());
        Setup {
            plane,
            source,
            target,
            home,
            packs,
        }
    }

    /// A broker that reaches source and target through counting proxies of its own, so
    /// that its writes are told apart from the others'.
    async fn broker(&self) -> Broker {
        let source_proxy = FaultProxy::start(self.plane.cluster("source").unwrap())
            .await
            .unwrap();
        let target_proxy = FaultProxy::start(self.plane.cluster("target").unwrap())
            .await
            .unwrap();
        let port = support::free_port();
        let log = tempfile::NamedTempFile::new().unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .args(["run", "--packs"])
            .arg(self.packs.path())
            .arg("--cluster")
            .arg(format!(
                "source={}",
                source_proxy.kubeconfig_path().display()
            ))
            .arg("--cluster")
            .arg(format!(
                "target={}",
                target_proxy.kubeconfig_path().display()
            ))
            .arg("--cluster")
            .arg(format!("home={}", self.home.display()))
            .args(["--leader-elect", "--leader-elect-cluster", "home"])
            .args(["--leader-elect-lease-seconds", &LEASE_SECONDS.to_string()])
            .args(["--health-addr", &format!("127.0.0.1:{port}")])
            .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
            .env("SWITCHYARD_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log.reopen().unwrap())
            .spawn()
            .unwrap();
        Broker {
            child,
            port,
            log,
            source_proxy,
            target_proxy,
        }
    }

    async fn put(&self, name: &str, value: &str) {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.source.clone(), "default", &config_maps());
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", "labels": {"mirror": "yes"}},
            "data": {"value": value}});
        api.patch(
            name,
            &PatchParams::apply("e2e-user"),
            &Patch::Apply(&object),
        )
        .await
        .unwrap();
    }

    async fn delete(&self, name: &str) {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.source.clone(), "default", &config_maps());
        let _ = api.delete(name, &DeleteParams::default()).await;
    }

    /// Every copy holds `value(i)` for the triggers `0..n`, and there are no others.
    async fn converged(&self, n: usize, value: impl Fn(usize) -> String) -> Result<(), String> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.target.clone(), "mirror-out", &config_maps());
        let copies = api
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        let copies: Vec<Value> = copies
            .items
            .iter()
            .map(|o| serde_json::to_value(o).unwrap())
            .filter(|o| {
                o["metadata"]["name"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("copy-")
            })
            .collect();
        if copies.len() != n {
            return Err(format!("{} copies, want {n}", copies.len()));
        }
        for i in 0..n {
            let name = format!("copy-t{i}");
            let found = copies
                .iter()
                .find(|o| o["metadata"]["name"] == name)
                .ok_or(format!("{name} missing"))?;
            if found["data"]["value"] != value(i) {
                return Err(format!("{name}: {}", found["data"]));
            }
        }
        Ok(())
    }
}

struct Broker {
    child: Child,
    port: u16,
    log: tempfile::NamedTempFile,
    source_proxy: FaultProxy,
    target_proxy: FaultProxy,
}

impl Broker {
    fn reset_counts(&self) {
        self.source_proxy.reset_counts();
        self.target_proxy.reset_counts();
    }

    /// This broker's writes to source and target since the last reset.
    fn writes(&self) -> usize {
        self.source_proxy.requests().writes() + self.target_proxy.requests().writes()
    }

    /// Whether this broker leads now, from its `/metrics`.
    fn leads(&self) -> Option<bool> {
        let (code, body) = http_get(self.port, "/metrics")?;
        if code != 200 {
            return None;
        }
        body.lines()
            .find(|l| l.starts_with("leader_election_master_status{"))
            .map(|l| l.ends_with(" 1"))
    }

    /// Triggers this broker has evaluated and applied (`controller_runtime_reconcile_total`).
    fn reconciles(&self) -> f64 {
        let Some((200, body)) = http_get(self.port, "/metrics") else {
            panic!("no /metrics from the broker on port {}", self.port);
        };
        body.lines()
            .filter(|l| l.starts_with("controller_runtime_reconcile_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    /// The process's resident memory.
    fn rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    }

    fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    }

    fn logs(&self) -> String {
        let mut logs = String::new();
        let _ = self.log.reopen().unwrap().read_to_string(&mut logs);
        logs
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn eventually<F, Fut>(what: &str, timeout: Duration, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let started = Instant::now();
    loop {
        let last = check().await;
        if last.is_ok() {
            return started.elapsed();
        }
        assert!(started.elapsed() < timeout, "{what}: {last:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The one broker of `brokers` that leads, once exactly one does.
async fn leader(brokers: &[Broker]) -> usize {
    let mut found = 0;
    eventually("one leader", Duration::from_secs(60), || {
        let leading: Vec<usize> = brokers
            .iter()
            .enumerate()
            .filter(|(_, b)| b.leads() == Some(true))
            .map(|(i, _)| i)
            .collect();
        let answered = brokers.iter().all(|b| b.leads().is_some());
        let result = match leading.as_slice() {
            [one] if answered => {
                found = *one;
                Ok(())
            }
            other => Err(format!("leading: {other:?}")),
        };
        async move { result }
    })
    .await;
    found
}

fn triggers() -> usize {
    std::env::var("SWITCHYARD_LEADER_TRIGGERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12)
}

/// The same changes with `replicas` brokers (creates, edits, deletes): each broker's writes.
async fn writes_with(replicas: usize) -> Vec<usize> {
    let setup = Setup::start().await;
    let mut brokers = Vec::new();
    for _ in 0..replicas {
        brokers.push(setup.broker().await);
    }
    let leading = leader(&brokers).await;
    let n = triggers();
    brokers.iter().for_each(Broker::reset_counts);
    for i in 0..n {
        setup.put(&format!("t{i}"), "one").await;
    }
    let timeout = Duration::from_secs(90);
    eventually("created", timeout, || setup.converged(n, |_| "one".into())).await;
    for i in 0..n / 2 {
        setup.put(&format!("t{i}"), "two").await;
    }
    eventually("edited", timeout, || {
        setup.converged(n, |i| {
            if i < n / 2 {
                "two".into()
            } else {
                "one".into()
            }
        })
    })
    .await;
    for i in n / 2..n {
        setup.delete(&format!("t{i}")).await;
    }
    eventually("deleted", timeout, || {
        setup.converged(n / 2, |_| "two".into())
    })
    .await;
    // Late writes (status, finalizers) land before counting.
    tokio::time::sleep(Duration::from_secs(3)).await;
    // Followers do not even evaluate.
    for (i, follower) in brokers.iter().enumerate().filter(|(i, _)| *i != leading) {
        assert_eq!(
            follower.reconciles(),
            0.0,
            "follower {i} evaluated triggers"
        );
    }
    // The leader first, then the followers.
    let mut writes: Vec<usize> = brokers.iter().map(Broker::writes).collect();
    writes.swap(0, leading);
    writes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_writes() {
    // How many writes a set of changes costs varies a little with timing (a status write may
    // cover one change or two), so the claim is exact where it can be: followers write nothing.
    for replicas in [1, 2, 3] {
        let writes = writes_with(replicas).await;
        eprintln!(
            "{replicas} replica(s), {} triggers created, half edited, half deleted: leader wrote {}, followers {:?}",
            triggers(),
            writes[0],
            &writes[1..]
        );
        assert!(writes[0] > 0, "the leader wrote nothing");
        assert!(
            writes[1..].iter().all(|w| *w == 0),
            "a follower wrote: {writes:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_takes_over_from_a_killed_or_stopped_leader() {
    let setup = Setup::start().await;
    let n = triggers();
    for i in 0..n {
        setup.put(&format!("t{i}"), "one").await;
    }
    let mut brokers = Vec::new();
    for _ in 0..3 {
        brokers.push(setup.broker().await);
    }
    let first = leader(&brokers).await;
    eventually("converged", Duration::from_secs(90), || {
        setup.converged(n, |_| "one".into())
    })
    .await;
    // The leader is done (finalizers and status written too): no write for 2 s.
    let mut last = usize::MAX;
    eventually("the leader idle", Duration::from_secs(120), || {
        let now = brokers[first].writes();
        let idle = now == last;
        last = now;
        async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            if idle {
                Ok(())
            } else {
                Err(format!("{now} writes so far"))
            }
        }
    })
    .await;

    // kill -9: the lease expires, a follower takes it and evaluates everything again, writing
    // nothing that is unchanged.
    brokers.iter().for_each(Broker::reset_counts);
    let brokers_rss_before_kill = brokers[first].rss_mib();
    brokers[first].signal("-KILL");
    let killed = Instant::now();
    let mut survivors: Vec<Broker> = Vec::new();
    for (i, b) in brokers.drain(..).enumerate() {
        if i != first {
            survivors.push(b);
        }
    }
    let follower_rss = survivors.iter().map(Broker::rss_mib).fold(0.0, f64::max);
    let leader_rss = brokers_rss_before_kill;
    let second = leader(&survivors).await;
    let takeover = killed.elapsed();
    // Warm standby: the new leader's first round runs on caches it already holds.
    let mut first_round = String::new();
    eventually(
        "the new leader's first round",
        Duration::from_secs(120),
        || {
            let found = survivors[second]
                .logs()
                .lines()
                .rev()
                .find(|l| l.contains("first round complete"))
                .and_then(|l| l.split("took=").nth(1))
                .and_then(|t| t.split_whitespace().next())
                .map(str::to_string);
            let result = match found {
                Some(took) => {
                    first_round = took;
                    Ok(())
                }
                None => Err("not yet".to_string()),
            };
            async move { result }
        },
    )
    .await;
    // Cold standby would first list every watched kind, as a broker that starts does.
    let cold = setup.broker().await;
    let started = Instant::now();
    eventually("a new broker ready", Duration::from_secs(120), || {
        let ready = http_get(cold.port, "/readyz").is_some_and(|(code, _)| code == 200);
        async move {
            if ready {
                Ok(())
            } else {
                Err("not ready".to_string())
            }
        }
    })
    .await;
    let listing = started.elapsed();
    let cold_rss = cold.rss_mib();
    drop(cold);
    eprintln!(
        "{n} triggers: leader {leader_rss:.1} MiB, warm follower {follower_rss:.1} MiB; the new leader's first round took {first_round}; a starting broker's lists took {listing:?} (a cold standby's delay at takeover), {cold_rss:.1} MiB then"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rewrites: usize = survivors.iter().map(Broker::writes).sum();
    setup.put("t0", "after").await;
    eventually(
        "the new leader applies a change",
        Duration::from_secs(60),
        || setup.converged(n, |i| if i == 0 { "after".into() } else { "one".into() }),
    )
    .await;
    eprintln!(
        "kill -9 of the leader: a follower led after {takeover:?} (lease {LEASE_SECONDS} s); {rewrites} writes of unchanged outputs after the takeover"
    );
    assert!(
        takeover < Duration::from_secs(LEASE_SECONDS + 5),
        "takeover took {takeover:?}"
    );
    assert_eq!(rewrites, 0, "the new leader rewrote unchanged outputs");

    // SIGTERM: the leader releases the lease; the last follower takes it at once.
    survivors[second].signal("-TERM");
    let stopped = Instant::now();
    let last = if second == 0 { 1 } else { 0 };
    eventually("the last follower to lead", Duration::from_secs(30), || {
        let leads = survivors[last].leads() == Some(true);
        async move {
            if leads {
                Ok(())
            } else {
                Err("not yet".to_string())
            }
        }
    })
    .await;
    let handover = stopped.elapsed();
    eprintln!("SIGTERM of the leader: a follower led after {handover:?}");
    assert!(
        handover < Duration::from_secs(2),
        "handover took {handover:?}\nleader's logs:\n{}",
        survivors[second].logs()
    );
}
