//! The import graph between the files of a crate, and the circles in it.
//!
//! A file imports another when it names an item of the other's module: a `use` of it, or a
//! path through it (`crate::plan::absorb(..)`, `super::context::Bindings`, `fill::render`).
//! Declaring a module (`mod status;`) is not an import: a parent that only declares and
//! re-exports its children is the children's facade, and a child that reaches back into its
//! parent while the parent re-exports it closes a circle. Paths are resolved to the deepest
//! module that has a file (or an inline module, which stays in its file), so importing
//! `crate::evaluate::Outcome` depends on `evaluate.rs` even when that file only re-exports it:
//! a facade is a real dependency.
//!
//! Paths inside macro invocations are not seen (their tokens are not parsed).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

use syn::visit::Visit;

#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}:{column}: {message}")]
    Parse {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}: module `{module}` has no file (looked for {candidates})")]
    MissingModule {
        path: PathBuf,
        module: String,
        candidates: String,
    },
    #[error("{0}: no crate root (src/lib.rs, src/main.rs or src/bin/*.rs)")]
    NoRoot(PathBuf),
}

/// One import: `from` names an item of `to`'s module at `line`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Edge {
    pub from: PathBuf,
    pub to: PathBuf,
    pub line: usize,
}

/// The files of one crate (every target under `src/`) and the imports between them, with
/// paths relative to the crate's folder.
#[derive(Debug, Default)]
pub struct Graph {
    pub files: BTreeSet<PathBuf>,
    /// The first import of each (from, to) pair.
    pub edges: BTreeMap<(PathBuf, PathBuf), usize>,
}

/// Files that import each other, directly or through others (a strongly connected component
/// of more than one file), with the imports among them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Circle {
    pub files: BTreeSet<PathBuf>,
    pub edges: Vec<Edge>,
}

impl fmt::Display for Circle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self.files.iter().map(|p| p.display().to_string()).collect();
        writeln!(f, "circle of {} files: {}", names.len(), names.join(", "))?;
        for edge in &self.edges {
            writeln!(
                f,
                "  {}:{} imports {}",
                edge.from.display(),
                edge.line,
                edge.to.display()
            )?;
        }
        Ok(())
    }
}

/// Where a module lives: its file, and whether it has a file of its own or is inline.
#[derive(Default)]
struct Modules {
    file_of: HashMap<Vec<String>, PathBuf>,
    children: HashMap<Vec<String>, BTreeSet<String>>,
    /// Each file once, with the module path of its top level.
    parsed: Vec<(PathBuf, Vec<String>, syn::File)>,
}

/// Builds the import graph of the crate in `crate_dir`.
pub fn graph(crate_dir: &Path) -> Result<Graph, LayoutError> {
    let src = crate_dir.join("src");
    let mut roots = Vec::new();
    for name in ["lib.rs", "main.rs"] {
        let root = src.join(name);
        if root.is_file() {
            roots.push(root);
        }
    }
    let bin = src.join("bin");
    if let Ok(entries) = std::fs::read_dir(&bin) {
        let mut bins: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        bins.sort();
        for path in bins {
            if path.extension().is_some_and(|e| e == "rs") {
                roots.push(path);
            } else if path.join("main.rs").is_file() {
                roots.push(path.join("main.rs"));
            }
        }
    }
    if roots.is_empty() {
        return Err(LayoutError::NoRoot(crate_dir.to_path_buf()));
    }
    let mut graph = Graph::default();
    for root in roots {
        // Each target is its own module tree: `crate::` in a binary is the binary.
        let mut modules = Modules::default();
        let child_dir = root.parent().map(Path::to_path_buf).unwrap_or_default();
        discover(&mut modules, &root, Vec::new(), &child_dir)?;
        for (file, base, syntax) in &modules.parsed {
            let from = relative(crate_dir, file);
            graph.files.insert(from.clone());
            let mut visitor = Imports {
                modules: &modules,
                stack: vec![base.clone()],
                found: Vec::new(),
            };
            visitor.visit_file(syntax);
            for (module, line) in visitor.found {
                let Some(target) = modules.file_of.get(&module) else {
                    continue;
                };
                if target == file {
                    continue;
                }
                graph
                    .edges
                    .entry((from.clone(), relative(crate_dir, target)))
                    .or_insert(line);
            }
        }
    }
    Ok(graph)
}

fn relative(base: &Path, path: &Path) -> PathBuf {
    path.strip_prefix(base).unwrap_or(path).to_path_buf()
}

