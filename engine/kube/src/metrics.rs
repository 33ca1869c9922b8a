//! The broker's metrics registry: counters and gauges with labels, rendered in Prometheus'
//! text exposition format at `/metrics`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Mutex, MutexGuard};

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
