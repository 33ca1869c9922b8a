//! Tests of the type checker: messages and positions, valid expressions, the schema
//! conversion, and the zero-false-positive runs over the kcp-karmada rule, the CRDs'
//! validation rules and the CEL conformance suite.

mod corpus;
mod cost;
#[path = "../../../tests/support/textproto.rs"]
mod textproto;
mod yaml;

use std::path::{Path, PathBuf};

use serde_json::{Value as Json, json};

use super::{
    FunctionOverload, ObjectType, Type, TypeEnv, check, crd_kinds, custom_resource_meta,
    object_meta, object_type_for_kind, object_type_from_crd, object_type_without_schema,
    type_from_openapi,
};
use crate::env::Env;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read_yaml(path: &Path) -> Json {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    yaml::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn config_crd(file: &str) -> Json {
    read_yaml(&repository().join("config/crds").join(file))
}

fn crd_type(file: &str) -> Type {
    object_type_from_crd(&config_crd(file), "v1alpha1").unwrap()
}

fn fleet_workload() -> Type {
    crd_type("platform.edge-portal.eu_fleetworkloads.yaml")
}

/// The variables of a rule watching FleetWorkloads, with the lookups of kcp-karmada.
fn rule_env() -> TypeEnv {
    TypeEnv::new()
        .with_variable("self", fleet_workload())
        .with_variable("fleet", crd_type("platform.edge-portal.eu_fleets.yaml"))
        .with_variable(
            "policy",
            crd_type("platform.edge-portal.eu_placementpolicies.yaml"),
        )
        .with_variable("binding", Type::Dyn)
        .with_variable("vars", Type::map(Type::String, Type::Dyn))
        .with_variable(
            "cluster",
            Type::object(ObjectType::new("Cluster").with_field("name", Type::String)),
        )
        .with_variable("now", Type::String)
        .with_variable("tables", Type::map(Type::String, Type::list(Type::Dyn)))
}

fn check_with(source: &str, env: &TypeEnv) -> (Type, Vec<String>) {
    let program = Env::new(crate::environment::CelEnvironment::all())
        .compile(source)
        .unwrap_or_else(|e| panic!("`{source}` does not compile: {e}"));
    let (ty, issues) = check(&program, env);
    let issues = issues
        .iter()
        .map(|i| format!("{}:{}: {}", i.line, i.column, i.message))
        .collect();
    (ty, issues)
}

fn issues(source: &str) -> Vec<String> {
    check_with(source, &rule_env()).1
}

#[track_caller]
fn assert_valid(source: &str) -> Type {
    let (ty, issues) = check_with(source, &rule_env());
    assert!(issues.is_empty(), "`{source}`: {issues:?}");
    ty
}

// ---- the issues of the brief, with their exact messages and positions ---------------------

#[test]
fn an_undefined_field_is_reported_with_a_suggestion() {
    assert_eq!(
        issues("self.spec.replicsa > 1"),
        ["1:11: undefined field 'replicsa' (did you mean 'replicas'?)"]
    );
}

#[test]
fn comparing_an_int_with_a_string_has_no_overload() {
    assert_eq!(
        issues("self.spec.replicas == 'three'"),
        ["1:20: found no matching overload for '_==_' applied to '(int, string)'"]
    );
}

#[test]
fn adding_an_int_to_a_string_has_no_overload() {
    assert_eq!(
        issues("self.metadata.name + 1"),
        ["1:20: found no matching overload for '_+_' applied to '(string, int)'"]
    );
}

#[test]
fn a_method_result_is_typed() {
    assert_eq!(
        issues("self.spec.fleetRef.name.size() > 'a'"),
        ["1:32: found no matching overload for '_>_' applied to '(int, string)'"]
    );
}

#[test]
fn merge_takes_two_maps_of_one_type() {
    assert_eq!(
        assert_valid("self.metadata.labels.merge({'a': 'b'})"),
        Type::map(Type::String, Type::String)
    );
    assert_eq!(
        issues("self.metadata.labels.merge({'a': 1})"),
        [
            "1:27: found no matching overload for 'merge' applied to 'map(string, string).(map(string, int))'"
        ]
    );
}

/// A workload kind whose pod template is typed (FleetWorkload's keeps unknown fields).
fn typed_pod_template() -> Type {
    let crd = json!({
        "spec": {
            "group": "example.com",
            "names": {"kind": "Workload"},
            "versions": [{"name": "v1", "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {"type": "object", "properties": {
                    "template": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {
                            "containers": {"type": "array", "items": {
                                "type": "object",
                                "required": ["name"],
                                "properties": {
                                    "name": {"type": "string"},
                                    "image": {"type": "string"},
                                    "ports": {"type": "array", "items": {
                                        "type": "object",
                                        "properties": {"containerPort": {"type": "integer"}}
                                    }}
                                }
                            }}
                        }}
                    }}
                }}}
            }}}]
        }
    });
    object_type_from_crd(&crd, "v1").unwrap()
}

