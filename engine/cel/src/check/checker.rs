//! The walk over the parsed expression: a type for every node, issues where no type fits.

use std::collections::HashMap;

use cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, ListExpr, LiteralValue, MapExpr,
    SourceInfo, operators,
};

use crate::macros::MAP_INSERT;

use super::decls::{
    Arg, DECLARATIONS, assignable, join, join_assignable, resolve, resolve_as_kubernetes,
};
use super::parse::outside_literals;
use super::type_env::TypeEnv;
use super::types::{ObjectType, Type};

/// Stack the check of a node wants left before it starts, and the segment it gets when it
/// has less (expressions nest up to [`crate::MAX_OPERATORS`] levels deep).
const RED_ZONE: usize = 128 * 1024;
const STACK_SEGMENT: usize = 4 * 1024 * 1024;

/// Identifiers that name types (`type(x) == int`) when no variable has the name.
const TYPE_NAMES: [&str; 12] = [
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "bool",
    "list",
    "map",
    "null_type",
    "type",
    "dyn",
    "optional_type",
];

struct Local {
    name: String,
    ty: Type,
    /// A comprehension accumulator that starts as `[]` or `{}`: see [`Arg::weak`].
    weak: bool,
    /// Its type as Kubernetes sees it, when that holds a `dyn` Kubernetes sees as such
    /// (see [`Checker::kubernetes_type`]): an iteration variable over such a range, the
    /// list `map` or `filter` makes of such values.
    kubernetes: Option<Type>,
}

pub(super) struct Checker<'a> {
    source: &'a str,
    info: &'a SourceInfo,
    env: &'a TypeEnv,
    locals: Vec<Local>,
    /// How many calls of `format` the node being checked is inside: their list and map
    /// literals may mix types (see [`Checker::validates_literals`]).
    in_format: usize,
    /// The types of the nodes inside calls of `format` (of every node, as
    /// [`TypeEnv::kubernetes`]), by id.
    types: HashMap<u64, Type>,
    /// The types Kubernetes sees of the comprehensions whose results hold a `dyn` it sees
    /// as such (`map` and `filter` over such a range), by id: see
    /// [`Checker::kubernetes_type`].
    comprehensions: HashMap<u64, Type>,
    /// `(byte offset in the source, message)`.
    pub(super) issues: Vec<(usize, String)>,
}

impl<'a> Checker<'a> {
    pub(super) fn new(source: &'a str, info: &'a SourceInfo, env: &'a TypeEnv) -> Self {
        Checker {
            source,
            info,
            env,
            locals: Vec::new(),
            in_format: 0,
            types: HashMap::new(),
            comprehensions: HashMap::new(),
            issues: Vec::new(),
        }
    }

    /// The type of `e`, reporting what does not type-check in it.
    pub(super) fn check(&mut self, e: &IdedExpr) -> Type {
        let ty = stacker::maybe_grow(RED_ZONE, STACK_SEGMENT, || self.visit(e));
        if self.in_format > 0 || self.env.kubernetes {
            // The format and homogeneous literal validators read the types of nodes.
            self.types.insert(e.id, ty.clone());
        }
        ty
    }

    fn visit(&mut self, e: &IdedExpr) -> Type {
        match &e.expr {
            Expr::Unspecified => Type::Dyn,
            Expr::Literal(literal) => match literal {
                LiteralValue::Boolean(_) => Type::Bool,
                LiteralValue::Bytes(_) => Type::Bytes,
                LiteralValue::Double(_) => Type::Double,
                LiteralValue::Int(_) => Type::Int,
                LiteralValue::Null => Type::Null,
                LiteralValue::String(_) => Type::String,
                LiteralValue::UInt(_) => Type::Uint,
            },
            Expr::Ident(name) => self.ident(name),
            Expr::Select(select) => {
                let operand = self.check(&select.operand);
                if select.test {
                    let at = self.presence_test_field(e.id, &select.field);
                    self.select(&operand, &select.field, false, at);
                    Type::Bool
                } else {
                    let at = self.selected_field(e.id);
                    self.select(&operand, &select.field, false, at)
                }
            }
            Expr::Call(call) => self.call(e, call),
            Expr::Comprehension(comprehension) => self.comprehension(e.id, comprehension),
            Expr::List(list) => self.list(list),
            Expr::Map(map) => self.map(map),
            Expr::Struct(message) => {
                // Protobuf messages do not exist here: the evaluator reports the type.
                for entry in &message.entries {
                    match &entry.expr {
                        EntryExpr::StructField(field) => {
                            self.check(&field.value);
                        }
                        EntryExpr::MapEntry(entry) => {
                            self.check(&entry.key);
                            self.check(&entry.value);
                        }
                    }
                }
                Type::Dyn
            }
        }
    }

    /// Whether `null` is assignable to every type (rules: see [`TypeEnv::kubernetes`]).
    fn lenient_null(&self) -> bool {
        !self.env.kubernetes
    }

    fn assignable(&self, a: &Type, b: &Type) -> bool {
        assignable(a, b, self.lenient_null())
    }

    fn join_assignable(&self, a: &Arg, b: &Arg) -> Option<Type> {
        join_assignable(a, b, self.lenient_null())
    }

    /// The type of a list literal's elements (a map literal's keys, or values) so far, and
    /// the next one: as cel-go joins them, `dyn` when neither is assignable to the other.
    fn join_elements(&self, previous: &Arg, next: &Arg) -> Arg {
        Arg {
            ty: self.join_assignable(previous, next).unwrap_or(Type::Dyn),
            weak: previous.weak && next.weak,
        }
    }

    fn local(&self, name: &str) -> Option<&Local> {
        self.locals.iter().rev().find(|l| l.name == name)
    }

    fn declared(&self, name: &str) -> Option<&Type> {
        let name = name.strip_prefix('.').unwrap_or(name);
        self.local(name)
            .map(|l| &l.ty)
            .or_else(|| self.env.variables.get(name))
    }

    fn ident(&self, name: &str) -> Type {
        match self.declared(name) {
            Some(ty) => ty.clone(),
            None if TYPE_NAMES.contains(&name) => Type::Type,
            // Undeclared: the engine reports unknown variables itself.
            None => Type::Dyn,
        }
    }

