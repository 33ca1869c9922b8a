//! The subcommands. Each returns its exit code: 0 success, 1 the answer is "no" (errors
//! found, tests failed, versions differ), 2 (through `CliError`) the command could not run.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use switchyard_core::diagnostic::Severity;
use switchyard_core::{Pack, diff, model, plan, testing};

use crate::files::read_inputs;
use crate::{CliError, DiffFormat, RenderFormat, Sources};

fn clock(text: Option<&str>) -> Result<DateTime<Utc>, CliError> {
    match text {
        None => Ok(Utc::now()),
        Some(t) => DateTime::parse_from_rfc3339(t)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|e| CliError::Usage(format!("--clock `{t}` is not RFC 3339: {e}"))),
    }
}

/// Reads a pack and the CRDs it is checked against, and loads it.
fn load_files(
    dir: &Path,
    sources: &Sources,
) -> Result<(switchyard_core::PackFiles, switchyard_core::LoadResult), CliError> {
    Ok(crate::files::load_pack_dir(
        dir,
        sources.partials.as_deref(),
        &sources.crds,
    )?)
}

/// Loads a pack, printing its errors to stderr; warnings are only counted (`check` shows them).
fn load_pack(dir: &Path, sources: &Sources) -> Result<Pack, CliError> {
    let (files, result) = load_files(dir, sources)?;
    let mut warnings = 0;
    for d in &result.diagnostics {
        if d.is_error() {
            eprintln!("{d}");
        } else {
            warnings += 1;
        }
    }
    if warnings > 0 {
        tracing::info!(
            "pack `{}` has {warnings} warnings: `switchyard check {}` shows them",
            files.root,
            files.root
        );
    }
    result
        .pack
        .ok_or_else(|| CliError::Pack(files.root.clone()))
}

fn plan_for(pack: &Pack, inputs: &[PathBuf], now: DateTime<Utc>) -> Result<plan::Plan, CliError> {
    let objects = read_inputs(inputs, pack.source_cluster())?;
    // An object of a role the pack does not know would be silently ignored.
    let roles: Vec<&str> = pack
        .spec()
        .clusters
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    for (cluster, object) in &objects {
        if !roles.contains(&cluster.as_str()) {
            let key = switchyard_core::ObjectKey::of(cluster, object).map_err(CliError::Input)?;
            return Err(CliError::Input(format!(
                "{key}: the annotation switchyard.dev/cluster names `{cluster}`, which is not a cluster role of pack `{}` (roles: {})",
                pack.name(),
                roles.join(", ")
            )));
        }
    }
    let world = plan::world_of(&objects).map_err(CliError::Input)?;
    Ok(plan::plan(pack, &world, now))
}

fn report_errors(plan: &plan::Plan) -> u8 {
    let errors = plan.error_messages();
    for e in &errors {
        eprintln!("error: {e}");
    }
    u8::from(!errors.is_empty())
}

pub fn render(
    pack_dir: &Path,
    inputs: &[PathBuf],
    format: RenderFormat,
    clock_text: Option<&str>,
    sources: &Sources,
) -> Result<u8, CliError> {
    let pack = load_pack(pack_dir, sources)?;
    let plan = plan_for(&pack, inputs, clock(clock_text)?)?;
    match format {
        RenderFormat::Yaml => out!("{}", plan::to_yaml(&plan)),
        RenderFormat::Json => outln!(
            "{}",
            serde_json::to_string_pretty(&plan::to_json(&plan)).unwrap_or_default()
        ),
    }
    Ok(report_errors(&plan))
}

pub fn explain(
    pack_dir: &Path,
    inputs: &[PathBuf],
    clock_text: Option<&str>,
    sources: &Sources,
) -> Result<u8, CliError> {
    let pack = load_pack(pack_dir, sources)?;
    let plan = plan_for(&pack, inputs, clock(clock_text)?)?;
    if plan.outcomes.is_empty() {
        let watched: Vec<String> = pack
            .watched_kinds()
            .into_iter()
            .map(|(c, av, k)| format!("{av} {k} in cluster `{c}`"))
            .collect();
        outln!(
            "no input object is watched by a rule; the pack watches: {}",
            watched.join(", ")
        );
    }
    for outcome in &plan.outcomes {
        outln!("{}", outcome.trigger);
        for entry in &outcome.trace {
            match &entry.expression {
                Some(e) => outln!(
                    "  [{}] {}: `{}` => {}",
                    entry.rule,
                    entry.step,
                    e,
                    entry.result
                ),
                None => outln!("  [{}] {}: {}", entry.rule, entry.step, entry.result),
            }
        }
        if let Some(conditions) = outcome
            .status
            .as_ref()
            .and_then(|s| s.get("conditions"))
            .and_then(|c| c.as_array())
        {
            for c in conditions {
                outln!(
                    "  condition {}={} ({}): {}",
                    c["type"].as_str().unwrap_or(""),
                    c["status"].as_str().unwrap_or(""),
                    c["reason"].as_str().unwrap_or(""),
                    c["message"].as_str().unwrap_or("")
                );
            }
        }
        outln!("  outputs: {}", outcome.desired.len());
    }
    Ok(report_errors(&plan))
}

