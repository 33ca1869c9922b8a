//! Templates compiled into structure: the YAML tree a template writes, with typed holes for its
//! values and structural nodes for its blocks and partials, so that a render fills the holes
//! and builds the objects directly, with no text and no YAML parsing.
//!
//! # How the structure is found
//!
//! Handlebars is a text language: a block can open in the middle of a scalar and close in
//! another one. Most templates do not do that: their blocks and partials stand on lines of
//! their own and wrap whole mapping entries or sequence items, which is what the compilation
//! relies on, and checks.
//!
//! 1. Each template is rewritten into a *marker* template: every `{{expr}}` writes the token
//!    of its site (`__syv_<site>__`), every block (`#if`, `#unless`, `#each`, `#with`) becomes
//!    its body and its inverse, each once, between marker lines (`__syk_o_<site>__`, `_e_`,
//!    `_c_`), and every partial call its partial, between two marker lines. Handlebars renders
//!    it (so standalone lines and partial indentation are exactly handlebars'), with no data.
//! 2. Every marker must stand alone on its line: a block that opens or closes inside a line is
//!    not structural.
//! 3. The text is parsed twice, with the marker lines as comments and without them: the two
//!    must agree, so no marker sits inside a multi-line scalar. The first parse keeps lines.
//!    Text YAML reads unlike its lines (a NUL, where it stops; a byte order mark; a lone
//!    carriage return) is not structural.
//! 4. Each block's part (body, inverse) must cover whole entries of one block collection: every
//!    node that starts between its markers lies in a run of consecutive entries of one
//!    mapping or sequence (not a flow one), and those entries end before its closing marker;
//!    no document marker lies in it. Repeating or leaving out such a run of entries changes
//!    that collection only, which is what the structure does. A collection left with no
//!    entries is null, as `key:` with nothing under it is in YAML.
//! 5. Every value written lands in the tree: handlebars evaluates a `{{…}}` in a YAML comment
//!    too, and fails on it as on any other.
//! 6. The template, partials included, expands to at most 16 MiB of text.
//!
//! What fails a step renders as text (see `TemplateSet::render_in`), and `switchyard check`
//! notes which template, and why.

use std::collections::HashMap;
use std::sync::Arc;

use handlebars::template::{BlockParam, HelperTemplate, Parameter, Template, TemplateElement};
use handlebars::{Context, Handlebars, Path, PathSeg, RenderErrorReason};
use serde_json::Value;
use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::TScalarStyle;

use super::decode::{Piece, collection_tag, resolve_plain, split, string_tag};
use super::helpers::{OwnHelper, TOKEN_PREFIX, VALUE_HELPER, own_helper};

/// A template's expression: a handlebars parameter, compiled.
#[derive(Debug, PartialEq)]
pub(super) enum Expr {
    Literal(Value),
    Path(PathExpr),
    /// `@index`, `@key`, `@first`, `@last`, `@../index`, ...
    Local {
        level: usize,
        name: Box<str>,
    },
    Call(Box<Call>),
}

/// A path, as handlebars resolves it (`parse_json_visitor`).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct PathExpr {
    /// `../` before the first name.
    pub(super) up: usize,
    /// Starts with `@root`.
    pub(super) root: bool,
    /// Every named segment in order (`this` is no segment).
    pub(super) names: Vec<Box<str>>,
    /// Whether the segment after the `../`s is a name: it may name a block parameter, and the
    /// names after it are read in that parameter's value.
    pub(super) param: bool,
}

/// A helper call in a subexpression (`(eq a b)`) or an expression (`{{join xs ","}}`).
#[derive(Debug, PartialEq)]
pub(super) struct Call {
    pub(super) helper: CallHelper,
    pub(super) params: Vec<Expr>,
    /// In key order, as handlebars hands them to helpers.
    pub(super) hash: Vec<(Box<str>, Expr)>,
}

/// Handlebars' value helpers, and Switchyard's own.
#[derive(Debug, Clone)]
pub(super) enum CallHelper {
    Eq,
    Ne,
    Gt,
    Gte,
    Lt,
    Lte,
    And,
    Or,
    Not,
    Len,
    Lookup,
    /// One of Switchyard's helpers, by `name`; `decides`: it is `decide`, which asks the
    /// decision tables.
    Own {
        name: Box<str>,
        helper: OwnHelper,
        decides: bool,
    },
}

// By name: helpers are function pointers, whose addresses say nothing about sameness.
impl PartialEq for CallHelper {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (CallHelper::Own { name: a, .. }, CallHelper::Own { name: b, .. }) => a == b,
            (a, b) => std::mem::discriminant(a) == std::mem::discriminant(b),
        }
    }
}

/// The block helpers a structure has nodes for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BlockKind {
    If,
    Unless,
    Each,
    With,
}

/// A block's helper and arguments.
#[derive(Debug, PartialEq)]
pub(super) struct BlockSite {
    pub(super) kind: BlockKind,
    pub(super) params: Vec<Expr>,
    pub(super) hash: Vec<(Box<str>, Expr)>,
    /// `as |value key|`.
    pub(super) block_params: Option<(Box<str>, Option<Box<str>>)>,
}

/// A partial call's context argument and `key=value` arguments.
#[derive(Debug, PartialEq)]
pub(super) struct PartialSite {
    pub(super) param: Option<Expr>,
    pub(super) hash: Vec<(Box<str>, Expr)>,
}

/// A node of a template's YAML.
#[derive(Debug, PartialEq)]
pub(super) enum Node {
    /// A scalar without values: its value, and its text as a mapping key.
    Fixed {
        value: Value,
        key: Box<str>,
    },
    /// A plain scalar that is exactly one value: the typed value.
    Hole(Arc<Expr>),
    /// A quoted, block or tagged scalar, or text mixed with values: a string.
    Text(Vec<Part>),
    /// `blocks`: whether some entries come from blocks (a collection they leave empty is
    /// null).
    Seq {
        items: Vec<Item>,
        blocks: bool,
    },
    Map {
        items: Vec<Item>,
        blocks: bool,
    },
}

