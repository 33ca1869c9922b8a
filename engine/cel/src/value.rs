//! [`Value`]: the engine's CEL value model.
//!
//! Scalars are stored inline; strings, bytes, lists, maps and library values are behind an
//! `Arc`, so cloning a value (to bind it, to return a sub-tree of it, to put it in a list)
//! never copies data. One Kubernetes object converted once with [`Value::from_json`] can be
//! bound into every evaluation of every rule.
//!
//! Maps ([`Map`]) keep their entries sorted by key: lookups are binary searches, and
//! iteration (`m.map(k, ...)`, [`Value::to_json`]) is deterministic.

use std::any::Any;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::error::EvalError;

/// The part of a value an expression can read, from the chains of literal field names it
/// selects (`self.spec.replicas`, `self.spec.?template.?metadata`, `self.metadata.labels['a']`,
/// `has(self.spec.template)`): a chain read as a value of its own needs everything under it;
/// a chain only tested with `has()` needs the last field to exist; the fields along a chain
/// need nothing else. An identifier read other than through such chains needs all of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Needed {
    /// The whole value.
    Whole,
    /// Only that the value is there (its key in the map holding it).
    Present,
    /// These fields of a map (anything else whole).
    Fields(BTreeMap<String, Needed>),
}

impl Default for Needed {
    /// Nothing.
    fn default() -> Self {
        Needed::Fields(BTreeMap::new())
    }
}

impl Needed {
    /// What either needs.
    pub fn join(&mut self, other: &Needed) {
        match (&mut *self, other) {
            (Needed::Whole, _) | (_, Needed::Present) => {}
            (_, Needed::Whole) => *self = Needed::Whole,
            (Needed::Present, Needed::Fields(_)) => *self = other.clone(),
            (Needed::Fields(mine), Needed::Fields(theirs)) => {
                for (name, needed) in theirs {
                    match mine.get_mut(name) {
                        Some(slot) => slot.join(needed),
                        None => {
                            mine.insert(name.clone(), needed.clone());
                        }
                    }
                }
            }
        }
    }

    /// `path` (fields from the root) is needed as `leaf`.
    pub(crate) fn add(&mut self, path: &[String], leaf: Needed) {
        let mut needed = leaf;
        for field in path.iter().rev() {
            needed = Needed::Fields(BTreeMap::from([(field.clone(), needed)]));
        }
        self.join(&needed);
    }
}

/// A signed span of time, with nanoseconds.
pub type Duration = chrono::TimeDelta;

/// A point in time with nanoseconds, and the offset from UTC it was written with.
///
/// cel-go's timestamps are Go `time.Time`s, which keep the zone offset they were parsed
/// with: `string(timestamp('2024-06-01T12:00:00+02:00'))` is `2024-06-01T12:00:00+02:00`,
/// and adding a duration keeps the offset. Equality, order and the accessors (in UTC unless
/// given a time zone, as Kubernetes sets cel-go) read the instant only.
#[derive(Clone, Copy, Debug)]
pub struct Timestamp {
    instant: chrono::DateTime<chrono::Utc>,
    /// Seconds east of UTC. Go reads offsets up to `+24:60` (25 hours), past what chrono's
    /// `FixedOffset` holds, so the offset is kept apart from the instant.
    offset: i32,
}

impl Timestamp {
    /// The instant, written in UTC (`...Z`).
    pub fn from_utc(instant: chrono::DateTime<chrono::Utc>) -> Timestamp {
        Timestamp { instant, offset: 0 }
    }

    /// The instant, written at `offset` seconds east of UTC.
    pub(crate) fn with_offset(instant: chrono::DateTime<chrono::Utc>, offset: i32) -> Timestamp {
        Timestamp { instant, offset }
    }

    /// The instant.
    pub fn instant(&self) -> chrono::DateTime<chrono::Utc> {
        self.instant
    }

    /// The offset from UTC it is written at, in seconds east.
    pub fn offset_seconds(&self) -> i32 {
        self.offset
    }

    /// Whole seconds since the Unix epoch.
    pub fn unix_seconds(&self) -> i64 {
        self.instant.timestamp()
    }

    /// The nanoseconds past [`Timestamp::unix_seconds`].
    pub fn subsec_nanos(&self) -> u32 {
        self.instant.timestamp_subsec_nanos()
    }

    /// The timestamp `d` later, at the same offset.
    pub(crate) fn checked_add(&self, d: Duration) -> Option<Timestamp> {
        self.instant
            .checked_add_signed(d)
            .map(|instant| Timestamp::with_offset(instant, self.offset))
    }

    /// The timestamp `d` earlier, at the same offset.
    pub(crate) fn checked_sub(&self, d: Duration) -> Option<Timestamp> {
        self.instant
            .checked_sub_signed(d)
            .map(|instant| Timestamp::with_offset(instant, self.offset))
    }
}

impl From<chrono::DateTime<chrono::Utc>> for Timestamp {
    fn from(instant: chrono::DateTime<chrono::Utc>) -> Timestamp {
        Timestamp::from_utc(instant)
    }
}

impl PartialEq for Timestamp {
    fn eq(&self, other: &Self) -> bool {
        self.instant == other.instant
    }
}

impl Eq for Timestamp {}

impl PartialOrd for Timestamp {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Timestamp {
    fn cmp(&self, other: &Self) -> Ordering {
        self.instant.cmp(&other.instant)
    }
}

/// A CEL value. Cheap to clone: strings, bytes, lists, maps and library values are shared.
///
/// Equality (`==`) is CEL's: `1 == 1.0` holds, `NaN` equals nothing, lists and maps compare
/// element by element.
#[derive(Clone)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    String(Arc<str>),
    Bytes(Arc<[u8]>),
    List(Arc<[Value]>),
    Map(Arc<Map>),
    Timestamp(Timestamp),
    Duration(Duration),
    /// A type value (`type(1)`, `int`).
    Type(Type),
    /// An optional value (`optional.of(1)`, `optional.none()`).
    Optional(Option<Arc<Value>>),
    /// A value of a library type (quantity, IP address, CIDR, semver, URL, ...).
    Opaque(Arc<dyn Opaque>),
}

/// A value of a library type, such as a Kubernetes quantity or an IP address.
///
/// The defaults: no equality with anything but itself (by pointer), no ordering, no string
/// form.
pub trait Opaque: Any + fmt::Debug + Send + Sync {
    /// The CEL type name (`kubernetes.Quantity`, `net.IP`), as `type(x)` answers it.
    fn type_name(&self) -> &'static str;

