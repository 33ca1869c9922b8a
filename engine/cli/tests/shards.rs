//! Three `switchyard run` processes with `--shards 6`, against real API servers, on 3,000
//! triggers: each trigger is evaluated by exactly one broker, the one holding its shard (the
//! brokers' logs name every trigger they evaluate; each output's field managers name the
//! shard that wrote it); the shards are spread two per broker; kill -9 of one broker moves
//! its shards to the others within the lease plus 5 s, with nothing deleted or recreated (the
//! uids of every output compared); and a Namespace several shards' triggers want survives
//! the deletion of every trigger of one shard that wants it (its claim taken back), while
//! one only that shard wanted goes.
//!
//! The Leases live in a cluster of their own (`home`); a 10 s lease renewed every 2 s. `SWITCHYARD_SHARD_TRIGGERS` sets the
//! number of triggers (default 3000).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use switchyard_core::ObjectKey;
use switchyard_testenv::{ControlPlane, FaultProxy};

/// A lease of 10 s renewed every 2 s: 8 s of slack for a renewal on a loaded machine (an API
/// server slow to answer must not move shards during the test), a kill seen within 10 s.
const LEASE_SECONDS: u64 = 10;
const RENEW_BEFORE_SECONDS: u64 = 8;
const SHARDS: u32 = 6;
/// The shared Namespaces: `group-0` .. `group-{GROUPS-1}`, each wanted by triggers of
/// every shard; `group-solo`, wanted only by some triggers of [`SOLO_SHARD`].
const GROUPS: usize = 5;
const SOLO_SHARD: u32 = 5;

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&kube::core::GroupVersionKind::gvk("", "v1", kind), plural)
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
      kinds:
        - {apiVersion: v1, kind: ConfigMap}
        - {apiVersion: v1, kind: Namespace, clusterScoped: true}
      namespaces: ["mirror-*", "group-*"]
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

/// The triggers labelled `grouped` also want their group's Namespace.
const GROUP_RULE: &str = r#"apiVersion: switchyard.dev/v1alpha1
kind: Rule
metadata: {name: group}
spec:
  watch:
    apiVersion: v1
    kind: ConfigMap
    selector: {matchLabels: {mirror: "yes", grouped: "yes"}}
  outputs:
    - {name: group, cluster: target, template: group.yaml.hbs}
"#;

