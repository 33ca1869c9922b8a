//! Pack parameters: the values a pack's rules read as `params`. Values come from values files
//! and `--set` in the dry run, from the broker's configuration, and from a test suite; they
//! are merged (later over earlier, maps key by key, as Helm merges values), the parameters'
//! defaults fill what none gives, and every value is checked against its parameter's schema.
//! Problems name where the value was written: `file:line:column` for YAML, the flag for
//! `--set`.

use serde_json::{Map, Value};

use crate::diagnostic::Diagnostic;
use crate::validate::ValueSchema;
use crate::yaml::{self, Node, PathSegment};

/// A parameter as the pack declares it, its schema compiled.
#[derive(Debug)]
pub struct CompiledParameter {
    pub name: String,
    pub description: Option<String>,
    pub schema: ValueSchema,
    pub default: Option<Value>,
    /// The schema's `type` (`string`, `integer`, ...), for messages.
    pub type_name: String,
}

/// Where a value was written.
#[derive(Debug, Clone)]
enum Source {
    /// A YAML map of parameter name to value (a values file, a configuration's, a suite's).
    Yaml { file: String, node: Node },
    /// `--set PATH=VALUE`: the flag, the path it sets and the value.
    Set {
        flag: String,
        path: Vec<String>,
        value: Value,
    },
}

/// Values given for a pack's parameters, with where each was written.
#[derive(Debug, Clone, Default)]
pub struct Values {
    merged: Map<String, Value>,
    sources: Vec<Source>,
}

impl Values {
    pub fn new() -> Values {
        Values::default()
    }

    /// The values, merged.
    pub fn merged(&self) -> &Map<String, Value> {
        &self.merged
    }

    /// A values file: a YAML map from parameter name to value (an empty file gives none).
    ///
    /// # Errors
    /// Invalid YAML, several documents, or a document that is not a map, at its position.
    pub fn add_file(&mut self, text: &str, file: &str) -> Result<(), Box<Diagnostic>> {
        let documents = yaml::parse_documents(text).map_err(|e| {
            Box::new(
                Diagnostic::error("values::yaml", format!("invalid YAML: {}", e.message))
                    .at(file, e.pos),
            )
        })?;
        match documents.as_slice() {
            [] => Ok(()),
            [node] if node.to_json().is_null() => Ok(()),
            [node] => self.add_node(file, node).map_err(|message| {
                Box::new(Diagnostic::error("values::invalid", message).at(file, node.pos))
            }),
            [_, second, ..] => Err(Box::new(
                Diagnostic::error(
                    "values::invalid",
                    "a values file holds one YAML document, a map from parameter name to value"
                        .to_string(),
                )
                .at(file, second.pos),
            )),
        }
    }

    /// A YAML map from parameter name to value, inside `file` (a configuration's, a test
    /// suite's).
    ///
    /// # Errors
    /// When the node is not a map.
    pub fn add_node(&mut self, file: &str, node: &Node) -> Result<(), String> {
        let Value::Object(map) = node.to_json() else {
            return Err(
                "values must be a map from parameter name to value (`ingressClass: nginx`)"
                    .to_string(),
            );
        };
        merge_map(&mut self.merged, &map);
        self.sources.push(Source::Yaml {
            file: file.to_string(),
            node: node.clone(),
        });
        Ok(())
    }