#[test]
fn an_undefined_field_inside_a_comprehension_is_reported() {
    let source = "self.spec.template.spec.containers.exists(c, c.imag == 'x')";
    let env = TypeEnv::new().with_variable("self", typed_pod_template());
    let (ty, found) = check_with(source, &env);
    assert_eq!(ty, Type::Bool);
    assert_eq!(
        found,
        ["1:48: undefined field 'imag' (did you mean 'image'?)"]
    );
    // FleetWorkload's spec.template.spec keeps unknown fields (a PodSpec the CRD does not
    // describe): its containers are `dyn`, and so is `c`.
    assert_eq!(assert_valid(source), Type::Bool);
    // A typed list of FleetWorkload: its service ports.
    assert_eq!(
        issues("self.spec.service.ports.exists(p, p.prot == 'TCP')"),
        ["1:37: undefined field 'prot' (did you mean 'port'?)"]
    );
}

// ---- more issues ------------------------------------------------------------------------

#[test]
fn issues_are_placed_where_they_are() {
    let cases: &[(&str, &str)] = &[
        (
            "has(self.spec.replicsa)",
            "1:15: undefined field 'replicsa' (did you mean 'replicas'?)",
        ),
        (
            "has(self.spec . replicsa )",
            "1:17: undefined field 'replicsa' (did you mean 'replicas'?)",
        ),
        (
            "self.spec.?replicsa.orValue(1) > 0",
            "1:12: undefined field 'replicsa' (did you mean 'replicas'?)",
        ),
        (
            "self.spec.fleetRef.name != ''\n  && self.spec.replicas == 'x'",
            "2:25: found no matching overload for '_==_' applied to '(int, string)'",
        ),
        (
            "self['spce'].replicas > 1",
            "1:6: undefined field 'spce' (did you mean 'spec'?)",
        ),
        (
            "cluster.nmae == 'a'",
            "1:9: undefined field 'nmae' (did you mean 'name'?)",
        ),
        (
            "size(self.metadata.lables) > 0",
            "1:20: undefined field 'lables' (did you mean 'labels'?)",
        ),
        ("self.spec.zzz", "1:11: undefined field 'zzz'"),
        (
            "self.spec.replicas && true",
            "1:20: found no matching overload for '_&&_' applied to '(int, bool)'",
        ),
        (
            "self.spec.fleetRef.name.startsWith(1)",
            "1:35: found no matching overload for 'startsWith' applied to 'string.(int)'",
        ),
        (
            "size(self.spec.replicas) > 0",
            "1:5: found no matching overload for 'size' applied to '(int)'",
        ),
        (
            "self.spec.replicas.foo == 1",
            "1:20: type 'int' does not support field selection",
        ),
        (
            "self.metadata.labels[1] == 'a'",
            "1:21: found no matching overload for '_[_]' applied to '(map(string, string), int)'",
        ),
        (
            "'a' in self.spec.replicas",
            "1:5: found no matching overload for '@in' applied to '(string, int)'",
        ),
        (
            "self.spec.replicas ? 1 : 2",
            "1:20: found no matching overload for '_?_:_' applied to '(int, int, int)'",
        ),
        (
            "self.spec.replicas.all(x, x > 0)",
            "1:1: expression of type 'int' cannot be the range of a comprehension \
             (must be list, map, or dynamic)",
        ),
        (
            "1 + 2u == 3",
            "1:3: found no matching overload for '_+_' applied to '(int, uint)'",
        ),
        (
            "string(type(1)) == 'int'",
            "1:7: found no matching overload for 'string' applied to '(type)'",
        ),
        (
            "bool(self.spec.replicas)",
            "1:5: found no matching overload for 'bool' applied to '(int)'",
        ),
        (
            "self.metadata.name.sha256() != ''",
            "1:26: found no matching overload for 'sha256' applied to 'string.()'",
        ),
        (
            "contains(self.metadata.name, 'a')",
            "1:9: found no matching overload for 'contains' applied to '(string, string)'",
        ),
        (
            "self.spec.replicas.orValue(1) > 0",
            "1:27: found no matching overload for 'orValue' applied to 'int.(int)'",
        ),
        (
            "self.spec.?replicas == 1",
            "1:21: found no matching overload for '_==_' applied to '(optional_type(int), int)'",
        ),
        (
            "self.metadata.name[0] == 'a'",
            "1:19: found no matching overload for '_[_]' applied to '(string, int)'",
        ),
        (
            "int([1]) > 0",
            "1:4: found no matching overload for 'int' applied to '(list(int))'",
        ),
        (
            "self.status.conditions.all(c, c.reason)",
            "1:31: found no matching overload for '_&&_' applied to '(bool, string)'",
        ),
        (
            "self.metadata.creationTimestamp > timestamp(now)",
            "1:33: found no matching overload for '_>_' applied to \
             '(string, google.protobuf.Timestamp)'",
        ),
        (
            "self.spec.?service.?ports.orValue([]).map(p, p.port + 'x')",
            "1:53: found no matching overload for '_+_' applied to '(int, string)'",
        ),
        (
            "self.spec.template.?metadata.?labels.orValue({}).exists(k, k > 1)",
            "1:62: found no matching overload for '_>_' applied to '(string, int)'",
        ),
        (
            "self.status.conditions.filter(c, c.type).size() > 0",
            "1:34: found no matching overload for '_?_:_' applied to \
             '(string, list(FleetWorkload.status.conditions.@idx), list(dyn))'",
        ),
        (
            "self.metadata.ownerReferences.exists(o, o.controler)",
            "1:43: undefined field 'controler' (did you mean 'controller'?)",
        ),
    ];
    for (source, expected) in cases {
        assert_eq!(issues(source), [*expected], "`{source}`");
    }
}

