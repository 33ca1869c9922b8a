//! Template helpers and the per-render placeholder table.
//!
//! Every helper here is a *value* helper: it implements [`HelperDef::call_inner`] and returns a
//! typed JSON value. None of them writes tenant data into the rendered text: the registration
//! rewrite wraps every output expression in [`VALUE_HELPER`], which records the final value in
//! the placeholder table and writes only an opaque ASCII token.

use std::cell::RefCell;

use handlebars::{
    Context, Handlebars, Helper, HelperDef, PathAndJson, RenderContext, RenderError,
    RenderErrorReason, ScopedJson,
};
use serde_json::{Map, Value};

use super::Decider;

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

fn other(message: String) -> RenderError {
    RenderErrorReason::Other(message).into()
}

/// The error for a parameter that names a variable that does not exist.
fn missing(param: &PathAndJson<'_>) -> RenderError {
    RenderErrorReason::MissingVariable(param.relative_path().cloned()).into()
}

/// Parameter `idx` of helper `name`, which must exist and not name a missing variable.
fn param<'a>(h: &'a Helper<'_>, name: &str, idx: usize) -> Result<&'a Value, RenderError> {
    let p = h.param(idx).ok_or_else(|| {
        other(format!(
            "helper `{name}` expects at least {} parameter{}",
            idx + 1,
            if idx == 0 { "" } else { "s" }
        ))
    })?;
    if p.is_value_missing() {
        return Err(missing(p));
    }
    Ok(p.value())
}

fn no_more_params(h: &Helper<'_>, name: &str, max: usize) -> Result<(), RenderError> {
    if h.params().len() > max || !h.hash().is_empty() {
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
fn scalar_text(value: &Value, helper: &str) -> Result<String, RenderError> {
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

type HelperFn = fn(&Helper<'_>) -> Result<Value, RenderError>;

/// A stateless value helper.
struct ValueFn(HelperFn);

impl HelperDef for ValueFn {
    fn call_inner<'reg: 'rc, 'rc>(
        &self,
        h: &Helper<'rc>,
        _: &'reg Handlebars<'reg>,
        _: &'rc Context,
        _: &mut RenderContext<'reg, 'rc>,
    ) -> Result<ScopedJson<'rc>, RenderError> {
        (self.0)(h).map(ScopedJson::Derived)
    }
}

/// `{{__sy_value expr}}`: records the typed value of `expr` and outputs its token.
///
/// Returning the token from `call_inner` (rather than writing it) lets handlebars write it
/// through its indentation-aware writer, so partials included at an indented position indent
/// lines that start with a value too.
fn value_helper(h: &Helper<'_>) -> Result<Value, RenderError> {
    let value = param(h, VALUE_HELPER, 0)?.clone();
    record(value).map(Value::String)
}

/// `{{toJson x}}`: the value itself. Values are always inserted by type (a map or a list becomes
/// YAML structure), so this is the same as `{{x}}`; it exists for templates written for other
/// engines.
fn to_json(h: &Helper<'_>) -> Result<Value, RenderError> {
    no_more_params(h, "toJson", 1)?;
    Ok(param(h, "toJson", 0)?.clone())
}

/// `{{default x fallback}}`: `x`, unless it is missing, null or the empty string.
fn default(h: &Helper<'_>) -> Result<Value, RenderError> {
    no_more_params(h, "default", 2)?;
    let fallback = param(h, "default", 1)?;
    let value = h
        .param(0)
        .ok_or_else(|| other("helper `default` expects 2 parameters".to_owned()))?;
    Ok(match value.value() {
        _ if value.is_value_missing() => fallback.clone(),
        Value::Null => fallback.clone(),
        Value::String(s) if s.is_empty() => fallback.clone(),
        v => v.clone(),
    })
}

/// `{{join list sep}}`: the items' text (see [`to_text`]) joined with `sep` (default `,`).
fn join(h: &Helper<'_>) -> Result<Value, RenderError> {
    no_more_params(h, "join", 2)?;
    let Value::Array(items) = param(h, "join", 0)? else {
        return Err(other(format!(
            "helper `join` expects a list, got {}",
            kind(param(h, "join", 0)?)
        )));
    };
    let sep = match h.param(1) {
        None => ",".to_owned(),
        Some(_) => scalar_text(param(h, "join", 1)?, "join")?,
    };
    Ok(Value::String(
        items.iter().map(to_text).collect::<Vec<_>>().join(&sep),
    ))
}

fn lower(h: &Helper<'_>) -> Result<Value, RenderError> {
    no_more_params(h, "lower", 1)?;
    Ok(Value::String(
        scalar_text(param(h, "lower", 0)?, "lower")?.to_lowercase(),
    ))
}

fn upper(h: &Helper<'_>) -> Result<Value, RenderError> {
    no_more_params(h, "upper", 1)?;
    Ok(Value::String(
        scalar_text(param(h, "upper", 0)?, "upper")?.to_uppercase(),
    ))
}

/// `{{trunc s n}}`: the first `n` characters of `s` (the last `-n` if `n` is negative).
fn trunc(h: &Helper<'_>) -> Result<Value, RenderError> {
    no_more_params(h, "trunc", 2)?;
    let text = scalar_text(param(h, "trunc", 0)?, "trunc")?;
    let len = param(h, "trunc", 1)?;
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
struct DecideHelper(Option<Decider>);

impl HelperDef for DecideHelper {
    fn call_inner<'reg: 'rc, 'rc>(
        &self,
        h: &Helper<'rc>,
        _: &'reg Handlebars<'reg>,
        _: &'rc Context,
        _: &mut RenderContext<'reg, 'rc>,
    ) -> Result<ScopedJson<'rc>, RenderError> {
        let table = match param(h, "decide", 0)? {
            Value::String(s) => s.clone(),
            v => {
                return Err(other(format!(
                    "helper `decide` expects a table name, got {}",
                    kind(v)
                )));
            }
        };
        if h.params().len() > 1 {
            return Err(other(
                "helper `decide` takes a table name and `key=value` arguments only".to_owned(),
            ));
        }
        let mut args = Map::new();
        for (key, value) in h.hash() {
            if value.is_value_missing() {
                return Err(missing(value));
            }
            args.insert((*key).to_owned(), value.value().clone());
        }
        let decider = self.0.as_ref().ok_or_else(|| {
            other(format!(
                "helper `decide`: no decision tables are available (table `{table}`)"
            ))
        })?;
        decider(&table, &args)
            .map(ScopedJson::Derived)
            .map_err(|e| other(format!("decision table `{table}`: {e}")))
    }
}

/// Registers every Switchyard helper on `registry`.
pub(super) fn register(registry: &mut Handlebars<'static>, decider: Option<Decider>) {
    let fns: [(&str, HelperFn); 7] = [
        (VALUE_HELPER, value_helper),
        ("toJson", to_json),
        ("default", default),
        ("join", join),
        ("lower", lower),
        ("upper", upper),
        ("trunc", trunc),
    ];
    for (name, f) in fns {
        registry.register_helper(name, Box::new(ValueFn(f)));
    }
    registry.register_helper("decide", Box::new(DecideHelper(decider)));
}
