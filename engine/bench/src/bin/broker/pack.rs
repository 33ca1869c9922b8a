//! The pack: a scratch copy of its layout for reloads, the CRDs each cluster needs, and what
//! the core's plan says should exist.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use switchyard_bench::broker_world::{self, EDITED_TEMPLATE};
use switchyard_bench::repo_root;
use switchyard_core::evaluate::CONDITION_SYNCED;
use switchyard_core::plan::Plan;
use switchyard_core::{DesiredObject, ObjectKey, Pack};

use crate::error::Res;
use crate::figures::int;

pub(crate) const PACK: &str = "kcp-karmada";

/// A scratch copy of the repository's pack layout (`packs/kcp-karmada`, `templates/`,
/// `config/crds/`), which the broker watches and the benchmark edits.
pub(crate) struct PackCopy {
    pub(crate) dir: tempfile::TempDir,
}

pub(crate) fn copy_dir(from: &Path, to: &Path) -> Res<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

impl PackCopy {
    pub(crate) fn new() -> Res<PackCopy> {
        let dir = tempfile::Builder::new()
            .prefix("switchyard-bench-pack-")
            .tempdir()?;
        let root = repo_root();
        copy_dir(
            &root.join("rules").join(PACK),
            &dir.path().join("packs").join(PACK),
        )?;
        copy_dir(&root.join("templates"), &dir.path().join("templates"))?;
        copy_dir(&root.join("config/crds"), &dir.path().join("config/crds"))?;
        Ok(PackCopy { dir })
    }

    pub(crate) fn packs(&self) -> PathBuf {
        self.dir.path().join("packs")
    }

    pub(crate) fn file(&self, relative: &str) -> PathBuf {
        self.packs().join(PACK).join(relative)
    }

    /// A copy with these files (relative to the pack folder) written over it, in order.
    pub(crate) fn with(files: &[(&str, &str)]) -> Res<PackCopy> {
        let copy = PackCopy::new()?;
        for (relative, text) in files {
            std::fs::write(copy.file(relative), text)?;
        }
        Ok(copy)
    }

    /// The edited template's text.
    pub(crate) fn edited_template(&self) -> Res<String> {
        let text = std::fs::read_to_string(self.file(EDITED_TEMPLATE))?;
        Ok(broker_world::edit_propagation_policy_template(&text)?)
    }

    pub(crate) fn load(&self) -> Res<Pack> {
        let (_, result) = switchyard_files::load_pack_dir(&self.packs().join(PACK), None, &[])?;
        let errors: Vec<String> = result
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(ToString::to_string)
            .collect();
        match result.pack {
            Some(pack) if errors.is_empty() => Ok(pack),
            _ => Err(format!("the pack does not load:\n{}", errors.join("\n")).into()),
        }
    }
}

pub(crate) fn source_crds() -> Res<Vec<Value>> {
    Ok(switchyard_testenv::read_crds(
        &repo_root().join("config/crds"),
    )?)
}

pub(crate) fn karmada_crds() -> Res<Vec<Value>> {
    let dir = repo_root().join("../shared/crds/karmada");
    let mut crds = Vec::new();
    for file in [
        "policy.karmada.io_propagationpolicies.yaml",
        "work.karmada.io_resourcebindings.yaml",
    ] {
        crds.extend(yaml_documents(&dir.join(file))?);
    }
    // Karmada's member Cluster, and cluster-operator's Cluster: the pack's `management` role
    // is on the Karmada server.
    crds.extend(source_crds()?.into_iter().filter(|c| {
        c["spec"]["group"] == "cluster.karmada.io"
            || c["spec"]["group"] == "cluster.edge-connect.eu"
    }));
    Ok(crds)
}

/// The YAML documents of a file, as JSON.
pub(crate) fn yaml_documents(path: &Path) -> Res<Vec<Value>> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let documents = switchyard_core::yaml::parse_documents(&text)
        .map_err(|e| format!("{}: {}", path.display(), e.message))?;
    Ok(documents.iter().map(|d| d.to_json()).collect())
}

pub(crate) fn synced_true(object: &Value) -> bool {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c["type"] == CONDITION_SYNCED && c["status"] == "True")
        })
}

/// Every FleetWorkload renders outputs, no errors, no conflicts, `Synced=True`.
pub(crate) fn check_plan(plan: &Plan, n: usize) -> Res<()> {
    let errors = plan.error_messages();
    if !errors.is_empty() {
        return Err(format!("the plan has {} errors, first: {}", errors.len(), errors[0]).into());
    }
    if plan.outcomes.len() != n {
        return Err(format!("{} outcomes for {n} FleetWorkloads", plan.outcomes.len()).into());
    }
    for outcome in &plan.outcomes {
        let synced = outcome
            .status
            .as_ref()
            .is_some_and(|s| synced_true(&json!({"status": s})));
        if outcome.desired.is_empty() || !synced {
            return Err(format!(
                "{} renders {} objects, status {:?}",
                outcome.trigger,
                outcome.desired.len(),
                outcome.status
            )
            .into());
        }
    }
    Ok(())
}

/// The objects of `after` that differ from `before`, which must be exactly `expected`
/// PropagationPolicies carrying `annotation`, with no object added or removed.
pub(crate) fn changed_objects<'a>(
    before: &Plan,
    after: &'a Plan,
    annotation: &str,
    expected: usize,
) -> Res<Vec<&'a DesiredObject>> {
    let old: HashMap<&ObjectKey, &Value> =
        before.objects.iter().map(|d| (&d.key, &d.object)).collect();
    let changed: Vec<&DesiredObject> = after
        .objects
        .iter()
        .filter(|d| old.get(&d.key) != Some(&&d.object))
        .collect();
    let annotated = changed
        .iter()
        .filter(|d| {
            d.key.kind == "PropagationPolicy"
                && d.object
                    .pointer("/metadata/annotations")
                    .and_then(|a| a.get(annotation))
                    .is_some()
        })
        .count();
    if changed.len() != expected
        || annotated != expected
        || before.objects.len() != after.objects.len()
    {
        return Err(format!(
            "an edit changes {} objects ({annotated} PropagationPolicies annotated {annotation}), expected the {expected} PropagationPolicies of the FleetWorkloads with a PlacementPolicy",
            changed.len()
        )
        .into());
    }
    Ok(changed)
}

pub(crate) fn by_kind(objects: &[DesiredObject]) -> BTreeMap<(String, String), usize> {
    let mut counts = BTreeMap::new();
    for d in objects {
        *counts
            .entry((d.key.api_version.clone(), d.key.kind.clone()))
            .or_insert(0) += 1;
    }
    counts
}

pub(crate) fn kinds_text(counts: &BTreeMap<(String, String), usize>) -> String {
    counts
        .iter()
        .map(|((_, kind), n)| format!("{} {kind}", int(*n as u64)))
        .collect::<Vec<_>>()
        .join(", ")
}