#[test]
fn one_mistake_is_reported_once() {
    assert_eq!(
        issues("self.spec.replicsa.foo.bar == 'x' && size(self.spec.replicsa) > 0"),
        [
            "1:11: undefined field 'replicsa' (did you mean 'replicas'?)",
            "1:53: undefined field 'replicsa' (did you mean 'replicas'?)",
        ]
    );
    assert_eq!(
        issues("size(self.spec.zzz.filter(x, x.y)) > 0 || self.spec.zzz[0]"),
        ["1:16: undefined field 'zzz'", "1:53: undefined field 'zzz'"]
    );
}

// ---- valid expressions --------------------------------------------------------------------

#[test]
fn valid_expressions_have_no_issues() {
    for source in [
        // fields, has(), optionals
        "has(self.spec) && has(self.spec.fleetRef.name) && self.spec.fleetRef.name != ''",
        "has(self.metadata.annotations) && 'a' in self.metadata.annotations",
        "self.spec.?replicas.orValue(1) > 0",
        "self.spec.?service.?ports.orValue([]).size() == 0",
        "size(self.spec.template.?metadata.?labels.orValue({})) > 0",
        "self.metadata.?annotations[?'kcp.io/cluster'].orValue('') == 'x'",
        "self.spec.?service.?ports[?0].?port.hasValue()",
        "optional.of(self.spec.replicas).optMap(r, r + 1).orValue(0) == 2",
        "optional.of(self.spec.service).optFlatMap(s, s.?ports).orValue([]).size() > 0",
        "self.spec.?replicas.or(optional.of(2)).value() == 2",
        "optional.ofNonZeroValue(self.metadata.name).hasValue()",
        "self.metadata.?generation.orValue(null) == null",
        "self.spec.replicas == null || self.spec.fleetRef != null",
        "self['spec']['fleetRef'].name == 'a' && self.spec['replicas'] > 0",
        // unknown fields of open objects, int-or-string, dyn
        "has(self.spec.template.spec.containers) && self.spec.template.spec.containers[0].image != ''",
        "self.spec.template.anything.goes == 1",
        "self.spec.service.ports.all(p, p.targetPort == 8080 || p.targetPort == 'http')",
        "dyn(self.spec.replicas) == 'x'",
        "binding.spec.clusters.map(c, c.name).join(',') == ''",
        "vars.anything.at.all + 1 > vars.other",
        "undeclared.x == 1 && undeclaredFunction(1, 'a') == 2",
        // numbers order across types; null goes anywhere in rules
        "self.spec.replicas < 2.5 && self.spec.replicas == 1 && 1u < self.spec.replicas",
        "self.spec.replicas == null || self.metadata.?generation.orValue(null) == null",
        "self.spec.replicas in [1, 2.0, 3u]",
        "policy == null || policy.spec.strategy == 'Weighted'",
        "fleet.spec.?selector.orValue({}).?matchLabels.orValue({}).size() >= 0",
        // functions
        "self.metadata.name.matches('^a') && self.metadata.name.startsWith('a') && matches(self.metadata.name, 'b')",
        "self.metadata.name.lowerAscii().split('-').join('.').size() > 0",
        "self.metadata.name.substring(0, 2).indexOf('a') < self.metadata.name.lastIndexOf('b')",
        "'%s-%d'.format([self.metadata.name, self.spec.replicas]) != ''",
        "strings.quote(self.metadata.name) != '' && self.metadata.name.trim().charAt(0) == 'a'",
        "sha256(self.metadata.name).size() == 64 && isDNS1123Label(dns1123Label(self.metadata.name))",
        "timestamp(self.metadata.creationTimestamp) + duration('1h') > timestamp(now)",
        "timestamp(now).getHours('Europe/Paris') < 12 && duration('1h').getMinutes() == 60",
        "timestamp(now) - timestamp(self.metadata.creationTimestamp) > duration('1h')",
        "int(self.spec.fleetRef.name) + int('1') + int(2.5) + int(timestamp(now)) > 0",
        "string(self.spec.replicas) + string(1.5) + string(b'a') != ''",
        "type(self.spec.replicas) == int && type(self.metadata) != string",
        "[1, 2].sum() == 3 && [2, 1].sort()[0] == 1 && [1, 2].indexOf(2) == 1 && [1].isSorted()",
        "sets.contains(['a', 'b'], ['a']) && lists.range(3).size() == 3",
        "self.metadata.name.find('[a-z]+') != '' && self.metadata.name.findAll('a').size() > 0",
        "quantity('1Gi').isGreaterThan(quantity('1Mi')) && url('https://a').getHost() == 'a'",
        "isIP('1.2.3.4') && ip('1.2.3.4').family() == 4 && cidr('10.0.0.0/8').containsIP('10.1.1.1')",
        "decide('table', {'a': 1}).target.anything == 'x'",
        // macros
        "self.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')",
        "self.status.conditions.filter(c, c.type == 'Ready').all(c, c.reason != '')",
        "self.status.conditions.exists_one(c, c.type == 'Ready')",
        "self.spec.service.ports.map(p, p.port).all(n, n > 0)",
        "self.spec.service.ports.map(p, p.port > 80, p.name).exists(n, n.startsWith('a'))",
        "self.metadata.labels.all(k, k.startsWith('a') && self.metadata.labels[k] != '')",
        "self.spec.all(field, field != '')",
        "self.metadata.ownerReferences.exists(o, o.controller && o.kind == 'Fleet')",
        "[[1, 2], [3]].map(l, l.map(x, x * 2)).exists(l, l.exists(x, x > 4))",
        // literals
        "[1, 'a', true].size() == 3 && {'a': 1, 'b': 'x'}.size() == 2",
        "{'a': {'b': [1]}, 'c': 1}.a.b[0] == 1",
        "[?self.spec.?replicas, ?optional.none()].size() >= 0",
        "{?'replicas': self.spec.?replicas}.replicas > 0",
        "(true ? [] : self.spec.service.ports).exists(p, p.port > 0)",
        "self.spec.service.ports + [] == []",
        "cluster.name == 'a' && tables.rows.size() > 0 && now != ''",
        // objects are maps at run time
        "self.metadata.labels == {} && self.spec.fleetRef == {'name': 'a'}",
        "self.spec.replicas in {1: 'a'} && 'name' in self.spec.fleetRef && size(self) > 0",
        "{'name': 'a'} in fleet.spec.clusterRefs && [self.spec.fleetRef, {'name': 'x'}].size() == 2",
        "(true ? self.spec.fleetRef : self.spec.placementPolicyRef).name != ''",
        // more optionals, has() and macros
        "has(self.metadata.labels.app) && self.metadata.labels.?app.orValue('') == ''",
        "self.spec.?service.?ports[0].?port.orValue(0) > 0 && has(self.spec.service.ports[0].name)",
        "self.spec.?replicas.optMap(r, r * 2).orValue(0) > 1",
        "optional.of(1) == optional.of(2) && optional.none() == optional.none()",
        "self.spec.service.ports.filter(p, has(p.name)).map(p, p.name + ':' + string(p.port)).join(',') != ''",
        "fleet.spec.selector.matchExpressions.all(e, e.operator in ['In', 'NotIn'] ? size(e.values) > 0 : !has(e.values))",
        "self.status.conditions.exists(c, c.lastTransitionTime > '2020' && timestamp(c.lastTransitionTime) < timestamp(now))",
        "vars.x.exists(e, e.y == 1) && vars.x.map(e, e.z).filter(z, z > 1).size() > 0",
        "[1, 2, 3].exists(x, x == dyn(2u)) && dyn([]).size() == 0 && [dyn(1)].all(e, e)",
        // Kubernetes libraries, cel-go extensions, unknown functions
        "format.named('dns1123Label').value().validate('x').hasValue()",
        "ip.isCanonical('1.2.3.4') && semver('1.0.0').major() == 1",
        "[].min() == 1 && [1, 2].slice(0, 1).size() == 1 && [[1], [2]].flatten().size() == 2",
        "cel.bind(x, 1, x + 1) == 2 && math.greatest(1, 2) == 2",
        // the rest of the standard library
        "double(self.spec.replicas) / 2.0 > 1.0 && -self.spec.replicas < 0 && self.spec.replicas % 2 == 0",
        "uint(1) + 1u == 2u && size(b'abc') == 3 && bytes('abc') == b'abc' && string(b'abc') == 'abc'",
        "type(1) == type(2) && type(type(1)) == type",
        "timestamp('2024-01-01T00:00:00Z').getDayOfWeek() == 1 && timestamp(0) < timestamp(now)",
        "duration('1h') + duration('1m') > duration('1h')",
        "[1, 2] + [dyn(3.0)] == [1, 2, 3.0] && {1: 'a', 'b': 2}.size() == 2",
    ] {
        let ty = assert_valid(source);
        assert!(
            ty.is_assignable_to(&Type::Bool),
            "`{source}` is not a bool: {ty}"
        );
    }
}

