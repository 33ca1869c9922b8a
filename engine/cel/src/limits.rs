//! Bounds on what one evaluation may build, and the charges for building it.
//!
//! The cost limit bounds time only if every unit stands for a bounded amount of work and
//! memory. So besides the charges of `eval.rs`, every value an expression creates is
//! bounded ([`MAX_STRING_BYTES`], [`MAX_ELEMENTS`]): a function checks the size of its
//! result before it allocates it, and a value over the limit is the error
//! `... exceeds the size limit ...` (not a cost error: no budget makes it legal).

use std::collections::HashSet;
use std::sync::Arc;

use regex::{Regex, RegexBuilder};

use crate::value::Value;

/// The largest string or bytes value an expression may create: 10 MB, above the largest
/// object Kubernetes stores (etcd's default request limit is 1.5 MiB), so only a runaway
/// expression meets it.
pub(crate) const MAX_STRING_BYTES: usize = 10_000_000;

/// The most elements (or entries) a list (or map) an expression creates may have.
pub(crate) const MAX_ELEMENTS: usize = 1_000_000;

/// The compiled size of a regular expression whose pattern is not a constant: the first
/// tier, which every common pattern fits (`\w+`, with its Unicode classes, needs about
/// 40 KB); compiling up to it takes about 0.3 ms.
pub(crate) const REGEX_SMALL: usize = 64 * 1024;
/// The second tier, and the largest compiled size of any pattern (constant patterns too):
/// compiling up to it takes about 1 to 2 ms (release build).
pub(crate) const REGEX_LARGE: usize = 256 * 1024;
/// The charges for compiling a non-constant pattern within each tier: about one unit per
/// microsecond of the worst compile of the tier (with room for a loaded machine), the
/// rate of the rest of the cost model (the 1,000,000 default limit is about a second).
pub(crate) const REGEX_SMALL_COST: u64 = 1_000;
pub(crate) const REGEX_LARGE_COST: u64 = 5_000;
/// The charge per byte of a non-constant pattern, per compilation attempt: the parser's
/// work before the size limit applies grows with the pattern (a case-folded Unicode class,
/// `(?i)\pL`, takes about 30 microseconds per byte of pattern).
pub(crate) const REGEX_BYTE_COST: u64 = 40;
/// The longest pattern (constant or not): 4 KB, far above any validation pattern, and
/// about 0.15 s of parsing at worst.
pub(crate) const MAX_PATTERN_BYTES: usize = 4096;

/// `Err` when a string or bytes value of `len` bytes would pass [`MAX_STRING_BYTES`].
pub(crate) fn check_bytes(what: &str, len: usize) -> Result<(), String> {
    if len > MAX_STRING_BYTES {
        return Err(format!(
            "{what}: the result ({len} bytes) exceeds the size limit of {MAX_STRING_BYTES} bytes"
        ));
    }
    Ok(())
}

/// `Err` when a list or map of `len` elements would pass [`MAX_ELEMENTS`].
pub(crate) fn check_elements(what: &str, len: usize) -> Result<(), String> {
    if len > MAX_ELEMENTS {
        return Err(format!(
            "{what}: the result ({len} elements) exceeds the size limit of {MAX_ELEMENTS} elements"
        ));
    }
    Ok(())
}

/// `Err` when `v` is over the size limits (its own size, not its elements': those were
/// checked when they were built).
pub(crate) fn check_value(what: &str, v: &Value) -> Result<(), String> {
    match v {
        Value::String(s) => check_bytes(what, s.len()),
        Value::Bytes(b) => check_bytes(what, b.len()),
        Value::List(l) => check_elements(what, l.len()),
        Value::Map(m) => check_elements(what, m.len()),
        _ => Ok(()),
    }
}

/// What creating `v` costs: 1 per 10 bytes of a string or bytes value (cel-go's
/// `StringTraversalCostFactor`), 1 per element of a list or entry of a map (a copied
/// element is a 32-byte value, where 10 bytes of string are 10 bytes).
pub(crate) fn creation_cost(v: &Value) -> u64 {
    match v {
        Value::String(s) => s.len() as u64 / 10,
        Value::Bytes(b) => b.len() as u64 / 10,
        Value::List(l) => l.len() as u64,
        Value::Map(m) => m.len() as u64,
        _ => 0,
    }
}

