//! Load-time bounds on what rendering a template can do to the stack and to time.
//!
//! Handlebars parses, renders and drops templates recursively, and includes partials
//! recursively, so a hostile pack could overflow the stack (which kills the process, with
//! no error) through deep nesting or a cycle of partials. Both are refused at registration
//! (the graph search is iterative; the walk of one template recurses only as deep as the
//! pre-scan allows):
//! - [`prescan`] bounds the nesting of blocks and of expressions in the source text;
//! - [`Graph`] records which partials every registered template and inline partial
//!   includes, and refuses a registration that closes a cycle, nests blocks and partials
//!   too deep along some render, or makes one render expand too many partials (a partial
//!   that includes another twice, ten levels down, renders it a thousand times).

use std::collections::{BTreeMap, HashMap, HashSet};

use handlebars::template::{Parameter, Template, TemplateElement};
use handlebars::{JsonRender, Path};

/// Blocks (`{{#…}}`) nested in one file.
pub(super) const MAX_BLOCK_DEPTH: usize = 64;
/// Subexpressions and literals nested in one `{{…}}`.
pub(super) const MAX_EXPRESSION_DEPTH: usize = 32;
/// Blocks and partial inclusions nested along any render.
pub(super) const MAX_DEPTH: usize = 100;
/// Partials expanded by one render of a template (outside `#each` repetitions).
pub(super) const MAX_EXPANSIONS: u64 = 1_000;

pub(super) const CODE_RECURSION: &str = "template::recursion";
pub(super) const CODE_DEPTH: &str = "template::depth";