#[test]
fn custom_functions_are_dyn() {
    let source = "self.metadata.name.sum(1) + sum('a', 'b') == self.spec.fleetRef.find(1)";
    assert_eq!(
        issues(source),
        [
            "1:23: found no matching overload for 'sum' applied to 'string.(int)'",
            "1:32: found no matching overload for 'sum' applied to '(string, string)'",
            "1:69: found no matching overload for 'find' applied to \
             'FleetWorkload.spec.fleetRef.(int)'",
        ]
    );
    let env = rule_env().with_function("sum").with_function("find");
    let (ty, found) = check_with(source, &env);
    assert_eq!((ty, found), (Type::Bool, Vec::<String>::new()));
}

#[test]
fn custom_functions_declared_with_types_are_typed() {
    let tuple = |t: Type, u: Type, v: Type| Type::opaque("tuple", vec![t, u, v]);
    let (t, u, v) = (Type::param("T"), Type::param("U"), Type::param("V"));
    let env = rule_env()
        .with_overload(
            "fn",
            FunctionOverload::global(vec![Type::String, Type::Int], Type::String),
        )
        .with_overload(
            "tuple",
            FunctionOverload::global(
                vec![t.clone(), u.clone(), v.clone()],
                tuple(t.clone(), u, v),
            ),
        )
        .with_overload(
            "sort",
            FunctionOverload::global(
                vec![tuple(t.clone(), t.clone(), t.clone())],
                tuple(t.clone(), t.clone(), t.clone()),
            ),
        )
        .with_overload(
            "pair",
            FunctionOverload::global(vec![t.clone(), t.clone()], Type::list(t.clone())),
        )
        .with_overload(
            "first",
            FunctionOverload::member(Type::list(t.clone()), vec![], t),
        );
    let dyns = tuple(Type::Dyn, Type::Dyn, Type::Dyn);
    let cases: &[(&str, Type)] = &[
        ("fn('abc', 123)", Type::String),
        (
            "fn(self.metadata.name, self.spec.replicas).size()",
            Type::Int,
        ),
        ("'abc'.fn(123)", Type::String),
        ("fn(now, dyn(1))", Type::String),
        (
            "tuple(1, 2u, 3.0)",
            tuple(Type::Int, Type::Uint, Type::Double),
        ),
        (
            "[tuple(1, 2u, 3.0), tuple(dyn(1), dyn(2u), dyn(3.0))][0]",
            dyns.clone(),
        ),
        ("sort(tuple(dyn(1), 2u, 3.0))", dyns.clone()),
        (
            "sort(tuple(1, 2, 3))",
            tuple(Type::Int, Type::Int, Type::Int),
        ),
        (
            "tuple(1, 2u, 3.0) == tuple(1, dyn(2u), dyn(3.0))",
            Type::Bool,
        ),
        ("pair(1, 2)", Type::list(Type::Int)),
        ("pair([], [1])", Type::list(Type::list(Type::Int))),
        ("pair(1, 2).first() + 1", Type::Int),
        ("self.metadata.finalizers.first()", Type::String),
        ("tuple([], [[]], {})", {
            let empty = Type::list(Type::Dyn);
            tuple(
                empty.clone(),
                Type::list(empty),
                Type::map(Type::Dyn, Type::Dyn),
            )
        }),
    ];
    for (source, expected) in cases {
        let (ty, found) = check_with(source, &env);
        assert_eq!((&ty, found), (expected, Vec::new()), "`{source}`");
    }
    let reported: &[(&str, &str)] = &[
        (
            "fn(1, 2)",
            "1:3: found no matching overload for 'fn' applied to '(int, int)'",
        ),
        (
            "fn('a')",
            "1:3: found no matching overload for 'fn' applied to '(string)'",
        ),
        (
            "fn('a', 1) + 1",
            "1:12: found no matching overload for '_+_' applied to '(string, int)'",
        ),
        (
            "tuple(1, 2, 3) == 1",
            "1:16: found no matching overload for '_==_' applied to '(tuple(int, int, int), int)'",
        ),
        (
            "pair(1, 'a')",
            "1:5: found no matching overload for 'pair' applied to '(int, string)'",
        ),
        (
            "tuple(1, 2, 3).size()",
            "1:20: found no matching overload for 'size' applied to 'tuple(int, int, int).()'",
        ),
    ];
    for (source, expected) in reported {
        assert_eq!(check_with(source, &env).1, [*expected], "`{source}`");
    }
    // A function declared by name only stays `dyn`; the unknown receiver of a method may be
    // a library type's.
    let (ty, found) = check_with("x.fn(1, 2, 3) + fn2(1)", &env.clone().with_function("fn2"));
    assert_eq!((ty, found), (Type::Dyn, Vec::<String>::new()));
}