fn write_pack(dir: &Path) {
    let pack = dir.join("mirror");
    for sub in ["rules", "templates"] {
        std::fs::create_dir_all(pack.join(sub)).unwrap();
    }
    std::fs::write(pack.join("pack.yaml"), PACK).unwrap();
    std::fs::write(pack.join("rules/mirror.yaml"), RULE).unwrap();
    std::fs::write(pack.join("rules/group.yaml"), GROUP_RULE).unwrap();
    std::fs::write(
        pack.join("templates/copy.yaml.hbs"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: copy-{{self.metadata.name}}\n  namespace: mirror-out\ndata:\n  value: {{self.data.value}}\n",
    )
    .unwrap();
    std::fs::write(
        pack.join("templates/group.yaml.hbs"),
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: group-{{self.data.group}}\n  labels:\n    mirror-group: \"yes\"\n",
    )
    .unwrap();
}

/// A trigger's key as the broker names it, and its shard.
fn shard(name: &str) -> u32 {
    let key = ObjectKey {
        cluster: "source".into(),
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: Some("default".into()),
        name: name.into(),
    };
    switchyard_kube::shards::shard_of(&key, SHARDS)
}

/// The group of trigger `i`, if it wants one: one of the shared ones (every tenth trigger),
/// or `solo` for a few of [`SOLO_SHARD`].
fn group(i: usize) -> Option<String> {
    let name = format!("t{i}");
    if shard(&name) == SOLO_SHARD && i.is_multiple_of(7) {
        Some("solo".into())
    } else if i.is_multiple_of(10) {
        Some((i / 10 % GROUPS).to_string())
    } else {
        None
    }
}

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
        let namespaces: Api<DynamicObject> =
            Api::all_with(target.clone(), &resource("Namespace", "namespaces"));
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

    async fn broker(&self) -> Broker {
        let target_proxy = FaultProxy::start(self.plane.cluster("target").unwrap())
            .await
            .unwrap();
        let port = support::free_port();
        let log = tempfile::NamedTempFile::new().unwrap();
        let source = self.plane.cluster("source").unwrap().kubeconfig_path();
        let child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .args(["run", "--packs"])
            .arg(self.packs.path())
            .arg("--cluster")
            .arg(format!("source={}", source.display()))
            .arg("--cluster")
            .arg(format!(
                "target={}",
                target_proxy.kubeconfig_path().display()
            ))
            .arg("--cluster")
            .arg(format!("home={}", self.home.display()))
            .args(["--leader-elect", "--leader-elect-cluster", "home"])
            .args(["--leader-elect-lease-seconds", &LEASE_SECONDS.to_string()])
            .args([
                "--leader-elect-renew-before-seconds",
                &RENEW_BEFORE_SECONDS.to_string(),
            ])
            .args(["--shards", &SHARDS.to_string()])
            .args(["--health-addr", &format!("127.0.0.1:{port}")])
            .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
            // Every evaluation is logged with its trigger: the evidence of who evaluated what.
            .env(
                "SWITCHYARD_LOG",
                "info,switchyard_kube::controller::reconcile=debug",
            )
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(log.reopen().unwrap())
            .spawn()
            .unwrap();
        Broker {
            child,
            port,
            log,
            target_proxy,
        }
    }

    /// Creates or changes triggers, 32 requests at a time.
    async fn put_all(&self, triggers: Vec<(String, Option<String>)>) {
        let api: Api<DynamicObject> = Api::namespaced_with(
            self.source.clone(),
            "default",
            &resource("ConfigMap", "configmaps"),
        );
        let mut set = tokio::task::JoinSet::new();
        for (name, group) in triggers {
            while set.len() >= 32 {
                set.join_next().await.unwrap().unwrap();
            }
            let api = api.clone();
            set.spawn(async move {
                let grouped = if group.is_some() { "yes" } else { "no" };
                let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": "default",
                                 "labels": {"mirror": "yes", "grouped": grouped}},
                    "data": {"value": "one", "group": group.unwrap_or_default()}});
                api.patch(
                    &name,
                    &PatchParams::apply("e2e-user"),
                    &Patch::Apply(&object),
                )
                .await
                .unwrap();
            });
        }
        while let Some(done) = set.join_next().await {
            done.unwrap();
        }
    }

    async fn delete_all(&self, names: Vec<String>) {
        let api: Api<DynamicObject> = Api::namespaced_with(
            self.source.clone(),
            "default",
            &resource("ConfigMap", "configmaps"),
        );
        let mut set = tokio::task::JoinSet::new();
        for name in names {
            while set.len() >= 32 {
                set.join_next().await.unwrap().unwrap();
            }
            let api = api.clone();
            set.spawn(async move {
                let _ = api.delete(&name, &DeleteParams::default()).await;
            });
        }
        while let Some(done) = set.join_next().await {
            done.unwrap();
        }
    }

    /// The copies (name -> object) in the target.
    async fn copies(&self) -> BTreeMap<String, Value> {
        let api: Api<DynamicObject> = Api::namespaced_with(
            self.target.clone(),
            "mirror-out",
            &resource("ConfigMap", "configmaps"),
        );
        let listed = api.list(&ListParams::default()).await.unwrap();
        listed
            .items
            .iter()
            .map(|o| serde_json::to_value(o).unwrap())
            .filter(|o| {
                o["metadata"]["name"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("copy-")
            })
            .map(|o| (o["metadata"]["name"].as_str().unwrap().to_string(), o))
            .collect()
    }

    /// The group Namespaces (name -> object) that are not being deleted.
    async fn groups(&self) -> BTreeMap<String, Value> {
        let api: Api<DynamicObject> =
            Api::all_with(self.target.clone(), &resource("Namespace", "namespaces"));
        let listed = api
            .list(&ListParams::default().labels("mirror-group=yes"))
            .await
            .unwrap();
        listed
            .items
            .iter()
            .map(|o| serde_json::to_value(o).unwrap())
            .filter(|o| o["metadata"]["deletionTimestamp"].is_null())
            .map(|o| (o["metadata"]["name"].as_str().unwrap().to_string(), o))
            .collect()
    }
}

