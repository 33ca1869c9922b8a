//! The broker's health as `/readyz` reports it, and the metrics `/metrics` serves (see
//! [`crate::serve`] for the server).
//!
//! Readiness means "the broker is doing its job": a pack set is loaded, every watch the
//! controller registered has synced, and it is not shutting down. A failed reload while an
//! older pack set keeps running does not make the broker unready (it still reconciles with
//! the set it has, and taking it out of service would not fix the packs); the `packs` line
//! says so and `switchyard_pack_reload_success` is 0, which is what to alert on.
//!
//! `/readyz` prints one line per check, kube-apiserver style, then `readyz check passed` or
//! `readyz check failed`:
//!
//! ```text
//! [+]packs ok (2 packs: city-config 0.1.0, kcp-karmada 0.3.0)
//! [-]watch source/platform.edge-portal.eu/v1alpha1/FleetWorkload not synced
//! [+]shutdown ok
//! readyz check failed
//! ```
//!
//! Synced watches are summed up in one `[+]watches ok (N synced)` line unless every line is
//! asked for with `/readyz?verbose`, which also prints a failed reload's error in full.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use chrono::{DateTime, SecondsFormat, Utc};

use crate::metrics::Metrics;
use crate::packs::PackSet;
use crate::reachability::Reachability;

/// How many lines of a failed reload's error `/readyz?verbose` prints.
const ERROR_LINES: usize = 40;

/// The broker's health, shared by the controller (which updates it) and the server (which
/// reports it). Cheap to clone.
#[derive(Clone, Default)]
pub struct Health {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    state: Mutex<State>,
    metrics: Arc<Metrics>,
    /// Which clusters answer and what they refuse: reported, never failing readiness.
    reachability: OnceLock<Arc<Reachability>>,
}

#[derive(Default)]
struct State {
    /// (name, version) of the running packs; `None` until a pack set has loaded.
    packs: Option<Vec<(String, String)>>,
    /// The last reload, when it failed: when, and the error.
    reload_error: Option<(DateTime<Utc>, String)>,
    /// Watch key -> synced.
    watches: BTreeMap<String, bool>,
    /// Watch key -> why it cannot start (not served, forbidden), while it cannot.
    watch_failures: BTreeMap<String, String>,
    /// The members of roles whose members are found at run time, and what of their
    /// sources cannot be used: reported, never failing readiness.
    inventory: (Vec<String>, Vec<String>),
    /// The configuration file's last reload, when it failed: when, and why.
    config_error: Option<(DateTime<Utc>, String)>,
    /// With sharding: the number of shards and those this broker holds.
    shards: Option<(u32, Vec<u32>)>,
    shutting_down: bool,
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Health")
            .field("ready", &self.is_ready())
            .finish_non_exhaustive()
    }
}

impl Health {
    pub fn new() -> Self {
        Health::default()
    }