fn read(path: &Path) -> Result<syn::File, LayoutError> {
    let text = std::fs::read_to_string(path).map_err(|source| LayoutError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    syn::parse_file(&text).map_err(|e| {
        let start = e.span().start();
        LayoutError::Parse {
            path: path.to_path_buf(),
            line: start.line,
            column: start.column + 1,
            message: e.to_string(),
        }
    })
}

fn path_attribute(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|attr| {
        if !attr.path().is_ident("path") {
            return None;
        }
        let syn::Meta::NameValue(nv) = &attr.meta else {
            return None;
        };
        match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        }
    })
}

/// Registers `file` as module `module` and follows its `mod` declarations; `child_dir` is
/// where the files of its outline child modules are.
fn discover(
    modules: &mut Modules,
    file: &Path,
    module: Vec<String>,
    child_dir: &Path,
) -> Result<(), LayoutError> {
    let syntax = read(file)?;
    modules.file_of.insert(module.clone(), file.to_path_buf());
    let mut outline = Vec::new();
    collect_modules(
        modules,
        file,
        &syntax.items,
        &module,
        child_dir,
        &mut outline,
    )?;
    modules.parsed.push((file.to_path_buf(), module, syntax));
    for (child_file, child_module, grandchild_dir) in outline {
        discover(modules, &child_file, child_module, &grandchild_dir)?;
    }
    Ok(())
}

fn collect_modules(
    modules: &mut Modules,
    file: &Path,
    items: &[syn::Item],
    module: &[String],
    child_dir: &Path,
    outline: &mut Vec<(PathBuf, Vec<String>, PathBuf)>,
) -> Result<(), LayoutError> {
    for item in items {
        let syn::Item::Mod(declared) = item else {
            continue;
        };
        let name = declared.ident.to_string();
        let mut child = module.to_vec();
        child.push(name.clone());
        modules
            .children
            .entry(module.to_vec())
            .or_default()
            .insert(name.clone());
        if let Some((_, items)) = &declared.content {
            modules.file_of.insert(child.clone(), file.to_path_buf());
            collect_modules(
                modules,
                file,
                items,
                &child,
                &child_dir.join(&name),
                outline,
            )?;
            continue;
        }
        let (child_file, grandchild_dir) = if let Some(explicit) = path_attribute(&declared.attrs) {
            let base = file.parent().map(Path::to_path_buf).unwrap_or_default();
            let target = base.join(explicit);
            let dir = target.with_extension("");
            (target, dir)
        } else {
            let flat = child_dir.join(format!("{name}.rs"));
            let nested = child_dir.join(&name).join("mod.rs");
            if flat.is_file() {
                (flat, child_dir.join(&name))
            } else if nested.is_file() {
                (nested, child_dir.join(&name))
            } else {
                return Err(LayoutError::MissingModule {
                    path: file.to_path_buf(),
                    module: name,
                    candidates: format!("{} and {}", flat.display(), nested.display()),
                });
            }
        };
        outline.push((child_file, child, grandchild_dir));
    }
    Ok(())
}

/// Collects the modules a file's paths name.
struct Imports<'m> {
    modules: &'m Modules,
    stack: Vec<Vec<String>>,
    found: Vec<(Vec<String>, usize)>,
}

