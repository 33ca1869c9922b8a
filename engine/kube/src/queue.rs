//! The work queue: deduplicated keys, never one key processed twice at once, backoff for
//! failures (longer for requests the API server refuses outright), and a bound on
//! concurrency set by the number of workers.
//!
//! The same contract as client-go's workqueue: a key added while it is queued is not added
//! again; a key added while a worker holds it is marked dirty and queued again when the worker
//! is done, so the newest state is always processed after the change that caused it. Keys
//! waiting on a timer (a backoff, a deadline) are counted in [`Queue::len`], and the keys
//! waiting out a failure's backoff can be retried at once ([`Queue::retry_now`]) when what
//! blocked them is gone (a cluster answers again).

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

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
    /// For requests the API server refuses outright (400, 403, 422): retrying changes
    /// nothing until someone changes the pack, the object or the permissions.
    pub fn permanent() -> Self {
        Backoff {
            base: Duration::from_secs(5),
            max: Duration::from_secs(300),
        }
    }

    pub fn delay(&self, failures: u32) -> Duration {
        let exponent = failures.saturating_sub(1).min(20);
        self.base.saturating_mul(1u32 << exponent).min(self.max)
    }
}

/// What a queue reports as it works: client-go's workqueue metrics.
pub trait QueueObserver: Send + Sync {
    /// A key was added (queued, or marked to be queued again).
    fn added(&self);
    /// A worker took a key that waited `waited` since it was queued.
    fn started(&self, waited: Duration);
    /// A worker finished a key after `worked`.
    fn finished(&self, worked: Duration);
    /// A failed key was put back with a backoff.
    fn retried(&self);
}

/// A key waiting on a timer.
struct Waiting {
    token: u64,
    at: Instant,
    /// Waiting out a failure's backoff (flushed by [`Queue::retry_now`]).
    retry: bool,
}

struct State<K> {
    ready: VecDeque<K>,
    queued: HashSet<K>,
    running: HashSet<K>,
    dirty: HashSet<K>,
    failures: HashMap<K, u32>,
    waiting: HashMap<K, Waiting>,
    next_token: u64,
    closed: bool,
    /// When each queued key was queued, and each running key taken.
    queued_at: HashMap<K, Instant>,
    started_at: HashMap<K, Instant>,
}

/// A work queue shared by the producers (watch events, timers) and the workers.
pub struct Queue<K> {
    state: Mutex<State<K>>,
    notify: Notify,
    backoff: Backoff,
    permanent: Backoff,
    observer: Option<Arc<dyn QueueObserver>>,
}