    /// A health whose metrics are `metrics` (shared with the controller and the clients).
    pub fn with_metrics(metrics: Arc<Metrics>) -> Self {
        Health {
            inner: Arc::new(Inner {
                metrics,
                ..Inner::default()
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data; keep serving it.
        self.inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A pack set loaded: it is now the one running, and the last reload succeeded.
    pub fn set_packs(&self, packs: Vec<(String, String)>) {
        self.metrics().set_packs(&packs);
        let mut state = self.state();
        state.packs = Some(packs);
        state.reload_error = None;
    }

    /// As [`Health::set_packs`], from the set itself.
    pub fn set_pack_set(&self, set: &PackSet) {
        self.set_packs(set.names());
    }

    /// A reload failed: the previous set (if any) keeps running.
    pub fn set_reload_error(&self, error: impl std::fmt::Display) {
        self.metrics().reload("failure");
        self.state().reload_error = Some((Utc::now(), error.to_string()));
    }

    /// Registers a watch (or updates it): readiness waits until every registered watch has
    /// synced. `key` names it in `/readyz` (`source/platform.edge-portal.eu/v1alpha1/FleetWorkload`).
    pub fn set_watch(&self, key: String, synced: bool) {
        let mut state = self.state();
        if synced {
            state.watch_failures.remove(&key);
        }
        state.watches.insert(key, synced);
        self.update_watch_metrics(&state);
    }

    /// A watch cannot start: why, for `/readyz` (until it syncs).
    pub fn set_watch_failed(&self, key: String, message: String) {
        let mut state = self.state();
        state.watches.insert(key.clone(), false);
        state.watch_failures.insert(key, message);
        self.update_watch_metrics(&state);
    }

    /// Where `/readyz` learns which clusters answer and what they forbid.
    pub fn set_reachability(&self, reachability: Arc<Reachability>) {
        let _ = self.inner.reachability.set(reachability);
    }

    /// Forgets a watch (its pack was unloaded).
    pub fn remove_watch(&self, key: &str) {
        let mut state = self.state();
        state.watches.remove(key);
        state.watch_failures.remove(key);
        self.update_watch_metrics(&state);
    }

    fn update_watch_metrics(&self, state: &State) {
        let synced = state.watches.values().filter(|s| **s).count();
        self.metrics().set_watches(synced, state.watches.len());
    }

    /// The live inventory of roles whose members are found at run time (one line per
    /// role), and what of their sources cannot be used.
    pub fn set_inventory(&self, lines: Vec<String>, problems: Vec<String>) {
        self.state().inventory = (lines, problems);
    }

    /// The configuration file's reload failed (`Some`) or succeeded (`None`); a failed one
    /// leaves the running configuration in place, and readiness as it is.
    pub fn set_config_error(&self, error: Option<String>) {
        self.state().config_error = error.map(|e| (Utc::now(), e));
    }

    /// The shards this broker holds, reported when there are several.
    pub fn set_shards(&self, count: u32, held: &std::collections::BTreeSet<u32>) {
        self.state().shards = (count > 1).then(|| (count, held.iter().copied().collect()));
    }

    /// The broker is stopping: it reports unready so traffic and leadership move on.
    pub fn set_shutting_down(&self) {
        self.state().shutting_down = true;
    }

    pub fn is_ready(&self) -> bool {
        self.readiness(false).0
    }

    /// Whether the broker is ready, and the `/readyz` body.
    pub fn readiness(&self, verbose: bool) -> (bool, String) {
        let state = self.state();
        let mut ready = true;
        let mut body = String::new();
        let failure = state.reload_error.as_ref().map(|(at, error)| {
            let first = error.lines().next().unwrap_or("");
            let more = error.lines().count().saturating_sub(1);
            let more = match (more, verbose) {
                (0, _) => String::new(),
                (n, false) => format!(" (+{n} lines: /readyz?verbose)"),
                (n, true) => format!(" (+{n} lines below)"),
            };
            (
                format!(
                    "reload failed at {}: {first}{more}",
                    at.to_rfc3339_opts(SecondsFormat::Secs, true)
                ),
                error,
            )
        });
        match (&state.packs, &failure) {
            (Some(packs), None) => {
                let _ = writeln!(body, "[+]packs ok ({})", pack_list(packs));
            }
            (Some(packs), Some((failure, _))) => {
                let _ = writeln!(
                    body,
                    "[+]packs ok ({}; {failure}; still running the previous packs)",
                    pack_list(packs)
                );
            }
            (None, None) => {
                ready = false;
                body.push_str("[-]packs not loaded yet\n");
            }
            (None, Some((failure, _))) => {
                ready = false;
                let _ = writeln!(body, "[-]packs not loaded: {failure}");
            }
        }
        if verbose && let Some((_, error)) = &failure {
            for line in error.lines().skip(1).take(ERROR_LINES) {
                let _ = writeln!(body, "    {line}");
            }
        }
        let synced = state.watches.values().filter(|s| **s).count();
        if verbose {
            for (key, is_synced) in &state.watches {
                if *is_synced {
                    let _ = writeln!(body, "[+]watch {key} synced");
                } else {
                    let _ = writeln!(body, "[-]watch {key} not synced");
                }
            }
        } else if synced == state.watches.len() {
            let _ = writeln!(body, "[+]watches ok ({synced} synced)");
        } else {
            for (key, _) in state.watches.iter().filter(|(_, s)| !**s) {
                match state.watch_failures.get(key) {
                    Some(why) => {
                        let _ = writeln!(body, "[-]watch {key} not synced: {why}");
                    }
                    None => {
                        let _ = writeln!(body, "[-]watch {key} not synced");
                    }
                }
            }
        }
        if synced < state.watches.len() {
            ready = false;
        }
        // An unreachable member or a forbidden call is reported, not failed: the broker still
        // does its job for every other cluster, and a restart (or a rollout that waits for
        // readiness) would not bring the cluster back.
        if let Some((at, error)) = &state.config_error {
            let _ = writeln!(
                body,
                "[!]configuration reload failed at {}: {}; the running configuration stays",
                at.to_rfc3339_opts(SecondsFormat::Secs, true),
                error.lines().next().unwrap_or_default()
            );
        }
        for line in &state.inventory.0 {
            let _ = writeln!(body, "[+]{line}");
        }
        // Holding no shard is no failure: the broker is a warm standby.
        if let Some((count, held)) = &state.shards {
            let list: Vec<String> = held.iter().map(ToString::to_string).collect();
            let _ = writeln!(
                body,
                "[+]shards: {} of {count} held{}",
                held.len(),
                if list.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", list.join(", "))
                }
            );
        }
        for line in &state.inventory.1 {
            let _ = writeln!(body, "[!]{line}");
        }
        if let Some(reachability) = self.inner.reachability.get() {
            for line in reachability.report() {
                let _ = writeln!(body, "[!]{line}");
            }
        }
        if state.shutting_down {
            ready = false;
            body.push_str("[-]shutdown: the broker is shutting down\n");
        } else {
            body.push_str("[+]shutdown ok\n");
        }
        body.push_str(if ready {
            "readyz check passed\n"
        } else {
            "readyz check failed\n"
        });
        (ready, body)
    }

    /// The metrics served at `/metrics`; the controller adds its own.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.inner.metrics
    }
}

fn pack_list(packs: &[(String, String)]) -> String {
    let names: Vec<String> = packs.iter().map(|(n, v)| format!("{n} {v}")).collect();
    match packs.len() {
        0 => "0 packs".to_string(),
        1 => format!("1 pack: {}", names.join(", ")),
        n => format!("{n} packs: {}", names.join(", ")),
    }
}
