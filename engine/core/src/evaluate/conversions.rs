//! The CEL copies of the objects an evaluation reads: made once per round and shared by every
//! rule and trigger that reads them.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::Arc;

use serde_json::Value;
use switchyard_cel as cel;

/// Objects converted to CEL values once per evaluation round, shared by every rule and
/// trigger that reads them: a Fleet read by fifty FleetWorkloads is converted once.
///
/// Entries are keyed by the object's address and hold the `Arc` that owns it, so an
/// address cannot be reused while the cache lives; a trigger borrowed for `'w` is kept
/// alive by that borrow.
#[derive(Default)]
pub struct Conversions<'w> {
    converted: RefCell<foldhash::HashMap<usize, Converted>>,
    /// Values that depend only on looked-up objects (see `Expr::shared_by`), by what they
    /// were evaluated from, with their CEL cost.
    shared_values: RefCell<foldhash::HashMap<SharedKey, (cel::Value, u64)>>,
    /// Triggers are converted but not kept (see [`Conversions::forgetting_triggers`]).
    forget_triggers: bool,
    _objects: PhantomData<&'w Value>,
}

impl<'w> Conversions<'w> {
    /// A cache that does not keep the conversion of a trigger (objects read through
    /// lookups are kept as usual): for a round that evaluates each trigger once, where
    /// keeping them would hold a CEL copy of every watched object until the round ends. A
    /// trigger another trigger also looks up is then converted twice.
    #[must_use]
    pub fn forgetting_triggers() -> Self {
        Conversions {
            forget_triggers: true,
            ..Conversions::default()
        }
    }

    fn convert(&self, object: &Value, owner: Option<&Arc<Value>>) -> cel::Value {
        let key = std::ptr::from_ref(object) as usize;
        if let Some((_, value)) = self.converted.borrow().get(&key) {
            return value.clone();
        }
        let value = cel::Value::from_json(object);
        self.converted
            .borrow_mut()
            .insert(key, (owner.cloned(), value.clone()));
        value
    }

    /// A value evaluated for an earlier trigger from the same looked-up objects.
    pub(super) fn shared_value(&self, key: &SharedKey) -> Option<(cel::Value, u64)> {
        self.shared_values.borrow().get(key).cloned()
    }

    pub(super) fn share_value(&self, key: SharedKey, value: &cel::Value, cost: u64) {
        self.shared_values
            .borrow_mut()
            .insert(key, (value.clone(), cost));
    }

    /// How many objects were converted so far.
    pub fn len(&self) -> usize {
        self.converted.borrow().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many values are kept to share between triggers (see `Expr::shared_by`).
    pub fn shared_values(&self) -> usize {
        self.shared_values.borrow().len()
    }

    /// A trigger, borrowed for the whole round, converted as far as `needed` says its
    /// rules read it. Only a whole conversion is kept: an object looked up is read whole.
    pub(super) fn trigger(&self, object: &'w Value, needed: &cel::Needed) -> cel::Value {
        let key = std::ptr::from_ref(object) as usize;
        if let Some((_, value)) = self.converted.borrow().get(&key) {
            return value.clone();
        }
        if !matches!(needed, cel::Needed::Whole) {
            return cel::Value::from_json_needed(object, needed);
        }
        if self.forget_triggers {
            return cel::Value::from_json(object);
        }
        self.convert(object, None)
    }

    /// An object the world handed out.
    pub(super) fn shared(&self, object: &Arc<Value>) -> cel::Value {
        self.convert(object, Some(object))
    }
}

/// What a value shared between triggers was evaluated from: the pack (its generation), the
/// expression (its address in the pack) and the objects its lookups found (their addresses:
/// the cache keeps each object it converted alive, so no other object takes its address
/// while the value is kept; 0 for none).
#[derive(PartialEq, Eq, Hash)]
pub(super) struct SharedKey {
    pub(super) pack: u64,
    pub(super) expr: usize,
    pub(super) found: [usize; super::bindings::SHARED_LOOKUPS],
}

/// The owner of a converted object (none for a borrowed trigger) and its CEL value.
type Converted = (Option<Arc<Value>>, cel::Value);
