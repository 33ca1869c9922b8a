//! What an edit of a template can change, trigger by trigger: the compiled structures before
//! and after the edit are compared, and each part that differs is kept with the conditions
//! of the blocks it lies in. A trigger for which none of those parts renders (every such part
//! sits in an `{{#if}}` whose condition does not hold for it) renders exactly as before, so
//! a reload need not evaluate it again.
//!
//! Only conditions that read nothing but `self` (the trigger) are evaluated: the rest of the
//! render context (variables, lookups, `forEach` items, tables) takes the whole evaluation to
//! know. A condition that reads anything else is left out of its part's conditions, which
//! makes the part count for more triggers, never fewer. Inside `#each`, `#with` and partials
//! with arguments the context changes: the block's own condition (that it renders at all)
//! still counts, the conditions within do not.

use std::sync::Arc;

use serde_json::Value;

use super::context::{Held, RenderContext};
use super::fill::Filler;
use super::structure::{BlockKind, BlockSite, CallHelper, Expr, Item, Node, Structure};

/// The root name whose paths a condition may read to be evaluated for a trigger alone.
const TRIGGER: &str = "self";

/// Which triggers an edit of templates can render differently: those for which one of its
/// changed parts renders. See the module's documentation.
#[derive(Debug, Clone, Default)]
pub struct TemplateEdit {
    /// Some change renders for every trigger (or could not be narrowed).
    everywhere: bool,
    /// Each changed part's conditions (all must hold for it to render).
    parts: Vec<Vec<Condition>>,
}

/// A block the changed part lies in, and which of its branches.
#[derive(Debug, Clone)]
struct Condition {
    site: Arc<BlockSite>,
    /// In the body (else the inverse).
    body: bool,
}

impl TemplateEdit {
    /// An edit that may change what every trigger renders.
    #[must_use]
    pub fn everywhere() -> Self {
        TemplateEdit {
            everywhere: true,
            parts: Vec::new(),
        }
    }

    /// Whether every trigger may render differently.
    #[must_use]
    pub fn is_everywhere(&self) -> bool {
        self.everywhere
    }

    /// Whether no trigger renders differently (the edit changed text the structure does not
    /// keep: comments, blank lines, a block's position).
    #[must_use]
    pub fn changes_nothing(&self) -> bool {
        !self.everywhere && self.parts.is_empty()
    }

    /// Both edits' changes.
    pub fn join(&mut self, other: TemplateEdit) {
        self.everywhere |= other.everywhere;
        if self.everywhere {
            self.parts.clear();
        } else {
            self.parts.extend(other.parts);
        }
    }

    /// Whether `trigger` may render differently after the edit: some changed part's
    /// conditions all hold for it (or cannot be evaluated).
    #[must_use]
    pub fn may_change(&self, trigger: &Value) -> bool {
        if self.everywhere {
            return true;
        }
        let mut context = RenderContext::default();
        context.set(TRIGGER, Held::Borrowed(trigger));
        let filler = Filler::new(&context, None);
        self.parts.iter().any(|conditions| {
            conditions.iter().all(|c| {
                filler
                    .takes_body(&c.site)
                    .map_or(true, |body| body == c.body)
            })
        })
    }

    /// A changed part inside `within`.
    fn part(&mut self, within: &[Condition]) {
        if within.is_empty() {
            self.everywhere = true;
            self.parts.clear();
        } else if !self.everywhere {
            self.parts.push(within.to_vec());
        }
    }

    /// Item `item` is there before the edit and not after, or after and not before.
    fn item(&mut self, item: &Item, within: &[Condition]) {
        match item {
            Item::Block {
                site,
                then,
                otherwise,
            } if then.is_empty() || otherwise.is_empty() => {
                // Only the branch that has entries renders anything.
                let body = !then.is_empty();
                let inner = nested(within, site, body);
                self.part(&inner);
            }
            _ => self.part(within),
        }
    }

