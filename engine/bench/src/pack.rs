//! The `kcp-karmada` pack and the inputs of its examples, read the way `switchyard` reads a
//! pack folder.

use std::path::{Path, PathBuf};

use switchyard_core::plan::parse_inputs;
use switchyard_core::{Pack, PackFiles};
use switchyard_files::{display, read_pack, walk};

/// The pack's folder, relative to the repository root.
pub const PACK_DIR: &str = "rules/kcp-karmada";

/// The repository root (this crate lives in `engine/bench`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Reads `rules/kcp-karmada` into [`PackFiles`], with the shared partials of the top-level
/// `templates/` folder, exactly as `switchyard` reads a pack folder.
///
/// # Errors
/// A file that cannot be read.
pub fn pack_files() -> Result<PackFiles, String> {
    let root = repo_root();
    let mut files = read_pack(&root.join(PACK_DIR), Some(&root.join("templates")))
        .map_err(|e| e.to_string())?;
    files.root = PACK_DIR.to_string();
    Ok(files)
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
    let pack = load_pack()?;
    let mut out = Vec::new();
    for folder in ["examples", "fixtures"] {
        for path in walk(&dir.join(folder)).map_err(|e| e.to_string())? {
            if !matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml")
            ) {
                continue;
            }
            let relative = path
                .strip_prefix(&dir)
                .map(display)
                .unwrap_or_else(|_| path.display().to_string());
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let mut objects =
                parse_inputs(&text, &relative, "source").map_err(|d| d.to_string())?;
            // Each object in its workspace (`source/<workspace>`), as the dry run reads it.
            pack.place_all(&mut objects)?;
            out.push((relative, objects));
        }
    }
    Ok(out)
}
