//! The adapters from the evaluator's [`Value`]s to the libraries' Rust functions: every
//! Kubernetes function under its CEL name and overloads (see the table in
//! [`super`]).

use std::cmp::Ordering;
use std::sync::Arc;

use crate::environment::Library;
use crate::error::EvalError;
use crate::registry::{Opaque, Overload, Param, Type, Value, compare, equals, no_such_overload};

use super::cidr::Cidr;
use super::format::NamedFormat;
use super::ip::{self, Ip};
use super::lists::{self, ListError};
use super::quantity::{self, Quantity};
use super::semver::{self, Semver};
use super::url::{self, Url};
use super::{cidr, regex, sets};

const QUANTITY: &str = "kubernetes.Quantity";
const URL: &str = "kubernetes.URL";
const IP: &str = "net.IP";
const CIDR: &str = "net.CIDR";
const SEMVER: &str = "kubernetes.Semver";
const FORMAT: &str = "kubernetes.NamedFormat";

/// A named accessor of a library value.
type Accessor<T, R> = (&'static str, fn(&T) -> R);
/// A named set relation over CEL equality.
type SetRelation = (
    &'static str,
    fn(&[Value], &[Value], fn(&Value, &Value) -> bool) -> bool,
);

// ---- library values ---------------------------------------------------------------------

fn downcast<T: Opaque>(o: &dyn Opaque) -> Option<&T> {
    (o as &dyn std::any::Any).downcast_ref::<T>()
}

impl Opaque for Quantity {
    fn type_name(&self) -> &'static str {
        QUANTITY
    }
    /// Kubernetes: equal values (`quantity("200M") == quantity("0.2G")`).
    fn equals(&self, other: &dyn Opaque) -> bool {
        downcast::<Quantity>(other).is_some_and(|o| self == o)
    }
    /// The canonical form, as Kubernetes serializes a quantity.
    fn to_display(&self) -> Option<String> {
        Some(self.canonical())
    }
}

impl Opaque for Url {
    fn type_name(&self) -> &'static str {
        URL
    }
    /// Kubernetes: the same `String()`.
    fn equals(&self, other: &dyn Opaque) -> bool {
        downcast::<Url>(other).is_some_and(|o| self.to_string() == o.to_string())
    }
    fn to_display(&self) -> Option<String> {
        Some(self.to_string())
    }
}

impl Opaque for Ip {
    fn type_name(&self) -> &'static str {
        IP
    }
    fn equals(&self, other: &dyn Opaque) -> bool {
        downcast::<Ip>(other).is_some_and(|o| self == o)
    }
    /// `string(ip)`.
    fn to_display(&self) -> Option<String> {
        Some(self.to_string())
    }
}

impl Opaque for Cidr {
    fn type_name(&self) -> &'static str {
        CIDR
    }
    /// Kubernetes: same address (host bits included) and length.
    fn equals(&self, other: &dyn Opaque) -> bool {
        downcast::<Cidr>(other).is_some_and(|o| self == o)
    }
    /// `string(cidr)`.
    fn to_display(&self) -> Option<String> {
        Some(self.to_string())
    }
}

impl Opaque for Semver {
    fn type_name(&self) -> &'static str {
        SEMVER
    }
    /// blang's `EQ`: same precedence (build metadata ignored).
    fn equals(&self, other: &dyn Opaque) -> bool {
        downcast::<Semver>(other).is_some_and(|o| self.compare(o) == Ordering::Equal)
    }
    fn to_display(&self) -> Option<String> {
        Some(self.to_string())
    }
}

impl Opaque for NamedFormat {
    fn type_name(&self) -> &'static str {
        FORMAT
    }
    /// Kubernetes: the same format name.
    fn equals(&self, other: &dyn Opaque) -> bool {
        downcast::<NamedFormat>(other).is_some_and(|o| self == o)
    }
}

fn opaque(v: impl Opaque) -> Value {
    Value::Opaque(Arc::new(v))
}

// ---- argument access ----------------------------------------------------------------------

fn err(e: impl ToString) -> EvalError {
    EvalError::new(e.to_string())
}