impl Node {
    /// How many values the node writes.
    fn holes(&self) -> usize {
        match self {
            Node::Fixed { .. } => 0,
            Node::Hole(_) => 1,
            Node::Text(parts) => parts.iter().filter(|p| matches!(p, Part::Hole(_))).count(),
            Node::Seq { items, .. } | Node::Map { items, .. } => {
                items.iter().map(Item::holes).sum()
            }
        }
    }
}

impl Item {
    fn holes(&self) -> usize {
        match self {
            Item::Value(node) => node.holes(),
            Item::Entry(key, value) => key.holes() + value.holes(),
            Item::Block {
                then, otherwise, ..
            } => then.iter().chain(otherwise).map(Item::holes).sum(),
            Item::Partial { items, .. } => items.iter().map(Item::holes).sum(),
        }
    }
}

#[derive(Debug, PartialEq)]
pub(super) enum Part {
    Text(Box<str>),
    Hole(Arc<Expr>),
}

/// An entry of a collection: an item, a mapping entry, or a block or partial of entries.
#[derive(Debug, PartialEq)]
pub(super) enum Item {
    Value(Node),
    Entry(Node, Node),
    Block {
        site: Arc<BlockSite>,
        then: Vec<Item>,
        otherwise: Vec<Item>,
    },
    Partial {
        site: Arc<PartialSite>,
        items: Vec<Item>,
    },
}

/// A template compiled into structure: its documents.
#[derive(Debug, PartialEq)]
pub(super) struct Structure {
    pub(super) docs: Vec<Node>,
}

/// Why a template renders as text: the construct and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Unstructured {
    pub(super) file: String,
    pub(super) position: Option<(usize, usize)>,
    pub(super) reason: String,
}

impl Unstructured {
    /// About the template as a whole (no position).
    fn whole(file: &str, reason: impl Into<String>) -> Self {
        Unstructured {
            file: file.to_owned(),
            position: None,
            reason: reason.into(),
        }
    }

    /// About the block or partial `site` (the template as a whole when there is none),
    /// `reason` following `the block here`.
    fn at_site(sites: &[Site], site: Option<usize>, file: &str, reason: &str) -> Self {
        let (file, position, what) = match site.and_then(|s| sites.get(s)) {
            Some(Site::Block(_, f, p)) => (f.clone(), Some(*p), "the block here"),
            Some(Site::Partial(_, f, p)) => (f.clone(), Some(*p), "the partial here"),
            _ => (file.to_owned(), None, "a block"),
        };
        Unstructured {
            file,
            position,
            reason: format!("{what} {reason}"),
        }
    }
}

/// What a marker, a token or a block's lines refer to.
enum Site {
    Hole(Arc<Expr>),
    Block(Arc<BlockSite>, String, (usize, usize)),
    Partial(Arc<PartialSite>, String, (usize, usize)),
}

const MARKER_PREFIX: &str = "__syk_";

/// The structures of a template set's templates, compiled together (partials are shared).
pub(super) struct Compiler<'a> {
    files: &'a HashMap<String, String>,
    sites: Vec<Site>,
    markers: Handlebars<'static>,
    /// Templates that could not be rewritten, by name.
    refused: HashMap<String, Unstructured>,
    /// Each marker template's own text: bytes, lines, and the partials it calls (with the
    /// indentation of the call).
    sizes: HashMap<String, TextSize>,
}

/// A marker template's own bytes and lines, and the partials it calls with the indentation
/// of each call.
type TextSize = (usize, usize, Vec<(String, usize)>);

/// The most marker text a template may expand to (its partials included): past it, it
/// renders as text. The partial expansion limit alone would let a pack make gigabytes.
const MAX_MARKER_TEXT: usize = 16 << 20;

impl<'a> Compiler<'a> {
    /// Rewrites every template of `registry` into its marker form.
    pub(super) fn new(
        registry: &'a Handlebars<'static>,
        files: &'a HashMap<String, String>,
    ) -> Self {
        let mut markers = Handlebars::new();
        markers.register_escape_fn(handlebars::no_escape);
        markers.register_helper(VALUE_HELPER, Box::new(Identity));
        let mut compiler = Compiler {
            files,
            sites: Vec::new(),
            markers,
            refused: HashMap::new(),
            sizes: HashMap::new(),
        };
        let mut names: Vec<&String> = registry.get_templates().keys().collect();
        names.sort();
        for name in names {
            let Some(template) = registry.get_template(name) else {
                continue;
            };
            let file = files.get(name).cloned().unwrap_or_else(|| name.clone());
            match compiler.rewrite(template, &file, (1, 1)) {
                Ok(marked) => {
                    compiler.sizes.insert(name.clone(), measure(&marked));
                    compiler.markers.register_template(name, marked);
                }
                Err(refused) => {
                    compiler.refused.insert(name.clone(), refused);
                }
            }
        }
        compiler
    }

    /// The structure of template `name`, or why it has none.
    pub(super) fn compile(&self, name: &str) -> Result<Structure, Unstructured> {
        let file = self.files.get(name).map_or(name, String::as_str);
        let whole = |reason: &str| Unstructured::whole(file, reason);
        if let Some(refused) = self.refused.get(name) {
            return Err(refused.clone());
        }
        if self.expanded(name, &mut HashMap::new(), 0).0 > MAX_MARKER_TEXT {
            return Err(whole(&format!(
                "with its partials it expands to more than {} MiB",
                MAX_MARKER_TEXT >> 20
            )));
        }
        let text = match self.markers.render_with_context(name, &Context::null()) {
            Ok(text) => text,
            Err(e) => {
                if let RenderErrorReason::PartialNotFound(partial) = e.reason()
                    && let Some(refused) = self.refused.get(partial)
                {
                    return Err(refused.clone());
                }
                return Err(whole("its partials cannot be compiled"));
            }
        };
        Layout::new(&self.sites, file, &text)?.structure()
    }