    /// Items `old` became `new`: the entries both keep at their start and end are the same;
    /// what lies between changed, entry by entry where both have as many.
    fn items(&mut self, old: &[Item], new: &[Item], within: &[Condition]) {
        let start = old.iter().zip(new).take_while(|(a, b)| a == b).count();
        let (old, new) = (&old[start..], &new[start..]);
        let end = old
            .iter()
            .rev()
            .zip(new.iter().rev())
            .take_while(|(a, b)| a == b)
            .count();
        let (old, new) = (&old[..old.len() - end], &new[..new.len() - end]);
        if old.len() == new.len() {
            for (a, b) in old.iter().zip(new) {
                self.changed(a, b, within);
            }
        } else {
            for item in old.iter().chain(new) {
                self.item(item, within);
            }
        }
    }

    /// Item `old` became `new` (they differ).
    fn changed(&mut self, old: &Item, new: &Item, within: &[Condition]) {
        match (old, new) {
            (
                Item::Block {
                    site,
                    then: then_old,
                    otherwise: otherwise_old,
                },
                Item::Block {
                    site: site_new,
                    then: then_new,
                    otherwise: otherwise_new,
                },
            ) if site == site_new => {
                let changes_context = matches!(site.kind, BlockKind::Each | BlockKind::With);
                if then_old != then_new {
                    let inner = nested(within, site, true);
                    if changes_context {
                        self.part(&inner);
                    } else {
                        self.items(then_old, then_new, &inner);
                    }
                }
                if otherwise_old != otherwise_new {
                    self.items(otherwise_old, otherwise_new, &nested(within, site, false));
                }
            }
            (Item::Entry(key, value), Item::Entry(key_new, value_new)) if key == key_new => {
                self.node(value, value_new, within);
            }
            (Item::Value(value), Item::Value(value_new)) => self.node(value, value_new, within),
            // A partial with no arguments renders in the context it is called in.
            (
                Item::Partial { site, items },
                Item::Partial {
                    site: site_new,
                    items: items_new,
                },
            ) if site == site_new && site.param.is_none() && site.hash.is_empty() => {
                self.items(items, items_new, within);
            }
            _ => {
                self.item(old, within);
                self.item(new, within);
            }
        }
    }

    /// Node `old` became `new` (they may be the same).
    fn node(&mut self, old: &Node, new: &Node, within: &[Condition]) {
        if old == new {
            return;
        }
        match (old, new) {
            (
                Node::Map {
                    items,
                    blocks: blocks_old,
                },
                Node::Map {
                    items: items_new,
                    blocks,
                },
            )
            | (
                Node::Seq {
                    items,
                    blocks: blocks_old,
                },
                Node::Seq {
                    items: items_new,
                    blocks,
                },
            ) if blocks_old == blocks || (has_entry(items) && has_entry(items_new)) => {
                // Whether blocks make the entries only matters when they leave none: with
                // an entry of its own the collection is never empty.
                self.items(items, items_new, within);
            }
            _ => self.part(within),
        }
    }

    /// Structure `old` became `new`.
    pub(super) fn structure(&mut self, old: &Structure, new: &Structure) {
        if old.docs.len() != new.docs.len() {
            self.part(&[]);
            return;
        }
        for (a, b) in old.docs.iter().zip(&new.docs) {
            self.node(a, b, &[]);
        }
    }
}

/// `within`, and the branch `body` of block `site`, when its condition can be evaluated for
/// a trigger alone.
fn nested(within: &[Condition], site: &Arc<BlockSite>, body: bool) -> Vec<Condition> {
    let mut inner = within.to_vec();
    if site.params.iter().all(reads_trigger_only)
        && site.hash.iter().all(|(_, e)| reads_trigger_only(e))
    {
        inner.push(Condition {
            site: site.clone(),
            body,
        });
    }
    inner
}

/// Some entry of the collection is its own, not a block's.
fn has_entry(items: &[Item]) -> bool {
    items
        .iter()
        .any(|i| matches!(i, Item::Entry(..) | Item::Value(_)))
}

/// Whether `expr`, evaluated in the template's root context, reads nothing but `self`.
fn reads_trigger_only(expr: &Expr) -> bool {
    match expr {
        Expr::Literal(_) | Expr::Local { .. } => true,
        Expr::Path(path) => path.up == 0 && path.names.first().is_some_and(|n| &**n == TRIGGER),
        Expr::Call(call) => {
            !matches!(call.helper, CallHelper::Own { decides: true, .. })
                && call.params.iter().all(reads_trigger_only)
                && call.hash.iter().all(|(_, e)| reads_trigger_only(e))
        }
    }
}