fn get<'a, T: Opaque>(args: &'a [Value], i: usize, f: &str) -> Result<&'a T, EvalError> {
    args.get(i)
        .and_then(Value::downcast_opaque::<T>)
        .ok_or_else(|| no_such_overload(f, args))
}

fn string<'a>(args: &'a [Value], i: usize, f: &str) -> Result<&'a str, EvalError> {
    match args.get(i) {
        Some(Value::String(s)) => Ok(s),
        _ => Err(no_such_overload(f, args)),
    }
}

fn int(args: &[Value], i: usize, f: &str) -> Result<i64, EvalError> {
    match args.get(i) {
        Some(Value::Int(n)) => Ok(*n),
        _ => Err(no_such_overload(f, args)),
    }
}

fn boolean(args: &[Value], i: usize, f: &str) -> Result<bool, EvalError> {
    match args.get(i) {
        Some(Value::Bool(b)) => Ok(*b),
        _ => Err(no_such_overload(f, args)),
    }
}

fn list<'a>(args: &'a [Value], i: usize, f: &str) -> Result<&'a [Value], EvalError> {
    match args.get(i) {
        Some(Value::List(items)) => Ok(items),
        _ => Err(no_such_overload(f, args)),
    }
}

fn strings(items: impl IntoIterator<Item = String>) -> Value {
    Value::list(items.into_iter().map(Value::string))
}

fn optional(v: Option<Value>) -> Value {
    Value::Optional(v.map(Arc::new))
}

fn list_err(e: ListError<EvalError>) -> EvalError {
    match e {
        ListError::Element(e) => e,
        e => err(e),
    }
}

/// The order of two list elements for `isSorted`, `min` and `max`, as Kubernetes' list
/// library compares them: each element must have an order (`traits.Comparer`; `b` is
/// checked as it is reached, the first element by the caller), but two that are
/// unordered (NaN) or of unlike types count as equal (cel-go's comparison yields an error
/// value there, which the functions ignore).
fn order(f: &'static str) -> impl Fn(&Value, &Value) -> Result<Ordering, EvalError> {
    move |a, b| {
        comparer(f, b)?;
        Ok(compare(a, b).ok().flatten().unwrap_or(Ordering::Equal))
    }
}

/// An error unless `v` has an order (cel-go's `traits.Comparer`).
fn comparer(f: &'static str, v: &Value) -> Result<(), EvalError> {
    if sortable(v) {
        Ok(())
    } else {
        Err(no_such_overload(f, std::slice::from_ref(v)))
    }
}

fn as_list(v: &Value) -> Option<&[Value]> {
    match v {
        Value::List(items) => Some(items),
        _ => None,
    }
}

/// CEL `+` of two summands of `sum()`, with cel-go's overflow errors.
fn add(a: &Value, b: &Value) -> Result<Value, EvalError> {
    let overflow = || EvalError::new("integer overflow");
    Ok(match (a, b) {
        (Value::Int(x), Value::Int(y)) => Value::Int(x.checked_add(*y).ok_or_else(overflow)?),
        (Value::Uint(x), Value::Uint(y)) => Value::Uint(
            x.checked_add(*y)
                .ok_or_else(|| EvalError::new("unsigned integer overflow"))?,
        ),
        (Value::Double(x), Value::Double(y)) => Value::Double(x + y),
        (Value::Duration(x), Value::Duration(y)) => {
            let d = x.checked_add(y).ok_or_else(overflow)?;
            // Go durations are int64 nanoseconds
            d.num_nanoseconds().ok_or_else(overflow)?;
            Value::Duration(d)
        }
        _ => return Err(no_such_overload("sum", &[a.clone(), b.clone()])),
    })
}

/// The types cel-go's `sort` accepts as keys (`traits.Comparer`).
fn sortable(v: &Value) -> bool {
    matches!(
        v,
        Value::Int(_)
            | Value::Uint(_)
            | Value::Double(_)
            | Value::Bool(_)
            | Value::Duration(_)
            | Value::Timestamp(_)
            | Value::String(_)
            | Value::Bytes(_)
    )
}