    /// `t` in marker form, its sites added to `self.sites`.
    fn rewrite(
        &mut self,
        t: &Template,
        file: &str,
        fallback: (usize, usize),
    ) -> Result<Template, Unstructured> {
        let mut out = Template::new();
        out.name = t.name.clone();
        for (idx, element) in t.elements.iter().enumerate() {
            let pos = t.mapping.get(idx).map_or(fallback, |m| (m.0, m.1));
            let refuse = |reason: &str| Unstructured {
                file: file.to_owned(),
                position: Some(pos),
                reason: reason.to_owned(),
            };
            // Marker templates keep no positions (`mapping`): they never fail on data.
            match element {
                TemplateElement::RawString(_) | TemplateElement::Comment(_) => {
                    out.elements.push(element.clone());
                }
                TemplateElement::Expression(ht) => {
                    if !matches!(&ht.name, Parameter::Name(n) if n == VALUE_HELPER) {
                        return Err(refuse("`{{log}}` renders only as text"));
                    }
                    let expr = match ht.params.first() {
                        Some(p) => compile_expr(p).map_err(|r| refuse(&r))?,
                        None => return Err(refuse("an expression without a value")),
                    };
                    let site = self.add(Site::Hole(Arc::new(expr)));
                    let mut marked: HelperTemplate = (**ht).clone();
                    marked.params = vec![Parameter::Literal(Value::String(format!(
                        "{TOKEN_PREFIX}{site}__"
                    )))];
                    marked.hash.clear();
                    out.elements
                        .push(TemplateElement::Expression(Box::new(marked)));
                }
                TemplateElement::HelperBlock(ht) => {
                    let name = match &ht.name {
                        Parameter::Name(n) => n.as_str(),
                        _ => return Err(refuse("a block with a computed helper")),
                    };
                    if name == "raw" {
                        if let Some(inner) = &ht.template {
                            out.elements
                                .extend(self.rewrite(inner, file, pos)?.elements);
                        }
                        continue;
                    }
                    let kind = match name {
                        "if" => BlockKind::If,
                        "unless" => BlockKind::Unless,
                        "each" => BlockKind::Each,
                        "with" => BlockKind::With,
                        other => return Err(refuse(&format!("the block helper `{other}`"))),
                    };
                    let block = compile_block(kind, ht).map_err(|r| refuse(&r))?;
                    let site = self.add(Site::Block(Arc::new(block), file.to_owned(), pos));
                    out.elements.push(marker('o', site));
                    if let Some(body) = &ht.template {
                        out.elements.extend(self.rewrite(body, file, pos)?.elements);
                    }
                    out.elements.push(marker('e', site));
                    if let Some(inverse) = &ht.inverse {
                        out.elements
                            .extend(self.rewrite(inverse, file, pos)?.elements);
                    }
                    out.elements.push(marker('c', site));
                }
                TemplateElement::PartialExpression(dt) => {
                    let named = match &dt.name {
                        Parameter::Name(n) => n.as_str(),
                        Parameter::Path(p) => path_raw(p),
                        _ => return Err(refuse("a partial with a computed name")),
                    };
                    if named == "@partial-block" {
                        return Err(refuse("`{{> @partial-block}}`"));
                    }
                    let param = match dt.params.first() {
                        None => None,
                        Some(p) => Some(compile_expr(p).map_err(|r| refuse(&r))?),
                    };
                    if dt.params.len() > 1 {
                        return Err(refuse("a partial with more than one context"));
                    }
                    let hash = compile_hash(&dt.hash).map_err(|r| refuse(&r))?;
                    let site = self.add(Site::Partial(
                        Arc::new(PartialSite { param, hash }),
                        file.to_owned(),
                        pos,
                    ));
                    let mut call = (**dt).clone();
                    call.params.clear();
                    call.hash.clear();
                    out.elements.push(marker('o', site));
                    out.elements
                        .push(TemplateElement::PartialExpression(Box::new(call)));
                    out.elements.push(marker('c', site));
                }
                TemplateElement::PartialBlock(_) => {
                    return Err(refuse("a partial block (`{{#> …}}`)"));
                }
                TemplateElement::DecoratorExpression(_) | TemplateElement::DecoratorBlock(_) => {
                    return Err(refuse("an inline partial (`{{#*inline}}`)"));
                }
                _ => return Err(refuse("raw output")),
            }
        }
        Ok(out)
    }

    /// How many bytes and lines template `name` expands to, partials included (saturating:
    /// a cycle or an unknown partial counts as too much, rendering fails on it anyway).
    fn expanded(
        &self,
        name: &str,
        memo: &mut HashMap<String, (usize, usize)>,
        depth: usize,
    ) -> (usize, usize) {
        if let Some(found) = memo.get(name) {
            return *found;
        }
        let Some((bytes, lines, calls)) = self.sizes.get(name) else {
            return (usize::MAX, usize::MAX);
        };
        if depth > 200 {
            return (usize::MAX, usize::MAX);
        }
        let (mut bytes, mut lines) = (*bytes, *lines);
        for (callee, indent) in calls {
            let (b, l) = self.expanded(callee, memo, depth + 1);
            bytes = bytes
                .saturating_add(b)
                .saturating_add(l.saturating_mul(*indent));
            lines = lines.saturating_add(l);
        }
        memo.insert(name.to_owned(), (bytes, lines));
        (bytes, lines)
    }

    fn add(&mut self, site: Site) -> usize {
        self.sites.push(site);
        self.sites.len() - 1
    }
}

