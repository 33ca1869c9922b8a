//! Reading packs and inputs from disk: the only file-system code of the dry-run commands and
//! of the broker's pack loading. The core does no I/O; this crate turns folders into
//! [`PackFiles`] and CRD documents for it.

use std::collections::{BTreeMap, BTreeSet, HashSet};
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

/// Bounds on what is read from one folder (a pack, the shared partials, a CRD folder).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest file read.
    pub file_bytes: u64,
    /// All files read, together.
    pub total_bytes: u64,
    /// Files and folders visited.
    pub entries: usize,
}

/// A pack (and the shared partials folder): far above any real pack, far below what hurts.
pub const PACK_LIMITS: Limits = Limits {
    file_bytes: 4 << 20,
    total_bytes: 64 << 20,
    entries: 10_000,
};

/// CRD folders: generated CRDs of large APIs run to a few MiB each.
pub const CRD_LIMITS: Limits = Limits {
    file_bytes: 16 << 20,
    total_bytes: 256 << 20,
    entries: 10_000,
};

/// The largest input file (`--input`) read.
pub const INPUT_FILE_BYTES: u64 = 64 << 20;

/// The folders of a pack and the extensions of the files read from them (at any depth). The
/// files tests name (golden files, `inputFiles`) are read wherever they are in the pack;
/// nothing else is (a README, docs).
const PACK_FOLDERS: &[(&str, &[&str])] = &[
    ("rules", &["yaml", "yml"]),
    ("tables", &["yaml", "yml", "csv"]),
    ("templates", &["hbs"]),
    ("tests", &["yaml", "yml"]),
    ("examples", &["yaml", "yml", "json"]),
    ("fixtures", &["yaml", "yml", "json"]),
];

/// Reads a pack folder into a [`PackFiles`], with the shared partials of the nearest
/// `templates/` folder above the pack (or `partials` when given).
///
/// Only the files the pack format uses are read: `pack.yaml`, `rules/**.yaml`,
/// `tables/**.{yaml,csv}`, `templates/**.hbs`, `tests/**.yaml`, `examples/**` and
/// `fixtures/**` (`.yaml`, `.json`), and the files its tests and tables name (golden files).
/// Within [`PACK_LIMITS`]; a
/// symbolic link that leads outside the pack folder, or anything that is neither a regular
/// file nor a folder (a FIFO, a socket, a device), is an error naming it and is never opened.
/// Links that stay inside are followed: a ConfigMap volume is links through `..data`. Hidden
/// entries are skipped. The shared partials folder follows the same rules within itself.
pub fn read_pack(dir: &Path, partials: Option<&Path>) -> Result<PackFiles, FileError> {
    if !dir.is_dir() {
        return Err(FileError::Usage(format!(
            "pack folder `{}` does not exist",
            dir.display()
        )));
    }
    let mut pack = Confined::open(dir, ("pack", "a pack file"), PACK_LIMITS)?;
    let mut files = BTreeMap::new();
    if let Some(real) = pack.find("pack.yaml")?
        && let Some(text) = pack.read("pack.yaml", &real)?
    {
        files.insert("pack.yaml".to_string(), text);
    }
    for (folder, extensions) in PACK_FOLDERS {
        for (key, real) in pack.walk(folder, extensions)? {
            if let Some(text) = pack.read(&key, &real)? {
                files.insert(key, text);
            }
        }
    }
    for key in referenced_files(&files) {
        if !files.contains_key(&key)
            && let Some(real) = pack.find(&key)?
            && let Some(text) = pack.read(&key, &real)?
        {
            files.insert(key, text);
        }
    }
    let mut shared_partials = BTreeMap::new();
    let partials_dir = match partials {
        Some(p) => Some(p.to_path_buf()),
        None => find_shared_templates(dir),
    };
    if let Some(partials_dir) = partials_dir {
        let mut folder =
            Confined::open(&partials_dir, ("partials folder", "a partial"), PACK_LIMITS)?;
        for (key, real) in folder.walk("", &["hbs"])? {
            let path = partials_dir.join(&key);
            let text = folder.read(&key, &real)?.ok_or_else(|| not_utf8(&path))?;
            let name = key.trim_end_matches(".hbs").to_string();
            shared_partials.insert(name, (display(&path), text));
        }
    }
    Ok(PackFiles {
        root: display(dir),
        files,
        shared_partials,
    })
}