fn sort_by(items: &[Value], keys: &[Value]) -> Result<Value, EvalError> {
    let sorted = lists::sort_by_keys::<_, _, EvalError>(
        items,
        keys,
        sortable,
        |a, b| a.cel_type() == b.cel_type(),
        |a, b| compare(a, b).ok().flatten().unwrap_or(Ordering::Equal),
    )
    .map_err(list_err)?;
    Ok(Value::list(sorted))
}

// ---- the overloads ----------------------------------------------------------------------

/// The type names expressions may use as values (`type(x) == net.IP`), each with its
/// library.
pub(crate) fn types() -> Vec<(Type, Library)> {
    vec![
        (Type::named(IP), Library::Ip),
        (Type::named(CIDR), Library::Cidr),
    ]
}

/// Every overload of the Kubernetes libraries.
pub(crate) fn overloads() -> Vec<Overload> {
    type Group = fn(&mut Vec<Overload>);
    let groups: [(Group, Library); 9] = [
        (quantity_overloads, Library::Base),
        (url_overloads, Library::Base),
        (ip_overloads, Library::Ip),
        (cidr_overloads, Library::Cidr),
        (semver_overloads, Library::Semver),
        (format_overloads, Library::Format),
        (list_overloads, Library::Base),
        (set_overloads, Library::Sets),
        (regex_overloads, Library::Base),
    ];
    let mut all = Vec::new();
    for (add, library) in groups {
        let mut o = Vec::new();
        add(&mut o);
        all.extend(o.into_iter().map(|o| {
            // The list functions of cel-go's lists library (version 3, Kubernetes 1.34);
            // the others are Kubernetes' lists library, in every version.
            let library = match o.name.as_str() {
                "slice"
                | "flatten"
                | "distinct"
                | "reverse"
                | "sort"
                | "@sortByAssociatedKeys"
                | "lists.range"
                    if library == Library::Base =>
                {
                    Library::Lists
                }
                _ => library,
            };
            o.in_library(library)
        }));
    }
    all
}

fn quantity_overloads(o: &mut Vec<Overload>) {
    use Param::{Int, Opaque as Op, String as Str};
    let q = Op(QUANTITY);
    o.push(Overload::global("quantity", &[Str], |a| {
        let s = string(a, 0, "quantity")?;
        Ok(opaque(Quantity::parse(s).map_err(err)?))
    }));
    o.push(Overload::global("isQuantity", &[Str], |a| {
        Ok(Value::Bool(quantity::is_quantity(string(
            a,
            0,
            "isQuantity",
        )?)))
    }));
    // Kubernetes declares `sign` as a global function (`sign(q)`), not a method.
    o.push(Overload::global("sign", &[q], |a| {
        Ok(Value::Int(get::<Quantity>(a, 0, "sign")?.sign()))
    }));
    o.push(Overload::method("isGreaterThan", &[q, q], |a| {
        let (x, y) = (
            get::<Quantity>(a, 0, "isGreaterThan")?,
            get::<Quantity>(a, 1, "isGreaterThan")?,
        );
        Ok(Value::Bool(x.is_greater_than(y)))
    }));
    o.push(Overload::method("isLessThan", &[q, q], |a| {
        let (x, y) = (
            get::<Quantity>(a, 0, "isLessThan")?,
            get::<Quantity>(a, 1, "isLessThan")?,
        );
        Ok(Value::Bool(x.is_less_than(y)))
    }));
    o.push(Overload::method("compareTo", &[q, q], |a| {
        let (x, y) = (
            get::<Quantity>(a, 0, "compareTo")?,
            get::<Quantity>(a, 1, "compareTo")?,
        );
        Ok(Value::Int(x.compare_to(y)))
    }));
    o.push(Overload::method("asApproximateFloat", &[q], |a| {
        Ok(Value::Double(
            get::<Quantity>(a, 0, "asApproximateFloat")?.as_approximate_float(),
        ))
    }));
    o.push(Overload::method("asInteger", &[q], |a| {
        Ok(Value::Int(
            get::<Quantity>(a, 0, "asInteger")?
                .as_integer()
                .map_err(err)?,
        ))
    }));
    o.push(Overload::method("isInteger", &[q], |a| {
        Ok(Value::Bool(
            get::<Quantity>(a, 0, "isInteger")?.is_integer(),
        ))
    }));
    o.push(Overload::method("add", &[q, q], |a| {
        let (x, y) = (get::<Quantity>(a, 0, "add")?, get::<Quantity>(a, 1, "add")?);
        Ok(opaque(x.add(y).map_err(err)?))
    }));
    o.push(Overload::method("add", &[q, Int], |a| {
        let x = get::<Quantity>(a, 0, "add")?;
        Ok(opaque(x.add_int(int(a, 1, "add")?).map_err(err)?))
    }));
    o.push(Overload::method("sub", &[q, q], |a| {
        let (x, y) = (get::<Quantity>(a, 0, "sub")?, get::<Quantity>(a, 1, "sub")?);
        Ok(opaque(x.sub(y).map_err(err)?))
    }));
    o.push(Overload::method("sub", &[q, Int], |a| {
        let x = get::<Quantity>(a, 0, "sub")?;
        Ok(opaque(x.sub_int(int(a, 1, "sub")?).map_err(err)?))
    }));
}

