//! Reading packs and inputs from disk: the only file-system code of the dry-run commands.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use switchyard_core::PackFiles;
use switchyard_core::diagnostic::Diagnostic;
use switchyard_core::plan::parse_inputs;

use crate::CliError;

/// Reads every text file under `dir` into a [`PackFiles`], with the shared partials of the
/// nearest `templates/` folder above the pack (or `partials` when given).
pub fn read_pack(dir: &Path, partials: Option<&Path>) -> Result<PackFiles, CliError> {
    if !dir.is_dir() {
        return Err(CliError::Usage(format!(
            "pack folder `{}` does not exist",
            dir.display()
        )));
    }
    let mut files = BTreeMap::new();
    for path in walk(dir)? {
        let Ok(relative) = path.strip_prefix(dir) else {
            continue;
        };
        let relative = to_slash(relative);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                files.insert(relative, text);
            }
            // Binary files (images in docs) are not part of the pack.
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {}
            Err(e) => return Err(CliError::io(&path, e)),
        }
    }
    let mut shared_partials = BTreeMap::new();
    let partials_dir = match partials {
        Some(p) => Some(p.to_path_buf()),
        None => find_shared_templates(dir),
    };
    if let Some(partials_dir) = partials_dir {
        for path in walk(&partials_dir)? {
            if path.extension().and_then(|e| e.to_str()) != Some("hbs") {
                continue;
            }
            let Ok(relative) = path.strip_prefix(&partials_dir) else {
                continue;
            };
            let name = to_slash(relative);
            let name = name.trim_end_matches(".hbs").to_string();
            let text = std::fs::read_to_string(&path).map_err(|e| CliError::io(&path, e))?;
            shared_partials.insert(name, (display(&path), text));
        }
    }
    Ok(PackFiles {
        root: display(dir),
        files,
        shared_partials,
    })
}

/// The repository's shared `templates/` folder: the first ancestor of the pack's parent that
/// has one.
fn find_shared_templates(pack: &Path) -> Option<PathBuf> {
    find_above(pack, "templates")
}

/// The first ancestor of the pack's parent that has the folder `relative`.
fn find_above(pack: &Path, relative: &str) -> Option<PathBuf> {
    let absolute = pack.canonicalize().ok()?;
    absolute
        .parent()?
        .ancestors()
        .map(|a| a.join(relative))
        .find(|t| t.is_dir())
}

/// Reads CustomResourceDefinitions from files and folders (`*.yaml`, `*.yml`, `*.json`),
/// default the nearest `config/crds/` above the pack. Documents of other kinds are skipped.
pub fn read_crds(pack: &Path, paths: &[PathBuf]) -> Result<Vec<serde_json::Value>, CliError> {
    let paths: Vec<PathBuf> = if paths.is_empty() {
        find_above(pack, "config/crds").into_iter().collect()
    } else {
        paths.to_vec()
    };
    let mut crds = Vec::new();
    for path in paths {
        let files = if path.is_dir() {
            walk(&path)?
        } else {
            vec![path.clone()]
        };
        for file in files {
            if !matches!(
                file.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml" | "json")
            ) {
                continue;
            }
            let text = std::fs::read_to_string(&file).map_err(|e| CliError::io(&file, e))?;
            let documents = switchyard_core::yaml::parse_documents(&text).map_err(|e| {
                CliError::Input(format!(
                    "{}:{}:{}: invalid YAML: {}",
                    display(&file),
                    e.pos.line,
                    e.pos.column,
                    e.message
                ))
            })?;
            crds.extend(
                documents
                    .iter()
                    .map(switchyard_core::yaml::Node::to_json)
                    .filter(|d| {
                        d.get("kind").and_then(|k| k.as_str()) == Some("CustomResourceDefinition")
                    }),
            );
        }
    }
    Ok(crds)
}

/// Reads input objects from files and folders (recursively, `*.yaml` and `*.yml`, in name
/// order).
pub fn read_inputs(
    paths: &[PathBuf],
    default_cluster: &str,
) -> Result<Vec<(String, serde_json::Value)>, CliError> {
    let mut objects = Vec::new();
    for path in paths {
        let files = if path.is_dir() {
            walk(path)?
                .into_iter()
                .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")))
                .collect()
        } else {
            vec![path.clone()]
        };
        for file in files {
            let text = std::fs::read_to_string(&file).map_err(|e| CliError::io(&file, e))?;
            let mut found = parse_inputs(&text, &display(&file), default_cluster)
                .map_err(|d: Box<Diagnostic>| CliError::Input(d.to_string()))?;
            objects.append(&mut found);
        }
    }
    Ok(objects)
}

/// Every file under `dir`, sorted, skipping hidden entries.
pub fn walk(dir: &Path) -> Result<Vec<PathBuf>, CliError> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        let entries = std::fs::read_dir(&current).map_err(|e| CliError::io(&current, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| CliError::io(&current, e))?;
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

pub fn display(path: &Path) -> String {
    to_slash(path).trim_start_matches("./").to_string()
}
