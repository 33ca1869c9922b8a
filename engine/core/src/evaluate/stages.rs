//! Staged outputs: the stages as one evaluation sees them (written in the pack or made from
//! data), what each renders, whether its gates pass over the objects as observed, and the
//! progress written into the trigger's status.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};

use crate::names::{STAGE_COMPLETED, STAGE_FAILED, STAGE_IN_PROGRESS};
use crate::object::ObjectKey;
use crate::outcome::{DesiredObject, ReadKey};
use crate::pack::{CompiledRule, CompiledStage, CompiledStages, CompiledStagesFrom, Expr};
use crate::template::{Held, RenderContext};

use super::bindings::Bindings;
use super::context::{EvalContext, Stop, compact};

/// A stage as one evaluation sees it.
struct StageDefinition<'s> {
    name: String,
    stage: &'s CompiledStage,
    /// The definition from data, bound as `stage`.
    definition: Option<Value>,
    gates: Vec<Expr>,
    timeout: Option<chrono::TimeDelta>,
}

fn is_identifier(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl<'a> EvalContext<'a> {
    /// Runs a rule's stages: renders what the current stage applies (and what earlier stages
    /// without `cleanup` keep), checks the current stage's gates against the objects as
    /// observed, moves on while gates pass, and returns the progress to write into the
    /// trigger's status. Pure: the progress read comes from the trigger's status, the time
    /// from the clock; a stage waiting for its timeout sets `Outcome.requeue_after`.
    pub(super) fn run_stages(
        &mut self,
        rule: &CompiledRule,
        stages: &CompiledStages,
        bindings: &mut Bindings,
        context: &mut RenderContext<'_>,
        rendered: &mut Vec<DesiredObject>,
    ) -> Result<Value, Stop> {
        let name = rule.name.as_str();
        let defs = self.stage_definitions(rule, stages, bindings)?;
        let previous = self
            .trigger
            .get("status")
            .and_then(|s| s.get(&stages.status_field))
            .filter(|p| p.is_object());
        let field = |p: &Value, f: &str| p.get(f).and_then(Value::as_str).map(str::to_string);
        let mut state = previous
            .and_then(|p| field(p, "state"))
            .unwrap_or_else(|| STAGE_IN_PROGRESS.to_string());
        let mut message = previous.and_then(|p| field(p, "message"));
        let mut start = previous
            .and_then(|p| field(p, "stageStartTime"))
            .and_then(|t| DateTime::parse_from_rfc3339(&t).ok())
            .map_or(self.now, |t| t.with_timezone(&Utc));
        let mut index = match previous.and_then(|p| field(p, "stage")) {
            None => 0,
            Some(stage) => match defs.iter().position(|d| d.name == stage) {
                Some(i) => i,
                None if state == STAGE_IN_PROGRESS => {
                    state = STAGE_FAILED.to_string();
                    message = Some(format!("stage `{stage}` is no longer defined"));
                    0
                }
                None => defs.len(),
            },
        };
        if defs.is_empty() {
            state = STAGE_COMPLETED.to_string();
        }
        match state.as_str() {
            STAGE_COMPLETED => {
                for j in (0..defs.len()).filter(|j| !defs[*j].stage.cleanup) {
                    self.render_stage(rule, &defs[j], bindings, context, rendered)?;
                }
            }
            STAGE_FAILED => {
                // The failed stage's objects stay for inspection.
                for j in (0..defs.len())
                    .filter(|j| *j == index || (*j < index && !defs[*j].stage.cleanup))
                {
                    self.render_stage(rule, &defs[j], bindings, context, rendered)?;
                }
            }
            _ => {
                for j in (0..index.min(defs.len())).filter(|j| !defs[*j].stage.cleanup) {
                    self.render_stage(rule, &defs[j], bindings, context, rendered)?;
                }
                loop {
                    let Some(def) = defs.get(index) else {
                        state = STAGE_COMPLETED.to_string();
                        break;
                    };
                    let mark = rendered.len();
                    let bound = self.render_stage(rule, def, bindings, context, rendered)?;
                    let passed = self.stage_gates_pass(rule, def, &bound, bindings)?;
                    if passed {
                        if def.stage.cleanup {
                            rendered.truncate(mark);
                        }
                        index += 1;
                        start = self.now;
                        continue;
                    }
                    if let Some(timeout) = def.timeout {
                        let deadline = start + timeout;
                        if self.now >= deadline {
                            state = STAGE_FAILED.to_string();
                            message = Some(format!(
                                "stage `{}` did not pass within {}",
                                def.name,
                                crate::duration::format_duration(timeout)
                            ));
                        } else if let Ok(wait) = (deadline - self.now).to_std() {
                            let nearest = self.outcome.requeue_after.map_or(wait, |r| r.min(wait));
                            self.outcome.requeue_after = Some(nearest);
                        }
                    }
                    break;
                }
            }
        }
        let mut progress = Map::new();
        progress.insert("state".into(), Value::String(state.clone()));
        let current = defs.get(index).or(defs.last());
        if let Some(def) = current {
            progress.insert("stage".into(), Value::String(def.name.clone()));
        }
        progress.insert("index".into(), json!(index.min(defs.len())));
        progress.insert(
            "stageStartTime".into(),
            Value::String(start.to_rfc3339_opts(SecondsFormat::Secs, true)),
        );
        if state == STAGE_FAILED
            && let Some(m) = message
        {
            progress.insert("message".into(), Value::String(m));
        }
        let progress = Value::Object(progress);
        if self.traced {
            self.trace(name, "stages", None, compact(&progress));
        }
        Ok(progress)
    }

    /// The stages as this evaluation sees them: written in the pack, or one per element of
    /// `from.list`, with their names, gates and timeouts evaluated.
    fn stage_definitions<'s>(
        &mut self,
        rule: &CompiledRule,
        stages: &'s CompiledStages,
        bindings: &mut Bindings,
    ) -> Result<Vec<StageDefinition<'s>>, Stop> {
        let name = rule.name.as_str();
        let Some(from) = &stages.from else {
            return Ok(stages
                .stages
                .iter()
                .map(|stage| StageDefinition {
                    name: stage.name.clone(),
                    stage,
                    definition: None,
                    gates: stage.gates.clone(),
                    timeout: stage.timeout,
                })
                .collect());
        };
        let Some(pattern) = stages.stages.first() else {
            return Ok(Vec::new());
        };
        let (value, list) = self.eval_json(name, &from.list, bindings, None)?;
        let Value::Array(elements) = list else {
            return Err(self.fail_expr(
                name,
                &from.list,
                format!("expected a list of stages, got {}", value.type_name()),
            ));
        };
        let mut defs = Vec::new();
        for element in elements {
            bindings.bind_extra("stage", &element);
            let result = self.stage_from(rule, from, pattern, &element, bindings);
            bindings.unbind_extra("stage");
            defs.push(result?);
        }
        Ok(defs)
    }

    fn stage_from<'s>(
        &mut self,
        rule: &CompiledRule,
        from: &CompiledStagesFrom,
        pattern: &'s CompiledStage,
        element: &Value,
        bindings: &Bindings,
    ) -> Result<StageDefinition<'s>, Stop> {
        let name = rule.name.as_str();
        let stage_name = self.eval_string(name, &from.name, bindings)?;
        let mut gates = Vec::new();
        if let Some(expr) = &from.gates {
            let (value, sources) = self.eval_json(name, expr, bindings, None)?;
            let sources = match sources {
                Value::Null => Vec::new(),
                Value::Array(items) => items,
                _ => {
                    return Err(self.fail_expr(
                        name,
                        expr,
                        format!(
                            "expected a list of CEL expressions, got {}",
                            value.type_name()
                        ),
                    ));
                }
            };
            for (i, source) in sources.iter().enumerate() {
                let path = format!("stage `{stage_name}`, gate {i}");
                let Some(source) = source.as_str() else {
                    return Err(self.fail(
                        name,
                        &path,
                        None,
                        format!(
                            "a gate must be a CEL expression (a string), got {}",
                            compact(source)
                        ),
                    ));
                };
                match self.pack.gate(source) {
                    Ok(program) => gates.push(Expr {
                        program,
                        path,
                        max_cost: None,
                        origin: None,
                        label: None,
                        shared_by: None,
                    }),
                    Err(e) => {
                        return Err(self.fail(
                            name,
                            &path,
                            Some(source),
                            format!("invalid CEL expression: {e}"),
                        ));
                    }
                }
            }
        }
        let timeout = match &from.timeout {
            None => None,
            Some(expr) => match self.eval_json(name, expr, bindings, None)? {
                (_, Value::Null) => None,
                (_, Value::String(text)) => match crate::duration::parse_duration(&text) {
                    Ok(t) => Some(t),
                    Err(e) => {
                        return Err(self.fail_expr(name, expr, e));
                    }
                },
                (value, _) => {
                    return Err(self.fail_expr(
                        name,
                        expr,
                        format!(
                            "expected a duration string or null, got {}",
                            value.type_name()
                        ),
                    ));
                }
            },
        };
        Ok(StageDefinition {
            name: stage_name,
            stage: pattern,
            definition: Some(element.clone()),
            gates,
            timeout,
        })
    }

    /// Renders a stage's outputs; returns each object's key under its `bindAs` name.
    fn render_stage(
        &mut self,
        rule: &CompiledRule,
        def: &StageDefinition<'_>,
        bindings: &mut Bindings,
        context: &mut RenderContext<'_>,
        rendered: &mut Vec<DesiredObject>,
    ) -> Result<Vec<(String, ObjectKey)>, Stop> {
        let mut bound = Vec::new();
        if let Some(definition) = &def.definition {
            bindings.bind_extra("stage", definition);
            context.set("stage", Held::Owned(definition.clone()));
        }
        let mut result = Ok(());
        for output in &def.stage.outputs {
            result = self.render_output(rule, output, bindings, context, rendered, &mut bound);
            if result.is_err() {
                break;
            }
        }
        bindings.unbind_extra("stage");
        context.unset("stage");
        result.map(|()| bound)
    }

    /// Whether a stage's gates all hold over its objects as the world has them. Until every
    /// object exists the gates are not evaluated: the stage waits.
    fn stage_gates_pass(
        &mut self,
        rule: &CompiledRule,
        def: &StageDefinition<'_>,
        bound: &[(String, ObjectKey)],
        bindings: &mut Bindings,
    ) -> Result<bool, Stop> {
        let name = rule.name.as_str();
        let mut resources = Map::new();
        let mut missing = Vec::new();
        for (bind, key) in bound {
            self.read(|| ReadKey::Object(key.clone()));
            let observed = self.world.get_key(key);
            match observed {
                Some(o) => {
                    resources.insert(bind.clone(), Value::clone(&o));
                }
                None => {
                    missing.push(key.to_string());
                    resources.insert(bind.clone(), Value::Null);
                }
            }
        }
        if !missing.is_empty() {
            if self.traced {
                self.trace(
                    name,
                    format!("stage {}", def.name),
                    None,
                    format!("waiting for {}", missing.join(", ")),
                );
            }
            return Ok(false);
        }
        // Gates from data read each resource by its name too, as the seed binds them.
        let mut extra: Vec<String> = vec!["resources".into()];
        bindings.bind_extra("resources", &Value::Object(resources.clone()));
        if let Some(definition) = &def.definition {
            bindings.bind_extra("stage", definition);
            extra.push("stage".into());
            for (bind, object) in &resources {
                if !bindings.lookups.contains_key(bind) && is_identifier(bind) {
                    bindings.bind_extra(bind, object);
                    extra.push(bind.clone());
                }
            }
        }
        let mut outcome = Ok(true);
        for gate in &def.gates {
            match self.eval_bool(name, gate, bindings, None) {
                Ok(true) => {}
                Ok(false) => {
                    if self.traced {
                        self.trace(name, &gate.path, Some(gate.source()), "false: waiting");
                    }
                    outcome = Ok(false);
                    break;
                }
                Err(stop) => {
                    outcome = Err(stop);
                    break;
                }
            }
        }
        for bind in &extra {
            bindings.unbind_extra(bind);
        }
        outcome
    }
}
