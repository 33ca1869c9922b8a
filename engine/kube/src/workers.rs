//! The workers: each takes work from the queue, runs it, and puts it back on failure with
//! the backoff its kind of failure calls for. They work only while this broker leads (always,
//! without leader election); losing the lease stops them at once, the item in hand returned
//! to the queue unfinished.

use std::collections::HashMap;
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
    leading: &watch::Receiver<bool>,
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
                leading.clone(),
            ))
        })
        .collect()
}

async fn work(
    queue: Arc<Queue<Work>>,
    controller: Arc<Controller>,
    last_errors: Arc<Mutex<HashMap<Work, String>>>,
    mut leading: watch::Receiver<bool>,
) {
    loop {
        if !*leading.borrow() && leading.wait_for(|l| *l).await.is_err() {
            return;
        }
        let work = tokio::select! {
            next = queue.next() => match next {
                Some(work) => work,
                None => return,
            },
            _ = leading.wait_for(|l| !*l) => continue,
        };
        let started = std::time::Instant::now();
        let result = tokio::select! {
            result = controller.process(&work) => result,
            // The lease is lost: no further write; the item goes back for the next leader.
            _ = leading.wait_for(|l| !*l) => {
                queue.done(&work);
                queue.add(work);
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