    /// CEL equality with another library value (of any type).
    fn equals(&self, other: &dyn Opaque) -> bool {
        std::ptr::addr_eq(self as *const Self, other as *const dyn Opaque)
    }

    /// The order for `<`, `<=`, `>`, `>=`, when the type has one.
    fn compare(&self, _other: &dyn Opaque) -> Option<Ordering> {
        None
    }

    /// The string form, for `string(x)` and [`Value::to_json`], when the type has one.
    fn to_display(&self) -> Option<String> {
        None
    }
}

/// A type value: its CEL name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Type(&'static str);

impl Type {
    pub const NULL: Type = Type("null_type");
    pub const BOOL: Type = Type("bool");
    pub const INT: Type = Type("int");
    pub const UINT: Type = Type("uint");
    pub const DOUBLE: Type = Type("double");
    pub const STRING: Type = Type("string");
    pub const BYTES: Type = Type("bytes");
    pub const LIST: Type = Type("list");
    pub const MAP: Type = Type("map");
    pub const TIMESTAMP: Type = Type("google.protobuf.Timestamp");
    pub const DURATION: Type = Type("google.protobuf.Duration");
    pub const TYPE: Type = Type("type");
    pub const OPTIONAL: Type = Type("optional_type");
    pub const DYN: Type = Type("dyn");

    /// A type of the given name (for library types).
    pub const fn named(name: &'static str) -> Type {
        Type(name)
    }

    pub fn name(&self) -> &'static str {
        self.0
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// A map key: CEL's key types are `bool`, `int`, `uint` and `string`; cel-go also takes a
/// `double` or `null` in a map literal (`{1.0: 'a'}`), which Kubernetes evaluates.
///
/// `1` and `1u` are different keys, as in cel-go (a lookup finds either: see [`Map::get`]);
/// `0.0` and `-0.0` are one key. Keys order `null`, `bool`, `int`, `uint`, `double`,
/// `string`.
#[derive(Clone, Debug)]
pub enum Key {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    String(Arc<str>),
}

impl Key {
    /// The key a value is, if it can be one.
    pub fn from_value(value: &Value) -> Option<Key> {
        match value {
            Value::Null => Some(Key::Null),
            Value::Bool(b) => Some(Key::Bool(*b)),
            Value::Int(i) => Some(Key::Int(*i)),
            Value::Uint(u) => Some(Key::Uint(*u)),
            Value::Double(d) => Some(Key::Double(*d)),
            Value::String(s) => Some(Key::String(Arc::clone(s))),
            _ => None,
        }
    }

    pub fn to_value(&self) -> Value {
        match self {
            Key::Null => Value::Null,
            Key::Bool(b) => Value::Bool(*b),
            Key::Int(i) => Value::Int(*i),
            Key::Uint(u) => Value::Uint(*u),
            Key::Double(d) => Value::Double(*d),
            Key::String(s) => Value::String(Arc::clone(s)),
        }
    }

    /// The string form, as a JSON object key (a `double` or `null` key has none in
    /// [`Value::to_json`]; this is its CEL string form).
    pub fn to_json_key(&self) -> String {
        match self {
            Key::Null => "null".to_string(),
            Key::Bool(b) => b.to_string(),
            Key::Int(i) => i.to_string(),
            Key::Uint(u) => u.to_string(),
            Key::Double(d) => d.to_string(),
            // `str::to_owned`, not `to_string`: `Arc<str>` would go through `Display`.
            Key::String(s) => String::from(&**s),
        }
    }

    fn shown(&self) -> String {
        match self {
            Key::String(s) => format!("'{s}'"),
            Key::Uint(u) => format!("{u}u"),
            other => other.to_json_key(),
        }
    }

    fn rank(&self) -> u8 {
        match self {
            Key::Null => 0,
            Key::Bool(_) => 1,
            Key::Int(_) => 2,
            Key::Uint(_) => 3,
            Key::Double(_) => 4,
            Key::String(_) => 5,
        }
    }
}

/// Where a name was found the last time it was looked up (an index into a map's entries or
/// an activation's variables), to look there first: a plan node reads the same field of
/// many values of one shape. Shared by the threads evaluating one program; a stale or
/// racing hint only costs the search it would have saved.
#[derive(Default)]
pub(crate) struct Hint(std::sync::atomic::AtomicU32);

impl Hint {
    #[inline(always)]
    pub(crate) fn get(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::Relaxed) as usize
    }

    #[inline(always)]
    pub(crate) fn set(&self, at: usize) {
        if let Ok(at) = u32::try_from(at) {
            self.0.store(at, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// String equality without a call to `memcmp` for the short strings that field names and
/// variable names are: the bytes are compared as two overlapping words.
#[inline(always)]
pub fn same_str(a: &str, b: &str) -> bool {
    #[inline(always)]
    fn word4(s: &[u8], at: usize) -> u32 {
        let mut w = [0u8; 4];
        w.copy_from_slice(&s[at..at + 4]);
        u32::from_ne_bytes(w)
    }
    #[inline(always)]
    fn word8(s: &[u8], at: usize) -> u64 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&s[at..at + 8]);
        u64::from_ne_bytes(w)
    }
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.len();
    if n != b.len() {
        return false;
    }
    match n {
        0 => true,
        // The first, middle and last bytes are every byte.
        1..=3 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        4..=7 => word4(a, 0) == word4(b, 0) && word4(a, n - 4) == word4(b, n - 4),
        8..=16 => word8(a, 0) == word8(b, 0) && word8(a, n - 8) == word8(b, n - 8),
        _ => a == b,
    }
}

/// String order (byte order), deciding on the first bytes without a call to `memcmp` when
/// they differ, as the names of fields and variables mostly do.
#[inline(always)]
pub(crate) fn str_cmp(a: &str, b: &str) -> Ordering {
    match (a.as_bytes().first(), b.as_bytes().first()) {
        (Some(x), Some(y)) if x != y => x.cmp(y),
        _ => a.cmp(b),
    }
}

/// The key of a JSON object as a CEL map key. The names every Kubernetes object carries are
/// shared rather than copied for every object converted.
fn json_object_key(key: &str) -> Arc<str> {
    const COMMON: [&str; 16] = [
        "apiVersion",
        "kind",
        "metadata",
        "name",
        "namespace",
        "labels",
        "annotations",
        "generation",
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "spec",
        "status",
        "conditions",
        "type",
        "message",
    ];
    static SHARED: std::sync::LazyLock<[Arc<str>; 16]> =
        std::sync::LazyLock::new(|| COMMON.map(Arc::from));
    match COMMON.iter().position(|c| same_str(c, key)) {
        Some(i) => Arc::clone(&SHARED[i]),
        None => Arc::from(key),
    }
}

/// `-0.0` as `0.0`: one key, as in Go's maps.
fn zero_normalized(d: f64) -> f64 {
    if d == 0.0 { 0.0 } else { d }
}

impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Key::Bool(a), Key::Bool(b)) => a.cmp(b),
            (Key::Int(a), Key::Int(b)) => a.cmp(b),
            (Key::Uint(a), Key::Uint(b)) => a.cmp(b),
            (Key::Double(a), Key::Double(b)) => zero_normalized(*a).total_cmp(&zero_normalized(*b)),
            (Key::String(a), Key::String(b)) => str_cmp(a, b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Key {}

impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.rank().hash(state);
        match self {
            Key::Null => {}
            Key::Bool(b) => b.hash(state),
            Key::Int(i) => i.hash(state),
            Key::Uint(u) => u.hash(state),
            Key::Double(d) => zero_normalized(*d).to_bits().hash(state),
            Key::String(s) => s.hash(state),
        }
    }
}

