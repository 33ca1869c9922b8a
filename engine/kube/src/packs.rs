//! The pack set the broker runs: every pack of the packs folder, loaded and checked as
//! `switchyard check` does, plus a fingerprint of each rule so a reload re-evaluates only the
//! triggers of rules that changed.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use switchyard_core::diagnostic::{Diagnostic, Severity};
use switchyard_core::model::RuleDocument;
use switchyard_core::params::Values;
use switchyard_core::yaml::{self, PathSegment};
use switchyard_core::{Pack, PackFiles};
use switchyard_files::FileError;

use crate::config::BrokerConfig;

/// The loaded packs, sorted by folder.
#[derive(Debug, Clone, Default)]
pub struct PackSet {
    pub packs: Vec<Arc<Pack>>,
    /// Each pack's folder, in the order of `packs`.
    pub dirs: Vec<PathBuf>,
    /// Pack name -> [`rule_fingerprints`] of the pack.
    pub fingerprints: BTreeMap<String, BTreeMap<String, RuleFingerprint>>,
    /// The packs' warnings (they do not stop loading; `switchyard check` shows them).
    pub warnings: Vec<Diagnostic>,
}

impl PackSet {
    /// The pack named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<Pack>> {
        self.packs.iter().find(|p| p.name() == name)
    }

    /// (name, version) of every pack.
    pub fn names(&self) -> Vec<(String, String)> {
        self.packs
            .iter()
            .map(|p| (p.name().to_string(), p.version().to_string()))
            .collect()
    }

    /// Every cluster role the packs declare.
    pub fn cluster_roles(&self) -> BTreeSet<String> {
        self.packs
            .iter()
            .flat_map(|p| p.spec().clusters.iter().map(|c| c.name.clone()))
            .collect()
    }

    /// The rules that differ from `previous`, by pack name: changed fingerprints, added and
    /// removed rules, and every rule of an added or removed pack. Packs without a difference
    /// are left out. A changed rule's triggers are those its old and its new version watch.
    pub fn changed_rules(&self, previous: &PackSet) -> BTreeMap<String, PackChange> {
        let empty = BTreeMap::new();
        let packs: BTreeSet<&String> = self
            .fingerprints
            .keys()
            .chain(previous.fingerprints.keys())
            .collect();
        let mut changed = BTreeMap::new();
        for pack in packs {
            let change = PackChange::between(
                previous.fingerprints.get(pack).unwrap_or(&empty),
                self.fingerprints.get(pack).unwrap_or(&empty),
            );
            if !change.is_empty() {
                changed.insert(pack.clone(), change);
            }
        }
        changed
    }
}

/// Why the pack set did not load. The broker keeps running the previous set, logs this and
/// reports it in `/readyz`.
#[derive(Debug, thiserror::Error)]
pub enum PackSetError {
    #[error("no packs folder is configured")]
    NotConfigured,
    #[error("packs folder `{0}` does not exist")]
    Missing(String),
    #[error("no pack in `{0}`: neither it nor any folder directly inside it has a `pack.yaml`")]
    NoPacks(String),
    #[error(transparent)]
    Files(#[from] FileError),
    /// Packs with errors: every diagnostic of each, as `switchyard check` prints them.
    #[error("{}", DiagnosticsText(.0))]
    Diagnostics(Vec<PackDiagnostics>),
    /// A pack's configured values that its parameters refuse (or lack), one problem a line.
    #[error("{problems}")]
    Values { pack: String, problems: String },
    #[error("packs `{first}` and `{second}` are both named `{name}`")]
    DuplicateName {
        name: String,
        first: String,
        second: String,
    },
    /// Two packs disagree on whether a role's objects live in workspaces: the role's one
    /// cluster cannot be both.
    #[error(
        "pack `{with}` declares that the objects of role `{role}` live in workspaces, and pack `{without}` does not: a role's cluster is one or the other"
    )]
    WorkspacesDisagree {
        role: String,
        with: String,
        without: String,
    },
}

/// The diagnostics of one pack that did not load.
#[derive(Debug, Clone)]
pub struct PackDiagnostics {
    /// The pack folder as shown in diagnostics.
    pub root: String,
    /// Errors and warnings, sorted as the loader returns them.
    pub diagnostics: Vec<Diagnostic>,
}