/// What reading or building all of `v` costs, as [`creation_cost`] counts a value but
/// over every nested value: a string 1 per 10 bytes, a list or map 1 per element or entry
/// (a map key's string bytes too). The engine's own functions take and return JSON, so a
/// call reads its arguments and builds its result whole: this is their charge. Counting
/// stops once it passes `cap`.
pub(crate) fn deep_cost(v: &Value, cap: u64) -> u64 {
    let mut total: u64 = 0;
    let mut pending: Vec<&Value> = vec![v];
    while let Some(value) = pending.pop() {
        total = total.saturating_add(creation_cost(value));
        match value {
            Value::List(items) => pending.extend(items.iter()),
            Value::Map(map) => {
                for (key, item) in map.iter() {
                    if let crate::value::Key::String(s) = key {
                        total = total.saturating_add(s.len() as u64 / 10);
                    }
                    pending.push(item);
                }
            }
            Value::Optional(Some(inner)) => pending.push(inner),
            _ => {}
        }
        if total > cap {
            break;
        }
    }
    total
}

/// Compiles a pattern within the largest compiled size allowed ([`REGEX_LARGE`]), if it is
/// no longer than [`MAX_PATTERN_BYTES`].
fn compile_bounded(pattern: &str) -> Result<Regex, String> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(format!(
            "the pattern ({} bytes) exceeds the size limit of {MAX_PATTERN_BYTES} bytes",
            pattern.len()
        ));
    }
    RegexBuilder::new(pattern)
        .size_limit(REGEX_LARGE)
        .build()
        .map_err(|e| e.to_string())
}

/// Compiles a pattern known only at evaluation time: within [`REGEX_SMALL`] if it fits,
/// else within [`REGEX_LARGE`]. Returns the regex and what compiling it costs (the tiers
/// tried, and [`REGEX_BYTE_COST`] per byte of the pattern per attempt). The charge depends
/// on the pattern only, never on a cache.
pub(crate) fn compile_regex(pattern: &str) -> (Result<Regex, String>, u64) {
    if pattern.len() > MAX_PATTERN_BYTES {
        return (compile_bounded(pattern), REGEX_SMALL_COST);
    }
    let per_attempt = (pattern.len() as u64).saturating_mul(REGEX_BYTE_COST);
    match RegexBuilder::new(pattern).size_limit(REGEX_SMALL).build() {
        Err(regex::Error::CompiledTooBig(_)) => (
            compile_bounded(pattern),
            REGEX_SMALL_COST + REGEX_LARGE_COST + 2 * per_attempt,
        ),
        other => (
            other.map_err(|e| e.to_string()),
            REGEX_SMALL_COST + per_attempt,
        ),
    }
}