/// An immutable map, its entries sorted by key (and so iterated in key order).
#[derive(Clone, Default)]
pub struct Map {
    entries: Vec<(Key, Value)>,
    /// The index of the first string key (they sort last).
    first_string: usize,
    /// The keys as values, built on first iteration by a comprehension.
    keys: std::sync::OnceLock<Arc<[Value]>>,
}

impl Map {
    /// A map from entries; a repeated key is an error naming it.
    pub fn from_entries(mut entries: Vec<(Key, Value)>) -> Result<Map, EvalError> {
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some(w) = entries.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(EvalError::new(format!(
                "repeated map key: {}",
                w[0].0.shown()
            )));
        }
        Ok(Map::from_sorted(entries))
    }

    /// The map a literal makes of its entries, in order, as cel-go builds it: a repeated key
    /// takes the later value (`{'a': 1, 'a': 2}` is `{'a': 2}`), and an optional entry with
    /// no value (`None`: `?'a': optional.none()`) removes the key an earlier entry set.
    pub(crate) fn from_literal(mut entries: Vec<(Key, Option<Value>)>) -> Map {
        // A stable sort keeps the entries of one key in their order: the last one decides.
        // Literals are small and mostly written in key order already.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut sorted: Vec<(Key, Value)> = Vec::with_capacity(entries.len());
        let mut entries = entries.into_iter().peekable();
        while let Some((key, value)) = entries.next() {
            if entries.peek().is_some_and(|(next, _)| *next == key) {
                continue;
            }
            if let Some(value) = value {
                sorted.push((key, value));
            }
        }
        Map::from_sorted(sorted)
    }

    /// A map from entries already sorted and unique.
    fn from_sorted(entries: Vec<(Key, Value)>) -> Map {
        Map {
            first_string: entries.partition_point(|(k, _)| !matches!(k, Key::String(_))),
            entries,
            keys: std::sync::OnceLock::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries in key order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&Key, &Value)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// The keys in order, as values (shared: built once per map).
    pub fn keys(&self) -> &Arc<[Value]> {
        self.keys
            .get_or_init(|| self.entries.iter().map(|(k, _)| k.to_value()).collect())
    }

    /// The value of the `i`-th entry in key order (the `i`-th of [`Map::keys`]).
    pub(crate) fn value_at(&self, i: usize) -> Option<&Value> {
        self.entries.get(i).map(|(_, v)| v)
    }

    /// The value under a string key.
    pub fn get_str(&self, key: &str) -> Option<&Value> {
        // Strings sort after every other key: search the string part only.
        let strings = &self.entries[self.first_string..];
        if strings.len() <= 32 {
            // Up to a few dozen keys (an object's fields, a rule's variables) a scan is
            // faster than a binary search: most keys are ruled out by their length alone,
            // and the rest compared without a call to `memcmp`.
            return strings
                .iter()
                .find(|(k, _)| matches!(k, Key::String(s) if same_str(s, key)))
                .map(|(_, v)| v);
        }
        strings
            .binary_search_by(|(k, _)| match k {
                Key::String(s) => (**s).cmp(key),
                _ => Ordering::Less,
            })
            .ok()
            .map(|i| &strings[i].1)
    }

    /// [`Map::get_str`], looking first at the entry `hint` says the key was at the last
    /// time, and updating it: maps of one shape (the same fields of many objects) find
    /// their key at once.
    pub(crate) fn get_str_hinted(&self, key: &str, hint: &Hint) -> Option<&Value> {
        if let Some((Key::String(s), v)) = self.entries.get(hint.get())
            && same_str(s, key)
        {
            return Some(v);
        }
        let strings = &self.entries[self.first_string..];
        let at = if strings.len() <= 32 {
            strings
                .iter()
                .position(|(k, _)| matches!(k, Key::String(s) if same_str(s, key)))
        } else {
            strings
                .binary_search_by(|(k, _)| match k {
                    Key::String(s) => (**s).cmp(key),
                    _ => Ordering::Less,
                })
                .ok()
        }?;
        hint.set(self.first_string + at);
        Some(&strings[at].1)
    }

    fn get_key(&self, key: &Key) -> Option<&Value> {
        self.entries
            .binary_search_by(|(k, _)| k.cmp(key))
            .ok()
            .map(|i| &self.entries[i].1)
    }

    /// The value under `key`, with cel-go's numeric key equality: the key itself, else an
    /// `int` key finds a `uint` one of the same value and the other way round, and a
    /// `double` key finds an `int` or `uint` one (`m[1]`, `m[1u]` and `m[1.0]` find the
    /// entry `1`), but an integer does not find a `double` key (`{1.0: 'a'}[1]` has none).
    /// `None` also for a value that cannot be a key.
    pub fn get(&self, key: &Value) -> Option<&Value> {
        match key {
            Value::String(s) => self.get_str(s),
            Value::Null => self.get_key(&Key::Null),
            Value::Bool(b) => self.get_key(&Key::Bool(*b)),
            Value::Int(i) => self.get_key(&Key::Int(*i)).or_else(|| {
                u64::try_from(*i)
                    .ok()
                    .and_then(|u| self.get_key(&Key::Uint(u)))
            }),
            Value::Uint(u) => self.get_key(&Key::Uint(*u)).or_else(|| {
                i64::try_from(*u)
                    .ok()
                    .and_then(|i| self.get_key(&Key::Int(i)))
            }),
            Value::Double(d) => {
                // NaN is never found, as in a Go map.
                if d.is_nan() {
                    return None;
                }
                if let Some(v) = self.get_key(&Key::Double(*d)) {
                    return Some(v);
                }
                if d.fract() != 0.0 || !d.is_finite() {
                    return None;
                }
                // cel-go's lossless conversions: -2^63 itself is out of its int range.
                let as_int = (*d > -TWO_POW_63 && *d < TWO_POW_63).then_some(*d as i64);
                let as_uint = (*d >= 0.0 && *d < TWO_POW_64).then_some(*d as u64);
                as_int
                    .and_then(|i| self.get_key(&Key::Int(i)))
                    .or_else(|| as_uint.and_then(|u| self.get_key(&Key::Uint(u))))
            }
            _ => None,
        }
    }

    pub fn contains(&self, key: &Value) -> bool {
        self.get(key).is_some()
    }

    /// Adds a string-keyed entry, or replaces the value of the one with that key.
    fn insert_str(&mut self, key: Arc<str>, value: Value) {
        // The cached keys no longer match.
        self.keys = std::sync::OnceLock::new();
        let at = self.first_string
            + self.entries[self.first_string..].partition_point(|(k, _)| match k {
                Key::String(s) => str_cmp(s, &key) == Ordering::Less,
                _ => true,
            });
        match self.entries.get_mut(at) {
            Some((Key::String(s), slot)) if same_str(s, &key) => *slot = value,
            _ => self.entries.insert(at, (Key::String(key), value)),
        }
    }
}