fn url_overloads(o: &mut Vec<Overload>) {
    use Param::{Opaque as Op, String as Str};
    let u = Op(URL);
    o.push(
        Overload::global("url", &[Str], |a| {
            Ok(opaque(url::url(string(a, 0, "url")?).map_err(err)?))
        })
        .linear_cost(),
    );
    o.push(
        Overload::global("isURL", &[Str], |a| {
            Ok(Value::Bool(url::is_url(string(a, 0, "isURL")?)))
        })
        .linear_cost(),
    );
    let accessors: [Accessor<Url, String>; 5] = [
        ("getScheme", Url::scheme),
        ("getHost", Url::host),
        ("getHostname", Url::hostname),
        ("getPort", Url::port),
        ("getEscapedPath", Url::escaped_path),
    ];
    for (name, f) in accessors {
        o.push(Overload::method(name, &[u], move |a| {
            Ok(Value::string(f(get::<Url>(a, 0, name)?)))
        }));
    }
    o.push(Overload::method("getQuery", &[u], |a| {
        let q = get::<Url>(a, 0, "getQuery")?.query();
        Ok(Value::map(q.into_iter().map(|(k, vs)| (k, strings(vs)))))
    }));
}

fn ip_overloads(o: &mut Vec<Overload>) {
    use Param::{Opaque as Op, String as Str};
    let i = Op(IP);
    o.push(Overload::global("ip", &[Str], |a| {
        Ok(opaque(Ip::parse(string(a, 0, "ip")?).map_err(err)?))
    }));
    o.push(Overload::global("isIP", &[Str], |a| {
        Ok(Value::Bool(ip::is_ip(string(a, 0, "isIP")?)))
    }));
    o.push(Overload::global("ip.isCanonical", &[Str], |a| {
        Ok(Value::Bool(
            ip::is_canonical(string(a, 0, "ip.isCanonical")?).map_err(err)?,
        ))
    }));
    o.push(Overload::method("family", &[i], |a| {
        Ok(Value::Int(get::<Ip>(a, 0, "family")?.family()))
    }));
    let predicates: [Accessor<Ip, bool>; 5] = [
        ("isUnspecified", Ip::is_unspecified),
        ("isLoopback", Ip::is_loopback),
        ("isLinkLocalMulticast", Ip::is_link_local_multicast),
        ("isLinkLocalUnicast", Ip::is_link_local_unicast),
        ("isGlobalUnicast", Ip::is_global_unicast),
    ];
    for (name, f) in predicates {
        o.push(Overload::method(name, &[i], move |a| {
            Ok(Value::Bool(f(get::<Ip>(a, 0, name)?)))
        }));
    }
}

