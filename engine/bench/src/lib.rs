//! Bench-only code: the `kcp-karmada` rule pack against a hand-written Rust equivalent.
//!
//! - [`load_pack`] reads `rules/kcp-karmada` (and the repository's shared partials in
//!   `templates/`) the way `switchyard` reads a pack folder;
//! - [`generate`] builds a deterministic world of `n` FleetWorkloads with their Fleets,
//!   PlacementPolicies and some Karmada ResourceBindings;
//! - [`handwritten()`] renders the same desired objects, status patches and conflicts as
//!   `plan(&pack, &world, now)`, in plain Rust (decision tables as `match`es).
//!
//! Nothing here is used by the engine; the agreement test (`tests/agree.rs`) keeps
//! [`handwritten()`] honest, and `benches/render.rs` compares the two.

mod generate;
pub mod handwritten;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use switchyard_core::plan::parse_inputs;
use switchyard_core::{Pack, PackFiles};

pub use generate::generate;
pub use handwritten::{Rendered, TriggerResult, handwritten};

/// The pack's folder, relative to the repository root.
pub const PACK_DIR: &str = "rules/kcp-karmada";

/// The repository root (this crate lives in `engine/bench`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Reads `rules/kcp-karmada` into [`PackFiles`], with the shared partials of the top-level
/// `templates/` folder (as `switchyard`'s `read_pack` does).
///
/// # Errors
/// A file that cannot be read.
pub fn pack_files() -> Result<PackFiles, String> {
    let root = repo_root();
    let dir = root.join(PACK_DIR);
    let mut files = BTreeMap::new();
    for path in walk(&dir)? {
        let Ok(relative) = path.strip_prefix(&dir) else {
            continue;
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                files.insert(to_slash(relative), text);
            }
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {}
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
    }
    let partials_dir = root.join("templates");
    let mut shared_partials = BTreeMap::new();
    for path in walk(&partials_dir)? {
        if path.extension().and_then(|e| e.to_str()) != Some("hbs") {
            continue;
        }
        let Ok(relative) = path.strip_prefix(&partials_dir) else {
            continue;
        };
        let name = to_slash(relative).trim_end_matches(".hbs").to_string();
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let shown = format!("templates/{}", to_slash(relative));
        shared_partials.insert(name, (shown, text));
    }
    Ok(PackFiles {
        root: PACK_DIR.to_string(),
        files,
        shared_partials,
    })
}

/// Loads the `kcp-karmada` pack.
///
/// # Errors
/// The pack's files cannot be read, or the pack has errors (their diagnostics).
pub fn load_pack() -> Result<Pack, String> {
    let files = pack_files()?;
    let result = switchyard_core::load(&files);
    let messages: Vec<String> = result
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(ToString::to_string)
        .collect();
    match result.pack {
        Some(pack) if messages.is_empty() => Ok(pack),
        _ => Err(messages.join("\n")),
    }
}

/// Input objects as `(cluster role, object)`.
pub type Objects = Vec<(String, serde_json::Value)>;

/// Every input file of the pack's `examples/` and `fixtures/` folders: (path relative to
/// the pack, objects as `(cluster role, object)`), in path order.
///
/// # Errors
/// A file that cannot be read or parsed.
pub fn example_inputs() -> Result<Vec<(String, Objects)>, String> {
    let dir = repo_root().join(PACK_DIR);
    let mut out = Vec::new();
    for folder in ["examples", "fixtures"] {
        for path in walk(&dir.join(folder))? {
            if !matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml")
            ) {
                continue;
            }
            let relative = path
                .strip_prefix(&dir)
                .map(to_slash)
                .unwrap_or_else(|_| path.display().to_string());
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let objects = parse_inputs(&text, &relative, "source").map_err(|d| d.to_string())?;
            out.push((relative, objects));
        }
    }
    Ok(out)
}

/// Every file under `dir`, sorted, skipping hidden entries.
fn walk(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        let entries =
            std::fs::read_dir(&current).map_err(|e| format!("{}: {e}", current.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("{}: {e}", current.display()))?;
            let path = entry.path();
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

fn to_slash(path: &Path) -> String {
    path.to_string_lossy().replace('\\', "/")
}
