//! Template helpers and the per-render placeholder table.
//!
//! Every helper here is a *value* helper: it implements [`HelperDef::call_inner`] and returns a
//! typed JSON value. None of them writes tenant data into the rendered text: the registration
//! rewrite wraps every output expression in [`VALUE_HELPER`], which records the final value in
//! the placeholder table and writes only an opaque ASCII token.

use std::cell::RefCell;
use std::sync::Arc;

use handlebars::{
    Context, Handlebars, Helper, HelperDef, PathAndJson, RenderContext, RenderError,
    RenderErrorReason, ScopedJson,
};
use serde_json::{Map, Value};

/// Callback behind the `decide` helper: `(table name, key=value arguments) -> value`.
pub type Decider = Arc<dyn Fn(&str, &Map<String, Value>) -> Result<Value, String> + Send + Sync>;

/// The helper every plain `{{expr}}` is rewritten into (`{{__sy_value expr}}`).
pub(super) const VALUE_HELPER: &str = "__sy_value";

/// Prefix of the placeholder tokens written into the rendered text: `__syv_<N>__`.
pub(super) const TOKEN_PREFIX: &str = "__syv_";

/// Reserved prefix: template sources may not contain it at all, so neither the value helper
/// nor a token can be written by hand.
pub(super) const RESERVED_PREFIX: &str = "__sy";

/// Handlebars' built-in helpers (all kept, see `Handlebars::new`).
pub(super) const BUILTIN_HELPERS: &[&str] = &[
    "if", "unless", "each", "with", "lookup", "raw", "log", "eq", "ne", "gt", "gte", "lt", "lte",
    "and", "or", "not", "len",
];

/// Switchyard's own helpers.
pub(super) const OWN_HELPERS: &[&str] = &[
    "toJson", "default", "join", "lower", "upper", "trunc", "decide",
];

/// Helpers that may be used in block form (`{{#name}}…{{/name}}`): the ones that only render
/// their inner templates. A value helper in block form would write its result as raw text.
pub(super) const BLOCK_HELPERS: &[&str] = &["if", "unless", "each", "with", "raw"];

/// Whether `name` is a helper known to every [`super::TemplateSet`].
pub(super) fn is_known_helper(name: &str) -> bool {
    BUILTIN_HELPERS.contains(&name) || OWN_HELPERS.contains(&name)
}

thread_local! {
    /// Stack of placeholder tables, one per render in progress on this thread (a decider may
    /// itself render a template, hence a stack).
    static TABLES: RefCell<Vec<Vec<Value>>> = const { RefCell::new(Vec::new()) };
}

/// Scope of one render's placeholder table on the current thread.
///
/// Rendering is synchronous, so a thread-local stack gives each render its own table without
/// any state in the (shared, `Sync`) registry.
pub(super) struct ValueTable {
    depth: usize,
}

impl ValueTable {
    pub(super) fn begin() -> Self {
        TABLES.with(|tables| {
            let mut tables = tables.borrow_mut();
            tables.push(Vec::new());
            ValueTable {
                depth: tables.len(),
            }
        })
    }

    /// Takes the recorded values; the table itself is removed when `self` drops.
    pub(super) fn finish(self) -> Vec<Value> {
        TABLES.with(|tables| {
            tables
                .borrow_mut()
                .get_mut(self.depth - 1)
                .map(std::mem::take)
                .unwrap_or_default()
        })
    }
}

impl Drop for ValueTable {
    fn drop(&mut self) {
        TABLES.with(|tables| tables.borrow_mut().truncate(self.depth - 1));
    }
}

/// Records `value` in the innermost table and returns its token.
fn record(value: Value) -> Result<String, RenderError> {
    TABLES.with(|tables| {
        let mut tables = tables.borrow_mut();
        let table = tables.last_mut().ok_or_else(|| {
            RenderError::from(RenderErrorReason::Other(
                "internal error: value placeholder used outside a render".to_owned(),
            ))
        })?;
        table.push(value);
        Ok(format!("{TOKEN_PREFIX}{}__", table.len() - 1))
    })
}

/// A helper's argument as the helper sees it: its value (null when the path it names does
/// not exist) and whether it names a path that does not exist.
#[derive(Clone, Copy)]
pub(super) struct Arg<'v> {
    pub(super) value: &'v Value,
    pub(super) missing: bool,
}

/// The arguments of one helper call: positional, then `key=value` (in key order).
pub(super) struct Args<'a, 'v> {
    pub(super) params: &'a [Arg<'v>],
    pub(super) hash: &'a [(&'a str, Arg<'v>)],
}

/// Why a helper failed: a parameter or `key=value` argument naming a variable that does not
/// exist (by index), or a message.
#[derive(Debug)]
pub(super) enum HelperFail {
    MissingParam(usize),
    MissingHash(usize),
    Other(String),
}