/// The files a pack's tests and tables name, as keys of [`PackFiles`]: `inputFiles` and
/// `expect.golden` of the suites directly in `tests/` (where the core finds suites), and
/// `rowsFrom` of tables. Paths that are not inside the pack are left out (the core reports
/// them); so are documents that do not parse (likewise).
fn referenced_files(files: &BTreeMap<String, String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (key, text) in files {
        let suite = key
            .strip_prefix("tests/")
            .is_some_and(|name| !name.contains('/'));
        let table = key.starts_with("tables/");
        if !(suite || table) || !(key.ends_with(".yaml") || key.ends_with(".yml")) {
            continue;
        }
        let Ok(documents) = switchyard_core::yaml::parse_documents(text) else {
            continue;
        };
        for document in documents.iter().map(switchyard_core::yaml::Node::to_json) {
            let spec = &document["spec"];
            if suite {
                for case in spec["cases"].as_array().into_iter().flatten() {
                    let inputs = case["inputFiles"].as_array().into_iter().flatten();
                    let named = inputs.chain(std::iter::once(&case["expect"]["golden"]));
                    out.extend(
                        named
                            .filter_map(serde_json::Value::as_str)
                            .filter_map(|p| switchyard_core::testing::pack_path(p).ok()),
                    );
                }
            } else if let Some(rows) = spec["rowsFrom"].as_str() {
                // The core looks the rows file up beside the table, unnormalised.
                let folder = key.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
                let wanted = format!("{folder}/{rows}");
                if switchyard_core::testing::pack_path(&wanted).as_deref() == Ok(wanted.as_str()) {
                    out.insert(wanted);
                }
            }
        }
    }
    out
}

/// What an entry of a confined folder is, by its canonical path.
enum Entry {
    File(PathBuf),
    Folder(PathBuf),
}

/// A folder read as a closed world: every path is resolved and must stay inside it, only
/// regular files are opened, and reading stops at its [`Limits`].
struct Confined {
    /// The folder as given, for messages.
    shown: PathBuf,
    /// The folder, canonical: what every resolved path must be under.
    root: PathBuf,
    /// For messages: "pack", "partials folder", "CRD folder".
    what: &'static str,
    /// For the size limit's message: "a pack file".
    file_what: &'static str,
    limits: Limits,
    entries: usize,
    bytes: u64,
}

impl Confined {
    fn open(
        dir: &Path,
        (what, file_what): (&'static str, &'static str),
        limits: Limits,
    ) -> Result<Self, FileError> {
        let root = dir.canonicalize().map_err(|e| FileError::io(dir, e))?;
        Ok(Confined {
            shown: dir.to_path_buf(),
            root,
            what,
            file_what,
            limits,
            entries: 0,
            bytes: 0,
        })
    }

    fn shown(&self, key: &str) -> String {
        if key.is_empty() {
            display(&self.shown)
        } else {
            display(&self.shown.join(key))
        }
    }

