//! Static scan of a registered template for the root variables it reads.

use std::collections::HashSet;

use handlebars::template::{Parameter, Template, TemplateElement};
use handlebars::{Handlebars, Path, PathSeg};

/// A root variable path read by a template, with its 1-based position in the template file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplatePath {
    pub path: Vec<String>,
    pub line: usize,
    pub column: usize,
}

/// Where and how paths are resolved in the part of the template being walked.
#[derive(Clone)]
struct Scope {
    /// The context is the render's root context (no `#each`/`#with` in between).
    root: bool,
    /// Report every path at this position: set inside a partial, to the `{{> …}}` call.
    at: Option<(usize, usize)>,
    /// First segments bound by partial `key=value` arguments (not root variables).
    shadowed: Vec<String>,
}

struct Walker<'a> {
    registry: &'a Handlebars<'static>,
    /// Partials being walked (recursion guard).
    stack: Vec<String>,
    /// Names of inline partials (`{{#*inline "name"}}`): their context is not known statically.
    inline: HashSet<String>,
    out: Vec<TemplatePath>,
}

pub(super) fn referenced_paths(registry: &Handlebars<'static>, name: &str) -> Vec<TemplatePath> {
    let Some(template) = registry.get_template(name) else {
        return Vec::new();
    };
    let mut walker = Walker {
        registry,
        stack: vec![name.to_owned()],
        inline: HashSet::new(),
        out: Vec::new(),
    };
    let root = Scope {
        root: true,
        at: None,
        shadowed: Vec::new(),
    };
    collect_inline(template, &mut walker.inline);
    walker.template(template, &root, (1, 1));
    walker.out
}

fn position(template: &Template, idx: usize, fallback: (usize, usize)) -> (usize, usize) {
    match template.mapping.get(idx) {
        Some(m) => (m.0, m.1),
        None => fallback,
    }
}

/// Whether a path segment is the given grammar rule (`path_root`, `path_up`, `path_local`).
fn is_rule(seg: &PathSeg, rule: &str) -> bool {
    match seg {
        PathSeg::Ruled(r) => format!("{r:?}") == rule,
        _ => false,
    }
}

fn static_name(p: &Parameter) -> Option<&str> {
    match p {
        Parameter::Name(n) => Some(n),
        Parameter::Path(Path::Relative((_, raw)) | Path::Local((_, _, raw))) => Some(raw),
        _ => None,
    }
}

/// Adds the names of the inline partials `t` defines (`{{#*inline "name"}}`) to `out`.
fn collect_inline(t: &Template, out: &mut HashSet<String>) {
    for el in &t.elements {
        match el {
            TemplateElement::DecoratorExpression(dt) | TemplateElement::DecoratorBlock(dt) => {
                if let Some(Parameter::Literal(serde_json::Value::String(n))) = dt.params.first() {
                    out.insert(n.clone());
                }
            }
            TemplateElement::HelperBlock(ht) => {
                for inner in [&ht.template, &ht.inverse].into_iter().flatten() {
                    collect_inline(inner, out);
                }
            }
            TemplateElement::PartialBlock(dt) => {
                if let Some(inner) = &dt.template {
                    collect_inline(inner, out);
                }
            }
            _ => {}
        }
    }
}

impl Walker<'_> {
    fn template(&mut self, t: &Template, scope: &Scope, fallback: (usize, usize)) {
        for (idx, el) in t.elements.iter().enumerate() {
            let pos = scope.at.unwrap_or_else(|| position(t, idx, fallback));
            self.element(el, scope, pos);
        }
    }

    fn element(&mut self, el: &TemplateElement, scope: &Scope, pos: (usize, usize)) {
        match el {
            // After the registration rewrite every value expression is `__sy_value <value>`,
            // so the paths it reads are all in its parameters.
            TemplateElement::Expression(ht) | TemplateElement::HtmlExpression(ht) => {
                self.params(&ht.params, &ht.hash, scope, pos);
            }
            TemplateElement::HelperBlock(ht) => {
                self.params(&ht.params, &ht.hash, scope, pos);
                let changes_context = matches!(static_name(&ht.name), Some("each" | "with"));
                let body = Scope {
                    root: scope.root && !changes_context,
                    ..scope.clone()
                };
                if let Some(t) = &ht.template {
                    self.template(t, &body, pos);
                }
                // `{{else}}` renders in the enclosing context, also for `#each`/`#with`.
                if let Some(t) = &ht.inverse {
                    self.template(t, scope, pos);
                }
            }
            TemplateElement::PartialExpression(dt) | TemplateElement::PartialBlock(dt) => {
                self.params(&dt.params, &dt.hash, scope, pos);
                if let Some(name) = static_name(&dt.name) {
                    self.partial(name, dt.params.is_empty(), &dt.hash, scope, pos);
                }
                if let Some(t) = &dt.template {
                    self.template(t, scope, pos);
                }
            }
            TemplateElement::DecoratorExpression(dt) | TemplateElement::DecoratorBlock(dt) => {
                if let Some(t) = &dt.template {
                    let unknown = Scope {
                        root: false,
                        ..scope.clone()
                    };
                    self.template(t, &unknown, pos);
                }
            }
            _ => {}
        }
    }

    fn partial(
        &mut self,
        name: &str,
        same_context: bool,
        hash: &std::collections::HashMap<String, Parameter>,
        scope: &Scope,
        pos: (usize, usize),
    ) {
        if self.inline.contains(name) || self.stack.iter().any(|n| n == name) {
            return;
        }
        let registry = self.registry;
        let Some(t) = registry.get_template(name) else {
            return;
        };
        collect_inline(t, &mut self.inline);
        let mut shadowed = scope.shadowed.clone();
        shadowed.extend(hash.keys().cloned());
        let inner = Scope {
            root: scope.root && same_context,
            at: Some(scope.at.unwrap_or(pos)),
            shadowed,
        };
        self.stack.push(name.to_owned());
        self.template(t, &inner, pos);
        self.stack.pop();
    }

    fn params(
        &mut self,
        params: &[Parameter],
        hash: &std::collections::HashMap<String, Parameter>,
        scope: &Scope,
        pos: (usize, usize),
    ) {
        for p in params {
            self.param(p, scope, pos);
        }
        let mut keys: Vec<&String> = hash.keys().collect();
        keys.sort();
        for key in keys {
            if let Some(p) = hash.get(key) {
                self.param(p, scope, pos);
            }
        }
    }

    fn param(&mut self, p: &Parameter, scope: &Scope, pos: (usize, usize)) {
        match p {
            Parameter::Path(Path::Relative((segs, _))) => {
                let names = || -> Vec<String> {
                    segs.iter()
                        .filter_map(|s| match s {
                            PathSeg::Named(n) => Some(n.clone()),
                            _ => None,
                        })
                        .collect()
                };
                let path = if segs.first().is_some_and(|s| is_rule(s, "path_root")) {
                    names()
                } else if scope.root && !segs.iter().any(|s| is_rule(s, "path_up")) {
                    let path = names();
                    match path.first() {
                        Some(first) if scope.shadowed.contains(first) => return,
                        _ => path,
                    }
                } else {
                    return;
                };
                if !path.is_empty() {
                    self.out.push(TemplatePath {
                        path,
                        line: pos.0,
                        column: pos.1,
                    });
                }
            }
            Parameter::Subexpression(sub) => {
                if let TemplateElement::Expression(ht) = sub.as_element() {
                    self.params(&ht.params, &ht.hash, scope, pos);
                }
            }
            _ => {}
        }
    }
}
