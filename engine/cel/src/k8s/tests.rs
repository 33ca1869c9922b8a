//! The Kubernetes functions through the registry, as the evaluator dispatches them: the
//! first overload of the name, call style and arity whose params match the arguments.

use std::sync::Arc;

use crate::error::EvalError;
use crate::registry::{Registry, Value, equals};

fn registry() -> Registry {
    let mut r = Registry::default();
    r.add_all(super::overloads());
    for (t, library) in super::types() {
        r.add_type(t, library);
    }
    r
}

fn dispatch(receiver: bool, name: &str, args: &[Value]) -> Result<Value, EvalError> {
    let r = registry();
    let overloads = r
        .lookup(name, receiver)
        .ok_or_else(|| EvalError::new(format!("undeclared reference to '{name}'")))?;
    let o = overloads
        .iter()
        .find(|o| o.applies_to(args))
        .ok_or_else(|| EvalError::new(format!("no matching overload for '{name}'")))?;
    (o.function)(args)
}

/// `name(args...)`.
fn call(name: &str, args: &[Value]) -> Value {
    dispatch(false, name, args).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// `recv.name(args...)`.
fn method(recv: &Value, name: &str, args: &[Value]) -> Value {
    let mut all = vec![recv.clone()];
    all.extend_from_slice(args);
    dispatch(true, name, &all).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn method_err(recv: &Value, name: &str, args: &[Value]) -> String {
    let mut all = vec![recv.clone()];
    all.extend_from_slice(args);
    match dispatch(true, name, &all) {
        Ok(v) => panic!("{name} returned {:?}", v.inspect()),
        Err(e) => e.to_string(),
    }
}

fn call_err(name: &str, args: &[Value]) -> String {
    match dispatch(false, name, args) {
        Ok(v) => panic!("{name} returned {:?}", v.inspect()),
        Err(e) => e.to_string(),
    }
}

fn s(v: &str) -> Value {
    Value::string(v)
}

fn i(v: i64) -> Value {
    Value::Int(v)
}

fn list(items: Vec<Value>) -> Value {
    Value::list(items)
}

fn assert_value(got: Value, want: Value) {
    assert!(
        equals(&got, &want),
        "got {:?}, want {:?}",
        got.inspect(),
        want.inspect()
    );
}

fn t() -> Value {
    Value::Bool(true)
}

fn f() -> Value {
    Value::Bool(false)
}

#[test]
fn quantity_library() {
    let q = |x: &str| call("quantity", &[s(x)]);
    assert_value(method(&q("1Gi"), "isGreaterThan", &[q("512Mi")]), t());
    assert_value(method(&q("50M"), "isLessThan", &[q("50Mi")]), t());
    assert_value(method(&q("200M"), "compareTo", &[q("0.2G")]), i(0));
    assert_value(q("200M"), q("0.2G"));
    assert!(!equals(&q("200M"), &q("0.3G")));
    assert_value(method(&q("50k"), "add", &[q("20k")]), q("70k"));
    assert_value(method(&q("50k"), "add", &[i(20)]), q("50020"));
    assert_value(method(&q("50k"), "sub", &[i(20000)]), q("30k"));
    assert_value(method(&q("50k"), "sub", &[q("20k")]), q("30k"));
    assert_value(method(&q("50k"), "asInteger", &[]), i(50000));
    assert_value(method(&q("50k"), "isInteger", &[]), t());
    assert_value(
        method(&q("50.703k"), "asApproximateFloat", &[]),
        Value::Double(50703.0),
    );
    assert_value(call("sign", &[q("-1")]), i(-1));
    assert_value(call("isQuantity", &[s("200K")]), f());
    assert_eq!(
        method_err(
            &q("9999999999999999999999999999999999999G"),
            "asInteger",
            &[]
        ),
        "cannot convert value to integer"
    );
    assert_eq!(
        call_err("quantity", &[s("10Mm")]),
        "unable to parse quantity's suffix"
    );
    // serialized in canonical form
    assert_eq!(q("1.5Gi").to_json().ok(), Some(serde_json::json!("1536Mi")));
    // `sign` is not a method in Kubernetes
    assert!(dispatch(true, "sign", &[q("1")]).is_err());
}

#[test]
fn url_library() {
    let u = call("url", &[s("https://example.com:80/path%20x?k=a&k=b")]);
    assert_value(method(&u, "getScheme", &[]), s("https"));
    assert_value(method(&u, "getHost", &[]), s("example.com:80"));
    assert_value(method(&u, "getHostname", &[]), s("example.com"));
    assert_value(method(&u, "getPort", &[]), s("80"));
    assert_value(method(&u, "getEscapedPath", &[]), s("/path%20x"));
    assert_value(
        method(&u, "getQuery", &[]),
        Value::map([("k".to_string(), list(vec![s("a"), s("b")]))]),
    );
    assert_value(call("isURL", &[s("../relative")]), f());
    assert_eq!(
        call_err("url", &[s("../relative")]),
        r#"URL parse error during conversion from string: parse "../relative": invalid URI for request"#
    );
}

#[test]
fn ip_and_cidr_libraries() {
    let ip = |x: &str| call("ip", &[s(x)]);
    let cidr = |x: &str| call("cidr", &[s(x)]);
    assert_value(method(&ip("::1"), "family", &[]), i(6));
    assert_value(method(&ip("127.0.0.1"), "isLoopback", &[]), t());
    assert_value(call("ip.isCanonical", &[s("2001:DB8::ABCD")]), f());
    assert_value(call("isIP", &[s("::ffff:1.2.3.4")]), f());
    assert_value(ip("10.0.0.1"), ip("10.0.0.1"));
    assert_eq!(
        ip("2001:db8::0:1").to_json().ok(),
        Some(serde_json::json!("2001:db8::1"))
    );
    let net = cidr("192.168.0.0/16");
    assert_value(method(&net, "containsIP", &[ip("192.168.3.4")]), t());
    assert_value(method(&net, "containsIP", &[s("10.0.0.1")]), f());
    assert_value(
        method(&net, "containsCIDR", &[cidr("192.168.10.0/24")]),
        t(),
    );
    assert_value(method(&net, "containsCIDR", &[s("192.0.0.0/8")]), f());
    assert_value(
        method(&cidr("192.168.0.1/24"), "ip", &[]),
        ip("192.168.0.1"),
    );
    assert_value(
        method(&cidr("192.168.0.1/24"), "masked", &[]),
        cidr("192.168.0.0/24"),
    );
    assert_value(method(&net, "prefixLength", &[]), i(16));
    assert_value(call("isCIDR", &[s("::1/129")]), f());
    assert!(method_err(&net, "containsIP", &[s("nope")]).starts_with("IP Address \"nope\""));
    assert_eq!(super::types().len(), 2);
}

#[test]
fn semver_library() {
    let v = |x: &str| call("semver", &[s(x)]);
    assert_value(method(&v("1.2.3"), "major", &[]), i(1));
    assert_value(method(&v("1.2.3"), "isLessThan", &[v("2.0.0")]), t());
    assert_value(method(&v("1.2.3"), "compareTo", &[v("0.1.2")]), i(1));
    assert_value(call("semver", &[s("v1.0"), t()]), v("1.0.0"));
    assert_value(call("isSemver", &[s("v1.0")]), f());
    assert_value(call("isSemver", &[s("v1.0"), t()]), t());
    assert_value(v("1.0.0+a"), v("1.0.0+b"));
    assert_eq!(
        call_err("semver", &[s("01.0.0")]),
        r#"Major number must not contain leading zeroes "01""#
    );
}

#[test]
fn format_library() {
    let label = call("format.dns1123Label", &[]);
    assert_value(
        method(&label, "validate", &[s("my-name")]),
        Value::Optional(None),
    );
    let errs = method(&label, "validate", &[s("a.b")]);
    assert_value(
        errs,
        Value::Optional(Some(Arc::new(list(vec![s("must not contain dots")])))),
    );
    assert_value(
        call("format.named", &[s("dns1123Label")]),
        Value::Optional(Some(Arc::new(label.clone()))),
    );
    assert_value(call("format.named", &[s("nope")]), Value::Optional(None));
    assert!(!equals(&label, &call("format.uri", &[])));
    assert_eq!(
        method_err(
            &call("format.dns1035LabelPrefix", &[]),
            "validate",
            &[s("-")]
        ),
        "internal error: runtime error: slice bounds out of range [:-1]"
    );
}

#[test]
fn list_libraries() {
    let l = list(vec![i(3), i(1), i(2), i(1)]);
    assert_value(method(&l, "isSorted", &[]), f());
    assert_value(method(&list(vec![s("a"), s("b")]), "isSorted", &[]), t());
    assert_value(method(&l, "sum", &[]), i(7));
    assert_value(method(&list(vec![]), "sum", &[]), i(0));
    assert_value(
        method(
            &list(vec![Value::Double(1.0), Value::Double(3.0)]),
            "sum",
            &[],
        ),
        Value::Double(4.0),
    );
    assert_eq!(
        method_err(&list(vec![i(i64::MAX), i(1)]), "sum", &[]),
        "integer overflow"
    );
    assert_value(method(&l, "min", &[]), i(1));
    assert_value(method(&l, "max", &[]), i(3));
    assert_eq!(
        method_err(&list(vec![]), "min", &[]),
        "min called on empty list"
    );
    assert_value(method(&l, "indexOf", &[i(1)]), i(1));
    assert_value(method(&l, "lastIndexOf", &[Value::Double(1.0)]), i(3));
    assert_value(method(&l, "slice", &[i(1), i(3)]), list(vec![i(1), i(2)]));
    assert_value(method(&l, "sort", &[]), list(vec![i(1), i(1), i(2), i(3)]));
    assert_value(method(&l, "distinct", &[]), list(vec![i(3), i(1), i(2)]));
    assert_value(
        method(&l, "reverse", &[]),
        list(vec![i(1), i(2), i(1), i(3)]),
    );
    let nested = list(vec![i(1), list(vec![i(2), list(vec![i(3)])])]);
    assert_value(
        method(&nested, "flatten", &[]),
        list(vec![i(1), i(2), list(vec![i(3)])]),
    );
    assert_value(
        method(&nested, "flatten", &[i(2)]),
        list(vec![i(1), i(2), i(3)]),
    );
    assert_value(call("lists.range", &[i(3)]), list(vec![i(0), i(1), i(2)]));
    assert_eq!(
        method_err(&list(vec![i(1), s("b")]), "sort", &[]),
        "list elements must have the same type"
    );
    assert_eq!(
        method_err(&list(vec![list(vec![]), list(vec![])]), "sort", &[]),
        "list elements must be comparable"
    );
    assert_value(
        method(
            &list(vec![s("foo"), s("bar")]),
            "@sortByAssociatedKeys",
            &[list(vec![i(2), i(1)])],
        ),
        list(vec![s("bar"), s("foo")]),
    );
    // unlike values compare as neither smaller nor greater (cel-go); no order at all fails
    assert_value(method(&list(vec![i(1), s("a")]), "max", &[]), i(1));
    assert!(
        method_err(&list(vec![i(1), Value::Null]), "max", &[]).starts_with("no matching overload")
    );
}

#[test]
fn sets_and_regex() {
    let a = list(vec![i(1), Value::Double(2.0), Value::Uint(3)]);
    let b = list(vec![Value::Double(1.0), Value::Uint(2), i(3)]);
    assert_value(call("sets.contains", &[a.clone(), b.clone()]), t());
    assert_value(call("sets.equivalent", &[a.clone(), b]), t());
    assert_value(call("sets.intersects", &[a, list(vec![])]), f());
    assert_value(method(&s("abc 123"), "find", &[s("[0-9]+")]), s("123"));
    assert_value(
        method(&s("123 abc 456"), "findAll", &[s("[0-9]+")]),
        list(vec![s("123"), s("456")]),
    );
    assert_value(
        method(&s("123 abc 456"), "findAll", &[s("[0-9]+"), i(1)]),
        list(vec![s("123")]),
    );
    assert_eq!(
        method_err(&s("x"), "find", &[s("(")]),
        "Illegal regex: error parsing regexp: missing closing ): `(`"
    );
}

// ---- through the evaluator ------------------------------------------------------------------

mod evaluator {
    use crate::env::Activation;

    fn eval(source: &str) -> Result<serde_json::Value, String> {
        let env = crate::test_support::full_env();
        let program = env.compile(source).map_err(|e| format!("compile: {e}"))?;
        let value = program
            .eval(&Activation::new(&env))
            .map_err(|e| e.to_string())?;
        value.to_json().map_err(|e| e.to_string())
    }

    fn is_true(source: &str) {
        assert_eq!(eval(source), Ok(serde_json::json!(true)), "{source}");
    }

    fn fails_with(source: &str, message: &str) {
        match eval(source) {
            Ok(v) => panic!("`{source}` evaluated to {v}"),
            Err(e) => assert!(e.contains(message), "`{source}`: {e}"),
        }
    }

    #[test]
    fn quantity() {
        is_true("quantity('1Gi').isGreaterThan(quantity('512Mi'))");
        is_true("quantity('200M') == quantity('0.2G')");
        is_true("quantity('50k').add(20).sub(quantity('100k')).sub(-50000) == quantity('20')");
        is_true("quantity('50k').asInteger() == 50000");
        is_true("quantity('50.703k').asApproximateFloat() == 50703.0");
        is_true("sign(quantity('-5')) == -1");
        is_true("!isQuantity('200K') && isQuantity('1.3Gi')");
        is_true("quantity('50M').compareTo(quantity('50Mi')) == -1");
        assert_eq!(eval("quantity('1.5Gi')"), Ok(serde_json::json!("1536Mi")));
        fails_with(
            "quantity('10Mo')",
            "quantities must match the regular expression",
        );
        fails_with(
            "quantity('9999999999999999999999999999999999999G').asInteger()",
            "cannot convert value to integer",
        );
    }

    #[test]
    fn url_ip_cidr() {
        is_true("url('https://example.com:80/p?k=a&k=b').getQuery()['k'] == ['a', 'b']");
        is_true("url('https://[::1]:80/').getHostname() == '::1'");
        is_true("!isURL('../relative-path')");
        fails_with("url('https://a:b:c/')", r#"invalid port ":c" after host"#);
        is_true("ip('127.0.0.1').isLoopback() && ip('::1').family() == 6");
        is_true("ip.isCanonical('2001:db8::abcd') && !ip.isCanonical('2001:DB8::ABCD')");
        is_true("string(ip('2001:db8::0:1')) == '2001:db8::1'");
        is_true("type(ip('10.0.0.1')) == net.IP && type(cidr('10.0.0.0/8')) == net.CIDR");
        is_true("cidr('192.168.0.0/16').containsCIDR('192.168.10.0/24')");
        is_true("cidr('192.168.0.0/24').containsIP(ip('192.168.0.1'))");
        is_true("cidr('192.168.0.1/24').masked() == cidr('192.168.0.0/24')");
        is_true("cidr('10.0.0.1/8').ip() == ip('10.0.0.1')");
        fails_with("ip('::ffff:1.2.3.4')", "IPv4-mapped IPv6 address");
        fails_with("cidr('192.168.0.0/')", "bad bits after slash");
    }

    #[test]
    fn semver_and_format() {
        is_true("semver('1.2.3').isLessThan(semver('2.0.0'))");
        is_true("semver('v01.01', true) == semver('1.1.0')");
        is_true("semver('1.2.3').major() == 1 && semver('1.2.3').patch() == 3");
        fails_with("semver('v1.0')", "No Major.Minor.Patch elements found");
        is_true("!format.dns1123Label().validate('my-name').hasValue()");
        is_true("format.dns1123Label().validate('a.b').value() == ['must not contain dots']");
        is_true("format.named('uri').hasValue() && !format.named('nope').hasValue()");
        is_true("format.named('uuid').value() == format.uuid()");
    }

    #[test]
    fn lists_sets_regex() {
        is_true("[1, 2, 3].isSorted() && ![2.0, 1.0].isSorted()");
        is_true("[1, 3].sum() == 4 && [].sum() == 0");
        is_true("[1, 3].min() == 1 && [1, 3].max() == 3");
        is_true("[1, 2, 2, 3].indexOf(2) == 1 && ['a', 'b', 'b'].lastIndexOf('b') == 2");
        fails_with("[].min()", "min called on empty list");
        is_true("[1, 2, 3, 4].slice(1, 3) == [2, 3]");
        is_true("[1, [2, [3, [4]]]].flatten(2) == [1, 2, 3, [4]]");
        is_true("[3, 1, 2, 1].distinct() == [3, 1, 2] && [3, 1, 2].sort() == [1, 2, 3]");
        is_true("[5, 3, 1, 2].reverse() == [2, 1, 3, 5] && lists.range(3) == [0, 1, 2]");
        is_true("['foo', 'bar', 'baz'].sortBy(e, e) == ['bar', 'baz', 'foo']");
        is_true("sets.contains([1, 2.0, 3u], [1.0, 2u, 3])");
        is_true("sets.equivalent([1], [1u, 1.0]) && !sets.intersects([1], [])");
        is_true("'abc 123'.find('[0-9]+') == '123'");
        is_true("'123 abc 456'.findAll('[0-9]+', 1) == ['123']");
        fails_with(
            "'x'.find('(')",
            "Illegal regex: error parsing regexp: missing closing )",
        );
    }
}