/// Each pack's diagnostics, then `root: N errors, M warnings`: `switchyard check`'s output.
struct DiagnosticsText<'a>(&'a [PackDiagnostics]);

impl fmt::Display for DiagnosticsText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for pack in self.0 {
            for d in &pack.diagnostics {
                if !first {
                    writeln!(f)?;
                }
                first = false;
                write!(f, "{d}")?;
            }
            let errors = pack
                .diagnostics
                .iter()
                .filter(|d| d.severity == Severity::Error)
                .count();
            if !first {
                writeln!(f)?;
            }
            first = false;
            write!(
                f,
                "{}: {errors} errors, {} warnings",
                pack.root,
                pack.diagnostics.len() - errors
            )?;
        }
        Ok(())
    }
}

/// The pack folders under `packs`: `packs` itself when it has a `pack.yaml`, else every
/// immediate subfolder that has one, sorted. Hidden entries are skipped: a ConfigMap volume's
/// `..data` and `..2026_…` folders hold the same files as the visible ones.
pub fn pack_dirs(packs: &Path) -> Result<Vec<PathBuf>, PackSetError> {
    let shown = switchyard_files::display(packs);
    if !packs.is_dir() {
        return Err(PackSetError::Missing(shown));
    }
    if packs.join("pack.yaml").is_file() {
        return Ok(vec![packs.to_path_buf()]);
    }
    let entries = std::fs::read_dir(packs).map_err(|e| FileError::io(packs, e))?;
    let mut dirs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| FileError::io(packs, e))?;
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        if path.join("pack.yaml").is_file() {
            dirs.push(path);
        }
    }
    if dirs.is_empty() {
        return Err(PackSetError::NoPacks(shown));
    }
    dirs.sort();
    Ok(dirs)
}

/// The configured values of pack `name`'s parameters, positioned in the configuration file
/// when it was read from one.
fn values_of(config: &BrokerConfig, name: &str) -> Values {
    let mut values = Values::new();
    let Some(given) = config.values.get(name) else {
        return values;
    };
    let node = config.values_origin.as_ref().and_then(|(file, node)| {
        let found = node.get(&[PathSegment::Key(name.to_string())])?;
        Some((file, found))
    });
    let added = match node {
        Some((file, found)) => values.add_node(file, found),
        None => values
            .add_file(
                &yaml::to_yaml(&serde_json::Value::Object(given.clone())),
                &format!("the broker configuration's values of `{name}`"),
            )
            .map_err(|d| d.message),
    };
    if let Err(message) = added {
        tracing::warn!(pack = name, "configured values not read: {message}");
    }
    values
}

/// Loads every pack of `config.packs` with the configured (or default) partials and CRDs.
/// Any pack with errors fails the whole set, listing the diagnostics of every failing pack;
/// so do two packs with the same name.
pub fn load_pack_set(config: &BrokerConfig) -> Result<PackSet, PackSetError> {
    let packs = config.packs.as_deref().ok_or(PackSetError::NotConfigured)?;
    let dirs = pack_dirs(packs)?;
    let mut set = PackSet::default();
    let mut failed = Vec::new();
    for dir in &dirs {
        let (files, result) =
            switchyard_files::load_pack_dir(dir, config.partials.as_deref(), &config.crds)?;
        match result.pack {
            Some(mut pack) if !result.has_errors() => {
                if let Err(problems) = pack.set_values(&values_of(config, pack.name())) {
                    return Err(PackSetError::Values {
                        pack: pack.name().to_string(),
                        problems: problems.join("\n"),
                    });
                }
                set.warnings.extend(result.diagnostics);
                set.packs.push(Arc::new(pack));
                set.dirs.push(dir.clone());
            }
            _ => failed.push(PackDiagnostics {
                root: files.root,
                diagnostics: result.diagnostics,
            }),
        }
    }
    if !failed.is_empty() {
        return Err(PackSetError::Diagnostics(failed));
    }
    let mut seen: BTreeMap<&str, &Path> = BTreeMap::new();
    for (pack, dir) in set.packs.iter().zip(&set.dirs) {
        if let Some(first) = seen.insert(pack.name(), dir) {
            return Err(PackSetError::DuplicateName {
                name: pack.name().to_string(),
                first: switchyard_files::display(first),
                second: switchyard_files::display(dir),
            });
        }
    }
    for pack in &set.packs {
        for role in &pack.spec().clusters {
            let declared = role.workspaces.is_some();
            for other in &set.packs {
                let disagrees = other
                    .spec()
                    .clusters
                    .iter()
                    .any(|r| r.name == role.name && r.workspaces.is_some() != declared);
                if declared && disagrees {
                    return Err(PackSetError::WorkspacesDisagree {
                        role: role.name.clone(),
                        with: pack.name().to_string(),
                        without: other.name().to_string(),
                    });
                }
            }
        }
    }
    set.fingerprints = set
        .packs
        .iter()
        .map(|p| (p.name().to_string(), rule_fingerprints(p)))
        .collect();
    Ok(set)
}