impl fmt::Debug for Map {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Value {
    /// Converts JSON with Kubernetes conventions: integers become `int` (a `u64` beyond
    /// `i64::MAX` becomes `uint`), other numbers `double`, objects maps with string keys.
    pub fn from_json(json: &serde_json::Value) -> Value {
        match json {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Value::Int(i)
                } else if let Some(u) = n.as_u64() {
                    Value::Uint(u)
                } else {
                    Value::Double(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            serde_json::Value::String(s) => Value::String(Arc::from(s.as_str())),
            serde_json::Value::Array(items) => {
                Value::List(items.iter().map(Value::from_json).collect())
            }
            serde_json::Value::Object(map) => {
                let mut entries: Vec<(Key, Value)> = map
                    .iter()
                    .map(|(k, v)| (Key::String(json_object_key(k)), Value::from_json(v)))
                    .collect();
                // JSON object keys are unique; sorting is all that is needed.
                entries.sort_by(|a, b| a.0.cmp(&b.0));
                Value::Map(Arc::new(Map::from_sorted(entries)))
            }
        }
    }

    /// [`Value::from_json`] of only what `needed` says an expression can read: the maps
    /// along the chains it selects hold only the fields it selects, a field it only tests
    /// with `has()` is null, and anything else is converted whole. Every expression
    /// `needed` was found for evaluates against it as against the whole conversion.
    pub fn from_json_needed(json: &serde_json::Value, needed: &Needed) -> Value {
        match (needed, json) {
            (Needed::Present, _) => Value::Null,
            (Needed::Fields(fields), serde_json::Value::Object(map)) => {
                // Both in key order: the entries come sorted.
                let entries: Vec<(Key, Value)> = fields
                    .iter()
                    .filter_map(|(name, needed)| {
                        let (key, value) = map.get_key_value(name.as_str())?;
                        Some((
                            Key::String(json_object_key(key)),
                            Value::from_json_needed(value, needed),
                        ))
                    })
                    .collect();
                Value::Map(Arc::new(Map::from_sorted(entries)))
            }
            _ => Value::from_json(json),
        }
    }

    /// Converts back to JSON:
    ///
    /// - a map becomes an object; `int`, `uint` and `bool` keys use their string forms
    ///   (`1`, `true`); a `double` or `null` key has none (an error);
    /// - `bytes` become standard base64 (with padding);
    /// - a `timestamp` becomes an RFC 3339 string at the offset it was written with
    ///   (`2024-01-02T03:04:05Z`, `2024-01-02T05:04:05+02:00`, with a fractional part only
    ///   when it is not zero), as CEL's `string(timestamp)` and cel-go's JSON conversion;
    /// - a `duration` becomes CEL's `string(duration)` form: seconds with an `s` suffix
    ///   (`"5400s"`, `"1.5s"`);
    /// - an optional becomes its value, or `null` when it has none;
    /// - a `double` stays a JSON float (`3.0`, not `3`); NaN and the infinities, which JSON
    ///   numbers cannot hold, become the strings `"NaN"`, `"Infinity"` and `"-Infinity"`, as in
    ///   the protobuf JSON mapping;
    /// - a library value (quantity, IP, ...) becomes its string form.
    ///
    /// Type values (`type(x)`) have no JSON form and are an error.
    pub fn to_json(&self) -> Result<serde_json::Value, EvalError> {
        value_to_json(self)
            .map_err(|e| EvalError::new(format!("the result cannot be represented as JSON: {e}")))
    }

    /// Whether [`Value::to_json`] succeeds, and its error if not, without building the JSON.
    pub fn check_json(&self) -> Result<(), EvalError> {
        check_json(self)
            .map_err(|e| EvalError::new(format!("the result cannot be represented as JSON: {e}")))
    }

    /// The value if it is a `bool`.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// `null`.
    pub fn null() -> Value {
        Value::Null
    }

    /// An empty map with room for `n` entries, for [`Value::insert_string_key`].
    pub fn empty_map_with_capacity(n: usize) -> Value {
        Value::Map(Arc::new(Map::from_sorted(Vec::with_capacity(n))))
    }

    /// A map with string keys (a later entry replaces an earlier one of the same key).
    pub fn map<I: IntoIterator<Item = (String, Value)>>(entries: I) -> Value {
        let entries: Vec<(Arc<str>, Value)> = entries
            .into_iter()
            .map(|(k, v)| (Arc::from(k), v))
            .collect();
        Value::string_map(&entries)
    }

    /// A map with string keys that are already shared (no key is copied); a repeated key
    /// keeps its last value.
    pub fn string_map(entries: &[(Arc<str>, Value)]) -> Value {
        let mut entries: Vec<(Key, Value)> = entries
            .iter()
            .map(|(k, v)| (Key::String(k.clone()), v.clone()))
            .collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut unique: Vec<(Key, Value)> = Vec::with_capacity(entries.len());
        for (k, v) in entries {
            match unique.last_mut() {
                Some(last) if last.0 == k => last.1 = v,
                _ => unique.push((k, v)),
            }
        }
        Value::Map(Arc::new(Map::from_sorted(unique)))
    }

    /// Adds `key` to a map value (replacing an entry with that key) in place, copying the
    /// map only if it is shared: a map built one entry at a time costs what the entries
    /// cost, not a new map per entry. Returns false, changing nothing, if `self` is not a
    /// map.
    pub fn insert_string_key(&mut self, key: Arc<str>, value: Value) -> bool {
        match self {
            Value::Map(map) => {
                Arc::make_mut(map).insert_str(key, value);
                true
            }
            _ => false,
        }
    }

    /// A list.
    pub fn list<I: IntoIterator<Item = Value>>(items: I) -> Value {
        Value::List(items.into_iter().collect())
    }

    /// A `bool`.
    pub fn bool(value: bool) -> Value {
        Value::Bool(value)
    }

    /// An `int`.
    pub fn int(value: i64) -> Value {
        Value::Int(value)
    }

    /// A `uint`, which JSON cannot express below `2^63`.
    pub fn uint(value: u64) -> Value {
        Value::Uint(value)
    }

    /// A `double`, also when it is integral (JSON `3` would be an `int`).
    pub fn double(value: f64) -> Value {
        Value::Double(value)
    }

    /// A `string`.
    pub fn string(value: impl Into<String>) -> Value {
        Value::String(Arc::from(value.into()))
    }

    /// A `bytes` value.
    pub fn bytes(value: impl Into<Vec<u8>>) -> Value {
        Value::Bytes(Arc::from(value.into()))
    }

    /// A map with keys of any of the key types (`int`, `uint`, `bool`, `string`, and as
    /// cel-go `double` and `null`).
    ///
    /// Fails on a key of another type, or on a repeated key.
    pub fn map_from_entries<I: IntoIterator<Item = (Value, Value)>>(
        entries: I,
    ) -> Result<Value, EvalError> {
        let mut out = Vec::new();
        for (k, v) in entries {
            let key = Key::from_value(&k).ok_or_else(|| {
                EvalError::new(format!("a map key cannot be of type {}", k.type_name()))
            })?;
            out.push((key, v));
        }
        Ok(Value::Map(Arc::new(Map::from_entries(out)?)))
    }

    /// The CEL type name of this value (`int`, `double`, `string`, `list`, `map`,
    /// `google.protobuf.Duration`, ...), for messages.
    pub fn type_name(&self) -> String {
        self.cel_type().name().to_string()
    }

    /// The CEL type of this value.
    pub fn cel_type(&self) -> Type {
        match self {
            Value::Null => Type::NULL,
            Value::Bool(_) => Type::BOOL,
            Value::Int(_) => Type::INT,
            Value::Uint(_) => Type::UINT,
            Value::Double(_) => Type::DOUBLE,
            Value::String(_) => Type::STRING,
            Value::Bytes(_) => Type::BYTES,
            Value::List(_) => Type::LIST,
            Value::Map(_) => Type::MAP,
            Value::Timestamp(_) => Type::TIMESTAMP,
            Value::Duration(_) => Type::DURATION,
            Value::Type(_) => Type::TYPE,
            Value::Optional(_) => Type::OPTIONAL,
            Value::Opaque(o) => Type(o.type_name()),
        }
    }

    /// The library value inside, if it is one of type `T`.
    pub fn downcast_opaque<T: Opaque>(&self) -> Option<&T> {
        match self {
            Value::Opaque(o) => (&**o as &dyn Any).downcast_ref::<T>(),
            _ => None,
        }
    }

    /// A structural view of the value, for tests that must tell `1`, `1u` and `1.0` apart.
    #[doc(hidden)]
    pub fn inspect(&self) -> Inspect {
        match self {
            Value::Null => Inspect::Null,
            Value::Bool(b) => Inspect::Bool(*b),
            Value::Int(i) => Inspect::Int(*i),
            Value::Uint(u) => Inspect::Uint(*u),
            Value::Double(d) => Inspect::Double(*d),
            Value::String(s) => Inspect::String(s.to_string()),
            Value::Bytes(b) => Inspect::Bytes(b.to_vec()),
            Value::List(items) => Inspect::List(items.iter().map(Value::inspect).collect()),
            Value::Map(map) => Inspect::Map(
                map.iter()
                    .map(|(k, v)| (k.to_value().inspect(), v.inspect()))
                    .collect(),
            ),
            Value::Type(t) => Inspect::Type(t.name().to_string()),
            Value::Duration(d) => Inspect::Duration(d.num_seconds(), d.subsec_nanos()),
            Value::Timestamp(ts) => Inspect::Timestamp(ts.unix_seconds(), ts.subsec_nanos()),
            Value::Optional(o) => Inspect::Optional(o.as_ref().map(|v| Box::new(v.inspect()))),
            Value::Opaque(o) => Inspect::Other(o.type_name().to_string()),
        }
    }

    /// The size of a string (in code points), bytes, list or map.
    pub(crate) fn size(&self) -> Option<usize> {
        match self {
            Value::String(s) => Some(s.chars().count()),
            Value::Bytes(b) => Some(b.len()),
            Value::List(l) => Some(l.len()),
            Value::Map(m) => Some(m.len()),
            _ => None,
        }
    }
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.to_json() {
            Ok(json) => write!(f, "Value({}: {json})", self.type_name()),
            Err(_) => write!(f, "Value({})", self.type_name()),
        }
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        equals(self, other)
    }
}

/// A structural view of a [`Value`] (see [`Value::inspect`]).
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq)]
pub enum Inspect {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    String(String),
    Bytes(Vec<u8>),
    List(Vec<Inspect>),
    /// Entries in no particular order.
    Map(Vec<(Inspect, Inspect)>),
    /// A type value, by name (`int`, `google.protobuf.Duration`).
    Type(String),
    /// Seconds and nanoseconds (both negative for a negative duration).
    Duration(i64, i32),
    /// Seconds and nanoseconds since the Unix epoch.
    Timestamp(i64, u32),
    Optional(Option<Box<Inspect>>),
    /// Anything else, by type name.
    Other(String),
}