fn cidr_overloads(o: &mut Vec<Overload>) {
    use Param::{Opaque as Op, String as Str};
    let (c, i) = (Op(CIDR), Op(IP));
    o.push(Overload::global("cidr", &[Str], |a| {
        Ok(opaque(Cidr::parse(string(a, 0, "cidr")?).map_err(err)?))
    }));
    o.push(Overload::global("isCIDR", &[Str], |a| {
        Ok(Value::Bool(cidr::is_cidr(string(a, 0, "isCIDR")?)))
    }));
    o.push(Overload::method("containsIP", &[c, Str], |a| {
        let n = get::<Cidr>(a, 0, "containsIP")?;
        Ok(Value::Bool(
            n.contains_ip_str(string(a, 1, "containsIP")?)
                .map_err(err)?,
        ))
    }));
    o.push(Overload::method("containsIP", &[c, i], |a| {
        let n = get::<Cidr>(a, 0, "containsIP")?;
        Ok(Value::Bool(n.contains_ip(get::<Ip>(a, 1, "containsIP")?)))
    }));
    o.push(Overload::method("containsCIDR", &[c, Str], |a| {
        let n = get::<Cidr>(a, 0, "containsCIDR")?;
        Ok(Value::Bool(
            n.contains_cidr_str(string(a, 1, "containsCIDR")?)
                .map_err(err)?,
        ))
    }));
    o.push(Overload::method("containsCIDR", &[c, c], |a| {
        let n = get::<Cidr>(a, 0, "containsCIDR")?;
        Ok(Value::Bool(n.contains_cidr(get::<Cidr>(
            a,
            1,
            "containsCIDR",
        )?)))
    }));
    o.push(Overload::method("ip", &[c], |a| {
        Ok(opaque(get::<Cidr>(a, 0, "ip")?.ip()))
    }));
    o.push(Overload::method("prefixLength", &[c], |a| {
        Ok(Value::Int(
            get::<Cidr>(a, 0, "prefixLength")?.prefix_length(),
        ))
    }));
    o.push(Overload::method("masked", &[c], |a| {
        Ok(opaque(get::<Cidr>(a, 0, "masked")?.masked()))
    }));
}

fn semver_overloads(o: &mut Vec<Overload>) {
    use Param::{Bool, Opaque as Op, String as Str};
    let v = Op(SEMVER);
    o.push(Overload::global("semver", &[Str], |a| {
        Ok(opaque(Semver::parse(string(a, 0, "semver")?).map_err(err)?))
    }));
    o.push(Overload::global("semver", &[Str, Bool], |a| {
        let s = string(a, 0, "semver")?;
        let parsed = if boolean(a, 1, "semver")? {
            Semver::parse_normalized(s)
        } else {
            Semver::parse(s)
        };
        Ok(opaque(parsed.map_err(err)?))
    }));
    o.push(Overload::global("isSemver", &[Str], |a| {
        Ok(Value::Bool(semver::is_semver(string(a, 0, "isSemver")?)))
    }));
    o.push(Overload::global("isSemver", &[Str, Bool], |a| {
        Ok(Value::Bool(semver::is_semver_normalized(
            string(a, 0, "isSemver")?,
            boolean(a, 1, "isSemver")?,
        )))
    }));
    let parts: [Accessor<Semver, i64>; 3] = [
        ("major", Semver::major),
        ("minor", Semver::minor),
        ("patch", Semver::patch),
    ];
    for (name, f) in parts {
        o.push(Overload::method(name, &[v], move |a| {
            Ok(Value::Int(f(get::<Semver>(a, 0, name)?)))
        }));
    }
    o.push(Overload::method("isGreaterThan", &[v, v], |a| {
        let (x, y) = (
            get::<Semver>(a, 0, "isGreaterThan")?,
            get::<Semver>(a, 1, "isGreaterThan")?,
        );
        Ok(Value::Bool(x.is_greater_than(y)))
    }));
    o.push(Overload::method("isLessThan", &[v, v], |a| {
        let (x, y) = (
            get::<Semver>(a, 0, "isLessThan")?,
            get::<Semver>(a, 1, "isLessThan")?,
        );
        Ok(Value::Bool(x.is_less_than(y)))
    }));
    o.push(Overload::method("compareTo", &[v, v], |a| {
        let (x, y) = (
            get::<Semver>(a, 0, "compareTo")?,
            get::<Semver>(a, 1, "compareTo")?,
        );
        Ok(Value::Int(x.compare_to(y)))
    }));
}