    /// Whether `e` (of type `ty`) is weak: see [`Arg::weak`].
    fn is_weak(&self, e: &IdedExpr, ty: &Type) -> bool {
        if *ty == Type::Null {
            return true;
        }
        match &e.expr {
            Expr::List(list) => list.elements.is_empty(),
            Expr::Map(map) => map.entries.is_empty(),
            Expr::Ident(name) => self.local(name).is_some_and(|l| l.weak),
            Expr::Call(call) => {
                call.func_name == "none"
                    && call.args.is_empty()
                    && call.target.as_deref().is_some_and(|t| {
                        matches!(&t.expr, Expr::Ident(ns) if ns == "optional" && self.declared(ns).is_none())
                    })
            }
            _ => false,
        }
    }

    fn arg(&mut self, e: &IdedExpr) -> Arg {
        let ty = self.check(e);
        let weak = self.is_weak(e, &ty);
        Arg { ty, weak }
    }

    fn issue(&mut self, at: usize, message: String) {
        self.issues.push((at, message));
    }

    // ---- field selection ------------------------------------------------------------------

    /// The type of `field` selected on a value of type `operand` (`.?field` when
    /// `optional`), reporting an undefined field at `at`. As in cel-go, selecting on an
    /// optional selects on its value and gives an optional.
    fn select(&mut self, operand: &Type, field: &str, optional: bool, at: usize) -> Type {
        let (target, in_optional) = match operand {
            Type::Optional(inner) => (&**inner, true),
            other => (other, false),
        };
        let ty = match target {
            Type::Map(_, value) => (**value).clone(),
            Type::Object(object) => match object.fields.get(field) {
                Some(ty) => ty.clone(),
                None if object.open => Type::Dyn,
                None => {
                    self.undefined_field(object, field, at);
                    return Type::Error;
                }
            },
            t if t.is_dyn() => Type::Dyn,
            other => {
                self.issue(
                    at,
                    format!(
                        "type '{}' does not support field selection",
                        other.in_message()
                    ),
                );
                return Type::Error;
            }
        };
        if optional || in_optional {
            Type::optional(ty)
        } else {
            ty
        }
    }

    fn undefined_field(&mut self, object: &ObjectType, field: &str, at: usize) {
        let mut message = format!("undefined field '{field}'");
        if let Some(suggestion) = suggest(field, object.fields.keys()) {
            message.push_str(&format!(" (did you mean '{suggestion}'?)"));
        }
        self.issue(at, message);
    }

    // ---- calls ----------------------------------------------------------------------------

    fn call(&mut self, e: &IdedExpr, call: &CallExpr) -> Type {
        if call.func_name == "format" {
            // cel-go's string format validator exempts the literals inside a call of `format`
            // from the homogeneous literal check, at any depth.
            self.in_format += 1;
            let ty = self.typed_call(e, call);
            self.in_format -= 1;
            return ty;
        }
        self.typed_call(e, call)
    }

    fn typed_call(&mut self, e: &IdedExpr, call: &CallExpr) -> Type {
        let ty = self.resolved_call(e, call);
        self.validate_literals(e, call);
        ty
    }

    fn resolved_call(&mut self, e: &IdedExpr, call: &CallExpr) -> Type {
        let name = call.func_name.as_str();
        if call.target.is_none() {
            match (name, call.args.as_slice()) {
                (operators::CONDITIONAL, [c, a, b]) => return self.conditional(e, c, a, b),
                (operators::LOGICAL_AND | operators::LOGICAL_OR, [a, b]) => {
                    return self.logical(e, name, a, b);
                }
                (operators::EQUALS | operators::NOT_EQUALS, [a, b]) => {
                    return self.equality(e, name, a, b);
                }
                (operators::IN, [a, b]) => return self.membership(e, a, b),
                (operators::INDEX | operators::OPT_INDEX, [a, b]) => {
                    return self.index(e, name == operators::OPT_INDEX, a, b);
                }
                (operators::OPT_SELECT, [operand, field]) => {
                    if let Expr::Literal(LiteralValue::String(field)) = &field.expr {
                        let operand = self.check(operand);
                        let at = self.selected_field(e.id);
                        return self.select(&operand, field.inner(), true, at);
                    }
                }
                _ => {}
            }
        }
        // `optional.of(x)`: a function of a namespace, not a method of a variable.
        let mut qualified = None;
        if let Some(target) = call.target.as_deref()
            && let Expr::Ident(namespace) = &target.expr
            && self.declared(namespace).is_none()
        {
            qualified = Some(format!("{namespace}.{name}"));
        }
        let receiver = match (&qualified, call.target.as_deref()) {
            (None, Some(target)) => Some(self.arg(target)),
            _ => None,
        };
        let mut args: Vec<Arg> = receiver.into_iter().collect();
        let member = !args.is_empty();
        for arg in &call.args {
            let arg = self.arg(arg);
            args.push(arg);
        }
        let name = qualified.as_deref().unwrap_or(name);
        let unknown_receiver = member && args.first().is_some_and(|a| a.ty.is_dyn());
        if let Some(overloads) = self.env.overloads.get(name) {
            // A custom function declared with types: the evaluator runs it in either style.
            let resolved = resolve(overloads, member, &args, self.lenient_null())
                .or_else(|| resolve(overloads, !member, &args, self.lenient_null()));
            if let Some(ty) = resolved {
                return ty;
            }
            if unknown_receiver || args.iter().any(|a| a.ty == Type::Error) {
                return Type::Dyn;
            }
            self.no_overload(e, name, member, &args);
            return Type::Error;
        }
        let overloads = DECLARATIONS
            .get(name)
            .filter(|_| !self.env.functions.contains(name));
        let Some(overloads) = overloads else {
            // A Kubernetes library function that is global only (`sign(q)`) is not a
            // method, whatever the receiver.
            if member
                && !self.env.functions.contains(name)
                && !library_method(name, true)
                && library_method(name, false)
            {
                self.no_overload(e, name, member, &args);
                return Type::Error;
            }
            // Custom functions, Kubernetes libraries of types of their own, ...
            return Type::Dyn;
        };
        if let Some(ty) = resolve(overloads, member, &args, self.lenient_null()) {
            return ty;
        }
        if (unknown_receiver && library_method(name, true))
            || args.iter().any(|a| a.ty == Type::Error)
        {
            // A method of a value of unknown type may be a library type's (`quantity`'s
            // `add`); an argument with an issue is reported already.
            return Type::Dyn;
        }
        self.no_overload(e, name, member, &args);
        Type::Error
    }

    // ---- Kubernetes' literal validators ---------------------------------------------------

