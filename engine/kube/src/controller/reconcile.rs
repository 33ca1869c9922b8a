//! Evaluating one trigger and acting on the outcome: its contribution recorded, its
//! finalizer set, its outputs applied, its status written; a trigger that is gone or no
//! longer watched contributes nothing.

use std::collections::BTreeSet;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use chrono::Utc;
use serde_json::Value;
use switchyard_core::names::{REASON_ALREADY_EXISTS, REASON_CONFLICT};
use switchyard_core::object::World;
use switchyard_core::{ObjectKey, Outcome, Pack, Trigger, evaluate_untraced};

use super::state::{Controller, Initial, Key, ReconcileError, Work};
use super::status::has_finalizer;
use crate::failure::FailureKind;

/// How often a trigger whose output exists and is not the pack's looks at it again.
pub const NOT_OURS_POLL: Duration = Duration::from_secs(30);

impl Controller {
    /// Evaluates one trigger and makes its outputs, finalizer and status follow the outcome.
    pub(super) async fn reconcile(
        &self,
        pack_name: &Arc<str>,
        trigger: &Key,
    ) -> Result<(), ReconcileError> {
        // Nothing is evaluated, written or sent for a pack until every watch it needs has
        // listed: an evaluation on a cache that has not would see lookups missing (and
        // prune what depends on them). The pack's first round queues its triggers then.
        let (pack, round) = {
            let state = self.lock();
            let Some(p) = state.packs.get(pack_name) else {
                return Ok(());
            };
            // Nor for a trigger of a shard this broker does not hold (any more).
            let Some(round) = p.round_of(trigger) else {
                return Ok(());
            };
            if matches!(round.initial, Initial::Waiting(_)) {
                return Ok(());
            }
            (p.pack.clone(), round.round)
        };
        // The pack's own trigger (rules without `watch`) is no cluster's object.
        let object = match pack.pack_trigger() {
            Some((key, object)) if key == **trigger => Some(object),
            _ if pack.is_pack_trigger(trigger) => None,
            _ => {
                if !self.store.is_live(&trigger.cluster) {
                    // A trigger in a member that is gone keeps what it desired (the member
                    // may just be unreachable): its outputs are neither updated nor pruned
                    // until it is back.
                    let mut state = self.lock();
                    if let Some(p) = state.packs.get_mut(pack_name)
                        && p.mark_evaluated(trigger, round)
                    {
                        self.queue.add(Work::Prune(pack_name.clone()));
                    }
                    return Ok(());
                }
                self.store.get_key(trigger)
            }
        };
        let Some(object) = object else {
            // The trigger is gone: it desires nothing any more.
            self.swap_unwritten_synced(pack_name, trigger, None);
            let touched = {
                let mut state = self.lock();
                state.reads.record(pack_name, trigger, BTreeSet::new());
                let Some(p) = state.packs.get_mut(pack_name) else {
                    return Ok(());
                };
                p.unknown.remove(trigger);
                p.failing.remove(trigger);
                p.deleting.remove(trigger);
                p.gone.remove(trigger);
                let touched = p.set_contribution(trigger, Vec::new(), None);
                if p.mark_evaluated(trigger, round) || p.orphans_any(&touched) {
                    self.queue.add(Work::Prune(pack_name.clone()));
                }
                touched
            };
            let synced = self.sync_outputs(pack_name, &touched).await;
            self.restate_merged(pack_name, trigger);
            return synced;
        };

        {
            let mut counters = self.counters.lock().unwrap_or_else(PoisonError::into_inner);
            counters.totals.evaluations += 1;
            *counters.per_trigger.entry(trigger.clone()).or_default() += 1;
        }
        tracing::debug!(pack = %pack_name, trigger = %trigger, "evaluating");
        let (mut outcome, took) = match self.evaluate(&pack, trigger, &object).await {
            Ok(evaluated) => evaluated,
            Err(e) => {
                tracing::warn!(trigger = %trigger, error = %e, "object cannot be evaluated");
                return Ok(());
            }
        };
        self.count_evaluation(pack_name, &outcome, took);
        if outcome.rules.is_empty() {
            // No rule of this pack watches it (any more): like a trigger that is gone.
            let touched = {
                let mut state = self.lock();
                state.reads.record(pack_name, trigger, BTreeSet::new());
                match state.packs.get_mut(pack_name) {
                    Some(p) => {
                        p.failing.remove(trigger);
                        let touched = p.set_contribution(trigger, Vec::new(), None);
                        if p.mark_evaluated(trigger, round) || p.orphans_any(&touched) {
                            self.queue.add(Work::Prune(pack_name.clone()));
                        }
                        touched
                    }
                    None => BTreeSet::new(),
                }
            };
            let synced = self.sync_outputs(pack_name, &touched).await;
            self.restate_merged(pack_name, trigger);
            return synced;
        }
        {
            let mut state = self.lock();
            state
                .reads
                .record(pack_name, trigger, outcome.reads.clone());
        }
        if outcome.deleting {
            return self
                .finish_deletion(pack_name, &pack, trigger, &object, round)
                .await;
        }

        let failed = !outcome.errors.is_empty() || outcome.facts.stopped || synced_false(&outcome);
        let finalizer = outcome.finalizer.clone();
        // A stage waiting for its timeout: evaluate again at the deadline, with or without
        // any change (a second after, so the clock has passed it).
        if let Some(wait) = outcome.requeue_after {
            self.queue.add_after(
                Work::Trigger(pack_name.clone(), trigger.clone()),
                wait + Duration::from_secs(1),
            );
        }
        let (mut touched, unchanged) = {
            let mut state = self.lock();
            let Some(p) = state.packs.get_mut(pack_name) else {
                return Ok(());
            };
            if failed {
                // A failing trigger keeps what it had: never prune because evaluation failed.
                if !p.contributions.contains_key(trigger) {
                    p.unknown.insert(trigger.clone());
                }
                p.failing.insert(trigger.clone());
                (BTreeSet::new(), BTreeSet::new())
            } else {
                p.unknown.remove(trigger);
                p.failing.remove(trigger);
                let touched = p.set_contribution(
                    trigger,
                    std::mem::take(&mut outcome.desired),
                    Some(&outcome.facts.precedence),
                );
                if p.orphans_any(&touched) {
                    self.queue.add(Work::Prune(pack_name.clone()));
                }
                // Outputs desired as before: checked again so drift is corrected.
                let unchanged: BTreeSet<Key> = p
                    .contributions
                    .get(trigger)
                    .into_iter()
                    .flatten()
                    .map(|k| k.key().clone())
                    .filter(|k| !touched.contains(k))
                    .collect();
                (touched, unchanged)
            }
        };
        let desires_any = !touched.is_empty() || !unchanged.is_empty();
        touched.extend(self.maybe_stale(pack_name, unchanged));

        // The finalizer goes on before any output exists, so a delete can never skip cleanup.
        if let Some(f) = &finalizer
            && !has_finalizer(&object, f)
            && desires_any
        {
            let set = self
                .clusters
                .set_finalizer(pack_name, trigger, &object, f, true)
                .await;
            if let Err(e) = set {
                self.release_objects(pack_name, trigger);
                return Err(e.into());
            }
            self.count_finalizer(pack_name);
        }
        let applied = self.sync_outputs(pack_name, &touched).await;
        self.release_objects(pack_name, trigger);
        // The merge refused this trigger's version of an output: its status says so.
        let refused = {
            let state = self.lock();
            state
                .packs
                .get(pack_name)
                .map(|p| p.refused_versions(trigger))
                .unwrap_or_default()
        };
        if let Some(conflict) = refused.first() {
            outcome.set_synced("False", REASON_CONFLICT, &conflict.refused_message());
        }
        let applied = match applied {
            Err(ReconcileError::Apply(e)) => {
                if e.kind() == FailureKind::Infrastructure {
                    // The cluster did not answer: nothing the trigger's owner can act on, so
                    // no Event; the condition says it is not known whether it is synced.
                    outcome.set_synced("Unknown", &e.reason(), &e.message());
                } else {
                    outcome.set_synced("False", &e.reason(), &e.message());
                }
                Err(ReconcileError::Apply(e))
            }
            Err(ReconcileError::NotOurs(message)) => {
                outcome.set_synced("False", REASON_ALREADY_EXISTS, &message);
                // Not a failure to retry: the object is someone else's until it goes (which
                // a watch by label may not show), so look again now and then.
                self.queue.add_after(
                    Work::Trigger(pack_name.clone(), trigger.clone()),
                    NOT_OURS_POLL,
                );
                Ok(())
            }
            other => other,
        };
        self.restate_merged(pack_name, trigger);
        self.note_gone_members(pack_name, trigger, &mut outcome);
        if let Some(status) = &outcome.status {
            self.write_status(pack_name, trigger, &object, status, outcome.synced())
                .await?;
        }
        {
            let mut state = self.lock();
            if let Some(p) = state.packs.get_mut(pack_name)
                && p.mark_evaluated(trigger, round)
            {
                self.queue.add(Work::Prune(pack_name.clone()));
            }
        }
        applied
    }