/// A marker template's own text: bytes and lines, and the partials it calls with the
/// indentation handlebars gives their lines.
fn measure(t: &Template) -> TextSize {
    let (mut bytes, mut lines, mut calls) = (0usize, 0usize, Vec::new());
    for element in &t.elements {
        match element {
            TemplateElement::RawString(text) => {
                bytes += text.len();
                lines += text.matches('\n').count();
            }
            TemplateElement::Expression(_) => bytes += 24,
            TemplateElement::PartialExpression(dt) => {
                let name = match &dt.name {
                    Parameter::Name(n) => n.clone(),
                    Parameter::Path(p) => path_raw(p).to_owned(),
                    _ => String::new(),
                };
                calls.push((name, dt.indent.as_ref().map_or(0, String::len)));
            }
            _ => {}
        }
    }
    (bytes, lines, calls)
}

/// A marker line: `__syk_<kind>_<site>__`.
fn marker(kind: char, site: usize) -> TemplateElement {
    TemplateElement::RawString(format!("{MARKER_PREFIX}{kind}_{site}__\n"))
}

fn path_raw(p: &Path) -> &str {
    match p {
        Path::Relative((_, raw)) | Path::Local((_, _, raw)) => raw,
    }
}

/// Handlebars' own grammar rule of a path segment (`path_root`, `path_up`, ...): its rule
/// type is not public, its debug form is.
fn rule(seg: &PathSeg) -> Option<String> {
    match seg {
        PathSeg::Named(_) => None,
        PathSeg::Ruled(r) => Some(format!("{r:?}")),
        _ => Some(String::new()),
    }
}

fn compile_expr(p: &Parameter) -> Result<Expr, String> {
    Ok(match p {
        Parameter::Literal(v) => Expr::Literal(v.clone()),
        Parameter::Path(Path::Local((level, name, _))) => Expr::Local {
            level: *level,
            name: name.as_str().into(),
        },
        Parameter::Path(Path::Relative((segs, raw))) => {
            let mut up = 0;
            let mut root = false;
            for seg in segs {
                match rule(seg).as_deref() {
                    None => break,
                    Some("path_up") => up += 1,
                    Some("path_root") => {
                        root = true;
                        break;
                    }
                    Some(_) => return Err(format!("the path `{raw}`")),
                }
            }
            if segs
                .iter()
                .filter_map(rule)
                .any(|r| r != "path_up" && r != "path_root")
            {
                return Err(format!("the path `{raw}`"));
            }
            let names = segs
                .iter()
                .filter_map(|s| match s {
                    PathSeg::Named(n) => Some(n.as_str().into()),
                    _ => None,
                })
                .collect();
            Expr::Path(PathExpr {
                up,
                root,
                names,
                param: !root && matches!(segs.get(up), Some(PathSeg::Named(_))),
            })
        }
        Parameter::Subexpression(sub) => {
            let TemplateElement::Expression(ht) = sub.as_element() else {
                return Err("a subexpression".to_owned());
            };
            let name = match &ht.name {
                Parameter::Name(n) => n.as_str(),
                Parameter::Path(p) => path_raw(p),
                _ => return Err("a helper with a computed name".to_owned()),
            };
            let helper = match name {
                "eq" => CallHelper::Eq,
                "ne" => CallHelper::Ne,
                "gt" => CallHelper::Gt,
                "gte" => CallHelper::Gte,
                "lt" => CallHelper::Lt,
                "lte" => CallHelper::Lte,
                "and" => CallHelper::And,
                "or" => CallHelper::Or,
                "not" => CallHelper::Not,
                "len" => CallHelper::Len,
                "lookup" => CallHelper::Lookup,
                other => match own_helper(other) {
                    Some(helper) => CallHelper::Own {
                        name: other.into(),
                        helper,
                        decides: other == "decide",
                    },
                    None => return Err(format!("the helper `{other}` as a value")),
                },
            };
            Expr::Call(Box::new(Call {
                helper,
                params: compile_params(&ht.params)?,
                hash: compile_hash(&ht.hash)?,
            }))
        }
        Parameter::Name(n) => return Err(format!("the name `{n}` as a value")),
        _ => return Err("an unknown kind of parameter".to_owned()),
    })
}

fn compile_params(params: &[Parameter]) -> Result<Vec<Expr>, String> {
    params.iter().map(compile_expr).collect()
}

fn compile_hash(
    hash: &std::collections::HashMap<String, Parameter>,
) -> Result<Vec<(Box<str>, Expr)>, String> {
    let mut out: Vec<(Box<str>, Expr)> = hash
        .iter()
        .map(|(k, v)| Ok((k.as_str().into(), compile_expr(v)?)))
        .collect::<Result<_, String>>()?;
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

fn compile_block(kind: BlockKind, ht: &HelperTemplate) -> Result<BlockSite, String> {
    let name = |p: &Parameter| match p {
        Parameter::Name(n) => Ok(n.as_str().into()),
        _ => Err("a block parameter that is not a name".to_owned()),
    };
    let block_params = match &ht.block_param {
        None => None,
        Some(BlockParam::Single(p)) => Some((name(p)?, None)),
        Some(BlockParam::Pair((p, k))) => Some((name(p)?, Some(name(k)?))),
        Some(_) => return Err("an unknown kind of block parameter".to_owned()),
    };
    Ok(BlockSite {
        kind,
        params: compile_params(&ht.params)?,
        hash: compile_hash(&ht.hash)?,
        block_params,
    })
}

/// The marker form's `{{__sy_value "<token>"}}`: writes the token.
struct Identity;

impl handlebars::HelperDef for Identity {
    fn call_inner<'reg: 'rc, 'rc>(
        &self,
        h: &handlebars::Helper<'rc>,
        _: &'reg Handlebars<'reg>,
        _: &'rc Context,
        _: &mut handlebars::RenderContext<'reg, 'rc>,
    ) -> Result<handlebars::ScopedJson<'rc>, handlebars::RenderError> {
        Ok(handlebars::ScopedJson::Derived(
            h.param(0).map(|p| p.value().clone()).unwrap_or(Value::Null),
        ))
    }
}