    /// What Kubernetes' validators check of constant arguments: a literal duration,
    /// timestamp or regex must be valid (`cel.ValidateDurationLiterals`, ...), and a literal
    /// format string must fit its literal list of arguments (cel-go's string format
    /// validator). Their errors would fail every evaluation that reaches the call.
    fn validate_literals(&mut self, e: &IdedExpr, call: &CallExpr) {
        let name = call.func_name.as_str();
        let global = call.target.is_none();
        match (name, call.args.first()) {
            ("duration" | "timestamp", Some(arg)) if global && call.args.len() == 1 => {
                if let Expr::Literal(literal) = &arg.expr
                    && !self.env.functions.contains(name)
                    && !literal::valid(name, literal)
                {
                    let at = self.offset(arg.id);
                    self.issue(at, format!("invalid {name} argument"));
                }
            }
            ("matches", Some(arg)) => {
                // cel-go checks the first argument, which is the pattern of a method call
                // (and the string, for the global form).
                if let Expr::Literal(literal) = &arg.expr
                    && !self.env.functions.contains(name)
                    && !literal::valid(name, literal)
                {
                    let at = self.offset(arg.id);
                    self.issue(at, "invalid matches argument".to_owned());
                }
            }
            ("format", Some(arg)) if !global && call.args.len() == 1 => {
                if let Some(target) = call.target.as_deref()
                    && let Expr::Literal(LiteralValue::String(format)) = &target.expr
                    && let Expr::List(list) = &arg.expr
                {
                    self.validate_format(e, format.inner(), &list.elements);
                }
            }
            _ => {}
        }
    }

    /// cel-go's string format validator: each clause of `format` against the type of its
    /// argument, and (as Kubernetes does) no more arguments than clauses.
    fn validate_format(&mut self, e: &IdedExpr, format: &str, args: &[IdedExpr]) {
        let at = self.offset(e.id);
        let conversions = match crate::format::conversions(format, args.len()) {
            Ok(conversions) => conversions,
            Err(message) => {
                self.issue(at, message);
                return;
            }
        };
        for (conversion, arg) in conversions.iter().zip(args) {
            let wrong = match conversion {
                's' => self.unprintable(arg),
                conversion => {
                    let ty = self.literal_type(arg);
                    let accepted = match conversion {
                        'd' | 'o' => matches!(ty, Type::Int | Type::Uint),
                        'f' | 'e' => matches!(ty, Type::Double | Type::String),
                        'b' => matches!(ty, Type::Int | Type::Uint | Type::Bool),
                        _ => matches!(ty, Type::Int | Type::Uint | Type::String | Type::Bytes),
                    };
                    (!accepted && !ty.is_dyn()).then_some((arg.id, ty))
                }
            };
            if let Some((id, ty)) = wrong {
                let clause = match conversion {
                    's' => {
                        "string clause can only be used on strings, bools, bytes, ints, \
                         doubles, maps, lists, types, durations, and timestamps"
                    }
                    'd' => "decimal clause can only be used on integers",
                    'f' => "fixed-point clause can only be used on doubles",
                    'e' => "scientific clause can only be used on doubles",
                    'b' => "only integers and bools can be formatted as binary",
                    'o' => "octal clause can only be used on integers",
                    _ => "only integers, byte buffers, and strings can be formatted as hex",
                };
                let at = self.offset(id);
                self.issue(
                    at,
                    format!(
                        "error during formatting: {clause}, was given {}",
                        type_name(&ty)
                    ),
                );
                return;
            }
        }
        if args.len() > conversions.len() {
            self.issue(
                at,
                format!(
                    "too many arguments supplied to string.format (expected {}, got {})",
                    conversions.len(),
                    args.len()
                ),
            );
        }
    }

    /// The argument of `%s` (or a value in a literal list or map of it) that `%s` cannot
    /// print, and its type: an optional, an abstract type (`%s` of a list or map literal
    /// looks into it).
    fn unprintable(&self, arg: &IdedExpr) -> Option<(u64, Type)> {
        // As Kubernetes types it: `x[?k]` of a `dyn` is a `dyn`, printable.
        let ty = match self.kubernetes_type(arg) {
            Some(t) if t == declared_dyn() => Type::Dyn,
            Some(t) => t,
            None => self.literal_type(arg),
        };
        if matches!(ty, Type::Optional(_) | Type::Opaque(..)) {
            return Some((arg.id, ty));
        }
        // The elements of a literal as they are, optional entries too (cel-go's validator
        // does not look into them).
        match &arg.expr {
            Expr::List(list) => list.elements.iter().find_map(|e| self.unprintable(e)),
            Expr::Map(map) => map.entries.iter().find_map(|entry| match &entry.expr {
                EntryExpr::MapEntry(entry) => self
                    .unprintable(&entry.key)
                    .or_else(|| self.unprintable(&entry.value)),
                EntryExpr::StructField(_) => None,
            }),
            _ => None,
        }
    }

    /// The type of an argument of a literal list, as checked already.
    fn literal_type(&self, arg: &IdedExpr) -> Type {
        self.types.get(&arg.id).cloned().unwrap_or(Type::Dyn)
    }

    /// Reports that no overload of `name` accepts `args` (the receiver first for a member
    /// call), in cel-go's words.
    fn no_overload(&mut self, e: &IdedExpr, name: &str, member: bool, args: &[Arg]) {
        let at = self.call_position(e.id, name);
        self.no_overload_at(at, name, member, args);
    }

    fn no_overload_at(&mut self, at: usize, name: &str, member: bool, args: &[Arg]) {
        let types: Vec<String> = args
            .iter()
            .map(|a| a.ty.without_params().in_message().to_string())
            .collect();
        let signature = match types.split_first() {
            Some((receiver, rest)) if member => format!("{receiver}.({})", rest.join(", ")),
            _ => format!("({})", types.join(", ")),
        };
        self.issue(
            at,
            format!("found no matching overload for '{name}' applied to '{signature}'"),
        );
    }

    fn conditional(&mut self, e: &IdedExpr, c: &IdedExpr, a: &IdedExpr, b: &IdedExpr) -> Type {
        let condition = self.arg(c);
        let (a_arg, b_arg) = (self.arg(a), self.arg(b));
        if !is_bool(&condition.ty) || !self.assignable(&a_arg.ty, &b_arg.ty) {
            // `filter` and `exists_one` expand into `predicate ? ... : @result`.
            let at = if is_accumulator(a) || is_accumulator(b) {
                self.start(c)
            } else {
                self.call_position(e.id, operators::CONDITIONAL)
            };
            self.no_overload_at(
                at,
                operators::CONDITIONAL,
                false,
                &[condition, a_arg, b_arg],
            );
            return Type::Error;
        }
        self.join_assignable(&a_arg, &b_arg).unwrap_or(Type::Error)
    }

