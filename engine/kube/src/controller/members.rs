//! Members that join and leave a role while the broker runs: the packs naming the role take
//! the new member set into their watch plans and evaluate every trigger again in a new
//! first round (prune held until each was), and triggers whose outputs were in a member
//! that is gone say so in their `Synced` condition.

use std::collections::{BTreeMap, BTreeSet};

use switchyard_core::object::split_cluster;
use switchyard_core::{ObjectKey, Outcome};

use super::index::{output_kinds, role_plan, watch_plan};
use super::state::{Controller, Scope};
use crate::store::KindKey;
use crate::watch::WatchMode;

/// The reason of `Synced` on a trigger whose outputs were in a member that is gone.
pub const REASON_MEMBER_GONE: &str = "MemberGone";

impl Controller {
    /// What the loaded packs need watched in `cluster` (`ROLE/NAME`), whether or not it is
    /// a live member yet: a member that joins is watched this way, and becomes live once
    /// every one of these watches has listed.
    pub fn member_watches(&self, cluster: &str) -> BTreeMap<KindKey, WatchMode> {
        let (role, _) = split_cluster(cluster);
        let state = self.lock();
        let mut needed: BTreeMap<KindKey, WatchMode> = BTreeMap::new();
        for p in state.packs.values() {
            for ((r, api_version, kind), mode) in role_plan(&p.pack) {
                if r != role {
                    continue;
                }
                let key = KindKey {
                    cluster: cluster.to_string(),
                    api_version,
                    kind,
                };
                if needed
                    .get(&key)
                    .is_none_or(|m| m.strength() < mode.strength())
                {
                    needed.insert(key, mode);
                }
            }
        }
        needed
    }

    /// A member of `role` became live or is gone (`gone`: the member and why): every pack
    /// naming the role watches the new member set and evaluates again, in a new first
    /// round, the triggers of its rules that read `clusters`, watch, look up (`allClusters`
    /// or by name) or write in the role, so nothing is pruned before each of them has seen
    /// the change; the other rules' triggers cannot see it and are not evaluated. A pack
    /// still waiting for its watches starts its round when they list, as it would.
    pub fn members_changed(&self, role: &str, joined: Option<&str>, gone: Option<(&str, &str)>) {
        let mut work = Vec::new();
        {
            let mut guard = self.lock();
            let state = &mut *guard;
            if let Some(joined) = joined {
                state.gone.remove(joined);
            }
            if let Some((cluster, why)) = gone {
                state.gone.insert(cluster.to_string(), why.to_string());
            }
            for (name, p) in state.packs.iter_mut() {
                if !p.pack.spec().clusters.iter().any(|c| c.name == role) {
                    continue;
                }
                p.kinds = watch_plan(&p.pack, &self.store);
                p.output_kinds = output_kinds(&p.pack, &self.store);
                if let Some(joined) = joined {
                    for members in p.gone.values_mut() {
                        members.remove(joined);
                    }
                    p.gone.retain(|_, members| !members.is_empty());
                }
                if let Some((cluster, _)) = gone {
                    // Patches there are not taken back: the member is written to no more.
                    p.patched.retain(|k, _| k.cluster != cluster);
                    for (trigger, desired) in &p.contributions {
                        if desired.iter().any(|d| d.key().cluster == cluster) {
                            p.gone
                                .entry(trigger.clone())
                                .or_default()
                                .insert(cluster.to_string());
                        }
                    }
                }
                // Only the rules a member change can affect (see
                // `Pack::rules_reading_members`); all of them, known triggers included,
                // when that is every rule.
                let affected = p.pack.rules_reading_members(role);
                let every = p.pack.rule_names().all(|r| affected.contains(r));
                let scope = if every {
                    Scope::All
                } else {
                    Scope::rules(&affected)
                };
                let triggers = p.begin_rounds(name, &self.store, &scope, &mut work);
                tracing::info!(pack = %name, %role, rules = affected.len(), triggers, "members changed; evaluating the triggers of the rules reading them");
            }
        }
        self.queue.add_all(work);
        // A pack that waited for a watch of the role as it was may have all it needs now.
        self.start_ready_packs();
    }

    /// The members that went while the broker ran and have not come back.
    pub fn gone_members(&self) -> BTreeSet<String> {
        self.lock().gone.keys().cloned().collect()
    }

    /// A trigger whose outputs were in members that are gone: its `Synced` (when it is
    /// `True`) says which, and that what is there was left in place.
    pub(super) fn note_gone_members(&self, pack: &str, trigger: &ObjectKey, outcome: &mut Outcome) {
        let message = {
            let state = self.lock();
            let Some(members) = state.packs.get(pack).and_then(|p| p.gone.get(trigger)) else {
                return;
            };
            members
                .iter()
                .map(|m| match state.gone.get(m) {
                    Some(why) => format!("cluster `{m}` is gone ({why})"),
                    None => format!("cluster `{m}` is gone"),
                })
                .collect::<Vec<_>>()
                .join("; ")
        };
        if message.is_empty() || !synced_true(outcome) {
            return;
        }
        outcome.set_synced(
            "True",
            REASON_MEMBER_GONE,
            &format!(
                "{message}: its outputs there are left as they were, unwatched, until it comes back"
            ),
        );
    }
}

fn synced_true(outcome: &Outcome) -> bool {
    outcome
        .synced()
        .is_some_and(|c| c.get("status").and_then(serde_json::Value::as_str) == Some("True"))
}