#[test]
fn empty_literals_nest_without_limit() {
    let nested = |depth: usize| (0..depth).fold(Type::Dyn, |t, _| Type::list(t));
    let cases: &[(&str, Type)] = &[
        ("[[], [[]], [[[]]], [[[[]]]]]", nested(5)),
        ("[[[[[]]]], [], [[[]]]]", nested(5)),
        ("[[[[[[[[[[[]]]]]]]]]], [[]], []]", nested(11)),
        ("[[], [[1]]]", Type::list(Type::list(Type::list(Type::Int)))),
        (
            "[[[]], [[1]], []]",
            Type::list(Type::list(Type::list(Type::Int))),
        ),
        // Neither `list(list(string))` nor `list(list(int))` is assignable to the other.
        ("[[[]], [['a']], [[1]]]", Type::list(Type::Dyn)),
        (
            "[{}, {'a': [[]]}, {'b': [[], [[2]]]}]",
            Type::list(Type::map(
                Type::String,
                Type::list(Type::list(Type::list(Type::Int))),
            )),
        ),
        ("[].map(x, x)", Type::list(Type::Dyn)),
        ("([].map(x, x))[0].foo", Type::Dyn),
        ("[[]] + [[1]]", Type::list(Type::list(Type::Int))),
        ("[1] + []", Type::list(Type::Int)),
        ("[] == [[[]]]", Type::Bool),
    ];
    for (source, expected) in cases {
        let (ty, found) = check_with(source, &rule_env());
        assert_eq!((&ty, found), (expected, Vec::new()), "`{source}`");
    }
}