    fn logical(&mut self, e: &IdedExpr, name: &str, a: &IdedExpr, b: &IdedExpr) -> Type {
        let (a_arg, b_arg) = (self.arg(a), self.arg(b));
        if !is_bool(&a_arg.ty) || !is_bool(&b_arg.ty) {
            // `all` and `exists` expand into `@result && predicate`.
            let at = if is_accumulator(a) {
                self.start(b)
            } else {
                self.call_position(e.id, name)
            };
            self.no_overload_at(at, name, false, &[a_arg, b_arg]);
        }
        Type::Bool
    }

    fn equality(&mut self, e: &IdedExpr, name: &str, a: &IdedExpr, b: &IdedExpr) -> Type {
        let (a, b) = (self.arg(a), self.arg(b));
        // `_==_(A, A)`: as in cel-go, numbers of different types do not compare for equality
        // (they do for ordering), and `null` only with the nullable types.
        if !self.assignable(&a.ty, &b.ty) {
            self.no_overload(e, name, false, &[a, b]);
        }
        Type::Bool
    }

    fn membership(&mut self, e: &IdedExpr, a: &IdedExpr, b: &IdedExpr) -> Type {
        let (element, container) = (self.arg(a), self.arg(b));
        let accepted = match &container.ty {
            t if t.is_dyn() => true,
            Type::List(e) => self.assignable(&element.ty, e),
            Type::Map(k, _) => self.assignable(&element.ty, k),
            Type::Object(_) => self.assignable(&element.ty, &Type::String),
            _ => false,
        };
        if !accepted {
            self.no_overload(e, operators::IN, false, &[element, container]);
        }
        Type::Bool
    }

    fn index(&mut self, e: &IdedExpr, optional: bool, a: &IdedExpr, b: &IdedExpr) -> Type {
        let (target, index) = (self.arg(a), self.arg(b));
        let (inner, in_optional) = match &target.ty {
            Type::Optional(inner) => (&**inner, true),
            other => (other, false),
        };
        let ty = match inner {
            t if t.is_dyn() => Some(Type::Dyn),
            Type::List(element) => {
                (index.ty.is_dyn() || index.ty == Type::Int).then(|| (**element).clone())
            }
            Type::Map(key, value) => self.assignable(&index.ty, key).then(|| (**value).clone()),
            Type::Object(object) => match (&index.ty, &b.expr) {
                (_, Expr::Literal(LiteralValue::String(field))) => {
                    match object.fields.get(field.inner()) {
                        Some(ty) => Some(ty.clone()),
                        None if object.open => Some(Type::Dyn),
                        None => {
                            let at = self.offset(b.id);
                            self.undefined_field(object, field.inner(), at);
                            return Type::Error;
                        }
                    }
                }
                (t, _) => (t.is_dyn() || *t == Type::String).then_some(Type::Dyn),
            },
            _ => None,
        };
        let Some(ty) = ty else {
            if index.ty != Type::Error {
                let name = if optional {
                    operators::OPT_INDEX
                } else {
                    operators::INDEX
                };
                self.no_overload(e, name, false, &[target, index]);
            }
            return Type::Error;
        };
        if optional || in_optional {
            Type::optional(ty)
        } else {
            ty
        }
    }

    // ---- comprehensions and literals ------------------------------------------------------

    fn comprehension(&mut self, id: u64, c: &ComprehensionExpr) -> Type {
        let range = self.check(&c.iter_range);
        // The iteration variables as Kubernetes types them, when that holds a `dyn` it sees
        // as such: the elements (keys and values) of such a range.
        let (first_kubernetes, second_kubernetes) = match self.kubernetes_type(&c.iter_range) {
            Some(t) if t == declared_dyn() => (Some(t.clone()), Some(t)),
            Some(Type::List(element)) if c.iter_var2.is_some() => (None, Some(*element)),
            Some(Type::List(element)) => (Some(*element), None),
            Some(Type::Map(key, value)) => (Some(*key), Some(*value)),
            _ => (None, None),
        };
        let marked = |t: Option<Type>| t.filter(has_declared_dyn);
        let (first_kubernetes, second_kubernetes) =
            (marked(first_kubernetes), marked(second_kubernetes));
        let (first, second) = match &range {
            t if t.is_dyn() => (Type::Dyn, Type::Dyn),
            Type::List(element) if c.iter_var2.is_some() => (Type::Int, (**element).clone()),
            Type::List(element) => ((**element).clone(), Type::Dyn),
            Type::Map(key, value) => ((**key).clone(), (**value).clone()),
            // An object is a map with string keys at run time.
            Type::Object(_) => (Type::String, Type::Dyn),
            other => {
                let at = self.start(&c.iter_range);
                self.issue(
                    at,
                    format!(
                        "expression of type '{other}' cannot be the range of a comprehension \
                         (must be list, map, or dynamic)"
                    ),
                );
                (Type::Dyn, Type::Dyn)
            }
        };
        let init = self.arg(&c.accu_init);
        let scope = self.locals.len();
        // `cel.bind(v, init, e)`: `v` is the accumulator, typed as its value is.
        let init_kubernetes = self.kubernetes_type(&c.accu_init);
        self.locals.push(Local {
            name: c.accu_var.clone(),
            ty: init.ty.clone(),
            weak: init.weak,
            kubernetes: init_kubernetes,
        });
        self.locals.push(Local {
            name: c.iter_var.clone(),
            ty: first,
            weak: false,
            kubernetes: first_kubernetes,
        });
        if let Some(var) = &c.iter_var2 {
            self.locals.push(Local {
                name: var.clone(),
                ty: second,
                weak: false,
                kubernetes: second_kubernetes,
            });
        }
        self.check(&c.loop_cond);
        let step = self.arg(&c.loop_step);
        let accumulated = self.accumulated(&c.loop_step, &c.accu_var);
        self.locals.truncate(scope + 1);
        // The accumulator's type is what the steps make of its initial value: `[]` becomes
        // a list of what `map` adds to it.
        let accumulator = join(&init, &step);
        if let Some(local) = self.locals.last_mut() {
            local.ty = accumulator;
            local.weak = false;
            if let Some(ty) = accumulated {
                local.kubernetes = Some(ty);
            }
        }
        let result = self.check(&c.result);
        if let Some(ty) = self.kubernetes_type(&c.result) {
            self.comprehensions.insert(id, ty);
        }
        self.locals.truncate(scope);
        result
    }

