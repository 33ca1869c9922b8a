//! The walk over the parsed expression: a type for every node, issues where no type fits.

use cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, ListExpr, LiteralValue, MapExpr,
    SourceInfo, operators,
};

use super::TypeEnv;
use super::decls::{Arg, DECLARATIONS, join, resolve};
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
}

pub(super) struct Checker<'a> {
    source: &'a str,
    info: &'a SourceInfo,
    env: &'a TypeEnv,
    locals: Vec<Local>,
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
            issues: Vec::new(),
        }
    }

    /// The type of `e`, reporting what does not type-check in it.
    pub(super) fn check(&mut self, e: &IdedExpr) -> Type {
        stacker::maybe_grow(RED_ZONE, STACK_SEGMENT, || self.visit(e))
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
            Expr::Comprehension(comprehension) => self.comprehension(comprehension),
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
                    format!("type '{other}' does not support field selection"),
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
            let resolved =
                resolve(overloads, member, &args).or_else(|| resolve(overloads, !member, &args));
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
            // Custom functions, Kubernetes libraries of types of their own, ...
            return Type::Dyn;
        };
        if let Some(ty) = resolve(overloads, member, &args) {
            return ty;
        }
        if unknown_receiver || args.iter().any(|a| a.ty == Type::Error) {
            // A method of a value of unknown type may be a library type's (`quantity`'s
            // `add`); an argument with an issue is reported already.
            return Type::Dyn;
        }
        self.no_overload(e, name, member, &args);
        Type::Error
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
            .map(|a| a.ty.without_params().to_string())
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
        if !is_bool(&condition.ty) {
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
        join(&a_arg, &b_arg)
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
        if !comparable(&a.ty, &b.ty) {
            self.no_overload(e, name, false, &[a, b]);
        }
        Type::Bool
    }

    fn membership(&mut self, e: &IdedExpr, a: &IdedExpr, b: &IdedExpr) -> Type {
        let (element, container) = (self.arg(a), self.arg(b));
        let accepted = match &container.ty {
            t if t.is_dyn() => true,
            Type::List(e) => comparable(&element.ty, e),
            Type::Map(k, _) => comparable(&element.ty, k),
            Type::Object(_) => comparable(&element.ty, &Type::String),
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
                (index.ty.is_dyn() || is_number(&index.ty)).then(|| (**element).clone())
            }
            Type::Map(key, value) => comparable(&index.ty, key).then(|| (**value).clone()),
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

    fn comprehension(&mut self, c: &ComprehensionExpr) -> Type {
        let range = self.check(&c.iter_range);
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
        self.locals.push(Local {
            name: c.accu_var.clone(),
            ty: init.ty.clone(),
            weak: init.weak,
        });
        self.locals.push(Local {
            name: c.iter_var.clone(),
            ty: first,
            weak: false,
        });
        if let Some(var) = &c.iter_var2 {
            self.locals.push(Local {
                name: var.clone(),
                ty: second,
                weak: false,
            });
        }
        self.check(&c.loop_cond);
        let step = self.arg(&c.loop_step);
        self.locals.truncate(scope + 1);
        // The accumulator's type is what the steps make of its initial value: `[]` becomes
        // a list of what `map` adds to it.
        let accumulator = join(&init, &step);
        if let Some(local) = self.locals.last_mut() {
            local.ty = accumulator;
            local.weak = false;
        }
        let result = self.check(&c.result);
        self.locals.truncate(scope);
        result
    }

    fn list(&mut self, list: &ListExpr) -> Type {
        let mut joined: Option<Arg> = None;
        for (i, element) in list.elements.iter().enumerate() {
            let mut arg = self.arg(element);
            if list.optional_indices.contains(&i) {
                arg.ty = optional_value(arg.ty);
            }
            joined = Some(match joined {
                None => arg,
                Some(previous) => Arg {
                    ty: join(&previous, &arg),
                    weak: previous.weak && arg.weak,
                },
            });
        }
        Type::list(joined.map_or_else(undetermined, |a| a.ty))
    }

    fn map(&mut self, map: &MapExpr) -> Type {
        let mut keys: Option<Arg> = None;
        let mut values: Option<Arg> = None;
        for entry in &map.entries {
            let (key, value) = match &entry.expr {
                EntryExpr::MapEntry(entry) => {
                    let key = self.arg(&entry.key);
                    let mut value = self.arg(&entry.value);
                    if entry.optional {
                        value.ty = optional_value(value.ty);
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
                    Some(previous) => Arg {
                        ty: join(&previous, &arg),
                        weak: previous.weak && arg.weak,
                    },
                });
            }
        }
        Type::map(
            keys.map_or_else(undetermined, |a| a.ty),
            values.map_or_else(undetermined, |a| a.ty),
        )
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

    /// An operator's position is its token; a function's is its name (the parser records
    /// the `(` of a call).
    fn call_position(&self, id: u64, name: &str) -> usize {
        let at = self.offset(id);
        let is_operator = name.starts_with(['_', '@', '!', '-']);
        if is_operator || self.source.get(at..at + 1) != Some("(") {
            return at;
        }
        let short = name.rsplit('.').next().unwrap_or(name);
        let before = self.source.get(..at).map_or("", str::trim_end);
        if before.ends_with(short) {
            before.len() - short.len()
        } else {
            at
        }
    }
}

/// The byte offset of the `)` closing the `(` `text` starts with, skipping string literals.
fn closing_parenthesis(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in super::outside_literals(text) {
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

fn is_number(ty: &Type) -> bool {
    matches!(ty, Type::Int | Type::Uint | Type::Double)
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

/// Whether values of types `a` and `b` can be compared with `==` or `in`: the same type
/// (parameters included), numbers of any type (CEL's equality is heterogeneous for them),
/// `null` and `dyn` with anything, objects with objects and maps, abstract types with the
/// same abstract type.
pub(super) fn comparable(a: &Type, b: &Type) -> bool {
    use Type as T;
    match (a, b) {
        (a, b) if a.is_dyn() || b.is_dyn() => true,
        (T::Null, _) | (_, T::Null) => true,
        (a, b) if is_number(a) && is_number(b) => true,
        (T::List(a), T::List(b)) | (T::Optional(a), T::Optional(b)) => comparable(a, b),
        (T::Map(ka, va), T::Map(kb, vb)) => comparable(ka, kb) && comparable(va, vb),
        (T::Object(_), T::Object(_)) => true,
        (T::Object(_), T::Map(k, _)) | (T::Map(k, _), T::Object(_)) => comparable(k, &T::String),
        (T::Opaque(a, pa), T::Opaque(b, pb)) => {
            a == b && pa.len() == pb.len() && pa.iter().zip(pb).all(|(a, b)| comparable(a, b))
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
