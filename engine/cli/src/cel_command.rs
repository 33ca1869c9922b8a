//! `switchyard cel`: evaluate one CEL expression, or a prompt of them, the way rules do.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;

use switchyard_cel as cel;
use switchyard_cli::CliError;
use switchyard_core::yaml;

/// Variables for the expression: a bindings file (a YAML or JSON map) then `--var` pairs.
fn bindings(
    file: Option<&Path>,
    vars: &[String],
) -> Result<BTreeMap<String, serde_json::Value>, CliError> {
    let mut out = BTreeMap::new();
    if let Some(path) = file {
        let text = std::fs::read_to_string(path).map_err(|e| CliError::io(path, e))?;
        let shown = switchyard_cli::files::display(path);
        let documents = yaml::parse_documents(&text).map_err(|e| {
            CliError::Input(format!(
                "{shown}:{}:{}: invalid YAML: {}",
                e.pos.line, e.pos.column, e.message
            ))
        })?;
        match documents.first().map(yaml::Node::to_json) {
            Some(serde_json::Value::Object(map)) => out.extend(map),
            None => {}
            Some(_) => {
                return Err(CliError::Input(format!(
                    "{shown}: bindings must be a map from variable name to value"
                )));
            }
        }
    }
    for pair in vars {
        let Some((name, json)) = pair.split_once('=') else {
            return Err(CliError::Usage(format!("--var `{pair}` must be NAME=JSON")));
        };
        let value: serde_json::Value = serde_json::from_str(json)
            .map_err(|e| CliError::Usage(format!("--var {name}: `{json}` is not JSON: {e}")))?;
        out.insert(name.to_string(), value);
    }
    Ok(out)
}

/// Evaluates `source`; the result as JSON, or the error text (with a caret for syntax and
/// type errors).
fn evaluate(
    env: &cel::Env,
    source: &str,
    bound: &BTreeMap<String, cel::Value>,
) -> Result<serde_json::Value, String> {
    // Type-checked as rules are (cel-go's checker; the variables `dyn`): `1 == 1u` fails
    // here, before anything runs, as a pack holding it is refused at load. With `--strict`,
    // as the API server checks (the environment's type checking).
    let mut types = env.type_env();
    for name in bound.keys() {
        types.add_variable(name, cel::check::Type::Dyn);
    }
    let program = env
        .compile_with_types(source, &types)
        .map_err(|e| at_position(source, e.line, e.column, &e.message))?;
    let (_, issues) = cel::check::check(&program, &types);
    if !issues.is_empty() {
        let shown: Vec<String> = issues
            .iter()
            .map(|i| at_position(source, i.line, i.column, &i.message))
            .collect();
        return Err(shown.join("\n"));
    }
    let mut activation = cel::Activation::new(env);
    for (name, value) in bound {
        activation.bind(name, value.clone());
    }
    let value = program
        .eval(&activation)
        .map_err(|e| match (e.line, e.column) {
            (Some(line), Some(column)) => at_position(source, line, column, &e.message),
            _ => e.message,
        })?;
    to_json(&value)
}

/// A value as JSON, a type value as its name (`type(1u)` is `"uint"`, as Kubernetes'
/// tools print it).
fn to_json(value: &cel::Value) -> Result<serde_json::Value, String> {
    match value {
        cel::Value::Type(t) => Ok(serde_json::Value::String(t.name().to_string())),
        cel::Value::List(items) => items
            .iter()
            .map(to_json)
            .collect::<Result<Vec<_>, _>>()
            .map(serde_json::Value::Array),
        cel::Value::Map(map) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map.iter() {
                out.insert(k.to_json_key(), to_json(v)?);
            }
            Ok(serde_json::Value::Object(out))
        }
        cel::Value::Optional(Some(inner)) => to_json(inner),
        other => other.to_json().map_err(|e| e.message),
    }
}

/// `line:column: message` and the source line with a caret under the column.
fn at_position(source: &str, line: usize, column: usize, message: &str) -> String {
    let text = source.lines().nth(line.saturating_sub(1)).unwrap_or("");
    format!(
        "{line}:{column}: {message}\n  | {text}\n  | {}^",
        " ".repeat(column.saturating_sub(1))
    )
}

pub fn run(
    expression: Option<&str>,
    file: Option<&Path>,
    vars: &[String],
    environment: cel::CelEnvironment,
    strict: bool,
) -> Result<u8, CliError> {
    let strictness = if strict {
        cel::Strictness::Kubernetes
    } else {
        cel::Strictness::Relaxed
    };
    let env = cel::Env::new(environment).with_strictness(strictness);
    let mut bound: BTreeMap<String, cel::Value> = bindings(file, vars)?
        .iter()
        .map(|(k, v)| (k.clone(), cel::Value::from_json(v)))
        .collect();
    if let Some(source) = expression {
        return Ok(match evaluate(&env, source, &bound) {
            Ok(json) => {
                outln!(
                    "{}",
                    serde_json::to_string_pretty(&json).unwrap_or_default()
                );
                0
            }
            Err(message) => {
                errln!("error: {message}");
                1
            }
        });
    }
    errln!(
        "switchyard cel: one expression per line; `:let NAME = JSON` binds a variable, `:vars` lists them, `:quit` ends"
    );
    let stdin = std::io::stdin();
    let mut failed = false;
    for line in stdin.lock().lines() {
        let line = line.map_err(|e| CliError::Input(format!("reading stdin: {e}")))?;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if line == ":quit" || line == ":q" {
            break;
        }
        if line == ":vars" {
            for name in bound.keys() {
                outln!("{name}");
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix(":let ") {
            match rest.split_once('=') {
                Some((name, json)) => {
                    match serde_json::from_str::<serde_json::Value>(json.trim()) {
                        Ok(value) => {
                            bound.insert(name.trim().to_string(), cel::Value::from_json(&value));
                        }
                        Err(e) => errln!("error: `{}` is not JSON: {e}", json.trim()),
                    }
                }
                None => errln!("error: use `:let NAME = JSON`"),
            }
            continue;
        }
        match evaluate(&env, line, &bound) {
            Ok(json) => outln!("{}", serde_json::to_string(&json).unwrap_or_default()),
            Err(message) => {
                failed = true;
                errln!("error: {message}");
            }
        }
    }
    Ok(u8::from(failed))
}