// ---- equality and order ---------------------------------------------------------------

/// CEL equality (heterogeneous: values of different types are not equal, numbers compare
/// by value across `int`, `uint` and `double`).
pub fn equals(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Int(_) | Value::Uint(_) | Value::Double(_), _) => {
            compare_numbers(a, b) == Some(Ordering::Equal)
        }
        (Value::Bytes(x), Value::Bytes(y)) => x == y,
        (Value::List(x), Value::List(y)) => {
            Arc::ptr_eq(x, y)
                || (x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| equals(p, q)))
        }
        (Value::Map(x), Value::Map(y)) => {
            Arc::ptr_eq(x, y)
                || (x.len() == y.len()
                    && x.iter()
                        .all(|(k, v)| y.get(&k.to_value()).is_some_and(|w| equals(v, w))))
        }
        (Value::Timestamp(x), Value::Timestamp(y)) => x == y,
        (Value::Duration(x), Value::Duration(y)) => x == y,
        (Value::Type(x), Value::Type(y)) => x == y,
        (Value::Optional(x), Value::Optional(y)) => match (x, y) {
            (None, None) => true,
            (Some(p), Some(q)) => equals(p, q),
            _ => false,
        },
        (Value::Opaque(x), Value::Opaque(y)) => x.equals(&**y),
        _ => false,
    }
}

