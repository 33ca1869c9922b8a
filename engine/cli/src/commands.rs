//! The subcommands. Each returns its exit code: 0 success, 1 the answer is "no" (errors
//! found, tests failed, versions differ), 2 (through `CliError`) the command could not run.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use switchyard_cli::CliError;
use switchyard_cli::files::{read_inputs, read_inputs_checked};
use switchyard_core::diagnostic::Severity;
use switchyard_core::params::Values;
use switchyard_core::{Pack, diff, model, plan, testing, text};

use crate::args::{DiffFormat, ExplainFormat, RenderFormat, Sources, ValueArgs};
use crate::memory::{self, Progress};

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
    // `--validate-against` adds to the CRDs: the default folder stays unless `--crds` names others.
    let mut crds = sources.crds.clone();
    if !sources.validate_against.is_empty() {
        if crds.is_empty() {
            crds.extend(switchyard_cli::files::find_crds(dir));
        }
        crds.extend(sources.validate_against.iter().cloned());
    }
    Ok(switchyard_cli::files::load_pack_dir(
        dir,
        sources.partials.as_deref(),
        &crds,
    )?)
}

/// Loads a pack, printing its errors to stderr; warnings are only counted (`check` shows them).
fn load_pack(dir: &Path, sources: &Sources) -> Result<Pack, CliError> {
    let (files, result) = load_files(dir, sources)?;
    let mut warnings = 0;
    for d in &result.diagnostics {
        if d.is_error() {
            errln!("{d}");
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

/// What a dry-run command evaluates: input files, extra member clusters, the clock, the
/// values of the pack's parameters.
pub struct Inputs {
    pub paths: Vec<PathBuf>,
    pub clusters: Option<PathBuf>,
    pub clock: Option<String>,
    pub values: ValueArgs,
}

impl Inputs {
    pub fn new(paths: Vec<PathBuf>, clusters: Option<PathBuf>, clock: Option<String>) -> Self {
        Inputs {
            paths,
            clusters,
            clock,
            values: ValueArgs::default(),
        }
    }

    pub fn with_values(mut self, values: ValueArgs) -> Self {
        self.values = values;
        self
    }
}

/// The values of `--values` files and `--set` flags, in that order.
fn values_of(args: &ValueArgs) -> Result<Values, CliError> {
    let mut values = Values::new();
    for path in &args.files {
        let text = std::fs::read_to_string(path).map_err(|e| CliError::io(path, e))?;
        values
            .add_file(&text, &switchyard_cli::files::display(path))
            .map_err(|d| CliError::Input(d.to_string()))?;
    }
    for set in &args.sets {
        values.add_set(set).map_err(CliError::Input)?;
    }
    Ok(values)
}

/// A pack loaded with its parameters bound to the values given; every problem of the values
/// is printed, each naming where the value was written.
fn load_bound(dir: &Path, sources: &Sources, args: &ValueArgs) -> Result<Pack, CliError> {
    let values = values_of(args)?;
    let mut pack = load_pack(dir, sources)?;
    if let Err(mut problems) = pack.set_values(&values) {
        let last = problems.pop().unwrap_or_default();
        for problem in &problems {
            errln!("error: {problem}");
        }
        return Err(CliError::Input(last));
    }
    Ok(pack)
}

fn plan_for(
    pack: &Pack,
    inputs: &Inputs,
    now: DateTime<Utc>,
    tracing: plan::Tracing,
) -> Result<plan::Plan, CliError> {
    let world = world_for(pack, inputs)?;
    // The memory budget is checked between input files (in `world_for`) and between triggers.
    let read = world.len() as u64;
    plan::plan_checked(pack, &world, now, tracing, &mut |n| {
        memory::check(Progress {
            objects: read,
            triggers: n as u64,
        })
    })
    .map_err(CliError::Input)
}

/// The world of a dry run: the input objects and the member clusters named.
fn world_for(pack: &Pack, inputs: &Inputs) -> Result<switchyard_core::MemoryWorld, CliError> {
    let mut objects = read_inputs_checked(&inputs.paths, pack.source_cluster(), &mut |n| {
        memory::check(Progress {
            objects: n as u64,
            triggers: 0,
        })
    })?;
    let clusters = match &inputs.clusters {
        Some(path) => switchyard_cli::files::read_clusters(path)?,
        None => Vec::new(),
    };
    // An object of a role the pack does not know would be silently ignored.
    let roles: Vec<&str> = pack
        .spec()
        .clusters
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    for (cluster, object) in &objects {
        let role = switchyard_core::object::split_cluster(cluster).0;
        if !roles.contains(&role) {
            let key = switchyard_core::ObjectKey::of(cluster, object).map_err(CliError::Input)?;
            let named = if role == cluster {
                format!("`{cluster}`, which")
            } else {
                format!("`{cluster}`, whose role `{role}`")
            };
            return Err(CliError::Input(format!(
                "{key}: the annotation switchyard.dev/cluster names {named} is not a cluster role of pack `{}` (roles: {})",
                pack.name(),
                roles.join(", ")
            )));
        }
    }
    for cluster in &clusters {
        let role = switchyard_core::object::split_cluster(cluster).0;
        if !roles.contains(&role) {
            return Err(CliError::Input(format!(
                "--clusters names `{cluster}`, whose role `{role}` is not a cluster role of pack `{}` (roles: {})",
                pack.name(),
                roles.join(", ")
            )));
        }
    }
    pack.place_all(&mut objects).map_err(CliError::Input)?;
    plan::world_from(objects, &clusters).map_err(CliError::Input)
}

fn report_errors(plan: &plan::Plan) -> u8 {
    report(plan.error_messages())
}

fn report(errors: Vec<String>) -> u8 {
    for e in &errors {
        errln!("error: {e}");
    }
    u8::from(!errors.is_empty())
}

pub fn render(
    pack_dir: &Path,
    inputs: &Inputs,
    format: RenderFormat,
    sources: &Sources,
) -> Result<u8, CliError> {
    let pack = load_bound(pack_dir, sources, &inputs.values)?;
    let now = clock(inputs.clock.as_deref())?;
    let world = world_for(&pack, inputs)?;
    // Only the merged objects and each trigger's status and errors are printed: the plan
    // holds the rendered objects compactly (see `plan_compact`), and the YAML is written
    // object by object.
    let read = world.len() as u64;
    let compact = plan::plan_compact(&pack, &world, now, &mut |n| {
        memory::check(Progress {
            objects: read,
            triggers: n as u64,
        })
    })
    .map_err(CliError::Input)?;
    drop(world);
    let errors = compact.error_messages();
    match format {
        RenderFormat::Yaml => {
            use std::io::Write as _;
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            if let Err(e) = compact.write_yaml(&mut out).and_then(|()| out.flush()) {
                crate::output::stdout_failed(e);
            }
        }
        RenderFormat::Json => {
            let plan = compact.into_plan().map_err(CliError::Input)?;
            outln!(
                "{}",
                serde_json::to_string_pretty(&plan::to_json(&plan)).unwrap_or_default()
            );
        }
    }
    Ok(report(errors))
}

pub fn explain(
    pack_dir: &Path,
    inputs: &Inputs,
    format: ExplainFormat,
    sources: &Sources,
) -> Result<u8, CliError> {
    let pack = load_bound(pack_dir, sources, &inputs.values)?;
    let plan = plan_for(
        &pack,
        inputs,
        clock(inputs.clock.as_deref())?,
        plan::Tracing::On,
    )?;
    if let ExplainFormat::Json = format {
        let triggers: Vec<serde_json::Value> = plan
            .outcomes
            .iter()
            .map(|o| {
                serde_json::json!({
                    "trigger": o.trigger,
                    "rules": o.rules,
                    "trace": o.trace,
                    "status": o.status,
                    "outputs": o.desired.iter().map(|d| d.key.to_string()).collect::<Vec<_>>(),
                    "errors": o.errors,
                })
            })
            .collect();
        outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"triggers": triggers}))
                .unwrap_or_default()
        );
        return Ok(report_errors(&plan));
    }
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
    // Each rule's steps once, in the order first met, with every trigger's result below,
    // triggers with the same result together.
    type Results<'p> = Vec<(&'p str, Vec<String>)>;
    type Steps<'p> = Vec<((&'p str, Option<&'p str>), Results<'p>)>;
    let mut rules: Vec<(&str, Steps<'_>)> = Vec::new();
    for outcome in &plan.outcomes {
        for entry in &outcome.trace {
            let r = match rules.iter().position(|(r, _)| *r == entry.rule) {
                Some(i) => i,
                None => {
                    rules.push((&entry.rule, Vec::new()));
                    rules.len() - 1
                }
            };
            let steps = &mut rules[r].1;
            let step = (entry.step.as_str(), entry.expression.as_deref());
            let s = match steps.iter().position(|(s, _)| *s == step) {
                Some(i) => i,
                None => {
                    steps.push((step, Vec::new()));
                    steps.len() - 1
                }
            };
            let results = &mut steps[s].1;
            // A rule watches one kind: the trigger's namespace and name say which.
            let key = &outcome.trigger;
            let mut trigger = match &key.namespace {
                Some(ns) => format!("{ns}/{}", key.name),
                None => key.name.clone(),
            };
            if key.cluster.contains('/') {
                trigger = format!("{} {trigger}", key.cluster);
            }
            match results.iter_mut().find(|(r, _)| *r == entry.result) {
                Some((_, triggers)) => triggers.push(trigger),
                None => results.push((&entry.result, vec![trigger])),
            }
        }
    }
    let several = plan.outcomes.len() > 1;
    for (rule, steps) in &rules {
        outln!("rule {rule}");
        for ((step, expression), results) in steps {
            match expression {
                Some(e) if !e.contains('\n') => outln!("  {step}: {e}"),
                Some(e) => {
                    outln!("  {step}:");
                    for line in e.lines() {
                        outln!("      {line}");
                    }
                }
                None => outln!("  {step}"),
            }
            for (result, triggers) in results {
                if several {
                    outln!("    => {result}  ({})", listed(triggers));
                } else {
                    outln!("    => {result}");
                }
            }
        }
    }
    for outcome in &plan.outcomes {
        outln!("{}", outcome.trigger);
        if let Some(serde_json::Value::Object(status)) = &outcome.status {
            for (field, value) in status.iter().filter(|(f, _)| *f != "conditions") {
                outln!("  status.{field}: {}", compact_json(value));
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

/// The code of an example or fixture object its CRD refuses.
const INVALID_INPUT: &str = "input::invalid";

/// Trigger names, at most ten, then how many more.
fn listed(triggers: &[String]) -> String {
    const SHOWN: usize = 10;
    let mut text = triggers
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if triggers.len() > SHOWN {
        text.push_str(&format!(" and {} more", triggers.len() - SHOWN));
    }
    text
}

fn compact_json(value: &serde_json::Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

pub fn check(
    packs: &[PathBuf],
    json: bool,
    strict: bool,
    sources: &Sources,
) -> Result<u8, CliError> {
    let mut failed = false;
    let mut all = Vec::new();
    for dir in packs {
        let (files, mut result) = load_files(dir, sources)?;
        // An example or fixture the API server would refuse fails the check, though the
        // pack itself loads.
        for d in &mut result.diagnostics {
            if d.code == INVALID_INPUT {
                d.severity = Severity::Error;
            }
        }
        failed |= result.diagnostics.iter().any(|d| d.is_error());
        let errors = result
            .diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count();
        let warnings = result
            .diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Warning)
            .count();
        failed |= strict && warnings > 0;
        if json {
            all.extend(result.diagnostics);
        } else {
            for d in &result.diagnostics {
                outln!("{d}");
            }
            match &result.pack {
                Some(pack) if errors == 0 => outln!(
                    "{}: ok: pack {} {} ({} rules, {} tables, {} warnings)",
                    files.root,
                    pack.name(),
                    pack.version(),
                    pack.rule_names().count(),
                    pack.tables().len(),
                    warnings
                ),
                _ => outln!("{}: {errors} errors, {warnings} warnings", files.root),
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
    values: &ValueArgs,
) -> Result<u8, CliError> {
    let values = values_of(values)?;
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
    for dir in &packs {
        let mut pack = load_pack(dir, sources)?;
        let mut warned: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
        let mut reports = testing::run_tests(&mut pack, &values);
        if reports.is_empty() {
            outln!("{}: no test cases", dir.display());
        }
        for report in &mut reports {
            // What `--update` wrote: "wrote" (created) or "updated", and the path.
            let mut written = Vec::new();
            if update {
                for golden in std::mem::take(&mut report.golden_updates) {
                    // A refused write is a failure of this case only; the others still run.
                    match switchyard_cli::files::write_pack_file(dir, &golden.file, &golden.text) {
                        Ok(_) => {
                            // Written, the golden file is no failure of the case.
                            report.failures.retain(|f| *f != golden.failure);
                            let verb = if golden.created { "wrote" } else { "updated" };
                            written.push(format!("{verb} {}", dir.join(&golden.file).display()));
                        }
                        Err(e) => {
                            let message = format!(
                                "{}: case `{}`: golden file `{}` not written: {e}",
                                report.file, report.case, golden.file
                            );
                            errln!("error: {message}");
                            report.failures.push(message);
                        }
                    }
                }
            }
            // A fixture many cases read is reported once, with the first case that read it.
            for warning in report
                .warnings
                .iter()
                .filter(|w| warned.insert((*w).clone()))
            {
                outln!(
                    "WARN {} {}: {}: {warning}",
                    pack.name(),
                    report.suite,
                    report.case
                );
            }
            if report.passed() {
                passed += 1;
                outln!(
                    "PASS {} {}: {}",
                    pack.name(),
                    text::one_line(&report.suite),
                    text::one_line(&report.case)
                );
            } else {
                failed += 1;
                outln!(
                    "FAIL {} {}: {}",
                    pack.name(),
                    text::one_line(&report.suite),
                    text::one_line(&report.case)
                );
                for failure in &report.failures {
                    for line in failure.lines() {
                        outln!("    {line}");
                    }
                }
            }
            for line in &written {
                outln!("    {line}");
            }
        }
        suites.push((pack.name().to_string(), reports));
    }
    outln!("{passed} passed, {failed} failed");
    if let Some(path) = junit {
        std::fs::write(path, junit_xml(&suites)).map_err(|e| CliError::io(path, e))?;
    }
    Ok(u8::from(failed > 0))
}

fn junit_xml(suites: &[(String, Vec<testing::CaseReport>)]) -> String {
    // Names and messages come from packs and inputs: text::xml keeps the file well-formed
    // whatever they hold (XML 1.0 cannot carry most control characters at all).
    let escape = text::xml;
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
    inputs: &Inputs,
    format: DiffFormat,
    sources: &Sources,
) -> Result<u8, CliError> {
    let now = clock(inputs.clock.as_deref())?;
    let base = load_bound(base_dir, sources, &inputs.values)?;
    let head = load_bound(head_dir, sources, &inputs.values)?;
    let base_plan = plan_for(&base, inputs, now, plan::Tracing::Off)?;
    let head_plan = plan_for(&head, inputs, now, plan::Tracing::Off)?;
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

pub fn simulate(
    pack_dir: &Path,
    inputs: &Inputs,
    steps: usize,
    clock_step: &str,
    sets: &[String],
    sources: &Sources,
) -> Result<u8, CliError> {
    let step = switchyard_core::duration::parse_duration(clock_step)
        .map_err(|e| CliError::Usage(format!("--clock-step: {e}")))?;
    let mut changes: Vec<(usize, PathBuf)> = Vec::new();
    for set in sets {
        let parsed = set
            .rsplit_once('@')
            .and_then(|(file, at)| Some((at.parse::<usize>().ok()?, PathBuf::from(file))));
        match parsed {
            Some((at, file)) if (1..=steps).contains(&at) => changes.push((at, file)),
            _ => {
                return Err(CliError::Usage(format!(
                    "--merge `{set}`: expected FILE@STEP with STEP from 1 to {steps}"
                )));
            }
        }
    }
    let pack = load_bound(pack_dir, sources, &inputs.values)?;
    let world = world_for(&pack, inputs)?;
    let mut simulation =
        switchyard_core::simulate::Simulation::new(&pack, world, clock(inputs.clock.as_deref())?);
    let empty = plan::Plan {
        outcomes: Vec::new(),
        objects: Vec::new(),
        conflicts: Vec::new(),
    };
    let mut failed = false;
    let mut previous = empty;
    for at in 0..=steps {
        if at > 0 {
            simulation.settle();
            for (_, file) in changes.iter().filter(|(s, _)| *s == at) {
                let mut read = read_inputs(std::slice::from_ref(file), pack.source_cluster())?;
                pack.place_all(&mut read).map_err(CliError::Input)?;
                for (cluster, object) in read {
                    let key = switchyard_core::ObjectKey::of(&cluster, &object)
                        .map_err(CliError::Input)?;
                    let mut merged = switchyard_core::World::get_key(&simulation.world, &key)
                        .map(|o| serde_json::Value::clone(&o))
                        .unwrap_or(serde_json::Value::Null);
                    switchyard_core::simulate::merge(&mut merged, &object);
                    simulation
                        .world
                        .insert(&cluster, merged)
                        .map_err(CliError::Input)?;
                }
            }
            simulation.advance(step);
        }
        let current = simulation.evaluate().clone();
        outln!(
            "== step {at} at {}",
            simulation
                .now
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        );
        let changed = diff::diff_plans(&previous, &current);
        if changed.is_empty() {
            outln!("no changes");
        } else {
            out!("{}", changed.to_text());
        }
        for e in current.error_messages() {
            outln!("error: {e}");
            failed = true;
        }
        previous = current;
    }
    Ok(u8::from(failed))
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

/// `switchyard rbac --packs DIR`: the RBAC the broker needs for the packs, from what they
/// declare and the CRDs they load with.
/// The options of `switchyard rbac` that name things.
pub struct RbacNames {
    pub lease_namespace: String,
    pub service_account: String,
    pub roles: Vec<String>,
    pub member_secrets: Vec<String>,
    pub config: Option<std::path::PathBuf>,
}

pub fn rbac(
    packs_dir: &Path,
    format: RenderFormat,
    names: &RbacNames,
    sources: &Sources,
) -> Result<u8, CliError> {
    let RbacNames {
        lease_namespace,
        service_account,
        roles,
        member_secrets,
        config,
    } = names;
    let mut member_secrets = member_secrets.clone();
    let mut member_sources = Vec::new();
    if let Some(path) = config {
        let config = switchyard_kube::config::BrokerConfig::from_file(path)
            .map_err(|e| CliError::Input(e.to_string()))?;
        member_secrets.extend(config.members.iter().flat_map(|m| {
            let secrets = m.secrets.as_ref().map(|s| s.namespace.clone());
            let objects = m.objects.as_ref().map(|o| o.namespace.clone());
            // Profiles whose credentials are a Secret they name.
            let profiles = m
                .cluster_profiles
                .as_ref()
                .filter(|p| p.providers.iter().any(|p| p.kubeconfig_secret))
                .map(|p| p.namespace.clone());
            secrets.into_iter().chain(objects).chain(profiles)
        }));
        member_sources = config.members;
    }
    let dirs =
        switchyard_kube::packs::pack_dirs(packs_dir).map_err(|e| CliError::Usage(e.to_string()))?;
    let mut packs = Vec::new();
    let mut crds = Vec::new();
    for dir in &dirs {
        packs.push(load_pack(dir, sources)?);
        crds.extend(switchyard_cli::files::read_crds(dir, &sources.crds)?);
    }
    let kinds = switchyard_core::rbac::Kinds::new(&crds);
    let pack_refs: Vec<&Pack> = packs.iter().collect();
    let mut rbac = switchyard_core::rbac::compute(&pack_refs, &kinds, lease_namespace)
        .map_err(|e| CliError::Input(e.to_string()))?;
    if let Some(unknown) = roles
        .iter()
        .find(|r| !rbac.roles.iter().any(|x| &x.role == *r))
    {
        let known: Vec<&str> = rbac.roles.iter().map(|r| r.role.as_str()).collect();
        return Err(CliError::Usage(format!(
            "--role `{unknown}`: the packs have no such cluster role (they have {})",
            known.join(", ")
        )));
    }
    if !roles.is_empty() {
        rbac.roles.retain(|r| roles.contains(&r.role));
    }
    for namespace in &member_secrets {
        rbac.add_member_secrets(namespace);
    }
    for source in &member_sources {
        add_member_source(&mut rbac, &kinds, source)?;
    }
    match format {
        RenderFormat::Yaml => {
            let naming = switchyard_core::rbac::Naming::for_packs(&rbac, service_account);
            out!("{}", switchyard_core::rbac::to_yaml(&rbac, &naming));
        }
        RenderFormat::Json => outln!(
            "{}",
            serde_json::to_string_pretty(&rbac).unwrap_or_default()
        ),
    }
    Ok(0)
}

/// The kinds one member source reads in the broker's own cluster, granted: an `objects`
/// source's kind and ClusterProfiles in their namespace, a `kcp` source's
/// APIExportEndpointSlice by name (the broker lists and watches it with a field selector on
/// its name, which RBAC's `resourceNames` allows).
fn add_member_source(
    rbac: &mut switchyard_core::rbac::Rbac,
    kinds: &switchyard_core::rbac::Kinds,
    source: &switchyard_kube::config::MemberSource,
) -> Result<(), CliError> {
    let role = &source.role;
    if let Some(objects) = &source.objects {
        let Some(info) = kinds.get(&objects.api_version, &objects.kind) else {
            return Err(CliError::Input(format!(
                "members of role `{role}`: the objects source's kind {} {} is not a known kind: \
                 give its CRD with --crds",
                objects.api_version, objects.kind
            )));
        };
        let namespace = (info.scope == switchyard_core::kinds::Scope::Namespaced)
            .then_some(objects.namespace.as_str());
        rbac.add_member_source(
            namespace,
            &info.group,
            &info.resource,
            &[],
            &format!(
                "Members of role `{role}` found at run time: the broker watches these objects."
            ),
        );
    }
    if let Some(profiles) = &source.cluster_profiles {
        rbac.add_member_source(
            Some(&profiles.namespace),
            "multicluster.x-k8s.io",
            "clusterprofiles",
            &[],
            &format!("Members of role `{role}` found at run time: the broker watches the ClusterProfiles here."),
        );
    }
    if let Some(kcp) = &source.kcp {
        rbac.add_member_source(
            None,
            "apis.kcp.io",
            "apiexportendpointslices",
            std::slice::from_ref(&kcp.endpoint_slice),
            &format!(
                "Members of role `{role}` found at run time: the broker watches the URLs of this APIExportEndpointSlice."
            ),
        );
    }
    Ok(())
}

/// `switchyard cel --pack DIR --rule NAME --input PATH... EXPR`: the expression evaluated in
/// the rule's context for the first input object the rule watches.
pub fn probe(
    pack_dir: &Path,
    rule: &str,
    inputs: &Inputs,
    expression: &str,
    sources: &Sources,
) -> Result<u8, CliError> {
    let pack = load_bound(pack_dir, sources, &inputs.values)?;
    let now = clock(inputs.clock.as_deref())?;
    let world = world_for(&pack, inputs)?;
    let probe = switchyard_core::evaluate::probe_rule(&pack, rule, &world, now, expression)
        .map_err(CliError::Input)?;
    for note in &probe.notes {
        errln!("note: {note}");
    }
    match probe.value {
        Ok(value) => {
            outln!(
                "{}",
                serde_json::to_string_pretty(&value).unwrap_or_default()
            );
            Ok(0)
        }
        Err(e) => {
            errln!("error: {e}");
            Ok(1)
        }
    }
}