fn format_overloads(o: &mut Vec<Overload>) {
    use Param::{Opaque as Op, String as Str};
    o.push(Overload::global("format.named", &[Str], |a| {
        let name = string(a, 0, "format.named")?;
        Ok(optional(NamedFormat::named(name).map(opaque)))
    }));
    for (name, f) in NamedFormat::ALL {
        o.push(Overload::global(
            &format!("format.{name}"),
            &[],
            move |_| Ok(opaque(f)),
        ));
    }
    o.push(
        Overload::method("validate", &[Op(FORMAT), Str], |a| {
            let f = get::<NamedFormat>(a, 0, "validate")?;
            let errs = f.validate(string(a, 1, "validate")?).map_err(err)?;
            Ok(optional(errs.map(strings)))
        })
        .linear_cost(),
    );
}

fn list_overloads(o: &mut Vec<Overload>) {
    use Param::{Any, Int, List};
    // Kubernetes' list library
    o.push(
        Overload::method("isSorted", &[List], |a| {
            let items = list(a, 0, "isSorted")?;
            if let Some(first) = items.first() {
                comparer("isSorted", first)?;
            }
            Ok(Value::Bool(
                lists::is_sorted(items, order("isSorted")).map_err(list_err)?,
            ))
        })
        .linear_cost()
        .work(scan_work),
    );
    o.push(
        Overload::method("sum", &[List], |a| {
            let items = list(a, 0, "sum")?;
            let zero = match items.first() {
                None | Some(Value::Int(_)) => Value::Int(0),
                Some(Value::Uint(_)) => Value::Uint(0),
                Some(Value::Double(_)) => Value::Double(0.0),
                Some(Value::Duration(_)) => Value::Duration(chrono::TimeDelta::zero()),
                Some(_) => return Err(no_such_overload("sum", a)),
            };
            lists::sum(items, zero, add).map_err(list_err)
        })
        .linear_cost(),
    );
    o.push(
        Overload::method("min", &[List], |a| {
            let items = list(a, 0, "min")?;
            // cel-go scans the whole list: any element without an order fails it
            for item in items {
                comparer("min", item)?;
            }
            Ok(lists::min(items, order("min")).map_err(list_err)?.clone())
        })
        .linear_cost()
        .work(scan_work),
    );
    o.push(
        Overload::method("max", &[List], |a| {
            let items = list(a, 0, "max")?;
            // cel-go scans the whole list: any element without an order fails it
            for item in items {
                comparer("max", item)?;
            }
            Ok(lists::max(items, order("max")).map_err(list_err)?.clone())
        })
        .linear_cost()
        .work(scan_work),
    );
    o.push(
        Overload::method("indexOf", &[List, Any], |a| {
            let items = list(a, 0, "indexOf")?;
            Ok(Value::Int(lists::index_of(items, &a[1], equals)))
        })
        .linear_cost()
        .work(search_work),
    );
    o.push(
        Overload::method("lastIndexOf", &[List, Any], |a| {
            let items = list(a, 0, "lastIndexOf")?;
            Ok(Value::Int(lists::last_index_of(items, &a[1], equals)))
        })
        .linear_cost()
        .work(search_work),
    );
    // cel-go ext.Lists, version 3
    o.push(
        Overload::method("slice", &[List, Int, Int], |a| {
            let items = list(a, 0, "slice")?;
            let (start, end) = (int(a, 1, "slice")?, int(a, 2, "slice")?);
            Ok(Value::list(
                lists::slice(items, start, end).map_err(list_err)?,
            ))
        })
        .linear_cost()
        .builds(),
    );
    // `flatten`, `distinct`, `sort` and `sortBy` are charged as Kubernetes charges them
    // (cel-go's cost trackers of the lists extension), which is what decides whether an
    // expression passes Kubernetes' cost limit; `flatten` also for the list it builds,
    // which can be far longer than its receiver.
    o.push(
        Overload::method("flatten", &[List], |a| {
            let items = list(a, 0, "flatten")?;
            Ok(Value::list(
                lists::flatten(items, 1, &as_list).map_err(list_err)?,
            ))
        })
        .work(flatten_work)
        .builds(),
    );
    o.push(
        Overload::method("flatten", &[List, Int], |a| {
            let items = list(a, 0, "flatten")?;
            let depth = int(a, 1, "flatten")?;
            Ok(Value::list(
                lists::flatten(items, depth, &as_list).map_err(list_err)?,
            ))
        })
        .work(flatten_work)
        .builds(),
    );
    o.push(
        Overload::method("distinct", &[List], |a| {
            let items = list(a, 0, "distinct")?;
            // Hashing when equality is identity; pairwise comparison otherwise.
            Ok(Value::list(
                crate::limits::distinct_hashed(items)
                    .unwrap_or_else(|| lists::distinct(items, equals)),
            ))
        })
        .work(|a, cap| match a.first() {
            Some(Value::List(items)) => distinct_work(items, cap),
            _ => 0,
        }),
    );
    o.push(
        Overload::method("reverse", &[List], |a| {
            Ok(Value::list(lists::reverse(list(a, 0, "reverse")?)))
        })
        .linear_cost()
        .builds(),
    );
    o.push(
        Overload::method("sort", &[List], |a| {
            let items = list(a, 0, "sort")?;
            sort_by(items, items)
        })
        .work(sort_work),
    );
    // What cel-go's `sortBy(e, key)` macro expands to; the macro itself is the parser's.
    o.push(
        Overload::method("@sortByAssociatedKeys", &[List, List], |a| {
            sort_by(list(a, 0, "sortBy")?, list(a, 1, "sortBy")?)
        })
        .work(sort_work),
    );
    o.push(
        Overload::global("lists.range", &[Int], |a| {
            let n = int(a, 0, "lists.range")?;
            // Checked before the list is allocated.
            crate::limits::check_elements("lists.range", usize::try_from(n).unwrap_or(0))
                .map_err(EvalError::new)?;
            let r = lists::range::<EvalError>(n).map_err(list_err)?;
            Ok(Value::list(r.into_iter().map(Value::Int)))
        })
        .linear_cost()
        .builds(),
    );
}

