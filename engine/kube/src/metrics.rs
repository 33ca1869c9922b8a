//! The broker's metrics, with the Prometheus client (`prometheus-client`), in the families
//! controller-runtime exposes, so dashboards and alerts written for Go controllers work:
//! `controller_runtime_reconcile_*` (one controller per pack), `workqueue_*` (the queue
//! `switchyard`), `rest_client_requests_total` and `leader_election_master_status`; and
//! Switchyard's own, per pack and rule: evaluations and their time, CEL cost spent, writes by
//! kind, reloads, watches and cluster members.
//!
//! Served at `/metrics` in the OpenMetrics text format (Prometheus reads it).

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

/// The queue's name in the `workqueue_*` families.
pub const QUEUE: &str = "switchyard";

/// The content type of [`Metrics::render`].
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    pub controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub controller: String,
    /// `success`, `error`, `requeue` or `requeue_after`, as controller-runtime counts.
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    pub name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RestLabels {
    pub code: String,
    pub method: String,
    pub host: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LeaderLabels {
    pub name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PackLabels {
    pub pack: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RuleLabels {
    pub pack: String,
    pub rule: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    pub pack: String,
    pub cluster: String,
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PackInfoLabels {
    pub pack: String,
    pub version: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    pub state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RoleLabels {
    pub role: String,
}

type FloatGauge = Gauge<f64, AtomicU64>;

/// Every metric of the broker, registered once.
pub struct Metrics {
    registry: Registry,
    // controller-runtime
    pub reconcile_total: Family<ResultLabels, Counter>,
    pub reconcile_errors_total: Family<ControllerLabels, Counter>,
    pub reconcile_time_seconds: Family<ControllerLabels, Histogram>,
    // client-go's workqueue
    pub workqueue_depth: Family<QueueLabels, Gauge>,
    pub workqueue_adds_total: Family<QueueLabels, Counter>,
    pub workqueue_queue_duration_seconds: Family<QueueLabels, Histogram>,
    pub workqueue_work_duration_seconds: Family<QueueLabels, Histogram>,
    pub workqueue_retries_total: Family<QueueLabels, Counter>,
    pub workqueue_unfinished_work_seconds: Family<QueueLabels, FloatGauge>,
    pub workqueue_longest_running_processor_seconds: Family<QueueLabels, FloatGauge>,
    // client-go's REST client
    pub rest_client_requests_total: Family<RestLabels, Counter>,
    // leader election
    pub leader_election_master_status: Family<LeaderLabels, Gauge>,
    // Switchyard's own
    pub evaluations_total: Family<RuleLabels, Counter>,
    pub evaluation_seconds: Family<PackLabels, Histogram>,
    pub cel_cost_total: Family<PackLabels, Counter>,
    pub applies_total: Family<WriteLabels, Counter>,
    pub prunes_total: Family<WriteLabels, Counter>,
    pub status_writes_total: Family<WriteLabels, Counter>,
    pub finalizer_writes_total: Family<PackLabels, Counter>,
    pub pack_reload_success: Gauge,
    pub pack_reloads_total: Family<OutcomeLabels, Counter>,
    pub packs_loaded: Gauge,
    pub pack_info: Family<PackInfoLabels, Gauge>,
    pub watches: Family<StateLabels, Gauge>,
    pub cluster_members: Family<RoleLabels, Gauge>,
    /// Members found at run time whose watches are still listing, per role.
    pub cluster_members_joining: Family<RoleLabels, Gauge>,
    pub unreachable_clusters: Gauge,
    /// The number of shards the triggers are split into, and how many this broker holds.
    pub shards: Gauge,
    pub shards_held: Gauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

fn seconds_histogram() -> Histogram {
    // controller-runtime's buckets: 5 ms to about 1 minute (and longer).
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::build()
    }
}

impl Metrics {
    pub fn new() -> Arc<Metrics> {
        Arc::new(Metrics::build())
    }

    fn build() -> Metrics {
        let mut registry = Registry::default();
        let histograms = || Family::new_with_constructor(seconds_histogram as fn() -> Histogram);
        let metrics = Metrics {
            reconcile_total: Family::default(),
            reconcile_errors_total: Family::default(),
            reconcile_time_seconds: Family::new_with_constructor(seconds_histogram),
            workqueue_depth: Family::default(),
            workqueue_adds_total: Family::default(),
            workqueue_queue_duration_seconds: Family::new_with_constructor(seconds_histogram),
            workqueue_work_duration_seconds: Family::new_with_constructor(seconds_histogram),
            workqueue_retries_total: Family::default(),
            workqueue_unfinished_work_seconds: Family::default(),
            workqueue_longest_running_processor_seconds: Family::default(),
            rest_client_requests_total: Family::default(),
            leader_election_master_status: Family::default(),
            evaluations_total: Family::default(),
            evaluation_seconds: histograms(),
            cel_cost_total: Family::default(),
            applies_total: Family::default(),
            prunes_total: Family::default(),
            status_writes_total: Family::default(),
            finalizer_writes_total: Family::default(),
            pack_reload_success: Gauge::default(),
            pack_reloads_total: Family::default(),
            packs_loaded: Gauge::default(),
            pack_info: Family::default(),
            watches: Family::default(),
            cluster_members: Family::default(),
            cluster_members_joining: Family::default(),
            unreachable_clusters: Gauge::default(),
            shards: Gauge::default(),
            shards_held: Gauge::default(),
            registry: Registry::default(),
        };
        // Counter names leave out `_total`: the encoder appends it.
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller (one controller per pack)",
            metrics.reconcile_total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            metrics.reconcile_errors_total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            metrics.reconcile_time_seconds.clone(),
        );
        registry.register(
            "workqueue_depth",
            "Current depth of workqueue (waiting on timers included)",
            metrics.workqueue_depth.clone(),
        );
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            metrics.workqueue_adds_total.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            metrics.workqueue_queue_duration_seconds.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            metrics.workqueue_work_duration_seconds.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            metrics.workqueue_retries_total.clone(),
        );
        registry.register(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed by work_duration",
            metrics.workqueue_unfinished_work_seconds.clone(),
        );
        registry.register(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            metrics.workqueue_longest_running_processor_seconds.clone(),
        );
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host",
            metrics.rest_client_requests_total.clone(),
        );
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master",
            metrics.leader_election_master_status.clone(),
        );
        registry.register(
            "switchyard_evaluations",
            "Trigger evaluations, per pack and rule",
            metrics.evaluations_total.clone(),
        );
        registry.register(
            "switchyard_evaluation_seconds",
            "Time to evaluate one trigger, per pack",
            metrics.evaluation_seconds.clone(),
        );
        registry.register(
            "switchyard_cel_cost",
            "CEL cost spent evaluating triggers, per pack (Kubernetes' cost units)",
            metrics.cel_cost_total.clone(),
        );
        registry.register(
            "switchyard_applies",
            "Outputs created, applied or patched, per pack, cluster and kind",
            metrics.applies_total.clone(),
        );
        registry.register(
            "switchyard_prunes",
            "Outputs deleted or orphaned because no trigger desires them (not counting ones already gone)",
            metrics.prunes_total.clone(),
        );
        registry.register(
            "switchyard_status_writes",
            "Status applies on triggers, per pack, cluster and kind",
            metrics.status_writes_total.clone(),
        );
        registry.register(
            "switchyard_finalizer_writes",
            "Finalizers added to or removed from triggers, per pack",
            metrics.finalizer_writes_total.clone(),
        );
        registry.register(
            "switchyard_pack_reload_success",
            "Whether the last pack (re)load succeeded (1) or failed (0)",
            metrics.pack_reload_success.clone(),
        );
        registry.register(
            "switchyard_pack_reloads",
            "Pack (re)loads, by result",
            metrics.pack_reloads_total.clone(),
        );
        registry.register(
            "switchyard_packs_loaded",
            "The number of packs running",
            metrics.packs_loaded.clone(),
        );
        registry.register(
            "switchyard_pack_info",
            "The running packs, with their versions (always 1)",
            metrics.pack_info.clone(),
        );
        registry.register(
            "switchyard_watches",
            "Registered watches, by sync state",
            metrics.watches.clone(),
        );
        registry.register(
            "switchyard_cluster_members",
            "Member clusters per role",
            metrics.cluster_members.clone(),
        );
        registry.register(
            "switchyard_cluster_members_joining",
            "Members found at run time whose watches are still listing, per role",
            metrics.cluster_members_joining.clone(),
        );
        registry.register(
            "switchyard_unreachable_clusters",
            "Clusters that do not answer now",
            metrics.unreachable_clusters.clone(),
        );
        registry.register(
            "switchyard_shards",
            "Number of shards the triggers are split into",
            metrics.shards.clone(),
        );
        registry.register(
            "switchyard_shards_held",
            "Number of shards this broker holds (evaluates and writes for)",
            metrics.shards_held.clone(),
        );
        Metrics {
            registry,
            ..metrics
        }
    }

    /// The OpenMetrics text of every metric.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String does not fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// One reconciliation of a pack's trigger: its result and how long it took.
    pub fn reconciled(&self, pack: &str, result: &str, took: Duration) {
        let controller = pack.to_string();
        self.reconcile_total
            .get_or_create(&ResultLabels {
                controller: controller.clone(),
                result: result.to_string(),
            })
            .inc();
        if result == "error" {
            self.reconcile_errors_total
                .get_or_create(&ControllerLabels {
                    controller: controller.clone(),
                })
                .inc();
        }
        self.reconcile_time_seconds
            .get_or_create(&ControllerLabels { controller })
            .observe(took.as_secs_f64());
    }

    /// One write to a cluster, counted by what it was.
    pub fn wrote(
        &self,
        family: &Family<WriteLabels, Counter>,
        pack: &str,
        cluster: &str,
        kind: &str,
    ) {
        family
            .get_or_create(&WriteLabels {
                pack: pack.to_string(),
                cluster: cluster.to_string(),
                kind: kind.to_string(),
            })
            .inc();
    }

    /// The running packs.
    pub fn set_packs(&self, packs: &[(String, String)]) {
        self.pack_reload_success.set(1);
        self.packs_loaded.set(packs.len() as i64);
        self.pack_info.clear();
        for (pack, version) in packs {
            self.pack_info
                .get_or_create(&PackInfoLabels {
                    pack: pack.clone(),
                    version: version.clone(),
                })
                .set(1);
        }
        self.reload("success");
    }

    /// A (re)load's result: `success` or `failure`.
    pub fn reload(&self, result: &str) {
        if result != "success" {
            self.pack_reload_success.set(0);
        }
        self.pack_reloads_total
            .get_or_create(&OutcomeLabels {
                result: result.to_string(),
            })
            .inc();
    }

    /// The watches, synced or not.
    pub fn set_watches(&self, synced: usize, total: usize) {
        let set = |state: &str, n: usize| {
            self.watches
                .get_or_create(&StateLabels {
                    state: state.to_string(),
                })
                .set(n as i64);
        };
        set("synced", synced);
        set("not-synced", total.saturating_sub(synced));
    }

    /// The shards: their number and how many this broker holds.
    pub fn set_shards(&self, count: u32, held: usize) {
        self.shards.set(i64::from(count));
        self.shards_held.set(held as i64);
    }

    /// This process leads (`true`) or waits (`false`) for the lease `name`.
    pub fn set_leader(&self, name: &str, leading: bool) {
        self.leader_election_master_status
            .get_or_create(&LeaderLabels {
                name: name.to_string(),
            })
            .set(i64::from(leading));
    }

    /// The queue's gauges, from the queue itself (scraped, not pushed).
    pub fn set_queue(&self, depth: usize, unfinished: Duration, longest: Duration) {
        let labels = QueueLabels {
            name: QUEUE.to_string(),
        };
        self.workqueue_depth
            .get_or_create(&labels)
            .set(depth as i64);
        self.workqueue_unfinished_work_seconds
            .get_or_create(&labels)
            .set(unfinished.as_secs_f64());
        self.workqueue_longest_running_processor_seconds
            .get_or_create(&labels)
            .set(longest.as_secs_f64());
    }
}

/// What the queue reports as it works (client-go's workqueue metrics).
impl crate::queue::QueueObserver for Metrics {
    fn added(&self) {
        self.workqueue_adds_total
            .get_or_create(&QueueLabels {
                name: QUEUE.to_string(),
            })
            .inc();
    }

    fn started(&self, waited: Duration) {
        self.workqueue_queue_duration_seconds
            .get_or_create(&QueueLabels {
                name: QUEUE.to_string(),
            })
            .observe(waited.as_secs_f64());
    }

    fn finished(&self, worked: Duration) {
        self.workqueue_work_duration_seconds
            .get_or_create(&QueueLabels {
                name: QUEUE.to_string(),
            })
            .observe(worked.as_secs_f64());
    }

    fn retried(&self) {
        self.workqueue_retries_total
            .get_or_create(&QueueLabels {
                name: QUEUE.to_string(),
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::Metrics;

    /// The metric names a PromQL expression uses (those of the broker's families).
    fn metric_names(expr: &str) -> Vec<String> {
        const PREFIXES: [&str; 5] = [
            "controller_runtime_",
            "workqueue_",
            "rest_client_",
            "leader_election_",
            "switchyard_",
        ];
        expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|word| PREFIXES.iter().any(|p| word.starts_with(p)))
            .map(str::to_string)
            .collect()
    }

    /// Every query of the shipped Grafana dashboard names a family the broker exports, with
    /// the suffix its type gives its samples (`_total` of a counter, `_bucket` of a histogram).
    #[test]
    fn the_dashboard_queries_what_the_broker_exports() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../deploy/grafana/switchyard.json"
        );
        let dashboard: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        // A family shows in the exposition once it has a sample: give each one.
        let metrics = Metrics::new();
        let took = std::time::Duration::from_millis(3);
        metrics.reconciled("p", "error", took);
        for family in [
            &metrics.applies_total,
            &metrics.prunes_total,
            &metrics.status_writes_total,
        ] {
            metrics.wrote(family, "p", "c", "Deployment");
        }
        metrics.set_packs(&[("p".into(), "1.0.0".into())]);
        metrics.set_watches(1, 2);
        metrics.set_leader("switchyard", true);
        metrics.set_queue(1, took, took);
        {
            use crate::queue::QueueObserver;
            metrics.added();
            metrics.started(took);
            metrics.finished(took);
            metrics.retried();
        }
        let pack = super::PackLabels { pack: "p".into() };
        metrics
            .evaluations_total
            .get_or_create(&super::RuleLabels {
                pack: "p".into(),
                rule: "r".into(),
            })
            .inc();
        metrics
            .evaluation_seconds
            .get_or_create(&pack)
            .observe(0.001);
        metrics.cel_cost_total.get_or_create(&pack).inc();
        metrics.finalizer_writes_total.get_or_create(&pack).inc();
        metrics
            .cluster_members
            .get_or_create(&super::RoleLabels { role: "c".into() })
            .set(1);
        metrics
            .rest_client_requests_total
            .get_or_create(&super::RestLabels {
                code: "200".into(),
                method: "GET".into(),
                host: "h".into(),
            })
            .inc();
        let exposition = metrics.render();
        let type_of = |family: &str| {
            exposition.lines().find_map(|l| {
                l.strip_prefix("# TYPE ")?
                    .strip_prefix(family)?
                    .strip_prefix(' ')
                    .map(str::to_string)
            })
        };
        let mut queried = 0;
        for panel in dashboard["panels"].as_array().unwrap() {
            for target in panel["targets"].as_array().into_iter().flatten() {
                let expr = target["expr"].as_str().unwrap();
                for name in metric_names(expr) {
                    let (family, want) = if let Some(f) = name.strip_suffix("_total") {
                        (f, "counter")
                    } else if let Some(f) = name.strip_suffix("_bucket") {
                        (f, "histogram")
                    } else {
                        (name.as_str(), "gauge")
                    };
                    assert_eq!(
                        type_of(family).as_deref(),
                        Some(want),
                        "panel {:?} queries {name}",
                        panel["title"]
                    );
                    queried += 1;
                }
            }
        }
        // Each of controller-runtime's families the issue names is on the dashboard.
        let text = dashboard.to_string();
        for family in [
            "controller_runtime_reconcile_total",
            "controller_runtime_reconcile_errors_total",
            "controller_runtime_reconcile_time_seconds_bucket",
            "workqueue_depth",
            "workqueue_adds_total",
            "workqueue_queue_duration_seconds_bucket",
            "workqueue_work_duration_seconds_bucket",
            "workqueue_retries_total",
            "workqueue_unfinished_work_seconds",
            "rest_client_requests_total",
            "leader_election_master_status",
        ] {
            assert!(text.contains(family), "{family} not on the dashboard");
        }
        assert!(queried > 20, "{queried} metrics queried");
    }
}