    /// `--set PATH=VALUE`: PATH is a parameter name, or a path into a parameter's map
    /// (`limits.cpu`); VALUE is read as YAML (`3` is a number, `true` a boolean, `[a, b]` a
    /// list, `"3"` a string; an empty VALUE is an empty string).
    ///
    /// # Errors
    /// A flag without `=`, an empty path segment, or a VALUE that is not YAML.
    pub fn add_set(&mut self, flag: &str) -> Result<(), String> {
        let fail = |message: String| format!("--set {flag}: {message}");
        let Some((path, text)) = flag.split_once('=') else {
            return Err(fail(
                "expected NAME=VALUE (or PATH=VALUE, PATH as `a.b`)".into(),
            ));
        };
        let path: Vec<String> = path.split('.').map(str::to_string).collect();
        if path.iter().any(String::is_empty) {
            return Err(fail(
                "the name before `=` is empty or has an empty part".into(),
            ));
        }
        let value = if text.is_empty() {
            Value::String(String::new())
        } else {
            match yaml::parse_documents(text) {
                Ok(documents) if documents.len() == 1 => documents[0].to_json(),
                Ok(_) => return Err(fail("the value is not one YAML value".into())),
                Err(e) => return Err(fail(format!("the value is not YAML: {}", e.message))),
            }
        };
        let mut nested = value.clone();
        for key in path.iter().rev() {
            let mut map = Map::new();
            map.insert(key.clone(), nested);
            nested = Value::Object(map);
        }
        if let Value::Object(map) = &nested {
            merge_map(&mut self.merged, map);
        }
        self.sources.push(Source::Set {
            flag: flag.to_string(),
            path,
            value,
        });
        Ok(())
    }

    /// Where the parameter `key` was last given a value: the key's `file:line:col`, or
    /// `--set FLAG`.
    fn locate_key(&self, key: &str) -> Option<String> {
        for source in self.sources.iter().rev() {
            match source {
                Source::Yaml { file, node } => {
                    if let Some(pos) = node.key_pos(key) {
                        return Some(format!("{file}:{}:{}", pos.line, pos.column));
                    }
                }
                Source::Set { flag, path, .. } => {
                    if path.first().map(String::as_str) == Some(key) {
                        return Some(format!("--set {flag}"));
                    }
                }
            }
        }
        None
    }

    /// Where the value at `path` (parameter name first) was last written: `file:line:col`
    /// or `--set FLAG`.
    fn locate(&self, path: &[PathSegment]) -> Option<String> {
        for source in self.sources.iter().rev() {
            match source {
                Source::Yaml { file, node } => {
                    let Some(PathSegment::Key(first)) = path.first() else {
                        continue;
                    };
                    if node.key_pos(first).is_none() {
                        continue;
                    }
                    let found = node.closest(path);
                    return Some(format!("{file}:{}:{}", found.pos.line, found.pos.column));
                }
                Source::Set {
                    flag,
                    path: set,
                    value,
                } => {
                    let overlaps = set.iter().zip(path).all(|(a, b)| match b {
                        PathSegment::Key(k) => k == a,
                        PathSegment::Index(_) => false,
                    });
                    // It wrote the value when the rest of the path is in what it set (a
                    // `--set limits={}` leaves `limits.cpu` to whoever set it before).
                    let wrote = path.len() <= set.len() || {
                        let mut node = Some(value);
                        for segment in &path[set.len()..] {
                            node = node.and_then(|n| match segment {
                                PathSegment::Key(k) => n.get(k),
                                PathSegment::Index(i) => n.get(i),
                            });
                        }
                        node.is_some()
                    };
                    if overlaps && wrote {
                        return Some(format!("--set {flag}"));
                    }
                }
            }
        }
        None
    }
}

/// A violation's field path (`limits.cpu`, `zones[0]`, `labels[team]`) as YAML path
/// segments: `[n]` an index, `[key]` a map key.
fn violation_path(path: &str) -> Vec<PathSegment> {
    let mut segments = Vec::new();
    for part in path.split('.') {
        let (key, mut rest) = part.split_once('[').map_or((part, ""), |(k, r)| (k, r));
        if !key.is_empty() {
            segments.push(PathSegment::Key(key.to_string()));
        }
        while let Some((inside, after)) = rest.split_once(']') {
            segments.push(match inside.parse() {
                Ok(i) => PathSegment::Index(i),
                Err(_) => PathSegment::Key(inside.to_string()),
            });
            rest = after.strip_prefix('[').unwrap_or(after);
        }
    }
    segments
}

