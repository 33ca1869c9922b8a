//! The data a template renders against ([`RenderContext`]): its root names, each borrowed,
//! shared or owned, and handlebars' copy of them for the text render, made when first needed.

use std::cell::{OnceCell, RefCell};
use std::sync::Arc;

use serde_json::Value;

/// The data a template renders against: the names of its root object (`self`, `vars`, …),
/// each borrowed, shared or owned, so that building it copies nothing large. The structural
/// render reads the names where they are; the text render (see [`TemplateSet::render_in`](super::TemplateSet::render_in))
/// builds handlebars' context from them once, when it is first needed, and keeps it up to
/// date.
pub struct RenderContext<'a> {
    pub(super) root: Root<'a>,
    pub(super) text: RefCell<Option<handlebars::Context>>,
}

pub(super) enum Root<'a> {
    Names(Vec<(String, Held<'a>)>),
    /// A whole value (any JSON), as [`TemplateSet::render`](super::TemplateSet::render) takes it.
    Whole(&'a Value),
}

/// A value of the context.
pub enum Held<'a> {
    Borrowed(&'a Value),
    Shared(Arc<Value>),
    Owned(Value),
    /// A map of CEL values (a rule's `vars`), each made JSON when a template first reads it.
    Cel(CelMap),
}

impl Held<'_> {
    pub(super) fn value(&self) -> &Value {
        match self {
            Held::Borrowed(v) => v,
            Held::Shared(v) => v,
            Held::Owned(v) => v,
            Held::Cel(map) => map.whole(),
        }
    }
}

/// A map of CEL values whose JSON is made on first read, member by member: a template reads
/// a few of a rule's variables, and converting all of them for every render cost more than
/// the render. A value with no JSON form reads as null.
pub struct CelMap {
    members: Vec<(Arc<str>, switchyard_cel::Value, OnceCell<Value>)>,
    whole: OnceCell<Value>,
}

impl CelMap {
    #[must_use]
    pub fn new(members: impl IntoIterator<Item = (Arc<str>, switchyard_cel::Value)>) -> Self {
        CelMap {
            members: members
                .into_iter()
                .map(|(name, value)| (name, value, OnceCell::new()))
                .collect(),
            whole: OnceCell::new(),
        }
    }

    fn json(value: &switchyard_cel::Value) -> Value {
        value.to_json().unwrap_or(Value::Null)
    }

    /// Member `name`'s JSON (the last one of that name).
    pub(super) fn member(&self, name: &str) -> Option<&Value> {
        self.members
            .iter()
            .rev()
            .find(|(n, ..)| switchyard_cel::same_str(n, name))
            .map(|(_, value, json)| json.get_or_init(|| Self::json(value)))
    }

    pub(super) fn whole(&self) -> &Value {
        self.whole.get_or_init(|| {
            Value::Object(
                self.members
                    .iter()
                    .map(|(n, value, json)| {
                        (
                            n.to_string(),
                            json.get().cloned().unwrap_or_else(|| Self::json(value)),
                        )
                    })
                    .collect(),
            )
        })
    }
}

impl Default for RenderContext<'_> {
    fn default() -> Self {
        RenderContext {
            root: Root::Names(Vec::new()),
            text: RefCell::new(None),
        }
    }
}

impl<'a> RenderContext<'a> {
    /// A context whose root object is `data` (any value, as handlebars takes it).
    #[must_use]
    pub fn of(data: &'a Value) -> Self {
        RenderContext {
            root: Root::Whole(data),
            text: RefCell::new(None),
        }
    }

    /// Sets a top-level name (`item`, `index`), replacing an earlier value.
    pub fn set(&mut self, name: &str, value: Held<'a>) {
        if let Some(text) = self.text.get_mut()
            && let Some(map) = text.data_mut().as_object_mut()
        {
            map.insert(name.to_owned(), value.value().clone());
        }
        match &mut self.root {
            Root::Names(names) => match names.iter_mut().find(|(n, _)| n == name) {
                Some(slot) => slot.1 = value,
                None => names.push((name.to_owned(), value)),
            },
            Root::Whole(_) => {
                let mut names = self.names_of_whole();
                names.push((name.to_owned(), value));
                self.root = Root::Names(names);
            }
        }
    }

    /// Removes a top-level name.
    pub fn unset(&mut self, name: &str) {
        if let Some(text) = self.text.get_mut()
            && let Some(map) = text.data_mut().as_object_mut()
        {
            map.remove(name);
        }
        if let Root::Whole(_) = self.root {
            self.root = Root::Names(self.names_of_whole());
        }
        if let Root::Names(names) = &mut self.root {
            names.retain(|(n, _)| n != name);
        }
    }

    fn names_of_whole(&self) -> Vec<(String, Held<'a>)> {
        match self.root {
            Root::Whole(Value::Object(map)) => map
                .iter()
                .map(|(k, v)| (k.clone(), Held::Borrowed(v)))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Whether the root is an object (as the names always make it).
    pub(super) fn root_is_object(&self) -> bool {
        matches!(self.root, Root::Names(_) | Root::Whole(Value::Object(_)))
    }

    /// The root as one value.
    pub(super) fn to_value(&self) -> Value {
        match &self.root {
            Root::Names(names) => Value::Object(
                names
                    .iter()
                    .map(|(n, v)| (n.clone(), v.value().clone()))
                    .collect(),
            ),
            Root::Whole(v) => (*v).clone(),
        }
    }
}