    /// What `real` (a path in a canonical folder inside the root) is, `None` when it does not
    /// exist. Nothing is opened.
    fn resolve(&self, real: &Path, key: &str) -> Result<Option<Entry>, FileError> {
        let meta = match std::fs::symlink_metadata(real) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(FileError::io(&self.shown.join(key), e)),
        };
        let kind = meta.file_type();
        if kind.is_dir() {
            return Ok(Some(Entry::Folder(real.to_path_buf())));
        }
        if kind.is_file() {
            return Ok(Some(Entry::File(real.to_path_buf())));
        }
        if !kind.is_symlink() {
            return Err(FileError::Input(format!(
                "{}: not a regular file or folder ({}); a {} holds only files and folders",
                self.shown(key),
                kind_of(&kind),
                self.what
            )));
        }
        let target = real.canonicalize().map_err(|e| {
            FileError::Input(format!(
                "{}: symbolic link does not resolve ({e})",
                self.shown(key)
            ))
        })?;
        if !target.starts_with(&self.root) {
            return Err(FileError::Input(format!(
                "{}: symbolic link leads outside the {} (to {})",
                self.shown(key),
                self.what,
                target.display()
            )));
        }
        let kind = std::fs::symlink_metadata(&target)
            .map_err(|e| FileError::io(&self.shown.join(key), e))?
            .file_type();
        if kind.is_dir() {
            Ok(Some(Entry::Folder(target)))
        } else if kind.is_file() {
            Ok(Some(Entry::File(target)))
        } else {
            Err(FileError::Input(format!(
                "{}: symbolic link to {}, which is {}; a {} holds only files and folders",
                self.shown(key),
                target.display(),
                kind_of(&kind),
                self.what
            )))
        }
    }

    /// The canonical path of the file `key` (normalised, relative), when it exists.
    fn find(&mut self, key: &str) -> Result<Option<PathBuf>, FileError> {
        let mut real = self.root.clone();
        let mut walked = String::new();
        let parts: Vec<&str> = key.split('/').collect();
        for (i, part) in parts.iter().enumerate() {
            if !walked.is_empty() {
                walked.push('/');
            }
            walked.push_str(part);
            self.count()?;
            match self.resolve(&real.join(part), &walked)? {
                None => return Ok(None),
                Some(Entry::Folder(folder)) if i + 1 < parts.len() => real = folder,
                Some(Entry::File(file)) if i + 1 == parts.len() => return Ok(Some(file)),
                // A file where a folder is named, or the reverse: the file does not exist.
                Some(_) => return Ok(None),
            }
        }
        Ok(None)
    }

    /// Every file under the folder `folder` (`""`: the root) with one of `extensions`, as
    /// (key relative to the root, canonical path), sorted by key. Hidden entries are skipped.
    fn walk(
        &mut self,
        folder: &str,
        extensions: &[&str],
    ) -> Result<Vec<(String, PathBuf)>, FileError> {
        let start = if folder.is_empty() {
            self.root.clone()
        } else {
            self.count()?;
            match self.resolve(&self.root.join(folder), folder)? {
                Some(Entry::Folder(real)) => real,
                _ => return Ok(Vec::new()),
            }
        };
        let mut out = Vec::new();
        let mut stack = vec![(folder.to_string(), start)];
        while let Some((prefix, real)) = stack.pop() {
            let shown = if prefix.is_empty() {
                self.shown.clone()
            } else {
                self.shown.join(&prefix)
            };
            let entries = std::fs::read_dir(&real).map_err(|e| FileError::io(&shown, e))?;
            for entry in entries {
                let entry = entry.map_err(|e| FileError::io(&shown, e))?;
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with('.') {
                    continue;
                }
                self.count()?;
                let key = if prefix.is_empty() {
                    name
                } else {
                    format!("{prefix}/{name}")
                };
                match self.resolve(&real.join(entry.file_name()), &key)? {
                    Some(Entry::Folder(child)) => {
                        // A link back up would walk forever (until the entry limit).
                        if real.starts_with(&child) {
                            return Err(FileError::Input(format!(
                                "{}: symbolic link loops back to a folder above it",
                                self.shown(&key)
                            )));
                        }
                        stack.push((key, child));
                    }
                    Some(Entry::File(file)) => {
                        let wanted = Path::new(&key)
                            .extension()
                            .and_then(|e| e.to_str())
                            .is_some_and(|e| extensions.contains(&e));
                        if wanted {
                            out.push((key, file));
                        }
                    }
                    None => {}
                }
            }
        }
        out.sort();
        Ok(out)
    }

    fn count(&mut self) -> Result<(), FileError> {
        self.entries += 1;
        if self.entries > self.limits.entries {
            return Err(FileError::Input(format!(
                "{}: more than {} files and folders, the limit for a {}",
                display(&self.shown),
                self.limits.entries,
                self.what
            )));
        }
        Ok(())
    }

    /// The text of the regular file `real` (`key` in messages); `None` when it is not UTF-8
    /// (binary files are not part of a pack).
    fn read(&mut self, key: &str, real: &Path) -> Result<Option<String>, FileError> {
        let shown = self.shown.join(key);
        let bytes = read_limited(&shown, real, self.limits.file_bytes, self.file_what)?;
        self.bytes += bytes.len() as u64;
        if self.bytes > self.limits.total_bytes {
            return Err(FileError::Input(format!(
                "{}: the files read hold more than {}, the limit for a {}",
                display(&self.shown),
                size(self.limits.total_bytes),
                self.what
            )));
        }
        Ok(String::from_utf8(bytes).ok())
    }
}