/// A value's identity for CEL equality, for the values where equality is identity:
/// `null`, booleans, integers (`1 == 1u`), strings and bytes. Doubles (whose equality with
/// integers is numeric), lists, maps and library values have none.
#[derive(PartialEq, Eq, Hash)]
pub(crate) enum HashKey<'a> {
    Null,
    Bool(bool),
    Int(i64),
    /// A `uint` beyond `i64::MAX` (no `int` equals it).
    BigUint(u64),
    String(&'a str),
    Bytes(&'a [u8]),
}

impl<'a> HashKey<'a> {
    pub(crate) fn of(v: &'a Value) -> Option<HashKey<'a>> {
        Some(match v {
            Value::Null => HashKey::Null,
            Value::Bool(b) => HashKey::Bool(*b),
            Value::Int(i) => HashKey::Int(*i),
            Value::Uint(u) => i64::try_from(*u).map_or(HashKey::BigUint(*u), HashKey::Int),
            Value::String(s) => HashKey::String(s),
            Value::Bytes(b) => HashKey::Bytes(b),
            _ => return None,
        })
    }
}

/// Whether every element has a [`HashKey`]: such lists are searched by hashing (linear),
/// others by comparing pairs (quadratic), and charged for it.
pub(crate) fn all_hashable(items: &[Value]) -> bool {
    items.iter().all(|v| HashKey::of(v).is_some())
}

/// `items.distinct()` for a list whose elements all hash: the first of each.
pub(crate) fn distinct_hashed(items: &[Value]) -> Option<Vec<Value>> {
    let mut seen = HashSet::with_capacity(items.len());
    let mut out = Vec::new();
    for v in items {
        if seen.insert(HashKey::of(v)?) {
            out.push(v.clone());
        }
    }
    Some(out)
}

/// The [`HashKey`]s of a list whose elements all hash.
pub(crate) fn hash_set(items: &[Value]) -> Option<HashSet<HashKey<'_>>> {
    items.iter().map(HashKey::of).collect()
}

/// What `distinct()` costs on `items`: 1 per element when they hash, else 1 per pair of
/// elements compared (at worst every element with every earlier one).
pub(crate) fn distinct_cost(items: &[Value]) -> u64 {
    let n = items.len() as u64;
    if all_hashable(items) {
        n
    } else {
        n.saturating_mul(n.saturating_sub(1)) / 2
    }
}

/// What a set relation of `a` and `b` costs, `factor` times (cel-go's `trackSetsCost`:
/// 1 per pair compared, 2 for `sets.equivalent`): the product of the sizes, or their sum
/// when both lists hash.
pub(crate) fn sets_cost(a: &[Value], b: &[Value], factor: u64) -> u64 {
    let (m, n) = (a.len() as u64, b.len() as u64);
    let work = if all_hashable(a) && all_hashable(b) {
        m + n
    } else {
        m.saturating_mul(n)
    };
    work.saturating_mul(factor)
}

/// What Kubernetes charges for `distinct()`, `sort()` and `sortBy` of `n` elements (cel-go's
/// lists extension, `trackListSelfCompare`): 2 per pair, 2.1 when the first element is a
/// string or bytes, and 10 for the list it allocates (the call itself is the node's 1).
pub(crate) fn self_compare_cost(n: usize, strings: bool) -> u64 {
    let n = n as u64;
    let pairs = n.saturating_mul(n);
    let charge = if strings {
        pairs.saturating_mul(21) / 10
    } else {
        pairs.saturating_mul(2)
    };
    charge.saturating_add(LIST_CREATE_COST)
}

/// What Kubernetes charges for `flatten(depth)` of a list of `n` elements (cel-go's
/// `trackListFlatten`): `depth` per element (its float product, truncated), and 10 for the
/// list it allocates.
pub(crate) fn flatten_cost(n: usize, depth: i64) -> u64 {
    let charge = (n as f64 * depth.max(0) as f64) as u64;
    charge.saturating_add(LIST_CREATE_COST)
}

/// cel-go's `common.ListCreateBaseCost`.
const LIST_CREATE_COST: u64 = 10;

/// Whether cel-go charges comparing `items` as strings: its first element is a string or
/// bytes.
pub(crate) fn compares_strings(items: &[Value]) -> bool {
    matches!(items.first(), Some(Value::String(_) | Value::Bytes(_)))
}

/// What sorting `n` elements costs: 1 per comparison, `n * ceil(log2 n)`.
pub(crate) fn sort_cost(n: usize) -> u64 {
    let n = n as u64;
    n.saturating_mul(u64::from(64 - n.saturating_sub(1).leading_zeros()))
}

/// A string of at most [`MAX_STRING_BYTES`], as a value.
pub(crate) fn bounded_string(what: &str, s: String) -> Result<Value, String> {
    check_bytes(what, s.len())?;
    Ok(Value::String(Arc::from(s)))
}

/// The bytes of a string or bytes value (0 for others).
pub(crate) fn byte_len(v: &Value) -> u64 {
    match v {
        Value::String(s) => s.len() as u64,
        Value::Bytes(b) => b.len() as u64,
        _ => 0,
    }
}

/// The work of comparing `a` and `b` for equality ([`crate::value::equals`]), in bytes and
/// elements (10 of which make a unit of cost), after cel-go's runtime cost: strings and
/// bytes 1 per byte of the shorter, lists and maps 1 per element of the shorter; and,
/// beyond cel-go, what comparing the elements of lists and maps of the same size costs,
/// all of them (at worst every pair is equal but the last). Sharing is not counted (an
/// element compared with itself costs what an equal copy costs), so the figure depends on
/// the values only. Counting stops once it passes `cap`: the answer is then over `cap`,
/// and the walk is as short as the budget it stands for.
pub(crate) fn equality_work(a: &Value, b: &Value, cap: u64) -> u64 {
    let mut work = 0;
    add_equality_work(a, b, &mut work, cap);
    work
}

fn add_equality_work(a: &Value, b: &Value, work: &mut u64, cap: u64) {
    if *work > cap {
        return;
    }
    match (a, b) {
        (Value::String(_), Value::String(_)) | (Value::Bytes(_), Value::Bytes(_)) => {
            *work = work.saturating_add(byte_len(a).min(byte_len(b)));
        }
        (Value::List(x), Value::List(y)) => {
            *work = work.saturating_add(x.len().min(y.len()) as u64);
            if x.len() == y.len() {
                for (p, q) in x.iter().zip(y.iter()) {
                    add_equality_work(p, q, work, cap);
                    if *work > cap {
                        return;
                    }
                }
            }
        }
        (Value::Map(x), Value::Map(y)) => {
            *work = work.saturating_add(x.len().min(y.len()) as u64);
            if x.len() == y.len() {
                for (k, v) in x.iter() {
                    // The key is hashed to find its entry in `y`.
                    let key = k.to_value();
                    *work = work.saturating_add(byte_len(&key));
                    if let Some(w) = y.get(&key) {
                        add_equality_work(v, w, work, cap);
                    }
                    if *work > cap {
                        return;
                    }
                }
            }
        }
        (Value::Optional(Some(p)), Value::Optional(Some(q))) => {
            add_equality_work(p, q, work, cap);
        }
        _ => {}
    }
}

/// What comparing `needle` with every element of `items` costs (`in`, `indexOf`,
/// `lastIndexOf`): the sum of their [`equality_work`], per 10, counted up to `cap` units.
pub(crate) fn search_cost(items: &[Value], needle: &Value, cap: u64) -> u64 {
    let cap_work = cap.saturating_mul(10).saturating_add(9);
    let mut work = 0u64;
    for x in items {
        add_equality_work(needle, x, &mut work, cap_work);
        if work > cap_work {
            break;
        }
    }
    work / 10
}

/// What ordering `a` and `b` costs (`<`, `<=`, `>`, `>=`): 1 per 10 bytes of the shorter
/// of two strings or bytes values, as cel-go; other values are fixed-size.
pub(crate) fn order_cost(a: &Value, b: &Value) -> u64 {
    byte_len(a).min(byte_len(b)) / 10
}

/// What the comparisons of `min`, `max` and `isSorted` cost beyond their count (charged
/// as linear): each element is compared with one other at most twice, at most all its
/// bytes: 1 per 10 bytes of the string and bytes elements.
pub(crate) fn scan_cost(items: &[Value]) -> u64 {
    items.iter().map(byte_len).sum::<u64>() / 10
}

/// What sorting `items` costs: [`sort_cost`] comparisons, each costing 1 and 1 more per 10
/// bytes it reads, which is at most the length of the second longest string (a comparison
/// reads no more than the shorter of its two operands).
pub(crate) fn sort_cost_of(items: &[Value]) -> u64 {
    let (mut longest, mut second) = (0u64, 0u64);
    for v in items {
        let n = byte_len(v);
        if n > longest {
            second = longest;
            longest = n;
        } else if n > second {
            second = n;
        }
    }
    sort_cost(items.len()).saturating_mul(1 + second / 10)
}

/// What hashing the string and bytes elements of a list costs: 1 per 10 bytes.
pub(crate) fn hashing_cost(items: &[Value]) -> u64 {
    items.iter().map(byte_len).sum::<u64>() / 10
}

/// What comparing pairs of elements deeply costs beyond their count (`distinct` and
/// `sets.*` on elements that do not hash): the [`equality_work`] of each pair, per 10,
/// counted up to `cap` units.
pub(crate) fn pairs_cost(a: &[Value], b: &[Value], cap: u64) -> u64 {
    let cap_work = cap.saturating_mul(10).saturating_add(9);
    let mut work = 0u64;
    for x in a {
        for y in b {
            add_equality_work(x, y, &mut work, cap_work);
            if work > cap_work {
                return work / 10;
            }
        }
    }
    work / 10
}

/// [`pairs_cost`] for `distinct`: each element with every earlier one.
pub(crate) fn distinct_pairs_cost(items: &[Value], cap: u64) -> u64 {
    let cap_work = cap.saturating_mul(10).saturating_add(9);
    let mut work = 0u64;
    for (i, x) in items.iter().enumerate() {
        for y in &items[..i] {
            add_equality_work(x, y, &mut work, cap_work);
            if work > cap_work {
                return work / 10;
            }
        }
    }
    work / 10
}
