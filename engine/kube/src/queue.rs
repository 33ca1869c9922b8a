//! The work queue: deduplicated keys, never one key processed twice at once, exponential
//! backoff for failures, and a bound on concurrency set by the number of workers.
//!
//! The same contract as client-go's workqueue: a key added while it is queued is not added
//! again; a key added while a worker holds it is marked dirty and queued again when the worker
//! is done, so the newest state is always processed after the change that caused it.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;

/// Backoff for a key's failures: `base * 2^(failures-1)`, at most `max`.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: Duration::from_millis(200),
            max: Duration::from_secs(60),
        }
    }
}

impl Backoff {
    pub fn delay(&self, failures: u32) -> Duration {
        let exponent = failures.saturating_sub(1).min(20);
        self.base.saturating_mul(1u32 << exponent).min(self.max)
    }
}

struct State<K> {
    ready: VecDeque<K>,
    queued: HashSet<K>,
    running: HashSet<K>,
    dirty: HashSet<K>,
    failures: HashMap<K, u32>,
    closed: bool,
}

/// A work queue shared by the producers (watch events, timers) and the workers.
pub struct Queue<K> {
    state: Mutex<State<K>>,
    notify: Notify,
    backoff: Backoff,
}

impl<K: Clone + Eq + Hash + Send + Sync + 'static> Queue<K> {
    pub fn new(backoff: Backoff) -> Arc<Self> {
        Arc::new(Queue {
            state: Mutex::new(State {
                ready: VecDeque::new(),
                queued: HashSet::new(),
                running: HashSet::new(),
                dirty: HashSet::new(),
                failures: HashMap::new(),
                closed: false,
            }),
            notify: Notify::new(),
            backoff,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State<K>> {
        // A panicking worker must not wedge every other one: the state stays consistent
        // because every critical section is a few collection operations.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `key` unless it is queued already; a key being processed is queued again when
    /// its worker is done.
    pub fn add(&self, key: K) {
        let mut state = self.lock();
        if state.closed {
            return;
        }
        if state.running.contains(&key) {
            state.dirty.insert(key);
            return;
        }
        if state.queued.insert(key.clone()) {
            state.ready.push_back(key);
            drop(state);
            self.notify.notify_one();
        }
    }

    /// Queues `key` after `delay`.
    pub fn add_after(self: &Arc<Self>, key: K, delay: Duration) {
        let queue = Arc::clone(self);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            queue.add(key);
        });
    }

    /// The next key to work on, or `None` once the queue is closed and drained of ready work.
    pub async fn next(&self) -> Option<K> {
        loop {
            let notified = self.notify.notified();
            {
                let mut state = self.lock();
                if let Some(key) = state.ready.pop_front() {
                    state.queued.remove(&key);
                    state.running.insert(key.clone());
                    let more = !state.ready.is_empty();
                    drop(state);
                    if more {
                        // Pass the wake-up on: one notification may stand for several adds.
                        self.notify.notify_one();
                    }
                    return Some(key);
                }
                if state.closed {
                    return None;
                }
            }
            notified.await;
        }
    }

    /// The worker is done with `key`: it succeeded, so its failure count is reset.
    pub fn done(&self, key: &K) {
        let mut state = self.lock();
        state.failures.remove(key);
        self.finish(state, key);
    }

    /// The worker failed on `key`: it is queued again after its backoff.
    pub fn retry(self: &Arc<Self>, key: &K) -> Duration {
        let mut state = self.lock();
        let failures = state.failures.entry(key.clone()).or_insert(0);
        *failures += 1;
        let delay = self.backoff.delay(*failures);
        self.finish(state, key);
        self.add_after(key.clone(), delay);
        delay
    }

    fn finish(&self, mut state: MutexGuard<'_, State<K>>, key: &K) {
        state.running.remove(key);
        if state.dirty.remove(key) && !state.closed && state.queued.insert(key.clone()) {
            state.ready.push_back(key.clone());
            drop(state);
            self.notify.notify_one();
        }
    }

    /// Stops handing out work: workers finish what they hold and `next` returns `None`.
    pub fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.ready.clear();
        state.queued.clear();
        state.dirty.clear();
        drop(state);
        self.notify.notify_waiters();
    }

    /// Keys waiting or being processed.
    pub fn len(&self) -> usize {
        let state = self.lock();
        state.queued.len() + state.running.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn keys_are_deduplicated_and_dirty_keys_come_back() {
        let queue: Arc<Queue<&str>> = Queue::new(Backoff::default());
        queue.add("a");
        queue.add("b");
        queue.add("a");
        assert_eq!(queue.len(), 2);
        let first = queue.next().await.unwrap();
        assert_eq!(first, "a");
        // Added while running: not handed out twice at once, but queued again after done.
        queue.add("a");
        assert_eq!(queue.next().await.unwrap(), "b");
        queue.done(&"b");
        queue.done(&"a");
        assert_eq!(queue.next().await.unwrap(), "a");
        queue.done(&"a");
        assert!(queue.is_empty());
    }

    #[tokio::test]
    async fn failures_back_off_exponentially_and_reset_on_success() {
        let backoff = Backoff {
            base: Duration::from_millis(10),
            max: Duration::from_millis(35),
        };
        assert_eq!(backoff.delay(1), Duration::from_millis(10));
        assert_eq!(backoff.delay(2), Duration::from_millis(20));
        assert_eq!(backoff.delay(3), Duration::from_millis(35));
        assert_eq!(backoff.delay(40), Duration::from_millis(35));
        let queue: Arc<Queue<u32>> = Queue::new(backoff);
        queue.add(1);
        let key = queue.next().await.unwrap();
        assert_eq!(queue.retry(&key), Duration::from_millis(10));
        let key = queue.next().await.unwrap();
        assert_eq!(queue.retry(&key), Duration::from_millis(20));
        let key = queue.next().await.unwrap();
        queue.done(&key);
        queue.add(1);
        let key = queue.next().await.unwrap();
        assert_eq!(queue.retry(&key), Duration::from_millis(10));
    }

    #[tokio::test]
    async fn close_ends_the_workers() {
        let queue: Arc<Queue<u32>> = Queue::new(Backoff::default());
        let worker = {
            let queue = Arc::clone(&queue);
            tokio::spawn(async move { queue.next().await })
        };
        tokio::task::yield_now().await;
        queue.close();
        assert_eq!(worker.await.unwrap(), None);
        queue.add(3);
        assert!(queue.is_empty());
    }
}