fn uids(objects: &BTreeMap<String, Value>) -> BTreeMap<String, String> {
    objects
        .iter()
        .map(|(n, o)| {
            (
                n.clone(),
                o["metadata"]["uid"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

struct Broker {
    child: Child,
    port: u16,
    log: tempfile::NamedTempFile,
    target_proxy: FaultProxy,
}

impl Broker {
    /// The shards this broker holds, from `/readyz`.
    fn held(&self) -> Option<BTreeSet<u32>> {
        let (_, body) = http_get(self.port, "/readyz")?;
        let line = body.lines().find(|l| l.starts_with("[+]shards: "))?;
        let list = line
            .split_once('(')
            .map(|(_, l)| l.trim_end_matches(')'))
            .unwrap_or("");
        Some(
            list.split(", ")
                .filter(|s| !s.is_empty())
                .map(|s| s.parse().unwrap())
                .collect(),
        )
    }

    /// `switchyard_shards_held`, from `/metrics`.
    fn held_gauge(&self) -> Option<u32> {
        let (_, body) = http_get(self.port, "/metrics")?;
        body.lines()
            .find(|l| l.starts_with("switchyard_shards_held "))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    }

    fn logs(&self) -> String {
        let mut logs = String::new();
        let _ = self.log.reopen().unwrap().read_to_string(&mut logs);
        logs
    }

    /// The triggers this broker evaluated, as its log names them.
    fn evaluated(&self) -> BTreeSet<String> {
        self.logs()
            .lines()
            .filter(|l| l.contains("evaluating"))
            .filter_map(|l| l.split("trigger=").nth(1))
            .filter_map(|t| t.split_whitespace().next())
            .filter_map(|t| t.rsplit('/').next())
            .map(str::to_string)
            .collect()
    }

    fn kill(&self) {
        let sent = Command::new("kill")
            .args(["-KILL", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn eventually<F, Fut>(what: &str, timeout: Duration, check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    eventually_or(what, timeout, || {}, check).await
}

/// As [`eventually`], calling `on_timeout` (to print what helps explain it) before failing.
async fn eventually_or<F, Fut>(
    what: &str,
    timeout: Duration,
    on_timeout: impl Fn(),
    mut check: F,
) -> Duration
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
        if started.elapsed() >= timeout {
            on_timeout();
            panic!("{what}: {last:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Prints each broker's last `last` log lines that name one of `words` (evaluations left
/// out): what explains a timeout.
fn print_logs(brokers: &[&Broker], words: &[&str], last: usize) {
    for (i, b) in brokers.iter().enumerate() {
        let lines: Vec<String> = b
            .logs()
            .lines()
            .filter(|l| !l.contains("evaluating"))
            .filter(|l| words.iter().any(|w| l.contains(w)))
            .map(str::to_string)
            .collect();
        let tail = &lines[lines.len().saturating_sub(last)..];
        eprintln!("survivor {i}:\n{}", tail.join("\n"));
    }
}

/// Every shard held by exactly one of `brokers`, each holding its fair share.
fn spread(brokers: &[&Broker]) -> Result<Vec<BTreeSet<u32>>, String> {
    let held: Vec<BTreeSet<u32>> = brokers
        .iter()
        .map(|b| b.held().ok_or("no /readyz".to_string()))
        .collect::<Result<_, _>>()?;
    let fair = (SHARDS as usize).div_ceil(brokers.len());
    let all: Vec<u32> = held.iter().flatten().copied().collect();
    let distinct: BTreeSet<u32> = all.iter().copied().collect();
    if all.len() == SHARDS as usize
        && distinct.len() == SHARDS as usize
        && held.iter().all(|h| h.len() <= fair)
    {
        Ok(held)
    } else {
        Err(format!("held: {held:?}"))
    }
}

fn triggers() -> usize {
    std::env::var("SWITCHYARD_SHARD_TRIGGERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_spread_over_brokers_move_when_one_dies_and_keep_shared_outputs() {
    let started = Instant::now();
    let setup = Setup::start().await;
    let n = triggers();
    let names: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
    setup
        .put_all(
            names
                .iter()
                .enumerate()
                .map(|(i, t)| (t.clone(), group(i)))
                .collect(),
        )
        .await;
    let wanted_groups: BTreeSet<String> = (0..n)
        .filter_map(|i| Some(format!("group-{}", group(i)?)))
        .collect();
    assert!(
        wanted_groups.contains("group-solo"),
        "no trigger of the solo shard"
    );

    let brokers = vec![
        setup.broker().await,
        setup.broker().await,
        setup.broker().await,
    ];
    let refs: Vec<&Broker> = brokers.iter().collect();
    let mut held = Vec::new();
    let took = eventually("the shards spread", Duration::from_secs(60), || {
        let result = spread(&refs).map(|h| held = h);
        async move { result }
    })
    .await;
    eprintln!("{SHARDS} shards over 3 brokers after {took:?}: {held:?}");
    assert!(held.iter().all(|h| h.len() == 2), "{held:?}");
    for (b, h) in brokers.iter().zip(&held) {
        assert_eq!(b.held_gauge(), Some(h.len() as u32));
    }
    let converged = eventually("converged", Duration::from_secs(120), || async {
        let copies = setup.copies().await;
        let groups = setup.groups().await;
        let names: BTreeSet<String> = groups.keys().cloned().collect();
        if copies.len() == n && names == wanted_groups {
            Ok(())
        } else {
            Err(format!("{} copies, groups {names:?}", copies.len()))
        }
    })
    .await;
    eprintln!("{n} triggers converged {converged:?} after the shards spread");

    // Each trigger evaluated by exactly one broker: the one that holds its shard.
    let evaluated: Vec<BTreeSet<String>> = brokers.iter().map(Broker::evaluated).collect();
    for name in &names {
        let by: Vec<usize> = (0..3).filter(|b| evaluated[*b].contains(name)).collect();
        assert_eq!(by.len(), 1, "{name} evaluated by brokers {by:?}");
        assert!(
            held[by[0]].contains(&shard(name)),
            "{name} (shard {}) evaluated by broker {} holding {:?}",
            shard(name),
            by[0],
            held[by[0]]
        );
    }
    let writes: Vec<usize> = brokers
        .iter()
        .map(|b| b.target_proxy.requests().writes())
        .collect();
    eprintln!(
        "evaluated per broker: {:?}; writes to the target per broker: {writes:?}",
        evaluated.iter().map(BTreeSet::len).collect::<Vec<_>>()
    );
    assert!(writes.iter().all(|w| *w > 0), "{writes:?}");
    // Each copy written by its trigger's shard alone; each group by the shards that want it.
    let copies = setup.copies().await;
    for (name, copy) in &copies {
        let trigger = name.trim_start_matches("copy-");
        let managers: BTreeSet<String> = copy["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["manager"].as_str())
            .filter(|m| m.starts_with("switchyard/"))
            .map(str::to_string)
            .collect();
        let expected = format!("switchyard/mirror/{}-of-{SHARDS}", shard(trigger));
        assert_eq!(managers, BTreeSet::from([expected]), "{name}");
    }
    let groups = setup.groups().await;
    for (name, namespace) in &groups {
        let claims: BTreeSet<u32> = (0..n)
            .filter(|i| group(*i).is_some_and(|g| format!("group-{g}") == *name))
            .map(|i| shard(&format!("t{i}")))
            .collect();
        for s in 0..SHARDS {
            let key = format!("switchyard.dev/owners-{s}-of-{SHARDS}");
            assert_eq!(
                namespace["metadata"]["annotations"][&key].is_string(),
                claims.contains(&s),
                "{name}: claim of shard {s}"
            );
        }
    }
    let copy_uids = uids(&copies);
    let group_uids = uids(&groups);

    // kill -9 of one broker: its shards move to the others within the lease plus 5 s.
    let mut brokers = brokers;
    let dead = brokers.remove(0);
    let orphaned = held[0].clone();
    for b in &brokers {
        b.target_proxy.reset_counts();
    }
    dead.kill();
    let killed = Instant::now();
    let killed_wall = wall_clock();
    let survivors: Vec<&Broker> = brokers.iter().collect();
    let after = loop {
        match spread(&survivors) {
            Ok(held) => break held,
            Err(e) if killed.elapsed() > Duration::from_secs(LEASE_SECONDS + 20) => {
                print_logs(&survivors, &["shard", "lease", "lead"], usize::MAX);
                panic!("the shards moved: {e}");
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    let seen = killed.elapsed();
    // When each of the dead broker's shards was taken, by the log of the broker that took it
    // (a loaded machine answers /readyz late; the log's clock is the broker's own).
    let killed_at = seconds_of_day(&killed_wall);
    let mut moved = Duration::ZERO;
    for shard in &orphaned {
        let lease = format!("lease=switchyard-shard-{shard} ");
        let taken = survivors
            .iter()
            .flat_map(|b| {
                b.logs()
                    .lines()
                    .filter(|l| l.contains("leading") && l.contains(&lease))
                    .filter_map(|l| l.split_whitespace().next().map(seconds_of_day))
                    .collect::<Vec<f64>>()
            })
            .map(|at| {
                if at < killed_at - 43_200.0 {
                    at + 86_400.0
                } else {
                    at
                }
            })
            .filter(|at| *at >= killed_at)
            .fold(f64::INFINITY, f64::min);
        assert!(taken.is_finite(), "no survivor logged taking shard {shard}");
        moved = moved.max(Duration::from_secs_f64(taken - killed_at));
    }
    eprintln!(
        "kill -9 of the broker holding {orphaned:?}: its shards taken after {moved:?} (lease {LEASE_SECONDS} s), the survivors' /readyz said so after {seen:?}: {after:?}"
    );
    assert!(
        moved < Duration::from_secs(LEASE_SECONDS + 5),
        "moving took {moved:?}"
    );
    // The new holders' first rounds, then nothing deleted or recreated.
    eventually(
        "first rounds of the moved shards",
        Duration::from_secs(60),
        || {
            let done: BTreeSet<u32> = survivors
                .iter()
                .flat_map(|b| {
                    b.logs()
                        .lines()
                        .filter(|l| l.contains("first round complete"))
                        .filter_map(|l| l.split("shard=").nth(1))
                        .filter_map(|s| s.split_whitespace().next()?.parse().ok())
                        .collect::<Vec<u32>>()
                })
                .collect();
            let result = if orphaned.is_subset(&done) {
                Ok(())
            } else {
                Err(format!("done: {done:?}"))
            };
            async move { result }
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        uids(&setup.copies().await),
        copy_uids,
        "a copy was deleted or recreated"
    );
    assert_eq!(
        uids(&setup.groups().await),
        group_uids,
        "a group was deleted or recreated"
    );
    let deletes: usize = brokers
        .iter()
        .map(|b| b.target_proxy.requests().delete)
        .sum();
    assert_eq!(deletes, 0, "the survivors deleted outputs");

    // Every trigger of one shard that wants a group deleted: their copies go, the group only
    // that shard wanted goes, the groups other shards want stay (the same objects), their
    // claim of that shard taken back.
    let gone: Vec<String> = (0..n)
        .filter(|i| shard(&format!("t{i}")) == SOLO_SHARD && group(*i).is_some())
        .map(|i| format!("t{i}"))
        .collect();
    setup.delete_all(gone.clone()).await;
    let expected_groups: BTreeSet<String> = wanted_groups
        .iter()
        .filter(|g| *g != "group-solo")
        .cloned()
        .collect();
    // On a timeout the survivors' log of the deletions is printed. This phase once fell
    // behind under load (40 of 114 copies gone after 90 s: each deleting trigger pruned on
    // its own and read every cached output while it waited, and every deletion woke every
    // deleting trigger; see design.md, Finalizers); it takes a few seconds now.
    let dump = || {
        print_logs(
            &survivors,
            &[
                "finalizer",
                "prun",
                "delet",
                "waiting",
                "claim",
                "WARN",
                "ERROR",
            ],
            60,
        );
    };
    let deleted_in = eventually_or(
        "one shard's grouped triggers deleted",
        Duration::from_secs(30),
        dump,
        || async {
            let copies = setup.copies().await;
            let groups = setup.groups().await;
            let names: BTreeSet<String> = groups.keys().cloned().collect();
            let claimed = groups.values().any(|g| {
                g["metadata"]["annotations"]
                    [format!("switchyard.dev/owners-{SOLO_SHARD}-of-{SHARDS}")]
                .is_string()
            });
            if copies.len() == n - gone.len() && names == expected_groups && !claimed {
                Ok(())
            } else {
                Err(format!(
                    "{} copies, groups {names:?}, claim of shard {SOLO_SHARD} left: {claimed}",
                    copies.len()
                ))
            }
        },
    )
    .await;
    let groups = uids(&setup.groups().await);
    for (name, uid) in &groups {
        assert_eq!(Some(uid), group_uids.get(name), "{name} was recreated");
    }
    eprintln!(
        "{} grouped triggers of shard {SOLO_SHARD} deleted: their copies and group-solo gone, {} shared groups kept with that shard's claim taken back, {deleted_in:?} after the deletes; the test took {:?}",
        gone.len(),
        groups.len(),
        started.elapsed()
    );
    drop(dead);
}

/// The wall clock now, as the brokers' log lines print it (`2026-11-27T07:06:59.197442Z`,
/// UTC); only the time of day is used.
fn wall_clock() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let day = now.as_secs() % 86_400;
    format!(
        "1970-01-01T{:02}:{:02}:{:02}.{:06}Z",
        day / 3600,
        day / 60 % 60,
        day % 60,
        now.subsec_micros()
    )
}

/// The seconds since midnight of a log line's timestamp.
fn seconds_of_day(stamp: &str) -> f64 {
    let time = stamp.split('T').nth(1).unwrap_or("").trim_end_matches('Z');
    let mut parts = time.split(':');
    let h: f64 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0.0);
    let m: f64 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0.0);
    let s: f64 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0.0);
    h * 3600.0 + m * 60.0 + s
}