/// The contents of the regular file `path` (`shown` in messages), at most `limit` bytes.
/// Anything else (a FIFO would block, a device never ends) is refused before it is opened.
fn read_limited(shown: &Path, path: &Path, limit: u64, what: &str) -> Result<Vec<u8>, FileError> {
    use std::io::Read;
    let kind = std::fs::metadata(path)
        .map_err(|e| FileError::io(shown, e))?
        .file_type();
    if !kind.is_file() {
        return Err(FileError::Input(format!(
            "{}: not a regular file ({})",
            display(shown),
            kind_of(&kind)
        )));
    }
    let too_large = |bytes: u64| {
        FileError::Input(format!(
            "{}: the file has {bytes} bytes, more than the limit of {} for {what}",
            display(shown),
            size(limit)
        ))
    };
    let file = std::fs::File::open(path).map_err(|e| FileError::io(shown, e))?;
    let length = file.metadata().map_err(|e| FileError::io(shown, e))?.len();
    if length > limit {
        return Err(too_large(length));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(length).unwrap_or(0));
    // The file may grow after the size check.
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| FileError::io(shown, e))?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// A limit for messages: `4 MiB`.
fn size(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
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
        // A folder is confined to itself as a pack is; a file named on the command line is
        // the user's choice, so only its kind and size are checked.
        let mut texts = Vec::new();
        if path.is_dir() {
            let mut folder = Confined::open(&path, ("CRD folder", "a CRD file"), CRD_LIMITS)?;
            for (key, real) in folder.walk("", &["yaml", "yml", "json"])? {
                let file = path.join(&key);
                let text = folder.read(&key, &real)?.ok_or_else(|| not_utf8(&file))?;
                texts.push((file, text));
            }
        } else {
            let bytes = read_limited(&path, &path, CRD_LIMITS.file_bytes, "a CRD file")?;
            let text = String::from_utf8(bytes).map_err(|_| not_utf8(&path))?;
            texts.push((path.clone(), text));
        }
        for (file, text) in texts {
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

/// Where in an input file the first byte that is not UTF-8 is: `file:line:col: ...`.
fn not_utf8_at(path: &Path, error: &std::string::FromUtf8Error) -> FileError {
    let valid = &error.as_bytes()[..error.utf8_error().valid_up_to()];
    let line = valid.iter().filter(|b| **b == b'\n').count() + 1;
    let line_start = valid.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let column = String::from_utf8_lossy(&valid[line_start..])
        .chars()
        .count()
        + 1;
    FileError::Input(format!(
        "{}:{line}:{column}: not UTF-8 (byte 0x{:02x})",
        display(path),
        error
            .as_bytes()
            .get(valid.len())
            .copied()
            .unwrap_or_default()
    ))
}

fn not_utf8(path: &Path) -> FileError {
    FileError::io(
        path,
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        ),
    )
}

/// Reads input objects from files and folders (recursively, `*.yaml` and `*.yml`, in name
/// order). The user chose them, so symbolic links are followed; anything but a regular file
/// (a FIFO would block) and files over [`INPUT_FILE_BYTES`] are refused.
pub fn read_inputs(
    paths: &[PathBuf],
    default_cluster: &str,
) -> Result<Vec<(String, serde_json::Value)>, FileError> {
    read_inputs_checked(paths, default_cluster, &mut |_| Ok(()))
}

/// [`read_inputs`], calling `check` with the number of objects read so far before each
/// file is read and after the last: an `Err` from it stops the reading with its message
/// (the command's memory budget).
pub fn read_inputs_checked(
    paths: &[PathBuf],
    default_cluster: &str,
    check: &mut dyn FnMut(usize) -> Result<(), String>,
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
            check(objects.len()).map_err(FileError::Input)?;
            let bytes = read_limited(&file, &file, INPUT_FILE_BYTES, "an input file")?;
            let text = String::from_utf8(bytes).map_err(|e| not_utf8_at(&file, &e))?;
            let mut found = parse_inputs(&text, &display(&file), default_cluster)
                .map_err(|d: Box<Diagnostic>| FileError::Input(d.to_string()))?;
            objects.append(&mut found);
        }
    }
    check(objects.len()).map_err(FileError::Input)?;
    Ok(objects)
}