    /// The Kubernetes type (see [`Checker::kubernetes_type`]) of what a comprehension's
    /// steps make of the accumulator `accu`: `accu + [x]` a list (`map`),
    /// `cel.@mapInsert(accu, k, v)` a map (`transformMap`), or either in a branch of `?:`
    /// whose other branch is `accu` (a filter).
    fn accumulated(&self, step: &IdedExpr, accu: &str) -> Option<Type> {
        let Expr::Call(call) = &step.expr else {
            return None;
        };
        let is_accu = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(name) if name == accu);
        let ty = match (call.func_name.as_str(), call.args.as_slice()) {
            (operators::ADD, [a, b]) if call.target.is_none() && is_accu(a) => match &b.expr {
                Expr::List(list)
                    if list.elements.len() == 1 && list.optional_indices.is_empty() =>
                {
                    Type::list(self.effective_type(&list.elements[0])?)
                }
                _ => return None,
            },
            (MAP_INSERT, [a, k, v]) if is_accu(a) => {
                Type::map(self.effective_type(k)?, self.effective_type(v)?)
            }
            (MAP_INSERT, [a, m]) if is_accu(a) => self.effective_type(m)?,
            (operators::CONDITIONAL, [_, a, b]) if call.target.is_none() => {
                match (self.accumulated(a, accu), self.accumulated(b, accu)) {
                    (Some(t), _) if is_accu(b) => t,
                    (_, Some(t)) if is_accu(a) => t,
                    (Some(t), Some(u)) if equivalent(&t, &u) => t,
                    _ => return None,
                }
            }
            _ => return None,
        };
        Some(ty).filter(has_declared_dyn)
    }

    /// The type of `e` as Kubernetes' checker sees it, when that holds a `dyn` which the
    /// checker here has as [`Type::Dyn`] but Kubernetes' homogeneous literal check tells
    /// from other types ([`declared_dyn`]); `None` when it holds none. Such a `dyn` is
    /// `dyn(x)`, a variable declared `dyn` (as [`TypeEnv::kubernetes`]), and what is
    /// selected, indexed, iterated, mapped or computed by a declared function from one.
    fn kubernetes_type(&self, e: &IdedExpr) -> Option<Type> {
        if !self.env.kubernetes {
            return None;
        }
        // A field or element of a value of that type; of an optional, an optional of it.
        let of_element = |container: Type| {
            let (container, optional) = match container {
                Type::Optional(inner) => (*inner, true),
                other => (other, false),
            };
            let element = match container {
                t if t == declared_dyn() => Some(t),
                Type::List(element) => Some(*element),
                Type::Map(_, value) => Some(*value),
                _ => None,
            };
            element.map(|t| if optional { Type::optional(t) } else { t })
        };
        let ty = match &e.expr {
            Expr::Ident(name) => match self.local(name) {
                Some(local) => local.kubernetes.clone(),
                None => (self.env.variables.get(name) == Some(&Type::Dyn)).then(declared_dyn),
            },
            Expr::Select(select) if !select.test => {
                self.kubernetes_type(&select.operand).and_then(of_element)
            }
            Expr::Call(call) => {
                match (call.func_name.as_str(), &call.target, call.args.as_slice()) {
                    ("dyn", None, [_]) if !self.env.functions.contains("dyn") => {
                        Some(declared_dyn())
                    }
                    (operators::INDEX, None, [target, _]) => {
                        self.kubernetes_type(target).and_then(of_element)
                    }
                    // `a[?k]`, `a.?f`: an optional of what `a[k]`, `a.f` is; but cel-go types
                    // `a[?k]` of a `dyn` as a `dyn`.
                    (operators::OPT_INDEX, None, [target, _])
                        if self.kubernetes_type(target) == Some(declared_dyn()) =>
                    {
                        Some(declared_dyn())
                    }
                    (operators::OPT_INDEX | operators::OPT_SELECT, None, [target, _]) => self
                        .kubernetes_type(target)
                        .and_then(of_element)
                        .map(|t| match t {
                            t @ Type::Optional(_) => t,
                            t => Type::optional(t),
                        }),
                    // `?:`: the more general of its branches' types.
                    (operators::CONDITIONAL, None, [_, a, b]) => {
                        let weak = |e: &IdedExpr| {
                            self.types.get(&e.id).is_some_and(|t| self.is_weak(e, t))
                        };
                        match (self.effective_type(a), self.effective_type(b)) {
                            (Some(a), Some(b)) => Some(most_general(&a, &b)),
                            (Some(t), None) if weak(b) => Some(t),
                            (None, Some(t)) if weak(a) => Some(t),
                            _ => None,
                        }
                    }
                    _ => self.kubernetes_call(call),
                }
            }
            Expr::Comprehension(_) => self.comprehensions.get(&e.id).cloned(),
            Expr::List(_) | Expr::Map(_) => {
                let ty = self.types.get(&e.id)?;
                Some(self.homogeneous_type(e, ty, false))
            }
            _ => None,
        };
        // A call's type is what cel-go gives it, whether it holds such a `dyn` or not (and
        // so a comprehension's, made of calls).
        match &e.expr {
            Expr::Call(_) | Expr::Comprehension(_) => ty,
            _ => ty.filter(has_declared_dyn),
        }
    }

    /// The type Kubernetes sees of `e`: [`Checker::kubernetes_type`], else the checker's
    /// own when it holds no `dyn` the checker could not type (`None` then) and is not a
    /// type not determined yet.
    fn effective_type(&self, e: &IdedExpr) -> Option<Type> {
        if let Some(t) = self.kubernetes_type(e) {
            return Some(t);
        }
        let ty = self.types.get(&e.id)?;
        if self.is_weak(e, ty) {
            // `[]`, `{}`, `optional.none()`: cel-go leaves their parameters free, to take
            // whatever they meet.
            return (*ty != Type::Null).then(|| freed(ty));
        }
        (!has_dyn(ty) && !has_param(ty)).then(|| ty.clone())
    }

    /// The Kubernetes type (see [`Checker::kubernetes_type`]) of a call of a function the
    /// checker declares whose arguments hold a `dyn` Kubernetes sees as such: cel-go binds
    /// the function's type parameters to `dyn` then (`self.items.map(i, i.n).sum()`,
    /// `self.labels.?app.orValue('x')`), and `sort()` of a list of `dyn`, declared for
    /// each element type, is a `dyn`. An argument of a type the checker does not know (a
    /// library value, a custom function's result) leaves the result unknown.
    fn kubernetes_call(&self, call: &CallExpr) -> Option<Type> {
        let namespace = call
            .target
            .as_deref()
            .and_then(|target| match &target.expr {
                Expr::Ident(ns) if self.declared(ns).is_none() => Some(ns.as_str()),
                _ => None,
            });
        let name = match namespace {
            Some(ns) => format!("{ns}.{}", call.func_name),
            None => call.func_name.clone(),
        };
        // `optional.none()` is an optional of a free type for cel-go (see
        // [`Checker::effective_type`]).
        if self.env.functions.contains(&name)
            || self.env.overloads.contains_key(&name)
            || name == "optional.none"
        {
            return None;
        }
        let overloads = DECLARATIONS.get(name.as_str())?;
        let receiver = call.target.as_deref().filter(|_| namespace.is_none());
        let mut args = Vec::new();
        for arg in receiver.into_iter().chain(&call.args) {
            args.push(self.effective_type(arg)?);
        }
        let any = args.iter().any(has_declared_dyn);
        // cel-go declares `sort` for each element type: of a `dyn`, their results differ.
        if any && name == "sort" {
            return Some(declared_dyn());
        }
        // The type of a call of arguments Kubernetes sees as the checker does differs only
        // where the declaration says `dyn` (`flatten(int)`).
        resolve_as_kubernetes(overloads, receiver.is_some(), &args, &declared_dyn())
            .filter(|ty| any || has_declared_dyn(ty))
    }

    fn list(&mut self, list: &ListExpr) -> Type {
        let mut joined: Option<Arg> = None;
        let mut elements = Vec::with_capacity(list.elements.len());
        for (i, element) in list.elements.iter().enumerate() {
            let mut arg = self.arg(element);
            if list.optional_indices.contains(&i) {
                arg.ty = optional_value(arg.ty);
            }
            elements.push((element, arg.ty.clone(), list.optional_indices.contains(&i)));
            joined = Some(match joined {
                None => arg,
                Some(previous) => self.join_elements(&previous, &arg),
            });
        }
        // Kubernetes' homogeneous literal validator: the first mismatch is reported.
        if self.validates_literals()
            && let Some(((first, ty, optional), rest)) = elements.split_first()
        {
            let mut expected = self.homogeneous_type(first, ty, *optional);
            for (element, ty, optional) in rest {
                let found = self.homogeneous_type(element, ty, *optional);
                if !equivalent(&expected, &found) {
                    self.mismatch(element, &expected, &found);
                    break;
                }
                expected = settled(&expected, &found);
            }
        }
        Type::list(joined.map_or_else(undetermined, |a| a.ty))
    }

    fn map(&mut self, map: &MapExpr) -> Type {
        let mut keys: Option<Arg> = None;
        let mut values: Option<Arg> = None;
        // The key and value types the first entry sets.
        let mut first: Option<(Type, Type)> = None;
        for entry in &map.entries {
            let (key, value) = match &entry.expr {
                EntryExpr::MapEntry(entry) => {
                    let key = self.arg(&entry.key);
                    let mut value = self.arg(&entry.value);
                    if entry.optional {
                        value.ty = optional_value(value.ty);
                    }
                    // Kubernetes' homogeneous literal validator: every key and every value
                    // of another type than the first entry's is reported.
                    if self.validates_literals() {
                        let found = (
                            self.homogeneous_type(&entry.key, &key.ty, false),
                            self.homogeneous_type(&entry.value, &value.ty, entry.optional),
                        );
                        first = Some(match first.take() {
                            None => found,
                            Some((keys, values)) => {
                                if !equivalent(&keys, &found.0) {
                                    self.mismatch(&entry.key, &keys, &found.0);
                                }
                                if !equivalent(&values, &found.1) {
                                    self.mismatch(&entry.value, &values, &found.1);
                                }
                                (settled(&keys, &found.0), settled(&values, &found.1))
                            }
                        });
                    }
                    (key, value)
                }
                EntryExpr::StructField(field) => (
                    Arg {
                        ty: Type::String,
                        weak: false,
                    },
                    self.arg(&field.value),
                ),
            };
            for (joined, arg) in [(&mut keys, key), (&mut values, value)] {
                *joined = Some(match joined.take() {
                    None => arg,
                    Some(previous) => self.join_elements(&previous, &arg),
                });
            }
        }
        Type::map(
            keys.map_or_else(undetermined, |a| a.ty),
            values.map_or_else(undetermined, |a| a.ty),
        )
    }

    /// Whether list and map literals are checked as Kubernetes' homogeneous aggregate
    /// literal validator (`cel.ValidateHomogeneousAggregateLiterals`) checks them: their
    /// elements (keys, values) of equivalent types, `dyn` only with `dyn`. Only as
    /// [`TypeEnv::kubernetes`] (rules build objects as map literals), and not inside a call
    /// of `format`.
    fn validates_literals(&self) -> bool {
        self.env.kubernetes && self.in_format == 0
    }

    /// The type of the element `e` of a literal (of type `ty`) for the homogeneous literal
    /// check: where the checker does not know a type (`dyn` for what it cannot type, an
    /// issue, a type not determined yet) anything goes, but a `dyn` Kubernetes would see as
    /// such (`dyn(x)`, a variable declared `dyn`, inside a literal too) is [`declared_dyn`]'s
    /// marker, equivalent only to itself.
    fn homogeneous_type(&self, e: &IdedExpr, ty: &Type, optional_entry: bool) -> Type {
        let known = |e: &IdedExpr| {
            let ty = self.types.get(&e.id).cloned().unwrap_or(Type::Dyn);
            self.homogeneous_type(e, &ty, false)
        };
        // The type of a literal element's elements: as cel-go joins them, a `dyn` of its own
        // where two are not equivalent (the literal is reported itself).
        let joined = |types: Vec<Type>| {
            let mut types = types.into_iter();
            let first = types.next()?;
            Some(
                types
                    .try_fold(first, |joined, next| {
                        equivalent(&joined, &next)
                            .then(|| settled(&joined, &next))
                            .ok_or(())
                    })
                    .unwrap_or_else(|()| declared_dyn()),
            )
        };
        match (&e.expr, ty) {
            (Expr::List(list), Type::List(element)) => {
                let types = list
                    .elements
                    .iter()
                    .enumerate()
                    .map(|(i, e)| {
                        if list.optional_indices.contains(&i) {
                            let ty = self.types.get(&e.id).cloned().unwrap_or(Type::Dyn);
                            self.homogeneous_type(e, &optional_value(ty), true)
                        } else {
                            known(e)
                        }
                    })
                    .collect();
                Type::list(joined(types).unwrap_or_else(|| (**element).clone()))
            }
            (Expr::Map(map), Type::Map(key, value)) => {
                let (keys, values): (Vec<Type>, Vec<Type>) = map
                    .entries
                    .iter()
                    .filter_map(|entry| match &entry.expr {
                        EntryExpr::MapEntry(entry) if entry.optional => {
                            let ty = self
                                .types
                                .get(&entry.value.id)
                                .cloned()
                                .unwrap_or(Type::Dyn);
                            Some((
                                known(&entry.key),
                                self.homogeneous_type(&entry.value, &optional_value(ty), true),
                            ))
                        }
                        EntryExpr::MapEntry(entry) => {
                            Some((known(&entry.key), known(&entry.value)))
                        }
                        EntryExpr::StructField(_) => None,
                    })
                    .unzip();
                Type::map(
                    joined(keys).unwrap_or_else(|| (**key).clone()),
                    joined(values).unwrap_or_else(|| (**value).clone()),
                )
            }
            // `ty` is the value of an optional entry (`?k: v`, `[?v]`) already.
            _ => match self.kubernetes_type(e) {
                Some(t) if optional_entry => optional_value(t),
                Some(t) => t,
                None => ty.clone(),
            },
        }
    }

    /// Reports an element of a literal of another type than the first one's, in cel-go's
    /// words.
    fn mismatch(&mut self, element: &IdedExpr, expected: &Type, found: &Type) {
        let at = self.offset(element.id);
        self.issue(
            at,
            format!(
                "expected type '{}' but found '{}'",
                expected.without_params().in_message(),
                found.without_params().in_message()
            ),
        );
    }

    // ---- positions --------------------------------------------------------------------------

    /// The byte offset the parser recorded for `id` (0 when it has none).
    fn offset(&self, id: u64) -> usize {
        self.info
            .offset_for(id)
            .map_or(0, |(start, _)| usize::try_from(start).unwrap_or(0))
    }

    /// Where `e` starts: the smallest offset in it (a selection's is its `.`, a call's its
    /// `(`, an identifier's its first character).
    fn start(&self, e: &IdedExpr) -> usize {
        let own = self.offset(e.id);
        let children: Vec<&IdedExpr> = match &e.expr {
            Expr::Select(select) => vec![&select.operand],
            Expr::Call(call) => call
                .target
                .as_deref()
                .into_iter()
                .chain(&call.args)
                .collect(),
            Expr::Comprehension(c) => vec![&c.iter_range],
            _ => Vec::new(),
        };
        children
            .into_iter()
            .map(|child| self.start(child))
            .fold(own, usize::min)
    }

    /// A selection's position is its `.`: the field name after it (past `?`, blanks and a
    /// backquote) is where the field is.
    fn selected_field(&self, id: u64) -> usize {
        let dot = self.offset(id);
        let rest = self.source.get(dot..).unwrap_or("");
        let skipped = rest
            .char_indices()
            .skip(1)
            .find(|(_, c)| !(c.is_whitespace() || *c == '?' || *c == '`'))
            .map_or(0, |(i, _)| i);
        dot + skipped
    }

    /// `has(a.b)` is placed at its `(`: finds `b` inside the parentheses.
    fn presence_test_field(&self, id: u64, field: &str) -> usize {
        let open = self.offset(id);
        let Some(inside) = self.source.get(open..) else {
            return open;
        };
        let close = closing_parenthesis(inside).unwrap_or(inside.len());
        let argument = &inside[..close];
        let found = argument.rmatch_indices(field).map(|(i, _)| i).find(|&i| {
            argument[..i]
                .trim_end_matches(['`', '?'])
                .trim_end()
                .ends_with(['.', '?'])
        });
        found.map_or(open, |i| open + i)
    }

    /// A call's position, as cel-go reports it: an operator's token, a function's `(`
    /// (what the parser records for both).
    fn call_position(&self, id: u64, _name: &str) -> usize {
        self.offset(id)
    }
}

