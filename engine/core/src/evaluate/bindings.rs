//! The names one rule evaluation binds (lookups, variables, names bound for a while such as
//! `stage`), held as one CEL activation and as JSON for templates.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;
use switchyard_cel as cel;

/// The most lookups a shared value may depend on.
pub(super) const SHARED_LOOKUPS: usize = 4;

/// The bindings of one rule evaluation, as CEL values and as JSON for templates.
///
/// The CEL side lives in one activation, kept up to date as names are bound, rather than
/// an activation built for every expression.
pub(super) struct Bindings<'e> {
    /// Each lookup's CEL value and JSON (shared with the templates' context).
    pub(super) lookups: BTreeMap<String, (cel::Value, Arc<Value>)>,
    /// The variables in order; their JSON is made when templates need it.
    pub(super) vars: Vec<(Arc<str>, cel::Value)>,
    pub(super) activation: cel::Activation<'e>,
    /// What the activation binds besides the rule's names (`self`, `vars`, ...), to restore
    /// one that an extra binding of the same name hid.
    pub(super) fixed: [(&'static str, cel::Value); 6],
    /// What each of the rule's lookups found, by identity (see [`Bindings::found`]), once
    /// it has run.
    found: Vec<Option<usize>>,
}

impl<'e> Bindings<'e> {
    /// Bindings for a rule of `vars` variables (the room the map `vars` is made with).
    pub(super) fn new(
        env: &'e cel::Env,
        fixed: [(&'static str, cel::Value); 6],
        vars: usize,
        lookups: usize,
    ) -> Self {
        let mut activation = cel::Activation::with_capacity(env, 12);
        for (name, value) in &fixed {
            activation.bind_borrowed(name, value.clone());
        }
        activation.bind_borrowed("vars", cel::Value::empty_map_with_capacity(vars));
        Bindings {
            lookups: BTreeMap::new(),
            vars: Vec::with_capacity(vars),
            activation,
            fixed,
            found: vec![None; lookups],
        }
    }

    /// Records what lookup `i` (found by name) bound: the address of the object it found,
    /// which the round's [`Conversions`](super::conversions::Conversions) keeps alive, or 0
    /// for none (null).
    pub(super) fn found(&mut self, i: usize, identity: usize) {
        if let Some(slot) = self.found.get_mut(i) {
            *slot = Some(identity);
        }
    }

    /// What the lookups `deps` found, when each has run: the key of a value shared by the
    /// triggers whose lookups found the same objects.
    pub(super) fn found_by(&self, deps: &[usize]) -> Option<[usize; SHARED_LOOKUPS]> {
        let mut key = [0; SHARED_LOOKUPS];
        if deps.len() > SHARED_LOOKUPS {
            return None;
        }
        for (slot, &i) in key.iter_mut().zip(deps) {
            *slot = (*self.found.get(i)?)?;
        }
        Some(key)
    }

    pub(super) fn add_var(&mut self, name: Arc<str>, value: cel::Value) {
        // In place: nothing else holds the map between expressions, so this does not copy
        // it (rebuilding it per variable made a rule's variables quadratic).
        if let Some(vars) = self.activation.get_mut("vars") {
            vars.insert_string_key(name.clone(), value.clone());
        }
        self.vars.push((name, value));
    }

    /// Binds a lookup's result (or a name bound for a while) under `name`.
    pub(super) fn bind_lookup(&mut self, name: String, binding: (cel::Value, Arc<Value>)) {
        self.activation.bind(&name, binding.0.clone());
        self.lookups.insert(name, binding);
    }

    /// Binds a name for a while (`stage`, `resources`): it reads like a lookup.
    pub(super) fn bind_extra(&mut self, name: &str, value: &Value) {
        self.bind_lookup(
            name.to_string(),
            (cel::Value::from_json(value), Arc::new(value.clone())),
        );
    }

    pub(super) fn unbind_extra(&mut self, name: &str) {
        self.lookups.remove(name);
        // A name the evaluation binds itself reads as it did before.
        match self.fixed.iter().find(|(n, _)| *n == name) {
            Some((n, value)) => self.activation.bind_borrowed(n, value.clone()),
            None if name == "vars" => self
                .activation
                .bind_borrowed("vars", cel::Value::string_map(&self.vars)),
            None => self.activation.unbind(name),
        }
    }
}