/// The most files and folders [`walk`] visits.
pub const WALK_ENTRIES: usize = 100_000;

/// Every file under `dir`, sorted, skipping hidden entries. Symbolic links are followed (the
/// user named the folder), but a folder is visited once, so a link loop ends, and at most
/// [`WALK_ENTRIES`] entries are visited. Nothing is opened: readers check what they read.
pub fn walk(dir: &Path) -> Result<Vec<PathBuf>, FileError> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut visited = 0usize;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        if let Ok(real) = current.canonicalize()
            && !seen.insert(real)
        {
            continue;
        }
        let entries = std::fs::read_dir(&current).map_err(|e| FileError::io(&current, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| FileError::io(&current, e))?;
            let path = entry.path();
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            visited += 1;
            if visited > WALK_ENTRIES {
                return Err(FileError::Input(format!(
                    "{}: more than {WALK_ENTRIES} files and folders",
                    display(dir)
                )));
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

/// Writes `text` to the file `relative` of the pack folder `pack` (what `switchyard test
/// --update` does with golden files), confined to the pack as reads are: `relative` must pass
/// [`switchyard_core::testing::pack_path`], missing folders are created inside the pack only,
/// and no symbolic link on the way (folders or the file itself) may lead outside the pack or
/// to anything but a folder or a regular file. Returns the path written.
pub fn write_pack_file(pack: &Path, relative: &str, text: &str) -> Result<PathBuf, FileError> {
    let key = switchyard_core::testing::pack_path(relative)
        .map_err(|reason| FileError::Input(format!("`{relative}`: {reason}")))?;
    let root = pack.canonicalize().map_err(|e| FileError::io(pack, e))?;
    let mut parts: Vec<&str> = key.split('/').collect();
    let Some(name) = parts.pop() else {
        return Err(FileError::Input(format!("`{relative}`: not a file")));
    };
    let mut current = root.clone();
    let mut shown = pack.to_path_buf();
    for part in parts {
        shown.push(part);
        let next = current.join(part);
        current = match std::fs::symlink_metadata(&next) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir(&next).map_err(|e| FileError::io(&shown, e))?;
                next
            }
            Err(e) => return Err(FileError::io(&shown, e)),
            Ok(m) if m.is_dir() => next,
            Ok(m) if m.file_type().is_symlink() => {
                let target = inside_link(&root, &next, &shown)?;
                if !target.is_dir() {
                    return Err(FileError::Input(format!(
                        "{}: not a folder (a symbolic link to {})",
                        display(&shown),
                        target.display()
                    )));
                }
                target
            }
            Ok(m) => {
                return Err(FileError::Input(format!(
                    "{}: not a folder ({})",
                    display(&shown),
                    kind_of(&m.file_type())
                )));
            }
        };
    }
    shown.push(name);
    let mut target = current.join(name);
    match std::fs::symlink_metadata(&target) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(FileError::io(&shown, e)),
        Ok(m) if m.is_file() => {}
        Ok(m) if m.file_type().is_symlink() => {
            target = inside_link(&root, &target, &shown)?;
            let kind = std::fs::symlink_metadata(&target)
                .map_err(|e| FileError::io(&shown, e))?
                .file_type();
            if !kind.is_file() {
                return Err(FileError::Input(format!(
                    "{}: symbolic link to {}, which is {}",
                    display(&shown),
                    target.display(),
                    kind_of(&kind)
                )));
            }
        }
        Ok(m) => {
            return Err(FileError::Input(format!(
                "{}: not a regular file ({})",
                display(&shown),
                kind_of(&m.file_type())
            )));
        }
    }
    // A new file renamed over the target: writing in place would follow a link swapped in
    // after the checks, or change every hard link of the file, some of which may be outside.
    let folder = target.parent().unwrap_or(&root);
    let temporary = folder.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temporary)
        .and_then(|mut file| std::io::Write::write_all(&mut file, text.as_bytes()))
        .and_then(|()| std::fs::rename(&temporary, &target));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(FileError::io(&shown, e));
    }
    Ok(target)
}

