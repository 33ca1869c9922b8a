//! The workers: each takes work from the queue, runs it, and puts it back on failure with
//! the backoff its kind of failure calls for. They work only while this broker holds a shard
//! (leads, without sharding; always, without leader election), and only on the work of the
//! shards it holds; losing a shard's lease stops the work of that shard at once (a prune,
//! which acts for every shard held, stops when any is lost), the item in hand returned to the
//! queue unfinished without sharding, dropped with it (the shard's next holder evaluates
//! every trigger of it anyway).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::controller::{CLEANUP_POLL, Controller, ReconcileError, Work};
use crate::failure::FailureKind;
use crate::queue::Queue;

/// Starts `count` workers; they end when the queue closes.
pub fn start(
    count: usize,
    queue: &Arc<Queue<Work>>,
    controller: &Arc<Controller>,
    held: &watch::Receiver<BTreeSet<u32>>,
) -> Vec<JoinHandle<()>> {
    // The last error of each work item: a failure that repeats is logged once, at warn,
    // and again only when the error changes.
    let last_errors: Arc<Mutex<HashMap<Work, String>>> = Arc::default();
    (0..count)
        .map(|_| {
            tokio::spawn(work(
                Arc::clone(queue),
                Arc::clone(controller),
                Arc::clone(&last_errors),
                held.clone(),
            ))
        })
        .collect()
}

async fn work(
    queue: Arc<Queue<Work>>,
    controller: Arc<Controller>,
    last_errors: Arc<Mutex<HashMap<Work, String>>>,
    mut held: watch::Receiver<BTreeSet<u32>>,
) {
    loop {
        if held.borrow().is_empty() && held.wait_for(|h| !h.is_empty()).await.is_err() {
            return;
        }
        let work = tokio::select! {
            next = queue.next() => match next {
                Some(work) => work,
                None => return,
            },
            _ = held.wait_for(BTreeSet::is_empty) => continue,
        };
        // The shards this item writes for: its trigger's, or (a prune) every one held now.
        let needed: BTreeSet<u32> = match &work {
            Work::Trigger(_, trigger) | Work::Release(_, trigger) => {
                BTreeSet::from([controller.shard_of(trigger)])
            }
            Work::Prune(_) => held.borrow().clone(),
        };
        if !needed.is_subset(&held.borrow()) {
            queue.done(&work);
            if controller.shard_count() <= 1 {
                queue.add(work);
            }
            continue;
        }
        let started = std::time::Instant::now();
        let result = tokio::select! {
            result = controller.process(&work) => result,
            // A shard's lease is lost: no further write for it; without sharding the item
            // goes back for the next leader.
            _ = held.wait_for(|h| !needed.is_subset(h)) => {
                queue.done(&work);
                if controller.shard_count() <= 1 {
                    queue.add(work);
                }
                continue;
            }
        };
        if let Work::Trigger(pack, _) = &work {
            let outcome = match &result {
                Ok(()) => "success",
                Err(ReconcileError::Pending(_)) => "requeue_after",
                Err(_) => "error",
            };
            controller
                .metrics()
                .reconciled(pack, outcome, started.elapsed());
        }
        let mut errors = last_errors.lock().unwrap_or_else(PoisonError::into_inner);
        match result {
            Ok(()) => {
                errors.remove(&work);
                queue.done(&work);
            }
            Err(ReconcileError::Pending(why)) => {
                tracing::debug!(%why, "waiting");
                queue.done(&work);
                queue.add_after(work, CLEANUP_POLL);
            }
            Err(e) => {
                controller.count_failure();
                let permanent =
                    matches!(&e, ReconcileError::Apply(a) if a.kind() == FailureKind::Permanent);
                let delay = queue.retry(&work, permanent);
                let message = e.to_string();
                if errors.get(&work) == Some(&message) {
                    tracing::debug!(work = ?work, error = %message, retry_in = ?delay, "work failed again; retrying");
                } else {
                    tracing::warn!(work = ?work, error = %message, retry_in = ?delay, "work failed; retrying");
                    errors.insert(work, message);
                }
            }
        }
    }
}