/// Merges `over` into `base`: maps key by key, anything else replaced.
pub fn merge_map(base: &mut Map<String, Value>, over: &Map<String, Value>) {
    for (key, value) in over {
        match (base.get_mut(key), value) {
            (Some(Value::Object(inner)), Value::Object(over_inner)) => {
                merge_map(inner, over_inner);
            }
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

/// The values `params` holds for `parameters`: those given, else the defaults (each with its
/// schema's defaults applied), or every problem, each naming where the value was written.
///
/// # Errors
/// Values of no parameter, parameters without a value or a default, values their schema
/// refuses.
pub fn bind(
    pack: &str,
    parameters: &[CompiledParameter],
    values: &Values,
) -> Result<Map<String, Value>, Vec<String>> {
    let mut problems = Vec::new();
    let names: Vec<String> = parameters.iter().map(|p| p.name.clone()).collect();
    for key in values.merged.keys() {
        if names.contains(key) {
            continue;
        }
        let at = values
            .locate_key(key)
            .map_or_else(String::new, |w| format!("{w}: "));
        let hint = match switchyard_cel::check::suggest(key, names.iter()) {
            Some(s) => format!(" (did you mean `{s}`?)"),
            None if names.is_empty() => " (it has no parameters)".to_string(),
            None => format!(
                " (its parameters: {})",
                names
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        problems.push(format!(
            "{at}`{key}` is not a parameter of pack `{pack}`{hint}"
        ));
    }
    let mut bound = Map::new();
    for parameter in parameters {
        let name = &parameter.name;
        let (value, given) = match (values.merged.get(name), &parameter.default) {
            (Some(value), _) => (value, true),
            (None, Some(default)) => (default, false),
            (None, None) => {
                problems.push(format!(
                    "pack `{pack}`: parameter `{name}` ({}) has no default, and no value was given for it",
                    parameter.type_name
                ));
                continue;
            }
        };
        let violations = parameter.schema.check(value, &format!("params.{name}"));
        for violation in violations {
            let path = violation_path(violation.path.strip_prefix("params.").unwrap_or(name));
            let at = if given {
                values.locate(&path)
            } else {
                Some(format!("pack `{pack}`: the default of parameter `{name}`"))
            };
            problems.push(match at {
                Some(at) => format!("{at}: {violation}"),
                None => violation.to_string(),
            });
        }
        bound.insert(name.clone(), parameter.schema.defaulted(value));
    }
    if problems.is_empty() {
        Ok(bound)
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn sets_nest_and_merge_over_files() {
        let mut values = Values::new();
        values
            .add_file("replicas: 2\nlimits: {cpu: 1, memory: 2Gi}\n", "v.yaml")
            .unwrap();
        values.add_set("limits.cpu=4").unwrap();
        values.add_set("name=").unwrap();
        assert_eq!(
            Value::Object(values.merged().clone()),
            serde_json::json!({"replicas": 2, "limits": {"cpu": 4, "memory": "2Gi"}, "name": ""})
        );
        assert_eq!(
            values.locate(&yaml::parse_path("limits.cpu")).unwrap(),
            "--set limits.cpu=4"
        );
        assert_eq!(
            values.locate(&yaml::parse_path("limits.memory")).unwrap(),
            "v.yaml:2:26"
        );
        assert_eq!(
            violation_path("labels[team].x[2]"),
            [
                PathSegment::Key("labels".into()),
                PathSegment::Key("team".into()),
                PathSegment::Key("x".into()),
                PathSegment::Index(2)
            ]
        );
        assert_eq!(
            values.add_set("x").unwrap_err(),
            "--set x: expected NAME=VALUE (or PATH=VALUE, PATH as `a.b`)"
        );
        assert_eq!(
            values.add_set("a..b=1").unwrap_err(),
            "--set a..b=1: the name before `=` is empty or has an empty part"
        );
    }
}