/// Where the symbolic link `link` (shown as `shown`) leads, when that is inside `root` (a
/// canonical folder); an error naming the link otherwise.
fn inside_link(root: &Path, link: &Path, shown: &Path) -> Result<PathBuf, FileError> {
    let target = link.canonicalize().map_err(|e| {
        FileError::Input(format!(
            "{}: symbolic link does not resolve ({e})",
            display(shown)
        ))
    })?;
    if target.starts_with(root) {
        Ok(target)
    } else {
        Err(FileError::Input(format!(
            "{}: symbolic link leads outside the pack (to {})",
            display(shown),
            target.display()
        )))
    }
}

/// What a file that is neither a regular file nor a folder is, for messages.
fn kind_of(kind: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_block_device() {
            return "a block device";
        }
        if kind.is_char_device() {
            return "a character device";
        }
    }
    if kind.is_dir() {
        "a folder"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

fn to_slash(path: &Path) -> String {
    path.to_string_lossy().replace('\\', "/")
}

/// How a path is shown in messages and diagnostics: forward slashes, no leading `./`.
pub fn display(path: &Path) -> String {
    to_slash(path).trim_start_matches("./").to_string()
}

/// Reads a `--clusters` file: a YAML list of member clusters, `ROLE/NAME` (or `ROLE`).
pub fn read_clusters(path: &Path) -> Result<Vec<String>, FileError> {
    let bytes = read_limited(path, path, INPUT_FILE_BYTES, "a clusters file")?;
    let text = String::from_utf8(bytes).map_err(|e| not_utf8_at(path, &e))?;
    let shown = display(path);
    let documents = switchyard_core::yaml::parse_documents(&text).map_err(|e| {
        FileError::Input(format!(
            "{shown}:{}:{}: invalid YAML: {}",
            e.pos.line, e.pos.column, e.message
        ))
    })?;
    let mut clusters = Vec::new();
    for document in &documents {
        match document.to_json() {
            serde_json::Value::Null => {}
            serde_json::Value::Array(items) => {
                for item in items {
                    let serde_json::Value::String(id) = item else {
                        return Err(FileError::Input(format!(
                            "{shown}: every entry must be a string `ROLE/NAME`, not `{item}`"
                        )));
                    };
                    switchyard_core::object::check_cluster_id(&id)
                        .map_err(|e| FileError::Input(format!("{shown}: {e}")))?;
                    clusters.push(id);
                }
            }
            _ => {
                return Err(FileError::Input(format!(
                    "{shown}: expected a list of clusters (`- provider/x86`)"
                )));
            }
        }
    }
    Ok(clusters)
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