// ---- The layout of the marker text --------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum MarkerKind {
    Open,
    Else,
    Close,
}

/// A block's or partial's marker lines in the text (1-based).
struct Span {
    site: usize,
    open: usize,
    otherwise: Option<usize>,
    close: usize,
    /// The collection its entries belong to, once found.
    collection: Option<usize>,
}

/// A parsed YAML node with the line it starts on.
#[derive(Debug)]
struct Parsed {
    line: usize,
    kind: ParsedKind,
}

#[derive(Debug)]
enum ParsedKind {
    Scalar {
        text: String,
        style: TScalarStyle,
        string: bool,
    },
    /// Each item with the line of its `-` (a block item's content may start lines later).
    Seq {
        items: Vec<(usize, Parsed)>,
        flow: bool,
    },
    Map {
        entries: Vec<(Parsed, Parsed)>,
        flow: bool,
    },
}

impl Parsed {
    /// Equal but for lines.
    fn same(&self, other: &Parsed) -> bool {
        match (&self.kind, &other.kind) {
            (
                ParsedKind::Scalar {
                    text: a,
                    style: sa,
                    string: ta,
                },
                ParsedKind::Scalar {
                    text: b,
                    style: sb,
                    string: tb,
                },
            ) => a == b && sa == sb && ta == tb,
            (ParsedKind::Seq { items: a, flow: fa }, ParsedKind::Seq { items: b, flow: fb }) => {
                fa == fb && a.len() == b.len() && a.iter().zip(b).all(|(a, b)| a.1.same(&b.1))
            }
            (
                ParsedKind::Map {
                    entries: a,
                    flow: fa,
                },
                ParsedKind::Map {
                    entries: b,
                    flow: fb,
                },
            ) => {
                fa == fb
                    && a.len() == b.len()
                    && a.iter()
                        .zip(b)
                        .all(|((ka, va), (kb, vb))| ka.same(kb) && va.same(vb))
            }
            _ => false,
        }
    }
}

/// Parses `text` into documents (`None` for an empty one); `Err` for what the structure does
/// not model (anchors, aliases, tags other than the string ones, YAML errors).
fn parse(text: &str) -> Result<Vec<Option<Parsed>>, String> {
    enum Frame {
        /// Items, start line, flow, and the column of a block sequence's `-`s.
        Seq(Vec<(usize, Parsed)>, usize, bool, usize),
        Map(Vec<(Parsed, Parsed)>, Option<Parsed>, usize, bool),
    }
    let lines: Vec<&str> = text.split('\n').collect();
    let mut starts = Vec::with_capacity(lines.len());
    let mut offset = 0;
    for line in &lines {
        starts.push(offset);
        offset += line.len() + 1;
    }
    // The line of the `-` of a block sequence item whose content starts on line `line`.
    let dash = |from: usize, line: usize, column: usize| {
        (from..=line)
            .rev()
            .find(|&l| {
                let bytes = lines
                    .get(l.wrapping_sub(1))
                    .map_or(&[][..], |t| t.as_bytes());
                bytes.get(column) == Some(&b'-')
                    && matches!(bytes.get(column + 1), None | Some(b' ' | b'\t' | b'\r'))
            })
            .unwrap_or(line)
    };
    let mut parser = Parser::new_from_str(text);
    let mut stack: Vec<Frame> = Vec::new();
    let mut root: Option<Parsed> = None;
    let mut docs = Vec::new();
    let flow_at = |index: usize| text.get(index..).is_some_and(|t| t.starts_with(['[', '{']));
    loop {
        let (event, mark) = parser
            .next_token()
            .map_err(|e| format!("the text is not valid YAML ({})", e.info()))?;
        let line = mark.line();
        let node = match event {
            Event::StreamEnd => break,
            Event::DocumentStart => {
                root = None;
                continue;
            }
            Event::DocumentEnd => {
                docs.push(root.take());
                continue;
            }
            Event::Scalar(value, style, anchor, tag) => {
                if anchor != 0 {
                    return Err("a YAML anchor".to_owned());
                }
                let string = string_tag(tag.as_ref(), line)?;
                Parsed {
                    line,
                    kind: ParsedKind::Scalar {
                        text: value,
                        style,
                        string,
                    },
                }
            }
            Event::SequenceStart(anchor, tag) => {
                if anchor != 0 {
                    return Err("a YAML anchor".to_owned());
                }
                collection_tag(tag.as_ref(), "seq", line)?;
                let column = mark.index() - starts.get(line.wrapping_sub(1)).copied().unwrap_or(0);
                stack.push(Frame::Seq(Vec::new(), line, flow_at(mark.index()), column));
                continue;
            }
            Event::MappingStart(anchor, tag) => {
                if anchor != 0 {
                    return Err("a YAML anchor".to_owned());
                }
                collection_tag(tag.as_ref(), "map", line)?;
                stack.push(Frame::Map(Vec::new(), None, line, flow_at(mark.index())));
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => match stack.pop() {
                Some(Frame::Seq(items, line, flow, _)) => Parsed {
                    line,
                    kind: ParsedKind::Seq { items, flow },
                },
                Some(Frame::Map(entries, None, line, flow)) => Parsed {
                    line,
                    kind: ParsedKind::Map { entries, flow },
                },
                _ => return Err("unbalanced YAML".to_owned()),
            },
            Event::Alias(_) => return Err("a YAML alias".to_owned()),
            Event::StreamStart | Event::Nothing => continue,
        };
        match stack.last_mut() {
            None => root = Some(node),
            Some(Frame::Seq(items, start, flow, column)) => {
                let at = if *flow {
                    node.line
                } else {
                    dash(*start, node.line, *column)
                };
                items.push((at, node));
            }
            Some(Frame::Map(entries, key, ..)) => match key.take() {
                None if !matches!(node.kind, ParsedKind::Scalar { .. }) => {
                    return Err("a mapping key that is not a scalar".to_owned());
                }
                None => *key = Some(node),
                Some(k) => entries.push((k, node)),
            },
        }
    }
    Ok(docs)
}

/// An entry of a parsed collection, for checking blocks against lines.
struct EntryInfo {
    collection: usize,
    /// Its position among the collection's entries.
    index: usize,
    line: usize,
    /// The last line any node of the entry starts on.
    last: usize,
}

struct CollectionInfo {
    flow: bool,
    /// The entry whose value (or item) it is.
    parent: Option<usize>,
    entries: Vec<usize>,
}

/// The marker text of one template: its documents, blocks and lines.
struct Layout<'s> {
    sites: &'s [Site],
    file: &'s str,
    docs: Vec<Option<Parsed>>,
    spans: Vec<Span>,
    lines: Vec<&'s str>,
    entries: Vec<EntryInfo>,
    collections: Vec<CollectionInfo>,
    /// Each collection's spans, by their first line.
    by_collection: HashMap<usize, Vec<usize>>,
    /// Every node's start line, the entry it belongs to (a collection: the entry it is the
    /// value or item of; none for a document's root), and, for a collection, its id.
    nodes: Vec<(usize, Option<usize>, Option<usize>)>,
}

