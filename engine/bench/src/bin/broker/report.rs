//! The figures a run collects, and the summary table against the targets.

use std::time::Duration;

use switchyard_kube::controller::Writes;

use crate::figures::{MIB, cpu_secs, int, per_second, secs, total};

/// Targets of the broker benchmark.
pub(crate) const TARGET_RATIO: f64 = 1.5;
pub(crate) const TARGET_RSS_MIB: f64 = 150.0;
pub(crate) const TARGET_RELOAD_OVERHEAD: Duration = Duration::from_secs(1);

/// The figures, filled in as the steps run (a step that did not run leaves `None`).
#[derive(Default)]
pub(crate) struct Report {
    pub(crate) triggers: usize,
    pub(crate) desired: usize,
    pub(crate) edited: usize,
    pub(crate) converge: Option<Duration>,
    pub(crate) converge_writes: Option<Writes>,
    pub(crate) verified: Option<String>,
    pub(crate) peak_rss_kib: Option<u64>,
    pub(crate) resync: Option<(Writes, u64)>,
    pub(crate) reload: Option<Duration>,
    pub(crate) reload_writes: Option<Writes>,
    pub(crate) floor: Option<Duration>,
    pub(crate) floor_writes: u64,
    pub(crate) floor_reload: Option<Duration>,
    pub(crate) reload_placed: Option<Duration>,
    pub(crate) reload_placed_writes: Option<Writes>,
    pub(crate) floor_reload_placed: Option<Duration>,
    /// CPU ticks of every process (etcd, API servers, broker, this benchmark) while
    /// converging and during the floor.
    pub(crate) converge_cpu: Option<u64>,
    pub(crate) floor_cpu: Option<u64>,
}

pub(crate) fn print_summary(report: &Report) {
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