fn other(message: String) -> HelperFail {
    HelperFail::Other(message)
}

/// Parameter `idx` of helper `name`, which must exist and not name a missing variable.
fn param<'v>(args: &Args<'_, 'v>, name: &str, idx: usize) -> Result<&'v Value, HelperFail> {
    let p = args.params.get(idx).ok_or_else(|| {
        other(format!(
            "helper `{name}` expects at least {} parameter{}",
            idx + 1,
            if idx == 0 { "" } else { "s" }
        ))
    })?;
    if p.missing {
        return Err(HelperFail::MissingParam(idx));
    }
    Ok(p.value)
}

fn no_more_params(args: &Args<'_, '_>, name: &str, max: usize) -> Result<(), HelperFail> {
    if args.params.len() > max || !args.hash.is_empty() {
        return Err(other(format!(
            "helper `{name}` takes at most {max} parameter{} and no `key=value` arguments",
            if max == 1 { "" } else { "s" }
        )));
    }
    Ok(())
}

/// Text of a value where a string is needed: strings as-is, numbers and booleans as their JSON
/// text, null as the empty string, arrays and objects as compact JSON.
pub(super) fn to_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Text of a scalar value for the string helpers; arrays and objects are refused.
fn scalar_text(value: &Value, helper: &str) -> Result<String, HelperFail> {
    match value {
        Value::Array(_) | Value::Object(_) => Err(other(format!(
            "helper `{helper}` expects a string, got {}",
            kind(value)
        ))),
        other => Ok(to_text(other)),
    }
}

pub(super) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
    }
}

/// One of Switchyard's value helpers, as both renderers call it.
pub(super) type OwnHelper = fn(&Args<'_, '_>, Option<&Decider>) -> Result<Value, HelperFail>;

/// Switchyard's own helper called `name`.
pub(super) fn own_helper(name: &str) -> Option<OwnHelper> {
    Some(match name {
        "toJson" => to_json,
        "default" => default,
        "join" => join,
        "lower" => lower,
        "upper" => upper,
        "trunc" => trunc,
        "decide" => decide,
        _ => return None,
    })
}

/// A handlebars helper calling one of [`own_helper`]'s, and `{{__sy_value expr}}`.
struct OwnFn {
    helper: OwnHelper,
    decider: Option<Decider>,
    /// `{{__sy_value expr}}`: records the value and returns its token.
    records: bool,
}

impl HelperDef for OwnFn {
    fn call_inner<'reg: 'rc, 'rc>(
        &self,
        h: &Helper<'rc>,
        _: &'reg Handlebars<'reg>,
        _: &'rc Context,
        _: &mut RenderContext<'reg, 'rc>,
    ) -> Result<ScopedJson<'rc>, RenderError> {
        fn arg<'p>(p: &'p PathAndJson<'_>) -> Arg<'p> {
            Arg {
                value: p.value(),
                missing: p.is_value_missing(),
            }
        }
        let params: Vec<Arg<'_>> = h.params().iter().map(arg).collect();
        let hash: Vec<(&str, Arg<'_>)> = h.hash().iter().map(|(k, v)| (*k, arg(v))).collect();
        let args = Args {
            params: &params,
            hash: &hash,
        };
        let value = (self.helper)(&args, self.decider.as_ref()).map_err(|e| match e {
            HelperFail::MissingParam(idx) => missing(h.param(idx)),
            HelperFail::MissingHash(idx) => missing(h.hash().values().nth(idx)),
            HelperFail::Other(message) => RenderErrorReason::Other(message).into(),
        })?;
        if self.records {
            return record(value).map(|token| ScopedJson::Derived(Value::String(token)));
        }
        Ok(ScopedJson::Derived(value))
    }
}

/// The error for a parameter that names a variable that does not exist.
fn missing(param: Option<&PathAndJson<'_>>) -> RenderError {
    RenderErrorReason::MissingVariable(param.and_then(|p| p.relative_path().cloned())).into()
}

/// `{{__sy_value expr}}`: the typed value of `expr`, which [`OwnFn`] records in the
/// placeholder table, outputting its token.
///
/// Returning the token from `call_inner` (rather than writing it) lets handlebars write it
/// through its indentation-aware writer, so partials included at an indented position indent
/// lines that start with a value too.
pub(super) fn value_helper(args: &Args<'_, '_>, _: Option<&Decider>) -> Result<Value, HelperFail> {
    Ok(param(args, VALUE_HELPER, 0)?.clone())
}

