//! Renders a compiled [`Structure`]: handlebars' evaluation (paths, blocks, partials and
//! helpers, as handlebars in strict mode), with no text.
//!
//! The fill must give what rendering the text and parsing it gives, whenever that succeeds.
//! Where handlebars or the YAML decode would fail, or where this module is unsure, it gives up
//! ([`Fail`]) and the caller renders the text, which gives the result or the exact error. So
//! every check here errs on the side of giving up.

use std::cmp::Ordering;
use std::rc::Rc;
use std::str::FromStr;

use serde_json::{Map, Number, Value};

use super::context::{Held, RenderContext, Root};
use super::helpers::{Arg, Args, Decider, to_text};
use super::structure::{
    BlockKind, BlockSite, Call, CallHelper, Expr, Item, Node, Part, PartialSite, PathExpr,
    Structure,
};

/// The structural render gave up: render the text instead.
#[derive(Debug)]
pub(super) struct Fail;

static NULL: Value = Value::Null;

// How the fill reads the context's root: as it reads every other path segment (`step`).
impl RenderContext<'_> {
    /// The root object's member `name`, read as handlebars reads a path's first segment, or,
    /// when that member is a [`CelMap`](super::context::CelMap) and `next` is given, that member's member `next`
    /// (then `true`: both segments are read).
    pub(super) fn root(
        &self,
        name: &str,
        next: Option<&str>,
    ) -> Result<Option<(&Value, bool)>, Fail> {
        match &self.root {
            Root::Names(names) => match names
                .iter()
                .find(|(n, _)| switchyard_cel::same_str(n, name))
            {
                None => Ok(None),
                Some((_, Held::Cel(map))) => match next {
                    Some(next) => Ok(map.member(next).map(|v| (v, true))),
                    None => Ok(Some((map.whole(), false))),
                },
                Some((_, held)) => Ok(Some((held.value(), false))),
            },
            Root::Whole(value) => Ok(step(value, name)?.map(|v| (v, false))),
        }
    }
}

/// A value the evaluation reads: borrowed from the context or the template, or made.
#[derive(Clone)]
enum Got<'a> {
    Missing,
    Ref(&'a Value),
    Own(Rc<Value>),
}

impl Got<'_> {
    fn value(&self) -> &Value {
        match self {
            Got::Missing => &NULL,
            Got::Ref(v) => v,
            Got::Own(v) => v,
        }
    }

    fn missing(&self) -> bool {
        matches!(self, Got::Missing)
    }

    fn owned(self) -> Value {
        match self {
            Got::Missing => Value::Null,
            Got::Ref(v) => v.clone(),
            Got::Own(v) => Rc::try_unwrap(v).unwrap_or_else(|v| (*v).clone()),
        }
    }

    /// As one of Switchyard's helpers takes it.
    fn arg(&self) -> Arg<'_> {
        Arg {
            value: self.value(),
            missing: self.missing(),
        }
    }

    /// As a block parameter or a partial's argument: a value, null when missing.
    fn present(self) -> Self {
        match self {
            Got::Missing => Got::Ref(&NULL),
            other => other,
        }
    }
}

/// What a block's paths are read from (handlebars' base path or base value).
#[derive(Clone)]
enum Base<'a> {
    Root,
    Got(Got<'a>),
    /// A partial's context joined with its `key=value` arguments (`merge_json`).
    Merged(Rc<(Base<'a>, Vec<(&'a str, Got<'a>)>)>),
}

/// `@first`, `@last`, `@index`, `@key` of a block.
#[derive(Clone, Default)]
struct Locals<'a> {
    first: Option<bool>,
    last: Option<bool>,
    index: Option<usize>,
    key: Option<Got<'a>>,
}

/// One of handlebars' block contexts: the root, an `#each` iteration, a `#with`, a partial.
struct Frame<'a> {
    base: Base<'a>,
    params: Vec<(&'a str, Got<'a>)>,
    locals: Locals<'a>,
}