/// A type's name as cel-go's `TypeName` gives it (`list`, `map`, `optional_type`).
fn type_name(ty: &Type) -> String {
    match ty {
        Type::List(_) => "list".to_owned(),
        Type::Map(..) => "map".to_owned(),
        Type::Optional(_) => "optional_type".to_owned(),
        Type::Opaque(name, _) => name.clone(),
        other => other.to_string(),
    }
}

/// The literal arguments Kubernetes' validators check, checked with the evaluator.
mod literal {
    use cel::common::ast::LiteralValue;

    use crate::env::{Activation, Env, Program};
    use crate::value::Value;

    thread_local! {
        /// `duration(v)`, `timestamp(v)` and `''.matches(v)`, compiled once per thread.
        static CALLS: Option<(Env, [Program; 3])> = {
            let env = Env::kubernetes();
            let compiled = ["duration(v)", "timestamp(v)", "''.matches(v)"]
                .map(|source| env.compile(source).ok());
            match compiled {
                [Some(d), Some(t), Some(m)] => Some((env, [d, t, m])),
                _ => None,
            }
        };
    }

    /// Whether `function(literal)` evaluates (for `matches`: whether the literal is a valid
    /// pattern); `true` when that cannot be told.
    pub(super) fn valid(function: &str, literal: &LiteralValue) -> bool {
        let value = match literal {
            LiteralValue::String(s) => Value::String(std::sync::Arc::from(s.inner())),
            LiteralValue::Int(i) => Value::Int(*i.inner()),
            _ => return true,
        };
        let index = match function {
            "duration" => 0,
            "timestamp" => 1,
            _ => 2,
        };
        CALLS.with(|calls| {
            let Some((env, programs)) = calls else {
                return true;
            };
            let mut activation = Activation::new(env);
            activation.bind("v", value);
            programs[index].eval(&activation).is_ok()
        })
    }
}