/// What sorting costs: Kubernetes' charge for comparing every pair of keys
/// (`limits::self_compare_cost`), or, when more, what comparing long strings reads
/// (`limits::sort_cost_of`). The keys are the receiver for `sort()` and the second argument
/// for `sortBy`.
fn sort_work(a: &[Value], _cap: u64) -> u64 {
    match a.get(1).or(a.first()) {
        Some(Value::List(keys)) => {
            crate::limits::self_compare_cost(keys.len(), crate::limits::compares_strings(keys))
                .max(crate::limits::sort_cost_of(keys))
        }
        _ => 0,
    }
}

/// What `flatten` costs as Kubernetes charges it (`limits::flatten_cost`); the list it
/// builds is charged after.
fn flatten_work(a: &[Value], _cap: u64) -> u64 {
    let depth = match a.get(1) {
        Some(Value::Int(depth)) => *depth,
        _ => 1,
    };
    match a.first() {
        Some(Value::List(items)) => crate::limits::flatten_cost(items.len(), depth),
        _ => 0,
    }
}

/// What the comparisons of `min`, `max` and `isSorted` read (`limits::scan_cost`).
fn scan_work(a: &[Value], _cap: u64) -> u64 {
    match a.first() {
        Some(Value::List(items)) => crate::limits::scan_cost(items),
        _ => 0,
    }
}

/// What comparing the needle of `indexOf` and `lastIndexOf` with the elements costs
/// (`limits::search_cost`).
fn search_work(a: &[Value], cap: u64) -> u64 {
    match (a.first(), a.get(1)) {
        (Some(Value::List(items)), Some(needle)) => crate::limits::search_cost(items, needle, cap),
        _ => 0,
    }
}