/// A render in progress.
pub(super) struct Filler<'a> {
    context: &'a RenderContext<'a>,
    decider: Option<&'a Decider>,
    /// Whether a helper asked the decision tables.
    decided: std::cell::Cell<bool>,
}

/// Where a collection's entries go.
enum Sink<'s> {
    Seq(&'s mut Vec<Value>),
    Map(&'s mut Map<String, Value>),
}

impl<'a> Filler<'a> {
    pub(super) fn new(context: &'a RenderContext<'a>, decider: Option<&'a Decider>) -> Self {
        Filler {
            context,
            decider,
            decided: std::cell::Cell::new(false),
        }
    }

    /// Whether the render asked the decision tables (`decide`).
    pub(super) fn decided(&self) -> bool {
        self.decided.get()
    }

    /// The documents of `structure` (empty ones dropped).
    pub(super) fn documents(&self, structure: &'a Structure) -> Result<Vec<Value>, Fail> {
        let mut frames = vec![Frame {
            base: Base::Root,
            params: Vec::new(),
            locals: Locals::default(),
        }];
        let mut docs = Vec::with_capacity(structure.docs.len());
        for doc in &structure.docs {
            match self.node(doc, &mut frames)? {
                Value::Null => {}
                doc @ Value::Object(_) => docs.push(doc),
                // Not a mapping: the decode says so.
                _ => return Err(Fail),
            }
        }
        Ok(docs)
    }

    fn node(&self, node: &'a Node, frames: &mut Vec<Frame<'a>>) -> Result<Value, Fail> {
        Ok(match node {
            Node::Fixed { value, .. } => value.clone(),
            Node::Hole(expr) => self.hole(expr, frames)?.owned(),
            Node::Text(parts) => Value::String(self.text(parts, frames)?),
            Node::Seq { items, blocks } => {
                let mut out = Vec::with_capacity(items.len());
                self.items(items, frames, &mut Sink::Seq(&mut out))?;
                if *blocks && out.is_empty() {
                    Value::Null
                } else {
                    Value::Array(out)
                }
            }
            Node::Map { items, blocks } => {
                let mut out = Map::new();
                self.items(items, frames, &mut Sink::Map(&mut out))?;
                if *blocks && out.is_empty() {
                    Value::Null
                } else {
                    Value::Object(out)
                }
            }
        })
    }

    /// A value written into the YAML: it must exist.
    fn hole(&self, expr: &'a Expr, frames: &[Frame<'a>]) -> Result<Got<'a>, Fail> {
        match self.eval(expr, frames)? {
            Got::Missing => Err(Fail),
            got => Ok(got),
        }
    }

    fn text(&self, parts: &'a [Part], frames: &[Frame<'a>]) -> Result<String, Fail> {
        let mut out = String::new();
        for part in parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Hole(expr) => out.push_str(&to_text(self.hole(expr, frames)?.value())),
            }
        }
        Ok(out)
    }

    /// A node's text as a mapping key.
    fn key(&self, node: &'a Node, frames: &[Frame<'a>]) -> Result<String, Fail> {
        match node {
            Node::Fixed { key, .. } => Ok(String::from(&**key)),
            Node::Hole(expr) => Ok(to_text(self.hole(expr, frames)?.value())),
            Node::Text(parts) => self.text(parts, frames),
            Node::Seq { .. } | Node::Map { .. } => Err(Fail),
        }
    }

    fn items(
        &self,
        items: &'a [Item],
        frames: &mut Vec<Frame<'a>>,
        sink: &mut Sink<'_>,
    ) -> Result<(), Fail> {
        for item in items {
            match item {
                Item::Value(node) => match sink {
                    Sink::Seq(out) => out.push(self.node(node, frames)?),
                    Sink::Map(_) => return Err(Fail),
                },
                Item::Entry(key, value) => match sink {
                    Sink::Map(out) => {
                        let key = self.key(key, frames)?;
                        let value = self.node(value, frames)?;
                        // A duplicate key: the decode says so.
                        if out.insert(key, value).is_some() {
                            return Err(Fail);
                        }
                    }
                    Sink::Seq(_) => return Err(Fail),
                },
                Item::Block {
                    site,
                    then,
                    otherwise,
                } => self.block(site, then, otherwise, frames, sink)?,
                Item::Partial { site, items } => self.partial(site, items, frames, sink)?,
            }
        }
        Ok(())
    }

    fn block(
        &self,
        site: &'a BlockSite,
        then: &'a [Item],
        otherwise: &'a [Item],
        frames: &mut Vec<Frame<'a>>,
        sink: &mut Sink<'_>,
    ) -> Result<(), Fail> {
        let (first, include_zero) = self.argument(site, frames)?;
        let first = &first;
        match site.kind {
            BlockKind::If | BlockKind::Unless => {
                let holds = truthy(first.value(), include_zero) == (site.kind == BlockKind::If);
                self.items(if holds { then } else { otherwise }, frames, sink)
            }
            BlockKind::With => {
                if !truthy(first.value(), false) {
                    return self.items(otherwise, frames, sink);
                }
                let value = first.clone().present();
                let mut params = Vec::new();
                if let Some((name, _)) = &site.block_params {
                    params.push((&**name, value.clone()));
                }
                let locals = innermost(frames).locals.clone();
                let frame = Frame {
                    base: Base::Got(value),
                    params,
                    locals,
                };
                self.items_in(frame, then, frames, sink)
            }
            BlockKind::Each => match iteration(first) {
                Some((elements, keys)) => self.each(site, then, elements, keys, frames, sink),
                None => self.items(otherwise, frames, sink),
            },
        }
    }

    /// A block's first argument and its `includeZero`. Handlebars evaluates every argument
    /// before calling the helper; the block helpers read the first and `includeZero`.
    fn argument(&self, site: &'a BlockSite, frames: &[Frame<'a>]) -> Result<(Got<'a>, bool), Fail> {
        let mut first = None;
        for expr in &site.params {
            let value = self.eval(expr, frames)?;
            first.get_or_insert(value);
        }
        let mut include_zero = false;
        for (key, expr) in &site.hash {
            let value = self.eval(expr, frames)?;
            if &**key == "includeZero" {
                include_zero = value.value().as_bool().unwrap_or(false);
            }
        }
        Ok((first.ok_or(Fail)?, include_zero))
    }

    /// Whether block `site`, met in the template's root context, renders its body rather
    /// than its inverse: `#if`'s argument holds, `#unless`'s does not, `#with`'s is truthy,
    /// `#each`'s has elements.
    pub(super) fn takes_body(&self, site: &'a BlockSite) -> Result<bool, Fail> {
        let frames = [Frame {
            base: Base::Root,
            params: Vec::new(),
            locals: Locals::default(),
        }];
        let (first, include_zero) = self.argument(site, &frames)?;
        Ok(match site.kind {
            BlockKind::If => truthy(first.value(), include_zero),
            BlockKind::Unless => !truthy(first.value(), include_zero),
            BlockKind::With => truthy(first.value(), false),
            BlockKind::Each => iteration(&first).is_some(),
        })
    }

    /// `#each` over `elements` (with `keys` for a map).
    fn each(
        &self,
        site: &'a BlockSite,
        then: &'a [Item],
        elements: Vec<Got<'a>>,
        keys: Option<Vec<Got<'a>>>,
        frames: &mut Vec<Frame<'a>>,
        sink: &mut Sink<'_>,
    ) -> Result<(), Fail> {
        let len = elements.len();
        let mut keys = keys.map(Vec::into_iter);
        for (i, element) in elements.into_iter().enumerate() {
            let key = keys.as_mut().and_then(Iterator::next);
            let mut params = Vec::new();
            if let Some((value_name, key_name)) = &site.block_params {
                params.push((&**value_name, element.clone()));
                if let Some(key_name) = key_name {
                    let key_value = match &key {
                        Some(k) => k.clone(),
                        None => Got::Own(Rc::new(Value::from(i))),
                    };
                    params.push((&**key_name, key_value));
                }
            }
            let frame = Frame {
                base: Base::Got(element),
                params,
                locals: Locals {
                    first: Some(i == 0),
                    last: Some(i + 1 == len),
                    index: Some(i),
                    key,
                },
            };
            self.items_in(frame, then, frames, sink)?;
        }
        Ok(())
    }

    /// `items` in a block context of their own.
    fn items_in(
        &self,
        frame: Frame<'a>,
        items: &'a [Item],
        frames: &mut Vec<Frame<'a>>,
        sink: &mut Sink<'_>,
    ) -> Result<(), Fail> {
        frames.push(frame);
        let result = self.items(items, frames, sink);
        frames.pop();
        result
    }

    fn partial(
        &self,
        site: &'a PartialSite,
        items: &'a [Item],
        frames: &mut Vec<Frame<'a>>,
        sink: &mut Sink<'_>,
    ) -> Result<(), Fail> {
        let hash: Vec<(&'a str, Got<'a>)> = self
            .hash(&site.hash, frames)?
            .into_iter()
            .map(|(k, v)| (k, v.present()))
            .collect();
        let base = match &site.param {
            Some(expr) => Base::Got(self.eval(expr, frames)?.present()),
            None => innermost(frames).base.clone(),
        };
        let base = if hash.is_empty() {
            base
        } else {
            Base::Merged(Rc::new((base, hash.clone())))
        };
        let locals = innermost(frames).locals.clone();
        let frame = Frame {
            base,
            params: hash,
            locals,
        };
        self.items_in(frame, items, frames, sink)
    }

    fn all(&self, exprs: &'a [Expr], frames: &[Frame<'a>]) -> Result<Vec<Got<'a>>, Fail> {
        exprs.iter().map(|e| self.eval(e, frames)).collect()
    }

    fn hash(
        &self,
        hash: &'a [(Box<str>, Expr)],
        frames: &[Frame<'a>],
    ) -> Result<Vec<(&'a str, Got<'a>)>, Fail> {
        hash.iter()
            .map(|(k, e)| Ok((&**k, self.eval(e, frames)?)))
            .collect()
    }

    fn eval(&self, expr: &'a Expr, frames: &[Frame<'a>]) -> Result<Got<'a>, Fail> {
        match expr {
            Expr::Literal(v) => Ok(Got::Ref(v)),
            Expr::Path(path) => self.path(path, frames),
            Expr::Local { level, name } => {
                let frame = frames
                    .len()
                    .checked_sub(level + 1)
                    .and_then(|i| frames.get(i));
                let Some(locals) = frame.map(|f| &f.locals) else {
                    return Ok(Got::Missing);
                };
                let value = match &**name {
                    "first" => locals.first.map(Value::Bool),
                    "last" => locals.last.map(Value::Bool),
                    "index" => locals.index.map(Value::from),
                    "key" => return Ok(locals.key.clone().unwrap_or(Got::Missing)),
                    _ => None,
                };
                Ok(value.map_or(Got::Missing, |v| Got::Own(Rc::new(v))))
            }
            Expr::Call(call) => self.call(call, frames),
        }
    }

    fn path(&self, path: &'a PathExpr, frames: &[Frame<'a>]) -> Result<Got<'a>, Fail> {
        if path.param
            && let Some(name) = path.names.first()
        {
            for frame in frames.iter().rev() {
                if let Some((_, value)) = frame.params.iter().find(|(n, _)| *n == &**name) {
                    return navigate(value.clone(), &path.names[1..]);
                }
            }
        }
        let base = if path.up > 0 {
            frames
                .len()
                .checked_sub(path.up + 1)
                .and_then(|i| frames.get(i))
                .unwrap_or(innermost(frames))
                .base
                .clone()
        } else if path.root {
            Base::Root
        } else {
            innermost(frames).base.clone()
        };
        self.navigate_base(&base, &path.names)
    }

    fn navigate_base(&self, base: &Base<'a>, names: &[Box<str>]) -> Result<Got<'a>, Fail> {
        match base {
            Base::Got(got) => navigate(got.clone(), names),
            Base::Root => match names.split_first() {
                None => Ok(Got::Own(Rc::new(self.context.to_value()))),
                Some((first, rest)) => {
                    match self.context.root(first, rest.first().map(|n| &**n))? {
                        Some((value, false)) => navigate(Got::Ref(value), rest),
                        Some((value, true)) => navigate(Got::Ref(value), &rest[1..]),
                        None => Ok(Got::Missing),
                    }
                }
            },
            Base::Merged(merged) => {
                let (inner, hash) = &**merged;
                let Some((first, rest)) = names.split_first() else {
                    return Ok(Got::Own(Rc::new(self.merged(inner, hash)?)));
                };
                if let Some((_, v)) = hash.iter().rev().find(|(k, _)| *k == &**first) {
                    return navigate(v.clone(), rest);
                }
                // The partial's context as `merge_json` turns it into a map.
                if let Base::Root = inner {
                    if !self.context.root_is_object() {
                        return Err(Fail);
                    }
                    return self.navigate_base(inner, names);
                }
                let whole = self.navigate_base(inner, &[])?;
                let found = match (&whole, whole.value()) {
                    (Got::Ref(Value::Object(map)), _) => map.get(&**first).map(Got::Ref),
                    (_, Value::Object(map)) => {
                        map.get(&**first).map(|v| Got::Own(Rc::new(v.clone())))
                    }
                    (_, Value::Array(items)) => canonical_index(first)
                        .and_then(|i| items.get(i))
                        .map(|v| Got::Own(Rc::new(v.clone()))),
                    (_, Value::String(s)) => canonical_index(first)
                        .and_then(|i| s.chars().nth(i))
                        .map(|c| Got::Own(Rc::new(Value::String(c.to_string())))),
                    _ => None,
                };
                match found {
                    Some(got) => navigate(got, rest),
                    None => Ok(Got::Missing),
                }
            }
        }
    }

    /// `merge_json`: a partial's context with its `key=value` arguments.
    fn merged(&self, inner: &Base<'a>, hash: &[(&'a str, Got<'a>)]) -> Result<Value, Fail> {
        let whole = self.navigate_base(inner, &[])?;
        let mut map = match whole.value() {
            Value::Object(m) => m.clone(),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, v)| (i.to_string(), v.clone()))
                .collect(),
            Value::String(s) => s
                .chars()
                .enumerate()
                .map(|(i, c)| (i.to_string(), Value::String(c.to_string())))
                .collect(),
            _ => Map::new(),
        };
        for (k, v) in hash {
            map.insert((*k).to_owned(), v.value().clone());
        }
        Ok(Value::Object(map))
    }

    fn call(&self, call: &'a Call, frames: &[Frame<'a>]) -> Result<Got<'a>, Fail> {
        let params = self.all(&call.params, frames)?;
        let hash = self.hash(&call.hash, frames)?;
        // A parameter that must be given and exist (strict mode).
        let need = |i: usize| match params.get(i) {
            Some(p) if !p.missing() => Ok(p.value()),
            _ => Err(Fail),
        };
        let bool_value = |b: bool| Ok(Got::Own(Rc::new(Value::Bool(b))));
        match &call.helper {
            CallHelper::Eq => bool_value(need(0)? == need(1)?),
            CallHelper::Ne => bool_value(need(0)? != need(1)?),
            CallHelper::Gt => bool_value(compare(need(0)?, need(1)?) == Some(Ordering::Greater)),
            CallHelper::Gte => {
                bool_value(compare(need(0)?, need(1)?).is_some_and(|o| o != Ordering::Less))
            }
            CallHelper::Lt => bool_value(compare(need(0)?, need(1)?) == Some(Ordering::Less)),
            CallHelper::Lte => {
                bool_value(compare(need(0)?, need(1)?).is_some_and(|o| o != Ordering::Greater))
            }
            CallHelper::And => bool_value(params.iter().all(|p| truthy(p.value(), false))),
            CallHelper::Or => bool_value(params.iter().any(|p| truthy(p.value(), false))),
            CallHelper::Not => bool_value(!truthy(need(0)?, false)),
            CallHelper::Len => {
                let len = match need(0)? {
                    Value::Array(a) => a.len(),
                    Value::Object(m) => m.len(),
                    Value::String(s) => s.len(),
                    _ => 0,
                };
                Ok(Got::Own(Rc::new(Value::from(len))))
            }
            CallHelper::Lookup => {
                let collection = params.first().ok_or(Fail)?;
                let index = params.get(1).ok_or(Fail)?;
                let found = part(collection, |c| {
                    Ok(match c {
                        Value::Array(items) => index
                            .value()
                            .as_u64()
                            .and_then(|u| usize::try_from(u).ok())
                            .and_then(|u| items.get(u)),
                        Value::Object(map) => index.value().as_str().and_then(|k| map.get(k)),
                        _ => None,
                    })
                })?;
                // Strict mode: a lookup that finds nothing is an error.
                match found {
                    Got::Missing => Err(Fail),
                    got => Ok(got),
                }
            }
            CallHelper::Own {
                helper, decides, ..
            } => {
                let params: Vec<Arg<'_>> = params.iter().map(Got::arg).collect();
                let hash: Vec<(&str, Arg<'_>)> = hash.iter().map(|(k, p)| (*k, p.arg())).collect();
                let args = Args {
                    params: &params,
                    hash: &hash,
                };
                if *decides {
                    self.decided.set(true);
                }
                match helper(&args, self.decider) {
                    Ok(value) => Ok(Got::Own(Rc::new(value))),
                    Err(_) => Err(Fail),
                }
            }
        }
    }
}