pub fn check(packs: &[PathBuf], json: bool, sources: &Sources) -> Result<u8, CliError> {
    let mut failed = false;
    let mut all = Vec::new();
    for dir in packs {
        let (files, result) = load_files(dir, sources)?;
        failed |= result.has_errors();
        let errors = result
            .diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count();
        let warnings = result.diagnostics.len() - errors;
        if json {
            all.extend(result.diagnostics);
        } else {
            for d in &result.diagnostics {
                outln!("{d}");
            }
            match &result.pack {
                Some(pack) => outln!(
                    "{}: ok: pack {} {} ({} rules, {} tables, {} warnings)",
                    files.root,
                    pack.name(),
                    pack.version(),
                    pack.rule_names().count(),
                    pack.tables().len(),
                    warnings
                ),
                None => outln!("{}: {errors} errors, {warnings} warnings", files.root),
            }
        }
    }
    if json {
        outln!("{}", serde_json::to_string_pretty(&all).unwrap_or_default());
    }
    Ok(u8::from(failed))
}

pub fn test(
    packs: &[PathBuf],
    junit: Option<&Path>,
    update: bool,
    sources: &Sources,
) -> Result<u8, CliError> {
    let packs: Vec<PathBuf> = if packs.is_empty() {
        let rules = Path::new("rules");
        let mut found: Vec<PathBuf> = std::fs::read_dir(rules)
            .map_err(|e| CliError::io(rules, e))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.join("pack.yaml").is_file())
            .collect();
        found.sort();
        found
    } else {
        packs.to_vec()
    };
    let mut suites: Vec<(String, Vec<testing::CaseReport>)> = Vec::new();
    let mut failed = 0;
    let mut passed = 0;
    // Cases that still fail after `--update` wrote their golden files: the exit code.
    let mut unfixed = 0;
    for dir in &packs {
        let pack = load_pack(dir, sources)?;
        let mut reports = testing::run_tests(&pack);
        if reports.is_empty() {
            outln!("{}: no test cases", dir.display());
        }
        for report in &mut reports {
            let mut updated = None;
            if update && let Some((file, text)) = &report.golden_update {
                // A refused write is a failure of this case only; the others still run.
                match crate::files::write_pack_file(dir, file, text) {
                    Ok(_) => updated = Some(dir.join(file)),
                    Err(e) => {
                        let message = format!(
                            "{}: case `{}`: golden file `{file}` not written: {e}",
                            report.file, report.case
                        );
                        eprintln!("error: {message}");
                        report.failures.push(message);
                    }
                }
            }
            if report.passed() {
                passed += 1;
                outln!("PASS {} {}: {}", pack.name(), report.suite, report.case);
            } else {
                failed += 1;
                // The golden mismatch is the one failure an update fixes.
                if updated.is_none() || report.failures.len() > 1 {
                    unfixed += 1;
                }
                outln!("FAIL {} {}: {}", pack.name(), report.suite, report.case);
                for failure in &report.failures {
                    for line in failure.lines() {
                        outln!("    {line}");
                    }
                }
            }
            if let Some(path) = updated {
                outln!("    updated {}", path.display());
            }
        }
        suites.push((pack.name().to_string(), reports));
    }
    outln!("{passed} passed, {failed} failed");
    if let Some(path) = junit {
        std::fs::write(path, junit_xml(&suites)).map_err(|e| CliError::io(path, e))?;
    }
    Ok(u8::from(unfixed > 0))
}

fn junit_xml(suites: &[(String, Vec<testing::CaseReport>)]) -> String {
    let escape = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    };
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n");
    for (pack, reports) in suites {
        let failures = reports.iter().filter(|r| !r.passed()).count();
        out.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\">\n",
            escape(pack),
            reports.len()
        ));
        for r in reports {
            out.push_str(&format!(
                "    <testcase classname=\"{}.{}\" name=\"{}\"",
                escape(pack),
                escape(&r.suite),
                escape(&r.case)
            ));
            if r.passed() {
                out.push_str("/>\n");
            } else {
                out.push_str(&format!(
                    ">\n      <failure message=\"{}\">{}</failure>\n    </testcase>\n",
                    escape(r.failures.first().map(String::as_str).unwrap_or("")),
                    escape(&r.failures.join("\n"))
                ));
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

pub fn diff(
    base_dir: &Path,
    head_dir: &Path,
    inputs: &[PathBuf],
    format: DiffFormat,
    clock_text: Option<&str>,
    sources: &Sources,
) -> Result<u8, CliError> {
    let now = clock(clock_text)?;
    let base = load_pack(base_dir, sources)?;
    let head = load_pack(head_dir, sources)?;
    let base_plan = plan_for(&base, inputs, now)?;
    let head_plan = plan_for(&head, inputs, now)?;
    let changes = diff::diff_plans(&base_plan, &head_plan);
    match format {
        DiffFormat::Text => out!("{}", changes.to_text()),
        DiffFormat::Markdown => out!(
            "{}",
            changes.to_markdown(
                &format!("{} {}", base.name(), base.version()),
                &format!("{} {}", head.name(), head.version())
            )
        ),
        DiffFormat::Json => outln!(
            "{}",
            serde_json::to_string_pretty(&changes).unwrap_or_default()
        ),
    }
    Ok(u8::from(!changes.is_empty()))
}

pub fn schema(broker_config: bool) -> Result<u8, CliError> {
    let schema = if broker_config {
        switchyard_kube::config::schema()
    } else {
        model::json_schema()
    };
    outln!(
        "{}",
        serde_json::to_string_pretty(&schema).unwrap_or_default()
    );
    Ok(0)
}