#[test]
fn result_types() {
    let cases: &[(&str, Type)] = &[
        ("self.spec.replicas", Type::Int),
        ("self.spec.?replicas.orValue(1)", Type::Int),
        ("self.spec.?replicas", Type::optional(Type::Int)),
        ("self.metadata.labels['app']", Type::String),
        (
            "self.spec.?template.?metadata.?labels.orValue({})",
            Type::map(Type::String, Type::String),
        ),
        (
            "self.spec.service.ports.map(p, p.port)",
            Type::list(Type::Int),
        ),
        ("self.spec.template.spec.containers", Type::Dyn),
        ("self.spec.service.ports[0].targetPort", Type::Dyn),
        (
            "fleet.spec.?clusterRefs.orValue([]).map(r, r.name)",
            Type::list(Type::String),
        ),
        ("self.status.conditions[0].lastTransitionTime", Type::String),
        ("self.metadata.finalizers", Type::list(Type::String)),
        ("self.metadata", custom_resource_meta()),
        ("[1, 'a']", Type::list(Type::Dyn)),
        ("[1, 2]", Type::list(Type::Int)),
        ("{'a': 1}", Type::map(Type::String, Type::Int)),
        ("true ? 1 : 'a'", Type::Error),
        ("true ? 1 : null", Type::Int),
        ("timestamp(now) - timestamp(now)", Type::Duration),
        ("decide('x', {})", Type::Dyn),
        ("self.spec.replicas + 1", Type::Int),
        ("self.spec.replicsa + 1", Type::Int),
        ("self.spec.replicsa", Type::Error),
        ("optional.none()", Type::optional(Type::Dyn)),
        ("self.spec.?replicas.orValue('none')", Type::Error),
    ];
    for (source, expected) in cases {
        let (ty, _) = check_with(source, &rule_env());
        assert_eq!(&ty, expected, "`{source}`");
    }
    let (ty, _) = check_with(
        "self.spec.service.ports.filter(p, p.port > 80)",
        &rule_env(),
    );
    let Type::List(port) = ty else {
        panic!("a list: {ty}")
    };
    assert_eq!(port.to_string(), "FleetWorkload.spec.service.ports.@idx");
}

// ---- the schema conversion ----------------------------------------------------------------

#[test]
fn schemas_become_types() {
    let schema = json!({
        "type": "object",
        "properties": {
            "count": {"type": "integer", "format": "int32"},
            "ratio": {"type": "number"},
            "on": {"type": "boolean"},
            "at": {"type": "string", "format": "date-time"},
            "data": {"type": "string", "format": "byte"},
            "port": {"x-kubernetes-int-or-string": true},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "anything": {"type": "object", "additionalProperties": true},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "empty": {"type": "object"},
            "untyped": {"x-kubernetes-preserve-unknown-fields": true},
            "items": {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string"}
            }}},
            "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
            "nullable": {"type": "string", "nullable": true},
            "embedded": {
                "type": "object",
                "x-kubernetes-embedded-resource": true,
                "x-kubernetes-preserve-unknown-fields": true
            }
        }
    });
    let Type::Object(object) = type_from_openapi(&schema, "T") else {
        panic!("an object")
    };
    assert_eq!(object.name, "T");
    assert!(!object.open);
    let field = |name: &str| object.fields.get(name).cloned().unwrap();
    assert_eq!(field("count"), Type::Int);
    assert_eq!(field("ratio"), Type::Dyn);
    assert_eq!(field("on"), Type::Bool);
    assert_eq!(field("at"), Type::String);
    assert_eq!(field("data"), Type::String);
    assert_eq!(field("port"), Type::Dyn);
    assert_eq!(field("labels"), Type::map(Type::String, Type::String));
    assert_eq!(field("anything"), Type::map(Type::String, Type::Dyn));
    assert_eq!(field("untyped"), Type::Dyn);
    assert_eq!(field("matrix"), Type::list(Type::list(Type::Int)));
    assert_eq!(field("nullable"), Type::String);
    let Type::Object(free) = field("free") else {
        panic!("an object")
    };
    assert!(free.open && free.fields.is_empty());
    assert_eq!(free.name, "T.free");
    let Type::Object(empty) = field("empty") else {
        panic!("an object")
    };
    assert!(!empty.open && empty.fields.is_empty());
    let Type::List(item) = field("items") else {
        panic!("a list")
    };
    assert_eq!(item.to_string(), "T.items.@idx");
    let Type::Object(embedded) = field("embedded") else {
        panic!("an object")
    };
    assert!(embedded.open);
    assert_eq!(embedded.fields.get("metadata"), Some(&object_meta()));
    assert_eq!(embedded.fields.get("kind"), Some(&Type::String));
}

#[test]
fn a_crd_kind_is_a_resource() {
    let crd = config_crd("platform.edge-portal.eu_fleetworkloads.yaml");
    let kinds = crd_kinds(&crd);
    assert_eq!(kinds.len(), 1);
    assert_eq!(kinds[0].api_version(), "platform.edge-portal.eu/v1alpha1");
    assert_eq!(kinds[0].kind, "FleetWorkload");
    let crds = [crd];
    let ty =
        object_type_for_kind(&crds, "platform.edge-portal.eu/v1alpha1", "FleetWorkload").unwrap();
    assert_eq!(ty, fleet_workload());
    assert!(object_type_for_kind(&crds, "platform.edge-portal.eu/v1", "FleetWorkload").is_none());
    assert!(object_type_from_crd(&crds[0], "v2").is_none());
    let Type::Object(object) = ty else {
        panic!("an object")
    };
    assert_eq!(
        object.fields.keys().collect::<Vec<_>>(),
        ["apiVersion", "kind", "metadata", "spec", "status"]
    );
    assert_eq!(object.fields.get("metadata"), Some(&custom_resource_meta()));
    let Some(Type::Object(spec)) = object.fields.get("spec") else {
        panic!("an object spec")
    };
    assert_eq!(spec.name, "FleetWorkload.spec");
    let Some(Type::Object(template)) = spec.fields.get("template") else {
        panic!("an object template")
    };
    assert!(template.open);
}

