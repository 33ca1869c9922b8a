//! The render figure: `switchyard render` (the release binary) of
//! [`fleet_workloads_yaml`], its wall time and peak RSS as `/usr/bin/time -v` reports
//! them.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use sha2::{Digest, Sha256};

use crate::generate::fleet_workloads_yaml;
use crate::pack::{PACK_DIR, repo_root};

/// What one render of the generated input measured.
#[derive(Debug, Clone)]
pub struct RenderFigures {
    pub fleet_workloads: usize,
    pub input_bytes: usize,
    pub output_bytes: usize,
    /// SHA-256 of the rendered YAML.
    pub output_sha256: String,
    pub wall_seconds: f64,
    /// Peak resident set size in KiB (`None` without `/usr/bin/time`).
    pub peak_rss_kib: Option<u64>,
    pub exit_code: Option<i32>,
}

impl std::fmt::Display for RenderFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "switchyard render of {} FleetWorkloads ({:.1} MB in, {:.1} MB out): {:.2} s wall, ",
            self.fleet_workloads,
            self.input_bytes as f64 / 1e6,
            self.output_bytes as f64 / 1e6,
            self.wall_seconds
        )?;
        match self.peak_rss_kib {
            Some(kib) => write!(f, "peak RSS {:.0} MB", kib as f64 / 1024.0)?,
            None => write!(f, "peak RSS unknown (no /usr/bin/time)")?,
        }
        write!(f, ", output sha256 {}", self.output_sha256)
    }
}

/// The `switchyard` binary next to the running bench or example (`target/<profile>/`),
/// built first with the cargo that runs us (`--release`).
///
/// # Errors
/// The build fails or the binary is not where cargo put it.
pub fn release_cli() -> Result<PathBuf, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let status = Command::new(cargo)
        .args([
            "build",
            "--release",
            "--quiet",
            "-p",
            "switchyard-cli",
            "--bin",
            "switchyard",
        ])
        .current_dir(repo_root())
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("cargo build of switchyard-cli failed: {status}"));
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    // target/release/deps/render-<hash> or target/release/examples/render
    let dir = exe
        .parent()
        .and_then(std::path::Path::parent)
        .ok_or_else(|| format!("unexpected location {}", exe.display()))?;
    let bin = dir.join(format!("switchyard{}", std::env::consts::EXE_SUFFIX));
    if bin.exists() {
        Ok(bin)
    } else {
        Err(format!("{} not found after the build", bin.display()))
    }
}

/// Renders `n` generated FleetWorkloads with `cli` (the `switchyard` binary) and measures it.
///
/// # Errors
/// The input cannot be written or the binary cannot be run.
pub fn measure_render(cli: &std::path::Path, n: usize) -> Result<RenderFigures, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let input = dir.path().join("fleet-workloads.yaml");
    let output = dir.path().join("rendered.yaml");
    let text = fleet_workloads_yaml(n);
    std::fs::write(&input, &text).map_err(|e| e.to_string())?;
    let time = std::path::Path::new("/usr/bin/time");
    let mut command = if time.exists() {
        let mut c = Command::new(time);
        c.arg("-v").arg(cli);
        c
    } else {
        Command::new(cli)
    };
    command
        .arg("render")
        .arg("--pack")
        .arg(repo_root().join(PACK_DIR))
        .arg("--input")
        .arg(&input)
        .args(["--clock", "2026-01-01T00:00:00Z"])
        .stdout(std::fs::File::create(&output).map_err(|e| e.to_string())?)
        .stderr(Stdio::piped());
    let start = Instant::now();
    let result = command
        .output()
        .map_err(|e| format!("cannot run switchyard: {e}"))?;
    let wall_seconds = start.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&result.stderr);
    let peak_rss_kib = stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("Maximum resident set size (kbytes):"))
        .and_then(|v| v.trim().parse().ok());
    let rendered = std::fs::read(&output).map_err(|e| e.to_string())?;
    Ok(RenderFigures {
        fleet_workloads: n,
        input_bytes: text.len(),
        output_bytes: rendered.len(),
        output_sha256: format!("{:x}", Sha256::digest(&rendered)),
        wall_seconds,
        peak_rss_kib,
        exit_code: result.status.code(),
    })
}