/// What `#each` iterates in a value: a non-empty list's elements, or a non-empty map's values
/// and keys (borrowed where the value is); `None` for anything else (the inverse renders).
#[allow(clippy::type_complexity)]
fn iteration<'a>(got: &Got<'a>) -> Option<(Vec<Got<'a>>, Option<Vec<Got<'a>>>)> {
    let key = |k: &String| Got::Own(Rc::new(Value::String(k.clone())));
    let owned = |v: &Value| Got::Own(Rc::new(v.clone()));
    match got {
        Got::Ref(Value::Array(list)) if !list.is_empty() => {
            Some((list.iter().map(Got::Ref).collect(), None))
        }
        Got::Ref(Value::Object(map)) if !map.is_empty() => Some((
            map.values().map(Got::Ref).collect(),
            Some(map.keys().map(key).collect()),
        )),
        Got::Own(v) => match &**v {
            Value::Array(list) if !list.is_empty() => {
                Some((list.iter().map(owned).collect(), None))
            }
            Value::Object(map) if !map.is_empty() => Some((
                map.values().map(owned).collect(),
                Some(map.keys().map(key).collect()),
            )),
            _ => None,
        },
        _ => None,
    }
}

fn innermost<'f, 'a>(frames: &'f [Frame<'a>]) -> &'f Frame<'a> {
    // The root frame is never popped.
    &frames[frames.len().saturating_sub(1)]
}