impl<K: Clone + Eq + Hash + Send + Sync + 'static> Queue<K> {
    pub fn new(backoff: Backoff) -> Arc<Self> {
        Queue::with_backoffs(backoff, Backoff::permanent())
    }

    /// A queue with the backoff of failures that may pass (`backoff`) and of requests the
    /// API server refuses outright (`permanent`).
    pub fn with_backoffs(backoff: Backoff, permanent: Backoff) -> Arc<Self> {
        Queue::observed(backoff, permanent, None)
    }

    /// A queue that reports what it does to `observer` (metrics).
    pub fn observed(
        backoff: Backoff,
        permanent: Backoff,
        observer: Option<Arc<dyn QueueObserver>>,
    ) -> Arc<Self> {
        Arc::new(Queue {
            state: Mutex::new(State {
                ready: VecDeque::new(),
                queued: HashSet::new(),
                running: HashSet::new(),
                dirty: HashSet::new(),
                failures: HashMap::new(),
                waiting: HashMap::new(),
                next_token: 0,
                closed: false,
                queued_at: HashMap::new(),
                started_at: HashMap::new(),
            }),
            notify: Notify::new(),
            backoff,
            permanent,
            observer,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State<K>> {
        // A panicking worker must not wedge every other one: the state stays consistent
        // because every critical section is a few collection operations.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `key` unless it is queued already; a key being processed is queued again when
    /// its worker is done. A key waiting out a failure's backoff is processed now instead
    /// (something it may depend on changed).
    pub fn add(&self, key: K) {
        self.add_all(std::iter::once(key));
    }

    /// [`Queue::add`] for many keys at once, in order, under one lock and with one wake-up
    /// (each worker that takes a key wakes the next while work remains): a reload queues
    /// thousands of triggers without contending with the workers for every one.
    pub fn add_all(&self, keys: impl IntoIterator<Item = K>) {
        let mut state = self.lock();
        if state.closed {
            return;
        }
        let mut ready = false;
        for key in keys {
            if state.waiting.get(&key).is_some_and(|w| w.retry) {
                state.waiting.remove(&key);
            }
            if let Some(observer) = &self.observer {
                observer.added();
            }
            if state.running.contains(&key) {
                state.dirty.insert(key);
                continue;
            }
            if state.queued.insert(key.clone()) {
                state.queued_at.insert(key.clone(), Instant::now());
                state.ready.push_back(key);
                ready = true;
            }
        }
        drop(state);
        if ready {
            self.notify.notify_one();
        }
    }

    /// Queues `key` after `delay` (or sooner, if it already waits for an earlier time).
    pub fn add_after(self: &Arc<Self>, key: K, delay: Duration) {
        self.wait(key, delay, false);
    }

    fn wait(self: &Arc<Self>, key: K, delay: Duration, retry: bool) {
        let at = Instant::now() + delay;
        let token = {
            let mut state = self.lock();
            if state.closed {
                return;
            }
            if let Some(existing) = state.waiting.get(&key)
                && existing.at <= at
                && existing.retry == retry
            {
                return;
            }
            state.next_token += 1;
            let token = state.next_token;
            state
                .waiting
                .insert(key.clone(), Waiting { token, at, retry });
            token
        };
        let queue = Arc::clone(self);
        tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            let due = {
                let mut state = queue.lock();
                match state.waiting.get(&key) {
                    Some(w) if w.token == token => {
                        state.waiting.remove(&key);
                        true
                    }
                    _ => false,
                }
            };
            if due {
                queue.add(key);
            }
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
                    let now = Instant::now();
                    if let (Some(observer), Some(at)) =
                        (&self.observer, state.queued_at.remove(&key))
                    {
                        observer.started(now - at);
                    }
                    state.started_at.insert(key.clone(), now);
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

    /// The worker failed on `key`: it is queued again after its backoff, the longer one when
    /// the failure is `permanent`. Returns the delay.
    pub fn retry(self: &Arc<Self>, key: &K, permanent: bool) -> Duration {
        let mut state = self.lock();
        let failures = state.failures.entry(key.clone()).or_insert(0);
        *failures += 1;
        let backoff = if permanent {
            &self.permanent
        } else {
            &self.backoff
        };
        let delay = backoff.delay(*failures);
        if let Some(observer) = &self.observer {
            observer.retried();
        }
        self.finish(state, key);
        self.wait(key.clone(), delay, true);
        delay
    }

    /// Every key waiting out a failure's backoff is queued now (a cluster answers again);
    /// their failure counts stay, so a key that fails again backs off further.
    pub fn retry_now(&self) -> usize {
        let mut state = self.lock();
        let due: Vec<K> = state
            .waiting
            .iter()
            .filter(|(_, w)| w.retry)
            .map(|(k, _)| k.clone())
            .collect();
        for key in &due {
            state.waiting.remove(key);
        }
        drop(state);
        for key in &due {
            self.add(key.clone());
        }
        due.len()
    }

    fn finish(&self, mut state: MutexGuard<'_, State<K>>, key: &K) {
        state.running.remove(key);
        if let (Some(observer), Some(at)) = (&self.observer, state.started_at.remove(key)) {
            observer.finished(at.elapsed());
        }
        if state.dirty.remove(key) && !state.closed && state.queued.insert(key.clone()) {
            state.queued_at.insert(key.clone(), Instant::now());
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
        state.waiting.clear();
        state.queued_at.clear();
        drop(state);
        self.notify.notify_waiters();
    }

    /// Keys waiting or being processed, those waiting on a timer (a backoff, a deadline)
    /// included.
    pub fn len(&self) -> usize {
        let state = self.lock();
        let timed = state
            .waiting
            .keys()
            .filter(|k| !state.queued.contains(*k) && !state.running.contains(*k))
            .count();
        state.queued.len() + state.running.len() + timed
    }

    /// The work in progress: its total time so far and the longest single item's.
    pub fn in_progress(&self) -> (Duration, Duration) {
        let state = self.lock();
        let now = Instant::now();
        let ages = state.started_at.values().map(|at| now - *at);
        ages.fold((Duration::ZERO, Duration::ZERO), |(sum, max), age| {
            (sum + age, max.max(age))
        })
    }

    /// Keys waiting out a failure's backoff.
    pub fn backing_off(&self) -> usize {
        self.lock().waiting.values().filter(|w| w.retry).count()
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

    /// Many keys at once: in order, deduplicated, a running one marked dirty, and every
    /// worker waiting woken (one wake-up passed on from worker to worker).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn keys_added_at_once_keep_their_order_and_wake_every_worker() {
        let queue: Arc<Queue<u32>> = Queue::new(Backoff::default());
        queue.add(0);
        assert_eq!(queue.next().await, Some(0));
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let queue = Arc::clone(&queue);
                tokio::spawn(async move { queue.next().await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        queue.add_all([1, 2, 1, 0, 3, 4, 5]);
        let mut taken = Vec::new();
        for worker in workers {
            let key = tokio::time::timeout(Duration::from_secs(5), worker)
                .await
                .expect("a waiting worker was not woken")
                .unwrap()
                .unwrap();
            taken.push(key);
        }
        taken.sort_unstable();
        assert_eq!(taken, [1, 2, 3, 4]);
        assert_eq!(queue.next().await, Some(5));
        for key in [1, 2, 3, 4, 5] {
            queue.done(&key);
        }
        // 0 was running when added: it comes back once done.
        queue.done(&0);
        assert_eq!(queue.next().await, Some(0));
        queue.done(&0);
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
        assert_eq!(queue.retry(&key, false), Duration::from_millis(10));
        let key = queue.next().await.unwrap();
        assert_eq!(queue.retry(&key, false), Duration::from_millis(20));
        let key = queue.next().await.unwrap();
        queue.done(&key);
        queue.add(1);
        let key = queue.next().await.unwrap();
        assert_eq!(queue.retry(&key, false), Duration::from_millis(10));
    }

    #[tokio::test(start_paused = true)]
    async fn refused_requests_back_off_longer_and_backoff_counts_as_depth() {
        let queue: Arc<Queue<u32>> = Queue::new(Backoff::default());
        queue.add(1);
        let key = queue.next().await.unwrap();
        assert_eq!(queue.retry(&key, true), Duration::from_secs(5));
        // Waiting out its backoff, the key is still work to do.
        assert_eq!(queue.len(), 1);
        assert_eq!(queue.backing_off(), 1);
        assert_eq!(queue.next().await, Some(1));
        assert_eq!(queue.retry(&1, true), Duration::from_secs(10));
        queue.done(&1);
    }

    #[tokio::test(start_paused = true)]
    async fn retry_now_ends_every_backoff_but_not_deadlines() {
        let queue: Arc<Queue<u32>> = Queue::new(Backoff {
            base: Duration::from_secs(60),
            max: Duration::from_secs(60),
        });
        queue.add(1);
        let key = queue.next().await.unwrap();
        queue.retry(&key, false);
        queue.add_after(2, Duration::from_secs(3600));
        assert_eq!(queue.len(), 2);
        assert_eq!(queue.retry_now(), 1);
        let started = Instant::now();
        assert_eq!(queue.next().await, Some(1));
        assert!(started.elapsed() < Duration::from_secs(1));
        queue.done(&1);
        // The stale timer of the flushed backoff adds nothing later.
        tokio::time::sleep(Duration::from_secs(120)).await;
        assert_eq!(queue.len(), 1, "only the deadline of 2 waits");
    }

    #[tokio::test(start_paused = true)]
    async fn an_earlier_deadline_wins() {
        let queue: Arc<Queue<u32>> = Queue::new(Backoff::default());
        queue.add_after(7, Duration::from_secs(10));
        queue.add_after(7, Duration::from_secs(60));
        let started = Instant::now();
        assert_eq!(queue.next().await, Some(7));
        assert!(started.elapsed() < Duration::from_secs(11));
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