/// A fingerprint of each rule of the pack over the files its evaluation depends on: when a
/// rule's fingerprint is unchanged after a reload, its triggers evaluate as before.
///
/// A rule depends on:
/// - `pack.yaml` (clusters, scope, limits, name and version stamped on outputs) and the
///   values the broker's configuration binds to the pack's parameters: a change there
///   changes every rule;
/// - its own rule file (every rule of a file with several rules changes together);
/// - the templates of its outputs and, transitively, every partial they include (`{{> name}}`,
///   resolved to the pack's `templates/name` and the shared partial `name`): a template
///   change changes only the rules whose outputs render it;
/// - every file under `tables/` when the rule file or one of those templates mentions
///   `decide` or `tables` (a table may be chosen by an expression, so any table counts).
///
/// The templates are fingerprinted apart from the rest ([`RuleFingerprint`]): a change of
/// templates only can be narrowed to the triggers it renders differently.
///
/// Tests, examples and CRDs do not change evaluation and are left out. A rule that cannot be
/// attributed to its file (not expected of a loaded pack) depends on every file. Fingerprints
/// are comparable within one process only.
pub fn rule_fingerprints(pack: &Pack) -> BTreeMap<String, RuleFingerprint> {
    let files = pack.files();
    let sources = rule_sources(files);
    let manifest = files.files.get("pack.yaml").map(String::as_str);
    let params = pack.params().to_string();
    let table_files: Vec<(&String, &String)> = files
        .files
        .iter()
        .filter(|(path, _)| path.starts_with("tables/"))
        .collect();
    pack.rule_names()
        .map(|rule| {
            let mut definition = DefaultHasher::new();
            let mut templates = DefaultHasher::new();
            ("pack.yaml", manifest).hash(&mut definition);
            // The configured values every rule can read as `params`.
            params.hash(&mut definition);
            match sources.get(rule) {
                Some(source) => {
                    let rule_text = files.files.get(&source.file).map(String::as_str);
                    (&source.file, rule_text).hash(&mut definition);
                    let used = template_closure(files, &source.templates);
                    for (key, text) in &used {
                        (key, text).hash(&mut templates);
                    }
                    let mentions_tables =
                        |text: &str| text.contains("decide") || text.contains("tables");
                    if rule_text.is_some_and(mentions_tables)
                        || used.values().any(|t| mentions_tables(t))
                    {
                        table_files.hash(&mut definition);
                    }
                }
                None => {
                    files.files.hash(&mut definition);
                    files.shared_partials.hash(&mut definition);
                }
            }
            let print = RuleFingerprint {
                definition: definition.finish(),
                templates: templates.finish(),
            };
            (rule.to_string(), print)
        })
        .collect()
}

/// A rule's [`rule_fingerprints`]: of the files it depends on apart from its templates, and
/// of its templates and their partials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleFingerprint {
    pub definition: u64,
    pub templates: u64,
}

/// What differs between two loads of a pack: its changed, added and removed rules, and of
/// the changed ones those where only templates changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackChange {
    pub rules: BTreeSet<String>,
    pub templates_only: BTreeSet<String>,
}