/// Reads `names` in `got` as handlebars' `get_data` does: a list takes an index (anything
/// else is an error), a map a key, other values nothing.
fn navigate<'a>(got: Got<'a>, names: &[Box<str>]) -> Result<Got<'a>, Fail> {
    if names.is_empty() {
        return Ok(got);
    }
    part(&got, |value| {
        names.iter().try_fold(Some(value), |at, name| {
            at.map_or(Ok(None), |v| step(v, name))
        })
    })
}

/// What `pick` finds inside `got`'s value: borrowed where `got` is, else a copy; missing
/// where it finds nothing.
fn part<'a>(
    got: &Got<'a>,
    pick: impl for<'v> Fn(&'v Value) -> Result<Option<&'v Value>, Fail>,
) -> Result<Got<'a>, Fail> {
    Ok(match got {
        Got::Missing => Got::Missing,
        Got::Ref(value) => pick(value)?.map_or(Got::Missing, Got::Ref),
        Got::Own(value) => pick(value)?.map_or(Got::Missing, |v| Got::Own(Rc::new(v.clone()))),
    })
}

/// One segment of a path, as handlebars' `get_data` reads it: a list takes an index
/// (anything else is an error), a map a key, other values nothing.
pub(super) fn step<'v>(value: &'v Value, name: &str) -> Result<Option<&'v Value>, Fail> {
    Ok(match value {
        Value::Array(items) => items.get(name.parse::<usize>().map_err(|_| Fail)?),
        Value::Object(map) => map.get(name),
        _ => None,
    })
}