/// The order of two numbers of any numeric types; `None` when either is NaN or not a
/// number.
pub fn compare_numbers(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::Uint(x), Value::Uint(y)) => Some(x.cmp(y)),
        (Value::Double(x), Value::Double(y)) => x.partial_cmp(y),
        (Value::Int(x), Value::Uint(y)) => Some(cmp_int_uint(*x, *y)),
        (Value::Uint(x), Value::Int(y)) => Some(cmp_int_uint(*y, *x).reverse()),
        (Value::Int(x), Value::Double(y)) => cmp_int_double(*x, *y),
        (Value::Double(x), Value::Int(y)) => cmp_int_double(*y, *x).map(Ordering::reverse),
        (Value::Uint(x), Value::Double(y)) => cmp_uint_double(*x, *y),
        (Value::Double(x), Value::Uint(y)) => cmp_uint_double(*y, *x).map(Ordering::reverse),
        _ => None,
    }
}

fn cmp_int_uint(i: i64, u: u64) -> Ordering {
    match u64::try_from(i) {
        Ok(i) => i.cmp(&u),
        Err(_) => Ordering::Less,
    }
}

const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;

/// As cel-go: out of the `int` range the double decides, else the int is compared as a
/// double (lossily, as cel-go does).
fn cmp_int_double(i: i64, d: f64) -> Option<Ordering> {
    if d.is_nan() {
        return None;
    }
    if d < -TWO_POW_63 {
        return Some(Ordering::Greater);
    }
    if d > TWO_POW_63 {
        return Some(Ordering::Less);
    }
    (i as f64).partial_cmp(&d)
}

fn cmp_uint_double(u: u64, d: f64) -> Option<Ordering> {
    if d.is_nan() {
        return None;
    }
    if d < 0.0 {
        return Some(Ordering::Greater);
    }
    if d > TWO_POW_64 {
        return Some(Ordering::Less);
    }
    (u as f64).partial_cmp(&d)
}

/// The order of two values for `<` and the like: numbers (across types), strings, bytes,
/// bools, timestamps, durations, and library values that have one. `Err(())` when the types
/// have no order between them; `Ok(None)` when they are unordered (NaN).
pub fn compare(a: &Value, b: &Value) -> Result<Option<Ordering>, ()> {
    match (a, b) {
        (
            Value::Int(_) | Value::Uint(_) | Value::Double(_),
            Value::Int(_) | Value::Uint(_) | Value::Double(_),
        ) => Ok(compare_numbers(a, b)),
        (Value::String(x), Value::String(y)) => Ok(Some(x.cmp(y))),
        (Value::Bytes(x), Value::Bytes(y)) => Ok(Some(x.cmp(y))),
        (Value::Bool(x), Value::Bool(y)) => Ok(Some(x.cmp(y))),
        (Value::Timestamp(x), Value::Timestamp(y)) => Ok(Some(x.cmp(y))),
        (Value::Duration(x), Value::Duration(y)) => Ok(Some(x.cmp(y))),
        (Value::Opaque(x), Value::Opaque(y)) => match x.compare(&**y) {
            Some(o) => Ok(Some(o)),
            None => Err(()),
        },
        _ => Err(()),
    }
}

// ---- JSON -----------------------------------------------------------------------------

/// The error [`value_to_json`] would return, found in the same order.
fn check_json(v: &Value) -> Result<(), String> {
    match v {
        Value::List(items) => items.iter().try_for_each(check_json),
        Value::Map(map) => map.iter().try_for_each(|(k, v)| {
            check_json_key(k)?;
            check_json(v)
        }),
        Value::Type(t) => Err(format!("the type value {t} has no JSON form")),
        Value::Optional(Some(inner)) => check_json(inner),
        Value::Opaque(o) if o.to_display().is_none() => Err(format!(
            "a value of type {} has no JSON form",
            o.type_name()
        )),
        _ => Ok(()),
    }
}

fn value_to_json(v: &Value) -> Result<serde_json::Value, String> {
    Ok(match v {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => serde_json::Value::Bool(*b),
        Value::Int(i) => serde_json::Value::from(*i),
        Value::Uint(u) => serde_json::Value::from(*u),
        Value::Double(d) => match serde_json::Number::from_f64(*d) {
            Some(n) => serde_json::Value::Number(n),
            None if d.is_nan() => serde_json::Value::String("NaN".into()),
            None if *d > 0.0 => serde_json::Value::String("Infinity".into()),
            None => serde_json::Value::String("-Infinity".into()),
        },
        Value::String(s) => serde_json::Value::String(String::from(&**s)),
        Value::Bytes(b) => serde_json::Value::String(base64_encode(b)),
        Value::Duration(d) => serde_json::Value::String(format_duration(d)),
        Value::Timestamp(ts) => serde_json::Value::String(format_timestamp(ts)),
        Value::List(items) => serde_json::Value::Array(
            items
                .iter()
                .map(value_to_json)
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Value::Map(map) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map.iter() {
                out.insert(json_key(k)?, value_to_json(v)?);
            }
            serde_json::Value::Object(out)
        }
        Value::Type(t) => return Err(format!("the type value {t} has no JSON form")),
        Value::Optional(o) => match o {
            Some(inner) => value_to_json(inner)?,
            None => serde_json::Value::Null,
        },
        Value::Opaque(o) => match o.to_display() {
            Some(s) => serde_json::Value::String(s),
            None => {
                return Err(format!(
                    "a value of type {} has no JSON form",
                    o.type_name()
                ));
            }
        },
    })
}

/// A map key as a JSON object key: `int`, `uint` and `bool` keys in their string forms; a
/// `double` or `null` key has no JSON form.
fn json_key(k: &Key) -> Result<String, String> {
    check_json_key(k)?;
    Ok(k.to_json_key())
}

