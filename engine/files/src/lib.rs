//! Reading packs and inputs from disk: the only file-system code of the dry-run commands and
//! of the broker's pack loading. The core does no I/O; this crate turns folders into
//! [`PackFiles`] and CRD documents for it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use switchyard_core::diagnostic::Diagnostic;
use switchyard_core::plan::parse_inputs;
use switchyard_core::{LoadOptions, LoadResult, PackFiles};

/// Why files could not be read. The messages are what `switchyard` prints after `error: `.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// A path given by the user that is not usable (a pack folder that does not exist).
    #[error("{0}")]
    Usage(String),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// A file whose contents cannot be used (invalid YAML, an input that is not an object).
    #[error("{0}")]
    Input(String),
}

impl FileError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        FileError::Io {
            path: display(path),
            source,
        }
    }
}

/// Reads a pack folder and the CRDs it is checked against, and loads it: what every command
/// and the broker do with a pack folder. `partials` and `crds` default as in [`read_pack`]
/// and [`read_crds`]. Diagnostics (errors included) are in the [`LoadResult`]; only files
/// that cannot be read are an `Err`.
pub fn load_pack_dir(
    dir: &Path,
    partials: Option<&Path>,
    crds: &[PathBuf],
) -> Result<(PackFiles, LoadResult), FileError> {
    let files = read_pack(dir, partials)?;
    let options = LoadOptions {
        crds: read_crds(dir, crds)?,
    };
    let result = switchyard_core::load_with(&files, &options);
    Ok((files, result))
}

/// Reads every text file under `dir` into a [`PackFiles`], with the shared partials of the
/// nearest `templates/` folder above the pack (or `partials` when given).
pub fn read_pack(dir: &Path, partials: Option<&Path>) -> Result<PackFiles, FileError> {
    if !dir.is_dir() {
        return Err(FileError::Usage(format!(
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
            Err(e) => return Err(FileError::io(&path, e)),
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
            let text = std::fs::read_to_string(&path).map_err(|e| FileError::io(&path, e))?;
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
/// has one. The partials folder [`read_pack`] uses when none is given.
pub fn find_shared_templates(pack: &Path) -> Option<PathBuf> {
    find_above(pack, "templates")
}

/// The nearest `config/crds/` folder above the pack: the CRDs [`read_crds`] reads when none
/// are given.
pub fn find_crds(pack: &Path) -> Option<PathBuf> {
    find_above(pack, "config/crds")
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
pub fn read_crds(pack: &Path, paths: &[PathBuf]) -> Result<Vec<serde_json::Value>, FileError> {
    let paths: Vec<PathBuf> = if paths.is_empty() {
        find_crds(pack).into_iter().collect()
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
            let text = std::fs::read_to_string(&file).map_err(|e| FileError::io(&file, e))?;
            let documents = switchyard_core::yaml::parse_documents(&text).map_err(|e| {
                FileError::Input(format!(
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
) -> Result<Vec<(String, serde_json::Value)>, FileError> {
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
            let text = std::fs::read_to_string(&file).map_err(|e| FileError::io(&file, e))?;
            let mut found = parse_inputs(&text, &display(&file), default_cluster)
                .map_err(|d: Box<Diagnostic>| FileError::Input(d.to_string()))?;
            objects.append(&mut found);
        }
    }
    Ok(objects)
}

/// Every file under `dir`, sorted, skipping hidden entries.
pub fn walk(dir: &Path) -> Result<Vec<PathBuf>, FileError> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        let entries = std::fs::read_dir(&current).map_err(|e| FileError::io(&current, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| FileError::io(&current, e))?;
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

/// How a path is shown in messages and diagnostics: forward slashes, no leading `./`.
pub fn display(path: &Path) -> String {
    to_slash(path).trim_start_matches("./").to_string()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    #[test]
    fn a_pack_folder_loads_with_the_repository_partials_and_crds() {
        let pack = root().join("rules/kcp-karmada");
        let (files, result) = load_pack_dir(&pack, None, &[]).unwrap();
        assert!(files.files.contains_key("pack.yaml"));
        assert!(files.shared_partials.contains_key("common/source-labels"));
        assert!(!result.has_errors(), "{:?}", result.diagnostics);
        assert_eq!(result.pack.unwrap().name(), "kcp-karmada");
        assert_eq!(
            find_crds(&pack).unwrap(),
            root().canonicalize().unwrap().join("config/crds")
        );
        assert!(!read_crds(&pack, &[]).unwrap().is_empty());
    }

    #[test]
    fn errors_name_the_path() {
        let missing = Path::new("tests/fixtures/packs/does-not-exist");
        let Err(error) = load_pack_dir(missing, None, &[]) else {
            panic!("a missing folder loads");
        };
        assert_eq!(
            error.to_string(),
            "pack folder `tests/fixtures/packs/does-not-exist` does not exist"
        );
        let error = walk(Path::new("./no/such/dir")).unwrap_err().to_string();
        assert!(error.starts_with("no/such/dir: "), "{error}");
    }
}