/// `i` if `name` is `i.to_string()` (how `merge_json` names a list's or a string's elements).
fn canonical_index(name: &str) -> Option<usize> {
    let i = name.parse::<usize>().ok()?;
    (i.to_string() == name).then_some(i)
}

/// Handlebars' truthiness (`JsonTruthy`).
fn truthy(value: &Value, include_zero: bool) -> bool {
    match value {
        Value::Bool(b) => *b,
        Value::Number(n) => {
            if include_zero {
                n.as_f64().is_some_and(|f| !f.is_nan())
            } else {
                n.as_f64().is_some_and(f64::is_normal)
            }
        }
        Value::Null => false,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(m) => !m.is_empty(),
    }
}

/// Handlebars' `compare_json` (`gt`, `lt`, ...): numbers by value across integer and float
/// types, strings, booleans, and a number with a string that parses as a number.
fn compare(x: &Value, y: &Value) -> Option<Ordering> {
    match (x, y) {
        (Value::Number(a), Value::Number(b)) => compare_numbers(a, b),
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        (Value::Bool(a), Value::Bool(b)) => Some(a.cmp(b)),
        (Value::Number(a), Value::String(b)) => compare_numbers(a, &Number::from_str(b).ok()?),
        (Value::String(a), Value::Number(b)) => {
            compare_numbers(b, &Number::from_str(a).ok()?).map(Ordering::reverse)
        }
        _ => None,
    }
}