/// Whether a map key has a JSON form, without making it.
fn check_json_key(k: &Key) -> Result<(), String> {
    match k {
        Key::Double(_) | Key::Null => Err(format!(
            "a map key of type {} has no JSON form",
            k.to_value().type_name()
        )),
        _ => Ok(()),
    }
}

/// CEL's `string(duration)`: whole seconds, a trimmed fractional part when not zero, `s`.
pub(crate) fn format_duration(d: &Duration) -> String {
    let secs = d.num_seconds();
    let nanos = d.subsec_nanos();
    let sign = if secs < 0 || nanos < 0 { "-" } else { "" };
    let (secs, nanos) = (secs.unsigned_abs(), nanos.unsigned_abs());
    if nanos == 0 {
        format!("{sign}{secs}s")
    } else {
        let frac = format!("{nanos:09}");
        format!("{sign}{secs}.{}s", frac.trim_end_matches('0'))
    }
}

/// CEL's `string(timestamp)`, Go's `RFC3339Nano` at the timestamp's offset: a trimmed
/// fractional part when not zero, `Z` for UTC.
pub(crate) fn format_timestamp(ts: &Timestamp) -> String {
    crate::golang::format_rfc3339_nano(ts.unix_seconds(), ts.subsec_nanos(), ts.offset_seconds())
}

/// Whether a timestamp is in CEL's range: 0001-01-01T00:00:00Z ..= 9999-12-31T23:59:59.999999999Z.
pub(crate) fn timestamp_in_range(ts: &Timestamp) -> bool {
    (-62_135_596_800..=253_402_300_799).contains(&ts.unix_seconds())
}

/// Whether a duration is in CEL's range: its nanoseconds fit an `int64`.
pub(crate) fn duration_in_range(d: &Duration) -> bool {
    d.num_nanoseconds().is_some()
}