#[test]
fn a_kind_without_a_schema_has_typed_metadata() {
    let env =
        TypeEnv::new().with_variable("binding", object_type_without_schema("ResourceBinding"));
    let (_, found) = check_with(
        "binding.spec.clusters.exists(c, c.name == binding.metadata.nmae) && binding.kind == ''",
        &env,
    );
    assert_eq!(
        found,
        ["1:60: undefined field 'nmae' (did you mean 'name'?)"]
    );
}

#[test]
fn type_names_are_cel_go_s() {
    assert_eq!(
        Type::map(Type::String, Type::list(Type::optional(Type::Timestamp))).to_string(),
        "map(string, list(optional_type(google.protobuf.Timestamp)))"
    );
    assert_eq!(Type::Null.to_string(), "null_type");
    assert_eq!(Type::Duration.to_string(), "google.protobuf.Duration");
    assert!(Type::Null.is_assignable_to(&Type::Int));
    assert!(Type::list(Type::Dyn).is_assignable_to(&Type::list(Type::Int)));
    assert!(!Type::Int.is_assignable_to(&Type::Double));
    assert!(fleet_workload().is_assignable_to(&Type::map(Type::String, Type::Dyn)));
}

#[test]
fn columns_count_characters() {
    assert_eq!(
        issues("'é€' + 1 == self.metadata.nmae"),
        [
            "1:6: found no matching overload for '_+_' applied to '(string, int)'",
            "1:27: undefined field 'nmae' (did you mean 'name'?)",
        ]
    );
}

#[test]
fn long_and_deep_expressions_are_checked() {
    let long = vec!["self.metadata.name"; 300].join(" + ") + " + 1";
    let found = issues(&long);
    assert_eq!(found.len(), 1);
    assert!(
        found[0].ends_with("applied to '(string, int)'"),
        "{found:?}"
    );
    let deep = format!(
        "{}self.spec.replicas{} == 'x'",
        "(".repeat(90),
        ")".repeat(90)
    );
    assert_eq!(issues(&deep).len(), 1);
    let nested = (0..30).fold("x".to_string(), |inner, i| {
        format!("[[1]].map(l{i}, l{i}.map(x, {inner}))")
    });
    let expected = format!("{}int{}", "list(".repeat(60), ")".repeat(60));
    assert_eq!(assert_valid(&nested).to_string(), expected);
}

// ---- what Kubernetes' checker refuses ---------------------------------------------------------

/// An environment as `switchyard cel` checks in: Kubernetes' rules, `x` a `dyn` variable.
fn kubernetes_env() -> TypeEnv {
    TypeEnv::new().kubernetes().with_variable("x", Type::Dyn)
}

#[test]
fn kubernetes_type_errors_have_cel_go_s_messages_and_positions() {
    // Positions and messages as Kubernetes 1.34 reports them (tools/cel-oracle).
    let cases: &[(&str, &[&str])] = &[
        (
            "1 == 1u",
            &["1:3: found no matching overload for '_==_' applied to '(int, uint)'"],
        ),
        (
            "1 == 1.0",
            &["1:3: found no matching overload for '_==_' applied to '(int, double)'"],
        ),
        (
            "null == 1",
            &["1:6: found no matching overload for '_==_' applied to '(null, int)'"],
        ),
        (
            "true ? 1 : 'x'",
            &["1:6: found no matching overload for '_?_:_' applied to '(bool, int, string)'"],
        ),
        (
            "1 in [1u]",
            &["1:3: found no matching overload for '@in' applied to '(int, list(uint))'"],
        ),
        (
            "[1] + ['a']",
            &["1:5: found no matching overload for '_+_' applied to '(list(int), list(string))'"],
        ),
        (
            "optional.of(1).orValue('a')",
            &["1:23: found no matching overload for 'orValue' applied to \
               'optional_type(int).(string)'"],
        ),
        (
            "sets.contains([1], [1.0])",
            &[
                "1:14: found no matching overload for 'sets.contains' applied to \
               '(list(int), list(double))'",
            ],
        ),
        (
            "[1, 2, 3][1u]",
            &["1:10: found no matching overload for '_[_]' applied to '(list(int), uint)'"],
        ),
        ("[1, 'a']", &["1:5: expected type 'int' but found 'string'"]),
        ("[1, null]", &["1:5: expected type 'int' but found 'null'"]),
        (
            "[1, 1u].size()",
            &["1:5: expected type 'int' but found 'uint'"],
        ),
        (
            "{'a': 1, 'b': 'x'}",
            &["1:15: expected type 'int' but found 'string'"],
        ),
        (
            "{'a': 1, 2: 'x'}",
            &[
                "1:10: expected type 'string' but found 'int'",
                "1:13: expected type 'int' but found 'string'",
            ],
        ),
        (
            "[[1, 2], [3, [4]]]",
            &[
                "1:10: expected type 'list(int)' but found 'list(dyn)'",
                "1:14: expected type 'int' but found 'list(int)'",
            ],
        ),
        (
            "[[], [1], ['a']]",
            &["1:11: expected type 'list(int)' but found 'list(string)'"],
        ),
        (
            "[dyn(1), 'a']",
            &["1:10: expected type 'dyn' but found 'string'"],
        ),
        ("[x, 1]", &["1:5: expected type 'dyn' but found 'int'"]),
        (
            "[[1], [x]]",
            &["1:7: expected type 'list(int)' but found 'list(dyn)'"],
        ),
        ("duration('1x')", &["1:10: invalid duration argument"]),
        ("timestamp('x')", &["1:11: invalid timestamp argument"]),
        ("'a'.matches('[')", &["1:13: invalid matches argument"]),
        (
            "'no verbs'.format([1])",
            &["1:18: too many arguments supplied to string.format (expected 0, got 1)"],
        ),
        ("'%s %s'.format(['a'])", &["1:15: index 1 out of range"]),
        (
            "'%q'.format([1])",
            &["1:12: could not parse formatting clause: unrecognized formatting clause \"q\""],
        ),
        (
            "'%d'.format(['a'])",
            &[
                "1:14: error during formatting: decimal clause can only be used on integers, \
               was given string",
            ],
        ),
        (
            "'%x'.format([1.5])",
            &[
                "1:14: error during formatting: only integers, byte buffers, and strings can be \
               formatted as hex, was given double",
            ],
        ),
        (
            "'%s'.format([optional.of(1)])",
            &[
                "1:25: error during formatting: string clause can only be used on strings, \
               bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps, \
               was given optional_type",
            ],
        ),
    ];
    for (source, expected) in cases {
        assert_eq!(
            check_with(source, &kubernetes_env()).1,
            *expected,
            "`{source}`"
        );
    }
}