/// What `distinct()` costs: Kubernetes' charge for comparing every pair
/// (`limits::self_compare_cost`), or, when more, the hashing or pairing of
/// `limits::distinct_cost` and what the hashed bytes or the compared pairs read.
fn distinct_work(items: &[Value], cap: u64) -> u64 {
    let kubernetes =
        crate::limits::self_compare_cost(items.len(), crate::limits::compares_strings(items));
    let base = crate::limits::distinct_cost(items);
    if base > cap {
        return base.max(kubernetes);
    }
    let reading = if crate::limits::all_hashable(items) {
        crate::limits::hashing_cost(items)
    } else {
        crate::limits::distinct_pairs_cost(items, cap - base)
    };
    base.saturating_add(reading).max(kubernetes)
}

fn set_overloads(o: &mut Vec<Overload>) {
    use Param::List;
    let functions: [SetRelation; 3] = [
        ("sets.contains", |x, y, e| sets::contains(x, y, e)),
        ("sets.equivalent", |x, y, e| sets::equivalent(x, y, e)),
        ("sets.intersects", |x, y, e| sets::intersects(x, y, e)),
    ];
    // cel-go's `trackSetsCost`: 1 per pair compared, twice for `sets.equivalent`; linear
    // when both lists hash (see `limits::sets_cost`).
    let works: [crate::registry::Work; 3] = [
        |a, cap| set_work(a, 1, cap),
        |a, cap| set_work(a, 2, cap),
        |a, cap| set_work(a, 1, cap),
    ];
    for ((name, f), work) in functions.into_iter().zip(works) {
        o.push(
            Overload::global(name, &[List, List], move |a| {
                let (x, y) = (list(a, 0, name)?, list(a, 1, name)?);
                if let (Some(xs), Some(ys)) =
                    (crate::limits::hash_set(x), crate::limits::hash_set(y))
                {
                    return Ok(Value::Bool(match name {
                        "sets.contains" => ys.is_subset(&xs),
                        "sets.equivalent" => xs == ys,
                        _ => !xs.is_disjoint(&ys),
                    }));
                }
                Ok(Value::Bool(f(x, y, equals)))
            })
            .linear_cost()
            .work(work),
        );
    }
}

fn set_work(a: &[Value], factor: u64, cap: u64) -> u64 {
    let (Some(Value::List(x)), Some(Value::List(y))) = (a.first(), a.get(1)) else {
        return 0;
    };
    let base = crate::limits::sets_cost(x, y, factor);
    if base > cap {
        return base;
    }
    // What the hashed bytes, or the compared pairs, read.
    let reading = if crate::limits::all_hashable(x) && crate::limits::all_hashable(y) {
        crate::limits::hashing_cost(x).saturating_add(crate::limits::hashing_cost(y))
    } else {
        crate::limits::pairs_cost(x, y, (cap - base) / factor).saturating_mul(factor)
    };
    base.saturating_add(reading)
}

fn regex_overloads(o: &mut Vec<Overload>) {
    use Param::{Int, String as Str};
    o.push(
        Overload::method("find", &[Str, Str], |a| {
            let (s, p) = (string(a, 0, "find")?, string(a, 1, "find")?);
            Ok(Value::string(regex::find(s, p).map_err(err)?))
        })
        .linear_cost()
        .pattern(1),
    );
    o.push(
        Overload::method("findAll", &[Str, Str], |a| {
            let (s, p) = (string(a, 0, "findAll")?, string(a, 1, "findAll")?);
            Ok(strings(regex::find_all(s, p, -1).map_err(err)?))
        })
        .linear_cost()
        .pattern(1)
        .builds(),
    );
    o.push(
        Overload::method("findAll", &[Str, Str, Int], |a| {
            let (s, p) = (string(a, 0, "findAll")?, string(a, 1, "findAll")?);
            let n = int(a, 2, "findAll")?;
            Ok(strings(regex::find_all(s, p, n).map_err(err)?))
        })
        .linear_cost()
        .pattern(1)
        .builds(),
    );
}