/// Standard base64 with padding (RFC 4648 section 4).
pub(crate) fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn same_str_agrees_with_equality_at_every_length() {
        let base = "abcdefghijklmnopqrstuvwxyz0123456789";
        for n in 0..=base.len() {
            let a = &base[..n];
            assert!(same_str(a, a), "{a}");
            let copy = String::from(a);
            assert!(same_str(a, &copy), "{a}");
            // Each byte changed in turn, and one length more.
            for i in 0..n {
                let mut b = a.as_bytes().to_vec();
                b[i] = b'-';
                let b = String::from_utf8(b).unwrap();
                assert!(!same_str(a, &b), "{a} vs {b}");
            }
            assert!(!same_str(a, &base[..(n + 1).min(base.len())]) || n == base.len());
        }
    }

    #[test]
    fn hinted_lookups_find_keys_whatever_the_hint_says() {
        let hint = Hint::default();
        let small = Value::from_json(&json!({"a": 1, "b": 2}));
        let wide: serde_json::Map<String, serde_json::Value> =
            (0..40).map(|i| (format!("k{i:02}"), json!(i))).collect();
        let wide = Value::from_json(&serde_json::Value::Object(wide));
        let (Value::Map(small), Value::Map(wide)) = (small, wide) else {
            panic!("maps")
        };
        for _ in 0..2 {
            assert_eq!(
                small
                    .get_str_hinted("b", &hint)
                    .map(|v| v.to_json().unwrap()),
                Some(json!(2))
            );
            assert_eq!(
                wide.get_str_hinted("k33", &hint)
                    .map(|v| v.to_json().unwrap()),
                Some(json!(33))
            );
            assert_eq!(
                wide.get_str_hinted("b", &hint)
                    .map(|v| v.to_json().unwrap()),
                None
            );
            assert_eq!(
                small
                    .get_str_hinted("a", &hint)
                    .map(|v| v.to_json().unwrap()),
                Some(json!(1))
            );
        }
        // A hint past the end of a smaller map.
        hint.set(39);
        assert_eq!(
            small
                .get_str_hinted("a", &hint)
                .map(|v| v.to_json().unwrap()),
            Some(json!(1))
        );
    }

    #[test]
    fn map_literals_keep_the_last_entry_of_a_key() {
        let s = |k: &str| Key::String(Arc::from(k));
        let map = Map::from_literal(vec![
            (s("b"), Some(Value::Int(1))),
            (s("a"), Some(Value::Int(2))),
            (s("b"), Some(Value::Int(3))),
            (s("c"), Some(Value::Int(4))),
            (s("c"), None),
            (s("d"), None),
            (s("d"), Some(Value::Int(5))),
        ]);
        let entries: Vec<_> = map
            .iter()
            .map(|(k, v)| (k.to_json_key(), v.to_json().unwrap()))
            .collect();
        assert_eq!(
            entries,
            vec![
                ("a".into(), json!(2)),
                ("b".into(), json!(3)),
                ("d".into(), json!(5))
            ]
        );
    }

    #[test]
    fn json_round_trip_keeps_kubernetes_conventions() {
        let json = json!({"a": 1, "b": [true, null, "x"], "c": 1.5, "d": {"e": 3.0}});
        let value = Value::from_json(&json);
        assert_eq!(value.to_json().unwrap(), json);
        assert_eq!(Value::from_json(&json!(3)).type_name(), "int");
        assert_eq!(Value::from_json(&json!(3.0)).type_name(), "double");
        assert_eq!(Value::from_json(&json!(u64::MAX)).type_name(), "uint");
        assert_eq!(Value::from_json(&json!({})).type_name(), "map");
        assert_eq!(Value::from_json(&json!([])).type_name(), "list");
        assert_eq!(Value::from_json(&json!("s")).type_name(), "string");
    }

    #[test]
    fn integral_doubles_stay_doubles() {
        let json = Value::double(3.0).to_json().unwrap();
        assert_eq!(json.to_string(), "3.0");
        assert!(json.is_f64());
        assert_eq!(Value::double(f64::NAN).to_json().unwrap(), json!("NaN"));
        assert_eq!(
            Value::double(f64::INFINITY).to_json().unwrap(),
            json!("Infinity")
        );
        assert_eq!(
            Value::double(f64::NEG_INFINITY).to_json().unwrap(),
            json!("-Infinity")
        );
    }

    #[test]
    fn map_keys_use_their_string_forms() {
        let value = Value::map_from_entries([
            (Value::int(-1), Value::string("int")),
            (Value::uint(2), Value::string("uint")),
            (Value::bool(true), Value::string("bool")),
            (Value::string("s"), Value::string("string")),
        ])
        .unwrap();
        assert_eq!(
            value.to_json().unwrap(),
            json!({"-1": "int", "2": "uint", "true": "bool", "s": "string"})
        );
        let err = Value::map_from_entries([(Value::list([]), Value::null())]).unwrap_err();
        assert_eq!(err.message, "a map key cannot be of type list");
        let doubles = Value::map_from_entries([(Value::double(1.0), Value::null())]).unwrap();
        assert_eq!(
            doubles.to_json().unwrap_err().message,
            "the result cannot be represented as JSON: a map key of type double has no JSON form"
        );
        let err = Value::map_from_entries([
            (Value::int(1), Value::null()),
            (Value::int(1), Value::null()),
        ])
        .unwrap_err();
        assert_eq!(err.message, "repeated map key: 1");
    }

    #[test]
    fn map_lookups_cross_numeric_types() {
        let value = Value::map_from_entries([
            (Value::int(1), Value::string("one")),
            (Value::uint(2), Value::string("two")),
            (Value::string("a"), Value::string("A")),
            (Value::bool(false), Value::string("F")),
        ])
        .unwrap();
        let Value::Map(m) = value else { panic!() };
        assert_eq!(m.get(&Value::uint(1)), Some(&Value::string("one")));
        assert_eq!(m.get(&Value::double(1.0)), Some(&Value::string("one")));
        assert_eq!(m.get(&Value::int(2)), Some(&Value::string("two")));
        assert_eq!(m.get(&Value::double(2.5)), None);
        assert_eq!(m.get_str("a"), Some(&Value::string("A")));
        assert_eq!(m.get_str("b"), None);
        assert_eq!(m.get(&Value::bool(false)), Some(&Value::string("F")));

        // cel-go's lookups: a double finds an integer key, an integer no double key.
        let doubles = Value::map_from_entries([
            (Value::double(1.0), Value::string("one")),
            (Value::double(-0.0), Value::string("zero")),
        ])
        .unwrap();
        let Value::Map(d) = doubles else { panic!() };
        assert_eq!(d.get(&Value::double(1.0)), Some(&Value::string("one")));
        assert_eq!(d.get(&Value::double(0.0)), Some(&Value::string("zero")));
        assert_eq!(d.get(&Value::int(1)), None);
        assert_eq!(d.get(&Value::double(f64::NAN)), None);
        // `1` and `1u` are two keys.
        let both = Value::map_from_entries([
            (Value::int(1), Value::string("int")),
            (Value::uint(1), Value::string("uint")),
        ])
        .unwrap();
        let Value::Map(b) = both else { panic!() };
        assert_eq!(b.len(), 2);
        assert_eq!(b.get(&Value::uint(1)), Some(&Value::string("uint")));
        assert_eq!(b.get(&Value::double(1.0)), Some(&Value::string("int")));
    }

    #[test]
    fn bytes_are_base64() {
        assert_eq!(Value::bytes(b"".to_vec()).to_json().unwrap(), json!(""));
        assert_eq!(
            Value::bytes(b"f".to_vec()).to_json().unwrap(),
            json!("Zg==")
        );
        assert_eq!(
            Value::bytes(b"fo".to_vec()).to_json().unwrap(),
            json!("Zm8=")
        );
        assert_eq!(
            Value::bytes(b"foo".to_vec()).to_json().unwrap(),
            json!("Zm9v")
        );
        assert_eq!(
            Value::bytes(vec![0xff, 0xfe, 0x00, 0x10])
                .to_json()
                .unwrap(),
            json!("//4AEA==")
        );
    }

    #[test]
    fn durations_and_timestamps_use_cel_string_forms() {
        use chrono::TimeZone;
        assert_eq!(format_duration(&Duration::seconds(5400)), "5400s");
        assert_eq!(format_duration(&Duration::milliseconds(1500)), "1.5s");
        assert_eq!(format_duration(&Duration::milliseconds(-1500)), "-1.5s");
        assert_eq!(format_duration(&Duration::zero()), "0s");
        let instant = chrono::Utc.with_ymd_and_hms(2024, 1, 2, 3, 4, 5).unwrap();
        let ts = Timestamp::from_utc(instant);
        assert_eq!(format_timestamp(&ts), "2024-01-02T03:04:05Z");
        let ts = ts.checked_add(Duration::milliseconds(250)).unwrap();
        assert_eq!(format_timestamp(&ts), "2024-01-02T03:04:05.25Z");
        // Written at its offset; equal to the same instant written in UTC.
        let east = Timestamp::with_offset(instant, 2 * 3600);
        assert_eq!(format_timestamp(&east), "2024-01-02T05:04:05+02:00");
        assert_eq!(east, Timestamp::from_utc(instant));
        assert_eq!(
            Value::Timestamp(east).to_json().unwrap(),
            json!("2024-01-02T05:04:05+02:00")
        );
    }

    #[test]
    fn clones_share_lists_and_maps() {
        let value = Value::from_json(&json!({"items": [1, 2, 3]}));
        let clone = value.clone();
        let (Value::Map(a), Value::Map(b)) = (&value, &clone) else {
            panic!("maps");
        };
        assert!(Arc::ptr_eq(a, b));
        assert_eq!(value, clone);
    }

    #[test]
    fn equality_is_cel_equality() {
        assert_eq!(Value::int(1), Value::double(1.0));
        assert_eq!(Value::int(1), Value::uint(1));
        assert_ne!(Value::int(-1), Value::uint(u64::MAX));
        assert_ne!(Value::double(f64::NAN), Value::double(f64::NAN));
        assert_eq!(
            Value::from_json(&json!({"a": [1, "x"]})),
            Value::map([(
                "a".to_string(),
                Value::list([Value::int(1), Value::string("x")])
            )])
        );
        assert_ne!(Value::string("1"), Value::int(1));
        assert_eq!(
            compare(&Value::int(1), &Value::double(1.5)),
            Ok(Some(Ordering::Less))
        );
        assert_eq!(
            compare(&Value::uint(u64::MAX), &Value::double(1e30)),
            Ok(Some(Ordering::Less))
        );
        assert_eq!(compare(&Value::int(1), &Value::string("a")), Err(()));
    }

    #[test]
    fn accessors() {
        assert_eq!(Value::bool(true).as_bool(), Some(true));
        assert_eq!(Value::int(1).as_bool(), None);
        assert_eq!(Value::null().to_json().unwrap(), json!(null));
        assert_eq!(Value::null().type_name(), "null_type");
        assert_eq!(
            Value::list([Value::uint(1), Value::double(2.0)]).inspect(),
            Inspect::List(vec![Inspect::Uint(1), Inspect::Double(2.0)])
        );
    }
}