#[test]
fn kubernetes_accepts_what_cel_go_accepts() {
    for source in [
        "1 < 2.0 && 1u < 2.0 && -1 < 1u",
        "x == 1 && x == 'a' && dyn(1) == 1.0",
        "null == null && x == null && timestamp(0) != null && duration('1s') != null",
        "(true ? [1] : []).size() + (true ? [] : [1]).size() == 1",
        "[[], [1]].size() == [[1], []].size()",
        "[x, dyn(2)].size() == [null, null].size()",
        "'%s %d %f %x'.format(['a', 1, 1.5, 'hi']) != ''",
        "'%s'.format([[1, 'a', {'b': 2.5}]]) != ''",
        "'%s'.format([x]) != '' && '%d'.format([x]) != ''",
        "[optional.of(1), optional.none()].size() == 2",
        "{?'a': optional.of(1), 'b': 2}.size() == 2",
        "duration('1h') > duration('1m') && timestamp('2024-01-01T00:00:00Z') > timestamp(0)",
        "'a'.matches('a+') && [1, 2][dyn(0)] == 1",
    ] {
        let (_, found) = check_with(source, &kubernetes_env());
        assert!(found.is_empty(), "`{source}`: {found:?}");
    }
}

#[test]
fn rules_mix_types_in_literals_and_null_goes_anywhere() {
    // Rules build objects as map literals and write `null` to clear a field: what
    // Kubernetes' validators refuse of literals and `null` is not reported for them...
    for source in [
        "[1, 'a'].size() == 2 && {'a': 1, 'b': 'x'}.size() == 2",
        "[binding, 1].size() == 2",
        "self.spec.replicas == null || self.spec.?replicas.orValue(null) == null",
    ] {
        assert_valid(source);
    }
    // ... but cel-go's own checker is followed as for Kubernetes.
    let cases: &[(&str, &str)] = &[
        (
            "self.spec.replicas == 1.0",
            "1:20: found no matching overload for '_==_' applied to '(int, double)'",
        ),
        (
            "true ? self.spec.replicas : 'x'",
            "1:6: found no matching overload for '_?_:_' applied to '(bool, int, string)'",
        ),
        (
            "self.spec.?replicas.orValue('none')",
            "1:28: found no matching overload for 'orValue' applied to \
             'optional_type(int).(string)'",
        ),
        (
            "duration('1x') > duration('1s')",
            "1:10: invalid duration argument",
        ),
        (
            "'%d'.format([self.metadata.name])",
            "1:27: error during formatting: decimal clause can only be used on integers, \
             was given string",
        ),
        // Kubernetes' string format validator and cel-go's lists library refuse these
        // at compile time; rules too.
        (
            "'no verbs'.format([1]) != ''",
            "1:18: too many arguments supplied to string.format (expected 0, got 1)",
        ),
        (
            "[1, 2].flatten()",
            "1:15: found no matching overload for 'flatten' applied to 'list(int).()'",
        ),
    ];
    for (source, expected) in cases {
        assert_eq!(issues(source), [*expected], "`{source}`");
    }
}

#[test]
fn type_names_in_messages_are_cel_go_s() {
    assert_eq!(Type::Null.in_message().to_string(), "null");
    assert_eq!(
        Type::list(Type::map(Type::String, Type::Null))
            .in_message()
            .to_string(),
        "list(map(string, null))"
    );
    assert_eq!(Type::Null.to_string(), "null_type");
}