impl<'s> Layout<'s> {
    fn new(sites: &'s [Site], file: &'s str, text: &'s str) -> Result<Self, Unstructured> {
        let whole = |reason: String| Unstructured::whole(file, reason);
        // YAML stops reading at a NUL: what follows would count in one render and not in
        // another, as blocks move it. A byte order mark counts at the start only, and a lone
        // carriage return breaks a line for YAML (the lines here are split at `\n`).
        if text.contains('\0') {
            return Err(whole(
                "it holds a NUL character, where YAML stops reading".to_owned(),
            ));
        }
        if text.contains('\u{feff}') || text.replace("\r\n", "\n").contains('\r') {
            return Err(whole(
                "it holds a byte order mark or a carriage return without a line feed".to_owned(),
            ));
        }
        let lines: Vec<&str> = text.split('\n').collect();
        let mut spans = Vec::new();
        let mut open: Vec<usize> = Vec::new();
        let mut commented = String::with_capacity(text.len());
        let mut removed = String::with_capacity(text.len());
        for (i, line) in lines.iter().enumerate() {
            let number = i + 1;
            let newline = if i + 1 < lines.len() { "\n" } else { "" };
            match parse_marker(line.trim_matches([' ', '\t'])) {
                Some((kind, site)) => {
                    commented.push('#');
                    commented.push_str(newline);
                    match kind {
                        MarkerKind::Open => {
                            open.push(spans.len());
                            spans.push(Span {
                                site,
                                open: number,
                                otherwise: None,
                                close: 0,
                                collection: None,
                            });
                        }
                        MarkerKind::Else | MarkerKind::Close => {
                            let Some(&top) = open.last() else {
                                return Err(whole("unbalanced blocks".to_owned()));
                            };
                            if spans[top].site != site {
                                return Err(whole("unbalanced blocks".to_owned()));
                            }
                            if kind == MarkerKind::Else {
                                spans[top].otherwise = Some(number);
                            } else {
                                spans[top].close = number;
                                open.pop();
                            }
                        }
                    }
                }
                None => {
                    if line.contains(MARKER_PREFIX) {
                        let span = open.last().map(|&s| spans[s].site);
                        return Err(not_on_own_lines(sites, file, span, line));
                    }
                    commented.push_str(line);
                    commented.push_str(newline);
                    removed.push_str(line);
                    removed.push_str(newline);
                }
            }
        }
        if !open.is_empty() {
            return Err(whole("unbalanced blocks".to_owned()));
        }
        let plain = parse(&removed).map_err(whole)?;
        let Ok(docs) = parse(&commented) else {
            return Err(whole(
                "a block or partial starts or ends inside a multi-line scalar".to_owned(),
            ));
        };
        let same = docs.len() == plain.len()
            && docs.iter().zip(&plain).all(|(a, b)| match (a, b) {
                (Some(a), Some(b)) => a.same(b),
                (None, None) => true,
                _ => false,
            });
        if !same {
            return Err(whole(
                "a block or partial starts or ends inside a multi-line scalar".to_owned(),
            ));
        }
        let mut layout = Layout {
            sites,
            file,
            docs,
            spans,
            lines,
            entries: Vec::new(),
            collections: Vec::new(),
            nodes: Vec::new(),
            by_collection: HashMap::new(),
        };
        let docs = std::mem::take(&mut layout.docs);
        for doc in docs.iter().flatten() {
            layout.index(doc, None);
        }
        layout.docs = docs;
        Ok(layout)
    }

    /// Records `node` and its descendants; returns the last line of any of them.
    fn index(&mut self, node: &Parsed, owner: Option<usize>) -> usize {
        match &node.kind {
            ParsedKind::Scalar { .. } => {
                self.nodes.push((node.line, owner, None));
                node.line
            }
            ParsedKind::Seq { items, flow } => {
                let id = self.collection(node, owner, *flow);
                let mut last = node.line;
                for (at, item) in items {
                    let entry = self.entry(id, *at);
                    let end = self.index(item, Some(entry));
                    self.entries[entry].last = end;
                    last = last.max(end);
                }
                last
            }
            ParsedKind::Map { entries, flow } => {
                let id = self.collection(node, owner, *flow);
                let mut last = node.line;
                for (key, value) in entries {
                    let entry = self.entry(id, key.line);
                    let end = self
                        .index(key, Some(entry))
                        .max(self.index(value, Some(entry)));
                    self.entries[entry].last = end;
                    last = last.max(end);
                }
                last
            }
        }
    }