/// A limit broken: code, byte offset or position, message.
pub(super) type Violation = (&'static str, Option<(usize, usize)>, String);

/// The most work handlebars' parser may do for one template set (see [`prescan`]): about
/// half a second.
pub(super) const MAX_PARSE_WORK: u64 = 256 << 20;

/// Checks block and expression nesting in the source text, in one pass: `{{#` opens a block,
/// `{{/` closes one, brackets nest inside `{{…}}`; comments, raw blocks and escaped `\{{`
/// are skipped. Returns the byte offset of the `{{` that goes too deep, or the work parsing
/// will take: handlebars locates every element of a template by counting lines from the
/// start of the file, so its parse is quadratic (the sum of the tags' offsets, twice for the
/// text between them).
pub(super) fn prescan(source: &str) -> Result<u64, (usize, String)> {
    let bytes = source.as_bytes();
    let mut depth = 0_usize;
    let mut work = 0_u64;
    let mut i = 0;
    while let Some(found) = find(bytes, i, b"{{") {
        let open = found;
        work = work.saturating_add(2 * open as u64);
        // One backslash escapes `{{`; more are themselves escaped and the `{{` is real.
        let backslashes = bytes[..open]
            .iter()
            .rev()
            .take_while(|&&b| b == b'\\')
            .count();
        if backslashes == 1 {
            i = open + 2;
            continue;
        }
        // Without its `--}}`, a `{{!--` comment is a short one, as in handlebars' grammar.
        if bytes[open..].starts_with(b"{{!--")
            && let Some(end) = find(bytes, open + 5, b"--}}")
        {
            i = end + 4;
            continue;
        }
        if bytes[open..].starts_with(b"{{!") {
            i = find(bytes, open + 3, b"}}").map_or(bytes.len(), |e| e + 2);
            continue;
        }
        if bytes[open..].starts_with(b"{{{{") && bytes.get(open + 4) != Some(&b'/') {
            // A raw block: its text runs, unparsed, to the next `{{{{`.
            let start_end = find(bytes, open + 4, b"}}}}").map_or(bytes.len(), |e| e + 4);
            i = find(bytes, start_end, b"{{{{").unwrap_or(bytes.len());
            if i < bytes.len() {
                i = find(bytes, i + 4, b"}}}}").map_or(bytes.len(), |e| e + 4);
            }
            continue;
        }
        let mut j = open + 2;
        while j < bytes.len() && (bytes[j] == b'~' || bytes[j].is_ascii_whitespace()) {
            j += 1;
        }
        match bytes.get(j) {
            Some(b'#') => {
                depth += 1;
                if depth > MAX_BLOCK_DEPTH {
                    return Err((
                        open,
                        format!("blocks nest more than {MAX_BLOCK_DEPTH} levels deep"),
                    ));
                }
            }
            Some(b'/') => depth = depth.saturating_sub(1),
            _ => {}
        }
        i = scan_expression(bytes, j).map_err(|()| {
            (
                open,
                format!("an expression nests more than {MAX_EXPRESSION_DEPTH} levels deep"),
            )
        })?;
    }
    Ok(work)
}

/// Skips one `{{…}}` body from `i`, bounding bracket nesting; returns the offset after it.
fn scan_expression(bytes: &[u8], mut i: usize) -> Result<usize, ()> {
    let mut nest = 0_usize;
    while i < bytes.len() {
        match bytes[i] {
            b'}' if nest == 0 && bytes.get(i + 1) == Some(&b'}') => return Ok(i + 2),
            b'(' | b'[' | b'{' => {
                nest += 1;
                if nest > MAX_EXPRESSION_DEPTH {
                    return Err(());
                }
            }
            b')' | b']' | b'}' => nest = nest.saturating_sub(1),
            quote @ (b'"' | b'\'') => {
                i += 1;
                while i < bytes.len() && bytes[i] != quote {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            _ => {}
        }
        i += 1;
    }
    Ok(bytes.len())
}

fn find(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// A `{{> name}}` in a body: the partial, the blocks around it, where it is.
#[derive(Debug, Clone)]
struct Call {
    callee: String,
    depth: usize,
    pos: (usize, usize),
    /// `{{#> name}}…{{/name}}`: the block renders when the partial is missing.
    has_fallback: bool,
}

/// What renders when a partial name is included: a template's body or an inline partial.
#[derive(Debug, Clone)]
struct Body {
    /// The registered template it comes from.
    owner: String,
    file: String,
    calls: Vec<Call>,
    /// The deepest block nesting in it.
    depth: usize,
}

/// Which partials each partial name includes, over every registered template.
///
/// A name stands for every body it may render: the registered template and each inline
/// partial (`{{#*inline "name"}}`) of that name, wherever defined, since inline partials
/// stay visible to the partials they include. This over-approximates the includes, so every
/// real recursion is a cycle here.
#[derive(Debug, Clone, Default)]
pub(super) struct Graph {
    bodies: BTreeMap<String, Vec<Body>>,
    /// Callee → caller → number of calls, to find what a new template changes.
    callers: HashMap<String, BTreeMap<String, usize>>,
    /// Registered template → the names it has bodies under.
    owned: HashMap<String, Vec<String>>,
}

impl Graph {
    /// Adds (or replaces) the bodies of template `name` and checks every limit; on a
    /// violation the graph is left as it was.
    pub(super) fn register(
        &mut self,
        name: &str,
        file: &str,
        template: &Template,
    ) -> Result<(), Violation> {
        let mut bodies = Vec::new();
        summarize(name, template, &mut bodies);
        let previous = self.remove(name);
        let nodes: Vec<String> = bodies.iter().map(|(node, _)| node.clone()).collect();
        for (node, mut body) in bodies {
            body.owner = name.to_owned();
            file.clone_into(&mut body.file);
            self.add(node, body);
        }
        let checked = self.check(name, &nodes);
        if checked.is_err() {
            self.remove(name);
            for (node, body) in previous {
                self.add(node, body);
            }
        }
        checked
    }

    /// Partial calls without a fallback whose partial no template, shared partial or inline
    /// partial defines: (the registered template making the call, its file, the position,
    /// the missing name), in file and position order. Rendering any of them fails, so a pack
    /// that has one does not load.
    pub(super) fn missing_partials(&self) -> Vec<(String, String, (usize, usize), String)> {
        let mut out = Vec::new();
        for bodies in self.bodies.values() {
            for body in bodies {
                for call in &body.calls {
                    if !call.has_fallback && !self.bodies.contains_key(&call.callee) {
                        out.push((
                            body.owner.clone(),
                            body.file.clone(),
                            call.pos,
                            call.callee.clone(),
                        ));
                    }
                }
            }
        }
        out.sort_by(|a, b| (&a.1, a.2, &a.3).cmp(&(&b.1, b.2, &b.3)));
        out.dedup();
        out
    }

    /// Every name a partial call may use.
    pub(super) fn names(&self) -> impl Iterator<Item = &str> {
        self.bodies.keys().map(String::as_str)
    }

    fn add(&mut self, node: String, body: Body) {
        for call in &body.calls {
            *self
                .callers
                .entry(call.callee.clone())
                .or_default()
                .entry(node.clone())
                .or_default() += 1;
        }
        self.owned
            .entry(body.owner.clone())
            .or_default()
            .push(node.clone());
        self.bodies.entry(node).or_default().push(body);
    }

    fn remove(&mut self, owner: &str) -> Vec<(String, Body)> {
        let mut removed = Vec::new();
        let mut nodes = self.owned.remove(owner).unwrap_or_default();
        nodes.sort();
        nodes.dedup();
        for node in nodes {
            let Some(bodies) = self.bodies.get_mut(&node) else {
                continue;
            };
            let (gone, kept): (Vec<Body>, Vec<Body>) = std::mem::take(bodies)
                .into_iter()
                .partition(|b| b.owner == owner);
            *bodies = kept;
            if bodies.is_empty() {
                self.bodies.remove(&node);
            }
            for body in gone {
                for call in &body.calls {
                    if let Some(by) = self.callers.get_mut(&call.callee) {
                        if let Some(count) = by.get_mut(&node) {
                            *count -= 1;
                            if *count == 0 {
                                by.remove(&node);
                            }
                        }
                        if by.is_empty() {
                            self.callers.remove(&call.callee);
                        }
                    }
                }
                removed.push((node.clone(), body));
            }
        }
        removed
    }

    /// `nodes` and every name that includes one of them, directly or not.
    fn affected(&self, nodes: &[String]) -> Vec<String> {
        let mut seen: HashSet<&str> = nodes.iter().map(String::as_str).collect();
        let mut out: Vec<String> = nodes.to_vec();
        let mut next = 0;
        while let Some(node) = out.get(next) {
            next += 1;
            let Some(by) = self.callers.get(node) else {
                continue;
            };
            let new: Vec<&str> = by
                .keys()
                .map(String::as_str)
                .filter(|c| !seen.contains(c))
                .collect();
            for caller in new {
                seen.insert(caller);
                out.push(caller.to_owned());
            }
        }
        out
    }

    /// Every edge `(from, body, call)` out of `node`, in source order.
    fn edges<'a>(&'a self, node: &str) -> Vec<(&'a Body, &'a Call)> {
        self.bodies
            .get(node)
            .map(|bodies| {
                bodies
                    .iter()
                    .flat_map(|b| b.calls.iter().map(move |c| (b, c)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The graph was within every limit before `owner` was added, so whatever breaks one
    /// now goes through `owner`'s bodies (`nodes`): the search starts there and covers only
    /// them, what includes them and what they include.
    fn check(&self, owner: &str, nodes: &[String]) -> Result<(), Violation> {
        let roots = self.affected(nodes);
        let order = self.topological(owner, &roots)?;
        // Post-order: callees come before their callers.
        let mut depth: HashMap<&str, (usize, Option<Edge<'_>>)> = HashMap::new();
        let mut expansions: HashMap<&str, u64> = HashMap::new();
        for node in &order {
            let bodies = self.bodies.get(*node).map_or(&[][..], Vec::as_slice);
            let own = bodies.iter().map(|b| b.depth).max().unwrap_or(0);
            let mut best = (own, None);
            for (body, call) in self.edges(node) {
                let below = depth.get(call.callee.as_str()).map_or(0, |d| d.0);
                let d = call.depth + 1 + below;
                if d > best.0 {
                    best = (d, Some((body, call)));
                }
            }
            let mut most = 0_u64;
            for body in bodies {
                let sum = body.calls.iter().fold(0_u64, |acc, c| {
                    let below = expansions.get(c.callee.as_str()).copied().unwrap_or(0);
                    acc.saturating_add(below.saturating_add(1))
                });
                most = most.max(sum);
            }
            depth.insert(node, best);
            expansions.insert(node, most);
        }
        for node in &order {
            let d = depth.get(node).map_or(0, |v| v.0);
            if d > MAX_DEPTH {
                // The deepest render path from `node`, reported at a call on it in `owner`.
                let mut path = vec![node.to_string()];
                let mut calls: Vec<(&Body, &Call)> = Vec::new();
                let mut current: &str = node;
                while let Some((_, Some((body, call)))) = depth.get(current) {
                    calls.push((body, call));
                    path.push(call.callee.clone());
                    current = call.callee.as_str();
                }
                let at = calls
                    .iter()
                    .find(|(b, _)| b.owner == owner)
                    .or(calls.first())
                    .map(|(_, c)| c.pos);
                let through = quoted_path(&path);
                return Err((
                    CODE_DEPTH,
                    at,
                    format!(
                        "blocks and partials nest {d} levels deep when `{node}` renders \
                         (through {through}); at most {MAX_DEPTH} are allowed"
                    ),
                ));
            }
            let e = expansions.get(node).copied().unwrap_or(0);
            if e > MAX_EXPANSIONS {
                let at = nodes
                    .iter()
                    .flat_map(|n| self.edges(n))
                    .find(|(b, _)| b.owner == owner)
                    .map(|(_, c)| c.pos);
                return Err((
                    CODE_DEPTH,
                    at,
                    format!(
                        "rendering `{node}` expands {e} partials (partials that include others \
                         several times multiply); at most {MAX_EXPANSIONS} are allowed"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Every node in post-order (callees first), or the first cycle found, searching from
    /// `start` first. Iterative: chains of partials are as long as a pack wants.
    fn topological<'a>(
        &'a self,
        owner: &str,
        start: &'a [String],
    ) -> Result<Vec<&'a str>, Violation> {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            Open,
            Done,
        }
        let mut marks: HashMap<&str, Mark> = HashMap::new();
        let mut order = Vec::new();
        for root in start.iter().map(String::as_str) {
            if marks.contains_key(root) {
                continue;
            }
            marks.insert(root, Mark::Open);
            // (node, its edges, next edge)
            let mut stack: Vec<Frame<'_>> = vec![(root, self.edges(root), 0)];
            while let Some((node, edges, next)) = stack.last_mut() {
                let Some(&(_, call)) = edges.get(*next) else {
                    marks.insert(node, Mark::Done);
                    order.push(*node);
                    stack.pop();
                    continue;
                };
                *next += 1;
                let callee = call.callee.as_str();
                match marks.get(callee) {
                    Some(Mark::Done) => {}
                    Some(Mark::Open) => return Err(cycle(owner, &stack, callee)),
                    None => {
                        if let Some((key, _)) = self.bodies.get_key_value(callee) {
                            marks.insert(key, Mark::Open);
                            stack.push((key, self.edges(key), 0));
                        }
                    }
                }
            }
        }
        Ok(order)
    }
}

/// A call and the body it is in.
type Edge<'a> = (&'a Body, &'a Call);
/// A node being searched: its edges and the next one to follow.
type Frame<'a> = (&'a str, Vec<Edge<'a>>, usize);

/// The cycle closed by the last edge taken on `stack`, back to `callee`, reported at a call
/// in `owner`'s file (every new cycle has one).
fn cycle(owner: &str, stack: &[Frame<'_>], callee: &str) -> Violation {
    let from = stack.iter().rposition(|f| f.0 == callee).unwrap_or(0);
    // Each frame's edge taken is the one before its `next`.
    let edges: Vec<(&str, &Body, &Call)> = stack[from..]
        .iter()
        .filter_map(|(node, edges, next)| {
            next.checked_sub(1)
                .and_then(|k| edges.get(k))
                .map(|&(b, c)| (*node, b, c))
        })
        .collect();
    let start = edges.iter().position(|e| e.1.owner == owner).unwrap_or(0);
    let rotated: Vec<&(&str, &Body, &Call)> =
        edges[start..].iter().chain(&edges[..start]).collect();
    let Some(&&(first, _, call)) = rotated.first() else {
        return (
            CODE_RECURSION,
            None,
            format!("partial `{callee}` includes itself"),
        );
    };
    let message = if rotated.len() == 1 {
        format!("partial `{first}` includes itself")
    } else {
        let through: Vec<String> = rotated[1..]
            .iter()
            .map(|e| e.0)
            .chain([first])
            .map(|n| format!("`{n}`"))
            .collect();
        format!(
            "partial `{first}` includes itself through {}",
            through.join(" -> ")
        )
    };
    (CODE_RECURSION, Some(call.pos), message)
}

fn quoted_path(path: &[String]) -> String {
    const SHOWN: usize = 6;
    let mut parts: Vec<String> = path.iter().take(SHOWN).map(|n| format!("`{n}`")).collect();
    if path.len() > SHOWN {
        parts.push(format!("… ({} more)", path.len() - SHOWN));
    }
    parts.join(" -> ")
}

/// The bodies template `name` contributes: its own, and one per inline partial it defines.
fn summarize(name: &str, template: &Template, out: &mut Vec<(String, Body)>) {
    let mut body = Body {
        owner: String::new(),
        file: String::new(),
        calls: Vec::new(),
        depth: 0,
    };
    walk(template, 0, (1, 1), &mut body, out);
    out.insert(0, (name.to_owned(), body));
}

/// Walks one body; the nesting is bounded by [`prescan`], so recursion is safe here.
fn walk(
    t: &Template,
    depth: usize,
    fallback: (usize, usize),
    body: &mut Body,
    out: &mut Vec<(String, Body)>,
) {
    body.depth = body.depth.max(depth);
    for (idx, el) in t.elements.iter().enumerate() {
        let pos = t.mapping.get(idx).map_or(fallback, |m| (m.0, m.1));
        match el {
            TemplateElement::HelperBlock(ht) => {
                for inner in [&ht.template, &ht.inverse].into_iter().flatten() {
                    walk(inner, depth + 1, pos, body, out);
                }
            }
            TemplateElement::PartialExpression(dt) | TemplateElement::PartialBlock(dt) => {
                if let Some(callee) = static_name(&dt.name)
                    && callee != "@partial-block"
                {
                    let has_fallback = matches!(el, TemplateElement::PartialBlock(_));
                    body.calls.push(Call {
                        callee,
                        depth,
                        pos,
                        has_fallback,
                    });
                }
                if let Some(inner) = &dt.template {
                    walk(inner, depth + 1, pos, body, out);
                }
            }
            TemplateElement::DecoratorBlock(dt) => {
                if let (Some(Parameter::Literal(serde_json::Value::String(n))), Some(inner)) =
                    (dt.params.first(), &dt.template)
                {
                    let mut inline = Body {
                        owner: String::new(),
                        file: String::new(),
                        calls: Vec::new(),
                        depth: 0,
                    };
                    walk(inner, 0, pos, &mut inline, out);
                    out.push((n.clone(), inline));
                }
            }
            _ => {}
        }
    }
}

/// The partial a static name includes, as handlebars resolves it (dynamic names are refused
/// at registration).
fn static_name(p: &Parameter) -> Option<String> {
    match p {
        Parameter::Name(n) => Some(n.clone()),
        Parameter::Path(Path::Relative((_, raw)) | Path::Local((_, _, raw))) => Some(raw.clone()),
        Parameter::Literal(value) => Some(value.render()),
        _ => None,
    }
}
