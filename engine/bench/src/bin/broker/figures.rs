//! Figures as text (counts, durations, rates, writes), and the measures behind them: CPU
//! ticks of the process tree, the load average, a free port.

use std::net::TcpListener;
use std::time::Duration;

use switchyard_kube::controller::Writes;

use crate::error::Res;

pub(crate) const MIB: f64 = 1024.0 * 1024.0;

pub(crate) fn int(n: u64) -> String {
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

pub(crate) fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

pub(crate) fn per_second(count: u64, d: Duration) -> String {
    format!("{:.0}/s", count as f64 / d.as_secs_f64().max(1e-9))
}

pub(crate) fn writes_text(w: &Writes) -> String {
    format!(
        "{} applies, {} status, {} finalizers, {} deletes",
        int(w.applies),
        int(w.status),
        int(w.finalizers),
        int(w.deletes)
    )
}

pub(crate) fn delta(after: &Writes, before: &Writes) -> Writes {
    Writes {
        applies: after.applies - before.applies,
        status: after.status - before.status,
        deletes: after.deletes - before.deletes,
        finalizers: after.finalizers - before.finalizers,
    }
}

pub(crate) fn total(w: &Writes) -> u64 {
    w.applies + w.status + w.deletes + w.finalizers
}

/// The 1-minute load average of the machine (it is shared: other work slows every figure).
pub(crate) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".to_string())
}

/// CPU time (clock ticks of 1/100 s, user + system) used so far by this process and its live
/// children: etcd, the API servers and the broker process.
pub(crate) fn tree_cpu_ticks() -> Res<u64> {
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

/// A `/proc/PID/status` field of a process in kB (`VmHWM`: its peak resident set, `VmRSS`).
pub(crate) fn process_memory_kib(pid: u32, field: &str) -> Res<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let prefix = format!("{field}:");
    let line = status
        .lines()
        .find(|l| l.starts_with(&prefix))
        .ok_or_else(|| format!("no {field} in /proc/{pid}/status"))?;
    let kib = line
        .trim_start_matches(&prefix)
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()?;
    Ok(kib)
}

/// CPU time used by a process (user + system), in clock ticks of 1/100 s.
pub(crate) fn process_cpu_ticks(pid: u32) -> Res<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after = stat.rsplit_once(')').ok_or("malformed /proc/PID/stat")?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 of stat(5), counted from the state (field 3).
    let utime: u64 = fields.get(11).ok_or("no utime")?.parse()?;
    let stime: u64 = fields.get(12).ok_or("no stime")?.parse()?;
    Ok(utime + stime)
}

pub(crate) fn cpu_secs(ticks: u64) -> String {
    format!("{:.1} s", ticks as f64 / 100.0)
}

pub(crate) fn free_port() -> Res<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}