/// The byte offset of the `)` closing the `(` `text` starts with, skipping string literals.
fn closing_parenthesis(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in outside_literals(text) {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// The accumulator of a macro's expansion (`@result`): no expression can name it.
fn is_accumulator(e: &IdedExpr) -> bool {
    matches!(&e.expr, Expr::Ident(name) if name.starts_with('@'))
}

fn is_bool(ty: &Type) -> bool {
    ty.is_dyn() || *ty == Type::Bool
}

/// The element type of `[]` (and key and value types of `{}`): what the elements joined
/// with it determine (see [`Type::Param`]), `dyn` if nothing does.
fn undetermined() -> Type {
    Type::param("_")
}

/// The value type of an optional entry (`?k: v`, `[?v]`).
fn optional_value(ty: Type) -> Type {
    match ty {
        Type::Optional(inner) => *inner,
        other => other,
    }
}

/// Whether `ty` is or holds the marker of a `dyn` Kubernetes sees as such.
fn has_declared_dyn(ty: &Type) -> bool {
    match ty {
        Type::List(t) | Type::Optional(t) => has_declared_dyn(t),
        Type::Map(k, v) => has_declared_dyn(k) || has_declared_dyn(v),
        t => *t == declared_dyn(),
    }
}

/// Whether a Kubernetes library has a function `name` of a library value (quantity, URL,
/// IP, ...), as a method (`receiver`) or a global function: on a receiver of a type the
/// checker does not know, a method may be the one called.
fn library_method(name: &str, receiver: bool) -> bool {
    crate::builtins::FULL_REGISTRY
        .lookup(name, receiver)
        .is_some_and(|overloads| {
            overloads
                .iter()
                .any(|o| matches!(o.params.first(), Some(crate::registry::Param::Opaque(_))))
        })
}

/// `ty` with its `dyn`s (the parameters the checker left unbound) free.
fn freed(ty: &Type) -> Type {
    match ty {
        Type::Dyn => Type::param("_"),
        Type::List(t) => Type::list(freed(t)),
        Type::Optional(t) => Type::optional(freed(t)),
        Type::Map(k, v) => Type::map(freed(k), freed(v)),
        other => other.clone(),
    }
}

/// Whether `ty` is or holds a type not determined yet.
fn has_param(ty: &Type) -> bool {
    match ty {
        Type::Param(_) => true,
        Type::List(t) | Type::Optional(t) => has_param(t),
        Type::Map(k, v) => has_param(k) || has_param(v),
        _ => false,
    }
}

/// cel-go's `mostGeneral` of two types Kubernetes sees: a `dyn` it declares where either
/// has one.
fn most_general(a: &Type, b: &Type) -> Type {
    let marker = declared_dyn();
    match (a, b) {
        (a, _) if *a == marker => marker,
        (_, b) if *b == marker => marker,
        (Type::List(a), Type::List(b)) => Type::list(most_general(a, b)),
        (Type::Optional(a), Type::Optional(b)) => Type::optional(most_general(a, b)),
        (Type::Map(ka, va), Type::Map(kb, vb)) => {
            Type::map(most_general(ka, kb), most_general(va, vb))
        }
        (a, _) => a.clone(),
    }
}

/// Whether `ty` is or holds a `dyn`.
fn has_dyn(ty: &Type) -> bool {
    match ty {
        Type::Dyn => true,
        Type::List(t) | Type::Optional(t) => has_dyn(t),
        Type::Map(k, v) => has_dyn(k) || has_dyn(v),
        _ => false,
    }
}

/// The marker of a `dyn` Kubernetes sees as `dyn` in the homogeneous literal check (see
/// [`Checker::homogeneous_type`]): named `dyn` in messages.
fn declared_dyn() -> Type {
    Type::opaque("dyn", Vec::new())
}

/// The type a literal's elements must have after `expected` and `found` (equivalent): as
/// cel-go substitutes its type variables, a type not determined yet takes the other's
/// (`[[], [1], ['a']]`: the first element is a `list(int)`).
fn settled(expected: &Type, found: &Type) -> Type {
    match (expected, found) {
        (Type::Param(_), t) => t.clone(),
        (Type::List(a), Type::List(b)) => Type::list(settled(a, b)),
        (Type::Optional(a), Type::Optional(b)) => Type::optional(settled(a, b)),
        (Type::Map(ka, va), Type::Map(kb, vb)) => Type::map(settled(ka, kb), settled(va, vb)),
        _ => expected.clone(),
    }
}

/// Whether two types are the same for the homogeneous literal check (cel-go's
/// `IsEquivalentType`), where a type the checker does not know (see [`Type::is_dyn`]) is
/// any type. Objects are equivalent to objects and maps (the checker does not name them as
/// Kubernetes does).
fn equivalent(a: &Type, b: &Type) -> bool {
    use Type as T;
    match (a, b) {
        (a, b) if a.is_dyn() || b.is_dyn() => true,
        (T::List(a), T::List(b)) | (T::Optional(a), T::Optional(b)) => equivalent(a, b),
        (T::Map(ka, va), T::Map(kb, vb)) => equivalent(ka, kb) && equivalent(va, vb),
        (T::Object(_), T::Object(_) | T::Map(..)) | (T::Map(..), T::Object(_)) => true,
        (T::Opaque(a, pa), T::Opaque(b, pb)) => {
            a == b && pa.len() == pb.len() && pa.iter().zip(pb).all(|(a, b)| equivalent(a, b))
        }
        (a, b) => a == b,
    }
}

/// The field closest to `field` within an edit distance of 2 (and less than its length).
pub fn suggest<'f>(field: &str, fields: impl Iterator<Item = &'f String>) -> Option<&'f str> {
    let length = field.chars().count();
    fields
        .map(|f| (edit_distance(field, f), f))
        .filter(|(d, _)| *d <= 2 && *d < length)
        .min_by_key(|(d, _)| *d)
        .map(|(_, f)| f.as_str())
}

/// Optimal string alignment distance: insertions, deletions, substitutions and
/// transpositions of adjacent characters (`replicsa` is one from `replicas`).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let width = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * width];
    for i in 0..=a.len() {
        d[i * width] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(width) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[(i - 1) * width + j] + 1)
                .min(d[i * width + j - 1] + 1)
                .min(d[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[(i - 2) * width + j - 2] + 1);
            }
            d[i * width + j] = best;
        }
    }
    d[a.len() * width + b.len()]
}