    fn collection(&mut self, node: &Parsed, owner: Option<usize>, flow: bool) -> usize {
        let id = self.collections.len();
        self.collections.push(CollectionInfo {
            flow,
            parent: owner,
            entries: Vec::new(),
        });
        self.nodes.push((node.line, owner, Some(id)));
        id
    }

    fn entry(&mut self, collection: usize, line: usize) -> usize {
        let id = self.entries.len();
        let index = self.collections[collection].entries.len();
        self.collections[collection].entries.push(id);
        self.entries.push(EntryInfo {
            collection,
            index,
            line,
            last: line,
        });
        id
    }

    /// The entry of `collection` that entry `e` is or lies inside, if any.
    fn ancestor_in(&self, mut e: usize, collection: usize) -> Option<usize> {
        loop {
            if self.entries[e].collection == collection {
                return Some(e);
            }
            e = self.collections[self.entries[e].collection].parent?;
        }
    }

    fn depth(&self, mut e: usize) -> usize {
        let mut depth = 0;
        while let Some(parent) = self.collections[self.entries[e].collection].parent {
            depth += 1;
            e = parent;
        }
        depth
    }

    /// The collection whose consecutive entries fill the lines strictly between `lo` and `hi`,
    /// `Ok(None)` when nothing starts there.
    fn part(&self, lo: usize, hi: usize) -> Result<Option<usize>, String> {
        if hi <= lo + 1 {
            return Ok(None);
        }
        // Nodes and entries are in document order, so their lines only grow.
        let first_node = self.nodes.partition_point(|n| n.0 <= lo);
        let last_node = self.nodes.partition_point(|n| n.0 < hi);
        let starts = &self.nodes[first_node..last_node];
        if starts.is_empty() {
            return Ok(None);
        }
        let first_entry = self.entries.partition_point(|e| e.line <= lo);
        let last_entry = self.entries.partition_point(|e| e.line < hi);
        let Some(shallowest) = (first_entry..last_entry).map(|e| self.depth(e)).min() else {
            return Err("its lines hold a value, not whole entries".to_owned());
        };
        let run: Vec<usize> = (first_entry..last_entry)
            .filter(|&e| self.depth(e) == shallowest)
            .collect();
        let collection = self.entries[run[0]].collection;
        if run
            .iter()
            .any(|&e| self.entries[e].collection != collection)
        {
            return Err("its entries belong to different collections".to_owned());
        }
        if run
            .windows(2)
            .any(|w| self.entries[w[1]].index != self.entries[w[0]].index + 1)
        {
            return Err("its entries are not consecutive".to_owned());
        }
        if self.collections[collection].flow {
            return Err("its entries are in a flow collection (`[…]` or `{…}`)".to_owned());
        }
        let (from, to) = (
            self.entries[run[0]].index,
            self.entries[run[run.len() - 1]].index,
        );
        for &(_, owner, coll) in starts {
            let ok = coll == Some(collection)
                || owner
                    .and_then(|o| self.ancestor_in(o, collection))
                    .is_some_and(|a| (from..=to).contains(&self.entries[a].index));
            if !ok {
                return Err("its lines hold part of an entry that starts outside it".to_owned());
            }
        }
        if run.iter().any(|&e| self.entries[e].last >= hi) {
            return Err("an entry it starts continues after it".to_owned());
        }
        let document = self.lines[lo..hi.saturating_sub(1)].iter().any(|l| {
            (l.starts_with("---") || l.starts_with("..."))
                && matches!(l.as_bytes().get(3), None | Some(b' ' | b'\t' | b'\r'))
        });
        if document {
            return Err("it holds a document marker (`---`)".to_owned());
        }
        Ok(Some(collection))
    }

    fn structure(mut self) -> Result<Structure, Unstructured> {
        for s in 0..self.spans.len() {
            let span = &self.spans[s];
            let parts = match span.otherwise {
                Some(e) => vec![(span.open, e), (e, span.close)],
                None => vec![(span.open, span.close)],
            };
            let mut collection = None;
            for (lo, hi) in parts {
                let found = self.part(lo, hi).map_err(|r| self.refuse(s, &r))?;
                if let Some(found) = found {
                    if collection.is_some_and(|c| c != found) {
                        return Err(
                            self.refuse(s, "its branches hold entries of different collections")
                        );
                    }
                    collection = Some(found);
                }
            }
            if collection.is_none() {
                return Err(self.refuse(s, "it renders no YAML entries"));
            }
            self.spans[s].collection = collection;
        }
        // Spans are recorded as they open: by first line already.
        for (s, span) in self.spans.iter().enumerate() {
            if let Some(c) = span.collection {
                self.by_collection.entry(c).or_default().push(s);
            }
        }
        let docs = std::mem::take(&mut self.docs);
        let mut out = Vec::new();
        let mut next = 0;
        for doc in docs {
            let Some(doc) = doc else { continue };
            out.push(self.node(doc, &mut next)?);
        }
        // Handlebars evaluates every value, also those the YAML never reads (in a comment):
        // one that fails fails the render. The structure has no place for them.
        let written: usize = self
            .lines
            .iter()
            .filter(|l| parse_marker(l.trim_matches([' ', '\t'])).is_none())
            .map(|l| {
                split(l).map_or(0, |pieces| {
                    pieces
                        .iter()
                        .filter(|p| matches!(p, Piece::Token(_)))
                        .count()
                })
            })
            .sum();
        if written != out.iter().map(Node::holes).sum::<usize>() {
            return Err(self.whole(
                "a value is written where the YAML does not read it (a comment): handlebars \
                 evaluates it all the same"
                    .to_owned(),
            ));
        }
        Ok(Structure { docs: out })
    }