impl PackChange {
    /// The change from the fingerprints `before` to `after` of one pack.
    pub fn between(
        before: &BTreeMap<String, RuleFingerprint>,
        after: &BTreeMap<String, RuleFingerprint>,
    ) -> Self {
        let mut change = PackChange::default();
        for rule in before.keys().chain(after.keys()) {
            match (before.get(rule), after.get(rule)) {
                (Some(old), Some(new)) if old == new => {}
                (Some(old), Some(new)) if old.definition == new.definition => {
                    change.rules.insert(rule.clone());
                    change.templates_only.insert(rule.clone());
                }
                _ => {
                    change.rules.insert(rule.clone());
                }
            }
        }
        change
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

/// Where a rule is written and which templates its outputs render.
struct RuleSource {
    /// Path relative to the pack folder.
    file: String,
    templates: BTreeSet<String>,
}

/// The rules of the pack's `rules/` files, read again from the loaded files (the loaded pack
/// does not expose its rule documents).
fn rule_sources(files: &PackFiles) -> BTreeMap<String, RuleSource> {
    let mut sources = BTreeMap::new();
    let rule_files = files.files.iter().filter(|(path, _)| {
        path.starts_with("rules/") && (path.ends_with(".yaml") || path.ends_with(".yml"))
    });
    for (path, text) in rule_files {
        let Ok(documents) = switchyard_core::yaml::parse_documents(text) else {
            continue;
        };
        for node in documents {
            let Ok(rule) = serde_json::from_value::<RuleDocument>(node.to_json()) else {
                continue;
            };
            sources.insert(
                rule.metadata.name,
                RuleSource {
                    file: path.clone(),
                    templates: rule.spec.outputs.into_iter().map(|o| o.template).collect(),
                },
            );
        }
    }
    sources
}

/// The texts of `templates` and every partial they include, transitively, keyed by where they
/// come from (`templates/x.hbs` in the pack, `shared:common/labels`).
fn template_closure<'a>(
    files: &'a PackFiles,
    templates: &BTreeSet<String>,
) -> BTreeMap<String, &'a str> {
    let mut used: BTreeMap<String, &'a str> = BTreeMap::new();
    let mut pending: Vec<String> = templates.iter().cloned().collect();
    let mut seen = BTreeSet::new();
    while let Some(name) = pending.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let own = format!("templates/{name}");
        let mut texts = Vec::new();
        if let Some(text) = files.files.get(&own) {
            texts.push((own, text.as_str()));
        }
        if let Some((_, text)) = files.shared_partials.get(&name) {
            texts.push((format!("shared:{name}"), text.as_str()));
        }
        for (key, text) in texts {
            pending.extend(partial_names(text));
            used.insert(key, text);
        }
    }
    used
}

/// The names of the partials a handlebars source includes: `{{> name}}`, `{{#> name}}`, with
/// `~` whitespace control and quoted names. Names of inline partials are included too; they
/// resolve to no file and are ignored.
fn partial_names(source: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = source;
    while let Some(start) = rest.find("{{") {
        rest = &rest[start + 2..];
        let tag = rest.trim_start_matches('~').trim_start();
        let tag = tag.strip_prefix('#').unwrap_or(tag);
        let Some(tag) = tag.strip_prefix('>') else {
            continue;
        };
        let tag = tag.trim_start();
        let name = match tag.chars().next() {
            Some(quote @ ('"' | '\'')) => tag[1..].split(quote).next().unwrap_or(""),
            _ => tag
                .split(|c: char| c.is_whitespace() || matches!(c, '}' | '~' | ')'))
                .next()
                .unwrap_or(""),
        };
        if !name.is_empty() {
            names.push(name.to_string());
        }
    }
    names
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn partial_references() {
        let names = partial_names(
            "a: {{> common/labels}}\n{{~> \"quoted name\" x=1}}\n{{#> layout}}b{{/layout}}\n\
             {{ value }} {{#if x}}{{> inner.hbs}}{{/if}}{{>tight}}",
        );
        assert_eq!(
            names,
            [
                "common/labels",
                "quoted name",
                "layout",
                "inner.hbs",
                "tight"
            ]
        );
    }
}