/// An integer as an exact `i128`, `None` for a float.
fn integer(n: &Number) -> Option<i128> {
    n.as_u64()
        .map(i128::from)
        .or_else(|| n.as_i64().map(i128::from))
}

fn compare_numbers(a: &Number, b: &Number) -> Option<Ordering> {
    match (integer(a), integer(b)) {
        (Some(a), Some(b)) => Some(a.cmp(&b)),
        (Some(a), None) => compare_integer_float(a, b.as_f64()?),
        (None, Some(b)) => compare_integer_float(b, a.as_f64()?).map(Ordering::reverse),
        (None, None) => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

/// An integer against a float, exactly (as `num_order` compares them).
fn compare_integer_float(i: i128, f: f64) -> Option<Ordering> {
    if f.is_nan() {
        return None;
    }
    // 2^127: past every i128.
    const LIMIT: f64 = 170_141_183_460_469_231_731_687_303_715_884_105_728.0;
    if f >= LIMIT {
        return Some(Ordering::Less);
    }
    if f < -LIMIT {
        return Some(Ordering::Greater);
    }
    let whole = f.trunc();
    // In range, so the conversion is exact.
    #[allow(clippy::cast_possible_truncation)]
    let w = whole as i128;
    Some(match i.cmp(&w) {
        Ordering::Equal if f > whole => Ordering::Less,
        Ordering::Equal if f < whole => Ordering::Greater,
        other => other,
    })
}