/// `{{toJson x}}`: the value itself. Values are always inserted by type (a map or a list becomes
/// YAML structure), so this is the same as `{{x}}`; it exists for templates written for other
/// engines.
fn to_json(args: &Args<'_, '_>, _: Option<&Decider>) -> Result<Value, HelperFail> {
    no_more_params(args, "toJson", 1)?;
    Ok(param(args, "toJson", 0)?.clone())
}

/// `{{default x fallback}}`: `x`, unless it is missing, null or the empty string.
fn default(args: &Args<'_, '_>, _: Option<&Decider>) -> Result<Value, HelperFail> {
    no_more_params(args, "default", 2)?;
    let fallback = param(args, "default", 1)?;
    let value = args
        .params
        .first()
        .ok_or_else(|| other("helper `default` expects 2 parameters".to_owned()))?;
    Ok(match value.value {
        _ if value.missing => fallback.clone(),
        Value::Null => fallback.clone(),
        Value::String(s) if s.is_empty() => fallback.clone(),
        v => v.clone(),
    })
}

/// `{{join list sep}}`: the items' text (see [`to_text`]) joined with `sep` (default `,`).
fn join(args: &Args<'_, '_>, _: Option<&Decider>) -> Result<Value, HelperFail> {
    no_more_params(args, "join", 2)?;
    let Value::Array(items) = param(args, "join", 0)? else {
        return Err(other(format!(
            "helper `join` expects a list, got {}",
            kind(param(args, "join", 0)?)
        )));
    };
    let sep = match args.params.get(1) {
        None => ",".to_owned(),
        Some(_) => scalar_text(param(args, "join", 1)?, "join")?,
    };
    Ok(Value::String(
        items.iter().map(to_text).collect::<Vec<_>>().join(&sep),
    ))
}

fn lower(args: &Args<'_, '_>, _: Option<&Decider>) -> Result<Value, HelperFail> {
    no_more_params(args, "lower", 1)?;
    Ok(Value::String(
        scalar_text(param(args, "lower", 0)?, "lower")?.to_lowercase(),
    ))
}

fn upper(args: &Args<'_, '_>, _: Option<&Decider>) -> Result<Value, HelperFail> {
    no_more_params(args, "upper", 1)?;
    Ok(Value::String(
        scalar_text(param(args, "upper", 0)?, "upper")?.to_uppercase(),
    ))
}

/// `{{trunc s n}}`: the first `n` characters of `s` (the last `-n` if `n` is negative).
fn trunc(args: &Args<'_, '_>, _: Option<&Decider>) -> Result<Value, HelperFail> {
    no_more_params(args, "trunc", 2)?;
    let text = scalar_text(param(args, "trunc", 0)?, "trunc")?;
    let len = param(args, "trunc", 1)?;
    let n = len.as_i64().ok_or_else(|| {
        other(format!(
            "helper `trunc` expects an integer length, got {}",
            kind(len)
        ))
    })?;
    let count = text.chars().count();
    let keep = usize::try_from(n.unsigned_abs()).unwrap_or(usize::MAX);
    let result = if n >= 0 {
        text.chars().take(keep).collect()
    } else {
        text.chars().skip(count.saturating_sub(keep)).collect()
    };
    Ok(Value::String(result))
}

/// `{{decide "table" key=value …}}`: asks the decider (the core's decision tables).
fn decide(args: &Args<'_, '_>, decider: Option<&Decider>) -> Result<Value, HelperFail> {
    let table = match param(args, "decide", 0)? {
        Value::String(s) => s.clone(),
        v => {
            return Err(other(format!(
                "helper `decide` expects a table name, got {}",
                kind(v)
            )));
        }
    };
    if args.params.len() > 1 {
        return Err(other(
            "helper `decide` takes a table name and `key=value` arguments only".to_owned(),
        ));
    }
    let mut map = Map::new();
    for (idx, (key, value)) in args.hash.iter().enumerate() {
        if value.missing {
            return Err(HelperFail::MissingHash(idx));
        }
        map.insert((*key).to_owned(), value.value.clone());
    }
    let decider = decider.ok_or_else(|| {
        other(format!(
            "helper `decide`: no decision tables are available (table `{table}`)"
        ))
    })?;
    decider(&table, &map).map_err(|e| other(format!("decision table `{table}`: {e}")))
}

/// Registers every Switchyard helper on `registry`.
pub(super) fn register(registry: &mut Handlebars<'static>, decider: Option<Decider>) {
    registry.register_helper(
        VALUE_HELPER,
        Box::new(OwnFn {
            helper: value_helper,
            decider: None,
            records: true,
        }),
    );
    for name in OWN_HELPERS {
        if let Some(helper) = own_helper(name) {
            registry.register_helper(
                name,
                Box::new(OwnFn {
                    helper,
                    decider: decider.clone(),
                    records: false,
                }),
            );
        }
    }
}