impl Imports<'_> {
    fn current(&self) -> &[String] {
        self.stack.last().map(Vec::as_slice).unwrap_or(&[])
    }

    /// The deepest module the path goes through, if it starts inside the crate.
    fn resolve(&self, segments: &[String]) -> Option<Vec<String>> {
        let first = segments.first()?;
        let mut module: Vec<String>;
        let mut rest = &segments[1..];
        match first.as_str() {
            "crate" => module = Vec::new(),
            "self" => module = self.current().to_vec(),
            "super" => {
                module = self.current().to_vec();
                module.pop();
                while rest.first().is_some_and(|s| s == "super") {
                    module.pop();
                    rest = &rest[1..];
                }
            }
            name => {
                let current = self.current();
                let is_child = self
                    .modules
                    .children
                    .get(current)
                    .is_some_and(|c| c.contains(name));
                if !is_child {
                    return None;
                }
                module = current.to_vec();
                module.push(name.to_string());
            }
        }
        for segment in rest {
            let mut deeper = module.clone();
            deeper.push(segment.clone());
            if self.modules.file_of.contains_key(&deeper) {
                module = deeper;
            } else {
                break;
            }
        }
        Some(module)
    }

    fn record(&mut self, segments: &[String], line: usize) {
        if let Some(module) = self.resolve(segments) {
            self.found.push((module, line));
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let line = n.ident.span().start().line;
                if n.ident == "self" {
                    let whole = prefix.clone();
                    self.record(&whole, line);
                } else {
                    prefix.push(n.ident.to_string());
                    let whole = prefix.clone();
                    self.record(&whole, line);
                    prefix.pop();
                }
            }
            syn::UseTree::Rename(r) => {
                let line = r.ident.span().start().line;
                prefix.push(r.ident.to_string());
                let whole = prefix.clone();
                self.record(&whole, line);
                prefix.pop();
            }
            syn::UseTree::Glob(g) => {
                let line = g.star_token.spans[0].start().line;
                let whole = prefix.clone();
                self.record(&whole, line);
            }
            syn::UseTree::Group(g) => {
                for item in &g.items {
                    self.use_tree(prefix, item);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Imports<'_> {
    fn visit_item_mod(&mut self, node: &'ast syn::ItemMod) {
        if let Some((_, items)) = &node.content {
            let mut module = self.current().to_vec();
            module.push(node.ident.to_string());
            self.stack.push(module);
            for item in items {
                self.visit_item(item);
            }
            self.stack.pop();
        }
    }

    fn visit_item_use(&mut self, node: &'ast syn::ItemUse) {
        let mut prefix = Vec::new();
        self.use_tree(&mut prefix, &node.tree);
    }

    fn visit_path(&mut self, node: &'ast syn::Path) {
        if node.leading_colon.is_none() && node.segments.len() > 1 {
            let segments: Vec<String> = node.segments.iter().map(|s| s.ident.to_string()).collect();
            let line = node
                .segments
                .first()
                .map(|s| s.ident.span().start().line)
                .unwrap_or(0);
            self.record(&segments, line);
        }
        syn::visit::visit_path(self, node);
    }
}

/// The circles of a graph, largest first, each with its imports.
pub fn circles(graph: &Graph) -> Vec<Circle> {
    let nodes: Vec<&PathBuf> = graph.files.iter().collect();
    let index: HashMap<&PathBuf, usize> = nodes.iter().enumerate().map(|(i, p)| (*p, i)).collect();
    let mut adjacency = vec![Vec::new(); nodes.len()];
    for (from, to) in graph.edges.keys() {
        if let (Some(&a), Some(&b)) = (index.get(from), index.get(to)) {
            adjacency[a].push(b);
        }
    }
    let mut circles: Vec<Circle> = strongly_connected(&adjacency)
        .into_iter()
        .filter(|component| component.len() > 1)
        .map(|component| {
            let files: BTreeSet<PathBuf> = component.iter().map(|&i| nodes[i].clone()).collect();
            let edges = graph
                .edges
                .iter()
                .filter(|((from, to), _)| files.contains(from) && files.contains(to))
                .map(|((from, to), line)| Edge {
                    from: from.clone(),
                    to: to.clone(),
                    line: *line,
                })
                .collect();
            Circle { files, edges }
        })
        .collect();
    circles.sort_by(|a, b| {
        b.files
            .len()
            .cmp(&a.files.len())
            .then(a.files.cmp(&b.files))
    });
    circles
}

/// Tarjan's algorithm, iterative (a crate's graph is small, but recursion depth should not
/// depend on input).
fn strongly_connected(adjacency: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = adjacency.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut components = Vec::new();
    let mut next = 0;
    for start in 0..n {
        if index[start] != usize::MAX {
            continue;
        }
        let mut work: Vec<(usize, usize)> = vec![(start, 0)];
        while let Some(&mut (v, ref mut child)) = work.last_mut() {
            if *child == 0 && index[v] == usize::MAX {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on_stack[v] = true;
            }
            if let Some(&w) = adjacency[v].get(*child) {
                *child += 1;
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                components.push(component);
            }
        }
    }
    components
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph_of(edges: &[(&str, &str)]) -> Graph {
        let mut graph = Graph::default();
        for (a, b) in edges {
            graph.files.insert(PathBuf::from(a));
            graph.files.insert(PathBuf::from(b));
            graph.edges.insert((PathBuf::from(a), PathBuf::from(b)), 1);
        }
        graph
    }

    #[test]
    fn a_chain_has_no_circle() {
        let graph = graph_of(&[("a", "b"), ("b", "c"), ("a", "c")]);
        assert!(circles(&graph).is_empty());
    }

    #[test]
    fn circles_are_found_with_their_imports() {
        let graph = graph_of(&[
            ("a", "b"),
            ("b", "c"),
            ("c", "a"),
            ("c", "d"),
            ("d", "e"),
            ("e", "d"),
        ]);
        let found = circles(&graph);
        let files: Vec<Vec<String>> = found
            .iter()
            .map(|c| c.files.iter().map(|p| p.display().to_string()).collect())
            .collect();
        assert_eq!(files, vec![vec!["a", "b", "c"], vec!["d", "e"]]);
        assert_eq!(found[0].edges.len(), 3);
    }
}