    fn refuse(&self, span: usize, reason: &str) -> Unstructured {
        let site = self.spans.get(span).map(|s| s.site);
        let reason = format!("does not wrap whole YAML entries: {reason}");
        Unstructured::at_site(self.sites, site, self.file, &reason)
    }

    fn whole(&self, reason: String) -> Unstructured {
        Unstructured::whole(self.file, reason)
    }

    /// Converts a parsed node; `next` counts collections in the order `index` numbered them.
    fn node(&self, node: Parsed, next: &mut usize) -> Result<Node, Unstructured> {
        match node.kind {
            ParsedKind::Scalar {
                text,
                style,
                string,
            } => self.scalar(&text, style, string),
            ParsedKind::Seq { items, .. } => {
                let id = *next;
                *next += 1;
                let mut converted = Vec::with_capacity(items.len());
                for (_, item) in items {
                    converted.push(Item::Value(self.node(item, next)?));
                }
                let (items, blocks) = self.group(id, converted);
                Ok(Node::Seq { items, blocks })
            }
            ParsedKind::Map { entries, .. } => {
                let id = *next;
                *next += 1;
                let mut converted = Vec::with_capacity(entries.len());
                for (key, value) in entries {
                    let key = self.node(key, next)?;
                    let value = self.node(value, next)?;
                    converted.push(Item::Entry(key, value));
                }
                let (items, blocks) = self.group(id, converted);
                Ok(Node::Map { items, blocks })
            }
        }
    }

    fn scalar(&self, text: &str, style: TScalarStyle, string: bool) -> Result<Node, Unstructured> {
        let pieces = split(text).map_err(|e| self.whole(e))?;
        let as_string = string || style != TScalarStyle::Plain;
        let hole = |site: usize| match self.sites.get(site) {
            Some(Site::Hole(expr)) => Ok(expr.clone()),
            _ => Err(self.whole("an unknown value placeholder".to_owned())),
        };
        Ok(match pieces.as_slice() {
            [] | [Piece::Text(_)] => Node::Fixed {
                value: if as_string {
                    Value::String(text.to_owned())
                } else {
                    resolve_plain(text).map_err(|e| self.whole(e))?
                },
                key: text.into(),
            },
            [Piece::Token(site)] if !as_string => Node::Hole(hole(*site)?),
            _ => Node::Text(
                pieces
                    .iter()
                    .map(|p| match p {
                        Piece::Text(t) => Ok(Part::Text((*t).into())),
                        Piece::Token(site) => hole(*site).map(Part::Hole),
                    })
                    .collect::<Result<_, _>>()?,
            ),
        })
    }

    /// Groups collection `id`'s converted entries (in order) into its blocks and partials.
    fn group(&self, id: usize, entries: Vec<Item>) -> (Vec<Item>, bool) {
        let spans: &[usize] = self.by_collection.get(&id).map_or(&[], Vec::as_slice);
        if spans.is_empty() {
            return (entries, false);
        }
        let lines: Vec<usize> = self.collections[id]
            .entries
            .iter()
            .map(|&e| self.entries[e].line)
            .collect();
        let mut cursor = Cursor {
            span: 0,
            entry: 0,
            entries: entries.into_iter().map(Some).collect(),
        };
        let items = self.items(spans, &lines, &mut cursor, usize::MAX);
        (items, true)
    }

    /// The items up to line `hi` (exclusive) from the cursor on: entries, and the spans
    /// (sorted by their first line, nested ones after the one they are in) with what they
    /// hold. One pass over both.
    fn items(&self, spans: &[usize], lines: &[usize], at: &mut Cursor, hi: usize) -> Vec<Item> {
        let mut out = Vec::new();
        loop {
            let next_span = spans
                .get(at.span)
                .map(|&s| &self.spans[s])
                .filter(|s| s.open < hi);
            let until = next_span.map_or(hi, |s| s.open);
            while at.entry < lines.len() && lines[at.entry] < until {
                if let Some(item) = at.entries[at.entry].take() {
                    out.push(item);
                }
                at.entry += 1;
            }
            let Some(span) = next_span else { break };
            at.span += 1;
            let then = self.items(spans, lines, at, span.otherwise.unwrap_or(span.close));
            let otherwise = match span.otherwise {
                Some(_) => self.items(spans, lines, at, span.close),
                None => Vec::new(),
            };
            match self.sites.get(span.site) {
                Some(Site::Block(site, ..)) => out.push(Item::Block {
                    site: site.clone(),
                    then,
                    otherwise,
                }),
                Some(Site::Partial(site, ..)) => out.push(Item::Partial {
                    site: site.clone(),
                    items: then,
                }),
                _ => {}
            }
        }
        out
    }
}

/// Where [`Layout::items`] is in a collection's spans and entries.
struct Cursor {
    span: usize,
    entry: usize,
    entries: Vec<Option<Item>>,
}

fn parse_marker(line: &str) -> Option<(MarkerKind, usize)> {
    let rest = line.strip_prefix(MARKER_PREFIX)?.strip_suffix("__")?;
    let (kind, site) = rest.split_once('_')?;
    let kind = match kind {
        "o" => MarkerKind::Open,
        "e" => MarkerKind::Else,
        "c" => MarkerKind::Close,
        _ => return None,
    };
    Some((kind, site.parse().ok()?))
}

fn not_on_own_lines(sites: &[Site], file: &str, open: Option<usize>, line: &str) -> Unstructured {
    // The marker names the block; otherwise the innermost open one.
    let named = line
        .split(MARKER_PREFIX)
        .nth(1)
        .and_then(|rest| rest.get(2..))
        .and_then(|rest| rest.split("__").next())
        .and_then(|n| n.parse::<usize>().ok())
        .or(open);
    Unstructured::at_site(sites, named, file, "does not stand on lines of its own")
}