    /// Evaluates the trigger on a blocking thread, with how long the evaluation took.
    /// Evaluation is CPU work: on the runtime's threads, thousands of them (a reload) would
    /// hold up the answers to the applies in flight, and with them every worker waiting on
    /// one; on the blocking threads they run in parallel while the runtime's threads keep
    /// the requests moving.
    async fn evaluate(
        &self,
        pack: &Arc<Pack>,
        trigger: &ObjectKey,
        object: &Arc<Value>,
    ) -> Result<(Outcome, Duration), String> {
        let pack = Arc::clone(pack);
        let store = Arc::clone(&self.store);
        let object = Arc::clone(object);
        let cluster = trigger.cluster.clone();
        let _permit = self
            .evaluations
            .acquire()
            .await
            .map_err(|e| format!("the evaluation stopped: {e}"))?;
        tokio::task::spawn_blocking(move || {
            let started = std::time::Instant::now();
            let outcome = evaluate_untraced(
                &pack,
                Trigger {
                    cluster: &cluster,
                    object: &object,
                },
                &*store,
                Utc::now(),
            )?;
            Ok((outcome, started.elapsed()))
        })
        .await
        .map_err(|e| format!("the evaluation stopped: {e}"))?
    }

    /// Releases what the trigger's contribution holds of its objects once they are written
    /// (see [`super::state::PackState::release_objects`]).
    fn release_objects(&self, pack_name: &Arc<str>, trigger: &ObjectKey) {
        if let Some(p) = self.lock().packs.get_mut(pack_name) {
            p.release_objects(trigger);
        }
    }

    /// Queues the triggers (other than `current`) that a merge made win or lose an output,
    /// so their `Synced` condition follows.
    pub(super) fn restate_merged(&self, pack_name: &Arc<str>, current: &ObjectKey) {
        let restate = {
            let mut state = self.lock();
            match state.packs.get_mut(pack_name) {
                Some(p) => std::mem::take(&mut p.restate),
                None => BTreeSet::new(),
            }
        };
        for trigger in restate.into_iter().filter(|t| **t != *current) {
            self.queue.add(Work::Trigger(pack_name.clone(), trigger));
        }
    }
}

fn synced_false(outcome: &Outcome) -> bool {
    outcome
        .synced()
        .is_some_and(|c| c.get("status").and_then(Value::as_str) == Some("False"))
}
